//! An ALE game id when ale-py is not installed: a clear error with the `pip install` to run.
//! Its own test binary (one embedded interpreter per process): a shim first on `sys.path`
//! makes `import ale_py` fail as it does where the package is missing, whatever the Python has.
//! Needs a Python with gymnasium (`PROXIMA_PYTHON` or `python3`): ignored by a plain `cargo test`,
//! run by `cargo test -- --include-ignored` (as `.ci/run` does), where it fails without it.

use std::process::Command;

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn an_atari_game_without_ale_py_names_the_pip_install() {
    let py = std::env::var("PROXIMA_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_gym = Command::new(&py).args(["-c", "import gymnasium"]).output().map(|o| o.status.success());
    assert!(has_gym.is_ok_and(|ok| ok), "{py} cannot `import gymnasium`: this test needs it (set PROXIMA_PYTHON)");
    let shim = std::env::temp_dir().join(format!("proxima-no-ale-{}", std::process::id()));
    std::fs::create_dir_all(shim.join("ale_py")).unwrap();
    let missing = "raise ModuleNotFoundError(\"No module named 'ale_py'\", name='ale_py')\n";
    std::fs::write(shim.join("ale_py/__init__.py"), missing).unwrap();
    std::env::set_var("PYTHONPATH", &shim);
    let e = proxima_gym::AleGame::make("ALE/Breakout-v5", 0.0).err().expect("no ale-py: an error").to_string();
    assert!(e.contains("needs ale-py") && e.contains("-m pip install ale-py"), "{e}");
    assert!(e.contains("No module named 'ale_py'"), "the Python error is kept: {e}");
    let e = proxima_gym::AleGame::make("ALE/Breakout-v5", 1.5).err().unwrap().to_string();
    assert!(e.contains("repeat_action_probability = 1.5"), "{e}");
    std::fs::remove_dir_all(&shim).ok();
}
