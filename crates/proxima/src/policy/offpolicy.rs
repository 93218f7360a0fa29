//! The off-policy algorithms' networks on candle (the reference; the fused backend's are
//! [`crate::policy::fused::FusedOffPolicy`]), behind the [`Policy`] seam for acting,
//! evaluation and checkpoints (their losses are the algorithms' own: [`crate::algo::sac`],
//! [`crate::algo::td3`]):
//!
//! * SAC (Haarnoja et al. 2018, arXiv:1812.05905; SB3's `SACPolicy`): obs → `net_arch` ReLU layers
//!   → μ and log σ (each a dense layer, SB3's `mu` and `log_std`), log σ clamped to [−20, 2];
//!   u = μ + σ·ε, a = tanh(u) ∈ (−1, 1). log π(a|s) = Σ_j [log N(u_j; μ_j, σ_j) − log(1 − tanh² u_j)]
//!   (the tanh's change of variables, Appendix C of the paper), with log(1 − tanh² u) =
//!   2·(log 2 − u − softplus(−2u)), exact and finite for every u (SB3 adds ε = 1e-6 in the log).
//! * TD3 / DDPG (Fujimoto et al. 2018, arXiv:1802.09477; Lillicrap et al. 2016; SB3's
//!   `TD3Policy`): a = tanh(μ(s)), obs → `net_arch` ReLU layers → dim, with a target actor.
//! * Critics: Q_k(s, a) = MLP_k([s, a]) → 1, k < `n_critics` (2; DDPG 1), on the stored, squashed
//!   action; every target starts equal to its network and follows it by Polyak averaging
//!   ([`OffPolicyNets::polyak_update`]).
//! * Over a `Dict` observation with image keys (SB3's `MultiInputPolicy`, its `CombinedExtractor`:
//!   [`crate::policy::inputs`]), the actor, the critics and each target read a `CombinedExtractor`
//!   of their own (`{net}.features_extractor.extractors.{key}.cnn.0`, …; the critics' `qf`s share
//!   one, SB3's `share_features_extractor = False`), the MLPs its features.
//! * The env gets a rescaled to the Box: low + (a + 1)·(high − low)/2 (SB3's `unscale_action`).
//!
//! Parameter names are SB3's (`actor.latent_pi.0.weight`, `actor.mu.weight`, `actor.mu.4.bias`,
//! `critic.qf0.0.weight`, `critic_target.qf1.4.bias`, `actor_target.mu.0.weight`, …), weights
//! `[out, in]`. Initialisation is PyTorch's default for `nn.Linear` (weights and biases
//! U(±1/√fan_in)), as SB3's.

use super::candle::{combined, Combined, Dense};
use super::interface::{ActOutput, Policy};
use super::spec::{ActionKind, PolicySpec};
use super::spec::{LayerPlan, Part};
use crate::error::{ProximaError, Result};
use candle_core::{DType, Device, Tensor, Var};
use rand::{Rng, RngCore};
use rand_distr::StandardNormal;

/// SB3's bounds of the actor's log σ.
pub const LOG_STD_MIN: f64 = -20.0;
/// SB3's bounds of the actor's log σ.
pub const LOG_STD_MAX: f64 = 2.0;

/// Dense layers with ReLU between them (and after the last when `relu_last`).
fn mlp(layers: &[Dense], x: &Tensor, relu_last: bool) -> candle_core::Result<Tensor> {
    let mut h = x.clone();
    for (i, l) in layers.iter().enumerate() {
        h = l.forward(&h)?;
        if relu_last || i + 1 < layers.len() {
            h = h.relu()?;
        }
    }
    Ok(h)
}

/// Which actor the off-policy networks have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorKind {
    /// SAC's squashed Gaussian: a = tanh(μ(s) + σ(s)·ε).
    SquashedGaussian,
    /// TD3's and DDPG's deterministic actor a = tanh(μ(s)), with a target copy.
    Deterministic,
}

/// The shape of an off-policy algorithm's networks: its actor, its number of critics, and the
/// values each critic gives for one (s, a) (1: Q(s, a); TQC: its quantiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffPolicyShape {
    /// The actor.
    pub kind: ActorKind,
    /// Critics (and as many targets).
    pub n_critics: usize,
    /// Outputs of each critic.
    pub quantiles: usize,
}

impl OffPolicyShape {
    /// `n_critics` critics of one Q value each.
    pub fn new(kind: ActorKind, n_critics: usize) -> Self {
        OffPolicyShape { kind, n_critics, quantiles: 1 }
    }
}

/// One dense layer of the networks, `(name, fan_in, fan_out)`.
fn dense_layer(name: String, fan_in: usize, fan_out: usize) -> LayerPlan {
    LayerPlan { name, fan_in, fan_out, gain: 1.0, part: Part::Trunk, conv: None }
}

/// The layers of the networks, in parameter order: actor, critics, target critics and
/// (deterministic actors) the target actor, each network's own `features_extractor` first when
/// the observation has image keys (SB3's `MultiInputPolicy` with `share_features_extractor =
/// False`: one `CombinedExtractor` for the actor, one for the critics, one per target).
fn plan(spec: &PolicySpec, shape: OffPolicyShape) -> Vec<LayerPlan> {
    let OffPolicyShape { kind, n_critics, quantiles } = shape;
    let dim = spec.action.act_dim();
    let features = spec.features_dim();
    let mut out = Vec::new();
    let extractor = |net: &str, out: &mut Vec<LayerPlan>| {
        for mut l in spec.extractor_plan() {
            l.name = format!("{net}.features_extractor.{}", l.name);
            out.push(l);
        }
    };
    let hidden = |prefix: &str, fan_in: usize, out: &mut Vec<LayerPlan>| {
        let mut f = fan_in;
        for (i, &h) in spec.net_arch.iter().enumerate() {
            out.push(dense_layer(format!("{prefix}.{}", 2 * i), f, h));
            f = h;
        }
        f
    };
    let last = 2 * spec.net_arch.len();
    extractor("actor", &mut out);
    match kind {
        ActorKind::SquashedGaussian => {
            let w = hidden("actor.latent_pi", features, &mut out);
            out.push(dense_layer("actor.mu".into(), w, dim));
            out.push(dense_layer("actor.log_std".into(), w, dim));
        }
        ActorKind::Deterministic => {
            let w = hidden("actor.mu", features, &mut out);
            out.push(dense_layer(format!("actor.mu.{last}"), w, dim));
        }
    }
    for prefix in ["critic", "critic_target"] {
        extractor(prefix, &mut out);
        for k in 0..n_critics {
            let w = hidden(&format!("{prefix}.qf{k}"), features + dim, &mut out);
            out.push(dense_layer(format!("{prefix}.qf{k}.{last}"), w, quantiles));
        }
    }
    if kind == ActorKind::Deterministic {
        extractor("actor_target", &mut out);
        let w = hidden("actor_target.mu", features, &mut out);
        out.push(dense_layer(format!("actor_target.mu.{last}"), w, dim));
    }
    out
}

/// The online layer a target layer copies (`critic_target.X` ← `critic.X`, `actor_target.X` ←
/// `actor.X`), or `None` for an online layer.
fn online_of(name: &str) -> Option<String> {
    ["critic", "actor"]
        .iter()
        .find_map(|p| name.strip_prefix(&format!("{p}_target.")).map(|rest| format!("{p}.{rest}")))
}

/// The parameter names and shapes of the networks, in order.
pub fn param_shapes_for(spec: &PolicySpec, shape: OffPolicyShape) -> Vec<(String, Vec<usize>)> {
    plan(spec, shape)
        .into_iter()
        .flat_map(|l| [(format!("{}.weight", l.name), l.weight_shape()), (format!("{}.bias", l.name), vec![l.fan_out])])
        .collect()
}

/// The networks an off-policy algorithm (`sac`, `td3`, `ddpg`, `tqc`: its critics of
/// `n_quantiles`) has, or `None` for the on-policy ones.
pub fn nets_of_algo(algo: &str, n_critics: usize, n_quantiles: usize) -> Option<OffPolicyShape> {
    match algo {
        "sac" => Some(OffPolicyShape::new(ActorKind::SquashedGaussian, n_critics)),
        "tqc" => Some(OffPolicyShape { kind: ActorKind::SquashedGaussian, n_critics, quantiles: n_quantiles }),
        "td3" => Some(OffPolicyShape::new(ActorKind::Deterministic, n_critics)),
        "ddpg" => Some(OffPolicyShape::new(ActorKind::Deterministic, 1)),
        _ => None,
    }
}

/// u = μ + σ·ε, a = tanh(u) and log π(a|s) summed over the action dims, differentiable in μ and
/// log σ (the reparameterisation trick); `mean`, `log_std` (already clamped) and `eps` `[B, dim]`
/// → `(a [B, dim], log π [B])`, in the tensors' dtype.
///
/// # Errors
/// Shape mismatches (candle's).
pub fn squashed_sample(mean: &Tensor, log_std: &Tensor, eps: &Tensor) -> Result<(Tensor, Tensor)> {
    let u = (mean + (log_std.exp()? * eps)?)?;
    let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
    // log N(u; μ, σ) = −ε²/2 − log σ − log(2π)/2, since (u − μ)/σ = ε.
    let log_normal = ((eps.sqr()? * -0.5)? - log_std)?.affine(1.0, -half_log_2pi)?;
    // log(1 − tanh² u) = 2·(log 2 − u − softplus(−2u)).
    let correction = ((u.neg()? - softplus(&(&u * -2.0)?)?)?.affine(2.0, 2.0 * std::f64::consts::LN_2))?;
    let log_prob = (log_normal - correction)?.sum(1)?;
    Ok((u.tanh()?, log_prob))
}

/// softplus(x) = log(1 + eˣ) = max(x, 0) + log(1 + e^{−|x|}), finite for every x.
fn softplus(x: &Tensor) -> candle_core::Result<Tensor> {
    x.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?
}

/// log π(a|s) of one squashed-Gaussian sample u = μ + σ·ε, in f64 from the definition (the
/// reference the tests hold [`squashed_sample`] to): Σ_j log N(u_j; μ_j, σ_j) − log(1 − tanh² u_j).
pub fn squashed_log_prob_f64(mean: &[f64], log_std: &[f64], eps: &[f64]) -> f64 {
    let mut lp = 0.0;
    for ((&m, &ls), &e) in mean.iter().zip(log_std).zip(eps) {
        let s = ls.exp();
        let u = m + s * e;
        let normal = -((u - m) / s).powi(2) / 2.0 - ls - 0.5 * (2.0 * std::f64::consts::PI).ln();
        // 1 − tanh²u = sech²u = 4 / (eᵘ + e⁻ᵘ)²: no cancellation where tanh u ≈ ±1.
        lp += normal - (4f64.ln() - 2.0 * (u.exp() + (-u).exp()).ln());
    }
    lp
}

/// The initial `(weight, bias)` of every layer of the networks, in parameter order: PyTorch's
/// default initialisation from `rng` (the same values on either backend), every target a copy of
/// its network.
///
/// # Errors
/// `Unsupported` for a discrete or unbounded action space (the actor's tanh is rescaled to the
/// Box); `InvalidArgument` for zero dims or no critic.
pub(crate) fn initial_values<R: Rng + ?Sized>(
    spec: &PolicySpec,
    shape: OffPolicyShape,
    rng: &mut R,
) -> Result<Vec<(Vec<f32>, Vec<f32>)>> {
    check_nets(spec, shape)?;
    let layers = plan(spec, shape);
    let mut values: Vec<(Vec<f32>, Vec<f32>)> = Vec::new();
    for LayerPlan { name, fan_in, fan_out, .. } in &layers {
        if let Some(online) = online_of(name) {
            let k = layers.iter().position(|l| l.name == online).expect("a target's network");
            values.push(values[k].clone());
            continue;
        }
        // PyTorch's default for `nn.Linear` and `nn.Conv2d` alike (fan_in = in_channels · k²).
        let bound = 1.0 / (*fan_in as f32).sqrt();
        let w = (0..fan_in * fan_out).map(|_| rng.random_range(-bound..bound)).collect();
        let b = (0..*fan_out).map(|_| rng.random_range(-bound..bound)).collect();
        values.push((w, b));
    }
    Ok(values)
}

/// Whether `spec` can have these networks.
///
/// # Errors
/// As [`initial_values`].
pub(crate) fn check_nets(spec: &PolicySpec, shape: OffPolicyShape) -> Result<()> {
    let OffPolicyShape { n_critics, quantiles, .. } = shape;
    check_action_space("an off-policy actor (SAC, TQC, TD3, DDPG)", spec)?;
    if n_critics == 0 {
        return Err(ProximaError::InvalidArgument("n_critics = 0: needs at least one critic".into()));
    }
    if quantiles == 0 {
        return Err(ProximaError::InvalidArgument("n_quantiles = 0: each critic needs at least one output".into()));
    }
    spec.check_dims()
}

/// Whether `who` (an algorithm's name, or a phrase in the singular) can act in `spec`'s action
/// space: a Box with finite bounds, low < high, into which the actor's tanh output is rescaled.
///
/// # Errors
/// `Unsupported` naming `who`: a discrete space, or a Box with infinite or empty bounds.
pub fn check_action_space(who: &str, spec: &PolicySpec) -> Result<()> {
    let ActionKind::Continuous { low, high, .. } = &spec.action else {
        return Err(ProximaError::Unsupported(format!(
            "{who} needs a continuous (Box) action space: the actor's output is a tanh rescaled to the Box; for discrete actions use PPO, A2C, TRPO, PPG or REINFORCE"
        )));
    };
    if low.iter().chain(high).any(|x| !x.is_finite()) || low.iter().zip(high).any(|(l, h)| l >= h) {
        return Err(ProximaError::Unsupported(format!(
            "{who} rescales its actions in (−1, 1) to the Box's bounds, which must be finite with low < high: got low {low:?}, high {high:?}"
        )));
    }
    Ok(())
}

/// a ∈ [−1, 1] → low + (a + 1)·(high − low)/2 in place, the Box's own range (SB3's
/// `unscale_action`); `action` `[N, dim]`, nothing done for a discrete spec.
pub(crate) fn unscale_action(spec: &PolicySpec, action: &mut [f32]) {
    if let ActionKind::Continuous { low, high, .. } = &spec.action {
        for (i, a) in action.iter_mut().enumerate() {
            let j = i % low.len();
            let (l, h) = (low[j], high[j]);
            *a = l + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (h - l);
        }
    }
}

/// The [`Policy`] methods of the on-policy losses, which an off-policy algorithm's networks (on
/// either backend) refuse with `Unsupported`: they train with their algorithm's own losses.
macro_rules! refuse_on_policy_losses {
    () => {
        fn dist_params_host(&self, _obs: &[f32]) -> $crate::error::Result<(Vec<f32>, Vec<f32>)> {
            Err($crate::policy::offpolicy::not_on_policy("π_θold's parameters (a KL of PPO/TRPO)"))
        }

        fn ppo_loss(
            &mut self,
            _mb: &$crate::rollout::Minibatch,
            _old_log_std: &[f32],
            _coefs: &$crate::loss::PpoCoefs,
        ) -> $crate::error::Result<$crate::policy::LossReport> {
            Err($crate::policy::offpolicy::not_on_policy("the PPO loss"))
        }

        fn a2c_loss(
            &mut self,
            _batch: &$crate::rollout::Minibatch,
            _vf_coef: f64,
            _ent_coef: f64,
        ) -> $crate::error::Result<$crate::policy::LossReport> {
            Err($crate::policy::offpolicy::not_on_policy("the A2C loss"))
        }

        fn log_ratio(&self) -> &[f32] {
            &[]
        }

        fn backward(&mut self) -> $crate::error::Result<Vec<Option<Vec<f32>>>> {
            Err($crate::policy::offpolicy::not_on_policy("backward of an on-policy loss"))
        }

        fn rollout_kl(
            &self,
            _obs: &[f32],
            _old_head: &[f32],
            _old_log_std: &[f32],
            _masks: Option<&[u8]>,
        ) -> $crate::error::Result<f64> {
            Err($crate::policy::offpolicy::not_on_policy("the rollout KL"))
        }
    };
}
pub(crate) use refuse_on_policy_losses;

/// `Unsupported` for `what`, an on-policy loss asked of an off-policy algorithm's networks.
pub(crate) fn not_on_policy(what: &str) -> ProximaError {
    ProximaError::Unsupported(format!("{what}: an off-policy algorithm's networks train with its own losses"))
}

/// The networks' `CombinedExtractor`s over a `Dict` observation's image keys
/// ([`crate::policy::inputs`]), one per network as SB3 builds them for off-policy algorithms.
#[derive(Debug)]
struct Features {
    actor: Combined,
    critic: Combined,
    critic_target: Combined,
    /// A deterministic actor's target copy's.
    actor_target: Option<Combined>,
}

/// One of the networks, for [`OffPolicyNets::features_of`].
#[derive(Clone, Copy)]
enum Net {
    Actor,
    ActorTarget,
    Critic,
    CriticTarget,
}

/// An off-policy algorithm's networks: the actor (SAC's squashed Gaussian or TD3's deterministic
/// one), `n_critics` Q critics and their targets (and TD3's target actor).
#[derive(Debug)]
pub struct OffPolicyNets {
    spec: PolicySpec,
    shape: OffPolicyShape,
    /// SAC: the shared latent layers; deterministic: every layer of μ.
    actor: Vec<Dense>,
    /// SAC's μ and log σ heads.
    heads: Option<(Dense, Dense)>,
    /// The deterministic actor's target copy.
    actor_target: Vec<Dense>,
    critics: Vec<Vec<Dense>>,
    critic_targets: Vec<Vec<Dense>>,
    /// Each network's `CombinedExtractor` over image keys ([`Features`]); none without them.
    features: Option<Box<Features>>,
    /// Every parameter in order: actor, critics, target critics, target actor.
    params: Vec<(String, Var)>,
    n_actor: usize,
    n_critic: usize,
}

impl OffPolicyNets {
    /// Fresh networks for `spec` (continuous actions with finite bounds), PyTorch's default
    /// initialisation from `rng`; every target starts as a copy of its network.
    ///
    /// # Errors
    /// `Unsupported` for a discrete or unbounded action space (the actor's tanh is rescaled to
    /// the Box); `InvalidArgument` for zero dims or no critic.
    pub fn new<R: Rng + ?Sized>(spec: PolicySpec, kind: ActorKind, n_critics: usize, rng: &mut R) -> Result<Self> {
        Self::with_shape(spec, OffPolicyShape::new(kind, n_critics), rng)
    }

    /// [`OffPolicyNets::new`] for networks of any [`OffPolicyShape`] (TQC's quantile critics).
    ///
    /// # Errors
    /// As [`OffPolicyNets::new`]; `InvalidArgument` for critics of no output.
    pub fn with_shape<R: Rng + ?Sized>(spec: PolicySpec, shape: OffPolicyShape, rng: &mut R) -> Result<Self> {
        let values = initial_values(&spec, shape, rng)?;
        Self::from_values(spec, shape, values, DType::F32)
    }

    /// SAC's networks: a squashed-Gaussian actor and twin critics.
    ///
    /// # Errors
    /// As [`OffPolicyNets::new`].
    pub fn sac<R: Rng + ?Sized>(spec: PolicySpec, rng: &mut R) -> Result<Self> {
        Self::new(spec, ActorKind::SquashedGaussian, 2, rng)
    }

    /// The same networks with their parameters in `dtype` (F64 for the finite-difference tests;
    /// acting and [`Policy`]'s host arrays stay f32).
    ///
    /// # Errors
    /// candle's.
    pub fn with_dtype(&self, dtype: DType) -> Result<Self> {
        let p = self.params()?;
        let values = p.chunks(2).map(|wb| (wb[0].clone(), wb[1].clone())).collect();
        Self::from_values(self.spec.clone(), self.shape, values, dtype)
    }

    /// The dtype of the parameters.
    pub fn dtype(&self) -> DType {
        self.params[0].1.dtype()
    }

    /// The actor's kind.
    pub fn kind(&self) -> ActorKind {
        self.shape.kind
    }

    /// The networks' shape.
    pub fn shape(&self) -> OffPolicyShape {
        self.shape
    }

    /// The number of critics.
    pub fn n_critics(&self) -> usize {
        self.critics.len()
    }

    fn from_values(
        spec: PolicySpec,
        shape: OffPolicyShape,
        values: Vec<(Vec<f32>, Vec<f32>)>,
        dtype: DType,
    ) -> Result<Self> {
        let OffPolicyShape { kind, n_critics, .. } = shape;
        let layers = plan(&spec, shape);
        let mut params = Vec::new();
        let mut dense = Vec::new();
        let mut convs = Vec::new();
        for (l, (w, b)) in layers.iter().zip(values) {
            let w = Var::from_tensor(&Tensor::from_vec(w, l.weight_shape(), &Device::Cpu)?.to_dtype(dtype)?)?;
            let b = Var::from_tensor(&Tensor::from_vec(b, l.fan_out, &Device::Cpu)?.to_dtype(dtype)?)?;
            params.push((format!("{}.weight", l.name), w.clone()));
            params.push((format!("{}.bias", l.name), b.clone()));
            match l.conv {
                Some((_, _, stride)) => convs.push((l.name.clone(), (w, b, stride))),
                None => dense.push((l.name.clone(), Dense { w, b })),
            }
        }
        let take = |prefix: &str| -> Vec<Dense> {
            dense.iter().filter(|(n, _)| n.starts_with(prefix)).map(|(_, d)| d.clone()).collect()
        };
        let one = |name: &str| dense.iter().find(|(n, _)| n == name).map(|(_, d)| d.clone()).expect("planned");
        let features = if spec.inputs.is_empty() {
            None
        } else {
            let extractor = |net: &str| -> Result<Combined> {
                let prefix = format!("{net}.features_extractor.");
                let convs = convs.iter().filter(|(n, _)| n.starts_with(&prefix)).map(|(_, c)| c.clone()).collect();
                combined(&spec, convs, take(&prefix))
            };
            let actor_target = if kind == ActorKind::Deterministic { Some(extractor("actor_target")?) } else { None };
            Some(Box::new(Features {
                actor: extractor("actor")?,
                critic: extractor("critic")?,
                critic_target: extractor("critic_target")?,
                actor_target,
            }))
        };
        let (actor, heads) = match kind {
            ActorKind::SquashedGaussian => (take("actor.latent_pi."), Some((one("actor.mu"), one("actor.log_std")))),
            ActorKind::Deterministic => (take("actor.mu."), None),
        };
        let count = |prefix: &str| params.iter().filter(|(n, _)| n.starts_with(prefix)).count();
        Ok(OffPolicyNets {
            actor,
            heads,
            actor_target: take("actor_target.mu."),
            critics: (0..n_critics).map(|k| take(&format!("critic.qf{k}."))).collect(),
            critic_targets: (0..n_critics).map(|k| take(&format!("critic_target.qf{k}."))).collect(),
            features,
            n_actor: count("actor."),
            n_critic: count("critic."),
            params,
            spec,
            shape,
        })
    }

    /// What network `net`'s layers read of `obs`: its extractor's features over image keys, or
    /// the observation itself.
    fn features_of(&self, net: Net, obs: &Tensor) -> Result<Tensor> {
        let Some(f) = &self.features else { return Ok(obs.clone()) };
        let extractor = match net {
            Net::Actor => &f.actor,
            Net::ActorTarget => f.actor_target.as_ref().unwrap_or(&f.actor),
            Net::Critic => &f.critic,
            Net::CriticTarget => &f.critic_target,
        };
        Ok(extractor.forward(obs)?)
    }

    /// The actor's parameters, in order.
    pub fn actor_params(&self) -> &[(String, Var)] {
        &self.params[..self.n_actor]
    }

    /// The critics' parameters, in order (qf0, qf1, …).
    pub fn critic_params(&self) -> &[(String, Var)] {
        &self.params[self.n_actor..self.n_actor + self.n_critic]
    }

    /// The targets' parameters, in order: the target critics, then the target actor
    /// (deterministic actors).
    pub fn target_params(&self) -> &[(String, Var)] {
        &self.params[self.n_actor + self.n_critic..]
    }

    /// μ and log σ (clamped to [[`LOG_STD_MIN`], [`LOG_STD_MAX`]]) of SAC's π(·|s) for `obs`
    /// `[B, obs_dim]` → `[B, dim]` each, differentiable.
    ///
    /// # Errors
    /// `InvalidArgument` for a deterministic actor; candle's (shape mismatches).
    pub fn actor_dist(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        let Some((mu, log_std)) = &self.heads else {
            return Err(ProximaError::InvalidArgument("a deterministic actor has no distribution".into()));
        };
        let h = mlp(&self.actor, &self.features_of(Net::Actor, obs)?, true)?;
        Ok((mu.forward(&h)?, log_std.forward(&h)?.clamp(LOG_STD_MIN, LOG_STD_MAX)?))
    }

    /// The deterministic actor's a = tanh(μ(s)) `[B, dim]` (of its target copy when `target`),
    /// differentiable.
    ///
    /// # Errors
    /// `InvalidArgument` for SAC's actor; candle's.
    pub fn actor_action(&self, obs: &Tensor, target: bool) -> Result<Tensor> {
        if self.heads.is_some() {
            return Err(ProximaError::InvalidArgument("SAC's actor samples: use actor_dist".into()));
        }
        let (net, layers) = if target { (Net::ActorTarget, &self.actor_target) } else { (Net::Actor, &self.actor) };
        Ok(mlp(layers, &self.features_of(net, obs)?, false)?.tanh()?)
    }

    /// Q_k(s, a) `[B]` of every critic (or of their targets), differentiable; `obs`
    /// `[B, obs_dim]`, `actions` `[B, dim]` (squashed, in [−1, 1]).
    ///
    /// # Errors
    /// candle's.
    pub fn q_values(&self, obs: &Tensor, actions: &Tensor, target: bool) -> Result<Vec<Tensor>> {
        let (x, nets) = self.critic_inputs(obs, actions, target)?;
        // A critic of quantiles (TQC) is valued by their mean.
        let value = |z: Tensor| if self.shape.quantiles == 1 { z.squeeze(1) } else { z.mean(1) };
        nets.iter().map(|c| Ok(value(mlp(c, &x, false)?)?)).collect()
    }

    /// Every critic's outputs (of the targets when `target`) for (s, a), `[B, N, M]`: TQC's
    /// quantiles Z_n(s, a), differentiable.
    ///
    /// # Errors
    /// candle's.
    pub fn quantiles(&self, obs: &Tensor, actions: &Tensor, target: bool) -> Result<Tensor> {
        let (x, nets) = self.critic_inputs(obs, actions, target)?;
        let z: Vec<Tensor> = nets.iter().map(|c| Ok(mlp(c, &x, false)?.unsqueeze(1)?)).collect::<Result<_>>()?;
        Ok(Tensor::cat(&z, 1)?)
    }

    /// What the critics (or their targets) read, [features(s), a], and their layers; the critics
    /// share one extractor (SB3's critic owns one `features_extractor` for all its `qf`s).
    fn critic_inputs(&self, obs: &Tensor, actions: &Tensor, target: bool) -> Result<(Tensor, &[Vec<Dense>])> {
        let (net, nets) = if target { (Net::CriticTarget, &self.critic_targets) } else { (Net::Critic, &self.critics) };
        Ok((Tensor::cat(&[&self.features_of(net, obs)?, actions], 1)?, nets))
    }

    /// Every target parameter θ̄ ← τ·θ + (1 − τ)·θ̄ from its network (SB3's `polyak_update`): the
    /// target critics, and the target actor of a deterministic actor.
    ///
    /// # Errors
    /// candle's.
    pub fn polyak_update(&self, tau: f64) -> Result<()> {
        for (name, target) in self.target_params() {
            let online_name = online_of(name).expect("a target parameter");
            let (_, online) = self.params.iter().find(|(n, _)| *n == online_name).expect("its network");
            let new = ((online.as_tensor() * tau)? + (target.as_tensor() * (1.0 - tau))?)?;
            target.set(&new)?;
        }
        Ok(())
    }

    /// min_k Q_k(s, a) `[B]` (host), the critics' value of the actions.
    fn min_q(&self, obs: &Tensor, actions: &Tensor) -> Result<Vec<f32>> {
        let q = self.q_values(obs, actions, false)?;
        let mut m = q[0].clone();
        for x in &q[1..] {
            m = m.minimum(x)?;
        }
        host(&m)
    }

    /// `obs` as a `[N, obs_dim]` tensor, checked.
    fn obs_tensor(&self, obs: &[f32]) -> Result<Tensor> {
        let d = self.spec.obs_dim;
        if obs.is_empty() || obs.len() % d != 0 {
            return Err(ProximaError::InvalidArgument(format!(
                "observations of {} values are not rows of obs_dim = {d}",
                obs.len()
            )));
        }
        Ok(Tensor::from_slice(obs, (obs.len() / d, d), &Device::Cpu)?.to_dtype(self.dtype())?)
    }
}

fn host(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

impl Policy for OffPolicyNets {
    fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    /// SAC: a = tanh(μ + σ·ε) (tanh(μ) when `deterministic`) with log π(a|s); deterministic
    /// actors: a = tanh(μ(s)) either way (exploration noise is the algorithm's), log π reported
    /// as 0 (it has no density). The value is min_k Q_k(s, a): these networks have no V head.
    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput> {
        let o = self.obs_tensor(obs)?;
        let (a, log_probs) = match self.shape.kind {
            ActorKind::SquashedGaussian => {
                let (mean, log_std) = self.actor_dist(&o)?;
                let eps: Vec<f32> = match deterministic {
                    true => vec![0.0; mean.elem_count()],
                    false => (0..mean.elem_count()).map(|_| rng.sample(StandardNormal)).collect(),
                };
                let eps = Tensor::from_vec(eps, mean.shape(), &Device::Cpu)?.to_dtype(self.dtype())?;
                let (a, lp) = squashed_sample(&mean, &log_std, &eps)?;
                (a, host(&lp)?)
            }
            ActorKind::Deterministic => {
                let a = self.actor_action(&o, false)?;
                let n = a.dim(0)?;
                (a, vec![0.0; n])
            }
        };
        Ok(ActOutput { values: self.min_q(&o, &a)?, actions: host(&a)?, log_probs, head: Vec::new() })
    }

    /// min_k Q_k(s, a) of the deterministic action a (tanh(μ(s))).
    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        let o = self.obs_tensor(obs)?;
        let a = match self.shape.kind {
            ActorKind::SquashedGaussian => self.actor_dist(&o)?.0.tanh()?,
            ActorKind::Deterministic => self.actor_action(&o, false)?,
        };
        self.min_q(&o, &a)
    }

    refuse_on_policy_losses!();

    fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        param_shapes_for(&self.spec, self.shape)
    }

    fn params(&self) -> Result<Vec<Vec<f32>>> {
        self.params.iter().map(|(_, v)| host(v.as_tensor())).collect()
    }

    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()> {
        if values.len() != self.params.len()
            || values.iter().zip(&self.params).any(|(v, (_, p))| v.len() != p.elem_count())
        {
            return Err(ProximaError::InvalidArgument(format!(
                "the networks hold {} parameters; got {} arrays of other sizes",
                self.params.len(),
                values.len()
            )));
        }
        for (v, (_, p)) in values.iter().zip(&self.params) {
            p.set(&Tensor::from_slice(v, p.shape(), &Device::Cpu)?.to_dtype(p.dtype())?)?;
        }
        Ok(())
    }

    /// a ∈ [−1, 1] → low + (a + 1)·(high − low)/2, the Box's own range (SB3's `unscale_action`).
    fn env_action(&self, action: &mut [f32]) {
        unscale_action(&self.spec, action);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_space_check_names_the_algorithm_and_the_bounds() {
        let boxed = |low: f32, high: f32| {
            PolicySpec::mlp(3, ActionKind::Continuous { dim: 1, low: vec![low], high: vec![high] }, vec![8])
        };
        assert!(check_action_space("TQC", &boxed(-2.0, 2.0)).is_ok());
        let e = check_action_space("TQC", &PolicySpec::mlp(3, ActionKind::Discrete { n: 2 }, vec![8])).unwrap_err();
        assert!(e.to_string().contains("TQC needs a continuous (Box) action space"), "{e}");
        for (low, high) in [(f32::NEG_INFINITY, 1.0), (-1.0, f32::INFINITY), (1.0, 1.0), (2.0, -2.0)] {
            let e = check_action_space("SAC", &boxed(low, high)).unwrap_err().to_string();
            assert!(e.contains("SAC rescales its actions") && e.contains("low < high"), "[{low}, {high}]: {e}");
        }
    }
}
