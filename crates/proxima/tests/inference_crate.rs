//! The inference crate `proxima-policy` against the training stack: a checkpoint loaded by
//! `proxima_policy::Policy` acts exactly as the trainer's own network does in
//! `predict(deterministic=True)` (observation normalisation, the deterministic action, the
//! action made ready for the env) — the same bits on 1,000 observations — for each policy kind
//! it covers; what it does not cover, and bad files and inputs, are clear errors.

use proxima::config::Config;
use proxima::policy::Policy;
use proxima::train::Trainer;
use rand::{Rng, SeedableRng};

fn cfg(preset: &str, sets: &[&str]) -> Config {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::resolve(preset, None, &sets).unwrap().into_config()
}

/// Trains a little, saves, and compares `proxima_policy`'s actions with the trainer's own.
fn same_actions(env: &str, cfg: Config, scale: f32, tag: &str) -> Vec<f32> {
    let mut tr = Trainer::new(env, cfg).unwrap();
    for _ in 0..3 {
        if !tr.is_done() {
            tr.step().unwrap();
        }
    }
    let path = std::env::temp_dir().join(format!("proxima-inference-{tag}-{}.safetensors", std::process::id()));
    tr.save(&path).unwrap();
    let loaded = proxima_policy::Policy::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let d = tr.policy.spec().obs_dim;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let obs: Vec<f32> = (0..1000 * d).map(|_| rng.random_range(-1.0f32..1.0) * scale).collect();
    let mut x = obs.clone();
    if tr.collector.norm.is_active() {
        tr.collector.norm.normalize_obs(&mut x);
    }
    let mut unused = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut want = tr.policy.act(&x, true, &mut unused).unwrap().actions;
    let w = want.len() / 1000;
    want.chunks_exact_mut(w).for_each(|a| tr.policy.env_action(a));
    let got = loaded.act(&obs).unwrap();
    assert_eq!(loaded.action_width(), w, "{tag}");
    let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "{tag}: proxima-policy's actions differ from the trainer's");
    got
}

#[test]
fn the_inference_crate_acts_as_the_trainer_bit_for_bit() {
    let small = ["n_envs=2", "n_steps=64", "batch_size=64", "total_timesteps=384"];
    let mut sets = small.to_vec();
    sets.push("normalize_observation=true");
    let a = same_actions("CartPole-v1", cfg("cleanrl", &sets), 3.0, "discrete");
    assert!(a.contains(&0.0) && a.contains(&1.0), "both actions occur");
    let a = same_actions("Pendulum-v1", cfg("cleanrl", &sets), 30.0, "gaussian");
    assert!(a.iter().any(|v| v.abs() < 2.0), "{a:?}");
    sets.extend(["shared_trunk=true", "activation=relu", "net_arch=[32]"]);
    same_actions("Acrobot-v1", cfg("cleanrl", &sets), 3.0, "shared-relu");
    let off = ["n_steps=50", "batch_size=32", "net_arch=[16, 16]", "learning_starts=100", "total_timesteps=300"];
    for algo in ["sac", "td3", "ddpg", "tqc"] {
        let a = same_actions("Pendulum-v1", cfg(algo, &off), 3.0, algo);
        assert!(a.iter().all(|v| (-2.0..=2.0).contains(v)), "{algo}: in the Box");
    }
}

#[test]
fn the_inference_crate_refuses_what_it_cannot_run_and_bad_input() {
    let dir = std::env::temp_dir().join(format!("proxima-inference-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = |p: &std::path::Path| proxima_policy::Policy::load(p).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(&dir.join("missing.safetensors")).contains("missing.safetensors"));
    std::fs::write(dir.join("junk.safetensors"), b"not a checkpoint").unwrap();
    assert!(err(&dir.join("junk.safetensors")).contains("not a safetensors file"));
    let recurrent = cfg("cleanrl", &["policy=MlpLstmPolicy", "n_envs=2", "n_steps=16", "batch_size=32"]);
    let tr = Trainer::new("CartPole-v1", recurrent).unwrap();
    tr.save(&dir.join("lstm.safetensors")).unwrap();
    let e = err(&dir.join("lstm.safetensors"));
    assert!(e.contains("recurrent policy") && e.contains("proxima export --onnx"), "{e}");
    let tr = Trainer::new("CartPole-v1", cfg("cleanrl", &["n_envs=2", "n_steps=16", "batch_size=32"])).unwrap();
    tr.save(&dir.join("mlp.safetensors")).unwrap();
    let p = proxima_policy::Policy::load(&dir.join("mlp.safetensors")).unwrap();
    let bad = |r: Result<Vec<f32>, proxima_policy::Error>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(bad(p.act(&[0.0; 5])).contains("not rows of 4"));
    assert!(bad(p.act(&[0.0, f32::NAN, 0.0, 0.0])).contains("non-finite"));
    assert!(bad(p.act_masked(&[0.0; 4], Some(&[0, 0]))).contains("no valid action"));
    assert_eq!(p.act_masked(&[0.0; 4], Some(&[0, 1])).unwrap(), [1.0], "a mask leaves one action");
    assert!(bad(p.act_masked(&[0.0; 4], Some(&[2, 1]))).contains("masks are 1 (valid) or 0"));
    // A parameter holding NaN: refused at load, naming it, as the trainer refuses such a checkpoint.
    let mut net = tr.policy;
    let mut params = net.params().unwrap();
    let k = net.param_shapes().iter().position(|(n, _)| n == "actor.0.bias").unwrap();
    params[k][0] = f32::NAN;
    net.set_params(&params).unwrap();
    let meta = proxima::checkpoint::CheckpointMeta {
        env_id: "CartPole-v1".into(),
        policy: net.spec().clone(),
        config_toml: String::new(),
        global_step: 0,
        update: 0,
        extra: Default::default(),
    };
    proxima::checkpoint::save(&dir.join("nan.safetensors"), &net, &[], &meta).unwrap();
    assert!(err(&dir.join("nan.safetensors")).contains("parameter `actor.0.bias` holds non-finite values"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `CnnPolicy` (the Nature CNN on 2 × 36 × 36 frames) with a random head, discrete and
/// continuous: the inference crate's actions are the fused backend's bits.
#[test]
fn the_inference_crate_runs_the_nature_cnn_as_the_fused_backend() {
    use proxima::checkpoint::{save, CheckpointMeta};
    use proxima::policy::{ActionKind, Activation, Backend, ImageShape, Network, PolicySpec};
    let image = ImageShape { channels: 2, height: 36, width: 36 };
    let d = 2 * 36 * 36;
    let actions =
        [ActionKind::Discrete { n: 5 }, ActionKind::Continuous { dim: 2, low: vec![-1.0, -0.5], high: vec![1.0, 0.5] }];
    for (i, action) in actions.into_iter().enumerate() {
        let spec = PolicySpec {
            cnn: Some(image),
            net_arch: vec![],
            activation: Activation::Relu,
            shared_trunk: true,
            ..PolicySpec::mlp(d, action, vec![])
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut net = Network::new(spec.clone(), Backend::Fused, &mut rng).unwrap();
        let mut params = net.params().unwrap();
        let head = net.param_shapes().iter().position(|(n, _)| n == "actor.weight").unwrap();
        params[head].iter_mut().for_each(|w| *w = rng.random_range(-0.3f32..0.3));
        net.set_params(&params).unwrap();
        let meta = CheckpointMeta {
            env_id: "frames".into(),
            policy: spec,
            config_toml: String::new(),
            global_step: 0,
            update: 0,
            extra: Default::default(),
        };
        let path = std::env::temp_dir().join(format!("proxima-inference-cnn{i}-{}.safetensors", std::process::id()));
        save(&path, &net, &[], &meta).unwrap();
        let loaded = proxima_policy::Policy::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let obs: Vec<f32> =
            (0..64 * d).map(|_| f32::from(rng.random::<u8>()) * rng.random_range(0.0f32..1.0)).collect();
        let mut unused = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let mut want = net.act(&obs, true, &mut unused).unwrap().actions;
        let w = want.len() / 64;
        want.chunks_exact_mut(w).for_each(|a| net.env_action(a));
        let got = loaded.act(&obs).unwrap();
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "case {i}: {got:?} vs {want:?}");
        if i == 0 {
            assert!(got.iter().any(|&a| a != got[0]), "the argmax varies: the comparison is not vacuous");
        }
    }
}
