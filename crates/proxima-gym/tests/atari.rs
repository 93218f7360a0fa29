//! Proxima's Atari wrappers (`proxima_env::atari`) over ALE games through the bridge, against
//! Stable-Baselines3's `AtariWrapper` + `VecFrameStack(4)` in a `DummyVecEnv`, frame by frame:
//! for Breakout and Pong, a fixed seed and a fixed random action sequence of 2,000 steps, the
//! stacked observations (SB3's channel-last stack transposed to our channel-first one), the
//! terminal observations, rewards, terminated/truncated flags and lives are equal.
//!
//! Needs a Python with gymnasium, ale-py, opencv-python and stable-baselines3 (`PROXIMA_PYTHON`
//! or `python3`): ignored by a plain `cargo test`, run by `cargo test -- --include-ignored` (as
//! `.ci/run` does), where it fails without them.

use proxima_env::atari::{AtariOptions, AtariWrapper};
use proxima_gym::AleGame;
use std::path::Path;
use std::process::Command;

const STEPS: usize = 2000;
const SEED: u64 = 7;

/// SB3's side: writes `actions` (u8), `obs` (the stacks DummyVecEnv returns, `[STEPS, 4, 84,
/// 84]`), `final` (the terminal observation of each step that ended an episode, in order),
/// `reward` (f32), `done`, `trunc` (u8) and `lives` (u8), one entry per step.
const SB3: &str = r#"
import sys, numpy as np, gymnasium as gym, ale_py
from stable_baselines3.common.atari_wrappers import AtariWrapper
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack
gym.register_envs(ale_py)
out, game, seed, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
make = lambda: AtariWrapper(gym.make(game, frameskip=1, repeat_action_probability=0.0, full_action_space=False))
venv = VecFrameStack(DummyVecEnv([make]), n_stack=4)
venv.seed(seed)
venv.reset()
n = venv.action_space.n
actions = np.random.default_rng(seed).integers(0, n, steps).astype(np.uint8)
obs, final, rew, done, trunc, lives = [], [], [], [], [], []
for a in actions:
    o, r, d, info = venv.step(np.array([a]))
    obs.append(o[0].transpose(2, 0, 1))
    if d[0]:
        final.append(info[0]["terminal_observation"].transpose(2, 0, 1))
    rew.append(r[0]); done.append(d[0]); trunc.append(info[0].get("TimeLimit.truncated", False))
    lives.append(info[0]["lives"])
for name, a, t in (("actions", actions, np.uint8), ("obs", obs, np.uint8), ("final", final, np.uint8),
                   ("reward", rew, np.float32), ("done", done, np.uint8), ("trunc", trunc, np.uint8),
                   ("lives", lives, np.uint8)):
    open(f"{out}/{name}", "wb").write(np.ascontiguousarray(np.array(a, dtype=t)).tobytes())
"#;

fn python() -> String {
    std::env::var("PROXIMA_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Panics when the Python lacks one of the four packages.
fn require_packages() {
    let py = python();
    let probe = "import gymnasium, ale_py, cv2, stable_baselines3";
    let ok = Command::new(&py).args(["-c", probe]).output().map(|o| o.status.success()).unwrap_or(false);
    assert!(
        ok,
        "{py} cannot `{probe}`: this test needs them (pip install gymnasium ale-py opencv-python-headless stable-baselines3, or set PROXIMA_PYTHON; .ci/run installs them)"
    );
}

fn sb3_reference(dir: &Path, game: &str) {
    let args = [dir.to_str().unwrap(), game, &SEED.to_string(), &STEPS.to_string()];
    let out = Command::new(python()).args(["-c", SB3]).args(args).output().unwrap();
    assert!(out.status.success(), "SB3's side failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn compare(game: &str) {
    let dir = std::env::temp_dir().join(format!("proxima-atari-{}-{}", game.replace('/', "_"), std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    sb3_reference(&dir, game);
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let (actions, obs, finals, done, trunc, lives) =
        (read("actions"), read("obs"), read("final"), read("done"), read("trunc"), read("lives"));
    let rewards: Vec<f32> = read("reward").chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let game_made = AleGame::make(game, 0.0).unwrap();
    assert!(game_made.steps_ale_directly(), "{game}: gymnasium.make adds only its checking wrappers");
    let mut env = AtariWrapper::new(game_made, AtariOptions::default()).unwrap();
    let n = 4 * 84 * 84;
    env.reset(Some(SEED)).unwrap();
    let (mut episodes, mut lives_lost) = (0, 0);
    for t in 0..STEPS {
        let s = env.step(actions[t] as usize).unwrap();
        let at = |what: &str| format!("{game} step {t} ({what})");
        assert_eq!(s.reward as f32, rewards[t], "{}", at("reward"));
        assert_eq!(s.terminated || s.truncated, done[t] == 1, "{}", at("done"));
        assert_eq!(s.truncated, trunc[t] == 1, "{}", at("truncated"));
        let l = s.info.values.iter().find(|(k, _)| *k == "lives").unwrap().1;
        assert_eq!(l, lives[t] as f64, "{}", at("lives"));
        if done[t] == 1 {
            let want = &finals[episodes * n..(episodes + 1) * n];
            assert!(env.observation() == want, "{}", at("terminal observation"));
            lives_lost += usize::from(!s.info.values.iter().any(|(k, _)| *k == "game_score"));
            episodes += 1;
            env.reset(None).unwrap();
        }
        assert!(env.observation() == &obs[t * n..(t + 1) * n], "{}", at("observation"));
    }
    eprintln!("{game}: {STEPS} steps equal to SB3's, {episodes} episodes ({lives_lost} of them ended by a lost life)");
    assert!(episodes >= 2, "{game}: the action sequence should cross episode ends ({episodes})");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs a Python with gymnasium, ale-py, opencv-python and stable-baselines3 (PROXIMA_PYTHON; .ci/run installs them)"]
fn breakout_and_pong_equal_sb3s_atari_wrapper_frame_by_frame() {
    require_packages();
    std::env::set_var("PYTHONWARNINGS", "ignore");
    for game in ["ALE/Breakout-v5", "ALE/Pong-v5"] {
        compare(game);
    }
}
