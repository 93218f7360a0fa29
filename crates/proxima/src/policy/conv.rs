//! One Nature-CNN layer as a single candle custom op: convolution (no padding) + bias + ReLU,
//! `y = max(0, im2col(x / d)·Wᵀ + b)`, and its gradient. CPU only.
//!
//! Why not candle's ops: candle 0.11's `conv2d` gradient is wrong when the stride does not divide
//! `side − kernel` and slow at these sizes; a gather + `matmul` graph materialises the whole
//! im2col matrix (105 MB for conv1 at a minibatch of 256), and candle's matmul gradient also
//! computes the (unused) gradient of conv1's pixel windows. Here the windows of a few samples at
//! a time are gathered into a cache-sized buffer and multiplied there (the `gemm` crate, through
//! [`matmul`]: at these sizes — windows of 256 to 576 values, hundreds of positions — its packed,
//! cache-blocked kernels suit better than the fused MLP's register tiles); the backward pass gathers them again for `∂W`, and computes
//! `∂x` only when the input needs it (not for the pixels).
//!
//! Layouts (per sample, row-major): the input is `[C, H, W]` (the observation, `channels_last =
//! false`) or `[H, W, C]` (a previous layer's output); the output is `[P, out]`, P = OH·OW
//! positions, channel-last. The window of position `(oy, ox)` is read in `(ky, kx, c)` order for
//! a channel-last input, so `k·C` values are one contiguous run, and in the weight's own `(c, ky,
//! kx)` order for a channel-first one (runs of `k`); the weight `[out, C·k·k]` (PyTorch's
//! `[out, C, k, k]`) is permuted to the window's order for the product and its gradient permuted
//! back.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Storage, Tensor};
use proxima_kernels::conv::runs_of;
use proxima_kernels::View;
use std::sync::Arc;

/// Window values gathered per chunk of samples (≈ 512 KiB of f32: one core's L2 here).
const CHUNK_VALUES: usize = 1 << 17;

/// One input row's windows: `runs` `(source offset, length)` in order fill the `[P, K]` matrix.
#[derive(Debug)]
struct Geometry {
    in_len: usize,
    positions: usize,
    window: usize,
    out: usize,
    runs: Vec<(u32, u32)>,
    /// Column `j` of the window order is weight column `perm[j]` (None: the same order).
    perm: Option<Vec<u32>>,
    /// The input is divided by this before the convolution (255 for pixels, else 1).
    divisor: f32,
    /// Samples per chunk.
    chunk: usize,
}

/// The layer's op; `apply` runs it on `(x [B, in_len], w [out, K], b [out])`.
#[derive(Clone, Debug)]
pub(super) struct ConvRelu {
    geo: Arc<Geometry>,
}

impl ConvRelu {
    /// `in_shape` `(channels, height, width)`, square `kernel`, `stride`, `out` channels.
    ///
    /// # Panics
    /// When the kernel is larger than the input or a size is 0 (the spec checks the image first:
    /// [`super::ImageShape::nature_outputs`]).
    pub(super) fn new(
        in_shape: (usize, usize, usize),
        kernel: usize,
        stride: usize,
        out: usize,
        channels_last: bool,
        divisor: f32,
    ) -> ConvRelu {
        let (c, h, wd) = in_shape;
        assert!(c > 0 && kernel > 0 && stride > 0 && out > 0 && kernel <= h && kernel <= wd, "bad conv shape");
        let (oh, ow) = ((h - kernel) / stride + 1, (wd - kernel) / stride + 1);
        let at =
            |ci: usize, y: usize, x: usize| if channels_last { (y * wd + x) * c + ci } else { (ci * h + y) * wd + x };
        let mut index = Vec::with_capacity(oh * ow * c * kernel * kernel);
        for (oy, ox) in (0..oh).flat_map(|y| (0..ow).map(move |x| (y, x))) {
            let (y0, x0) = (oy * stride, ox * stride);
            for a in 0..kernel * kernel * c {
                let (ci, ky, kx) = if channels_last {
                    (a % c, a / (kernel * c), a / c % kernel)
                } else {
                    (a / (kernel * kernel), a / kernel % kernel, a % kernel)
                };
                index.push(at(ci, y0 + ky, x0 + kx));
            }
        }
        let window = c * kernel * kernel;
        let perm = channels_last.then(|| {
            (0..window)
                .map(|a| ((a % c) * kernel * kernel + a / (kernel * c) * kernel + a / c % kernel) as u32)
                .collect()
        });
        let geo = Geometry {
            in_len: c * h * wd,
            positions: oh * ow,
            window,
            out,
            runs: runs_of(&index),
            perm,
            divisor,
            chunk: (CHUNK_VALUES / (oh * ow * window)).max(1),
        };
        ConvRelu { geo: Arc::new(geo) }
    }

    /// `x` `[B, in_len]`, `w` `[out, C, k, k]`, `b` `[out]` → `[B, P·out]`, differentiable.
    pub(super) fn apply(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
        let w = w.reshape((self.geo.out, self.geo.window))?;
        x.contiguous()?.apply_op3(&w, b, self.clone())
    }
}

impl Geometry {
    /// The `[rows·P, K]` window matrix of input rows `x` (`rows·in_len` values) into `cols`,
    /// divided by the divisor: each input value once (into `scaled`), not once per window it is in.
    fn gather(&self, x: &[f32], scaled: &mut Vec<f32>, cols: &mut Vec<f32>) {
        let x = if self.divisor == 1.0 {
            x
        } else {
            scaled.clear();
            scaled.extend(x.iter().map(|v| v / self.divisor));
            scaled
        };
        cols.clear();
        for row in x.chunks_exact(self.in_len) {
            for &(s, n) in &self.runs {
                cols.extend_from_slice(&row[s as usize..(s + n) as usize]);
            }
        }
    }

    /// Adds window gradients `gcols` `[rows·P, K]` into their input rows `gx` (÷ the divisor).
    fn scatter_add(&self, gcols: &[f32], gx: &mut [f32]) {
        let per_row = self.positions * self.window;
        for (g, row) in gcols.chunks_exact(per_row).zip(gx.chunks_exact_mut(self.in_len)) {
            let mut at = 0;
            for &(s, n) in &self.runs {
                let (s, n) = (s as usize, n as usize);
                for (d, v) in row[s..s + n].iter_mut().zip(&g[at..at + n]) {
                    *d += v;
                }
                at += n;
            }
        }
        if self.divisor != 1.0 {
            gx.iter_mut().for_each(|v| *v /= self.divisor);
        }
    }

    /// The weight `[out, K]` in the window's column order.
    fn weight_in_window_order(&self, w: &[f32]) -> Vec<f32> {
        match &self.perm {
            None => w.to_vec(),
            Some(p) => w.chunks_exact(self.window).flat_map(|r| p.iter().map(move |&j| r[j as usize])).collect(),
        }
    }

    /// A `[out, K]` gradient in the window's order back in the weight's.
    fn weight_grad_in_weight_order(&self, g: Vec<f32>) -> Vec<f32> {
        let Some(p) = &self.perm else { return g };
        let mut back = vec![0f32; g.len()];
        for (src, dst) in g.chunks_exact(self.window).zip(back.chunks_exact_mut(self.window)) {
            for (&j, &v) in p.iter().zip(src) {
                dst[j as usize] = v;
            }
        }
        back
    }
}

/// The contiguous f32 values of a CPU storage with `len` values.
pub(crate) fn values<'a>(s: &'a CpuStorage, l: &Layout, len: usize, op: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else { candle_core::bail!("{op}: f32 only, got {:?}", s.dtype()) };
    match l.contiguous_offsets() {
        Some((start, end)) if end - start == len => Ok(&v[start..end]),
        Some((start, end)) => candle_core::bail!("{op}: {} values, expected {len}", end - start),
        None => candle_core::bail!("{op}: the input must be contiguous"),
    }
}

/// Reads a tensor's contiguous f32 values (CPU) and passes them to `f`.
pub(crate) fn with_values<T>(t: &Tensor, op: &str, f: impl FnOnce(&[f32]) -> T) -> candle_core::Result<T> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(s) = &*storage else { candle_core::bail!("{op}: CPU only") };
    Ok(f(values(s, layout, t.elem_count(), op)?))
}

impl CustomOp3 for ConvRelu {
    fn name(&self) -> &'static str {
        "conv_relu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let g = &*self.geo;
        let (batch, _) = l1.shape().dims2()?;
        let x = values(s1, l1, batch * g.in_len, "conv_relu")?;
        let w = g.weight_in_window_order(values(s2, l2, g.out * g.window, "conv_relu")?);
        let b = values(s3, l3, g.out, "conv_relu")?;
        let per_sample = g.positions * g.out;
        let mut y = vec![0f32; batch * per_sample];
        let (mut scaled, mut cols) = (Vec::new(), Vec::with_capacity(g.chunk * g.positions * g.window));
        for (xs, ys) in x.chunks(g.chunk * g.in_len).zip(y.chunks_mut(g.chunk * per_sample)) {
            g.gather(xs, &mut scaled, &mut cols);
            for row in ys.chunks_exact_mut(g.out) {
                row.copy_from_slice(b);
            }
            let rows = ys.len() / g.out;
            matmul(ys, rows, g.out, g.window, View::rows(&cols, g.window), View::transposed(&w, g.window), true);
            ys.iter_mut().for_each(|v| *v = v.max(0.0));
        }
        Ok((CpuStorage::F32(y), Shape::from((batch, per_sample))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = &*self.geo;
        let batch = x.dim(0)?;
        let wo = with_values(w, "conv_relu", |w| g.weight_in_window_order(w))?;
        // ∂L/∂(pre-activation): the incoming gradient where the output is positive (PyTorch's
        // ReLU derivative, 0 at 0).
        let masked: Vec<f32> = with_values(res, "conv_relu", |r| {
            with_values(grad, "conv_relu", |d| r.iter().zip(d).map(|(&r, &d)| if r > 0.0 { d } else { 0.0 }).collect())
        })??;
        let mut gb = vec![0f64; g.out];
        for row in masked.chunks_exact(g.out) {
            gb.iter_mut().zip(row).for_each(|(s, &v)| *s += f64::from(v));
        }
        let mut gw = vec![0f32; g.out * g.window];
        let mut gx = x.track_op().then(|| vec![0f32; batch * g.in_len]);
        with_values(x, "conv_relu", |x| {
            let (mut scaled, mut cols) = (Vec::new(), Vec::new());
            let mut gcols = vec![0f32; g.chunk * g.positions * g.window];
            let per_sample = g.positions * g.out;
            for (c, (xs, ms)) in x.chunks(g.chunk * g.in_len).zip(masked.chunks(g.chunk * per_sample)).enumerate() {
                g.gather(xs, &mut scaled, &mut cols);
                let rows = ms.len() / g.out;
                // ∂W [out, K] += ∂Yᵀ [out, rows]·cols [rows, K]
                matmul(&mut gw, g.out, g.window, rows, View::transposed(ms, g.out), View::rows(&cols, g.window), c > 0);
                if let Some(gx) = gx.as_mut() {
                    // ∂cols [rows, K] = ∂Y [rows, out]·W [out, K], scattered back into ∂x.
                    let gc = &mut gcols[..rows * g.window];
                    matmul(gc, rows, g.window, g.out, View::rows(ms, g.out), View::rows(&wo, g.window), false);
                    let start = c * g.chunk * g.in_len;
                    g.scatter_add(gc, &mut gx[start..start + xs.len()]);
                }
            }
        })?;
        let dev = x.device();
        let gw = Tensor::from_vec(g.weight_grad_in_weight_order(gw), (g.out, g.window), dev)?;
        let gb = Tensor::from_vec(gb.into_iter().map(|v| v as f32).collect::<Vec<_>>(), g.out, dev)?;
        let gx = gx.map(|v| Tensor::from_vec(v, (batch, g.in_len), dev)).transpose()?;
        Ok((gx, Some(gw), Some(gb)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

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

    /// A direct convolution + bias + ReLU in f64 on `[C, H, W]` or `[H, W, C]` input, output
    /// `[P, out]`.
    #[allow(clippy::too_many_arguments)]
    fn direct(
        x: &[f64],
        w: &[f64],
        b: &[f64],
        (c, h, wd): (usize, usize, usize),
        k: usize,
        s: usize,
        out: usize,
        last: bool,
        d: f64,
    ) -> Vec<f64> {
        let (oh, ow) = ((h - k) / s + 1, (wd - k) / s + 1);
        let mut y = Vec::new();
        for (oy, ox) in (0..oh).flat_map(|y| (0..ow).map(move |x| (y, x))) {
            for o in 0..out {
                let mut acc = b[o];
                for (ci, ky, kx) in (0..c).flat_map(|ci| (0..k).flat_map(move |ky| (0..k).map(move |kx| (ci, ky, kx))))
                {
                    let (yy, xx) = (oy * s + ky, ox * s + kx);
                    let at = if last { (yy * wd + xx) * c + ci } else { (ci * h + yy) * wd + xx };
                    acc += w[((o * c + ci) * k + ky) * k + kx] * x[at] / d;
                }
                y.push(acc.max(0.0));
            }
        }
        y
    }

    fn check(last: bool, track_input: bool, d: f32) {
        let (shape, k, s, out) = ((3, 7, 6), 3, 2, 4);
        let n = 3 * 7 * 6;
        let xs: Vec<f32> = (0..2 * n).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.25).collect();
        let ws: Vec<f32> = (0..out * 27).map(|i| ((i * 13 % 17) as f32 - 8.0) * 0.1).collect();
        let bs = vec![0.3f32, -0.2, 0.0, 0.1];
        let dev = Device::Cpu;
        let x = Var::from_vec(xs.clone(), (2, n), &dev).unwrap();
        let x_in = if track_input { x.as_tensor().clone() } else { x.as_tensor().detach() };
        let w = Var::from_vec(ws.clone(), (out, 3, k, k), &dev).unwrap();
        let b = Var::from_vec(bs.clone(), out, &dev).unwrap();
        let op = ConvRelu::new(shape, k, s, out, last, d);
        let y = op.apply(&x_in, w.as_tensor(), b.as_tensor()).unwrap();
        let f64s = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
        let expect: Vec<f64> = (0..2)
            .flat_map(|r| {
                direct(&f64s(&xs[r * n..(r + 1) * n]), &f64s(&ws), &f64s(&bs), shape, k, s, out, last, d.into())
            })
            .collect();
        let got = y.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(got.len(), expect.len());
        for (g, e) in got.iter().zip(&expect) {
            assert!((f64::from(*g) - e).abs() < 1e-5, "{g} vs {e}");
        }
        // L = Σ y·m for fixed m: check ∂L/∂w, ∂L/∂b, ∂L/∂x against central differences of the
        // f64 direct convolution.
        let m: Vec<f32> = (0..got.len()).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.5).collect();
        let mt = Tensor::from_vec(m.clone(), y.shape(), &dev).unwrap();
        let grads = (y * mt).unwrap().sum_all().unwrap().backward().unwrap();
        let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
            (0..2)
                .flat_map(|r| direct(&x[r * n..(r + 1) * n], w, b, shape, k, s, out, last, d.into()))
                .zip(&m)
                .map(|(y, &m)| y * f64::from(m))
                .sum()
        };
        let (x0, w0, b0) = (f64s(&xs), f64s(&ws), f64s(&bs));
        let fd = |which: usize, i: usize| {
            let (mut xp, mut wp, mut bp) = (x0.clone(), w0.clone(), b0.clone());
            let (mut xm, mut wm, mut bm) = (x0.clone(), w0.clone(), b0.clone());
            let e = 1e-6;
            match which {
                0 => (xp[i] += e, xm[i] -= e),
                1 => (wp[i] += e, wm[i] -= e),
                _ => (bp[i] += e, bm[i] -= e),
            };
            (loss(&xp, &wp, &bp) - loss(&xm, &wm, &bm)) / (2.0 * e)
        };
        let close = |got: Vec<f32>, which: usize| {
            for (i, g) in got.iter().enumerate() {
                let e = fd(which, i);
                assert!((f64::from(*g) - e).abs() < 1e-4 * (1.0 + e.abs()), "grad {which}[{i}]: {g} vs {e}");
            }
        };
        close(grads.get(w.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap(), 1);
        close(grads.get(b.as_tensor()).unwrap().to_vec1().unwrap(), 2);
        match grads.get(x.as_tensor()) {
            Some(gx) => {
                assert!(track_input);
                close(gx.flatten_all().unwrap().to_vec1().unwrap(), 0);
            }
            None => assert!(!track_input, "the input's gradient is missing"),
        }
    }

    #[test]
    fn channel_first_input_scaled_without_its_gradient() {
        check(false, false, 255.0);
    }

    #[test]
    fn channel_first_input_with_its_gradient() {
        check(false, true, 4.0);
    }

    #[test]
    fn channel_last_input_with_its_gradient() {
        check(true, true, 1.0);
    }

    #[test]
    fn runs_merge_consecutive_indices() {
        assert_eq!(runs_of(&[4, 5, 6, 9, 10, 2]), [(4, 3), (9, 2), (2, 1)]);
    }
}
