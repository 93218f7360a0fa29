//! [`Learner`]: SAC, TD3 (and DDPG) or TQC behind one type, the one the trainer's off-policy loop
//! drives (explore, store, gradient steps, snapshot for an exact resume).

use super::offpolicy::{LoopParams, Losses, OffPolicySnapshot, OffPolicyState};
use super::sac::Sac;
use super::td3::Td3;
use super::tqc::Tqc;
use crate::error::ProximaError;
use crate::error::Result;
use crate::policy::{Network, Policy};
use rand::Rng;

/// The off-policy algorithm of a run.
#[derive(Debug)]
pub enum Learner {
    /// Soft Actor-Critic.
    Sac(Sac),
    /// TD3 (and DDPG: TD3 with one critic, no smoothing, no delay).
    Td3(Td3),
    /// Truncated Quantile Critics (SAC's actor and temperature, critics of quantiles).
    Tqc(Tqc),
}

impl Learner {
    /// The shared state.
    pub fn state(&self) -> &OffPolicyState {
        match self {
            Learner::Sac(s) => &s.state,
            Learner::Td3(t) => &t.state,
            Learner::Tqc(q) => &q.sac.state,
        }
    }

    /// The shared state, mutably.
    pub fn state_mut(&mut self) -> &mut OffPolicyState {
        match self {
            Learner::Sac(s) => &mut s.state,
            Learner::Td3(t) => &mut t.state,
            Learner::Tqc(q) => &mut q.sac.state,
        }
    }

    /// The loop's hyperparameters.
    pub fn loop_params(&self) -> LoopParams {
        match self {
            Learner::Sac(s) => s.params.looping,
            Learner::Td3(t) => t.params.looping,
            Learner::Tqc(q) => q.sac.params.looping,
        }
    }

    /// The actions `[N, dim]` (in [−1, 1]) the envs are stepped with after `learning_starts`:
    /// SAC samples π(·|s); TD3 adds Gaussian noise of `noise_std` to μ(s), clipped to [−1, 1].
    ///
    /// # Errors
    /// The networks'.
    pub fn explore<R: Rng>(&self, nets: &dyn Policy, obs: &[f32], rng: &mut R) -> Result<Vec<f32>> {
        let mut a = nets.act(obs, false, rng)?.actions;
        if let Learner::Td3(t) = self {
            t.add_exploration_noise(&mut a, rng);
        }
        Ok(a)
    }

    /// One gradient step at learning rate `lr`, on the backend `nets` are on.
    ///
    /// # Errors
    /// `NonFinite` losses; an empty buffer; candle's; `InvalidArgument` for networks that are
    /// not an off-policy algorithm's.
    pub fn gradient_step<R: Rng + ?Sized>(&mut self, nets: &mut Network, lr: f64, rng: &mut R) -> Result<Losses> {
        match (self, nets) {
            (Learner::Sac(s), Network::OffPolicy(n)) => s.gradient_step(n, lr, rng),
            (Learner::Sac(s), Network::FusedOffPolicy(n)) => s.fused_gradient_step(n, lr, rng),
            (Learner::Td3(t), Network::OffPolicy(n)) => t.gradient_step(n, lr, rng),
            (Learner::Td3(t), Network::FusedOffPolicy(n)) => t.fused_gradient_step(n, lr, rng),
            (Learner::Tqc(q), Network::OffPolicy(n)) => q.gradient_step(n, lr, rng),
            (Learner::Tqc(q), Network::FusedOffPolicy(n)) => q.fused_gradient_step(n, lr, rng),
            _ => Err(ProximaError::InvalidArgument(
                "an off-policy gradient step needs an off-policy algorithm's networks".into(),
            )),
        }
    }

    /// SAC's temperature α (`None` for TD3).
    pub fn ent_coef(&self) -> Option<f64> {
        match self {
            Learner::Sac(s) | Learner::Tqc(Tqc { sac: s, .. }) => Some(s.ent_coef()),
            Learner::Td3(_) => None,
        }
    }

    /// The scalars a checkpoint keeps.
    pub fn snapshot(&self) -> OffPolicySnapshot {
        let st = self.state();
        OffPolicySnapshot {
            n_updates: st.n_updates,
            steps_since_train: st.steps_since_train,
            pending_gradient_steps: st.pending_gradient_steps,
            actor_t: st.actor_opt.t,
            critic_t: st.critic_opt.t,
            temperature: match self {
                Learner::Sac(s) | Learner::Tqc(Tqc { sac: s, .. }) => {
                    Some((s.log_ent_coef[0][0], s.ent_opt.t, s.ent_opt.m[0][0], s.ent_opt.v[0][0]))
                }
                Learner::Td3(_) => None,
            },
        }
    }

    /// Puts a [`OffPolicySnapshot`] back.
    pub fn restore(&mut self, snap: &OffPolicySnapshot) {
        let st = self.state_mut();
        st.n_updates = snap.n_updates;
        st.steps_since_train = snap.steps_since_train;
        st.pending_gradient_steps = snap.pending_gradient_steps;
        st.actor_opt.t = snap.actor_t;
        st.critic_opt.t = snap.critic_t;
        if let (Learner::Sac(s) | Learner::Tqc(Tqc { sac: s, .. }), Some((la, t, m, v))) = (self, snap.temperature) {
            s.log_ent_coef[0][0] = la;
            (s.ent_opt.t, s.ent_opt.m[0][0], s.ent_opt.v[0][0]) = (t, m, v);
        }
    }
}
