//! Data-parallel PPO over MPI (issue 17), the binary under `mpirun` (built with `--features mpi`;
//! `.ci/run` installs Open MPI and runs this file with `cargo test -p proxima-cli --features mpi
//! --test mpi`): 2 ranks × 2 envs train as 1 rank × 4 envs — the same weights to 1e-5 after 10
//! updates, and the same losses, KL, clip fractions and learning curve update by update —
//! because the global minibatches are the same samples.

#[cfg(not(feature = "mpi"))]
#[test]
fn skipped_without_the_mpi_feature() {
    println!("SKIPPED: proxima-cli built without --features mpi; .ci/run runs this file with it");
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::path::Path;
    use std::process::Command;

    const BIN: &str = env!("CARGO_BIN_EXE_proxima");

    /// `mpirun -np N proxima train ENV` on `backend` for 10 updates of 4 envs × 128 steps in all.
    fn run(np: usize, dir: &Path, (env, backend, normalize): (&str, &str, bool)) -> String {
        let n_envs = 4 / np;
        let out = Command::new("mpirun")
            .args(["--oversubscribe", "-np", &np.to_string(), BIN, "train", env, "--quiet", "--seed", "3"])
            .args(["--total-timesteps", "5120", "--run-dir", dir.to_str().unwrap()])
            .args(["--set", &format!("n_envs={n_envs}"), "--set", "eval_episodes=0", "--set"])
            .arg(format!("backend={backend}"))
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
    /// statistics merged across ranks.
    #[test]
    fn two_ranks_of_two_envs_train_as_one_rank_of_four() {
        let cases = [
            ("CartPole-v1", "fused", false),
            ("CartPole-v1", "candle", false),
            ("Pendulum-v1", "fused", false),
            ("Pendulum-v1", "fused", true),
        ];
        for case in cases {
            compare(case);
        }
    }

    fn compare(case: (&str, &str, bool)) {
        let base =
            std::env::temp_dir().join(format!("proxima-mpi-{}-{}-{}-{}", std::process::id(), case.0, case.1, case.2));
        let (one, two) = (base.join("np1"), base.join("np2"));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let (o1, o2) = (run(1, &one, case), run(2, &two, case));
        assert!(o1.contains("for 5120 steps") && o2.contains("for 5120 steps"), "{o1}\n{o2}");
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
        // Its checkpoint holds rank 0's envs only: a resume without mpirun is refused, saying why.
        let out = Command::new(BIN)
            .args(["train", "--resume", two.to_str().unwrap(), "--total-timesteps", "10240"])
            .output()
            .unwrap();
        let se = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && se.contains("distributed run of 2 MPI ranks"), "{se}");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// What a distributed run does not do yet is refused on every rank with one message, never a
    /// hang: `--resume`, `--seeds`, another algorithm; a failing rank aborts the job.
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
        assert!(e.contains("--resume under mpirun is not supported yet"), "{e}");
        let e = fail(&["train", "CartPole-v1", "--seeds", "1-2"]);
        assert!(e.contains("--seeds under mpirun"), "{e}");
        let e = fail(&["train", "CartPole-v1", "--algo", "a2c", "--quiet"]);
        assert!(e.contains("algo = `a2c` (only ppo) is not supported in a distributed (MPI) run"), "{e}");
        let e = fail(&["train", "NoSuchEnv-v0", "--quiet"]);
        assert!(e.contains("error on rank") && e.contains("NoSuchEnv-v0"), "{e}");
    }
}
