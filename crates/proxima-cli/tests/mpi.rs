//! Data-parallel PPO over MPI (issue 17), the binary under `mpirun` (built only with
//! `--features mpi`, which needs Open MPI to build: without it this file holds no test; `.ci/run`
//! installs Open MPI and runs this file with `--features proxima-cli/gym,proxima-cli/mpi --test
//! mpi -- --include-ignored`, the bridged case needing a Python with gymnasium): 2 ranks × 2 envs train as 1 rank × 4 envs — the same weights to 1e-5 after 10
//! updates, and the same losses, KL, clip fractions and learning curve update by update —
//! because the global minibatches are the same samples; on native and bridged envs. A checkpoint
//! resumes exactly under the same number of ranks; a killed or stuck rank ends the job.

#[cfg(all(feature = "mpi", feature = "gym"))]
#[path = "../../proxima-gym/tests/common/mod.rs"]
mod common;

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const BIN: &str = env!("CARGO_BIN_EXE_proxima");

    /// A case: env, backend, normalisation on, the (global) minibatch size.
    type Case<'a> = (&'a str, &'a str, bool, usize);

    /// `mpirun -np N proxima train ENV` on `backend` for 10 updates of 4 envs × 128 steps in all.
    fn run(np: usize, dir: &Path, (env, backend, normalize, batch_size): Case) -> String {
        let n_envs = 4 / np;
        let out = Command::new("mpirun")
            .args(["--oversubscribe", "-np", &np.to_string(), BIN, "train", env, "--quiet", "--seed", "3"])
            .args(["--total-timesteps", "5120", "--run-dir", dir.to_str().unwrap()])
            .args(["--set", &format!("n_envs={n_envs}"), "--set", "eval_episodes=0", "--set"])
            .arg(format!("backend={backend}"))
            .args(["--set", &format!("batch_size={batch_size}")])
            .args([
                "--set",
                &format!("normalize_observation={normalize}"),
                "--set",
                &format!("normalize_reward={normalize}"),
            ])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun (Open MPI) is installed");
        let se = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "mpirun -np {np} failed:\n{se}");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Every parameter of a saved model, by name.
    fn weights(path: &Path) -> Vec<(String, Vec<f32>)> {
        use proxima::policy::Policy;
        let net = proxima::checkpoint::load(path).unwrap().build_network(proxima::config::Backend::Fused).unwrap();
        net.param_names().into_iter().zip(net.params().unwrap()).collect()
    }

    /// progress.csv's columns but the timings (losses, KL, clip fraction, grad norm, the learning
    /// curve: mean return and length of the last 100 episodes, episodes per update), by row.
    fn update_stats(dir: &Path) -> Vec<Vec<f64>> {
        let text = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        let cols: Vec<usize> =
            ["global_step", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"]
                .iter()
                .map(|c| header.iter().position(|h| h == c).unwrap_or_else(|| panic!("no column {c}")))
                .collect();
        text.lines()
            .skip(1)
            .map(|l| {
                let v: Vec<&str> = l.split(',').collect();
                cols.iter().map(|&i| v[i].parse().unwrap()).collect()
            })
            .collect()
    }

    /// On both backends, discrete and continuous actions, with the observation and return
    /// statistics merged across ranks; and with a minibatch of the whole rollout (512 rows:
    /// more than each rank's 256, since `batch_size` is the global minibatch).
    #[test]
    fn two_ranks_of_two_envs_train_as_one_rank_of_four() {
        let cases = [
            ("CartPole-v1", "fused", false, 128),
            ("CartPole-v1", "candle", false, 128),
            ("Pendulum-v1", "fused", false, 128),
            ("Pendulum-v1", "fused", true, 128),
            ("CartPole-v1", "fused", false, 512),
        ];
        for case in cases {
            compare(case);
        }
    }

    /// Bridged envs (Gymnasium's own CartPole through the Python bridge, one embedded
    /// interpreter per rank) split over ranks train as in one process, too.
    #[cfg(feature = "gym")]
    #[test]
    #[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
    fn bridged_envs_split_over_ranks_train_as_one_process() {
        super::common::setup(concat!(env!("CARGO_MANIFEST_DIR"), "/../proxima-gym/tests"));
        compare(("gym:CartPole-v1", "fused", false, 128));
    }

    fn compare(case: Case) {
        let name = case.0.replace(':', "_");
        let (pid, backend, norm, batch) = (std::process::id(), case.1, case.2, case.3);
        let base = std::env::temp_dir().join(format!("proxima-mpi-{pid}-{name}-{backend}-{norm}-{batch}"));
        let (one, two) = (base.join("np1"), base.join("np2"));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let (o1, o2) = (run(1, &one, case), run(2, &two, case));
        assert!(o1.contains("for 5120 steps") && o2.contains("for 5120 steps"), "{o1}\n{o2}");
        let config = std::fs::read_to_string(two.join("config.toml")).unwrap();
        assert!(config.contains("# a distributed run: 2 MPI ranks × 2 envs = 4 envs in all"), "{config}");
        let (w1, w2) = (weights(&one.join("model.safetensors")), weights(&two.join("model.safetensors")));
        assert_eq!(w1.len(), w2.len());
        for ((name, a), (_, b)) in w1.iter().zip(&w2) {
            let scale = a.iter().fold(1e-3f32, |m, x| m.max(x.abs()));
            let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(worst <= 1e-5 * scale, "{case:?} {name}: differs by {worst} (scale {scale})");
        }
        let (s1, s2) = (update_stats(&one), update_stats(&two));
        assert_eq!(s1.len(), 10, "10 updates");
        assert_eq!(s1.len(), s2.len());
        for (u, (r1, r2)) in s1.iter().zip(&s2).enumerate() {
            for (c, (x, y)) in r1.iter().zip(r2).enumerate() {
                let same = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 * x.abs().max(1e-2);
                assert!(same, "{case:?} update {u}, column {c}: {x} vs {y}");
            }
        }
        // Its checkpoint holds every rank's envs: a resume in one process, or under another
        // number of ranks, is refused, saying why.
        let out = Command::new(BIN)
            .args(["train", "--resume", two.to_str().unwrap(), "--total-timesteps", "10240"])
            .output()
            .unwrap();
        let se = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && se.contains("distributed run of 2 MPI ranks"), "{se}");
        let out = mpirun(3).args(["train", "--resume", two.to_str().unwrap(), "--total-timesteps", "10240"]).output();
        let se = String::from_utf8_lossy(&out.unwrap().stderr).to_string();
        assert!(se.contains("a checkpoint of 2 MPI ranks and this job has 3"), "{se}");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// `mpirun --oversubscribe -np N proxima`, allowed to run as root (CI containers).
    fn mpirun(np: usize) -> Command {
        let mut c = Command::new("mpirun");
        c.args(["--oversubscribe", "-np", &np.to_string(), BIN])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        c
    }

    /// Waits until `dir`'s progress.csv has `lines` lines (header included), at most 120 s.
    fn wait_for_progress(dir: &Path, lines: usize, what: &str) {
        let t0 = Instant::now();
        while std::fs::read_to_string(dir.join("progress.csv")).map_or(0, |t| t.lines().count()) < lines {
            assert!(t0.elapsed() < Duration::from_secs(120), "{what}: no progress in 120 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `mpirun -np 2 proxima train CartPole-v1` of 2 envs per rank into `dir`, long enough to be
    /// interrupted (10⁸ steps), started in the background with stdout discarded; `hold`: the test
    /// hook's `PROXIMA_TEST_HOLD_UPDATE` (empty: none).
    fn spawn_long_run(dir: &Path, timeout: &str, stderr: Stdio, hold: &str) -> std::process::Child {
        let _ = std::fs::remove_dir_all(dir);
        mpirun(2)
            .args(["train", "CartPole-v1", "--quiet", "--total-timesteps", "100000000", "--set", "n_envs=2"])
            .args(["--run-dir", dir.to_str().unwrap()])
            .env("PROXIMA_MPI_TIMEOUT", timeout)
            .env("PROXIMA_TEST_HOLD_UPDATE", hold)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    }

    /// Runs `c` to success; its stderr.
    fn succeed(c: &mut Command) -> String {
        let out = c.output().expect("mpirun (Open MPI) is installed");
        let se = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{c:?} failed:\n{se}");
        se
    }

    /// Two runs' weights are the same bits, and their progress.csv the same numbers but the
    /// timings, row by row.
    fn assert_same_run(a: &Path, b: &Path) {
        assert_eq!(weights(&a.join("model.safetensors")), weights(&b.join("model.safetensors")));
        let (sa, sb) = (update_stats(a), update_stats(b));
        assert_eq!(sa.len(), sb.len(), "updates");
        for (u, (ra, rb)) in sa.iter().zip(&sb).enumerate() {
            let same = ra.iter().zip(rb).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "update {u}: {ra:?} vs {rb:?}");
        }
    }

    /// A checkpoint of a distributed run holds every rank's envs, sampling streams, running
    /// episodes and normaliser state, so `mpirun -np 2 proxima train --resume` continues exactly:
    /// a run extended from 10 to 20 updates, and a run stopped by Ctrl-C (SIGINT to mpirun; every
    /// rank is held after update 4 until its signal comes: the test hook
    /// `PROXIMA_TEST_HOLD_UPDATE`) and resumed, end with the very weights and progress.csv of the
    /// uninterrupted run.
    #[test]
    fn a_stopped_or_extended_run_resumes_exactly_under_the_same_ranks() {
        let base = std::env::temp_dir().join(format!("proxima-mpi-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let dir = |name: &str| base.join(name).display().to_string();
        // `mpirun -np 2 proxima train ENV` for STEPS steps into run directory RUN.
        let train = |env: &str, steps: &str, run: &str| {
            let mut c = mpirun(2);
            c.args(["train", env, "--quiet", "--seed", "5", "--total-timesteps", steps, "--run-dir", &dir(run)]);
            for s in ["n_envs=2", "eval_episodes=0", "anneal_lr=false", "checkpoint_freq=50"] {
                c.args(["--set", s]);
            }
            if env == "Pendulum-v1" {
                c.args(["--set", "normalize_observation=true", "--set", "normalize_reward=true"]);
            }
            c
        };
        // Extended: 10 updates of 2 ranks × 2 envs × 128 steps, then 10 more.
        succeed(&mut train("CartPole-v1", "10240", "whole"));
        succeed(&mut train("CartPole-v1", "5120", "extended"));
        let se = succeed(mpirun(2).args(["train", "--resume", &dir("extended"), "--total-timesteps", "10240"]));
        assert!(se.contains("resuming CartPole-v1") && se.contains("(update 10, step 5120)"), "{se}");
        assert_same_run(&base.join("whole"), &base.join("extended"));
        // Stopped by a signal after update 4 of 32.
        let steps = "16384";
        succeed(&mut train("Pendulum-v1", steps, "uninterrupted"));
        let mut c = train("Pendulum-v1", steps, "stopped");
        let child =
            c.env("PROXIMA_TEST_HOLD_UPDATE", "4").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        wait_for_progress(&base.join("stopped"), 5, "the run to stop");
        assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
        let out = child.wait_with_output().unwrap();
        let se = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(se.contains("stopped after update 4 ") && se.contains("continue with"), "{se}");
        assert_eq!(update_stats(&base.join("stopped")).len(), 4);
        let se = succeed(mpirun(2).args(["train", "--resume", &dir("stopped")]));
        assert!(se.contains("resuming Pendulum-v1"), "{se}");
        assert_same_run(&base.join("uninterrupted"), &base.join("stopped"));
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A rank that is killed, or stuck (here: stopped with SIGSTOP) while the others wait for it in
    /// a collective, ends the whole job with a message, never a hang: Open MPI ends a job whose
    /// rank died, and the ranks' watchdog gives up after `PROXIMA_MPI_TIMEOUT` seconds in one
    /// collective. After two Ctrl-Cs (mpirun quits at once) no rank trains on. A malformed timeout
    /// is refused.
    #[test]
    fn a_killed_or_stuck_rank_ends_the_job() {
        for (signal, timeout, said) in [
            ("-KILL", "600", "exited on signal 9"),
            ("-STOP", "2", "waited 2 s in an MPI collective for the other ranks (PROXIMA_MPI_TIMEOUT=2)"),
        ] {
            let dir = std::env::temp_dir().join(format!("proxima-mpi-stuck-{}{signal}", std::process::id()));
            let child = spawn_long_run(&dir, timeout, Stdio::piped(), "");
            wait_for_progress(&dir, 3, signal);
            let ranks = Command::new("pgrep").args(["-P", &child.id().to_string()]).output().unwrap();
            let rank = String::from_utf8_lossy(&ranks.stdout).lines().last().expect("a rank process").to_string();
            assert!(Command::new("kill").args([signal, &rank]).status().unwrap().success());
            let t1 = Instant::now();
            let out = child.wait_with_output().unwrap();
            let se = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(!out.status.success() && se.contains(said), "{signal}:\n{se}");
            assert!(t1.elapsed() < Duration::from_secs(60), "{signal}: the job took {:?} to end", t1.elapsed());
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Two Ctrl-Cs: mpirun quits at once, and its ranks must not train on without it (they are
        // held after update 3 until they are ended, so they are still there when mpirun quits).
        let dir = std::env::temp_dir().join(format!("proxima-mpi-twice-{}", std::process::id()));
        let mut child = spawn_long_run(&dir, "600", Stdio::null(), "3:forever");
        wait_for_progress(&dir, 4, "two Ctrl-Cs");
        for _ in 0..2 {
            Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
        child.wait().unwrap();
        // The ranks end with their launcher (prctl's parent-death signal): within seconds.
        let t1 = Instant::now();
        let left = loop {
            let left = Command::new("pgrep").args(["-f", dir.to_str().unwrap()]).output().unwrap();
            if left.stdout.is_empty() || t1.elapsed() > Duration::from_secs(30) {
                break left;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(left.stdout.is_empty(), "ranks outlived mpirun by 30 s: {}", String::from_utf8_lossy(&left.stdout));
        let _ = std::fs::remove_dir_all(&dir);
        let out = mpirun(2).args(["train", "CartPole-v1"]).env("PROXIMA_MPI_TIMEOUT", "soon").output().unwrap();
        let se = String::from_utf8_lossy(&out.stderr);
        assert!(se.contains("PROXIMA_MPI_TIMEOUT=\"soon\": expected whole seconds"), "{se}");
    }

    /// What a distributed run does not do is refused with a clear message, never a hang:
    /// `--resume` of nothing, `--seeds`, another algorithm; a failing rank aborts the job.
    #[test]
    fn what_mpi_runs_do_not_cover_is_a_clear_error() {
        let fail = |args: &[&str]| {
            let out = Command::new("mpirun")
                .args(["--oversubscribe", "-np", "2", BIN])
                .args(args)
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .output()
                .unwrap();
            assert!(!out.status.success(), "{args:?} succeeded");
            String::from_utf8_lossy(&out.stderr).to_string()
        };
        let e = fail(&["train", "--resume", "/nonexistent"]);
        assert!(e.contains("error on rank 0 of 2: /nonexistent: no such run directory"), "{e}");
        let e = fail(&["train", "CartPole-v1", "--seeds", "1-2"]);
        assert!(e.contains("--seeds under mpirun"), "{e}");
        let e = fail(&["train", "CartPole-v1", "--algo", "a2c", "--quiet"]);
        assert!(e.contains("algo = `a2c` (only ppo) is not supported in a distributed (MPI) run"), "{e}");
        let e = fail(&["train", "CartPole-v1", "--quiet", "--set", "n_envs=2", "--set", "batch_size=100"]);
        assert!(e.contains("does not divide the whole rollout n_steps × n_envs × ranks = 128 × 2 × 2 = 512"), "{e}");
        // Ranks started with different runs (MPMD, as differing config files on two nodes would):
        // refused before any all-reduce, naming the first difference.
        let run_dir = std::env::temp_dir().join(format!("proxima-mpi-mpmd-{}", std::process::id()));
        let mpmd = |second: &[&str]| {
            let out = mpirun(1)
                .args(["train", "CartPole-v1", "--quiet", "--total-timesteps", "2048", "--run-dir"])
                .args([run_dir.to_str().unwrap(), ":", "-np", "1", BIN])
                .args(second)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stderr).to_string()
        };
        let e = mpmd(&["train", "Acrobot-v1", "--quiet", "--total-timesteps", "2048"]);
        assert!(
            e.contains("started with another run than rank 0: `train Acrobot-v1` here, `train CartPole-v1`"),
            "{e}"
        );
        assert!(!run_dir.exists(), "rank 0 created its run directory although rank 1 was refused");
        let e = mpmd(&["train", "CartPole-v1", "--quiet", "--total-timesteps", "2048", "--set", "learning_rate=0.1"]);
        assert!(e.contains("`learning_rate = 0.1` here, `learning_rate = 0.00025` on rank 0"), "{e}");
        // A launcher's variable left in the shell, without a launcher.
        let out = Command::new(BIN).args(["train", "CartPole-v1", "--quiet"]).env("PMI_SIZE", "2").output().unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && e.contains("PMI_SIZE=2 says this is one of 2 processes, but MPI started 1"),
            "{e}"
        );
        let e = fail(&["train", "NoSuchEnv-v0", "--quiet"]);
        assert!(e.contains("error on rank") && e.contains("NoSuchEnv-v0"), "{e}");
    }
}
