//! The actor-critic on candle: MLPs, or the Nature CNN shared by both heads (`CnnPolicy`), whose
//! forward pass builds an autograd graph, used for every algorithm (and the only implementation
//! TRPO's Fisher-vector products and the CNN run on).
//!
//! Default network (CleanRL's `Agent`, SB3's `MlpPolicy`): separate policy and value MLPs of
//! 2×64 tanh units; `shared_trunk = true` shares the hidden layers between the two heads.
//! Orthogonal init (Saxe et al. 2014; openai/baselines): gain √2 on hidden layers, 0.01 on the
//! policy head, 1.0 on the value head, biases 0. The hidden tanh is [`fast_tanh::tanh`], a fast
//! rational approximation.

use super::conv::ConvRelu;
use super::distributions::{mask_logits, mask_logits_in_place};
use super::fast_tanh;
use super::interface::{ActOutput, AuxBatch, LossReport, Policy};
use super::recurrent::Recurrent;
use super::spec::{ActionKind, Activation, ImageShape, PolicySpec};
use crate::error::{ProximaError, Result};
use crate::loss::{a2c_loss, ppo_loss, PpoBatch, PpoCoefs};
use crate::rollout::Minibatch;
use candle_core::{Device, Tensor, Var};
use rand::{Rng, RngCore};

mod sequences;

/// One dense layer: `y = x·Wᵀ + b`, W `[out, in]` (also the off-policy networks' layer).
#[derive(Clone, Debug)]
pub(super) struct Dense {
    pub(super) w: Var,
    pub(super) b: Var,
}

impl Dense {
    /// `x·Wᵀ + b`, the bias broadcast over the batch.
    pub(super) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
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
        Ok(self.forward_with_features(x)?.1)
    }

    /// The output and the input of the last layer (the features a head reads; `x` itself for
    /// a one-layer MLP): `(features, output)`.
    fn forward_with_features(&self, x: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let mut h = x.clone();
        let mut features = x.clone();
        let n = self.layers.len();
        for (i, l) in self.layers.iter().enumerate() {
            if i + 1 == n {
                features = h.clone();
            }
            h = l.forward(&h)?;
            if i + 1 < n || self.activate_last {
                h = match self.activation {
                    Activation::Tanh => fast_tanh::tanh(&h)?,
                    Activation::Relu => h.relu()?,
                };
            }
        }
        Ok((features, h))
    }
}

/// One convolution (no padding) with its bias and ReLU: [`ConvRelu`], one custom op.
#[derive(Clone, Debug)]
struct Conv {
    w: Var,
    b: Var,
    op: ConvRelu,
}

impl Conv {
    /// `in_shape` `(channels, height, width)`; `channels_last`: the input is laid out `[H, W, C]`
    /// (a previous convolution's output, or channel-last pixels) rather than `[C, H, W]`;
    /// `pixels`: the input is pixels 0..=255, divided by 255 first.
    fn new(
        w: Var,
        b: Var,
        in_shape: (usize, usize, usize),
        stride: usize,
        channels_last: bool,
        pixels: bool,
    ) -> Result<Conv> {
        let divisor = if pixels { 255.0 } else { 1.0 };
        let op = ConvRelu::new(in_shape, w.dim(2)?, stride, w.dim(0)?, channels_last, divisor);
        Ok(Conv { w, b, op })
    }

    /// `x` `[B, in_values]` → `[B, P·out]` (channel-last), after the ReLU.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.op.apply(x, self.w.as_tensor(), self.b.as_tensor())
    }
}

/// The Nature CNN (Mnih et al. 2015) as SB3's `NatureCNN` and CleanRL's `ppo_atari.py` build
/// it: pixels scaled by 1/255, three convolutions and a dense layer to 512 features, ReLU
/// after each.
#[derive(Clone, Debug)]
struct NatureCnn {
    convs: Vec<Conv>,
    /// The last convolution's output `(positions, channels)`, flattened channel-first for the
    /// dense layer as PyTorch's `nn.Flatten` reads `[C, H, W]`.
    last: (usize, usize),
    dense: Dense,
}

impl NatureCnn {
    /// The CNN on `image`'s pixels, laid out `[H, W, C]` when `channels_last` (an image key of a
    /// `Dict` observation as the env gives it) and `[C, H, W]` otherwise.
    fn new(image: ImageShape, channels_last: bool, layers: Vec<(Var, Var, usize)>, dense: Dense) -> Result<NatureCnn> {
        let mut shape = (image.channels, image.height, image.width);
        let mut convs = Vec::new();
        for (i, (w, b, stride)) in layers.into_iter().enumerate() {
            let (out, k) = (w.dim(0)?, w.dim(2)?);
            convs.push(Conv::new(w, b, shape, stride, i > 0 || channels_last, i == 0)?);
            shape = (out, (shape.1 - k) / stride + 1, (shape.2 - k) / stride + 1);
        }
        Ok(NatureCnn { convs, last: (shape.1 * shape.2, shape.0), dense })
    }

    /// `[B, channels·height·width]` pixels (0..=255) → `[B, 512]` features.
    fn forward(&self, obs: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = obs.clone();
        for c in &self.convs {
            h = c.forward(&h)?;
        }
        let (positions, channels) = self.last;
        let h = h.reshape((h.dim(0)?, positions, channels))?.transpose(1, 2)?.flatten_from(1)?;
        self.dense.forward(&h)?.relu()
    }
}

/// SB3's `CombinedExtractor` ([`super::inputs`]): each key's columns of the observation, `(start,
/// len)`, as they are or through the key's own Nature CNN; the features side by side.
#[derive(Clone, Debug)]
pub(super) struct Combined {
    keys: Vec<(usize, usize, Option<NatureCnn>)>,
}

impl Combined {
    /// `[B, obs_dim]` → `[B, features]`.
    pub(super) fn forward(&self, obs: &Tensor) -> candle_core::Result<Tensor> {
        let parts = self
            .keys
            .iter()
            .map(|(start, len, cnn)| {
                let x = obs.narrow(1, *start, *len)?;
                match cnn {
                    Some(c) => c.forward(&x),
                    None => Ok(x),
                }
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Tensor::cat(&parts, 1)
    }
}

/// The layers both heads read: an MLP's hidden layers, the Nature CNN, or the keys of a `Dict`
/// observation with images.
#[derive(Clone, Debug)]
enum Trunk {
    Mlp(Mlp),
    Cnn(NatureCnn),
    Combined(Combined),
}

impl Trunk {
    fn forward(&self, obs: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Trunk::Mlp(m) => m.forward(obs),
            Trunk::Cnn(c) => c.forward(obs),
            Trunk::Combined(c) => c.forward(obs),
        }
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

/// The actor-critic network.
#[derive(Debug)]
pub struct ActorCritic {
    spec: PolicySpec,
    device: Device,
    /// Trunk (only when `shared_trunk`, or the CNN).
    trunk: Option<Trunk>,
    actor: Mlp,
    critic: Mlp,
    /// PPG's auxiliary value head on the actor's last hidden layer (`aux_value_head`).
    aux: Option<Dense>,
    log_std: Option<Var>,
    /// Recurrent PPO's stacks: the actor's, and the critic's own (`enable_critic_lstm`).
    lstm_actor: Option<Recurrent>,
    lstm_critic: Option<Recurrent>,
    /// All parameters in a fixed order, with their names (the order decides reproducibility).
    params: Vec<(String, Var)>,
    /// The last loss evaluated through [`Policy`], until [`Policy::backward`].
    pending_loss: Option<Tensor>,
    /// log r_t(θ) of the last PPO loss ([`Policy::log_ratio`]).
    last_log_ratio: Vec<f32>,
}

impl ActorCritic {
    /// Builds and initialises the network. `rng` drives the initialisation only.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty `net_arch` entry or zero dims.
    pub fn new<R: Rng + ?Sized>(spec: PolicySpec, device: &Device, rng: &mut R) -> Result<Self> {
        spec.check_dims()?;
        let mut init = spec.initial_params(rng).into_iter();
        let mut params = Vec::new();
        let mut layers: [Vec<Dense>; 4] = Default::default();
        let mut convs = Vec::new();
        for l in spec.plan() {
            let (w, b) = (init.next().unwrap_or_default(), init.next().unwrap_or_default());
            let w = Var::from_tensor(&Tensor::from_vec(w, l.weight_shape(), device)?)?;
            let b = Var::from_tensor(&Tensor::from_vec(b, l.fan_out, device)?)?;
            params.push((format!("{}.weight", l.name), w.clone()));
            params.push((format!("{}.bias", l.name), b.clone()));
            match l.conv {
                Some((_, _, stride)) => convs.push((w, b, stride)),
                None => layers[l.part as usize].push(Dense { w, b }),
            }
        }
        let [trunk, actor, critic, aux] = layers;
        let mlp = |layers: Vec<Dense>, activate_last| Mlp { layers, activation: spec.activation, activate_last };
        let trunk = match spec.cnn {
            Some(image) => {
                let dense =
                    trunk.into_iter().next().ok_or_else(|| ProximaError::InvalidArgument("no CNN layers".into()))?;
                Some(Trunk::Cnn(NatureCnn::new(image, false, convs, dense)?))
            }
            None if !spec.inputs.is_empty() => Some(Trunk::Combined(combined(&spec, convs, trunk)?)),
            None => spec.shared_trunk.then(|| Trunk::Mlp(mlp(trunk, true))),
        };
        let (actor, critic) = (mlp(actor, false), mlp(critic, false));
        let log_std = match &spec.action {
            ActionKind::Continuous { dim, .. } => {
                let v = Var::from_tensor(&Tensor::from_vec(init.next().unwrap_or_default(), *dim, device)?)?;
                params.push(("actor_logstd".to_string(), v.clone()));
                Some(v)
            }
            ActionKind::Discrete { .. } | ActionKind::MultiDiscrete { .. } => None,
        };
        let (mut lstm_actor, mut lstm_critic) = (None, None);
        for (prefix, shape) in spec.recurrent_shapes() {
            let names = shape.param_shapes(prefix);
            let values: Vec<Vec<f32>> = init.by_ref().take(names.len()).collect();
            let (net, vars) = Recurrent::new(shape, values, device)?;
            params.extend(names.into_iter().map(|(n, _)| n).zip(vars));
            *(if prefix == "lstm_actor" { &mut lstm_actor } else { &mut lstm_critic }) = Some(net);
        }
        Ok(ActorCritic {
            spec,
            device: device.clone(),
            trunk,
            actor,
            critic,
            aux: aux.into_iter().next(),
            log_std,
            lstm_actor,
            lstm_critic,
            params,
            pending_loss: None,
            last_log_ratio: Vec::new(),
        })
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

    /// What the actor's and the critic's towers read: the shared trunk's features (twice) when
    /// the network has one, else the observation `[B, obs_dim]` itself.
    fn tower_inputs(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        self.refuse_recurrent()?;
        Ok(match &self.trunk {
            Some(t) => {
                let h = t.forward(obs)?;
                (h.clone(), h)
            }
            None => (obs.clone(), obs.clone()),
        })
    }

    /// Forward pass, differentiable. `obs`: `[B, obs_dim]` f32.
    /// Returns `(head [B, head_dim], values [B])`: logits (Discrete) or means (Box), and V(s).
    pub fn forward(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        let (a_in, c_in) = self.tower_inputs(obs)?;
        let head = self.actor.forward(&a_in)?;
        let values = self.critic.forward(&c_in)?.squeeze(1)?;
        Ok((head, values))
    }

    /// PPG's auxiliary forward pass, differentiable: π's head `[B, head_dim]`, V(s) `[B]` and
    /// V_aux(s) `[B]` (the auxiliary head on the features π's head reads).
    ///
    /// # Errors
    /// `Unsupported` for a network without the auxiliary head (`aux_value_head = false`).
    pub fn forward_aux(&self, obs: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let aux = self.aux.as_ref().ok_or_else(|| {
            ProximaError::Unsupported("this network has no auxiliary value head (aux_value_head = false)".into())
        })?;
        let (a_in, c_in) = self.tower_inputs(obs)?;
        let (features, head) = self.actor.forward_with_features(&a_in)?;
        let values = self.critic.forward(&c_in)?.squeeze(1)?;
        Ok((head, values, aux.forward(&features)?.squeeze(1)?))
    }

    /// V(s) only, differentiable: `[B, obs_dim]` → `[B]`.
    pub fn value(&self, obs: &Tensor) -> Result<Tensor> {
        self.refuse_recurrent()?;
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
        let (lp, ent, values, _) = self.evaluate_actions_with_head(obs, actions, &[])?;
        Ok((lp, ent, values))
    }

    /// [`ActorCritic::evaluate_actions`] of the masked distribution when `masks` is not empty
    /// (`[B, head_dim]`, 1 = valid: sb3-contrib's `evaluate_actions(..., action_masks)`), also
    /// returning the (masked) head `[B, head_dim]` (for a KL term via
    /// [`ActorCritic::kl_of_head`] without a second forward pass).
    ///
    /// # Errors
    /// [`ActionKind::check_masks`]'s; tensor errors.
    pub fn evaluate_actions_with_head(
        &self,
        obs: &Tensor,
        actions: &Tensor,
        masks: &[u8],
    ) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
        let (head, values) = self.forward(obs)?;
        let head = self.masked(head, masks)?;
        let log_std = self.log_std.as_ref().map(|v| v.as_tensor());
        let (lp, ent) = self.spec.action.log_prob_entropy(&head, log_std, actions)?;
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
        let log_std = match &self.log_std {
            Some(v) => v.as_tensor().to_vec1::<f32>()?,
            None => Vec::new(),
        };
        if obs.is_empty() {
            return Ok((Vec::new(), log_std)); // log σ alone (a recurrent policy has no feed-forward pass)
        }
        let (head, _) = self.forward(&self.obs_tensor(obs)?)?;
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
        let log_std = self.log_std.as_ref().map(|v| v.as_tensor());
        self.spec.action.kl(&old.head, old.log_std.as_ref(), head, log_std)
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

    /// The layers π(·|s) goes through, in order: `(weight [out, in], bias [out], activated)`
    /// for the trunk's (if shared) and the actor's; the activation is the spec's, and
    /// [`fast_tanh::tanh`] for tanh.
    pub fn actor_layers(&self) -> Vec<(&Var, &Var, bool)> {
        let actor = &self.actor.layers;
        let actor = actor.iter().enumerate().map(|(i, l)| (&l.w, &l.b, i + 1 < actor.len()));
        match &self.trunk {
            Some(Trunk::Mlp(t)) => t.layers.iter().map(|l| (&l.w, &l.b, true)).chain(actor).collect(),
            // TRPO refuses CNNs (Config::validate, and image keys in the trainer): its products
            // go through dense layers only.
            Some(Trunk::Cnn(_) | Trunk::Combined(_)) | None => actor.collect(),
        }
    }

    /// Copies `[N, obs_dim]` host observations into a tensor on the policy's device.
    pub fn obs_tensor(&self, obs: &[f32]) -> Result<Tensor> {
        let n = obs.len() / self.spec.obs_dim;
        Ok(Tensor::from_slice(obs, (n, self.spec.obs_dim), &self.device)?)
    }

    /// Acts on N observations (host, `[N, obs_dim]` f32): samples from π(·|s) with `rng`, or
    /// takes the mode when `deterministic`. Continuous actions are returned *unclipped*; clip
    /// them with [`Policy::env_action`] when sending them to the env.
    pub fn act<R: Rng + ?Sized>(&self, obs: &[f32], deterministic: bool, rng: &mut R) -> Result<ActOutput> {
        self.act_masked(obs, None, deterministic, rng)
    }

    /// [`ActorCritic::act`] with the actions `masks` marks invalid (`[N, head_dim]`, 1 = valid)
    /// masked, as [`Policy::act_into`] describes.
    ///
    /// # Errors
    /// [`ActionKind::check_masks`]'s; tensor errors.
    pub fn act_masked<R: Rng + ?Sized>(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut R,
    ) -> Result<ActOutput> {
        let x = self.obs_tensor(obs)?;
        let (head, values) = self.forward(&x)?;
        self.sample_rows(&head, &values, masks, deterministic, rng)
    }

    /// Actions from a head `[N, head_dim]` (masked by `masks` when given) with V(s) `values`
    /// `[N]`: [`ActorCritic::act_masked`]'s sampling.
    fn sample_rows<R: Rng + ?Sized>(
        &self,
        head: &Tensor,
        values: &Tensor,
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut R,
    ) -> Result<ActOutput> {
        let n = head.dim(0)?;
        let mut head = head.flatten_all()?.to_vec1::<f32>()?;
        if let Some(m) = masks {
            self.spec.action.check_masks(n, m)?;
            mask_logits_in_place(&mut head, m);
        }
        let log_std = match &self.log_std {
            Some(v) => v.as_tensor().to_vec1::<f32>()?,
            None => Vec::new(),
        };
        let hd = self.spec.action.head_dim();
        let mut out = ActOutput {
            actions: Vec::with_capacity(n * self.spec.action.act_dim()),
            log_probs: Vec::with_capacity(n),
            values: values.to_vec1::<f32>()?,
            head: Vec::new(), // a row's bits depend on its batch here: see `ActOutput::head`
        };
        let mut scratch = vec![0f32; hd];
        for row in head.chunks(hd) {
            let lp = self.spec.action.sample_row(row, &log_std, deterministic, rng, &mut scratch, &mut out.actions);
            out.log_probs.push(lp);
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
        Policy::env_action(self, action)
    }
}

/// The gradients of `params` in `grads`, copied to the host in the parameters' order, each
/// flattened row-major and as f32 (`None` where no gradient flowed): what `Optimizer::step_host`
/// takes.
///
/// # Errors
/// Tensor errors.
pub fn host_gradients(
    params: &[(String, Var)],
    grads: &candle_core::backprop::GradStore,
) -> Result<Vec<Option<Vec<f32>>>> {
    params
        .iter()
        .map(|(_, var)| match grads.get(var.as_tensor()) {
            Some(g) => Ok(Some(g.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?)),
            None => Ok(None),
        })
        .collect()
}

impl ActorCritic {
    /// Keeps `loss` for [`Policy::backward`] and reports its value and parts.
    fn keep_loss(&mut self, parts: [&Tensor; 4]) -> Result<LossReport> {
        let v = Tensor::stack(&parts, 0)?.to_vec1::<f32>()?;
        self.pending_loss = Some(parts[0].clone());
        self.last_log_ratio.clear();
        Ok(LossReport { values: [v[0], v[1], v[2], v[3]] })
    }

    /// A minibatch's observations `[B, obs_dim]` and stored actions `[B, act_dim]` as tensors.
    fn batch_tensors(&self, mb: &Minibatch) -> Result<(Tensor, Tensor)> {
        let obs = Tensor::from_slice(&mb.observations, (mb.len, self.spec.obs_dim), &self.device)?;
        let act = Tensor::from_slice(&mb.actions, (mb.len, self.spec.action.act_dim()), &self.device)?;
        Ok((obs, act))
    }

    fn host_tensor(&self, v: &[f32]) -> Result<Tensor> {
        Ok(Tensor::from_slice(v, v.len(), &self.device)?)
    }

    /// log π, the entropy, V and the (masked) head of a minibatch's rows, differentiable: a
    /// feed-forward pass, or a recurrent policy's over the minibatch's sequences.
    fn evaluate_minibatch(
        &self,
        obs: &Tensor,
        act: &Tensor,
        mb: &Minibatch,
    ) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
        let Some(seq) = &mb.sequences else { return self.evaluate_actions_with_head(obs, act, &mb.action_masks) };
        let starts = Tensor::from_slice(&seq.episode_starts, seq.episode_starts.len(), &self.device)?;
        let (head, values, _) = self.forward_sequence(obs, &starts, &seq.state0, seq.n_seqs)?;
        let head = self.masked(head, &mb.action_masks)?;
        let log_std = self.log_std.as_ref().map(|v| v.as_tensor());
        let (lp, ent) = self.spec.action.log_prob_entropy(&head, log_std, act)?;
        Ok((lp, ent, values, head))
    }

    /// `head` `[B, head_dim]` with the logits `masks` marks invalid set to
    /// [`super::distributions::MASKED_LOGIT`] (unchanged when `masks` is empty).
    fn masked(&self, head: Tensor, masks: &[u8]) -> Result<Tensor> {
        if masks.is_empty() {
            return Ok(head);
        }
        let (b, hd) = head.dims2()?;
        self.spec.action.check_masks(b, masks)?;
        Ok(mask_logits(&head, &Tensor::from_slice(masks, (b, hd), &self.device)?)?)
    }
}

impl ActorCritic {
    /// `Unsupported` for a recurrent policy, whose passes need its hidden state
    /// ([`ActorCritic::forward_sequence`], [`ActorCritic::act_recurrent`]).
    fn refuse_recurrent(&self) -> Result<()> {
        match self.lstm_actor {
            Some(_) => Err(ProximaError::Unsupported(
                "a recurrent policy acts and learns with its hidden state (act_recurrent, forward_sequence)".into(),
            )),
            None => Ok(()),
        }
    }
}

impl Policy for ActorCritic {
    fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput> {
        ActorCritic::act(self, obs, deterministic, rng)
    }

    fn act_into(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        *out = self.act_masked(obs, masks, deterministic, rng)?;
        Ok(())
    }

    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        ActorCritic::predict_values(self, obs)
    }

    fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        ActorCritic::dist_params_host(self, obs)
    }

    fn recurrent_state_dim(&self) -> usize {
        ActorCritic::recurrent_state_dim(self)
    }

    fn act_recurrent(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        (episode_starts, state): (&[bool], &mut [f32]),
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        *out = ActorCritic::act_recurrent(self, obs, masks, episode_starts, state, deterministic, rng)?;
        Ok(())
    }

    fn predict_values_recurrent(&self, obs: &[f32], episode_starts: &[bool], state: &[f32]) -> Result<Vec<f32>> {
        ActorCritic::predict_values_recurrent(self, obs, episode_starts, state)
    }

    fn rollout_kl_recurrent(
        &self,
        obs: &[f32],
        (episode_starts, state0): (&[bool], &[f32]),
        old_head: &[f32],
        old_log_std: &[f32],
        masks: Option<&[u8]>,
    ) -> Result<f64> {
        let n = state0.len() / self.recurrent_state_dim().max(1);
        let starts: Vec<f32> = episode_starts.iter().map(|&s| f32::from(u8::from(s))).collect();
        let starts = Tensor::from_vec(starts, episode_starts.len(), &self.device)?;
        let (head, _, _) = self.forward_sequence(&self.obs_tensor(obs)?, &starts, state0, n)?;
        let mut old = self.dist_params_from_host(old_head, old_log_std)?;
        let masks = masks.unwrap_or(&[]);
        old.head = self.masked(old.head, masks)?;
        let kl = self.kl_of_head(&old, &self.masked(head, masks)?)?;
        Ok(kl.mean_all()?.to_scalar::<f32>()? as f64)
    }

    fn ppo_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], coefs: &PpoCoefs) -> Result<LossReport> {
        let (obs, act) = self.batch_tensors(mb)?;
        let (log_prob, entropy, values, head) = self.evaluate_minibatch(&obs, &act, mb)?;
        let kl = if mb.old_head.is_empty() {
            None
        } else {
            // π_θold's head was stored masked (the collector's `store_old_dist`).
            Some(self.kl_of_head(&self.dist_params_from_host(&mb.old_head, old_log_std)?, &head)?)
        };
        let (old_log_prob, advantages) = (self.host_tensor(&mb.old_log_probs)?, self.host_tensor(&mb.advantages)?);
        let (old_values, returns) = (self.host_tensor(&mb.old_values)?, self.host_tensor(&mb.returns)?);
        let batch = PpoBatch {
            log_prob: &log_prob,
            entropy: Some(&entropy),
            values: &values,
            old_log_prob: &old_log_prob,
            advantages: &advantages,
            old_values: &old_values,
            returns: &returns,
            kl: kl.as_ref(),
            mask: None,
        };
        let out = ppo_loss(&batch, coefs)?;
        // The loss is checked finite by the caller before log r is read.
        let parts = [&out.loss, &out.policy_loss, &out.value_loss, &out.entropy];
        let report = self.keep_loss(parts)?;
        if report.values[0].is_finite() {
            self.last_log_ratio = out.log_ratio.to_vec1::<f32>()?;
        }
        Ok(report)
    }

    fn a2c_loss(&mut self, batch: &Minibatch, vf_coef: f64, ent_coef: f64) -> Result<LossReport> {
        let (obs, act) = self.batch_tensors(batch)?;
        let (log_prob, entropy, values, _) = self.evaluate_minibatch(&obs, &act, batch)?;
        let (advantages, returns) = (self.host_tensor(&batch.advantages)?, self.host_tensor(&batch.returns)?);
        let out = a2c_loss(&log_prob, &entropy, &values, &advantages, &returns, vf_coef, ent_coef)?;
        self.keep_loss([&out.loss, &out.policy_loss, &out.value_loss, &out.entropy])
    }

    fn aux_loss(&mut self, batch: &AuxBatch<'_>, beta_clone: f64) -> Result<LossReport> {
        let n = batch.returns.len();
        let obs = Tensor::from_slice(batch.observations, (n, self.spec.obs_dim), &self.device)?;
        let (head, values, aux_values) = self.forward_aux(&obs)?;
        let old = self.dist_params_from_host(batch.old_head, batch.old_log_std)?;
        let kl = self.kl_of_head(&old, &head)?.mean_all()?;
        let returns = self.host_tensor(batch.returns)?;
        let aux_value_loss = ((aux_values - &returns)?.sqr()?.mean_all()? * 0.5)?;
        let value_loss = ((values - &returns)?.sqr()?.mean_all()? * 0.5)?;
        let loss = ((&aux_value_loss + (&kl * beta_clone)?)? + &value_loss)?;
        self.keep_loss([&loss, &aux_value_loss, &value_loss, &kl])
    }

    fn log_ratio(&self) -> &[f32] {
        &self.last_log_ratio
    }

    fn backward(&mut self) -> Result<Vec<Option<Vec<f32>>>> {
        let loss = self
            .pending_loss
            .take()
            .ok_or_else(|| ProximaError::InvalidArgument("backward without a loss evaluated before it".into()))?;
        host_gradients(&self.params, &loss.backward()?)
    }

    fn rollout_kl(&self, obs: &[f32], old_head: &[f32], old_log_std: &[f32], masks: Option<&[u8]>) -> Result<f64> {
        let mut old = self.dist_params_from_host(old_head, old_log_std)?;
        let (head, _) = self.forward(&self.obs_tensor(obs)?)?;
        let masks = masks.unwrap_or(&[]);
        old.head = self.masked(old.head, masks)?;
        let kl = self.kl_of_head(&old, &self.masked(head, masks)?)?;
        Ok(kl.mean_all()?.to_scalar::<f32>()? as f64)
    }

    /// The stored names (the spec's, without rebuilding its layer plan on every optimiser step).
    fn param_names(&self) -> Vec<String> {
        self.params.iter().map(|(n, _)| n.clone()).collect()
    }

    fn params(&self) -> Result<Vec<Vec<f32>>> {
        self.params.iter().map(|(_, v)| Ok(v.as_tensor().flatten_all()?.to_vec1::<f32>()?)).collect()
    }

    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()> {
        if values.len() != self.params.len()
            || values.iter().zip(&self.params).any(|(v, (_, p))| v.len() != p.elem_count())
        {
            return Err(ProximaError::InvalidArgument(format!(
                "{} parameter arrays for a network of {} (or a size mismatch)",
                values.len(),
                self.params.len()
            )));
        }
        for ((_, var), v) in self.params.iter().zip(values) {
            var.set(&Tensor::from_slice(v, var.shape(), var.device())?)?;
        }
        Ok(())
    }
}

/// [`Combined`] of `spec.inputs` from the CNN layers the plan made for them, in order: three
/// convolutions and one dense layer per image key.
pub(super) fn combined(spec: &PolicySpec, convs: Vec<(Var, Var, usize)>, dense: Vec<Dense>) -> Result<Combined> {
    let (mut convs, mut dense) = (convs.into_iter(), dense.into_iter());
    let mut start = 0;
    let mut keys = Vec::new();
    for key in &spec.inputs {
        let cnn = match key.image {
            Some(img) => {
                let image = ImageShape { channels: img.chw[0], height: img.chw[1], width: img.chw[2] };
                let layers: Vec<_> = convs.by_ref().take(3).collect();
                let d = dense.next().ok_or_else(|| ProximaError::InvalidArgument("missing CNN layers".into()))?;
                Some(NatureCnn::new(image, img.channels_last, layers, d)?)
            }
            None => None,
        };
        keys.push((start, key.len, cnn));
        start += key.len;
    }
    Ok(Combined { keys })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Activation;
    use rand::SeedableRng;

    fn spec(action: ActionKind, shared: bool) -> PolicySpec {
        PolicySpec {
            cnn: None,
            obs_dim: 4,
            action,
            net_arch: vec![64, 64],
            activation: Activation::Tanh,
            shared_trunk: shared,
            log_std_init: 0.0,
            ortho_init: true,
            aux_value_head: false,
            recurrent: None,
            inputs: Vec::new(),
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
