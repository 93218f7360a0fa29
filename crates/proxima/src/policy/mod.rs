//! The actor-critic policy: MLPs on candle, orthogonal initialisation, and the one trait every
//! algorithm goes through.
//!
//! Default network (CleanRL's `Agent`, SB3's `MlpPolicy`): separate policy and value MLPs of
//! 2×64 tanh units; `shared_trunk = true` shares the hidden layers between the two heads.
//! Orthogonal init (Saxe et al. 2014; openai/baselines): gain √2 on hidden layers, 0.01 on the
//! policy head, 1.0 on the value head, biases 0.
//!
//! Parameter names follow CleanRL's PyTorch module names (`actor.0.weight`, `critic.4.bias`,
//! `actor_logstd`), weights stored `[out, in]` as `torch.nn.Linear` does, so checkpoints read
//! naturally next to PyTorch ones.

pub mod distributions;
pub mod ops;

use crate::env::Space;
use crate::error::{ProximaError, Result};
use candle_core::{DType, Device, Tensor, Var};
use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// What the policy outputs, derived from the env's action space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionKind {
    /// `Discrete(n)`: a Categorical over `n` logits.
    Discrete {
        /// Number of actions.
        n: usize,
    },
    /// `MultiDiscrete(nvec)`: independent Categoricals, one per component, with `nvec[i]` logits
    /// each; log-probabilities and entropies are summed over components.
    MultiDiscrete {
        /// Number of choices of each component.
        nvec: Vec<usize>,
    },
    /// `Box(dim)`: a diagonal Gaussian with a state-independent log-std; `low`/`high` are the
    /// bounds the sampled action is clipped to when sent to the env.
    Continuous {
        /// Action dimensions.
        dim: usize,
        /// Lower bounds, `[dim]`.
        low: Vec<f32>,
        /// Upper bounds, `[dim]`.
        high: Vec<f32>,
    },
}

impl ActionKind {
    /// Maps an env's action space to a distribution.
    ///
    /// # Errors
    /// `Unsupported` for spaces without a distribution (a `MultiDiscrete` with a zero entry).
    pub fn from_space(space: &Space) -> Result<Self> {
        match space {
            Space::Discrete { n } => Ok(ActionKind::Discrete { n: *n }),
            Space::Box { low, high, .. } => {
                Ok(ActionKind::Continuous { dim: low.len(), low: low.clone(), high: high.clone() })
            }
            Space::MultiDiscrete { nvec } if !nvec.is_empty() && !nvec.contains(&0) => {
                Ok(ActionKind::MultiDiscrete { nvec: nvec.clone() })
            }
            other => {
                Err(ProximaError::Unsupported(format!("no policy distribution for action space {}", other.describe())))
            }
        }
    }
    /// The Categorical components: `[n]` for Discrete, `nvec` for MultiDiscrete, None for Box.
    pub fn categorical_components(&self) -> Option<Vec<usize>> {
        match self {
            ActionKind::Discrete { n } => Some(vec![*n]),
            ActionKind::MultiDiscrete { nvec } => Some(nvec.clone()),
            ActionKind::Continuous { .. } => None,
        }
    }
    /// Width of the policy head: `n` logits or `dim` means.
    pub fn head_dim(&self) -> usize {
        match self {
            ActionKind::Discrete { n } => *n,
            ActionKind::MultiDiscrete { nvec } => nvec.iter().sum(),
            ActionKind::Continuous { dim, .. } => *dim,
        }
    }
    /// Floats per stored action: 1 for Discrete, `dim` for Box.
    pub fn act_dim(&self) -> usize {
        match self {
            ActionKind::Discrete { .. } => 1,
            ActionKind::MultiDiscrete { nvec } => nvec.len(),
            ActionKind::Continuous { dim, .. } => *dim,
        }
    }
}

/// Hidden-layer activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// tanh (CleanRL/SB3 default for MLPs).
    Tanh,
    /// ReLU.
    Relu,
}

/// Everything needed to rebuild a network; stored in checkpoints' metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySpec {
    /// Flattened observation length.
    pub obs_dim: usize,
    /// The action distribution.
    pub action: ActionKind,
    /// Hidden layer widths, e.g. `[64, 64]`.
    pub net_arch: Vec<usize>,
    /// Hidden activation.
    pub activation: Activation,
    /// Share the hidden layers between policy and value heads.
    pub shared_trunk: bool,
    /// Initial value of the Gaussian log-std (continuous actions).
    pub log_std_init: f32,
    /// Orthogonal initialisation (else PyTorch's default uniform ±1/√fan_in).
    pub ortho_init: bool,
}

/// One dense layer: `y = x·Wᵀ + b`, W `[out, in]`.
#[derive(Clone, Debug)]
struct Dense {
    w: Var,
    b: Var,
}

impl Dense {
    /// `x·Wᵀ + 1·bᵀ`. The bias is added through a rank-1 product with a column of ones
    /// rather than `broadcast_add`: the result is the same, but the bias gradient then comes
    /// from a GEMM (1ᵀ·∂y) instead of candle's strided reduction over the batch, which
    /// `perf` showed taking 15% of an update.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.w.as_tensor().t()?)?.broadcast_add(self.b.as_tensor())
    }
}

/// An MLP: dense layers with the activation between them (none after the last).
#[derive(Clone, Debug)]
struct Mlp {
    layers: Vec<Dense>,
    activation: Activation,
    /// Apply the activation after the last layer too (a trunk feeding heads).
    activate_last: bool,
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        let n = self.layers.len();
        for (i, l) in self.layers.iter().enumerate() {
            h = l.forward(&h)?;
            if i + 1 < n || self.activate_last {
                h = match self.activation {
                    Activation::Tanh => ops::tanh(&h)?,
                    Activation::Relu => h.relu()?,
                };
            }
        }
        Ok(h)
    }
}

/// The action distribution's parameters for a batch, detached: π_θold in KL terms.
#[derive(Clone, Debug)]
pub struct DistParams {
    /// Logits (categorical) or means (Gaussian), `[B, head_dim]`.
    pub head: Tensor,
    /// The Gaussian log-std `[dim]` (continuous actions only).
    pub log_std: Option<Tensor>,
}

/// What [`ActorCritic::act`] returns for a batch of N observations.
#[derive(Clone, Debug, Default)]
pub struct ActOutput {
    /// Sampled (or deterministic) actions as stored, `[N, act_dim]` (continuous: unclipped).
    pub actions: Vec<f32>,
    /// log π(a|s), `[N]`.
    pub log_probs: Vec<f32>,
    /// V(s), `[N]`.
    pub values: Vec<f32>,
}

/// The actor-critic network.
#[derive(Debug)]
pub struct ActorCritic {
    spec: PolicySpec,
    device: Device,
    /// Trunk (only when `shared_trunk`).
    trunk: Option<Mlp>,
    actor: Mlp,
    critic: Mlp,
    log_std: Option<Var>,
    /// All parameters in a fixed order, with their names (the order decides reproducibility).
    params: Vec<(String, Var)>,
}

/// Orthogonal matrix `[rows, cols]` scaled by `gain`, as `torch.nn.init.orthogonal_`:
/// QR of a standard-normal matrix (transposed when rows < cols), with Q's columns' signs fixed
/// by diag(R) so the distribution is uniform (Haar).
pub fn orthogonal<R: Rng + ?Sized>(rows: usize, cols: usize, gain: f64, rng: &mut R) -> Vec<f32> {
    let transpose = rows < cols;
    let (r, c) = if transpose { (cols, rows) } else { (rows, cols) };
    let m = DMatrix::<f64>::from_fn(r, c, |_, _| rng.sample(StandardNormal));
    let qr = m.qr();
    let mut q = qr.q(); // [r, c]
    let rmat = qr.r();
    for j in 0..c {
        if rmat[(j, j)] < 0.0 {
            q.column_mut(j).neg_mut();
        }
    }
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let v = if transpose { q[(j, i)] } else { q[(i, j)] };
            out.push((v * gain) as f32);
        }
    }
    out
}

/// Which part of the network a layer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Trunk,
    Actor,
    Critic,
}

/// One dense layer of a network's plan: its name prefix, fans, init gain and part.
struct LayerPlan {
    name: String,
    fan_in: usize,
    fan_out: usize,
    gain: f64,
    part: Part,
}

impl PolicySpec {
    /// The dense layers, in parameter order, named like CleanRL's `nn.Sequential` modules.
    fn plan(&self) -> Vec<LayerPlan> {
        let sqrt2 = std::f64::consts::SQRT_2;
        let hidden = |prefix: &str, part: Part, out: &mut Vec<LayerPlan>| {
            let mut fan_in = self.obs_dim;
            for (i, &h) in self.net_arch.iter().enumerate() {
                out.push(LayerPlan { name: format!("{prefix}.{}", 2 * i), fan_in, fan_out: h, gain: sqrt2, part });
                fan_in = h;
            }
            fan_in
        };
        let head = self.action.head_dim();
        let mut plan = Vec::new();
        if self.shared_trunk {
            let w = hidden("trunk", Part::Trunk, &mut plan);
            plan.push(LayerPlan { name: "actor.0".into(), fan_in: w, fan_out: head, gain: 0.01, part: Part::Actor });
            plan.push(LayerPlan { name: "critic.0".into(), fan_in: w, fan_out: 1, gain: 1.0, part: Part::Critic });
        } else {
            let d = 2 * self.net_arch.len();
            let w = hidden("actor", Part::Actor, &mut plan);
            plan.push(LayerPlan {
                name: format!("actor.{d}"),
                fan_in: w,
                fan_out: head,
                gain: 0.01,
                part: Part::Actor,
            });
            let w = hidden("critic", Part::Critic, &mut plan);
            plan.push(LayerPlan { name: format!("critic.{d}"), fan_in: w, fan_out: 1, gain: 1.0, part: Part::Critic });
        }
        plan
    }

    /// Every parameter's name and shape, in order, without allocating the network (so a
    /// checkpoint's claimed spec can be checked against its tensors before anything is built).
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut out = Vec::new();
        for l in self.plan() {
            out.push((format!("{}.weight", l.name), vec![l.fan_out, l.fan_in]));
            out.push((format!("{}.bias", l.name), vec![l.fan_out]));
        }
        if let ActionKind::Continuous { dim, .. } = &self.action {
            out.push(("actor_logstd".into(), vec![*dim]));
        }
        out
    }
}

impl ActorCritic {
    /// Builds and initialises the network. `rng` drives the initialisation only.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty `net_arch` entry or zero dims.
    pub fn new<R: Rng + ?Sized>(spec: PolicySpec, device: &Device, rng: &mut R) -> Result<Self> {
        if spec.obs_dim == 0 || spec.action.head_dim() == 0 || spec.net_arch.contains(&0) {
            return Err(ProximaError::InvalidArgument(format!(
                "network dims must be positive: obs_dim {}, head {}, net_arch {:?}",
                spec.obs_dim,
                spec.action.head_dim(),
                spec.net_arch
            )));
        }
        let mut params = Vec::new();
        let mut layers: [Vec<Dense>; 3] = Default::default();
        for l in spec.plan() {
            // Orthogonal with the layer's gain (√2 hidden, 0.01 policy head, 1.0 value head), or
            // PyTorch's default U(±1/√fan_in); biases 0.
            let w = if spec.ortho_init {
                orthogonal(l.fan_out, l.fan_in, l.gain, rng)
            } else {
                let bound = 1.0 / (l.fan_in as f32).sqrt();
                (0..l.fan_out * l.fan_in).map(|_| rng.random_range(-bound..bound)).collect()
            };
            let w = Var::from_tensor(&Tensor::from_vec(w, (l.fan_out, l.fan_in), device)?)?;
            let b = Var::from_tensor(&Tensor::zeros(l.fan_out, DType::F32, device)?)?;
            params.push((format!("{}.weight", l.name), w.clone()));
            params.push((format!("{}.bias", l.name), b.clone()));
            layers[l.part as usize].push(Dense { w, b });
        }
        let [trunk, actor, critic] = layers;
        let mlp = |layers: Vec<Dense>, activate_last| Mlp { layers, activation: spec.activation, activate_last };
        let trunk = spec.shared_trunk.then(|| mlp(trunk, true));
        let (actor, critic) = (mlp(actor, false), mlp(critic, false));
        let log_std = match &spec.action {
            ActionKind::Continuous { dim, .. } => {
                let v = Var::from_tensor(&Tensor::full(spec.log_std_init, *dim, device)?)?;
                params.push(("actor_logstd".to_string(), v.clone()));
                Some(v)
            }
            ActionKind::Discrete { .. } | ActionKind::MultiDiscrete { .. } => None,
        };
        Ok(ActorCritic { spec, device: device.clone(), trunk, actor, critic, log_std, params })
    }

    /// The spec this network was built from.
    pub fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    /// The device the parameters live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// All parameters with their names, in a fixed order.
    pub fn named_params(&self) -> &[(String, Var)] {
        &self.params
    }

    /// Total number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.params.iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// The Gaussian log-std parameter `[dim]` (continuous actions only).
    pub fn log_std(&self) -> Option<&Var> {
        self.log_std.as_ref()
    }

    /// Forward pass, differentiable. `obs`: `[B, obs_dim]` f32.
    /// Returns `(head [B, head_dim], values [B])`: logits (Discrete) or means (Box), and V(s).
    pub fn forward(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        let (a_in, c_in) = match &self.trunk {
            Some(t) => {
                let h = t.forward(obs)?;
                (h.clone(), h)
            }
            None => (obs.clone(), obs.clone()),
        };
        let head = self.actor.forward(&a_in)?;
        let values = self.critic.forward(&c_in)?.squeeze(1)?;
        Ok((head, values))
    }

    /// V(s) only, differentiable: `[B, obs_dim]` → `[B]`.
    pub fn value(&self, obs: &Tensor) -> Result<Tensor> {
        let c_in = match &self.trunk {
            Some(t) => t.forward(obs)?,
            None => obs.clone(),
        };
        Ok(self.critic.forward(&c_in)?.squeeze(1)?)
    }

    /// log π(a|s), entropy and V(s) for stored actions, differentiable (the loss's inputs).
    ///
    /// `obs` `[B, obs_dim]`; `actions` `[B, act_dim]` f32 as stored in the rollout buffer.
    /// Returns `(log_prob [B], entropy [B], values [B])`.
    pub fn evaluate_actions(&self, obs: &Tensor, actions: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (lp, ent, values, _) = self.evaluate_actions_with_head(obs, actions)?;
        Ok((lp, ent, values))
    }

    /// [`ActorCritic::evaluate_actions`], also returning the head `[B, head_dim]` (for a KL
    /// term via [`ActorCritic::kl_of_head`] without a second forward pass).
    pub fn evaluate_actions_with_head(
        &self,
        obs: &Tensor,
        actions: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
        let (head, values) = self.forward(obs)?;
        let (lp, ent) = match (self.spec.action.categorical_components(), &self.log_std) {
            (Some(comps), _) if comps.len() == 1 => {
                let idx = distributions::actions_to_indices(&actions.flatten_all()?)?;
                distributions::categorical_log_prob_entropy(&head, &idx)?
            }
            (Some(comps), _) => {
                // Independent components: Σ_i log π_i(a_i), Σ_i H_i.
                let idx = distributions::actions_to_indices(actions)?;
                let (mut lp, mut ent, mut off) = (None::<Tensor>, None::<Tensor>, 0);
                for (i, &n) in comps.iter().enumerate() {
                    let (l, e) = distributions::categorical_log_prob_entropy(
                        &head.narrow(1, off, n)?.contiguous()?,
                        &idx.narrow(1, i, 1)?.squeeze(1)?.contiguous()?,
                    )?;
                    lp = Some(match lp {
                        Some(t) => (t + l)?,
                        None => l,
                    });
                    ent = Some(match ent {
                        Some(t) => (t + e)?,
                        None => e,
                    });
                    off += n;
                }
                (lp.expect("at least one component"), ent.expect("at least one component"))
            }
            (None, Some(ls)) => distributions::gaussian_log_prob_entropy(&head, ls.as_tensor(), actions)?,
            (None, None) => unreachable!("continuous policies always own a log-std"),
        };
        Ok((lp, ent, values, head))
    }

    /// π_θ(·|s)'s parameters for `obs` `[B, obs_dim]`, detached (to serve as π_θold).
    pub fn dist_params(&self, obs: &Tensor) -> Result<DistParams> {
        let (head, _) = self.forward(obs)?;
        // `copy`, not `detach`: a detached Var shares its storage, which the optimiser's
        // `Var::set` overwrites in place, so π_old's log-std would silently follow θ.
        let log_std = match &self.log_std {
            Some(v) => Some(v.as_tensor().copy()?.detach()),
            None => None,
        };
        Ok(DistParams { head: head.detach(), log_std })
    }

    /// π_θ(·|s)'s parameters for host observations `[B, obs_dim]`, on the host: the head
    /// `[B, head_dim]` (logits or means) and the Gaussian log-std `[dim]` (empty for discrete
    /// actions). What the rollout buffer stores as π_θold.
    ///
    /// # Errors
    /// Tensor errors.
    pub fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        let (head, _) = self.forward(&self.obs_tensor(obs)?)?;
        let log_std = match &self.log_std {
            Some(v) => v.as_tensor().to_vec1::<f32>()?,
            None => Vec::new(),
        };
        Ok((head.flatten_all()?.to_vec1::<f32>()?, log_std))
    }

    /// [`DistParams`] (detached) from host arrays as [`ActorCritic::dist_params_host`] returns
    /// them, `head` holding B rows.
    ///
    /// # Errors
    /// Tensor errors on a `head` that is not B rows of `head_dim`.
    pub fn dist_params_from_host(&self, head: &[f32], log_std: &[f32]) -> Result<DistParams> {
        let hd = self.spec.action.head_dim();
        let head = Tensor::from_slice(head, (head.len() / hd, hd), &self.device)?;
        let log_std = match &self.log_std {
            Some(_) => Some(Tensor::from_slice(log_std, log_std.len(), &self.device)?),
            None => None,
        };
        Ok(DistParams { head, log_std })
    }

    /// KL(π_old(·|s) ‖ π_θ(·|s)) per state, `[B]`, analytic and differentiable in θ (the
    /// penalty of L^KLPEN, and TRPO's constraint). Categorical components are summed.
    ///
    /// # Errors
    /// Tensor errors on mismatched shapes.
    pub fn kl_from(&self, obs: &Tensor, old: &DistParams) -> Result<Tensor> {
        let (head, _) = self.forward(obs)?;
        self.kl_of_head(old, &head)
    }

    /// [`ActorCritic::kl_from`] on an already computed head (`[B, head_dim]`, differentiable),
    /// with `old.head` holding the same B rows of π_old.
    ///
    /// # Errors
    /// Tensor errors on mismatched shapes.
    pub fn kl_of_head(&self, old: &DistParams, head: &Tensor) -> Result<Tensor> {
        let (old_head, old_log_std) = (&old.head, old.log_std.as_ref());
        match (self.spec.action.categorical_components(), &self.log_std) {
            (Some(comps), _) => {
                let mut total: Option<Tensor> = None;
                let mut off = 0;
                for &n in &comps {
                    let kl = distributions::categorical_kl(&old_head.narrow(1, off, n)?, &head.narrow(1, off, n)?)?;
                    total = Some(match total {
                        Some(t) => (t + kl)?,
                        None => kl,
                    });
                    off += n;
                }
                Ok(total.expect("at least one component"))
            }
            (None, Some(ls)) => {
                let old_ls = old_log_std
                    .ok_or_else(|| ProximaError::InvalidArgument("old Gaussian parameters lack a log-std".into()))?;
                Ok(distributions::gaussian_kl(old_head, old_ls, head, ls.as_tensor())?)
            }
            (None, None) => unreachable!("continuous policies always own a log-std"),
        }
    }

    /// Indices (into [`ActorCritic::named_params`]) of the parameters π(·|s) depends on: the
    /// trunk (if shared), the actor layers and the log-std — the parameters TRPO's natural
    /// gradient moves.
    pub fn actor_param_indices(&self) -> Vec<usize> {
        self.params
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| n.starts_with("trunk.") || n.starts_with("actor"))
            .map(|(i, _)| i)
            .collect()
    }

    /// Forward-mode derivative of the policy head: given tangents for the trunk/actor *layer*
    /// parameters (every index of [`ActorCritic::actor_param_indices`] except the log-std, same
    /// order and shapes), returns `(head, J·v)`, both `[B, head_dim]` and detached. Used for
    /// TRPO's Fisher-vector products in the Gauss–Newton form F·v = Jᵀ·M·(J·v), which needs no
    /// double backprop: z = hWᵀ + b gives dz = dh·Wᵀ + h·dWᵀ + db, tanh gives da = (1 − a²)·dz.
    ///
    /// # Errors
    /// `InvalidArgument` for the wrong number of tangents; tensor errors on shape mismatches.
    pub fn actor_jvp(&self, obs: &Tensor, tangents: &[Tensor]) -> Result<(Tensor, Tensor)> {
        let layers: Vec<(&Dense, bool)> = match &self.trunk {
            Some(t) => t
                .layers
                .iter()
                .map(|l| (l, true))
                .chain(self.actor.layers.iter().enumerate().map(|(i, l)| (l, i + 1 < self.actor.layers.len())))
                .collect(),
            None => self.actor.layers.iter().enumerate().map(|(i, l)| (l, i + 1 < self.actor.layers.len())).collect(),
        };
        if tangents.len() != 2 * layers.len() {
            return Err(ProximaError::InvalidArgument(format!(
                "actor_jvp: {} tangents for {} layer parameters",
                tangents.len(),
                2 * layers.len()
            )));
        }
        let mut h = obs.detach();
        let mut dh: Option<Tensor> = None;
        for (k, (l, activate)) in layers.iter().enumerate() {
            let (w, b) = (l.w.as_tensor().detach(), l.b.as_tensor().detach());
            let (dw, db) = (&tangents[2 * k], &tangents[2 * k + 1]);
            let z = h.matmul(&w.t()?)?.broadcast_add(&b)?;
            let mut dz = h.matmul(&dw.t()?)?.broadcast_add(db)?;
            if let Some(dh) = &dh {
                dz = (dz + dh.matmul(&w.t()?)?)?;
            }
            if *activate {
                match self.spec.activation {
                    Activation::Tanh => {
                        let a = z.tanh()?;
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

    /// Copies `[N, obs_dim]` host observations into a tensor on the policy's device.
    pub fn obs_tensor(&self, obs: &[f32]) -> Result<Tensor> {
        let n = obs.len() / self.spec.obs_dim;
        Ok(Tensor::from_slice(obs, (n, self.spec.obs_dim), &self.device)?)
    }

    /// Acts on N observations (host, `[N, obs_dim]` f32): samples from π(·|s) with `rng`, or
    /// takes the mode when `deterministic`. Continuous actions are returned *unclipped*; clip
    /// them with [`ActorCritic::env_action`] when sending them to the env.
    pub fn act<R: Rng + ?Sized>(&self, obs: &[f32], deterministic: bool, rng: &mut R) -> Result<ActOutput> {
        let x = self.obs_tensor(obs)?;
        let (head, values) = self.forward(&x)?;
        let n = x.dim(0)?;
        let head = head.flatten_all()?.to_vec1::<f32>()?;
        let values = values.to_vec1::<f32>()?;
        let hd = self.spec.action.head_dim();
        let mut out = ActOutput {
            actions: Vec::with_capacity(n * self.spec.action.act_dim()),
            log_probs: Vec::with_capacity(n),
            values,
        };
        match &self.spec.action {
            ActionKind::Discrete { .. } | ActionKind::MultiDiscrete { .. } => {
                let comps = self.spec.action.categorical_components().expect("categorical");
                let mut lp = vec![0f32; hd];
                for row in head.chunks(hd) {
                    let (mut total, mut off) = (0f32, 0);
                    for &c in &comps {
                        let logits = &row[off..off + c];
                        let (a, l) = if deterministic {
                            let a = distributions::categorical::mode(logits);
                            distributions::categorical::log_softmax(logits, &mut lp[..c]);
                            (a, lp[a])
                        } else {
                            distributions::categorical::sample(logits, rng)
                        };
                        out.actions.push(a as f32);
                        total += l;
                        off += c;
                    }
                    out.log_probs.push(total);
                }
            }
            ActionKind::Continuous { dim, .. } => {
                let log_std =
                    self.log_std.as_ref().expect("continuous policy has a log-std").as_tensor().to_vec1::<f32>()?;
                let mut a = vec![0f32; *dim];
                for row in head.chunks(hd) {
                    let l = if deterministic {
                        a.copy_from_slice(row);
                        distributions::gaussian::log_prob(row, &log_std, &a)
                    } else {
                        distributions::gaussian::sample(row, &log_std, rng, &mut a)
                    };
                    out.actions.extend_from_slice(&a);
                    out.log_probs.push(l);
                }
            }
        }
        Ok(out)
    }

    /// V(s) for N host observations `[N, obs_dim]`, not differentiable.
    pub fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        Ok(self.value(&self.obs_tensor(obs)?)?.to_vec1::<f32>()?)
    }

    /// Clips a stored continuous action to the Box bounds for the env (in place); a no-op for
    /// discrete actions. The unclipped action stays in the buffer (CleanRL #240).
    pub fn env_action(&self, action: &mut [f32]) {
        if let ActionKind::Continuous { low, high, .. } = &self.spec.action {
            for ((a, l), h) in action.iter_mut().zip(low).zip(high) {
                *a = a.clamp(*l, *h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn spec(action: ActionKind, shared: bool) -> PolicySpec {
        PolicySpec {
            obs_dim: 4,
            action,
            net_arch: vec![64, 64],
            activation: Activation::Tanh,
            shared_trunk: shared,
            log_std_init: 0.0,
            ortho_init: true,
        }
    }

    #[test]
    fn orthogonal_rows_or_columns_are_orthonormal() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for (r, c) in [(64, 4), (4, 64), (64, 64), (2, 64)] {
            let w = orthogonal(r, c, 2.0, &mut rng);
            let m = DMatrix::from_row_slice(r, c, &w.iter().map(|&x| x as f64 / 2.0).collect::<Vec<_>>());
            let g = if r >= c { m.transpose() * &m } else { &m * m.transpose() };
            let k = r.min(c);
            assert!((g - DMatrix::<f64>::identity(k, k)).abs().max() < 1e-5, "{r}x{c}");
        }
    }

    #[test]
    fn network_shapes_names_and_head_gains() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let net = ActorCritic::new(spec(ActionKind::Discrete { n: 2 }, false), &Device::Cpu, &mut rng).unwrap();
        let names: Vec<_> = net.named_params().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "actor.0.weight",
                "actor.0.bias",
                "actor.2.weight",
                "actor.2.bias",
                "actor.4.weight",
                "actor.4.bias",
                "critic.0.weight",
                "critic.0.bias",
                "critic.2.weight",
                "critic.2.bias",
                "critic.4.weight",
                "critic.4.bias"
            ]
        );
        // 4*64+64 + 64*64+64 + 64*2+2  +  4*64+64 + 64*64+64 + 64+1
        assert_eq!(net.num_params(), (320 + 4160 + 130) + (320 + 4160 + 65));
        // Policy head rows have norm 0.01 (orthogonal rows scaled by the gain).
        let w = net.named_params()[4].1.as_tensor().to_vec2::<f32>().unwrap();
        for row in w {
            let n: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((n - 0.01).abs() < 1e-5);
        }
        let obs = net.obs_tensor(&[0.1, 0.2, 0.3, 0.4, 0.0, 0.0, 0.0, 0.0]).unwrap();
        let (h, v) = net.forward(&obs).unwrap();
        assert_eq!(h.dims(), &[2, 2]);
        assert_eq!(v.dims(), &[2]);
    }

    #[test]
    fn shared_trunk_and_gaussian_build() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let act = ActionKind::Continuous { dim: 3, low: vec![-1.0; 3], high: vec![1.0; 3] };
        let net = ActorCritic::new(spec(act, true), &Device::Cpu, &mut rng).unwrap();
        assert!(net.log_std().is_some());
        let out = net.act(&[0.0; 8], false, &mut rng).unwrap();
        assert_eq!(out.actions.len(), 6);
        assert_eq!(out.values.len(), 2);
        let mut a = [5.0f32, -5.0, 0.5];
        net.env_action(&mut a);
        assert_eq!(a, [1.0, -1.0, 0.5]);
    }
}
