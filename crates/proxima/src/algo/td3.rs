//! TD3, Twin Delayed DDPG (Fujimoto et al. 2018, "Addressing Function Approximation Error in
//! Actor-Critic Methods", arXiv:1802.09477), one gradient step as Stable-Baselines3's `TD3.train`
//! takes it; DDPG (Lillicrap et al. 2016) is the same step with one critic, no target smoothing
//! and no delay (SB3's `DDPG` is a `TD3` so configured):
//!
//! 1. a batch (s, a, r, s', d) from the replay buffer;
//! 2. target policy smoothing: ã' = clip(μ̄(s') + clip(ε, −c, c), −1, 1), ε ~ N(0, σ̃²)
//!    (`target_policy_noise` σ̃, `target_noise_clip` c);
//! 3. clipped double Q: y = r + γ·(1 − d)·min_k Q̄_k(s', ã'); J_Q = Σ_k mean((Q_k(s, a) − y)²)
//!    (SB3's sum, no ½), one Adam step on the critics;
//! 4. delayed updates: every `policy_delay` gradient steps, J_μ = −mean Q_0(s, μ(s)), one Adam
//!    step on the actor, then every target (critics and actor) moves by Polyak averaging τ.
//!
//! On the fused backend ([`Td3::fused_gradient_step`]) the gradients are in closed form:
//! ∂J_Q/∂Q_k = 2(Q_k − y)/B, ∂J_μ/∂Q_0 = −1/B, then through critic 0's layers to a and through
//! a = tanh(μ) into the actor.
//!
//! Exploration ([`Td3::add_exploration_noise`]): a = clip(μ(s) + N(0, `noise_std`²), −1, 1) in the
//! scaled action space (SB3's `NormalActionNoise`, as rl-zoo configures it).

use super::offpolicy::{
    finite, finite_value, fused_optimizer_step, min_and_grad, min_of, sum_of_mse_and_grad, LoopParams, Losses,
    OffPolicyState, StepBuffers,
};
use super::sac::sum_of_mse;
use crate::error::Result;
use crate::optim::{Gradients, Params};
use crate::policy::fused::{cat_rows_into, FusedOffPolicy, ACTOR, CRITICS};
use crate::policy::OffPolicyNets;
use crate::replay::{ReplayBuffer, ReplaySample};
use candle_core::{Device, Tensor};
use rand::Rng;
use rand_distr::{Distribution, Normal, StandardNormal};

/// TD3's (and DDPG's) hyperparameters, SB3's names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Td3Params {
    /// The loop's: `learning_starts`, `train_freq`, `gradient_steps`, `batch_size`.
    pub looping: LoopParams,
    /// γ.
    pub gamma: f64,
    /// τ of the targets' Polyak averaging.
    pub tau: f64,
    /// Gradient steps per actor (and target) update (TD3 2, DDPG 1).
    pub policy_delay: usize,
    /// σ̃ of the target policy smoothing noise (TD3 0.2, DDPG none).
    pub target_policy_noise: f64,
    /// c, the clip of the smoothing noise (TD3 0.5, DDPG 0).
    pub target_noise_clip: f64,
    /// σ of the Gaussian exploration noise on μ(s), in the scaled action space (0 = none).
    pub noise_std: f64,
}

/// y = r + γ·(1 − d)·min_k Q̄_k(s', ã'), `[B]`, detached.
///
/// # Errors
/// candle's.
pub fn td3_target(q_next: &[Tensor], rewards: &Tensor, dones: &Tensor, gamma: f64) -> Result<Tensor> {
    let not_done = dones.affine(-1.0, 1.0)?;
    Ok((rewards + ((not_done * min_of(q_next)?)? * gamma)?)?.detach())
}

/// J_μ = −mean Q_0(s, μ(s)).
///
/// # Errors
/// candle's.
pub fn td3_actor_loss(q0_of_mu: &Tensor) -> Result<Tensor> {
    Ok(q0_of_mu.mean_all()?.neg()?)
}

/// TD3's state beside its networks.
#[derive(Debug)]
pub struct Td3 {
    /// The hyperparameters.
    pub params: Td3Params,
    /// The replay buffer, the actor's and critics' Adam, the counters.
    pub state: OffPolicyState,
}

impl Td3 {
    /// Fresh state (Adam at `lr`, ε `adam_eps`, for the actor's and the critics' parameters of
    /// `sizes`).
    pub fn new(params: Td3Params, replay: ReplayBuffer, sizes: (&[usize], &[usize]), lr: f64, adam_eps: f64) -> Self {
        Td3 { params, state: OffPolicyState::new(replay, sizes, lr, adam_eps) }
    }

    /// a ← clip(a + N(0, `noise_std`²), −1, 1) for every value of `actions` (none when 0).
    pub fn add_exploration_noise<R: Rng + ?Sized>(&self, actions: &mut [f32], rng: &mut R) {
        if self.params.noise_std > 0.0 {
            let n = Normal::new(0.0, self.params.noise_std).expect("validated: finite and > 0");
            for a in actions {
                *a = (*a + n.sample(rng) as f32).clamp(-1.0, 1.0);
            }
        }
    }

    /// One gradient step (steps 1–4 of the module's description) at learning rate `lr`.
    ///
    /// # Errors
    /// `NonFinite` losses or parameters; an empty replay buffer; candle's.
    pub fn gradient_step<R: Rng + ?Sized>(&mut self, nets: &OffPolicyNets, lr: f64, rng: &mut R) -> Result<Losses> {
        let p = self.params;
        self.state.n_updates += 1;
        self.state.set_lr(lr);
        let b = self.state.sample_batch(p.looping.batch_size, nets, rng)?;
        // 2. Target policy smoothing.
        let (n, ad) = (p.looping.batch_size, self.state.replay.act_dim);
        let mut eps = Vec::new();
        smoothing_noise(&mut eps, n * ad, &p, rng);
        let eps = Tensor::from_vec(eps, (n, ad), &Device::Cpu)?.to_dtype(nets.dtype())?;
        let next_actions = (nets.actor_action(&b.next_obs, true)? + eps)?.clamp(-1.0, 1.0)?;
        // 3. Clipped double Q.
        let y = td3_target(&nets.q_values(&b.next_obs, &next_actions, true)?, &b.rewards, &b.dones, p.gamma)?;
        let lq = sum_of_mse(&nets.q_values(&b.obs, &b.actions, false)?, &y)?;
        let critic = finite(&lq, "TD3 critic loss")?;
        self.state
            .critic_opt
            .step(Params::Vars { vars: nets.critic_params(), grads: Gradients::Store(&lq.backward()?) }, None)?;
        // 4. Delayed actor and target updates.
        let mut actor = None;
        if self.state.n_updates % p.policy_delay as u64 == 0 {
            let mu = nets.actor_action(&b.obs, false)?;
            let q0 = nets.q_values(&b.obs, &mu, false)?.swap_remove(0);
            let la = td3_actor_loss(&q0)?;
            actor = Some(finite(&la, "TD3 actor loss")?);
            self.state
                .actor_opt
                .step(Params::Vars { vars: nets.actor_params(), grads: Gradients::Store(&la.backward()?) }, None)?;
            nets.polyak_update(p.tau)?;
        }
        Ok(Losses { actor_loss: actor, critic_loss: critic, entropy: None })
    }

    /// [`Td3::gradient_step`] on the fused networks: the same batch, noise, steps and order,
    /// the gradients in closed form (see the module's description).
    ///
    /// # Errors
    /// As [`Td3::gradient_step`].
    pub fn fused_gradient_step<R: Rng + ?Sized>(
        &mut self,
        nets: &mut FusedOffPolicy,
        lr: f64,
        rng: &mut R,
    ) -> Result<Losses> {
        self.state.n_updates += 1;
        self.state.set_lr(lr);
        let (sample, mut bufs) = self.state.take_sample(self.params.looping.batch_size, rng)?;
        let out = self.fused_step(nets, rng, &sample, &mut bufs);
        self.state.give_back((sample, bufs));
        out
    }

    fn fused_step<R: Rng + ?Sized>(
        &mut self,
        nets: &mut FusedOffPolicy,
        rng: &mut R,
        s: &ReplaySample,
        w: &mut StepBuffers,
    ) -> Result<Losses> {
        let p = self.params;
        let (n, ad) = (s.len, self.state.replay.act_dim);
        // 2. Target policy smoothing.
        smoothing_noise(&mut w.eps, n * ad, &p, rng);
        nets.mu_action(&s.next_observations, n, true, &mut w.next_a);
        for (a, &e) in w.next_a[..n * ad].iter_mut().zip(&w.eps) {
            *a = (*a + e).clamp(-1.0, 1.0);
        }
        // 3. Clipped double Q.
        cat_rows_into(&s.next_observations, &w.next_a, n, &mut w.x);
        min_and_grad(nets.q_values(&w.x, n, true), n, 0.0, &mut w.min_q, &mut w.dq);
        td3_target_into(&mut w.y, &w.min_q, (&s.rewards, &s.dones), p.gamma);
        cat_rows_into(&s.observations, &s.actions, n, &mut w.x);
        let critic =
            finite_value(sum_of_mse_and_grad(nets.q_values(&w.x, n, false), &w.y, 1.0, &mut w.dq), "TD3 critic loss")?;
        nets.critic_backward(&w.x, &w.dq, n);
        fused_optimizer_step(nets, CRITICS, &mut self.state.critic_opt)?;
        // 4. Delayed actor and target updates.
        let mut actor = None;
        if self.state.n_updates % p.policy_delay as u64 == 0 {
            nets.mu_action(&s.observations, n, false, &mut w.a);
            cat_rows_into(&s.observations, &w.a, n, &mut w.x);
            let q0 = nets.q1_values(&w.x, n);
            let mean = q0[..n].iter().map(|&q| q as f64).sum::<f64>() / n as f64;
            actor = Some(finite_value(-mean, "TD3 actor loss")?);
            w.dq.iter_mut().for_each(|d| d.fill(0.0));
            w.dq[0].fill(-1.0 / n as f32);
            w.d_a.resize(n * ad, 0.0);
            nets.q_action_grad(&w.dq, n, &mut w.d_a);
            nets.actor_backward(&s.observations, (&w.d_a, None), n);
            fused_optimizer_step(nets, ACTOR, &mut self.state.actor_opt)?;
            nets.polyak_update(p.tau);
        }
        Ok(Losses { actor_loss: actor, critic_loss: critic, entropy: None })
    }
}

/// y = r + γ·(1 − d)·min_k Q̄_k per row into `y` from min_k Q̄_k and the batch's r and d `[B]`,
/// rounded as [`td3_target`] rounds it (the fused step's).
pub fn td3_target_into(y: &mut Vec<f32>, min_q: &[f32], (r, d): (&[f32], &[f32]), gamma: f64) {
    let g = gamma as f32;
    y.clear();
    y.extend(min_q.iter().zip(r).zip(d).map(|((&q, &r), &d)| r + ((d * -1.0 + 1.0) * q) * g));
}

/// TD3's target smoothing noise clip(ε·σ̃, −c, c), ε ~ N(0, 1) drawn as f64, `n` values into `v`.
fn smoothing_noise<R: Rng + ?Sized>(v: &mut Vec<f32>, n: usize, p: &Td3Params, rng: &mut R) {
    let c = p.target_noise_clip;
    v.clear();
    v.extend((0..n).map(|_| {
        let e: f64 = rng.sample(StandardNormal);
        (e * p.target_policy_noise).clamp(-c, c) as f32
    }));
}
