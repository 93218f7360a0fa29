//! The rollout buffer and Generalised Advantage Estimation.
//!
//! All arrays are flattened row-major `[n_steps, n_envs]` (`t * n_envs + e`), f32 on the host:
//! the rollout is collected step by step on the CPU, so there is nothing to gain from tensors
//! until the minibatch update.

use crate::distributed::EnvSplit;
use crate::error::{ProximaError, Result};

/// The inputs of [`gae`], all `[n_steps, n_envs]` row-major except `last_values` (`[n_envs]`).
#[derive(Clone, Copy, Debug)]
pub struct GaeInput<'a> {
    /// r_t: the reward received after acting at step t.
    pub rewards: &'a [f32],
    /// V(s_t): the critic's value of the observation acted on at step t.
    pub values: &'a [f32],
    /// V(s_T): the value of the observation after the last step of the rollout, `[n_envs]`.
    pub last_values: &'a [f32],
    /// V(final observation) where the episode was truncated at step t (time limit); read only
    /// where `truncated[t][e]` is set and `terminated[t][e]` is not.
    pub final_obs_values: &'a [f32],
    /// 1 where step t reached a terminal state (no bootstrap), else 0.
    pub terminated: &'a [bool],
    /// 1 where step t was cut by a time limit (bootstrap from `final_obs_values`), else 0.
    pub truncated: &'a [bool],
    /// Number of parallel environments N.
    pub n_envs: usize,
}

/// One step of the GAE recursion, walked backwards in time (Schulman et al. 2016, Eq. 11–12):
/// δ_t = r_t + γ·V_next − V(s_t), then Â_t = δ_t + γλ·Â_{t+1} when the trajectory continues past
/// t (else Â_t = δ_t). Every GAE in Proxima is this step over its own layout: [`gae`] over
/// `[T, N]` rollouts, and the language models' GAE over the tokens of `[B, T]` responses.
#[inline]
pub fn gae_step(
    reward: f64,
    value: f64,
    next_value: f64,
    next_advantage: f64,
    continues: bool,
    gamma: f64,
    gae_lambda: f64,
) -> f64 {
    let delta = reward + gamma * next_value - value;
    delta + if continues { gamma * gae_lambda * next_advantage } else { 0.0 }
}

/// Generalised Advantage Estimation, Eq. 11–12 of Schulman et al. 2016 ("High-Dimensional
/// Continuous Control Using Generalized Advantage Estimation"):
///
/// δ_t = r_t + γ·V_next − V(s_t),  Â_t = δ_t + γλ·Â_{t+1}·(episode continues),
///
/// where V_next is 0 if step t `terminated`, V(final observation) if it was `truncated`
/// (time limit: the state is not terminal, so its value is bootstrapped), V(s_{t+1}) otherwise
/// (V(s_T) = `last_values` after the last step). The recursion restarts at every episode end,
/// since with autoreset the next row belongs to a new episode.
///
/// Returns `(advantages, returns)`, both `[n_steps, n_envs]`, with returns = Â + V (the
/// critic's regression target, "λ-returns"). Computed in f64, stored as f32.
///
/// # Errors
/// `InvalidArgument` when the arrays' lengths disagree or `n_envs` is 0.
pub fn gae(input: &GaeInput<'_>, gamma: f64, gae_lambda: f64) -> Result<(Vec<f32>, Vec<f32>)> {
    let n = input.n_envs;
    let len = input.rewards.len();
    if n == 0 || len % n != 0 {
        return Err(ProximaError::InvalidArgument(format!("gae: {len} rewards do not form rows of n_envs = {n}")));
    }
    for (name, l) in [
        ("values", input.values.len()),
        ("final_obs_values", input.final_obs_values.len()),
        ("terminated", input.terminated.len()),
        ("truncated", input.truncated.len()),
    ] {
        if l != len {
            return Err(ProximaError::InvalidArgument(format!("gae: `{name}` has {l} entries, rewards has {len}")));
        }
    }
    if input.last_values.len() != n {
        return Err(ProximaError::InvalidArgument(format!(
            "gae: `last_values` has {} entries, expected n_envs = {n}",
            input.last_values.len()
        )));
    }
    let t_max = len / n;
    let mut adv = vec![0f32; len];
    let mut ret = vec![0f32; len];
    for e in 0..n {
        let mut last_gae = 0f64;
        for t in (0..t_max).rev() {
            let i = t * n + e;
            let (next_value, continues) = if input.terminated[i] {
                (0.0, false)
            } else if input.truncated[i] {
                (input.final_obs_values[i] as f64, false)
            } else if t + 1 == t_max {
                (input.last_values[e] as f64, true)
            } else {
                (input.values[i + n] as f64, true)
            };
            last_gae = gae_step(
                input.rewards[i] as f64,
                input.values[i] as f64,
                next_value,
                last_gae,
                continues,
                gamma,
                gae_lambda,
            );
            adv[i] = last_gae as f32;
            ret[i] = (last_gae + input.values[i] as f64) as f32;
        }
    }
    Ok((adv, ret))
}

/// Monte-Carlo returns G_t = Σ_{k≥0} γ^k·r_{t+k} to the end of each episode (Williams 1992;
/// Sutton & Barto 2018, §13.3), over a `[n_steps, n_envs]` rollout of `rewards` with its
/// `terminated` / `truncated` flags. A time-limit cut ends the sum like a terminal (the return is
/// the episode's as it happened: nothing is bootstrapped, as REINFORCE asks).
///
/// Returns `(returns, complete)`, both `[n_steps, n_envs]`: `complete[i]` is false for the steps
/// after an env's last episode end in the rollout, whose episode goes on past it (their return
/// is not known yet; their G_t is 0). Computed in f64, stored as f32.
///
/// # Errors
/// `InvalidArgument` when the lengths disagree or `n_envs` is 0.
pub fn monte_carlo_returns(
    rewards: &[f32],
    terminated: &[bool],
    truncated: &[bool],
    n_envs: usize,
    gamma: f64,
) -> Result<(Vec<f32>, Vec<bool>)> {
    let len = rewards.len();
    if n_envs == 0 || len % n_envs != 0 || terminated.len() != len || truncated.len() != len {
        return Err(ProximaError::InvalidArgument(format!(
            "monte_carlo_returns: {len} rewards, {} terminated, {} truncated flags for rows of n_envs = {n_envs}",
            terminated.len(),
            truncated.len()
        )));
    }
    let mut returns = vec![0f32; len];
    let mut complete = vec![false; len];
    for e in 0..n_envs {
        let (mut g, mut seen_end) = (0f64, false);
        for i in (e..len).step_by(n_envs).rev() {
            if terminated[i] || truncated[i] {
                (g, seen_end) = (0.0, true);
            }
            g = rewards[i] as f64 + gamma * g;
            returns[i] = if seen_end { g as f32 } else { 0.0 };
            complete[i] = seen_end;
        }
    }
    Ok((returns, complete))
}

/// Normalises advantages in place to mean 0 and (Bessel-corrected) std 1:
/// Â ← (Â − mean) / (std + 1e-8), as SB3 and CleanRL do. Statistics are computed in f64.
///
/// Safe by construction: with fewer than 2 values the std is undefined and the values are left
/// unchanged; with all-equal values the result is exactly 0 (no NaN).
pub fn normalize_advantages(adv: &mut [f32]) {
    if let Some((mean, denom)) = mean_and_std_denom(adv.iter().map(|&a| a as f64), adv.len()) {
        for a in adv.iter_mut() {
            *a = ((*a as f64 - mean) / denom) as f32;
        }
    }
}

/// [`normalize_advantages`] in f64 (used by the float64 reference tests).
pub fn normalize_advantages_f64(adv: &mut [f64]) {
    if let Some((mean, denom)) = mean_and_std_denom(adv.iter().copied(), adv.len()) {
        for a in adv.iter_mut() {
            *a = (*a - mean) / denom;
        }
    }
}

/// `(mean, std_bessel + 1e-8)` of `n` values, or `None` when `n < 2`.
fn mean_and_std_denom(values: impl Iterator<Item = f64> + Clone, n: usize) -> Option<(f64, f64)> {
    if n < 2 {
        return None;
    }
    let mean = values.clone().sum::<f64>() / n as f64;
    let var = values.map(|a| (a - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, var.sqrt() + 1e-8))
}

/// Explained variance 1 − Var(returns − values)/Var(returns) (population variances), the
/// fraction of the returns' variance the critic accounts for. `NaN` when Var(returns) = 0,
/// as in SB3/CleanRL.
pub fn explained_variance(values: &[f32], returns: &[f32]) -> f64 {
    let n = returns.len() as f64;
    if returns.is_empty() {
        return f64::NAN;
    }
    let var = |it: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = it.collect();
        let m = v.iter().sum::<f64>() / n;
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n
    };
    let var_y = var(&mut returns.iter().map(|&r| r as f64));
    if var_y == 0.0 {
        return f64::NAN;
    }
    let var_res = var(&mut returns.iter().zip(values).map(|(&r, &v)| r as f64 - v as f64));
    1.0 - var_res / var_y
}

/// The rollout's observations `[T, N, obs_dim]`, as f32 or, for a `uint8` observation space
/// whose observations are not normalised (Atari frames), as bytes: 8 × 128 × 4 × 84 × 84 frames
/// are 29 MB as u8, 115 MB as f32. Reading gives f32 either way (every byte is exact in f32).
#[derive(Clone, Debug, PartialEq)]
pub enum Observations {
    /// Stored as given.
    F32(Vec<f32>),
    /// Stored as bytes: every value written must be an integer in 0..=255.
    U8(Vec<u8>),
}

impl Observations {
    /// Values stored.
    pub fn len(&self) -> usize {
        match self {
            Observations::F32(v) => v.len(),
            Observations::U8(v) => v.len(),
        }
    }

    /// Whether no value is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `src` at value offset `at`.
    ///
    /// # Errors
    /// `NonFinite` when a byte store is handed a value that is not an integer in 0..=255 (an
    /// env whose observations break its declared `uint8` space), naming the value.
    pub fn write(&mut self, at: usize, src: &[f32]) -> Result<()> {
        match self {
            Observations::F32(v) => v[at..at + src.len()].copy_from_slice(src),
            Observations::U8(v) => {
                // For 0 ≤ x ≤ 255, m = x + 2²³ is x rounded to an integer, held in m's low
                // mantissa bits: x is a valid byte exactly when m − 2²³ gives x back. One pass of
                // plain float arithmetic (it vectorises; `as` conversions saturate element by
                // element), then the message for the first bad value.
                const TWO_POW_23: f32 = 8_388_608.0;
                let mut bad = 0u32;
                for (d, &x) in v[at..at + src.len()].iter_mut().zip(src) {
                    let m = x + TWO_POW_23;
                    let ok = (x >= 0.0) & (x <= 255.0) & (m - TWO_POW_23 == x);
                    bad |= u32::from(!ok);
                    *d = m.to_bits() as u8;
                }
                if bad != 0 {
                    let x = src.iter().find(|&&x| f32::from(x as u8) != x).copied().unwrap_or(f32::NAN);
                    return Err(ProximaError::NonFinite(format!(
                        "an observation value {x} in a uint8 observation space (expected an integer in 0..=255)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// All values as f32: borrowed when stored as f32.
    pub fn to_f32(&self) -> std::borrow::Cow<'_, [f32]> {
        match self {
            Observations::F32(v) => std::borrow::Cow::Borrowed(v),
            Observations::U8(v) => std::borrow::Cow::Owned(v.iter().map(|&b| f32::from(b)).collect()),
        }
    }

    /// Appends rows `rows` (each `width` values) to `out` as f32.
    pub fn gather_into(&self, rows: &[usize], width: usize, out: &mut Vec<f32>) {
        match self {
            Observations::F32(v) => gather_rows(out, v, rows, width),
            Observations::U8(v) => {
                rows.iter().for_each(|&i| out.extend(v[i * width..(i + 1) * width].iter().map(|&b| f32::from(b))))
            }
        }
    }
}

/// Appends rows `rows` (each `w` values) of `src` to `out`. Rows of a few values are copied
/// value by value: a `memcpy` call per row of 1 to 4 floats cost more than the copy (a
/// minibatch gathers ~900 such rows).
fn gather_rows<T: Copy>(out: &mut Vec<T>, src: &[T], rows: &[usize], w: usize) {
    match w {
        0 => {}
        1 => out.extend(rows.iter().map(|&i| src[i])),
        2..=16 => {
            out.reserve(rows.len() * w);
            for &i in rows {
                out.extend(src[i * w..(i + 1) * w].iter().copied());
            }
        }
        _ => rows.iter().for_each(|&i| out.extend_from_slice(&src[i * w..(i + 1) * w])),
    }
}

/// One rollout of N envs × T steps, filled by the collector and read by the update.
///
/// Shapes (row-major, `t * n_envs + e`): `observations` `[T, N, obs_dim]`, `actions`
/// `[T, N, act_dim]` (a discrete action is stored as one f32; continuous actions are stored
/// *unclipped*, as sampled), `old_head` `[T, N, head_dim]`, `action_masks` `[T, N, mask_dim]`,
/// all others `[T, N]`.
#[derive(Clone, Debug)]
pub struct RolloutBuffer {
    /// T.
    pub n_steps: usize,
    /// N.
    pub n_envs: usize,
    /// Flattened observation length.
    pub obs_dim: usize,
    /// Flattened action length (1 for Discrete).
    pub act_dim: usize,
    /// Width of π_θold's stored distribution parameters per transition (logits or means); 0
    /// when the algorithm needs none (A2C), and then `old_head` is empty.
    pub head_dim: usize,
    /// s_t.
    pub observations: Observations,
    /// a_t.
    pub actions: Vec<f32>,
    /// log π_θold(a_t|s_t), fixed at collection time.
    pub log_probs: Vec<f32>,
    /// V_θold(s_t).
    pub values: Vec<f32>,
    /// π_θold(·|s_t)'s parameters: logits (Categorical components side by side) or Gaussian
    /// means, `[T, N, head_dim]`: the reference of the KL objectives and of the measured
    /// KL[π_θold, π_θ], so the update needs no forward pass at θ_old.
    pub old_head: Vec<f32>,
    /// π_θold's state-independent Gaussian log-std `[act_dim]` (empty for discrete actions).
    pub old_log_std: Vec<f32>,
    /// Width of a stored action mask ([`crate::env::Space::mask_dim`]); 0 when the rollout is
    /// not masked, and then `action_masks` is empty.
    pub mask_dim: usize,
    /// Which actions were valid at s_t (1) and which masked (0), `[T, N, mask_dim]`
    /// (sb3-contrib's `MaskableRolloutBuffer.action_masks`).
    pub action_masks: Vec<u8>,
    /// A recurrent policy's hidden-state width; 0 for a feed-forward policy (and then
    /// `rnn_state0` and `episode_starts` are empty).
    pub state_dim: usize,
    /// Each env's hidden state before the rollout's first step, `[N, state_dim]`.
    pub rnn_state0: Vec<f32>,
    /// Whether s_t starts an episode (the hidden state is zeroed before step t), `[T, N]`.
    pub episode_starts: Vec<bool>,
    /// r_t.
    pub rewards: Vec<f32>,
    /// Whether step t reached a terminal state.
    pub terminated: Vec<bool>,
    /// Whether step t was cut by a time limit.
    pub truncated: Vec<bool>,
    /// V(final observation) of truncated steps (0 elsewhere).
    pub final_obs_values: Vec<f32>,
    /// Â_t, filled by [`RolloutBuffer::compute_advantages`].
    pub advantages: Vec<f32>,
    /// Â_t + V(s_t), filled by [`RolloutBuffer::compute_advantages`].
    pub returns: Vec<f32>,
}

impl RolloutBuffer {
    /// An empty buffer for T = `n_steps`, N = `n_envs`, storing `head_dim` distribution
    /// parameters of π_θold per transition (0: none).
    pub fn new(n_steps: usize, n_envs: usize, obs_dim: usize, act_dim: usize, head_dim: usize) -> Self {
        Self::with_storage(n_steps, n_envs, obs_dim, act_dim, head_dim, false)
    }

    /// As [`RolloutBuffer::new`], the observations stored as bytes ([`Observations::U8`]) from the
    /// start: no float copy of the frames is ever allocated.
    pub fn new_uint8(n_steps: usize, n_envs: usize, obs_dim: usize, act_dim: usize, head_dim: usize) -> Self {
        Self::with_storage(n_steps, n_envs, obs_dim, act_dim, head_dim, true)
    }

    /// Bytes one transition of a buffer takes (its observation as bytes or f32, the floats and
    /// flags beside it): × `n_steps × n_envs` for refusing a buffer the machine cannot hold.
    pub fn bytes_per_transition(obs_dim: usize, act_dim: usize, head_dim: usize, uint8: bool) -> u128 {
        let obs = obs_dim as u128 * if uint8 { 1 } else { 4 };
        obs + 4 * (act_dim + head_dim + 7) as u128 + 3
    }

    fn with_storage(
        n_steps: usize,
        n_envs: usize,
        obs_dim: usize,
        act_dim: usize,
        head_dim: usize,
        uint8: bool,
    ) -> Self {
        let len = n_steps * n_envs;
        RolloutBuffer {
            n_steps,
            n_envs,
            obs_dim,
            act_dim,
            head_dim,
            observations: if uint8 {
                Observations::U8(vec![0; len * obs_dim])
            } else {
                Observations::F32(vec![0.0; len * obs_dim])
            },
            actions: vec![0.0; len * act_dim],
            log_probs: vec![0.0; len],
            values: vec![0.0; len],
            old_head: vec![0.0; len * head_dim],
            old_log_std: Vec::new(),
            mask_dim: 0,
            action_masks: Vec::new(),
            state_dim: 0,
            rnn_state0: Vec::new(),
            episode_starts: Vec::new(),
            rewards: vec![0.0; len],
            terminated: vec![false; len],
            truncated: vec![false; len],
            final_obs_values: vec![0.0; len],
            advantages: vec![0.0; len],
            returns: vec![0.0; len],
        }
    }

    /// From now on this buffer stores an action mask of `mask_dim` entries per transition (all
    /// valid until written; 0: none).
    pub fn mask_actions(&mut self, mask_dim: usize) {
        self.mask_dim = mask_dim;
        self.action_masks = vec![1; self.len() * mask_dim];
    }

    /// From now on this buffer holds a recurrent policy's rollouts: hidden states of
    /// `state_dim` values, episode starts, and minibatches of whole sequences
    /// ([`Minibatches::new`]).
    pub fn hold_sequences(&mut self, state_dim: usize) {
        self.state_dim = state_dim;
        self.rnn_state0 = vec![0.0; self.n_envs * state_dim];
        self.episode_starts = vec![false; self.len()];
    }

    /// This buffer storing its observations as bytes ([`Observations::U8`]).
    pub fn with_uint8_observations(mut self) -> Self {
        self.observations = Observations::U8(vec![0; self.observations.len()]);
        self
    }

    /// N·T, the number of transitions in a full rollout.
    pub fn len(&self) -> usize {
        self.n_steps * self.n_envs
    }

    /// Whether the buffer holds no transitions (T or N is 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole rollout as one minibatch, in order (A2C's single batch), the advantages
    /// normalised over it when `normalize_advantages` (without π_θold's parameters); its
    /// observations as the rollout's bytes (`Minibatch::pixels`) when `reads_bytes` and the
    /// rollout stores bytes, as [`Minibatches::with_byte_pixels`] gives them.
    pub fn as_minibatch(&self, normalize_advantages: bool, reads_bytes: bool) -> Minibatch {
        let mut advantages = self.advantages.clone();
        if normalize_advantages {
            self::normalize_advantages(&mut advantages);
        }
        let (observations, pixels) = match &self.observations {
            Observations::U8(bytes) if reads_bytes => (Vec::new(), bytes.clone()),
            obs => (obs.to_f32().into_owned(), Vec::new()),
        };
        Minibatch {
            len: self.len(),
            observations,
            actions: self.actions.clone(),
            old_log_probs: self.log_probs.clone(),
            advantages,
            old_values: self.values.clone(),
            returns: self.returns.clone(),
            old_head: Vec::new(),
            action_masks: self.action_masks.clone(),
            sequences: None,
            pixels,
        }
    }

    /// Runs [`gae`] on the full rollout and stores advantages and returns.
    ///
    /// `last_values`: V(s_T) for each env, `[n_envs]`.
    pub fn compute_advantages(&mut self, last_values: &[f32], gamma: f64, gae_lambda: f64) -> Result<()> {
        let (adv, ret) = gae(
            &GaeInput {
                rewards: &self.rewards,
                values: &self.values,
                last_values,
                final_obs_values: &self.final_obs_values,
                terminated: &self.terminated,
                truncated: &self.truncated,
                n_envs: self.n_envs,
            },
            gamma,
            gae_lambda,
        )?;
        self.advantages = adv;
        self.returns = ret;
        Ok(())
    }
}

/// The transitions of one minibatch, gathered into contiguous arrays (shapes as in
/// [`RolloutBuffer`], with B = `len` rows).
#[derive(Clone, Debug, Default)]
pub struct Minibatch {
    /// B.
    pub len: usize,
    /// s_t, `[B, obs_dim]` (empty when the minibatch holds `pixels` instead).
    pub observations: Vec<f32>,
    /// s_t as the rollout stored them, bytes `[B, obs_dim]`, in place of `observations` for a
    /// policy that reads frames as bytes ([`Minibatches::with_byte_pixels`]); empty otherwise.
    pub pixels: Vec<u8>,
    /// a_t as stored, `[B, act_dim]`.
    pub actions: Vec<f32>,
    /// log π_θold(a_t|s_t), `[B]`.
    pub old_log_probs: Vec<f32>,
    /// Â_t, `[B]` (normalised over the rollout when asked; per-minibatch normalisation is the
    /// algorithm's to apply).
    pub advantages: Vec<f32>,
    /// V_θold(s_t), `[B]`.
    pub old_values: Vec<f32>,
    /// R_t = Â_t + V_θold(s_t), `[B]`.
    pub returns: Vec<f32>,
    /// π_θold's distribution parameters, `[B, head_dim]` (empty unless asked for).
    pub old_head: Vec<f32>,
    /// The stored action masks, `[B, mask_dim]`, 1 = valid (empty when the rollout is not
    /// masked): the logits of the masked actions are [`crate::policy::distributions::MASKED_LOGIT`] in the loss.
    pub action_masks: Vec<u8>,
    /// A recurrent policy's minibatch: its rows are whole sequences (`None` for a feed-forward
    /// policy's).
    pub sequences: Option<Sequences>,
}

/// The sequences of a recurrent policy's minibatch (recurrent PPO, CleanRL's
/// `ppo_atari_lstm.py`): the rows are `n_seqs` envs' whole rollouts, time-major (row
/// t·n_seqs + k is step t of the k-th env), each run from its hidden state at the rollout's start.
#[derive(Clone, Debug, Default)]
pub struct Sequences {
    /// Envs (sequences) in the minibatch.
    pub n_seqs: usize,
    /// 1 where a row's step starts an episode (its hidden state is zeroed first), `[B]`.
    pub episode_starts: Vec<f32>,
    /// Each sequence's hidden state before its first step, `[n_seqs, state_dim]`.
    pub state0: Vec<f32>,
}

/// The rollout cut into shuffled minibatches of `size`, epoch after epoch: each
/// [`Minibatches::shuffle`] permutes the previous epoch's order of the N·T indices (as
/// `SliceRandom::shuffle` on one persistent index vector), and [`Minibatches::next_batch`]
/// gathers the next `size` of them.
pub struct Minibatches<'a> {
    buf: &'a RolloutBuffer,
    advantages: Vec<f32>,
    idx: Vec<usize>,
    size: usize,
    next: usize,
    with_old_head: bool,
    /// Whether the observations are gathered as the rollout's bytes (`Minibatch::pixels`).
    bytes: bool,
    batch: Minibatch,
    /// A distributed run's split: `idx` then runs over every rank's transitions.
    split: Option<EnvSplit>,
    /// The local rows of the current minibatch (distributed runs), or its sequences' rows.
    local: Vec<usize>,
    /// This rank's share of the current global minibatch (see [`Minibatches::next_with_share`]).
    share: f32,
}

impl<'a> Minibatches<'a> {
    /// Minibatches of `size` over `buf` (whose advantages are computed); the advantages are
    /// normalised once over the whole rollout first when `normalize_over_batch`; the stored
    /// π_θold parameters are gathered only when `with_old_head`. A recurrent policy's buffer
    /// ([`RolloutBuffer::hold_sequences`]) is cut into minibatches of whole sequences instead:
    /// `size / n_steps` envs' rollouts each (CleanRL's `ppo_atari_lstm.py`), the envs shuffled.
    pub fn new(buf: &'a RolloutBuffer, size: usize, normalize_over_batch: bool, with_old_head: bool) -> Self {
        let mut advantages = buf.advantages.clone();
        if normalize_over_batch {
            normalize_advantages(&mut advantages);
        }
        let (units, size) = match buf.state_dim {
            0 => (buf.len(), size.max(1)),
            _ => (buf.n_envs, (size / buf.n_steps.max(1)).max(1)),
        };
        Minibatches {
            buf,
            advantages,
            idx: (0..units).collect(),
            size,
            next: units,
            with_old_head: with_old_head && buf.head_dim > 0,
            bytes: false,
            batch: Minibatch::default(),
            split: None,
            local: Vec::new(),
            share: 1.0,
        }
    }

    /// The minibatches of a distributed run ([`crate::distributed`]): each epoch permutes the
    /// `T · total_envs` transitions of *every* rank (the same permutation on each, from the same
    /// `rng`), cuts them into global minibatches of `size`, and [`Minibatches::next_batch`]
    /// gathers the part of each this rank holds. A rank that holds none of a minibatch gets its
    /// first row as a placeholder with share 0 (it must still take part in the minibatch's
    /// collectives). With one rank this is [`Minibatches::new`] (advantages not normalised over
    /// the batch).
    pub fn split(buf: &'a RolloutBuffer, size: usize, with_old_head: bool, split: EnvSplit) -> Self {
        let global = buf.n_steps * split.total_envs();
        Minibatches {
            idx: (0..global).collect(),
            next: global,
            split: Some(split),
            ..Self::new(buf, size, false, with_old_head)
        }
    }

    /// These minibatches with their observations as the rollout's bytes (`Minibatch::pixels`,
    /// `observations` left empty) when `reads_bytes` and the rollout stores bytes
    /// ([`Observations::U8`]): no float copy of the frames for a policy that reads them as they
    /// are ([`crate::policy::Policy::reads_byte_pixels`]).
    pub fn with_byte_pixels(mut self, reads_bytes: bool) -> Self {
        self.bytes = reads_bytes && matches!(self.buf.observations, Observations::U8(_));
        self
    }

    /// [`Minibatches::next_batch`] with this rank's share of it: its rows ÷ the global
    /// minibatch's (1 in a run of one process; 0 for a placeholder). Each rank's mean-loss
    /// gradient times its share, summed over ranks, is the global minibatch's mean-loss gradient.
    pub fn next_with_share(&mut self) -> Option<(&mut Minibatch, f32)> {
        self.next_batch()?;
        Some((&mut self.batch, self.share))
    }

    /// Starts an epoch: shuffles the order of the transitions with `rng`.
    pub fn shuffle<R: rand::Rng + ?Sized>(&mut self, rng: &mut R) {
        use rand::seq::SliceRandom;
        self.idx.shuffle(rng);
        self.next = 0;
    }

    /// The epoch's next minibatch (the last may be smaller), or `None` at the epoch's end.
    pub fn next_batch(&mut self) -> Option<&mut Minibatch> {
        let mut chunk = self.idx.get(self.next..(self.next + self.size).min(self.idx.len()))?;
        if chunk.is_empty() {
            return None;
        }
        self.next += chunk.len();
        let envs = (self.buf.state_dim > 0).then(|| chunk.to_vec());
        if let Some(envs) = &envs {
            let n = self.buf.n_envs;
            self.local.clear();
            self.local.extend((0..self.buf.n_steps).flat_map(|t| envs.iter().map(move |&e| t * n + e)));
            chunk = &self.local;
        } else if let Some(split) = self.split {
            self.local.clear();
            self.local.extend(chunk.iter().filter_map(|&g| split.local_row(g)));
            self.share = self.local.len() as f32 / chunk.len() as f32;
            if self.local.is_empty() {
                self.local.push(0);
            }
            chunk = &self.local;
        }
        let (b, buf) = (&mut self.batch, self.buf);
        let (od, ad, hd) = (buf.obs_dim, buf.act_dim, if self.with_old_head { buf.head_dim } else { 0 });
        b.len = chunk.len();
        let gather = |out: &mut Vec<f32>, src: &[f32], w: usize| {
            out.clear();
            gather_rows(out, src, chunk, w);
        };
        b.observations.clear();
        b.pixels.clear();
        match &buf.observations {
            Observations::U8(bytes) if self.bytes => gather_rows(&mut b.pixels, bytes, chunk, od),
            obs => obs.gather_into(chunk, od, &mut b.observations),
        }
        gather(&mut b.actions, &buf.actions, ad);
        gather(&mut b.old_log_probs, &buf.log_probs, 1);
        gather(&mut b.advantages, &self.advantages, 1);
        gather(&mut b.old_values, &buf.values, 1);
        gather(&mut b.returns, &buf.returns, 1);
        gather(&mut b.old_head, &buf.old_head, hd);
        b.action_masks.clear();
        gather_rows(&mut b.action_masks, &buf.action_masks, chunk, buf.mask_dim);
        b.sequences = envs.map(|envs| Sequences {
            n_seqs: envs.len(),
            episode_starts: chunk.iter().map(|&r| f32::from(u8::from(buf.episode_starts[r]))).collect(),
            state0: envs
                .iter()
                .flat_map(|&e| &buf.rnn_state0[e * buf.state_dim..(e + 1) * buf.state_dim])
                .copied()
                .collect(),
        });
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_observations_read_back_as_the_floats_written() {
        let mut buf = RolloutBuffer::new(2, 1, 3, 1, 0).with_uint8_observations();
        buf.observations.write(0, &[0.0, 17.0, 255.0]).unwrap();
        buf.observations.write(3, &[1.0, 2.0, 3.0]).unwrap();
        assert!(matches!(&buf.observations, Observations::U8(b) if b == &[0, 17, 255, 1, 2, 3]));
        assert_eq!(&*buf.observations.to_f32(), &[0.0, 17.0, 255.0, 1.0, 2.0, 3.0]);
        let mut out = vec![];
        buf.observations.gather_into(&[1, 0], 3, &mut out);
        assert_eq!(out, [1.0, 2.0, 3.0, 0.0, 17.0, 255.0]);
        for bad in [256.0, -1.0, 0.5, f32::NAN, f32::INFINITY, 255.5] {
            let e = buf.observations.write(0, &[bad]).unwrap_err().to_string();
            assert!(e.contains("uint8 observation space"), "{e}");
        }
        let e = buf.observations.write(0, &[1.0, 300.0, -2.0]).unwrap_err().to_string();
        assert!(e.contains("value 300 in"), "the first bad value is named: {e}");
        // A policy that reads bytes gets the rows' bytes, and no float copy of them.
        let gather = |buf: &RolloutBuffer, reads_bytes: bool| {
            use rand::SeedableRng;
            let mut batches = Minibatches::new(buf, 2, false, false).with_byte_pixels(reads_bytes);
            batches.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
            let mb = batches.next_batch().unwrap();
            (mb.observations.clone(), mb.pixels.clone())
        };
        let ((floats, none), (empty, bytes)) = (gather(&buf, false), gather(&buf, true));
        assert!(none.is_empty() && empty.is_empty() && floats.len() == 6);
        assert_eq!(bytes.iter().map(|&b| f32::from(b)).collect::<Vec<_>>(), floats, "the same rows, as bytes");
        let float_buf = RolloutBuffer::new(2, 1, 3, 1, 0);
        assert_eq!(gather(&float_buf, true).0.len(), 6, "a float rollout gives floats");
        let (whole_bytes, whole_floats) = (buf.as_minibatch(false, true), buf.as_minibatch(false, false));
        assert!(whole_bytes.observations.is_empty() && whole_floats.pixels.is_empty());
        assert!(matches!(&buf.observations, Observations::U8(b) if *b == whole_bytes.pixels));
        assert_eq!(whole_floats.observations, *buf.observations.to_f32());
    }

    #[test]
    fn normalize_is_safe_for_one_and_equal_values() {
        let mut one = [3.0f32];
        normalize_advantages(&mut one);
        assert_eq!(one, [3.0]);
        let mut eq = [2.0f32; 5];
        normalize_advantages(&mut eq);
        assert!(eq.iter().all(|a| *a == 0.0));
        let mut v = [1.0f32, 2.0, 3.0];
        normalize_advantages(&mut v);
        assert!((v[0] + 1.0).abs() < 1e-6 && v[1].abs() < 1e-6 && (v[2] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn terminated_does_not_bootstrap_but_truncated_does() {
        // One env, two steps; step 0 ends the episode.
        let base = |term: bool, trunc: bool| {
            gae(
                &GaeInput {
                    rewards: &[1.0, 1.0],
                    values: &[0.5, 0.5],
                    last_values: &[10.0],
                    final_obs_values: &[2.0, 0.0],
                    terminated: &[term, false],
                    truncated: &[trunc, false],
                    n_envs: 1,
                },
                0.9,
                0.5,
            )
            .unwrap()
            .0
        };
        assert!((base(true, false)[0] - 0.5).abs() < 1e-6); // 1 - 0.5
        assert!((base(false, true)[0] - (1.0 + 0.9 * 2.0 - 0.5)).abs() < 1e-6);
        // Continuing: δ0 = 1 + .9*.5 - .5, δ1 = 1 + .9*10 - .5, Â0 = δ0 + .45 δ1.
        let (d0, d1) = (1.0 + 0.45 - 0.5, 1.0 + 9.0 - 0.5);
        assert!((base(false, false)[0] - (d0 + 0.45 * d1) as f32).abs() < 1e-5);
    }

    #[test]
    fn monte_carlo_returns_stop_at_episode_ends_and_mark_unfinished_tails() {
        // Two envs, four steps. Env 0: episode ends at t=1 (terminated), then runs on unfinished.
        // Env 1: truncated at t=3 (no bootstrap).
        let rewards = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0];
        let term = [false, false, true, false, false, false, false, false];
        let trunc = [false, false, false, false, false, false, false, true];
        let (g, done) = monte_carlo_returns(&rewards, &term, &trunc, 2, 0.5).unwrap();
        assert_eq!(&done[..], &[true, true, true, true, false, true, false, true]);
        // Env 0: G_1 = 1, G_0 = 1 + 0.5·1 = 1.5; tails 0.
        assert_eq!((g[0], g[2], g[4], g[6]), (1.5, 1.0, 0.0, 0.0));
        // Env 1: G_3 = 2, G_2 = 2 + 1 = 3, G_1 = 3.5, G_0 = 3.75.
        assert_eq!((g[1], g[3], g[5], g[7]), (3.75, 3.5, 3.0, 2.0));
        assert!(monte_carlo_returns(&rewards, &term[..7], &trunc, 2, 0.5).is_err());
        assert!(monte_carlo_returns(&rewards, &term, &trunc, 3, 0.5).is_err());
    }

    #[test]
    fn gae_rejects_mismatched_lengths() {
        let err = gae(
            &GaeInput {
                rewards: &[1.0, 1.0],
                values: &[0.5],
                last_values: &[0.0],
                final_obs_values: &[0.0, 0.0],
                terminated: &[false, false],
                truncated: &[false, false],
                n_envs: 1,
            },
            0.99,
            0.95,
        );
        assert!(err.unwrap_err().to_string().contains("values"));
    }

    #[test]
    fn explained_variance_of_perfect_critic_is_one() {
        assert!((explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!(explained_variance(&[0.0, 0.0], &[1.0, 1.0]).is_nan());
    }
}
