//! The dense-layer kernels of the fused backend on contiguous row-major f32 buffers: forward
//! `Y = X·Wᵀ + b`, the backward products `∂W = ∂Yᵀ·X`, `∂b = Σ_rows ∂Y`, `∂X = ∂Y·W`, and the
//! activations with their derivatives from the stored outputs (the forward pass and the
//! activations themselves are [`proxima_kernels::dense`]'s, shared with the inference crate).
//!
//! The matrix products are [`proxima_kernels::gemm::chain_gemm`]'s: every output one chain of
//! fused multiply-adds in a fixed order, the same bits on every machine and for every batch size
//! (so the rollout's forward pass of 4 rows gives each row the bits the update's pass of 128 gives
//! it). Weights stay in `torch.nn.Linear`'s `[out, in]` layout; the forward pass reads Wᵀ, made
//! once per parameter update ([`transpose`]), the backward pass W itself.
//!
//! The element-wise loops run through [`crate::simd`]: built with AVX-512 or AVX2 where the CPU
//! has it, the same bits either way.

use crate::policy::Activation;
use crate::simd::with_simd;
use proxima_kernels::dense;
pub(crate) use proxima_kernels::dense::NARROW;
use proxima_kernels::gemm::{chain_gemm, Rows, Start};
pub(crate) use proxima_kernels::transpose::transpose;
use proxima_kernels::View;

/// Products of at least this many multiply-adds are split in two when asked ([`chain_gemm_split`]).
const SPLIT_MIN_MACS: usize = 1 << 18;

/// [`chain_gemm`], its m rows cut in two halves computed side by side on rayon's pool when `split`
/// and the product is large: each element is its own chain, so the bits are the same either way.
pub(crate) fn chain_gemm_split(
    split: bool,
    dst: &mut [f32],
    (m, n, k): (usize, usize, usize),
    a: View<'_>,
    b: Rows<'_>,
    start: Start<'_>,
) {
    if !split || m < 2 || m * n * k < SPLIT_MIN_MACS {
        return chain_gemm(dst, (m, n, k), a, b, start);
    }
    let h = m / 2;
    let (d0, d1) = dst[..m * n].split_at_mut(h * n);
    let a1 = View { data: &a.data[h * a.rs..], ..a };
    rayon::join(|| chain_gemm(d0, (h, n, k), a, b, start), || chain_gemm(d1, (m - h, n, k), a1, b, start));
}

/// Forward of one dense layer on `rows` samples: [`proxima_kernels::dense::dense_forward`] (a
/// row's result does not depend on the other rows of the batch), with `split`: the product's
/// rows in two halves side by side ([`chain_gemm_split`]), the same bits.
pub(crate) fn dense_forward(
    y: &mut [f32],
    x: &[f32],
    (w, wt): (&[f32], &[f32]),
    b: &[f32],
    (rows, inp, out): (usize, usize, usize),
    (activation, split): (Option<Activation>, bool),
) {
    let act = activation.map(act_of);
    if out < NARROW || !split {
        return dense::dense_forward(y, x, (w, wt), b, (rows, inp, out), act);
    }
    let y = &mut y[..rows * out];
    chain_gemm_split(split, y, (rows, out, inp), View::rows(x, inp), Rows { data: wt, ld: out }, Start::Row(b));
    if let Some(a) = act {
        dense::activate(y, a);
    }
}

/// The kernels' activation for a policy's.
pub(crate) fn act_of(a: Activation) -> dense::Act {
    match a {
        Activation::Tanh => dense::Act::Tanh,
        Activation::Relu => dense::Act::Relu,
    }
}

/// Multiplies `dy` by the activation's derivative at the layer whose *output* was `y`:
/// tanh' = 1 − y², ReLU' = 1 where y > 0 (PyTorch's convention at 0), in place.
pub(crate) fn activation_backward(dy: &mut [f32], y: &[f32], activation: Activation) {
    with_simd(
        #[inline(always)]
        || match activation {
            Activation::Tanh => dy.iter_mut().zip(y).for_each(|(d, &y)| *d *= 1.0 - y * y),
            Activation::Relu => dy.iter_mut().zip(y).for_each(|(d, &y)| *d = if y > 0.0 { *d } else { 0.0 }),
        },
    )
}

/// Columns of ∂Wᵀ computed at a time when ∂W is taken transposed (a stack buffer of
/// [`NARROW`] × this).
const DW_PANEL: usize = 64;

/// Backward of one dense layer on `rows` samples given `dy[rows, out]` (already through the
/// activation): writes `dw[out, inp] = dyᵀ·x` and `db[out] = Σ_rows dy`, and when `dx` is given
/// `dx[rows, inp] = dy·W`. Every element of ∂W is one FMA chain over the rows in order, computed
/// as ∂Wᵀ = xᵀ·dy (vectors along `out`) when the layer has fewer than [`NARROW`] inputs and more
/// outputs (a tower's first layer: 4 inputs on CartPole), else as dyᵀ·x: the same chains either
/// way. `split`: ∂W's and ∂X's rows in two halves side by side ([`chain_gemm_split`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn dense_backward(
    dw: &mut [f32],
    db: &mut [f32],
    dx: Option<&mut [f32]>,
    dy: &[f32],
    x: &[f32],
    w: &[f32],
    (rows, inp, out): (usize, usize, usize),
    split: bool,
) {
    if inp < NARROW && out > inp {
        let mut panel = [0f32; NARROW * DW_PANEL];
        for o0 in (0..out).step_by(DW_PANEL) {
            let width = (out - o0).min(DW_PANEL);
            let dy_cols = Rows { data: &dy[o0..], ld: out };
            chain_gemm(&mut panel, (inp, width, rows), View::transposed(x, inp), dy_cols, Start::Zero);
            for (k, col) in panel[..inp * width].chunks_exact(width).enumerate() {
                for (o, &g) in col.iter().enumerate() {
                    dw[(o0 + o) * inp + k] = g;
                }
            }
        }
    } else {
        let dy_t = View::transposed(dy, out);
        chain_gemm_split(split, dw, (out, inp, rows), dy_t, Rows { data: x, ld: inp }, Start::Zero);
    }
    // ∂b = 1ᵀ·dy: each chain adds the rows in order (fma(1, g, s) is s + g, rounded once), its
    // columns in the kernel's registers.
    let ones = View { data: &[1.0], rs: 0, cs: 0 };
    chain_gemm(db, (1, out, rows), ones, Rows { data: dy, ld: out }, Start::Zero);
    if let Some(dx) = dx {
        chain_gemm_split(split, dx, (rows, inp, out), View::rows(dy, out), Rows { data: w, ld: inp }, Start::Zero);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::map_in_place;
    use proxima_kernels::dense::tanh_fma;

    #[test]
    fn fused_tanh_is_as_accurate_as_candles() {
        let (mut worst, mut x) = (0f64, -20.0f32);
        while x <= 20.0 {
            let t = tanh_fma(x);
            worst = worst.max((t as f64 - (x as f64).tanh()).abs());
            let d = (t - crate::policy::fast_tanh::tanh_f32(x)).abs();
            assert!(d <= 6e-7, "x = {x}: {t} vs {} ({d:e})", crate::policy::fast_tanh::tanh_f32(x));
            x += 1.3e-4;
        }
        assert!(worst < 5e-7, "max abs error {worst}");
        assert_eq!(tanh_fma(0.0), 0.0);
        assert!(tanh_fma(1e30) <= 1.0 && tanh_fma(-1e30) >= -1.0 && tanh_fma(f32::NAN).is_nan());
        let mut v = vec![0.3f32, -2.0, 9.0];
        map_in_place(&mut v, tanh_fma);
        assert_eq!(v, [tanh_fma(0.3), tanh_fma(-2.0), tanh_fma(9.0)], "the dispatched loop gives the scalar's bits");
    }

    fn wave(n: usize, f: f32) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * f).sin()).collect()
    }

    #[test]
    fn a_dense_layer_is_its_definition_and_each_row_its_own() {
        for (inp, out) in [(21, 5), (4, 64), (64, 64), (64, 40), (3, 1), (64, 2), (5, 130), (300, 256)] {
            let rows = 37;
            let (x, w, b) = (wave(rows * inp, 0.37), wave(out * inp, 0.11), wave(out, 0.9));
            let mut wt = vec![0f32; inp * out];
            transpose(&mut wt, &w, (inp, out));
            let mut y = vec![0f32; rows * out];
            dense_forward(&mut y, &x, (&w, &wt), &b, (rows, inp, out), (None, false));
            let mut halves = vec![0f32; rows * out];
            dense_forward(&mut halves, &x, (&w, &wt), &b, (rows, inp, out), (None, true));
            assert_eq!(halves, y, "{inp}x{out}: split in two, other bits");
            for r in 0..rows {
                for o in 0..out {
                    let want: f64 =
                        b[o] as f64 + (0..inp).map(|k| x[r * inp + k] as f64 * w[o * inp + k] as f64).sum::<f64>();
                    assert!((y[r * out + o] as f64 - want).abs() < 1e-5, "{inp}x{out} y[{r}, {o}]");
                }
            }
            for r in [0, 7, rows - 1] {
                let mut one = vec![0f32; out];
                dense_forward(&mut one, &x[r * inp..(r + 1) * inp], (&w, &wt), &b, (1, inp, out), (None, false));
                assert_eq!(one, y[r * out..(r + 1) * out], "{inp}x{out}: row {r} alone gives other bits");
            }
            let dy = wave(rows * out, 0.53);
            let (mut dw, mut db, mut dx) = (vec![0f32; out * inp], vec![0f32; out], vec![0f32; rows * inp]);
            dense_backward(&mut dw, &mut db, Some(&mut dx), &dy, &x, &w, (rows, inp, out), false);
            let (mut dw2, mut db2, mut dx2) = (vec![0f32; out * inp], vec![0f32; out], vec![0f32; rows * inp]);
            dense_backward(&mut dw2, &mut db2, Some(&mut dx2), &dy, &x, &w, (rows, inp, out), true);
            assert_eq!((&dw2, &db2, &dx2), (&dw, &db, &dx), "{inp}x{out}: split in two, other bits");
            for o in 0..out {
                let want_b: f64 = (0..rows).map(|r| dy[r * out + o] as f64).sum();
                assert!((db[o] as f64 - want_b).abs() < 1e-5);
                for k in 0..inp {
                    let want: f64 = (0..rows).map(|r| dy[r * out + o] as f64 * x[r * inp + k] as f64).sum();
                    assert!((dw[o * inp + k] as f64 - want).abs() < 1e-4, "{inp}x{out} dW[{o}, {k}]");
                    // Either orientation of ∂W runs the same chain over the rows: the direct one's bits.
                    let mut direct = [0f32];
                    let dy_col = View { data: &dy[o..], rs: 1, cs: out };
                    chain_gemm(&mut direct, (1, 1, rows), dy_col, Rows { data: &x[k..], ld: inp }, Start::Zero);
                    assert_eq!(dw[o * inp + k].to_bits(), direct[0].to_bits(), "{inp}x{out} dW[{o}, {k}]");
                }
            }
            for r in 0..rows {
                for k in 0..inp {
                    let want: f64 = (0..out).map(|o| dy[r * out + o] as f64 * w[o * inp + k] as f64).sum();
                    assert!((dx[r * inp + k] as f64 - want).abs() < 1e-6 * out as f64, "{inp}x{out} dX[{r}, {k}]");
                }
            }
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
