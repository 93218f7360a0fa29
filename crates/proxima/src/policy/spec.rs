//! What a policy network is, whatever implements it: the action distribution it outputs
//! ([`ActionKind`]), its hidden activation, and its [`PolicySpec`] — the dense layers in
//! parameter order with CleanRL's names (`actor.0.weight`, …, `actor_logstd`; the Nature CNN's
//! `network.0.weight`, … as CleanRL's `ppo_atari.py`), their shapes and their orthogonal
//! initialisation. Checkpoints store the spec; every backend builds from it.

use super::inputs::{features_dim, InputKey, COMBINED_CNN_FEATURES};
use super::recurrent::{RecurrentShape, RecurrentSpec};
use crate::env::Space;
use crate::error::{ProximaError, Result};
use proxima_kernels::orthogonal::orthonormal_columns;
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
    /// The action space it came from, as Gymnasium prints it (`Discrete(2)`,
    /// `Box(-2, 2, [1])`), for messages.
    pub fn describe(&self) -> String {
        match self {
            ActionKind::Discrete { n } => Space::Discrete { n: *n }.describe(),
            ActionKind::MultiDiscrete { nvec } => Space::MultiDiscrete { nvec: nvec.clone() }.describe(),
            ActionKind::Continuous { dim, low, high } => {
                Space::Box { low: low.clone(), high: high.clone(), shape: vec![*dim], dtype: Default::default() }
                    .describe()
            }
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

/// The config's `policy` key, with SB3's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolicyKind {
    /// MLPs of `net_arch` (SB3's `MlpPolicy`, CleanRL's `Agent`); over a `Dict` observation, SB3's
    /// `MultiInputPolicy` (accepted as that name too).
    #[default]
    #[serde(alias = "MultiInputPolicy")]
    MlpPolicy,
    /// The Nature CNN shared by the policy and value heads, for image observations (SB3's
    /// `CnnPolicy`, CleanRL's `ppo_atari.py`).
    CnnPolicy,
    /// Recurrent PPO's policy (sb3-contrib's `MlpLstmPolicy`): an LSTM (or GRU,
    /// `recurrent_cell`) stack between the observation and the MLPs of `net_arch`; over a `Dict`
    /// observation, sb3-contrib's `MultiInputLstmPolicy` (accepted as that name too).
    #[serde(alias = "MultiInputLstmPolicy")]
    MlpLstmPolicy,
    /// Recurrent PPO over images (sb3-contrib's `CnnLstmPolicy`): the Nature CNN's 512 features
    /// into the LSTM (or GRU) stack, the policy and value heads on its outputs (sb3-contrib's
    /// default `net_arch = []` for the CNN).
    CnnLstmPolicy,
}

impl PolicyKind {
    /// An LSTM (or GRU) policy: `MlpLstmPolicy` or `CnnLstmPolicy`.
    pub fn is_recurrent(self) -> bool {
        matches!(self, PolicyKind::MlpLstmPolicy | PolicyKind::CnnLstmPolicy)
    }

    /// The Nature CNN reads the observation: `CnnPolicy` or `CnnLstmPolicy`.
    pub fn is_cnn(self) -> bool {
        matches!(self, PolicyKind::CnnPolicy | PolicyKind::CnnLstmPolicy)
    }
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
    /// PPG's auxiliary value head V_aux(s) on the policy network's last hidden layer
    /// (`aux_critic.weight` `[1, width]`, `aux_critic.bias` `[1]`, after the critic's parameters;
    /// Cobbe et al. 2021). Absent from the specs of every other algorithm (and of checkpoints
    /// written before PPG existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aux_value_head: bool,
    /// The Nature CNN (`policy = "CnnPolicy"`) on images of this shape, shared by the policy and
    /// value heads; `net_arch`, `activation` and `shared_trunk` are then not used. Absent for
    /// MLP policies (and from every checkpoint written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnn: Option<ImageShape>,
    /// Recurrent layers between the observation (or the CNN's features) and the MLP towers
    /// (recurrent PPO, sb3-contrib's `MlpLstmPolicy` and `CnnLstmPolicy`): their parameters come
    /// after every other, and the towers read their `hidden_size` outputs. Absent for feed-forward policies (and from every
    /// checkpoint written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrent: Option<RecurrentSpec>,
    /// `MultiInputPolicy` over a `Dict` observation with image keys (SB3's `CombinedExtractor`,
    /// [`super::inputs`]): the observation's top-level keys, each image through a Nature CNN of
    /// its own (`extractors.{key}.cnn.*`, `extractors.{key}.linear.0`, first in parameter
    /// order), the towers reading the keys' features side by side. Empty otherwise (and in
    /// every checkpoint written before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputKey>,
}

/// The shape of an image observation, channel-first: `[channels, height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageShape {
    /// Channels (stacked frames).
    pub channels: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

/// The Nature CNN's convolutions (Mnih et al. 2015): `(out_channels, kernel, stride)`.
pub const NATURE_CONVS: [(usize, usize, usize); 3] = [(32, 8, 4), (64, 4, 2), (64, 3, 1)];
/// The width of the Nature CNN's dense layer, the features both heads read.
pub const NATURE_FEATURES: usize = 512;
/// Most weights the Nature CNN's dense layer may hold (c·h·w of the last convolution × 512):
/// 2²⁸ f32 are 1 GiB, and θ, ∇θ and Adam's two moments are four such copies; an image of about
/// 700 × 700 reaches it (Atari's 84 × 84: 1.6M).
pub const MAX_CNN_DENSE_WEIGHTS: usize = 1 << 28;

impl ImageShape {
    /// The `(channels, height, width)` after each of the Nature CNN's convolutions (no
    /// padding: `(side − kernel) / stride + 1`).
    ///
    /// # Errors
    /// `InvalidArgument` when the image is too small for a convolution (needs at least 36 × 36),
    /// or so large that the dense layer would pass [`MAX_CNN_DENSE_WEIGHTS`].
    pub fn nature_outputs(&self) -> Result<[(usize, usize, usize); 3]> {
        let (mut h, mut w) = (self.height, self.width);
        let mut out = [(0, 0, 0); 3];
        for (i, &(c, k, s)) in NATURE_CONVS.iter().enumerate() {
            if h < k || w < k {
                return Err(ProximaError::InvalidArgument(format!(
                    "an image of {} × {} is too small for the Nature CNN (a {k} × {k} convolution after {h} × {w}; it needs at least 36 × 36)",
                    self.height, self.width
                )));
            }
            (h, w) = ((h - k) / s + 1, (w - k) / s + 1);
            out[i] = (c, h, w);
        }
        let (c, h, w) = out[2];
        let dense = c.saturating_mul(h).saturating_mul(w).saturating_mul(NATURE_FEATURES);
        if dense > MAX_CNN_DENSE_WEIGHTS {
            return Err(ProximaError::InvalidArgument(format!(
                "an image of {} × {} is too large for the Nature CNN: its dense layer would hold {dense} weights \
                 (at most {MAX_CNN_DENSE_WEIGHTS}, about 700 × 700 pixels); downscale the frames (Atari's are 84 × 84)",
                self.height, self.width
            )));
        }
        Ok(out)
    }
}

/// Orthogonal matrix `[rows, cols]` scaled by `gain`, as `torch.nn.init.orthogonal_`:
/// QR of a standard-normal matrix (transposed when rows < cols), with Q's columns' signs fixed
/// by diag(R) so the distribution is uniform (Haar) ([`orthonormal_columns`]).
pub fn orthogonal<R: Rng + ?Sized>(rows: usize, cols: usize, gain: f64, rng: &mut R) -> Vec<f32> {
    let transpose = rows < cols;
    let (r, c) = if transpose { (cols, rows) } else { (rows, cols) };
    // Drawn column after column: `[r, c]` column-major.
    let m: Vec<f64> = (0..r * c).map(|_| rng.sample(StandardNormal)).collect();
    let q = orthonormal_columns(m, r, c); // [r, c] column-major: q(i, j) = q[j·r + i]
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let v = if transpose { q[i * r + j] } else { q[j * r + i] };
            out.push((v * gain) as f32);
        }
    }
    out
}

/// Which part of the network a layer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Trunk,
    Actor,
    Critic,
    /// PPG's auxiliary value head.
    Aux,
}

/// One layer of a network's plan: its name prefix, fans, init gain and part; a convolution's
/// `(in_channels, kernel, stride)` (its fan-in is in_channels · kernel², its fan-out the output
/// channels, its weight `[out, in, kernel, kernel]`).
pub(crate) struct LayerPlan {
    pub(crate) name: String,
    pub(crate) fan_in: usize,
    pub(crate) fan_out: usize,
    pub(crate) gain: f64,
    pub(crate) part: Part,
    pub(crate) conv: Option<(usize, usize, usize)>,
}

impl LayerPlan {
    fn dense(name: String, fan_in: usize, fan_out: usize, gain: f64, part: Part) -> LayerPlan {
        LayerPlan { name, fan_in, fan_out, gain, part, conv: None }
    }

    /// The weight's shape: `[out, in]`, or `[out, in, k, k]` for a convolution.
    pub(crate) fn weight_shape(&self) -> Vec<usize> {
        match self.conv {
            None => vec![self.fan_out, self.fan_in],
            Some((c_in, k, _)) => vec![self.fan_out, c_in, k, k],
        }
    }
}

impl PolicySpec {
    /// An MLP policy (`MlpPolicy`) with hidden layers `net_arch`: separate tanh towers for π and
    /// V, orthogonal init, log-std 0, no PPG head, no CNN (the config's defaults besides the widths).
    pub fn mlp(obs_dim: usize, action: ActionKind, net_arch: Vec<usize>) -> PolicySpec {
        PolicySpec {
            obs_dim,
            action,
            net_arch,
            activation: Activation::Tanh,
            shared_trunk: false,
            log_std_init: 0.0,
            ortho_init: true,
            aux_value_head: false,
            cnn: None,
            recurrent: None,
            inputs: Vec::new(),
        }
    }

    /// What the MLP towers read: the recurrent layers' outputs, or what the stack would read.
    fn tower_input(&self) -> usize {
        self.recurrent.map_or(self.features_dim(), |r| r.hidden_size)
    }

    /// What the observation gives the towers (or the recurrent stack): the Nature CNN's
    /// features, the keys' features side by side ([`PolicySpec::inputs`]), or the observation.
    pub(crate) fn features_dim(&self) -> usize {
        match (&self.cnn, self.inputs.is_empty()) {
            (Some(_), _) => NATURE_FEATURES,
            (None, false) => features_dim(&self.inputs),
            (None, true) => self.obs_dim,
        }
    }

    /// The recurrent stacks' names and shapes: the actor's (`lstm_actor`), then the critic's
    /// own (`lstm_critic`). They read the observation, or the Nature CNN's 512 features
    /// (`CnnLstmPolicy`, whose CNN both stacks share as sb3-contrib's `share_features_extractor`).
    pub fn recurrent_shapes(&self) -> Vec<(&'static str, RecurrentShape)> {
        let Some(r) = self.recurrent else { return Vec::new() };
        let input = self.features_dim();
        let mut out = vec![("lstm_actor", r.actor(input))];
        out.extend(r.critic(input).map(|c| ("lstm_critic", c)));
        out
    }

    /// The layers, in parameter order, named like CleanRL's `nn.Sequential` modules.
    pub(crate) fn plan(&self) -> Vec<LayerPlan> {
        if let Some(img) = &self.cnn {
            return self.cnn_plan(img);
        }
        let sqrt2 = std::f64::consts::SQRT_2;
        let hidden = |prefix: &str, part: Part, out: &mut Vec<LayerPlan>| {
            let mut fan_in = self.tower_input();
            for (i, &h) in self.net_arch.iter().enumerate() {
                out.push(LayerPlan::dense(format!("{prefix}.{}", 2 * i), fan_in, h, sqrt2, part));
                fan_in = h;
            }
            fan_in
        };
        let head = self.action.head_dim();
        let mut plan = self.extractor_plan();
        if self.shared_trunk {
            let w = hidden("trunk", Part::Trunk, &mut plan);
            plan.push(LayerPlan::dense("actor.0".into(), w, head, 0.01, Part::Actor));
            plan.push(LayerPlan::dense("critic.0".into(), w, 1, 1.0, Part::Critic));
        } else {
            let d = 2 * self.net_arch.len();
            let w = hidden("actor", Part::Actor, &mut plan);
            plan.push(LayerPlan::dense(format!("actor.{d}"), w, head, 0.01, Part::Actor));
            let w = hidden("critic", Part::Critic, &mut plan);
            plan.push(LayerPlan::dense(format!("critic.{d}"), w, 1, 1.0, Part::Critic));
        }
        if self.aux_value_head {
            // On the features the policy head reads (a value head's gain, 1.0).
            let w = self.net_arch.last().copied().unwrap_or(self.obs_dim);
            plan.push(LayerPlan::dense("aux_critic".into(), w, 1, 1.0, Part::Aux));
        }
        plan
    }

    /// SB3's `CombinedExtractor`: for each image key of [`PolicySpec::inputs`], in order, the
    /// Nature CNN's convolutions `extractors.{key}.cnn.0`, `.2`, `.4` and its dense layer
    /// `extractors.{key}.linear.0` to 256 features (gain √2, as SB3 initialises its features
    /// extractor). Empty without image keys.
    pub(crate) fn extractor_plan(&self) -> Vec<LayerPlan> {
        let mut plan = Vec::new();
        for key in &self.inputs {
            let Some(img) = key.image else { continue };
            let image = ImageShape { channels: img.chw[0], height: img.chw[1], width: img.chw[2] };
            let convs = |i: usize| format!("extractors.{}.cnn.{i}", key.name);
            let dense = format!("extractors.{}.linear.0", key.name);
            plan.extend(nature_cnn_plan(&image, convs, dense, COMBINED_CNN_FEATURES));
        }
        plan
    }

    /// CleanRL `ppo_atari.py`'s `Agent`: `network.0`, `.2`, `.4` the Nature CNN's convolutions,
    /// `network.7` the dense layer to 512 features (ReLU after each), then the heads `actor`
    /// (gain 0.01) and `critic` (gain 1); √2 elsewhere. An image too small for the convolutions
    /// leaves the plan without them (refused by [`PolicySpec::check_dims`]).
    fn cnn_plan(&self, img: &ImageShape) -> Vec<LayerPlan> {
        let mut plan = nature_cnn_plan(img, |i| format!("network.{i}"), "network.7".into(), NATURE_FEATURES);
        if plan.is_empty() {
            return plan;
        }
        let head = self.action.head_dim();
        // The heads read the CNN's features, or the recurrent stack's outputs (`CnnLstmPolicy`).
        let features = self.recurrent.map_or(NATURE_FEATURES, |r| r.hidden_size);
        plan.push(LayerPlan::dense("actor".into(), features, head, 0.01, Part::Actor));
        plan.push(LayerPlan::dense("critic".into(), features, 1, 1.0, Part::Critic));
        plan
    }

    /// Every parameter's initial values, in [`PolicySpec::param_shapes`]' order: per layer the
    /// orthogonal weight with the layer's gain (√2 hidden, 0.01 policy head, 1.0 value heads), or
    /// PyTorch's default U(±1/√fan_in) without `ortho_init`, and a zero bias; then the Gaussian
    /// log-std at `log_std_init`. Every backend starts from these, so a seed gives the same
    /// network on each.
    pub fn initial_params<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<Vec<f32>> {
        let mut out = Vec::new();
        for l in self.plan() {
            out.push(if self.ortho_init {
                orthogonal(l.fan_out, l.fan_in, l.gain, rng)
            } else {
                let bound = 1.0 / (l.fan_in as f32).sqrt();
                (0..l.fan_out * l.fan_in).map(|_| rng.random_range(-bound..bound)).collect()
            });
            out.push(vec![0f32; l.fan_out]);
        }
        if let ActionKind::Continuous { dim, .. } = &self.action {
            out.push(vec![self.log_std_init; *dim]);
        }
        for (_, shape) in self.recurrent_shapes() {
            out.extend(shape.initial_params(rng));
        }
        out
    }

    /// Checks that every dimension is positive.
    ///
    /// # Errors
    /// `InvalidArgument` naming the dims.
    pub fn check_dims(&self) -> Result<()> {
        if let Some(img) = &self.cnn {
            img.nature_outputs()?;
            if img.channels.checked_mul(img.height).and_then(|x| x.checked_mul(img.width)) != Some(self.obs_dim) {
                return Err(ProximaError::InvalidArgument(format!(
                    "the CNN's image {img:?} does not hold the {} observation values",
                    self.obs_dim
                )));
            }
        }
        self.check_inputs()?;
        if let Some(r) = &self.recurrent {
            r.check()?;
            if self.shared_trunk || self.aux_value_head {
                return Err(ProximaError::Unsupported(
                    "a recurrent policy has no shared MLP trunk and no PPG head".into(),
                ));
            }
        }
        if self.obs_dim == 0 || self.action.head_dim() == 0 || self.net_arch.contains(&0) {
            return Err(ProximaError::InvalidArgument(format!(
                "network dims must be positive: obs_dim {}, head {}, net_arch {:?}",
                self.obs_dim,
                self.action.head_dim(),
                self.net_arch
            )));
        }
        Ok(())
    }

    /// [`PolicySpec::inputs`]: keys whose lengths add up to the observation, images that hold
    /// their pixels and fit the Nature CNN, and no CNN policy, shared trunk or PPG head beside.
    fn check_inputs(&self) -> Result<()> {
        if self.inputs.is_empty() {
            return Ok(());
        }
        if self.cnn.is_some() || self.shared_trunk || self.aux_value_head {
            return Err(ProximaError::Unsupported(
                "image keys in a Dict observation (MultiInputPolicy's CNN) take separate MLP towers: no CnnPolicy, shared trunk or PPG head".into(),
            ));
        }
        let total: usize = self.inputs.iter().map(|k| k.len).sum();
        if total != self.obs_dim {
            return Err(ProximaError::InvalidArgument(format!(
                "the observation keys hold {total} values; the observation has {}",
                self.obs_dim
            )));
        }
        for key in &self.inputs {
            let Some(img) = key.image else { continue };
            let image = ImageShape { channels: img.chw[0], height: img.chw[1], width: img.chw[2] };
            if img.chw.iter().product::<usize>() != key.len {
                return Err(ProximaError::InvalidArgument(format!(
                    "the image key `{}` of {:?} does not hold its {} values",
                    key.name, img.chw, key.len
                )));
            }
            image
                .nature_outputs()
                .map_err(|e| ProximaError::InvalidArgument(format!("the image key `{}`: {e}", key.name)))?;
        }
        Ok(())
    }

    /// Every parameter's name and shape, in order, without allocating the network (so a
    /// checkpoint's claimed spec can be checked against its tensors before anything is built).
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut out = Vec::new();
        for l in self.plan() {
            out.push((format!("{}.weight", l.name), l.weight_shape()));
            out.push((format!("{}.bias", l.name), vec![l.fan_out]));
        }
        if let ActionKind::Continuous { dim, .. } = &self.action {
            out.push(("actor_logstd".into(), vec![*dim]));
        }
        for (prefix, shape) in self.recurrent_shapes() {
            out.extend(shape.param_shapes(prefix));
        }
        out
    }
}

/// The Nature CNN's layers on `img`, all in the trunk with gain √2: its three convolutions, named
/// `conv_name(0)`, `conv_name(2)`, `conv_name(4)`, and its dense layer `dense_name` to `features`
/// values; empty for an image too small for the convolutions.
fn nature_cnn_plan(
    img: &ImageShape,
    conv_name: impl Fn(usize) -> String,
    dense_name: String,
    features: usize,
) -> Vec<LayerPlan> {
    let sqrt2 = std::f64::consts::SQRT_2;
    let Ok(outs) = img.nature_outputs() else { return Vec::new() };
    let mut plan = Vec::new();
    let mut c_in = img.channels;
    for (i, &(c, k, s)) in NATURE_CONVS.iter().enumerate() {
        let fan_in = c_in.saturating_mul(k * k);
        let conv = Some((c_in, k, s));
        plan.push(LayerPlan { name: conv_name(2 * i), fan_in, fan_out: c, gain: sqrt2, part: Part::Trunk, conv });
        c_in = c;
    }
    let (c, h, w) = outs[2];
    // Saturating: a checkpoint's claimed image is checked against its tensors, not trusted.
    let flat = c.saturating_mul(h).saturating_mul(w);
    plan.push(LayerPlan::dense(dense_name, flat, features, sqrt2, Part::Trunk));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn orthogonal_rows_or_columns_are_orthonormal() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for (r, c) in [(64, 4), (4, 64), (64, 64), (2, 64)] {
            let w: Vec<f64> = orthogonal(r, c, 2.0, &mut rng).iter().map(|&x| x as f64 / 2.0).collect();
            // The Gram matrix of the columns (r ≥ c) or of the rows is the identity.
            let (k, n) = if r >= c { (c, r) } else { (r, c) };
            let at = |v: usize, i: usize| if r >= c { w[i * c + v] } else { w[v * c + i] };
            for a in 0..k {
                for b in 0..k {
                    let g: f64 = (0..n).map(|i| at(a, i) * at(b, i)).sum();
                    let want = if a == b { 1.0 } else { 0.0 };
                    assert!((g - want).abs() < 1e-5, "{r}x{c}: ({a}, {b}) = {g}");
                }
            }
        }
    }
}
