//! The fused network's structure and passes: its dense layers ([`Layer`], offsets into θ), the
//! per-batch [`Workspace`], and [`Net`]: forward, the closed-form loss of a minibatch's rows and
//! backward, on θ and ∇θ slices given by the caller (so several row shards can run at once on
//! one θ).

use super::batched_head::{cols_len, head_loss_f32, policy_head_f32};
use super::heads::{check_head_batch, combine_parts, scratch_len, value_head, HeadBatch, HeadGrads, HeadLoss};
use super::kernels::{activation_backward, dense_backward, dense_forward, transpose, NARROW};
use super::second_thread::SecondThread;
use crate::error::Result;
use crate::policy::distributions::mask_logits_in_place;
use crate::policy::spec::{ActionKind, Activation, Part, PolicySpec};
use crate::rollout::Minibatch;

/// One dense layer: offsets of its weight `[out, inp]` and bias `[out]` in θ.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layer {
    pub w: usize,
    pub b: usize,
    pub inp: usize,
    pub out: usize,
    /// The activation follows this layer (hidden layers, and a trunk's last).
    pub activated: bool,
}

/// The activations of one batch, per tower and layer (`[rows, out]` each), and the backward
/// pass's buffers. Grows with the batch and is reused.
#[derive(Debug, Default)]
pub(super) struct Workspace {
    rows: usize,
    pub x: Vec<f32>,
    trunk: Vec<Vec<f32>>,
    pub actor: Vec<Vec<f32>>,
    pub critic: Vec<Vec<f32>>,
    d_head: Vec<f32>,
    d_values: Vec<f32>,
    pub log_ratio: Vec<f32>,
    scratch: Vec<f32>,
    /// The batched policy head's columns ([`cols_len`]).
    head_cols: Vec<f32>,
    /// Backward ping-pong buffers `[rows, widest]` (the actor's, then the critic's: the two
    /// towers may run at once), and the two heads' gradients at the trunk.
    d_a: Vec<f32>,
    d_b: Vec<f32>,
    d_c: Vec<f32>,
    d_d: Vec<f32>,
    d_trunk: Vec<f32>,
    d_trunk_critic: Vec<f32>,
    /// Every weight of [`NARROW`] outputs or more transposed, at θ's offsets (the forward pass's
    /// B operand), and the θ version it was made from.
    wt: Vec<f32>,
    wt_version: Option<u64>,
}

pub(super) fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

impl Workspace {
    pub fn new(towers: [&[Layer]; 3], scratch_len: usize) -> Self {
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
    pub fn ensure(&mut self, rows: usize, towers: [&[Layer]; 3], obs_dim: usize, head_dim: usize) {
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
        for v in
            [&mut self.d_a, &mut self.d_b, &mut self.d_c, &mut self.d_d, &mut self.d_trunk, &mut self.d_trunk_critic]
        {
            grow(v, rows * widest);
        }
        grow(&mut self.d_head, rows * head_dim);
        grow(&mut self.d_values, rows);
        grow(&mut self.log_ratio, rows);
        grow(&mut self.head_cols, cols_len(head_dim, rows));
    }
}

/// Forward through one tower's layers from `x` `[rows, inp]`, each output into `outs`; `wt`
/// holds every weight of [`NARROW`] outputs or more transposed (at θ's offsets).
pub(super) fn tower_forward(
    layers: &[Layer],
    outs: &mut [Vec<f32>],
    x: &[f32],
    (theta, wt): (&[f32], &[f32]),
    rows: usize,
    (act, split): (Activation, bool),
) {
    for (i, l) in layers.iter().enumerate() {
        let (prev, cur) = outs.split_at_mut(i);
        let input = if i == 0 { x } else { &prev[i - 1][..] };
        let a = l.activated.then_some(act);
        let w = (&theta[l.w..l.b], &wt[l.w..l.b]);
        dense_forward(&mut cur[0], input, w, &theta[l.b..l.b + l.out], (rows, l.inp, l.out), (a, split));
    }
}

/// Backward through one tower: `dy` `[rows, last out]` enters at its last layer (already
/// through that layer's activation, if any); the gradients of every layer go to `grad` (the part
/// of ∇θ that starts at θ offset `base`), and ∂L/∂(tower input) to `d_in` when given. `dy` and
/// `spare` are clobbered.
#[allow(clippy::too_many_arguments)]
pub(super) fn tower_backward(
    layers: &[Layer],
    outs: &[Vec<f32>],
    x: &[f32],
    theta: &[f32],
    (grad, base): (&mut [f32], usize),
    (mut dy, mut spare): (&mut Vec<f32>, &mut Vec<f32>),
    mut d_in: Option<&mut [f32]>,
    rows: usize,
    (act, split): (Activation, bool),
) {
    for i in (0..layers.len()).rev() {
        let l = layers[i];
        let input = if i == 0 { x } else { &outs[i - 1][..] };
        let (gw, gb) = grad[l.w - base..l.b + l.out - base].split_at_mut(l.b - l.w);
        let dx = if i > 0 { Some(&mut spare[..rows * l.inp]) } else { d_in.as_deref_mut() };
        dense_backward(gw, gb, dx, &dy[..rows * l.out], input, &theta[l.w..l.b], (rows, l.inp, l.out), split);
        if i > 0 {
            activation_backward(&mut spare[..rows * l.inp], &outs[i - 1][..rows * l.inp], act);
            std::mem::swap(&mut dy, &mut spare);
        }
    }
}

/// The rows `r` of a minibatch, as the loss reads them.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    pub observations: &'a [f32],
    pub actions: &'a [f32],
    pub old_log_probs: &'a [f32],
    pub advantages: &'a [f32],
    pub old_values: &'a [f32],
    pub returns: &'a [f32],
    pub old_head: &'a [f32],
    /// `[rows, head_dim]`, 1 = valid (empty: not masked).
    pub action_masks: &'a [u8],
}

impl<'a> Rows<'a> {
    /// Rows `r` of `mb` (`od`, `ad`, `hd`: observation, stored action and head widths).
    pub fn of(mb: &'a Minibatch, r: std::ops::Range<usize>, (od, ad, hd): (usize, usize, usize)) -> Self {
        let old_head = if mb.old_head.is_empty() { &[][..] } else { &mb.old_head[r.start * hd..r.end * hd] };
        let action_masks =
            if mb.action_masks.is_empty() { &[][..] } else { &mb.action_masks[r.start * hd..r.end * hd] };
        Rows {
            observations: &mb.observations[r.start * od..r.end * od],
            actions: &mb.actions[r.start * ad..r.end * ad],
            old_log_probs: &mb.old_log_probs[r.clone()],
            advantages: &mb.advantages[r.clone()],
            old_values: &mb.old_values[r.clone()],
            returns: &mb.returns[r],
            old_head,
            action_masks,
        }
    }

    fn len(&self) -> usize {
        self.old_log_probs.len()
    }

    /// These rows as the heads read them, with θ's log σ and π_θold's, the means over
    /// `mean_over` rows; `head` and `values` (the network's outputs) are left empty for the
    /// caller to fill in.
    fn head_batch(&self, log_std: &'a [f32], old_log_std: &'a [f32], mean_over: usize) -> HeadBatch<'a, f32> {
        HeadBatch {
            head: &[],
            log_std,
            values: &[],
            actions: self.actions,
            old_log_prob: self.old_log_probs,
            advantages: self.advantages,
            old_values: self.old_values,
            returns: self.returns,
            old_head: self.old_head,
            old_log_std,
            mean_over,
        }
    }
}

/// The network of a [`PolicySpec`] as layers over a flat θ.
#[derive(Debug)]
pub(super) struct Net {
    pub spec: PolicySpec,
    pub trunk: Vec<Layer>,
    pub actor: Vec<Layer>,
    pub critic: Vec<Layer>,
    /// Offset of the Gaussian log-std in θ.
    pub log_std: Option<usize>,
    /// With a second thread, the actor and critic towers run side by side for batches of at
    /// least [`PARALLEL_MIN_ROWS`]. Each tower's arithmetic is the same either way, so the
    /// results are bit for bit those of one thread.
    pub second_thread: Option<SecondThread>,
    /// The shared trunk's products split in two halves side by side on rayon's pool (the CNN's
    /// dense layer; the same bits either way).
    pub split_trunk: bool,
}

/// Which towers a forward pass runs (the trunk, if any, always).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Towers {
    /// Policy head and V(s).
    Both,
    /// The policy head only (π_θold's head, the KL at the new θ).
    Actor,
    /// V(s) only.
    Critic,
}

/// Below this many rows a tower's pass is too short to be worth a second thread (CartPole's
/// network, `bench update`: 64 rows took 39-40 µs on two threads against 34-36 µs on one; 128
/// rows 52-53 µs against 60-63 µs).
pub(super) const PARALLEL_MIN_ROWS: usize = 128;

/// Runs `a` and `b`: side by side on the second thread when there is one, else one after the other.
fn both(second_thread: Option<&SecondThread>, a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    match second_thread {
        Some(h) => h.join(a, b),
        None => {
            a();
            b();
        }
    }
}

impl Net {
    /// The layers of `spec`, with `offsets[i]` the start of parameter i in θ.
    pub fn new(spec: PolicySpec, offsets: &[usize]) -> Self {
        let (mut trunk, mut actor, mut critic) = (Vec::new(), Vec::new(), Vec::new());
        for (k, l) in spec.plan().into_iter().enumerate() {
            let layer =
                Layer { w: offsets[2 * k], b: offsets[2 * k + 1], inp: l.fan_in, out: l.fan_out, activated: true };
            match l.part {
                Part::Trunk => trunk.push(layer),
                Part::Actor => actor.push(layer),
                Part::Critic => critic.push(layer),
                Part::Aux => {} // refused by `FusedMlp::from_params`
            }
        }
        for tower in [&mut actor, &mut critic] {
            if let Some(last) = tower.last_mut() {
                last.activated = false;
            }
        }
        let log_std = matches!(spec.action, ActionKind::Continuous { .. }).then(|| offsets[offsets.len() - 1]);
        Net { spec, trunk, actor, critic, log_std, second_thread: None, split_trunk: false }
    }

    pub fn towers(&self) -> [&[Layer]; 3] {
        [&self.trunk, &self.actor, &self.critic]
    }

    /// A workspace for this network (empty until [`Workspace::ensure`]).
    pub fn workspace(&self) -> Workspace {
        Workspace::new(self.towers(), scratch_len(&self.spec.action))
    }

    /// Makes room for `rows` in `ws`.
    pub fn ensure(&self, ws: &mut Workspace, rows: usize) {
        ws.ensure(rows, self.towers(), self.spec.obs_dim, self.spec.action.head_dim());
    }

    /// Forward of `rows` observations already in `ws.x` at θ, θ being at `version` (see
    /// [`Net::refresh_transposes`]): head in `ws.actor.last()`, V(s) in `ws.critic.last()` (of the
    /// `towers` run; the other's buffers keep older values).
    pub fn forward(&self, theta: &[f32], version: u64, ws: &mut Workspace, rows: usize, towers: Towers) {
        self.refresh_transposes(theta, version, ws);
        let act = self.spec.activation;
        let theta = (theta, &ws.wt[..]);
        let x = &ws.x[..rows * self.spec.obs_dim];
        let tower_in = if self.trunk.is_empty() {
            x
        } else {
            tower_forward(&self.trunk, &mut ws.trunk, x, theta, rows, (act, self.split_trunk));
            &ws.trunk[self.trunk.len() - 1][..]
        };
        let (actor, critic) = (&mut ws.actor, &mut ws.critic);
        match towers {
            Towers::Both => both(
                self.second_thread.as_ref().filter(|_| rows >= PARALLEL_MIN_ROWS),
                || tower_forward(&self.actor, actor, tower_in, theta, rows, (act, false)),
                || tower_forward(&self.critic, critic, tower_in, theta, rows, (act, false)),
            ),
            Towers::Actor => tower_forward(&self.actor, actor, tower_in, theta, rows, (act, false)),
            Towers::Critic => tower_forward(&self.critic, critic, tower_in, theta, rows, (act, false)),
        }
    }

    /// Makes `ws.wt` the transpose of θ's weights of [`NARROW`] outputs or more, θ being at
    /// `version` (once per version: the caller bumps it whenever θ may have changed).
    fn refresh_transposes(&self, theta: &[f32], version: u64, ws: &mut Workspace) {
        if ws.wt_version == Some(version) {
            return;
        }
        grow(&mut ws.wt, theta.len());
        for l in self.trunk.iter().chain(&self.actor).chain(&self.critic).filter(|l| l.out >= NARROW) {
            transpose(&mut ws.wt[l.w..l.b], &theta[l.w..l.b], (l.inp, l.out));
        }
        ws.wt_version = Some(version);
    }

    /// The loss of minibatch rows `mb` at θ (at `version`: see [`Net::forward`]; forward into
    /// `ws`, then the closed-form head), its parts
    /// as means over `mean_over` rows (the whole minibatch's, when `mb` is one shard of it);
    /// ∂L/∂log σ goes to `grad`, log r to `ws.log_ratio`, the rest stays in `ws` for
    /// [`Net::backward`]. The heads are [`head_loss_f32`]'s.
    ///
    /// # Errors
    /// [`head_loss_f32`]'s.
    pub fn loss(
        &self,
        (theta, version, grad): (&[f32], u64, &mut [f32]),
        ws: &mut Workspace,
        mb: &Rows<'_>,
        (old_log_std, loss, mean_over): (&[f32], &HeadLoss, usize),
    ) -> Result<[f32; 4]> {
        let (rows, od, hd) = (mb.len(), self.spec.obs_dim, self.spec.action.head_dim());
        self.ensure(ws, rows);
        ws.x[..rows * od].copy_from_slice(mb.observations);
        self.forward(theta, version, ws, rows, Towers::Both);
        mask_logits_in_place(&mut ws.actor[self.actor.len() - 1][..rows * hd], mb.action_masks);
        let log_std_off = self.log_std.unwrap_or(theta.len());
        let batch = HeadBatch {
            head: &ws.actor[self.actor.len() - 1][..rows * hd],
            values: &ws.critic[self.critic.len() - 1][..rows],
            ..mb.head_batch(&theta[log_std_off..], old_log_std, mean_over)
        };
        let mut grads = HeadGrads {
            d_head: &mut ws.d_head[..rows * hd],
            d_values: &mut ws.d_values[..rows],
            d_log_std: &mut grad[log_std_off..],
            log_ratio: &mut ws.log_ratio[..rows],
            scratch: &mut ws.scratch,
        };
        head_loss_f32(&self.spec.action, &batch, loss, &mut grads, &mut ws.head_cols)
    }

    /// [`Net::loss`] and then [`Net::backward`] for a network without a shared trunk, in two
    /// halves side by side (on the second thread, when there is one and `rows` ≥
    /// [`PARALLEL_MIN_ROWS`]): the actor's forward pass, the policy head ([`policy_head`]) and
    /// the actor's backward pass on this thread, the critic's forward pass, the value head
    /// ([`value_head`]) and backward pass on the other. The same operations on the same values
    /// as the two calls, so the same bits, with one join instead of two and the heads off the
    /// critical path. ∇θ is complete on return (log σ's part included).
    ///
    /// # Errors
    /// [`check_head_batch`]'s, before anything runs.
    pub fn loss_and_backward_split(
        &self,
        (theta, version, grad): (&[f32], u64, &mut [f32]),
        ws: &mut Workspace,
        mb: &Rows<'_>,
        (old_log_std, loss, mean_over): (&[f32], &HeadLoss, usize),
    ) -> Result<[f32; 4]> {
        debug_assert!(self.trunk.is_empty(), "a shared trunk joins the towers' gradients");
        let (rows, od, hd) = (mb.len(), self.spec.obs_dim, self.spec.action.head_dim());
        let (kind, act, (na, nc)) =
            (&self.spec.action, self.spec.activation, (self.actor.len() - 1, self.critic.len() - 1));
        self.ensure(ws, rows);
        ws.x[..rows * od].copy_from_slice(mb.observations);
        self.refresh_transposes(theta, version, ws);
        let log_std_off = self.log_std.unwrap_or(theta.len());
        let batch = mb.head_batch(&theta[log_std_off..], old_log_std, mean_over); // each half adds its output
                                                                                  // The outputs' buffers as yet hold the last pass's values: only their lengths are read.
        let sized = HeadBatch { head: &ws.actor[na][..rows * hd], values: &ws.critic[nc][..rows], ..batch };
        check_head_batch(kind, &sized, loss, ws.d_a.len(), ws.scratch.len())?;
        let Workspace { x, wt, actor, critic, log_ratio, scratch, head_cols, d_a, d_b, d_c, d_d, .. } = ws;
        let (x, weights) = (&x[..rows * od], (theta, &wt[..]));
        let (g_towers, d_log_std) = grad.split_at_mut(log_std_off);
        let (g_actor, g_critic) = g_towers.split_at_mut(self.critic[0].w);
        let (mut policy_sums, mut value_sum) = ((0f64, 0f64), 0f64);
        let (ps, vs) = (&mut policy_sums, &mut value_sum);
        both(
            self.second_thread.as_ref().filter(|_| rows >= PARALLEL_MIN_ROWS),
            || {
                tower_forward(&self.actor, actor, x, weights, rows, (act, false));
                mask_logits_in_place(&mut actor[na][..rows * hd], mb.action_masks);
                let b = HeadBatch { head: &actor[na][..rows * hd], ..batch };
                let grads = (&mut d_a[..rows * hd], d_log_std, &mut log_ratio[..rows], &mut scratch[..]);
                *ps = policy_head_f32(kind, &b, loss, grads, head_cols);
                tower_backward(&self.actor, actor, x, theta, (g_actor, 0), (d_a, d_b), None, rows, (act, false));
            },
            || {
                tower_forward(&self.critic, critic, x, weights, rows, (act, false));
                *vs = value_head(&HeadBatch { values: &critic[nc][..rows], ..batch }, loss, &mut d_c[..rows]);
                let g = (g_critic, self.critic[0].w);
                tower_backward(&self.critic, critic, x, theta, g, (d_c, d_d), None, rows, (act, false));
            },
        );
        Ok(combine_parts(loss, policy_sums, value_sum, mean_over))
    }

    /// ∇θ of the loss [`Net::loss`] left in `ws` (over its `rows`) into `grad` (every weight and
    /// bias written; the log-std's part is already there), and ∂L/∂x `[rows, obs_dim]` into `d_x`
    /// when given (a network with a shared trunk: what the CNN's convolutions continue from).
    pub fn backward(&self, theta: &[f32], ws: &mut Workspace, grad: &mut [f32], rows: usize, d_x: Option<&mut [f32]>) {
        let (act, od, hd) = (self.spec.activation, self.spec.obs_dim, self.spec.action.head_dim());
        let x = &ws.x[..rows * od];
        let shared = !self.trunk.is_empty();
        let tower_in: &[f32] = if shared { &ws.trunk[self.trunk.len() - 1] } else { x };
        let width = self.trunk.last().map_or(od, |l| l.out);
        ws.d_a[..rows * hd].copy_from_slice(&ws.d_head[..rows * hd]);
        ws.d_c[..rows].copy_from_slice(&ws.d_values[..rows]);
        // θ's order is trunk, actor, critic, log σ: the towers' gradients are disjoint slices.
        let critic_base = self.critic[0].w;
        let (g_actor, g_critic) = grad.split_at_mut(critic_base);
        let d_actor = shared.then_some(&mut ws.d_trunk[..rows * width]);
        let d_critic = shared.then_some(&mut ws.d_trunk_critic[..rows * width]);
        let (actor_bufs, critic_bufs) = ((&mut ws.d_a, &mut ws.d_b), (&mut ws.d_c, &mut ws.d_d));
        let (actor, critic) = ((&self.actor, &ws.actor), (&self.critic, &ws.critic));
        both(
            self.second_thread.as_ref().filter(|_| rows >= PARALLEL_MIN_ROWS),
            || tower_backward(actor.0, actor.1, tower_in, theta, (g_actor, 0), actor_bufs, d_actor, rows, (act, false)),
            || {
                let g = (g_critic, critic_base);
                tower_backward(critic.0, critic.1, tower_in, theta, g, critic_bufs, d_critic, rows, (act, false))
            },
        );
        if shared {
            let n = rows * width;
            ws.d_a[..n]
                .iter_mut()
                .zip(&ws.d_trunk[..n])
                .zip(&ws.d_trunk_critic[..n])
                .for_each(|((d, &a), &c)| *d = a + c);
            activation_backward(&mut ws.d_a[..n], &ws.trunk[self.trunk.len() - 1][..n], act);
            let trunk_act = (act, self.split_trunk);
            tower_backward(
                &self.trunk,
                &ws.trunk,
                x,
                theta,
                (grad, 0),
                (&mut ws.d_a, &mut ws.d_b),
                d_x,
                rows,
                trunk_act,
            );
        }
    }
}
