//! Soft Actor-Critic (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications",
//! arXiv:1812.05905), one gradient step as Stable-Baselines3's `SAC.train` takes it:
//!
//! 1. a batch (s, a, r, s', d) from the replay buffer; ã ~ π(·|s) reparameterised, log π(ã|s);
//! 2. the temperature: α = exp(log α) as it stands; with `ent_coef = "auto"` one Adam step on
//!    J(log α) = −mean(log α · (log π(ã|s) + H̄)) with H̄ the target entropy (−dim(A));
//! 3. the critics: y = r + γ·(1 − d)·(min_k Q̄_k(s', ã') − α·log π(ã'|s')), ã' ~ π(·|s'),
//!    J_Q = ½·Σ_k mean((Q_k(s, a) − y)²), one Adam step on both critics;
//! 4. the actor: J_π = mean(α·log π(ã|s) − min_k Q_k(s, ã)) with the updated critics, one Adam
//!    step on the actor;
//! 5. every `target_update_interval` steps, Q̄ ← τ·Q + (1 − τ)·Q̄.
//!
//! The losses are pure functions of tensors ([`soft_q_target`], [`critic_loss`],
//! [`actor_loss`], [`ent_coef_loss`]), tested against finite differences in float64. On the fused
//! backend ([`Sac::fused_gradient_step`]) the same step takes their gradients in closed form:
//! ∂J_Q/∂Q_k = (Q_k − y)/B; ∂J_π/∂Q_k = −1/B for the smallest critic; through a = tanh(u),
//! u = μ + σ·ε: ∂J_π/∂u = ∂J_π/∂a·(1 − a²) + (α/B)·2a (∂log π/∂u = 2·tanh u), ∂J_π/∂μ = ∂J_π/∂u,
//! ∂J_π/∂log σ = ∂J_π/∂u·σε − α/B (0 where the clamp of log σ cut).

use super::offpolicy::{
    finite, finite_value, fused_optimizer_step, min_and_grad, min_of, normal_into, sum_of_mse_and_grad, LoopParams,
    Losses, OffPolicyState, StepBuffers,
};
use crate::error::Result;
use crate::optim::{Gradients, Optimizer, Params};
use crate::policy::fused::{cat_rows_into, squash, squash_backward, FusedOffPolicy, Pass, ACTOR, CRITICS};
use crate::policy::offpolicy::squashed_sample;
use crate::policy::OffPolicyNets;
use crate::replay::{ReplayBuffer, ReplaySample};
use candle_core::{Device, Tensor};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// SAC's temperature α (SB3's `ent_coef`): learned from an initial value, or fixed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EntCoef {
    /// `"auto"` (initial α 1) or `"auto_0.1"` (initial α 0.1): α learned toward the target entropy.
    Auto(f64),
    /// A fixed α.
    Fixed(f64),
}

/// SAC's hyperparameters (SB3's names), projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SacParams {
    /// The loop's: `learning_starts`, `train_freq`, `gradient_steps`, `batch_size`.
    pub looping: LoopParams,
    /// γ.
    pub gamma: f64,
    /// τ of the Polyak averaging of the target critics.
    pub tau: f64,
    /// Gradient steps between two target updates.
    pub target_update_interval: usize,
    /// H̄, the target entropy (SB3's "auto": −dim(A)).
    pub target_entropy: f64,
    /// α.
    pub ent_coef: EntCoef,
}

/// y = r + γ·(1 − d)·(min_k Q̄_k − α·log π(ã'|s')), all `[B]`, detached.
///
/// # Errors
/// candle's (shape mismatches).
pub fn soft_q_target(
    q_next: &[Tensor],
    next_log_prob: &Tensor,
    rewards: &Tensor,
    dones: &Tensor,
    gamma: f64,
    alpha: f64,
) -> Result<Tensor> {
    let soft = (min_of(q_next)? - (next_log_prob * alpha)?)?;
    let not_done = dones.affine(-1.0, 1.0)?;
    Ok((rewards + ((not_done * soft)? * gamma)?)?.detach())
}

/// J_Q = ½·Σ_k mean((Q_k − y)²) (SB3: `0.5 * sum(mse_loss(q, y))`).
///
/// # Errors
/// candle's.
pub fn critic_loss(q: &[Tensor], target: &Tensor) -> Result<Tensor> {
    Ok((sum_of_mse(q, target)? * 0.5)?)
}

/// Σ_k mean((Q_k − y)²).
///
/// # Errors
/// candle's.
pub fn sum_of_mse(q: &[Tensor], target: &Tensor) -> Result<Tensor> {
    let mut total = (&q[0] - target)?.sqr()?.mean_all()?;
    for x in &q[1..] {
        total = (total + (x - target)?.sqr()?.mean_all()?)?;
    }
    Ok(total)
}

/// J_π = mean(α·log π(ã|s) − min_k Q_k(s, ã)).
///
/// # Errors
/// candle's.
pub fn actor_loss(log_prob: &Tensor, q_pi: &[Tensor], alpha: f64) -> Result<Tensor> {
    Ok(((log_prob * alpha)? - min_of(q_pi)?)?.mean_all()?)
}

/// J(log α) = −log α · mean(log π + H̄) and its derivative −mean(log π + H̄).
pub fn ent_coef_loss(log_ent_coef: f64, mean_log_prob: f64, target_entropy: f64) -> (f64, f64) {
    let g = -(mean_log_prob + target_entropy);
    (log_ent_coef * g, g)
}

/// SAC's state beside its networks: the shared off-policy state and the temperature.
#[derive(Debug)]
pub struct Sac {
    /// The hyperparameters.
    pub params: SacParams,
    /// The replay buffer, the actor's and critics' Adam, the counters.
    pub state: OffPolicyState,
    /// log α, `[[1]]` (learned with `ent_coef = "auto"`).
    pub log_ent_coef: Vec<Vec<f32>>,
    /// Adam of log α.
    pub ent_opt: Optimizer,
}

impl Sac {
    /// Fresh state (Adam at `lr` with ε `adam_eps` for the actor's and the critics' parameters
    /// of `sizes`; log α at its initial value).
    pub fn new(params: SacParams, replay: ReplayBuffer, sizes: (&[usize], &[usize]), lr: f64, adam_eps: f64) -> Self {
        Sac {
            params,
            state: OffPolicyState::new(replay, sizes, lr, adam_eps),
            log_ent_coef: vec![vec![params.ent_coef.value().ln() as f32]],
            ent_opt: Optimizer::adam(&[1], lr, adam_eps),
        }
    }

    /// α as it stands.
    pub fn ent_coef(&self) -> f64 {
        match self.params.ent_coef {
            EntCoef::Auto(_) => (self.log_ent_coef[0][0] as f64).exp(),
            EntCoef::Fixed(a) => a,
        }
    }

    /// One gradient step (steps 1–5 of the module's description) at learning rate `lr`, noise
    /// drawn from `rng`.
    ///
    /// # Errors
    /// `NonFinite` when a loss or a new parameter is not finite (that optimiser's parameters are
    /// left unchanged); an empty replay buffer; candle's.
    pub fn gradient_step<R: Rng + ?Sized>(&mut self, nets: &OffPolicyNets, lr: f64, rng: &mut R) -> Result<Losses> {
        let p = self.params;
        let b = self.state.sample_batch(p.looping.batch_size, nets, rng)?;
        let (n, ad) = (p.looping.batch_size, self.state.replay.act_dim);
        let dt = nets.dtype();
        let noise = |rng: &mut R| -> Result<Tensor> {
            let v: Vec<f32> = (0..n * ad).map(|_| rng.sample(StandardNormal)).collect();
            Ok(Tensor::from_vec(v, (n, ad), &Device::Cpu)?.to_dtype(dt)?)
        };
        // 1. ã ~ π(·|s).
        let (mean, log_std) = nets.actor_dist(&b.obs)?;
        let (a_pi, log_prob) = squashed_sample(&mean, &log_std, &noise(rng)?)?;
        let mean_log_prob = log_prob.to_dtype(candle_core::DType::F64)?.mean_all()?.to_scalar::<f64>()?;
        // 2. α, and its step.
        let alpha = self.temperature_step(mean_log_prob, lr)?;
        // 3. The critics.
        let (m2, ls2) = nets.actor_dist(&b.next_obs)?;
        let (a2, lp2) = squashed_sample(&m2.detach(), &ls2.detach(), &noise(rng)?)?;
        let q_next = nets.q_values(&b.next_obs, &a2, true)?;
        let y = soft_q_target(&q_next, &lp2, &b.rewards, &b.dones, p.gamma, alpha)?;
        let q = nets.q_values(&b.obs, &b.actions, false)?;
        let lq = critic_loss(&q, &y)?;
        let critic = finite(&lq, "SAC critic loss")?;
        self.state
            .critic_opt
            .step(Params::Vars { vars: nets.critic_params(), grads: Gradients::Store(&lq.backward()?) }, None)?;
        // 4. The actor, against the updated critics.
        let q_pi = nets.q_values(&b.obs, &a_pi, false)?;
        let lpi = actor_loss(&log_prob, &q_pi, alpha)?;
        let actor = finite(&lpi, "SAC actor loss")?;
        self.state
            .actor_opt
            .step(Params::Vars { vars: nets.actor_params(), grads: Gradients::Store(&lpi.backward()?) }, None)?;
        // 5. The targets.
        self.state.n_updates += 1;
        if self.state.n_updates % p.target_update_interval as u64 == 0 {
            nets.polyak_update(p.tau)?;
        }
        Ok(Losses { actor_loss: Some(actor), critic_loss: critic, entropy: Some(-mean_log_prob) })
    }

    /// Step 2: α as it stands, then (`ent_coef = "auto"`) one Adam step on J(log α) for the
    /// batch's mean log π; every optimiser's learning rate set to `lr`.
    pub(crate) fn temperature_step(&mut self, mean_log_prob: f64, lr: f64) -> Result<f64> {
        let p = self.params;
        let alpha = self.ent_coef();
        self.state.set_lr(lr);
        self.ent_opt.lr = lr;
        if let EntCoef::Auto(_) = p.ent_coef {
            let (_, g) = ent_coef_loss(self.log_ent_coef[0][0] as f64, mean_log_prob, p.target_entropy);
            let names = ["log_ent_coef".to_string()];
            self.ent_opt.step(
                Params::Host { names: &names, values: &mut self.log_ent_coef, grads: &[Some(vec![g as f32])] },
                None,
            )?;
        }
        Ok(alpha)
    }

    /// [`Sac::gradient_step`] on the fused networks: the same batch, noise draws, steps and
    /// order, each loss's gradient in closed form (see the module's description).
    ///
    /// # Errors
    /// As [`Sac::gradient_step`].
    pub fn fused_gradient_step<R: Rng + ?Sized>(
        &mut self,
        nets: &mut FusedOffPolicy,
        lr: f64,
        rng: &mut R,
    ) -> Result<Losses> {
        let (sample, mut bufs) = self.state.take_sample(self.params.looping.batch_size, rng)?;
        let out = self.fused_step(nets, lr, rng, &sample, &mut bufs);
        self.state.give_back((sample, bufs));
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
        let p = self.params;
        let n = s.len;
        // 1. ã ~ π(·|s); 2. α, and its step; 3. ã' ~ π(·|s'), then the critics.
        let (alpha, mean_log_prob) = self.fused_samples(nets, lr, rng, s, w)?;
        cat_rows_into(&s.next_observations, &w.next_a, n, &mut w.x);
        min_and_grad(nets.q_values(&w.x, n, true), n, 0.0, &mut w.min_q, &mut w.dq);
        soft_target_into(&mut w.y, (&w.min_q, &w.next_log_prob), (&s.rewards, &s.dones), p.gamma, alpha);
        cat_rows_into(&s.observations, &s.actions, n, &mut w.x);
        let critic = 0.5 * sum_of_mse_and_grad(nets.q_values(&w.x, n, false), &w.y, 0.5, &mut w.dq);
        let critic = finite_value(critic, "SAC critic loss")?;
        nets.critic_backward(&w.x, &w.dq, n);
        fused_optimizer_step(nets, CRITICS, &mut self.state.critic_opt)?;
        // 4. The actor, against the updated critics.
        cat_rows_into(&s.observations, &w.a, n, &mut w.x);
        min_and_grad(nets.q_values(&w.x, n, false), n, -1.0 / n as f32, &mut w.min_q, &mut w.dq);
        let a32 = alpha as f32;
        let sum: f64 = w.log_prob.iter().zip(&w.min_q).map(|(&lp, &q)| (lp * a32 - q) as f64).sum();
        let actor = finite_value(sum / n as f64, "SAC actor loss")?;
        // 4–5. The actor through the critics and the squash, then the targets.
        self.fused_actor_update(nets, (alpha, &s.observations), w)?;
        Ok(Losses { actor_loss: Some(actor), critic_loss: critic, entropy: Some(-mean_log_prob) })
    }

    /// The fused steps' sampling (SAC's and TQC's): ã ~ π(·|s) into `w.a`, `w.log_prob` (ε in
    /// `w.eps`), α and its step, then ã' ~ π(·|s') into `w.next_a`, `w.next_log_prob`, drawn in the
    /// candle step's order; `(α, mean log π(ã|s))`.
    pub(crate) fn fused_samples<R: Rng + ?Sized>(
        &mut self,
        nets: &mut FusedOffPolicy,
        lr: f64,
        rng: &mut R,
        s: &ReplaySample,
        w: &mut StepBuffers,
    ) -> Result<(f64, f64)> {
        let (n, ad) = (s.len, self.state.replay.act_dim);
        let now = (&mut w.eps, &mut w.a, &mut w.log_prob);
        squashed_sample_into(nets, (Pass::Obs, &s.observations, n, ad), rng, now);
        let mean_log_prob = w.log_prob.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let alpha = self.temperature_step(mean_log_prob, lr)?;
        let next = (&mut w.next_eps, &mut w.next_a, &mut w.next_log_prob);
        squashed_sample_into(nets, (Pass::NextObs, &s.next_observations, n, ad), rng, next);
        Ok((alpha, mean_log_prob))
    }

    /// The fused steps' actor update (SAC's and TQC's), given ∂J_π/∂Q in `w.dq` at (s, ã) of the
    /// updated critics: ∂J_π/∂a through the critics, ∂J_π/∂μ and ∂J_π/∂log σ through the squash
    /// (J_π's α·mean log π term too), the actor's backward and Adam step; then the Polyak step
    /// every `target_update_interval` gradient steps.
    pub(crate) fn fused_actor_update(
        &mut self,
        nets: &mut FusedOffPolicy,
        (alpha, obs): (f64, &[f32]),
        w: &mut StepBuffers,
    ) -> Result<()> {
        let (n, ad, p) = (w.log_prob.len(), self.state.replay.act_dim, self.params);
        w.d_a.resize(n * ad, 0.0);
        nets.q_action_grad(&w.dq, n, &mut w.d_a);
        w.d_mu.resize(n * ad, 0.0);
        w.d_log_std.resize(n * ad, 0.0);
        let raw = nets.raw_log_std(Pass::Obs, n);
        squash_backward((&w.d_a, &w.a, &w.eps, raw), alpha as f32 / n as f32, (&mut w.d_mu, &mut w.d_log_std));
        nets.actor_backward(obs, (&w.d_mu, Some(&w.d_log_std)), n);
        fused_optimizer_step(nets, ACTOR, &mut self.state.actor_opt)?;
        self.state.n_updates += 1;
        if self.state.n_updates % p.target_update_interval as u64 == 0 {
            nets.polyak_update(p.tau);
        }
        Ok(())
    }
}

/// y = r + γ·(1 − d)·(min_k Q̄_k − α·log π(ã'|s')) per row into `y` from min_k Q̄_k and log π(ã'|s')
/// `[B]` and the batch's r and d `[B]`, rounded as [`soft_q_target`] rounds it (the fused step's).
pub fn soft_target_into(
    y: &mut Vec<f32>,
    (min_q, next_log_prob): (&[f32], &[f32]),
    (r, d): (&[f32], &[f32]),
    gamma: f64,
    alpha: f64,
) {
    let (g, a) = (gamma as f32, alpha as f32);
    y.clear();
    y.extend(min_q.iter().zip(next_log_prob).zip(r.iter().zip(d)).map(|((&q, &lp), (&r, &d))| {
        let not_done = d * -1.0 + 1.0;
        r + (not_done * (q - lp * a)) * g
    }));
}

impl EntCoef {
    /// The number: α (fixed) or its initial value (auto); for the on-policy algorithms, c₂.
    pub fn value(self) -> f64 {
        match self {
            EntCoef::Auto(a) | EntCoef::Fixed(a) => a,
        }
    }
}

/// A config value that is a number or a word (`"auto"`).
#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Int(i64),
    Num(f64),
    Text(String),
}

/// A number is a fixed value (as every on-policy `ent_coef`), `"auto"` / `"auto_<init>"` SAC's
/// learned α, as SB3 spells them.
impl Serialize for EntCoef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match *self {
            EntCoef::Fixed(x) => s.serialize_f64(x),
            EntCoef::Auto(a) if a == 1.0 => s.serialize_str("auto"),
            EntCoef::Auto(a) => s.serialize_str(&format!("auto_{a}")),
        }
    }
}

impl<'de> Deserialize<'de> for EntCoef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let bad = || serde::de::Error::custom("ent_coef must be a number, \"auto\" or \"auto_<initial value>\" (SAC)");
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(i) => Ok(EntCoef::Fixed(i as f64)),
            NumberOrText::Num(x) => Ok(EntCoef::Fixed(x)),
            NumberOrText::Text(t) if t == "auto" => Ok(EntCoef::Auto(1.0)),
            NumberOrText::Text(t) => match t.strip_prefix("auto_").and_then(|x| x.parse::<f64>().ok()) {
                Some(a) => Ok(EntCoef::Auto(a)),
                None => Err(bad()),
            },
        }
    }
}

/// SAC's target entropy H̄: `"auto"` (−dim(A), SB3's default) or a number.
pub mod target_entropy_serde {
    use super::NumberOrText;
    use serde::{Deserialize, Deserializer, Serializer};

    /// `None` ↔ `"auto"`.
    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> std::result::Result<S::Ok, S::Error> {
        match v {
            Some(x) => s.serialize_f64(*x),
            None => s.serialize_str("auto"),
        }
    }

    /// `"auto"` → `None`, a number → `Some`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(i) => Ok(Some(i as f64)),
            NumberOrText::Num(x) => Ok(Some(x)),
            NumberOrText::Text(t) if t == "auto" => Ok(None),
            NumberOrText::Text(_) => {
                Err(serde::de::Error::custom("target_entropy must be a number or \"auto\" (−dim(A))"))
            }
        }
    }
}

/// ã ~ π(·|obs) on the fused actor's pass `pass` for `n` rows of `ad` action dimensions: ε drawn
/// from `rng` into `eps`, the squashed action into `a` and log π(ã|obs) into `log_prob`.
fn squashed_sample_into<R: Rng + ?Sized>(
    nets: &mut FusedOffPolicy,
    (pass, obs, n, ad): (Pass, &[f32], usize, usize),
    rng: &mut R,
    (eps, a, log_prob): (&mut Vec<f32>, &mut Vec<f32>, &mut Vec<f32>),
) {
    normal_into(eps, n * ad, rng);
    let (mu, log_std) = nets.sac_dist(pass, obs, n);
    a.resize(n * ad, 0.0);
    log_prob.resize(n, 0.0);
    squash((mu, log_std, eps), ad, a, log_prob);
}
