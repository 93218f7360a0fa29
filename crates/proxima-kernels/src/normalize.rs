//! Observation normalisation with running statistics (SB3's `VecNormalize`), the one arithmetic
//! the trainer (`proxima::normalize::RunningMeanStd`) and the inference crate (`proxima-policy`)
//! both apply, so they give the same bits.

/// ô = clip((o − μ)/√(σ² + 1e-8), ±clip) in f64 for each row of `x` (`[n, mean.len()]`), in
/// place, leaving component `j` as it is where `raw[j]` (an empty `raw`: every component
/// normalised).
pub fn normalize_except(x: &mut [f32], (mean, var): (&[f64], &[f64]), clip: f64, raw: &[bool]) {
    for row in x.chunks_exact_mut(mean.len()) {
        for (j, v) in row.iter_mut().enumerate() {
            if raw.get(j).copied().unwrap_or(false) {
                continue;
            }
            *v = ((*v as f64 - mean[j]) / (var[j] + 1e-8).sqrt()).clamp(-clip, clip) as f32;
        }
    }
}
