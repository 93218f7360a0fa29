//! Runtime CPU-feature dispatch for the element-wise loops of the fused backend and the
//! optimiser: the closure is compiled inline into a function built with AVX-512 (F, VL, BW, DQ)
//! enabled, taken where the CPU has it, else into one built with AVX2 and FMA, else into the
//! baseline build (`is_x86_feature_detected!`, cached by std). Rust never contracts a·b + c into
//! an FMA on its own nor reorders a floating-point sum, and an explicit `mul_add` is the
//! correctly rounded fused operation in every build (an instruction, or libm's `fmaf`), so the
//! builds give the same bits; only the vector width, and so the speed, differs. (The matrix
//! products dispatch in [`crate::gemm`].)

/// Runs `f`, compiled with AVX-512, or else AVX2 and FMA, where this CPU supports them. `f`
/// should be a loop over slices whose body inlines (small pure functions, `#[inline(always)]`
/// helpers).
#[inline(always)]
pub fn with_simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            // SAFETY: the CPU supports these (checked just above; AVX-512F implies AVX2 and FMA).
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Applies the pure per-element `f` to every element of `v` in place ([`with_simd`]).
#[inline(always)]
pub fn map_in_place(v: &mut [f32], f: impl Fn(f32) -> f32) {
    with_simd(
        #[inline(always)]
        || v.iter_mut().for_each(|x| *x = f(*x)),
    )
}

/// Σ x² over `v` in f64, with 32 interleaved accumulators (four vectors of eight: an add's
/// latency is four vector adds long) folded in halves at the end: a fixed order (the same bits on
/// every machine), and one the compiler can vectorise.
#[inline(always)]
pub fn sum_sq_f64(v: &[f32]) -> f64 {
    const LANES: usize = 32;
    with_simd(
        #[inline(always)]
        || {
            let mut acc = [0f64; LANES];
            let chunks = v.chunks_exact(LANES);
            let rest = chunks.remainder();
            for c in chunks {
                for k in 0..LANES {
                    acc[k] += (c[k] as f64) * (c[k] as f64);
                }
            }
            for (k, &x) in rest.iter().enumerate() {
                acc[k] += (x as f64) * (x as f64);
            }
            let mut width = LANES;
            while width > 1 {
                width /= 2;
                for k in 0..width {
                    acc[k] += acc[k + width];
                }
            }
            acc[0]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatched_loops_compute_what_they_say() {
        let mut v: Vec<f32> = (0..77).map(|i| i as f32 - 38.0).collect();
        let want: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
        assert_eq!(sum_sq_f64(&v), want, "exact for integers");
        map_in_place(&mut v, |x| x.max(0.0));
        assert!(v[..38].iter().all(|&x| x == 0.0) && v[76] == 38.0);
    }
}
