//! Proxima's hand-written numeric kernels for small MLP policies: the fused backend's matrix
//! products ([`gemm`]: each output one chain of fused multiply-adds, the same bits on every
//! machine), the dense layer's forward pass and its activations ([`dense`]), the weight
//! transpose ([`transpose`]), `exp`/`ln` that vectorise ([`math`]) and the CPU-feature dispatch
//! of element-wise loops ([`simd`]), the Nature CNN's convolutions on the matrix products
//! ([`conv`]), and LSTM/GRU layers over whole sequences, forward and backward through time
//! ([`recurrent`]), and (with the `orthogonal` feature) the QR behind the orthogonal
//! initialisation ([`orthogonal`]). The training backend and the inference crate
//! (`proxima-policy`) share them, so both give a policy's actions the same bits.
//!
//! A crate of its own so that it is compiled with optimisations in the test build too (the
//! workspace's `[profile.dev.package.proxima-kernels]`): the SIMD intrinsics are a hundred times
//! slower unoptimised, while the RL crates' tests want their own code unoptimised (nalgebra's QR,
//! generic code compiled where it is used, took a minute for the Nature CNN's dense layer in an
//! unoptimised crate). It depends on nothing but, with its `threads` feature (the training
//! backend's), rayon, and with its `orthogonal` feature, nalgebra.

pub mod conv;
pub mod dense;
pub mod gemm;
pub mod math;
pub mod normalize;
#[cfg(feature = "orthogonal")]
pub mod orthogonal;
pub mod recurrent;
pub mod simd;
pub mod transpose;

/// A matrix operand given by its elements and strides: element (i, j) is `data[i·rs + j·cs]`.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Row stride, in elements.
    pub rs: usize,
    /// Column stride, in elements.
    pub cs: usize,
}

impl<'a> View<'a> {
    /// A row-major `[rows, cols]` matrix.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        View { data, rs: cols, cs: 1 }
    }

    /// The transpose of a row-major matrix with `cols` columns.
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        View { data, rs: 1, cs: cols }
    }

    /// One past the largest index an `[m, n]` view reads (0 when it reads nothing).
    pub fn extent(&self, m: usize, n: usize) -> usize {
        if m == 0 || n == 0 {
            0
        } else {
            (m - 1) * self.rs + (n - 1) * self.cs + 1
        }
    }
}
