//! The policy seam: the [`Policy`] trait every algorithm goes through, the network's
//! [`PolicySpec`] (its layers and parameter names, whatever implements it), the action
//! distributions ([`distributions`]) and the candle implementation ([`candle::ActorCritic`]).
//!
//! A second network implementation is one new module implementing [`Policy`]: the collector,
//! PPO, A2C and A3C use nothing else (TRPO's Fisher-vector products need forward-mode
//! derivatives and use the candle network directly).
//!
//! Default network (CleanRL's `Agent`, SB3's `MlpPolicy`): separate policy and value MLPs of
//! 2×64 tanh units; `shared_trunk = true` shares the hidden layers between the two heads.
//! Orthogonal init (Saxe et al. 2014; openai/baselines): gain √2 on hidden layers, 0.01 on the
//! policy head, 1.0 on the value head, biases 0.
//!
//! Parameter names follow CleanRL's PyTorch module names (`actor.0.weight`, `critic.4.bias`,
//! `actor_logstd`), weights stored `[out, in]` as `torch.nn.Linear` does, so checkpoints read
//! naturally next to PyTorch ones.

pub mod candle;
pub mod distributions;
pub mod ops;

pub use self::candle::{ActorCritic, DistParams};

use crate::env::Space;
use crate::error::{ProximaError, Result};
use crate::loss::PpoCoefs;
use crate::rollout::Minibatch;
use nalgebra::DMatrix;
use rand::{Rng, RngCore};
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

/// What a loss evaluation ([`Policy::ppo_loss`], [`Policy::a2c_loss`]) reports; what the
/// gradient needs stays inside the implementation until [`Policy::backward`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LossReport {
    /// The loss and its parts as computed (f32): `[loss, policy_loss, value_loss, entropy]`.
    pub values: [f32; 4],
    /// log r_t(θ) = log π_θ(a_t|s_t) − log π_θold(a_t|s_t) per row, `[B]` (PPO; empty for A2C).
    pub log_ratio: Vec<f32>,
}

/// The seam between the algorithms and a network implementation: an actor-critic π_θ, V_θ whose
/// parameters are the spec's ([`PolicySpec::param_shapes`], in that order, each row-major),
/// evaluated on host arrays. Every gradient is one host vector per parameter in that order, so
/// the optimiser, checkpoints and (later) all-reduces work on any implementation.
pub trait Policy: Send {
    /// The network's spec.
    fn spec(&self) -> &PolicySpec;

    /// Acts on N observations `[N, obs_dim]`: samples from π(·|s) with `rng`, or takes the mode
    /// when `deterministic`; actions as stored (continuous: unclipped; see
    /// [`Policy::env_action`]), log-probabilities and V(s).
    ///
    /// # Errors
    /// Observations that are not rows of `obs_dim`; the implementation's own errors.
    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput>;

    /// V(s) for N observations `[N, obs_dim]` → `[N]`.
    ///
    /// # Errors
    /// As [`Policy::act`].
    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>>;

    /// π(·|s)'s parameters for N observations: the head `[N, head_dim]` (logits side by side,
    /// or Gaussian means) and the Gaussian log-std `[dim]` (empty for discrete actions).
    ///
    /// # Errors
    /// As [`Policy::act`].
    fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)>;

    /// The PPO loss ([`crate::loss::ppo_loss`]) of minibatch `mb` at the current θ, with π_θold
    /// as `mb.old_head` and `old_log_std` (read by the KL objectives only). Keeps what
    /// [`Policy::backward`] needs.
    ///
    /// # Errors
    /// A KL objective without `mb.old_head`; the implementation's own errors.
    fn ppo_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], coefs: &PpoCoefs) -> Result<LossReport>;

    /// The A2C loss ([`crate::loss::a2c_loss`]) of `batch` at the current θ. Keeps what
    /// [`Policy::backward`] needs.
    ///
    /// # Errors
    /// The implementation's own errors.
    fn a2c_loss(&mut self, batch: &Minibatch, vf_coef: f64, ent_coef: f64) -> Result<LossReport>;

    /// ∇θ of the last loss, one host vector per parameter in the spec's order (`None` where no
    /// gradient flows).
    ///
    /// # Errors
    /// `InvalidArgument` when no loss was evaluated since the last call.
    fn backward(&mut self) -> Result<Vec<Option<Vec<f32>>>>;

    /// d = mean over N observations of KL[π_θold(·|s), π_θ(·|s)] at the current θ, π_θold given
    /// as a head `[N, head_dim]` and log-std (as [`Policy::dist_params_host`] returns them).
    ///
    /// # Errors
    /// As [`Policy::act`].
    fn rollout_kl(&self, obs: &[f32], old_head: &[f32], old_log_std: &[f32]) -> Result<f64>;

    /// The parameters' names, in the spec's order.
    fn param_names(&self) -> Vec<String> {
        self.spec().param_shapes().into_iter().map(|(n, _)| n).collect()
    }

    /// Every parameter's values, row-major, in the spec's order.
    ///
    /// # Errors
    /// The implementation's own errors.
    fn params(&self) -> Result<Vec<Vec<f32>>>;

    /// Sets every parameter (same order and sizes as [`Policy::params`]).
    ///
    /// # Errors
    /// `InvalidArgument` for a count or size mismatch; nothing is changed then.
    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()>;

    /// Clips a stored continuous action to the Box bounds for the env (in place); a no-op for
    /// discrete actions. The unclipped action stays in the buffer (CleanRL #240).
    fn env_action(&self, action: &mut [f32]) {
        if let ActionKind::Continuous { low, high, .. } = &self.spec().action {
            for ((a, l), h) in action.iter_mut().zip(low).zip(high) {
                *a = a.clamp(*l, *h);
            }
        }
    }
}

/// What [`Policy::act`] returns for a batch of N observations.
#[derive(Clone, Debug, Default)]
pub struct ActOutput {
    /// Sampled (or deterministic) actions as stored, `[N, act_dim]` (continuous: unclipped).
    pub actions: Vec<f32>,
    /// log π(a|s), `[N]`.
    pub log_probs: Vec<f32>,
    /// V(s), `[N]`.
    pub values: Vec<f32>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

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
}
