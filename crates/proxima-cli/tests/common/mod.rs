//! What the CLI's test files share: running the real binary, and a fresh temporary folder.

use std::path::PathBuf;
use std::process::Command;

/// Runs `proxima ARGS`: (exit code, stdout, stderr); fails the test if it panicked.
pub fn proxima(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_proxima")).args(args).output().expect("run proxima");
    let (so, se) = (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    assert!(!se.contains("panicked"), "proxima {args:?} panicked:\n{se}");
    (out.status.code().unwrap_or(-1), so, se)
}

/// A new, empty folder for one test (`proxima-<test file>-<pid>-<name>` in the temp dir).
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("proxima-{}-{}-{name}", env!("CARGO_CRATE_NAME"), std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
