//! The Nature CNN's convolutions on the fused kernels: each layer a convolution without padding,
//! its bias and ReLU, `y = max(0, im2col(x / d)·Wᵀ + b)` (d = 255 for the pixels, else 1), and
//! its gradient, on [`chain_gemm`] (every output one FMA chain in a fixed order, so the same bits
//! on every SIMD tier, for every batch size and for any number of threads).
//!
//! Layouts (per sample, row-major), as the candle backend's `policy/conv.rs`: the pixels are `[C,
//! H, W]` (read as f32 0..=255); a layer's output is `[P, out]`, P = OH·OW positions, channel-last.
//! The window of a position is read in `(ky, kx, c)` order from a channel-last input (runs of
//! `k·C` values). The pixels are divided by 255 and, when the kernel is a multiple of the stride
//! (the Nature CNN's 8 = 2·4), rearranged space-to-depth once per batch
//! ([`ConvLayer::pixels`]), so that their windows are runs of 128 values too; else their windows
//! are read in the weight's own `(c, ky, kx)` order (runs of `k`). The weight `[out, C, k, k]` is
//! permuted to the window's order once per θ version, and ∂W permuted back.
//!
//! The window matrix is not made where each window is a few long runs (at least [`MIN_RUN`]
//! values: the Nature CNN's 128, 128 and 192): the products read the windows where they lie
//! ([`chain_gemm_table_a`], [`chain_gemm_table_b`], rows from a table of window origins), one run
//! of the window after another, each continuing the chains the run before left in C
//! ([`Start::Dst`]: the same chains, so the same bits, as the product of the window matrix).
//! Short runs are gathered into a window matrix, a few samples at a time into a buffer of about
//! [`CHUNK_VALUES`] values (one core's L2), and multiplied there. Either way ∂W = ∂Yᵀ·cols
//! accumulates chunk after chunk into the same chains, so its bits do not depend on the chunk
//! size.
//!
//! Two threads split each pass without changing a bit: the forward pass and ∂x by samples (each
//! sample's outputs are its own), ∂W by window columns (each element's chain runs over every row
//! in order either way) — on rayon's pool with the `threads` feature (the training backend's),
//! else one after the other (the inference crate's).
//!
//! The fused backend (`proxima::policy::fused`) trains with it; `proxima-policy` acts with it.

use crate::gemm::{chain_gemm, chain_gemm_table_a, chain_gemm_table_b, Rows, Start, Table};
use crate::transpose::transpose;
use crate::View;

/// Window values gathered per chunk of samples (512 KiB of f32).
const CHUNK_VALUES: usize = 1 << 17;

/// The shortest run of a window read in place (shorter runs are gathered: each run is one
/// product, whose C is read and written again).
const MIN_RUN: u32 = 32;

/// A pixel value the first convolution reads: f32, or a uint8 frame's byte (the rollout's own
/// storage, read without a float copy of it). Either is divided by the layer's divisor as the
/// f32 it equals, so both give the same bits.
pub trait Pixel: Copy + Send + Sync {
    /// The value as f32 (exact for a byte).
    fn value(self) -> f32;
    /// The values themselves when they are f32, which a layer with nothing to prepare reads in
    /// place; `None` for bytes.
    fn as_f32(x: &[Self]) -> Option<&[f32]>;
}

impl Pixel for f32 {
    fn value(self) -> f32 {
        self
    }
    fn as_f32(x: &[f32]) -> Option<&[f32]> {
        Some(x)
    }
}

impl Pixel for u8 {
    fn value(self) -> f32 {
        f32::from(self)
    }
    fn as_f32(_: &[u8]) -> Option<&[f32]> {
        None
    }
}

/// A thread's scratch: a chunk's window matrix (or its gradient), and its window origins.
#[derive(Debug, Default)]
struct Scratch {
    cols: Vec<f32>,
    origins: Vec<u32>,
}

/// One convolution + bias + ReLU: its place in θ and its geometry.
#[derive(Debug)]
pub struct ConvLayer {
    /// Offsets of the weight `[out, C, k, k]` and bias `[out]` in θ.
    w: usize,
    b: usize,
    /// Input values per sample.
    in_len: usize,
    /// Values per sample of what the windows are read from: `in_len`, or the space-to-depth
    /// image's.
    src_len: usize,
    /// The pixels' convolution read as one over their space-to-depth image.
    s2d: Option<SpaceToDepth>,
    /// Output positions per sample (P).
    positions: usize,
    /// Window length K = C·k·k.
    window: usize,
    /// Output channels.
    out: usize,
    /// One position's window as runs `(offset from the window's origin, length)`, in window order.
    runs: Vec<(u32, u32)>,
    /// Each position's window origin in the input.
    origins: Vec<u32>,
    /// Window column `j` is weight column `perm[j]` (`None`: the weight's order).
    perm: Option<Vec<u32>>,
    /// The input is divided by this before the convolution.
    divisor: f32,
    /// Samples per chunk.
    chunk: usize,
}

impl ConvLayer {
    /// A layer at θ offsets `(w, b)` on inputs `(channels, height, width)`, channel-last or not,
    /// with a square `kernel`, `stride` and `out` channels. The caller checks the shapes
    /// ([`crate::policy::ImageShape::nature_outputs`]).
    pub fn new(
        (w, b): (usize, usize),
        (c, h, wd): (usize, usize, usize),
        (kernel, stride, out): (usize, usize, usize),
        channels_last: bool,
        divisor: f32,
    ) -> ConvLayer {
        let (oh, ow) = ((h - kernel) / stride + 1, (wd - kernel) / stride + 1);
        let at =
            |ci: usize, y: usize, x: usize| if channels_last { (y * wd + x) * c + ci } else { (ci * h + y) * wd + x };
        let window = c * kernel * kernel;
        let mut offsets = Vec::with_capacity(window);
        for a in 0..window {
            let (ci, ky, kx) = if channels_last {
                (a % c, a / (kernel * c), a / c % kernel)
            } else {
                (a / (kernel * kernel), a / kernel % kernel, a % kernel)
            };
            offsets.push(at(ci, ky, kx));
        }
        let origins = (0..oh).flat_map(|y| (0..ow).map(move |x| at(0, y * stride, x * stride) as u32)).collect();
        let perm = channels_last.then(|| {
            (0..window)
                .map(|a| ((a % c) * kernel * kernel + a / (kernel * c) * kernel + a / c % kernel) as u32)
                .collect()
        });
        ConvLayer {
            w,
            b,
            in_len: c * h * wd,
            src_len: c * h * wd,
            s2d: None,
            positions: oh * ow,
            window,
            out,
            runs: runs_of(&offsets),
            origins,
            perm,
            divisor,
            chunk: (CHUNK_VALUES / (oh * ow * window)).max(1),
        }
    }

    /// A convolution of the pixels `[C, H, W]` (channel-first) whose kernel is a multiple q of
    /// its stride s (the Nature CNN's first: 8 = 2·4), read as the convolution of kernel q and
    /// stride 1 over the space-to-depth image `[H/s, W/s, s·s·C]` (channel-last): the same
    /// windows, gathered in runs of q·s·s·C values (128 for the Nature CNN) rather than of k (8).
    /// The window order, and so each output's chain of products, is `(ky/s, kx/s, ky%s, kx%s,
    /// c)`; the weight is permuted to it. Other kernels: [`ConvLayer::new`], channel-first.
    pub fn pixels(
        at: (usize, usize),
        (c, h, wd): (usize, usize, usize),
        (kernel, stride, out): (usize, usize, usize),
        divisor: f32,
    ) -> ConvLayer {
        if stride == 1 || kernel % stride != 0 {
            return ConvLayer::new(at, (c, h, wd), (kernel, stride, out), false, divisor);
        }
        let (q, s) = (kernel / stride, stride);
        let cb = s * s * c;
        let mut layer = ConvLayer::new(at, (cb, h / s, wd / s), (q, 1, out), true, divisor);
        layer.perm = Some(
            (0..layer.window)
                .map(|j| {
                    let (block, cj) = (j / cb, j % cb);
                    let (by, bx, dy, dx, ci) = (block / q, block % q, cj / c / s, cj / c % s, cj % c);
                    (ci * kernel * kernel + (by * s + dy) * kernel + bx * s + dx) as u32
                })
                .collect(),
        );
        layer.s2d = Some(SpaceToDepth { s, c, h, w: wd });
        layer.in_len = c * h * wd;
        layer
    }

    /// Whether the windows are read from the input itself, or from [`ConvLayer::prepare`]'s.
    fn reads_input(&self) -> bool {
        self.divisor == 1.0 && self.s2d.is_none()
    }

    /// What the windows of samples `x` (`n·in_len`) are read from, into `dst` (`n·src_len`):
    /// `x` divided by the divisor (and rearranged space-to-depth), each value once.
    fn prepare<P: Pixel>(&self, x: &[P], dst: &mut [f32]) {
        match &self.s2d {
            None => dst.iter_mut().zip(x).for_each(|(d, v)| *d = v.value() / self.divisor),
            Some(t) => {
                for (src, dst) in x.chunks_exact(self.in_len).zip(dst.chunks_exact_mut(self.src_len)) {
                    t.apply(src, dst, self.divisor);
                }
            }
        }
    }

    /// Output values per sample.
    pub fn out_len(&self) -> usize {
        self.positions * self.out
    }

    /// The weight in window order `[out, K]` (`wk`) and its transpose `[K, out]` (`wkt`) from θ.
    fn window_weights(&self, theta: &[f32], wk: &mut [f32], wkt: &mut [f32]) {
        let w = &theta[self.w..self.w + self.out * self.window];
        match &self.perm {
            None => wk.copy_from_slice(w),
            Some(perm) => {
                for (dst, src) in wk.chunks_exact_mut(self.window).zip(w.chunks_exact(self.window)) {
                    dst.iter_mut().zip(perm).for_each(|(d, &p)| *d = src[p as usize]);
                }
            }
        }
        transpose(wkt, wk, (self.window, self.out));
    }

    /// Whether the windows are multiplied where they lie (each run at least [`MIN_RUN`] long).
    fn in_place(&self) -> bool {
        self.runs.iter().all(|&(_, n)| n >= MIN_RUN)
    }

    /// The origins of the windows of `n` samples (sample after sample, position after position)
    /// in what they are read from (`n·src_len` values) into `origins`.
    fn window_origins(&self, n: usize, origins: &mut Vec<u32>) {
        origins.clear();
        for sample in 0..n {
            let at = (sample * self.src_len) as u32;
            origins.extend(self.origins.iter().map(|&o| at + o));
        }
    }

    /// Window columns `cols` of samples `x` (`n·src_len` values: the input, or what
    /// [`ConvLayer::prepare`] made of it) into `buf` `[n·P, cols.len()]`.
    fn gather(&self, x: &[f32], cols: std::ops::Range<usize>, buf: &mut Vec<f32>) {
        buf.clear();
        for sample in x.chunks_exact(self.src_len) {
            for &o in &self.origins {
                let mut j = 0;
                for &(s, n) in &self.runs {
                    let (s, n) = (s as usize, n as usize);
                    let (lo, hi) = (j.max(cols.start), (j + n).min(cols.end));
                    if lo < hi {
                        buf.extend_from_slice(&sample[o as usize + s + lo - j..o as usize + s + hi - j]);
                    }
                    j += n;
                }
            }
        }
    }

    /// Adds window gradients `gcols` `[n·P, K]` into their samples' input gradients `gx`
    /// (`n·in_len`, zeroed here first), in window order.
    fn scatter_add(&self, gcols: &[f32], gx: &mut [f32]) {
        debug_assert!(self.s2d.is_none(), "no ∂x of the pixels");
        gx.fill(0.0);
        let per_sample = self.positions * self.window;
        for (g, sample) in gcols.chunks_exact(per_sample).zip(gx.chunks_exact_mut(self.in_len)) {
            for (gp, &o) in g.chunks_exact(self.window).zip(&self.origins) {
                let mut j = 0;
                for &(s, n) in &self.runs {
                    let (s, n) = (o as usize + s as usize, n as usize);
                    sample[s..s + n].iter_mut().zip(&gp[j..j + n]).for_each(|(d, &v)| *d += v);
                    j += n;
                }
            }
        }
        if self.divisor != 1.0 {
            gx.iter_mut().for_each(|v| *v /= self.divisor);
        }
    }

    /// Forward of samples `x` (`n·src_len`: see [`ConvLayer::gather`]) into `y` (`n·P·out`) with
    /// the window-order weight transpose `wkt` and bias `b`, ReLU applied.
    fn forward(&self, x: &[f32], y: &mut [f32], (wkt, b): (&[f32], &[f32]), scratch: &mut Scratch) {
        let (k, out, p) = (self.window, self.out, self.positions);
        for (xc, yc) in x.chunks(self.chunk * self.src_len).zip(y.chunks_mut(self.chunk * p * out)) {
            let m = xc.len() / self.src_len * p;
            if self.in_place() {
                self.window_origins(m / p, &mut scratch.origins);
                let mut j = 0;
                for (r, &(s, n)) in self.runs.iter().enumerate() {
                    let (s, n) = (s as usize, n as usize);
                    let start = if r == 0 { Start::Row(b) } else { Start::Dst };
                    let a = Table { data: xc, offsets: &scratch.origins, base: s };
                    chain_gemm_table_a((yc, out), (m, out, n), a, Rows { data: &wkt[j * out..], ld: out }, start);
                    j += n;
                }
            } else {
                self.gather(xc, 0..k, &mut scratch.cols);
                chain_gemm(yc, (m, out, k), View::rows(&scratch.cols, k), Rows { data: wkt, ld: out }, Start::Row(b));
            }
            yc.iter_mut().for_each(|v| *v = v.max(0.0));
        }
    }

    /// ∂W (window order) columns `cols` into `dw` `[out, cols.len()]` = ∂Yᵀ·window columns over
    /// every sample of `x` (`n·src_len`) in order, and ∂b into `db` when given.
    fn weight_grad(
        &self,
        (x, dy): (&[f32], &[f32]),
        cols: std::ops::Range<usize>,
        dw: &mut [f32],
        mut db: Option<&mut [f32]>,
        scratch: &mut Scratch,
    ) {
        let (out, p, width) = (self.out, self.positions, cols.len());
        if width == 0 {
            return;
        }
        let ones = View { data: &[1.0], rs: 0, cs: 0 };
        for (i, (xc, dyc)) in x.chunks(self.chunk * self.src_len).zip(dy.chunks(self.chunk * p * out)).enumerate() {
            let start = if i == 0 { Start::Zero } else { Start::Dst };
            let m = xc.len() / self.src_len * p;
            if self.in_place() {
                self.window_origins(m / p, &mut scratch.origins);
                // Each run's share of the columns, read in place: ∂W's columns lo..hi.
                let mut j = 0;
                for &(s, n) in &self.runs {
                    let (s, n) = (s as usize, n as usize);
                    let (lo, hi) = (j.max(cols.start), (j + n).min(cols.end));
                    if lo < hi {
                        let b = Table { data: xc, offsets: &scratch.origins, base: s + lo - j };
                        let dst = (&mut dw[lo - cols.start..], width);
                        chain_gemm_table_b(dst, (out, hi - lo, m), View::transposed(dyc, out), b, start);
                    }
                    j += n;
                }
            } else {
                self.gather(xc, cols.clone(), &mut scratch.cols);
                let b = Rows { data: &scratch.cols, ld: width };
                chain_gemm(dw, (out, width, m), View::transposed(dyc, out), b, start);
            }
            if let Some(db) = db.as_deref_mut() {
                chain_gemm(db, (1, out, m), ones, Rows { data: dyc, ld: out }, start);
            }
        }
    }

    /// ∂x of samples (`n·in_len` into `dx`) from ∂Y `dy` (`n·P·out`) and the window-order weight
    /// `wk` `[out, K]`.
    fn input_grad(&self, dy: &[f32], wk: &[f32], dx: &mut [f32], scratch: &mut Scratch) {
        let (k, out, p) = (self.window, self.out, self.positions);
        let buf = &mut scratch.cols;
        for (dyc, dxc) in dy.chunks(self.chunk * p * out).zip(dx.chunks_mut(self.chunk * self.in_len)) {
            let m = dyc.len() / out;
            grow_to(buf, m * k);
            chain_gemm(&mut buf[..m * k], (m, k, out), View::rows(dyc, out), Rows { data: wk, ld: k }, Start::Zero);
            self.scatter_add(&buf[..m * k], dxc);
        }
    }

    /// Window columns `cols` of ∂W, `dw` `[out, cols.len()]`, into θ's `[out, C, k, k]` order
    /// in `grad`.
    fn unpermute(&self, dw: &[f32], cols: std::ops::Range<usize>, grad: &mut [f32]) {
        let g = &mut grad[self.w..self.w + self.out * self.window];
        for (dst, src) in g.chunks_exact_mut(self.window).zip(dw.chunks_exact(cols.len().max(1))) {
            match &self.perm {
                None => dst[cols.clone()].copy_from_slice(src),
                Some(perm) => src.iter().zip(&perm[cols.clone()]).for_each(|(&v, &p)| dst[p as usize] = v),
            }
        }
    }
}

/// The space-to-depth rearrangement of `[C, H, W]` images with blocks of s × s:
/// `[⌊H/s⌋, ⌊W/s⌋, s·s·C]`, element `(by, bx, (dy·s + dx)·C + c)` = pixel `(c, by·s + dy, bx·s + dx)`
/// (the rows and columns past the last whole block, which no window reads, are left out).
#[derive(Debug)]
struct SpaceToDepth {
    s: usize,
    c: usize,
    h: usize,
    w: usize,
}

impl SpaceToDepth {
    /// One image `src` `[C, H, W]` divided by `d` into `dst`.
    fn apply<P: Pixel>(&self, src: &[P], dst: &mut [f32], d: f32) {
        let (s, c, (hb, wb)) = (self.s, self.c, (self.h / self.s, self.w / self.s));
        let block = s * s * c;
        for ci in 0..c {
            for by in 0..hb {
                for dy in 0..s {
                    let row = &src[(ci * self.h + by * s + dy) * self.w..][..wb * s];
                    let out = &mut dst[by * wb * block + dy * s * c + ci..];
                    for (bx, px) in row.chunks_exact(s).enumerate() {
                        for (dx, &v) in px.iter().enumerate() {
                            out[bx * block + dx * c] = v.value() / d;
                        }
                    }
                }
            }
        }
    }
}

fn grow_to(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// Runs `a` and `b`, side by side on rayon's pool when `parallel` (with the `threads` feature).
fn both(parallel: bool, a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    #[cfg(feature = "threads")]
    if parallel {
        rayon::join(a, b);
        return;
    }
    let _ = parallel;
    a();
    b();
}

/// An index list as runs of consecutive indices `(first, length)`, in order.
pub fn runs_of(index: &[usize]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &i in index {
        match runs.last_mut() {
            Some((s, n)) if (*s + *n) as usize == i => *n += 1,
            _ => runs.push((i as u32, 1)),
        }
    }
    runs
}

/// The Nature CNN's convolutions, pixels to the features the dense layer reads (the last
/// layer's output flattened channel-first, as PyTorch's `nn.Flatten` reads `[C, H, W]`).
#[derive(Debug)]
pub struct ConvStack {
    /// The layers, pixels first.
    pub layers: Vec<ConvLayer>,
}

/// The activations of one batch and the buffers of the passes; grows with the batch.
#[derive(Debug, Default)]
pub struct ConvWorkspace {
    rows: usize,
    /// Each layer's output after its ReLU, `[rows, P, out]`.
    outs: Vec<Vec<f32>>,
    /// The features, `[rows, out·P]` channel-first.
    pub features: Vec<f32>,
    /// ∂L/∂features, `[rows, out·P]`, filled by the dense part's backward pass.
    pub d_features: Vec<f32>,
    d_a: Vec<f32>,
    d_b: Vec<f32>,
    /// Per layer, the weight in window order and its transpose, and the θ version they are of.
    wk: Vec<Vec<f32>>,
    wkt: Vec<Vec<f32>>,
    w_version: Option<u64>,
    /// Per thread: a chunk's window matrix (or its gradient) and window origins, and a ∂W half.
    bufs: [Scratch; 2],
    /// The first layer's input as [`ConvLayer::prepare`] made it, `[rows, src_len]` (read again
    /// by the backward pass).
    prepared: Vec<f32>,
    dw: [Vec<f32>; 2],
}

impl ConvStack {
    /// Features per sample.
    pub fn features(&self) -> usize {
        self.layers.last().map_or(0, ConvLayer::out_len)
    }

    fn ensure(&self, ws: &mut ConvWorkspace, rows: usize) {
        if ws.outs.len() != self.layers.len() {
            ws.outs = vec![Vec::new(); self.layers.len()];
            ws.wk = self.layers.iter().map(|l| vec![0.0; l.out * l.window]).collect();
            ws.wkt = ws.wk.clone();
        }
        if rows <= ws.rows {
            return;
        }
        ws.rows = rows;
        let widest = self.layers.iter().map(ConvLayer::out_len).max().unwrap_or(0);
        for (o, l) in ws.outs.iter_mut().zip(&self.layers) {
            grow_to(o, rows * l.out_len());
        }
        for v in [&mut ws.features, &mut ws.d_features, &mut ws.d_a, &mut ws.d_b] {
            grow_to(v, rows * widest);
        }
    }

    fn refresh_weights(&self, theta: &[f32], version: u64, ws: &mut ConvWorkspace) {
        if ws.w_version == Some(version) {
            return;
        }
        for ((l, wk), wkt) in self.layers.iter().zip(&mut ws.wk).zip(&mut ws.wkt) {
            l.window_weights(theta, wk, wkt);
        }
        ws.w_version = Some(version);
    }

    /// The features of `rows` samples of pixels `x` (f32 values, or a frame's bytes) into
    /// `ws.features` (θ at `version`).
    pub fn forward<P: Pixel>(
        &self,
        theta: &[f32],
        version: u64,
        ws: &mut ConvWorkspace,
        x: &[P],
        rows: usize,
        parallel: bool,
    ) {
        self.ensure(ws, rows);
        self.refresh_weights(theta, version, ws);
        let ConvWorkspace { outs, features, wkt, bufs, prepared, .. } = ws;
        let half = rows.div_ceil(2);
        let parallel = parallel && rows > 1;
        let first = &self.layers[0];
        let pixels = if let Some(x) = first.reads_input().then(|| P::as_f32(x)).flatten() {
            &x[..rows * first.in_len]
        } else {
            grow_to(prepared, rows * first.src_len);
            let (x0, x1) = x[..rows * first.in_len].split_at(half * first.in_len);
            let (p0, p1) = prepared[..rows * first.src_len].split_at_mut(half * first.src_len);
            both(parallel, || first.prepare(x0, p0), || first.prepare(x1, p1));
            &prepared[..rows * first.src_len]
        };
        for (i, l) in self.layers.iter().enumerate() {
            let (prev, cur) = outs.split_at_mut(i);
            let input = if i == 0 { pixels } else { &prev[i - 1][..rows * l.src_len] };
            let y = &mut cur[0][..rows * l.out_len()];
            let w = (&wkt[i][..], &theta[l.b..l.b + l.out]);
            let (x0, x1) = input.split_at(half.min(rows) * l.src_len);
            let (y0, y1) = y.split_at_mut(half.min(rows) * l.out_len());
            let [b0, b1] = &mut *bufs;
            both(parallel, || l.forward(x0, y0, w, b0), || l.forward(x1, y1, w, b1));
        }
        let last = &self.layers[self.layers.len() - 1];
        let (p, c) = (last.positions, last.out);
        let (f0, f1) = features[..rows * p * c].split_at_mut(half * p * c);
        let (y0, y1) = outs[outs.len() - 1][..rows * p * c].split_at(half * p * c);
        both(parallel, || transpose_each(f0, y0, (c, p)), || transpose_each(f1, y1, (c, p)));
    }

    /// ∇θ of the convolutions into `grad` from `ws.d_features` (∂L/∂features of the `rows`
    /// samples of the last [`ConvStack::forward`], pixels `x`).
    pub fn backward<P: Pixel>(&self, ws: &mut ConvWorkspace, x: &[P], grad: &mut [f32], rows: usize, parallel: bool) {
        let ConvWorkspace { outs, d_features, d_a, d_b, wk, bufs, dw, prepared, .. } = ws;
        let pixels = self.layers[0].reads_input().then(|| P::as_f32(x)).flatten().unwrap_or(&prepared[..]);
        let last = &self.layers[self.layers.len() - 1];
        let (p, c) = (last.positions, last.out);
        let half = rows.div_ceil(2);
        let parallel_rows = parallel && rows > 1;
        let (a0, a1) = d_a[..rows * p * c].split_at_mut(half * p * c);
        let (f0, f1) = d_features[..rows * p * c].split_at(half * p * c);
        both(parallel_rows, || transpose_each(a0, f0, (p, c)), || transpose_each(a1, f1, (p, c)));
        let (mut dy, mut spare) = (d_a, d_b);
        for i in (0..self.layers.len()).rev() {
            let l = &self.layers[i];
            let n = rows * l.out_len();
            let (d0, d1) = dy[..n].split_at_mut(half * l.out_len());
            let (o0, o1) = outs[i][..n].split_at(half * l.out_len());
            both(parallel_rows, || relu_backward(d0, o0), || relu_backward(d1, o1));
            let input = if i == 0 { &pixels[..rows * l.src_len] } else { &outs[i - 1][..rows * l.src_len] };
            let split = if parallel { l.window / 2 } else { l.window };
            let [dw0, dw1] = &mut *dw;
            let (w0, w1) = (l.out * split, l.out * (l.window - split));
            grow_to(dw0, w0);
            grow_to(dw1, w1);
            let (db, [b0, b1]) = (&mut grad[l.b..l.b + l.out], &mut *bufs);
            let dyn_ = &dy[..n];
            both(
                parallel,
                || l.weight_grad((input, dyn_), 0..split, &mut dw0[..w0], Some(db), b0),
                || l.weight_grad((input, dyn_), split..l.window, &mut dw1[..w1], None, b1),
            );
            l.unpermute(&dw0[..w0], 0..split, grad);
            l.unpermute(&dw1[..w1], split..l.window, grad);
            if i > 0 {
                let dx = &mut spare[..rows * l.in_len];
                let (dy0, dy1) = dyn_.split_at(half * l.out_len());
                let (dx0, dx1) = dx.split_at_mut(half * l.in_len);
                let wk = &wk[i][..];
                both(parallel, || l.input_grad(dy0, wk, dx0, b0), || l.input_grad(dy1, wk, dx1, b1));
                std::mem::swap(&mut dy, &mut spare);
            }
        }
    }
}

/// Each sample's `[rows, cols]` block of `src` transposed into `dst` (blocks of `rows·cols`).
fn transpose_each(dst: &mut [f32], src: &[f32], (rows, cols): (usize, usize)) {
    for (d, s) in dst.chunks_exact_mut(rows * cols).zip(src.chunks_exact(rows * cols)) {
        transpose(d, s, (rows, cols));
    }
}

/// ∂y *= 1 where the ReLU's output y > 0, else 0 (PyTorch's convention at 0).
fn relu_backward(dy: &mut [f32], y: &[f32]) {
    dy.iter_mut().zip(y).for_each(|(d, &y)| *d = if y > 0.0 { *d } else { 0.0 });
}
