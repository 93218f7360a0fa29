//! `proxima lm grpo --model DIR --dataset FILE.jsonl --reward MODULE:FUNCTION` end to end: GRPO
//! on a tiny Hugging Face model made with `transformers`, rewarded by a Python function; a run
//! stopped by SIGINT and continued with `proxima lm resume` ends bit for bit as an uninterrupted
//! one; bad inputs are clear errors (a reward's traceback shown). Built only with `--features
//! gym` (the embedded Python), and ignored unless run with `--include-ignored` (it needs a Python
//! with torch and transformers: PROXIMA_PYTHON; `.ci/run` runs it).

#[cfg(feature = "gym")]
mod with_python {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output, Stdio};
    use std::time::{Duration, Instant};

    const BIN: &str = env!("CARGO_BIN_EXE_proxima");
    const FILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/lm_hf");

    /// A scratch directory holding `model/`, `data.jsonl` and `rewards.py`.
    fn setup(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("proxima-lm-hf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let py = proxima_gym::python_executable();
        let out = Command::new(&py).arg(format!("{FILES}/make_model.py")).arg(dir.join("model")).output().unwrap();
        assert!(out.status.success(), "{py} make_model.py: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::copy(format!("{FILES}/rewards.py"), dir.join("rewards.py")).unwrap();
        let rows = ["abc", "hij", "dd"].map(|p| format!("{{\"prompt\": \"{p}\", \"target\": \"e\"}}\n")).concat();
        std::fs::write(dir.join("data.jsonl"), rows).unwrap();
        dir
    }

    fn grpo(dir: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.current_dir(dir).args(["lm", "grpo", "--quiet"]);
        for (flag, default) in [("--model", "model"), ("--dataset", "data.jsonl")] {
            if !extra.contains(&flag) {
                c.args([flag, default]);
            }
        }
        for s in [
            "num_generations=4",
            "per_device_train_batch_size=8",
            "max_completion_length=6",
            "learning_rate=0.03",
            "seed=1",
        ] {
            c.args(["--set", s]);
        }
        c.args(extra);
        c
    }

    fn text(o: &Output) -> String {
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    }

    #[test]
    #[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
    fn grpo_on_a_hugging_face_model_resumes_exactly_after_sigint() {
        let dir = setup("resume");
        let steps = ["--set", "max_steps=400", "--save-steps", "5", "--reward", "rewards:fraction"];
        let whole = grpo(&dir, &steps).args(["--run-dir", "whole"]).output().unwrap();
        assert!(whole.status.success(), "{}", text(&whole));
        let log = |run: &str| std::fs::read_to_string(dir.join(run).join("progress.jsonl")).unwrap();
        let rows: Vec<serde_json::Value> = log("whole").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(rows.len(), 400);
        let reward = |i: usize| rows[i]["rewards/fraction/mean"].as_f64().unwrap();
        assert!(reward(0) < 0.3 && reward(399) > 0.6, "reward {} -> {}", reward(0), reward(399));
        let child = grpo(&dir, &steps).args(["--run-dir", "stopped"]).stderr(Stdio::piped()).spawn().unwrap();
        let first = dir.join("stopped/checkpoints/step_000005.safetensors");
        let t = Instant::now();
        while !first.exists() && t.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        unsafe { libc_kill(child.id() as i32, 2) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(130), "{}", text(&out));
        assert!(text(&out).contains("continue with: proxima lm resume"), "{}", text(&out));
        assert!(!dir.join("stopped/model").exists(), "stopped before the end");
        // Resumed from another directory: the reward module is imported from where the run started.
        let resumed = Command::new(BIN)
            .current_dir(std::env::temp_dir())
            .args(["lm", "resume", "--quiet"])
            .arg(dir.join("stopped"))
            .output()
            .unwrap();
        assert!(resumed.status.success(), "{}", text(&resumed));
        assert_eq!(log("stopped"), log("whole"));
        let weights = |run: &str| std::fs::read(dir.join(run).join("model/model.safetensors")).unwrap();
        assert!(weights("stopped") == weights("whole"), "the resumed run's weights differ");
        let again = Command::new(BIN).current_dir(&dir).args(["lm", "resume", "stopped"]).output().unwrap();
        assert!(text(&again).contains("is complete"), "{}", text(&again));
        let ck = ["lm", "eval", "stopped/checkpoints/step_000400.safetensors"];
        for cmd in [&["lm", "eval", "stopped"][..], &["eval", "stopped"], &ck] {
            let out = Command::new(BIN).current_dir(&dir).args(cmd).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{cmd:?}: {}", text(&out));
            assert!(
                text(&out).contains("its trained model is stopped/model, a Hugging Face directory"),
                "{}",
                text(&out)
            );
        }
        // A run whose dataset changed since is not continued (its prompt order would point past it).
        let child = grpo(&dir, &steps).args(["--run-dir", "changed"]).stderr(Stdio::piped()).spawn().unwrap();
        let first = dir.join("changed/checkpoints/step_000005.safetensors");
        let t = Instant::now();
        while !first.exists() && t.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        unsafe { libc_kill(child.id() as i32, 2) };
        assert_eq!(child.wait_with_output().unwrap().status.code(), Some(130));
        std::fs::write(dir.join("data.jsonl"), "{\"prompt\": \"abc\", \"target\": \"e\"}\n").unwrap();
        let other = Command::new(BIN)
            .current_dir(std::env::temp_dir())
            .args(["lm", "resume"])
            .arg(dir.join("changed"))
            .output()
            .unwrap();
        assert_eq!(other.status.code(), Some(1), "{}", text(&other));
        assert!(
            text(&other).contains("the dataset or the settings this run started from differ now"),
            "{}",
            text(&other)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    extern "C" {
        #[link_name = "kill"]
        fn libc_kill(pid: i32, sig: i32) -> i32;
    }

    #[test]
    #[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
    fn bad_inputs_are_clear_errors() {
        let dir = setup("bad");
        std::fs::write(dir.join("long.jsonl"), format!("{{\"prompt\": \"{}\"}}\n", "abcdefghij".repeat(4))).unwrap();
        std::fs::write(dir.join("bad.jsonl"), "{\"prompt\": \"ab\"}\nnot json\n").unwrap();
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        let cases: &[(&[&str], &str)] = &[
            (&["--reward", "rewards:boom"], "ValueError: boom from the reward"),
            (&["--reward", "rewards:boom"], "rewards.py\", line"),
            (&["--reward", "rewards:short"], "reward function `short` returned 1 rewards for 8 completions"),
            (&["--reward", "rewards:nope"], "module `rewards` has no `nope`"),
            (&["--reward", "no_such_module:f"], "No module named 'no_such_module'"),
            (&["--reward", "rewards"], "expected MODULE:FUNCTION"),
            (&["--reward", "rewards:fraction", "--set", "nosuch=1"], "not a GRPOConfig field Proxima reads"),
            (&["--reward", "rewards:fraction", "--set", "learning_rate=fast"], "--set learning_rate=fast"),
            (&["--reward", "rewards:fraction", "--dataset", "long.jsonl"], "exceed the model's 32 positions"),
            (&["--reward", "rewards:fraction", "--dataset", "bad.jsonl"], "line 2 is not JSON"),
            (&["--reward", "rewards:fraction", "--model", "empty"], "config.json"),
            (&["--reward", "rewards:fraction", "--model", "nowhere"], "--model nowhere: not a directory"),
        ];
        for (k, (args, want)) in cases.iter().enumerate() {
            let out = grpo(&dir, args).args(["--run-dir", &format!("run{k}")]).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
            assert!(text(&out).contains(want), "{args:?}: wanted {want:?} in {}", text(&out));
            assert!(!text(&out).contains("panicked"), "{args:?}: {}", text(&out));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
