//! What the off-policy algorithms (SAC, TD3, DDPG) share: the replay buffer, the actor's and
//! the critics' Adam, the counters of the loop, one sampled batch as tensors, and the scalars
//! an exact resume needs. [`super::learner::Learner`] drives them.

use crate::error::Result;
use crate::optim::Optimizer;
use crate::policy::fused::FusedOffPolicy;
use crate::policy::OffPolicyNets;
use crate::replay::{ReplayBuffer, ReplaySample};
use candle_core::{Device, Tensor};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The loop's hyperparameters (SB3's names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopParams {
    /// Env steps (over all envs) of uniformly random actions before learning starts.
    pub learning_starts: u64,
    /// Env steps per env between two trainings.
    pub train_freq: usize,
    /// Gradient steps per training.
    pub gradient_steps: usize,
    /// Transitions per gradient step.
    pub batch_size: usize,
}

/// The state both SAC and TD3 keep beside their networks.
#[derive(Debug)]
pub struct OffPolicyState {
    /// The transitions seen.
    pub replay: ReplayBuffer,
    /// Adam of the actor's parameters.
    pub actor_opt: Optimizer,
    /// Adam of the critics' parameters.
    pub critic_opt: Optimizer,
    /// Gradient steps taken.
    pub n_updates: u64,
    /// Env steps per env since the last training.
    pub steps_since_train: usize,
    /// Gradient steps a stop request cut from the last burst, taken first when the run goes on.
    pub pending_gradient_steps: usize,
    sample: ReplaySample,
    /// The fused backend's per-step buffers (reused: no allocation per gradient step).
    bufs: StepBuffers,
}

/// The host buffers of one fused gradient step, `[B, …]` each, reused from step to step.
#[derive(Debug, Default)]
pub(crate) struct StepBuffers {
    /// ε of the actions on s (SAC), of the target smoothing (TD3).
    pub eps: Vec<f32>,
    /// ã on s (SAC's sample, TD3's μ(s)) and its log π.
    pub a: Vec<f32>,
    pub log_prob: Vec<f32>,
    /// ε' of the actions on s' (SAC).
    pub next_eps: Vec<f32>,
    /// ã' on s' and its log π.
    pub next_a: Vec<f32>,
    pub next_log_prob: Vec<f32>,
    /// A critic's input [s, a].
    pub x: Vec<f32>,
    /// The critics' target y.
    pub y: Vec<f32>,
    /// min_k Q_k per row.
    pub min_q: Vec<f32>,
    /// ∂L/∂Q_k `[B]` per critic, of the critics' loss, then of the actor's.
    pub dq: Vec<Vec<f32>>,
    /// ∂L/∂a, ∂L/∂μ and ∂L/∂log σ of the actor's loss.
    pub d_a: Vec<f32>,
    pub d_mu: Vec<f32>,
    pub d_log_std: Vec<f32>,
}

/// One batch from the replay buffer as tensors of the networks' dtype.
#[derive(Debug)]
pub struct Batch {
    /// s `[B, obs_dim]`.
    pub obs: Tensor,
    /// a `[B, dim]` (squashed).
    pub actions: Tensor,
    /// r `[B]`.
    pub rewards: Tensor,
    /// s' `[B, obs_dim]`.
    pub next_obs: Tensor,
    /// 1 where s' is terminal `[B]`.
    pub dones: Tensor,
}

impl OffPolicyState {
    /// Fresh optimisers (Adam at `lr`, ε `adam_eps`) for the actor's and the critics'
    /// parameters of these sizes ([`crate::policy::Network::off_policy_sizes`]).
    pub fn new(replay: ReplayBuffer, (actor, critics): (&[usize], &[usize]), lr: f64, adam_eps: f64) -> Self {
        OffPolicyState {
            replay,
            actor_opt: Optimizer::adam(actor, lr, adam_eps),
            critic_opt: Optimizer::adam(critics, lr, adam_eps),
            n_updates: 0,
            steps_since_train: 0,
            pending_gradient_steps: 0,
            sample: ReplaySample::default(),
            bufs: StepBuffers::default(),
        }
    }

    /// `batch_size` transitions drawn with `rng` (as [`OffPolicyState::sample_batch`] draws
    /// them), on the host, with the step's buffers: both taken out of the state until
    /// [`OffPolicyState::give_back`].
    ///
    /// # Errors
    /// An empty buffer.
    pub(crate) fn take_sample<R: Rng + ?Sized>(
        &mut self,
        batch_size: usize,
        rng: &mut R,
    ) -> Result<(ReplaySample, StepBuffers)> {
        self.replay.sample_into(batch_size, rng, &mut self.sample)?;
        Ok((std::mem::take(&mut self.sample), std::mem::take(&mut self.bufs)))
    }

    /// Puts back what [`OffPolicyState::take_sample`] took, for the next step to reuse.
    pub(crate) fn give_back(&mut self, (sample, bufs): (ReplaySample, StepBuffers)) {
        (self.sample, self.bufs) = (sample, bufs);
    }

    /// `batch_size` transitions drawn with `rng`, as tensors of `nets`' dtype.
    ///
    /// # Errors
    /// An empty buffer; candle's.
    pub fn sample_batch<R: Rng + ?Sized>(
        &mut self,
        batch_size: usize,
        nets: &OffPolicyNets,
        rng: &mut R,
    ) -> Result<Batch> {
        self.replay.sample_into(batch_size, rng, &mut self.sample)?;
        let (b, od, ad) = (batch_size, self.replay.obs_dim, self.replay.act_dim);
        let dt = nets.dtype();
        let t = |v: &[f32], shape: &[usize]| -> Result<Tensor> {
            Ok(Tensor::from_slice(v, shape, &Device::Cpu)?.to_dtype(dt)?)
        };
        let s = &self.sample;
        Ok(Batch {
            obs: t(&s.observations, &[b, od])?,
            actions: t(&s.actions, &[b, ad])?,
            rewards: t(&s.rewards, &[b])?,
            next_obs: t(&s.next_observations, &[b, od])?,
            dones: t(&s.dones, &[b])?,
        })
    }

    /// Sets every optimiser's learning rate.
    pub fn set_lr(&mut self, lr: f64) {
        self.actor_opt.lr = lr;
        self.critic_opt.lr = lr;
    }
}

/// min_k of the tensors (element-wise).
///
/// # Errors
/// candle's.
pub fn min_of(q: &[Tensor]) -> Result<Tensor> {
    let mut m = q[0].clone();
    for x in &q[1..] {
        m = m.minimum(x)?;
    }
    Ok(m)
}

/// A scalar tensor as f64, or `NonFinite` naming it.
///
/// # Errors
/// `NonFinite`; candle's.
pub fn finite(loss: &Tensor, what: &str) -> Result<f64> {
    let v = loss.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(crate::error::ProximaError::NonFinite(format!("{what} is {v}")))
    }
}

/// Bytes one row of a gradient step's batch takes: the sampled transition, and the actor's (two
/// passes) and every critic's layer outputs and backward buffers, f32 each (an upper estimate).
pub fn batch_row_bytes(obs_dim: usize, act_dim: usize, net_arch: &[usize], n_critics: usize) -> u64 {
    let hidden: usize = net_arch.iter().sum();
    let widest = net_arch.iter().copied().chain([obs_dim + act_dim]).max().unwrap_or(1);
    let floats = 2 * (hidden + 3 * act_dim) + n_critics * (hidden + 1 + 3 * widest) + 3 * widest + 12 * act_dim;
    (crate::replay::bytes_per_transition(obs_dim, act_dim) + 4 * floats) as u64
}

/// Refuses a `batch_size` whose gradient steps would need more memory than the machine can give
/// them beside what is already taken (`beside`, the replay buffer's bytes), as `buffer_size` is
/// refused: the message says how much it needs.
///
/// # Errors
/// `Config`, naming `batch_size`.
pub fn check_batch_memory(batch_size: usize, row_bytes: u64, beside: u64) -> Result<()> {
    let need = batch_size as u128 * row_bytes as u128;
    let limit = crate::replay::memory_limit().saturating_sub(beside);
    if need > limit as u128 {
        return Err(crate::error::ProximaError::Config(format!(
            "batch_size = {batch_size}: a gradient step on {batch_size} transitions needs {} for the batch and the networks' buffers, more than the {} this machine can give it beside the replay buffer; lower batch_size",
            crate::replay::human_bytes(need.min(u64::MAX as u128) as u64),
            crate::replay::human_bytes(limit)
        )));
    }
    Ok(())
}

/// `n` draws of N(0, 1) as f32 into `v` (the draws [`crate::algo::sac`]'s candle step makes).
pub(crate) fn normal_into<R: Rng + ?Sized>(v: &mut Vec<f32>, n: usize, rng: &mut R) {
    v.clear();
    v.extend((0..n).map(|_| rng.sample::<f32, _>(rand_distr::StandardNormal)));
}

/// min_k q_k per row into `min`, and ∂(min)/∂q_k × `scale` into `dq[k]` as candle's chain of
/// `minimum`s splits it (the whole to the smaller, half to each on a tie); `q` `[K][rows]`.
pub fn min_and_grad(q: &[Vec<f32>], rows: usize, scale: f32, min: &mut Vec<f32>, dq: &mut Vec<Vec<f32>>) {
    dq.resize(q.len(), Vec::new());
    for d in dq.iter_mut() {
        d.clear();
        d.resize(rows, 0.0);
    }
    min.clear();
    for r in 0..rows {
        let mut cur = q[0][r];
        dq[0][r] = 1.0;
        for k in 1..q.len() {
            let v = q[k][r];
            if v < cur {
                dq[..k].iter_mut().for_each(|d| d[r] = 0.0);
                (dq[k][r], cur) = (1.0, v);
            } else if v == cur {
                dq[..k].iter_mut().for_each(|d| d[r] *= 0.5);
                dq[k][r] = 0.5;
            }
        }
        dq.iter_mut().for_each(|d| d[r] *= scale);
        min.push(cur);
    }
}

/// Σ_k mean((q_k − y)²) (as f64) and its gradient × `scale` into `dq[k]` = 2·scale·(q_k − y)/B.
pub fn sum_of_mse_and_grad(q: &[Vec<f32>], y: &[f32], scale: f32, dq: &mut Vec<Vec<f32>>) -> f64 {
    let rows = y.len();
    dq.resize(q.len(), Vec::new());
    let mut total = 0f64;
    let g = 2.0 * scale / rows as f32;
    for (qk, d) in q.iter().zip(dq.iter_mut()) {
        d.clear();
        let mut sq = 0f64;
        for (&v, &t) in qk[..rows].iter().zip(y) {
            let e = v - t;
            sq += (e as f64) * (e as f64);
            d.push(e * g);
        }
        total += sq / rows as f64;
    }
    total
}

/// `v` itself, or `NonFinite` naming it (as [`finite`] for a loss computed on the host).
pub(crate) fn finite_value(v: f64, what: &str) -> Result<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(crate::error::ProximaError::NonFinite(format!("{what} is {v}")))
    }
}

/// What one gradient step measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Losses {
    /// The actor's loss (`None` on TD3's steps without an actor update).
    pub actor_loss: Option<f64>,
    /// The critics' loss.
    pub critic_loss: f64,
    /// SAC: −mean log π(ã|s), the batch's entropy estimate.
    pub entropy: Option<f64>,
}

/// The scalars of an off-policy state an exact resume needs beyond the optimisers' moments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OffPolicySnapshot {
    /// Gradient steps taken.
    pub n_updates: u64,
    /// Env steps per env since the last training.
    pub steps_since_train: usize,
    /// The actor optimiser's step count.
    pub actor_t: u64,
    /// The critic optimiser's step count.
    pub critic_t: u64,
    /// SAC's temperature: log α and its Adam's t, m, v.
    #[serde(default)]
    pub temperature: Option<(f32, u64, f32, f32)>,
    /// Gradient steps a stop request cut from the last burst.
    #[serde(default)]
    pub pending_gradient_steps: usize,
}

/// One step of `opt` on the fused networks' θ[g] ([`crate::policy::fused::ACTOR`] or
/// [`crate::policy::fused::CRITICS`]) with the last backward pass's ∇θ, then the transposed
/// copies refreshed.
///
/// # Errors
/// `NonFinite` gradients or new parameters (θ[g] is then unchanged).
pub(crate) fn fused_optimizer_step(nets: &mut FusedOffPolicy, g: usize, opt: &mut Optimizer) -> Result<()> {
    opt.step(crate::optim::Params::Flat(nets.flat(g)), None)?;
    nets.refresh(g);
    Ok(())
}
