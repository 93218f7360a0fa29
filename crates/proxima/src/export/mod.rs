//! A trained policy outside Proxima: [`onnx`] writes the whole of `predict(deterministic=True)`
//! (observation normalisation, the network, the deterministic action and its rescaling to the
//! action space) as one ONNX graph, over the small graph builder in [`graph`].

pub mod graph;
pub mod onnx;

pub use onnx::{export_onnx, OnnxExport, OnnxOptions};
