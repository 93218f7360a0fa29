//! Recurrent PPO's passes on the candle actor-critic (sb3-contrib's `RecurrentActorCriticPolicy`):
//! the observation (or, for `CnnLstmPolicy`, the Nature CNN's features of it, one CNN for both
//! stacks as sb3-contrib's `share_features_extractor`) through the actor's recurrent stack into
//! the actor's MLP, and through the critic's own stack (or the actor's outputs, detached:
//! `shared_lstm`) into the critic's; one
//! step for N envs while acting, T steps of B envs while learning (back-propagation through
//! time). An env's hidden state on the host is `[state_dim]`: the actor stack's (layer by layer,
//! h then c), then the critic stack's.

use super::ActorCritic;
use crate::error::{ProximaError, Result};
use crate::policy::distributions::mask_logits_in_place;
use crate::policy::interface::ActOutput;
use crate::policy::recurrent::Recurrent;
use candle_core::Tensor;
use rand::Rng;

impl ActorCritic {
    /// Values of one env's hidden state ([`crate::policy::recurrent::RecurrentSpec::state_dim`]);
    /// 0 for a feed-forward policy.
    pub fn recurrent_state_dim(&self) -> usize {
        self.spec.recurrent.map_or(0, |r| r.state_dim())
    }

    /// Runs the recurrent stacks' sequences on the fused kernels when `on` (the default under
    /// `backend = "auto"` and `"fused"`), or step by step as candle ops, the reference
    /// (`backend = "candle"`): [`Recurrent::set_kernels`]. No effect on a feed-forward policy.
    pub fn set_recurrent_kernels(&mut self, on: bool) {
        for stack in [&mut self.lstm_actor, &mut self.lstm_critic].into_iter().flatten() {
            stack.set_kernels(on);
        }
    }

    /// Whether a recurrent policy's sequences run on the fused kernels.
    pub fn recurrent_kernels(&self) -> bool {
        self.lstm_actor.as_ref().is_some_and(Recurrent::kernels)
    }

    /// The actor's stack (a recurrent policy's).
    fn lstm(&self) -> Result<&Recurrent> {
        self.lstm_actor
            .as_ref()
            .ok_or_else(|| ProximaError::InvalidArgument("not a recurrent policy: it has no hidden state".into()))
    }

    /// π's head `[T·B, head_dim]`, V(s) `[T·B]` and the hidden state after the last step
    /// `[B, state_dim]` over T steps of B envs, differentiable: `obs` `[T·B, obs_dim]` (pixels for a CNN)
    /// time-major (row t·B + e), `episode_starts` `[T·B]` (1 where env e's step t starts an
    /// episode: its state is zeroed first), `state0` `[B, state_dim]` the state before step 0.
    ///
    /// # Errors
    /// `InvalidArgument` for a feed-forward policy, or sizes that are not T·B rows and B states;
    /// tensor errors.
    pub fn forward_sequence(
        &self,
        obs: &Tensor,
        episode_starts: &Tensor,
        state0: &[f32],
        b: usize,
    ) -> Result<(Tensor, Tensor, Vec<f32>)> {
        let actor = self.lstm()?;
        let (sd, sd_a) = (self.recurrent_state_dim(), actor.shape().state_dim());
        if b == 0 || state0.len() != b * sd {
            return Err(ProximaError::InvalidArgument(format!(
                "a hidden state of {} values for {b} envs of {sd}",
                state0.len()
            )));
        }
        let (s_actor, s_critic) = split_rows(state0, b, sd_a);
        let x = match &self.trunk {
            Some(cnn) => cnn.forward(obs)?, // every step of every env in one batched pass
            None => obs.clone(),
        };
        let s0 = actor.state_from_host(&s_actor, b, &self.device)?;
        let (a_out, a_fin) = actor.sequence(&x, episode_starts, &s0, b)?;
        let mut fin = actor.state_to_host(&a_fin)?;
        let c_in = match &self.lstm_critic {
            Some(critic) => {
                let s0 = critic.state_from_host(&s_critic, b, &self.device)?;
                let (c_out, c_fin) = critic.sequence(&x, episode_starts, &s0, b)?;
                fin = join_rows(&fin, &critic.state_to_host(&c_fin)?, b);
                c_out
            }
            None => a_out.detach(), // shared_lstm: the critic's loss does not move the actor's LSTM
        };
        let head = self.actor.forward(&a_out)?;
        let values = self.critic.forward(&c_in)?.squeeze(1)?;
        Ok((head, values, fin))
    }

    /// One step of N envs: `obs` `[N, obs_dim]`, `episode_starts` `[N]` (the env's state is
    /// zeroed first where true), `state` `[N, state_dim]`, advanced in place; actions,
    /// log-probabilities and V(s) as [`ActorCritic::act_masked`] gives them (masked by `masks`).
    ///
    /// # Errors
    /// As [`ActorCritic::forward_sequence`]; [`crate::policy::ActionKind::check_masks`]'s.
    pub fn act_recurrent<R: Rng + ?Sized>(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        episode_starts: &[bool],
        state: &mut [f32],
        deterministic: bool,
        rng: &mut R,
    ) -> Result<ActOutput> {
        let (head, values, next) = self.step(obs, episode_starts, state)?;
        state.copy_from_slice(&next);
        let mut out = self.sample_rows(&head, &values, masks, deterministic, rng)?;
        // π_θold's head as it acted (a recurrent rollout has no batched pass to take it from):
        // the KL objectives' reference, the same values to rounding.
        out.head = head.flatten_all()?.to_vec1::<f32>()?;
        if let Some(m) = masks {
            mask_logits_in_place(&mut out.head, m);
        }
        Ok(out)
    }

    /// V(s) of one step of N envs with their hidden state `[N, state_dim]` (not advanced): the
    /// bootstrap of a truncated episode, or of the rollout's last observation.
    ///
    /// # Errors
    /// As [`ActorCritic::forward_sequence`].
    pub fn predict_values_recurrent(&self, obs: &[f32], episode_starts: &[bool], state: &[f32]) -> Result<Vec<f32>> {
        Ok(self.step(obs, episode_starts, state)?.1.to_vec1::<f32>()?)
    }

    /// [`ActorCritic::forward_sequence`] over one step of N envs.
    fn step(&self, obs: &[f32], episode_starts: &[bool], state: &[f32]) -> Result<(Tensor, Tensor, Vec<f32>)> {
        let x = self.obs_tensor(obs)?;
        let n = x.dim(0)?;
        if episode_starts.len() != n {
            return Err(ProximaError::InvalidArgument(format!(
                "{} episode starts for {n} observations",
                episode_starts.len()
            )));
        }
        let starts: Vec<f32> = episode_starts.iter().map(|&s| f32::from(u8::from(s))).collect();
        let starts = Tensor::from_vec(starts, n, &self.device)?;
        self.forward_sequence(&x, &starts, state, n)
    }
}

/// Each of the B rows of `state` cut at column `at`: `(left [B, at], right [B, sd − at])`.
fn split_rows(state: &[f32], b: usize, at: usize) -> (Vec<f32>, Vec<f32>) {
    let sd = state.len() / b.max(1);
    let (mut left, mut right) = (Vec::with_capacity(b * at), Vec::with_capacity(b * (sd - at)));
    for row in state.chunks(sd.max(1)) {
        left.extend_from_slice(&row[..at]);
        right.extend_from_slice(&row[at..]);
    }
    (left, right)
}

/// `left` `[B, a]` and `right` `[B, c]` side by side, `[B, a + c]`.
fn join_rows(left: &[f32], right: &[f32], b: usize) -> Vec<f32> {
    let (a, c) = (left.len() / b.max(1), right.len() / b.max(1));
    (0..b).flat_map(|e| left[e * a..(e + 1) * a].iter().chain(&right[e * c..(e + 1) * c]).copied()).collect()
}
