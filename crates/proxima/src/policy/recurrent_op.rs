//! One recurrent layer over a whole sequence as one candle custom op: the forward and backward
//! passes through time of `proxima_kernels::recurrent` (the fused kernels' products, a few
//! hundred microseconds for sb3-contrib's 256-unit LSTM over a 128-step rollout) in place of the
//! dozens of candle ops per step that [`crate::policy::recurrent::Recurrent`]'s reference loop
//! records. The op's inputs are the layer's input `[T·B, in]` and its four parameter tensors
//! flattened back to back (PyTorch's `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`); the episode
//! starts and the state before step 0 are host values of the op, and the state after the last
//! step comes back on the host (it carries no gradient, as in sb3-contrib, where the rollout's
//! states are stored and not back-propagated into).

use super::conv::{values, with_values};
use crate::error::{ProximaError, Result};
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};
use proxima_kernels::recurrent::{backward, forward, Layer, Tape};
use std::sync::{Arc, Mutex};

/// The forward pass's record and the state after the sequence, shared between the op (which
/// writes it in its forward pass and reads it in its backward one) and the caller.
#[derive(Debug, Default)]
struct Record {
    tape: Tape,
    keep: Vec<f32>,
    h: Vec<f32>,
    c: Vec<f32>,
}

/// A layer's state on the host: h `[B·H]` and, for an LSTM, c `[B·H]` (empty for a GRU).
pub(crate) type HostState = (Vec<f32>, Vec<f32>);

/// The op: the layer's shape, and the record.
struct SequenceOp {
    layer: Layer,
    record: Arc<Mutex<Record>>,
}

/// The layer over a sequence: `x` `[T·B, in]` time-major, `params` `[n_params]` (the four
/// tensors flattened and concatenated, differentiable), `keep` `[T·B]` (0 where a step starts an
/// episode), the state before step 0 `h0`, `c0` `[B·H]` each (`c0` empty for a GRU). Returns the
/// outputs `[T·B, H]` (differentiable w.r.t. `x` and `params`) and the state after the last step
/// (h, c) on the host.
///
/// # Errors
/// `InvalidArgument` for sizes that do not match `layer`; tensor errors, among them a device
/// other than the CPU.
pub(crate) fn sequence(
    layer: Layer,
    x: &Tensor,
    params: &Tensor,
    keep: Vec<f32>,
    (h0, c0): HostState,
) -> Result<(Tensor, HostState)> {
    let states = if layer.cell == proxima_kernels::recurrent::Cell::Lstm { layer.envs * layer.hidden } else { 0 };
    if x.dims() != [layer.rows(), layer.input]
        || params.elem_count() != layer.n_params()
        || keep.len() != layer.rows()
        || h0.len() != layer.envs * layer.hidden
        || c0.len() != states
    {
        return Err(ProximaError::InvalidArgument(format!(
            "a recurrent layer of {layer:?} given an input {:?}, {} parameters, {} episode starts and a state of {} + {} values",
            x.dims(),
            params.elem_count(),
            keep.len(),
            h0.len(),
            c0.len()
        )));
    }
    let record = Arc::new(Mutex::new(Record { keep, h: h0, c: c0, ..Record::default() }));
    let out = x.contiguous()?.apply_op2(&params.contiguous()?, SequenceOp { layer, record: record.clone() })?;
    let mut r =
        record.lock().map_err(|_| ProximaError::InvalidArgument("a recurrent layer's record was poisoned".into()))?;
    Ok((out, (std::mem::take(&mut r.h), std::mem::take(&mut r.c))))
}

/// The op's name in errors.
const OP: &str = "recurrent layer";

/// A tensor's contiguous f32 values (CPU), copied.
fn host(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    with_values(t, OP, <[f32]>::to_vec)
}

impl CustomOp2 for SequenceOp {
    fn name(&self) -> &'static str {
        "recurrent_sequence"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let layer = &self.layer;
        let x = values(s1, l1, layer.rows() * layer.input, OP)?;
        let params = values(s2, l2, layer.n_params(), OP)?;
        let mut guard =
            self.record.lock().map_err(|_| candle_core::Error::Msg("recurrent layer: poisoned record".into()))?;
        let r = &mut *guard;
        let mut out = vec![0f32; layer.rows() * layer.hidden];
        forward(layer, params, x, &r.keep, (&mut r.h, &mut r.c), &mut out, &mut r.tape);
        Ok((CpuStorage::F32(out), Shape::from((layer.rows(), layer.hidden))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        params: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let layer = &self.layer;
        let (xs, ps, d_out) = (host(x)?, host(params)?, host(grad)?);
        let r = self.record.lock().map_err(|_| candle_core::Error::Msg("recurrent layer: poisoned record".into()))?;
        let (mut dx, mut dp) = (vec![0f32; xs.len()], vec![0f32; ps.len()]);
        backward(layer, &ps, &xs, &r.keep, &r.tape, &d_out, &mut dx, &mut dp);
        let dev = x.device();
        let dx = x.track_op().then(|| Tensor::from_vec(dx, x.shape(), dev)).transpose()?;
        Ok((dx, Some(Tensor::from_vec(dp, params.shape(), dev)?)))
    }
}
