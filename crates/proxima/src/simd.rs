//! Runtime CPU-feature dispatch for the element-wise loops of the fused backend and the
//! optimiser: [`proxima_kernels::simd`] (there so that the inference crate `proxima-policy`
//! shares it).

pub use proxima_kernels::simd::{map_in_place, sum_sq_f64, with_simd};
