//! [`FusedMlp`]: the actor-critic MLP of [`PolicySpec`] on flat f32 buffers, with hand-written
//! forward and backward passes and the losses in closed form ([`super::heads`]).
//!
//! θ is one contiguous vector (every parameter row-major, in the spec's order, concatenated:
//! the candle network's names, shapes and layout, so checkpoints move between backends), ∇θ
//! another of the same layout. The activations of a minibatch are kept in a workspace that grows
//! to the largest batch seen and is then reused: after the first minibatch an update allocates
//! nothing. Inference (`act`, values) has its own workspace behind a `RefCell`, since the seam
//! lends the policy immutably there.

use super::heads::{head_loss, kl_sum, scratch_len, HeadBatch, HeadGrads, HeadLoss};
use super::kernels::{activation_backward, dense_backward, dense_forward, transpose, SMALL_BATCH};
use crate::error::{ProximaError, Result};
use crate::loss::PpoCoefs;
use crate::policy::interface::{ActOutput, FlatParams, LossReport, Policy};
use crate::policy::spec::{ActionKind, Activation, Part, PolicySpec};
use crate::rollout::Minibatch;
use rand::{Rng, RngCore};
use std::cell::RefCell;

/// One dense layer: offsets of its weight `[out, inp]` and bias `[out]` in θ.
#[derive(Clone, Copy, Debug)]
struct Layer {
    w: usize,
    b: usize,
    inp: usize,
    out: usize,
    /// The activation follows this layer (hidden layers, and a trunk's last).
    activated: bool,
}

/// The activations of one batch, per tower and layer (`[rows, out]` each), and the backward
/// pass's buffers. Grows with the batch and is reused.
#[derive(Debug, Default)]
struct Workspace {
    rows: usize,
    x: Vec<f32>,
    trunk: Vec<Vec<f32>>,
    actor: Vec<Vec<f32>>,
    critic: Vec<Vec<f32>>,
    d_head: Vec<f32>,
    d_values: Vec<f32>,
    log_ratio: Vec<f32>,
    scratch: Vec<f32>,
    /// Backward ping-pong buffers `[rows, widest]`, and the two heads' gradients at the trunk.
    d_a: Vec<f32>,
    d_b: Vec<f32>,
    d_trunk: Vec<f32>,
    d_trunk_critic: Vec<f32>,
    /// Inference: every weight transposed, at θ's offsets (for broadcast FMAs on small batches),
    /// and the [`FusedMlp`] θ version it was made from.
    wt: Vec<f32>,
    wt_version: Option<u64>,
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

impl Workspace {
    fn new(towers: [&[Layer]; 3], scratch_len: usize) -> Self {
        let outs = |t: &[Layer]| vec![Vec::new(); t.len()];
        Workspace {
            trunk: outs(towers[0]),
            actor: outs(towers[1]),
            critic: outs(towers[2]),
            scratch: vec![0.0; scratch_len],
            ..Default::default()
        }
    }

    /// Room for `rows` samples.
    fn ensure(&mut self, rows: usize, towers: [&[Layer]; 3], obs_dim: usize, head_dim: usize) {
        if rows <= self.rows {
            return;
        }
        self.rows = rows;
        grow(&mut self.x, rows * obs_dim);
        let mut widest = obs_dim.max(head_dim);
        for (outs, layers) in [&mut self.trunk, &mut self.actor, &mut self.critic].into_iter().zip(towers) {
            for (o, l) in outs.iter_mut().zip(layers) {
                grow(o, rows * l.out);
                widest = widest.max(l.out).max(l.inp);
            }
        }
        for v in [&mut self.d_a, &mut self.d_b, &mut self.d_trunk, &mut self.d_trunk_critic] {
            grow(v, rows * widest);
        }
        grow(&mut self.d_head, rows * head_dim);
        grow(&mut self.d_values, rows);
        grow(&mut self.log_ratio, rows);
    }
}

/// Forward through one tower's layers from `x` `[rows, inp]`, each output into `outs`; `wt`
/// holds every weight transposed (at θ's offsets), for small batches.
fn tower_forward(
    layers: &[Layer],
    outs: &mut [Vec<f32>],
    x: &[f32],
    (theta, wt): (&[f32], Option<&[f32]>),
    rows: usize,
    act: Activation,
) {
    for (i, l) in layers.iter().enumerate() {
        let (prev, cur) = outs.split_at_mut(i);
        let input = if i == 0 { x } else { &prev[i - 1][..] };
        let a = l.activated.then_some(act);
        let w = (&theta[l.w..l.b], wt.map(|t| &t[l.w..l.b]));
        dense_forward(&mut cur[0], input, w, &theta[l.b..l.b + l.out], (rows, l.inp, l.out), a);
    }
}

/// Backward through one tower: `dy` `[rows, last out]` enters at its last layer (already
/// through that layer's activation, if any); the gradients of every layer go to `grad`, and
/// ∂L/∂(tower input) to `d_in` when given. `dy` and `spare` are clobbered.
#[allow(clippy::too_many_arguments)]
fn tower_backward(
    layers: &[Layer],
    outs: &[Vec<f32>],
    x: &[f32],
    theta: &[f32],
    grad: &mut [f32],
    (mut dy, mut spare): (&mut Vec<f32>, &mut Vec<f32>),
    mut d_in: Option<&mut [f32]>,
    rows: usize,
    act: Activation,
) {
    for i in (0..layers.len()).rev() {
        let l = layers[i];
        let input = if i == 0 { x } else { &outs[i - 1][..] };
        let (gw, gb) = grad[l.w..l.b + l.out].split_at_mut(l.b - l.w);
        let dx = if i > 0 { Some(&mut spare[..rows * l.inp]) } else { d_in.as_deref_mut() };
        dense_backward(gw, gb, dx, &dy[..rows * l.out], input, &theta[l.w..l.b], (rows, l.inp, l.out));
        if i > 0 {
            activation_backward(&mut spare[..rows * l.inp], &outs[i - 1][..rows * l.inp], act);
            std::mem::swap(&mut dy, &mut spare);
        }
    }
}

/// The actor-critic of a [`PolicySpec`] on the fused CPU kernels (module docs).
#[derive(Debug)]
pub struct FusedMlp {
    spec: PolicySpec,
    names: Vec<String>,
    sizes: Vec<usize>,
    theta: Vec<f32>,
    grad: Vec<f32>,
    trunk: Vec<Layer>,
    actor: Vec<Layer>,
    critic: Vec<Layer>,
    /// Offset of the Gaussian log-std in θ.
    log_std: Option<usize>,
    train: Workspace,
    infer: RefCell<Workspace>,
    /// Rows of the last loss evaluated, until [`Policy::backward`].
    pending: Option<usize>,
    /// Rows of log r_t(θ) the last loss left in the workspace (0 after an A2C loss).
    log_ratio_rows: usize,
    /// Bumped whenever θ may have changed (the inference workspace's Wᵀ follows it).
    version: u64,
}

impl FusedMlp {
    /// Builds the network with the spec's initial parameters drawn from `rng`
    /// ([`PolicySpec::initial_params`]: the same values the candle network gets from the same
    /// RNG state).
    ///
    /// # Errors
    /// `InvalidArgument` for zero dims.
    pub fn new<R: Rng + ?Sized>(spec: PolicySpec, rng: &mut R) -> Result<Self> {
        spec.check_dims()?;
        let init = spec.initial_params(rng);
        Self::from_params(spec, &init)
    }

    /// The network with parameters `values` (in the spec's order and shapes).
    ///
    /// # Errors
    /// `InvalidArgument` for zero dims or a count or size mismatch.
    pub fn from_params(spec: PolicySpec, values: &[Vec<f32>]) -> Result<Self> {
        spec.check_dims()?;
        let shapes = spec.param_shapes();
        let names: Vec<String> = shapes.iter().map(|(n, _)| n.clone()).collect();
        let sizes: Vec<usize> = shapes.iter().map(|(_, s)| s.iter().product()).collect();
        let mut offsets = Vec::with_capacity(sizes.len());
        let mut total = 0;
        for s in &sizes {
            offsets.push(total);
            total += s;
        }
        let (mut trunk, mut actor, mut critic) = (Vec::new(), Vec::new(), Vec::new());
        for (k, l) in spec.plan().into_iter().enumerate() {
            let layer =
                Layer { w: offsets[2 * k], b: offsets[2 * k + 1], inp: l.fan_in, out: l.fan_out, activated: true };
            match l.part {
                Part::Trunk => trunk.push(layer),
                Part::Actor => actor.push(layer),
                Part::Critic => critic.push(layer),
            }
        }
        for tower in [&mut actor, &mut critic] {
            if let Some(last) = tower.last_mut() {
                last.activated = false;
            }
        }
        let log_std = matches!(spec.action, ActionKind::Continuous { .. }).then(|| offsets[offsets.len() - 1]);
        let (towers, sl) = ([&trunk[..], &actor[..], &critic[..]], scratch_len(&spec.action));
        let (train, infer) = (Workspace::new(towers, sl), RefCell::new(Workspace::new(towers, sl)));
        let mut net = FusedMlp {
            spec,
            names,
            sizes,
            theta: vec![0.0; total],
            grad: vec![0.0; total],
            trunk,
            actor,
            critic,
            log_std,
            train,
            infer,
            pending: None,
            log_ratio_rows: 0,
            version: 0,
        };
        net.set_params(values)?;
        Ok(net)
    }

    /// Total number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.theta.len()
    }

    /// A flat vector in θ's layout cut into one vector per parameter.
    fn per_param(&self, flat: &[f32]) -> Vec<Vec<f32>> {
        let mut off = 0;
        self.sizes
            .iter()
            .map(|&n| {
                off += n;
                flat[off - n..off].to_vec()
            })
            .collect()
    }

    fn towers(&self) -> [&[Layer]; 3] {
        [&self.trunk, &self.actor, &self.critic]
    }

    fn log_std_values(&self) -> &[f32] {
        match self.log_std {
            Some(o) => &self.theta[o..],
            None => &[],
        }
    }

    fn check_obs(&self, obs: &[f32]) -> Result<usize> {
        let od = self.spec.obs_dim;
        if !obs.len().is_multiple_of(od) {
            return Err(ProximaError::InvalidArgument(format!(
                "{} observation values are not rows of obs_dim {od}",
                obs.len()
            )));
        }
        Ok(obs.len() / od)
    }

    /// Forward of `rows` observations already in `ws.x`: head in `ws.actor.last()`, V(s) in
    /// `ws.critic.last()`. Small batches use `ws.wt` when it is current.
    fn forward(&self, ws: &mut Workspace, rows: usize) {
        let act = self.spec.activation;
        let wt = (ws.wt_version == Some(self.version)).then_some(&ws.wt[..]);
        let theta = (&self.theta[..], wt);
        let x = &ws.x[..rows * self.spec.obs_dim];
        let tower_in = if self.trunk.is_empty() {
            x
        } else {
            tower_forward(&self.trunk, &mut ws.trunk, x, theta, rows, act);
            &ws.trunk[self.trunk.len() - 1][..]
        };
        tower_forward(&self.actor, &mut ws.actor, tower_in, theta, rows, act);
        tower_forward(&self.critic, &mut ws.critic, tower_in, theta, rows, act);
    }

    /// Makes `ws.wt` the transpose of the current weights (once per θ).
    fn refresh_transposes(&self, ws: &mut Workspace) {
        if ws.wt_version == Some(self.version) {
            return;
        }
        grow(&mut ws.wt, self.theta.len());
        for l in self.trunk.iter().chain(&self.actor).chain(&self.critic) {
            transpose(&mut ws.wt[l.w..l.b], &self.theta[l.w..l.b], (l.inp, l.out));
        }
        ws.wt_version = Some(self.version);
    }

    /// Copies `obs` into the inference workspace and runs the forward pass; `f` reads it.
    fn infer<T>(&self, obs: &[f32], f: impl FnOnce(&Workspace, usize) -> T) -> Result<T> {
        let rows = self.check_obs(obs)?;
        let mut ws = self.infer.borrow_mut();
        ws.ensure(rows, self.towers(), self.spec.obs_dim, self.spec.action.head_dim());
        ws.x[..obs.len()].copy_from_slice(obs);
        if rows < SMALL_BATCH {
            self.refresh_transposes(&mut ws);
        }
        self.forward(&mut ws, rows);
        Ok(f(&ws, rows))
    }

    /// Evaluates `loss` on minibatch `mb` (forward into the training workspace, then the
    /// closed-form head), keeping what [`Policy::backward`] needs.
    fn eval_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], loss: HeadLoss) -> Result<LossReport> {
        let rows = mb.len;
        let (od, hd) = (self.spec.obs_dim, self.spec.action.head_dim());
        if mb.observations.len() != rows * od {
            return Err(ProximaError::InvalidArgument(format!(
                "minibatch of {rows} rows with {} observation values (obs_dim {od})",
                mb.observations.len()
            )));
        }
        let mut ws = std::mem::take(&mut self.train);
        ws.ensure(rows, self.towers(), od, hd);
        ws.x[..rows * od].copy_from_slice(&mb.observations);
        self.forward(&mut ws, rows);
        let (head, values) = (&ws.actor[self.actor.len() - 1][..rows * hd], &ws.critic[self.critic.len() - 1][..rows]);
        let log_std_off = self.log_std.unwrap_or(self.theta.len());
        let batch = HeadBatch {
            head,
            log_std: &self.theta[log_std_off..],
            values,
            actions: &mb.actions,
            old_log_prob: &mb.old_log_probs,
            advantages: &mb.advantages,
            old_values: &mb.old_values,
            returns: &mb.returns,
            old_head: &mb.old_head,
            old_log_std,
        };
        let mut grads = HeadGrads {
            d_head: &mut ws.d_head[..rows * hd],
            d_values: &mut ws.d_values[..rows],
            d_log_std: &mut self.grad[log_std_off..],
            log_ratio: &mut ws.log_ratio[..rows],
            scratch: &mut ws.scratch,
        };
        let out = head_loss(&self.spec.action, &batch, &loss, &mut grads);
        self.train = ws;
        self.log_ratio_rows = 0;
        let values = out?;
        self.pending = Some(rows);
        self.log_ratio_rows = if matches!(loss, HeadLoss::Ppo(_)) { rows } else { 0 };
        Ok(LossReport { values })
    }

    /// ∇θ of the last loss into `self.grad` (the log-std's part is already there).
    fn backward_in_place(&mut self) -> Result<()> {
        let rows = self
            .pending
            .take()
            .ok_or_else(|| ProximaError::InvalidArgument("backward without a loss evaluated before it".into()))?;
        let (act, od, hd) = (self.spec.activation, self.spec.obs_dim, self.spec.action.head_dim());
        let ws = &mut self.train;
        let (theta, grad) = (&self.theta[..], &mut self.grad[..]);
        let x = &ws.x[..rows * od];
        let shared = !self.trunk.is_empty();
        let tower_in: &[f32] = if shared { &ws.trunk[self.trunk.len() - 1] } else { x };
        let width = self.trunk.last().map_or(od, |l| l.out);
        ws.d_a[..rows * hd].copy_from_slice(&ws.d_head[..rows * hd]);
        let d_in = shared.then_some(&mut ws.d_trunk[..rows * width]);
        tower_backward(&self.actor, &ws.actor, tower_in, theta, grad, (&mut ws.d_a, &mut ws.d_b), d_in, rows, act);
        ws.d_a[..rows].copy_from_slice(&ws.d_values[..rows]);
        let d_in = shared.then_some(&mut ws.d_trunk_critic[..rows * width]);
        tower_backward(&self.critic, &ws.critic, tower_in, theta, grad, (&mut ws.d_a, &mut ws.d_b), d_in, rows, act);
        if shared {
            let n = rows * width;
            ws.d_a[..n]
                .iter_mut()
                .zip(&ws.d_trunk[..n])
                .zip(&ws.d_trunk_critic[..n])
                .for_each(|((d, &a), &c)| *d = a + c);
            activation_backward(&mut ws.d_a[..n], &ws.trunk[self.trunk.len() - 1][..n], act);
            tower_backward(&self.trunk, &ws.trunk, x, theta, grad, (&mut ws.d_a, &mut ws.d_b), None, rows, act);
        }
        Ok(())
    }
}

impl Policy for FusedMlp {
    fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput> {
        let mut out = ActOutput::default();
        self.act_into(obs, deterministic, rng, &mut out)?;
        Ok(out)
    }

    fn act_into(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore, out: &mut ActOutput) -> Result<()> {
        let (hd, kind, log_std) = (self.spec.action.head_dim(), &self.spec.action, self.log_std_values());
        let (na, nc) = (self.actor.len() - 1, self.critic.len() - 1);
        self.infer(obs, |ws, rows| {
            out.actions.clear();
            out.log_probs.clear();
            out.values.clear();
            out.values.extend_from_slice(&ws.critic[nc][..rows]);
            let mut scratch = [0f32; 64];
            let mut heap;
            let scratch: &mut [f32] = if hd <= 64 {
                &mut scratch[..hd]
            } else {
                heap = vec![0f32; hd];
                &mut heap
            };
            for row in ws.actor[na][..rows * hd].chunks_exact(hd) {
                let lp = kind.sample_row(row, log_std, deterministic, rng, scratch, &mut out.actions);
                out.log_probs.push(lp);
            }
        })
    }

    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        let nc = self.critic.len() - 1;
        self.infer(obs, |ws, rows| ws.critic[nc][..rows].to_vec())
    }

    fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        let (na, hd) = (self.actor.len() - 1, self.spec.action.head_dim());
        let head = self.infer(obs, |ws, rows| ws.actor[na][..rows * hd].to_vec())?;
        Ok((head, self.log_std_values().to_vec()))
    }

    fn ppo_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], coefs: &PpoCoefs) -> Result<LossReport> {
        self.eval_loss(mb, old_log_std, HeadLoss::Ppo(*coefs))
    }

    fn a2c_loss(&mut self, batch: &Minibatch, vf_coef: f64, ent_coef: f64) -> Result<LossReport> {
        self.eval_loss(batch, &[], HeadLoss::A2c { vf_coef, ent_coef })
    }

    fn log_ratio(&self) -> &[f32] {
        &self.train.log_ratio[..self.log_ratio_rows]
    }

    fn backward(&mut self) -> Result<Vec<Option<Vec<f32>>>> {
        self.backward_in_place()?;
        Ok(self.per_param(&self.grad).into_iter().map(Some).collect())
    }

    fn backward_flat(&mut self) -> Result<Option<FlatParams<'_>>> {
        self.backward_in_place()?;
        self.version += 1; // θ is lent mutably: the optimiser steps it
        Ok(Some(FlatParams { names: &self.names, values: &mut self.theta, grads: &self.grad }))
    }

    fn rollout_kl(&self, obs: &[f32], old_head: &[f32], old_log_std: &[f32]) -> Result<f64> {
        let (na, hd) = (self.actor.len() - 1, self.spec.action.head_dim());
        let log_std = self.log_std_values();
        let rows = self.check_obs(obs)?;
        if old_head.len() != rows * hd {
            return Err(ProximaError::InvalidArgument(format!(
                "π_θold's head has {} values for {rows} rows of head_dim {hd}",
                old_head.len()
            )));
        }
        let kind = &self.spec.action;
        let sum = self.infer(obs, |ws, rows| {
            let mut scratch = vec![0f32; scratch_len(kind)];
            kl_sum(kind, (old_head, old_log_std), &ws.actor[na][..rows * hd], log_std, &mut scratch)
        })?;
        Ok(sum / rows.max(1) as f64)
    }

    fn param_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn params(&self) -> Result<Vec<Vec<f32>>> {
        Ok(self.per_param(&self.theta))
    }

    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()> {
        if values.len() != self.sizes.len() || values.iter().zip(&self.sizes).any(|(v, &n)| v.len() != n) {
            return Err(ProximaError::InvalidArgument(format!(
                "{} parameter arrays for a network of {} (or a size mismatch)",
                values.len(),
                self.sizes.len()
            )));
        }
        let mut off = 0;
        for v in values {
            self.theta[off..off + v.len()].copy_from_slice(v);
            off += v.len();
        }
        self.pending = None;
        self.version += 1;
        Ok(())
    }
}
