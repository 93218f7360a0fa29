//! Which implementation a run's policy is on: the config's [`Backend`] and the [`Network`] that
//! holds either one behind the [`Policy`] seam.

use super::candle::ActorCritic;
use super::fused::{FusedMlp, FusedOffPolicy};
use super::interface::{ActOutput, AuxBatch, FlatParams, LossReport, Policy};
use super::offpolicy::{OffPolicyNets, OffPolicyShape};
use super::spec::PolicySpec;
use crate::error::{ProximaError, Result};
use crate::loss::PpoCoefs;
use crate::rollout::Minibatch;
use candle_core::Device;
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

/// The config's `backend` key: which implementation of the policy network trains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// The fused CPU kernels wherever they cover the run (every MLP policy of PPO, A2C and
    /// A3C), candle elsewhere (TRPO).
    #[default]
    Auto,
    /// The fused CPU kernels ([`FusedMlp`]); an error for what they do not cover.
    Fused,
    /// candle ([`ActorCritic`]): every result as before the fused backend, bit for bit.
    Candle,
}

impl Backend {
    /// The config's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Fused => "fused",
            Backend::Candle => "candle",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = ProximaError;

    /// The config's spelling (`auto`, `fused`, `candle`), as `--backend` takes it.
    ///
    /// # Errors
    /// `Config` naming the three for any other word.
    fn from_str(s: &str) -> Result<Self> {
        [Backend::Auto, Backend::Fused, Backend::Candle]
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| ProximaError::Config(format!("unknown backend `{s}`: auto, fused or candle")))
    }
}

/// A policy network on one of the two backends (one per run or worker, never moved in a loop:
/// the size difference of the variants does not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Network {
    /// On candle.
    Candle(ActorCritic),
    /// On the fused CPU kernels.
    Fused(FusedMlp),
    /// An off-policy algorithm's actor, critics and targets (SAC, TD3, DDPG) on candle.
    OffPolicy(OffPolicyNets),
    /// The same on the fused CPU kernels.
    FusedOffPolicy(FusedOffPolicy),
}

impl Network {
    /// A fresh network of `spec` on `backend` (`Auto` means fused, or candle for a spec the
    /// fused kernels do not cover: PPG's auxiliary value head, image keys of a `Dict`),
    /// initialised from `rng`: the same initial values on either backend. A recurrent policy is
    /// the candle actor-critic either way; on `Auto` and `Fused` its recurrent layers run on the
    /// fused kernels ([`ActorCritic::set_recurrent_kernels`]), and [`Network::backend`] says
    /// `Fused`.
    ///
    /// # Errors
    /// `InvalidArgument` for zero dims; `Unsupported` for `Fused` with the auxiliary value head.
    pub fn new<R: Rng + ?Sized>(spec: PolicySpec, backend: Backend, rng: &mut R) -> Result<Self> {
        let candle_only = spec.aux_value_head || spec.recurrent.is_some() || !spec.inputs.is_empty();
        Ok(match backend {
            Backend::Candle => Network::Candle(ActorCritic::new(spec, &Device::Cpu, rng)?),
            // A recurrent policy: the candle actor-critic with its recurrent layers on the kernels.
            Backend::Auto | Backend::Fused if spec.recurrent.is_some() && !spec.aux_value_head => {
                let mut net = ActorCritic::new(spec, &Device::Cpu, rng)?;
                net.set_recurrent_kernels(true);
                Network::Candle(net)
            }
            Backend::Auto if candle_only => Network::Candle(ActorCritic::new(spec, &Device::Cpu, rng)?),
            Backend::Auto | Backend::Fused => Network::Fused(FusedMlp::new(spec, rng)?),
        })
    }

    /// Splits each minibatch (each off-policy gradient step) of the fused backend over `threads`
    /// threads ([`FusedMlp::set_threads`], [`FusedOffPolicy::set_threads`]); candle takes its
    /// thread count from rayon's pool instead.
    pub fn set_threads(&mut self, threads: usize) {
        match self {
            Network::Fused(n) => n.set_threads(threads),
            Network::FusedOffPolicy(n) => n.set_threads(threads),
            _ => {}
        }
    }

    /// An off-policy algorithm's networks of `shape` for `spec` on `backend`
    /// (`Auto` means fused, or candle for image keys in a `Dict`), initialised from `rng`: the
    /// same initial values on either backend.
    ///
    /// # Errors
    /// As [`OffPolicyNets::new`].
    pub fn off_policy<R: Rng + ?Sized>(
        spec: PolicySpec,
        shape: OffPolicyShape,
        backend: Backend,
        rng: &mut R,
    ) -> Result<Self> {
        Ok(match backend {
            Backend::Candle => Network::OffPolicy(OffPolicyNets::with_shape(spec, shape, rng)?),
            Backend::Auto if !spec.inputs.is_empty() => {
                Network::OffPolicy(OffPolicyNets::with_shape(spec, shape, rng)?)
            }
            Backend::Auto | Backend::Fused => Network::FusedOffPolicy(FusedOffPolicy::with_shape(spec, shape, rng)?),
        })
    }

    /// The sizes of an off-policy algorithm's actor parameters and critic parameters, in
    /// order (its optimisers' moments), or `None` for an actor-critic.
    pub fn off_policy_sizes(&self) -> Option<(Vec<usize>, Vec<usize>)> {
        let sizes = |p: &[(String, candle_core::Var)]| p.iter().map(|(_, v)| v.elem_count()).collect();
        match self {
            Network::OffPolicy(n) => Some((sizes(n.actor_params()), sizes(n.critic_params()))),
            Network::FusedOffPolicy(n) => {
                Some((n.sizes(crate::policy::fused::ACTOR), n.sizes(crate::policy::fused::CRITICS)))
            }
            _ => None,
        }
    }

    /// Whether this is an off-policy algorithm's networks (on either backend).
    pub fn is_off_policy(&self) -> bool {
        matches!(self, Network::OffPolicy(_) | Network::FusedOffPolicy(_))
    }

    /// Which backend this network is on (`Fused` or `Candle`).
    pub fn backend(&self) -> Backend {
        match self {
            Network::Candle(n) if n.recurrent_kernels() => Backend::Fused,
            Network::Candle(_) | Network::OffPolicy(_) => Backend::Candle,
            Network::Fused(_) | Network::FusedOffPolicy(_) => Backend::Fused,
        }
    }

    /// The candle actor-critic, when on candle.
    pub fn candle(&self) -> Option<&ActorCritic> {
        match self {
            Network::Candle(n) => Some(n),
            _ => None,
        }
    }

    /// An off-policy algorithm's networks, when this is one.
    pub fn off_policy_nets(&self) -> Option<&OffPolicyNets> {
        match self {
            Network::OffPolicy(n) => Some(n),
            _ => None,
        }
    }

    fn inner(&self) -> &dyn Policy {
        match self {
            Network::Candle(n) => n,
            Network::Fused(n) => n,
            Network::OffPolicy(n) => n,
            Network::FusedOffPolicy(n) => n,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Policy {
        match self {
            Network::Candle(n) => n,
            Network::Fused(n) => n,
            Network::OffPolicy(n) => n,
            Network::FusedOffPolicy(n) => n,
        }
    }
}

impl Policy for Network {
    fn spec(&self) -> &PolicySpec {
        self.inner().spec()
    }
    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput> {
        self.inner().act(obs, deterministic, rng)
    }
    fn act_into(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        self.inner().act_into(obs, masks, deterministic, rng, out)
    }
    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        self.inner().predict_values(obs)
    }
    fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        self.inner().dist_params_host(obs)
    }
    fn ppo_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], coefs: &PpoCoefs) -> Result<LossReport> {
        self.inner_mut().ppo_loss(mb, old_log_std, coefs)
    }
    fn reads_byte_pixels(&self) -> bool {
        self.inner().reads_byte_pixels()
    }
    fn a2c_loss(&mut self, batch: &Minibatch, vf_coef: f64, ent_coef: f64) -> Result<LossReport> {
        self.inner_mut().a2c_loss(batch, vf_coef, ent_coef)
    }
    fn aux_loss(&mut self, batch: &AuxBatch<'_>, beta_clone: f64) -> Result<LossReport> {
        self.inner_mut().aux_loss(batch, beta_clone)
    }
    fn log_ratio(&self) -> &[f32] {
        self.inner().log_ratio()
    }
    fn backward(&mut self) -> Result<Vec<Option<Vec<f32>>>> {
        self.inner_mut().backward()
    }
    fn backward_flat(&mut self) -> Result<Option<FlatParams<'_>>> {
        self.inner_mut().backward_flat()
    }
    fn recurrent_state_dim(&self) -> usize {
        self.inner().recurrent_state_dim()
    }
    fn act_recurrent(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        hidden: (&[bool], &mut [f32]),
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        self.inner().act_recurrent(obs, masks, hidden, deterministic, rng, out)
    }
    fn predict_values_recurrent(&self, obs: &[f32], episode_starts: &[bool], state: &[f32]) -> Result<Vec<f32>> {
        self.inner().predict_values_recurrent(obs, episode_starts, state)
    }
    fn rollout_kl(&self, obs: &[f32], old_head: &[f32], old_log_std: &[f32], masks: Option<&[u8]>) -> Result<f64> {
        self.inner().rollout_kl(obs, old_head, old_log_std, masks)
    }
    fn rollout_kl_recurrent(
        &self,
        obs: &[f32],
        sequences: (&[bool], &[f32]),
        old_head: &[f32],
        old_log_std: &[f32],
        masks: Option<&[u8]>,
    ) -> Result<f64> {
        self.inner().rollout_kl_recurrent(obs, sequences, old_head, old_log_std, masks)
    }
    fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.inner().param_shapes()
    }
    fn param_names(&self) -> Vec<String> {
        self.inner().param_names()
    }
    fn env_action(&self, action: &mut [f32]) {
        self.inner().env_action(action)
    }
    fn params(&self) -> Result<Vec<Vec<f32>>> {
        self.inner().params()
    }
    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()> {
        self.inner_mut().set_params(values)
    }
}
