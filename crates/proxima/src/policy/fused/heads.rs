//! The losses of the fused backend in closed form: from the policy head's output (logits side by
//! side, or Gaussian means with a state-independent log-std) and V(s) of a minibatch straight to
//! the loss, its parts and ∂L/∂head, ∂L/∂log σ, ∂L/∂V — no graph. Generic over the float type
//! so the golden vectors (PyTorch float64) check the very code the f32 backend runs.
//!
//! Per row, with lp = log π(a|s), H its entropy, KL = KL[π_θold ‖ π_θ] and g_x = ∂L/∂x:
//! * Categorical component with log-softmax ℓ and p = e^ℓ: ∂lp/∂z_j = 1[j=a] − p_j,
//!   ∂H/∂z_j = −p_j(ℓ_j + H), ∂KL/∂z_j = p_j − p_old,j.
//! * Gaussian (σ = e^s): ∂lp/∂μ = (a−μ)/σ², ∂lp/∂s = (a−μ)²/σ² − 1, ∂H/∂s = 1,
//!   ∂KL/∂μ = (μ−μ_old)/σ², ∂KL/∂s = 1 − (σ_old² + (μ_old−μ)²)/σ².
//!
//! The losses are [`crate::loss::ppo_loss`]'s and [`crate::loss::a2c_loss`]'s (the candle
//! functions are the reference; the tests hold the two together).

use crate::error::{ProximaError, Result};
use crate::loss::{Objective, PpoCoefs};
use crate::policy::distributions::HALF_LOG_2PI;
use crate::policy::ActionKind;
use num_traits::Float;

/// A minibatch of B rows as the head sees it. Every slice is row-major.
#[derive(Clone, Copy, Debug)]
pub struct HeadBatch<'a, T> {
    /// The policy head at θ: logits side by side or Gaussian means, `[B, head_dim]`.
    pub head: &'a [T],
    /// Gaussian log σ at θ, `[dim]` (empty for discrete actions).
    pub log_std: &'a [T],
    /// V_θ(s_t), `[B]`.
    pub values: &'a [T],
    /// a_t as stored (indices as floats, or the unclipped sample), `[B, act_dim]`.
    pub actions: &'a [T],
    /// log π_θold(a_t|s_t), `[B]`.
    pub old_log_prob: &'a [T],
    /// Â_t (already normalised where asked), `[B]`.
    pub advantages: &'a [T],
    /// V_θold(s_t), `[B]` (read by the clipped value loss only).
    pub old_values: &'a [T],
    /// R_t, `[B]`.
    pub returns: &'a [T],
    /// π_θold's head, `[B, head_dim]` (read by the KL objectives only; may be empty otherwise).
    pub old_head: &'a [T],
    /// π_θold's log σ, `[dim]` (KL objectives with Gaussian actions).
    pub old_log_std: &'a [T],
    /// The means are over this many rows (the whole minibatch's, when these rows are one shard
    /// of it; 0 = these rows).
    pub mean_over: usize,
}

/// Which loss: PPO's (any objective) or A2C's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HeadLoss {
    /// L = L^π + c₁·½·mean((V−R)², clipped or not) − c₂·S ([`crate::loss::ppo_loss`]).
    Ppo(PpoCoefs),
    /// L = −mean(lp·Â) + c₁·mean((V−R)²) − c₂·S ([`crate::loss::a2c_loss`]).
    A2c {
        /// c₁.
        vf_coef: f64,
        /// c₂.
        ent_coef: f64,
    },
}

/// Where the gradients go: `d_head` `[B, head_dim]`, `d_values` `[B]`, `d_log_std` `[dim]`
/// (overwritten), and log r_t(θ) per row `[B]` (PPO; left alone for A2C). `scratch` holds at
/// least [`scratch_len`] values.
pub struct HeadGrads<'a, T> {
    /// ∂L/∂head.
    pub d_head: &'a mut [T],
    /// ∂L/∂V.
    pub d_values: &'a mut [T],
    /// ∂L/∂log σ (Gaussian).
    pub d_log_std: &'a mut [T],
    /// log r_t(θ).
    pub log_ratio: &'a mut [T],
    /// Working space.
    pub scratch: &'a mut [T],
}

/// The Categorical components (`[n]` for Discrete, `nvec`), borrowed (no allocation per row);
/// `None` for a Gaussian.
fn components(kind: &ActionKind) -> Option<&[usize]> {
    match kind {
        ActionKind::Discrete { n } => Some(std::slice::from_ref(n)),
        ActionKind::MultiDiscrete { nvec } => Some(nvec),
        ActionKind::Continuous { .. } => None,
    }
}

fn c<T: Float>(x: f64) -> T {
    T::from(x).expect("a float converts")
}

/// log-softmax as candle computes it, ℓ = (z − max) − log Σ exp(z − max), into `ls`, and the
/// probabilities p = exp(z − max) / Σ exp(z − max) into `p` (from the same exponentials: one
/// `exp` per element instead of two).
fn log_softmax_and_probs<T: Float>(z: &[T], ls: &mut [T], p: &mut [T]) {
    let m = z.iter().fold(T::neg_infinity(), |a, &b| a.max(b));
    let mut s = T::zero();
    for ((l, e), &x) in ls.iter_mut().zip(p.iter_mut()).zip(z) {
        *l = x - m;
        *e = l.exp();
        s = s + *e;
    }
    let (log_s, inv_s) = (s.ln(), s.recip());
    for (l, e) in ls.iter_mut().zip(p.iter_mut()) {
        *l = *l - log_s;
        *e = *e * inv_s;
    }
}

/// Scratch values per head element: the new and old log-softmaxes and their exponentials.
const SCRATCH_PER_HEAD: usize = 4;

/// One row's log π(a|s), entropy and (when `old` is given) KL[π_old ‖ π], leaving (categorical)
/// the new and old log-softmaxes and probabilities in `scratch` (`[ℓ | ℓ_old | p | p_old]`, each
/// `hd` long) and each component's entropy in `ent_parts`.
fn row_stats<T: Float>(
    comps: Option<&[usize]>,
    (head, log_std, action): (&[T], &[T], &[T]),
    old: Option<(&[T], &[T])>,
    scratch: &mut [T],
    ent_parts: &mut [T],
) -> (T, T, T) {
    let hd = head.len();
    let (ls, ps) = scratch[..SCRATCH_PER_HEAD * hd].split_at_mut(2 * hd);
    let (new_ls, old_ls) = ls.split_at_mut(hd);
    let (new_p, old_p) = ps.split_at_mut(hd);
    match comps {
        Some(comps) => {
            let (mut lp, mut ent, mut kl, mut off) = (T::zero(), T::zero(), T::zero(), 0);
            for (ci, &n) in comps.iter().enumerate() {
                let r = off..off + n;
                log_softmax_and_probs(&head[r.clone()], &mut new_ls[r.clone()], &mut new_p[r.clone()]);
                let a = action[ci].to_usize().unwrap_or(0).min(n - 1);
                lp = lp + new_ls[off + a];
                let mut h = T::zero();
                for j in r.clone() {
                    h = h - new_p[j] * new_ls[j];
                }
                ent_parts[ci] = h;
                ent = ent + h;
                if let Some((old_head, _)) = old {
                    log_softmax_and_probs(&old_head[r.clone()], &mut old_ls[r.clone()], &mut old_p[r.clone()]);
                    for j in r {
                        kl = kl + old_p[j] * (old_ls[j] - new_ls[j]);
                    }
                }
                off += n;
            }
            (lp, ent, kl)
        }
        None => {
            let d = head.len();
            let (mut sq, mut ls_sum, mut kl) = (T::zero(), T::zero(), T::zero());
            for j in 0..d {
                let inv_var = (log_std[j] * c(-2.0)).exp();
                let e = action[j] - head[j];
                sq = sq + e * e * inv_var;
                ls_sum = ls_sum + log_std[j];
                if let Some((old_mean, old_log_std)) = old {
                    let var_old = (old_log_std[j] * c(2.0)).exp();
                    let dm = old_mean[j] - head[j];
                    kl = kl + (var_old + dm * dm) * inv_var * c(0.5) + (log_std[j] - old_log_std[j]) - c(0.5);
                }
            }
            let dn: T = c(d as f64);
            let lp = sq * c(-0.5) - ls_sum - dn * c(HALF_LOG_2PI);
            let ent = ls_sum + dn * c(0.5 + HALF_LOG_2PI);
            (lp, ent, kl)
        }
    }
}

/// Writes one row's ∂L/∂head (and adds its ∂L/∂log σ) from the scalars g_lp, g_H, g_KL, with
/// what [`row_stats`] left in `scratch` and `ent_parts`.
#[allow(clippy::too_many_arguments)]
fn row_grads<T: Float>(
    comps: Option<&[usize]>,
    (head, log_std, action): (&[T], &[T], &[T]),
    old: Option<(&[T], &[T])>,
    (g_lp, g_ent, g_kl): (T, T, T),
    ent_parts: &[T],
    scratch: &[T],
    d_head: &mut [T],
    d_log_std: &mut [T],
) {
    let hd = head.len();
    let (new_ls, new_p, old_p) = (&scratch[..hd], &scratch[2 * hd..3 * hd], &scratch[3 * hd..4 * hd]);
    match comps {
        Some(comps) => {
            let mut off = 0;
            for (ci, &n) in comps.iter().enumerate() {
                let a = action[ci].to_usize().unwrap_or(0).min(n - 1);
                let h_c = ent_parts[ci];
                for j in 0..n {
                    let (l, p) = (new_ls[off + j], new_p[off + j]);
                    let onehot = if j == a { T::one() } else { T::zero() };
                    let mut g = g_lp * (onehot - p) - g_ent * p * (l + h_c);
                    if old.is_some() {
                        g = g + g_kl * (p - old_p[off + j]);
                    }
                    d_head[off + j] = g;
                }
                off += n;
            }
        }
        None => {
            for j in 0..hd {
                let inv_var = (log_std[j] * c(-2.0)).exp();
                let e = action[j] - head[j];
                let mut dm = g_lp * e * inv_var;
                let mut ds = g_lp * (e * e * inv_var - T::one()) + g_ent;
                if let Some((old_mean, old_log_std)) = old {
                    let var_old = (old_log_std[j] * c(2.0)).exp();
                    let dmo = old_mean[j] - head[j];
                    dm = dm - g_kl * dmo * inv_var;
                    ds = ds + g_kl * (T::one() - (var_old + dmo * dmo) * inv_var);
                }
                d_head[j] = dm;
                d_log_std[j] = d_log_std[j] + ds;
            }
        }
    }
}

/// The loss of minibatch `b` and its gradients (module docs). Returns
/// `[loss, policy_loss, value_loss, entropy]` as [`crate::loss::ppo_loss`] /
/// [`crate::loss::a2c_loss`] define them. It is [`policy_head`], [`value_head`] and
/// [`combine_parts`] in turn (the fused backend runs the two heads on two threads).
///
/// # Errors
/// `InvalidArgument` for a KL objective without π_θold's head, or buffers of the wrong size.
pub fn head_loss<T: Float>(
    kind: &ActionKind,
    b: &HeadBatch<'_, T>,
    loss: &HeadLoss,
    g: &mut HeadGrads<'_, T>,
) -> Result<[T; 4]> {
    check_head_batch(kind, b, loss, g.d_head.len(), g.scratch.len())?;
    check_outputs(g, b.values.len(), b.log_std.len())?;
    let policy = policy_head(kind, b, loss, (g.d_head, g.d_log_std, g.log_ratio, g.scratch));
    let vl = value_head(b, loss, g.d_values);
    let mean_over = if b.mean_over == 0 { b.values.len() } else { b.mean_over };
    Ok(combine_parts(loss, policy, vl, mean_over))
}

/// Whether `g`'s ∂L/∂V, log r and ∂L/∂log σ hold `rows`, `rows` and `dims` values ([`head_loss`]
/// writes them; ∂L/∂head and the scratch are [`check_head_batch`]'s).
///
/// # Errors
/// `InvalidArgument` naming the sizes.
pub(super) fn check_outputs<T>(g: &HeadGrads<'_, T>, rows: usize, dims: usize) -> Result<()> {
    if g.d_values.len() < rows || g.log_ratio.len() < rows || g.d_log_std.len() < dims {
        return Err(ProximaError::InvalidArgument(format!(
            "head loss outputs for {rows} rows: {} ∂L/∂V, {} log r, {} ∂L/∂log σ (needs {dims})",
            g.d_values.len(),
            g.log_ratio.len(),
            g.d_log_std.len()
        )));
    }
    Ok(())
}

/// Whether `b`'s buffers fit `kind`'s head (and the gradient buffers of `d_head_len` and
/// `scratch_len` values) and hold what `loss` reads: [`head_loss`]'s checks, made before the
/// heads run.
///
/// # Errors
/// As [`head_loss`].
pub fn check_head_batch<T: Float>(
    kind: &ActionKind,
    b: &HeadBatch<'_, T>,
    loss: &HeadLoss,
    d_head_len: usize,
    scratch_len_given: usize,
) -> Result<()> {
    let (hd, ad, n) = (kind.head_dim(), kind.act_dim(), b.values.len());
    if is_kl_objective(loss) && b.old_head.len() != n * hd {
        return Err(ProximaError::InvalidArgument("the KL objectives need π_θold's head for every row".into()));
    }
    let rows_ok = [b.advantages.len(), b.old_log_prob.len(), b.returns.len()].iter().all(|&l| l == n)
        && (matches!(loss, HeadLoss::A2c { .. }) || b.old_values.len() == n);
    let log_std_ok = !matches!(kind, ActionKind::Continuous { .. }) || b.log_std.len() == ad;
    if b.head.len() != n * hd
        || b.actions.len() != n * ad
        || !rows_ok
        || !log_std_ok
        || d_head_len < n * hd
        || scratch_len_given < scratch_len(kind)
    {
        return Err(ProximaError::InvalidArgument(format!(
            "head loss buffers: {} head values, {} actions, {} advantages, {} old log-probs, {} returns, {} old \
             values and {} log-stds for {n} rows of head_dim {hd}",
            b.head.len(),
            b.actions.len(),
            b.advantages.len(),
            b.old_log_prob.len(),
            b.returns.len(),
            b.old_values.len(),
            b.log_std.len()
        )));
    }
    Ok(())
}

fn is_kl_objective(loss: &HeadLoss) -> bool {
    matches!(loss, HeadLoss::Ppo(c) if matches!(c.objective, Objective::AdaptiveKl | Objective::FixedKl))
}

/// 1 / the number of rows the means are over, for a batch of `n` rows.
fn inv_rows<T: Float>(b: &HeadBatch<'_, T>, n: usize) -> T {
    let m = if b.mean_over == 0 { n } else { b.mean_over };
    c(1.0 / m.max(1) as f64)
}

/// The policy's part of the loss, row by row: log r_t(θ) into `log_ratio` (PPO), ∂L/∂head into
/// `d_head`, ∂L/∂log σ into `d_log_std` (overwritten); returns Σ rows of the policy loss and
/// Σ rows of the entropy, in f64, in row order. `scratch` holds at least [`scratch_len`]
/// values. The buffers must have passed [`check_head_batch`]; `b.values`, `b.returns` and
/// `b.old_values` are not read (the rows are `b.advantages`').
pub fn policy_head<T: Float>(
    kind: &ActionKind,
    b: &HeadBatch<'_, T>,
    loss: &HeadLoss,
    (d_head, d_log_std, log_ratio, scratch): (&mut [T], &mut [T], &mut [T], &mut [T]),
) -> (f64, f64) {
    let (hd, ad, n) = (kind.head_dim(), kind.act_dim(), b.advantages.len());
    let kl_objective = is_kl_objective(loss);
    d_log_std.iter_mut().for_each(|x| *x = T::zero());
    let inv_b = inv_rows(b, n);
    let (mut pl, mut ent_sum) = (0f64, 0f64);
    let comps = components(kind);
    let (scratch, ent_parts) = scratch.split_at_mut(SCRATCH_PER_HEAD * hd);
    for i in 0..n {
        let (head, action) = (&b.head[i * hd..(i + 1) * hd], &b.actions[i * ad..(i + 1) * ad]);
        let old = kl_objective.then(|| (&b.old_head[i * hd..(i + 1) * hd], b.old_log_std));
        let (lp, ent, kl) = row_stats(comps, (head, b.log_std, action), old, scratch, ent_parts);
        let a = b.advantages[i];
        let (g_lp, g_kl, row_pl, g_ent);
        match loss {
            HeadLoss::Ppo(co) => {
                let lr = lp - b.old_log_prob[i];
                log_ratio[i] = lr;
                let ratio = lr.exp();
                let surr1 = a * ratio;
                (row_pl, g_lp, g_kl) = match co.objective {
                    Objective::Clip => {
                        let surr2 = a * ratio.max(c(1.0 - co.clip_range)).min(c(1.0 + co.clip_range));
                        let picked = surr1 <= surr2;
                        (-(surr1.min(surr2)), if picked { -surr1 * inv_b } else { T::zero() }, T::zero())
                    }
                    Objective::None => (-surr1, -surr1 * inv_b, T::zero()),
                    Objective::AdaptiveKl | Objective::FixedKl => {
                        let beta: T = c(co.kl_coef);
                        (beta * kl - surr1, -surr1 * inv_b, beta * inv_b)
                    }
                };
                g_ent = -c::<T>(co.ent_coef) * inv_b;
            }
            HeadLoss::A2c { ent_coef, .. } => {
                row_pl = -(lp * a);
                (g_lp, g_kl) = (-a * inv_b, T::zero());
                g_ent = -c::<T>(*ent_coef) * inv_b;
            }
        }
        let d_row = &mut d_head[i * hd..(i + 1) * hd];
        row_grads(comps, (head, b.log_std, action), old, (g_lp, g_ent, g_kl), ent_parts, scratch, d_row, d_log_std);
        pl += row_pl.to_f64().unwrap_or(f64::NAN);
        ent_sum += ent.to_f64().unwrap_or(f64::NAN);
    }
    (pl, ent_sum)
}

/// The value loss's part, row by row: ∂L/∂V into `d_values`; returns Σ rows of the value loss
/// (½·(clipped) squared error for PPO, the squared error for A2C), in f64, in row order. Reads
/// `b.values`, `b.returns`, `b.old_values` and `b.mean_over` only.
pub fn value_head<T: Float>(b: &HeadBatch<'_, T>, loss: &HeadLoss, d_values: &mut [T]) -> f64 {
    let inv_b = inv_rows(b, b.values.len());
    let mut vl = 0f64;
    for (i, d) in d_values[..b.values.len()].iter_mut().enumerate() {
        let (v, r) = (b.values[i], b.returns[i]);
        let (row_vl, g_v) = match loss {
            HeadLoss::Ppo(co) => {
                let (vf, gv) = value_loss_row(v, r, b.old_values[i], co.clip_range_vf);
                (vf * c(0.5), gv * c(0.5 * co.vf_coef) * inv_b)
            }
            HeadLoss::A2c { vf_coef, .. } => {
                let e = v - r;
                (e * e, e * c(2.0 * vf_coef) * inv_b)
            }
        };
        *d = g_v;
        vl += row_vl.to_f64().unwrap_or(f64::NAN);
    }
    vl
}

/// `[loss, policy_loss, value_loss, entropy]` from the heads' sums: the means over `mean_over`
/// rows and L = L^π + c₁·L^V − c₂·S.
pub fn combine_parts<T: Float>(loss: &HeadLoss, (pl, ent_sum): (f64, f64), vl: f64, mean_over: usize) -> [T; 4] {
    let m = mean_over.max(1) as f64;
    let (pl, vl, ent) = (pl / m, vl / m, ent_sum / m);
    let (vf_coef, ent_coef) = match loss {
        HeadLoss::Ppo(co) => (co.vf_coef, co.ent_coef),
        HeadLoss::A2c { vf_coef, ent_coef } => (*vf_coef, *ent_coef),
    };
    let total = pl + vf_coef * vl - ent_coef * ent;
    [c(total), c(pl), c(vl), c(ent)]
}

/// One row's (V−R)², or max((V−R)², (V_old + clip(V−V_old, ±ε_v) − R)²), and its derivative in
/// V (ties split the gradient in halves, as candle's `maximum`).
fn value_loss_row<T: Float>(v: T, r: T, v_old: T, clip: Option<f64>) -> (T, T) {
    let e = v - r;
    let plain = e * e;
    let Some(eps) = clip else { return (plain, e * c(2.0)) };
    let (lo, hi): (T, T) = (c(-eps), c(eps));
    let dv = v - v_old;
    let vc = v_old + dv.max(lo).min(hi);
    let ec = vc - r;
    let clipped = ec * ec;
    let inside = if dv >= lo && dv <= hi { T::one() } else { T::zero() };
    let (w_plain, w_clip) = if plain > clipped {
        (T::one(), T::zero())
    } else if clipped > plain {
        (T::zero(), T::one())
    } else {
        (c(0.5), c(0.5))
    };
    (plain.max(clipped), e * c(2.0) * w_plain + ec * c(2.0) * w_clip * inside)
}

/// The working space [`head_loss`] and [`kl_sum`] need for `kind`'s head.
pub fn scratch_len(kind: &ActionKind) -> usize {
    SCRATCH_PER_HEAD * kind.head_dim() + 2 * kind.act_dim()
}

/// Σ over rows of KL[π_old(·|s) ‖ π(·|s)] for heads `[B, head_dim]` (the rollout's d, before
/// dividing by B). `scratch` holds at least [`scratch_len`] values.
pub fn kl_sum<T: Float>(
    kind: &ActionKind,
    (old_head, old_log_std): (&[T], &[T]),
    head: &[T],
    log_std: &[T],
    scratch: &mut [T],
) -> f64 {
    let (hd, ad, comps) = (kind.head_dim(), kind.act_dim(), components(kind));
    let (scratch, rest) = scratch.split_at_mut(SCRATCH_PER_HEAD * hd);
    let (ent_parts, zeros) = rest.split_at_mut(ad);
    zeros.iter_mut().for_each(|z| *z = T::zero());
    head.chunks_exact(hd)
        .zip(old_head.chunks_exact(hd))
        .map(|(h, o)| {
            let stats = row_stats(comps, (h, log_std, &zeros[..ad]), Some((o, old_log_std)), scratch, ent_parts);
            stats.2.to_f64().unwrap_or(f64::NAN)
        })
        .sum()
}
