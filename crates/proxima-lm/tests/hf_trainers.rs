//! The trainers on a Hugging Face model, end to end without Python, on a tiny random Qwen2-shaped
//! model with a character tokenizer: GRPO learns to write what a reward function asks for, SFT
//! learns the completions it is shown, DPO learns the preferences it is shown, RLHF-PPO learns
//! what a reward function asks for.

use proxima::Result;
use proxima_lm::hf::{
    generate, CausalLm, DpoArgs, DpoLossType, DpoTrainer, GrpoArgs, GrpoTrainer, HfConfig, HfTokenizer, LoraConfig,
    LossType, PpoArgs, PpoTrainer, RewardFunction, SamplingConfig, SftArgs, SftTrainer,
};
use rand::SeedableRng;
use serde_json::{json, Map, Value};
use std::path::Path;

const CHARS: &str = "abcdefghij";

/// A model directory: a 1-layer Qwen2-shaped model over `<pad>`, `<eos>` and ten letters, with a
/// character-level `tokenizer.json` (WordLevel over single characters) and its config.
fn model_dir(dir: &Path) {
    let vocab = 2 + CHARS.len();
    let raw = json!({"model_type": "qwen2", "vocab_size": vocab, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32,
        "tie_word_embeddings": true, "eos_token_id": 1});
    let cfg = HfConfig::from_json(raw).unwrap();
    let params = cfg
        .param_shapes()
        .into_iter()
        .map(|(n, s)| {
            // Seeded: the same model every run.
            let mut rng =
                rand_chacha::ChaCha8Rng::seed_from_u64(n.len() as u64 * 7919 + s.iter().product::<usize>() as u64);
            let v: Vec<f32> = (0..s.iter().product::<usize>())
                .map(|_| rand_distr::Distribution::sample(&rand_distr::Normal::new(0f32, 0.2).unwrap(), &mut rng))
                .collect();
            (
                n,
                candle_core::Var::from_tensor(&candle_core::Tensor::from_vec(v, s, &candle_core::Device::Cpu).unwrap())
                    .unwrap(),
            )
        })
        .collect();
    CausalLm::from_params(cfg, params).unwrap().save(dir).unwrap();
    let mut v = Map::new();
    v.insert("<pad>".into(), json!(0));
    v.insert("<eos>".into(), json!(1));
    for (i, c) in CHARS.chars().enumerate() {
        v.insert(c.to_string(), json!(i + 2));
    }
    let special = |id: u32, s: &str| json!({"id": id, "content": s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true});
    let tok = json!({"version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "<pad>"), special(1, "<eos>")], "normalizer": null,
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated", "invert": false},
        "post_processor": null, "decoder": {"type": "Fuse"},
        "model": {"type": "WordLevel", "vocab": v, "unk_token": "<pad>"}});
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    std::fs::write(dir.join("tokenizer_config.json"), json!({"eos_token": "<eos>", "pad_token": "<pad>"}).to_string())
        .unwrap();
}

/// The fraction of a completion's letters that are the row's `target` letter.
struct Fraction;

impl RewardFunction for Fraction {
    fn name(&self) -> String {
        "fraction".into()
    }

    fn call(
        &mut self,
        _prompts: &[String],
        completions: &[String],
        _ids: &[Vec<u32>],
        columns: &[Map<String, Value>],
    ) -> Result<Vec<Option<f64>>> {
        Ok(completions
            .iter()
            .zip(columns)
            .map(|(c, row)| {
                let target = row["target"].as_str().unwrap().chars().next().unwrap();
                Some(c.chars().filter(|&x| x == target).count() as f64 / c.chars().count().max(1) as f64)
            })
            .collect())
    }
}

/// A reward function named `.0` returning `.1(number of completions)`.
struct Fixed(&'static str, fn(usize) -> Vec<Option<f64>>);

impl RewardFunction for Fixed {
    fn name(&self) -> String {
        self.0.into()
    }

    fn call(
        &mut self,
        _: &[String],
        c: &[String],
        _: &[Vec<u32>],
        _: &[Map<String, Value>],
    ) -> Result<Vec<Option<f64>>> {
        Ok((self.1)(c.len()))
    }
}

fn trainer(dir: &Path, args: GrpoArgs) -> GrpoTrainer {
    let dataset: Vec<Map<String, Value>> =
        ["abc", "hij", "dd"].iter().map(|p| json!({"prompt": p, "target": "e"}).as_object().unwrap().clone()).collect();
    let model = CausalLm::load(dir).unwrap();
    let tok = HfTokenizer::load(dir).unwrap();
    GrpoTrainer::new(model, tok, vec![Box::new(Fraction)], args, dataset).unwrap()
}

/// With each loss type the reward rises from chance (≈ 1/12 of the letters) to most letters.
#[test]
fn grpo_learns_what_the_reward_function_asks_for() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-grpo-{}", std::process::id()));
    model_dir(&dir);
    for loss_type in [LossType::Dapo, LossType::Grpo] {
        let args = GrpoArgs {
            learning_rate: 3e-2,
            max_steps: 40,
            per_device_train_batch_size: 8,
            num_generations: 4,
            max_completion_length: 6,
            loss_type,
            seed: 1,
            ..GrpoArgs::default()
        };
        let mut tr = trainer(&dir, args);
        tr.train().unwrap();
        let reward = |i: usize| tr.log_history[i]["reward"].as_f64().unwrap();
        let (first, last) = ((0..5).map(reward).sum::<f64>() / 5.0, (35..40).map(reward).sum::<f64>() / 5.0);
        assert!(first < 0.3 && last > 0.6, "{loss_type:?}: reward {first:.3} → {last:.3}");
        assert_eq!(tr.global_step, 40);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad datasets and reward functions are clear errors.
#[test]
fn bad_inputs_are_errors() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-grpo-bad-{}", std::process::id()));
    model_dir(&dir);
    let new = |rows: Vec<Value>| {
        let rows = rows.into_iter().map(|r| r.as_object().unwrap().clone()).collect();
        GrpoTrainer::new(
            CausalLm::load(&dir).unwrap(),
            HfTokenizer::load(&dir).unwrap(),
            vec![Box::new(Fraction)],
            GrpoArgs { num_generations: 4, max_completion_length: 4, ..GrpoArgs::default() },
            rows,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    assert!(new(vec![]).contains("dataset is empty"));
    assert!(new(vec![json!({"text": "abc"})]).contains("row 0 has no `prompt` column of text or of messages"));
    let chat = new(vec![json!({"prompt": [{"role": "user", "content": "abc"}]})]);
    assert!(chat.contains("no chat_template"), "{chat}");
    let long = new(vec![json!({"prompt": "abc"}), json!({"prompt": "abcdefghij".repeat(3)})]);
    assert!(
        long.contains("dataset row 1: a prompt of 30 tokens and 4 new ones exceed the model's 32 positions"),
        "{long}"
    );
    for malformed in [json!([]), json!([{"foo": "bar"}]), json!([{"role": "user", "content": 3}])] {
        let e = new(vec![json!({"prompt": "abc"}), json!({"prompt": malformed})]);
        assert!(e.contains("dataset row 1: a conversation must be a non-empty list"), "{e}");
    }
    // A tokenizer with a token past the model's 12-row vocabulary.
    let other = dir.join("other-tokenizer");
    std::fs::create_dir_all(&other).unwrap();
    let mut tok: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer.json")).unwrap()).unwrap();
    tok["added_tokens"].as_array_mut().unwrap().push(json!({"id": 12, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}));
    std::fs::write(other.join("tokenizer.json"), tok.to_string()).unwrap();
    let e = GrpoTrainer::new(
        CausalLm::load(&dir).unwrap(),
        HfTokenizer::load(&other).unwrap(),
        vec![Box::new(Fraction)],
        GrpoArgs { num_generations: 4, max_completion_length: 4, ..GrpoArgs::default() },
        vec![json!({"prompt": "abc"}).as_object().unwrap().clone()],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("the tokenizer (13 tokens") && e.contains("does not match the model's vocabulary of 12"), "{e}");
    let first_step_error = |reward: Fixed| {
        let rows = vec![json!({"prompt": "abc"}).as_object().unwrap().clone()];
        let args = GrpoArgs {
            num_generations: 4,
            per_device_train_batch_size: 4,
            max_completion_length: 4,
            ..GrpoArgs::default()
        };
        let (model, tok) = (CausalLm::load(&dir).unwrap(), HfTokenizer::load(&dir).unwrap());
        let mut tr = GrpoTrainer::new(model, tok, vec![Box::new(reward)], args, rows).unwrap();
        tr.step().unwrap_err().to_string()
    };
    let e = first_step_error(Fixed("short", |_| vec![Some(1.0)]));
    assert!(e.contains("reward function `short` returned 1 rewards for 4 completions"), "{e}");
    let e = first_step_error(Fixed("infinite", |n| {
        (0..n).map(|i| Some(if i == 2 { f64::INFINITY } else { 1.0 })).collect()
    }));
    assert!(e.contains("reward function `infinite` returned inf for completion 2: rewards must be finite"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// SFT on prompt–completion rows: the loss falls and greedy decoding writes each completion and
/// stops (the EOS is learned too); rows of `text` train as well; bad rows are errors.
#[test]
fn sft_learns_the_completions_it_is_shown() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-sft-{}", std::process::id()));
    model_dir(&dir);
    let rows: Vec<Map<String, Value>> = [("ab", "cde"), ("ij", "jji"), ("ff", "a")]
        .iter()
        .map(|(p, c)| json!({"prompt": p, "completion": c}).as_object().unwrap().clone())
        .collect();
    let tok = || HfTokenizer::load(&dir).unwrap();
    let args =
        SftArgs { learning_rate: 1e-2, max_steps: 150, per_device_train_batch_size: 3, seed: 3, ..SftArgs::default() };
    let mut tr = SftTrainer::new(CausalLm::load(&dir).unwrap(), tok(), args.clone(), &rows).unwrap();
    tr.train().unwrap();
    let loss = |i: usize| tr.log_history[i]["loss"].as_f64().unwrap();
    assert!(loss(0) > 1.5 && loss(149) < 0.05, "loss {} → {}", loss(0), loss(149));
    let t = tok();
    let prompts: Vec<Vec<u32>> = ["ab", "ij", "ff"].iter().map(|p| t.encode(p, true).unwrap()).collect();
    let greedy =
        SamplingConfig { max_new_tokens: 6, do_sample: false, stop_token_ids: vec![1], ..SamplingConfig::default() };
    let out = generate(&tr.model, &prompts, &greedy, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap();
    let texts: Vec<String> = out.tokens.iter().map(|c| t.decode(c, true).unwrap()).collect();
    assert_eq!(texts, ["cde", "jji", "a"]);
    assert!(out.truncated.iter().all(|&x| !x), "each completion ends with EOS");
    let text_rows: Vec<Map<String, Value>> = vec![json!({"text": "abcabc"}).as_object().unwrap().clone()];
    let mut lm =
        SftTrainer::new(CausalLm::load(&dir).unwrap(), tok(), SftArgs { max_steps: 2, ..args.clone() }, &text_rows)
            .unwrap();
    lm.train().unwrap();
    let bad = |rows: Vec<Value>| {
        let rows: Vec<Map<String, Value>> = rows.into_iter().map(|r| r.as_object().unwrap().clone()).collect();
        SftTrainer::new(CausalLm::load(&dir).unwrap(), tok(), args.clone(), &rows)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(bad(vec![json!({"prompt": "ab"})]).contains("SFT needs `prompt` and `completion` columns"));
    assert!(bad(vec![]).contains("empty"));
    assert!(bad(vec![json!({"text": "abcdefghijabcdefghijabcdefghijabcdefghij"})])
        .contains("longer than the model's 32 positions"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// LoRA adapters: only they train (the base weights stay the file's, bit for bit), the loss falls,
/// generation and the loss read the adapted model, and the saved model (adapters merged) gives
/// the adapted model's logits.
#[test]
fn with_lora_only_the_adapters_move() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-lora-{}", std::process::id()));
    model_dir(&dir);
    let lora = LoraConfig { r: 4, lora_alpha: 16.0, target_modules: vec!["all-linear".into()] };
    let rows: Vec<Map<String, Value>> = [("ab", "eee"), ("ij", "eee"), ("ff", "eee")]
        .iter()
        .map(|(p, c)| json!({"prompt": p, "completion": c}).as_object().unwrap().clone())
        .collect();
    let args = SftArgs {
        learning_rate: 3e-2,
        max_steps: 60,
        per_device_train_batch_size: 3,
        seed: 3,
        peft_config: Some(lora.clone()),
        ..SftArgs::default()
    };
    let mut sft =
        SftTrainer::new(CausalLm::load(&dir).unwrap(), HfTokenizer::load(&dir).unwrap(), args, &rows).unwrap();
    sft.train().unwrap();
    let loss = |i: usize| sft.log_history[i]["loss"].as_f64().unwrap();
    assert!(loss(0) > 2.5 && loss(59) < 1.7, "loss {} → {}", loss(0), loss(59));
    let args = GrpoArgs {
        learning_rate: 3e-2,
        max_steps: 5,
        per_device_train_batch_size: 8,
        num_generations: 4,
        max_completion_length: 6,
        seed: 1,
        peft_config: Some(lora),
        ..GrpoArgs::default()
    };
    let mut tr = trainer(&dir, args);
    let n_trainable: usize = tr.model.trainable_params().iter().map(|(_, v)| v.elem_count()).sum();
    let n_all: usize = tr.model.named_params().iter().map(|(_, v)| v.elem_count()).sum();
    assert!(n_trainable * 3 < n_all, "{n_trainable} adapter values of {n_all}");
    tr.train().unwrap();
    let base = CausalLm::load(&dir).unwrap();
    let values = |m: &CausalLm| -> Vec<Vec<f32>> {
        m.named_params().iter().map(|(_, v)| v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()).collect()
    };
    assert_eq!(values(&tr.model), values(&base), "the base weights did not move");
    let out = dir.join("merged");
    tr.save_model(&out).unwrap();
    let merged = CausalLm::load(&out).unwrap();
    let (tok, pos, mask) = (vec![vec![2u32, 3, 4, 5]], vec![vec![0u32, 1, 2, 3]], vec![vec![1u8; 4]]);
    let a = tr.model.forward(&tok, &pos, &mask, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = merged.forward(&tok, &pos, &mask, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let c = base.forward(&tok, &pos, &mask, None).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let worst = a.iter().zip(&b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(worst < 1e-4, "merged logits off by {worst}");
    assert!(a.iter().zip(&c).any(|(x, y)| (x - y).abs() > 0.1), "the adapters changed the model");
    let e = GrpoTrainer::new(
        CausalLm::load(&dir).unwrap(),
        HfTokenizer::load(&dir).unwrap(),
        vec![Box::new(Fraction)],
        GrpoArgs {
            num_generations: 4,
            max_completion_length: 4,
            peft_config: Some(LoraConfig { target_modules: vec!["c_attn".into()], ..LoraConfig::default() }),
            ..GrpoArgs::default()
        },
        vec![json!({"prompt": "abc"}).as_object().unwrap().clone()],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("name no linear layer of this qwen2 model"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// DPO on preference pairs (prefer "eee" to "ddd"): with each loss type the implicit-reward
/// accuracy reaches 1 and the margin grows, and on a prompt it never saw the trained model
/// prefers "eee" by more than the reference does; with LoRA too. Bad rows are errors.
#[test]
fn dpo_learns_the_preferences_it_is_shown() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-dpo-{}", std::process::id()));
    model_dir(&dir);
    let rows: Vec<Map<String, Value>> = ["ab", "ij", "ff", "gh"]
        .iter()
        .map(|p| json!({"prompt": p, "chosen": "eee", "rejected": "ddd"}).as_object().unwrap().clone())
        .collect();
    let tok = HfTokenizer::load(&dir).unwrap();
    let preference = |m: &CausalLm| {
        let pair = proxima_lm::hf::dpo::tokenize_pair(
            &tok,
            &json!({"prompt": "cc", "chosen": "eee", "rejected": "ddd"}).as_object().unwrap().clone(),
            None,
        )
        .unwrap();
        let (lp, _) = proxima_lm::hf::dpo::pair_log_probs(m, &[&pair], 0).unwrap();
        let v = lp.to_vec1::<f32>().unwrap();
        v[0] - v[1]
    };
    let before = preference(&CausalLm::load(&dir).unwrap());
    let lora = LoraConfig { r: 4, lora_alpha: 16.0, target_modules: vec!["all-linear".into()] };
    for (loss_type, peft) in [
        (DpoLossType::Sigmoid, None),
        (DpoLossType::Hinge, None),
        (DpoLossType::Ipo, None),
        (DpoLossType::Sigmoid, Some(lora)),
    ] {
        let args = DpoArgs {
            learning_rate: 1e-2,
            max_steps: 30,
            per_device_train_batch_size: 2,
            gradient_accumulation_steps: 2,
            loss_type,
            peft_config: peft.clone(),
            seed: 5,
            ..DpoArgs::default()
        };
        let mut tr = DpoTrainer::new(CausalLm::load(&dir).unwrap(), &tok, args, &rows).unwrap();
        tr.train().unwrap();
        let at = |i: usize, k: &str| tr.log_history[i][k].as_f64().unwrap();
        assert_eq!(at(0, "rewards/margins"), 0.0, "π_θ = π_ref at the first step");
        assert_eq!(at(29, "rewards/accuracies"), 1.0, "{loss_type:?}");
        assert!(at(29, "rewards/margins") > 0.3, "{loss_type:?}: margin {}", at(29, "rewards/margins"));
        assert!(at(29, "loss") < at(0, "loss"), "{loss_type:?}: loss {} → {}", at(0, "loss"), at(29, "loss"));
        let after = preference(&tr.model);
        assert!(
            after > before + 2.0,
            "{loss_type:?} (LoRA: {}): held-out preference {before} → {after}",
            peft.is_some()
        );
    }
    let bad = |rows: Vec<Value>, args: DpoArgs| {
        let rows: Vec<Map<String, Value>> = rows.into_iter().map(|r| r.as_object().unwrap().clone()).collect();
        DpoTrainer::new(CausalLm::load(&dir).unwrap(), &tok, args, &rows)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = bad(vec![json!({"prompt": "ab", "chosen": "e"})], DpoArgs::default());
    assert!(e.contains("row 0: DPO needs `prompt`, `chosen` and `rejected` columns"), "{e}");
    let e = bad(
        vec![json!({"prompt": "abcdef", "chosen": "e", "rejected": "d"})],
        DpoArgs { max_length: Some(4), ..DpoArgs::default() },
    );
    assert!(e.contains("row 0: the prompt's 6 tokens leave no answer token within max_length 4"), "{e}");
    let e =
        bad(vec![json!({"prompt": "ab", "chosen": "e", "rejected": "d"})], DpoArgs { beta: 0.0, ..DpoArgs::default() });
    assert!(e.contains("beta must be positive"), "{e}");
    let long = "abcdefghij".repeat(4);
    let e = bad(vec![json!({"prompt": long, "chosen": "e", "rejected": "d"})], DpoArgs::default());
    assert!(e.contains("longer than the model's 32 positions"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A GRPO run stopped after a checkpoint and continued in a new trainer ends bit for bit as the
/// uninterrupted run (weights, logs), with LoRA and without; a changed model directory is refused.
#[test]
fn grpo_resumes_exactly_from_a_checkpoint() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-grpo-resume-{}", std::process::id()));
    model_dir(&dir);
    let lora = LoraConfig { r: 4, lora_alpha: 16.0, target_modules: vec!["all-linear".into()] };
    for peft in [None, Some(lora)] {
        let args = GrpoArgs {
            learning_rate: 3e-2,
            max_steps: 6,
            per_device_train_batch_size: 8,
            num_generations: 4,
            max_completion_length: 6,
            beta: 0.04,
            seed: 1,
            peft_config: peft.clone(),
            ..GrpoArgs::default()
        };
        let inputs = proxima_lm::hf::resume::initial_fingerprint(&CausalLm::load(&dir).unwrap()).unwrap();
        let mut whole = trainer(&dir, args.clone());
        whole.train().unwrap();
        let run = dir.join("run");
        let mut first = trainer(&dir, args.clone());
        for _ in 0..3 {
            first.step().unwrap();
        }
        first.save_checkpoint(&run, &inputs).unwrap();
        let ck = proxima_lm::resume::latest_checkpoint(&run).unwrap().unwrap();
        let mut second = trainer(&dir, args.clone());
        second.restore_checkpoint(&ck, &inputs).unwrap();
        assert_eq!(second.global_step, 3);
        second.train().unwrap();
        let values = |m: &CausalLm| -> Vec<Vec<f32>> {
            m.trainable_params().iter().map(|(_, v)| v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()).collect()
        };
        assert_eq!(values(&second.model), values(&whole.model), "LoRA: {}", peft.is_some());
        assert_eq!(second.log_history, whole.log_history);
        let e = trainer(&dir, args).restore_checkpoint(&ck, "0123456789abcdef").unwrap_err().to_string();
        assert!(e.contains("the model directory, the dataset or the settings this run started from differ now"), "{e}");
        std::fs::remove_dir_all(&run).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// RLHF-PPO with a value head: the score rises from chance to most letters and the KL to the
/// reference grows from 0; with LoRA only the adapters and the value head move (the base weights
/// stay the file's, bit for bit).
#[test]
fn ppo_learns_what_the_reward_function_asks_for() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-ppo-{}", std::process::id()));
    model_dir(&dir);
    let lora = LoraConfig { r: 4, lora_alpha: 16.0, target_modules: vec!["all-linear".into()] };
    for (peft, lr) in [(None, 1e-2), (Some(lora), 3e-2)] {
        let args = PpoArgs {
            learning_rate: lr,
            max_steps: 40,
            per_device_train_batch_size: 4,
            gradient_accumulation_steps: 2,
            num_mini_batches: 2,
            response_length: 6,
            temperature: 1.0,
            seed: 1,
            peft_config: peft.clone(),
            ..PpoArgs::default()
        };
        let dataset: Vec<Map<String, Value>> = ["abc", "hij", "dd"]
            .iter()
            .map(|p| json!({"prompt": p, "target": "e"}).as_object().unwrap().clone())
            .collect();
        let (model, tok) = (CausalLm::load(&dir).unwrap(), HfTokenizer::load(&dir).unwrap());
        let mut tr = PpoTrainer::new(model, tok, vec![Box::new(Fraction)], args, dataset).unwrap();
        tr.train().unwrap();
        let at = |i: usize, k: &str| tr.log_history[i][k].as_f64().unwrap();
        let mean = |k: &str, r: std::ops::Range<usize>| r.clone().map(|i| at(i, k)).sum::<f64>() / r.len() as f64;
        let (first, last) = (mean("objective/scores", 0..5), mean("objective/scores", 35..40));
        assert_eq!(at(0, "objective/kl"), 0.0, "π_θ = π_ref at the first rollout");
        assert_eq!(tr.global_step, 40);
        let head = tr.value_head.weight.as_tensor().abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(head > 0.0, "the value head trained");
        if peft.is_some() {
            // LoRA on this 32-wide model learns slowly (as SFT's LoRA test shows): check what moves.
            let values = |m: &CausalLm| -> Vec<Vec<f32>> {
                m.named_params().iter().map(|(_, v)| v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()).collect()
            };
            assert_eq!(values(&tr.model), values(&CausalLm::load(&dir).unwrap()), "the base weights did not move");
            assert!(mean("objective/kl", 35..40) > 0.0, "the adapters moved the policy");
        } else {
            assert!(first < 0.3 && last > 0.6, "score {first:.3} → {last:.3}");
            assert!(mean("objective/kl", 35..40) > 0.1, "the policy moved away from the reference");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Conversational SFT rows through the chat template: a `messages` conversation (the loss on all
/// its tokens) and a prompt/completion pair of messages (the loss after their common prefix);
/// greedy decoding from the rendered prompt then writes each answer and its end-of-turn EOS.
#[test]
fn sft_learns_conversations_through_the_chat_template() {
    let dir = std::env::temp_dir().join(format!("proxima-hf-sft-chat-{}", std::process::id()));
    model_dir(&dir);
    let template =
        "{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}<eos>{% endif %}{% endfor %}";
    std::fs::write(
        dir.join("tokenizer_config.json"),
        json!({"eos_token": "<eos>", "pad_token": "<pad>", "chat_template": template}).to_string(),
    )
    .unwrap();
    let msg = |role: &str, c: &str| json!({"role": role, "content": c});
    let rows: Vec<Map<String, Value>> = vec![
        json!({"messages": [msg("user", "ab"), msg("assistant", "cde")]}),
        json!({"prompt": [msg("user", "ij")], "completion": [msg("assistant", "jji")]}),
    ]
    .into_iter()
    .map(|r| r.as_object().unwrap().clone())
    .collect();
    let args =
        SftArgs { learning_rate: 1e-2, max_steps: 150, per_device_train_batch_size: 2, seed: 3, ..SftArgs::default() };
    let tok = HfTokenizer::load(&dir).unwrap();
    let mut tr = SftTrainer::new(CausalLm::load(&dir).unwrap(), HfTokenizer::load(&dir).unwrap(), args, &rows).unwrap();
    tr.train().unwrap();
    let prompts: Vec<Vec<u32>> = ["ab", "ij"]
        .iter()
        .map(|p| tok.encode(&tok.apply_chat_template(&json!([msg("user", p)]), true).unwrap(), false).unwrap())
        .collect();
    let greedy =
        SamplingConfig { max_new_tokens: 6, do_sample: false, stop_token_ids: vec![1], ..SamplingConfig::default() };
    let out = generate(&tr.model, &prompts, &greedy, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0)).unwrap();
    let texts: Vec<String> = out.tokens.iter().map(|c| tok.decode(c, true).unwrap()).collect();
    assert_eq!(texts, ["cde", "jji"]);
    assert!(out.truncated.iter().all(|&x| !x), "each answer ends with the template's EOS");
    std::fs::remove_dir_all(&dir).unwrap();
}
