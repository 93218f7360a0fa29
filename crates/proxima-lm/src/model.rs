//! A tiny decoder-only transformer policy with a per-token value head (issue 6): pre-LayerNorm
//! GPT blocks (Radford et al. 2019) on candle, learned token and position embeddings.
//!
//! Masks come from **positions**, never from token ids: attention is causal (position i sees
//! positions ≤ i), and sequences are right-padded, so a padding token — even one equal to EOS —
//! can never hide a real token from the positions before it; which positions count in a loss
//! is decided by the caller from sequence lengths.

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{Embedding, Linear, Module, VarBuilder, VarMap};
use proxima::{ProximaError, Result};

/// LayerNorm written with differentiable tensor ops. candle-nn's `LayerNorm` (on contiguous
/// input) and `ops::softmax_last_dim` are fused kernels **without a backward pass**: used in a
/// transformer they silently stop every gradient upstream of them (a copy task did not learn).
struct LayerNorm {
    w: Tensor,
    b: Tensor,
}

impl LayerNorm {
    fn new(d: usize, vb: VarBuilder) -> candle_core::Result<LayerNorm> {
        Ok(LayerNorm {
            w: vb.get_with_hints(d, "weight", candle_nn::Init::Const(1.0))?,
            b: vb.get_with_hints(d, "bias", candle_nn::Init::Const(0.0))?,
        })
    }
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mean = x.mean_keepdim(D::Minus1)?;
        let xc = x.broadcast_sub(&mean)?;
        let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
        xc.broadcast_div(&(var + 1e-5)?.sqrt()?)?.broadcast_mul(&self.w)?.broadcast_add(&self.b)
    }
}

/// Shape of the network.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LmSpec {
    /// Vocabulary size V.
    pub vocab: usize,
    /// Longest sequence (context) T_max.
    pub context: usize,
    /// Model width d_model.
    pub d_model: usize,
    /// Attention heads (d_model must be a multiple).
    pub n_heads: usize,
    /// Transformer blocks.
    pub n_layers: usize,
}

impl Default for LmSpec {
    /// The issue's model: 2 layers, d_model 64, 4 heads, context 16.
    fn default() -> Self {
        LmSpec { vocab: 16, context: 16, d_model: 64, n_heads: 4, n_layers: 2 }
    }
}

struct Block {
    ln1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    ln2: LayerNorm,
    fc: Linear,
    out: Linear,
}

/// The policy π_θ(token | prefix) and the per-token critic V(prefix).
pub struct TinyLm {
    spec: LmSpec,
    varmap: VarMap,
    tok: Embedding,
    pos: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    head: Linear,
    value: Linear,
    device: Device,
    dtype: DType,
}

impl TinyLm {
    /// A freshly initialised model (candle-nn's default inits, seeded through `seed` by
    /// re-drawing every parameter from N(0, 0.02²) as GPT-2 does; output projections scaled by
    /// 1/√(2·n_layers)).
    ///
    /// # Errors
    /// `InvalidArgument` when `d_model` is not a multiple of `n_heads` or a size is 0.
    pub fn new(spec: LmSpec, seed: u64, device: &Device) -> Result<TinyLm> {
        TinyLm::with_dtype(spec, seed, device, DType::F32)
    }

    /// [`TinyLm::new`] with parameters of `dtype` (F32 for training; F64 for finite-difference
    /// gradient checks).
    ///
    /// # Errors
    /// As [`TinyLm::new`].
    pub fn with_dtype(spec: LmSpec, seed: u64, device: &Device, dtype: DType) -> Result<TinyLm> {
        if spec.vocab == 0
            || spec.context == 0
            || spec.n_layers == 0
            || spec.n_heads == 0
            || spec.d_model % spec.n_heads != 0
        {
            return Err(ProximaError::InvalidArgument(format!(
                "invalid transformer shape {spec:?} (d_model must be a multiple of n_heads)"
            )));
        }
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, dtype, device);
        let d = spec.d_model;
        let tok = candle_nn::embedding(spec.vocab, d, vb.pp("tok_emb"))?;
        let pos = candle_nn::embedding(spec.context, d, vb.pp("pos_emb"))?;
        let mut blocks = Vec::new();
        for l in 0..spec.n_layers {
            let vb = vb.pp(format!("block{l}"));
            blocks.push(Block {
                ln1: LayerNorm::new(d, vb.pp("ln1"))?,
                qkv: candle_nn::linear(d, 3 * d, vb.pp("qkv"))?,
                proj: candle_nn::linear(d, d, vb.pp("proj"))?,
                ln2: LayerNorm::new(d, vb.pp("ln2"))?,
                fc: candle_nn::linear(d, 4 * d, vb.pp("fc"))?,
                out: candle_nn::linear(4 * d, d, vb.pp("out"))?,
            });
        }
        let ln_f = LayerNorm::new(d, vb.pp("ln_f"))?;
        let head = candle_nn::linear(d, spec.vocab, vb.pp("lm_head"))?;
        let value = candle_nn::linear(d, 1, vb.pp("value_head"))?;
        let model = TinyLm { spec, varmap, tok, pos, blocks, ln_f, head, value, device: device.clone(), dtype };
        model.init(seed)?;
        Ok(model)
    }

    /// GPT-2 style init from a seeded stream: weights N(0, 0.02²) (residual projections
    /// 0.02/√(2·n_layers)), biases 0, LayerNorm gains 1.
    fn init(&self, seed: u64) -> Result<()> {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let resid = 0.02 / (2.0 * self.spec.n_layers as f64).sqrt();
        for (name, var) in self.named_params() {
            let n = var.elem_count();
            let values: Vec<f32> = if name.ends_with(".bias") {
                vec![0.0; n]
            } else if name.contains(".ln") || name.starts_with("ln_f") {
                vec![1.0; n] // LayerNorm weight
            } else {
                let std = if name.ends_with("proj.weight") || name.ends_with("out.weight") { resid } else { 0.02 };
                let normal = Normal::new(0.0, std).expect("positive std");
                (0..n).map(|_| normal.sample(&mut rng) as f32).collect()
            };
            var.set(&Tensor::from_vec(values, var.shape(), &self.device)?.to_dtype(self.dtype)?)?;
        }
        Ok(())
    }

    /// Copies every parameter of `other` (same spec) into this model: how π_ref is frozen from
    /// the SFT policy.
    ///
    /// # Errors
    /// `InvalidArgument` for a different spec; tensor errors.
    pub fn copy_from(&self, other: &TinyLm) -> Result<()> {
        if other.spec != self.spec {
            return Err(ProximaError::InvalidArgument(format!(
                "cannot copy a {:?} model into a {:?} one",
                other.spec, self.spec
            )));
        }
        for ((_, dst), (_, src)) in self.named_params().iter().zip(other.named_params()) {
            dst.set(&src.as_tensor().to_dtype(self.dtype)?.copy()?)?;
        }
        Ok(())
    }

    /// The network's shape.
    pub fn spec(&self) -> &LmSpec {
        &self.spec
    }

    /// The parameters' dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Every parameter with its name, sorted by name (a fixed order for optimisers and files).
    pub fn named_params(&self) -> Vec<(String, Var)> {
        let data = self.varmap.data().lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Total scalar parameters.
    pub fn num_params(&self) -> usize {
        self.named_params().iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// Forward pass: `tokens` `[B, T]` u32 (T ≤ context) → `(logits [B, T, V], values [B, T])`,
    /// differentiable. Position t's outputs depend on tokens 0..=t only.
    ///
    /// # Errors
    /// `InvalidArgument` when T exceeds the context; tensor errors.
    pub fn forward(&self, tokens: &Tensor) -> Result<(Tensor, Tensor)> {
        let (b, t) = tokens.dims2()?;
        if t > self.spec.context || t == 0 {
            return Err(ProximaError::InvalidArgument(format!(
                "sequence length {t} outside 1..={}",
                self.spec.context
            )));
        }
        let (d, h) = (self.spec.d_model, self.spec.n_heads);
        let hd = d / h;
        let positions = Tensor::arange(0u32, t as u32, &self.device)?;
        let mut x = self.tok.forward(tokens)?.broadcast_add(&self.pos.forward(&positions)?)?; // [B, T, d]
                                                                                              // Causal mask from positions: −∞ where key position j > query position i.
        let mask: Vec<f32> =
            (0..t).flat_map(|i| (0..t).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 })).collect();
        let mask = Tensor::from_vec(mask, (t, t), &self.device)?.to_dtype(self.dtype)?;
        let scale = 1.0 / (hd as f64).sqrt();
        for blk in &self.blocks {
            let y = blk.ln1.forward(&x)?;
            let qkv = blk.qkv.forward(&y)?.reshape((b, t, 3, h, hd))?;
            let q = qkv.narrow(2, 0, 1)?.squeeze(2)?.transpose(1, 2)?.contiguous()?; // [B, h, T, hd]
            let k = qkv.narrow(2, 1, 1)?.squeeze(2)?.transpose(1, 2)?.contiguous()?;
            let v = qkv.narrow(2, 2, 1)?.squeeze(2)?.transpose(1, 2)?.contiguous()?;
            let att = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
            let att = candle_nn::ops::softmax(&att, D::Minus1)?; // differentiable (see LayerNorm)
            let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))?;
            x = (x + blk.proj.forward(&y)?)?;
            let y = blk.ln2.forward(&x)?;
            x = (&x + blk.out.forward(&blk.fc.forward(&y)?.gelu_erf()?)?)?;
        }
        let x = self.ln_f.forward(&x)?;
        let logits = self.head.forward(&x)?;
        let values = self.value.forward(&x)?.squeeze(D::Minus1)?;
        Ok((logits, values))
    }
}

/// A model small enough for the unit tests of the modules that sample from it and train it
/// (vocabulary of the task, context 16, width 16, 2 heads, 1 layer; seed 3).
#[cfg(test)]
pub(crate) fn tiny_for_tests() -> TinyLm {
    let spec = LmSpec { vocab: crate::task::VOCAB, context: 16, d_model: 16, n_heads: 2, n_layers: 1 };
    TinyLm::new(spec, 3, &Device::Cpu).expect("a valid spec")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issues_model_has_about_100k_parameters() {
        let m = TinyLm::new(LmSpec::default(), 0, &Device::Cpu).unwrap();
        let n = m.num_params();
        assert!((90_000..130_000).contains(&n), "{n}");
        assert!(TinyLm::new(LmSpec { n_heads: 5, ..LmSpec::default() }, 0, &Device::Cpu).is_err());
    }

    /// Every parameter receives a gradient (a fused op without a backward pass would silently cut
    /// the graph: candle-nn's LayerNorm and softmax_last_dim did).
    #[test]
    fn every_parameter_gets_a_gradient() {
        let m = TinyLm::new(LmSpec::default(), 2, &Device::Cpu).unwrap();
        let t = Tensor::new(&[[1u32, 5, 7, 2, 3], [4, 4, 0, 9, 12]], &Device::Cpu).unwrap();
        let (logits, values) = m.forward(&t).unwrap();
        let loss = (logits.sqr().unwrap().mean_all().unwrap() + values.mean_all().unwrap()).unwrap();
        let g = loss.backward().unwrap();
        for (name, v) in m.named_params() {
            let grad = g.get(v.as_tensor()).unwrap_or_else(|| panic!("no gradient for {name}"));
            let norm = grad.sqr().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(norm > 0.0, "zero gradient for {name}");
        }
    }

    /// Causality from positions: changing tokens after position t leaves every output at
    /// positions ≤ t unchanged, whatever the later tokens are (padding equal to EOS included).
    #[test]
    fn outputs_depend_only_on_the_prefix() {
        let m = TinyLm::new(LmSpec::default(), 1, &Device::Cpu).unwrap();
        let a = Tensor::new(&[[1u32, 5, 7, 2, 2, 2]], &Device::Cpu).unwrap();
        let b = Tensor::new(&[[1u32, 5, 7, 9, 3, 11]], &Device::Cpu).unwrap();
        let (la, va) = m.forward(&a).unwrap();
        let (lb, vb) = m.forward(&b).unwrap();
        let prefix = |x: &Tensor| x.narrow(1, 0, 3).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(prefix(&la), prefix(&lb));
        assert_eq!(prefix(&va), prefix(&vb));
        assert_ne!(
            la.narrow(1, 3, 1).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            lb.narrow(1, 3, 1).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
        assert!(m.forward(&Tensor::zeros((1, 17), DType::U32, &Device::Cpu).unwrap()).is_err());
    }
}
