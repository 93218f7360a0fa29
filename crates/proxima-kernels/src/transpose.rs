//! `Wᵀ [inp, out]` of a row-major `W [out, inp]`: the fused forward pass's B operand, made once
//! per parameter update. 8 × 8 blocks go through registers (AVX: eight row loads, three rounds of
//! shuffles, eight row stores), the edges element by element. Pure data movement: every tier
//! gives the same result.

/// Writes the transpose of `w` (`[out, inp]`, row-major) into `wt` (`[inp, out]`, row-major).
///
/// # Panics
/// When `w` or `wt` holds fewer than `inp · out` elements.
pub fn transpose(wt: &mut [f32], w: &[f32], (inp, out): (usize, usize)) {
    assert!(w.len() >= inp * out && wt.len() >= inp * out, "transpose: {inp} x {out} does not fit");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX (checked), and the assert above keeps the blocks in bounds.
        unsafe { x86::transpose_avx(wt, w, (inp, out)) };
        return;
    }
    edges(wt, w, (inp, out), (0, 0));
}

/// The elements with `o ≥ o_done` or `k ≥ k_done` (those the 8 × 8 blocks did not cover), one by one.
fn edges(wt: &mut [f32], w: &[f32], (inp, out): (usize, usize), (o_done, k_done): (usize, usize)) {
    for o in 0..out {
        let k_from = if o < o_done { k_done } else { 0 };
        for k in k_from..inp {
            wt[k * out + o] = w[o * inp + k];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Full 8 × 8 blocks in registers, then the edges.
    ///
    /// # Safety
    /// AVX, and `w`, `wt` of at least `inp · out` elements.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose_avx(wt: &mut [f32], w: &[f32], (inp, out): (usize, usize)) {
        let (o_done, k_done) = (out / 8 * 8, inp / 8 * 8);
        for o0 in (0..o_done).step_by(8) {
            for k0 in (0..k_done).step_by(8) {
                block(wt.as_mut_ptr().add(k0 * out + o0), out, w.as_ptr().add(o0 * inp + k0), inp);
            }
        }
        super::edges(wt, w, (inp, out), (o_done, k_done));
    }

    /// The 8 × 8 block at `src` (row stride `ls`) transposed to `dst` (row stride `ld`).
    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn block(dst: *mut f32, ld: usize, src: *const f32, ls: usize) {
        let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ls)));
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        let u = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        for i in 0..4 {
            _mm256_storeu_ps(dst.add(i * ld), _mm256_permute2f128_ps::<0x20>(u[i], u[i + 4]));
            _mm256_storeu_ps(dst.add((i + 4) * ld), _mm256_permute2f128_ps::<0x31>(u[i], u[i + 4]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_lands_in_its_place() {
        for (inp, out) in [(1, 1), (4, 64), (64, 64), (64, 2), (8, 8), (13, 21), (64, 130), (9, 7)] {
            let w: Vec<f32> = (0..inp * out).map(|i| i as f32).collect();
            let mut wt = vec![-1f32; inp * out];
            transpose(&mut wt, &w, (inp, out));
            for o in 0..out {
                for k in 0..inp {
                    assert_eq!(wt[k * out + o], w[o * inp + k], "{inp}x{out} at ({o}, {k})");
                }
            }
            let mut plain = vec![-1f32; inp * out];
            edges(&mut plain, &w, (inp, out), (0, 0));
            assert_eq!(plain, wt);
        }
    }
}
