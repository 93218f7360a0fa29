//! Invalid-action masks from Python envs, as sb3-contrib finds and reads them: an env's
//! `action_masks()` method, looked up through its wrappers (`get_wrapper_attr`, so
//! sb3-contrib's own `ActionMasker` wrapper works unchanged), and a Gymnasium vector env's
//! `call("action_masks")`. A mask is any array-like of booleans (True = valid), or of numbers
//! that are all 0 or 1, with one entry per action (`MultiDiscrete`: the components' masks side
//! by side, any shape of that size).

use crate::py_err;
use proxima_env::{EnvError, Result};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The env's `action_masks` method, found as sb3-contrib's `is_masking_supported` finds it:
/// through Gymnasium's wrappers (`get_wrapper_attr`), else as a plain attribute; `None` when the
/// env has none (or it is not callable).
pub(crate) fn find_action_masks(env: &Bound<'_, PyAny>) -> Option<Py<PyAny>> {
    let method =
        env.call_method1("get_wrapper_attr", ("action_masks",)).or_else(|_| env.getattr("action_masks")).ok()?;
    method.is_callable().then(|| method.unbind())
}

/// Whether a Gymnasium vector env's envs have `action_masks()`, asked without calling into its
/// workers (an `AttributeError` inside an `AsyncVectorEnv` worker shuts the worker down): a
/// vector env that answers `has_action_masks()` (the Python package's adapters of SB3 VecEnvs),
/// a `SyncVectorEnv`'s first env, or a fresh env from an `AsyncVectorEnv`'s first factory
/// (closed again); `false` for a vector env that is none of these.
pub(crate) fn vector_env_has_action_masks(py: Python<'_>, venv: &Bound<'_, PyAny>) -> bool {
    // The Python package's adapters (an SB3 VecEnv, a next-step Gymnasium vector env) say so.
    if let Ok(has) = venv.call_method0("has_action_masks").and_then(|h| h.is_truthy()) {
        return has;
    }
    if let Ok(first) = venv.getattr("envs").and_then(|e| e.get_item(0)) {
        return find_action_masks(&first).is_some();
    }
    let Ok(env) = venv.getattr("env_fns").and_then(|f| f.get_item(0)).and_then(|f| f.call0()) else {
        return false;
    };
    let has = find_action_masks(&env).is_some();
    if env.call_method0("close").is_err() {
        PyErr::take(py);
    }
    has
}

/// Reads the masks `masks` (what `action_masks()` returned: `expected` entries in all) into `out`
/// (`expected` long), 1 = valid.
///
/// # Errors
/// `InvalidArgument` naming the env `id` for a mask of another size, of a dtype that is not
/// boolean-like (strings, objects, numbers other than 0 and 1) or that NumPy cannot read.
pub(crate) fn read_masks(
    py: Python<'_>,
    np: &Bound<'_, PyModule>,
    masks: &Bound<'_, PyAny>,
    id: &str,
    out: &mut [bool],
) -> Result<()> {
    let bad = |why: String| EnvError::InvalidArgument(format!("{id}.action_masks() returned {why}"));
    if masks.is_none() {
        return Err(bad("None; it must return one boolean per action (True = valid)".into()));
    }
    let arr =
        np.call_method1("asarray", (masks,)).map_err(|e| bad(format!("what NumPy cannot read: {}", py_err(py, e))))?;
    let size: usize = arr.getattr("size").and_then(|s| s.extract()).map_err(|e| bad(py_err(py, e)))?;
    let shape: Vec<usize> = arr.getattr("shape").and_then(|s| s.extract()).unwrap_or_default();
    let dtype = arr.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
    if size != out.len() {
        return Err(bad(format!(
            "a mask of shape {shape:?} ({size} values); expected {} (one per action, True = valid)",
            out.len()
        )));
    }
    let kind: String =
        arr.getattr("dtype").and_then(|d| d.getattr("kind")).and_then(|k| k.extract()).unwrap_or_default();
    let zero_one = || -> PyResult<bool> {
        let eq = |v: i32| arr.call_method1("__eq__", (v,));
        np.call_method1("logical_or", (eq(0)?, eq(1)?))?.call_method0("all")?.is_truthy()
    };
    let boolean_like = match kind.as_str() {
        "b" => true,
        "i" | "u" | "f" => zero_one().map_err(|e| bad(py_err(py, e)))?,
        _ => false,
    };
    if !boolean_like {
        return Err(bad(format!(
            "a mask of dtype {dtype}; a mask is boolean (True = valid), or numbers that are all 0 or 1"
        )));
    }
    let bytes = arr
        .call_method1("astype", ("bool",))
        .and_then(|a| a.call_method0("tobytes"))
        .map_err(|e| bad(py_err(py, e)))?;
    let bytes = bytes.cast::<PyBytes>().map_err(|e| EnvError::Env(e.to_string()))?;
    for (o, &b) in out.iter_mut().zip(bytes.as_bytes()) {
        *o = b != 0;
    }
    Ok(())
}
