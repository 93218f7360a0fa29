//! A convolution's im2col gather as a candle custom op, and its gradient (the scatter-add back,
//! col2im): the part of the Nature CNN's convolutions that is not a matrix product. For each row
//! `b` of `x` `[B, N]`, `cols[b, j] = x[b, index[j]]` `[B, M]`; the gradient adds `∂L/∂cols[b, j]`
//! into `∂L/∂x[b, index[j]]`. candle's `index_select` does the same but spends most of the CNN's
//! forward time on its generic per-element copies; these loops are the plain ones (CPU only).

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use std::sync::Arc;

/// The gather of window values `index` `[M]` (each `< in_len`) from rows of `in_len` values.
#[derive(Clone, Debug)]
pub(super) struct Im2Col {
    index: Arc<Vec<u32>>,
    in_len: usize,
}

/// Its gradient: the scatter-add of `[B, M]` back into `[B, in_len]`.
struct Col2Im {
    index: Arc<Vec<u32>>,
    in_len: usize,
}

/// The `[B, width]` f32 values of a contiguous 2-d storage.
fn rows<'a>(s: &'a CpuStorage, l: &Layout, width: usize, op: &str) -> candle_core::Result<(&'a [f32], usize)> {
    let CpuStorage::F32(v) = s else { candle_core::bail!("{op}: f32 only, got {:?}", s.dtype()) };
    let (b, n) = l.shape().dims2()?;
    if n != width {
        candle_core::bail!("{op}: rows of {n} values, expected {width}");
    }
    match l.contiguous_offsets() {
        Some((start, end)) => Ok((&v[start..end], b)),
        None => candle_core::bail!("{op}: the input must be contiguous"),
    }
}

impl Im2Col {
    /// # Panics
    /// When an index is not below `in_len` (the caller builds them from the image's shape).
    pub(super) fn new(index: Vec<u32>, in_len: usize) -> Im2Col {
        assert!(index.iter().all(|&i| (i as usize) < in_len), "im2col index out of range");
        Im2Col { index: Arc::new(index), in_len }
    }

    /// `cols` `[B, M]` of `x` `[B, in_len]`, differentiable.
    pub(super) fn apply(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1(self.clone())
    }
}

impl CustomOp1 for Im2Col {
    fn name(&self) -> &'static str {
        "im2col"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, b) = rows(s, l, self.in_len, "im2col")?;
        let m = self.index.len();
        let mut out = vec![0f32; b * m];
        for (row, o) in x.chunks_exact(self.in_len).zip(out.chunks_exact_mut(m)) {
            for (d, &i) in o.iter_mut().zip(self.index.iter()) {
                *d = row[i as usize];
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((b, m))))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let back = Col2Im { index: self.index.clone(), in_len: self.in_len };
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(&back)?))
    }
}

impl CustomOp1 for Col2Im {
    fn name(&self) -> &'static str {
        "col2im"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let m = self.index.len();
        let (g, b) = rows(s, l, m, "col2im")?;
        let mut out = vec![0f32; b * self.in_len];
        for (row, o) in g.chunks_exact(m).zip(out.chunks_exact_mut(self.in_len)) {
            for (&v, &i) in row.iter().zip(self.index.iter()) {
                o[i as usize] += v;
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((b, self.in_len))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn gathers_and_scatters_back() {
        let x = Var::from_vec(vec![1f32, 2., 3., 10., 20., 30.], (2, 3), &Device::Cpu).unwrap();
        let op = Im2Col::new(vec![2, 0, 2, 1], 3);
        let cols = op.apply(x.as_tensor()).unwrap();
        assert_eq!(cols.to_vec2::<f32>().unwrap(), [[3., 1., 3., 2.], [30., 10., 30., 20.]]);
        let w = Tensor::new(&[[1f32, 10., 100., 1000.], [2., 20., 200., 2000.]], &Device::Cpu).unwrap();
        let grads = (cols * w).unwrap().sum_all().unwrap().backward().unwrap();
        let g = grads.get(x.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
        // x[0] feeds cols 1, x[1] col 3, x[2] cols 0 and 2.
        assert_eq!(g, [[10., 1000., 101.], [20., 2000., 202.]]);
    }
}
