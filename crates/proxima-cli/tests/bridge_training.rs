//! Training, resuming and evaluating with recording on Python Gymnasium envs through the bridge
//! (`crates/proxima-gym/tests/toy_envs.py`). They need a Python with gymnasium (the Atari test:
//! also ale-py): ignored by a plain `cargo test`, run by `cargo test -- --include-ignored` (as
//! `.ci/run` does), where they fail if it is missing.

#[path = "../../proxima-gym/tests/common/mod.rs"]
mod common;

use proxima::config::{AlgoName, Config};
use proxima::env::make;
use proxima::train::Trainer;

fn setup() {
    common::setup(concat!(env!("CARGO_MANIFEST_DIR"), "/../proxima-gym/tests"))
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn ppo_trains_on_a_bridged_env_and_resumes_through_make() {
    setup();
    let cfg = Config::resolve(
        "cleanrl",
        None,
        &["n_envs=2".into(), "n_steps=16".into(), "batch_size=8".into(), "total_timesteps=64".into()],
    )
    .unwrap();
    let mut tr = Trainer::new("gym:toy_envs:toy/BoxBox-v0", cfg).unwrap();
    while !tr.is_done() {
        let r = tr.step().unwrap();
        assert!(r.stats.policy_loss.is_finite());
    }
    assert_eq!(tr.global_step, 64);
    // Resume restores Proxima's side (weights, optimiser, counters, statistics) and starts
    // fresh episodes in the bridged envs.
    let path = std::env::temp_dir().join(format!("proxima-gym-resume-{}.safetensors", std::process::id()));
    tr.save(&path).unwrap();
    let ck = proxima::checkpoint::load(&path).unwrap();
    let mut resumed = Trainer::resume(&ck, Some(128)).unwrap();
    assert_eq!((resumed.update, resumed.global_step), (tr.update, 64));
    while !resumed.is_done() {
        resumed.step().unwrap();
    }
    assert_eq!(resumed.global_step, 128);
    let _ = std::fs::remove_file(&path);
}

/// Bridged envs stepped as one vector env (`vector_env = "sync"`, `"async"`: Gymnasium's, and
/// `"subproc"`: Proxima's worker processes) train exactly as the same envs bridged one by one (`"off"`, the default): the
/// same weights bit for bit after a few updates (same-step autoreset and final-observation
/// bootstrap kept).
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn training_on_a_gymnasium_vector_env_matches_envs_bridged_one_by_one() {
    use proxima::policy::Policy;
    setup();
    let id = "gym:toy_envs:toy/BoxDiscrete-v0"; // 10-step episodes: truncations in every rollout
    let cfg = |mode: &str| {
        let sets = ["n_envs=3", "n_steps=16", "batch_size=16", "total_timesteps=192", &format!("vector_env={mode}")];
        Config::resolve("cleanrl", None, &sets.map(String::from)).unwrap()
    };
    let train = |mut tr: Trainer| {
        while !tr.is_done() {
            tr.step().unwrap();
        }
        (tr.policy.params().unwrap(), tr.collector.stats.return_mean())
    };
    let off = Trainer::new(id, cfg("off")).unwrap();
    assert_eq!(off.collector.venv.envs().len(), 3, "off: three env objects");
    let one_by_one = train(off);
    for mode in ["sync", "async", "subproc"] {
        let tr = Trainer::new(id, cfg(mode)).unwrap();
        assert!(tr.collector.venv.envs().is_empty(), "{mode}: one vector env, not three env objects");
        assert_eq!(train(tr), one_by_one, "vector_env = {mode}");
    }
    for mode in ["sync", "async", "subproc"] {
        let e = Trainer::new("CartPole-v1", cfg(mode)).err().unwrap().to_string();
        assert!(e.contains(&format!("vector_env = `{mode}`")) && e.contains("is not a `gym:` id"), "{e}");
        let mut a3c = cfg(mode).into_config();
        a3c.algo = AlgoName::A3c;
        let e = Trainer::new(id, a3c).err().unwrap().to_string();
        assert!(e.contains("algo = `a3c` does not support vector_env"), "{e}");
    }
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn evaluate_records_a_gif_of_a_bridged_env() {
    setup();
    use proxima::policy::{ActionKind, ActorCritic, PolicySpec};
    use rand::SeedableRng;
    let env = make("gym:toy_envs:toy/Renders-v0").unwrap();
    let spec = PolicySpec::mlp(3, ActionKind::from_space(&env.action_space()).unwrap(), vec![8]);
    let policy =
        ActorCritic::new(spec, &candle_core::Device::Cpu, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap();
    let dir = std::env::temp_dir().join(format!("proxima-bridge-gif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = proxima::train::Recording { path: dir.join("toy.gif"), episodes: 1, fps: None };
    let plain = proxima::train::evaluate(&policy, "gym:toy_envs:toy/Renders-v0", (2, true, 7), None, false).unwrap();
    let recorded = proxima::train::evaluate_recorded(
        &policy,
        "gym:toy_envs:toy/Renders-v0",
        (2, true, 7),
        None,
        false,
        Some(&rec),
    )
    .unwrap();
    assert_eq!(plain, recorded, "recording must not change the rollout");
    // One frame after reset and one per step of the 10-step episode; 25 fps = 4/100 s delays.
    let mut dec = gif::DecodeOptions::new();
    dec.set_color_output(gif::ColorOutput::RGBA);
    let mut d = dec.read_info(std::fs::File::open(&rec.path).unwrap()).unwrap();
    let mut n = 0;
    while let Some(f) = d.read_next_frame().unwrap() {
        assert_eq!((f.width, f.height, f.delay), (6, 4, 4));
        n += 1;
    }
    assert_eq!(n, 11);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Panics when the bridge's Python has no ale-py.
fn has_ale() {
    let py = proxima_gym::python_executable();
    let ok = std::process::Command::new(&py)
        .args(["-c", "import gymnasium, ale_py"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(ok, "{}", common::missing(&py, "gymnasium, ale_py"));
}

/// PPO with `CnnPolicy` on Breakout (the paper's Atari setting at toy size: 36 × 36 frames, 2
/// stacked, for the debug build's sake): uint8 observations stored as bytes, the Nature CNN's
/// parameters on the fused kernels (the default), finite updates, the same weights from the same
/// seed; CnnPolicy refused on a non-image env.
#[test]
#[ignore = "needs a Python with gymnasium and ale-py (PROXIMA_PYTHON; .ci/run installs them)"]
fn ppo_with_the_nature_cnn_trains_on_an_atari_game() {
    use proxima::policy::Policy;
    setup();
    has_ale();
    let sets = ["n_envs=2", "n_steps=16", "batch_size=16", "n_epochs=1", "total_timesteps=64"];
    let cfg = Config::resolve("paper-atari", None, &sets.map(String::from)).unwrap();
    let id = "atari:Breakout?screen_size=36&frame_stack=2";
    let run = || {
        let mut tr = Trainer::new(id, cfg.clone()).unwrap();
        assert_eq!(tr.collector.venv.observation_space(), &proxima::env::Space::image(&[2, 36, 36]));
        assert!(matches!(tr.buffer().observations, proxima::rollout::Observations::U8(_)));
        while !tr.is_done() {
            let r = tr.step().unwrap();
            assert!(r.stats.policy_loss.is_finite() && r.stats.value_loss.is_finite());
        }
        tr
    };
    let (a, b) = (run(), run());
    let shapes = a.policy.param_shapes();
    assert_eq!(shapes[0], ("network.0.weight".to_string(), vec![32, 2, 8, 8]));
    assert_eq!(shapes[6], ("network.7.weight".to_string(), vec![512, 64]), "36 → 8 → 3 → 1");
    assert_eq!(a.policy.params().unwrap(), b.policy.params().unwrap(), "same seed, other weights");

    let e = Trainer::new("CartPole-v1", cfg.clone()).err().unwrap().to_string();
    assert!(e.contains("CnnPolicy` needs image observations") && e.contains("Box(-"), "{e}");
    assert_eq!(a.policy.backend(), proxima::policy::Backend::Fused, "auto picks the fused CNN");
    // The same flat size in another image shape (8 × 18 × 18 = 2 × 36 × 36) is no fit for evaluation.
    let other = "atari:Breakout?screen_size=18&frame_stack=8";
    let e = proxima::train::evaluate(&a.policy, other, (1, true, 1), None, false).err().unwrap().to_string();
    assert!(e.contains("as 2×36×36") && e.contains("does not fit") && e.contains("[8, 18, 18]"), "{e}");
}

/// PPO on a Gymnasium env with sb3-contrib's `action_masks()` trains masked, with the env's
/// own method, through sb3-contrib's `ActionMasker` wrapper, with 0/1 integer masks, and from
/// a Gymnasium vector env (sync and async) and Proxima's worker processes (subproc): the strict
/// game raises on any masked action, so
/// finishing is the proof that none was taken; and it learns what the masks leave to learn.
#[test]
#[ignore = "needs a Python with gymnasium and sb3-contrib (PROXIMA_PYTHON; .ci/run installs them)"]
fn masked_ppo_trains_on_bridged_envs_with_action_masks() {
    setup();
    let cfg = |steps: u64, mode: &str| {
        let sets = [
            format!("total_timesteps={steps}"),
            "learning_rate=1e-3".into(),
            format!("vector_env={mode}"),
            "eval_episodes=0".into(),
        ];
        Config::resolve("cleanrl", None, &sets).unwrap()
    };
    let train = |id: &str, steps: u64, mode: &str| {
        let mut tr = Trainer::new(id, cfg(steps, mode)).unwrap_or_else(|e| panic!("{id} {mode}: {e}"));
        assert_eq!(tr.buffer().mask_dim, 6, "{id} {mode}: not trained masked");
        while !tr.is_done() {
            tr.step().unwrap_or_else(|e| panic!("{id} {mode}: {e}"));
        }
        tr.collector.stats.return_mean().unwrap()
    };
    let ret = train("gym:toy_envs:toy/PickOfTwoStrict-v0", 30_000, "off");
    assert!(ret > 14.0, "mean return {ret} (masked random play: 8, best 16)");
    for (id, mode) in [
        ("gym:toy_envs:toy/PickOfTwoMasker-v0", "off"),
        ("gym:toy_envs:toy/PickOfTwoIntMask-v0", "off"),
        ("gym:toy_envs:toy/PickOfTwoStrict-v0", "sync"),
        ("gym:toy_envs:toy/PickOfTwoStrict-v0", "async"),
        ("gym:toy_envs:toy/PickOfTwoStrict-v0", "subproc"),
        ("gym:toy_envs:toy/PickOfTwoMasker-v0", "subproc"),
    ] {
        train(id, 2_048, mode);
    }
    // The subproc workers send their envs' masks with each observation: the same run, bit for bit.
    let weights = |mode: &str| {
        use proxima::policy::Policy;
        let mut tr = Trainer::new("gym:toy_envs:toy/PickOfTwoStrict-v0", cfg(1_024, mode)).unwrap();
        while !tr.is_done() {
            tr.step().unwrap();
        }
        tr.policy.params().unwrap()
    };
    assert!(weights("subproc") == weights("off"), "vector_env = subproc trains as off");
    // Evaluation acts under the masks only for a policy that trained under them: unmasked, the
    // strict game soon sees a masked action.
    let strict = "gym:toy_envs:toy/PickOfTwoStrict-v0";
    let tr = Trainer::new(strict, cfg(256, "off")).unwrap();
    let returns = proxima::train::evaluate(&tr.policy, strict, (3, true, 1), None, true).unwrap();
    assert_eq!(returns.len(), 3);
    let e = proxima::train::evaluate(&tr.policy, strict, (3, false, 1), None, false).unwrap_err().to_string();
    assert!(e.contains("masked action"), "{e}");
}

/// Bad masks from a Python env are clear errors naming the env and what was wrong: the wrong
/// shape, a row without a valid action, a dtype that is not boolean-like (strings; numbers
/// other than 0 and 1), in the worker processes of `vector_env = "subproc"` too.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn bad_action_masks_from_python_envs_are_clear_errors() {
    setup();
    let cases = [
        ("PickOfTwoBadShape", "off", "a mask of shape [5] (5 values); expected 6"),
        ("PickOfTwoNoValid", "off", "allows no action"),
        ("PickOfTwoStrMask", "off", "a mask of dtype <U3"),
        ("PickOfTwoTwos", "sync", "numbers that are all 0 or 1"),
        ("PickOfTwoBadShape", "subproc", "a mask of shape [5] (5 values); expected 6"),
        ("PickOfTwoTwos", "subproc", "numbers that are all 0 or 1"),
    ];
    for (name, mode, expected) in cases {
        let sets = ["total_timesteps=256".to_string(), format!("vector_env={mode}")];
        let cfg = Config::resolve("cleanrl", None, &sets).unwrap();
        let id = format!("gym:toy_envs:toy/{name}-v0");
        let e = Trainer::new(&id, cfg).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(expected) && e.contains(name), "{name} {mode}: {e:?}");
    }
    // use_masking = false trains the same env unmasked (masked actions end its episodes).
    let cfg = Config::resolve("cleanrl", None, &["total_timesteps=256".into(), "use_masking=false".into()]).unwrap();
    let mut tr = Trainer::new("gym:toy_envs:toy/PickOfTwoNoValid-v0", cfg).unwrap();
    assert_eq!(tr.buffer().mask_dim, 0);
    tr.step().unwrap();
}

/// Dict observations (SB3's `MultiInputPolicy` over non-image keys: each key flattened, Discrete
/// one-hot, nested Dict and Tuple keys too, concatenated in the space's order): PPO learns a
/// task where one key decides the right action, and every vector mode trains the same weights
/// bit for bit as the envs bridged one by one.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn ppo_learns_from_dict_observations_in_every_vector_mode() {
    use proxima::policy::Policy;
    setup();
    let id = "gym:toy_envs:toy/KeyDecides-v0";
    let cfg = |steps: u64, mode: &str| {
        let sets = [
            format!("total_timesteps={steps}"),
            format!("vector_env={mode}"),
            "eval_episodes=0".into(),
            "learning_rate=1e-3".into(),
        ];
        Config::resolve("cleanrl", None, &sets).unwrap()
    };
    let train = |steps: u64, mode: &str| {
        let mut tr = Trainer::new(id, cfg(steps, mode)).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(tr.policy.spec().obs_dim, 18, "the flattened Dict: 3 + 2 + 2 + 4 + 2 + 5");
        while !tr.is_done() {
            tr.step().unwrap_or_else(|e| panic!("{mode}: {e}"));
        }
        (tr.policy.params().unwrap(), tr.collector.stats.return_mean().unwrap())
    };
    let (_, ret) = train(30_000, "off");
    assert!(ret > 9.0, "mean return {ret} (random: 3.3, best 10)");
    let one_by_one = train(1_024, "off");
    for mode in ["sync", "async", "subproc"] {
        assert_eq!(train(1_024, mode), one_by_one, "vector_env = {mode}");
    }
}

/// `norm_obs_keys` (SB3's `VecNormalize(norm_obs_keys=...)`): only the named keys' values are
/// normalised, the others (here the one-hot `cue` and the `pair` Tuple) stay as the env gave
/// them, in every vector mode; the selection is saved with the statistics. A key the env does
/// not have, and the setting on a flat observation, are clear errors.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn norm_obs_keys_normalises_only_the_named_keys() {
    setup();
    let id = "gym:toy_envs:toy/KeyDecides-v0";
    let cfg = |keys: &str, mode: &str| {
        let sets = [
            "total_timesteps=512".to_string(),
            "normalize_observation=true".into(),
            format!("norm_obs_keys={keys}"),
            format!("vector_env={mode}"),
            "eval_episodes=0".into(),
        ];
        Config::resolve("cleanrl", None, &sets).unwrap()
    };
    // Gymnasium sorts a Dict's keys: cue (3, one-hot), nested (flag 2 + level 2), noise (4), pair (2 + 5).
    let raw: Vec<bool> =
        [(true, 3), (false, 4), (false, 4), (true, 7)].iter().flat_map(|&(r, n)| std::iter::repeat_n(r, n)).collect();
    for mode in ["off", "subproc"] {
        let mut tr = Trainer::new(id, cfg(r#"["noise", "nested"]"#, mode)).unwrap_or_else(|e| panic!("{mode}: {e}"));
        while !tr.is_done() {
            tr.step().unwrap();
        }
        assert_eq!(tr.collector.norm.obs_raw, raw, "{mode}");
        for row in tr.collector.obs.chunks(18) {
            let (cue, pair) = (&row[..3], &row[11..]);
            assert!(cue.iter().chain(pair).all(|&v| v == 0.0 || v == 1.0), "{mode}: raw keys changed: {row:?}");
            assert_eq!(cue.iter().sum::<f32>(), 1.0, "{mode}: the cue stays one-hot");
        }
        let moved = tr.collector.obs.chunks(18).flat_map(|r| &r[3..11]).any(|&v| v != 0.0 && v != 1.0 && v.abs() < 5.0);
        assert!(moved, "{mode}: the named keys are normalised");
        let path = std::env::temp_dir().join(format!("proxima-norm-keys-{mode}-{}.safetensors", std::process::id()));
        tr.save(&path).unwrap();
        let saved = proxima::train::saved_normalizer(&proxima::checkpoint::load(&path).unwrap()).unwrap().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(saved.obs_raw, raw, "{mode}: saved with the statistics");
    }
    let err =
        |keys: &str, id: &str| Trainer::new(id, cfg(keys, "off")).err().map(|e| e.to_string()).unwrap_or_default();
    let e = err(r#"["noize"]"#, id);
    assert!(
        e.contains("no observation key `noize`")
            && e.contains("did you mean `noise`")
            && e.contains("cue, nested, noise, pair"),
        "{e}"
    );
    let e = err(r#"["x"]"#, "CartPole-v1");
    assert!(e.contains("norm_obs_keys selects keys of a Dict or Tuple observation"), "{e}");
}

/// Image keys in a Dict observation (SB3's `MultiInputPolicy`: a Nature CNN per image key, the
/// other keys as they are, side by side into the MLP towers): PPO learns a game the image decides,
/// on candle under `backend = "auto"`, and resumes from a checkpoint; what does not take image
/// keys yet is a clear error naming them.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn ppo_learns_from_an_image_key_in_a_dict_observation() {
    use proxima::policy::{Backend, Policy};
    setup();
    let id = "gym:toy_envs:toy/ImageDecides-v0";
    let cfg = |steps: u64, extra: &[&str]| {
        let mut sets = vec![format!("total_timesteps={steps}"), "eval_episodes=0".into(), "learning_rate=1e-3".into()];
        sets.extend(extra.iter().map(|s| s.to_string()));
        Config::resolve("cleanrl", None, &sets)
    };
    let mut tr = Trainer::new(id, cfg(12_000, &[]).unwrap()).unwrap();
    assert_eq!(tr.policy.backend(), Backend::Candle, "auto: the CNNs of image keys are on candle");
    let spec = tr.policy.spec().clone();
    let keys: Vec<(&str, Option<[usize; 3]>)> =
        spec.inputs.iter().map(|k| (k.name.as_str(), k.image.map(|i| i.chw))).collect();
    assert_eq!(keys, [("noise", None), ("screen", Some([1, 36, 36]))]);
    assert!(spec.inputs[1].image.unwrap().channels_last);
    let names: Vec<String> = spec.param_shapes().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "extractors.screen.cnn.0.weight");
    assert!(names.contains(&"extractors.screen.linear.0.weight".to_string()));
    let first_actor = spec.param_shapes().into_iter().find(|(n, _)| n == "actor.0.weight").unwrap().1;
    assert_eq!(first_actor, [64, 256 + 2], "the towers read the CNN's 256 features beside the noise key");
    while !tr.is_done() {
        tr.step().unwrap();
    }
    let ret = tr.collector.stats.return_mean().unwrap();
    assert!(ret > 8.0, "mean return {ret} (random 3.3, best 10)");

    // A checkpoint brings the CNNs back on candle and the run goes on (a Python env's own random
    // state is not in the checkpoint, so the continuation is not the uninterrupted run's bits).
    let path = std::env::temp_dir().join(format!("proxima-image-key-{}.safetensors", std::process::id()));
    let mut half = Trainer::new(id, cfg(2_048, &[]).unwrap()).unwrap();
    half.step().unwrap();
    half.save(&path).unwrap();
    let mut resumed = Trainer::resume(&proxima::checkpoint::load(&path).unwrap(), None).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(resumed.policy.backend(), Backend::Candle);
    assert!(resumed.policy.params().unwrap() == half.policy.params().unwrap(), "the checkpoint's weights");
    assert_eq!(resumed.policy.spec(), half.policy.spec());
    while !resumed.is_done() {
        resumed.step().unwrap();
    }

    // Observation normalisation leaves the image's pixels alone (its CNN scales them).
    let tr = Trainer::new(id, cfg(256, &["normalize_observation=true"]).unwrap()).unwrap();
    let raw: Vec<bool> = std::iter::repeat_n(false, 2).chain(std::iter::repeat_n(true, 36 * 36)).collect();
    assert!(tr.collector.norm.obs_raw == raw, "the noise key normalised, the screen's pixels not");
    // The same image alone under CnnPolicy, channel-last: the CLI reads channel-first images only.
    let e = Trainer::new("gym:toy_envs:toy/ChannelLast-v0", cfg(256, &["policy=CnnPolicy"]).unwrap()).err().unwrap();
    assert!(e.to_string().contains("looks channel-last"), "{e}");
    // An ALE game through gym: is pointed to atari: (its raw RGB frames are not the CNN's input).
    let e = Trainer::new("gym:ALE/Breakout-v5", cfg(256, &["policy=CnnPolicy"]).unwrap()).err().unwrap();
    assert!(e.to_string().contains("use `atari:ALE/Breakout-v5`"), "{e}");
    for (extra, expected) in [
        (&["normalize_observation=true", r#"norm_obs_keys=["screen"]"#][..], "`screen` of"),
        (&["algo=ppg"][..], "image keys (screen)"),
        (&["algo=trpo", "target_kl=0.01"][..], "algo = `trpo` does not take them"),
        (&["backend=fused"][..], "run on the candle backend"),
    ] {
        let e = cfg(256, extra).and_then(|c| Trainer::new(id, c)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(expected), "{extra:?}: {e}");
    }
}

/// Image keys for the off-policy algorithms (SB3's `MultiInputPolicy` for SAC, TD3 and TQC: a
/// `CombinedExtractor` per network): SAC learns a continuous game the image decides, on candle
/// under `backend = "auto"`; its deterministic action follows the image. TD3 and TQC build and
/// step on the same env; `backend = "fused"` is an error naming candle.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn sac_learns_from_an_image_key_in_a_dict_observation() {
    use proxima::policy::{Backend, Policy};
    use rand::SeedableRng;
    setup();
    let id = "gym:toy_envs:toy/ImageSteer-v0";
    let cfg = |algo: &str, steps: u64, extra: &[&str]| {
        let mut sets = vec![
            format!("total_timesteps={steps}"),
            "eval_episodes=0".into(),
            "learning_starts=200".into(),
            "batch_size=32".into(),
            "net_arch=[64, 64]".into(),
        ];
        sets.extend(extra.iter().map(|s| s.to_string()));
        Config::resolve(algo, None, &sets)
    };
    let mut tr = Trainer::new(id, cfg("sac", 1_200, &["learning_rate=1e-3"]).unwrap()).unwrap();
    assert_eq!(tr.policy.backend(), Backend::Candle, "auto: the CNNs of image keys are on candle");
    let names: Vec<String> = tr.policy.param_shapes().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "actor.features_extractor.extractors.screen.cnn.0.weight");
    while !tr.is_done() {
        tr.step().unwrap();
    }
    // The deterministic action on each image, with noise keys drawn at random: ±0.6 is best.
    let mut obs = Vec::new();
    for side in 0..2usize {
        obs.extend([0.3f32, -0.5]);
        for y in 0..36usize {
            for x in 0..36usize {
                let lit = (8..28).contains(&y) && (18 * side..18 * side + 18).contains(&x);
                obs.push(if lit { 255.0 } else { 0.0 });
            }
        }
    }
    let act = tr.policy.act(&obs, true, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap();
    eprintln!("deterministic actions {:?}", act.actions);
    assert!(act.actions[0] < -0.3 && act.actions[1] > 0.3, "actions {:?} (best −0.6, +0.6)", act.actions);
    for algo in ["td3", "tqc"] {
        let mut tr = Trainer::new(id, cfg(algo, 230, &[]).unwrap()).unwrap();
        assert_eq!(tr.policy.backend(), Backend::Candle, "{algo}");
        while !tr.is_done() {
            tr.step().unwrap();
        }
    }
    let e = cfg("sac", 256, &["backend=fused"]).and_then(|c| Trainer::new(id, c)).err().map(|e| e.to_string());
    let e = e.unwrap_or_default();
    assert!(e.contains("run on the candle backend"), "{e}");
}

/// A Dict key missing from an observation, a key's value of another shape than its space's, and
/// image keys the policy cannot read are clear errors naming the env.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn bad_dict_observations_are_clear_errors() {
    setup();
    for (name, mode, expected) in [
        ("KeyMissing", "off", "does not fit its observation_space"),
        ("KeyMissing", "sync", "KeyError: 'cue'"), // Gymnasium's vector env batching the observations
        ("KeyMissing", "subproc", "does not fit its observation_space"),
        ("KeyShapes", "off", "the key ['a'] holds a value of shape (3,)"),
        ("KeyShapes", "subproc", "the key ['a'] holds a value of shape (3,)"),
        ("ImageKey", "off", "the observation key `screen` is an image: an image of 8 × 8 is too small"),
        (
            "ImageNested",
            "off",
            "the observation key [\"inner\"][\"screen\"] is an image ([1, 36, 36], uint8) inside a nested",
        ),
    ] {
        let cfg =
            Config::resolve("cleanrl", None, &["total_timesteps=256".into(), format!("vector_env={mode}")]).unwrap();
        let id = format!("gym:toy_envs:toy/{name}-v0");
        let e = Trainer::new(&id, cfg).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(expected) && e.contains(name), "{name} {mode}: {e:?}");
    }
}

/// The three compose: a masked, recurrent policy over Dict observations learns a game that needs
/// all three (the masks force "wait" until the question; the cue must be remembered; the
/// observations are a Dict). The strict game raises on a masked action.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn a_masked_recurrent_policy_over_dict_observations_learns() {
    use proxima::policy::Policy;
    setup();
    let sets = [
        "policy=MlpLstmPolicy",
        "lstm_hidden_size=32",
        "net_arch=[32]",
        "n_envs=4",
        "n_steps=32",
        "batch_size=64",
        "learning_rate=1e-3",
        "total_timesteps=20000",
        "eval_episodes=0",
    ];
    let cfg = Config::resolve("cleanrl", None, &sets.map(String::from)).unwrap();
    let mut tr = Trainer::new("gym:toy_envs:toy/MaskedCueDict-v0", cfg).unwrap();
    assert_eq!((tr.buffer().mask_dim, tr.policy.spec().obs_dim), (4, 3 + 1), "masked, Dict flattened");
    assert!(tr.buffer().state_dim > 0, "recurrent");
    while !tr.is_done() {
        tr.step().unwrap();
    }
    let ret = tr.collector.stats.return_mean().unwrap();
    assert!(ret > 0.9, "mean return {ret} (memoryless: 0, best 1)");
}
