//! `exp` and `ln` in f32 from IEEE operations only (adds, multiplies, fused multiply-adds, one
//! division, floor, integer bit arithmetic and selects), so that a loop of them over many values
//! vectorises (libm's `expf`/`logf` are calls, one value at a time) and gives the same bits on
//! every machine and vector width. Accurate to a few ulp: [`exp_f32`] within 2e-7 relative,
//! [`ln_f32`] within 1e-7 absolute + 2e-7 relative (the tests sweep both against f64).
//!
//! Source: Cephes' `expf` (S. L. Moshier, range reduction by ln 2 in two parts and a degree-5
//! polynomial) and FreeBSD/musl's `logf` (reduction to [√½, √2) and the odd series in
//! s = f/(2+f)).

/// eˣ for f32 `x`: +∞ above 88.72 (where f32 overflows), +0 below −86.5 (where eˣ < 2.7e-38: an absolute
/// error smaller than that), NaN for NaN.
#[inline(always)]
#[allow(clippy::excessive_precision)] // Cephes' constants as published
pub fn exp_f32(x: f32) -> f32 {
    const HI: f32 = 88.722_83;
    const LO: f32 = -86.5;
    const LN2_HI: f32 = 0.693_359_375;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const P: [f32; 6] = [
        1.987_569_15e-4,
        1.398_199_950_7e-3,
        8.333_451_907_3e-3,
        4.166_579_589_4e-2,
        1.666_666_545_9e-1,
        5.000_000_120_1e-1,
    ];
    let xc = x.clamp(LO, HI); // NaN stays NaN
    let n = xc.mul_add(std::f32::consts::LOG2_E, 0.5).floor(); // x = n·ln 2 + r, |r| ≤ ½ ln 2
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, xc));
    let mut p = P[0];
    for &c in &P[1..] {
        p = p.mul_add(r, c);
    }
    let p = p.mul_add(r * r, r) + 1.0;
    // 2ⁿ⁻¹ from n's bits: n + 126 + 2²³ is an integer in [2²³, 2²⁴), whose mantissa is n + 126,
    // the biased exponent of 2ⁿ⁻¹ (n in −124..=128 for x in [LO, HI]). Times 2 at the end, so that n = 128 works.
    let biased = (n + (126.0 + 8_388_608.0)).to_bits().wrapping_sub(0x4B00_0000);
    let y = p * f32::from_bits(biased.wrapping_shl(23)) * 2.0;
    if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        y
    }
}

/// ln x for f32 `x`: −∞ at ±0, NaN below 0 and for NaN, +∞ at +∞; subnormal x are taken as 0
/// (−∞; this is for log-probabilities' normalisers, which are ≥ 1).
#[inline(always)]
#[allow(clippy::excessive_precision)] // the published constants
pub fn ln_f32(x: f32) -> f32 {
    const LN2_HI: f32 = 6.931_381_225_6e-1;
    const LN2_LO: f32 = 9.058_000_614_5e-6;
    const LG: [f32; 4] = [0.666_666_626_93, 0.400_009_721_52, 0.284_987_866_88, 0.242_790_788_41];
    // x = 2ᵏ·(1 + f) with 1 + f in [√½, √2).
    let ix = x.to_bits().wrapping_add(0x3F80_0000 - 0x3F35_04F3);
    let k = (ix >> 23) as i32 - 127;
    let f = f32::from_bits((ix & 0x007F_FFFF) + 0x3F35_04F3) - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * w.mul_add(LG[3], LG[1]);
    let t2 = z * w.mul_add(LG[2], LG[0]);
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    let kf = k as f32;
    let y = s.mul_add(hfsq + r, kf * LN2_LO) - hfsq + f + kf * LN2_HI;
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x < f32::MIN_POSITIVE {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_everywhere_it_is_normal() {
        let (mut worst, mut x) = (0f64, -86.5f32);
        while x <= 88.7 {
            let want = (x as f64).exp();
            worst = worst.max(((exp_f32(x) as f64 - want) / want).abs());
            x += 1.7e-3;
        }
        assert!(worst < 2e-7, "worst relative error {worst:e}");
        for x in [0.0f32, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0] {
            let want = (x as f64).exp();
            assert!(((exp_f32(x) as f64 - want) / want).abs() < 2e-7, "exp({x})");
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(88.8), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(-90.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(88.72).is_finite());
    }

    #[test]
    fn ln_is_within_two_ulp_on_normal_numbers() {
        let mut worst = 0f64;
        for i in 0..200_000u32 {
            // Every binade from 2⁻¹²⁶ to 2¹²⁷, dense in [0.5, 64].
            let x = if i < 100_000 {
                0.5 + i as f32 * 6.35e-4
            } else {
                f32::from_bits(0x0080_0000 + (i - 100_000) * 21_307)
            };
            let want = (x as f64).ln();
            worst = worst.max((ln_f32(x) as f64 - want).abs() / want.abs().max(1.0));
        }
        assert!(worst < 2e-7, "worst error {worst:e}");
        assert_eq!(ln_f32(1.0), 0.0);
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_f32(-1.0).is_nan() && ln_f32(f32::NAN).is_nan());
    }

    #[test]
    fn a_vectorised_loop_gives_the_scalar_bits() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.173).collect();
        let vector: Vec<(f32, f32)> = xs.iter().map(|&x| (exp_f32(x), ln_f32(x.abs() + 1.0))).collect();
        for (&x, &(e, l)) in xs.iter().zip(&vector) {
            let (e1, l1) = (std::hint::black_box(exp_f32)(x), std::hint::black_box(ln_f32)(x.abs() + 1.0));
            assert_eq!((e.to_bits(), l.to_bits()), (e1.to_bits(), l1.to_bits()), "x = {x}");
        }
    }
}
