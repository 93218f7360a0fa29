//! PPO (Schulman et al. 2017, arXiv:1707.06347): the loss as a pure function — L^CLIP, the
//! KL-penalised L^KLPEN (fixed or adaptive β) or the plain surrogate — and the update (K epochs
//! of shuffled minibatches) over one rollout.

use crate::algo::update::{AdvantageNorm, Replicas, UpdateStats};
use crate::error::{ProximaError, Result};
use crate::loss::{kl_and_clip_fraction, Objective, PpoCoefs};
use crate::optim::Optimizer;
use crate::policy::Policy;
use crate::rollout::{explained_variance, RolloutBuffer};
use rand::Rng;

/// PPO's hyperparameters (SB3's names), projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoParams {
    /// K: epochs over each rollout.
    pub n_epochs: usize,
    /// Minibatch size M (divides N·T).
    pub batch_size: usize,
    /// ε: the clip range of r_t(θ).
    pub clip_range: f64,
    /// Clip range of V around V_old; `None` = unclipped value loss.
    pub clip_range_vf: Option<f64>,
    /// c₁.
    pub vf_coef: f64,
    /// c₂.
    pub ent_coef: f64,
    /// Global gradient-norm clip; `None` = none.
    pub max_grad_norm: Option<f64>,
    /// Stop the epochs before a step whose minibatch approx KL exceeds 1.5·target_kl (SB3's rule).
    pub target_kl: Option<f64>,
    /// Where Â is normalised.
    pub normalize_advantage: AdvantageNorm,
    /// The surrogate: clipped, KL-penalised (fixed or adaptive β) or plain.
    pub objective: Objective,
    /// d_targ of the adaptive β.
    pub kl_target: f64,
    /// Compute d over the rollout after the update for the logs (the adaptive β computes it
    /// either way); else it is reported as NaN.
    pub log_kl_divergence: bool,
}

impl PpoParams {
    /// The loss's coefficients with the current β.
    pub fn coefs(&self, kl_coef: f64) -> PpoCoefs {
        PpoCoefs {
            clip_range: self.clip_range,
            clip_range_vf: self.clip_range_vf,
            vf_coef: self.vf_coef,
            ent_coef: self.ent_coef,
            objective: self.objective,
            kl_coef,
        }
    }
}

/// Runs K epochs of minibatch updates on one full rollout (whose advantages are computed).
///
/// For each epoch the N·T indices are shuffled with `rng` and cut into minibatches of
/// `p.batch_size`; for each minibatch Â is normalised (per `p.normalize_advantage`), the
/// loss is back-propagated, gradients are clipped to `max_grad_norm` globally, and Adam steps
/// with `lr`. With `target_kl` set, the update stops before a step whose minibatch KL
/// exceeds 1.5·target_kl (SB3's rule). After the epochs, d = mean KL[π_θold, π_θ] over the
/// rollout is measured (π_θold as the buffer stored it) when `p.log_kl_divergence` or the
/// objective needs it, else reported as NaN; with `objective = adaptive_kl` β
/// (`kl_coef`) is then adapted as in the paper's Sec. 4: β ← 2β if d > 1.5·d_targ, β ← β/2
/// if d < d_targ/1.5.
///
/// On several processes ([`Replicas`]) the minibatches are the global ones: Â is normalised
/// with their global statistics, the losses, KL and clip fraction reported (and `target_kl`'s
/// decision) are the global minibatch's, the gradient is summed across ranks and d is averaged
/// over ranks (the explained variance too, as an approximation) — every rank takes the same
/// steps.
///
/// # Errors
/// `NonFinite` naming the minibatch when the loss or a gradient is not finite (parameters are
/// left as they were before that step); in a distributed run, the engine's.
pub fn update<R: Rng + ?Sized>(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    buf: &RolloutBuffer,
    p: &PpoParams,
    (lr, kl_coef): (f64, &mut f64),
    rng: &mut R,
    replicas: Replicas<'_>,
) -> Result<UpdateStats> {
    let kl_objective = matches!(p.objective, Objective::AdaptiveKl | Objective::FixedKl);
    let coefs = p.coefs(*kl_coef);
    let batch_norm = p.normalize_advantage == AdvantageNorm::Batch;
    let mut batches =
        replicas.minibatches(buf, p.batch_size, batch_norm, kl_objective).with_byte_pixels(policy.reads_byte_pixels());
    opt.lr = lr;
    let mut s = UpdateStats {
        learning_rate: lr,
        explained_variance: explained_variance(&buf.values, &buf.returns),
        kl_coef: if kl_objective { *kl_coef } else { 0.0 },
        ..Default::default()
    };
    let mut clip_sum = 0f64;
    'epochs: for _epoch in 0..p.n_epochs {
        batches.shuffle(rng);
        while let Some((mb, share)) = batches.next_with_share() {
            if p.normalize_advantage == AdvantageNorm::Minibatch {
                replicas.normalize_advantages(&mut mb.advantages, share)?;
            }
            // L^CLIP + c₁·L^VF − c₂·S on this minibatch, r_t(θ) against π_θold.
            let out = policy.ppo_loss(mb, &buf.old_log_std, &coefs)?;
            let (kl, cf) = kl_and_clip_fraction(policy.log_ratio(), p.clip_range);
            let [l, policy_loss, value_loss, entropy] = out.values.map(f64::from);
            let [loss, policy_loss, value_loss, entropy, kl, cf] =
                replicas.minibatch_means([l, policy_loss, value_loss, entropy, kl, cf], share)?;
            if !loss.is_finite() {
                return Err(ProximaError::NonFinite(format!(
                    "loss is {loss} at minibatch {} (policy_loss {policy_loss}, value_loss {value_loss}, entropy {entropy})",
                    s.minibatches
                )));
            }
            if p.target_kl.is_some_and(|tk| kl > 1.5 * tk) {
                s.approx_kl = kl;
                break 'epochs;
            }
            let info = replicas.apply_gradients(policy, opt, p.max_grad_norm, share)?;
            s.policy_loss += policy_loss;
            s.value_loss += value_loss;
            s.entropy += entropy;
            s.grad_norm += info.grad_norm;
            clip_sum += cf;
            s.approx_kl = kl;
            s.minibatches += 1;
        }
        s.epochs += 1;
    }
    let m = s.minibatches.max(1) as f64;
    (s.policy_loss, s.value_loss, s.entropy, s.grad_norm) =
        (s.policy_loss / m, s.value_loss / m, s.entropy / m, s.grad_norm / m);
    s.clip_fraction = clip_sum / m;
    let kl =
        if p.log_kl_divergence || p.objective == Objective::AdaptiveKl { rollout_kl(policy, buf)? } else { f64::NAN };
    [s.kl_divergence, s.explained_variance] = replicas.mean_over_ranks([kl, s.explained_variance])?;
    if p.objective == Objective::AdaptiveKl {
        *kl_coef = adapt_kl_coef(*kl_coef, s.kl_divergence, p.kl_target);
    }
    Ok(s)
}

/// d = the mean KL[π_θold ‖ π_θ] over the rollout after the update (logged as `kl_divergence`;
/// adaptive KL's measurement): a recurrent policy's over the rollout's sequences, from the
/// states they started from.
fn rollout_kl(policy: &dyn Policy, buf: &RolloutBuffer) -> Result<f64> {
    let masks = (buf.mask_dim > 0).then_some(&buf.action_masks[..]);
    let obs = buf.observations.to_f32();
    match buf.state_dim {
        0 => policy.rollout_kl(&obs, &buf.old_head, &buf.old_log_std, masks),
        _ => policy.rollout_kl_recurrent(
            &obs,
            (&buf.episode_starts, &buf.rnn_state0),
            &buf.old_head,
            &buf.old_log_std,
            masks,
        ),
    }
}

/// The adaptive-KL rule of Schulman et al. 2017, Sec. 4 (constants 1.5 and 2 are the paper's):
/// the new β given the measured d and the target d_targ.
pub fn adapt_kl_coef(beta: f64, d: f64, d_targ: f64) -> f64 {
    if d > 1.5 * d_targ {
        beta * 2.0
    } else if d < d_targ / 1.5 {
        beta / 2.0
    } else {
        beta
    }
}
