//! TQC, Truncated Quantile Critics (Kuznetsov et al. 2020, "Controlling Overestimation Bias with
//! Truncated Mixture of Continuous Distributional Quantile Critics", arXiv:2005.04269), as
//! sb3-contrib's `TQC.train` takes a gradient step: SAC's actor, temperature and targets, with N
//! critics of M quantiles each (`n_critics`, `n_quantiles`):
//!
//! 1. the target: the target critics' quantiles at (s', ã') pooled over the critics (`[B, N·M]`),
//!    sorted, the top `top_quantiles_to_drop_per_net`·N dropped, then
//!    y_j = r + γ·(1 − d)·(z_j − α·log π(ã'|s')) for the k = N·M − drop·N kept ones;
//! 2. the critics: the quantile Huber loss (κ = 1) of every current quantile θ_i (τ_i = (i + ½)/M)
//!    against every y_j, averaged over the batch, the critics, the quantiles and the targets:
//!    ρ_τ(δ) = |τ − 1{δ < 0}|·H(δ), δ = y_j − θ_i, H(δ) = ½δ² (|δ| ≤ 1) or |δ| − ½;
//! 3. the actor: J_π = mean(α·log π(ã|s) − mean over critics and quantiles of Z(s, ã)).
//!
//! Candle's losses ([`truncated_target`], [`quantile_huber_loss`]) are differentiated by its
//! autograd; the fused backend's ([`truncated_target_into`], [`quantile_huber_and_grad`]) are the
//! same sums with their gradient in closed form: ∂L/∂θ_i = −Σ_j |τ_i − 1{δ_j < 0}|·clip(δ_j, −1, 1)
//! / (B·N·M·k).

use super::offpolicy::{finite, finite_value, fused_optimizer_step, Losses, StepBuffers};
use super::sac::Sac;
use crate::error::Result;
use crate::optim::{Gradients, Params};
use crate::policy::fused::{cat_rows_into, FusedOffPolicy, CRITICS};
use crate::policy::offpolicy::squashed_sample;
use crate::policy::OffPolicyNets;
use crate::replay::ReplaySample;
use candle_core::{DType, Device, Tensor, D};
use rand::Rng;
use rand_distr::StandardNormal;

/// The truncated target quantiles `[B, k]` (detached) from the target critics' quantiles at
/// (s', ã') `[B, N, M]`, log π(ã'|s'), r and d `[B]`; k = N·M − `drop`·N.
///
/// # Errors
/// candle's (shapes); `drop`·N ≥ N·M is refused by the config before.
pub fn truncated_target(
    next_quantiles: &Tensor,
    next_log_prob: &Tensor,
    (rewards, dones): (&Tensor, &Tensor),
    (gamma, alpha): (f64, f64),
    drop: usize,
) -> Result<Tensor> {
    let (b, n, m) = next_quantiles.dims3()?;
    let (sorted, _) = next_quantiles.reshape((b, n * m))?.sort_last_dim(true)?;
    let kept = sorted.narrow(1, 0, n * m - drop * n)?;
    let soft = kept.broadcast_sub(&(next_log_prob * alpha)?.unsqueeze(1)?)?;
    let not_done = dones.affine(-1.0, 1.0)?.unsqueeze(1)?;
    Ok((soft.broadcast_mul(&not_done)? * gamma)?.broadcast_add(&rewards.unsqueeze(1)?)?.detach())
}

/// The quantile Huber loss (κ = 1) of the current quantiles `[B, N, M]` against the targets
/// `[B, k]`, averaged over all B·N·M·k pairs (sb3-contrib's `quantile_huber_loss` with
/// `sum_over_quantiles=False`).
///
/// # Errors
/// candle's (shapes).
pub fn quantile_huber_loss(current: &Tensor, target: &Tensor) -> Result<Tensor> {
    let (b, _, m) = current.dims3()?;
    let k = target.dim(1)?;
    let dt = current.dtype();
    let tau: Vec<f64> = (0..m).map(|i| (i as f64 + 0.5) / m as f64).collect();
    let tau = Tensor::from_vec(tau, (1, 1, m, 1), &Device::Cpu)?.to_dtype(dt)?;
    let delta = target.reshape((b, 1, 1, k))?.broadcast_sub(&current.unsqueeze(D::Minus1)?)?;
    let abs = delta.abs()?;
    let huber = abs.gt(1.0)?.where_cond(&(&abs - 0.5)?, &(delta.sqr()? * 0.5)?)?;
    let below = delta.lt(0.0)?.to_dtype(dt)?;
    let weight = tau.broadcast_sub(&below)?.abs()?;
    Ok((weight * huber)?.mean_all()?)
}

/// J_π = mean(α·log π − mean over critics and quantiles of Z(s, ã)), with Z `[B, N, M]`.
///
/// # Errors
/// candle's.
pub fn tqc_actor_loss(log_prob: &Tensor, quantiles_pi: &Tensor, alpha: f64) -> Result<Tensor> {
    let q = quantiles_pi.flatten_from(1)?.mean(1)?;
    Ok(((log_prob * alpha)? - q)?.mean_all()?)
}

/// [`truncated_target`] on the host, f32, rounded as candle rounds it: `next_q[n]` holds target
/// critic n's quantiles `[B, M]`; y `[B, k]` into `y` (`pooled`: a reused buffer of N·M).
#[allow(clippy::too_many_arguments)]
pub fn truncated_target_into(
    y: &mut Vec<f32>,
    pooled: &mut Vec<f32>,
    (next_q, m, drop): (&[Vec<f32>], usize, usize),
    next_log_prob: &[f32],
    (rewards, dones): (&[f32], &[f32]),
    (gamma, alpha): (f64, f64),
) {
    let (n, rows) = (next_q.len(), next_log_prob.len());
    let k = n * m - drop * n;
    let (g, a) = (gamma as f32, alpha as f32);
    y.clear();
    for r in 0..rows {
        pooled.clear();
        for q in next_q {
            pooled.extend_from_slice(&q[r * m..(r + 1) * m]);
        }
        pooled.sort_by(f32::total_cmp);
        let (lp, not_done) = (next_log_prob[r] * a, dones[r] * -1.0 + 1.0);
        y.extend(pooled[..k].iter().map(|&z| (z - lp) * not_done * g + rewards[r]));
    }
}

/// The quantile Huber loss of `q[n]` (critic n's current quantiles `[B, M]`) against `y` `[B, k]`
/// (as f64), and its gradient into `dq[n]` `[B, M]`, the closed form of the module's description.
/// `parallel`: the critics on rayon's pool, side by side (the same bits: each critic's terms are
/// summed alone, then the critics in order).
pub fn quantile_huber_and_grad(q: &[Vec<f32>], y: &[f32], m: usize, dq: &mut Vec<Vec<f32>>, parallel: bool) -> f64 {
    let n = q.len();
    let rows = q.first().map_or(0, |q| q.len() / m.max(1));
    let k = y.len() / rows.max(1);
    dq.resize(n, Vec::new());
    if rows * n * m * k == 0 {
        // No quantile or no target: no loss, and no gradient.
        dq.iter_mut().zip(q).for_each(|(d, q)| {
            d.clear();
            d.resize(q.len(), 0.0);
        });
        return 0.0;
    }
    let scale = 1.0 / (rows * n * m * k) as f64;
    let one = |(qn, dn): (&Vec<f32>, &mut Vec<f32>)| critic_quantile_huber(qn, y, (m, k, scale), dn);
    let totals: Vec<f64> = if parallel {
        use rayon::prelude::*;
        q.par_iter().zip(dq.par_iter_mut()).map(one).collect()
    } else {
        q.iter().zip(dq.iter_mut()).map(one).collect()
    };
    totals.iter().sum::<f64>() * scale
}

/// One critic's part of [`quantile_huber_and_grad`]: its loss terms' sum (unscaled) and, into
/// `dq`, its gradient `[B, M]` (scaled by `scale` = 1/(B·N·M·k)).
fn critic_quantile_huber(q: &[f32], y: &[f32], (m, k, scale): (usize, usize, f64), dq: &mut Vec<f32>) -> f64 {
    // τ_i = (i + ½)/M, and the weights |τ_i − 1{δ<0}| for either sign of δ.
    let tau: Vec<f32> = (0..m).map(|i| (i as f32 + 0.5) / m as f32).collect();
    let tau_neg: Vec<f32> = tau.iter().map(|t| 1.0 - t).collect();
    let (mut loss, mut grad) = (vec![0f32; m], vec![0f32; m]);
    dq.clear();
    let mut total = 0f64;
    for (theta, y) in q.chunks_exact(m).zip(y.chunks_exact(k)) {
        loss.fill(0.0);
        grad.fill(0.0);
        // The targets outside, the row's M quantiles inside: element-wise, so it vectorises
        // without reordering any sum (each quantile adds its k terms in target order).
        crate::simd::with_simd(
            #[inline(always)]
            || {
                for &t in y {
                    let lanes = theta.iter().zip(&tau).zip(&tau_neg).zip(loss.iter_mut().zip(grad.iter_mut()));
                    for (((&theta, &tau), &tau_neg), (loss, grad)) in lanes {
                        let delta = t - theta;
                        let w = if delta < 0.0 { tau_neg } else { tau };
                        // Huber with κ = 1: ½δ² for |δ| ≤ 1, |δ| − ½ beyond; both are
                        // c·(|δ| − ½c) with c = min(|δ|, 1).
                        let c = delta.abs().min(1.0);
                        *loss += w * (c * (delta.abs() - 0.5 * c));
                        *grad -= w * delta.clamp(-1.0, 1.0);
                    }
                }
            },
        );
        total += loss.iter().map(|&l| l as f64).sum::<f64>();
        dq.extend(grad.iter().map(|&g| (g as f64 * scale) as f32));
    }
    total
}

/// J_π = mean(α·log π − mean over critics and quantiles of Z) on the host (as f64), `q[n]`
/// critic n's quantiles `[B, M]` at (s, ã), and ∂J_π/∂Z = −1/(B·N·M) into `dq[n]`.
pub fn tqc_actor_loss_and_grad(log_prob: &[f32], q: &[Vec<f32>], m: usize, alpha: f64, dq: &mut Vec<Vec<f32>>) -> f64 {
    let (n, rows) = (q.len(), log_prob.len());
    let a = alpha as f32;
    let mut total = 0f64;
    for (r, &lp) in log_prob.iter().enumerate() {
        let mean: f32 = q.iter().map(|qn| qn[r * m..(r + 1) * m].iter().sum::<f32>()).sum::<f32>() / (n * m) as f32;
        total += (lp * a - mean) as f64;
    }
    let g = -1.0 / (rows * n * m) as f32;
    dq.resize(n, Vec::new());
    for d in dq.iter_mut() {
        d.clear();
        d.resize(rows * m, g);
    }
    total / rows as f64
}

/// The quantiles `[B, N, M]` of critics given as `q[n]` `[B, M]`, as a tensor of `dtype`.
///
/// # Errors
/// candle's.
pub fn stack_quantiles(q: &[Vec<f32>], m: usize, dtype: DType) -> Result<Tensor> {
    let rows = q.first().map_or(0, |q| q.len() / m.max(1));
    let parts: Vec<Tensor> = q
        .iter()
        .map(|qn| Ok(Tensor::from_slice(qn, (rows, 1, m), &Device::Cpu)?.to_dtype(dtype)?))
        .collect::<Result<_>>()?;
    Ok(Tensor::cat(&parts, 1)?)
}

/// TQC's state beside its networks: SAC's (temperature, optimisers, replay buffer, counters) and
/// how many of each critic's top quantiles the target drops.
#[derive(Debug)]
pub struct Tqc {
    /// SAC's parameters and state (TQC shares its actor, temperature and target updates).
    pub sac: Sac,
    /// Quantiles per critic, M.
    pub n_quantiles: usize,
    /// The top quantiles of each critic left out of the pooled target (sb3-contrib's 2).
    pub top_quantiles_to_drop_per_net: usize,
}

impl Tqc {
    /// One gradient step on candle (steps 1–3 of the module's description, then SAC's Polyak
    /// step) at learning rate `lr`, noise drawn from `rng`: the batch and draws of
    /// [`Sac::gradient_step`].
    ///
    /// # Errors
    /// As [`Sac::gradient_step`].
    pub fn gradient_step<R: Rng + ?Sized>(&mut self, nets: &OffPolicyNets, lr: f64, rng: &mut R) -> Result<Losses> {
        let p = self.sac.params;
        let b = self.sac.state.sample_batch(p.looping.batch_size, nets, rng)?;
        let (n, ad) = (p.looping.batch_size, self.sac.state.replay.act_dim);
        let dt = nets.dtype();
        let noise = |rng: &mut R| -> Result<Tensor> {
            let v: Vec<f32> = (0..n * ad).map(|_| rng.sample(StandardNormal)).collect();
            Ok(Tensor::from_vec(v, (n, ad), &Device::Cpu)?.to_dtype(dt)?)
        };
        let (mean, log_std) = nets.actor_dist(&b.obs)?;
        let (a_pi, log_prob) = squashed_sample(&mean, &log_std, &noise(rng)?)?;
        let mean_log_prob = log_prob.to_dtype(DType::F64)?.mean_all()?.to_scalar::<f64>()?;
        let alpha = self.sac.temperature_step(mean_log_prob, lr)?;
        let (m2, ls2) = nets.actor_dist(&b.next_obs)?;
        let (a2, lp2) = squashed_sample(&m2.detach(), &ls2.detach(), &noise(rng)?)?;
        let z_next = nets.quantiles(&b.next_obs, &a2, true)?;
        let y = truncated_target(
            &z_next,
            &lp2,
            (&b.rewards, &b.dones),
            (p.gamma, alpha),
            self.top_quantiles_to_drop_per_net,
        )?;
        let lq = quantile_huber_loss(&nets.quantiles(&b.obs, &b.actions, false)?, &y)?;
        let critic = finite(&lq, "TQC critic loss")?;
        let st = &mut self.sac.state;
        st.critic_opt
            .step(Params::Vars { vars: nets.critic_params(), grads: Gradients::Store(&lq.backward()?) }, None)?;
        let lpi = tqc_actor_loss(&log_prob, &nets.quantiles(&b.obs, &a_pi, false)?, alpha)?;
        let actor = finite(&lpi, "TQC actor loss")?;
        st.actor_opt
            .step(Params::Vars { vars: nets.actor_params(), grads: Gradients::Store(&lpi.backward()?) }, None)?;
        st.n_updates += 1;
        if st.n_updates % p.target_update_interval as u64 == 0 {
            nets.polyak_update(p.tau)?;
        }
        Ok(Losses { actor_loss: Some(actor), critic_loss: critic, entropy: Some(-mean_log_prob) })
    }

    /// [`Tqc::gradient_step`] on the fused networks: the same batch, draws and order, the
    /// gradients in closed form ([`quantile_huber_and_grad`], [`tqc_actor_loss_and_grad`], then
    /// SAC's squash backward).
    ///
    /// # Errors
    /// As [`Tqc::gradient_step`].
    pub fn fused_gradient_step<R: Rng + ?Sized>(
        &mut self,
        nets: &mut FusedOffPolicy,
        lr: f64,
        rng: &mut R,
    ) -> Result<Losses> {
        let (sample, mut bufs) = self.sac.state.take_sample(self.sac.params.looping.batch_size, rng)?;
        let out = self.fused_step(nets, lr, rng, &sample, &mut bufs);
        self.sac.state.give_back((sample, bufs));
        out
    }

    fn fused_step<R: Rng + ?Sized>(
        &mut self,
        nets: &mut FusedOffPolicy,
        lr: f64,
        rng: &mut R,
        s: &ReplaySample,
        w: &mut StepBuffers,
    ) -> Result<Losses> {
        let (p, m, drop) = (self.sac.params, self.n_quantiles, self.top_quantiles_to_drop_per_net);
        let n = s.len;
        let (alpha, mean_log_prob) = self.sac.fused_samples(nets, lr, rng, s, w)?;
        cat_rows_into(&s.next_observations, &w.next_a, n, &mut w.x);
        let z_next = nets.q_values(&w.x, n, true);
        truncated_target_into(
            &mut w.y,
            &mut w.min_q,
            (z_next, m, drop),
            &w.next_log_prob,
            (&s.rewards, &s.dones),
            (p.gamma, alpha),
        );
        cat_rows_into(&s.observations, &s.actions, n, &mut w.x);
        let parallel = nets.splits();
        let critic = quantile_huber_and_grad(nets.q_values(&w.x, n, false), &w.y, m, &mut w.dq, parallel);
        let critic = finite_value(critic, "TQC critic loss")?;
        nets.critic_backward(&w.x, &w.dq, n);
        fused_optimizer_step(nets, CRITICS, &mut self.sac.state.critic_opt)?;
        cat_rows_into(&s.observations, &w.a, n, &mut w.x);
        let actor = tqc_actor_loss_and_grad(&w.log_prob, nets.q_values(&w.x, n, false), m, alpha, &mut w.dq);
        let actor = finite_value(actor, "TQC actor loss")?;
        self.sac.fused_actor_update(nets, (alpha, &s.observations), w)?;
        Ok(Losses { actor_loss: Some(actor), critic_loss: critic, entropy: Some(-mean_log_prob) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantile_huber_loss_of_nothing_is_zero_not_a_panic() {
        let q = vec![vec![0.5f32; 6], vec![-0.5; 6]];
        let mut dq = vec![vec![9.0f32; 2]];
        for (m, y) in [(0, vec![1.0f32; 4]), (3, vec![])] {
            for parallel in [false, true] {
                assert_eq!(quantile_huber_and_grad(&q, &y, m, &mut dq, parallel), 0.0);
                assert_eq!(dq, vec![vec![0.0; 6]; 2], "m = {m}, {} targets", y.len());
            }
        }
    }
}
