//! Recurrent layers for recurrent PPO (sb3-contrib's `RecurrentPPO`, CleanRL's `ppo_atari_lstm.py`):
//! a stack of LSTM or GRU layers in PyTorch's parameterisation (`nn.LSTM` / `nn.GRU`, the
//! `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}` of each layer k), run one
//! step at a time while acting and over a whole rollout's sequences while learning, the hidden
//! state zeroed where an episode starts (sb3-contrib's `_process_sequence`: h ← (1 − start)·h
//! before the step). Two implementations of the same layers: on the fused kernels (each layer
//! over a whole sequence as one candle op, `crate::policy::recurrent_op`, its backward pass
//! through time written out: what `backend = "auto"` and `"fused"` run) and as candle ops step by
//! step, back-propagated by candle's autograd (the reference: `backend = "candle"`).
//!
//! LSTM (gates i, f, g, o in that order, as PyTorch stacks them):
//!   [i f g o] = W_ih·x + b_ih + W_hh·h + b_hh;  c' = σ(f)·c + σ(i)·tanh(g);  h' = σ(o)·tanh(c').
//! GRU (gates r, z, n):
//!   r = σ(W_ir·x + b_ir + W_hr·h + b_hr);  z = σ(W_iz·x + b_iz + W_hz·h + b_hz);
//!   n = tanh(W_in·x + b_in + r·(W_hn·h + b_hn));  h' = (1 − z)·n + z·h.

use crate::error::{ProximaError, Result};
use candle_core::{Device, Tensor, Var, D};
use rand::Rng;

/// Which recurrent cell (the config's `recurrent_cell`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellKind {
    /// Long short-term memory (Hochreiter & Schmidhuber 1997), sb3-contrib's only cell.
    #[default]
    Lstm,
    /// Gated recurrent unit (Cho et al. 2014).
    Gru,
}

impl CellKind {
    /// Gates per cell: 4 (LSTM), 3 (GRU); the rows of `weight_ih` are `gates · hidden`.
    pub fn gates(self) -> usize {
        match self {
            CellKind::Lstm => 4,
            CellKind::Gru => 3,
        }
    }

    /// Hidden-state vectors per layer: (h, c) for an LSTM, h for a GRU.
    pub fn states(self) -> usize {
        match self {
            CellKind::Lstm => 2,
            CellKind::Gru => 1,
        }
    }
}

/// The shape of a recurrent stack: cell, input width, hidden width, layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentShape {
    /// LSTM or GRU.
    pub cell: CellKind,
    /// Input features per step.
    pub input: usize,
    /// Hidden units per layer (sb3-contrib's `lstm_hidden_size`).
    pub hidden: usize,
    /// Stacked layers (sb3-contrib's `n_lstm_layers`).
    pub layers: usize,
}

impl RecurrentShape {
    /// The parameters' names under `prefix` (e.g. `lstm_actor`) and shapes, layer by layer:
    /// `weight_ih_l{k}` `[G·H, in_k]`, `weight_hh_l{k}` `[G·H, H]`, `bias_ih_l{k}` and
    /// `bias_hh_l{k}` `[G·H]` (G gates; in_0 = input, in_k = H above).
    pub fn param_shapes(&self, prefix: &str) -> Vec<(String, Vec<usize>)> {
        let gh = self.cell.gates() * self.hidden;
        (0..self.layers)
            .flat_map(|k| {
                let inp = if k == 0 { self.input } else { self.hidden };
                [
                    (format!("{prefix}.weight_ih_l{k}"), vec![gh, inp]),
                    (format!("{prefix}.weight_hh_l{k}"), vec![gh, self.hidden]),
                    (format!("{prefix}.bias_ih_l{k}"), vec![gh]),
                    (format!("{prefix}.bias_hh_l{k}"), vec![gh]),
                ]
            })
            .collect()
    }

    /// Values of one env's hidden state: layers × states × hidden (h then c, layer by layer).
    pub fn state_dim(&self) -> usize {
        self.layers * self.cell.states() * self.hidden
    }

    /// PyTorch's default initialisation of `nn.LSTM` / `nn.GRU` (which sb3-contrib keeps: its
    /// orthogonal init skips the recurrent layers): every weight and bias U(−1/√H, 1/√H), in
    /// [`RecurrentShape::param_shapes`]' order.
    pub fn initial_params<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<Vec<f32>> {
        let bound = 1.0 / (self.hidden as f32).sqrt();
        self.param_shapes("")
            .iter()
            .map(|(_, s)| (0..s.iter().product::<usize>()).map(|_| rng.random_range(-bound..bound)).collect())
            .collect()
    }
}

/// A recurrent policy's layers, with sb3-contrib's `RecurrentActorCriticPolicy` options: an
/// LSTM (or GRU) stack between the observation and the actor's MLP, and for the critic its own
/// stack (`enable_critic_lstm`, the default) or the actor's outputs without their gradient
/// (`shared_lstm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecurrentSpec {
    /// LSTM or GRU (the config's `recurrent_cell`).
    pub cell: CellKind,
    /// Hidden units per layer (`lstm_hidden_size`).
    pub hidden_size: usize,
    /// Stacked layers (`n_lstm_layers`).
    pub n_layers: usize,
    /// The critic reads the actor's recurrent outputs, detached (`shared_lstm`).
    pub shared_lstm: bool,
    /// The critic has a recurrent stack of its own (`enable_critic_lstm`).
    pub enable_critic_lstm: bool,
}

impl RecurrentSpec {
    /// The actor's stack over inputs of `input` features.
    pub fn actor(&self, input: usize) -> RecurrentShape {
        RecurrentShape { cell: self.cell, input, hidden: self.hidden_size, layers: self.n_layers }
    }

    /// The critic's own stack, when it has one.
    pub fn critic(&self, input: usize) -> Option<RecurrentShape> {
        self.enable_critic_lstm.then(|| self.actor(input))
    }

    /// Values of one env's hidden state: the actor's stack's, then the critic's.
    pub fn state_dim(&self) -> usize {
        let one = self.actor(0).state_dim();
        if self.enable_critic_lstm {
            2 * one
        } else {
            one
        }
    }

    /// sb3-contrib's rule: the critic's stack is its own, shared with the actor's, or (not
    /// supported here yet) absent.
    ///
    /// # Errors
    /// `InvalidArgument` for both `shared_lstm` and `enable_critic_lstm`, a zero size;
    /// `Unsupported` for neither.
    pub fn check(&self) -> Result<()> {
        if self.shared_lstm && self.enable_critic_lstm {
            return Err(ProximaError::InvalidArgument(
                "shared_lstm = true and enable_critic_lstm = true: the critic either shares the actor's LSTM or has its own (sb3-contrib's rule); set one of them false".into(),
            ));
        }
        if !self.shared_lstm && !self.enable_critic_lstm {
            return Err(ProximaError::Unsupported(
                "shared_lstm = false with enable_critic_lstm = false (sb3-contrib's linear critic without an LSTM) is not supported yet".into(),
            ));
        }
        if self.hidden_size == 0 || self.n_layers == 0 {
            return Err(ProximaError::InvalidArgument(format!(
                "lstm_hidden_size ({}) and n_lstm_layers ({}) must be positive",
                self.hidden_size, self.n_layers
            )));
        }
        Ok(())
    }
}

/// One layer's parameters.
#[derive(Clone, Debug)]
struct CellParams {
    w_ih: Var,
    w_hh: Var,
    b_ih: Var,
    b_hh: Var,
}

/// A recurrent stack on candle, its parameters as candle variables.
#[derive(Clone, Debug)]
pub struct Recurrent {
    shape: RecurrentShape,
    layers: Vec<CellParams>,
    /// Sequences run on the fused kernels (one op per layer) rather than step by step.
    kernels: bool,
}

/// The hidden state of B envs: per layer, h `[B, H]` (and c `[B, H]` for an LSTM).
#[derive(Clone, Debug)]
pub struct RecurrentState {
    /// Per layer: `[h]` or `[h, c]`.
    pub layers: Vec<Vec<Tensor>>,
}

impl Recurrent {
    /// The stack from `values` in [`RecurrentShape::param_shapes`]' order, on `device`;
    /// returns it and its variables in that order.
    ///
    /// # Errors
    /// `InvalidArgument` for values of the wrong number or sizes; tensor errors.
    pub fn new(shape: RecurrentShape, values: Vec<Vec<f32>>, device: &Device) -> Result<(Recurrent, Vec<Var>)> {
        let shapes = shape.param_shapes("");
        if values.len() != shapes.len()
            || values.iter().zip(&shapes).any(|(v, (_, s))| v.len() != s.iter().product::<usize>())
        {
            return Err(ProximaError::InvalidArgument(format!(
                "{} recurrent parameter arrays for a stack of {} (or a size mismatch)",
                values.len(),
                shapes.len()
            )));
        }
        let vars = values
            .into_iter()
            .zip(&shapes)
            .map(|(v, (_, s))| Ok(Var::from_tensor(&Tensor::from_vec(v, s.as_slice(), device)?)?))
            .collect::<Result<Vec<Var>>>()?;
        let layers = vars
            .chunks(4)
            .map(|p| CellParams { w_ih: p[0].clone(), w_hh: p[1].clone(), b_ih: p[2].clone(), b_hh: p[3].clone() })
            .collect();
        Ok((Recurrent { shape, layers, kernels: false }, vars))
    }

    /// Runs the sequences on the fused kernels ([`crate::policy::recurrent_op`]) when `on`, or
    /// step by step as candle ops (the reference) when not. The kernels run on the CPU only.
    pub fn set_kernels(&mut self, on: bool) {
        self.kernels = on;
    }

    /// Whether the sequences run on the fused kernels.
    pub fn kernels(&self) -> bool {
        self.kernels
    }

    /// The stack's shape.
    pub fn shape(&self) -> &RecurrentShape {
        &self.shape
    }

    /// B envs' hidden state from the host, `[B, state_dim]` as [`RecurrentShape::state_dim`]
    /// lays it out (layer by layer, h then c).
    ///
    /// # Errors
    /// `InvalidArgument` for a length that is not B rows; tensor errors.
    pub fn state_from_host(&self, state: &[f32], b: usize, device: &Device) -> Result<RecurrentState> {
        let (h, sd) = (self.shape.hidden, self.shape.state_dim());
        if state.len() != b * sd {
            return Err(ProximaError::InvalidArgument(format!(
                "a hidden state of {} values for {b} envs of {sd}",
                state.len()
            )));
        }
        let all = Tensor::from_slice(state, (b, sd), device)?;
        let per = self.shape.cell.states();
        let layers = (0..self.shape.layers)
            .map(|k| (0..per).map(|s| all.narrow(1, (k * per + s) * h, h)).collect::<candle_core::Result<Vec<_>>>())
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(RecurrentState { layers })
    }

    /// `state` back on the host, `[B, state_dim]`.
    ///
    /// # Errors
    /// Tensor errors.
    pub fn state_to_host(&self, state: &RecurrentState) -> Result<Vec<f32>> {
        let parts: Vec<&Tensor> = state.layers.iter().flatten().collect();
        Ok(Tensor::cat(&parts, 1)?.flatten_all()?.to_vec1::<f32>()?)
    }

    /// One step for B envs: `x` `[B, input]`, the state after the step and the top layer's
    /// output `[B, hidden]` (its h).
    ///
    /// # Errors
    /// Tensor errors on mismatched shapes.
    pub fn step(&self, x: &Tensor, state: &RecurrentState) -> Result<(Tensor, RecurrentState)> {
        let mut input = x.clone();
        let mut next = Vec::with_capacity(self.layers.len());
        for (p, s) in self.layers.iter().zip(&state.layers) {
            let layer_state = match self.shape.cell {
                CellKind::Lstm => lstm_cell(p, &input, &s[0], &s[1])?,
                CellKind::Gru => vec![gru_cell(p, &input, &s[0])?],
            };
            input = layer_state[0].clone();
            next.push(layer_state);
        }
        Ok((input, RecurrentState { layers: next }))
    }

    /// The stack over T steps of B envs, differentiable (back-propagation through time):
    /// `x` `[T·B, input]` time-major (row t·B + e), `episode_starts` `[T·B]` (1 where env e's
    /// step t starts an episode: its state is zeroed before the step), `state0` the state before
    /// step 0. Returns the top layer's outputs `[T·B, hidden]` (time-major) and the state after
    /// step T − 1.
    ///
    /// # Errors
    /// `InvalidArgument` when `x` is not T·B rows; tensor errors.
    pub fn sequence(
        &self,
        x: &Tensor,
        episode_starts: &Tensor,
        state0: &RecurrentState,
        b: usize,
    ) -> Result<(Tensor, RecurrentState)> {
        let rows = x.dim(0)?;
        if b == 0 || rows % b != 0 {
            return Err(ProximaError::InvalidArgument(format!("{rows} rows are not sequences of {b} envs")));
        }
        if self.kernels && x.device().is_cpu() && x.dtype() == candle_core::DType::F32 {
            return self.sequence_on_kernels(x, episode_starts, state0, b);
        }
        let keep = episode_starts.affine(-1.0, 1.0)?.to_dtype(x.dtype())?;
        let mut state = state0.clone();
        let mut outputs = Vec::with_capacity(rows / b);
        for t in 0..rows / b {
            let k = keep.narrow(0, t * b, b)?.unsqueeze(1)?;
            let kept = RecurrentState {
                layers: state
                    .layers
                    .iter()
                    .map(|s| s.iter().map(|v| v.broadcast_mul(&k)).collect::<candle_core::Result<Vec<_>>>())
                    .collect::<candle_core::Result<Vec<_>>>()?,
            };
            let (out, next) = self.step(&x.narrow(0, t * b, b)?, &kept)?;
            outputs.push(out);
            state = next;
        }
        Ok((Tensor::cat(&outputs, 0)?, state))
    }
}

impl Recurrent {
    /// [`Recurrent::sequence`] on the fused kernels: layer by layer, each over the whole sequence.
    fn sequence_on_kernels(
        &self,
        x: &Tensor,
        episode_starts: &Tensor,
        state0: &RecurrentState,
        b: usize,
    ) -> Result<(Tensor, RecurrentState)> {
        let keep: Vec<f32> =
            episode_starts.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?.iter().map(|s| 1.0 - s).collect();
        let cell = match self.shape.cell {
            CellKind::Lstm => proxima_kernels::recurrent::Cell::Lstm,
            CellKind::Gru => proxima_kernels::recurrent::Cell::Gru,
        };
        let mut input = x.clone();
        let mut next = Vec::with_capacity(self.layers.len());
        for (p, s) in self.layers.iter().zip(&state0.layers) {
            let layer = proxima_kernels::recurrent::Layer {
                cell,
                input: input.dim(1)?,
                hidden: self.shape.hidden,
                steps: keep.len() / b,
                envs: b,
            };
            let flat = [&p.w_ih, &p.w_hh, &p.b_ih, &p.b_hh].map(|v| v.as_tensor().flatten_all());
            let params = Tensor::cat(&flat.into_iter().collect::<candle_core::Result<Vec<_>>>()?, 0)?;
            let h0 = s[0].flatten_all()?.to_vec1::<f32>()?;
            let c0 = match s.get(1) {
                Some(c) => c.flatten_all()?.to_vec1::<f32>()?,
                None => Vec::new(),
            };
            let (out, (h, c)) = crate::policy::recurrent_op::sequence(layer, &input, &params, keep.clone(), (h0, c0))?;
            let mut layer_state = vec![Tensor::from_vec(h, (b, self.shape.hidden), x.device())?];
            if !c.is_empty() {
                layer_state.push(Tensor::from_vec(c, (b, self.shape.hidden), x.device())?);
            }
            next.push(layer_state);
            input = out;
        }
        Ok((input, RecurrentState { layers: next }))
    }
}

/// `x·Wᵀ + b`.
fn affine(x: &Tensor, w: &Var, b: &Var) -> candle_core::Result<Tensor> {
    x.matmul(&w.as_tensor().t()?)?.broadcast_add(b.as_tensor())
}

/// One LSTM step: `[h', c']`.
fn lstm_cell(p: &CellParams, x: &Tensor, h: &Tensor, c: &Tensor) -> candle_core::Result<Vec<Tensor>> {
    let gates = (affine(x, &p.w_ih, &p.b_ih)? + affine(h, &p.w_hh, &p.b_hh)?)?;
    let chunks = gates.chunk(4, D::Minus1)?;
    let (i, f, g, o) = (sigmoid(&chunks[0])?, sigmoid(&chunks[1])?, chunks[2].tanh()?, sigmoid(&chunks[3])?);
    let c_next = ((f * c)? + (i * g)?)?;
    let h_next = (o * c_next.tanh()?)?;
    Ok(vec![h_next, c_next])
}

/// One GRU step: h'.
fn gru_cell(p: &CellParams, x: &Tensor, h: &Tensor) -> candle_core::Result<Tensor> {
    let gi = affine(x, &p.w_ih, &p.b_ih)?.chunk(3, D::Minus1)?;
    let gh = affine(h, &p.w_hh, &p.b_hh)?.chunk(3, D::Minus1)?;
    let r = sigmoid(&(&gi[0] + &gh[0])?)?;
    let z = sigmoid(&(&gi[1] + &gh[1])?)?;
    let n = (&gi[2] + (r * &gh[2])?)?.tanh()?;
    // (1 − z)·n + z·h = n + z·(h − n)
    &n + (z * (h - &n)?)?
}

/// σ(x) = 1 / (1 + e^(−x)), differentiable.
fn sigmoid(x: &Tensor) -> candle_core::Result<Tensor> {
    (x.neg()?.exp()? + 1.0)?.recip()
}
