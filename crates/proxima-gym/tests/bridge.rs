//! The Gymnasium bridge against small Python envs written for these tests
//! (`tests/toy_envs.py`). Needs a Python with `gymnasium` (CI makes one; see `.ci/run`), named by
//! `PROXIMA_PYTHON` or found as `python3`: the tests are ignored by a plain `cargo test` and run by
//! `cargo test -- --include-ignored`, failing without it. Training and evaluating on bridged envs is tested in
//! `proxima-cli/tests/bridge_training.rs` (this crate does not depend on the RL library).

mod common;

use proxima_env::{make, Action, Space};

fn setup() {
    common::setup(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn spaces_reset_step_and_time_limit() {
    setup();
    let mut env = make("gym:toy_envs:toy/BoxDiscrete-v0").unwrap();
    assert_eq!(env.id(), "gym:toy_envs:toy/BoxDiscrete-v0");
    assert_eq!(env.observation_space(), Space::uniform_box(-1.0, 1.0, &[3]));
    assert_eq!(env.action_space(), Space::Discrete { n: 2 });
    let (o1, _) = env.reset(Some(3)).unwrap();
    let (o2, _) = env.reset(Some(3)).unwrap();
    assert_eq!(o1, o2, "reset(seed) is reproducible through the bridge");
    assert_eq!(o1.len(), 3);
    let mut steps = 0;
    let mut obs = o1;
    loop {
        let right = usize::from(obs[0] > 0.0);
        let r = env.step(Action::Discrete(right)).unwrap();
        assert_eq!(r.reward, 1.0);
        steps += 1;
        obs = r.observation;
        if r.terminated || r.truncated {
            assert!(r.truncated && !r.terminated);
            break;
        }
    }
    assert_eq!(steps, 10, "Gymnasium's TimeLimit sets truncated");
    assert!(env.step(Action::Discrete(2)).unwrap_err().to_string().contains("not in Discrete(2)"));
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn box_actions_cross_as_float32_arrays() {
    setup();
    let mut env = make("gym:toy_envs:toy/BoxBox-v0").unwrap();
    assert_eq!(env.action_space(), Space::uniform_box(-2.0, 2.0, &[2]));
    let (obs, _) = env.reset(Some(0)).unwrap();
    let r = env.step(Action::Continuous(&obs)).unwrap();
    assert_eq!(r.reward, 0.0, "acting the observation scores 0");
    let r = env.step(Action::Continuous(&[2.0, 2.0])).unwrap();
    assert!(r.terminated);
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn errors_are_clear() {
    setup();
    let err = |id: &str| make(id).err().map(|e| e.to_string()).unwrap_or_else(|| panic!("{id} should fail"));
    let e = err("gym:toy_envs:toy/Nope-v0");
    assert!(e.contains("gymnasium.make(\"toy_envs:toy/Nope-v0\") failed") && e.contains("Nope"), "{e}");
    let e = err("gym:no_such_module_xyz:Foo-v0");
    assert!(e.contains("no_such_module_xyz"), "{e}");
    let e = err("gym:toy_envs:toy/DictAction-v0");
    assert!(e.contains("Dict") && e.contains("not supported"), "{e}");

    let mut env = make("gym:toy_envs:toy/Raises-v0").unwrap();
    env.reset(Some(0)).unwrap();
    let e = env.step(Action::Discrete(0)).unwrap_err().to_string();
    assert!(e.contains("Traceback") && e.contains("ValueError: boom from inside the env"), "{e}");

    let mut env = make("gym:toy_envs:toy/WrongShape-v0").unwrap();
    env.reset(Some(0)).unwrap();
    let e = env.step(Action::Discrete(0)).unwrap_err().to_string();
    assert!(e.contains("shape [2]") && e.contains("declares shape [3]"), "{e}");

    let e = proxima_gym::probe_python("/nonexistent/python3").unwrap_err().to_string();
    assert!(e.contains("Python not found") && e.contains("PROXIMA_PYTHON"), "{e}");
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn render_rgb_array_frames_and_errors() {
    setup();
    let mut env = proxima_env::make_with("gym:toy_envs:toy/Renders-v0", true).unwrap();
    assert_eq!(env.render_fps(), 25);
    env.reset(Some(3)).unwrap();
    let mut obs0 = Vec::new();
    for t in 0..3u8 {
        let f = env.render().unwrap();
        assert_eq!((f.width, f.height, f.rgb.len()), (6, 4, 72));
        assert!(f.rgb.chunks(3).all(|p| p[0] == t), "red channel is the step count");
        obs0.push(f.rgb[1]);
        env.step(Action::Discrete(0)).unwrap();
    }
    // An env whose constructor takes no render_mode.
    let e = proxima_env::make_with("gym:toy_envs:toy/BoxDiscrete-v0", true).err().unwrap().to_string();
    assert!(e.contains("render_mode=\"rgb_array\") failed (does the env support") && e.contains("render_mode"), "{e}");
    // An env that accepts render_mode but whose render() returns None.
    let mut env = proxima_env::make_with("gym:toy_envs:toy/RendersNone-v0", true).unwrap();
    env.reset(Some(0)).unwrap();
    let e = env.render().unwrap_err().to_string();
    assert!(e.contains("returned None") && e.contains("rgb_array"), "{e}");
    // A frame that is not (H, W, 3) uint8.
    let mut env = proxima_env::make_with("gym:toy_envs:toy/RendersGray-v0", true).unwrap();
    env.reset(Some(0)).unwrap();
    let e = env.render().unwrap_err().to_string();
    assert!(e.contains("shape [4, 6]") && e.contains("(height, width, 3) uint8"), "{e}");
}

/// N bridged envs as one vector env — Gymnasium's (`make_vec`, sync and async, same-step
/// autoreset) or Proxima's subprocess workers (`subproc`, in every split: the default one group
/// per core, three groups of one, all in this process) — are seen exactly as the same N envs
/// bridged one by one: observations, rewards, terminated, truncated, final observations and
/// episode records, through time-limit truncations and terminations.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn a_vector_env_steps_exactly_as_its_envs_one_by_one() {
    use proxima_env::vec_env::{BatchEnv, SyncVectorEnv, VectorMode};
    setup();
    let batch = |id: &str, mode: &str| -> Box<dyn BatchEnv> {
        let registered = |m| proxima_env::make_vector(id, 3, m).expect("the bridge registers vector envs").unwrap();
        let spec = id.strip_prefix("gym:").unwrap();
        match mode {
            "sync" => registered(VectorMode::Sync),
            "async" => registered(VectorMode::Async),
            "subproc" => registered(VectorMode::Subproc),
            "subproc, 2 workers" => Box::new(proxima_gym::SubprocVectorEnv::make(spec, 3, Some(2)).unwrap()),
            _ => Box::new(proxima_gym::SubprocVectorEnv::make(spec, 3, Some(0)).unwrap()),
        }
    };
    let modes = ["sync", "async", "subproc", "subproc, 2 workers", "subproc, 0 workers"];
    for id in ["gym:toy_envs:toy/BoxDiscrete-v0", "gym:toy_envs:toy/BoxBox-v0", "gym:toy_envs:toy/Prints-v0"] {
        for mode in modes {
            if id.contains("Prints") && !mode.starts_with("subproc") {
                continue;
            }
            let mut one = SyncVectorEnv::new(3, || make(id)).unwrap();
            let mut vec = SyncVectorEnv::from_batch(batch(id, mode)).unwrap();
            assert_eq!((vec.env_id(), vec.num_envs()), (id, 3));
            assert_eq!(vec.action_space(), one.action_space());
            assert_eq!(
                one.reset(5).unwrap(),
                vec.reset(5).unwrap(),
                "{id} {mode}: reset(seed) seeds env i with seed + i"
            );
            let box_actions = matches!(one.action_space(), Space::Box { .. });
            for t in 0..40usize {
                let actions: Vec<f32> = if box_actions {
                    // Every fifth step env i pushes past |a| = 3.9: a termination.
                    (0..3).flat_map(|i| if (t + i) % 5 == 0 { [1.99, 1.99] } else { [0.1 * i as f32, -0.2] }).collect()
                } else {
                    (0..3).map(|i| ((t + i) % 2) as f32).collect()
                };
                one.step(&actions).unwrap();
                vec.step(&actions).unwrap();
                let what = format!("{id} {mode} step {t}");
                assert_eq!(one.obs(), vec.obs(), "{what}");
                assert_eq!(
                    (&one.rewards, &one.terminated, &one.truncated),
                    (&vec.rewards, &vec.terminated, &vec.truncated),
                    "{what}"
                );
                assert_eq!(one.final_obs, vec.final_obs, "{what}");
            }
            assert!(one.finished.len() >= 6, "{id}: episodes ended ({})", one.finished.len());
            assert_eq!(one.finished, vec.finished);
        }
    }
    let e =
        proxima_env::make_vector("gym:toy_envs:toy/Nope-v0", 2, VectorMode::Sync).unwrap().err().unwrap().to_string();
    assert!(e.contains("gymnasium.make_vec(\"toy_envs:toy/Nope-v0\", num_envs=2") && e.contains("Nope"), "{e}");
}

/// `subproc` workers' failures are errors that say what and where, never a hang: an exception in
/// a worker's env (its traceback and env indices), an observation of the wrong shape, a worker
/// that dies (its exit status), an unknown id (Gymnasium's message, before any worker starts), an
/// action out of range.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn subproc_workers_failures_are_clear_errors() {
    use proxima_env::vec_env::{BatchEnv, BatchStep};
    use proxima_gym::SubprocVectorEnv;
    setup();
    std::env::set_var("TOY_PARENT_PID", std::process::id().to_string());
    let mut out = BatchStep::default();
    let mut first_step_error = |spec: &str| {
        let mut env = SubprocVectorEnv::make(spec, 2, Some(1)).unwrap();
        let mut obs = vec![0.0; 6];
        env.reset(0, &mut obs).unwrap();
        (0..5).find_map(|_| env.step(&[0.0, 0.0], &mut out).err()).expect("an error within 5 steps").to_string()
    };
    let e = first_step_error("toy_envs:toy/Raises-v0");
    assert!(e.contains("ValueError: boom from inside the env") && e.contains("Traceback"), "{e}");
    // The env stepped here fails first (the worker's reply is read after it); each says which env.
    assert!(e.contains("(env index 1, stepped in the training process)"), "{e}");
    let e = first_step_error("toy_envs:toy/WrongShape-v0");
    assert!(e.contains("shape [2]") && e.contains("declares shape [3]"), "{e}");
    let mut env = SubprocVectorEnv::make("toy_envs:toy/RaisesInWorker-v0", 2, Some(1)).unwrap();
    let e = env.reset(0, &mut [0.0; 6]).unwrap_err().to_string();
    assert!(
        e.contains("RuntimeError: only in a worker")
            && e.contains("(in subproc worker 0 of gym:toy_envs:toy/RaisesInWorker-v0, env index 0)"),
        "{e}"
    );
    let e = first_step_error("toy_envs:toy/DiesInWorker-v0");
    assert!(e.contains("subproc worker 0 (env index 0) stopped") && e.contains("exit status: 3"), "{e}");

    let e = SubprocVectorEnv::make("toy_envs:toy/Nope-v0", 2, Some(1)).err().unwrap().to_string();
    assert!(e.contains("gymnasium.make(\"toy_envs:toy/Nope-v0\") failed"), "{e}");
    let e = SubprocVectorEnv::make("toy_envs:toy/BoxDiscrete-v0", 0, None).err().unwrap().to_string();
    assert!(e.contains("n_envs ≥ 1"), "{e}");
    let mut env = SubprocVectorEnv::make("toy_envs:toy/BoxDiscrete-v0", 2, Some(1)).unwrap();
    let e = env.step(&[0.0, 2.0], &mut out).unwrap_err().to_string();
    assert!(e.contains("2 is not in Discrete(2)"), "{e}");
    let e = env.step(&[0.0], &mut out).unwrap_err().to_string();
    assert!(e.contains("expected 2 action values"), "{e}");
}

#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn an_atari_game_with_frames_of_the_wrong_shape_is_a_clear_error() {
    setup();
    // No no-op reset: the frame of the wrong shape comes at raw frame 5, the second agent step.
    let mut env = make("atari:toy_envs:toy/AtariLike-v0?noop_max=0").unwrap();
    assert_eq!(env.observation_space(), Space::image(&[4, 84, 84]));
    env.reset(Some(1)).unwrap();
    env.step(Action::Discrete(1)).unwrap();
    let e = env.step(Action::Discrete(1)).expect_err("a frame of the wrong shape: an error").to_string();
    assert!(e.contains("returned a frame of shape [200, 160, 3]") && e.contains("expected [210, 160, 3] uint8"), "{e}");
    let e = make("atari:toy_envs:toy/AtariLikeGray-v0").err().expect("gray frames: an error").to_string();
    assert!(e.contains("observations of shape [210, 160]") && e.contains("(height, width, 3) uint8 RGB"), "{e}");
}

/// An id Gymnasium does not know is Gymnasium's one-line message (naming the id, suggesting near
/// ones), not a Python traceback; an env that fails inside `make` keeps its traceback.
#[test]
#[ignore = "needs a Python with gymnasium (PROXIMA_PYTHON; .ci/run installs it)"]
fn an_unknown_id_is_gymnasiums_message_without_a_traceback() {
    setup();
    let e = make("gym:NoSuchEnv-v0").err().expect("an unknown id is an error").to_string();
    assert!(e.contains("NameNotFound") && e.contains("NoSuchEnv"), "{e}");
    assert!(!e.contains("Traceback"), "{e}");
    let e = make("gym:CartPole-v99").err().expect("an unknown version is an error").to_string();
    assert!(e.contains("VersionNotFound") && !e.contains("Traceback"), "{e}");
}
