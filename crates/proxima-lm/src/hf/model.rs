//! A causal language model from a Hugging Face checkpoint, its weights as trainable candle
//! variables: the Llama family (Llama, SmolLM, Qwen2 with its q/k/v biases, Qwen3 with its q/k
//! norms; tied embeddings or an `lm_head`) and GPT-2. [`CausalLm::forward`] gives the logits of
//! every position `[B, T, V]` for a batch of token ids with their positions and which keys each
//! row may read (padding), with an optional key/value cache for generation; the same logits as
//! `transformers`' model in float32 (the tests compare them to 1e-4).

use super::checkpoint::{load_weights, save_dir};
use super::config::{Arch, HfConfig};
use super::layers::{
    attend, attention_mask, gelu_tanh, layer_norm, linear, merge_heads, rms_norm, rope_tables, rotate, silu,
    split_heads,
};
use super::lora::{Lora, LoraConfig};
use candle_core::{DType, Device, Tensor, Var};
use proxima::{ProximaError, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The keys and values each layer has seen, `[B, kv_heads, S, hd]` per layer, and which of the S
/// positions are real tokens per row. With a capacity ([`KvCache::with_capacity`]) each layer's
/// buffers are allocated once at that length and written in place (generation: no new buffer per
/// token); without, they grow by concatenation. Either way the cached keys carry no gradient into
/// the forward passes that read them (the cache is for generation, not for training).
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// Per row, 1 for each cached position that is a token (0 for padding).
    pub key_mask: Vec<Vec<u8>>,
    capacity: usize,
}

/// One layer's keys and values, and how many positions of them are written.
#[derive(Clone, Debug)]
struct LayerCache {
    k: Tensor,
    v: Tensor,
    used: usize,
}

impl KvCache {
    /// A cache that holds at most `positions` positions, allocated once.
    pub fn with_capacity(positions: usize) -> KvCache {
        KvCache { capacity: positions, ..KvCache::default() }
    }

    /// Positions cached so far (S).
    pub fn len(&self) -> usize {
        self.key_mask.first().map_or(0, Vec::len)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A decoder-only language model with its parameters as variables.
pub struct CausalLm {
    cfg: HfConfig,
    params: Vec<(String, Var)>,
    index: HashMap<String, usize>,
    dtypes: HashMap<String, DType>,
    rope: Option<(Tensor, Tensor)>,
    source: Option<PathBuf>,
    lora: Option<Lora>,
}

impl CausalLm {
    /// Loads the model in `dir` (`config.json` and the safetensors weights) as f32 variables.
    ///
    /// # Errors
    /// [`HfConfig::load`]'s and [`load_weights`]'s.
    pub fn load(dir: &Path) -> Result<CausalLm> {
        let cfg = HfConfig::load(dir)?;
        let mut weights = load_weights(dir, &cfg)?;
        let mut params = Vec::new();
        for (name, _) in cfg.param_shapes() {
            let t = weights.tensors.remove(&name).expect("load_weights checked every name");
            params.push((name, Var::from_tensor(&t)?));
        }
        // A tensor the architecture has no place for means a model Proxima does not build.
        let ignorable = |n: &str| {
            n.ends_with(".attn.bias")
                || n.ends_with(".attn.masked_bias")
                || n.contains("rotary_emb.inv_freq")
                || (n == "lm_head.weight" && cfg.tie_word_embeddings)
        };
        let mut extra: Vec<&String> = weights.tensors.keys().filter(|n| !ignorable(n)).collect();
        extra.sort();
        if let Some(first) = extra.first() {
            return Err(ProximaError::Checkpoint(format!(
                "{}: {} tensor(s) a {} model as Proxima builds it has no place for, e.g. `{first}` (a config option it does not implement?)",
                dir.display(),
                extra.len(),
                cfg.model_type
            )));
        }
        let mut lm = CausalLm::from_params(cfg, params)?;
        lm.dtypes = weights.dtypes;
        lm.source = Some(dir.to_path_buf());
        Ok(lm)
    }

    /// A model of `cfg` with the given parameters (in [`HfConfig::param_shapes`]' order).
    ///
    /// # Errors
    /// `InvalidArgument` when a name or shape differs from the config's.
    pub fn from_params(cfg: HfConfig, params: Vec<(String, Var)>) -> Result<CausalLm> {
        let want = cfg.param_shapes();
        if want.len() != params.len()
            || want.iter().zip(&params).any(|((n, s), (m, v))| n != m || v.dims() != s.as_slice())
        {
            return Err(ProximaError::InvalidArgument(format!(
                "{} parameters that are not the {} of this {} config",
                params.len(),
                want.len(),
                cfg.model_type
            )));
        }
        let index = params.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
        let rope = match cfg.arch {
            Arch::Llama { .. } => {
                let inv = cfg.rope_scaling.inv_freq(cfg.head_dim, cfg.rope_theta);
                Some(rope_tables(cfg.max_positions, &inv, &Device::Cpu)?)
            }
            Arch::Gpt2 => None,
        };
        Ok(CausalLm { cfg, params, index, dtypes: HashMap::new(), rope, source: None, lora: None })
    }

    /// A copy of the model whose parameters are new variables with the same values (a frozen
    /// reference π_ref: nothing trains it).
    ///
    /// # Errors
    /// Tensor errors.
    pub fn frozen_copy(&self) -> Result<CausalLm> {
        let params = self
            .params
            .iter()
            .map(|(n, v)| Ok((n.clone(), Var::from_tensor(&v.as_tensor().copy()?)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut lm = CausalLm::from_params(self.cfg.clone(), params)?;
        (lm.dtypes, lm.source) = (self.dtypes.clone(), self.source.clone());
        Ok(lm)
    }

    /// Adds LoRA adapters ([`Lora`]): from now on only they train ([`CausalLm::trainable_params`]),
    /// the forward pass (and so generation) reads W + (α/r)·B·A without merging, and
    /// [`CausalLm::save`] writes the merged weights.
    ///
    /// # Errors
    /// `Config` from [`Lora::new`], or when the model has adapters already.
    pub fn add_lora<R: rand::Rng + ?Sized>(&mut self, cfg: &LoraConfig, rng: &mut R) -> Result<()> {
        if self.lora.is_some() {
            return Err(ProximaError::Config("the model has LoRA adapters already".into()));
        }
        self.lora = Some(Lora::new(&self.cfg, cfg, rng)?);
        Ok(())
    }

    /// What trains: the LoRA adapters' variables when the model has them, else every parameter.
    pub fn trainable_params(&self) -> Vec<(String, Var)> {
        match &self.lora {
            Some(l) => l.named_params(),
            None => self.params.clone(),
        }
    }

    /// The config.
    pub fn config(&self) -> &HfConfig {
        &self.cfg
    }

    /// The parameters with `transformers`' names, in a fixed order.
    pub fn named_params(&self) -> &[(String, Var)] {
        &self.params
    }

    /// Writes the model as a Hugging Face directory (`config.json`, `model.safetensors` in the
    /// dtypes it was loaded with, LoRA adapters merged into their weights, the source's tokenizer
    /// files), atomically file by file.
    ///
    /// # Errors
    /// [`save_dir`]'s.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let transposed = self.cfg.arch == Arch::Gpt2;
        let params = self
            .params
            .iter()
            .map(|(n, v)| {
                let t = match (&self.lora, n.strip_suffix(".weight")) {
                    (Some(l), Some(module)) => l.merged(module, v.as_tensor(), transposed)?,
                    _ => v.as_tensor().clone(),
                };
                Ok((n.clone(), t))
            })
            .collect::<Result<Vec<(String, Tensor)>>>()?;
        save_dir(dir, &self.cfg, &params, &self.dtypes, self.source.as_deref())
    }

    fn p(&self, name: &str) -> &Tensor {
        self.params[self.index[name]].1.as_tensor()
    }

    fn opt(&self, name: &str) -> Option<&Tensor> {
        self.index.get(name).map(|&i| self.params[i].1.as_tensor())
    }

    /// The logits `[B, T, V]` of `tokens` `[B, T]` at `positions` `[B, T]` (each token's position
    /// in its own sequence: 0 at its first real token), reading the keys `key_mask` allows (per
    /// row, 1 for a real token: the cached positions then these T), after the cache's positions
    /// when `cache` is given (which then grows by T).
    ///
    /// # Errors
    /// `InvalidArgument` for mismatched sizes, a token id ≥ V or a position ≥ the model's
    /// maximum; tensor errors.
    pub fn forward(
        &self,
        tokens: &[Vec<u32>],
        positions: &[Vec<u32>],
        key_mask: &[Vec<u8>],
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        self.logits(&self.hidden_states(tokens, positions, key_mask, cache)?)
    }

    /// The last hidden states `[B, T, d]` (after the final norm, before the output projection)
    /// of [`CausalLm::forward`]'s inputs, which it takes and checks the same way.
    ///
    /// # Errors
    /// As [`CausalLm::forward`].
    pub fn hidden_states(
        &self,
        tokens: &[Vec<u32>],
        positions: &[Vec<u32>],
        key_mask: &[Vec<u8>],
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (b, t) = (tokens.len(), tokens.first().map_or(0, Vec::len));
        let past = cache.as_ref().map_or(0, |c| c.len());
        self.check_inputs(tokens, positions, key_mask, past)?;
        if let Some(c) = cache.as_deref_mut() {
            c.key_mask = key_mask.to_vec();
        }
        let dev = Device::Cpu;
        let ids = Tensor::from_vec(tokens.concat(), (b, t), &dev)?;
        let pos = Tensor::from_vec(positions.concat(), b * t, &dev)?;
        let mask = attention_mask(key_mask, t, &dev)?;
        match self.cfg.arch {
            Arch::Llama { .. } => self.llama(&ids, &pos, &mask, cache),
            Arch::Gpt2 => self.gpt2(&ids, &pos, &mask, cache),
        }
    }

    /// The logits `[B, T, V]` from the last hidden states `[B, T, d]` (the output projection, or
    /// the tied embedding).
    ///
    /// # Errors
    /// Tensor errors.
    pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        let head = match self.cfg.arch {
            Arch::Llama { .. } => self.opt("lm_head.weight").unwrap_or_else(|| self.p("model.embed_tokens.weight")),
            Arch::Gpt2 => self.opt("lm_head.weight").unwrap_or_else(|| self.p("transformer.wte.weight")),
        };
        Ok(linear(hidden, head, None)?)
    }

    fn check_inputs(
        &self,
        tokens: &[Vec<u32>],
        positions: &[Vec<u32>],
        key_mask: &[Vec<u8>],
        past: usize,
    ) -> Result<()> {
        let t = tokens.first().map_or(0, Vec::len);
        let bad = |m: String| Err(ProximaError::InvalidArgument(m));
        if tokens.is_empty() || t == 0 {
            return bad("no tokens".into());
        }
        if tokens.iter().any(|r| r.len() != t)
            || positions.len() != tokens.len()
            || positions.iter().any(|r| r.len() != t)
        {
            return bad("tokens and positions must be B rows of the same length T".into());
        }
        if key_mask.len() != tokens.len() || key_mask.iter().any(|r| r.len() != past + t) {
            return bad(format!("the key mask must be B rows of {} (cached {past} + {t})", past + t));
        }
        if let Some(id) = tokens.iter().flatten().find(|&&id| id as usize >= self.cfg.vocab_size) {
            return bad(format!("token id {id} is outside the vocabulary of {}", self.cfg.vocab_size));
        }
        if let Some(p) = positions.iter().flatten().find(|&&p| p as usize >= self.cfg.max_positions) {
            return bad(format!("position {p} is past the model's {} positions", self.cfg.max_positions));
        }
        Ok(())
    }

    /// The Llama family's forward pass to the last hidden states.
    fn llama(&self, ids: &Tensor, pos: &Tensor, mask: &Tensor, mut cache: Option<&mut KvCache>) -> Result<Tensor> {
        let c = &self.cfg;
        let (b, t) = ids.dims2()?;
        let (cos, sin) = self.rope.as_ref().expect("built for the Llama family");
        let cos = cos.index_select(pos, 0)?.reshape((b, 1, t, c.head_dim))?;
        let sin = sin.index_select(pos, 0)?.reshape((b, 1, t, c.head_dim))?;
        let mut x =
            self.p("model.embed_tokens.weight").embedding(&ids.flatten_all()?)?.reshape((b, t, c.hidden_size))?;
        for l in 0..c.num_layers {
            let p = format!("model.layers.{l}");
            let h = rms_norm(&x, self.p(&format!("{p}.input_layernorm.weight")), c.norm_eps)?;
            let attn = self.llama_attention(&p, &h, (&cos, &sin), mask, l, cache.as_deref_mut())?;
            x = (x + attn)?;
            let h = rms_norm(&x, self.p(&format!("{p}.post_attention_layernorm.weight")), c.norm_eps)?;
            let gate = silu(&self.lin(&format!("{p}.mlp.gate_proj"), &h)?)?;
            let up = self.lin(&format!("{p}.mlp.up_proj"), &h)?;
            x = (x + self.lin(&format!("{p}.mlp.down_proj"), &(gate * up)?)?)?;
        }
        Ok(rms_norm(&x, self.p("model.norm.weight"), c.norm_eps)?)
    }

    /// One Llama attention block on the normed input `h` `[B, T, d]`.
    fn llama_attention(
        &self,
        p: &str,
        h: &Tensor,
        (cos, sin): (&Tensor, &Tensor),
        mask: &Tensor,
        layer: usize,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let c = &self.cfg;
        let proj = |name: &str, heads: usize| -> Result<Tensor> {
            Ok(split_heads(&self.lin(&format!("{p}.self_attn.{name}"), h)?, heads)?)
        };
        let (mut q, mut k, v) =
            (proj("q_proj", c.num_heads)?, proj("k_proj", c.num_kv_heads)?, proj("v_proj", c.num_kv_heads)?);
        if let Arch::Llama { qk_norm: true, .. } = c.arch {
            q = rms_norm(&q, self.p(&format!("{p}.self_attn.q_norm.weight")), c.norm_eps)?;
            k = rms_norm(&k, self.p(&format!("{p}.self_attn.k_norm.weight")), c.norm_eps)?;
        }
        let (q, k) = (rotate(&q, cos, sin)?, rotate(&k, cos, sin)?);
        let (k, v) = extend_cache(cache, layer, k, v)?;
        let o = attend(&q, &k, &v, mask)?;
        self.lin(&format!("{p}.self_attn.o_proj"), &merge_heads(&o)?)
    }

    /// The projection `module` of `x`: `x·Wᵀ (+ b)` (GPT-2's Conv1D: `x·W + b`, W `[in, out]`), plus
    /// its LoRA update where it has an adapter.
    fn lin(&self, module: &str, x: &Tensor) -> Result<Tensor> {
        let (w, b) = (self.p(&format!("{module}.weight")), self.opt(&format!("{module}.bias")));
        let y = match self.cfg.arch {
            Arch::Gpt2 => linear(x, &w.t()?, b)?,
            Arch::Llama { .. } => linear(x, w, b)?,
        };
        Ok(match self.lora.as_ref().map(|l| l.delta(module, x)).transpose()?.flatten() {
            Some(d) => (y + d)?,
            None => y,
        })
    }

    /// GPT-2's forward pass to the last hidden states.
    fn gpt2(&self, ids: &Tensor, pos: &Tensor, mask: &Tensor, mut cache: Option<&mut KvCache>) -> Result<Tensor> {
        let c = &self.cfg;
        let (b, t) = ids.dims2()?;
        let d = c.hidden_size;
        let wte = self.p("transformer.wte.weight");
        let emb = wte.embedding(&ids.flatten_all()?)?.add(&self.p("transformer.wpe.weight").embedding(pos)?)?;
        let mut x = emb.reshape((b, t, d))?;
        let conv = |x: &Tensor, name: &str| self.lin(name, x);
        for l in 0..c.num_layers {
            let p = format!("transformer.h.{l}");
            let ln = |x: &Tensor, n: &str| {
                layer_norm(x, self.p(&format!("{p}.{n}.weight")), self.p(&format!("{p}.{n}.bias")), c.norm_eps)
            };
            let qkv = conv(&ln(&x, "ln_1")?, &format!("{p}.attn.c_attn"))?;
            let part = |i: usize| split_heads(&qkv.narrow(2, i * d, d)?, c.num_heads);
            let (k, v) = extend_cache(cache.as_deref_mut(), l, part(1)?, part(2)?)?;
            let o = attend(&part(0)?, &k, &v, mask)?;
            x = (x + conv(&merge_heads(&o)?, &format!("{p}.attn.c_proj"))?)?;
            let h = gelu_tanh(&conv(&ln(&x, "ln_2")?, &format!("{p}.mlp.c_fc"))?)?;
            x = (x + conv(&h, &format!("{p}.mlp.c_proj"))?)?;
        }
        Ok(layer_norm(&x, self.p("transformer.ln_f.weight"), self.p("transformer.ln_f.bias"), c.norm_eps)?)
    }
}

/// Layer `layer`'s keys and values with the cache's before them (the cache then holds both).
fn extend_cache(
    cache: Option<&mut KvCache>,
    layer: usize,
    k: Tensor,
    v: Tensor,
) -> candle_core::Result<(Tensor, Tensor)> {
    let Some(c) = cache else { return Ok((k, v)) };
    let t = k.dim(2)?;
    if c.capacity == 0 {
        let (k, v) = match c.layers.get(layer) {
            Some(lc) => (Tensor::cat(&[&lc.k, &k], 2)?, Tensor::cat(&[&lc.v, &v], 2)?),
            None => (k, v),
        };
        let lc = LayerCache { k: k.clone(), v: v.clone(), used: k.dim(2)? };
        if c.layers.len() > layer {
            c.layers[layer] = lc;
        } else {
            c.layers.push(lc);
        }
        return Ok((k, v));
    }
    if c.layers.len() <= layer {
        let (b, h, _, d) = k.dims4()?;
        let zeros = || Tensor::zeros((b, h, c.capacity, d), k.dtype(), k.device());
        c.layers.push(LayerCache { k: zeros()?, v: zeros()?, used: 0 });
    }
    let lc = &mut c.layers[layer];
    if lc.used + t > c.capacity {
        candle_core::bail!("the key/value cache holds {} positions, {} were asked for", c.capacity, lc.used + t);
    }
    lc.k.slice_set(&k.detach().contiguous()?, 2, lc.used)?;
    lc.v.slice_set(&v.detach().contiguous()?, 2, lc.used)?;
    lc.used += t;
    Ok((lc.k.narrow(2, 0, lc.used)?, lc.v.narrow(2, 0, lc.used)?))
}
