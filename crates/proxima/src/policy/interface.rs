//! The policy seam: the [`Policy`] trait between the algorithms and a network implementation,
//! and what its methods return.

use super::spec::{ActionKind, PolicySpec};
use crate::error::Result;
use crate::loss::PpoCoefs;
use crate::rollout::Minibatch;
use rand::RngCore;

/// What a loss evaluation ([`Policy::ppo_loss`], [`Policy::a2c_loss`]) reports; what the
/// gradient needs stays inside the implementation until [`Policy::backward`], and log r_t(θ)
/// is [`Policy::log_ratio`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LossReport {
    /// The loss and its parts as computed (f32): `[loss, policy_loss, value_loss, entropy]`.
    pub values: [f32; 4],
}

/// θ and ∇θ of an implementation that keeps them as flat vectors (every parameter row-major, in
/// the spec's order, concatenated), lent for an optimiser step in place
/// ([`Policy::backward_flat`]).
pub struct FlatParams<'a> {
    /// The parameters' names, in order (for errors).
    pub names: &'a [String],
    /// θ, `[P]` (the vector itself: the optimiser swaps in its new values rather than copying
    /// them).
    pub values: &'a mut Vec<f32>,
    /// ∇θ of the last loss, `[P]` (mutable: a distributed run sums it across ranks in place).
    pub grads: &'a mut [f32],
    /// Where the optimiser may cut its step in two halves run side by side: the index of the
    /// first parameter of the second half, and what runs them; `None`: one after the other.
    /// Each parameter's update is its own, so the halves give the same bits either way.
    pub halves: Option<(usize, &'a dyn Join)>,
}

/// Runs two closures side by side (an implementation's second thread), returning when both are
/// done.
pub trait Join {
    /// Runs `a` and `b`, side by side where it can, one after the other otherwise.
    fn run_both(&self, a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send));
}

/// The seam between the algorithms and a network implementation: an actor-critic π_θ, V_θ whose
/// parameters are the spec's ([`PolicySpec::param_shapes`], in that order, each row-major),
/// evaluated on host arrays. Every gradient is one host vector per parameter in that order, so
/// the optimiser, checkpoints and (later) all-reduces work on any implementation.
pub trait Policy: Send {
    /// The network's spec.
    fn spec(&self) -> &PolicySpec;

    /// Acts on N observations `[N, obs_dim]`: samples from π(·|s) with `rng`, or takes the mode
    /// when `deterministic`; actions as stored (continuous: unclipped; see
    /// [`Policy::env_action`]), log-probabilities and V(s).
    ///
    /// # Errors
    /// Observations that are not rows of `obs_dim`; the implementation's own errors.
    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput>;

    /// [`Policy::act`] into `out`, whose vectors are cleared and refilled (an implementation
    /// may then act without allocating), with invalid-action masking when `masks` is given:
    /// `[N, head_dim]`, 1 = valid, 0 = masked (sb3-contrib's `action_masks`). A masked action's
    /// logit is [`super::distributions::MASKED_LOGIT`] before the softmax, so it is never drawn
    /// nor the mode, the log-probabilities are the masked distribution's, and `out.head` holds
    /// the masked logits. The default calls [`Policy::act`] and refuses masks.
    ///
    /// # Errors
    /// As [`Policy::act`]; [`ActionKind::check_masks`]'s for `masks`; `Unsupported` for masks
    /// given to an implementation without masking.
    fn act_into(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        if masks.is_some() {
            return Err(crate::error::ProximaError::Unsupported(
                "this policy does not take action masks (only PPO's actor-critic does)".into(),
            ));
        }
        *out = self.act(obs, deterministic, rng)?;
        Ok(())
    }

    /// Values of one env's hidden state for a recurrent policy (recurrent PPO); 0 (the default)
    /// for a feed-forward one.
    fn recurrent_state_dim(&self) -> usize {
        0
    }

    /// A recurrent policy's [`Policy::act_into`]: one step of N envs with `hidden` =
    /// `(episode_starts [N], state [N, recurrent_state_dim])`, each env's state zeroed first where
    /// its episode starts and advanced in place; `out.head` holds the (masked) head of the step.
    ///
    /// # Errors
    /// As [`Policy::act_into`]; `Unsupported` (the default) for a feed-forward policy.
    fn act_recurrent(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        hidden: (&[bool], &mut [f32]),
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        let _ = (obs, masks, hidden, deterministic, rng, out);
        Err(crate::error::ProximaError::Unsupported("this policy has no hidden state (not a recurrent policy)".into()))
    }

    /// A recurrent policy's V(s) for one step of N envs with their hidden state (not advanced).
    ///
    /// # Errors
    /// As [`Policy::act_recurrent`].
    fn predict_values_recurrent(&self, obs: &[f32], episode_starts: &[bool], state: &[f32]) -> Result<Vec<f32>> {
        let _ = (obs, episode_starts, state);
        Err(crate::error::ProximaError::Unsupported("this policy has no hidden state (not a recurrent policy)".into()))
    }

    /// [`Policy::rollout_kl`] of a recurrent policy, over its rollout's sequences: `obs`
    /// `[T·N, obs_dim]` time-major (row t·N + e), `episode_starts` `[T·N]`, `state0` `[N,
    /// state_dim]` the envs' hidden states before step 0 (π_θ's pass then carries them as acting
    /// did); `old_head` and `masks` row for row.
    ///
    /// # Errors
    /// As [`Policy::act_recurrent`]; [`Policy::rollout_kl`]'s.
    fn rollout_kl_recurrent(
        &self,
        obs: &[f32],
        (episode_starts, state0): (&[bool], &[f32]),
        old_head: &[f32],
        old_log_std: &[f32],
        masks: Option<&[u8]>,
    ) -> Result<f64> {
        let _ = (obs, episode_starts, state0, old_head, old_log_std, masks);
        Err(crate::error::ProximaError::Unsupported("this policy has no hidden state (not a recurrent policy)".into()))
    }

    /// V(s) for N observations `[N, obs_dim]` → `[N]`.
    ///
    /// # Errors
    /// As [`Policy::act`].
    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>>;

    /// π(·|s)'s parameters for N observations: the head `[N, head_dim]` (logits side by side,
    /// or Gaussian means) and the Gaussian log-std `[dim]` (empty for discrete actions).
    ///
    /// # Errors
    /// As [`Policy::act`].
    fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)>;

    /// The PPO loss ([`crate::loss::ppo_loss`]) of minibatch `mb` at the current θ, with π_θold
    /// as `mb.old_head` and `old_log_std` (read by the KL objectives only). Keeps what
    /// [`Policy::backward`] needs.
    ///
    /// # Errors
    /// A KL objective without `mb.old_head`; the implementation's own errors.
    fn ppo_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], coefs: &PpoCoefs) -> Result<LossReport>;

    /// Whether [`Policy::ppo_loss`] and [`Policy::a2c_loss`] read a minibatch's frames as the
    /// rollout's bytes (`Minibatch::pixels`, no float copy of them;
    /// [`crate::rollout::Minibatches::with_byte_pixels`], `RolloutBuffer::as_minibatch`).
    /// `false` (the default): they read `Minibatch::observations`.
    fn reads_byte_pixels(&self) -> bool {
        false
    }

    /// The A2C loss ([`crate::loss::a2c_loss`]) of `batch` at the current θ. Keeps what
    /// [`Policy::backward`] needs.
    ///
    /// # Errors
    /// The implementation's own errors.
    fn a2c_loss(&mut self, batch: &Minibatch, vf_coef: f64, ent_coef: f64) -> Result<LossReport>;

    /// PPG's auxiliary-phase loss (Cobbe et al. 2021, "Phasic Policy Gradient", eq. 2 and the
    /// value network's distillation, as openai/phasic-policy-gradient's `aux_train`) of `batch`
    /// at the current θ: L = ½·mean (V_aux(s) − V̂_targ)² + β_clone·mean KL[π_old(·|s) ‖ π_θ(·|s)]
    /// + ½·mean (V(s) − V̂_targ)². Reported as `[loss, aux_value_loss, value_loss, kl]`. Keeps
    /// what [`Policy::backward`] needs.
    ///
    /// # Errors
    /// `Unsupported` (the default) for an implementation or a network without the auxiliary
    /// value head; the implementation's own errors.
    fn aux_loss(&mut self, batch: &AuxBatch<'_>, beta_clone: f64) -> Result<LossReport> {
        let _ = (batch, beta_clone);
        Err(crate::error::ProximaError::Unsupported(
            "PPG's auxiliary loss runs on the candle backend with aux_value_head = true".into(),
        ))
    }

    /// log r_t(θ) = log π_θ(a_t|s_t) − log π_θold(a_t|s_t) per row of the last PPO loss, `[B]`
    /// (empty after an A2C loss; read it only after checking that the loss was finite).
    fn log_ratio(&self) -> &[f32];

    /// ∇θ of the last loss, one host vector per parameter in the spec's order (`None` where no
    /// gradient flows).
    ///
    /// # Errors
    /// `InvalidArgument` when no loss was evaluated since the last call.
    fn backward(&mut self) -> Result<Vec<Option<Vec<f32>>>>;

    /// [`Policy::backward`] into the implementation's own flat gradient vector, lending θ and
    /// ∇θ for an optimiser step without copies; `Ok(None)` (the default, without computing
    /// anything) for implementations that keep no flat vectors.
    ///
    /// # Errors
    /// As [`Policy::backward`].
    fn backward_flat(&mut self) -> Result<Option<FlatParams<'_>>> {
        Ok(None)
    }

    /// d = mean over N observations of KL[π_θold(·|s), π_θ(·|s)] at the current θ, π_θold given
    /// as a head `[N, head_dim]` and log-std (as [`Policy::dist_params_host`] returns them);
    /// with `masks` (`[N, head_dim]`, as [`Policy::act_into`] takes them) both distributions
    /// are the masked ones.
    ///
    /// # Errors
    /// As [`Policy::act`]; [`ActionKind::check_masks`]'s for `masks`.
    fn rollout_kl(&self, obs: &[f32], old_head: &[f32], old_log_std: &[f32], masks: Option<&[u8]>) -> Result<f64>;

    /// Every parameter's name and shape, in order (the spec's, [`PolicySpec::param_shapes`], for
    /// the actor-critics; SAC's networks have their own).
    fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.spec().param_shapes()
    }

    /// The parameters' names, in the spec's order.
    fn param_names(&self) -> Vec<String> {
        self.param_shapes().into_iter().map(|(n, _)| n).collect()
    }

    /// Every parameter's values, row-major, in the spec's order.
    ///
    /// # Errors
    /// The implementation's own errors.
    fn params(&self) -> Result<Vec<Vec<f32>>>;

    /// Sets every parameter (same order and sizes as [`Policy::params`]).
    ///
    /// # Errors
    /// `InvalidArgument` for a count or size mismatch; nothing is changed then.
    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()>;

    /// Clips a stored continuous action to the Box bounds for the env (in place); a no-op for
    /// discrete actions. The unclipped action stays in the buffer (CleanRL #240).
    fn env_action(&self, action: &mut [f32]) {
        if let ActionKind::Continuous { low, high, .. } = &self.spec().action {
            for ((a, l), h) in action.iter_mut().zip(low).zip(high) {
                *a = a.clamp(*l, *h);
            }
        }
    }
}

/// A minibatch of PPG's auxiliary phase ([`Policy::aux_loss`]), B rows.
#[derive(Clone, Copy, Debug)]
pub struct AuxBatch<'a> {
    /// s, `[B, obs_dim]`, as the policy saw them when they were collected.
    pub observations: &'a [f32],
    /// V̂_targ: the value targets (GAE returns) of their policy-phase rollout, `[B]`.
    pub returns: &'a [f32],
    /// π_old(·|s): the head `[B, head_dim]` before the auxiliary phase, as
    /// [`Policy::dist_params_host`] returns it.
    pub old_head: &'a [f32],
    /// π_old's Gaussian log-std `[dim]` (empty for discrete actions).
    pub old_log_std: &'a [f32],
}

/// What [`Policy::act`] returns for a batch of N observations.
#[derive(Clone, Debug, Default)]
pub struct ActOutput {
    /// Sampled (or deterministic) actions as stored, `[N, act_dim]` (continuous: unclipped).
    pub actions: Vec<f32>,
    /// log π(a|s), `[N]`.
    pub log_probs: Vec<f32>,
    /// V(s), `[N]`.
    pub values: Vec<f32>,
    /// π(·|s)'s head `[N, head_dim]` (logits side by side, or Gaussian means), filled only by a
    /// policy whose rows do not depend on the batch they are in (the fused backend: each row's
    /// bits are those a pass over the whole rollout gives it), so the collector can keep π_θold
    /// from the rollout's own passes; empty otherwise (the collector then makes that pass).
    pub head: Vec<f32>,
}
