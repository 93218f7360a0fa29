//! [`Policy`]: a checkpoint's actor as dense layers on the fused kernels, and its deterministic
//! action.

use crate::checkpoint::{self, Action, Activation, Contents, Image, Normalization};
use crate::Error;
use proxima_kernels::conv::{ConvLayer, ConvStack, ConvWorkspace};
use proxima_kernels::dense::{dense_forward, Act, NARROW};
use proxima_kernels::transpose::transpose;
use std::path::Path;

/// The logit a masked action gets (as the training code's `MASKED_LOGIT`, sb3-contrib's choice).
const MASKED_LOGIT: f32 = -1e8;

/// The env's action space, as the policy acts in it.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionSpace {
    /// `Discrete(n)`: one action index per row.
    Discrete {
        /// Actions.
        n: usize,
    },
    /// `MultiDiscrete(nvec)`: one index per component per row.
    MultiDiscrete {
        /// Choices per component.
        nvec: Vec<usize>,
    },
    /// `Box(low, high)`: `low.len()` values per row, within the bounds.
    Box {
        /// Lower bounds.
        low: Vec<f32>,
        /// Upper bounds.
        high: Vec<f32>,
    },
}

/// How the actor's output becomes the action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    /// An actor-critic's head: logits (the argmax), or the Gaussian mean (clipped to the Box).
    Head,
    /// SAC's and TQC's μ, or TD3's and DDPG's: tanh(μ) rescaled to the Box.
    Tanh,
}

/// One dense layer: W `[out, inp]`, its transpose (wide layers), b, the activation after it.
struct Layer {
    w: Vec<f32>,
    wt: Vec<f32>,
    b: Vec<f32>,
    inp: usize,
    out: usize,
    act: Option<Act>,
}

/// The Nature CNN's convolutions in front of the dense layers (`CnnPolicy`): the layers, their
/// weights and biases side by side (`[w0, b0, w1, b1, w2, b2]`, the layers' offsets), and the
/// workspace the calls share (the weights permuted to window order once, buffers kept).
struct Front {
    stack: ConvStack,
    theta: Vec<f32>,
    workspace: std::sync::Mutex<ConvWorkspace>,
}

/// The Nature CNN's strides (Mnih et al. 2015; its kernels and channels are the tensors').
const NATURE_STRIDES: [usize; 3] = [4, 2, 1];

/// A trained policy's actor, loaded from a checkpoint.
pub struct Policy {
    front: Option<Front>,
    obs_dim: usize,
    action: ActionSpace,
    layers: Vec<Layer>,
    output: Output,
    norm: Option<Normalization>,
}

impl Policy {
    /// Loads the policy of a checkpoint file.
    ///
    /// # Errors
    /// `Io`; `Checkpoint` for a file that is not a Proxima checkpoint or lacks a tensor the
    /// network needs; `Unsupported` for a recurrent or `Dict`-with-image policy.
    pub fn load(path: &Path) -> Result<Policy, Error> {
        let Contents { spec, norm, tensors } = checkpoint::read(path)?;
        let what = if spec.recurrent.is_some() {
            Some("a recurrent policy (MlpLstmPolicy)")
        } else {
            (!spec.inputs.is_empty()).then_some("a Dict observation with image keys")
        };
        if let Some(what) = what {
            return Err(Error::Unsupported(format!(
                "{}: {what} is not run by proxima-policy yet; export it to ONNX (proxima export --onnx)",
                path.display()
            )));
        }
        let (layers, front, output) = actor(&spec, &tensors, path)?;
        let action = match spec.action {
            Action::Discrete { n } => ActionSpace::Discrete { n },
            Action::MultiDiscrete { nvec } => ActionSpace::MultiDiscrete { nvec },
            Action::Continuous { low, high, .. } => ActionSpace::Box { low, high },
        };
        let norm = norm.filter(|n| n.obs_rms.is_some());
        let policy = Policy { front, obs_dim: spec.obs_dim, action, layers, output, norm };
        policy.check_chain(path)?;
        Ok(policy)
    }

    /// Every layer reads what the one before gives, and the head gives what the action space needs.
    fn check_chain(&self, path: &Path) -> Result<(), Error> {
        let mut width = self.front.as_ref().map_or(self.obs_dim, |f| f.stack.features());
        for l in &self.layers {
            if l.inp != width {
                return Err(Error::Checkpoint(format!(
                    "{}: a layer reads {} values, not {width}",
                    path.display(),
                    l.inp
                )));
            }
            width = l.out;
        }
        let head = match &self.action {
            ActionSpace::Discrete { n } => *n,
            ActionSpace::MultiDiscrete { nvec } => nvec.iter().sum(),
            ActionSpace::Box { low, .. } => low.len(),
        };
        if width != head {
            return Err(Error::Checkpoint(format!(
                "{}: the head gives {width} values, the actions need {head}",
                path.display()
            )));
        }
        Ok(())
    }

    /// Values per observation row.
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// The action space.
    pub fn action_space(&self) -> &ActionSpace {
        &self.action
    }

    /// Values per action row: 1 (`Discrete`), the components (`MultiDiscrete`), the dims (`Box`).
    pub fn action_width(&self) -> usize {
        match &self.action {
            ActionSpace::Discrete { .. } => 1,
            ActionSpace::MultiDiscrete { nvec } => nvec.len(),
            ActionSpace::Box { low, .. } => low.len(),
        }
    }

    /// The deterministic actions for `obs` `[rows, obs_dim]` (row-major), `[rows,
    /// action_width()]`: discrete indices as f32, `Box` actions ready for the env.
    ///
    /// # Errors
    /// `InvalidArgument` for observations that are not whole rows or not finite.
    pub fn act(&self, obs: &[f32]) -> Result<Vec<f32>, Error> {
        self.act_masked(obs, None)
    }

    /// [`Policy::act`] among the valid actions of `masks` `[rows, n]` (1 = valid; for
    /// `MultiDiscrete` the components' masks side by side), as sb3-contrib's `MaskablePPO`.
    ///
    /// # Errors
    /// As [`Policy::act`]; `InvalidArgument` for masks of another size, a row without a valid
    /// action, or masks on a `Box` space.
    pub fn act_masked(&self, obs: &[f32], masks: Option<&[u8]>) -> Result<Vec<f32>, Error> {
        let rows = self.rows_of(obs)?;
        let mut x = obs.to_vec();
        if let Some(n) = &self.norm {
            normalize(n, &mut x);
        }
        if let Some(f) = &self.front {
            // A panic inside a previous call leaves nothing half-made that the next one reads.
            let mut ws = f.workspace.lock().unwrap_or_else(|p| p.into_inner());
            f.stack.forward(&f.theta, 0, &mut ws, &x, rows, false);
            x = ws.features[..rows * f.stack.features()].to_vec();
        }
        for l in &self.layers {
            let mut y = vec![0f32; rows * l.out];
            dense_forward(&mut y, &x, (&l.w, &l.wt), &l.b, (rows, l.inp, l.out), l.act);
            x = y;
        }
        self.action_of(&mut x, rows, masks)
    }

    fn rows_of(&self, obs: &[f32]) -> Result<usize, Error> {
        let d = self.obs_dim;
        if obs.is_empty() || !obs.len().is_multiple_of(d) {
            return Err(Error::InvalidArgument(format!("{} observation values are not rows of {d}", obs.len())));
        }
        if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "non-finite observation value at row {}, column {}",
                i / d,
                i % d
            )));
        }
        Ok(obs.len() / d)
    }

    /// The action of each row of the head `out` `[rows, head]`.
    fn action_of(&self, out: &mut [f32], rows: usize, masks: Option<&[u8]>) -> Result<Vec<f32>, Error> {
        match (&self.action, self.output) {
            (ActionSpace::Box { .. }, _) if masks.is_some() => {
                Err(Error::InvalidArgument("masks select among discrete actions; this policy's are a Box".into()))
            }
            (ActionSpace::Box { low, high }, Output::Head) => Ok(out
                .chunks_exact(low.len())
                .flat_map(|r| r.iter().zip(low).zip(high).map(|((a, l), h)| a.clamp(*l, *h)))
                .collect()),
            (ActionSpace::Box { low, high }, Output::Tanh) => Ok(out
                .chunks_exact(low.len())
                .flat_map(|r| {
                    r.iter().zip(low).zip(high).map(|((m, l), h)| l + (m.tanh().clamp(-1.0, 1.0) + 1.0) * 0.5 * (h - l))
                })
                .collect()),
            (ActionSpace::Discrete { n }, _) => argmaxes(out, rows, &[*n], masks),
            (ActionSpace::MultiDiscrete { nvec }, _) => argmaxes(out, rows, nvec, masks),
        }
    }
}

/// Layer `name` of the checkpoint (`[out, in]` weight, bias), with the activation after it; the
/// transposed weight made for the wide layers the kernels read it for.
fn dense_layer(tensors: &checkpoint::Tensors, name: &str, act: Option<Act>, path: &Path) -> Result<Layer, Error> {
    let (ws, w, b) = checkpoint::layer(tensors, name, path)?;
    let (out, inp) = match ws[..] {
        [o, i] if b.len() == o && w.len() == o * i => (o, i),
        _ => return Err(Error::Checkpoint(format!("{}: `{name}` has a malformed shape {ws:?}", path.display()))),
    };
    let mut wt = Vec::new();
    if out >= NARROW {
        wt = vec![0f32; inp * out];
        transpose(&mut wt, w, (inp, out));
    }
    Ok(Layer { w: w.to_vec(), wt, b: b.to_vec(), inp, out, act })
}

/// The actor's layers by the checkpoint's parameter names: `CnnPolicy`'s CNN, dense layer and
/// head; SAC's/TQC's `actor.latent_pi.*` and `actor.mu`; TD3's/DDPG's `actor.mu.*`; a shared
/// `trunk.*` and `actor.0`; or the actor tower `actor.*`.
fn actor(
    spec: &checkpoint::Spec,
    tensors: &checkpoint::Tensors,
    path: &Path,
) -> Result<(Vec<Layer>, Option<Front>, Output), Error> {
    let take = |name: &str, act: Option<Act>| dense_layer(tensors, name, act, path);
    let hidden = Some(match spec.activation {
        Activation::Tanh => Act::Tanh,
        Activation::Relu => Act::Relu,
    });
    let n = spec.net_arch.len();
    let mut layers = Vec::new();
    if let Some(img) = spec.cnn {
        let front = cnn_front(tensors, img, path)?;
        layers.push(take("network.7", Some(Act::Relu))?);
        layers.push(take("actor", None)?);
        return Ok((layers, Some(front), Output::Head));
    }
    let output = if tensors.contains_key("actor.log_std.weight") {
        for i in 0..n {
            layers.push(take(&format!("actor.latent_pi.{}", 2 * i), Some(Act::Relu))?);
        }
        layers.push(take("actor.mu", None)?);
        Output::Tanh
    } else if tensors.keys().any(|k| k.starts_with("actor_target.")) {
        for i in 0..=n {
            layers.push(take(&format!("actor.mu.{}", 2 * i), (i < n).then_some(Act::Relu))?);
        }
        Output::Tanh
    } else if spec.shared_trunk {
        for i in 0..n {
            layers.push(take(&format!("trunk.{}", 2 * i), hidden)?);
        }
        layers.push(take("actor.0", None)?);
        Output::Head
    } else {
        for i in 0..=n {
            layers.push(take(&format!("actor.{}", 2 * i), if i < n { hidden } else { None })?);
        }
        Output::Head
    };
    Ok((layers, None, output))
}

/// The Nature CNN's convolutions of a `CnnPolicy` checkpoint (`network.0`, `.2`, `.4`), built as
/// the fused backend builds them: the pixels' layer divides by 255 (space-to-depth where its
/// kernel is a multiple of its stride), the others read channel-last.
fn cnn_front(tensors: &checkpoint::Tensors, img: Image, path: &Path) -> Result<Front, Error> {
    let mut shape = (img.channels, img.height, img.width);
    let (mut theta, mut layers) = (Vec::new(), Vec::new());
    for (i, &stride) in NATURE_STRIDES.iter().enumerate() {
        let name = format!("network.{}", 2 * i);
        let (ws, w, b) = checkpoint::layer(tensors, &name, path)?;
        let (out, k) = match ws[..] {
            [o, c, k, k2] if c == shape.0 && k == k2 && b.len() == o && shape.1 >= k && shape.2 >= k => (o, k),
            _ => {
                return Err(Error::Checkpoint(format!(
                    "{}: `{name}` of shape {ws:?} does not fit {shape:?}",
                    path.display()
                )))
            }
        };
        let at = (theta.len(), theta.len() + w.len());
        theta.extend_from_slice(w);
        theta.extend_from_slice(b);
        layers.push(if i == 0 {
            ConvLayer::pixels(at, shape, (k, stride, out), 255.0)
        } else {
            ConvLayer::new(at, shape, (k, stride, out), true, 1.0)
        });
        shape = (out, (shape.1 - k) / stride + 1, (shape.2 - k) / stride + 1);
    }
    Ok(Front { stack: ConvStack { layers }, theta, workspace: Default::default() })
}

/// ô = clip((o − μ)/√(σ² + 1e-8), ±clip_obs), columns in `obs_raw` passed through: the trainer's
/// own arithmetic ([`proxima_kernels::normalize::normalize_except`]).
fn normalize(n: &Normalization, x: &mut [f32]) {
    if let Some(rms) = &n.obs_rms {
        proxima_kernels::normalize::normalize_except(x, (&rms.mean, &rms.var), n.clip_obs, &n.obs_raw);
    }
}

/// The first index of the largest (masked) logit of each component of each row.
fn argmaxes(logits: &mut [f32], rows: usize, nvec: &[usize], masks: Option<&[u8]>) -> Result<Vec<f32>, Error> {
    let head: usize = nvec.iter().sum();
    if let Some(m) = masks {
        if m.len() != rows * head {
            return Err(Error::InvalidArgument(format!("{} mask values for {rows} rows of {head}", m.len())));
        }
        if let Some(v) = m.iter().find(|&&v| v > 1) {
            return Err(Error::InvalidArgument(format!("a mask value {v}: masks are 1 (valid) or 0 (masked)")));
        }
        for (l, &v) in logits.iter_mut().zip(m) {
            if v == 0 {
                *l = MASKED_LOGIT;
            }
        }
    }
    let mut actions = Vec::with_capacity(rows * nvec.len());
    for (r, row) in logits.chunks_exact(head).enumerate() {
        let mut off = 0;
        for (c, &k) in nvec.iter().enumerate() {
            if let Some(m) = masks {
                if m[r * head + off..r * head + off + k].iter().all(|&v| v == 0) {
                    return Err(Error::InvalidArgument(format!("row {r}, component {c}: no valid action in the mask")));
                }
            }
            let part = &row[off..off + k];
            let best = (0..k).fold(0, |b, i| if part[i] > part[b] { i } else { b });
            actions.push(best as f32);
            off += k;
        }
    }
    Ok(actions)
}
