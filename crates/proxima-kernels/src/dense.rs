//! The dense layer's forward pass on contiguous row-major f32 buffers, `Y = X·Wᵀ + b` and its
//! activation, as the fused training backend runs it and the inference crate (`proxima-policy`)
//! runs it again: one implementation, so a policy's actions are the same bits in both.
//!
//! Wide layers are [`crate::gemm::chain_gemm`]'s FMA chains over Wᵀ; narrow ones (the heads)
//! dot products of W's rows in 8 lanes. Either way a row's result does not depend on the other
//! rows of the batch.

use crate::gemm::{chain_gemm, Rows, Start};
use crate::simd::{map_in_place, with_simd};
use crate::View;

/// A hidden layer's activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// tanh, by [`tanh_fma`].
    Tanh,
    /// max(x, 0).
    Relu,
}

/// tanh(x) by the same [13/6] rational approximation as `proxima::policy::fast_tanh::tanh_f32` (Eigen's), its Horner
/// steps as fused multiply-adds: one rounding per step instead of two, and fewer instructions
/// (the fused backend's activation; candle's keeps `tanh_f32`).
#[inline(always)]
#[allow(clippy::excessive_precision)] // Eigen's constants as published
pub fn tanh_fma(a: f32) -> f32 {
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

/// Layers narrower than this (the heads: logits, V(s)) take each output as a dot product of
/// W's row in 8 lanes ([`dot8`]); wider ones as [`chain_gemm`]'s FMA chains over Wᵀ.
pub const NARROW: usize = 8;

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

/// Forward of one dense layer on `rows` samples: `y[rows, out] = x[rows, inp]·Wᵀ + b` with W
/// `[out, inp]` and its transpose `wt` `[inp, out]` (read for layers of [`NARROW`] outputs or
/// more; narrower ones may pass an empty `wt`), then the activation in place when `act` is
/// given. Each output is `b + dot8` (a narrow layer) or one FMA chain over the inputs starting at
/// b.
pub fn dense_forward(
    y: &mut [f32],
    x: &[f32],
    (w, wt): (&[f32], &[f32]),
    b: &[f32],
    (rows, inp, out): (usize, usize, usize),
    act: Option<Act>,
) {
    let y = &mut y[..rows * out];
    if out < NARROW {
        with_simd(
            #[inline(always)]
            || {
                for (xr, yr) in x.chunks_exact(inp).zip(y.chunks_exact_mut(out)) {
                    for (o, yo) in yr.iter_mut().enumerate() {
                        *yo = b[o] + dot8(xr, &w[o * inp..(o + 1) * inp]);
                    }
                }
            },
        );
    } else {
        chain_gemm(y, (rows, out, inp), View::rows(x, inp), Rows { data: wt, ld: out }, Start::Row(b));
    }
    if let Some(a) = act {
        activate(y, a);
    }
}

/// The activation applied to every element of `y` in place.
pub fn activate(y: &mut [f32], act: Act) {
    match act {
        Act::Tanh => map_in_place(y, tanh_fma),
        Act::Relu => map_in_place(y, |v| v.max(0.0)),
    }
}
