//! The policy head's loss and gradients ([`super::heads::policy_head`]'s) for a whole minibatch
//! at once, in f32: every step a loop over the rows that the compiler vectorises (rows in the
//! vector lanes, [`crate::simd::with_simd`]), `exp` and `ln` from
//! [`proxima_kernels::math`] instead of libm's one-value calls. The same formulas as the
//! row-by-row generic code (its module docs), in the same order, so the two agree to the last
//! few bits (the tests hold them together); the sums over rows (L^π, the entropy, ∂L/∂log σ)
//! stay in row order.
//!
//! It covers a Discrete action (one Categorical) or a diagonal Gaussian under PPO's clipped or
//! unclipped objective and A2C's loss — what the fused backend trains most. Anything else
//! (MultiDiscrete, the KL objectives) runs the generic row-by-row code.

use super::heads::{
    check_head_batch, check_outputs, combine_parts, policy_head, value_head, HeadBatch, HeadGrads, HeadLoss,
};
use crate::error::Result;
use crate::loss::Objective;
use crate::policy::distributions::HALF_LOG_2PI;
use crate::policy::ActionKind;
use crate::simd::with_simd;
use proxima_kernels::math::{exp_f32, ln_f32};

/// Per-row buffers besides the head's columns: lp, H, g_lp, and (Categorical) the max and
/// log Σ e.
const PER_ROW: usize = 5;

/// [`super::heads::head_loss`] in f32 as the fused backend runs it: the same checks, parts and
/// gradients, its policy head [`policy_head_f32`]'s (batched where it can be). `cols` holds at
/// least [`cols_len`] values.
///
/// # Errors
/// [`check_head_batch`]'s.
pub fn head_loss_f32(
    kind: &ActionKind,
    b: &HeadBatch<'_, f32>,
    loss: &HeadLoss,
    g: &mut HeadGrads<'_, f32>,
    cols: &mut [f32],
) -> Result<[f32; 4]> {
    let rows = b.values.len();
    check_head_batch(kind, b, loss, g.d_head.len(), g.scratch.len())?;
    check_outputs(g, rows, b.log_std.len())?;
    if cols.len() < cols_len(kind.head_dim(), rows) {
        return Err(crate::error::ProximaError::InvalidArgument(format!(
            "the batched head needs {} values of working space for {rows} rows, got {}",
            cols_len(kind.head_dim(), rows),
            cols.len()
        )));
    }
    let grads = (&mut *g.d_head, &mut *g.d_log_std, &mut *g.log_ratio, &mut *g.scratch);
    let policy = policy_head_f32(kind, b, loss, grads, cols);
    let vl = value_head(b, loss, g.d_values);
    Ok(combine_parts(loss, policy, vl, if b.mean_over == 0 { rows } else { b.mean_over }))
}

/// The working space [`head_loss_f32`] needs for `rows` rows of a head of `head_dim` values.
pub fn cols_len(head_dim: usize, rows: usize) -> usize {
    (3 * head_dim + PER_ROW) * rows
}

/// [`policy_head`] for f32: the batched code when it covers `kind` and `loss`, else the generic
/// row-by-row code. `cols` holds at least [`cols_len`] values; the other arguments are
/// [`policy_head`]'s (and have passed [`super::heads::check_head_batch`]).
pub(super) fn policy_head_f32(
    kind: &ActionKind,
    b: &HeadBatch<'_, f32>,
    loss: &HeadLoss,
    (d_head, d_log_std, log_ratio, scratch): (&mut [f32], &mut [f32], &mut [f32], &mut [f32]),
    cols: &mut [f32],
) -> (f64, f64) {
    let covered = match loss {
        HeadLoss::Ppo(co) => matches!(co.objective, Objective::Clip | Objective::None),
        HeadLoss::A2c { .. } => true,
    };
    let (rows, hd) = (b.advantages.len(), kind.head_dim());
    let cols = &mut cols[..cols_len(hd, rows)];
    match kind {
        ActionKind::Discrete { n } if covered && rows > 0 => categorical(*n, b, loss, (d_head, log_ratio), cols),
        ActionKind::Continuous { dim, .. } if covered && rows > 0 => {
            gaussian(*dim, b, loss, (d_head, d_log_std, log_ratio), cols)
        }
        _ => policy_head(kind, b, loss, (d_head, d_log_std, log_ratio, scratch)),
    }
}

/// 1 / the number of rows the means are over (as the generic code computes it).
fn inv_rows(b: &HeadBatch<'_, f32>) -> f32 {
    let m = if b.mean_over == 0 { b.advantages.len() } else { b.mean_over };
    (1.0 / m.max(1) as f64) as f32
}

/// Per row from log π(a|s): the policy loss's row term and g_lp = ∂L/∂lp into `row_pl` and
/// `g_lp`, log r_t(θ) into `log_ratio` (PPO).
fn surrogate(
    b: &HeadBatch<'_, f32>,
    loss: &HeadLoss,
    lp: &[f32],
    (row_pl, g_lp, log_ratio): (&mut [f32], &mut [f32], &mut [f32]),
) {
    let inv_b = inv_rows(b);
    let n = lp.len();
    let (adv, old) = (&b.advantages[..n], &b.old_log_prob[..n]);
    with_simd(
        #[inline(always)]
        || match loss {
            HeadLoss::Ppo(co) => {
                let (lo, hi) = ((1.0 - co.clip_range) as f32, (1.0 + co.clip_range) as f32);
                let clip = co.objective == Objective::Clip;
                for i in 0..n {
                    let lr = lp[i] - old[i];
                    log_ratio[i] = lr;
                    let ratio = exp_f32(lr);
                    let surr1 = adv[i] * ratio;
                    let surr2 = adv[i] * ratio.max(lo).min(hi);
                    let picked = surr1 <= surr2 || !clip;
                    row_pl[i] = if clip { -(surr1.min(surr2)) } else { -surr1 };
                    g_lp[i] = if picked { -surr1 * inv_b } else { 0.0 };
                }
            }
            HeadLoss::A2c { .. } => {
                for i in 0..n {
                    row_pl[i] = -(lp[i] * adv[i]);
                    g_lp[i] = -adv[i] * inv_b;
                }
            }
        },
    );
}

/// −c₂ / rows: ∂L/∂H per row.
fn entropy_grad(b: &HeadBatch<'_, f32>, loss: &HeadLoss) -> f32 {
    let ent_coef = match loss {
        HeadLoss::Ppo(co) => co.ent_coef,
        HeadLoss::A2c { ent_coef, .. } => *ent_coef,
    };
    -(ent_coef as f32) * inv_rows(b)
}

/// Σ rows of `row_pl` and of `ent`, in f64, in row order.
fn sums(row_pl: &[f32], ent: &[f32]) -> (f64, f64) {
    row_pl.iter().zip(ent).fold((0.0, 0.0), |(p, e), (&rp, &re)| (p + rp as f64, e + re as f64))
}

/// One Categorical over `k` classes: log-softmax ℓ, p, lp = ℓ_a, H = −Σ p ℓ, then
/// ∂L/∂z_j = g_lp·(1[j=a] − p_j) − g_H·p_j·(ℓ_j + H).
fn categorical(
    k: usize,
    b: &HeadBatch<'_, f32>,
    loss: &HeadLoss,
    (d_head, log_ratio): (&mut [f32], &mut [f32]),
    cols: &mut [f32],
) -> (f64, f64) {
    let n = b.advantages.len();
    let (ell, rest) = cols.split_at_mut(k * n); // columns [k, n]: z − max, then ℓ
    let (prob, rest) = rest.split_at_mut(k * n); // exp(z − max), then p
    let (grad, rest) = rest.split_at_mut(k * n); // ∂L/∂z, column-wise
    let (max, rest) = rest.split_at_mut(n);
    let (log_s, rest) = rest.split_at_mut(n);
    let (lp, rest) = rest.split_at_mut(n);
    let (ent, g_lp) = rest.split_at_mut(n);
    for (i, row) in b.head[..n * k].chunks_exact(k).enumerate() {
        for (j, &z) in row.iter().enumerate() {
            ell[j * n + i] = z;
        }
    }
    with_simd(
        #[inline(always)]
        || {
            max.copy_from_slice(&ell[..n]);
            for col in ell.chunks_exact(n).skip(1) {
                max.iter_mut().zip(col).for_each(|(m, &z)| *m = m.max(z));
            }
            log_s.fill(0.0); // Σ e, then its log
            for (col, e) in ell.chunks_exact_mut(n).zip(prob.chunks_exact_mut(n)) {
                for i in 0..n {
                    col[i] -= max[i];
                    e[i] = exp_f32(col[i]);
                    log_s[i] += e[i];
                }
            }
            for (ls, inv_s) in log_s.iter_mut().zip(lp.iter_mut()) {
                *inv_s = 1.0 / *ls; // lp's buffer holds 1/Σ e until lp is known
                *ls = ln_f32(*ls);
            }
            ent.fill(0.0);
            for (col, p) in ell.chunks_exact_mut(n).zip(prob.chunks_exact_mut(n)) {
                for i in 0..n {
                    col[i] -= log_s[i];
                    p[i] *= lp[i];
                    ent[i] -= p[i] * col[i];
                }
            }
        },
    );
    for (i, (l, a)) in lp.iter_mut().zip(&b.actions[..n]).enumerate() {
        let a = (*a as usize).min(k - 1); // as the generic code: indices stored as floats
        *l = ell[a * n + i];
    }
    // row_pl reuses `max` (no longer needed).
    surrogate(b, loss, lp, (max, g_lp, log_ratio));
    let g_ent = entropy_grad(b, loss);
    with_simd(
        #[inline(always)]
        || {
            for (j, ((g, l), p)) in
                grad.chunks_exact_mut(n).zip(ell.chunks_exact(n)).zip(prob.chunks_exact(n)).enumerate()
            {
                for i in 0..n {
                    let onehot = if (b.actions[i] as usize).min(k - 1) == j { 1.0 } else { 0.0 };
                    g[i] = g_lp[i] * (onehot - p[i]) - g_ent * p[i] * (l[i] + ent[i]);
                }
            }
        },
    );
    for (i, row) in d_head[..n * k].chunks_exact_mut(k).enumerate() {
        for (j, d) in row.iter_mut().enumerate() {
            *d = grad[j * n + i];
        }
    }
    sums(max, ent)
}

/// A diagonal Gaussian with state-independent log σ over `d` dimensions:
/// lp = −½ Σ (a−μ)²/σ² − Σ log σ − d·½ log 2π, H = Σ log σ + d·(½ + ½ log 2π), and
/// ∂L/∂μ = g_lp·(a−μ)/σ², ∂L/∂log σ = Σ rows [g_lp·((a−μ)²/σ² − 1) + g_H].
fn gaussian(
    d: usize,
    b: &HeadBatch<'_, f32>,
    loss: &HeadLoss,
    (d_head, d_log_std, log_ratio): (&mut [f32], &mut [f32], &mut [f32]),
    cols: &mut [f32],
) -> (f64, f64) {
    let n = b.advantages.len();
    let (err, rest) = cols.split_at_mut(d * n); // columns [d, n]: a − μ
    let (grad, rest) = rest.split_at_mut(d * n); // ∂L/∂μ, then the rows' ∂L/∂log σ terms
    let (inv_var, rest) = rest.split_at_mut(d * n); // 1/σ² in its first d values
    let (row_pl, rest) = rest.split_at_mut(n);
    let (lp, rest) = rest.split_at_mut(n);
    let (ent, rest) = rest.split_at_mut(n);
    let (g_lp, _) = rest.split_at_mut(n);
    let log_std = &b.log_std[..d];
    for (i, (mu, a)) in b.head[..n * d].chunks_exact(d).zip(b.actions[..n * d].chunks_exact(d)).enumerate() {
        for j in 0..d {
            err[j * n + i] = a[j] - mu[j];
        }
    }
    let inv_var = &mut inv_var[..d];
    inv_var.iter_mut().zip(log_std).for_each(|(iv, &s)| *iv = (s * -2.0).exp());
    let inv_var = &*inv_var;
    let ls_sum = log_std.iter().fold(0f32, |acc, &s| acc + s);
    let dn = d as f32;
    let (lp_const, h) = (dn * HALF_LOG_2PI as f32, ls_sum + dn * (0.5 + HALF_LOG_2PI) as f32);
    with_simd(
        #[inline(always)]
        || {
            lp.fill(0.0); // Σ (a−μ)²/σ², then lp
            for (col, &iv) in err.chunks_exact(n).zip(inv_var) {
                lp.iter_mut().zip(col).for_each(|(sq, &e)| *sq += e * e * iv);
            }
            lp.iter_mut().for_each(|sq| *sq = *sq * -0.5 - ls_sum - lp_const);
        },
    );
    ent.fill(h);
    surrogate(b, loss, lp, (row_pl, g_lp, log_ratio));
    let g_ent = entropy_grad(b, loss);
    with_simd(
        #[inline(always)]
        || {
            for (col, (g, &iv)) in err.chunks_exact_mut(n).zip(grad.chunks_exact_mut(n).zip(inv_var)) {
                for i in 0..n {
                    let e = col[i];
                    g[i] = g_lp[i] * e * iv;
                    col[i] = g_lp[i] * (e * e * iv - 1.0) + g_ent; // this row's ∂L/∂log σ_j
                }
            }
        },
    );
    for (i, row) in d_head[..n * d].chunks_exact_mut(d).enumerate() {
        for (j, dm) in row.iter_mut().enumerate() {
            *dm = grad[j * n + i];
        }
    }
    for (ds, col) in d_log_std[..d].iter_mut().zip(err.chunks_exact(n)) {
        *ds = col.iter().fold(0f32, |acc, &t| acc + t);
    }
    sums(row_pl, ent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::PpoCoefs;
    use crate::policy::fused::heads::scratch_len;

    /// PPO's loss with ε = 0.2 and `objective` (c₁ 0.5, c₂ `ent_coef`).
    fn ppo(objective: Objective, ent_coef: f64) -> HeadLoss {
        HeadLoss::Ppo(PpoCoefs {
            clip_range: 0.2,
            clip_range_vf: None,
            vf_coef: 0.5,
            ent_coef,
            objective,
            kl_coef: 1.0,
        })
    }

    fn wave(n: usize, f: f32, scale: f32) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * f).sin() * scale).collect()
    }

    /// What a policy head computes: (Σ L^π rows, Σ H rows), ∂L/∂head, ∂L/∂log σ, log r.
    type Out = ((f64, f64), Vec<f32>, Vec<f32>, Vec<f32>);

    fn run(kind: &ActionKind, b: &HeadBatch<'_, f32>, loss: &HeadLoss, batched: bool) -> Out {
        let (n, hd) = (b.advantages.len(), kind.head_dim());
        let (mut dh, mut dls, mut lr) = (vec![9f32; n * hd], vec![9f32; b.log_std.len()], vec![9f32; n]);
        let mut scratch = vec![0f32; scratch_len(kind)];
        let grads = (&mut dh[..], &mut dls[..], &mut lr[..], &mut scratch[..]);
        let sums = if batched {
            policy_head_f32(kind, b, loss, grads, &mut vec![f32::NAN; cols_len(hd, n)])
        } else {
            policy_head(kind, b, loss, grads)
        };
        (sums, dh, dls, lr)
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 2e-6 * (1.0 + y.abs()), "{what}[{i}]: batched {x}, row by row {y}");
        }
    }

    #[test]
    fn the_batched_head_is_the_row_by_row_heads_arithmetic() {
        let kinds = [
            ActionKind::Discrete { n: 1 },
            ActionKind::Discrete { n: 2 },
            ActionKind::Discrete { n: 7 },
            ActionKind::Continuous { dim: 1, low: vec![-2.0], high: vec![2.0] },
            ActionKind::Continuous { dim: 3, low: vec![-1.0; 3], high: vec![1.0; 3] },
        ];
        let losses =
            [ppo(Objective::Clip, 0.01), ppo(Objective::None, 0.01), HeadLoss::A2c { vf_coef: 0.5, ent_coef: 0.003 }];
        for kind in &kinds {
            for loss in &losses {
                for (n, mean_over) in [(1, 0), (5, 0), (37, 0), (37, 128)] {
                    let (hd, ad) = (kind.head_dim(), kind.act_dim());
                    let head = wave(n * hd, 0.71, 3.0);
                    let actions: Vec<f32> = match kind {
                        // Indices as stored, one past the end and a negative one included (clamped alike).
                        ActionKind::Discrete { n: k } => (0..n).map(|i| ((i * 5) % (k + 2)) as f32 - 1.0).collect(),
                        _ => wave(n * ad, 0.37, 1.5),
                    };
                    let log_std = wave(if ad == hd { ad } else { 0 }, 1.3, 0.5);
                    let (adv, old_lp) = (wave(n, 0.9, 1.0), wave(n, 0.45, 0.3));
                    let zeros = vec![0f32; n];
                    let b = HeadBatch {
                        head: &head,
                        log_std: if matches!(kind, ActionKind::Continuous { .. }) { &log_std } else { &[] },
                        values: &zeros,
                        actions: &actions,
                        old_log_prob: &old_lp,
                        advantages: &adv,
                        old_values: &zeros,
                        returns: &zeros,
                        old_head: &[],
                        old_log_std: &[],
                        mean_over,
                    };
                    let (batched, generic) = (run(kind, &b, loss, true), run(kind, &b, loss, false));
                    let what = format!("{kind:?} {loss:?} {n} rows");
                    for (x, y) in [(batched.0 .0, generic.0 .0), (batched.0 .1, generic.0 .1)] {
                        assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{what}: sums {x} vs {y}");
                    }
                    close(&batched.1, &generic.1, &format!("{what}: ∂L/∂head"));
                    close(&batched.2, &generic.2, &format!("{what}: ∂L/∂log σ"));
                    if matches!(loss, HeadLoss::Ppo(_)) {
                        close(&batched.3, &generic.3, &format!("{what}: log r"));
                    }
                }
            }
        }
    }

    #[test]
    fn buffers_of_the_wrong_size_are_errors_not_panics() {
        let ppo = ppo(Objective::Clip, 0.0);
        let gauss = ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] };
        let (four, eight) = (vec![0.1f32; 4], vec![0.2f32; 8]);
        // (kind, head, actions, log σ, advantages, cols) — each with one buffer of the wrong size.
        type Case<'a> = (ActionKind, &'a [f32], &'a [f32], &'a [f32], &'a [f32], usize);
        let cases: [Case<'_>; 5] = [
            (ActionKind::Discrete { n: 2 }, &eight, &four, &[], &four[..3], 64), // advantages
            (ActionKind::Discrete { n: 2 }, &eight, &four[..3], &[], &four, 64), // actions
            (gauss.clone(), &eight, &eight, &four[..1], &four, 64),              // log σ
            (gauss.clone(), &eight, &eight, &four[..2], &four, 64),              // ∂L/∂log σ (1 given)
            (ActionKind::Discrete { n: 2 }, &eight, &four, &[], &four, 3),       // working space
        ];
        for (i, (kind, head, actions, log_std, adv, cols)) in cases.into_iter().enumerate() {
            let b = HeadBatch {
                head,
                log_std,
                values: &four,
                actions,
                old_log_prob: &four,
                advantages: adv,
                old_values: &four,
                returns: &four,
                old_head: &[],
                old_log_std: &[],
                mean_over: 0,
            };
            let (mut dh, mut dv, mut lr, mut dls) = (vec![0f32; 8], vec![0f32; 4], vec![0f32; 4], vec![0f32; 1]);
            let mut scratch = vec![0f32; 64];
            let mut g = HeadGrads {
                d_head: &mut dh,
                d_values: &mut dv,
                d_log_std: &mut dls,
                log_ratio: &mut lr,
                scratch: &mut scratch,
            };
            let out = head_loss_f32(&kind, &b, &ppo, &mut g, &mut vec![0f32; cols]);
            assert!(matches!(out, Err(crate::error::ProximaError::InvalidArgument(_))), "case {i}: {out:?}");
            if i < 4 {
                let generic = crate::policy::fused::head_loss(&kind, &b, &ppo, &mut g);
                assert!(generic.is_err(), "case {i}: the row-by-row entry point too");
            }
        }
    }

    #[test]
    fn what_it_does_not_cover_goes_to_the_row_by_row_code() {
        let kind = ActionKind::MultiDiscrete { nvec: vec![2, 3] };
        let (head, actions, v) = (wave(10, 0.3, 1.0), vec![1.0, 2.0, 0.0, 1.0], vec![0.5f32, -0.5]);
        let b = HeadBatch {
            head: &head,
            log_std: &[],
            values: &v,
            actions: &actions,
            old_log_prob: &v,
            advantages: &v,
            old_values: &v,
            returns: &v,
            old_head: &head,
            old_log_std: &[],
            mean_over: 0,
        };
        let kl = ppo(Objective::AdaptiveKl, 0.0);
        let (batched, generic) = (run(&kind, &b, &kl, true), run(&kind, &b, &kl, false));
        assert_eq!(batched.0, generic.0);
        assert_eq!(batched.1, generic.1, "the very same code");
    }
}
