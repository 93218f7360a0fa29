//! LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models",
//! arXiv:2106.09685) as PEFT builds them: for each targeted projection W, two trainable matrices
//! A `[r, in]` (PEFT's Kaiming-uniform init, U(−1/√in, 1/√in)) and B `[out, r]` (zeros), and the
//! projection becomes y = W·x (+ b) + (α/r)·B·A·x — on the unmerged weights, so generation uses the
//! adapted model with no merge step. The base weights stay frozen. [`LoraConfig`] has PEFT's
//! names and defaults (`r` 8, `lora_alpha` 8, `target_modules` by model type: `q_proj`, `v_proj`
//! for the Llama family, `c_attn` for GPT-2, or `"all-linear"`).

use super::config::{Arch, HfConfig};
use super::layers::linear;
use candle_core::{Device, Tensor, Var};
use proxima::{ProximaError, Result};
use rand::Rng;
use std::collections::BTreeMap;

/// PEFT's `LoraConfig`: the fields Proxima reads.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoraConfig {
    /// The rank r.
    pub r: usize,
    /// α: the update is scaled by α / r.
    pub lora_alpha: f64,
    /// The projections to adapt, by their last name (`q_proj`, `c_attn`, ...), or `["all-linear"]`
    /// (every linear layer but the output head); empty: PEFT's default for the model type. One
    /// name as a string is read as a list of it, as PEFT takes `target_modules="all-linear"`.
    #[serde(deserialize_with = "one_or_many")]
    pub target_modules: Vec<String>,
}

/// A string or a list of strings, as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match <OneOrMany as serde::Deserialize>::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl Default for LoraConfig {
    fn default() -> Self {
        LoraConfig { r: 8, lora_alpha: 8.0, target_modules: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn target_modules_take_one_name_or_a_list() {
        let one: super::LoraConfig = serde_json::from_str(r#"{"target_modules": "all-linear"}"#).unwrap();
        let many: super::LoraConfig = serde_json::from_str(r#"{"target_modules": ["all-linear"]}"#).unwrap();
        assert_eq!(one.target_modules, vec!["all-linear".to_string()]);
        assert_eq!(one, many);
        assert!(serde_json::from_str::<super::LoraConfig>(r#"{"target_modules": 3}"#).is_err());
    }
}

/// The adapters of one model: per adapted projection (its module path, e.g.
/// `model.layers.0.self_attn.q_proj`), A and B.
#[derive(Clone, Debug)]
pub struct Lora {
    /// α / r.
    pub scale: f64,
    adapters: BTreeMap<String, (Var, Var)>,
}

/// Every linear projection of a model: (module path, in, out).
fn projections(cfg: &HfConfig) -> Vec<(String, usize, usize)> {
    cfg.param_shapes()
        .into_iter()
        .filter(|(n, s)| {
            s.len() == 2
                && n.ends_with(".weight")
                && !n.contains("embed")
                && !n.contains("wte")
                && !n.contains("wpe")
                && !n.starts_with("lm_head")
        })
        .map(|(n, s)| {
            let module = n.trim_end_matches(".weight").to_string();
            // GPT-2's Conv1D stores [in, out]; nn.Linear [out, in].
            let (inp, out) = if cfg.arch == Arch::Gpt2 { (s[0], s[1]) } else { (s[1], s[0]) };
            (module, inp, out)
        })
        .collect()
}

impl Lora {
    /// Fresh adapters for `cfg`'s targeted projections, A drawn from `rng`.
    ///
    /// # Errors
    /// `Config` for r = 0, or target modules that name no projection of this model.
    pub fn new<R: Rng + ?Sized>(cfg: &HfConfig, lora: &LoraConfig, rng: &mut R) -> Result<Lora> {
        if lora.r == 0 {
            return Err(ProximaError::Config("LoRA rank r must be positive".into()));
        }
        let targets: Vec<String> = if lora.target_modules.is_empty() {
            match cfg.arch {
                Arch::Gpt2 => vec!["c_attn".into()],
                Arch::Llama { .. } => vec!["q_proj".into(), "v_proj".into()],
            }
        } else {
            lora.target_modules.clone()
        };
        let all = targets.iter().any(|t| t == "all-linear");
        let mut adapters = BTreeMap::new();
        for (module, inp, out) in projections(cfg) {
            let last = module.rsplit('.').next().unwrap_or("");
            if all || targets.iter().any(|t| t == last) {
                let bound = 1.0 / (inp as f32).sqrt();
                let a: Vec<f32> = (0..lora.r * inp).map(|_| rng.random_range(-bound..bound)).collect();
                let a = Var::from_tensor(&Tensor::from_vec(a, (lora.r, inp), &Device::Cpu)?)?;
                let b = Var::from_tensor(&Tensor::zeros((out, lora.r), candle_core::DType::F32, &Device::Cpu)?)?;
                adapters.insert(module, (a, b));
            }
        }
        if adapters.is_empty() {
            return Err(ProximaError::Config(format!(
                "LoRA target_modules {targets:?} name no linear layer of this {} model",
                cfg.model_type
            )));
        }
        Ok(Lora { scale: lora.lora_alpha / lora.r as f64, adapters })
    }

    /// (α/r)·B·A·x for `module`'s input `x` `[.., in]`, or `None` where it has no adapter.
    ///
    /// # Errors
    /// Tensor errors.
    pub fn delta(&self, module: &str, x: &Tensor) -> Result<Option<Tensor>> {
        let Some((a, b)) = self.adapters.get(module) else { return Ok(None) };
        let ax = linear(x, a.as_tensor(), None)?;
        Ok(Some((linear(&ax, b.as_tensor(), None)? * self.scale)?))
    }

    /// The adapters' variables with PEFT's names (`{module}.lora_A.weight`, `{module}.lora_B.weight`).
    pub fn named_params(&self) -> Vec<(String, Var)> {
        self.adapters
            .iter()
            .flat_map(|(m, (a, b))| {
                [(format!("{m}.lora_A.weight"), a.clone()), (format!("{m}.lora_B.weight"), b.clone())]
            })
            .collect()
    }

    /// W + (α/r)·B·A for `module`'s weight as stored (`[out, in]`, or GPT-2's `[in, out]` when
    /// `transposed`), or `w` itself without an adapter.
    ///
    /// # Errors
    /// Tensor errors.
    pub fn merged(&self, module: &str, w: &Tensor, transposed: bool) -> Result<Tensor> {
        let Some((a, b)) = self.adapters.get(module) else { return Ok(w.clone()) };
        let ba = (b.as_tensor().matmul(a.as_tensor())? * self.scale)?;
        Ok(if transposed { (w + ba.t()?)? } else { (w + ba)? })
    }
}
