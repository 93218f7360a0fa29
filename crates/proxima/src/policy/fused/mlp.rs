//! [`FusedMlp`]: the actor-critic MLP of [`PolicySpec`] on flat f32 buffers, with hand-written
//! forward and backward passes and the losses in closed form ([`super::heads`], [`super::net`]).
//!
//! θ is one contiguous vector (every parameter row-major, in the spec's order, concatenated:
//! the candle network's names, shapes and layout, so checkpoints move between backends), ∇θ
//! another of the same layout. The activations of a minibatch are kept in a workspace that grows
//! to the largest batch seen and is then reused: after the first minibatch an update allocates
//! nothing. Inference (`act`, values) has its own workspace behind a `RefCell`, since the seam
//! lends the policy immutably there.
//!
//! With [`FusedMlp::set_threads`] ≥ 2 the actor and critic towers of every pass of 64 rows or
//! more run side by side, the critic's on a second thread ([`super::second_thread`]): each tower's
//! arithmetic is unchanged, so the results are those of one thread, bit for bit. From 4 threads
//! a minibatch's rows are also split into `threads / 2` shards (each at least
//! [`MIN_SHARD_ROWS`]), each shard's loss and gradient computed on its own rayon thread into its
//! own workspace and gradient vector, and the gradients added in shard order: for a given thread
//! count the result is the same on every run.
//!
//! `CnnPolicy` (a spec with `cnn`): the Nature CNN's convolutions ([`super::conv`]) turn the
//! pixels into features, which a [`Net`] of the dense layer (features → 512, ReLU) and the two
//! heads reads as its input; the loss and the whole gradient are computed in one call (the
//! backward pass reads the minibatch's pixels). From 2 threads every product is split in two
//! halves run side by side, which gives the one-thread bits.

use super::heads::{kl_sum, scratch_len, HeadLoss};
use super::net::{Net, Rows, Towers, Workspace, PARALLEL_MIN_ROWS};
use super::second_thread::SecondThread;
use crate::error::{ProximaError, Result};
use crate::loss::PpoCoefs;
use crate::policy::distributions::mask_logits_in_place;
use crate::policy::interface::{ActOutput, FlatParams, Join, LossReport, Policy};
use crate::policy::spec::{PolicySpec, NATURE_CONVS, NATURE_FEATURES};
use crate::policy::Activation;
use crate::rollout::Minibatch;
use proxima_kernels::conv::{ConvLayer, ConvStack, ConvWorkspace};
use rand::{Rng, RngCore};
use std::cell::RefCell;

/// A shard of a minibatch below this many rows is not worth a thread.
pub const MIN_SHARD_ROWS: usize = 64;

/// One thread's share of a minibatch: its workspace, its gradient, and its loss parts.
#[derive(Debug)]
struct Shard {
    ws: Workspace,
    grad: Vec<f32>,
    out: Result<[f32; 4]>,
}

/// What the last loss left for [`Policy::backward`].
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// One workspace holds the forward pass of these rows; the backward pass is still to run.
    Rows(usize),
    /// The shards' gradients are already summed into ∇θ.
    Done,
}

/// The actor-critic of a [`PolicySpec`] on the fused CPU kernels (module docs).
#[derive(Debug)]
pub struct FusedMlp {
    /// The network's spec (a CNN's: the dense part's own spec is `net.spec`).
    spec: PolicySpec,
    /// `CnnPolicy`'s convolutions, in front of the dense layers.
    front: Option<Front>,
    net: Net,
    names: Vec<String>,
    sizes: Vec<usize>,
    theta: Vec<f32>,
    grad: Vec<f32>,
    train: Workspace,
    shards: Vec<Shard>,
    threads: usize,
    infer: RefCell<Workspace>,
    pending: Option<Pending>,
    /// Rows of log r_t(θ) the last PPO loss left in `train.log_ratio` (0 after an A2C loss).
    log_ratio_rows: usize,
    /// Rows of the last loss evaluated (whether its optimiser step is long enough for two threads).
    loss_rows: usize,
    /// Bumped whenever θ may have changed (the inference workspace's Wᵀ follows it).
    version: u64,
}

/// The Nature CNN's convolutions in front of the dense layers (`CnnPolicy`) and their workspaces
/// (the update's, and inference's behind a `RefCell` as [`FusedMlp`]'s own).
#[derive(Debug)]
struct Front {
    stack: ConvStack,
    train: ConvWorkspace,
    infer: RefCell<ConvWorkspace>,
}

impl Front {
    /// The convolutions of a CNN `spec` whose parameters start at `offsets` in θ, and the spec of
    /// the dense part behind them: the features → 512 (ReLU, the shared trunk), then the heads.
    fn new(spec: &PolicySpec, offsets: &[usize]) -> Result<(Front, PolicySpec)> {
        let img = spec.cnn.ok_or_else(|| ProximaError::InvalidArgument("not a CNN spec".into()))?;
        let outs = img.nature_outputs()?;
        let mut shape = (img.channels, img.height, img.width);
        let mut layers = Vec::new();
        for (i, (&(c, k, s), &next)) in NATURE_CONVS.iter().zip(&outs).enumerate() {
            let at = (offsets[2 * i], offsets[2 * i + 1]);
            layers.push(if i == 0 {
                ConvLayer::pixels(at, shape, (k, s, c), 255.0)
            } else {
                ConvLayer::new(at, shape, (k, s, c), true, 1.0)
            });
            shape = next;
        }
        let stack = ConvStack { layers };
        let dense = PolicySpec {
            obs_dim: stack.features(),
            net_arch: vec![NATURE_FEATURES],
            activation: Activation::Relu,
            shared_trunk: true,
            cnn: None,
            ..spec.clone()
        };
        Ok((Front { stack, train: ConvWorkspace::default(), infer: RefCell::new(ConvWorkspace::default()) }, dense))
    }
}

/// Runs `f(i, shard)` for every shard, in parallel by halves (`rayon::join`: no allocation).
fn run_shards(shards: &mut [Shard], first: usize, f: &(impl Fn(usize, &mut Shard) + Sync)) {
    match shards.len() {
        0 => {}
        1 => f(first, &mut shards[0]),
        n => {
            let (a, b) = shards.split_at_mut(n / 2);
            rayon::join(|| run_shards(a, first, f), || run_shards(b, first + n / 2, f));
        }
    }
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
    /// `InvalidArgument` for zero dims or a count or size mismatch; `Unsupported` for a spec
    /// with PPG's auxiliary value head or recurrent layers.
    pub fn from_params(spec: PolicySpec, values: &[Vec<f32>]) -> Result<Self> {
        spec.check_dims()?;
        if !spec.inputs.is_empty() {
            return Err(ProximaError::Unsupported(
                "image keys in a Dict observation (MultiInputPolicy's CNNs) run on the candle backend (backend = \"candle\" or \"auto\") for now".into(),
            ));
        }
        if spec.recurrent.is_some() {
            return Err(ProximaError::Unsupported(
                "recurrent policies run on the candle backend (backend = \"candle\") for now".into(),
            ));
        }
        if spec.aux_value_head {
            return Err(ProximaError::Unsupported(
                "the fused backend does not cover PPG's auxiliary value head: use backend = `candle`".into(),
            ));
        }
        let shapes = spec.param_shapes();
        let names: Vec<String> = shapes.iter().map(|(n, _)| n.clone()).collect();
        let sizes: Vec<usize> = shapes.iter().map(|(_, s)| s.iter().product()).collect();
        let mut offsets = Vec::with_capacity(sizes.len());
        let mut total = 0;
        for s in &sizes {
            offsets.push(total);
            total += s;
        }
        let (front, net) = match spec.cnn {
            None => (None, Net::new(spec.clone(), &offsets)),
            Some(_) => {
                let (front, dense) = Front::new(&spec, &offsets)?;
                (Some(front), Net::new(dense, &offsets[2 * NATURE_CONVS.len()..]))
            }
        };
        let (train, infer) = (net.workspace(), RefCell::new(net.workspace()));
        let mut mlp = FusedMlp {
            spec,
            front,
            net,
            names,
            sizes,
            theta: vec![0.0; total],
            grad: vec![0.0; total],
            train,
            shards: Vec::new(),
            threads: 1,
            infer,
            pending: None,
            log_ratio_rows: 0,
            loss_rows: 0,
            version: 0,
        };
        mlp.set_params(values)?;
        Ok(mlp)
    }

    /// Runs the actor and critic side by side from 2 threads on, and from 4 on also splits each
    /// minibatch's rows into `threads / 2` shards (1: neither; see the module docs). A CNN
    /// instead splits each of its products in two from 2 threads on (the one-thread bits).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
        if self.front.is_some() {
            // The CNN splits its products instead (the same bits for any thread count).
            self.net.split_trunk = self.threads > 1;
            return;
        }
        if self.threads < 2 {
            self.net.second_thread = None;
        } else if self.net.second_thread.is_none() {
            self.net.second_thread = SecondThread::new()
                .map_err(|e| tracing::warn!("no second thread ({e}): the actor and critic run one after the other"))
                .ok();
        }
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

    fn log_std_values(&self) -> &[f32] {
        match self.net.log_std {
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

    /// Copies `obs` into the inference workspace and runs the forward pass of `towers`; `f`
    /// reads it.
    fn infer<T>(&self, obs: &[f32], towers: Towers, f: impl FnOnce(&Workspace, usize) -> T) -> Result<T> {
        let rows = self.check_obs(obs)?;
        let mut ws = self.infer.borrow_mut();
        self.net.ensure(&mut ws, rows);
        match &self.front {
            None => ws.x[..obs.len()].copy_from_slice(obs),
            Some(front) => {
                let mut conv = front.infer.borrow_mut();
                front.stack.forward(&self.theta, self.version, &mut conv, obs, rows, self.threads > 1);
                let n = rows * front.stack.features();
                ws.x[..n].copy_from_slice(&conv.features[..n]);
            }
        }
        self.net.forward(&self.theta, self.version, &mut ws, rows, towers);
        Ok(f(&ws, rows))
    }

    /// Evaluates `loss` on minibatch `mb`: on one workspace (the backward pass waits for
    /// [`Policy::backward`]), or sharded over the threads with the gradient computed at once.
    fn eval_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], loss: HeadLoss) -> Result<LossReport> {
        let rows = mb.len;
        let spec = &self.spec;
        let dims = (spec.obs_dim, spec.action.act_dim(), spec.action.head_dim());
        // A CNN reads the frames as bytes when the minibatch holds them so (`reads_byte_pixels`).
        let n_obs = match (mb.pixels.is_empty(), self.front.is_some()) {
            (true, _) => mb.observations.len(),
            (false, true) if mb.observations.is_empty() => mb.pixels.len(),
            _ => {
                return Err(ProximaError::InvalidArgument(
                    "a minibatch's pixels are read by a CNN alone, in place of its observations".into(),
                ))
            }
        };
        if n_obs != rows * dims.0 || mb.actions.len() != rows * dims.1 || mb.old_log_probs.len() != rows {
            return Err(ProximaError::InvalidArgument(format!(
                "minibatch of {rows} rows with {n_obs} observation and {} action values (obs_dim {}, act_dim {})",
                mb.actions.len(),
                dims.0,
                dims.1
            )));
        }
        if !mb.action_masks.is_empty() {
            spec.action.check_masks(rows, &mb.action_masks)?;
        }
        self.pending = None;
        self.log_ratio_rows = 0;
        let n_shards = (self.threads / 2).min(rows / MIN_SHARD_ROWS);
        let (values, pending) = if self.front.is_some() {
            (self.cnn_loss_and_backward(mb, old_log_std, &loss)?, Pending::Done)
        } else if n_shards > 1 {
            (self.sharded_loss(mb, old_log_std, &loss, n_shards)?, Pending::Done)
        } else if self.net.second_thread.is_some() && self.net.trunk.is_empty() {
            let all = Rows::of(mb, 0..rows, dims);
            let theta = (&self.theta[..], self.version, &mut self.grad[..]);
            (self.net.loss_and_backward_split(theta, &mut self.train, &all, (old_log_std, &loss, rows))?, Pending::Done)
        } else {
            let all = Rows::of(mb, 0..rows, dims);
            let v = self.net.loss(
                (&self.theta, self.version, &mut self.grad),
                &mut self.train,
                &all,
                (old_log_std, &loss, rows),
            )?;
            (v, Pending::Rows(rows))
        };
        self.pending = Some(pending);
        self.log_ratio_rows = if matches!(loss, HeadLoss::Ppo(_)) { rows } else { 0 };
        self.loss_rows = rows;
        Ok(LossReport { values })
    }

    /// The loss of `mb` through the convolutions and the dense part, and at once its gradient
    /// (the backward pass reads the minibatch's pixels, which only this call has). The pixels are
    /// `mb.pixels` (bytes) when it holds them, else `mb.observations`: the same bits either way.
    fn cnn_loss_and_backward(&mut self, mb: &Minibatch, old_log_std: &[f32], loss: &HeadLoss) -> Result<[f32; 4]> {
        let Some(front) = &mut self.front else { return Err(ProximaError::InvalidArgument("not a CNN".into())) };
        let (rows, parallel, spec) = (mb.len, self.threads > 1, &self.spec);
        let (fd, bytes) = (front.stack.features(), !mb.pixels.is_empty());
        let (theta, version, ws) = (&self.theta[..], self.version, &mut front.train);
        match bytes {
            true => front.stack.forward(theta, version, ws, &mb.pixels, rows, parallel),
            false => front.stack.forward(theta, version, ws, &mb.observations, rows, parallel),
        }
        // The dense part reads the features; the rows' other columns are the minibatch's.
        let dims = (0, spec.action.act_dim(), spec.action.head_dim());
        let all = Rows { observations: &front.train.features[..rows * fd], ..Rows::of(mb, 0..rows, dims) };
        let theta = (&self.theta[..], self.version, &mut self.grad[..]);
        let values = self.net.loss(theta, &mut self.train, &all, (old_log_std, loss, rows))?;
        let d_features = &mut front.train.d_features[..rows * fd];
        self.net.backward(&self.theta, &mut self.train, &mut self.grad, rows, Some(d_features));
        match bytes {
            true => front.stack.backward(&mut front.train, &mb.pixels, &mut self.grad, rows, parallel),
            false => front.stack.backward(&mut front.train, &mb.observations, &mut self.grad, rows, parallel),
        }
        Ok(values)
    }

    /// The loss and gradient of `mb` over `n` row shards in parallel, the gradients added into ∇θ
    /// and the loss parts summed, both in shard order.
    fn sharded_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], loss: &HeadLoss, n: usize) -> Result<[f32; 4]> {
        let rows = mb.len;
        let spec = &self.net.spec;
        let dims = (spec.obs_dim, spec.action.act_dim(), spec.action.head_dim());
        while self.shards.len() < n {
            let ws = self.net.workspace();
            self.shards.push(Shard { ws, grad: vec![0.0; self.theta.len()], out: Ok([0.0; 4]) });
        }
        let chunk = rows.div_ceil(n);
        let (net, theta, version) = (&self.net, &self.theta[..], self.version);
        run_shards(&mut self.shards[..n], 0, &|i, sh: &mut Shard| {
            let r = (i * chunk).min(rows)..((i + 1) * chunk).min(rows);
            let part = Rows::of(mb, r.clone(), dims);
            sh.out = net.loss((theta, version, &mut sh.grad), &mut sh.ws, &part, (old_log_std, loss, rows));
            if sh.out.is_ok() {
                net.backward(theta, &mut sh.ws, &mut sh.grad, r.len(), None);
            }
        });
        super::net::grow(&mut self.train.log_ratio, rows);
        let mut parts = [0f64; 4];
        for (i, sh) in self.shards[..n].iter_mut().enumerate() {
            let out = std::mem::replace(&mut sh.out, Ok([0.0; 4]))?;
            parts.iter_mut().zip(out).for_each(|(p, v)| *p += v as f64);
            let r = (i * chunk).min(rows)..((i + 1) * chunk).min(rows);
            self.train.log_ratio[r.clone()].copy_from_slice(&sh.ws.log_ratio[..r.len()]);
            if i == 0 {
                self.grad.copy_from_slice(&sh.grad);
            } else {
                crate::simd::with_simd(
                    #[inline(always)]
                    || self.grad.iter_mut().zip(&sh.grad).for_each(|(g, &s)| *g += s),
                );
            }
        }
        Ok(parts.map(|p| p as f32))
    }

    /// ∇θ of the last loss into `self.grad`.
    fn backward_in_place(&mut self) -> Result<()> {
        match self.pending.take() {
            Some(Pending::Rows(rows)) => {
                self.net.backward(&self.theta, &mut self.train, &mut self.grad, rows, None);
                Ok(())
            }
            Some(Pending::Done) => Ok(()),
            None => Err(ProximaError::InvalidArgument("backward without a loss evaluated before it".into())),
        }
    }
}

impl Policy for FusedMlp {
    fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    fn act(&self, obs: &[f32], deterministic: bool, rng: &mut dyn RngCore) -> Result<ActOutput> {
        let mut out = ActOutput::default();
        self.act_into(obs, None, deterministic, rng, &mut out)?;
        Ok(out)
    }

    fn act_into(
        &self,
        obs: &[f32],
        masks: Option<&[u8]>,
        deterministic: bool,
        rng: &mut dyn RngCore,
        out: &mut ActOutput,
    ) -> Result<()> {
        let (hd, kind, log_std) = (self.net.spec.action.head_dim(), &self.net.spec.action, self.log_std_values());
        let (na, nc) = (self.net.actor.len() - 1, self.net.critic.len() - 1);
        if let Some(m) = masks {
            kind.check_masks(self.check_obs(obs)?, m)?;
        }
        self.infer(obs, Towers::Both, |ws, rows| {
            out.actions.clear();
            out.log_probs.clear();
            out.values.clear();
            out.values.extend_from_slice(&ws.critic[nc][..rows]);
            out.head.clear(); // every row's bits are its own (`kernels::dense_forward`)
            out.head.extend_from_slice(&ws.actor[na][..rows * hd]);
            mask_logits_in_place(&mut out.head, masks.unwrap_or(&[]));
            let mut scratch = [0f32; 64];
            let mut heap;
            let scratch: &mut [f32] = if hd <= 64 {
                &mut scratch[..hd]
            } else {
                heap = vec![0f32; hd];
                &mut heap
            };
            for row in out.head.chunks_exact(hd) {
                let lp = kind.sample_row(row, log_std, deterministic, rng, scratch, &mut out.actions);
                out.log_probs.push(lp);
            }
        })
    }

    fn predict_values(&self, obs: &[f32]) -> Result<Vec<f32>> {
        let nc = self.net.critic.len() - 1;
        self.infer(obs, Towers::Critic, |ws, rows| ws.critic[nc][..rows].to_vec())
    }

    fn dist_params_host(&self, obs: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        let (na, hd) = (self.net.actor.len() - 1, self.net.spec.action.head_dim());
        let head = self.infer(obs, Towers::Actor, |ws, rows| ws.actor[na][..rows * hd].to_vec())?;
        Ok((head, self.log_std_values().to_vec()))
    }

    fn ppo_loss(&mut self, mb: &Minibatch, old_log_std: &[f32], coefs: &PpoCoefs) -> Result<LossReport> {
        self.eval_loss(mb, old_log_std, HeadLoss::Ppo(*coefs))
    }

    fn reads_byte_pixels(&self) -> bool {
        self.front.is_some()
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
                           // The second half from the critic's first parameter (θ: trunk, actor, critic, log σ).
        let critic_first = 2 * (self.net.trunk.len() + self.net.actor.len());
        // Adam's halves side by side only after a minibatch that ran on both threads: after a
        // shorter one the helper's wake-up costs more than half of Adam's step saves.
        let helper = self.net.second_thread.as_ref().filter(|_| self.loss_rows >= PARALLEL_MIN_ROWS);
        let halves = helper.map(|h| (critic_first, h as &dyn Join));
        Ok(Some(FlatParams { names: &self.names, values: &mut self.theta, grads: &mut self.grad, halves }))
    }

    fn rollout_kl(&self, obs: &[f32], old_head: &[f32], old_log_std: &[f32], masks: Option<&[u8]>) -> Result<f64> {
        let (na, hd) = (self.net.actor.len() - 1, self.net.spec.action.head_dim());
        let log_std = self.log_std_values();
        let rows = self.check_obs(obs)?;
        if old_head.len() != rows * hd {
            return Err(ProximaError::InvalidArgument(format!(
                "π_θold's head has {} values for {rows} rows of head_dim {hd}",
                old_head.len()
            )));
        }
        let kind = &self.net.spec.action;
        let Some(masks) = masks else {
            let sum = self.infer(obs, Towers::Actor, |ws, rows| {
                let mut scratch = vec![0f32; scratch_len(kind)];
                kl_sum(kind, (old_head, old_log_std), &ws.actor[na][..rows * hd], log_std, &mut scratch)
            })?;
            return Ok(sum / rows.max(1) as f64);
        };
        kind.check_masks(rows, masks)?;
        let (mut old, mut new) = (old_head.to_vec(), self.dist_params_host(obs)?.0);
        mask_logits_in_place(&mut old, masks);
        mask_logits_in_place(&mut new, masks);
        let sum = kl_sum(kind, (&old, old_log_std), &new, log_std, &mut vec![0f32; scratch_len(kind)]);
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
