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

use crate::policy::ops::tanh_f32;
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

/// Forward of one dense layer on `rows` samples: `y[rows, out] = x[rows, inp]·Wᵀ + b` with W
/// `[out, inp]`, then the activation in place when `activation` is given.
pub(crate) fn dense_forward(
    y: &mut [f32],
    x: &[f32],
    w: &[f32],
    b: &[f32],
    (rows, inp, out): (usize, usize, usize),
    activation: Option<Activation>,
) {
    let y = &mut y[..rows * out];
    for row in y.chunks_exact_mut(out) {
        row.copy_from_slice(&b[..out]);
    }
    matmul(y, rows, out, inp, View::rows(x, inp), View::transposed(w, inp), true);
    match activation {
        Some(Activation::Tanh) => map_in_place(y, tanh_f32),
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
    fn relu_derivative_is_zero_at_and_below_zero() {
        let mut d = [1f32, 1.0, 1.0];
        activation_backward(&mut d, &[0.0, 0.5, 0.0], Activation::Relu);
        assert_eq!(d, [0.0, 1.0, 0.0]);
        let mut d = [2f32];
        activation_backward(&mut d, &[0.5], Activation::Tanh);
        assert_eq!(d, [1.5]);
    }
}
