//! Issue 6's gradient checks: every language-model loss against central finite differences on
//! a tiny f64 transformer, and gradient accumulation over micro-batches against the whole batch.

use candle_core::{DType, Device, Tensor};
use proxima_lm::grpo::{grpo_loss, Aggregation, GrpoBatch};
use proxima_lm::grpo_step::{grpo_gradients, GrpoConfig, GrpoTensors};
use proxima_lm::model::{LmSpec, TinyLm};
use proxima_lm::ppo::{ppo_lm_gradients, response_values, PpoLmBatch, PpoLmConfig, PpoModels};
use proxima_lm::reward::{scores, sequences};
use proxima_lm::rlhf::{bradley_terry_loss, ppo_token_losses, PpoTokenBatch};
use proxima_lm::sampling::response_log_probs;
use proxima_lm::sft::sft_loss;
use proxima_lm::task::{split, Problem, MAX_ANSWER_LEN, VOCAB};
use rand::{Rng, SeedableRng};

const DEV: Device = Device::Cpu;

fn tiny(seed: u64) -> TinyLm {
    let spec = LmSpec { vocab: VOCAB, context: 16, d_model: 8, n_heads: 2, n_layers: 1 };
    TinyLm::with_dtype(spec, seed, &DEV, DType::F64).unwrap()
}

/// A batch of `n` prompts with random responses (1..=4 tokens, EOS-free noise included):
/// tokens `[n, SEQ_LEN]`, lengths, and the response mask `[n, MAX_ANSWER_LEN]` (f64).
fn random_batch(n: usize, seed: u64) -> (Tensor, Vec<usize>, Tensor, Vec<Problem>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (train, _) = split();
    let probs: Vec<Problem> = (0..n).map(|_| train[rng.random_range(0..train.len())]).collect();
    let resp: Vec<Vec<u32>> = (0..n)
        .map(|_| {
            let len = rng.random_range(1..=MAX_ANSWER_LEN);
            (0..len).map(|_| rng.random_range(0..VOCAB as u32)).collect()
        })
        .collect();
    let items: Vec<(Problem, &[u32])> = probs.iter().zip(&resp).map(|(p, r)| (*p, r.as_slice())).collect();
    let (tokens, lengths) = sequences(&items).unwrap();
    let mask: Vec<f64> =
        lengths.iter().flat_map(|&l| (0..MAX_ANSWER_LEN).map(move |k| if k < l { 1.0 } else { 0.0 })).collect();
    (tokens, lengths, Tensor::from_vec(mask, (n, MAX_ANSWER_LEN), &DEV).unwrap(), probs)
}

fn noise(shape: (usize, usize), scale: f64, seed: u64) -> Tensor {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let v: Vec<f64> = (0..shape.0 * shape.1).map(|_| (rng.random::<f64>() - 0.5) * 2.0 * scale).collect();
    Tensor::from_vec(v, shape, &DEV).unwrap()
}

/// Central finite differences (h = 1e-5) of `loss` against its backward pass, at three
/// coordinates of every parameter tensor of every model in `models`.
fn check_fd(models: &[&TinyLm], loss: &dyn Fn() -> Tensor, what: &str) {
    let l = loss();
    let grads = l.backward().unwrap();
    let h = 1e-5;
    let mut largest = 0f64;
    for m in models {
        for (name, var) in m.named_params() {
            let g: Vec<f64> = match grads.get(var.as_tensor()) {
                Some(g) => g.flatten_all().unwrap().to_vec1().unwrap(),
                None => vec![0.0; var.elem_count()],
            };
            let base: Vec<f64> = var.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
            let n = base.len();
            for k in [0, n / 2, n - 1] {
                let at = |x: f64| {
                    let mut v = base.clone();
                    v[k] = x;
                    var.set(&Tensor::from_vec(v, var.shape(), &DEV).unwrap()).unwrap();
                    loss().to_scalar::<f64>().unwrap()
                };
                let fd = (at(base[k] + h) - at(base[k] - h)) / (2.0 * h);
                var.set(&Tensor::from_vec(base.clone(), var.shape(), &DEV).unwrap()).unwrap();
                largest = largest.max(g[k].abs());
                assert!(
                    (fd - g[k]).abs() <= 1e-6 + 1e-4 * g[k].abs(),
                    "{what}: d/d {name}[{k}]: backward {} vs finite differences {fd}",
                    g[k]
                );
            }
        }
    }
    assert!(largest > 1e-4, "{what}: every checked gradient is ~0 ({largest}); the check would be vacuous");
}

#[test]
fn sft_loss_gradient_matches_finite_differences() {
    let m = tiny(1);
    let (tokens, _, mask, _) = random_batch(6, 1);
    check_fd(&[&m], &|| sft_loss(&m, &tokens, &mask).unwrap(), "SFT cross-entropy");
}

#[test]
fn grpo_loss_gradients_match_finite_differences() {
    let m = tiny(2);
    let reference = tiny(3);
    let (tokens, _, mask, _) = random_batch(8, 2);
    let lp0 = response_log_probs(&m, &tokens).unwrap();
    // π_old away from π (ratios spread over both sides of the clip range), π_ref different.
    let old = (lp0.detach() + noise((8, MAX_ANSWER_LEN), 0.4, 5)).unwrap();
    let ref_lp = response_log_probs(&reference, &tokens).unwrap().detach();
    let adv = Tensor::new(&[1.2f64, -0.4, -0.8, 0.5, 0.9, -1.5, 0.1, 0.0], &DEV).unwrap();
    for agg in [Aggregation::SeqMeanTokenMean, Aggregation::TokenMean, Aggregation::ConstantLength(4)] {
        for (lo, hi, beta) in [(0.2, 0.2, 0.04), (0.2, 0.28, 0.0), (0.1, 0.3, 0.5)] {
            let loss = || {
                let lp = response_log_probs(&m, &tokens).unwrap();
                let b = GrpoBatch { logp: &lp, old_logp: &old, ref_logp: &ref_lp, mask: &mask, advantages: &adv };
                grpo_loss(&b, lo, hi, beta, agg).unwrap().0
            };
            check_fd(&[&m], &loss, &format!("GRPO {agg:?} ε=({lo},{hi}) β={beta}"));
        }
    }
}

#[test]
fn ppo_losses_gradients_match_finite_differences() {
    let policy = tiny(4);
    let critic = tiny(5);
    let (tokens, _, mask, _) = random_batch(8, 3);
    let old = (response_log_probs(&policy, &tokens).unwrap().detach() + noise((8, MAX_ANSWER_LEN), 0.4, 6)).unwrap();
    let old_v = (response_values(&critic, &tokens).unwrap().detach() + noise((8, MAX_ANSWER_LEN), 0.5, 7)).unwrap();
    let adv = noise((8, MAX_ANSWER_LEN), 1.5, 8);
    let ret = noise((8, MAX_ANSWER_LEN), 2.0, 9);
    for vf in [Some(0.2), None] {
        let loss = || {
            let lp = response_log_probs(&policy, &tokens).unwrap();
            let v = response_values(&critic, &tokens).unwrap();
            let l = ppo_token_losses(
                &PpoTokenBatch {
                    logp: &lp,
                    old_logp: &old,
                    values: &v,
                    old_values: &old_v,
                    advantages: &adv,
                    returns: &ret,
                    mask: &mask,
                },
                0.2,
                vf,
            )
            .unwrap();
            (l.policy + l.value).unwrap()
        };
        check_fd(&[&policy, &critic], &loss, &format!("RLHF-PPO policy + value loss, clip_range_vf {vf:?}"));
    }
}

#[test]
fn bradley_terry_gradient_matches_finite_differences() {
    let rm = tiny(6);
    let (tokens, lengths, _, _) = random_batch(10, 4);
    let loss = || {
        let s = scores(&rm, &tokens, &lengths).unwrap();
        bradley_terry_loss(&s.narrow(0, 0, 5).unwrap(), &s.narrow(0, 5, 5).unwrap()).unwrap()
    };
    check_fd(&[&rm], &loss, "Bradley–Terry");
}

fn assert_same_grads(a: &[Option<Vec<f32>>], b: &[Option<Vec<f32>>], what: &str) {
    assert_eq!(a.len(), b.len());
    let mut nonzero = false;
    for (x, y) in a.iter().zip(b) {
        let (x, y) = match (x, y) {
            (Some(x), Some(y)) => (x, y),
            (None, None) => continue, // a parameter the loss does not reach (the value head in GRPO)
            _ => panic!("{what}: a gradient present in one computation only"),
        };
        for (p, q) in x.iter().zip(y) {
            nonzero |= p.abs() > 1e-6;
            assert!((p - q).abs() <= 1e-6 + 1e-5 * p.abs(), "{what}: {p} vs {q}");
        }
    }
    assert!(nonzero, "{what}: all-zero gradient");
}

/// Splitting a batch into micro-batches (uneven ones included) and accumulating weighted
/// gradients gives the gradient of the whole batch, for every GRPO aggregation.
#[test]
fn grpo_micro_batches_accumulate_to_the_whole_batch_gradient() {
    let m = tiny(7);
    let reference = tiny(8);
    let (tokens, _, mask, _) = random_batch(10, 5);
    let lp = response_log_probs(&m, &tokens).unwrap().detach();
    let batch = GrpoTensors {
        tokens: tokens.clone(),
        old_logp: (&lp + noise((10, MAX_ANSWER_LEN), 0.3, 10)).unwrap(),
        ref_logp: response_log_probs(&reference, &tokens).unwrap().detach(),
        mask,
        advantages: Tensor::new(&[1.0f64, -1.0, 0.5, -0.5, 2.0, 0.0, -2.0, 0.3, 0.7, -1.0], &DEV).unwrap(),
    };
    for agg in [Aggregation::SeqMeanTokenMean, Aggregation::TokenMean, Aggregation::ConstantLength(4)] {
        let whole = GrpoConfig { aggregation: agg, micro_batch: None, ..GrpoConfig::default() };
        let (g, loss, kl) = grpo_gradients(&m, &batch, &whole).unwrap();
        for micro in [1, 3, 4] {
            let (gm, lm, klm) =
                grpo_gradients(&m, &batch, &GrpoConfig { micro_batch: Some(micro), ..whole.clone() }).unwrap();
            assert_same_grads(&g, &gm, &format!("GRPO {agg:?} micro-batch {micro}"));
            assert!((loss - lm).abs() < 1e-9 && (kl - klm).abs() < 1e-9, "{loss} {lm} {kl} {klm}");
        }
    }
}

#[test]
fn ppo_micro_batches_accumulate_to_the_whole_minibatch_gradient() {
    let (policy, critic, reference, rm) = (tiny(9), tiny(10), tiny(11), tiny(12));
    let (tokens, _, mask, _) = random_batch(12, 6);
    let b = PpoLmBatch {
        old_logp: (response_log_probs(&policy, &tokens).unwrap().detach() + noise((12, MAX_ANSWER_LEN), 0.3, 11))
            .unwrap(),
        old_values: noise((12, MAX_ANSWER_LEN), 0.5, 12),
        advantages: noise((12, MAX_ANSWER_LEN), 1.0, 13),
        returns: noise((12, MAX_ANSWER_LEN), 1.0, 14),
        tokens,
        mask,
    };
    let models = PpoModels { policy: &policy, critic: &critic, reference: &reference, reward_model: Some(&rm) };
    let rows: Vec<u32> = vec![3, 0, 7, 11, 5, 2, 9];
    let cfg = PpoLmConfig::default();
    let (gp, gc, l) = ppo_lm_gradients(&models, &b, &rows, &cfg).unwrap();
    for micro in [1, 2, 3] {
        let (gp2, gc2, l2) =
            ppo_lm_gradients(&models, &b, &rows, &PpoLmConfig { micro_batch: Some(micro), ..cfg.clone() }).unwrap();
        assert_same_grads(&gp, &gp2, &format!("policy, micro-batch {micro}"));
        assert_same_grads(&gc, &gc2, &format!("critic, micro-batch {micro}"));
        for (x, y) in l.iter().zip(l2) {
            assert!((x - y).abs() < 1e-9, "{l:?}");
        }
    }
    // One gradient slot per policy parameter (the policy and the critic share no trunk).
    assert_eq!(gp.len(), policy.named_params().len());
}

/// A weights file whose network is not the task's is refused before anything is built from its
/// spec (a crafted spec with a huge d_model must not become an allocation abort).
#[test]
fn weights_of_another_shape_are_refused() {
    use proxima_lm::weights::{load_model, save_model};
    let dir = std::env::temp_dir().join(format!("proxima-lm-shape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("tiny.safetensors");
    let small =
        TinyLm::new(LmSpec { vocab: VOCAB, context: 16, d_model: 8, n_heads: 2, n_layers: 1 }, 1, &DEV).unwrap();
    save_model(&f, &small, "sft").unwrap();
    let err = load_model(&f, &["sft"]).err().expect("a different shape must be refused").to_string();
    assert!(err.contains("holds a network of shape"), "{err}");
    let right = TinyLm::new(proxima_lm::weights::default_spec(), 1, &DEV).unwrap();
    save_model(&f, &right, "sft").unwrap();
    let (m, kind) = load_model(&f, &["sft"]).unwrap();
    assert_eq!(kind, "sft");
    assert_eq!(m.num_params(), right.num_params());
    assert!(load_model(&f, &["rm"]).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// DPO's loss (Rafailov et al. 2023, Eq. 7) through the policy's summed response log-probs:
/// its gradient against central finite differences, its value against the formula computed by
/// hand in f64, and log 2 where π_θ = π_ref.
#[test]
fn dpo_loss_gradient_and_value_match_the_formula() {
    use proxima_lm::dpo::{dpo_loss, sequence_log_probs};
    let policy = tiny(11);
    let reference = tiny(12);
    let (tokens, _, mask, _) = random_batch(10, 9); // 5 pairs: rows 0..5 chosen, 5..10 rejected
    let lp_ref = sequence_log_probs(&reference, &tokens, &mask).unwrap().detach();
    for beta in [0.1, 1.0] {
        let loss = || dpo_loss(&sequence_log_probs(&policy, &tokens, &mask).unwrap(), &lp_ref, beta).unwrap();
        check_fd(&[&policy], &loss, &format!("DPO, beta {beta}"));
        // −mean log σ(β·[(π_w − ref_w) − (π_l − ref_l)]), by hand.
        let lp: Vec<f64> = sequence_log_probs(&policy, &tokens, &mask).unwrap().to_vec1().unwrap();
        let r: Vec<f64> = lp_ref.to_vec1().unwrap();
        let want = (0..5)
            .map(|i| {
                let z = beta * ((lp[i] - r[i]) - (lp[5 + i] - r[5 + i]));
                -(1.0 / (1.0 + (-z).exp())).ln()
            })
            .sum::<f64>()
            / 5.0;
        let got = loss().to_scalar::<f64>().unwrap();
        assert!((got - want).abs() < 1e-12, "beta {beta}: {got} vs {want}");
    }
    // π_θ = π_ref: every implicit reward is 0 and the loss is log 2.
    let same = sequence_log_probs(&reference, &tokens, &mask).unwrap();
    let l = dpo_loss(&same, &lp_ref, 0.1).unwrap().to_scalar::<f64>().unwrap();
    assert!((l - 2f64.ln()).abs() < 1e-12, "{l}");
    // Mismatched or odd inputs are errors, not garbage.
    assert!(dpo_loss(&same.narrow(0, 0, 9).unwrap(), &lp_ref.narrow(0, 0, 9).unwrap(), 0.1).is_err());
    assert!(dpo_loss(&same, &lp_ref.narrow(0, 0, 8).unwrap(), 0.1).is_err());
}
