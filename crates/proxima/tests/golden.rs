//! Numerics against the reference vectors in `../shared/golden/` (PyTorch float64 and NumPy):
//! GAE (`gae.json`), the PPO-Clip loss with a Categorical policy (`ppo_loss.json`), with invalid
//! actions masked as sb3-contrib masks them (`masked.json`) and with a diagonal Gaussian
//! (`gaussian.json`), values and gradients.
//!
//! The folder is `$PROXIMA_GOLDEN_DIR` if set, else `shared/golden` beside the checkout.

use candle_core::{DType, Device, Tensor, Var};
use proxima::config::Objective;
use proxima::loss::{kl_and_clip_fraction, ppo_loss, PpoBatch, PpoCoefs};
use proxima::policy::distributions::{
    categorical_kl, categorical_log_prob_entropy, gaussian_log_prob_entropy, mask_logits, mask_logits_in_place,
};
use proxima::policy::fused::{cols_len, head_loss, head_loss_f32, scratch_len, HeadBatch, HeadGrads, HeadLoss};
use proxima::policy::ActionKind;
use proxima::rollout::{gae, normalize_advantages_f64, GaeInput};

#[path = "support/golden.rs"]
mod support;
use support::{close, f64s, flat, golden, scalar};

/// L^CLIP's coefficients of a `ppo_loss.json` case (its ε, value clip, c₁, c₂).
fn case_coefs(c: &serde_json::Value) -> PpoCoefs {
    PpoCoefs {
        clip_range: c["clip_coef"].as_f64().unwrap(),
        clip_range_vf: c["vf_clip"].as_f64(),
        vf_coef: c["vf_coef"].as_f64().unwrap(),
        ent_coef: c["ent_coef"].as_f64().unwrap(),
        objective: Objective::Clip,
        kl_coef: 1.0,
    }
}

/// L^CLIP's coefficients of a `gaussian.json` case (no value loss).
fn gaussian_coefs(c: &serde_json::Value) -> PpoCoefs {
    PpoCoefs {
        clip_range: c["clip_coef"].as_f64().unwrap(),
        clip_range_vf: None,
        vf_coef: 0.0,
        ent_coef: c["ent_coef"].as_f64().unwrap(),
        objective: Objective::Clip,
        kl_coef: 1.0,
    }
}

#[test]
fn gae_matches_reference() {
    let g = golden("gae.json");
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let n = c["N"].as_u64().unwrap() as usize;
        let f32s = |key: &str| flat(&c[key]).iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let bools = |key: &str| flat(&c[key]).iter().map(|&x| x != 0.0).collect::<Vec<bool>>();
        let (adv, ret) = gae(
            &GaeInput {
                rewards: &f32s("rewards"),
                values: &f32s("values"),
                last_values: &f32s("last_values"),
                final_obs_values: &f32s("final_obs_values"),
                terminated: &bools("terminated"),
                truncated: &bools("truncated"),
                n_envs: n,
            },
            c["gamma"].as_f64().unwrap(),
            c["gae_lambda"].as_f64().unwrap(),
        )
        .unwrap();
        // Inputs are exact in f32 (4 decimals); the f32 outputs carry ~1e-7 relative rounding.
        let tol = |w: &[f64]| 1e-6f64.max(w.iter().fold(0f64, |m, x| m.max(x.abs())) * 2e-7);
        let (wa, wr) = (flat(&c["advantages"]), flat(&c["returns"]));
        close(&format!("case {k} advantages"), &adv.iter().map(|&x| x as f64).collect::<Vec<_>>(), &wa, tol(&wa));
        close(&format!("case {k} returns"), &ret.iter().map(|&x| x as f64).collect::<Vec<_>>(), &wr, tol(&wr));
    }
}

#[test]
fn ppo_clip_loss_and_gradients_match_pytorch() {
    let g = golden("ppo_loss.json");
    let dev = Device::Cpu;
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let b = c["B"].as_u64().unwrap() as usize;
        let a = c["n_actions"].as_u64().unwrap() as usize;
        let logits = Var::from_tensor(&Tensor::from_vec(flat(&c["logits"]), (b, a), &dev).unwrap()).unwrap();
        let values = Var::from_tensor(&Tensor::new(f64s(&c["values"]), &dev).unwrap()).unwrap();
        let actions = Tensor::new(f64s(&c["actions"]).iter().map(|&x| x as u32).collect::<Vec<_>>(), &dev).unwrap();
        let mut adv = f64s(&c["advantages_raw"]);
        normalize_advantages_f64(&mut adv);
        let t = |v: Vec<f64>| Tensor::new(v, &dev).unwrap();
        let (lp, ent) = categorical_log_prob_entropy(logits.as_tensor(), &actions).unwrap();
        let coefs = case_coefs(c);
        let out = ppo_loss(
            &PpoBatch {
                log_prob: &lp,
                entropy: Some(&ent),
                values: values.as_tensor(),
                old_log_prob: &t(f64s(&c["old_log_probs"])),
                advantages: &t(adv),
                old_values: &t(f64s(&c["old_values"])),
                returns: &t(f64s(&c["returns"])),
                kl: None,
                mask: None,
            },
            &coefs,
        )
        .unwrap();
        let e = &c["expected"];
        let name = |s: &str| format!("case {k} {s}");
        for (key, got) in [
            ("policy_loss", &out.policy_loss),
            ("value_loss", &out.value_loss),
            ("entropy", &out.entropy),
            ("loss", &out.loss),
        ] {
            close(&name(key), &[scalar(got)], &[e[key].as_f64().unwrap()], 1e-9);
        }
        let log_ratio: Vec<f32> = out.log_ratio.to_dtype(DType::F32).unwrap().to_vec1().unwrap();
        let (kl, cf) = kl_and_clip_fraction(&log_ratio, coefs.clip_range);
        close(&name("approx_kl"), &[kl], &[e["approx_kl"].as_f64().unwrap()], 1e-6);
        close(&name("clip_fraction"), &[cf], &[e["clip_fraction"].as_f64().unwrap()], 1e-12);
        let grads = out.loss.backward().unwrap();
        let gl = grads.get(logits.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        let gv = grads.get(values.as_tensor()).unwrap().to_vec1::<f64>().unwrap();
        close(&name("grad_logits"), &gl, &flat(&e["grad_logits"]), 1e-9);
        close(&name("grad_values"), &gv, &f64s(&e["grad_values"]), 1e-9);
    }
}

#[test]
fn gaussian_policy_loss_and_gradients_match_pytorch() {
    let g = golden("gaussian.json");
    let dev = Device::Cpu;
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let b = c["B"].as_u64().unwrap() as usize;
        let d = c["action_dim"].as_u64().unwrap() as usize;
        let mean = Var::from_tensor(&Tensor::from_vec(flat(&c["mean"]), (b, d), &dev).unwrap()).unwrap();
        let log_std = Var::from_tensor(&Tensor::new(f64s(&c["log_std"]), &dev).unwrap()).unwrap();
        let actions = Tensor::from_vec(flat(&c["actions"]), (b, d), &dev).unwrap();
        let (lp, ent) = gaussian_log_prob_entropy(mean.as_tensor(), log_std.as_tensor(), &actions).unwrap();
        let e = &c["expected"];
        let name = |s: &str| format!("case {k} {s}");
        close(&name("log_probs"), &lp.to_vec1::<f64>().unwrap(), &f64s(&e["log_probs"]), 1e-9);
        close(&name("entropy"), &ent.to_vec1::<f64>().unwrap(), &f64s(&e["entropy"]), 1e-9);
        let mut adv = f64s(&c["advantages_raw"]);
        normalize_advantages_f64(&mut adv);
        let zeros = Tensor::zeros(b, DType::F64, &dev).unwrap();
        let out = ppo_loss(
            &PpoBatch {
                log_prob: &lp,
                entropy: Some(&ent),
                values: &zeros,
                old_log_prob: &Tensor::new(f64s(&c["old_log_probs"]), &dev).unwrap(),
                advantages: &Tensor::new(adv, &dev).unwrap(),
                old_values: &zeros,
                returns: &zeros,
                kl: None,
                mask: None,
            },
            &gaussian_coefs(c),
        )
        .unwrap();
        close(&name("policy_loss"), &[scalar(&out.policy_loss)], &[e["policy_loss"].as_f64().unwrap()], 1e-9);
        close(&name("loss"), &[scalar(&out.loss)], &[e["loss"].as_f64().unwrap()], 1e-9);
        let grads = out.loss.backward().unwrap();
        let gm = grads.get(mean.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        let gs = grads.get(log_std.as_tensor()).unwrap().to_vec1::<f64>().unwrap();
        close(&name("grad_mean"), &gm, &flat(&e["grad_mean"]), 1e-9);
        close(&name("grad_log_std"), &gs, &f64s(&e["grad_log_std"]), 1e-9);
    }
}

/// The loss's gradient w.r.t. the network's parameters against central finite differences
/// (float64 network, so the check is tight), for every objective: L^CLIP, L^KLPEN (with the
/// analytic KL to fixed old logits) and the plain surrogate.
#[test]
fn ppo_loss_gradient_matches_finite_differences() {
    for objective in [Objective::Clip, Objective::FixedKl, Objective::None] {
        loss_gradient_matches_finite_differences(objective);
    }
}

fn loss_gradient_matches_finite_differences(objective: Objective) {
    let dev = Device::Cpu;
    let (b, a) = (6usize, 3usize);
    let mk = |v: Vec<f64>, s: (usize, usize)| Var::from_tensor(&Tensor::from_vec(v, s, &dev).unwrap()).unwrap();
    let w = mk((0..b * a).map(|i| ((i * 37 % 11) as f64 - 5.0) / 7.0).collect(), (b, a));
    let actions = Tensor::new(&[0u32, 2, 1, 1, 0, 2], &dev).unwrap();
    let old_lp = Tensor::new(&[-1.2f64, -0.9, -1.5, -1.0, -1.1, -0.7], &dev).unwrap();
    let adv = Tensor::new(&[0.5f64, -1.0, 2.0, 0.1, -0.3, 1.2], &dev).unwrap();
    let v = Var::new(&[0.2f64, -0.1, 0.4, 0.0, 0.3, -0.5], &dev).unwrap();
    let old_v = Tensor::new(&[0.05f64, 0.0, 0.5, 0.1, 0.15, -0.2], &dev).unwrap();
    let ret = Tensor::new(&[1.0f64, -0.5, 0.2, 0.3, 0.9, 0.0], &dev).unwrap();
    let coefs =
        PpoCoefs { clip_range: 0.2, clip_range_vf: Some(0.2), vf_coef: 0.5, ent_coef: 0.01, objective, kl_coef: 0.7 };
    let old_logits =
        Tensor::from_vec((0..b * a).map(|i| ((i * 13 % 7) as f64 - 3.0) / 5.0).collect::<Vec<_>>(), (b, a), &dev)
            .unwrap();
    let loss_of = |logits: &Tensor, values: &Tensor| {
        let (lp, ent) = categorical_log_prob_entropy(logits, &actions).unwrap();
        let kl = categorical_kl(&old_logits, logits).unwrap();
        ppo_loss(
            &PpoBatch {
                log_prob: &lp,
                entropy: Some(&ent),
                values,
                old_log_prob: &old_lp,
                advantages: &adv,
                old_values: &old_v,
                returns: &ret,
                kl: Some(&kl),
                mask: None,
            },
            &coefs,
        )
        .unwrap()
        .loss
    };
    let grads = loss_of(w.as_tensor(), v.as_tensor()).backward().unwrap();
    let gw = grads.get(w.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let gv = grads.get(v.as_tensor()).unwrap().to_vec1::<f64>().unwrap();
    let base_w = w.as_tensor().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let base_v = v.as_tensor().to_vec1::<f64>().unwrap();
    let h = 1e-6;
    for i in 0..base_w.len() {
        let f = |d: f64| {
            let mut x = base_w.clone();
            x[i] += d;
            scalar(&loss_of(&Tensor::from_vec(x, (b, a), &dev).unwrap(), v.as_tensor()))
        };
        let fd = (f(h) - f(-h)) / (2.0 * h);
        assert!((fd - gw[i]).abs() < 1e-6, "{objective:?} d/dlogit[{i}]: autograd {} vs finite difference {fd}", gw[i]);
    }
    for i in 0..base_v.len() {
        let f = |d: f64| {
            let mut x = base_v.clone();
            x[i] += d;
            scalar(&loss_of(w.as_tensor(), &Tensor::new(x, &dev).unwrap()))
        };
        let fd = (f(h) - f(-h)) / (2.0 * h);
        assert!((fd - gv[i]).abs() < 1e-6, "d/dvalue[{i}]: autograd {} vs finite difference {fd}", gv[i]);
    }
}

/// The fused backend's closed-form loss ([`head_loss`]) on `ppo_loss.json`, in float64 (the
/// row-by-row code, monomorphised) to the candle test's 1e-9, and in f32 as the backend runs it
/// ([`head_loss_f32`]: the batched policy head).
#[test]
fn fused_ppo_clip_loss_and_gradients_match_pytorch() {
    let g = golden("ppo_loss.json");
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let (b, a) = (c["B"].as_u64().unwrap() as usize, c["n_actions"].as_u64().unwrap() as usize);
        let mut adv = f64s(&c["advantages_raw"]);
        normalize_advantages_f64(&mut adv);
        let coefs = case_coefs(c);
        let inputs = [
            flat(&c["logits"]),
            f64s(&c["values"]),
            f64s(&c["actions"]),
            f64s(&c["old_log_probs"]),
            adv,
            f64s(&c["old_values"]),
            f64s(&c["returns"]),
        ];
        let e = &c["expected"];
        let kind = ActionKind::Discrete { n: a };
        let (parts, d_head, d_values, log_ratio, _) = fused_head(&kind, &inputs, &[], b, &coefs);
        let name = |s: &str| format!("fused case {k} {s}");
        for (i, key) in ["loss", "policy_loss", "value_loss", "entropy"].into_iter().enumerate() {
            close(&name(key), &[parts[i]], &[e[key].as_f64().unwrap()], 1e-9);
        }
        close(&name("grad_logits"), &d_head, &flat(&e["grad_logits"]), 1e-9);
        close(&name("grad_values"), &d_values, &f64s(&e["grad_values"]), 1e-9);
        let lr: Vec<f32> = log_ratio.iter().map(|&x| x as f32).collect();
        let (kl, cf) = kl_and_clip_fraction(&lr, coefs.clip_range);
        close(&name("approx_kl"), &[kl], &[e["approx_kl"].as_f64().unwrap()], 1e-6);
        close(&name("clip_fraction"), &[cf], &[e["clip_fraction"].as_f64().unwrap()], 1e-12);
        // The same in f32, as the backend runs it: to f32's precision.
        let f32s: Vec<Vec<f32>> = inputs.iter().map(|v| v.iter().map(|&x| x as f32).collect()).collect();
        let f32s: [Vec<f32>; 7] = f32s.try_into().unwrap();
        let (p32, dh32, dv32, _, _) = fused_head_f32(&kind, &f32s, &[], b, &coefs);
        let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        close(&name("f32 loss"), &wide(&p32[..1]), &[e["loss"].as_f64().unwrap()], 1e-5);
        close(&name("f32 grad_logits"), &wide(&dh32), &flat(&e["grad_logits"]), 1e-6);
        close(&name("f32 grad_values"), &wide(&dv32), &f64s(&e["grad_values"]), 1e-6);
    }
}

/// A `masked.json` case's masks `[B, n]` as u8 (1 = valid), row after row.
fn case_masks(c: &serde_json::Value) -> Vec<u8> {
    let rows = c["masks"].as_array().unwrap();
    rows.iter().flat_map(|r| r.as_array().unwrap().iter().map(|m| m.as_bool().unwrap() as u8)).collect()
}

/// L^CLIP of a `masked.json` case: its ε and c₂, no value loss (the cases have no values).
fn masked_coefs(c: &serde_json::Value) -> PpoCoefs {
    PpoCoefs { vf_coef: 0.0, clip_range_vf: None, ..gaussian_coefs(c) }
}

/// Invalid-action masking on candle against sb3-contrib's `MaskableCategorical` in float64:
/// log-probabilities, entropies, L^CLIP and ∂L/∂logits (0 at every masked logit).
#[test]
fn masked_categorical_matches_sb3_contrib() {
    let g = golden("masked.json");
    let dev = Device::Cpu;
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let (b, a) = (c["B"].as_u64().unwrap() as usize, c["n_actions"].as_u64().unwrap() as usize);
        let masks = case_masks(c);
        let logits = Var::from_tensor(&Tensor::from_vec(flat(&c["logits"]), (b, a), &dev).unwrap()).unwrap();
        let mask_t = Tensor::from_vec(masks.clone(), (b, a), &dev).unwrap();
        let masked = mask_logits(logits.as_tensor(), &mask_t).unwrap();
        let actions = Tensor::new(f64s(&c["actions"]).iter().map(|&x| x as u32).collect::<Vec<_>>(), &dev).unwrap();
        let (lp, ent) = categorical_log_prob_entropy(&masked, &actions).unwrap();
        let e = &c["expected"];
        let name = |s: &str| format!("masked case {k} {s}");
        close(&name("log_probs"), &lp.to_vec1::<f64>().unwrap(), &f64s(&e["log_probs"]), 1e-9);
        close(&name("entropy"), &ent.to_vec1::<f64>().unwrap(), &f64s(&e["entropy"]), 1e-9);
        let mut adv = f64s(&c["advantages_raw"]);
        normalize_advantages_f64(&mut adv);
        let t = |v: Vec<f64>| Tensor::new(v, &dev).unwrap();
        let zeros = t(vec![0.0; b]);
        let batch = PpoBatch {
            log_prob: &lp,
            entropy: Some(&ent),
            values: &zeros,
            old_log_prob: &t(f64s(&c["old_log_probs"])),
            advantages: &t(adv),
            old_values: &zeros,
            returns: &zeros,
            kl: None,
            mask: None,
        };
        let out = ppo_loss(&batch, &masked_coefs(c)).unwrap();
        close(&name("policy_loss"), &[scalar(&out.policy_loss)], &[e["policy_loss"].as_f64().unwrap()], 1e-9);
        close(&name("loss"), &[scalar(&out.loss)], &[e["loss"].as_f64().unwrap()], 1e-9);
        let grads = out.loss.backward().unwrap();
        let gl = grads.get(logits.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        close(&name("grad_logits"), &gl, &flat(&e["grad_logits"]), 1e-9);
        assert!(gl.iter().zip(&masks).all(|(g, &m)| m == 1 || *g == 0.0), "{}", name("∂L/∂logit is 0 where masked"));
    }
}

/// The same cases on the fused closed-form heads (f64 to 1e-9, and f32 as the backend runs
/// them), the logits masked on the host first ([`mask_logits_in_place`]).
#[test]
fn fused_masked_categorical_matches_sb3_contrib() {
    let g = golden("masked.json");
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let (b, a) = (c["B"].as_u64().unwrap() as usize, c["n_actions"].as_u64().unwrap() as usize);
        let masks = case_masks(c);
        let mut logits = flat(&c["logits"]);
        mask_logits_in_place(&mut logits, &masks);
        let mut adv = f64s(&c["advantages_raw"]);
        normalize_advantages_f64(&mut adv);
        let inputs =
            [logits, vec![0.0; b], f64s(&c["actions"]), f64s(&c["old_log_probs"]), adv, vec![0.0; b], vec![0.0; b]];
        let (e, coefs, kind) = (&c["expected"], masked_coefs(c), ActionKind::Discrete { n: a });
        let mean_entropy = f64s(&e["entropy"]).iter().sum::<f64>() / b as f64;
        let name = |s: &str| format!("fused masked case {k} {s}");
        let (parts, d_head, _, _, _) = fused_head(&kind, &inputs, &[], b, &coefs);
        close(&name("loss"), &[parts[0]], &[e["loss"].as_f64().unwrap()], 1e-9);
        close(&name("policy_loss"), &[parts[1]], &[e["policy_loss"].as_f64().unwrap()], 1e-9);
        close(&name("entropy"), &[parts[3]], &[mean_entropy], 1e-9);
        close(&name("grad_logits"), &d_head, &flat(&e["grad_logits"]), 1e-9);
        assert!(d_head.iter().zip(&masks).all(|(g, &m)| m == 1 || *g == 0.0), "{}", name("0 where masked"));
        let f32s: Vec<Vec<f32>> = inputs.iter().map(|v| v.iter().map(|&x| x as f32).collect()).collect();
        let (p32, dh32, _, _, _) = fused_head_f32(&kind, &f32s.try_into().unwrap(), &[], b, &coefs);
        let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        close(&name("f32 loss"), &wide(&p32[..1]), &[e["loss"].as_f64().unwrap()], 1e-5);
        close(&name("f32 grad_logits"), &wide(&dh32), &flat(&e["grad_logits"]), 1e-6);
        assert!(dh32.iter().zip(&masks).all(|(g, &m)| m == 1 || *g == 0.0), "{}", name("f32: 0 where masked"));
    }
}

/// The fused closed-form loss on `gaussian.json` (log-probs, entropies, the loss and its
/// gradients w.r.t. the mean and the log-std), float64 to 1e-9.
#[test]
fn fused_gaussian_policy_loss_and_gradients_match_pytorch() {
    let g = golden("gaussian.json");
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let (b, d) = (c["B"].as_u64().unwrap() as usize, c["action_dim"].as_u64().unwrap() as usize);
        let mut adv = f64s(&c["advantages_raw"]);
        normalize_advantages_f64(&mut adv);
        let coefs = gaussian_coefs(c);
        let zeros = vec![0f64; b];
        let inputs = [
            flat(&c["mean"]),
            zeros.clone(),
            flat(&c["actions"]),
            f64s(&c["old_log_probs"]),
            adv,
            zeros.clone(),
            zeros,
        ];
        let kind = ActionKind::Continuous { dim: d, low: vec![-1.0; d], high: vec![1.0; d] };
        let log_std = f64s(&c["log_std"]);
        let (parts, d_head, _, log_ratio, d_log_std) = fused_head(&kind, &inputs, &log_std, b, &coefs);
        let e = &c["expected"];
        let name = |s: &str| format!("fused case {k} {s}");
        close(&name("policy_loss"), &[parts[1]], &[e["policy_loss"].as_f64().unwrap()], 1e-9);
        close(&name("loss"), &[parts[0]], &[e["loss"].as_f64().unwrap()], 1e-9);
        let old = f64s(&c["old_log_probs"]);
        let lp: Vec<f64> = log_ratio.iter().zip(&old).map(|(r, o)| r + o).collect();
        close(&name("log_probs"), &lp, &f64s(&e["log_probs"]), 1e-9);
        close(&name("grad_mean"), &d_head, &flat(&e["grad_mean"]), 1e-9);
        close(&name("grad_log_std"), &d_log_std, &f64s(&e["grad_log_std"]), 1e-9);
        // In f32 as the backend runs it: to f32's precision.
        let f32s: Vec<Vec<f32>> = inputs.iter().map(|v| v.iter().map(|&x| x as f32).collect()).collect();
        let f32s: [Vec<f32>; 7] = f32s.try_into().unwrap();
        let log_std32: Vec<f32> = log_std.iter().map(|&x| x as f32).collect();
        let (p32, dh32, _, _, dls32) = fused_head_f32(&kind, &f32s, &log_std32, b, &coefs);
        let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        close(&name("f32 loss"), &wide(&p32[..1]), &[e["loss"].as_f64().unwrap()], 1e-5);
        close(&name("f32 grad_mean"), &wide(&dh32), &flat(&e["grad_mean"]), 1e-5);
        close(&name("f32 grad_log_std"), &wide(&dls32), &f64s(&e["grad_log_std"]), 1e-5);
    }
}

/// What [`head_loss`] returns and writes: `[loss, policy_loss, value_loss, entropy]`,
/// ∂L/∂head, ∂L/∂V, log r, ∂L/∂log σ.
type HeadOut<T> = ([T; 4], Vec<T>, Vec<T>, Vec<T>, Vec<T>);

/// `loss` (an entry point of the fused heads) on `[head, values, actions, old_log_probs,
/// advantages, old_values, returns]` with log σ `log_std`, into fresh output buffers.
fn run_head<T: num_traits::Float>(
    kind: &ActionKind,
    x: &[Vec<T>; 7],
    log_std: &[T],
    b: usize,
    loss: impl FnOnce(&HeadBatch<'_, T>, &mut HeadGrads<'_, T>) -> [T; 4],
) -> HeadOut<T> {
    let hd = kind.head_dim();
    let (mut d_head, mut d_values, mut log_ratio) = (vec![T::zero(); b * hd], vec![T::zero(); b], vec![T::zero(); b]);
    let mut d_log_std = vec![T::zero(); log_std.len()];
    let mut scratch = vec![T::zero(); scratch_len(kind)];
    let batch = HeadBatch {
        head: &x[0],
        log_std,
        values: &x[1],
        actions: &x[2],
        old_log_prob: &x[3],
        advantages: &x[4],
        old_values: &x[5],
        returns: &x[6],
        old_head: &[],
        old_log_std: &[],
        mean_over: 0,
    };
    let mut grads = HeadGrads {
        d_head: &mut d_head,
        d_values: &mut d_values,
        d_log_std: &mut d_log_std,
        log_ratio: &mut log_ratio,
        scratch: &mut scratch,
    };
    let parts = loss(&batch, &mut grads);
    (parts, d_head, d_values, log_ratio, d_log_std)
}

/// [`head_loss`] (the row-by-row heads, any float type) on [`run_head`]'s inputs.
fn fused_head<T: num_traits::Float>(
    kind: &ActionKind,
    x: &[Vec<T>; 7],
    log_std: &[T],
    b: usize,
    c: &PpoCoefs,
) -> HeadOut<T> {
    run_head(kind, x, log_std, b, |batch, g| head_loss(kind, batch, &HeadLoss::Ppo(*c), g).unwrap())
}

/// [`head_loss_f32`] (the fused backend's f32 heads) on the same inputs as [`fused_head`].
fn fused_head_f32(kind: &ActionKind, x: &[Vec<f32>; 7], log_std: &[f32], b: usize, c: &PpoCoefs) -> HeadOut<f32> {
    let mut cols = vec![0f32; cols_len(kind.head_dim(), b)];
    run_head(kind, x, log_std, b, |batch, g| head_loss_f32(kind, batch, &HeadLoss::Ppo(*c), g, &mut cols).unwrap())
}
