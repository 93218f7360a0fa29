//! Reading the reference vectors in `../shared/golden/` (or `$PROXIMA_GOLDEN_DIR`) and comparing
//! against them; shared by the golden tests of `proxima` and `proxima-lm` through `#[path]`.
#![allow(dead_code)]

use candle_core::Tensor;
use serde_json::Value;

/// The reference file `name`, parsed.
pub fn golden(name: &str) -> Value {
    let dir = std::env::var("PROXIMA_GOLDEN_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/golden").to_string());
    let path = std::path::Path::new(&dir).join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e} (set PROXIMA_GOLDEN_DIR)", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A JSON array of numbers.
pub fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}
/// A JSON array of numbers or of arrays of numbers, flattened row by row.
pub fn flat(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|r| match r {
            Value::Array(_) => f64s(r),
            x => vec![x.as_f64().unwrap()],
        })
        .collect()
}
/// Asserts `got` and `want` agree element by element within `tol`.
pub fn close(name: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol, "{name}[{i}]: got {g}, want {w} (|diff| {} > {tol})", (g - w).abs());
    }
}
/// A scalar f64 tensor's value.
pub fn scalar(t: &Tensor) -> f64 {
    t.to_scalar::<f64>().unwrap()
}
