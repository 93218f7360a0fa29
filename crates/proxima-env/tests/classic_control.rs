//! Conformance of the native classic-control ports with Gymnasium 1.4.0.
//!
//! The reference trajectories live in `classic_control.json` in the directory named by
//! `PROXIMA_GOLDEN_DIR`, else in `shared/golden` beside the repository checkout (see its
//! README). Each case is replayed from Gymnasium's `initial_state` with the recorded actions;
//! observations must agree within [`OBS_TOL`], rewards within [`REWARD_TOL`], and `terminated` /
//! `truncated` exactly, at every step (time limits included).

use proxima_env::{make, Action, Env, Space, NATIVE_ENV_IDS};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::path::PathBuf;

const OBS_TOL: f64 = 1e-5;
const REWARD_TOL: f64 = 1e-6;

/// One reference trajectory.
#[derive(Deserialize)]
struct Case {
    env_id: String,
    seed: u64,
    initial_state: Vec<f64>,
    initial_obs: Vec<f64>,
    actions: Vec<GoldenAction>,
    obs: Vec<Vec<f64>>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
}

/// A Discrete action (an int) or a Box action (a list of floats).
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum GoldenAction {
    Discrete(usize),
    Continuous(Vec<f64>),
}

#[derive(Deserialize)]
struct Golden {
    cases: Vec<Case>,
}

fn golden_dir() -> PathBuf {
    match std::env::var_os("PROXIMA_GOLDEN_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/golden")),
    }
}

fn load_cases() -> Vec<Case> {
    let path = golden_dir().join("classic_control.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {} (set PROXIMA_GOLDEN_DIR): {e}", path.display()));
    let golden: Golden = serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
    assert!(!golden.cases.is_empty(), "{} holds no cases", path.display());
    golden.cases
}

fn make_env(env_id: &str) -> Box<dyn Env> {
    make(env_id).unwrap_or_else(|e| panic!("make({env_id}) failed: {e}"))
}

/// The observation Gymnasium derives from an internal state (`_get_obs` / `_get_ob`), computed
/// here independently of the ports.
fn obs_from_state(env_id: &str, s: &[f64]) -> Vec<f32> {
    let v: Vec<f64> = match env_id {
        "Acrobot-v1" => vec![s[0].cos(), s[0].sin(), s[1].cos(), s[1].sin(), s[2], s[3]],
        "Pendulum-v1" => vec![s[0].cos(), s[0].sin(), s[1]],
        _ => s.to_vec(),
    };
    v.into_iter().map(|x| x as f32).collect()
}

/// Largest differences seen while replaying the cases of one env.
#[derive(Default, Debug)]
struct MaxDiff {
    obs: f64,
    reward: f64,
    steps: usize,
    /// Observation components that differ from Gymnasium's float32 value at all.
    obs_not_bit_exact: usize,
    obs_values: usize,
}

/// Replays every case of `env_id`, asserting agreement at every step; returns the largest diffs.
fn replay_env(env_id: &str) -> MaxDiff {
    let cases: Vec<Case> = load_cases().into_iter().filter(|c| c.env_id == env_id).collect();
    assert!(!cases.is_empty(), "no golden cases for {env_id}");
    let mut worst = MaxDiff::default();
    for case in &cases {
        let (id, seed) = (case.env_id.as_str(), case.seed);
        let n = case.actions.len();
        for (what, len) in [
            ("obs", case.obs.len()),
            ("rewards", case.rewards.len()),
            ("terminated", case.terminated.len()),
            ("truncated", case.truncated.len()),
        ] {
            assert_eq!(len, n, "{id} seed {seed}: golden `{what}` has {len} entries for {n} actions");
        }
        let mut env = make_env(id);
        env.reset(Some(seed)).unwrap_or_else(|e| panic!("{id} seed {seed}: reset failed: {e}"));
        env.set_state(&case.initial_state)
            .unwrap_or_else(|e| panic!("{id} seed {seed}: set_state(initial_state) failed: {e}"));
        assert_eq!(
            env.state().as_deref(),
            Some(case.initial_state.as_slice()),
            "{id} seed {seed}: state() after set_state"
        );
        let obs_space = env.observation_space();
        for (t, action) in case.actions.iter().enumerate() {
            let buf: Vec<f32>;
            let act = match action {
                GoldenAction::Discrete(a) => Action::Discrete(*a),
                GoldenAction::Continuous(v) => {
                    buf = v.iter().map(|&x| x as f32).collect();
                    Action::Continuous(&buf)
                }
            };
            let r = env.step(act).unwrap_or_else(|e| panic!("{id} seed {seed} step {t}: step({action:?}) failed: {e}"));
            let want = &case.obs[t];
            assert_eq!(r.observation.len(), want.len(), "{id} seed {seed} step {t}: observation length");
            for (i, (&got, &exp)) in r.observation.iter().zip(want).enumerate() {
                let d = (f64::from(got) - exp).abs();
                worst.obs = worst.obs.max(d);
                worst.obs_values += 1;
                worst.obs_not_bit_exact += usize::from(got != exp as f32);
                assert!(
                    d <= OBS_TOL,
                    "{id} seed {seed} step {t}: obs[{i}] = {got} but Gymnasium has {exp} (|diff| = {d:e} > {OBS_TOL:e})"
                );
            }
            assert!(
                obs_space.contains(&r.observation),
                "{id} seed {seed} step {t}: obs {:?} outside {}",
                r.observation,
                obs_space.describe()
            );
            let d = (r.reward - case.rewards[t]).abs();
            worst.reward = worst.reward.max(d);
            assert!(
                d <= REWARD_TOL,
                "{id} seed {seed} step {t}: reward = {} but Gymnasium has {} (|diff| = {d:e} > {REWARD_TOL:e})",
                r.reward,
                case.rewards[t]
            );
            assert_eq!(r.terminated, case.terminated[t], "{id} seed {seed} step {t}: terminated");
            assert_eq!(r.truncated, case.truncated[t], "{id} seed {seed} step {t}: truncated");
            let done = r.terminated || r.truncated;
            assert_eq!(done, t + 1 == n, "{id} seed {seed} step {t}: the golden episode ends at step {}", n - 1);
        }
        worst.steps += n;
    }
    eprintln!(
        "{env_id}: {} cases, {} steps, max |obs diff| = {:e}, max |reward diff| = {:e}, obs values not bit-exact in f32: {} of {}",
        cases.len(),
        worst.steps,
        worst.obs,
        worst.reward,
        worst.obs_not_bit_exact,
        worst.obs_values
    );
    worst
}

#[test]
fn golden_cartpole() {
    replay_env("CartPole-v1");
}

#[test]
fn golden_acrobot() {
    replay_env("Acrobot-v1");
}

#[test]
fn golden_mountain_car() {
    replay_env("MountainCar-v0");
}

#[test]
fn golden_mountain_car_continuous() {
    replay_env("MountainCarContinuous-v0");
}

#[test]
fn golden_pendulum() {
    replay_env("Pendulum-v1");
}

/// Every golden case names a native env and every native env has golden cases.
#[test]
fn golden_covers_every_native_env() {
    let cases = load_cases();
    for c in &cases {
        assert!(
            NATIVE_ENV_IDS.contains(&c.env_id.as_str()),
            "golden case for unknown env {} (seed {})",
            c.env_id,
            c.seed
        );
    }
    for id in NATIVE_ENV_IDS {
        assert!(cases.iter().any(|c| c.env_id == id), "no golden case for {id}");
    }
}

/// Gymnasium's `initial_obs` is its observation function applied to `initial_state`.
#[test]
fn golden_initial_obs_matches_initial_state() {
    for c in load_cases() {
        let got = obs_from_state(&c.env_id, &c.initial_state);
        assert_eq!(got.len(), c.initial_obs.len(), "{} seed {}: initial_obs length", c.env_id, c.seed);
        for (i, (&g, &e)) in got.iter().zip(&c.initial_obs).enumerate() {
            let d = (f64::from(g) - e).abs();
            assert!(
                d <= OBS_TOL,
                "{} seed {}: initial_obs[{i}] = {e} but obs(initial_state) = {g} (|diff| = {d:e})",
                c.env_id,
                c.seed
            );
        }
    }
}

/// Gymnasium's reset distribution per env: `(low, high)` per state component; `low == high`
/// means the component is always exactly that value.
fn reset_bounds(env_id: &str) -> Vec<(f64, f64)> {
    match env_id {
        "CartPole-v1" => vec![(-0.05, 0.05); 4],
        "Acrobot-v1" => vec![(-0.1, 0.1); 4],
        "MountainCar-v0" | "MountainCarContinuous-v0" => vec![(-0.6, -0.4), (0.0, 0.0)],
        "Pendulum-v1" => vec![(-PI, PI), (-1.0, 1.0)],
        other => panic!("no reset bounds for {other}"),
    }
}

#[test]
fn reset_distributions_within_gymnasium_bounds() {
    const SEEDS: u64 = 1000;
    for id in NATIVE_ENV_IDS {
        let bounds = reset_bounds(id);
        let mut env = make_env(id);
        let mut lo = vec![f64::INFINITY; bounds.len()];
        let mut hi = vec![f64::NEG_INFINITY; bounds.len()];
        for seed in 0..SEEDS {
            let (obs, _) = env.reset(Some(seed)).unwrap_or_else(|e| panic!("{id} seed {seed}: reset failed: {e}"));
            let s = env.state().unwrap_or_else(|| panic!("{id}: state() is None"));
            assert_eq!(s.len(), bounds.len(), "{id} seed {seed}: state length");
            assert_eq!(obs, obs_from_state(id, &s), "{id} seed {seed}: reset obs is not obs(state)");
            assert!(
                env.observation_space().contains(&obs),
                "{id} seed {seed}: reset obs {obs:?} outside the observation space"
            );
            for (i, (&v, &(l, h))) in s.iter().zip(&bounds).enumerate() {
                // Acrobot stores its reset state as float32, so compare at f32 precision there
                // (f32(0.1) > 0.1); everything else is drawn in f64.
                let ok =
                    if id == "Acrobot-v1" { (l as f32..=h as f32).contains(&(v as f32)) } else { (l..=h).contains(&v) };
                assert!(ok, "{id} seed {seed}: reset state[{i}] = {v} outside [{l}, {h}]");
                lo[i] = lo[i].min(v);
                hi[i] = hi[i].max(v);
            }
        }
        for (i, &(l, h)) in bounds.iter().enumerate() {
            let span = h - l;
            assert!(
                lo[i] <= l + 0.05 * span && hi[i] >= h - 0.05 * span,
                "{id}: reset state[{i}] over {SEEDS} seeds spans only [{}, {}] of [{l}, {h}]",
                lo[i],
                hi[i]
            );
        }
    }
}

#[test]
fn same_seed_same_reset() {
    for id in NATIVE_ENV_IDS {
        let (mut a, mut b) = (make_env(id), make_env(id));
        for seed in [0, 1, 42, 12345, u64::MAX] {
            let (oa, _) = a.reset(Some(seed)).unwrap();
            let (ob, _) = b.reset(Some(seed)).unwrap();
            assert_eq!(oa, ob, "{id} seed {seed}: two envs reset with the same seed differ");
            assert_eq!(a.state(), b.state(), "{id} seed {seed}: states differ");
            // Reseeding the same env reproduces the reset, whatever happened in between.
            a.step(sample_action(&*a)).unwrap();
            let (oa2, _) = a.reset(Some(seed)).unwrap();
            assert_eq!(oa, oa2, "{id} seed {seed}: reseeding does not reproduce the reset");
            // `reset(None)` continues the stream; the next state is a fresh draw.
            let (on, _) = a.reset(None).unwrap();
            let (on2, _) = b.reset(Some(seed)).and_then(|_| b.reset(None)).unwrap();
            assert_eq!(on, on2, "{id} seed {seed}: reset(None) after the same seed differs");
        }
        let (o0, _) = a.reset(Some(0)).unwrap();
        let (o1, _) = a.reset(Some(1)).unwrap();
        assert_ne!(o0, o1, "{id}: seeds 0 and 1 give the same reset");
    }
}

/// A valid action for the env's action space (the middle of a Box, action 0 of a Discrete).
fn sample_action(env: &dyn Env) -> Action<'static> {
    match env.action_space() {
        Space::Discrete { .. } => Action::Discrete(0),
        Space::Box { .. } => Action::Continuous(&[0.0]),
        Space::MultiDiscrete { .. } => panic!("{}: unexpected MultiDiscrete action space", env.id()),
    }
}

#[test]
fn invalid_actions_are_errors() {
    for id in NATIVE_ENV_IDS {
        let mut env = make_env(id);
        env.reset(Some(7)).unwrap();
        let before = env.state();
        let bad: Vec<Action<'_>> = match env.action_space() {
            Space::Discrete { n } => vec![
                Action::Discrete(n),
                Action::Discrete(n + 1),
                Action::Discrete(usize::MAX),
                Action::Continuous(&[0.0]),
            ],
            Space::Box { .. } => vec![
                Action::Continuous(&[]),
                Action::Continuous(&[0.0, 0.0]),
                Action::Continuous(&[f32::NAN]),
                Action::Continuous(&[f32::INFINITY]),
                Action::Continuous(&[f32::NEG_INFINITY]),
                Action::Discrete(0),
            ],
            Space::MultiDiscrete { .. } => panic!("{id}: unexpected MultiDiscrete action space"),
        };
        for a in bad {
            match env.step(a) {
                Err(e) => assert!(e.to_string().contains(id), "{id}: the error for {a:?} does not name the env: {e}"),
                Ok(r) => panic!("{id}: step({a:?}) returned Ok({r:?}) instead of an error"),
            }
            assert_eq!(env.state(), before, "{id}: a rejected action {a:?} changed the state");
        }
        // The env still works after rejecting actions.
        env.step(sample_action(&*env)).unwrap_or_else(|e| panic!("{id}: valid step after rejected ones failed: {e}"));
    }
}

/// Box actions outside the bounds are accepted and clipped as Gymnasium clips them.
#[test]
fn box_actions_are_clipped_like_gymnasium() {
    // Pendulum: u is clipped to ±2 for the dynamics and the reward.
    let (mut a, mut b) = (make_env("Pendulum-v1"), make_env("Pendulum-v1"));
    for env in [&mut a, &mut b] {
        env.reset(Some(3)).unwrap();
        env.set_state(&[0.5, -0.25]).unwrap();
    }
    let ra = a.step(Action::Continuous(&[5.0])).unwrap();
    let rb = b.step(Action::Continuous(&[2.0])).unwrap();
    assert_eq!(ra, rb, "Pendulum-v1: torque 5 must act as torque 2");
    // MountainCarContinuous: force clipped to ±1 for the dynamics, the reward uses the raw action.
    let (mut a, mut b) = (make_env("MountainCarContinuous-v0"), make_env("MountainCarContinuous-v0"));
    for env in [&mut a, &mut b] {
        env.reset(Some(3)).unwrap();
    }
    let ra = a.step(Action::Continuous(&[-3.0])).unwrap();
    let rb = b.step(Action::Continuous(&[-1.0])).unwrap();
    assert_eq!(ra.observation, rb.observation, "MountainCarContinuous-v0: force −3 must act as −1");
    assert!(
        (ra.reward - -0.9).abs() < 1e-12,
        "MountainCarContinuous-v0: reward for a = −3 is {} (expected −0.1·9)",
        ra.reward
    );
    assert!((rb.reward - -0.1).abs() < 1e-12, "MountainCarContinuous-v0: reward for a = −1 is {}", rb.reward);
}

/// `state()` then `set_state()` resumes a trajectory exactly (the float32 state of
/// MountainCarContinuous included), and a wrong-length state is rejected.
#[test]
fn state_round_trip_resumes_exactly() {
    for id in NATIVE_ENV_IDS {
        let mut env = make_env(id);
        env.reset(Some(11)).unwrap();
        let actions: Vec<Vec<f32>> = (0..40).map(|t| vec![((t * 7 % 5) as f32 - 2.0) * 0.45]).collect();
        let discrete_n = match env.action_space() {
            Space::Discrete { n } => Some(n),
            _ => None,
        };
        let act = |t: usize| match discrete_n {
            Some(n) => Action::Discrete(t * 7 % n),
            None => Action::Continuous(&actions[t]),
        };
        for t in 0..20 {
            env.step(act(t)).unwrap();
        }
        let saved = env.state().unwrap();
        let tail: Vec<_> = (20..40).map(|t| env.step(act(t)).unwrap()).collect();
        let mut other = make_env(id);
        other.reset(Some(999)).unwrap();
        other.set_state(&saved).unwrap();
        for (k, want) in tail.iter().enumerate() {
            let got = other.step(act(20 + k)).unwrap();
            assert_eq!(got.observation, want.observation, "{id} step {}: resumed trajectory differs", 20 + k);
            assert_eq!(got.reward, want.reward, "{id} step {}: resumed reward differs", 20 + k);
            assert_eq!(got.terminated, want.terminated, "{id} step {}: resumed terminated differs", 20 + k);
        }
        let n = saved.len();
        for wrong in [n - 1, n + 1] {
            assert!(
                other.set_state(&vec![0.0; wrong]).is_err(),
                "{id}: set_state with {wrong} values (expected {n}) must fail"
            );
        }
    }
}

/// Absurd states set by hand never hang or panic a step (Acrobot's `wrap` would loop forever on
/// an infinite or huge angle in Gymnasium).
#[test]
fn extreme_states_do_not_hang_or_panic() {
    for id in NATIVE_ENV_IDS {
        let mut env = make_env(id);
        env.reset(Some(0)).unwrap();
        let n = env.state().unwrap().len();
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300, 1e20] {
            env.set_state(&vec![v; n]).unwrap();
            let _ = env.step(sample_action(&*env)).unwrap_or_else(|e| panic!("{id}: step from state {v} failed: {e}"));
        }
    }
}

#[test]
fn unknown_env_id_is_an_error() {
    match make("NoSuchEnv-v0") {
        Ok(env) => panic!("make(\"NoSuchEnv-v0\") returned an env ({})", env.id()),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("NoSuchEnv-v0"), "the error does not name the id: {msg}");
        }
    }
}

#[test]
fn make_registers_gymnasium_ids_and_time_limits() {
    let limits: BTreeMap<&str, usize> = [
        ("CartPole-v1", 500),
        ("Acrobot-v1", 500),
        ("MountainCar-v0", 200),
        ("MountainCarContinuous-v0", 999),
        ("Pendulum-v1", 200),
    ]
    .into_iter()
    .collect();
    for id in NATIVE_ENV_IDS {
        let mut env = make_env(id);
        assert_eq!(env.id(), id);
        env.reset(Some(0)).unwrap();
        let limit = limits[id];
        // `truncated` depends only on the step count: the limit-th step is truncated, the one
        // before is not (whether or not the dynamics terminate there).
        env.set_elapsed_steps(limit - 2);
        let r = env.step(sample_action(&*env)).unwrap();
        assert!(!r.truncated, "{id}: truncated one step before the limit {limit}");
        let r = env.step(sample_action(&*env)).unwrap();
        assert!(r.truncated, "{id}: not truncated at the limit {limit}");
    }
}

/// `(low, high)` of a Box space.
fn box_bounds(space: &Space) -> (Vec<f32>, Vec<f32>, Vec<usize>) {
    match space {
        Space::Box { low, high, shape, .. } => (low.clone(), high.clone(), shape.clone()),
        other => panic!("expected a Box, got {}", other.describe()),
    }
}

/// Spaces exactly as Gymnasium builds them (float32 bounds).
#[test]
fn spaces_match_gymnasium() {
    let neg = |v: &[f32]| v.iter().map(|x| -x).collect::<Vec<f32>>();

    let env = make_env("CartPole-v1");
    let theta_threshold_radians = 12.0 * 2.0 * PI / 360.0;
    let high = vec![(2.4f64 * 2.0) as f32, f32::MAX, (theta_threshold_radians * 2.0) as f32, f32::MAX];
    assert_eq!(box_bounds(&env.observation_space()), (neg(&high), high, vec![4]), "CartPole-v1 observation_space");
    assert_eq!(env.action_space(), Space::Discrete { n: 2 }, "CartPole-v1 action_space");

    let env = make_env("Acrobot-v1");
    let high = vec![1.0, 1.0, 1.0, 1.0, (4.0 * PI) as f32, (9.0 * PI) as f32];
    assert_eq!(box_bounds(&env.observation_space()), (neg(&high), high, vec![6]), "Acrobot-v1 observation_space");
    assert_eq!(env.action_space(), Space::Discrete { n: 3 }, "Acrobot-v1 action_space");

    let mc_obs = (vec![-1.2f32, -0.07], vec![0.6f32, 0.07], vec![2]);
    let env = make_env("MountainCar-v0");
    assert_eq!(box_bounds(&env.observation_space()), mc_obs, "MountainCar-v0 observation_space");
    assert_eq!(env.action_space(), Space::Discrete { n: 3 }, "MountainCar-v0 action_space");

    let env = make_env("MountainCarContinuous-v0");
    assert_eq!(box_bounds(&env.observation_space()), mc_obs, "MountainCarContinuous-v0 observation_space");
    assert_eq!(
        box_bounds(&env.action_space()),
        (vec![-1.0], vec![1.0], vec![1]),
        "MountainCarContinuous-v0 action_space"
    );

    let env = make_env("Pendulum-v1");
    let high = vec![1.0, 1.0, 8.0];
    assert_eq!(box_bounds(&env.observation_space()), (neg(&high), high, vec![3]), "Pendulum-v1 observation_space");
    assert_eq!(box_bounds(&env.action_space()), (vec![-2.0], vec![2.0], vec![1]), "Pendulum-v1 action_space");

    for id in NATIVE_ENV_IDS {
        let env = make_env(id);
        let (obs_dim, act_dim) = (env.observation_space().flat_dim(), env.action_space().flat_dim());
        let want = match id {
            "CartPole-v1" => (4, 1),
            "Acrobot-v1" => (6, 1),
            "Pendulum-v1" => (3, 1),
            _ => (2, 1),
        };
        assert_eq!((obs_dim, act_dim), want, "{id}: flat dims");
    }
}
