//! The dense-layer kernels of the fused backend on contiguous row-major f32 buffers: forward
//! `Y = X·Wᵀ + b`, the backward products `∂W = ∂Yᵀ·X`, `∂b = Σ_rows ∂Y`, `∂X = ∂Y·W`, and the
//! activations with their derivatives from the stored outputs.
//!
//! The matrix products go through the `gemm` crate (the one candle's CPU backend uses): it picks
//! its SIMD kernels (SSE/AVX2/AVX-512/NEON) by runtime CPU-feature detection, so one binary runs
//! on any x86-64 or aarch64 machine, and on one machine it is deterministic (single-threaded
//! here: `Parallelism::None`). Weights stay in `torch.nn.Linear`'s `[out, in]` layout; the
//! transposes are strides, never copies.
//!
//! The element-wise loops run through [`crate::simd`]: built with AVX2 where the CPU has it, the
//! same bits either way.

use crate::policy::Activation;
use crate::simd::{map_in_place, with_avx2};

/// A matrix view: base slice and its row and column strides (in elements).
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// A row-major `[rows, cols]` matrix.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        View { data, rs: cols, cs: 1 }
    }
    /// The transpose of a row-major matrix with `cols` columns.
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        View { data, rs: 1, cs: cols }
    }
    /// Index one past the last element an `[m, n]` view reads.
    fn extent(&self, m: usize, n: usize) -> usize {
        if m == 0 || n == 0 {
            0
        } else {
            (m - 1) * self.rs + (n - 1) * self.cs + 1
        }
    }
}

/// `dst[m, n]` (row-major, contiguous) = `a[m, k]·b[k, n]`, plus `dst` when `accumulate`.
///
/// # Panics
/// When a view is shorter than its shape needs (a bug in the caller: every size here is fixed
/// by the network's spec).
pub(crate) fn matmul(dst: &mut [f32], m: usize, n: usize, k: usize, a: View<'_>, b: View<'_>, accumulate: bool) {
    assert!(dst.len() >= m * n && a.data.len() >= a.extent(m, k) && b.data.len() >= b.extent(k, n));
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    // SAFETY: the assert above keeps every index gemm reads (a, b) and writes (dst) in bounds;
    // the three slices cannot alias (one is borrowed mutably).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// tanh(x) by the same [13/6] rational approximation as [`tanh_f32`] (Eigen's), its Horner
/// steps as fused multiply-adds: one rounding per step instead of two, and fewer instructions
/// (the fused backend's activation; candle's keeps [`tanh_f32`]).
#[inline(always)]
#[allow(clippy::excessive_precision)] // Eigen's constants as published
pub(crate) fn tanh_fma(a: f32) -> f32 {
    const CLAMP: f32 = 7.998_811_7;
    const A: [f32; 7] = [
        -2.760_768_477_423_55e-16,
        2.000_187_904_824_77e-13,
        -8.604_671_522_137_35e-11,
        5.122_297_090_371_14e-8,
        1.485_722_357_179_79e-5,
        6.372_619_288_754_36e-4,
        4.893_524_558_917_86e-3,
    ];
    const B: [f32; 4] =
        [1.198_258_394_667_02e-6, 1.185_347_056_866_54e-4, 2.268_434_632_439_00e-3, 4.893_525_185_543_85e-3];
    let x = a.clamp(-CLAMP, CLAMP); // NaN stays NaN
    let x2 = x * x;
    let mut p = A[0];
    for &k in &A[1..] {
        p = p.mul_add(x2, k);
    }
    let mut q = B[0];
    for &k in &B[1..] {
        q = q.mul_add(x2, k);
    }
    let r = p * x / q;
    if a.abs() < 4e-4 {
        a
    } else {
        r
    }
}

/// Below this many rows (the rollout's N observations per step) a layer runs as broadcast FMAs
/// over Wᵀ, without the GEMM's per-call cost.
pub(crate) const SMALL_BATCH: usize = 16;

/// `y[r, :] = b + Σ_k x[r, k]·Wᵀ[k, :]` for a few rows, with `w` = W `[out, inp]` and `wt` = Wᵀ
/// `[inp, out]`: blocks of 32 outputs accumulate in registers over k (broadcast FMAs on Wᵀ's
/// rows); a narrow layer (a head: fewer than 8 outputs) takes dot products of W's rows in 8
/// lanes instead. Every sum has a fixed order with fused multiply-adds: the same bits on every
/// machine.
fn small_forward(
    y: &mut [f32],
    x: &[f32],
    (w, wt): (&[f32], &[f32]),
    b: &[f32],
    (rows, inp, out): (usize, usize, usize),
) {
    const BLOCK: usize = 32;
    with_avx2(
        #[inline(always)]
        || {
            for r in 0..rows {
                let (xr, yr) = (&x[r * inp..(r + 1) * inp], &mut y[r * out..(r + 1) * out]);
                if out < 8 {
                    for (o, yo) in yr.iter_mut().enumerate() {
                        *yo = b[o] + dot8(xr, &w[o * inp..(o + 1) * inp]);
                    }
                    continue;
                }
                let mut ob = 0;
                while ob + BLOCK <= out {
                    let mut acc: [f32; BLOCK] = b[ob..ob + BLOCK].try_into().expect("a block");
                    for (k, &xk) in xr.iter().enumerate() {
                        let wk: &[f32; BLOCK] = wt[k * out + ob..k * out + ob + BLOCK].try_into().expect("a block");
                        for j in 0..BLOCK {
                            acc[j] = xk.mul_add(wk[j], acc[j]);
                        }
                    }
                    yr[ob..ob + BLOCK].copy_from_slice(&acc);
                    ob += BLOCK;
                }
                if ob < out {
                    let tail = &mut yr[ob..];
                    tail.copy_from_slice(&b[ob..out]);
                    for (k, &xk) in xr.iter().enumerate() {
                        for (yo, &wv) in tail.iter_mut().zip(&wt[k * out + ob..(k + 1) * out]) {
                            *yo = xk.mul_add(wv, *yo);
                        }
                    }
                }
            }
        },
    )
}

/// x·w in 8 interleaved lanes of fused multiply-adds, added pairwise at the end.
#[inline(always)]
fn dot8(x: &[f32], w: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xc, wc) = (x.chunks_exact(8), w.chunks_exact(8));
    let (xt, wt) = (xc.remainder(), wc.remainder());
    for (xs, ws) in xc.zip(wc) {
        for k in 0..8 {
            acc[k] = xs[k].mul_add(ws[k], acc[k]);
        }
    }
    for (k, (&xv, &wv)) in xt.iter().zip(wt).enumerate() {
        acc[k] = xv.mul_add(wv, acc[k]);
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// Wᵀ `[inp, out]` of W `[out, inp]` into `wt`.
pub(crate) fn transpose(wt: &mut [f32], w: &[f32], (inp, out): (usize, usize)) {
    for o in 0..out {
        for k in 0..inp {
            wt[k * out + o] = w[o * inp + k];
        }
    }
}

/// Forward of one dense layer on `rows` samples: `y[rows, out] = x[rows, inp]·Wᵀ + b` with W
/// `[out, inp]` (and, when given, its transpose `wt` for fewer than [`SMALL_BATCH`] rows), then
/// the activation in place when `activation` is given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dense_forward(
    y: &mut [f32],
    x: &[f32],
    (w, wt): (&[f32], Option<&[f32]>),
    b: &[f32],
    (rows, inp, out): (usize, usize, usize),
    activation: Option<Activation>,
) {
    let y = &mut y[..rows * out];
    if let Some(wt) = wt.filter(|_| rows < SMALL_BATCH) {
        small_forward(y, x, (w, wt), b, (rows, inp, out));
    } else {
        for row in y.chunks_exact_mut(out) {
            row.copy_from_slice(&b[..out]);
        }
        matmul(y, rows, out, inp, View::rows(x, inp), View::transposed(w, inp), true);
    }
    match activation {
        Some(Activation::Tanh) => map_in_place(y, tanh_fma),
        Some(Activation::Relu) => map_in_place(y, |v| v.max(0.0)),
        None => {}
    }
}

/// Multiplies `dy` by the activation's derivative at the layer whose *output* was `y`:
/// tanh' = 1 − y², ReLU' = 1 where y > 0 (PyTorch's convention at 0), in place.
pub(crate) fn activation_backward(dy: &mut [f32], y: &[f32], activation: Activation) {
    with_avx2(
        #[inline(always)]
        || match activation {
            Activation::Tanh => dy.iter_mut().zip(y).for_each(|(d, &y)| *d *= 1.0 - y * y),
            Activation::Relu => dy.iter_mut().zip(y).for_each(|(d, &y)| *d = if y > 0.0 { *d } else { 0.0 }),
        },
    )
}

/// Backward of one dense layer on `rows` samples given `dy[rows, out]` (already through the
/// activation): writes `dw[out, inp] = dyᵀ·x` and `db[out] = Σ_rows dy`, and when `dx` is given
/// `dx[rows, inp] = dy·W`.
pub(crate) fn dense_backward(
    dw: &mut [f32],
    db: &mut [f32],
    dx: Option<&mut [f32]>,
    dy: &[f32],
    x: &[f32],
    w: &[f32],
    (rows, inp, out): (usize, usize, usize),
) {
    matmul(dw, out, inp, rows, View::transposed(dy, out), View::rows(x, inp), false);
    let db = &mut db[..out];
    db.fill(0.0);
    for row in dy[..rows * out].chunks_exact(out) {
        db.iter_mut().zip(row).for_each(|(s, &g)| *s += g);
    }
    if let Some(dx) = dx {
        matmul(dx, rows, inp, out, View::rows(dy, out), View::rows(w, inp), false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        (0..m * n).map(|ij| (0..k).map(|l| a[(ij / n) * k + l] * b[l * n + ij % n]).sum()).collect()
    }

    #[test]
    fn matmul_with_transposes_matches_the_definition() {
        let (m, n, k) = (7, 5, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want = naive(&a, &b, m, n, k);
        let mut got = vec![0f32; m * n];
        matmul(&mut got, m, n, k, View::rows(&a, k), View::rows(&b, n), false);
        // Aᵀ stored as [k, m]: its transpose view is A again.
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let mut got_t = vec![1f32; m * n];
        matmul(&mut got_t, m, n, k, View::transposed(&at, m), View::rows(&b, n), true);
        for i in 0..m * n {
            assert!((got[i] - want[i]).abs() < 1e-6);
            assert!((got_t[i] - want[i] - 1.0).abs() < 1e-6, "accumulates into dst");
        }
    }

    #[test]
    fn fused_tanh_is_as_accurate_as_candles() {
        let (mut worst, mut x) = (0f64, -20.0f32);
        while x <= 20.0 {
            let t = tanh_fma(x);
            worst = worst.max((t as f64 - (x as f64).tanh()).abs());
            let d = (t - crate::policy::ops::tanh_f32(x)).abs();
            assert!(d <= 6e-7, "x = {x}: {t} vs {} ({d:e})", crate::policy::ops::tanh_f32(x));
            x += 1.3e-4;
        }
        assert!(worst < 5e-7, "max abs error {worst}");
        assert_eq!(tanh_fma(0.0), 0.0);
        assert!(tanh_fma(1e30) <= 1.0 && tanh_fma(-1e30) >= -1.0 && tanh_fma(f32::NAN).is_nan());
        let mut v = vec![0.3f32, -2.0, 9.0];
        map_in_place(&mut v, tanh_fma);
        assert_eq!(v, [tanh_fma(0.3), tanh_fma(-2.0), tanh_fma(9.0)], "the dispatched loop gives the scalar's bits");
    }

    #[test]
    fn the_small_batch_forward_matches_the_gemm_one() {
        for (inp, out) in [(21, 5), (4, 64), (64, 64), (64, 40), (3, 1)] {
            small_matches_gemm(inp, out);
        }
    }

    fn small_matches_gemm(inp: usize, out: usize) {
        let x: Vec<f32> = (0..3 * inp).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..out * inp).map(|i| (i as f32 * 0.11).cos()).collect();
        let b: Vec<f32> = (0..out).map(|i| i as f32 * 0.1).collect();
        let (mut small, mut big, mut wt) = (vec![0f32; 3 * out], vec![0f32; 3 * out], vec![0f32; inp * out]);
        transpose(&mut wt, &w, (inp, out));
        small_forward(&mut small, &x, (&w, &wt), &b, (3, inp, out));
        for r in big.chunks_exact_mut(out) {
            r.copy_from_slice(&b);
        }
        matmul(&mut big, 3, out, inp, View::rows(&x, inp), View::transposed(&w, inp), true);
        for (s, g) in small.iter().zip(&big) {
            assert!((s - g).abs() < 1e-5, "{inp}x{out}: {s} vs {g}");
        }
    }

    #[test]
    fn relu_derivative_is_zero_at_and_below_zero() {
        let mut d = [1f32, 1.0, 1.0];
        activation_backward(&mut d, &[0.0, 0.5, 0.0], Activation::Relu);
        assert_eq!(d, [0.0, 1.0, 0.0]);
        let mut d = [2f32];
        activation_backward(&mut d, &[0.5], Activation::Tanh);
        assert_eq!(d, [1.5]);
    }
}
