//! Hugging Face models against `transformers` itself: tiny random Llama-, Qwen2-, Qwen3- and
//! GPT-2-shaped models made by `hf_reference.py` (a few layers, width ≤ 64). Proxima's logits equal
//! `transformers`' to 1e-4 on a left-padded batch, greedy decoding through the key/value cache
//! gives `generate`'s tokens, and a model Proxima writes (its weights changed) loads in
//! `transformers` with Proxima's logits.

use candle_core::{Tensor, Var};
use proxima_lm::hf::dpo::{dpo_loss, pair_log_probs, DpoArgs, DpoLossType, PairIds};
use proxima_lm::hf::grpo::micro_batch_loss;
use proxima_lm::hf::grpo_trainer::{completion_hidden, completion_log_probs};
use proxima_lm::hf::ppo;
use proxima_lm::hf::{generate, CausalLm, GrpoArgs, HfTokenizer, LossType, SamplingConfig};
use rand::SeedableRng;
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

/// Greedy decoding of `new` tokens with [`generate`], from the prompts without their padding.
fn greedy(lm: &CausalLm, prompt: &[Vec<u32>], mask: &[Vec<u8>], new: usize) -> Vec<Vec<u32>> {
    let prompts: Vec<Vec<u32>> = prompt
        .iter()
        .zip(mask)
        .map(|(p, m)| p.iter().zip(m).filter(|(_, &m)| m == 1).map(|(&t, _)| t).collect())
        .collect();
    let cfg = SamplingConfig { max_new_tokens: new, do_sample: false, ..SamplingConfig::default() };
    let out = generate(lm, &prompts, &cfg, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap();
    assert!(out.truncated.iter().all(|&t| t), "no stop tokens: every row runs to the end");
    out.tokens
}

#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn logits_and_greedy_tokens_equal_transformers() {
    let (dir, reference) = reference();
    let (tokens, mask) = (rows::<u32>(&reference["rows"]), rows::<u8>(&reference["mask"]));
    for name in ["llama", "llama3", "llama_bias", "qwen2", "qwen3", "gpt2"] {
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

/// The tokenizer encodes and decodes as `transformers`' `AutoTokenizer` (special tokens added or
/// not), and reads the end-of-sequence and padding ids from the tokenizer's config.
#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn the_tokenizer_encodes_as_transformers() {
    let (dir, reference) = reference();
    let t = &reference["tokenizer"];
    let tok = HfTokenizer::load(&dir.join("llama")).unwrap();
    for (i, text) in t["texts"].as_array().unwrap().iter().enumerate() {
        let text = text.as_str().unwrap();
        let with: Vec<u32> = serde_json::from_value(t["with_special"][i].clone()).unwrap();
        let plain: Vec<u32> = serde_json::from_value(t["plain"][i].clone()).unwrap();
        assert_eq!(tok.encode(text, true).unwrap(), with, "{text:?} with special tokens");
        assert_eq!(tok.encode(text, false).unwrap(), plain, "{text:?}");
        assert_eq!(tok.decode(&with, true).unwrap(), t["decoded"][i].as_str().unwrap(), "{text:?} decoded");
    }
    assert_eq!(tok.eos_token_ids, vec![t["eos"].as_u64().unwrap() as u32]);
    assert_eq!(u64::from(tok.pad_token_id), t["pad"].as_u64().unwrap());
    // The chat template renders as transformers' apply_chat_template, with and without the generation prompt.
    let (chats, texts) = (t["chats"].as_array().unwrap(), t["chat_texts"].as_array().unwrap());
    for (i, chat) in chats.iter().enumerate() {
        for (j, g) in [true, false].iter().enumerate() {
            assert_eq!(
                tok.apply_chat_template(chat, *g).unwrap(),
                texts[2 * i + j].as_str().unwrap(),
                "chat {i}, generation prompt {g}"
            );
        }
    }
    let bad = serde_json::json!([{"role": "tool", "content": "x"}]);
    let e = tok.apply_chat_template(&bad, true).unwrap_err().to_string();
    assert!(e.contains("Unknown role: tool"), "{e}");
    let e = HfTokenizer::load(&dir.join("gpt2")).err().unwrap().to_string();
    assert!(e.contains("tokenizer.json"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn a_model_proxima_writes_loads_in_transformers() {
    let (dir, reference) = reference();
    let (tokens, mask) = (rows::<u32>(&reference["rows"]), rows::<u8>(&reference["mask"]));
    for name in ["llama", "llama3", "qwen2", "gpt2"] {
        let mut lm = CausalLm::load(&dir.join(name)).unwrap();
        // LoRA adapters on every projection (written merged), and every weight changed, so the
        // written file is not the one read.
        let lora = proxima_lm::hf::LoraConfig { r: 2, lora_alpha: 4.0, target_modules: vec!["all-linear".into()] };
        lm.add_lora(&lora, &mut rand_chacha::ChaCha8Rng::seed_from_u64(5)).unwrap();
        for (_, var) in lm.named_params().iter().chain(&lm.trainable_params()) {
            let t = var.as_tensor();
            var.set(
                &(t * 0.9).unwrap().sin().unwrap().broadcast_add(&Tensor::new(0.01f32, t.device()).unwrap()).unwrap(),
            )
            .unwrap();
        }
        let out = dir.join(format!("{name}-written"));
        lm.save(&out).unwrap();
        if name == "llama" {
            assert!(HfTokenizer::load(&out).is_ok(), "the tokenizer's files go along");
        }
        let py = Command::new(python()).arg(script()).arg("logits").arg(&out).output().unwrap();
        assert!(py.status.success(), "{name}: transformers could not load it: {}", String::from_utf8_lossy(&py.stderr));
        let theirs: Vec<Vec<Vec<f64>>> = serde_json::from_slice(&py.stdout).unwrap();
        let ours = lm.forward(&tokens, &positions(&mask), &mask, None).unwrap();
        let diff = max_diff(&ours, &theirs, &mask);
        assert!(diff < 1e-4, "{name}: the written model's logits differ by {diff}");
        let again = CausalLm::load(&out).unwrap();
        let ours_again = again.forward(&tokens, &positions(&mask), &mask, None).unwrap();
        let theirs_again: Vec<Vec<Vec<f64>>> = ours
            .to_vec3::<f32>()
            .unwrap()
            .iter()
            .map(|r| r.iter().map(|t| t.iter().map(|&x| f64::from(x)).collect()).collect())
            .collect();
        assert!(max_diff(&ours_again, &theirs_again, &mask) < 1e-4, "{name}: read back, other logits");
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
        .map(|(n, s)| {
            let mut rng =
                rand_chacha::ChaCha8Rng::seed_from_u64(n.len() as u64 * 7919 + s.iter().product::<usize>() as u64);
            let v: Vec<f32> = (0..s.iter().product::<usize>())
                .map(|_| rand_distr::Distribution::sample(&rand_distr::Normal::new(0f32, 0.3).unwrap(), &mut rng))
                .collect();
            (n, Var::from_tensor(&Tensor::from_vec(v, s, &candle_core::Device::Cpu).unwrap()).unwrap())
        })
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
    // Step by step through a growing cache and through one allocated at its length: the logits of a whole pass.
    let whole = lm
        .forward(&tok, &pos, &mask, None)
        .unwrap()
        .narrow(1, 2, 1)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    for mut cache in [proxima_lm::hf::KvCache::default(), proxima_lm::hf::KvCache::with_capacity(3)] {
        lm.forward(&[vec![1u32, 5]], &[vec![0u32, 1]], &[vec![1u8; 2]], Some(&mut cache)).unwrap();
        let last = lm.forward(&[vec![19u32]], &[vec![2u32]], &[vec![1u8; 3]], Some(&mut cache)).unwrap();
        let last = last.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let worst = last.iter().zip(&whole).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst < 1e-5, "cached step off by {worst}");
    }
    let mut full = proxima_lm::hf::KvCache::with_capacity(2);
    lm.forward(&[vec![1u32, 5]], &[vec![0u32, 1]], &[vec![1u8; 2]], Some(&mut full)).unwrap();
    let e = lm.forward(&[vec![19u32]], &[vec![2u32]], &[vec![1u8; 3]], Some(&mut full)).unwrap_err().to_string();
    assert!(e.contains("the key/value cache holds 2 positions, 3 were asked for"), "{e}");
    let err = |t: &[Vec<u32>], p: &[Vec<u32>], m: &[Vec<u8>]| lm.forward(t, p, m, None).err().unwrap().to_string();
    assert!(err(&[vec![1, 20, 3]], &pos, &mask).contains("token id 20 is outside the vocabulary of 20"));
    assert!(err(&tok, &[vec![0, 1, 12]], &mask).contains("position 12 is past the model's 12 positions"));
    assert!(err(&tok, &pos, &[vec![1, 1]]).contains("key mask"));
    assert!(err(&[vec![]], &[vec![]], &[vec![]]).contains("no tokens"));
    // A tensor the architecture has no place for (an MLP bias the config does not declare).
    let file = dir.join("model.safetensors");
    let original = std::fs::read(&file).unwrap();
    let mut tensors = candle_core::safetensors::load(&file, &candle_core::Device::Cpu).unwrap();
    tensors.insert(
        "model.layers.0.mlp.up_proj.bias".into(),
        Tensor::zeros(24, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&tensors, &file).unwrap();
    let e = CausalLm::load(&dir).err().unwrap().to_string();
    assert!(e.contains("has no place for, e.g. `model.layers.0.mlp.up_proj.bias`"), "{e}");
    std::fs::write(&file, original).unwrap();
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

/// Sampling is reproducible from its seed, stops at a stop token (kept last), and refuses what
/// does not fit the model.
#[test]
fn sampling_is_seeded_and_stops_where_asked() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-sample-{}", std::process::id()));
    let lm = tiny(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let prompts = vec![vec![1u32, 2, 3], vec![4u32]];
    let cfg =
        SamplingConfig { max_new_tokens: 8, temperature: 1.5, top_k: 10, top_p: 0.95, ..SamplingConfig::default() };
    let run = |seed: u64, cfg: &SamplingConfig| {
        generate(&lm, &prompts, cfg, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed)).unwrap()
    };
    let (a, b, c) = (run(1, &cfg), run(1, &cfg), run(2, &cfg));
    assert_eq!(a, b);
    assert_ne!(a.tokens, c.tokens, "another seed, other tokens");
    assert!(a.tokens.iter().all(|t| t.len() == 8));
    let stop = a.tokens[0][2];
    let stopped = run(1, &SamplingConfig { stop_token_ids: vec![stop], ..cfg.clone() });
    let at = a.tokens[0].iter().position(|&t| t == stop).unwrap();
    assert_eq!(stopped.tokens[0], a.tokens[0][..=at].to_vec(), "cut after the stop token");
    assert!(!stopped.truncated[0]);
    let long = SamplingConfig { max_new_tokens: 10, ..cfg.clone() };
    let e = generate(&lm, &prompts, &long, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap_err().to_string();
    assert!(e.contains("exceed the model's 12 positions"), "{e}");
    let e = generate(&lm, &[vec![]], &cfg, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap_err().to_string();
    assert!(e.contains("at least one token"), "{e}");
}

/// Asserts that `loss` equals PyTorch's `want["loss"]` to 1e-5 and that its gradient with respect
/// to each of `params` equals `want["grads"][name]` to 1e-4 of that gradient's largest entry.
fn assert_loss_and_grads(what: &str, loss: &Tensor, params: &[(String, candle_core::Var)], want: &Value) {
    let l = f64::from(loss.to_scalar::<f32>().unwrap());
    assert!((l - want["loss"].as_f64().unwrap()).abs() < 1e-5, "{what}: loss {l} vs {}", want["loss"]);
    let grads = loss.backward().unwrap();
    for (pname, var) in params {
        let theirs: Vec<f64> = serde_json::from_value(want["grads"][pname].clone())
            .unwrap_or_else(|_| panic!("{what}: no gradient for {pname}"));
        let ours = grads.get(var.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let scale = theirs.iter().fold(0f64, |m, v| m.max(v.abs()));
        let worst = ours.iter().zip(&theirs).fold(0f64, |m, (a, b)| m.max((f64::from(*a) - b).abs()));
        assert!(worst <= 1e-4 * scale + 1e-7, "{what} {pname}: gradient off by {worst} (scale {scale})");
    }
}

/// The GRPO loss (TRL's `dapo`, with clipped ratios on both sides and the k3 term) and its
/// gradient with respect to every parameter equal PyTorch's in float64 on the same model.
#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn the_grpo_gradient_equals_pytorchs_in_float64() {
    let (dir, _) = reference();
    for name in ["llama", "qwen2", "qwen3", "gpt2"] {
        let py = Command::new(python()).arg(script()).arg("grpo").arg(dir.join(name)).output().unwrap();
        assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
        let want: Value = serde_json::from_slice(&py.stdout).unwrap();
        let b = &want["batch"];
        let lm = CausalLm::load(&dir.join(name)).unwrap();
        let (prompts, completions) = (rows::<u32>(&b["prompts"]), rows::<u32>(&b["completions"]));
        let (logp, mask) =
            completion_log_probs(&lm, &prompts, &completions, 0, b["temperature"].as_f64().unwrap()).unwrap();
        let offset = |k: &str| {
            Tensor::new(serde_json::from_value::<Vec<Vec<f32>>>(b[k].clone()).unwrap(), &candle_core::Device::Cpu)
                .unwrap()
        };
        let old = (logp.detach() + offset("old_offset")).unwrap();
        let refp = (logp.detach() + offset("ref_offset")).unwrap();
        let adv = Tensor::new(
            serde_json::from_value::<Vec<f32>>(b["advantages"].clone()).unwrap(),
            &candle_core::Device::Cpu,
        )
        .unwrap();
        let args = GrpoArgs {
            loss_type: LossType::Dapo,
            beta: 0.04,
            epsilon: 0.2,
            epsilon_high: Some(0.28),
            ..GrpoArgs::default()
        };
        let (loss, _) = micro_batch_loss(&logp, Some(&old), Some(&refp), &mask, &adv, &args, 4.0).unwrap();
        assert_loss_and_grads(name, &loss, lm.named_params(), &want);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The DPO losses (TRL's `sigmoid`, `hinge` and `ipo`) and their gradients with respect to every
/// parameter equal PyTorch's in float64 on the same model; the answers' log-probabilities are
/// summed over their own tokens only (the pairs have answers of different lengths).
#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn the_dpo_gradients_equal_pytorchs_in_float64() {
    let (dir, _) = reference();
    for name in ["llama", "qwen2", "gpt2"] {
        let py = Command::new(python()).arg(script()).arg("dpo").arg(dir.join(name)).output().unwrap();
        assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
        let want: Value = serde_json::from_slice(&py.stdout).unwrap();
        let b = &want["batch"];
        let lm = CausalLm::load(&dir.join(name)).unwrap();
        let (prompts, chosen, rejected) =
            (rows::<u32>(&b["prompts"]), rows::<u32>(&b["chosen"]), rows::<u32>(&b["rejected"]));
        let pairs: Vec<PairIds> = (0..prompts.len())
            .map(|i| PairIds { prompt: prompts[i].clone(), chosen: chosen[i].clone(), rejected: rejected[i].clone() })
            .collect();
        let refs: Vec<&PairIds> = pairs.iter().collect();
        for (loss_type, key) in
            [(DpoLossType::Sigmoid, "sigmoid"), (DpoLossType::Hinge, "hinge"), (DpoLossType::Ipo, "ipo")]
        {
            let (logp, counts) = pair_log_probs(&lm, &refs, 0).unwrap();
            let offset = serde_json::from_value::<Vec<f32>>(b["ref_offset"].clone()).unwrap();
            let refp = (logp.detach() + Tensor::new(offset, &candle_core::Device::Cpu).unwrap()).unwrap();
            let args = DpoArgs { loss_type, beta: b["beta"].as_f64().unwrap(), ..DpoArgs::default() };
            let loss = (dpo_loss(&logp, &refp, &counts, &args).unwrap() / pairs.len() as f64).unwrap();
            assert_loss_and_grads(&format!("{name} {key}"), &loss, lm.named_params(), &want[key]);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The PPO loss (clipped surrogate + vf_coef · clipped value loss over the completion tokens, as
/// TRL's `PPOTrainer`) with a value head on the last hidden state, and its gradient with respect
/// to every parameter and the head, equal PyTorch's in float64; some ratios and values clip.
#[test]
#[ignore = "needs a Python with torch and transformers (PROXIMA_PYTHON; .ci/run installs them)"]
fn the_ppo_gradient_equals_pytorchs_in_float64() {
    let (dir, _) = reference();
    for name in ["llama", "qwen3", "gpt2"] {
        let py = Command::new(python()).arg(script()).arg("ppo").arg(dir.join(name)).output().unwrap();
        assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
        let want: Value = serde_json::from_slice(&py.stdout).unwrap();
        let b = &want["batch"];
        let lm = CausalLm::load(&dir.join(name)).unwrap();
        let (prompts, completions) = (rows::<u32>(&b["prompts"]), rows::<u32>(&b["completions"]));
        let (hidden, comp, mask) = completion_hidden(&lm, &prompts, &completions, 0).unwrap();
        let f = |k: &str| b[k].as_f64().unwrap();
        let logp = ppo::log_probs(&lm, &hidden, &comp, f("temperature")).unwrap();
        let d = lm.config().hidden_size;
        let w: Vec<f32> = (0..d).map(|i| (0.05 * ((i + 1) as f64).sin()) as f32).collect();
        let dev = candle_core::Device::Cpu;
        let head = ppo::ValueHead {
            weight: candle_core::Var::from_tensor(&Tensor::from_vec(w, (1, d), &dev).unwrap()).unwrap(),
            bias: candle_core::Var::from_tensor(&Tensor::new(&[f("v_bias") as f32], &dev).unwrap()).unwrap(),
        };
        let values = head.forward(&hidden).unwrap();
        let c = comp.dim(1).unwrap();
        let padded = |k: &str| {
            let rows: Vec<Vec<f32>> = serde_json::from_value(b[k].clone()).unwrap();
            let flat: Vec<f32> =
                rows.iter().flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(0.0, c - r.len()))).collect();
            Tensor::from_vec(flat, (rows.len(), c), &dev).unwrap()
        };
        let old = (logp.detach() + padded("old_offset")).unwrap();
        let old_v = (values.detach() + padded("value_offset")).unwrap();
        let (adv, ret) = (padded("advantages"), padded("returns"));
        let args = ppo::PpoArgs {
            cliprange: f("cliprange"),
            cliprange_value: f("cliprange_value"),
            vf_coef: f("vf_coef"),
            ..ppo::PpoArgs::default()
        };
        let m = ppo::MicroBatch {
            logp: &logp,
            values: &values,
            old_logp: &old,
            old_values: &old_v,
            advantages: &adv,
            returns: &ret,
            mask: &mask,
        };
        let (loss, stats) = ppo::micro_batch_loss(&m, &args).unwrap();
        assert!(stats.clipfrac > 0.0 && stats.vf_clipfrac > 0.0, "{name}: both clips act: {stats:?}");
        let mut params: Vec<(String, candle_core::Var)> = lm.named_params().to_vec();
        params.extend(head.named_params());
        assert_loss_and_grads(name, &loss, &params, &want);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
