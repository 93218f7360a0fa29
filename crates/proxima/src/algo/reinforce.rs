//! REINFORCE, the Monte-Carlo policy gradient (Williams 1992, "Simple statistical
//! gradient-following algorithms for connectionist reinforcement learning"; with a learned
//! baseline as in Sutton & Barto 2018, §13.4): PPO's story starts here.
//!
//! ∇J(θ) ≈ mean_t ∇log π_θ(a_t|s_t)·(G_t − b(s_t)), where G_t is the discounted return to the end
//! of the episode ([`monte_carlo_returns`]) and b(s) = V_θ(s) (regressed on G_t) or 0. One gradient
//! step per rollout, as A2C, on the transitions whose episode ended within the rollout: an episode
//! that runs on past the rollout's last step has no known return yet, so its steps so far carry no
//! gradient (choose `n_steps` well above the episode length; the next rollout trains the rest of
//! that episode). The loss is A2C's with Â = G − V_old (or G) and the value target R = G:
//! −mean(log π·Â) + c₁·mean((V − G)²) − c₂·mean(H), c₁ = 0 without a baseline.

use crate::algo::update::{apply_gradients, AdvantageNorm, UpdateStats};
use crate::error::{ProximaError, Result};
use crate::optim::Optimizer;
use crate::policy::Policy;
use crate::rollout::{explained_variance, monte_carlo_returns, normalize_advantages, Minibatch, RolloutBuffer};

/// REINFORCE's hyperparameters, projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReinforceParams {
    /// γ of the returns G_t.
    pub gamma: f64,
    /// Subtract the learned V(s) from G_t and train V on G_t (`baseline = true`), or weight
    /// ∇log π by G_t itself.
    pub baseline: bool,
    /// c₁: value-loss coefficient (read only with the baseline; the value loss has no ½, as A2C's).
    pub vf_coef: f64,
    /// c₂: entropy bonus coefficient.
    pub ent_coef: f64,
    /// Global gradient-norm clip; `None` = none.
    pub max_grad_norm: Option<f64>,
    /// The weights G_t − b(s_t) are normalised over the rollout's trained steps unless `Off`
    /// (without a baseline: return normalisation).
    pub normalize_advantage: AdvantageNorm,
}

/// The rollout's transitions whose episode ended within it, with Â = G − V_old (or G) and R = G.
/// `None` when no episode ended.
///
/// # Errors
/// `InvalidArgument` for a malformed buffer.
pub fn episode_batch(buf: &RolloutBuffer, p: &ReinforceParams) -> Result<Option<Minibatch>> {
    let (returns, complete) = monte_carlo_returns(&buf.rewards, &buf.terminated, &buf.truncated, buf.n_envs, p.gamma)?;
    let rows: Vec<usize> = (0..buf.len()).filter(|&i| complete[i]).collect();
    if rows.is_empty() {
        return Ok(None);
    }
    let gather = |src: &[f32], w: usize| rows.iter().flat_map(|&i| src[i * w..(i + 1) * w].iter().copied()).collect();
    let returns: Vec<f32> = rows.iter().map(|&i| returns[i]).collect();
    let old_values: Vec<f32> = gather(&buf.values, 1);
    let mut advantages: Vec<f32> = match p.baseline {
        true => returns.iter().zip(&old_values).map(|(g, v)| g - v).collect(),
        false => returns.clone(),
    };
    if p.normalize_advantage != AdvantageNorm::Off {
        normalize_advantages(&mut advantages);
    }
    Ok(Some(Minibatch {
        len: rows.len(),
        observations: {
            let mut o = Vec::with_capacity(rows.len() * buf.obs_dim);
            buf.observations.gather_into(&rows, buf.obs_dim, &mut o);
            o
        },
        actions: gather(&buf.actions, buf.act_dim),
        old_log_probs: gather(&buf.log_probs, 1),
        advantages,
        old_values,
        returns,
        old_head: Vec::new(),
        action_masks: Vec::new(),
        sequences: None,
        pixels: Vec::new(),
    }))
}

/// One REINFORCE update: one optimiser step on the rollout's finished episodes. A rollout in
/// which no episode ended makes no step (its losses are NaN: not measured) and logs a warning
/// (the first time in a process).
///
/// # Errors
/// `NonFinite` when the loss, a gradient or a new parameter is not finite (parameters are then
/// left unchanged); the policy's errors.
pub fn update(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    buf: &RolloutBuffer,
    p: &ReinforceParams,
    lr: f64,
) -> Result<UpdateStats> {
    let Some(batch) = episode_batch(buf, p)? else {
        // Once per process: a run whose episodes outlast its rollouts would repeat it every update.
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
            "REINFORCE: no episode ended within the rollout of {} steps per env, so no update was made (raise n_steps)",
                buf.n_steps
            );
        }
        return Ok(UpdateStats { learning_rate: lr, ..not_measured() });
    };
    let vf_coef = if p.baseline { p.vf_coef } else { 0.0 };
    let [loss, policy_loss, value_loss, entropy] = policy.a2c_loss(&batch, vf_coef, p.ent_coef)?.values;
    if !loss.is_finite() {
        return Err(ProximaError::NonFinite(format!(
            "REINFORCE loss is {loss} (policy_loss {policy_loss}, value_loss {value_loss}, entropy {entropy})"
        )));
    }
    opt.lr = lr;
    let info = apply_gradients(policy, opt, p.max_grad_norm)?;
    Ok(UpdateStats {
        policy_loss: policy_loss as f64,
        value_loss: if p.baseline { value_loss as f64 } else { f64::NAN },
        entropy: entropy as f64,
        explained_variance: if p.baseline { explained_variance(&batch.old_values, &batch.returns) } else { f64::NAN },
        learning_rate: lr,
        grad_norm: info.grad_norm,
        epochs: 1,
        minibatches: 1,
        ..Default::default()
    })
}

/// The diagnostics of an update that measured nothing.
fn not_measured() -> UpdateStats {
    UpdateStats {
        policy_loss: f64::NAN,
        value_loss: f64::NAN,
        entropy: f64::NAN,
        explained_variance: f64::NAN,
        grad_norm: f64::NAN,
        ..Default::default()
    }
}
