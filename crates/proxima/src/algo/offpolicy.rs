//! What the off-policy algorithms (SAC, TD3, DDPG) share: the replay buffer, the actor's and
//! the critics' Adam, the counters of the loop, one sampled batch as tensors, and the scalars
//! an exact resume needs. [`super::learner::Learner`] drives them.

use crate::error::Result;
use crate::optim::Optimizer;
use crate::policy::OffPolicyNets;
use crate::replay::{ReplayBuffer, ReplaySample};
use candle_core::{Device, Tensor, Var};
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
    sample: ReplaySample,
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

fn sizes(p: &[(String, Var)]) -> Vec<usize> {
    p.iter().map(|(_, v)| v.elem_count()).collect()
}

impl OffPolicyState {
    /// Fresh optimisers (Adam at `lr`, ε `adam_eps`) for `nets`' actor and critics.
    pub fn new(replay: ReplayBuffer, nets: &OffPolicyNets, lr: f64, adam_eps: f64) -> Self {
        OffPolicyState {
            replay,
            actor_opt: Optimizer::adam(&sizes(nets.actor_params()), lr, adam_eps),
            critic_opt: Optimizer::adam(&sizes(nets.critic_params()), lr, adam_eps),
            n_updates: 0,
            steps_since_train: 0,
            sample: ReplaySample::default(),
        }
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
}
