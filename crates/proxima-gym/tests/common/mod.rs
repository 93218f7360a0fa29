//! What every test of the bridge needs first (shared with `proxima-cli/tests/bridge_training.rs`
//! and `bridge_cli.rs` through `#[path]`). Those tests are `#[ignore = "needs …"]`: a plain
//! `cargo test` lists them as ignored, and `cargo test -- --include-ignored` (what `.ci/run`
//! does, after installing the Python packages) runs them, failing where a package is missing.

/// The message of a test whose Python lacks what it needs.
#[allow(dead_code)] // not every test binary that includes this module uses both functions
pub fn missing(exe: &str, what: &str) -> String {
    format!(
        "{exe} cannot `import {what}`: this test needs it (set PROXIMA_PYTHON to a Python that has it; `.ci/run` installs it into .venv-ci)"
    )
}

/// Registers the bridge; panics when the Python it found has no gymnasium. `toy_envs_dir` is the
/// folder holding `toy_envs.py`, which the probed Python must be able to import.
#[allow(dead_code)]
pub fn setup(toy_envs_dir: &str) {
    std::env::set_var("PYTHONPATH", toy_envs_dir);
    proxima_gym::register();
    let exe = proxima_gym::python_executable();
    let ok = proxima_gym::probe_python(&exe).map(|i| i.has_gymnasium).unwrap_or(false);
    assert!(ok, "{}", missing(&exe, "gymnasium"));
}
