//! PPG, Phasic Policy Gradient (Cobbe, Hilton, Klimov & Schulman 2021, arXiv:2009.04416): PPO's
//! successor, which trains the policy and the value function in separate phases.
//!
//! - **Policy phase**, `n_iteration` (N_π) times: collect a rollout, GAE, then PPO-Clip on it
//!   for `e_policy` (E_π) epochs — L^CLIP − c₂·H on the policy network, the value loss on the
//!   separate value network (E_V = E_π, as CleanRL's `ppg_procgen.py`, which asserts
//!   `v_value = 1`) — and keep the rollout's states and value targets V̂_targ = Â + V_old in
//!   the auxiliary buffer.
//! - **Auxiliary phase**: π_old(·|s) is computed once for every state in the buffer, then
//!   `e_auxiliary` (E_aux) epochs over it in minibatches of `num_aux_rollouts` whole env
//!   rollouts (of T steps each), minimising
//!   L = ½·(V_aux(s) − V̂_targ)² + β_clone·KL[π_old(·|s) ‖ π_θ(·|s)] + ½·(V(s) − V̂_targ)²
//!   ([`crate::policy::Policy::aux_loss`]): the value target is distilled into an auxiliary head
//!   on the policy network's features while the behavioural-cloning KL keeps the policy where
//!   it was, and the value network trains further. Then the buffer is emptied.
//!
//! As openai/phasic-policy-gradient's `ppg.py`: the auxiliary phase has its own Adam (its
//! moments persist across phases), and it is skipped after the run's last iteration (its
//! result would not be used). As CleanRL: its gradients are clipped to `max_grad_norm` too, and
//! its step size is the run's current learning rate.

use crate::algo::ppo::{self, PpoParams};
use crate::algo::update::{apply_gradients, AuxStats, Replicas, UpdateStats};
use crate::error::{ProximaError, Result};
use crate::optim::Optimizer;
use crate::policy::{AuxBatch, Policy};
use crate::rollout::RolloutBuffer;
use rand::seq::SliceRandom;
use rand::Rng;

/// PPG's hyperparameters (CleanRL's `ppg_procgen.py` names), projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpgParams {
    /// The policy phase's PPO update; its `n_epochs` is E_π (`e_policy`).
    pub ppo: PpoParams,
    /// N_π: policy-phase iterations (rollouts) per auxiliary phase.
    pub n_iteration: usize,
    /// E_aux: epochs over the auxiliary buffer in each auxiliary phase.
    pub e_auxiliary: usize,
    /// β_clone: weight of the behavioural-cloning KL in the auxiliary loss.
    pub beta_clone: f64,
    /// Whole env rollouts (of T steps) per auxiliary minibatch.
    pub num_aux_rollouts: usize,
}

/// The auxiliary buffer: the states s (as the policy saw them) and value targets V̂_targ of
/// the policy phase's rollouts so far, rollout after rollout, each in the rollout buffer's
/// `[T, N]` order.
#[derive(Clone, Debug, PartialEq)]
pub struct AuxBuffer {
    /// T.
    pub n_steps: usize,
    /// N.
    pub n_envs: usize,
    /// Flattened observation length.
    pub obs_dim: usize,
    /// s, `[rollouts · T · N, obs_dim]`.
    pub observations: Vec<f32>,
    /// V̂_targ, `[rollouts · T · N]`.
    pub returns: Vec<f32>,
}

impl AuxBuffer {
    /// An empty buffer for rollouts of T = `n_steps` steps of N = `n_envs` envs.
    pub fn new(n_steps: usize, n_envs: usize, obs_dim: usize) -> Self {
        AuxBuffer { n_steps, n_envs, obs_dim, observations: Vec::new(), returns: Vec::new() }
    }

    /// The rollouts (policy-phase iterations) held.
    pub fn rollouts(&self) -> usize {
        self.returns.len() / (self.n_steps * self.n_envs).max(1)
    }

    /// Keeps a rollout's states and value targets (its advantages computed).
    pub fn push(&mut self, buf: &RolloutBuffer) {
        self.observations.extend_from_slice(&buf.observations.to_f32());
        self.returns.extend_from_slice(&buf.returns);
    }

    /// Empties the buffer (after an auxiliary phase).
    pub fn clear(&mut self) {
        self.observations.clear();
        self.returns.clear();
    }

    /// Replaces the contents with `observations` `[R, obs_dim]` and `returns` `[R]` (a
    /// checkpoint's), R a whole number of rollouts below `max_rollouts`.
    ///
    /// # Errors
    /// `Checkpoint` for sizes that are not whole rollouts of this buffer's shape, too many
    /// rollouts, or non-finite values; nothing is changed then.
    pub fn load(&mut self, observations: &[f32], returns: &[f32], max_rollouts: usize) -> Result<()> {
        let rollout = self.n_steps * self.n_envs;
        let rows = returns.len();
        if observations.len() != rows * self.obs_dim || rollout == 0 || !rows.is_multiple_of(rollout) {
            return Err(ProximaError::Checkpoint(format!(
                "PPG's auxiliary buffer holds {} observation values and {rows} returns: not whole rollouts of {rollout} steps of {} values",
                observations.len(),
                self.obs_dim
            )));
        }
        if rows / rollout >= max_rollouts {
            return Err(ProximaError::Checkpoint(format!(
                "PPG's auxiliary buffer holds {} rollouts; an auxiliary phase runs after every {max_rollouts}",
                rows / rollout
            )));
        }
        if observations.iter().chain(returns).any(|x| !x.is_finite()) {
            return Err(ProximaError::Checkpoint("PPG's auxiliary buffer holds non-finite values".into()));
        }
        self.observations = observations.to_vec();
        self.returns = returns.to_vec();
        Ok(())
    }

    /// The rows of env rollout `unit` = j·N + e (env e's T steps in the j-th stored rollout).
    fn rows_of(&self, unit: usize) -> impl Iterator<Item = usize> + '_ {
        let (j, e) = (unit / self.n_envs, unit % self.n_envs);
        (0..self.n_steps).map(move |t| (j * self.n_steps + t) * self.n_envs + e)
    }
}

/// PPG's state: its parameters, the auxiliary buffer and the auxiliary phase's Adam.
#[derive(Clone, Debug)]
pub struct Ppg {
    /// The hyperparameters.
    pub params: PpgParams,
    /// The policy phase's rollouts since the last auxiliary phase.
    pub aux: AuxBuffer,
    /// The auxiliary phase's own optimiser (same parameters as the network).
    pub aux_opt: Optimizer,
}

/// One PPG iteration's update on a full rollout (advantages computed): the policy phase's PPO
/// epochs, the rollout into the auxiliary buffer, and after every N_π-th rollout — unless
/// `last` (the run's final iteration) — the auxiliary phase. Returns PPO's diagnostics with the
/// auxiliary phase's in `aux` when one ran.
///
/// # Errors
/// As [`ppo::update`] and [`auxiliary_phase`].
pub fn update<R: Rng + ?Sized>(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    buf: &RolloutBuffer,
    ppg: &mut Ppg,
    lr: f64,
    last: bool,
    rng: &mut R,
) -> Result<UpdateStats> {
    let mut unused_beta = 0.0; // L^CLIP only: no KL penalty to adapt
    let mut stats = ppo::update(policy, opt, buf, &ppg.params.ppo, (lr, &mut unused_beta), rng, Replicas::alone())?;
    ppg.aux.push(buf);
    if ppg.aux.rollouts() < ppg.params.n_iteration {
        return Ok(stats);
    }
    if !last {
        stats.aux = Some(auxiliary_phase(policy, &mut ppg.aux_opt, &ppg.aux, &ppg.params, lr, rng)?);
    }
    ppg.aux.clear();
    Ok(stats)
}

/// The auxiliary phase on the buffer `aux`: π_old(·|s) of every stored state at the current θ,
/// then E_aux epochs; each shuffles the buffer's env rollouts with `rng` and takes one `opt`
/// step (gradients clipped to the policy phase's `max_grad_norm`) per `num_aux_rollouts` of
/// them (the last minibatch may hold fewer), on [`Policy::aux_loss`].
///
/// # Errors
/// `NonFinite` naming the epoch and minibatch when the loss is not finite (the parameters keep
/// their values from before that step); the policy's errors (`Unsupported` without the
/// auxiliary value head).
pub fn auxiliary_phase<R: Rng + ?Sized>(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    aux: &AuxBuffer,
    p: &PpgParams,
    lr: f64,
    rng: &mut R,
) -> Result<AuxStats> {
    let (old_head, old_log_std) = policy.dist_params_host(&aux.observations)?;
    let head_dim = old_head.len() / aux.returns.len().max(1);
    let mut units: Vec<usize> = (0..aux.rollouts() * aux.n_envs).collect();
    let (mut s, od) = (AuxStats::default(), aux.obs_dim);
    opt.lr = lr;
    let (mut obs, mut returns, mut head) = (Vec::new(), Vec::new(), Vec::new());
    for epoch in 0..p.e_auxiliary {
        units.shuffle(rng);
        for (i, chunk) in units.chunks(p.num_aux_rollouts.max(1)).enumerate() {
            obs.clear();
            returns.clear();
            head.clear();
            for row in chunk.iter().flat_map(|&u| aux.rows_of(u)) {
                obs.extend_from_slice(&aux.observations[row * od..(row + 1) * od]);
                returns.push(aux.returns[row]);
                head.extend_from_slice(&old_head[row * head_dim..(row + 1) * head_dim]);
            }
            let batch = AuxBatch { observations: &obs, returns: &returns, old_head: &head, old_log_std: &old_log_std };
            let [loss, aux_value_loss, value_loss, kl] = policy.aux_loss(&batch, p.beta_clone)?.values;
            if !loss.is_finite() {
                return Err(ProximaError::NonFinite(format!(
                    "PPG's auxiliary loss is {loss} at epoch {epoch}, minibatch {i} (aux_value_loss {aux_value_loss}, value_loss {value_loss}, kl {kl})"
                )));
            }
            apply_gradients(policy, opt, p.ppo.max_grad_norm)?;
            s.kl += kl as f64;
            s.aux_value_loss += aux_value_loss as f64;
            s.value_loss += value_loss as f64;
            s.minibatches += 1;
        }
    }
    let m = s.minibatches.max(1) as f64;
    (s.kl, s.aux_value_loss, s.value_loss) = (s.kl / m, s.aux_value_loss / m, s.value_loss / m);
    Ok(s)
}
