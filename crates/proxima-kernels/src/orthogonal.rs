//! The QR behind `torch.nn.init.orthogonal_` (Saxe et al. 2014), in f64 on nalgebra: here
//! rather than in the training crate so that the test build runs it optimised (see the crate's
//! docs). The caller draws the standard-normal matrix; the result is a function of it alone.

use nalgebra::DMatrix;

/// The Q of `m`'s QR with each column's sign fixed by diag(R) (so that Q is Haar-distributed
/// when `m` is standard normal), for `m` `[rows, cols]` column-major with `rows ≥ cols`; Q is
/// `[rows, cols]` column-major, its columns orthonormal.
///
/// # Panics
/// When `m.len() != rows · cols` or `rows < cols` (the caller's shapes).
pub fn orthonormal_columns(m: Vec<f64>, rows: usize, cols: usize) -> Vec<f64> {
    assert!(m.len() == rows * cols && rows >= cols, "orthonormal_columns: {} values for [{rows}, {cols}]", m.len());
    let qr = DMatrix::from_vec(rows, cols, m).qr();
    let mut q = qr.q();
    let r = qr.r();
    for j in 0..cols {
        if r[(j, j)] < 0.0 {
            q.column_mut(j).neg_mut();
        }
    }
    q.as_slice().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_are_orthonormal_and_span_the_input() {
        let (rows, cols) = (5, 3);
        let m: Vec<f64> = (0..rows * cols).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
        let q = orthonormal_columns(m.clone(), rows, cols);
        let col = |v: &[f64], j: usize| v[j * rows..(j + 1) * rows].to_vec();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        for a in 0..cols {
            for b in 0..cols {
                let want = if a == b { 1.0 } else { 0.0 };
                assert!((dot(&col(&q, a), &col(&q, b)) - want).abs() < 1e-12, "q{a}·q{b}");
            }
            // R's diagonal is positive: each input column has a positive part along its q.
            assert!(dot(&col(&q, a), &col(&m, a)) > 0.0, "column {a}'s sign");
        }
    }
}
