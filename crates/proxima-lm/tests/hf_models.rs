//! Hugging Face models against `transformers` itself: tiny random Llama-, Qwen2-, Qwen3- and
//! GPT-2-shaped models made by `hf_reference.py` (a few layers, width ≤ 64). Proxima's logits equal
//! `transformers`' to 1e-4 on a left-padded batch, greedy decoding through the key/value cache
//! gives `generate`'s tokens, and a model Proxima writes (its weights changed) loads in
//! `transformers` with Proxima's logits.

use candle_core::{Tensor, Var};
use proxima_lm::hf::{CausalLm, KvCache};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> String {
    std::env::var("PROXIMA_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hf_reference.py")
}

/// Makes the models and the reference once per test binary run (in a fresh temp directory).
fn reference() -> (PathBuf, Value) {
    let dir = std::env::temp_dir().join(format!("proxima-hf-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(python()).arg(script()).arg("make").arg(&dir).output().expect("runs Python");
    assert!(out.status.success(), "hf_reference.py make: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    (dir, serde_json::from_str(&text).unwrap())
}

fn rows<T: TryFrom<u64>>(v: &Value) -> Vec<Vec<T>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|x| T::try_from(x.as_u64().unwrap()).ok().unwrap()).collect())
        .collect()
}

/// Positions counted from each row's first real token, 0 on padding: max(cumsum(mask) − 1, 0), as
/// `generate` counts them.
fn positions(mask: &[Vec<u8>]) -> Vec<Vec<u32>> {
    mask.iter()
        .map(|r| {
            r.iter()
                .scan(0u32, |n, &m| {
                    *n += u32::from(m);
                    Some(n.saturating_sub(1))
                })
                .collect()
        })
        .collect()
}

/// The largest |a − b| over the real (unmasked) positions of two `[B, T, V]` logits.
fn max_diff(a: &Tensor, b: &[Vec<Vec<f64>>], mask: &[Vec<u8>]) -> f64 {
    let a = a.to_vec3::<f32>().unwrap();
    let mut worst = 0f64;
    for (r, row) in mask.iter().enumerate() {
        for (t, &m) in row.iter().enumerate() {
            if m == 1 {
                for (x, y) in a[r][t].iter().zip(&b[r][t]) {
                    worst = worst.max((f64::from(*x) - y).abs());
                }
            }
        }
    }
    worst
}

fn logits_of(v: &Value) -> Vec<Vec<Vec<f64>>> {
    serde_json::from_value(v.clone()).unwrap()
}

/// Greedy decoding of `new` tokens through the cache: the prompt once, then one token per step.
fn greedy(lm: &CausalLm, prompt: &[Vec<u32>], mask: &[Vec<u8>], new: usize) -> Vec<Vec<u32>> {
    let mut cache = KvCache::default();
    let mut key_mask = mask.to_vec();
    let mut pos = positions(mask);
    let mut next_pos: Vec<u32> = pos.iter().map(|r| r.last().unwrap() + 1).collect();
    let mut logits = lm.forward(prompt, &pos, &key_mask, Some(&mut cache)).unwrap();
    let mut out = vec![Vec::new(); prompt.len()];
    for _ in 0..new {
        let t = logits.dim(1).unwrap();
        let last = logits.narrow(1, t - 1, 1).unwrap().squeeze(1).unwrap();
        let tok: Vec<u32> = last.argmax(1).unwrap().to_vec1().unwrap();
        for (o, &x) in out.iter_mut().zip(&tok) {
            o.push(x);
        }
        key_mask.iter_mut().for_each(|r| r.push(1));
        pos = next_pos.iter().map(|&p| vec![p]).collect();
        next_pos.iter_mut().for_each(|p| *p += 1);
        let ids: Vec<Vec<u32>> = tok.iter().map(|&x| vec![x]).collect();
        logits = lm.forward(&ids, &pos, &key_mask, Some(&mut cache)).unwrap();
    }
    out
}

#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn logits_and_greedy_tokens_equal_transformers() {
    let (dir, reference) = reference();
    let (tokens, mask) = (rows::<u32>(&reference["rows"]), rows::<u8>(&reference["mask"]));
    for name in ["llama", "qwen2", "qwen3", "gpt2"] {
        let lm = CausalLm::load(&dir.join(name)).unwrap();
        let logits = lm.forward(&tokens, &positions(&mask), &mask, None).unwrap();
        let want = logits_of(&reference["models"][name]["logits"]);
        let diff = max_diff(&logits, &want, &mask);
        assert!(diff < 1e-4, "{name}: logits differ from transformers' by {diff}");
        let new = reference["models"][name]["greedy"].as_array().unwrap()[0].as_array().unwrap().len();
        assert_eq!(
            greedy(&lm, &tokens, &mask, new),
            rows::<u32>(&reference["models"][name]["greedy"]),
            "{name}: greedy tokens"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn a_model_proxima_writes_loads_in_transformers() {
    let (dir, reference) = reference();
    let (tokens, mask) = (rows::<u32>(&reference["rows"]), rows::<u8>(&reference["mask"]));
    for name in ["llama", "qwen2", "gpt2"] {
        let lm = CausalLm::load(&dir.join(name)).unwrap();
        // Change every weight, so the written file is not the one read.
        for (_, var) in lm.named_params() {
            let t = var.as_tensor();
            var.set(
                &(t * 0.9).unwrap().sin().unwrap().broadcast_add(&Tensor::new(0.01f32, t.device()).unwrap()).unwrap(),
            )
            .unwrap();
        }
        let out = dir.join(format!("{name}-written"));
        lm.save(&out).unwrap();
        let py = Command::new(python()).arg(script()).arg("logits").arg(&out).output().unwrap();
        assert!(py.status.success(), "{name}: transformers could not load it: {}", String::from_utf8_lossy(&py.stderr));
        let theirs: Vec<Vec<Vec<f64>>> = serde_json::from_slice(&py.stdout).unwrap();
        let ours = lm.forward(&tokens, &positions(&mask), &mask, None).unwrap();
        let diff = max_diff(&ours, &theirs, &mask);
        assert!(diff < 1e-4, "{name}: the written model's logits differ by {diff}");
        let again = CausalLm::load(&out).unwrap();
        let same = again.named_params().iter().zip(lm.named_params()).all(
            |((_, a), (_, b)): (&(String, Var), &(String, Var))| {
                a.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap()
                    == b.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap()
            },
        );
        assert!(same, "{name}: written and read back, the weights changed");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tiny Qwen2-shaped model with random weights, built without Python.
fn tiny(dir: &Path) -> CausalLm {
    let raw = serde_json::json!({"model_type": "qwen2", "vocab_size": 20, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 12,
        "tie_word_embeddings": true});
    let cfg = proxima_lm::hf::HfConfig::from_json(raw).unwrap();
    let params = cfg
        .param_shapes()
        .into_iter()
        .map(|(n, s)| (n, Var::randn(0f32, 0.3, s, &candle_core::Device::Cpu).unwrap()))
        .collect();
    let lm = CausalLm::from_params(cfg, params).unwrap();
    lm.save(dir).unwrap();
    lm
}

/// Saved and loaded, the same logits; bad directories and inputs are clear errors.
#[test]
fn a_model_round_trips_and_bad_inputs_are_errors() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-tiny-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lm = tiny(&dir);
    let again = CausalLm::load(&dir).unwrap();
    let (tok, pos, mask) = (vec![vec![1u32, 5, 19]], vec![vec![0u32, 1, 2]], vec![vec![1u8; 3]]);
    let a = lm.forward(&tok, &pos, &mask, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = again.forward(&tok, &pos, &mask, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(a, b);
    let err = |t: &[Vec<u32>], p: &[Vec<u32>], m: &[Vec<u8>]| lm.forward(t, p, m, None).err().unwrap().to_string();
    assert!(err(&[vec![1, 20, 3]], &pos, &mask).contains("token id 20 is outside the vocabulary of 20"));
    assert!(err(&tok, &[vec![0, 1, 12]], &mask).contains("position 12 is past the model's 12 positions"));
    assert!(err(&tok, &pos, &[vec![1, 1]]).contains("key mask"));
    assert!(err(&[vec![]], &[vec![]], &[vec![]]).contains("no tokens"));
    // A tensor of the wrong shape, then no weights at all, then no config.
    let cfg_text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::write(dir.join("config.json"), cfg_text.replace("\"intermediate_size\": 24", "\"intermediate_size\": 25"))
        .unwrap();
    let e = CausalLm::load(&dir).err().unwrap().to_string();
    assert!(e.contains("gate_proj.weight` has shape [24, 16], the config says [25, 16]"), "{e}");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let e = CausalLm::load(&dir).err().unwrap().to_string();
    assert!(e.contains("neither model.safetensors nor model.safetensors.index.json"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    let e = CausalLm::load(&dir).err().unwrap().to_string();
    assert!(e.contains("config.json"), "{e}");
}
