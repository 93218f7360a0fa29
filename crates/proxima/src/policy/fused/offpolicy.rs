//! SAC's, TD3's and DDPG's networks on the fused kernels: the actor, the critics and their
//! targets of [`crate::policy::OffPolicyNets`] (SB3's names and layout, the same initial values
//! from a seed), each group — actor, critics, targets — one flat vector the optimiser steps in
//! place, with the passes the algorithms' closed-form gradient steps need ([`crate::algo::sac`],
//! [`crate::algo::td3`]): forward with every layer's output kept, backward into ∇θ, ∂Q/∂a through
//! the critics (no ∂W there: the actor's loss does not train them), and Polyak averaging in place.
//!
//! * SAC's actor: obs → `net_arch` ReLU layers → μ and log σ (SB3's `mu`, `log_std`), log σ
//!   clamped to [[`LOG_STD_MIN`], [`LOG_STD_MAX`]]; a = tanh(μ + σ·ε) ([`squash`]).
//! * TD3's and DDPG's actor: a = tanh(μ(s)), with a target copy.
//! * Critics: Q_k(s, a) = MLP_k([s, a]) → 1.
//!
//! Every product is [`super::kernels`]' (`chain_gemm`): a row's result does not depend on the
//! other rows of the batch, and a rerun gives the same bits.

use super::kernels::{activation_backward, dense_backward, dense_forward, transpose, NARROW};
use super::net::{grow, tower_backward, tower_forward, Layer};
use crate::error::{ProximaError, Result};
use crate::policy::interface::{ActOutput, FlatParams, Policy};
use crate::policy::offpolicy::{
    check_nets, initial_values, param_shapes_for, refuse_on_policy_losses, unscale_action, ActorKind, OffPolicyShape,
    LOG_STD_MAX, LOG_STD_MIN,
};
use crate::policy::spec::{Activation, PolicySpec};
use proxima_kernels::gemm::{chain_gemm, Rows, Start};
use proxima_kernels::View;
use rand::{Rng, RngCore};
use rand_distr::StandardNormal;

/// The actor's parameters: index of its vector in [`FusedOffPolicy::theta`].
pub const ACTOR: usize = 0;
/// The critics' parameters (qf0, qf1, …).
pub const CRITICS: usize = 1;
/// The targets' parameters: the target critics (laid out as [`CRITICS`]), then the target actor.
pub const TARGETS: usize = 2;

/// Which actor pass of a gradient step: on s (kept for the actor's backward) or on s'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The batch's observations s.
    Obs = 0,
    /// The batch's next observations s'.
    NextObs = 1,
}

/// The outputs of one tower's layers, `[rows, out]` each, grown as needed and reused.
#[derive(Clone, Debug, Default)]
struct Acts(Vec<Vec<f32>>);

impl Acts {
    fn ensure(&mut self, layers: &[Layer], rows: usize) {
        self.0.resize(layers.len(), Vec::new());
        for (o, l) in self.0.iter_mut().zip(layers) {
            grow(o, rows * l.out);
        }
    }

    fn last(&self, rows: usize, width: usize) -> &[f32] {
        &self.0[self.0.len() - 1][..rows * width]
    }
}

/// One critic's buffers: its layer outputs on the last input it saw and Q `[rows]`, the backward pass's
/// ping-pong buffers and ∂Q/∂(its input) `[rows, obs_dim + dim]`, whether that was formed.
#[derive(Clone, Debug, Default)]
struct CriticScratch {
    acts: Acts,
    q: Vec<f32>,
    dy: Vec<f32>,
    spare: Vec<f32>,
    d_in: Vec<f32>,
    used: bool,
}

impl CriticScratch {
    /// This critic's forward pass (`layers`, θ and its transposes `theta`) on `x` = [s, a]
    /// `[rows, obs_dim + dim]`: its layer outputs kept, Q `[rows, out]` in `q`.
    fn forward(&mut self, layers: &[Layer], x: &[f32], theta: (&[f32], &[f32]), (rows, out): (usize, usize)) {
        self.acts.ensure(layers, rows);
        tower_forward(layers, &mut self.acts.0, x, theta, rows, (Activation::Relu, false));
        self.q.clear();
        self.q.extend_from_slice(self.acts.last(rows, out));
    }
}

/// Runs `f(k, items[k])` for every k: the first half and the second half side by side when
/// `split` (each item's work is its own, so the bits are the same either way).
fn for_critics<T: Send>(split: bool, items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
    let run = |first: usize, part: &mut [T]| part.iter_mut().enumerate().for_each(|(k, x)| f(first + k, x));
    if split && items.len() >= 2 {
        let h = items.len() / 2;
        let (a, b) = items.split_at_mut(h);
        rayon::join(|| run(0, a), || run(h, b));
    } else {
        run(0, items);
    }
}

/// A gradient step's buffers.
#[derive(Debug, Default)]
struct Workspace {
    /// The actor's layer outputs on s and on s'.
    actor: [Acts; 2],
    /// SAC: μ, clamped log σ and the unclamped one, `[rows, dim]`, on s and on s'.
    mu: [Vec<f32>; 2],
    log_std: [Vec<f32>; 2],
    raw_log_std: [Vec<f32>; 2],
    /// Each critic's buffers, and Q_k `[rows]`.
    critics: Vec<CriticScratch>,
    q: Vec<Vec<f32>>,
    /// The actor's backward buffers (ping-pong, and the heads' ∂X), `[rows, widest]`.
    dy: Vec<f32>,
    spare: Vec<f32>,
    d_in: Vec<f32>,
    /// ∇θ of the actor and of the critics.
    grads: [Vec<f32>; 2],
}

/// An off-policy algorithm's networks on the fused kernels (see the module's description).
#[derive(Debug)]
pub struct FusedOffPolicy {
    spec: PolicySpec,
    shape: OffPolicyShape,
    shapes: Vec<(String, Vec<usize>)>,
    /// The parameters' names per vector (the optimiser's errors name them).
    names: [Vec<String>; 3],
    /// θ of the actor, the critics and the targets ([`ACTOR`], [`CRITICS`], [`TARGETS`]), each
    /// in parameter order.
    theta: [Vec<f32>; 3],
    /// The transposes of θ's weights of [`NARROW`] outputs or more, at θ's offsets.
    wt: [Vec<f32>; 3],
    /// SAC: the latent layers; deterministic: every layer of μ (offsets in the actor's θ).
    actor: Vec<Layer>,
    /// SAC's μ and log σ layers.
    heads: Option<(Layer, Layer)>,
    /// Each critic's layers (offsets in the critics' θ, and in the targets' for the targets).
    critics: Vec<Vec<Layer>>,
    /// The deterministic actor's target copy (offsets in the targets' θ).
    actor_target: Vec<Layer>,
    /// The layers of each vector ([`ACTOR`], [`CRITICS`], [`TARGETS`]), and the widest input
    /// or output of any (the backward buffers' width).
    layer_lists: [Vec<Layer>; 3],
    widest: usize,
    /// Two threads: the critics' halves side by side, the actor's products split by rows.
    split: bool,
    ws: Workspace,
}

impl FusedOffPolicy {
    /// Fresh networks for `spec`: the values [`crate::policy::OffPolicyNets::new`] draws from
    /// the same `rng`.
    ///
    /// # Errors
    /// As [`crate::policy::OffPolicyNets::new`].
    pub fn new<R: Rng + ?Sized>(spec: PolicySpec, kind: ActorKind, n_critics: usize, rng: &mut R) -> Result<Self> {
        Self::with_shape(spec, OffPolicyShape::new(kind, n_critics), rng)
    }

    /// [`FusedOffPolicy::new`] for networks of any [`OffPolicyShape`] (TQC's quantile critics).
    ///
    /// # Errors
    /// As [`crate::policy::OffPolicyNets::with_shape`].
    pub fn with_shape<R: Rng + ?Sized>(spec: PolicySpec, shape: OffPolicyShape, rng: &mut R) -> Result<Self> {
        let values = initial_values(&spec, shape, rng)?;
        let flat: Vec<Vec<f32>> = values.into_iter().flat_map(|(w, b)| [w, b]).collect();
        Self::from_params(spec, shape, &flat)
    }

    /// The networks holding `values`, one array per parameter in [`param_shapes_for`]'s order.
    ///
    /// # Errors
    /// `InvalidArgument` when the arrays do not have the parameters' sizes; as
    /// [`FusedOffPolicy::new`] for the spec.
    pub fn from_params(spec: PolicySpec, shape: OffPolicyShape, values: &[Vec<f32>]) -> Result<Self> {
        check_nets(&spec, shape)?;
        if !spec.inputs.is_empty() {
            return Err(ProximaError::Unsupported(
                "image keys in a Dict observation (MultiInputPolicy's CNNs) run on the candle backend (backend = \"candle\" or \"auto\") for now".into(),
            ));
        }
        let OffPolicyShape { kind, n_critics, .. } = shape;
        let shapes = param_shapes_for(&spec, shape);
        let sizes_match = values.len() == shapes.len()
            && values.iter().zip(&shapes).all(|(v, (_, s))| v.len() == s.iter().product::<usize>());
        if !sizes_match {
            return Err(ProximaError::InvalidArgument(format!(
                "the networks hold {} parameters; got {} arrays of other sizes",
                shapes.len(),
                values.len()
            )));
        }
        let mut theta: [Vec<f32>; 3] = Default::default();
        let mut names: [Vec<String>; 3] = Default::default();
        let mut layers: Vec<(String, Layer)> = Vec::new();
        for (pair, vals) in shapes.chunks(2).zip(values.chunks(2)) {
            let (wname, wshape) = &pair[0];
            let prefix = wname.trim_end_matches(".weight").to_string();
            let g = group_of(&prefix);
            let w = theta[g].len();
            theta[g].extend_from_slice(&vals[0]);
            let b = theta[g].len();
            theta[g].extend_from_slice(&vals[1]);
            names[g].extend([pair[0].0.clone(), pair[1].0.clone()]);
            layers.push((prefix, Layer { w, b, inp: wshape[1], out: wshape[0], activated: true }));
        }
        let tower = |start: &str, last_activated: bool| {
            let mut t: Vec<Layer> = layers.iter().filter(|(n, _)| n.starts_with(start)).map(|(_, l)| *l).collect();
            if let Some(l) = t.last_mut() {
                l.activated = last_activated;
            }
            t
        };
        let one = |name: &str| layers.iter().find(|(n, _)| n == name).map(|(_, l)| Layer { activated: false, ..*l });
        let (actor, heads) = match kind {
            ActorKind::SquashedGaussian => (
                tower("actor.latent_pi.", true),
                Some((one("actor.mu").expect("planned"), one("actor.log_std").expect("planned"))),
            ),
            ActorKind::Deterministic => (tower("actor.mu.", false), None),
        };
        let wt = [vec![0.0; theta[0].len()], vec![0.0; theta[1].len()], vec![0.0; theta[2].len()]];
        let mut nets = FusedOffPolicy {
            critics: (0..n_critics).map(|k| tower(&format!("critic.qf{k}."), false)).collect(),
            actor_target: tower("actor_target.mu.", false),
            spec,
            shape,
            shapes,
            names,
            theta,
            wt,
            actor,
            heads,
            layer_lists: Default::default(),
            widest: 1,
            split: false,
            ws: Workspace::default(),
        };
        nets.layer_lists = [ACTOR, CRITICS, TARGETS].map(|g| nets.layers_of(g));
        nets.widest = nets.layer_lists.iter().flatten().map(|l| l.inp.max(l.out)).max().unwrap_or(1);
        for g in [ACTOR, CRITICS, TARGETS] {
            nets.refresh_transposes(g);
        }
        Ok(nets)
    }

    /// Runs each gradient step on `threads` threads (rayon's pool): from 2, the critics' halves
    /// side by side and the actor's products split by rows, the same bits as one thread.
    pub fn set_threads(&mut self, threads: usize) {
        self.split = threads >= 2;
    }

    /// Whether steps run on two threads ([`FusedOffPolicy::set_threads`]).
    pub fn splits(&self) -> bool {
        self.split
    }

    /// The actor's kind.
    pub fn kind(&self) -> ActorKind {
        self.shape.kind
    }

    /// The number of critics.
    pub fn n_critics(&self) -> usize {
        self.shape.n_critics
    }

    /// The networks' shape.
    pub fn shape(&self) -> OffPolicyShape {
        self.shape
    }

    /// The parameter vector `g` ([`ACTOR`], [`CRITICS`], [`TARGETS`]).
    pub fn theta(&self, g: usize) -> &[f32] {
        &self.theta[g]
    }

    /// ∇θ of the actor ([`ACTOR`]) or the critics ([`CRITICS`]) from the last backward pass.
    pub fn grads(&self, g: usize) -> &[f32] {
        &self.ws.grads[g]
    }

    /// The size of each parameter of vector `g`, in order (the optimiser's moments).
    pub fn sizes(&self, g: usize) -> Vec<usize> {
        let prefix = |n: &str| group_of(n);
        self.shapes.iter().filter(|(n, _)| prefix(n) == g).map(|(_, s)| s.iter().product()).collect()
    }

    fn layers_of(&self, g: usize) -> Vec<Layer> {
        let critics = self.critics.iter().flatten().copied();
        match g {
            ACTOR => self.actor.iter().copied().chain(self.heads.iter().flat_map(|(m, s)| [*m, *s])).collect(),
            CRITICS => critics.collect(),
            _ => critics.chain(self.actor_target.iter().copied()).collect(),
        }
    }

    /// Makes `wt[g]` the transpose of θ[g]'s wide weights (after every change of θ[g]).
    fn refresh_transposes(&mut self, g: usize) {
        for l in self.layer_lists[g].iter().filter(|l| l.out >= NARROW) {
            transpose(&mut self.wt[g][l.w..l.b], &self.theta[g][l.w..l.b], (l.inp, l.out));
        }
    }

    /// SAC: μ and log σ (clamped) of π(·|s) for `rows` of `obs` `[rows, obs_dim]`, the layer
    /// outputs kept for [`FusedOffPolicy::actor_backward`] when `pass` is [`Pass::Obs`].
    pub fn sac_dist(&mut self, pass: Pass, obs: &[f32], rows: usize) -> (&[f32], &[f32]) {
        let (p, dim) = (pass as usize, self.spec.action.act_dim());
        let (mu_l, ls_l) = self.heads.expect("SAC's actor");
        let ws = &mut self.ws;
        ws.actor[p].ensure(&self.actor, rows);
        for v in [&mut ws.mu[p], &mut ws.log_std[p], &mut ws.raw_log_std[p]] {
            grow(v, rows * dim);
        }
        let (theta, wt) = (&self.theta[ACTOR][..], &self.wt[ACTOR][..]);
        let h = latent(&self.actor, &mut ws.actor[p], obs, (theta, wt), rows, (self.spec.obs_dim, self.split));
        head(&mut ws.mu[p], h, mu_l, (theta, wt), rows);
        head(&mut ws.raw_log_std[p], h, ls_l, (theta, wt), rows);
        for (c, &r) in ws.log_std[p][..rows * dim].iter_mut().zip(&ws.raw_log_std[p][..rows * dim]) {
            *c = r.clamp(LOG_STD_MIN as f32, LOG_STD_MAX as f32);
        }
        (&ws.mu[p][..rows * dim], &ws.log_std[p][..rows * dim])
    }

    /// The unclamped log σ of the last [`FusedOffPolicy::sac_dist`] of `pass` (`[rows, dim]`):
    /// where it lies outside [[`LOG_STD_MIN`], [`LOG_STD_MAX`]] the clamp passes no gradient.
    pub fn raw_log_std(&self, pass: Pass, rows: usize) -> &[f32] {
        &self.ws.raw_log_std[pass as usize][..rows * self.spec.action.act_dim()]
    }

    /// TD3's and DDPG's a = tanh(μ(s)) `[rows, dim]` of `obs` into `out` (the target actor's
    /// when `target`); the online actor's layer outputs are kept for
    /// [`FusedOffPolicy::actor_backward`].
    pub fn mu_action(&mut self, obs: &[f32], rows: usize, target: bool, out: &mut Vec<f32>) {
        let dim = self.spec.action.act_dim();
        let (layers, g) = if target { (&self.actor_target, TARGETS) } else { (&self.actor, ACTOR) };
        let acts = &mut self.ws.actor[Pass::Obs as usize];
        acts.ensure(layers, rows);
        tower_forward(layers, &mut acts.0, obs, (&self.theta[g], &self.wt[g]), rows, (Activation::Relu, self.split));
        grow(out, rows * dim);
        for (a, &m) in out[..rows * dim].iter_mut().zip(acts.last(rows, dim)) {
            *a = m.tanh();
        }
    }

    /// Q_k(s, a) `[rows, M]` of every critic (M = 1; TQC's quantiles) (of the targets when `target`) for `x` = [s, a]
    /// `[rows, obs_dim + dim]`; the layer outputs are kept for the backward passes.
    pub fn q_values(&mut self, x: &[f32], rows: usize, target: bool) -> &[Vec<f32>] {
        let g = if target { TARGETS } else { CRITICS };
        let ws = &mut self.ws;
        ws.critics.resize(self.shape.n_critics, CriticScratch::default());
        ws.q.resize(self.shape.n_critics, Vec::new());
        let (critics, theta) = (&self.critics, (&self.theta[g][..], &self.wt[g][..]));
        let out = self.shape.quantiles;
        for_critics(self.split, &mut ws.critics, |k, c| c.forward(&critics[k], x, theta, (rows, out)));
        for (q, c) in ws.q.iter_mut().zip(&ws.critics) {
            q.clear();
            q.extend_from_slice(&c.q);
        }
        &ws.q
    }

    /// Q_1(s, a) `[rows, M]` of the first online critic alone (SB3's `q1_forward`: TD3's actor
    /// loss reads no other) for `x` = [s, a] `[rows, obs_dim + dim]`, its layer outputs kept for
    /// [`FusedOffPolicy::q_action_grad`] with the other critics' ∂L/∂Q all 0. The same bits as
    /// [`FusedOffPolicy::q_values`]`(x, rows, false)[0]`, without the other critics' passes.
    pub fn q1_values(&mut self, x: &[f32], rows: usize) -> &[f32] {
        let ws = &mut self.ws;
        ws.critics.resize(self.shape.n_critics, CriticScratch::default());
        let theta = (&self.theta[CRITICS][..], &self.wt[CRITICS][..]);
        ws.critics[0].forward(&self.critics[0], x, theta, (rows, self.shape.quantiles));
        &ws.critics[0].q
    }

    /// ∇θ of the critics ([`FusedOffPolicy::grads`]`(CRITICS)`) for ∂L/∂Q_k = `dq[k]` `[rows, M]`,
    /// at the input `x` of the last [`FusedOffPolicy::q_values`] (online critics).
    pub fn critic_backward(&mut self, x: &[f32], dq: &[Vec<f32>], rows: usize) {
        let (n, widest) = (self.shape.n_critics, self.widest);
        let ws = &mut self.ws;
        grow(&mut ws.grads[1], self.theta[CRITICS].len());
        // Each critic's parameters are one range of ∇θ: cut it where the second half begins.
        let h = if self.split && n >= 2 { n / 2 } else { n };
        let out = self.shape.quantiles;
        let cut = if h < n { self.critics[h][0].w } else { ws.grads[1].len() };
        let (g0, g1) = ws.grads[1].split_at_mut(cut);
        let (s0, s1) = ws.critics.split_at_mut(h);
        let mut halves = [(g0, 0usize, s0), (g1, cut, s1)];
        let (critics, theta) = (&self.critics, &self.theta[CRITICS][..]);
        for_critics(h < n, &mut halves, |half, (grad, base, cs)| {
            for (i, c) in cs.iter_mut().enumerate() {
                let k = if half == 0 { i } else { h + i };
                grow(&mut c.dy, rows * widest);
                grow(&mut c.spare, rows * widest);
                c.dy[..rows * out].copy_from_slice(&dq[k][..rows * out]);
                let bufs = (&mut c.dy, &mut c.spare);
                let g = (&mut grad[..], *base);
                tower_backward(&critics[k], &c.acts.0, x, theta, g, bufs, None, rows, (Activation::Relu, false));
            }
        });
    }

    /// ∂L/∂a `[rows, dim]` into `d_a` for ∂L/∂Q_k = `dq[k]` `[rows, M]` through the online critics
    /// at the input of the last [`FusedOffPolicy::q_values`] (a critic whose `dq` is all 0 is
    /// skipped; the critics' parts added in their order): no ∂W is formed.
    pub fn q_action_grad(&mut self, dq: &[Vec<f32>], rows: usize, d_a: &mut [f32]) {
        let (od, dim, widest) = (self.spec.obs_dim, self.spec.action.act_dim(), self.widest);
        let ws = &mut self.ws;
        let (critics, theta, out) = (&self.critics, &self.theta[CRITICS][..], self.shape.quantiles);
        for_critics(self.split, &mut ws.critics, |k, c| {
            let dqk = &dq[k][..rows * out];
            c.used = dqk.iter().any(|&g| g != 0.0);
            if !c.used {
                return;
            }
            for v in [&mut c.dy, &mut c.spare, &mut c.d_in] {
                grow(v, rows * widest);
            }
            c.dy[..rows * out].copy_from_slice(dqk);
            input_grad(&critics[k], &c.acts.0, theta, (&mut c.dy, &mut c.spare), &mut c.d_in, rows);
        });
        d_a[..rows * dim].fill(0.0);
        for c in ws.critics.iter().filter(|c| c.used) {
            for (d, row) in d_a.chunks_exact_mut(dim).zip(c.d_in.chunks_exact(od + dim)).take(rows) {
                d.iter_mut().zip(&row[od..]).for_each(|(d, &g)| *d += g);
            }
        }
    }

    /// ∇θ of the actor ([`FusedOffPolicy::grads`]`(ACTOR)`) from the last actor pass on s
    /// (`obs`): SAC's ∂L/∂μ and ∂L/∂log σ (after the clamp: 0 where it cut) given as
    /// `(d_mu, Some(d_log_std))`; TD3's ∂L/∂a as `(d_a, None)` (through the tanh here).
    pub fn actor_backward(&mut self, obs: &[f32], (d_head, d_log_std): (&[f32], Option<&[f32]>), rows: usize) {
        let (dim, widest) = (self.spec.action.act_dim(), self.widest);
        let ws = &mut self.ws;
        grow(&mut ws.grads[0], self.theta[ACTOR].len());
        for v in [&mut ws.dy, &mut ws.spare, &mut ws.d_in] {
            grow(v, rows * widest);
        }
        let (theta, split) = (&self.theta[ACTOR], self.split);
        let acts = &ws.actor[Pass::Obs as usize].0;
        let grads = &mut ws.grads[0];
        match (self.heads, d_log_std) {
            (Some((mu_l, ls_l)), Some(d_ls)) => {
                let h = match acts.last() {
                    Some(h) if !self.actor.is_empty() => &h[..rows * mu_l.inp],
                    _ => &obs[..rows * mu_l.inp],
                };
                let width = mu_l.inp;
                for (l, dy, dx) in [(mu_l, d_head, &mut ws.d_in), (ls_l, d_ls, &mut ws.spare)] {
                    let (gw, gb) = grads[l.w..l.b + l.out].split_at_mut(l.b - l.w);
                    let dims = (rows, l.inp, l.out);
                    dense_backward(
                        gw,
                        gb,
                        Some(&mut dx[..rows * width]),
                        &dy[..rows * dim],
                        h,
                        &theta[l.w..l.b],
                        dims,
                        split,
                    );
                }
                for ((d, &a), &b) in
                    ws.dy[..rows * width].iter_mut().zip(&ws.d_in[..rows * width]).zip(&ws.spare[..rows * width])
                {
                    *d = a + b;
                }
                if self.actor.is_empty() {
                    return; // the heads read the observations
                }
                activation_backward(&mut ws.dy[..rows * width], h, Activation::Relu);
            }
            _ => {
                let a_pre = &acts[acts.len() - 1][..rows * dim];
                for ((d, &g), &m) in ws.dy[..rows * dim].iter_mut().zip(&d_head[..rows * dim]).zip(a_pre) {
                    let a = m.tanh();
                    *d = g * (1.0 - a * a);
                }
            }
        }
        let bufs = (&mut ws.dy, &mut ws.spare);
        tower_backward(&self.actor, acts, obs, theta, (grads, 0), bufs, None, rows, (Activation::Relu, self.split));
    }

    /// θ[g] ([`ACTOR`] or [`CRITICS`]) with the last backward pass's ∇θ, for an optimiser's step
    /// (`crate::algo::offpolicy::fused_optimizer_step`); call [`FusedOffPolicy::refresh`] after.
    pub fn flat(&mut self, g: usize) -> FlatParams<'_> {
        FlatParams { names: &self.names[g], values: &mut self.theta[g], grads: &mut self.ws.grads[g], halves: None }
    }

    /// Brings the transposed copies of θ[g] the passes read up to date, after θ[g] changed.
    pub fn refresh(&mut self, g: usize) {
        self.refresh_transposes(g);
    }

    /// θ̄ ← τ·θ + (1 − τ)·θ̄ for every target (the critics', and the deterministic actor's), in
    /// place, as [`crate::policy::OffPolicyNets::polyak_update`] rounds it.
    pub fn polyak_update(&mut self, tau: f64) {
        let (t, keep) = (tau as f32, (1.0 - tau) as f32);
        let [actor, critics, targets] = &mut self.theta;
        let (critic_t, actor_t) = targets.split_at_mut(critics.len());
        for (dst, &src) in critic_t.iter_mut().zip(&*critics).chain(actor_t.iter_mut().zip(&*actor)) {
            *dst = src * t + *dst * keep;
        }
        self.refresh_transposes(TARGETS);
    }

    /// SAC's actions and log-probabilities (deterministic: ε = 0) or the deterministic actor's,
    /// for acting: `(a [rows, dim], log π [rows])`, on fresh buffers (`&self`).
    fn act_host(&self, obs: &[f32], rows: usize, deterministic: bool, rng: &mut dyn RngCore) -> (Vec<f32>, Vec<f32>) {
        let dim = self.spec.action.act_dim();
        let mut acts = Acts::default();
        let (theta, wt) = (&self.theta[ACTOR][..], &self.wt[ACTOR][..]);
        match self.heads {
            Some((mu_l, ls_l)) => {
                acts.ensure(&self.actor, rows);
                let h = latent(&self.actor, &mut acts, obs, (theta, wt), rows, (self.spec.obs_dim, false));
                let (mut mu, mut ls) = (vec![0.0; rows * dim], vec![0.0; rows * dim]);
                head(&mut mu, h, mu_l, (theta, wt), rows);
                head(&mut ls, h, ls_l, (theta, wt), rows);
                ls.iter_mut().for_each(|v| *v = v.clamp(LOG_STD_MIN as f32, LOG_STD_MAX as f32));
                let eps: Vec<f32> = match deterministic {
                    true => vec![0.0; rows * dim],
                    false => (0..rows * dim).map(|_| rng.sample(StandardNormal)).collect(),
                };
                let (mut a, mut lp) = (vec![0.0; rows * dim], vec![0.0; rows]);
                squash((&mu, &ls, &eps), dim, &mut a, &mut lp);
                (a, lp)
            }
            None => {
                acts.ensure(&self.actor, rows);
                tower_forward(&self.actor, &mut acts.0, obs, (theta, wt), rows, (Activation::Relu, false));
                (acts.last(rows, dim).iter().map(|m| m.tanh()).collect(), vec![0.0; rows])
            }
        }
    }

    /// min_k Q_k(s, a) `[rows]` of the online critics (a critic of quantiles valued by their mean), on fresh buffers.
    fn min_q_host(&self, obs: &[f32], a: &[f32], rows: usize) -> Vec<f32> {
        let x = cat_rows(obs, a, rows);
        let mut m = vec![f32::INFINITY; rows];
        for layers in &self.critics {
            let mut acts = Acts::default();
            acts.ensure(layers, rows);
            tower_forward(
                layers,
                &mut acts.0,
                &x,
                (&self.theta[CRITICS], &self.wt[CRITICS]),
                rows,
                (Activation::Relu, false),
            );
            // A critic of quantiles (TQC) is valued by their mean.
            let out = self.shape.quantiles;
            let q = acts.last(rows, out).chunks_exact(out).map(|z| z.iter().sum::<f32>() / out as f32);
            m.iter_mut().zip(q).for_each(|(m, q)| *m = m.min(q));
        }
        m
    }

    fn rows_of(&self, obs: &[f32]) -> Result<usize> {
        let d = self.spec.obs_dim;
        if obs.is_empty() || obs.len() % d != 0 {
            return Err(ProximaError::InvalidArgument(format!(
                "observations of {} values are not rows of obs_dim = {d}",
                obs.len()
            )));
        }
        Ok(obs.len() / d)
    }
}

/// Which vector a parameter (or layer) named `name` lives in.
fn group_of(name: &str) -> usize {
    if name.starts_with("actor.") {
        ACTOR
    } else if name.starts_with("critic.") {
        CRITICS
    } else {
        TARGETS
    }
}

/// SAC's latent layers on `obs` (all ReLU): their last output `[rows, width]` (`obs` itself
/// when there are none).
fn latent<'a>(
    layers: &[Layer],
    acts: &'a mut Acts,
    obs: &'a [f32],
    theta: (&[f32], &[f32]),
    rows: usize,
    (od, split): (usize, bool),
) -> &'a [f32] {
    if layers.is_empty() {
        return &obs[..rows * od];
    }
    tower_forward(layers, &mut acts.0, obs, theta, rows, (Activation::Relu, split));
    let w = layers[layers.len() - 1].out;
    acts.last(rows, w)
}

/// One head layer (no activation) of `h` into `y`.
fn head(y: &mut [f32], h: &[f32], l: Layer, (theta, wt): (&[f32], &[f32]), rows: usize) {
    let w = (&theta[l.w..l.b], &wt[l.w..l.b]);
    dense_forward(y, h, w, &theta[l.b..l.b + l.out], (rows, l.inp, l.out), (None, false));
}

/// ∂L/∂(tower input) `[rows, inp]` into `d_in` for `dy` `[rows, last out]` entering the last
/// layer (already through its activation), through ReLU layers whose outputs are `outs`; `dy`
/// and `spare` are clobbered. Only ∂X = ∂Y·W per layer: no ∂W.
fn input_grad(
    layers: &[Layer],
    outs: &[Vec<f32>],
    theta: &[f32],
    (mut dy, mut spare): (&mut Vec<f32>, &mut Vec<f32>),
    d_in: &mut [f32],
    rows: usize,
) {
    for i in (0..layers.len()).rev() {
        let l = layers[i];
        let dst = if i > 0 { &mut spare[..rows * l.inp] } else { &mut d_in[..rows * l.inp] };
        let w = Rows { data: &theta[l.w..l.b], ld: l.inp };
        chain_gemm(dst, (rows, l.inp, l.out), View::rows(&dy[..rows * l.out], l.out), w, Start::Zero);
        if i > 0 {
            activation_backward(&mut spare[..rows * l.inp], &outs[i - 1][..rows * l.inp], Activation::Relu);
            std::mem::swap(&mut dy, &mut spare);
        }
    }
}

/// [s, a] `[rows, obs_dim + dim]` from `obs` `[rows, obs_dim]` and `a` `[rows, dim]`.
pub fn cat_rows(obs: &[f32], a: &[f32], rows: usize) -> Vec<f32> {
    let mut x = Vec::new();
    cat_rows_into(obs, a, rows, &mut x);
    x
}

/// [`cat_rows`] into a reused buffer.
pub fn cat_rows_into(obs: &[f32], a: &[f32], rows: usize, x: &mut Vec<f32>) {
    let (od, dim) = (obs.len() / rows.max(1), a.len() / rows.max(1));
    x.clear();
    for (o, a) in obs.chunks_exact(od).zip(a.chunks_exact(dim)).take(rows) {
        x.extend_from_slice(o);
        x.extend_from_slice(a);
    }
}

/// SAC's squashed-Gaussian sample from μ, log σ (clamped) and ε, all `[rows, dim]`: a = tanh(u)
/// with u = μ + σ·ε into `a`, and log π(a|s) = Σ_j [−ε_j²/2 − log σ_j − log(2π)/2 − log(1 −
/// tanh² u_j)] per row into `log_prob`, the correction as 2·(log 2 − u − softplus(−2u)) (exact and
/// finite for every u), the operations of [`crate::policy::offpolicy::squashed_sample`].
pub fn squash((mu, log_std, eps): (&[f32], &[f32], &[f32]), dim: usize, a: &mut [f32], log_prob: &mut [f32]) {
    let half_log_2pi = (0.5 * (2.0 * std::f64::consts::PI).ln()) as f32;
    let two_ln2 = (2.0 * std::f64::consts::LN_2) as f32;
    for (r, lp) in log_prob.iter_mut().enumerate() {
        let mut sum = 0f32;
        for j in r * dim..(r + 1) * dim {
            let u = mu[j] + log_std[j].exp() * eps[j];
            let log_normal = (eps[j] * eps[j] * -0.5 - log_std[j]) - half_log_2pi;
            let x = u * -2.0;
            let softplus = x.max(0.0) + (-x.abs()).exp().ln_1p();
            let correction = (-u - softplus) * 2.0 + two_ln2;
            sum += log_normal - correction;
            a[j] = u.tanh();
        }
        *lp = sum;
    }
}

/// ∂J/∂μ and ∂J/∂log σ `[rows, dim]` of a [`squash`] sample (a, ε and the unclamped log σ) for
/// ∂J/∂a `d_a`, where J also holds `w`·Σ_rows log π(a|s) (SAC's actor loss: `w` = α/B): through
/// a = tanh(u), ∂J/∂u = ∂J/∂a·(1 − a²) + w·2a (∂log π/∂u = 2·tanh u); ∂J/∂μ = ∂J/∂u; ∂J/∂log σ =
/// ∂J/∂u·σε − w, times the clamp's pass-through (1 inside [[`LOG_STD_MIN`], [`LOG_STD_MAX`]], ½ at
/// a bound as candle's maximum-then-minimum gives it, 0 outside).
pub fn squash_backward(
    (d_a, a, eps, raw_log_std): (&[f32], &[f32], &[f32], &[f32]),
    w: f32,
    (d_mu, d_log_std): (&mut [f32], &mut [f32]),
) {
    let (lo, hi) = (LOG_STD_MIN as f32, LOG_STD_MAX as f32);
    for j in 0..a.len() {
        let du = d_a[j] * (1.0 - a[j] * a[j]) + w * 2.0 * a[j];
        let raw = raw_log_std[j];
        let pass = if raw > lo && raw < hi {
            1.0
        } else if raw == lo || raw == hi {
            0.5
        } else {
            0.0
        };
        d_mu[j] = du;
        d_log_std[j] = (du * raw.clamp(lo, hi).exp() * eps[j] - w) * pass;
    }
}

impl Policy for FusedOffPolicy {
    fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    /// As [`crate::policy::OffPolicyNets`]' `act`: SAC samples (tanh(μ) when `deterministic`),
    /// the deterministic actors give tanh(μ(s)) with log π 0; the value is min_k Q_k(s, a).
    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput> {
        let rows = self.rows_of(obs)?;
        let (actions, log_probs) = self.act_host(obs, rows, deterministic, rng);
        Ok(ActOutput { values: self.min_q_host(obs, &actions, rows), actions, log_probs, head: Vec::new() })
    }

    /// min_k Q_k(s, a) of the deterministic action a (tanh(μ(s))).
    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        let rows = self.rows_of(obs)?;
        let mut unused = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0); // ε = 0: nothing drawn
        let (a, _) = self.act_host(obs, rows, true, &mut unused);
        Ok(self.min_q_host(obs, &a, rows))
    }

    refuse_on_policy_losses!();

    fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.shapes.clone()
    }

    fn params(&self) -> Result<Vec<Vec<f32>>> {
        let mut at = [0usize; 3];
        Ok(self
            .shapes
            .iter()
            .map(|(name, s)| {
                let (g, n) = (group_of(name), s.iter().product::<usize>());
                at[g] += n;
                self.theta[g][at[g] - n..at[g]].to_vec()
            })
            .collect())
    }

    fn set_params(&mut self, values: &[Vec<f32>]) -> Result<()> {
        let fresh = FusedOffPolicy::from_params(self.spec.clone(), self.shape, values)?;
        self.theta = fresh.theta;
        for g in [ACTOR, CRITICS, TARGETS] {
            self.refresh_transposes(g);
        }
        Ok(())
    }

    /// a ∈ [−1, 1] → low + (a + 1)·(high − low)/2 (SB3's `unscale_action`).
    fn env_action(&self, action: &mut [f32]) {
        unscale_action(&self.spec, action);
    }
}
