//! The Gymnasium bridge against small Python envs written for these tests
//! (`tests/toy_envs.py`). Needs a Python with `gymnasium` (CI makes one; see `.ci/run`), named by
//! `PROXIMA_PYTHON` or found as `python3`.

use proxima::config::Config;
use proxima::env::{make, Action, Space};
use proxima::train::Trainer;

/// Registers the bridge; false (test skipped, with a note) when no Python with gymnasium is
/// available, unless `PROXIMA_REQUIRE_GYM=1` (CI) makes that a failure.
fn setup() -> bool {
    // The toy envs' module must be importable by the probed Python.
    std::env::set_var("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/tests"));
    proxima_gym::register();
    let exe = proxima_gym::python_executable();
    let ok = proxima_gym::probe_python(&exe).map(|i| i.has_gymnasium).unwrap_or(false);
    if !ok {
        assert!(std::env::var("PROXIMA_REQUIRE_GYM").is_err(), "PROXIMA_REQUIRE_GYM is set but {exe} has no gymnasium");
        eprintln!("SKIPPED: {exe} has no gymnasium (set PROXIMA_PYTHON to a Python that has it)");
    }
    ok
}

#[test]
fn spaces_reset_step_and_time_limit() {
    if !setup() {
        return;
    }
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
fn box_actions_cross_as_float32_arrays() {
    if !setup() {
        return;
    }
    let mut env = make("gym:toy_envs:toy/BoxBox-v0").unwrap();
    assert_eq!(env.action_space(), Space::uniform_box(-2.0, 2.0, &[2]));
    let (obs, _) = env.reset(Some(0)).unwrap();
    let r = env.step(Action::Continuous(&obs)).unwrap();
    assert_eq!(r.reward, 0.0, "acting the observation scores 0");
    let r = env.step(Action::Continuous(&[2.0, 2.0])).unwrap();
    assert!(r.terminated);
}

#[test]
fn ppo_trains_on_a_bridged_env_and_resumes_through_make() {
    if !setup() {
        return;
    }
    let cfg = Config::resolve("cleanrl", None, &["n_envs=2".into(), "n_steps=16".into(), "batch_size=8".into(), "total_timesteps=64".into()]).unwrap();
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

#[test]
fn errors_are_clear() {
    if !setup() {
        return;
    }
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
