//! What every test of the bridge needs first (shared with `proxima-cli/tests/bridge_training.rs`
//! through `#[path]`).

/// Registers the bridge; false (test skipped, with a note) when no Python with gymnasium is
/// available, unless `PROXIMA_REQUIRE_GYM=1` (CI) makes that a failure. `toy_envs_dir` is the
/// folder holding `toy_envs.py`, which the probed Python must be able to import.
pub fn setup(toy_envs_dir: &str) -> bool {
    std::env::set_var("PYTHONPATH", toy_envs_dir);
    proxima_gym::register();
    let exe = proxima_gym::python_executable();
    let ok = proxima_gym::probe_python(&exe).map(|i| i.has_gymnasium).unwrap_or(false);
    if !ok {
        assert!(std::env::var("PROXIMA_REQUIRE_GYM").is_err(), "PROXIMA_REQUIRE_GYM is set but {exe} has no gymnasium");
        eprintln!("SKIPPED: {exe} has no gymnasium (set PROXIMA_PYTHON to a Python that has it)");
    }
    ok
}
