//! End-to-end tests of the `proxima` binary: a short training run and its artefacts, `eval`,
//! reproducibility, and bad input (each must exit non-zero with a message naming the problem,
//! never panic).

mod common;

use common::{proxima, tmp};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tiny but complete run: 2 envs × 64 steps, 4 updates, checkpoint every 2.
fn tiny_run(dir: &Path, seed: &str) {
    let (code, so, se) = proxima(&[
        "train",
        "CartPole-v1",
        "--seed",
        seed,
        "--total-timesteps",
        "512",
        "--run-dir",
        dir.to_str().unwrap(),
        "--quiet",
        "--set",
        "n_envs=2",
        "--set",
        "n_steps=64",
        "--set",
        "batch_size=32",
        "--set",
        "checkpoint_freq=2",
        "--set",
        "eval_episodes=2",
    ]);
    assert_eq!(code, 0, "train failed:\n{so}\n{se}");
}

#[test]
fn train_writes_a_complete_run_directory_and_eval_reads_it() {
    let dir = tmp("run");
    tiny_run(&dir, "3");
    for f in [
        "config.toml",
        "progress.csv",
        "model.safetensors",
        "eval.json",
        "checkpoints/update_000002.safetensors",
        "checkpoints/update_000004.safetensors",
    ] {
        assert!(dir.join(f).is_file(), "missing {f}");
    }
    let csv = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("global_step,update,"));
    assert_eq!(lines.len(), 1 + 4, "one row per update");
    assert!(lines[4].starts_with("512,4,"));
    let events: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("events.out.tfevents."))
        .collect();
    assert_eq!(events.len(), 1);
    let cfg = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(
        cfg.contains("env_id = \"CartPole-v1\"") && cfg.contains("n_envs = 2") && cfg.contains("seed = 3"),
        "{cfg}"
    );

    // The resolved config can be fed back as --config.
    let (code, _, se) = proxima(&[
        "train",
        "CartPole-v1",
        "--config",
        dir.join("config.toml").to_str().unwrap(),
        "--total-timesteps",
        "128",
        "--run-dir",
        tmp("rerun").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{se}");

    let (code, so, se) = proxima(&["eval", dir.to_str().unwrap(), "--episodes", "3", "--deterministic", "--json"]);
    assert_eq!(code, 0, "{se}");
    let v: serde_json::Value = serde_json::from_str(so.trim()).expect("one JSON object");
    assert_eq!(v["episodes"], 3);
    assert_eq!(v["returns"].as_array().unwrap().len(), 3);
    let mean = v["mean_return"].as_f64().unwrap();
    let rs: Vec<f64> = v["returns"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert!((mean - rs.iter().sum::<f64>() / 3.0).abs() < 1e-9);
    assert!(v["std_return"].as_f64().unwrap() >= 0.0);

    // A checkpoint file works as well as a run directory.
    let (code, so, _) =
        proxima(&["eval", dir.join("checkpoints/update_000002.safetensors").to_str().unwrap(), "--episodes", "1"]);
    assert_eq!(code, 0);
    assert!(so.contains("mean return"));

    // --render records the first episode: one frame after reset plus one per step, and the
    // returns are those of the unrecorded evaluation.
    let gif = dir.join("episode.gif");
    let (code, so2, se) = proxima(&[
        "eval",
        dir.to_str().unwrap(),
        "--episodes",
        "3",
        "--deterministic",
        "--json",
        "--render",
        gif.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{se}");
    let v2: serde_json::Value = serde_json::from_str(so2.trim()).unwrap();
    assert_eq!(v2["returns"], v["returns"]);
    assert_eq!(v2["recording"], gif.to_str().unwrap());
    let mut d = gif::DecodeOptions::new().read_info(std::fs::File::open(&gif).unwrap()).unwrap();
    let mut frames = 0;
    while let Some(f) = d.read_next_frame().unwrap() {
        assert_eq!((f.width, f.height, f.delay), (600, 400, 2)); // CartPole's render_fps is 50
        frames += 1;
    }
    assert_eq!(frames as f64, rs[0] + 1.0, "CartPole's return counts its steps");
    for (args, want) in [
        (vec!["--render", "x.avi"], "use a .gif or .mp4 file name"),
        (vec!["--render", "x.gif", "--render-episodes", "0"], "--render-episodes must be at least 1"),
        (vec!["--render", "x.gif", "--fps", "0"], "--fps must be at least 1"),
        (vec!["--fps", "10"], "--render"),
    ] {
        let mut a = vec!["eval", dir.to_str().unwrap(), "--episodes", "1"];
        a.extend(args);
        let (code, _, se) = proxima(&a);
        assert_eq!(code, if want == "--render" { 2 } else { 1 }, "{a:?}: {se}");
        assert!(se.contains(want), "{a:?}: {se}");
    }
}

#[test]
fn same_seed_same_run() {
    let (a, b) = (tmp("repro-a"), tmp("repro-b"));
    tiny_run(&a, "11");
    tiny_run(&b, "11");
    // Every column but the timings is identical, bit for bit.
    let strip = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p.join("progress.csv"))
            .unwrap()
            .lines()
            .map(|l| {
                l.split(',')
                    .enumerate()
                    .filter(|(i, _)| *i != 2 && *i != 3)
                    .map(|(_, x)| x)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    };
    assert_eq!(strip(&a), strip(&b));
    let wa = proxima::checkpoint::load(&a.join("model.safetensors"))
        .unwrap()
        .build_policy(&candle_core::Device::Cpu)
        .unwrap();
    let wb = proxima::checkpoint::load(&b.join("model.safetensors"))
        .unwrap()
        .build_policy(&candle_core::Device::Cpu)
        .unwrap();
    for ((n, x), (_, y)) in wa.named_params().iter().zip(wb.named_params()) {
        let (x, y) = (
            x.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            y.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        );
        assert!(x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()), "{n} differs");
    }
    // A different seed gives a different run.
    let c = tmp("repro-c");
    tiny_run(&c, "12");
    assert_ne!(strip(&a), strip(&c));
}

#[test]
fn bad_input_gets_a_clear_error_and_nonzero_exit() {
    let dir = tmp("bad");
    let rd = dir.join("never");
    let rd = rd.to_str().unwrap();
    let bad_toml = dir.join("bad.toml");
    std::fs::write(&bad_toml, "n_steps = [").unwrap();
    let empty = dir.join("empty.safetensors");
    std::fs::write(&empty, b"").unwrap();
    let noise = dir.join("noise.safetensors");
    std::fs::write(&noise, (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<u8>>())
        .unwrap();
    let under_file = bad_toml.join("run");
    let typo_toml = dir.join("typo.toml");
    std::fs::write(&typo_toml, "learning_rat = 0.001\n").unwrap();
    let workers_toml = dir.join("workers.toml");
    std::fs::write(&workers_toml, "n_workers = 8\n").unwrap();
    let seeds_parent = dir.join("seeds-parent");
    std::fs::create_dir_all(&seeds_parent).unwrap();
    std::fs::write(seeds_parent.join("seeds.toml"), "").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["train", "CartPol-v1", "--run-dir", rd],
            "unknown environment id `CartPol-v1` (did you mean `CartPole-v1`?)",
        ),
        (vec!["train", "NoSuchEnv-v9", "--run-dir", rd], "unknown environment id `NoSuchEnv-v9`"),
        (vec!["train", "atari:Breakout", "--run-dir", rd], "build the CLI with `--features gym`"),
        (
            vec!["train", "CartPole-v1", "--preset", "paper-atari", "--run-dir", rd],
            "policy = `CnnPolicy` needs image observations",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "policy=CnnPolicy", "--set", "net_arch=[32]", "--run-dir", rd],
            "`net_arch` (the MLP's shape) has no effect with policy = `CnnPolicy`",
        ),
        (
            vec!["train", "Pendulum-v1", "--algo", "sac", "--set", "policy=CnnPolicy", "--run-dir", rd],
            "policy = `CnnPolicy` trains with ppo, a2c, a3c and reinforce",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "n_step=64", "--run-dir", rd],
            "unknown key `n_step` (did you mean `n_steps`?)",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "device=cuda", "--run-dir", rd],
            "unknown key `device`: Proxima trains on the CPU (the fused kernels, or candle on the CPU); there is no CUDA build",
        ),
        (
            vec!["train", "CartPole-v1", "--device", "cuda", "--run-dir", rd],
            "--device cuda: Proxima trains on the CPU (the fused kernels, or candle on the CPU); there is no CUDA build",
        ),
        (
            vec!["train", "Pendulum-v1", "--algo", "sac", "--set", "precision=bf16", "--run-dir", rd],
            "unknown key `precision`: Proxima trains in float32 on every backend",
        ),
        (
            vec!["train", "CartPole-v1", "--config", typo_toml.to_str().unwrap(), "--run-dir", rd],
            "unknown key `learning_rat` (did you mean `learning_rate`?)",
        ),
        (vec!["train", "CartPole-v1", "--config", bad_toml.to_str().unwrap(), "--run-dir", rd], "malformed TOML"),
        (vec!["train", "CartPole-v1", "--config", "/nonexistent/x.toml", "--run-dir", rd], "cannot read config file"),
        (
            vec!["train", "CartPole-v1", "--set", "batch_size=100", "--run-dir", rd],
            "batch_size = 100 does not divide the rollout",
        ),
        (vec!["train", "CartPole-v1", "--set", "learning_rate=-1", "--run-dir", rd], "learning_rate = -1"),
        (vec!["train", "CartPole-v1", "--set", "gamma=1.5", "--run-dir", rd], "gamma = 1.5"),
        (vec!["train", "CartPole-v1", "--set", "n_envs=0", "--run-dir", rd], "n_envs = 0"),
        (vec!["train", "CartPole-v1", "--set", "num_threads=100000", "--run-dir", rd], "num_threads = 100000: at most 1024"),
        (
            vec!["train", "CartPole-v1", "--set", "net_arch=[65536, 65536]", "--run-dir", rd],
            "4294967296 weights between hidden layers per network exceed 67108864",
        ),
        (vec!["train", "CartPole-v1", "--set", "n_epochs=many", "--run-dir", rd], "n_epochs"),
        (
            vec!["train", "CartPole-v1", "--preset", "cleanrll", "--run-dir", rd],
            "unknown preset `cleanrll` (did you mean `cleanrl`?)",
        ),
        (
            vec!["train", "Pendulum-v1", "--algo", "sac", "--preset", "td3", "--run-dir", rd],
            "preset `td3` holds TD3's hyperparameters, which would run algo `sac` with TD3's critics",
        ),
        (
            vec!["train", "Pendulum-v1", "--algo", "td3", "--preset", "sac", "--run-dir", rd],
            "SAC, TD3, DDPG and TQC each take their own preset; leave the preset out or give `td3`",
        ),
        (
            vec!["train", "Pendulum-v1", "--algo", "sac", "--preset", "paper-mujoco", "--run-dir", rd],
            "preset `paper-mujoco` holds PPO's hyperparameters, which do not fit algo `sac` (an off-policy algorithm)",
        ),
        (vec!["train", "CartPole-v1", "--set", "novalue", "--run-dir", rd], "expected key=value"),
        (vec!["eval", "/nonexistent/run"], "no such run directory or checkpoint file"),
        (vec!["eval", bad_toml.to_str().unwrap()], "not a valid safetensors file"),
        (vec!["eval", empty.to_str().unwrap()], "not a valid safetensors file"),
        (vec!["eval", noise.to_str().unwrap()], "not a valid safetensors file"),
        (
            vec!["eval", dir.to_str().unwrap()],
            "holds no checkpoint (neither model.safetensors nor checkpoints/*.safetensors)",
        ),
        (vec!["eval", empty.to_str().unwrap(), "--episodes", "0"], "--episodes must be at least 1"),
        (vec!["train", "CartPole-v1", "--set", "net_arch=5", "--run-dir", rd], "net_arch"),
        (vec!["train", "CartPole-v1", "--set", "net_arch=[64, 0]", "--run-dir", rd], "net_arch = [64, 0]"),
        (vec!["train", "CartPole-v1", "--set", "clip_range=-1", "--run-dir", rd], "clip_range = -1"),
        (vec!["train", "CartPole-v1", "--set", "activation=sigmoid", "--run-dir", rd], "activation"),
        (vec!["train", "CartPole-v1", "--total-timesteps", "0", "--run-dir", rd], "total_timesteps = 0"),
        (vec!["train", "CartPole-v1", "--config", dir.to_str().unwrap(), "--run-dir", rd], "cannot read config file"),
        (
            vec!["train", "CartPole-v1", "--total-timesteps", "256", "--run-dir", under_file.to_str().unwrap()],
            "Not a directory",
        ),
        (
            vec!["train", "CartPole-v1", "--total-timesteps", "256", "--run-dir", "/proc/proxima-run"],
            "/proc/proxima-run",
        ),
        (vec!["train", "--resume", dir.to_str().unwrap()], "holds no checkpoint"),
        (vec!["train", "MountainCar-v0", "--resume", dir.to_str().unwrap()], "holds no checkpoint"),
        (
            vec!["train", "CartPole-v1", "--run-dir", dir.to_str().unwrap()],
            "already holds files (not a run); choose an empty or new directory",
        ),
        (vec!["train", "--resume", bad_toml.to_str().unwrap()], "bad.toml: a file; give the run directory that holds it"),
        (vec!["eval", seeds_parent.to_str().unwrap()], "a multi-seed run's parent directory"),
        (vec!["train", "CartPole-v1", "--seed", "18446744073709551615", "--run-dir", rd], "must be below 2^63"),
        (vec!["train", "CartPole-v1", "--set", "n_steps=9223372036854775807", "--run-dir", rd], "exceeds"),
        (vec!["train", "CartPole-v1", "--set", "net_arch=[2000000000]", "--run-dir", rd], "exceeds"),
        // Options the chosen algorithm ignores.
        (
            vec!["train", "CartPole-v1", "--workers", "4", "--run-dir", rd],
            "`--workers` / `n_workers` (A3C's worker threads) has no effect with algo = `ppo`",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "kl_target=0.02", "--run-dir", rd],
            "`kl_target` (adaptive KL's d_targ) has no effect with algo = `ppo`, objective = `clip`",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "objective=fixed_kl", "--set", "clip_range=0.3", "--run-dir", rd],
            "`clip_range` (PPO-Clip's ε) has no effect with algo = `ppo`, objective = `fixed_kl`",
        ),
        (
            vec!["train", "CartPole-v1", "--algo", "a2c", "--set", "clip_range=0.1", "--run-dir", rd],
            "`clip_range` (PPO-Clip's ε) has no effect with algo = `a2c`",
        ),
        (
            vec!["train", "CartPole-v1", "--algo", "a2c", "--set", "n_epochs=4", "--run-dir", rd],
            "`n_epochs` (PPO's K epochs over each rollout) has no effect with algo = `a2c`",
        ),
        (
            vec!["train", "CartPole-v1", "--algo", "a3c", "--set", "batch_size=5", "--run-dir", rd],
            "`batch_size` (the minibatch size; A3C takes one step on the whole rollout) has no effect with algo = `a3c`",
        ),
        (
            vec!["train", "CartPole-v1", "--algo", "trpo", "--set", "ent_coef=0.01", "--run-dir", rd],
            "`ent_coef` (a coefficient of the joint loss; TRPO steps the policy alone) has no effect with algo = `trpo`",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "cg_damping=0.2", "--run-dir", rd],
            "`cg_damping` (TRPO's Fisher damping) has no effect with algo = `ppo`",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "rms_prop_alpha=0.9", "--run-dir", rd],
            "`rms_prop_alpha` (RMSprop's settings) has no effect with optimizer = `adam`",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "clip_obs=5", "--run-dir", rd],
            "`clip_obs` (the clip of normalised observations) has no effect with normalize_observation = false",
        ),
        (
            vec!["train", "CartPole-v1", "--config", workers_toml.to_str().unwrap(), "--run-dir", rd],
            "`n_workers` (A3C's worker threads) has no effect with algo = `ppo`",
        ),
        (
            vec!["train", "CartPole-v1", "--seeds", "1,2", "--set", "kl_coef=3", "--run-dir", rd],
            "`kl_coef` (the KL penalty's β) has no effect with algo = `ppo`, objective = `clip`",
        ),
        (
            vec!["ablation", "--variants", "clip,none", "--set", "kl_target=0.1", "--out", rd],
            "--set kl_target: no variant reads it",
        ),
        (
            vec!["train", "CartPole-v1", "--set", "log_std_init=-0.5", "--run-dir", rd],
            "`log_std_init` (the Gaussian's initial log-std) has no effect with CartPole-v1's discrete actions",
        ),
        // SAC's bad inputs (issue 15).
        (vec!["train", "CartPole-v1", "--algo", "sac", "--run-dir", rd], "SAC needs a continuous (Box) action space"),
        (
            vec!["train", "Pendulum-v1", "--algo", "sac", "--set", "buffer_size=100000000000000", "--run-dir", rd],
            "a replay buffer of 100000000000000 transitions",
        ),
        (
            vec!["train", "Pendulum-v1", "--algo", "sac", "--total-timesteps", "50", "--run-dir", rd],
            "learning_starts = 100 is not below total_timesteps = 50",
        ),
        (vec!["train", "Pendulum-v1", "--set", "tau=0.01", "--run-dir", rd], "`tau` (the target networks' Polyak τ) has no effect with algo = `ppo`"),
        (vec!["train", "Pendulum-v1", "--algo", "sac", "--set", "gae_lambda=0.9", "--run-dir", rd], "`gae_lambda` (GAE's λ) has no effect with algo = `sac`"),
        (vec!["train", "Pendulum-v1", "--set", "ent_coef=auto", "--run-dir", rd], "SAC's learned temperature"),
    ];
    for (args, want) in cases {
        let (code, _, se) = proxima(&args);
        assert_eq!(code, 1, "{args:?} should fail with status 1; stderr: {se}");
        assert!(se.contains(want), "{args:?}: stderr should contain {want:?}, got:\n{se}");
        assert!(se.starts_with("error: "), "{args:?}: {se}");
    }
    assert!(!Path::new(rd).exists(), "a failed start must not create the run directory");
}

#[test]
fn eval_refuses_a_checkpoint_that_does_not_fit() {
    let dir = tmp("mismatch");
    tiny_run(&dir, "5");
    // A CartPole policy (4 observations, Discrete(2)) on Pendulum (3 observations, Box(1)).
    let (code, _, se) = proxima(&["eval", dir.to_str().unwrap(), "--env", "Pendulum-v1"]);
    assert_eq!(code, 1);
    assert!(se.contains("does not fit Pendulum-v1"), "{se}");
    // The spaces as Gymnasium prints them, not Rust's Debug form.
    assert!(se.contains("action Discrete(2)") && se.contains("action Box(-2, 2, [1])"), "{se}");
    let (code, _, se) = proxima(&["eval", dir.to_str().unwrap(), "--device", "cuda"]);
    assert!(code == 1 && se.contains("--device cuda: Proxima trains on the CPU"), "{se}");
    // A checkpoint whose tensors were tampered with: header says 64 units, file holds fewer bytes.
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let cut = dir.join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let (code, _, se) = proxima(&["eval", cut.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(se.contains("checkpoint error") && se.contains("truncated: it needs at least"), "{se}");
}

#[test]
fn another_on_policy_algorithms_preset_notes_what_is_left_unread() {
    let dir = tmp("a2c-on-cleanrl");
    let rd = dir.join("run");
    let (code, _, se) = proxima(&[
        "train",
        "CartPole-v1",
        "--algo",
        "a2c",
        "--preset",
        "cleanrl",
        "--total-timesteps",
        "64",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{se}");
    assert!(se.contains("note: --preset cleanrl holds another algorithm's values; a2c does not read its"), "{se}");
    assert!(se.contains("n_epochs"), "{se}");
}

fn weights(path: &Path) -> Vec<(String, Vec<u32>)> {
    let p = proxima::checkpoint::load(path).unwrap().build_policy(&candle_core::Device::Cpu).unwrap();
    p.named_params()
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                v.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().map(|x| x.to_bits()).collect(),
            )
        })
        .collect()
}

fn csv_without_timings(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p.join("progress.csv"))
        .unwrap()
        .lines()
        .map(|l| {
            l.split(',').enumerate().filter(|(i, _)| *i != 2 && *i != 3).map(|(_, x)| x).collect::<Vec<_>>().join(",")
        })
        .collect()
}

/// A run interrupted after update 4 of 8 and resumed ends with the same weights and the same
/// progress.csv (timings aside) as the uninterrupted run, bit for bit. CartPole's short
/// episodes exercise autoresets (env RNG state); Acrobot's long ones the time-limit counters.
fn interrupted_and_resumed(env: &str, extra: &[&str]) -> PathBuf {
    let algo = extra.iter().position(|s| *s == "--algo").map_or("ppo", |i| extra[i + 1]);
    let full = tmp(&format!("resume-full-{env}-{algo}"));
    // REINFORCE takes no minibatch size (setting one is an error).
    let batch: &[&str] = if algo == "reinforce" { &[] } else { &["--set", "batch_size=32"] };
    let args = |dir: &Path| -> Vec<String> {
        [
            "train",
            env,
            "--seed",
            "4",
            "--total-timesteps",
            "1024",
            "--run-dir",
            dir.to_str().unwrap(),
            "--quiet",
            "--set",
            "n_envs=2",
            "--set",
            "n_steps=64",
            "--set",
            "checkpoint_freq=4",
            "--set",
            "eval_episodes=0",
        ]
        .iter()
        .chain(batch)
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
    };
    let a = args(&full);
    let (code, _, se) = proxima(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{se}");
    // The "interrupted" run: the same directory as it stood right after checkpoint 4 was written
    // (the later rows of progress.csv are left in place, as a crash would leave them).
    let cut = tmp(&format!("resume-cut-{env}-{algo}"));
    std::fs::create_dir_all(cut.join("checkpoints")).unwrap();
    for f in ["config.toml", "progress.csv", "checkpoints/update_000004.safetensors"] {
        std::fs::copy(full.join(f), cut.join(f)).unwrap();
    }
    let (code, _, se) = proxima(&["train", "--resume", cut.to_str().unwrap(), "--quiet"]);
    assert_eq!(code, 0, "{se}");
    assert!(se.contains(&format!("resuming {env}")) && se.contains("update 4"), "{se}");
    assert_eq!(weights(&full.join("model.safetensors")), weights(&cut.join("model.safetensors")), "{env}");
    assert_eq!(csv_without_timings(&full), csv_without_timings(&cut), "{env}");
    assert_eq!(csv_without_timings(&cut).len(), 1 + 8);
    full
}

#[test]
fn resume_is_exact() {
    interrupted_and_resumed("CartPole-v1", &[]);
    // Continuous actions with observation normalisation and reward scaling: their running
    // statistics are part of the resumed state.
    interrupted_and_resumed("Pendulum-v1", &["--set", "normalize_observation=true", "--set", "normalize_reward=true"]);
    // TRPO (a preset without max_grad_norm and value clipping: "off" must survive the resume)
    // and adaptive-KL PPO with value clipping switched off (β is part of the resumed state).
    interrupted_and_resumed("MountainCarContinuous-v0", &["--algo", "trpo", "--set", "n_critic_updates=2"]);
    interrupted_and_resumed("MountainCar-v0", &["--set", "clip_range_vf=none", "--set", "objective=adaptive_kl"]);
    // REINFORCE without a baseline (the rollouts' unfinished episodes carry into the next).
    interrupted_and_resumed("CartPole-v1", &["--algo", "reinforce", "--set", "baseline=false"]);
    // PPG with auxiliary phases after updates 3 and 6: the checkpoint after update 4 holds one
    // rollout in the auxiliary buffer and the auxiliary Adam's moments.
    interrupted_and_resumed("Pendulum-v1", &["--algo", "ppg", "--set", "n_iteration=3", "--set", "num_aux_rollouts=1"]);
    let full = interrupted_and_resumed("Acrobot-v1", &[]);
    // A finished run is not resumed silently; bad combinations are refused.
    let (code, _, se) = proxima(&["train", "--resume", full.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(se.contains("is complete"), "{se}");
    let (code, _, se) = proxima(&["train", "--resume", "/nonexistent/run"]);
    assert_eq!(code, 1);
    assert!(se.contains("no such run directory"), "{se}");
    let (code, _, _) = proxima(&["train", "--resume", full.to_str().unwrap(), "--seed", "3"]);
    assert_eq!(code, 2, "clap refuses --seed with --resume");
    // Extending a finished run continues it.
    let (code, so, se) =
        proxima(&["train", "--resume", full.to_str().unwrap(), "--total-timesteps", "1280", "--quiet"]);
    assert_eq!(code, 0, "{se}");
    assert_eq!(csv_without_timings(&full).len(), 1 + 10);
    // The summary gives the run's steps, and this process's seconds apart from the run's.
    assert!(so.contains("trained Acrobot-v1 to 1280 steps; ") && so.contains("s with the earlier ones"), "{so}");
}

/// The checkpoint files (`*.safetensors`, not temp files) in `dir/checkpoints`.
fn checkpoint_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir.join("checkpoints")).into_iter().flatten().flatten();
    entries.map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "safetensors")).collect()
}

/// SIGKILL at arbitrary moments of a run that checkpoints after every update: every
/// `*.safetensors` file left behind is complete and loads (writes are temp file + rename). The
/// moments are counted from the run's first checkpoint (however long the start took), 0 to
/// 300 ms after it, so they land in checkpoint writes as well as between them.
#[test]
fn sigkill_never_leaves_a_torn_checkpoint() {
    let base = tmp("kill");
    for delay_ms in [0u64, 1, 3, 7, 15, 40, 100, 300] {
        let dir = base.join(format!("after-{delay_ms}ms"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_proxima"))
            .args(["train", "CartPole-v1", "--total-timesteps", "100000000", "--quiet", "--run-dir"])
            .arg(&dir)
            .args(["--set", "n_envs=1", "--set", "n_steps=8", "--set", "batch_size=8", "--set", "n_epochs=1"])
            .args(["--set", "checkpoint_freq=1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while checkpoint_files(&dir).is_empty() {
            assert!(child.try_wait().unwrap().is_none(), "the run ended before its first checkpoint");
            assert!(t0.elapsed() < std::time::Duration::from_secs(120), "no checkpoint in 120 s");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let files = checkpoint_files(&dir);
        assert!(!files.is_empty(), "the first checkpoint is gone after SIGKILL at {delay_ms} ms");
        for p in files {
            proxima::checkpoint::load(&p)
                .unwrap_or_else(|err| panic!("{} is torn after SIGKILL at {delay_ms} ms: {err}", p.display()));
        }
        assert!(std::fs::read_to_string(dir.join("config.toml")).unwrap().contains("n_steps = 8"));
    }
}

/// A diverging run stops with a numerical error naming the update; the checkpoints written
/// before stay loadable.
#[test]
fn divergence_stops_the_run_and_keeps_earlier_checkpoints() {
    let dir = tmp("diverge");
    // One Adam step per update, each moving every parameter by ~1e30: the first update is
    // finite, the second overflows.
    let (code, _, se) = proxima(&[
        "train",
        "CartPole-v1",
        "--total-timesteps",
        "3200",
        "--run-dir",
        dir.to_str().unwrap(),
        "--quiet",
        "--set",
        "learning_rate=1e30",
        "--set",
        "max_grad_norm=none",
        "--set",
        "n_envs=2",
        "--set",
        "n_steps=16",
        "--set",
        "batch_size=32",
        "--set",
        "n_epochs=1",
        "--set",
        "checkpoint_freq=1",
    ]);
    assert_eq!(code, 1);
    assert!(
        dir.join("checkpoints/update_000001.safetensors").exists(),
        "the first update was good and checkpointed: {se}"
    );
    assert!(se.contains("numerical error: update ") && se.contains("last good update"), "{se}");
    assert!(!dir.join("model.safetensors").exists());
    for e in std::fs::read_dir(dir.join("checkpoints")).unwrap().flatten() {
        proxima::checkpoint::load(&e.path()).unwrap();
    }
}

/// Trains into a 160 KiB tmpfs mounted at `mnt` (room for one checkpoint, not two), then copies
/// what the run left there to `out/run`, its stderr to `out/stderr` and its exit status to
/// `out/code`. The mount is made in a mount namespace of its own (`unshare`, as root or, where
/// the kernel allows unprivileged user namespaces, as anyone), else directly (root); false when
/// neither can mount.
fn train_on_a_full_disk(mnt: &Path, out: &Path) -> bool {
    let script = r#"mnt=$1; out=$2; bin=$3
mount -t tmpfs -o size=160k tmpfs "$mnt" || exit 97
"$bin" train CartPole-v1 --total-timesteps 100000 --run-dir "$mnt/run" --quiet --set checkpoint_freq=1 2>"$out/stderr"
echo $? >"$out/code"
cp -a "$mnt/run" "$out/run"
umount "$mnt""#;
    let args = ["sh", "-c", script, "sh", mnt.to_str().unwrap(), out.to_str().unwrap(), env!("CARGO_BIN_EXE_proxima")];
    let in_namespace = Command::new("unshare").args(["--map-root-user", "--mount"]).args(args).status();
    if in_namespace.is_ok_and(|s| s.success()) {
        return true;
    }
    let _ = std::fs::remove_dir_all(out.join("run"));
    Command::new(args[0]).args(&args[1..]).status().is_ok_and(|s| s.success())
}

/// A full disk (a 160 KiB tmpfs: room for one checkpoint, not two) stops the run with a clear
/// error, keeps the checkpoint already written loadable, and leaves no temp file. Ignored by a
/// plain `cargo test`, since mounting needs root or user namespaces; `.ci/run` (root) runs it
/// with `--include-ignored`, and it fails where it cannot mount.
#[test]
#[ignore = "needs to mount a tmpfs: root, or unprivileged user namespaces (.ci/run runs it as root)"]
fn full_disk_is_a_clear_error_and_loses_nothing() {
    let (mnt, out) = (tmp("fulldisk-mnt"), tmp("fulldisk-out"));
    assert!(
        train_on_a_full_disk(&mnt, &out),
        "cannot mount a 160 KiB tmpfs on {} (neither `unshare --map-root-user --mount` nor `mount` as root works here)",
        mnt.display()
    );
    let code = std::fs::read_to_string(out.join("code")).unwrap();
    let se = std::fs::read_to_string(out.join("stderr")).unwrap();
    let run = out.join("run");
    let loads = proxima::checkpoint::load(&run.join("checkpoints/update_000001.safetensors")).is_ok();
    let leftovers: Vec<String> = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(code.trim(), "1", "{se}");
    assert!(se.contains("No space left on device") && se.contains("update_000002.safetensors"), "{se}");
    assert!(!se.contains("panicked"), "{se}");
    assert!(loads, "the checkpoint written before the disk filled must load");
    assert_eq!(leftovers, vec!["update_000001.safetensors".to_string()]);
}

/// Normalisation statistics travel with the checkpoint and are applied, frozen, by `eval`:
/// evaluating the same weights without them gives other returns.
#[test]
fn normalization_statistics_round_trip_through_checkpoints() {
    let dir = tmp("norm");
    let (code, _, se) = proxima(&[
        "train",
        "Pendulum-v1",
        "--preset",
        "paper-mujoco",
        "--total-timesteps",
        "2048",
        "--run-dir",
        dir.to_str().unwrap(),
        "--quiet",
        "--set",
        "n_steps=256",
        "--set",
        "eval_episodes=0",
        "--set",
        "checkpoint_freq=4",
    ]);
    assert_eq!(code, 0, "{se}");
    let ck = proxima::checkpoint::load(&dir.join("model.safetensors")).unwrap();
    let norm: proxima::normalize::Normalizer = serde_json::from_str(&ck.meta.extra["normalization"]).unwrap();
    let obs = norm.obs_rms.as_ref().expect("observation statistics saved");
    assert_eq!(obs.mean.len(), 3);
    assert!(obs.count > 2000.0, "every observation of the run was counted: {}", obs.count);
    assert!(norm.ret_rms.is_some());
    let (code, so, se) = proxima(&["eval", dir.to_str().unwrap(), "--episodes", "2", "--deterministic", "--json"]);
    assert_eq!(code, 0, "{se}");
    let with: serde_json::Value = serde_json::from_str(so.trim()).unwrap();
    // eval's default backend (auto: the fused kernels).
    let policy = ck.build_network(proxima::config::Backend::Auto).unwrap();
    let without = proxima::train::evaluate(&policy, "Pendulum-v1", (2, true, 0), None, false).unwrap();
    let frozen = proxima::train::evaluate(&policy, "Pendulum-v1", (2, true, 0), Some(&norm), false).unwrap();
    let got: Vec<f64> = with["returns"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!(got, frozen, "eval applies the saved statistics");
    assert_ne!(got, without, "and they matter");
}

/// Small promises of the CLI: eval_episodes = 0 reports no score (null in eval.json); resuming a
/// complete run whose model file was lost rewrites it; a checkpoint holding NaN weights is
/// refused; eval of a run directory uses its most advanced loadable checkpoint.
#[test]
fn edge_cases_of_eval_and_resume() {
    let dir = tmp("edges");
    let (code, so, se) = proxima(&[
        "train",
        "CartPole-v1",
        "--total-timesteps",
        "256",
        "--run-dir",
        dir.to_str().unwrap(),
        "--quiet",
        "--set",
        "n_envs=2",
        "--set",
        "n_steps=64",
        "--set",
        "batch_size=32",
        "--set",
        "checkpoint_freq=2",
        "--set",
        "eval_episodes=0",
    ]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("no evaluation (eval_episodes = 0)"), "{so}");
    let ev: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("eval.json")).unwrap()).unwrap();
    assert!(ev["mean_return"].is_null() && ev["episodes"] == 0, "{ev}");

    let model = dir.join("model.safetensors");
    let good = std::fs::read(&model).unwrap();
    std::fs::remove_file(&model).unwrap();
    let (code, so, se) = proxima(&["train", "--resume", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("was complete at update 2; wrote"), "{so}");
    assert_eq!(weights(&model), weights(&dir.join("checkpoints/update_000002.safetensors")));

    // A damaged model.safetensors: eval warns and falls back to the newest good checkpoint.
    std::fs::write(&model, &good[..good.len() / 3]).unwrap();
    let (code, so, se) = proxima(&["eval", dir.to_str().unwrap(), "--episodes", "1", "--json"]);
    assert_eq!(code, 0, "{se}");
    assert!(se.contains("warning: a damaged checkpoint, skipped"), "{se}");
    assert!(so.contains("update_000002.safetensors"), "{so}");

    // Every checkpoint damaged: one error that says there is nothing to load, for eval and resume.
    let wrecked = dir.with_extension("wrecked");
    std::fs::create_dir_all(wrecked.join("checkpoints")).unwrap();
    std::fs::write(wrecked.join("model.safetensors"), &good[..good.len() / 3]).unwrap();
    std::fs::write(wrecked.join("checkpoints/update_000002.safetensors"), &good[..100]).unwrap();
    for cmd in [&["eval", wrecked.to_str().unwrap()][..], &["train", "--resume", wrecked.to_str().unwrap()]] {
        let (code, _, se) = proxima(cmd);
        assert_eq!(code, 1, "{cmd:?}: {se}");
        assert!(se.contains("none of its 2 checkpoint files loads"), "{cmd:?}: {se}");
    }

    // NaN weights: patch the first f32 of `actor.0.bias`, located through the safetensors header.
    let mut nan = good.clone();
    let hn = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&good[8..8 + hn]).unwrap();
    let start = 8 + hn + header["actor.0.bias"]["data_offsets"][0].as_u64().unwrap() as usize;
    nan[start..start + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let bad = dir.join("nan.safetensors");
    std::fs::write(&bad, &nan).unwrap();
    let (code, _, se) = proxima(&["eval", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(se.contains("non-finite values"), "{se}");
}

/// The other algorithms through the CLI: --algo picks the algorithm and its preset, the run
/// directory is named after it, bad values are clear errors, and an A3C run refuses --resume.
#[test]
fn algorithms_through_the_cli() {
    // Each with an option of its own (another algorithm's is an error: the bad-input test).
    for (algo, steps, own) in [
        ("a2c", "500", vec![]),
        ("trpo", "2048", vec!["--set", "n_critic_updates=1"]),
        ("a3c", "400", vec!["--workers", "2"]),
        ("reinforce", "4096", vec!["--set", "baseline=false"]),
        (
            "ppg",
            "512",
            vec!["--set", "n_envs=2", "--set", "n_steps=64", "--set", "batch_size=64", "--set", "n_iteration=2"],
        ),
        ("sac", "300", vec!["--set", "learning_starts=50", "--set", "n_steps=100", "--set", "net_arch=[32, 32]"]),
        ("td3", "300", vec!["--set", "learning_starts=50", "--set", "n_steps=100", "--set", "net_arch=[32, 32]"]),
    ] {
        let root = tmp(&format!("algo-{algo}"));
        let env = if algo == "sac" || algo == "td3" { "Pendulum-v1" } else { "CartPole-v1" };
        let dir = root.join("run");
        let mut args = vec![
            "train",
            env,
            "--algo",
            algo,
            "--total-timesteps",
            steps,
            "--quiet",
            "--run-dir",
            dir.to_str().unwrap(),
            "--set",
            "eval_episodes=1",
        ];
        args.extend(own);
        let (code, so, se) = proxima(&args);
        assert_eq!(code, 0, "{algo}: {se}");
        assert!(so.contains(&format!("trained {env}")), "{so}");
        let cfg = std::fs::read_to_string(dir.join("config.toml")).unwrap();
        assert!(cfg.contains(&format!("algo = \"{algo}\"")), "{cfg}");
        let header = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
        assert!(header.lines().next().unwrap().ends_with("kl_divergence,kl_coef,step_fraction,ent_coef"));
        let (code, _, se) = proxima(&["eval", dir.to_str().unwrap(), "--episodes", "1"]);
        assert_eq!(code, 0, "{se}");
        // Its own config.toml feeds back as --config, without --algo (the file names its preset).
        let again = root.join("again");
        let (code, _, se) = proxima(&[
            "train",
            env,
            "--config",
            dir.join("config.toml").to_str().unwrap(),
            "--total-timesteps",
            "64",
            "--quiet",
            "--run-dir",
            again.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{algo}: its config.toml fed back: {se}");
        if algo == "a3c" {
            let (code, _, se) = proxima(&["train", "--resume", dir.to_str().unwrap()]);
            assert_eq!(code, 1);
            assert!(se.contains("A3C runs cannot be resumed"), "{se}");
        }
    }
    for (args, want) in [
        (vec!["train", "CartPole-v1", "--algo", "sarsa"], "unknown --algo `sarsa`"),
        (vec!["train", "CartPole-v1", "--algo", "reinforce", "--set", "gae_lambda=0.9"], "`gae_lambda`"),
        (vec!["train", "CartPole-v1", "--algo", "a3c", "--workers", "0"], "n_workers = 0"),
        // A typed flag and a --set of its key: refused, neither silently winning.
        (vec!["train", "CartPole-v1", "--algo", "a2c", "--set", "algo=ppo"], "--algo and --set algo=… both set `algo`"),
        (
            vec!["train", "CartPole-v1", "--backend", "fused", "--set", " backend = candle"],
            "--backend and --set backend=… both set `backend`",
        ),
        (
            vec!["train", "CartPole-v1", "--vector-env", "subproc", "--set", "vector_env=off"],
            "--vector-env and --set vector_env=… both set `vector_env`",
        ),
        (vec!["train", "CartPole-v1", "--algo", "a3c", "--vector-env", "sync"], "does not support vector_env"),
        (
            vec!["train", "CartPole-v1", "--algo", "a3c", "--workers", "2", "--set", "n_workers=3"],
            "--workers and --set n_workers=… both set `n_workers`",
        ),
        (vec!["train", "CartPole-v1", "--set", "objective=clipped"], "objective"),
        (vec!["train", "CartPole-v1", "--algo", "trpo", "--set", "target_kl=none"], "needs target_kl"),
        (
            vec!["train", "CartPole-v1", "--algo", "ppg", "--set", "shared_trunk=true"],
            "separate policy and value networks",
        ),
        (vec!["train", "CartPole-v1", "--algo", "ppg", "--backend", "fused"], "does not cover algo = `ppg`"),
        (vec!["train", "CartPole-v1", "--algo", "ppg", "--set", "n_epochs=3"], "runs e_policy epochs"),
        (vec!["train", "CartPole-v1", "--algo", "ppg", "--set", "num_aux_rollouts=0"], "num_aux_rollouts = 0"),
        (vec!["train", "CartPole-v1", "--algo", "ppg", "--set", "beta_clone=-1"], "beta_clone = -1"),
        (
            vec!["train", "CartPole-v1", "--algo", "ppg", "--set", "n_iteration=2", "--set", "num_aux_rollouts=129"],
            "the auxiliary buffer holds n_iteration × n_envs",
        ),
        (vec!["train", "CartPole-v1", "--set", "e_auxiliary=3"], "`e_auxiliary`"),
        (vec!["ablation", "--variants", "clip,bogus"], "unknown variant `bogus`"),
        (vec!["ablation", "--variants", "clip,clip"], "listed twice"),
        (vec!["ablation", "--variants", "clip=0.2,clip"], "are the same setting"),
        (vec!["ablation", "--seeds", "1,1"], "seed `1` is listed twice"),
        (vec!["ablation", "--envs", "CartPol-v1", "--out", "/nonexistent/never"], "unknown environment id"),
        (vec!["ablation", "--jobs", "0"], "--jobs must be at least 1"),
        (vec!["ablation", "--set", "n_step=3"], "did you mean `n_steps`"),
    ] {
        let (code, _, se) = proxima(&args);
        assert_eq!(code, 1, "{args:?}: {se}");
        assert!(se.contains(want), "{args:?}: {se}");
    }
}

/// A tiny ablation end to end: runs, tables and one plot per env.
#[test]
fn ablation_writes_tables_and_plots() {
    let out = tmp("ablation").join("out");
    let (code, so, se) = proxima(&[
        "ablation",
        "--envs",
        "CartPole-v1,Pendulum-v1",
        "--variants",
        "clip,none",
        "--seeds",
        "1",
        "--total-timesteps",
        "600",
        "--preset",
        "cleanrl",
        "--set",
        "n_steps=64",
        "--set",
        "batch_size=64",
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("| setting | CartPole-v1 | Pendulum-v1 | average |"), "{so}");
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
    for f in ["results.md", "curves_CartPole-v1.png", "curves_Pendulum-v1.png"] {
        let bytes = std::fs::read(out.join(f)).unwrap();
        assert!(bytes.len() > 300, "{f}");
    }
    assert_eq!(&std::fs::read(out.join("curves_CartPole-v1.png")).unwrap()[1..4], b"PNG");
    assert!(out.join("runs/CartPole-v1__clip__1/progress.csv").exists());
    // Another ablation's --out is refused, nothing overwritten; so is a folder of other files.
    let (code, _, se) = proxima(&["ablation", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(se.contains("holds another ablation"), "{se}");
    let (code, _, se) = proxima(&["ablation", "--out", out.join("runs").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(se.contains("is not empty"), "{se}");
}

/// `proxima lm`: the whole pipeline end to end at toy sizes (sft → rm → grpo and ppo → eval),
/// each run directory complete, and bad input refused with a clear error before any work.
#[test]
fn lm_pipeline_and_its_bad_inputs() {
    let d = tmp("lm");
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let ok = |args: &[&str]| {
        let (code, so, se) = proxima(args);
        assert_eq!(code, 0, "proxima {args:?} failed:\n{so}\n{se}");
        so
    };
    let so = ok(&["lm", "sft", "--steps", "3", "--eval-every", "1", "--run-dir", &p("sft"), "-q"]);
    assert!(so.contains("held-out greedy accuracy"), "{so}");
    let csv = std::fs::read_to_string(d.join("sft/progress.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "header + one row per step:\n{csv}");
    assert!(csv.starts_with("step,loss,held_out_accuracy,sampled_accuracy,seconds"));
    for f in ["config.json", "model.safetensors"] {
        assert!(d.join("sft").join(f).is_file(), "{f}");
    }
    assert!(std::fs::read_dir(d.join("sft")).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("events.out.tfevents")));
    let so = ok(&["lm", "rm", "--sft", &p("sft"), "--steps", "2", "--run-dir", &p("rm"), "-q"]);
    assert!(so.contains("held_out_pairwise_accuracy"), "{so}");
    ok(&[
        "lm",
        "grpo",
        "--sft",
        &p("sft"),
        "--steps",
        "2",
        "--prompts",
        "2",
        "--group-size",
        "2",
        "--micro-batch",
        "3",
        "--run-dir",
        &p("grpo"),
        "-q",
    ]);
    let csv = std::fs::read_to_string(d.join("grpo/progress.csv")).unwrap();
    assert!(csv.starts_with("step,reward_mean,flat_group_fraction,kl_k3,loss,held_out_accuracy"), "{csv}");
    ok(&[
        "lm",
        "ppo",
        "--sft",
        &p("sft"),
        "--rm",
        &p("rm"),
        "--steps",
        "2",
        "--prompts",
        "4",
        "--batch-size",
        "2",
        "--kl-target",
        "1",
        "--freezing-actor-steps",
        "1",
        "--run-dir",
        &p("ppo"),
        "-q",
    ]);
    assert!(d.join("ppo/critic.safetensors").is_file());
    let csv = std::fs::read_to_string(d.join("ppo/progress.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains("kl_per_token") && csv.lines().count() == 3,
        "header, step 0, step 2:\n{csv}"
    );
    // DPO on the reward model's very pairs; evaluated against π_ref.
    let so = ok(&[
        "lm",
        "dpo",
        "--sft",
        &p("sft"),
        "--pairs",
        &p("rm"),
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--eval-every",
        "1",
        "--run-dir",
        &p("dpo"),
        "-q",
    ]);
    assert!(so.contains("held_out_reward_accuracy") && so.contains("kl_to_reference"), "{so}");
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("dpo/config.json")).unwrap()).unwrap();
    assert_eq!((cfg["command"].as_str(), cfg["args"]["labeller"].as_str()), (Some("dpo"), Some("graded")));
    let csv = std::fs::read_to_string(d.join("dpo/progress.csv")).unwrap();
    assert!(
        csv.starts_with("step,loss,batch_reward_accuracy,batch_margin,held_out_accuracy") && csv.lines().count() == 4,
        "{csv}"
    );
    let so = ok(&["lm", "eval", &p("dpo"), "--reference", &p("sft"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(so.trim()).unwrap();
    assert!(v["kl_to_reference"].as_f64().unwrap().is_finite() && v["held_out_sampled_accuracy"].as_f64().is_some());
    let so = ok(&["lm", "eval", &p("sft"), "--reference", &p("sft"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(so.trim()).unwrap();
    assert_eq!(v["kl_to_reference"].as_f64(), Some(0.0), "π_ref against itself");

    let (code, _, se) = proxima(&["lm", "resume", &p("sft")]);
    assert!(code == 1 && se.contains("is complete"), "a finished run is not resumed: {se}");
    let so = ok(&["lm", "eval", &p("ppo"), "--prompt", "47+85=", "--json"]);
    let v: serde_json::Value = serde_json::from_str(so.trim()).unwrap();
    assert!((0.0..=1.0).contains(&v["held_out_accuracy"].as_f64().unwrap()));
    assert_eq!(v["answers"][0]["prompt"], "47+85=");
    let a = v["answers"][0]["answer"].as_str().unwrap();
    let raw = v["answers"][0]["raw"].as_str().unwrap();
    assert_eq!(a.chars().rev().collect::<String>(), raw.trim_end_matches('$'), "answer = raw digits reversed");
    assert_eq!(v["answers"][0]["correct"].as_bool().unwrap(), a == "132");

    // Bad input: one clear line, exit 1, and no run directory left behind.
    std::fs::write(d.join("garbage.safetensors"), b"not a safetensors file").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["rm".into(), "--sft".into(), p("missing")], "No such file"),
        (
            vec!["ppo".into(), "--sft".into(), p("sft"), "--rm".into(), p("sft")],
            "holds a model of kind `sft`; expected rm",
        ),
        (
            vec!["ppo".into(), "--sft".into(), p("rm"), "--rm".into(), p("rm")],
            "holds a model of kind `rm`; expected sft",
        ),
        (
            vec!["grpo".into(), "--sft".into(), p("sft"), "--group-size".into(), "1".into()],
            "group_size must be at least 2",
        ),
        (
            vec!["grpo".into(), "--sft".into(), p("sft"), "--aggregation".into(), "sum".into()],
            "unknown aggregation `sum`",
        ),
        (vec!["grpo".into(), "--sft".into(), p("garbage.safetensors")], "not a valid safetensors file"),
        (vec!["sft".into(), "--learning-rate=-1".into()], "learning_rate must be a positive number"),
        (vec!["eval".into(), p("sft"), "--prompt".into(), "1+2=".into()], "not a prompt of the form ab+cd="),
        (vec!["eval".into(), p("rm")], "holds a model of kind `rm`"),
        (
            vec!["rm".into(), "--sft".into(), p("sft"), "--init".into(), p("rm")],
            "holds a model of kind `rm`; expected sft",
        ),
        (vec!["grpo".into(), "--sft".into(), p("sft"), "--beta".into(), "inf".into()], "beta must be a finite number"),
        (
            vec!["grpo".into(), "--sft".into(), p("sft"), "--prompts".into(), "100000000".into()],
            "prompts × group_size must be at most",
        ),
        (vec!["sft".into(), "--batch-size".into(), "1000000000".into()], "batch_size must be at most"),
        (vec!["sft".into(), "--learning-rate".into(), "-1".into()], "learning_rate must be a positive number"),
        (vec!["eval".into(), p("sft"), "--prompt".into(), "12++5=".into()], "not a prompt of the form ab+cd="),
        (
            vec!["ppo".into(), "--sft".into(), p("sft"), "--verifiable-reward".into(), "--steps".into(), "3".into()],
            "freezing_actor_steps must be less than steps",
        ),
        (vec!["sft".into(), "--run-dir".into(), p("sft")], "already holds files"),
        (vec!["dpo".into(), "--sft".into(), p("sft"), "--pairs".into(), p("sft")], "not a reward-model (`lm rm`) run"),
        (
            vec!["dpo".into(), "--sft".into(), p("grpo"), "--pairs".into(), p("rm")],
            "its pairs were drawn from the SFT run",
        ),
        (vec!["dpo".into(), "--sft".into(), p("sft"), "--beta".into(), "0".into()], "beta must be a positive number"),
        (vec!["dpo".into(), "--sft".into(), p("rm")], "holds a model of kind `rm`; expected sft"),
        (vec!["dpo".into(), "--sft".into(), p("sft"), "--pairs".into(), p("missing")], "No such file"),
        (vec!["eval".into(), p("dpo"), "--reference".into(), p("dpo")], "holds a model of kind `dpo`; expected sft"),
        (
            vec!["ppo".into(), "--sft".into(), p("sft"), "--rm".into(), p("rm"), "--clip-range-vf".into(), "x".into()],
            "--clip-range-vf `x`",
        ),
    ];
    for (i, (args, want)) in cases.iter().enumerate() {
        let run_dir = p(&format!("bad{i}"));
        let mut full: Vec<&str> = vec!["lm"];
        full.extend(args.iter().map(String::as_str));
        if args[0] != "eval" && !args.contains(&"--run-dir".to_string()) {
            full.extend(["--run-dir", run_dir.as_str(), "-q"]);
        }
        let (code, _, se) = proxima(&full);
        assert_eq!(code, 1, "{full:?}: {se}");
        assert!(se.contains(want), "{full:?}: expected `{want}` in:\n{se}");
        assert!(!Path::new(&run_dir).join("config.json").exists(), "{full:?} wrote a run directory");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `--seeds`: one run per seed in one parent directory with a summary and a plot, each seed the
/// same as its single run; `--resume PARENT` finishes what is missing exactly (a seed from its
/// checkpoint, a seed that never started from nothing); bad seed lists are clear errors.
#[test]
fn many_seeds_at_once_and_their_resume() {
    let d = tmp("seeds");
    let parent = d.join("parent");
    let common = [
        "--total-timesteps",
        "512",
        "--quiet",
        "--set",
        "n_envs=2",
        "--set",
        "n_steps=64",
        "--set",
        "batch_size=32",
        "--set",
        "checkpoint_freq=2",
        "--set",
        "eval_episodes=2",
    ];
    let mut args =
        vec!["train", "CartPole-v1", "--seeds", "3,5-6", "--jobs", "2", "--run-dir", parent.to_str().unwrap()];
    args.extend(common);
    let (code, so, se) = proxima(&args);
    assert_eq!(code, 0, "{so}{se}");
    assert!(so.contains("trained 3 seeds") && so.contains("IQM"), "{so}");
    for f in [
        "seeds.toml",
        "summary.md",
        "summary.csv",
        "learning_curves.png",
        "seed_3/model.safetensors",
        "seed_6/eval.json",
    ] {
        assert!(parent.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(parent.join("summary.csv")).unwrap();
    assert!(csv.starts_with("seed,final_return") && csv.contains("\n5,") && csv.contains("\niqm,"), "{csv}");
    // Seed 5 equals the single run with --seed 5.
    let single = d.join("single");
    let mut args = vec!["train", "CartPole-v1", "--seed", "5", "--run-dir", single.to_str().unwrap()];
    args.extend(common);
    assert_eq!(proxima(&args).0, 0);
    let model = |p: &Path| weights(&p.join("model.safetensors"));
    assert_eq!(model(&single), model(&parent.join("seed_5")));
    // Break two seeds: 5 loses its end (model, eval, the last checkpoint), 6 never started.
    let broken = d.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    for e in std::fs::read_dir(&parent).unwrap() {
        let e = e.unwrap();
        let to = broken.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
    for f in ["seed_5/model.safetensors", "seed_5/eval.json", "seed_5/checkpoints/update_000004.safetensors"] {
        std::fs::remove_file(broken.join(f)).unwrap();
    }
    std::fs::remove_dir_all(broken.join("seed_6")).unwrap();
    let (code, so, se) = proxima(&["train", "--resume", broken.to_str().unwrap(), "--quiet"]);
    assert_eq!(code, 0, "{so}{se}");
    for s in ["seed_3", "seed_5", "seed_6"] {
        assert_eq!(model(&parent.join(s)), model(&broken.join(s)), "{s} after --resume");
    }
    // A damaged final model (eval.json still there) is trained again from the last checkpoint.
    let m5 = broken.join("seed_5/model.safetensors");
    let bytes = std::fs::read(&m5).unwrap();
    std::fs::write(&m5, &bytes[..100]).unwrap();
    let (code, so, se) = proxima(&["train", "--resume", broken.to_str().unwrap(), "--quiet"]);
    assert_eq!(code, 0, "{so}{se}");
    assert_eq!(model(&parent.join("seed_5")), model(&broken.join("seed_5")), "seed_5 rebuilt");
    // A manifest that does not describe its seeds is refused, naming the problem.
    let manifest = broken.join("seeds.toml");
    let good = std::fs::read_to_string(&manifest).unwrap();
    for (from, to, says) in [
        ("seeds = [3, 5, 6]", "seeds = [3, 3]", "listed twice"),
        ("seeds = [3, 5, 6]", "seeds = []", "must list 1 to"),
        ("env_id = \"CartPole-v1\"", "env_id = \"Acrobot-v1\"", "says Acrobot-v1"),
    ] {
        assert!(good.contains(from), "{good}");
        std::fs::write(&manifest, good.replace(from, to)).unwrap();
        let (code, _, se) = proxima(&["train", "--resume", broken.to_str().unwrap(), "--quiet"]);
        assert!(code != 0 && se.contains(says), "{to}: {se}");
    }
    std::fs::write(&manifest, good).unwrap();
    // Bad input.
    for (seeds, says) in [("5-2", "backwards"), ("1,1", "twice"), ("x", "not a seed"), ("0-99999", "more than")] {
        let (code, _, se) =
            proxima(&["train", "CartPole-v1", "--seeds", seeds, "--run-dir", d.join("bad").to_str().unwrap()]);
        assert!(code != 0 && se.contains(says), "--seeds {seeds}: {se}");
        assert!(!d.join("bad").exists(), "nothing is created on bad input");
    }
    let (code, _, se) = proxima(&["train", "CartPole-v1", "--seeds", "1-2", "--jobs", "0"]);
    assert!(code != 0 && se.contains("--jobs must be at least 1"), "{se}");
    let (code, _, se) = proxima(&["train", "CartPole-v1", "--jobs", "2"]);
    assert!(code != 0 && se.contains("needs --seeds"), "{se}");
    let (code, _, se) = proxima(&["train", "CartPole-v1", "--seeds", "1-2", "--seed", "4"]);
    assert!(code == 2 && se.contains("cannot be used with"), "{se}");
    let (code, _, se) = proxima(&["train", "--resume", parent.to_str().unwrap(), "--total-timesteps", "9"]);
    assert!(code != 0 && se.contains("--total-timesteps cannot change a multi-seed run"), "{se}");
    std::fs::remove_dir_all(&d).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// An off-policy run continued from its run directory (after it finished, with a larger
/// --total-timesteps; a Ctrl-C leaves the same two files: model.safetensors and the checkpoint
/// of the same update) takes the checkpoint with its replay buffer and ends with the weights of
/// the run that never stopped; its budget is the one asked for, not rounded up to iterations.
#[test]
fn off_policy_runs_continue_exactly_from_their_run_directory() {
    let root = tmp("offpolicy-continue");
    let run = |dir: &Path, total: &str| {
        let d = dir.to_str().unwrap();
        let args = [
            "train",
            "Pendulum-v1",
            "--algo",
            "sac",
            "--seed",
            "5",
            "--total-timesteps",
            total,
            "--quiet",
            "--run-dir",
            d,
            "--set",
            "learning_starts=50",
            "--set",
            "net_arch=[16, 16]",
            "--set",
            "batch_size=32",
            "--set",
            "eval_episodes=0",
        ];
        let (code, _, se) = proxima(&args);
        assert_eq!(code, 0, "{se}");
    };
    let (full, part) = (root.join("full"), root.join("part"));
    run(&full, "450");
    run(&part, "230");
    let progress = std::fs::read_to_string(part.join("progress.csv")).unwrap();
    assert!(progress.lines().last().unwrap().starts_with("230,3,"), "230 steps, not 300: {progress}");
    let (code, _, se) = proxima(&["train", "--resume", part.to_str().unwrap(), "--total-timesteps", "450", "--quiet"]);
    assert_eq!(code, 0, "{se}");
    assert!(!se.contains("empty buffer"), "the replay buffer was found: {se}");
    use proxima::policy::Policy;
    let params = |p: &Path| {
        let ck = proxima::checkpoint::load(p).unwrap();
        ck.build_network(proxima::policy::Backend::Auto).unwrap().params().unwrap()
    };
    assert_eq!(params(&full.join("model.safetensors")), params(&part.join("model.safetensors")));
    let last = std::fs::read_to_string(part.join("progress.csv")).unwrap();
    assert!(last.lines().last().unwrap().starts_with("450,"), "{last}");
}

#[test]
fn a_closed_stdout_ends_quietly_with_sigpipes_code() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // as `proxima envs | head -0`: nobody reads
    let out = Command::new(env!("CARGO_BIN_EXE_proxima"))
        .arg("envs")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let se = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{se}");
    assert!(!se.contains("panicked"), "{se}");
}

/// Started by an MPI launcher (its environment variables) but built without the `mpi` feature:
/// a clear error naming the feature, not a single-process run that each rank would repeat; a
/// launch of one process (`PMI_SIZE=1`: `mpirun -np 1`, or a variable left in a shell) is a plain
/// run, with a note. With the feature, `tests/mpi.rs` covers mpirun.
#[cfg(not(feature = "mpi"))]
#[test]
fn mpirun_without_the_mpi_feature_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_proxima"))
        .args(["train", "CartPole-v1", "--total-timesteps", "512", "--quiet"])
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .unwrap();
    let se = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{se}");
    assert!(se.contains("OMPI_COMM_WORLD_SIZE=2") && se.contains("--features mpi"), "{se}");
    let dir = std::env::temp_dir().join(format!("proxima-cli-pmi1-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_proxima"))
        .args(["train", "CartPole-v1", "--total-timesteps", "512", "--quiet", "--run-dir", dir.to_str().unwrap()])
        .env("PMI_SIZE", "1")
        .output()
        .unwrap();
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && se.contains("PMI_SIZE=1 is set; this build has no MPI, so this is a plain run"),
        "{se}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `proxima export --onnx`: a run directory's policy as an ONNX model (checked against
/// onnxruntime in tests/python/test_onnx.py), its inputs and outputs printed; bad inputs are
/// clear errors that write nothing.
#[test]
fn export_writes_an_onnx_model_and_refuses_bad_input() {
    let dir = tmp("export");
    tiny_run(&dir, "4");
    let out = dir.join("policy.onnx");
    let (code, so, se) = proxima(&["export", dir.to_str().unwrap(), "--onnx", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{so}\n{se}");
    assert!(so.contains("input obs: float32 [batch, 4]") && so.contains("output action: int64 [batch]"), "{so}");
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.len() > 4 * 64 * 4, "the weights are inside: {} bytes", bytes.len());
    let fail = |args: &[&str], expected: &str| {
        let (code, _, se) = proxima(args);
        assert!(code == 1 || code == 2, "{args:?}: exit {code} (1: an error, 2: a usage error)");
        assert!(se.contains(expected), "{args:?}: {se}");
    };
    let empty = tmp("export-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let x = empty.join("x.onnx");
    fail(&["export", empty.to_str().unwrap(), "--onnx", x.to_str().unwrap()], "holds no checkpoint");
    let nowhere = dir.join("no").join("such").join("x.onnx");
    fail(&["export", dir.to_str().unwrap(), "--onnx", nowhere.to_str().unwrap()], "does not exist");
    fail(&["export", dir.to_str().unwrap()], "--onnx");
    fail(&["export", dir.to_str().unwrap(), "--onnx", empty.to_str().unwrap()], "is a directory; give a file path");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "nothing written");
}
