//! The algorithm a run trains with ([`Algo`]): its parameters, projected from the config once
//! (no algorithm reads the config), and its own state; and the on-policy family's update,
//! one `match` over PPO, A2C, TRPO, REINFORCE and PPG.

use crate::algo::a2c::{self, A2cParams};
use crate::algo::a3c::{self, Worker};
use crate::algo::learner::Learner;
use crate::algo::offpolicy::{batch_row_bytes, check_batch_memory, LoopParams};
use crate::algo::ppg::{self, AuxBuffer, Ppg, PpgParams};
use crate::algo::ppo::{self, PpoParams};
use crate::algo::reinforce::{self, ReinforceParams};
use crate::algo::sac::{Sac, SacParams};
use crate::algo::td3::{Td3, Td3Params};
use crate::algo::tqc::Tqc;
use crate::algo::trpo::{self, TrpoParams};
use crate::algo::update::Replicas;
use crate::algo::UpdateStats;
use crate::config::{AlgoName, Config};
use crate::error::{ProximaError, Result};
use crate::optim::Optimizer;
use crate::policy::{Activation, Backend, Network, PolicySpec};
use crate::replay::ReplayBuffer;
use crate::rollout::RolloutBuffer;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The algorithm a run trains with, by family: each family has its own iteration in the
/// trainer ([`super::Trainer::step_observed`]).
pub(crate) enum Algo {
    /// Collect a rollout, compute Â, update on it.
    OnPolicy(OnPolicy),
    /// SAC, TD3, DDPG: the replay buffer, the optimisers and counters (the networks are the
    /// trainer's policy, [`Network::OffPolicy`]).
    OffPolicy(Box<Learner>),
    /// A3C: asynchronous workers applying A2C gradients to the global network.
    A3c { params: A2cParams, workers: Vec<Worker>, global_updates: u64 },
}

/// The on-policy algorithms: each updates π_θ (and V_θ) on one collected rollout.
pub(crate) enum OnPolicy {
    /// PPO with β of the KL-penalty objectives (adapted after each update for `adaptive_kl`).
    Ppo { params: PpoParams, kl_coef: f64 },
    /// A2C: one gradient step per rollout.
    A2c(A2cParams),
    /// TRPO: the natural-gradient step, then the critic's epochs.
    Trpo(TrpoParams),
    /// REINFORCE: one gradient step per rollout on its finished episodes' Monte-Carlo returns.
    Reinforce(ReinforceParams),
    /// PPG: PPO's policy phase, then every `n_iteration` rollouts the auxiliary phase (its
    /// buffer and its own Adam).
    Ppg(Box<Ppg>),
}

/// What an on-policy update needs beside the algorithm's own state.
pub(crate) struct UpdateInputs<'a, 'r> {
    pub policy: &'a mut Network,
    pub opt: &'a mut Optimizer,
    pub buf: &'a RolloutBuffer,
    pub rng: &'a mut ChaCha8Rng,
    /// The learning rate of this update.
    pub lr: f64,
    /// Whether this is the run's last iteration (PPG's auxiliary phase).
    pub last: bool,
    /// The factor on ε (SB3's `clip_range` schedule, set from outside).
    pub clip_range_factor: f64,
    /// This process alone, or the ranks of a data-parallel run.
    pub replicas: Replicas<'r>,
}

impl Algo {
    /// The on-policy algorithm or A3C the config names (the off-policy ones are built with their
    /// networks, [`off_policy_parts`]); `sizes` are the parameters' sizes (PPG's auxiliary Adam),
    /// `a3c_workers` makes A3C's workers.
    ///
    /// # Errors
    /// `Config` for TRPO without `target_kl`; A3C's workers' env errors.
    pub(super) fn new(
        cfg: &Config,
        spec: &PolicySpec,
        sizes: &[usize],
        a3c_workers: impl FnOnce() -> Result<Vec<Worker>>,
    ) -> Result<Self> {
        Ok(match cfg.algo {
            AlgoName::A2c => Algo::OnPolicy(OnPolicy::A2c(a2c_params(cfg))),
            AlgoName::Trpo => Algo::OnPolicy(OnPolicy::Trpo(trpo_params(cfg)?)),
            AlgoName::Reinforce => Algo::OnPolicy(OnPolicy::Reinforce(reinforce_params(cfg))),
            AlgoName::Ppg => Algo::OnPolicy(OnPolicy::Ppg(Box::new(Ppg {
                params: ppg_params(cfg),
                aux: AuxBuffer::new(cfg.n_steps, cfg.n_envs, spec.obs_dim),
                aux_opt: Optimizer::adam(sizes, cfg.learning_rate, cfg.adam_eps),
            }))),
            AlgoName::A3c => Algo::A3c { params: a2c_params(cfg), workers: a3c_workers()?, global_updates: 0 },
            _ => Algo::OnPolicy(OnPolicy::Ppo { params: ppo_params(cfg), kl_coef: cfg.kl_coef }),
        })
    }

    /// The width of π_θold's head the rollout buffer keeps: PPO, PPG and TRPO measure
    /// KL[π_θold, π_θ]; the others keep none.
    pub(super) fn old_head_dim(&self, spec: &PolicySpec) -> usize {
        match self {
            Algo::OnPolicy(OnPolicy::Ppo { .. } | OnPolicy::Ppg(_) | OnPolicy::Trpo(_)) => spec.action.head_dim(),
            Algo::OnPolicy(OnPolicy::A2c(_) | OnPolicy::Reinforce(_)) | Algo::A3c { .. } | Algo::OffPolicy(_) => 0,
        }
    }
}

impl OnPolicy {
    /// Whether the update needs Â from GAE (REINFORCE computes its Monte-Carlo returns itself,
    /// and needs neither V(s_T) nor GAE).
    pub(super) fn needs_gae(&self) -> bool {
        !matches!(self, OnPolicy::Reinforce(_))
    }

    /// The algorithm's update on the collected rollout `inputs.buf` (whose Â are computed).
    ///
    /// # Errors
    /// The algorithm's (`NonFinite` for a diverging step, …); TRPO on a backend other than
    /// candle.
    pub(super) fn update(&mut self, inputs: UpdateInputs<'_, '_>) -> Result<UpdateStats> {
        let UpdateInputs { policy, opt, buf, rng, lr, last, clip_range_factor, replicas } = inputs;
        match self {
            OnPolicy::Ppo { params, kl_coef } => {
                let params = PpoParams { clip_range: params.clip_range * clip_range_factor, ..*params };
                ppo::update(policy, opt, buf, &params, (lr, kl_coef), rng, replicas)
            }
            OnPolicy::A2c(params) => a2c::update(policy, opt, buf, params, lr),
            OnPolicy::Reinforce(params) => reinforce::update(policy, opt, buf, params, lr),
            OnPolicy::Ppg(ppg) => ppg::update(policy, opt, buf, ppg, lr, last, rng),
            OnPolicy::Trpo(params) => match policy {
                Network::Candle(net) => trpo::update(net, opt, buf, params, lr, rng),
                _ => Err(ProximaError::InvalidArgument("TRPO runs on the candle backend".into())),
            },
        }
    }
}

/// The config's PPO parameters.
pub(super) fn ppo_params(c: &Config) -> PpoParams {
    PpoParams {
        n_epochs: c.n_epochs,
        batch_size: c.batch_size,
        clip_range: c.clip_range,
        clip_range_vf: c.clip_range_vf,
        vf_coef: c.vf_coef,
        ent_coef: c.ent_coef.value(),
        max_grad_norm: c.max_grad_norm,
        target_kl: c.target_kl,
        normalize_advantage: c.normalize_advantage,
        objective: c.objective,
        kl_target: c.kl_target,
        log_kl_divergence: c.log_kl_divergence,
    }
}

/// The config's PPG parameters: the policy phase is PPO-Clip for `e_policy` epochs.
pub(super) fn ppg_params(c: &Config) -> PpgParams {
    let ppo = PpoParams { n_epochs: c.e_policy, objective: crate::algo::Objective::Clip, ..ppo_params(c) };
    PpgParams {
        ppo,
        n_iteration: c.n_iteration,
        e_auxiliary: c.e_auxiliary,
        beta_clone: c.beta_clone,
        num_aux_rollouts: c.num_aux_rollouts,
    }
}

/// The config's A2C (and A3C) parameters.
pub(super) fn a2c_params(c: &Config) -> A2cParams {
    A2cParams {
        vf_coef: c.vf_coef,
        ent_coef: c.ent_coef.value(),
        max_grad_norm: c.max_grad_norm,
        normalize_advantage: c.normalize_advantage,
    }
}

/// The config's REINFORCE parameters.
pub(super) fn reinforce_params(c: &Config) -> ReinforceParams {
    ReinforceParams {
        gamma: c.gamma,
        baseline: c.baseline,
        vf_coef: c.vf_coef,
        ent_coef: c.ent_coef.value(),
        max_grad_norm: c.max_grad_norm,
        normalize_advantage: c.normalize_advantage,
    }
}

/// The config's off-policy loop parameters.
pub(super) fn loop_params(c: &Config) -> LoopParams {
    LoopParams {
        learning_starts: c.learning_starts,
        train_freq: c.train_freq,
        gradient_steps: c.gradient_steps,
        batch_size: c.batch_size,
    }
}

/// The config's SAC parameters for an action space of `act_dim` dims.
pub(super) fn sac_params(c: &Config, act_dim: usize) -> SacParams {
    SacParams {
        looping: loop_params(c),
        gamma: c.gamma,
        tau: c.tau,
        target_update_interval: c.target_update_interval,
        target_entropy: c.target_entropy.unwrap_or(-(act_dim as f64)),
        ent_coef: c.ent_coef,
    }
}

/// The config's TD3 (and DDPG) parameters.
pub(super) fn td3_params(c: &Config) -> Td3Params {
    Td3Params {
        looping: loop_params(c),
        gamma: c.gamma,
        tau: c.tau,
        policy_delay: c.policy_delay,
        target_policy_noise: c.target_policy_noise,
        target_noise_clip: c.target_noise_clip,
        noise_std: c.noise_std,
    }
}

/// The backend of the run's network: [`Config::resolved_backend`], or candle under `auto` for a
/// network the fused kernels do not cover that only the env reveals (image keys in a `Dict`).
pub(super) fn backend_for(cfg: &Config, spec: &PolicySpec) -> Backend {
    match cfg.backend {
        Backend::Auto if !spec.inputs.is_empty() && spec.recurrent.is_none() => Backend::Candle,
        _ => cfg.resolved_backend(),
    }
}

/// An off-policy algorithm's networks (SB3's `MlpPolicy`: ReLU, `net_arch` for the actor and
/// each critic) and state, or `None` for an on-policy algorithm.
pub(super) fn off_policy_parts(cfg: &Config, spec: &PolicySpec) -> Result<Option<(Network, Algo)>> {
    let Some(shape) = crate::policy::offpolicy::nets_of_algo(cfg.algo.as_str(), cfg.n_critics, cfg.n_quantiles) else {
        return Ok(None);
    };
    crate::policy::offpolicy::check_action_space(&cfg.algo.as_str().to_uppercase(), spec)?;
    let spec = PolicySpec { activation: Activation::Relu, shared_trunk: false, ortho_init: false, ..spec.clone() };
    let act_dim = spec.action.act_dim();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let net = Network::off_policy(spec.clone(), shape, backend_for(cfg, &spec), &mut rng)?;
    let replay = ReplayBuffer::new(cfg.buffer_size, cfg.n_envs, spec.obs_dim, act_dim)?;
    let row = batch_row_bytes(spec.obs_dim, act_dim, &spec.net_arch, shape.n_critics);
    check_batch_memory(cfg.batch_size, row, replay.memory_bytes())?;
    let (actor, critics) = net.off_policy_sizes().expect("built as off-policy");
    let (sizes, lr, eps) = ((&actor[..], &critics[..]), cfg.learning_rate, cfg.adam_eps);
    let learner = match cfg.algo {
        AlgoName::Sac => Learner::Sac(Sac::new(sac_params(cfg, act_dim), replay, sizes, lr, eps)),
        AlgoName::Tqc => Learner::Tqc(Tqc {
            sac: Sac::new(sac_params(cfg, act_dim), replay, sizes, lr, eps),
            n_quantiles: cfg.n_quantiles,
            top_quantiles_to_drop_per_net: cfg.top_quantiles_to_drop_per_net,
        }),
        _ => Learner::Td3(Td3::new(td3_params(cfg), replay, sizes, lr, eps)),
    };
    Ok(Some((net, Algo::OffPolicy(Box::new(learner)))))
}

/// The config's TRPO parameters.
pub(super) fn trpo_params(c: &Config) -> Result<TrpoParams> {
    Ok(TrpoParams {
        target_kl: c.target_kl.ok_or_else(|| ProximaError::Config("TRPO needs target_kl (δ)".into()))?,
        cg_max_steps: c.cg_max_steps,
        cg_damping: c.cg_damping,
        line_search_shrinking_factor: c.line_search_shrinking_factor,
        line_search_max_iter: c.line_search_max_iter,
        n_critic_updates: c.n_critic_updates,
        batch_size: c.batch_size,
        max_grad_norm: c.max_grad_norm,
        normalize_advantage: c.normalize_advantage,
    })
}

/// Env steps one iteration takes: N·T, or for A3C every worker's 16 rollouts.
pub(super) fn steps_per_iteration(cfg: &Config, algo: &Algo) -> u64 {
    let rollout = (cfg.n_steps * cfg.n_envs) as u64;
    match algo {
        Algo::A3c { .. } => rollout * cfg.n_workers as u64 * a3c::UPDATES_PER_ITERATION,
        _ => rollout,
    }
}
