//! GRPO's numerics against `shared/golden/grpo.json` (PyTorch float64); the folder is
//! `$PROXIMA_GOLDEN_DIR` if set, else `shared/golden` beside the checkout.

#[path = "../../proxima/tests/support/golden.rs"]
mod support;

use candle_core::{Device, Tensor, Var};
use proxima_lm::grpo::{group_advantages, grpo_loss, token_log_probs, Aggregation, GrpoBatch};
use serde_json::Value;
use support::{close, f64s, golden, scalar};

/// GRPO against `grpo.json` (PyTorch float64): group advantages (Bessel std + 1e-4) and the
/// Dr. GRPO centred ones, the k3 KL's masked mean, the loss under the three aggregations, and
/// the gradient of the token-mean loss w.r.t. the logits.
#[test]
fn grpo_matches_pytorch() {
    let g = golden("grpo.json");
    let dev = Device::Cpu;
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let [p, gs, t, v] =
            ["n_prompts", "group_size", "max_len", "vocab"].map(|key| c[key].as_u64().unwrap() as usize);
        fn flat(x: &Value) -> Vec<f64> {
            match x {
                Value::Array(a) => a.iter().flat_map(flat).collect(),
                other => vec![other.as_f64().unwrap()],
            }
        }
        let b = p * gs;
        let name = |s: &str| format!("case {k} {s}");
        let rewards = f64s(&c["rewards"]);
        let (adv, _) = group_advantages(&rewards, gs, true).unwrap();
        let (adv_c, _) = group_advantages(&rewards, gs, false).unwrap();
        let e = &c["expected"];
        close(&name("advantages"), &adv, &f64s(&e["advantages"]), 1e-12);
        close(&name("advantages_centred"), &adv_c, &f64s(&e["advantages_centred"]), 1e-12);
        let logits = Var::from_tensor(&Tensor::from_vec(flat(&c["logits"]), (b, t, v), &dev).unwrap()).unwrap();
        let tokens =
            Tensor::from_vec(flat(&c["tokens"]).iter().map(|&x| x as u32).collect::<Vec<_>>(), (b, t), &dev).unwrap();
        let m = |key: &str| Tensor::from_vec(flat(&c[key]), (b, t), &dev).unwrap();
        let (mask, old, refp) = (m("mask"), m("old_log_probs"), m("ref_log_probs"));
        let logp = token_log_probs(logits.as_tensor(), &tokens).unwrap();
        let (el, eh, beta) =
            (c["eps_low"].as_f64().unwrap(), c["eps_high"].as_f64().unwrap(), c["beta"].as_f64().unwrap());
        let adv_t = Tensor::new(adv.clone(), &dev).unwrap();
        let adv_ct = Tensor::new(adv_c.clone(), &dev).unwrap();
        let batch = GrpoBatch { logp: &logp, old_logp: &old, ref_logp: &refp, mask: &mask, advantages: &adv_t };
        let (l_seq, kl) = grpo_loss(&batch, el, eh, beta, Aggregation::SeqMeanTokenMean).unwrap();
        close(&name("k3_mean"), &[scalar(&kl)], &[e["k3_mean"].as_f64().unwrap()], 1e-9);
        close(
            &name("loss_seq_mean_token_mean"),
            &[scalar(&l_seq)],
            &[e["loss_seq_mean_token_mean"].as_f64().unwrap()],
            1e-9,
        );
        let (l_tok, _) = grpo_loss(&batch, el, eh, beta, Aggregation::TokenMean).unwrap();
        close(&name("loss_token_mean"), &[scalar(&l_tok)], &[e["loss_token_mean"].as_f64().unwrap()], 1e-9);
        let dr = GrpoBatch { advantages: &adv_ct, ..batch };
        let (l_dr, _) = grpo_loss(&dr, el, eh, beta, Aggregation::ConstantLength(t)).unwrap();
        close(&name("loss_dr_grpo"), &[scalar(&l_dr)], &[e["loss_dr_grpo"].as_f64().unwrap()], 1e-9);
        let grads = l_tok.backward().unwrap();
        let gl = grads.get(logits.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        close(&name("grad_logits_token_mean"), &gl, &flat(&e["grad_logits_token_mean"]), 1e-9);
    }
}
