//! TRPO (Schulman et al. 2015, "Trust Region Policy Optimization", arXiv:1502.05477), as
//! sb3-contrib's `TRPO` implements it: maximise the surrogate L(θ) = Ê[r_t(θ)·Â_t] subject to
//! Ê[KL[π_θold(·|s), π_θ(·|s)]] ≤ δ by
//!
//! 1. g = ∇L at θ_old (the policy gradient, over the whole rollout);
//! 2. x ≈ F⁻¹g by conjugate gradient on Fisher-vector products F·v ([`fisher_vector_product`],
//!    damped: (F + λI)·v);
//! 3. the step β·x with β = √(2δ / xᵀFx) from the quadratic KL model (Appendix C);
//! 4. a backtracking line search over β·x·shrinkᵏ, k = 0 … max_iter−1, accepting the first step
//!    whose measured KL is ≤ δ **and** whose surrogate improves on L(θ_old); none accepted → θ
//!    stays at θ_old;
//! 5. the value function fitted separately: `n_critic_updates` epochs of minibatch Adam on
//!    mean((V − R)²) (the actor's parameters get no gradient from it).
//!
//! **Fisher-vector products** use the Gauss–Newton form F = Ê_s[Jᵀ·M·J] (exact for these
//! distributions: the Hessian of the mean KL at θ_old), where J is the Jacobian of the policy
//! head (logits or Gaussian means) w.r.t. the actor's parameters and M the Fisher of the
//! distribution w.r.t. its head: diag(p) − ppᵀ per Categorical component, 1/σ² for Gaussian
//! means; for the state-independent log-std, F = 2I. J·v is computed in forward mode
//! ([`actor_jvp`], through the forward pass's own fast tanh) and Jᵀ·(M·J·v) by one backward
//! pass, so no double backprop is needed. Tested against an explicitly built Fisher matrix and
//! against finite differences of the KL's gradient (`crates/proxima/tests/algorithms.rs`).

use crate::algo::update::{AdvantageNorm, UpdateStats};
use crate::error::{ProximaError, Result};
use crate::optim::{Gradients, Optimizer, Params};
use crate::policy::{fast_tanh, Activation, ActorCritic, DistParams};
use crate::rollout::{explained_variance, normalize_advantages, Minibatches, RolloutBuffer};
use candle_core::Tensor;
use rand::Rng;

/// TRPO's hyperparameters (sb3-contrib's names), projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrpoParams {
    /// δ: the bound on the mean KL[π_θold, π_θ] of a step (sb3-contrib's `target_kl`).
    pub target_kl: f64,
    /// Conjugate-gradient iterations.
    pub cg_max_steps: usize,
    /// λ of the damped Fisher-vector product (F + λI)·v.
    pub cg_damping: f64,
    /// Backtracking factor of the line search.
    pub line_search_shrinking_factor: f64,
    /// Most backtracking steps.
    pub line_search_max_iter: usize,
    /// Epochs of minibatch Adam steps on the value function per rollout.
    pub n_critic_updates: usize,
    /// The critic's minibatch size.
    pub batch_size: usize,
    /// Global gradient-norm clip of the critic's steps; `None` = none.
    pub max_grad_norm: Option<f64>,
    /// Â is normalised over the rollout unless `Off`.
    pub normalize_advantage: AdvantageNorm,
}

/// The actor's parameters (see [`ActorCritic::actor_param_indices`]) as one flat f32 vector.
///
/// # Errors
/// Tensor errors.
pub fn actor_params_flat(policy: &ActorCritic) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    for i in policy.actor_param_indices() {
        out.extend(policy.named_params()[i].1.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(out)
}

/// Writes a flat vector (as [`actor_params_flat`] returns) back into the actor's parameters.
///
/// # Errors
/// `InvalidArgument` for a wrong length; tensor errors.
pub fn set_actor_params_flat(policy: &ActorCritic, flat: &[f32]) -> Result<()> {
    let idx = policy.actor_param_indices();
    let total: usize = idx.iter().map(|&i| policy.named_params()[i].1.elem_count()).sum();
    if flat.len() != total {
        return Err(ProximaError::InvalidArgument(format!("{} values for {total} actor parameters", flat.len())));
    }
    let mut off = 0;
    for i in idx {
        let var = &policy.named_params()[i].1;
        let n = var.elem_count();
        var.set(&Tensor::from_slice(&flat[off..off + n], var.shape(), var.device())?)?;
        off += n;
    }
    Ok(())
}

/// Gradient of `loss` w.r.t. the actor's parameters, flattened (zeros where no gradient flows).
fn actor_grad_flat(policy: &ActorCritic, loss: &Tensor) -> Result<Vec<f64>> {
    let grads = loss.backward()?;
    let mut out = Vec::new();
    for i in policy.actor_param_indices() {
        let var = &policy.named_params()[i].1;
        match grads.get(var.as_tensor()) {
            Some(g) => out.extend(g.flatten_all()?.to_vec1::<f32>()?.into_iter().map(f64::from)),
            None => out.extend(std::iter::repeat_n(0.0, var.elem_count())),
        }
    }
    Ok(out)
}

/// Forward-mode derivative of the policy head: given tangents for the trunk/actor *layer*
/// parameters (every index of [`ActorCritic::actor_param_indices`] except the log-std, same
/// order and shapes), returns `(head, J·v)`, both `[B, head_dim]` and detached. z = hWᵀ + b
/// gives dz = dh·Wᵀ + h·dWᵀ + db; the activation is the forward pass's own — [`fast_tanh::tanh`]
/// with da = (1 − a²)·dz, the derivative its backward pass uses too, so J·v here and Jᵀ·u by
/// back-propagation linearise the same function and F = JᵀMJ stays symmetric.
///
/// # Errors
/// `InvalidArgument` for the wrong number of tangents; tensor errors on shape mismatches.
pub fn actor_jvp(policy: &ActorCritic, obs: &Tensor, tangents: &[Tensor]) -> Result<(Tensor, Tensor)> {
    let layers = policy.actor_layers();
    if tangents.len() != 2 * layers.len() {
        return Err(ProximaError::InvalidArgument(format!(
            "actor_jvp: {} tangents for {} layer parameters",
            tangents.len(),
            2 * layers.len()
        )));
    }
    let mut h = obs.detach();
    let mut dh: Option<Tensor> = None;
    for (k, (w, b, activate)) in layers.into_iter().enumerate() {
        let (w, b) = (w.as_tensor().detach(), b.as_tensor().detach());
        let (dw, db) = (&tangents[2 * k], &tangents[2 * k + 1]);
        let z = h.matmul(&w.t()?)?.broadcast_add(&b)?;
        let mut dz = h.matmul(&dw.t()?)?.broadcast_add(db)?;
        if let Some(dh) = &dh {
            dz = (dz + dh.matmul(&w.t()?)?)?;
        }
        if activate {
            match policy.spec().activation {
                Activation::Tanh => {
                    let a = fast_tanh::tanh(&z)?;
                    dz = (dz * (1.0 - a.sqr()?)?)?;
                    h = a;
                }
                Activation::Relu => {
                    let mask = z.gt(0.0)?.to_dtype(z.dtype())?;
                    dz = (dz * mask)?;
                    h = z.relu()?;
                }
            }
        } else {
            h = z;
        }
        dh = Some(dz);
    }
    Ok((h, dh.expect("at least one layer")))
}

/// (F + damping·I)·v, where F is the Fisher information of π_θ(·|s) w.r.t. the actor's
/// parameters averaged over the states `obs` `[B, obs_dim]` — equivalently the Hessian of
/// Ê_s[KL[π_θ(·|s), π_θ'(·|s)]] at θ' = θ. `v` is flat in [`actor_params_flat`]'s order.
///
/// # Errors
/// `InvalidArgument` for a `v` of the wrong length; tensor errors.
pub fn fisher_vector_product(policy: &ActorCritic, obs: &Tensor, v: &[f64], damping: f64) -> Result<Vec<f64>> {
    let idx = policy.actor_param_indices();
    let params = policy.named_params();
    let total: usize = idx.iter().map(|&i| params[i].1.elem_count()).sum();
    if v.len() != total {
        return Err(ProximaError::InvalidArgument(format!(
            "Fisher-vector product: v has {} entries, the actor {total}",
            v.len()
        )));
    }
    // Split v into per-parameter tangents; the log-std (if any) is last.
    let mut tangents = Vec::new();
    let mut v_log_std: &[f64] = &[];
    let mut off = 0;
    for &i in &idx {
        let (name, var) = &params[i];
        let n = var.elem_count();
        if name == "actor_logstd" {
            v_log_std = &v[off..off + n];
        } else {
            let t: Vec<f32> = v[off..off + n].iter().map(|&x| x as f32).collect();
            tangents.push(Tensor::from_vec(t, var.shape(), var.device())?);
        }
        off += n;
    }
    let (head, jv) = actor_jvp(policy, obs, &tangents)?;
    let b = head.dim(0)? as f64;
    // M·(J·v): the distribution's Fisher w.r.t. its head.
    let log_std = policy.log_std().map(|v| v.as_tensor().detach());
    let mjv = policy.spec().action.fisher_product(&head, log_std.as_ref(), &jv)?;
    // Jᵀ·(M·J·v) / B by one backward pass through the head.
    let (head_graph, _) = policy.forward(obs)?;
    let surrogate = ((head_graph * mjv.detach())?.sum_all()? / b)?;
    let mut out = actor_grad_flat(policy, &surrogate)?;
    // The log-std block: ∂²KL/∂(log σ)² = 2 per dimension at θ' = θ, no cross terms.
    let n_ls = v_log_std.len();
    let start = out.len() - n_ls;
    for (o, &x) in out[start..].iter_mut().zip(v_log_std) {
        *o = 2.0 * x;
    }
    for (o, &x) in out.iter_mut().zip(v) {
        *o += damping * x;
    }
    Ok(out)
}

/// Conjugate gradient for A·x = b with A symmetric positive definite, given only products
/// A·v (`avp`); at most `max_steps` iterations, stopping early when rᵀr < `residual_tol`
/// (sb3-contrib: 1e-10). Starts from x = 0.
///
/// # Errors
/// Whatever `avp` returns.
pub fn conjugate_gradient(
    mut avp: impl FnMut(&[f64]) -> Result<Vec<f64>>,
    b: &[f64],
    max_steps: usize,
    residual_tol: f64,
) -> Result<Vec<f64>> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut x = vec![0.0; b.len()];
    let mut r = b.to_vec();
    let mut p = b.to_vec();
    let mut rr = dot(&r, &r);
    for _ in 0..max_steps {
        if rr < residual_tol {
            break;
        }
        let ap = avp(&p)?;
        let pap = dot(&p, &ap);
        if pap <= 0.0 || !pap.is_finite() {
            break; // not positive definite along p (numerically): keep the current x
        }
        let alpha = rr / pap;
        for i in 0..x.len() {
            x[i] += alpha * p[i];
            r[i] -= alpha * ap[i];
        }
        let rr_new = dot(&r, &r);
        let beta = rr_new / rr;
        for i in 0..p.len() {
            p[i] = r[i] + beta * p[i];
        }
        rr = rr_new;
    }
    Ok(x)
}

/// One TRPO update on a full rollout (advantages computed): the natural-gradient step with
/// line search on the actor, then the critic's epochs with `critic_opt` (Adam, lr `lr`).
///
/// # Errors
/// `NonFinite` when the surrogate, its gradient or the critic's loss is not finite; tensor
/// errors.
pub fn update<R: Rng + ?Sized>(
    policy: &ActorCritic,
    critic_opt: &mut Optimizer,
    buf: &RolloutBuffer,
    p: &TrpoParams,
    lr: f64,
    rng: &mut R,
) -> Result<UpdateStats> {
    let n = buf.len();
    let dev = policy.device();
    let delta = p.target_kl;
    let mut adv = buf.advantages.clone();
    if p.normalize_advantage != AdvantageNorm::Off {
        normalize_advantages(&mut adv); // the policy step uses the whole rollout as one batch
    }
    let obs = Tensor::from_slice(&buf.observations.to_f32(), (n, buf.obs_dim), dev)?;
    let act = Tensor::from_slice(&buf.actions, (n, buf.act_dim), dev)?;
    let adv_t = Tensor::from_slice(&adv, n, dev)?;

    // 1. L(θ_old) and g = ∇L.
    let old = policy.dist_params_from_host(&buf.old_head, &buf.old_log_std)?;
    let (lp, entropy, _) = policy.evaluate_actions(&obs, &act)?;
    let old_lp = lp.detach();
    let surrogate_of = |lp: &Tensor| -> Result<Tensor> { Ok(((lp - &old_lp)?.exp()? * &adv_t)?.mean_all()?) };
    let surrogate = surrogate_of(&lp)?;
    let l_old = surrogate.to_scalar::<f32>()? as f64;
    let g = actor_grad_flat(policy, &surrogate)?;
    let g_norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
    if !l_old.is_finite() || !g_norm.is_finite() {
        return Err(ProximaError::NonFinite(format!(
            "TRPO surrogate {l_old} or its gradient (norm {g_norm}) is not finite"
        )));
    }

    // 2. x ≈ (F + λI)⁻¹ g.
    let fvp = |v: &[f64]| fisher_vector_product(policy, &obs, v, p.cg_damping);
    let x = conjugate_gradient(fvp, &g, p.cg_max_steps, 1e-10)?;
    // 3. β = √(2δ / xᵀFx).
    let xfx: f64 = x.iter().zip(fisher_vector_product(policy, &obs, &x, p.cg_damping)?).map(|(a, b)| a * b).sum();
    let theta_old = actor_params_flat(policy)?;
    let mut s = UpdateStats {
        learning_rate: lr,
        explained_variance: explained_variance(&buf.values, &buf.returns),
        entropy: entropy.mean_all()?.to_scalar::<f32>()? as f64,
        grad_norm: g_norm,
        policy_loss: -l_old,
        ..Default::default()
    };
    // 4. Backtracking line search.
    if xfx > 0.0 && xfx.is_finite() {
        let search = LineSearch { obs: &obs, act: &act, old: &old, theta_old: &theta_old, x: &x, l_old, delta };
        search.run(policy, (2.0 * delta / xfx).sqrt(), p, &surrogate_of, &mut s)?;
    }
    s.approx_kl = s.kl_divergence;

    // 5. The critic.
    fit_critic(policy, critic_opt, buf, p, lr, rng, &mut s)?;
    Ok(s)
}

/// Step 4 of the module doc: what the backtracking line search needs.
struct LineSearch<'a> {
    obs: &'a Tensor,
    act: &'a Tensor,
    old: &'a DistParams,
    theta_old: &'a [f32],
    x: &'a [f64],
    l_old: f64,
    delta: f64,
}

impl LineSearch<'_> {
    /// Tries θ_old + β·x·shrinkᵏ for k = 0 … max_iter−1 and keeps the first step whose mean
    /// KL is ≤ δ and whose surrogate improves on L(θ_old) (recording its fraction, KL and
    /// surrogate in `s`); with none, θ stays θ_old.
    fn run(
        &self,
        policy: &ActorCritic,
        beta: f64,
        p: &TrpoParams,
        surrogate_of: &dyn Fn(&Tensor) -> Result<Tensor>,
        s: &mut UpdateStats,
    ) -> Result<()> {
        let mut fraction = 1.0;
        for _ in 0..p.line_search_max_iter {
            let cand: Vec<f32> =
                self.theta_old.iter().zip(self.x).map(|(&t, &xi)| (t as f64 + fraction * beta * xi) as f32).collect();
            if cand.iter().all(|v| v.is_finite()) {
                set_actor_params_flat(policy, &cand)?;
                let (lp_new, _, _, head) = policy.evaluate_actions_with_head(self.obs, self.act, &[])?;
                let l_new = surrogate_of(&lp_new)?.to_scalar::<f32>()? as f64;
                let kl = policy.kl_of_head(self.old, &head)?.mean_all()?.to_scalar::<f32>()? as f64;
                if kl <= self.delta && l_new > self.l_old && l_new.is_finite() {
                    s.step_fraction = fraction;
                    s.kl_divergence = kl;
                    s.policy_loss = -l_new;
                    break;
                }
            }
            fraction *= p.line_search_shrinking_factor;
        }
        if s.step_fraction == 0.0 {
            set_actor_params_flat(policy, self.theta_old)?; // no acceptable step: keep θ_old
        }
        Ok(())
    }
}

/// Step 5 of the module doc: `n_critic_updates` epochs of minibatch Adam (`critic_opt`, step
/// size `lr`) on mean((V − R)²), accumulating the value loss and the counts into `s`.
///
/// # Errors
/// `NonFinite` when the value loss is not finite; tensor errors.
fn fit_critic<R: Rng + ?Sized>(
    policy: &ActorCritic,
    critic_opt: &mut Optimizer,
    buf: &RolloutBuffer,
    p: &TrpoParams,
    lr: f64,
    rng: &mut R,
    s: &mut UpdateStats,
) -> Result<()> {
    let dev = policy.device();
    critic_opt.lr = lr;
    let mut batches = Minibatches::new(buf, p.batch_size, false, false);
    for _ in 0..p.n_critic_updates {
        batches.shuffle(rng);
        while let Some(mb) = batches.next_batch() {
            let v = policy.value(&Tensor::from_slice(&mb.observations, (mb.len, buf.obs_dim), dev)?)?;
            let loss = (v - Tensor::from_slice(&mb.returns, mb.len, dev)?)?.sqr()?.mean_all()?;
            let l = loss.to_scalar::<f32>()? as f64;
            if !l.is_finite() {
                return Err(ProximaError::NonFinite(format!("TRPO value loss is {l}")));
            }
            critic_opt.step(
                Params::Vars { vars: policy.named_params(), grads: Gradients::Store(&loss.backward()?) },
                p.max_grad_norm,
            )?;
            s.value_loss += l;
            s.minibatches += 1;
        }
        s.epochs += 1;
    }
    s.value_loss /= s.minibatches.max(1) as f64;
    Ok(())
}
