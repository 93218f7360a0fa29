//! Evaluation: episodes of a policy, with sampled or deterministic actions, optionally recorded
//! as a video (Gymnasium's `render_mode="rgb_array"` frames).

use crate::env::atari::GameEpisode;
use crate::env::{Action, Env};
use crate::error::{ProximaError, Result};
use crate::normalize::Normalizer;
use crate::policy::{ActionKind, Policy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Evaluates `policy` on `episodes` episodes of `env_id` (episode i reset with `seed + i`),
/// deterministic (mode) or sampled actions. Returns the undiscounted return of each episode (an
/// Atari env's: each whole game, its real score over all lives, as SB3's `evaluate_policy`
/// reports it under `Monitor`).
///
/// # Errors
/// Unknown env; a policy whose input/output does not fit the env's spaces; env errors.
///
/// `norm`: the training run's normalisation statistics, applied frozen to observations
/// (rewards are reported unscaled). `masked`: the policy acts under the env's action masks
/// (sb3-contrib's `evaluate_policy(use_masking=True)`: a policy trained masked); otherwise the
/// masks are ignored, as the policy ignored them in training.
pub fn evaluate(
    policy: &dyn Policy,
    env_id: &str,
    (episodes, deterministic, seed): (usize, bool, u64),
    norm: Option<&Normalizer>,
    masked: bool,
) -> Result<Vec<f64>> {
    evaluate_recorded(policy, env_id, (episodes, deterministic, seed), norm, masked, None)
}

/// [`evaluate`] with each episode's length: `(returns, lengths)`, a length in env steps, or for
/// an Atari game its raw frames over every life (what SB3's `Monitor` under `AtariWrapper`
/// records as `l`, and `evaluate_policy(return_episode_rewards=True)` returns).
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_episodes(
    policy: &dyn Policy,
    env_id: &str,
    (episodes, deterministic, seed): (usize, bool, u64),
    norm: Option<&Normalizer>,
    masked: bool,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let episodes = run_episodes(policy, env_id, (episodes, deterministic, seed), (norm, masked), None)?;
    Ok(episodes.into_iter().unzip())
}

/// What [`evaluate_recorded`] records: the first `episodes` episodes, one frame after each
/// reset and each step, to `path` (`.gif` or `.mp4`) at `fps` (default: the env's
/// `render_fps`).
#[derive(Clone, Debug)]
pub struct Recording {
    /// Output file; `.gif` or `.mp4`.
    pub path: std::path::PathBuf,
    /// Number of leading episodes recorded (at least 1).
    pub episodes: usize,
    /// Playback speed; `None` uses the env's `render_fps`.
    pub fps: Option<u32>,
}

/// [`evaluate`], optionally recording a rollout (Gymnasium's `render_mode="rgb_array"`: the env
/// is made with [`crate::env::make_with`] and `render()` is called after reset and every step).
/// The actions, and so the returns, are the same with and without recording.
///
/// # Errors
/// As [`evaluate`]; plus `Unsupported` when the env cannot render, and the video writer's
/// errors (see [`crate::env::render::VideoWriter`]).
pub fn evaluate_recorded(
    policy: &dyn Policy,
    env_id: &str,
    (episodes, deterministic, seed): (usize, bool, u64),
    norm: Option<&Normalizer>,
    masked: bool,
    record: Option<&Recording>,
) -> Result<Vec<f64>> {
    let episodes = run_episodes(policy, env_id, (episodes, deterministic, seed), (norm, masked), record)?;
    Ok(episodes.into_iter().map(|(ret, _)| ret).collect())
}

/// The episodes of [`evaluate_recorded`]: each one's return and length (as
/// [`evaluate_episodes`] gives them).
fn run_episodes(
    policy: &dyn Policy,
    env_id: &str,
    (episodes, deterministic, seed): (usize, bool, u64),
    (norm, masked): (Option<&Normalizer>, bool),
    record: Option<&Recording>,
) -> Result<Vec<(f64, usize)>> {
    let mut env = crate::env::make_with(env_id, record.is_some())?;
    let mut video = match record {
        Some(r) => Some(crate::env::render::VideoWriter::new(&r.path, r.fps.unwrap_or_else(|| env.render_fps()))?),
        None => None,
    };
    let record_episodes = record.map_or(0, |r| r.episodes.max(1));
    let kind = check_policy_fits(policy, &*env, env_id)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut returns, mut out) = (Vec::with_capacity(episodes), crate::policy::ActOutput::default());
    let mut memory = Memory { state: vec![0.0; policy.recurrent_state_dim()], start: true };
    for i in 0..episodes {
        let (mut obs, _) = env.reset(Some(seed.wrapping_add(i as u64)))?;
        memory.start = true;
        let recording = i < record_episodes;
        if recording {
            video.as_mut().expect("writer exists when recording").push(&env.render()?)?;
        }
        let (mut total, mut steps) = (0f64, 0usize);
        loop {
            if let Some(n) = norm {
                n.normalize_obs(&mut obs);
            }
            let masks = if masked { current_masks(&mut *env)? } else { None };
            memory.act(policy, &obs, masks.as_deref(), deterministic, &mut rng, &mut out)?;
            let a = &mut out.actions;
            policy.env_action(a);
            let action = match kind {
                ActionKind::Discrete { .. } => Action::Discrete(a[0] as usize),
                ActionKind::MultiDiscrete { .. } | ActionKind::Continuous { .. } => Action::Continuous(a),
            };
            let r = env.step(action)?;
            total += r.reward;
            steps += 1;
            if recording {
                video.as_mut().expect("writer exists when recording").push(&env.render()?)?;
            }
            if r.terminated || r.truncated {
                // An Atari game goes on after a lost life; its episode is the game, its return
                // the real score (as in training's episode statistics).
                match GameEpisode::of(&r.info) {
                    Some(GameEpisode::LifeLost) => {
                        obs = env.reset(None)?.0;
                        memory.start = true; // as in training: a lost life ends an episode
                        continue;
                    }
                    Some(GameEpisode::Over { score, frames }) => (total, steps) = (score, frames),
                    None => {}
                }
                break;
            }
            obs = r.observation;
        }
        returns.push((total, steps));
    }
    if let Some(v) = video {
        v.finish()?;
    }
    Ok(returns)
}

/// A recurrent policy's hidden state through an evaluation's episodes (empty for a feed-forward
/// policy), zeroed where an episode starts.
struct Memory {
    state: Vec<f32>,
    start: bool,
}

impl Memory {
    /// The policy's action for one observation, carrying the hidden state.
    fn act(
        &mut self,
        policy: &dyn Policy,
        obs: &[f32],
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut ChaCha8Rng,
        out: &mut crate::policy::ActOutput,
    ) -> Result<()> {
        if self.state.is_empty() {
            return policy.act_into(obs, masks, deterministic, rng, out);
        }
        policy.act_recurrent(obs, masks, (&[self.start], &mut self.state), deterministic, rng, out)?;
        self.start = false;
        Ok(())
    }
}

/// The env's action masks for its current state (sb3-contrib's `get_action_masks`), 1 = valid;
/// `None` for an env without them.
///
/// # Errors
/// The env's.
fn current_masks(env: &mut dyn crate::env::Env) -> Result<Option<Vec<u8>>> {
    let mut masks = vec![false; env.action_space().mask_dim()];
    if masks.is_empty() || !env.action_masks(&mut masks)? {
        return Ok(None);
    }
    Ok(Some(masks.into_iter().map(u8::from).collect()))
}

/// The env's action distribution, once `policy` is known to fit the env's spaces (its
/// observation size, image shape and action head).
///
/// # Errors
/// `Checkpoint` naming both sides when they differ; `Unsupported` for an action space without a
/// distribution.
fn check_policy_fits(policy: &dyn Policy, env: &dyn Env, env_id: &str) -> Result<ActionKind> {
    let obs_dim = env.observation_space().flat_dim();
    let kind = ActionKind::from_space(&env.action_space())?;
    // A CNN reads an image: the same flat size in another shape (16 × 42 × 42 for 4 × 84 × 84) is no fit.
    let image_differs = policy.spec().cnn.is_some_and(|i| match env.observation_space() {
        crate::env::Space::Box { shape, .. } => shape != [i.channels, i.height, i.width],
        _ => true,
    });
    if obs_dim != policy.spec().obs_dim
        || image_differs
        || kind.head_dim() != policy.spec().action.head_dim()
        || kind.act_dim() != policy.spec().action.act_dim()
    {
        return Err(ProximaError::Checkpoint(format!(
            "the policy (observations of {}{}, action {}) does not fit {env_id} (observations {}, action {})",
            policy.spec().obs_dim,
            policy.spec().cnn.map(|i| format!(" as {}×{}×{}", i.channels, i.height, i.width)).unwrap_or_default(),
            policy.spec().action.describe(),
            env.observation_space().describe(),
            kind.describe()
        )));
    }
    Ok(kind)
}

/// The normalisation statistics a checkpoint was trained with, to apply frozen at evaluation
/// (`None` for a run without normalisation).
///
/// # Errors
/// `Checkpoint` when the statistics are malformed, or absent from a checkpoint whose config
/// normalised observations (evaluating without them would silently give other returns).
pub fn saved_normalizer(ck: &crate::checkpoint::Checkpoint) -> Result<Option<Normalizer>> {
    match ck.meta.extra.get("normalization") {
        Some(j) => serde_json::from_str(j)
            .map(Some)
            .map_err(|e| ProximaError::Checkpoint(format!("{}: malformed normalization statistics ({e})", ck.path()))),
        None => {
            let cfg = ck.meta.config_toml.parse::<toml::Table>().ok();
            if cfg.and_then(|t| t.get("normalize_observation").and_then(|v| v.as_bool())) == Some(true) {
                return Err(ProximaError::Checkpoint(format!(
                    "{}: trained with normalize_observation = true, but holds no normalization statistics",
                    ck.path()
                )));
            }
            Ok(None)
        }
    }
}

/// Mean and population std of a slice.
pub fn mean_std(x: &[f64]) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let m = x.iter().sum::<f64>() / n;
    (m, (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt())
}
