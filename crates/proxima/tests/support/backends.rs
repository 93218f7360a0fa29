//! Comparing the fused backend with candle (the reference); shared by `fused.rs` and `cnn.rs`
//! through `#[path]`.

/// Every element of `got` (fused) within `tol` × (the largest magnitude of `want`, candle's) of
/// `want`.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0f64, |m, &x| m.max((x as f64).abs())).max(1e-6);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let d = (g as f64 - w as f64).abs();
        assert!(d <= tol * scale, "{what}[{i}]: fused {g}, candle {w} (|diff| {d:e} > {tol:e} × {scale:e})");
    }
}
