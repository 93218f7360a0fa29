"""``python/proxima/_proxima.pyi`` against the compiled ``proxima._proxima``: the same public names,
each class's methods and properties, and each function's parameters (names, order, kind, which have
defaults) as the extension's ``__text_signature__`` gives them. A stub that drifts fails here."""

from __future__ import annotations

import ast
import inspect
import os

import pytest

from proxima import _proxima

STUB = os.path.join(os.path.dirname(_proxima.__file__), "_proxima.pyi")


def _stub_tree() -> ast.Module:
    with open(STUB, encoding="utf-8") as f:
        return ast.parse(f.read())


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__version__"


def _stub_module() -> dict[str, ast.AST]:
    """The stub's public module-level names (``_Private`` ones are stub-only type aliases)."""
    names: dict[str, ast.AST] = {}
    for node in _stub_tree().body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            names.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
    return {k: v for k, v in names.items() if _public(k)}


def _runtime_module() -> set[str]:
    return {n for n in vars(_proxima) if _public(n) and not inspect.ismodule(getattr(_proxima, n))}


def _stub_params(fn: ast.FunctionDef) -> list[tuple[str, str, bool]]:
    """``(name, kind, has_default)`` of each parameter but ``self``."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    out = [(p.arg, "positional" if i < len(a.posonlyargs) else "either", d)
           for i, (p, d) in enumerate(zip(positional, defaults))]
    out += [(p.arg, "keyword", d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.vararg:
        out.append((a.vararg.arg, "var_positional", False))
    if a.kwarg:
        out.append((a.kwarg.arg, "var_keyword", False))
    return [p for p in out if p[0] not in ("self", "cls")]


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "either",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


def _runtime_params(fn: object) -> list[tuple[str, str, bool]]:
    text = getattr(fn, "__text_signature__", None)
    assert text, f"{fn!r} has no __text_signature__: give it #[pyo3(signature = (...))]"
    sig = inspect.signature(fn)
    return [(p.name, _KINDS[p.kind], p.default is not inspect.Parameter.empty)
            for p in sig.parameters.values() if p.name not in ("self", "cls", "$self", "$cls")]


def _decorators(fn: ast.FunctionDef) -> set[str]:
    return {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}


def test_the_stub_has_the_modules_public_names_and_no_others():
    stub, runtime = set(_stub_module()), _runtime_module()
    assert stub == runtime, f"only in the extension: {sorted(runtime - stub)}; only in the stub: {sorted(stub - runtime)}"


def _classes() -> list[str]:
    return sorted(n for n in _runtime_module() if inspect.isclass(getattr(_proxima, n)))


@pytest.mark.parametrize("cls_name", _classes())
def test_each_class_has_the_stubs_methods_and_properties(cls_name):
    cls = getattr(_proxima, cls_name)
    stub_cls = _stub_module()[cls_name]
    assert isinstance(stub_cls, ast.ClassDef)
    stub_members = {n.name: n for n in stub_cls.body if isinstance(n, ast.FunctionDef) and _public(n.name)}
    runtime_members = {n for n in vars(cls) if not n.startswith("_")}
    assert set(stub_members) == runtime_members, (
        f"{cls_name}: only in the extension: {sorted(runtime_members - set(stub_members))}; "
        f"only in the stub: {sorted(set(stub_members) - runtime_members)}"
    )
    for name, node in stub_members.items():
        raw = inspect.getattr_static(cls, name)
        is_property = inspect.isdatadescriptor(raw) and not callable(raw)
        assert ("property" in _decorators(node)) == is_property, f"{cls_name}.{name}: a property in one, not the other"
        assert ("staticmethod" in _decorators(node)) == isinstance(raw, staticmethod), (
            f"{cls_name}.{name}: a staticmethod in one, not the other"
        )


def _functions() -> list[tuple[str, str]]:
    """``(class, method)`` of every callable the extension has (``""`` for module-level functions)."""
    out = [("", n) for n in _runtime_module() if inspect.isbuiltin(getattr(_proxima, n))]
    for cls_name in _classes():
        cls = getattr(_proxima, cls_name)
        out += [(cls_name, n) for n in vars(cls) if not n.startswith("_") and callable(getattr(cls, n))]
    return sorted(out)


@pytest.mark.parametrize("cls_name,name", _functions())
def test_each_functions_parameters_match_its_text_signature(cls_name, name):
    runtime = getattr(getattr(_proxima, cls_name), name) if cls_name else getattr(_proxima, name)
    scope = _stub_module()[cls_name].body if cls_name else _stub_tree().body  # type: ignore[union-attr]
    node = next((n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert node is not None, f"{cls_name}.{name} is not in the stub"
    assert _stub_params(node) == _runtime_params(runtime), (
        f"{cls_name}.{name}: stub {_stub_params(node)} != extension {_runtime_params(runtime)} "
        f"({runtime.__text_signature__})"
    )


def test_the_check_sees_every_method():
    """The parametrisation above is not empty: it found the model's methods."""
    found = {n for c, n in _functions() if c == "Model"}
    assert {"create", "load", "learn", "predict", "save", "get_parameters", "set_parameters"} <= found
