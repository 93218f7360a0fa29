//! The optimiser, Adam or RMSprop, with global gradient-norm clipping, on the host.
//!
//! candle-nn's `AdamW` keeps its moments private (so they cannot be checkpointed for an exact
//! resume) and issues ~10 tensor ops per parameter tensor, which dominates an update at PPO's
//! network sizes. This one reads each gradient once, clips by the global norm over *all*
//! parameters together (PyTorch's `clip_grad_norm_`), applies PyTorch's Adam formula, and writes
//! each parameter back once.

use crate::error::{ProximaError, Result};
use crate::policy::candle::host_gradients;
use crate::policy::{FlatParams, Join};
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};

/// Which update rule an [`Optimizer`] applies (the config's `optimizer` key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerName {
    /// Adam, PyTorch's `torch.optim.Adam` (with `adam_eps`).
    Adam,
    /// RMSprop, PyTorch's `torch.optim.RMSprop` (no momentum, not centred), as SB3's A2C uses:
    /// v ← αv + (1−α)g², p ← p − lr·g / (√v + eps) (with `rms_prop_alpha`, `rms_prop_eps`).
    /// Only `v` is used.
    Rmsprop,
}

/// The optimiser state shared by every algorithm: Adam (Kingma & Ba 2015) with PyTorch's rule
/// m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², p ← p − (lr/(1−β₁ᵗ))·m / (√v/√(1−β₂ᵗ) + eps),
/// or RMSprop (see [`OptimizerName::Rmsprop`]). The moments are public so checkpoints can
/// store them.
#[derive(Clone, Debug)]
pub struct Optimizer {
    /// The update rule.
    pub name: OptimizerName,
    /// RMSprop's smoothing constant α (unused by Adam).
    pub alpha: f64,
    /// Step size (set each update by the learning-rate schedule).
    pub lr: f64,
    /// β₁ (0.9).
    pub beta1: f64,
    /// β₂ (0.999).
    pub beta2: f64,
    /// ε inside the denominator (1e-5 for PPO, not PyTorch's 1e-8: Huang et al. 2022, detail 3).
    pub eps: f64,
    /// First moments, one vector per parameter, in the order of the parameter list.
    pub m: Vec<Vec<f32>>,
    /// Second moments, likewise.
    pub v: Vec<Vec<f32>>,
    /// Steps taken (t).
    pub t: u64,
    /// Where [`Optimizer::step_flat`] computes a step before committing it (reused).
    scratch: Scratch,
}

/// Working space of a flat step: the new parameters and moments, committed only when finite.
#[derive(Clone, Debug, Default)]
struct Scratch {
    p: Vec<f32>,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

/// The learning rate over a run: constant, or annealed linearly to 0 (CleanRL's `anneal_lr`:
/// lr_k = (1 − k/K)·lr₀ before step k of K, k = 0 … K−1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    /// lr₀ throughout.
    Constant(f64),
    /// (1 − k/total)·lr₀.
    Linear {
        /// lr₀.
        initial: f64,
        /// K, the number of steps (or iterations) of the run.
        total: u64,
    },
}

impl LrSchedule {
    /// The learning rate before step `done` (0-based: `done` steps are finished).
    pub fn at(&self, done: u64) -> f64 {
        match *self {
            LrSchedule::Constant(lr) => lr,
            LrSchedule::Linear { initial, total } => (1.0 - done as f64 / total as f64) * initial,
        }
    }
}

/// The parameters and gradients of one optimiser step, as their owner keeps them.
pub enum Params<'a> {
    /// θ and ∇θ as flat vectors (the fused backend's, [`crate::policy::Policy::backward_flat`]): stepped in
    /// place, nothing allocated after the first step.
    Flat(FlatParams<'a>),
    /// One host array per parameter (`names` for errors), with host gradients (`None` =
    /// gradient 0).
    Host {
        /// The parameters' names, in order.
        names: &'a [String],
        /// The parameters' values, in order.
        values: &'a mut [Vec<f32>],
        /// Their gradients, in order.
        grads: &'a [Option<Vec<f32>>],
    },
    /// candle variables (set to their new values) and their gradients.
    Vars {
        /// The named variables, in order.
        vars: &'a [(String, Var)],
        /// Their gradients.
        grads: Gradients<'a>,
    },
}

/// The gradients of [`Params::Vars`]: candle's store from `backward()`, or host arrays, one per
/// variable (`None` = gradient 0; how an A3C worker's gradient reaches the global network).
pub enum Gradients<'a> {
    /// What `Tensor::backward` returned.
    Store(&'a GradStore),
    /// Host arrays, one per variable.
    Host(&'a [Option<Vec<f32>>]),
}

/// What one optimiser step measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepInfo {
    /// ‖g‖₂ over all parameters before clipping.
    pub grad_norm: f64,
}

impl Optimizer {
    /// Adam for parameters with `sizes[i]` scalars each.
    pub fn adam(sizes: &[usize], lr: f64, eps: f64) -> Self {
        Optimizer {
            name: OptimizerName::Adam,
            alpha: 0.0,
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps,
            m: sizes.iter().map(|&n| vec![0.0; n]).collect(),
            v: sizes.iter().map(|&n| vec![0.0; n]).collect(),
            t: 0,
            scratch: Scratch::default(),
        }
    }

    /// RMSprop (PyTorch's rule, see [`OptimizerName::Rmsprop`]) for parameters with `sizes[i]`
    /// scalars each.
    pub fn rmsprop(sizes: &[usize], lr: f64, alpha: f64, eps: f64) -> Self {
        Optimizer { name: OptimizerName::Rmsprop, alpha, ..Optimizer::adam(sizes, lr, eps) }
    }

    /// One step on `params` with their gradients, in whichever form their owner keeps them
    /// ([`Params`]): with `max_grad_norm = Some(c)` every gradient is first scaled by
    /// min(1, c/(‖g‖ + 1e-6)), ‖g‖ the global norm over all parameters together (PyTorch's
    /// `clip_grad_norm_`; a parameter without a gradient counts as gradient 0), then the update
    /// rule steps every parameter. The parameters change only if every new value is finite.
    ///
    /// # Errors
    /// `InvalidArgument` for a count or size mismatch with the moments; `NonFinite` (naming the
    /// parameter) for a non-finite gradient or a step that would make a parameter non-finite —
    /// nothing is changed then.
    pub fn step(&mut self, params: Params<'_>, max_grad_norm: Option<f64>) -> Result<StepInfo> {
        match params {
            Params::Flat(f) => self.step_flat(f.names, f.values, f.grads, max_grad_norm, f.halves),
            Params::Host { names, values, grads } => self.step_values(names, values, grads, max_grad_norm),
            Params::Vars { vars, grads } => {
                let host;
                let grads = match grads {
                    Gradients::Store(store) => {
                        host = host_gradients(vars, store)?;
                        &host[..]
                    }
                    Gradients::Host(grads) => grads,
                };
                self.step_vars(vars, grads, max_grad_norm)
            }
        }
    }

    /// [`Optimizer::step`] on candle variables: their values to the host, stepped, and set.
    fn step_vars(
        &mut self,
        vars: &[(String, Var)],
        gs: &[Option<Vec<f32>>],
        max_grad_norm: Option<f64>,
    ) -> Result<StepInfo> {
        let names: Vec<String> = vars.iter().map(|(n, _)| n.clone()).collect();
        let mut values =
            vars.iter().map(|(_, v)| Ok(v.as_tensor().flatten_all()?.to_vec1::<f32>()?)).collect::<Result<Vec<_>>>()?;
        let info = self.step_values(&names, &mut values, gs, max_grad_norm)?;
        for ((_, var), p) in vars.iter().zip(values) {
            var.set(&Tensor::from_vec(p, var.shape(), var.device())?)?;
        }
        Ok(info)
    }

    /// One step on host parameter arrays `values` (named `names`, for errors) with host
    /// gradients `gs` (one entry per parameter; `None` = gradient 0): global-norm clipping to
    /// `max_grad_norm` (‖g‖ summed per parameter in f64, in order), then the update rule.
    /// `values` is changed only if every new value is finite.
    ///
    /// # Errors
    /// `InvalidArgument` for a count or size mismatch; `NonFinite` (naming the parameter) for a
    /// non-finite gradient or a step that would make a parameter non-finite.
    fn step_values(
        &mut self,
        names: &[String],
        values: &mut [Vec<f32>],
        gs: &[Option<Vec<f32>>],
        max_grad_norm: Option<f64>,
    ) -> Result<StepInfo> {
        if values.len() != self.m.len() || gs.len() != values.len() || names.len() != values.len() {
            return Err(ProximaError::InvalidArgument(format!(
                "the optimiser holds {} moments, got {} parameters and {} gradients",
                self.m.len(),
                values.len(),
                gs.len()
            )));
        }
        let grad_norm = global_grad_norm(names, values, gs)?;
        let scale = match max_grad_norm {
            Some(c) => (c / (grad_norm + 1e-6)).min(1.0),
            None => 1.0,
        } as f32;
        self.t += 1;
        // Compute every new parameter and moment first; commit only if all are finite, so a
        // diverging step leaves the parameters and moments as they were.
        let mut new_p = Vec::with_capacity(values.len());
        let (mut new_m, mut new_v) = (self.m.clone(), self.v.clone());
        for (i, name) in names.iter().enumerate() {
            let mut p = values[i].clone();
            self.apply_rule(&mut p, &mut new_m[i], &mut new_v[i], gs[i].as_deref(), scale);
            if p.iter().any(|x| !x.is_finite()) {
                self.t -= 1;
                return Err(ProximaError::NonFinite(format!(
                    "parameter `{name}` would become non-finite (lr {:e})",
                    self.lr
                )));
            }
            new_p.push(p);
        }
        for (dst, p) in values.iter_mut().zip(new_p) {
            *dst = p;
        }
        self.m = new_m;
        self.v = new_v;
        Ok(StepInfo { grad_norm })
    }

    /// [`Optimizer::step_values`] on flat vectors ([`Params::Flat`]): `values` and `grads` hold every parameter
    /// row-major in order, concatenated (sizes those of the moments). The same update rule, the
    /// new values computed into reused buffers and committed only when every one is finite;
    /// nothing is allocated after the first step. ‖g‖ sums each parameter's squares in a fixed
    /// lane order ([`crate::simd::sum_sq_f64`]), so it may differ from `step_values`' in the
    /// last bits. With `halves` (the policy's [`FlatParams::halves`]) the parameters from that
    /// index on are stepped beside the ones before it.
    ///
    /// # Errors
    /// As [`Optimizer::step_values`].
    fn step_flat(
        &mut self,
        names: &[String],
        values: &mut Vec<f32>,
        grads: &[f32],
        max_grad_norm: Option<f64>,
        halves: Option<(usize, &dyn Join)>,
    ) -> Result<StepInfo> {
        let total: usize = self.m.iter().map(Vec::len).sum();
        if values.len() != total || grads.len() != total || names.len() != self.m.len() {
            return Err(ProximaError::InvalidArgument(format!(
                "the optimiser holds {} moments of {total} values, got {} parameters of {} values and {} gradients",
                self.m.len(),
                names.len(),
                values.len(),
                grads.len()
            )));
        }
        let mut sq = 0f64;
        let mut off = 0;
        for (name, m) in names.iter().zip(&self.m) {
            let s = crate::simd::sum_sq_f64(&grads[off..off + m.len()]);
            if !s.is_finite() {
                return Err(ProximaError::NonFinite(format!("gradient of `{name}` is not finite")));
            }
            sq += s;
            off += m.len();
        }
        let grad_norm = sq.sqrt();
        let scale = match max_grad_norm {
            Some(c) => (c / (grad_norm + 1e-6)).min(1.0),
            None => 1.0,
        } as f32;
        self.t += 1;
        let rule = self.rule();
        let mut s = std::mem::take(&mut self.scratch);
        s.p.resize(total, 0.0);
        if s.m.len() != self.m.len() || s.m.iter().zip(&self.m).any(|(a, b)| a.len() != b.len()) {
            (s.m, s.v) = (self.m.clone(), self.v.clone());
        }
        // The parameters in two halves (side by side where `halves` says how), each element's
        // update its own: the same bits either way.
        let split = halves.map_or(names.len(), |(k, _)| k.min(names.len()));
        let flat_split: usize = self.m[..split].iter().map(Vec::len).sum();
        let (p1, p2) = s.p.split_at_mut(flat_split);
        let ((m1, m2), (v1, v2)) = (s.m.split_at_mut(split), s.v.split_at_mut(split));
        let ((old1, old2), (g1, g2)) = (values.split_at(flat_split), grads.split_at(flat_split));
        let ((mo1, mo2), (vo1, vo2)) = (self.m.split_at(split), self.v.split_at(split));
        let (mut bad1, mut bad2) = (None, None);
        let mut first = || bad1 = step_params(rule, scale, (p1, m1, v1), (old1, g1), (mo1, vo1));
        let mut second = || bad2 = step_params(rule, scale, (p2, m2, v2), (old2, g2), (mo2, vo2)).map(|i| i + split);
        match halves {
            Some((_, join)) => join.run_both(&mut first, &mut second),
            None => {
                first();
                second();
            }
        }
        if let Some(i) = bad1.or(bad2) {
            self.t -= 1;
            self.scratch = s;
            return Err(ProximaError::NonFinite(format!(
                "parameter `{}` would become non-finite (lr {:e})",
                names[i], self.lr
            )));
        }
        // Committed by swapping: the old values become the next step's scratch.
        std::mem::swap(values, &mut s.p);
        std::mem::swap(&mut self.m, &mut s.m);
        std::mem::swap(&mut self.v, &mut s.v);
        self.scratch = s;
        Ok(StepInfo { grad_norm })
    }

    /// The update rule at step `self.t`, per element ([`Rule::apply`]).
    fn rule(&self) -> Rule {
        match self.name {
            OptimizerName::Adam => {
                let bc1 = 1.0 - self.beta1.powi(self.t as i32);
                let bc2_sqrt = (1.0 - self.beta2.powi(self.t as i32)).sqrt();
                Rule::Adam {
                    step_size: (self.lr / bc1) as f32,
                    b1: self.beta1 as f32,
                    b2: self.beta2 as f32,
                    eps: self.eps as f32,
                    inv_bc2_sqrt: (1.0 / bc2_sqrt) as f32,
                }
            }
            OptimizerName::Rmsprop => Rule::Rmsprop { a: self.alpha as f32, lr: self.lr as f32, eps: self.eps as f32 },
        }
    }

    /// The update rule on one parameter `p` with its moments `m`, `v` and gradient `g` (times
    /// `scale`, the clipping factor), at step `self.t`.
    fn apply_rule(&self, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: Option<&[f32]>, scale: f32) {
        let rule = self.rule();
        for j in 0..p.len() {
            let gj = g.map_or(0.0, |g| g[j] * scale);
            (p[j], m[j], v[j]) = rule.apply(p[j], m[j], v[j], gj);
        }
    }
}

/// One update-rule step of consecutive parameters into `p` (flat, their concatenation), `m`, `v`
/// (one vector each) from the old values `p_old`, gradients `g` (times `scale`) and moments;
/// returns the index (among these) of the first parameter that would become non-finite.
fn step_params(
    rule: Rule,
    scale: f32,
    (p, m, v): (&mut [f32], &mut [Vec<f32>], &mut [Vec<f32>]),
    (p_old, g): (&[f32], &[f32]),
    (m_old, v_old): (&[Vec<f32>], &[Vec<f32>]),
) -> Option<usize> {
    let mut off = 0;
    for (i, ((m, v), (m_old, v_old))) in m.iter_mut().zip(v.iter_mut()).zip(m_old.iter().zip(v_old)).enumerate() {
        let n = m_old.len();
        let new = (&mut p[off..off + n], &mut m[..n], &mut v[..n]);
        let old = (&p_old[off..off + n], &m_old[..n], &v_old[..n], &g[off..off + n]);
        // One loop per rule, the rule's constants fixed in it: a loop whose body matched on the
        // rule per element was not vectorised.
        let finite = match rule {
            Rule::Adam { step_size, b1, b2, eps, inv_bc2_sqrt } => {
                let c = (step_size, b1, b2, eps, inv_bc2_sqrt);
                step_elements(new, old, scale, |p, m, v, g| Rule::adam(c, p, m, v, g))
            }
            Rule::Rmsprop { a, lr, eps } => {
                step_elements(new, old, scale, |p, m, v, g| Rule::rmsprop((a, lr, eps), p, m, v, g))
            }
        };
        if !finite {
            return Some(i);
        }
        off += n;
    }
    None
}

/// `(p, m, v)[j] = f(p_old, m_old, v_old, g·scale)[j]` for every element
/// ([`crate::simd::with_simd`]); whether every new p is finite.
#[inline(always)]
fn step_elements(
    (p, m, v): (&mut [f32], &mut [f32], &mut [f32]),
    (p_old, m_old, v_old, g): (&[f32], &[f32], &[f32], &[f32]),
    scale: f32,
    f: impl Fn(f32, f32, f32, f32) -> (f32, f32, f32),
) -> bool {
    crate::simd::with_simd(
        #[inline(always)]
        move || {
            let mut finite = true;
            for j in 0..p.len() {
                (p[j], m[j], v[j]) = f(p_old[j], m_old[j], v_old[j], g[j] * scale);
                finite &= p[j].is_finite();
            }
            finite
        },
    )
}

/// One step of an update rule on one element, its constants computed once per step.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// Adam: lr/(1−β₁ᵗ), β₁, β₂, eps, 1/√(1−β₂ᵗ).
    Adam { step_size: f32, b1: f32, b2: f32, eps: f32, inv_bc2_sqrt: f32 },
    /// RMSprop: α, lr, eps.
    Rmsprop { a: f32, lr: f32, eps: f32 },
}

impl Rule {
    /// (p, m, v) after one step with the (clipped) gradient `g`; every path of every optimiser
    /// step goes through here, so they compute the same bits.
    #[inline(always)]
    fn apply(self, p: f32, m: f32, v: f32, g: f32) -> (f32, f32, f32) {
        match self {
            Rule::Adam { step_size, b1, b2, eps, inv_bc2_sqrt } => {
                Rule::adam((step_size, b1, b2, eps, inv_bc2_sqrt), p, m, v, g)
            }
            Rule::Rmsprop { a, lr, eps } => Rule::rmsprop((a, lr, eps), p, m, v, g),
        }
    }

    /// Adam's element step with lr/(1−β₁ᵗ), β₁, β₂, eps, 1/√(1−β₂ᵗ).
    #[inline(always)]
    fn adam(
        (step_size, b1, b2, eps, inv_bc2_sqrt): (f32, f32, f32, f32, f32),
        p: f32,
        m: f32,
        v: f32,
        g: f32,
    ) -> (f32, f32, f32) {
        let m = b1 * m + (1.0 - b1) * g;
        let v = b2 * v + (1.0 - b2) * g * g;
        (p - step_size * m / (v.sqrt() * inv_bc2_sqrt + eps), m, v)
    }

    /// RMSprop's element step with α, lr, eps (m passes through).
    #[inline(always)]
    fn rmsprop((a, lr, eps): (f32, f32, f32), p: f32, m: f32, v: f32, g: f32) -> (f32, f32, f32) {
        let v = a * v + (1.0 - a) * g * g;
        (p - lr * g / (v.sqrt() + eps), m, v)
    }
}

/// ‖g‖₂ over all parameters: each parameter's sum of squares in f64, added in order.
///
/// # Errors
/// `InvalidArgument` for a gradient whose size is not its parameter's; `NonFinite` naming the
/// parameter whose gradient is not finite.
fn global_grad_norm(names: &[String], values: &[Vec<f32>], gs: &[Option<Vec<f32>>]) -> Result<f64> {
    let mut sq = 0f64;
    for ((name, p), g) in names.iter().zip(values).zip(gs) {
        if let Some(g) = g {
            if g.len() != p.len() {
                return Err(ProximaError::InvalidArgument(format!(
                    "gradient of `{name}` has {} values, the parameter {}",
                    g.len(),
                    p.len()
                )));
            }
            let s: f64 = g.iter().map(|&x| (x as f64) * (x as f64)).sum();
            if !s.is_finite() {
                return Err(ProximaError::NonFinite(format!("gradient of `{name}` is not finite")));
            }
            sq += s;
        }
    }
    Ok(sq.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn rmsprop_matches_pytorchs_rule() {
        // torch.optim.RMSprop([p], lr=0.1, alpha=0.99, eps=1e-5) on loss = 2·p0 − 3·p1, two steps:
        // v1 = 0.01·g², p1 = p0 − 0.1·g/(√v1 + eps); v2 = 0.99·v1 + 0.01·g².
        let dev = Device::Cpu;
        let a = Var::from_tensor(&Tensor::new(&[1.0f32, -1.0], &dev).unwrap()).unwrap();
        let params = vec![("a".to_string(), a.clone())];
        let mut opt = Optimizer::rmsprop(&[2], 0.1, 0.99, 1e-5);
        let mut want = [1.0f64, -1.0];
        let mut v = [0.0f64; 2];
        for _ in 0..2 {
            let loss = (a.as_tensor() * &Tensor::new(&[2.0f32, -3.0], &dev).unwrap()).unwrap().sum_all().unwrap();
            opt.step(Params::Vars { vars: &params, grads: Gradients::Store(&loss.backward().unwrap()) }, None).unwrap();
            for (j, g) in [2.0f64, -3.0].into_iter().enumerate() {
                v[j] = 0.99 * v[j] + 0.01 * g * g;
                want[j] -= 0.1 * g / (v[j].sqrt() + 1e-5);
            }
        }
        let got = a.as_tensor().to_vec1::<f32>().unwrap();
        assert!(
            (got[0] as f64 - want[0]).abs() < 1e-5 && (got[1] as f64 - want[1]).abs() < 1e-5,
            "{got:?} vs {want:?}"
        );
    }

    #[test]
    fn adam_matches_hand_computed_first_steps_and_clips_globally() {
        let dev = Device::Cpu;
        let a = Var::from_tensor(&Tensor::new(&[1.0f32, 2.0], &dev).unwrap()).unwrap();
        let b = Var::from_tensor(&Tensor::new(&[3.0f32], &dev).unwrap()).unwrap();
        let params = vec![("a".to_string(), a.clone()), ("b".to_string(), b.clone())];
        // loss = 3*a0 + 4*a1 + 0*b  → grad (3, 4), (0); ‖g‖ = 5.
        let loss = (a.as_tensor() * &Tensor::new(&[3.0f32, 4.0], &dev).unwrap())
            .unwrap()
            .sum_all()
            .unwrap()
            .add(&(b.as_tensor() * 0.0).unwrap().sum_all().unwrap())
            .unwrap();
        let grads = loss.backward().unwrap();
        let mut opt = Optimizer::adam(&[2, 1], 0.1, 1e-8);
        let info = opt.step(Params::Vars { vars: &params, grads: Gradients::Store(&grads) }, Some(0.5)).unwrap();
        assert!((info.grad_norm - 5.0).abs() < 1e-6);
        // First Adam step moves each coordinate by ≈ lr·sign(g) whatever the scale.
        let av = a.as_tensor().to_vec1::<f32>().unwrap();
        assert!((av[0] - 0.9).abs() < 1e-5 && (av[1] - 1.9).abs() < 1e-5, "{av:?}");
        assert!((opt.m[0][0] - 0.1 * 3.0 * 0.1).abs() < 1e-6, "moment uses the clipped gradient");
        assert_eq!(b.as_tensor().to_vec1::<f32>().unwrap(), vec![3.0]);
    }

    #[test]
    fn non_finite_gradient_is_an_error_and_changes_nothing() {
        let dev = Device::Cpu;
        let a = Var::from_tensor(&Tensor::new(&[1.0f32], &dev).unwrap()).unwrap();
        let params = vec![("a".to_string(), a.clone())];
        let loss = (a.as_tensor() * f64::NAN).unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        let mut opt = Optimizer::adam(&[1], 0.1, 1e-5);
        let err = opt.step(Params::Vars { vars: &params, grads: Gradients::Store(&grads) }, Some(0.5)).unwrap_err();
        assert!(err.to_string().contains("`a`"));
        assert_eq!(a.as_tensor().to_vec1::<f32>().unwrap(), vec![1.0]);
        assert_eq!(opt.t, 0);
    }
}
