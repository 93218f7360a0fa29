//! The pixel operations of the Atari preprocessing, exact to OpenCV's `uint8` paths as
//! Stable-Baselines3's `WarpFrame` calls them:
//!
//! * [`rgb_to_gray`] = `cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)`: Y = 0.299 R + 0.587 G + 0.114 B
//!   in OpenCV's 15-bit fixed point (`RGB2Gray<uchar>`, coefficients 9798, 19235, 3735, rounded
//!   by adding 2¹⁴ before the shift).
//! * [`AreaResize`] = `cv2.resize(gray, (width, height), interpolation=cv2.INTER_AREA)` when
//!   shrinking: each output pixel is the area-weighted mean of the source pixels its cell
//!   covers, with OpenCV's tables (`computeResizeAreaTab`: f64 cell bounds, f32 weights, slivers
//!   under 10⁻³ of a pixel dropped), its f32 accumulation order (`ResizeArea_Invoker`: each
//!   source row summed across x into a buffer, rows then added with their y weight) and its
//!   rounding (`saturate_cast<uchar>`: to nearest, ties to even, clamped to 0..=255).
//! * [`max_frames`] = `np.maximum` of the last two raw frames (`MaxAndSkipEnv`).
//!
//! Checked against `cv2` itself on random and extreme frames at several sizes
//! (`crates/proxima-env/tests/atari_frames.rs`, when a Python with `opencv-python` is found).

use crate::error::{EnvError, Result};

/// OpenCV's `RGB2Gray<uchar>` fixed point: coefficients of R, G, B in units of 2⁻¹⁵.
const GRAY_COEFFS: [u32; 3] = [9798, 19235, 3735];
const GRAY_SHIFT: u32 = 15;

/// Grayscale of an RGB frame, as `cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)`.
///
/// `rgb`: `[height, width, 3]` u8 row-major; `gray`: `[height, width]` u8, overwritten.
///
/// # Errors
/// `InvalidArgument` when `rgb.len()` is not `3 × gray.len()`.
pub fn rgb_to_gray(rgb: &[u8], gray: &mut [u8]) -> Result<()> {
    if rgb.len() != 3 * gray.len() {
        return Err(EnvError::InvalidArgument(format!(
            "rgb_to_gray: {} RGB bytes for {} gray pixels (need 3 per pixel)",
            rgb.len(),
            gray.len()
        )));
    }
    let [cr, cg, cb] = GRAY_COEFFS;
    for (g, p) in gray.iter_mut().zip(rgb.chunks_exact(3)) {
        let y = p[0] as u32 * cr + p[1] as u32 * cg + p[2] as u32 * cb;
        *g = ((y + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT) as u8;
    }
    Ok(())
}

/// The element-wise maximum of two frames of the same size into `out` (`MaxAndSkipEnv`'s
/// `obs_buffer.max(axis=0)`: removes the flicker of sprites drawn every other frame).
///
/// # Errors
/// `InvalidArgument` when the three lengths differ.
pub fn max_frames(a: &[u8], b: &[u8], out: &mut [u8]) -> Result<()> {
    if a.len() != b.len() || a.len() != out.len() {
        return Err(EnvError::InvalidArgument(format!(
            "max_frames: frames of {}, {} and {} bytes (must be equal)",
            a.len(),
            b.len(),
            out.len()
        )));
    }
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x.max(y);
    }
    Ok(())
}

/// One entry of OpenCV's `DecimateAlpha` table: source index `si` adds `alpha` × its value to
/// destination index `di`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    di: usize,
    si: usize,
    alpha: f32,
}

/// OpenCV's `computeResizeAreaTab(ssize, dsize, cn = 1, scale)`: the taps of every output cell
/// `[dx·scale, (dx+1)·scale)` over the source, in OpenCV's order.
fn area_taps(ssize: usize, dsize: usize, scale: f64) -> Vec<Tap> {
    let mut taps = Vec::with_capacity(2 * ssize);
    for dx in 0..dsize {
        let fsx1 = dx as f64 * scale;
        let fsx2 = fsx1 + scale;
        let cell = scale.min(ssize as f64 - fsx1);
        let sx2 = (fsx2.floor() as usize).min(ssize - 1);
        let sx1 = (fsx1.ceil() as usize).min(sx2);
        if sx1 as f64 - fsx1 > 1e-3 {
            taps.push(Tap { di: dx, si: sx1 - 1, alpha: ((sx1 as f64 - fsx1) / cell) as f32 });
        }
        for sx in sx1..sx2 {
            taps.push(Tap { di: dx, si: sx, alpha: (1.0 / cell) as f32 });
        }
        if fsx2 - sx2 as f64 > 1e-3 {
            let alpha = ((fsx2 - sx2 as f64).min(1.0).min(cell) / cell) as f32;
            taps.push(Tap { di: dx, si: sx2, alpha });
        }
    }
    taps
}

/// `cv2.resize(src, (dst_width, dst_height), interpolation=cv2.INTER_AREA)` for one-channel u8
/// images that shrink (or keep) both sides: the tables are built once, [`AreaResize::apply`]
/// allocates nothing.
#[derive(Clone, Debug)]
pub struct AreaResize {
    src: (usize, usize),
    dst: (usize, usize),
    x_taps: Vec<Tap>,
    y_taps: Vec<Tap>,
    /// Every source row's x pass, `[src_height, dst_width]`.
    rows: Vec<f32>,
    sum: Vec<f32>,
}

impl AreaResize {
    /// Tables for `[src_height, src_width]` → `[dst_height, dst_width]`.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero size, a destination larger than the source on either side
    /// (OpenCV's INTER_AREA then interpolates bilinearly), or a shrink by a whole factor on both
    /// sides (OpenCV then takes its `resizeAreaFast` path, whose rounding differs between its
    /// SIMD and scalar code): neither is implemented here.
    pub fn new(src_height: usize, src_width: usize, dst_height: usize, dst_width: usize) -> Result<AreaResize> {
        if [src_height, src_width, dst_height, dst_width].contains(&0) {
            return Err(EnvError::InvalidArgument(format!(
                "resize {src_height}×{src_width} → {dst_height}×{dst_width}: sizes must be at least 1"
            )));
        }
        if dst_height > src_height || dst_width > src_width {
            return Err(EnvError::InvalidArgument(format!(
                "resize {src_height}×{src_width} → {dst_height}×{dst_width}: INTER_AREA here only shrinks a frame"
            )));
        }
        // OpenCV: inv_scale = dsize / ssize, scale = 1 / inv_scale, both f64.
        let scale = |s: usize, d: usize| 1.0 / (d as f64 / s as f64);
        let whole = |s: usize, d: usize| s % d == 0;
        let same = src_height == dst_height && src_width == dst_width;
        if !same && whole(src_height, dst_height) && whole(src_width, dst_width) {
            return Err(EnvError::InvalidArgument(format!(
                "resize {src_height}×{src_width} → {dst_height}×{dst_width}: a shrink by a whole factor on both sides takes OpenCV's resizeAreaFast path, not implemented here"
            )));
        }
        Ok(AreaResize {
            src: (src_height, src_width),
            dst: (dst_height, dst_width),
            x_taps: area_taps(src_width, dst_width, scale(src_width, dst_width)),
            y_taps: area_taps(src_height, dst_height, scale(src_height, dst_height)),
            rows: vec![0.0; src_height * dst_width],
            sum: vec![0.0; dst_width],
        })
    }

    /// The output size `(height, width)`.
    pub fn output_shape(&self) -> (usize, usize) {
        self.dst
    }

    /// Resizes `src` (`[src_height, src_width]` u8) into `dst` (`[dst_height, dst_width]` u8).
    ///
    /// # Errors
    /// `InvalidArgument` when a buffer's length is not its image's size.
    pub fn apply(&mut self, src: &[u8], dst: &mut [u8]) -> Result<()> {
        let ((sh, sw), (dh, dw)) = (self.src, self.dst);
        if src.len() != sh * sw || dst.len() != dh * dw {
            return Err(EnvError::InvalidArgument(format!(
                "resize: {} source bytes for {sh}×{sw} and {} destination bytes for {dh}×{dw}",
                src.len(),
                dst.len()
            )));
        }
        self.sum_every_row_across(src);
        self.sum.fill(0.0);
        let mut prev_dy = self.y_taps[0].di;
        for &Tap { di: dy, si: sy, alpha: beta } in &self.y_taps {
            let row = &self.rows[sy * dw..(sy + 1) * dw];
            if dy != prev_dy {
                store_row(&self.sum, &mut dst[prev_dy * dw..(prev_dy + 1) * dw]);
                for (s, &r) in self.sum.iter_mut().zip(row) {
                    *s = beta * r;
                }
                prev_dy = dy;
            } else {
                for (s, &r) in self.sum.iter_mut().zip(row) {
                    *s += beta * r;
                }
            }
        }
        store_row(&self.sum, &mut dst[prev_dy * dw..(prev_dy + 1) * dw]);
        Ok(())
    }

    /// The x pass of every source row into `rows` (`[src_height, dst_width]`), four rows at a
    /// time (four independent chains of additions; a row's sum is the same alone or not).
    fn sum_every_row_across(&mut self, src: &[u8]) {
        let ((sh, sw), dw) = (self.src, self.dst.1);
        let mut y = 0;
        while y + 4 <= sh {
            let lines = std::array::from_fn(|k| &src[(y + k) * sw..(y + k + 1) * sw]);
            sum_across::<4>(&self.x_taps, lines, &mut self.rows[y * dw..(y + 4) * dw]);
            y += 4;
        }
        for y in y..sh {
            sum_across::<1>(&self.x_taps, [&src[y * sw..(y + 1) * sw]], &mut self.rows[y * dw..(y + 1) * dw]);
        }
    }
}

/// OpenCV's x pass (`buf[dx] += src[sx] · alpha` over the taps, from 0) for `N` source rows
/// into `out` (`[N, dst_width]`). Each output pixel's taps are consecutive, so its sum is kept
/// in a register: the same additions in the same order.
fn sum_across<const N: usize>(taps: &[Tap], lines: [&[u8]; N], out: &mut [f32]) {
    let dw = out.len() / N;
    let (mut acc, mut di) = ([0.0f32; N], taps[0].di);
    for t in taps {
        if t.di != di {
            for k in 0..N {
                out[k * dw + di] = acc[k];
            }
            (acc, di) = ([0.0; N], t.di);
        }
        for k in 0..N {
            acc[k] += lines[k][t.si] as f32 * t.alpha;
        }
    }
    for k in 0..N {
        out[k * dw + di] = acc[k];
    }
}

/// OpenCV's `saturate_cast<uchar>(float)`: round to nearest, ties to even, then clamp.
fn store_row(sum: &[f32], out: &mut [u8]) {
    for (o, &s) in out.iter_mut().zip(sum) {
        *o = s.round_ties_even().clamp(0.0, 255.0) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gray_weights_sum_to_one_and_round_to_nearest() {
        assert_eq!(GRAY_COEFFS.iter().sum::<u32>(), 1 << GRAY_SHIFT);
        let mut g = [0u8; 4];
        rgb_to_gray(&[255, 255, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255], &mut g).unwrap();
        // 255·9798/32768 = 76.24 → 76; 255·3735/32768 = 29.07 → 29.
        assert_eq!(g, [255, 0, 76, 29]);
        assert!(rgb_to_gray(&[1, 2], &mut g).is_err());
    }

    #[test]
    fn a_constant_image_resizes_to_the_same_constant() {
        for (sh, sw, dh, dw) in [(210, 160, 84, 84), (7, 5, 3, 2), (4, 4, 4, 4), (9, 1, 2, 1), (6, 5, 6, 3)] {
            let mut r = AreaResize::new(sh, sw, dh, dw).unwrap();
            for v in [0u8, 1, 77, 254, 255] {
                let mut out = vec![0u8; dh * dw];
                r.apply(&vec![v; sh * sw], &mut out).unwrap();
                assert!(out.iter().all(|&o| o == v), "{sh}×{sw}→{dh}×{dw} of {v}: {out:?}");
            }
        }
    }

    #[test]
    fn a_cell_that_straddles_pixels_weighs_them_by_area() {
        // 3 → 2 across: cells [0, 1.5) and [1.5, 3): (30·1 + 60·½) / 1.5 = 40, (60·½ + 90) / 1.5 = 80;
        // the rows keep their height (2 → 2).
        let mut out = [0u8; 4];
        AreaResize::new(2, 3, 2, 2).unwrap().apply(&[30, 60, 90, 0, 3, 0], &mut out).unwrap();
        assert_eq!(out, [40, 80, 1, 1]);
    }

    #[test]
    fn every_source_pixel_weighs_in_once_per_axis() {
        for (s, d) in [(210, 84), (160, 84), (5, 3), (100, 7)] {
            let scale = 1.0 / (d as f64 / s as f64);
            let taps = area_taps(s, d, scale);
            let mut per_cell = vec![0.0f64; d];
            for t in &taps {
                per_cell[t.di] += t.alpha as f64;
                assert!(t.si < s);
            }
            for (dx, w) in per_cell.iter().enumerate() {
                assert!((w - 1.0).abs() < 2e-3, "{s}→{d}: cell {dx} weighs {w}");
            }
        }
    }

    #[test]
    fn bad_sizes_and_buffers_are_errors() {
        assert!(AreaResize::new(0, 4, 1, 1).is_err());
        assert!(AreaResize::new(4, 4, 5, 4).is_err());
        assert!(AreaResize::new(4, 6, 2, 3).is_err(), "whole factors on both sides");
        assert!(AreaResize::new(4, 6, 4, 6).is_ok(), "the same size copies");
        let mut r = AreaResize::new(4, 3, 2, 2).unwrap();
        assert!(r.apply(&[0; 11], &mut [0; 4]).is_err());
        assert!(r.apply(&[0; 12], &mut [0; 3]).is_err());
        assert!(r.apply(&[0; 12], &mut [0; 4]).is_ok());
        assert!(max_frames(&[1, 2], &[3], &mut [0, 0]).is_err());
        let mut m = [0u8; 3];
        max_frames(&[1, 9, 3], &[4, 5, 3], &mut m).unwrap();
        assert_eq!(m, [4, 9, 3]);
    }
}
