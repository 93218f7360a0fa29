//! The `proxima` binary on bridged envs: Ctrl-C saves and exits 130 for every `vector_env` —
//! the embedded Python must not turn the signal into a `KeyboardInterrupt` inside the env's
//! code — and the subprocess workers of `subproc` end with the run; `atari:` games stepped in
//! worker processes of the binary itself train the same weights as in the training process. Built only with
//! `--features gym` (without it this file holds no test), and the test needs a Python with
//! gymnasium, so it is ignored unless run with `--include-ignored`: `.ci/run` runs
//! `cargo test --features proxima-cli/gym,… --test bridge_cli -- --include-ignored`.

#[cfg(feature = "gym")]
#[path = "../../proxima-gym/tests/common/mod.rs"]
mod common;

#[cfg(feature = "gym")]
mod with_gym {
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const BIN: &str = env!("CARGO_BIN_EXE_proxima");

    fn rows(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("progress.csv")).map_or(0, |t| t.lines().count().saturating_sub(1))
    }

    /// The worker processes whose command line names `dir` (none once the run has ended).
    fn workers_of(dir: &Path) -> usize {
        let out = Command::new("pgrep").args(["-f", "Proxima's subprocess worker"]).output();
        let pids = out.map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
        pids.lines()
            .filter(|pid| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                String::from_utf8_lossy(&environ).contains(&dir.display().to_string())
            })
            .count()
    }

    #[test]
    #[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
    fn sigint_on_a_bridged_env_saves_and_exits_130_for_every_vector_env() {
        super::common::setup(concat!(env!("CARGO_MANIFEST_DIR"), "/../proxima-gym/tests"));
        for mode in ["off", "sync", "subproc"] {
            let dir = std::env::temp_dir().join(format!("proxima-bridge-sigint-{}-{mode}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let sets = ["n_envs=2", "n_steps=64", "batch_size=64", "eval_episodes=0", &format!("vector_env={mode}")];
            let mut args: Vec<String> =
                ["train", "gym:toy_envs:toy/BoxDiscrete-v0", "--total-timesteps", "10000000", "--quiet", "--run-dir"]
                    .map(String::from)
                    .to_vec();
            args.push(dir.display().to_string());
            for s in sets {
                args.extend(["--set".to_string(), s.to_string()]);
            }
            // The run directory in the environment, so that this run's workers can be told apart.
            let child = Command::new(BIN)
                .args(&args)
                .env("PROXIMA_TEST_RUN", &dir)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let t0 = Instant::now();
            while rows(&dir) < 3 {
                assert!(t0.elapsed() < Duration::from_secs(120), "{mode}: no progress in 120 s");
                std::thread::sleep(Duration::from_millis(5));
            }
            if mode == "subproc" {
                assert!(workers_of(&dir) >= 1, "subproc: no worker process while training");
            }
            let ok = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success();
            assert!(ok, "kill -INT failed");
            let out = child.wait_with_output().unwrap();
            let se = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(!se.contains("KeyboardInterrupt"), "{mode}: Python raised KeyboardInterrupt:\n{se}");
            assert_eq!(out.status.code(), Some(130), "{mode}:\n{se}");
            assert!(se.contains("SIGINT: stopped after update") && se.contains("continue with"), "{mode}:\n{se}");
            assert!(dir.join("model.safetensors").is_file(), "{mode}: nothing saved");
            assert_eq!(workers_of(&dir), 0, "{mode}: worker processes outlived the run");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// A checkpoint's tensors: the bytes after its safetensors header (the header's metadata holds
    /// the config, which names the `vector_env`).
    fn tensor_bytes(path: &Path) -> Vec<u8> {
        let b = std::fs::read(path).unwrap();
        let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
        b[8 + n..].to_vec()
    }

    /// progress.csv without its wall-clock columns (`time_elapsed`, `sps`).
    fn progress_without_time(dir: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
        text.lines()
            .map(|l| {
                l.split(',')
                    .enumerate()
                    .filter(|(i, _)| *i != 2 && *i != 3)
                    .map(|(_, c)| c)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    }

    /// `vector_env = "subproc"` on an `atari:` game: half the games in a worker process of this
    /// binary (`proxima __atari-worker`), half here; the same losses, episodes (whole games with
    /// their scores) and weights as `off`, bit for bit; no worker left after the run; `subproc`
    /// is what an `atari:` run takes when `vector_env` is not set; `sync` is refused with a
    /// message that names what works.
    #[test]
    #[ignore = "needs a Python with gymnasium and ale-py (PROXIMA_PYTHON; .ci/run installs them)"]
    fn atari_games_in_worker_processes_train_as_in_the_training_process() {
        super::common::setup(concat!(env!("CARGO_MANIFEST_DIR"), "/../proxima-gym/tests"));
        let base = std::env::temp_dir().join(format!("proxima-atari-subproc-{}", std::process::id()));
        let run = |mode: &str| {
            let dir = base.join(mode);
            let _ = std::fs::remove_dir_all(&dir);
            let sets = ["n_envs=4", "n_steps=64", "batch_size=64", "n_epochs=1", "eval_episodes=0", "num_threads=1"];
            let mut cmd = Command::new(BIN);
            cmd.args(["train", "atari:Breakout?screen_size=36&frame_stack=2", "--preset", "paper-atari"]);
            cmd.args(["--total-timesteps", "1024", "--quiet", "--run-dir"]).arg(&dir);
            let vector_env = (mode != "default").then(|| format!("vector_env={mode}"));
            for s in sets.iter().map(|s| s.to_string()).chain(vector_env) {
                cmd.args(["--set", &s]);
            }
            let out = cmd.env("PROXIMA_TEST_RUN", &dir).output().unwrap();
            (dir, out)
        };
        let (off, out) = run("off");
        assert!(out.status.success(), "off: {}", String::from_utf8_lossy(&out.stderr));
        let (sub, out) = run("subproc");
        assert!(out.status.success(), "subproc: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(progress_without_time(&sub), progress_without_time(&off), "progress.csv");
        let model = |d: &Path| tensor_bytes(&d.join("model.safetensors"));
        assert!(model(&sub) == model(&off), "the weights differ");
        let left = Command::new("pgrep").args(["-f", "__atari-worker"]).output().unwrap();
        let left = String::from_utf8_lossy(&left.stdout)
            .lines()
            .filter(|pid| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                String::from_utf8_lossy(&environ).contains(&sub.display().to_string())
            })
            .count();
        assert_eq!(left, 0, "atari workers outlived the run");
        let (default, out) = run("default");
        assert!(out.status.success(), "default: {}", String::from_utf8_lossy(&out.stderr));
        let config = std::fs::read_to_string(default.join("config.toml")).unwrap();
        assert!(config.contains("vector_env = \"subproc\""), "{config}");
        let (_, out) = run("sync");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && e.contains("use vector_env = `subproc`"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// `--resume DIR --vector-env subproc` moves a run that stepped its games in the training
    /// process to worker processes (results-neutral, so allowed on resume): from the same
    /// checkpoint it trains exactly as resuming with `off`, and its config.toml records the move.
    #[test]
    #[ignore = "needs a Python with gymnasium and ale-py (PROXIMA_PYTHON; .ci/run installs them)"]
    fn a_resumed_atari_run_moves_its_games_to_worker_processes_with_the_same_results() {
        super::common::setup(concat!(env!("CARGO_MANIFEST_DIR"), "/../proxima-gym/tests"));
        let base = std::env::temp_dir().join(format!("proxima-atari-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let first = base.join("first");
        let sets = ["n_envs=2", "n_steps=64", "batch_size=64", "n_epochs=1", "eval_episodes=0", "checkpoint_freq=2"];
        let mut cmd = Command::new(BIN);
        cmd.args(["train", "atari:Breakout?screen_size=36&frame_stack=2", "--preset", "paper-atari"]);
        cmd.args(["--total-timesteps", "512", "--vector-env", "off", "--quiet", "--run-dir"]).arg(&first);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "first: {}", String::from_utf8_lossy(&out.stderr));
        let resume = |mode: &str| {
            let dir = base.join(mode);
            std::fs::create_dir_all(dir.join("checkpoints")).unwrap();
            std::fs::copy(first.join("config.toml"), dir.join("config.toml")).unwrap();
            let ck = "checkpoints/update_000002.safetensors";
            std::fs::copy(first.join(ck), dir.join(ck)).unwrap();
            let out = Command::new(BIN)
                .args(["train", "--quiet", "--vector-env", mode, "--resume"])
                .arg(&dir)
                .env("PROXIMA_TEST_RUN", &dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
            dir
        };
        let (off, sub) = (resume("off"), resume("subproc"));
        assert_eq!(progress_without_time(&sub), progress_without_time(&off), "progress.csv");
        assert_eq!(progress_without_time(&sub).len(), 3, "header and updates 3, 4");
        let model = |d: &Path| tensor_bytes(&d.join("model.safetensors"));
        assert!(model(&sub) == model(&off), "the weights differ");
        let config = std::fs::read_to_string(sub.join("config.toml")).unwrap();
        assert!(config.contains("vector_env = \"subproc\""), "{config}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
