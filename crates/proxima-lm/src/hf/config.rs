//! A Hugging Face checkpoint's `config.json`, read for the architectures Proxima builds: the Llama
//! family (`model_type` `llama` — SmolLM, Llama 2/3 —, `qwen2` with its q/k/v biases, `qwen3`
//! with its per-head q/k RMSNorm) and `gpt2`. Keys as `transformers` writes them, versions 4 and 5
//! (`rope_theta` at the top level, or in `rope_parameters`).

use proxima::{ProximaError, Result};
use serde_json::Value;
use std::path::Path;

/// The decoder's family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama-style: RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP.
    Llama {
        /// Biases on q, k and v (`qwen2`; `attention_bias` for `llama`, `mistral`, `qwen3`).
        qkv_bias: bool,
        /// A bias on the attention's output projection (`attention_bias` for `llama`, `mistral`,
        /// `qwen3`; never for `qwen2`).
        o_bias: bool,
        /// RMSNorm of each head's q and k before the rotation (`qwen3`).
        qk_norm: bool,
    },
    /// GPT-2: LayerNorm, learned positions, fused `c_attn` (Conv1D weights, `[in, out]`), GELU.
    Gpt2,
}

/// What the model needs from `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct HfConfig {
    /// `model_type` as written (`llama`, `qwen2`, `qwen3`, `gpt2`).
    pub model_type: String,
    /// The family and its options.
    pub arch: Arch,
    /// Vocabulary size V.
    pub vocab_size: usize,
    /// Model width d (`hidden_size`, GPT-2's `n_embd`).
    pub hidden_size: usize,
    /// The MLP's inner width (`intermediate_size`; GPT-2's `n_inner`, or 4·d).
    pub intermediate_size: usize,
    /// Decoder layers (`num_hidden_layers`, `n_layer`).
    pub num_layers: usize,
    /// Query heads (`num_attention_heads`, `n_head`).
    pub num_heads: usize,
    /// Key/value heads (`num_key_value_heads`; = `num_heads` without grouped-query attention).
    pub num_kv_heads: usize,
    /// Width of one head (`head_dim`, or d / heads).
    pub head_dim: usize,
    /// Longest position (`max_position_embeddings`, `n_positions`).
    pub max_positions: usize,
    /// The norms' ε (`rms_norm_eps`, `layer_norm_epsilon`).
    pub norm_eps: f64,
    /// RoPE's base θ (Llama family).
    pub rope_theta: f64,
    /// How RoPE's frequencies are scaled for longer contexts (`rope_parameters` / `rope_scaling`).
    pub rope_scaling: RopeScaling,
    /// The output projection is the token embedding (`tie_word_embeddings`).
    pub tie_word_embeddings: bool,
    /// End-of-sequence token ids (`eos_token_id`: one id or a list).
    pub eos_token_ids: Vec<u32>,
    /// The whole file, written back as it was read.
    pub raw: Value,
}

/// RoPE's frequency scaling, as `transformers`' `ROPE_INIT_FUNCTIONS` compute it.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// θ^(−2i/d), unscaled.
    Default,
    /// Every frequency divided by `factor` (`rope_type` "linear").
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Llama 3.1's: long wavelengths divided by `factor`, short ones kept, those between
    /// interpolated (`rope_type` "llama3").
    Llama3 {
        /// The divisor of the long wavelengths (8).
        factor: f64,
        /// Wavelengths above original context / this are divided (1).
        low_freq_factor: f64,
        /// Wavelengths below original context / this are kept (4).
        high_freq_factor: f64,
        /// The pre-training context (8192).
        original_max_position_embeddings: f64,
    },
}

impl RopeScaling {
    /// From `rope_parameters` (or the older `rope_scaling`); `max_positions` stands in for a
    /// missing `original_max_position_embeddings`.
    ///
    /// # Errors
    /// `Config` for another `rope_type` (dynamic, yarn, longrope, ...) or a missing factor.
    pub fn from_json(rope: Option<&Value>, max_positions: usize) -> Result<RopeScaling> {
        let Some(r) = rope else { return Ok(RopeScaling::Default) };
        let kind = r.get("rope_type").or_else(|| r.get("type")).and_then(Value::as_str).unwrap_or("default");
        let num = |k: &str| -> Result<f64> {
            r.get(k)
                .and_then(Value::as_f64)
                .ok_or_else(|| ProximaError::Config(format!("RoPE scaling `{kind}` needs `{k}`")))
        };
        match kind {
            "default" => Ok(RopeScaling::Default),
            "linear" => Ok(RopeScaling::Linear { factor: num("factor")? }),
            "llama3" => Ok(RopeScaling::Llama3 {
                factor: num("factor")?,
                low_freq_factor: num("low_freq_factor")?,
                high_freq_factor: num("high_freq_factor")?,
                original_max_position_embeddings: r
                    .get("original_max_position_embeddings")
                    .and_then(Value::as_f64)
                    .unwrap_or(max_positions as f64),
            }),
            other => Err(ProximaError::Config(format!(
                "RoPE scaling `{other}` is not supported yet (default, linear and llama3 are)"
            ))),
        }
    }

    /// The inverse frequencies of a head of width `head_dim` with base `theta`, scaled.
    pub fn inv_freq(&self, head_dim: usize, theta: f64) -> Vec<f64> {
        let base = (0..head_dim / 2).map(|i| 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64));
        match *self {
            RopeScaling::Default => base.collect(),
            RopeScaling::Linear { factor } => base.map(|f| f / factor).collect(),
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: old,
            } => {
                let (low_wavelen, high_wavelen) = (old / low_freq_factor, old / high_freq_factor);
                base.map(|f| {
                    let wavelen = 2.0 * std::f64::consts::PI / f;
                    if wavelen < high_wavelen {
                        f
                    } else if wavelen > low_wavelen {
                        f / factor
                    } else {
                        let smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                        (1.0 - smooth) * f / factor + smooth * f
                    }
                })
                .collect()
            }
        }
    }
}

/// Refuses the options of a supported `model_type` that Proxima does not build (rather than
/// computing another model than the checkpoint's): another activation, MLP biases, sliding-window
/// attention, GPT-2's unscaled or layer-scaled attention.
///
/// # Errors
/// `Config` naming the option and its value.
fn refuse_unimplemented(raw: &Value, model_type: &str, arch: Arch) -> Result<()> {
    let refuse = |what: String| {
        Err(ProximaError::Config(format!("{model_type} with {what} is not supported (Proxima does not build it)")))
    };
    let flag = |k: &str| raw.get(k).and_then(Value::as_bool).unwrap_or(false);
    match arch {
        Arch::Llama { .. } => {
            let act = raw.get("hidden_act").and_then(Value::as_str).unwrap_or("silu");
            if act != "silu" {
                return refuse(format!("hidden_act `{act}` (only silu)"));
            }
            if flag("mlp_bias") {
                return refuse("mlp_bias = true".into());
            }
            let positions = raw.get("max_position_embeddings").and_then(Value::as_u64).unwrap_or(0);
            let window = raw.get("sliding_window").and_then(Value::as_u64);
            let sliding = match model_type {
                "mistral" => window.is_some_and(|w| w < positions),
                _ => flag("use_sliding_window"),
            };
            if sliding {
                return refuse(format!("sliding-window attention (sliding_window {})", window.unwrap_or(0)));
            }
        }
        Arch::Gpt2 => {
            let act = raw.get("activation_function").and_then(Value::as_str).unwrap_or("gelu_new");
            if !matches!(act, "gelu_new" | "gelu_pytorch_tanh") {
                return refuse(format!("activation_function `{act}` (only gelu_new)"));
            }
            if !raw.get("scale_attn_weights").and_then(Value::as_bool).unwrap_or(true) {
                return refuse("scale_attn_weights = false".into());
            }
            if flag("scale_attn_by_inverse_layer_idx") {
                return refuse("scale_attn_by_inverse_layer_idx = true".into());
            }
        }
    }
    Ok(())
}

impl HfConfig {
    /// Reads `dir/config.json`.
    ///
    /// # Errors
    /// `Io` when the file cannot be read; `Config` for invalid JSON, an unknown `model_type`, a
    /// missing or inconsistent size, or RoPE scaling other than the default.
    pub fn load(dir: &Path) -> Result<HfConfig> {
        let path = dir.join("config.json");
        let text =
            std::fs::read_to_string(&path).map_err(|err| ProximaError::Io { path: path.display().to_string(), err })?;
        let raw: Value = serde_json::from_str(&text)
            .map_err(|e| ProximaError::Config(format!("{}: not JSON: {e}", path.display())))?;
        HfConfig::from_json(raw).map_err(|e| ProximaError::Config(format!("{}: {e}", path.display())))
    }

    /// The config from parsed JSON (what [`HfConfig::load`] reads).
    ///
    /// # Errors
    /// As [`HfConfig::load`], without the path.
    pub fn from_json(raw: Value) -> Result<HfConfig> {
        let model_type = raw.get("model_type").and_then(Value::as_str).unwrap_or("").to_string();
        let get = |keys: &[&str]| keys.iter().find_map(|k| raw.get(*k).filter(|v| !v.is_null()));
        let size = |keys: &[&str]| -> Result<usize> {
            get(keys)
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| ProximaError::Config(format!("`{}` must be a positive integer", keys[0])))
        };
        let attention_bias = get(&["attention_bias"]).and_then(Value::as_bool).unwrap_or(false);
        let arch = match model_type.as_str() {
            "llama" | "mistral" => Arch::Llama { qkv_bias: attention_bias, o_bias: attention_bias, qk_norm: false },
            "qwen2" => Arch::Llama { qkv_bias: true, o_bias: false, qk_norm: false },
            "qwen3" => Arch::Llama { qkv_bias: attention_bias, o_bias: attention_bias, qk_norm: true },
            "gpt2" => Arch::Gpt2,
            other => {
                return Err(ProximaError::Config(format!(
                    "model_type `{other}` is not supported: Proxima builds llama (SmolLM, Llama), mistral (without sliding-window attention), qwen2, qwen3 and gpt2"
                )))
            }
        };
        refuse_unimplemented(&raw, &model_type, arch)?;
        let hidden_size = size(&["hidden_size", "n_embd"])?;
        let num_heads = size(&["num_attention_heads", "n_head"])?;
        let num_kv_heads =
            if arch == Arch::Gpt2 { num_heads } else { size(&["num_key_value_heads", "num_attention_heads"])? };
        let head_dim = match get(&["head_dim"]).and_then(Value::as_u64) {
            Some(h) if h > 0 => h as usize,
            _ => hidden_size / num_heads,
        };
        if num_heads % num_kv_heads != 0 || head_dim == 0 || (arch == Arch::Gpt2 && hidden_size % num_heads != 0) {
            return Err(ProximaError::Config(format!(
                "{num_heads} attention heads over {num_kv_heads} key/value heads of width {head_dim} (hidden size {hidden_size}) do not fit"
            )));
        }
        let intermediate_size = match arch {
            Arch::Gpt2 => get(&["n_inner"]).and_then(Value::as_u64).map_or(4 * hidden_size, |n| n as usize),
            Arch::Llama { .. } => size(&["intermediate_size"])?,
        };
        let rope = raw.get("rope_parameters").or_else(|| raw.get("rope_scaling")).filter(|v| !v.is_null());
        let rope_scaling = RopeScaling::from_json(rope, size(&["max_position_embeddings", "n_positions"])?)?;
        let rope_theta = rope
            .and_then(|r| r.get("rope_theta"))
            .or_else(|| raw.get("rope_theta"))
            .and_then(Value::as_f64)
            .unwrap_or(10_000.0);
        let eos_token_ids = match raw.get("eos_token_id") {
            Some(Value::Number(n)) => n.as_u64().map(|n| vec![n as u32]).unwrap_or_default(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_u64).map(|n| n as u32).collect(),
            _ => Vec::new(),
        };
        Ok(HfConfig {
            arch,
            vocab_size: size(&["vocab_size"])?,
            hidden_size,
            intermediate_size,
            num_layers: size(&["num_hidden_layers", "n_layer"])?,
            num_heads,
            num_kv_heads,
            head_dim,
            max_positions: size(&["max_position_embeddings", "n_positions"])?,
            norm_eps: get(&["rms_norm_eps", "layer_norm_epsilon"]).and_then(Value::as_f64).unwrap_or(1e-5),
            rope_theta,
            rope_scaling,
            tie_word_embeddings: get(&["tie_word_embeddings"]).and_then(Value::as_bool).unwrap_or(arch == Arch::Gpt2),
            eos_token_ids,
            model_type,
            raw,
        })
    }

    /// The parameters' names and shapes as `transformers` stores them, in a fixed order (the
    /// output projection only when untied).
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (d, v, f) = (self.hidden_size, self.vocab_size, self.intermediate_size);
        let mut out = Vec::new();
        let mut push = |n: String, s: Vec<usize>| out.push((n, s));
        match self.arch {
            Arch::Llama { qkv_bias, o_bias, qk_norm } => {
                let (q, kv) = (self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim);
                push("model.embed_tokens.weight".into(), vec![v, d]);
                for l in 0..self.num_layers {
                    let p = format!("model.layers.{l}");
                    push(format!("{p}.input_layernorm.weight"), vec![d]);
                    for (name, rows) in [("q_proj", q), ("k_proj", kv), ("v_proj", kv)] {
                        push(format!("{p}.self_attn.{name}.weight"), vec![rows, d]);
                        if qkv_bias {
                            push(format!("{p}.self_attn.{name}.bias"), vec![rows]);
                        }
                    }
                    if qk_norm {
                        push(format!("{p}.self_attn.q_norm.weight"), vec![self.head_dim]);
                        push(format!("{p}.self_attn.k_norm.weight"), vec![self.head_dim]);
                    }
                    push(format!("{p}.self_attn.o_proj.weight"), vec![d, q]);
                    if o_bias {
                        push(format!("{p}.self_attn.o_proj.bias"), vec![d]);
                    }
                    push(format!("{p}.post_attention_layernorm.weight"), vec![d]);
                    push(format!("{p}.mlp.gate_proj.weight"), vec![f, d]);
                    push(format!("{p}.mlp.up_proj.weight"), vec![f, d]);
                    push(format!("{p}.mlp.down_proj.weight"), vec![d, f]);
                }
                push("model.norm.weight".into(), vec![d]);
                if !self.tie_word_embeddings {
                    push("lm_head.weight".into(), vec![v, d]);
                }
            }
            Arch::Gpt2 => {
                push("transformer.wte.weight".into(), vec![v, d]);
                push("transformer.wpe.weight".into(), vec![self.max_positions, d]);
                for l in 0..self.num_layers {
                    let p = format!("transformer.h.{l}");
                    for (name, shape) in [
                        ("ln_1.weight", vec![d]),
                        ("ln_1.bias", vec![d]),
                        ("attn.c_attn.weight", vec![d, 3 * d]),
                        ("attn.c_attn.bias", vec![3 * d]),
                        ("attn.c_proj.weight", vec![d, d]),
                        ("attn.c_proj.bias", vec![d]),
                        ("ln_2.weight", vec![d]),
                        ("ln_2.bias", vec![d]),
                        ("mlp.c_fc.weight", vec![d, f]),
                        ("mlp.c_fc.bias", vec![f]),
                        ("mlp.c_proj.weight", vec![f, d]),
                        ("mlp.c_proj.bias", vec![d]),
                    ] {
                        push(format!("{p}.{name}"), shape);
                    }
                }
                push("transformer.ln_f.weight".into(), vec![d]);
                push("transformer.ln_f.bias".into(), vec![d]);
                if !self.tie_word_embeddings {
                    push("lm_head.weight".into(), vec![v, d]);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn llama() -> Value {
        json!({"model_type": "llama", "vocab_size": 96, "hidden_size": 32, "intermediate_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "max_position_embeddings": 64, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})
    }

    #[test]
    fn a_llama_config_reads_as_transformers_writes_it() {
        let c = HfConfig::from_json(llama()).unwrap();
        assert_eq!((c.head_dim, c.num_kv_heads, c.rope_theta, c.tie_word_embeddings), (8, 2, 500000.0, false));
        assert_eq!(c.param_shapes().len(), 1 + 2 * 9 + 2);
        let mut old = llama();
        old["rope_parameters"] = Value::Null;
        old["rope_theta"] = json!(10000.0);
        old["eos_token_id"] = json!([2, 7]);
        let c = HfConfig::from_json(old).unwrap();
        assert_eq!((c.rope_theta, c.eos_token_ids.clone()), (10000.0, vec![2, 7]));
    }

    #[test]
    fn what_is_not_supported_is_a_clear_error() {
        let err = |v: Value| HfConfig::from_json(v).unwrap_err().to_string();
        let mut v = llama();
        v["model_type"] = json!("mamba");
        assert!(err(v).contains("model_type `mamba` is not supported"));
        let mut v = llama();
        v["rope_parameters"] = json!({"rope_type": "yarn", "factor": 4.0});
        assert!(err(v).contains("RoPE scaling `yarn`"));
        for (key, value, said) in [
            ("hidden_act", json!("gelu"), "hidden_act `gelu`"),
            ("mlp_bias", json!(true), "mlp_bias = true"),
            ("use_sliding_window", json!(true), "sliding-window attention"),
        ] {
            let mut v = llama();
            v[key] = value;
            assert!(err(v).contains(said), "{key}");
        }
        let mut v = llama();
        (v["model_type"], v["sliding_window"]) = (json!("mistral"), json!(16));
        assert!(err(v).contains("mistral with sliding-window attention (sliding_window 16)"));
        let gpt2 = || json!({"model_type": "gpt2", "vocab_size": 50, "n_embd": 32, "n_layer": 1, "n_head": 4, "n_positions": 64});
        assert!(HfConfig::from_json(gpt2()).is_ok());
        for (key, value, said) in [
            ("activation_function", json!("relu"), "activation_function `relu`"),
            ("scale_attn_weights", json!(false), "scale_attn_weights = false"),
            ("scale_attn_by_inverse_layer_idx", json!(true), "scale_attn_by_inverse_layer_idx = true"),
        ] {
            let mut v = gpt2();
            v[key] = value;
            assert!(err(v).contains(said), "{key}");
        }
        let mut v = llama();
        v["num_key_value_heads"] = json!(3);
        assert!(err(v).contains("do not fit"));
        let mut v = llama();
        v["hidden_size"] = json!(0);
        assert!(err(v).contains("`hidden_size` must be a positive integer"));
    }
}
