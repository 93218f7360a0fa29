//! SAC's and TD3's losses against `offpolicy.json` (PyTorch float64, the formulas of
//! Stable-Baselines3's `sac.py` and `td3.py`) on both backends: candle's loss functions in float64
//! with autograd, and the fused backend's closed-form pieces in f32 (the squashed sample and its
//! backward, the soft target, the critics' loss and its gradient, the min of the critics and its
//! gradient).
//!
//! One deliberate difference: SB3 takes log(1 − tanh² u + 1e-6) for the squash's correction,
//! Proxima the exact log(1 − tanh² u) (finite for every u). The expected log-probabilities and
//! their gradients are moved by that term, computed here in float64 from the case's own inputs;
//! everything else is compared as written.

use candle_core::{DType, Device, Tensor, Var};
use proxima::algo::offpolicy::{min_and_grad, sum_of_mse_and_grad};
use proxima::algo::sac::{actor_loss, critic_loss, ent_coef_loss, soft_q_target, soft_target_into, sum_of_mse};
use proxima::algo::td3::{td3_actor_loss, td3_target, td3_target_into};
use proxima::policy::fused::{squash, squash_backward};
use proxima::policy::offpolicy::squashed_sample;
use serde_json::Value;

#[path = "support/golden.rs"]
mod support;
use support::{close, f64s, flat, golden, scalar};

/// SB3's ε in the squash's correction.
const SB3_EPS: f64 = 1e-6;

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, &Device::Cpu).unwrap()
}

fn host(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap()
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// `got` within `rel` of `want`, relative to the larger of 1 and |want| per element.
fn close_rel(name: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rel * w.abs().max(1.0), "{name}[{i}]: got {g}, want {w}");
    }
}

/// 1 − tanh² u, as sech² u = 4 / (eᵘ + e⁻ᵘ)² (no cancellation where tanh u ≈ ±1).
fn sech2(u: f64) -> f64 {
    4.0 / (u.exp() + (-u).exp()).powi(2)
}

/// Per element of a case: u, and r = (1 − tanh²u) / (1 − tanh²u + ε), the factor SB3's ε puts
/// on ∂log π/∂u.
fn squash_terms(mean: &[f64], log_std: &[f64], noise: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let u: Vec<f64> = mean.iter().zip(log_std).zip(noise).map(|((m, s), e)| m + s.exp() * e).collect();
    let r = u.iter().map(|&u| sech2(u) / (sech2(u) + SB3_EPS)).collect();
    (u, r)
}

/// SB3's expected log π per row, moved to Proxima's exact correction: + Σ_j [log(1 − tanh² u + ε)
/// − log(1 − tanh² u)].
fn exact_log_prob(c: &Value, u: &[f64]) -> Vec<f64> {
    let dim = c["action_dim"].as_u64().unwrap() as usize;
    let sb3 = f64s(&c["expected"]["log_prob"]);
    sb3.iter()
        .enumerate()
        .map(|(b, lp)| {
            lp + u[b * dim..(b + 1) * dim].iter().map(|&u| (sech2(u) + SB3_EPS).ln() - sech2(u).ln()).sum::<f64>()
        })
        .collect()
}

/// SB3's expected ∂J_π/∂μ and ∂J_π/∂log σ moved the same way: the log π part of ∂J_π/∂u is
/// (α/B)·2a·r there, (α/B)·2a here.
fn exact_actor_grads(c: &Value, u: &[f64], r: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (b, alpha) = (c["B"].as_u64().unwrap() as f64, c["alpha"].as_f64().unwrap());
    let (log_std, noise) = (flat(&c["log_std"]), flat(&c["noise"]));
    let (g_mu, g_ls) = (flat(&c["expected"]["grad_actor_loss_mean"]), flat(&c["expected"]["grad_actor_loss_log_std"]));
    let shift: Vec<f64> = u.iter().zip(r).map(|(&u, &r)| alpha / b * 2.0 * u.tanh() * (1.0 - r)).collect();
    let mu = g_mu.iter().zip(&shift).map(|(g, s)| g + s).collect();
    let ls = (0..u.len()).map(|j| g_ls[j] + shift[j] * log_std[j].exp() * noise[j]).collect();
    (mu, ls)
}

#[test]
fn sac_losses_and_gradients_match_the_reference_on_both_backends() {
    let cases = golden("offpolicy.json");
    for (i, c) in cases["sac"].as_array().unwrap().iter().enumerate() {
        let (b, dim, k) = (
            c["B"].as_u64().unwrap() as usize,
            c["action_dim"].as_u64().unwrap() as usize,
            c["n_critics"].as_u64().unwrap() as usize,
        );
        let (alpha, gamma) = (c["alpha"].as_f64().unwrap(), c["gamma"].as_f64().unwrap());
        let e = &c["expected"];
        let (mean, log_std, noise) = (flat(&c["mean"]), flat(&c["log_std"]), flat(&c["noise"]));
        let (u, r) = squash_terms(&mean, &log_std, &noise);
        let lp_exact = exact_log_prob(c, &u);
        let (g_mu, g_ls) = exact_actor_grads(c, &u, &r);
        let adj_mean: f64 = lp_exact.iter().zip(f64s(&e["log_prob"])).map(|(x, y)| x - y).sum::<f64>() / b as f64;
        let actor_want = e["actor_loss"].as_f64().unwrap() + alpha * adj_mean;
        let rows = |v: &Value| -> Vec<Vec<f64>> { v.as_array().unwrap().iter().map(f64s).collect() };
        let (q_pi, q, next_q) = (rows(&c["q_pi"]), rows(&c["q"]), rows(&c["next_q"]));
        let (next_lp, rewards, dones) = (f64s(&c["next_log_prob"]), f64s(&c["rewards"]), f64s(&c["dones"]));
        let name = |s: &str| format!("sac case {i}: {s}");

        // candle, float64, autograd.
        let (m, s) =
            (Var::from_tensor(&t64(&mean, &[b, dim])).unwrap(), Var::from_tensor(&t64(&log_std, &[b, dim])).unwrap());
        let (a, lp) = squashed_sample(m.as_tensor(), s.as_tensor(), &t64(&noise, &[b, dim])).unwrap();
        close(&name("actions"), &host(&a), &flat(&e["actions"]), 1e-9);
        close(&name("log π"), &host(&lp), &lp_exact, 1e-9);
        let q_pi_vars: Vec<Var> = q_pi.iter().map(|v| Var::from_tensor(&t64(v, &[b])).unwrap()).collect();
        let q_pi_t: Vec<Tensor> = q_pi_vars.iter().map(|v| v.as_tensor().clone()).collect();
        let la = actor_loss(&lp, &q_pi_t, alpha).unwrap();
        close(&name("actor loss"), &[scalar(&la)], &[actor_want], 1e-9);
        let grads = la.backward().unwrap();
        close(&name("∂J_π/∂μ"), &host(grads.get(m.as_tensor()).unwrap()), &g_mu, 1e-9);
        close(&name("∂J_π/∂log σ"), &host(grads.get(s.as_tensor()).unwrap()), &g_ls, 1e-9);
        let g_q_pi: Vec<f64> = q_pi_vars.iter().flat_map(|v| host(grads.get(v.as_tensor()).unwrap())).collect();
        close(&name("∂J_π/∂Q_k"), &g_q_pi, &flat(&e["grad_actor_loss_q_pi"]), 1e-12);
        let next_t: Vec<Tensor> = next_q.iter().map(|v| t64(v, &[b])).collect();
        let y = soft_q_target(&next_t, &t64(&next_lp, &[b]), &t64(&rewards, &[b]), &t64(&dones, &[b]), gamma, alpha)
            .unwrap();
        close(&name("target"), &host(&y), &f64s(&e["target_q"]), 1e-9);
        let q_vars: Vec<Var> = q.iter().map(|v| Var::from_tensor(&t64(v, &[b])).unwrap()).collect();
        let q_t: Vec<Tensor> = q_vars.iter().map(|v| v.as_tensor().clone()).collect();
        let lq = critic_loss(&q_t, &y).unwrap();
        close(&name("critic loss"), &[scalar(&lq)], &[e["critic_loss"].as_f64().unwrap()], 1e-9);
        let grads = lq.backward().unwrap();
        let g_q: Vec<f64> = q_vars.iter().flat_map(|v| host(grads.get(v.as_tensor()).unwrap())).collect();
        close(&name("∂J_Q/∂Q_k"), &g_q, &flat(&e["grad_critic_loss_q"]), 1e-9);
        // J(log α) at the reference's own log π (SB3's; the loss takes it as given).
        let mean_lp = f64s(&e["log_prob"]).iter().sum::<f64>() / b as f64;
        let (l_alpha, g_alpha) = ent_coef_loss(alpha.ln(), mean_lp, c["target_entropy"].as_f64().unwrap());
        close(
            &name("J(log α)"),
            &[l_alpha, g_alpha],
            &[e["ent_coef_loss"].as_f64().unwrap(), e["grad_ent_coef_loss_log_alpha"].as_f64().unwrap()],
            1e-9,
        );

        // The fused backend's closed form, f32.
        let (a32, mut lp32) = (vec![0f32; b * dim], vec![0f32; b]);
        let mut a32 = a32;
        let (mean32, ls32, eps32) = (f32s(&mean), f32s(&log_std), f32s(&noise));
        squash((&mean32, &ls32, &eps32), dim, &mut a32, &mut lp32);
        close_rel(&name("fused actions"), &wide(&a32), &flat(&e["actions"]), 1e-5);
        close_rel(&name("fused log π"), &wide(&lp32), &lp_exact, 1e-5);
        let (mut min, mut dq) = (Vec::new(), Vec::new());
        let q_pi32: Vec<Vec<f32>> = q_pi.iter().map(|v| f32s(v)).collect();
        min_and_grad(&q_pi32, b, -1.0 / b as f32, &mut min, &mut dq);
        close_rel(
            &name("fused ∂J_π/∂Q_k"),
            &dq.iter().flat_map(|d| wide(d)).collect::<Vec<_>>(),
            &flat(&e["grad_actor_loss_q_pi"]),
            1e-6,
        );
        let actor: f64 = lp32.iter().zip(&min).map(|(&l, &q)| (l * alpha as f32 - q) as f64).sum::<f64>() / b as f64;
        close_rel(&name("fused actor loss"), &[actor], &[actor_want], 1e-5);
        let (mut d_mu, mut d_ls) = (vec![0f32; b * dim], vec![0f32; b * dim]);
        let zero = vec![0f32; b * dim];
        squash_backward((&zero, &a32, &eps32, &ls32), (alpha / b as f64) as f32, (&mut d_mu, &mut d_ls));
        close_rel(&name("fused ∂J_π/∂μ"), &wide(&d_mu), &g_mu, 1e-5);
        close_rel(&name("fused ∂J_π/∂log σ"), &wide(&d_ls), &g_ls, 1e-5);
        let next32: Vec<Vec<f32>> = next_q.iter().map(|v| f32s(v)).collect();
        min_and_grad(&next32, b, 0.0, &mut min, &mut dq);
        let mut y32 = Vec::new();
        soft_target_into(&mut y32, (&min, &f32s(&next_lp)), (&f32s(&rewards), &f32s(&dones)), gamma, alpha);
        close_rel(&name("fused target"), &wide(&y32), &f64s(&e["target_q"]), 1e-5);
        let q32: Vec<Vec<f32>> = q.iter().map(|v| f32s(v)).collect();
        let lq32 = 0.5 * sum_of_mse_and_grad(&q32, &y32, 0.5, &mut dq);
        close_rel(&name("fused critic loss"), &[lq32], &[e["critic_loss"].as_f64().unwrap()], 1e-5);
        close_rel(
            &name("fused ∂J_Q/∂Q_k"),
            &dq.iter().flat_map(|d| wide(d)).collect::<Vec<_>>(),
            &flat(&e["grad_critic_loss_q"]),
            1e-5,
        );
        assert_eq!(dq.len(), k);
    }
}

#[test]
fn td3_losses_and_gradients_match_the_reference_on_both_backends() {
    let cases = golden("offpolicy.json");
    for (i, c) in cases["td3"].as_array().unwrap().iter().enumerate() {
        let b = c["B"].as_u64().unwrap() as usize;
        let (gamma, clip) = (c["gamma"].as_f64().unwrap(), c["noise_clip"].as_f64().unwrap());
        let e = &c["expected"];
        let name = |s: &str| format!("td3 case {i}: {s}");
        // Target policy smoothing, as the steps do it: clip(μ̄(s') + clip(ε, −c, c), −1, 1).
        let smoothed: Vec<f64> = flat(&c["target_actions"])
            .iter()
            .zip(flat(&c["noise"]))
            .map(|(a, n)| (a + n.clamp(-clip, clip)).clamp(-1.0, 1.0))
            .collect();
        close(&name("smoothed ã'"), &smoothed, &flat(&e["smoothed_next_actions"]), 1e-12);
        let rows = |v: &Value| -> Vec<Vec<f64>> { v.as_array().unwrap().iter().map(f64s).collect() };
        let (q, next_q) = (rows(&c["q"]), rows(&c["next_q"]));
        let (rewards, dones, q1_pi) = (f64s(&c["rewards"]), f64s(&c["dones"]), f64s(&c["q1_pi"]));
        // candle.
        let next_t: Vec<Tensor> = next_q.iter().map(|v| t64(v, &[b])).collect();
        let y = td3_target(&next_t, &t64(&rewards, &[b]), &t64(&dones, &[b]), gamma).unwrap();
        close(&name("target"), &host(&y), &f64s(&e["target_q"]), 1e-9);
        let q_vars: Vec<Var> = q.iter().map(|v| Var::from_tensor(&t64(v, &[b])).unwrap()).collect();
        let q_t: Vec<Tensor> = q_vars.iter().map(|v| v.as_tensor().clone()).collect();
        let lq = sum_of_mse(&q_t, &y).unwrap();
        close(&name("critic loss"), &[scalar(&lq)], &[e["critic_loss"].as_f64().unwrap()], 1e-9);
        let grads = lq.backward().unwrap();
        let g_q: Vec<f64> = q_vars.iter().flat_map(|v| host(grads.get(v.as_tensor()).unwrap())).collect();
        close(&name("∂J_Q/∂Q_k"), &g_q, &flat(&e["grad_critic_loss_q"]), 1e-9);
        let q1 = Var::from_tensor(&t64(&q1_pi, &[b])).unwrap();
        let la = td3_actor_loss(q1.as_tensor()).unwrap();
        close(&name("actor loss"), &[scalar(&la)], &[e["actor_loss"].as_f64().unwrap()], 1e-9);
        let g = host(la.backward().unwrap().get(q1.as_tensor()).unwrap());
        close(&name("∂J_μ/∂Q_0"), &g, &f64s(&e["grad_actor_loss_q1_pi"]), 1e-12);
        // The fused closed form: min and target as the fused step forms them, then Σ_k MSE.
        let next32: Vec<Vec<f32>> = next_q.iter().map(|v| f32s(v)).collect();
        let (mut min, mut dq) = (Vec::new(), Vec::new());
        min_and_grad(&next32, b, 0.0, &mut min, &mut dq);
        let mut y32 = Vec::new();
        td3_target_into(&mut y32, &min, (&f32s(&rewards), &f32s(&dones)), gamma);
        close_rel(&name("fused target"), &wide(&y32), &f64s(&e["target_q"]), 1e-5);
        let q32: Vec<Vec<f32>> = q.iter().map(|v| f32s(v)).collect();
        let lq32 = sum_of_mse_and_grad(&q32, &y32, 1.0, &mut dq);
        close_rel(&name("fused critic loss"), &[lq32], &[e["critic_loss"].as_f64().unwrap()], 1e-5);
        close_rel(
            &name("fused ∂J_Q/∂Q_k"),
            &dq.iter().flat_map(|d| wide(d)).collect::<Vec<_>>(),
            &flat(&e["grad_critic_loss_q"]),
            1e-5,
        );
    }
}

/// `[B][N][M]` (the reference's layout) as one `[B, M]` array per critic (the fused backend's).
fn per_critic(v: &Value, n: usize, m: usize) -> Vec<Vec<f32>> {
    let rows = v.as_array().unwrap();
    (0..n)
        .map(|c| rows.iter().flat_map(|r| f64s(&r[c]).into_iter().map(|x| x as f32)).collect::<Vec<f32>>())
        .map(|q| {
            assert_eq!(q.len(), rows.len() * m);
            q
        })
        .collect()
}

/// Per-critic `[B, M]` arrays back to the reference's `[B][N][M]` order, flattened.
fn reference_order(q: &[Vec<f32>], m: usize) -> Vec<f64> {
    let rows = q[0].len() / m;
    (0..rows).flat_map(|r| q.iter().flat_map(move |qn| qn[r * m..(r + 1) * m].iter().map(|&x| x as f64))).collect()
}

#[test]
fn tqc_truncated_targets_quantile_huber_loss_and_actor_loss_match_the_reference_on_both_backends() {
    use proxima::algo::tqc::{
        quantile_huber_and_grad, quantile_huber_loss, tqc_actor_loss, tqc_actor_loss_and_grad, truncated_target,
        truncated_target_into,
    };
    let cases = golden("offpolicy.json");
    for (i, c) in cases["tqc"].as_array().unwrap().iter().enumerate() {
        let u = |k: &str| c[k].as_u64().unwrap() as usize;
        let (b, n, m, drop) = (u("B"), u("n_critics"), u("n_quantiles"), u("top_quantiles_to_drop_per_net"));
        let (gamma, alpha) = (c["gamma"].as_f64().unwrap(), c["alpha"].as_f64().unwrap());
        let e = &c["expected"];
        let name = |s: &str| format!("tqc case {i}: {s}");
        let (next_lp, rewards, dones, lp) =
            (f64s(&c["next_log_prob"]), f64s(&c["rewards"]), f64s(&c["dones"]), f64s(&c["log_prob"]));
        // `[B][N][M]`, flattened in that order.
        let cubes = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().flat_map(flat).collect() };
        let (cur, pi) = (cubes(&c["current_quantiles"]), cubes(&c["q_pi_quantiles"]));
        // The next quantiles come pooled, `[B][N·M]` (critic-major within a row).
        let next = flat(&c["next_quantiles"]);
        assert_eq!(cur.len(), b * n * m);
        // candle, float64, autograd.
        let y = truncated_target(
            &t64(&next, &[b, n, m]),
            &t64(&next_lp, &[b]),
            (&t64(&rewards, &[b]), &t64(&dones, &[b])),
            (gamma, alpha),
            drop,
        )
        .unwrap();
        close(&name("target quantiles"), &host(&y), &flat(&e["target_quantiles"]), 1e-9);
        let current = Var::from_tensor(&t64(&cur, &[b, n, m])).unwrap();
        let loss = quantile_huber_loss(current.as_tensor(), &y).unwrap();
        close(&name("critic loss"), &[scalar(&loss)], &[e["critic_loss"].as_f64().unwrap()], 1e-9);
        let g = host(loss.backward().unwrap().get(current.as_tensor()).unwrap());
        close(&name("∂L/∂θ"), &g, &cubes(&e["grad_critic_loss_current_quantiles"]), 1e-9);
        let z = Var::from_tensor(&t64(&pi, &[b, n, m])).unwrap();
        let la = tqc_actor_loss(&t64(&lp, &[b]), z.as_tensor(), alpha).unwrap();
        close(&name("actor loss"), &[scalar(&la)], &[e["actor_loss"].as_f64().unwrap()], 1e-9);
        let gz = host(la.backward().unwrap().get(z.as_tensor()).unwrap());
        close(&name("∂J_π/∂Z"), &gz, &cubes(&e["grad_actor_loss_q_pi_quantiles"]), 1e-12);
        // The fused closed form, f32.
        let (mut y32, mut pooled, mut dq) = (Vec::new(), Vec::new(), Vec::new());
        let next32: Vec<Vec<f32>> = (0..n)
            .map(|k| {
                (0..b)
                    .flat_map(|r| next[r * n * m + k * m..r * n * m + (k + 1) * m].iter().map(|&x| x as f32))
                    .collect()
            })
            .collect();
        truncated_target_into(
            &mut y32,
            &mut pooled,
            (&next32, m, drop),
            &f32s(&next_lp),
            (&f32s(&rewards), &f32s(&dones)),
            (gamma, alpha),
        );
        close_rel(&name("fused target quantiles"), &wide(&y32), &flat(&e["target_quantiles"]), 1e-5);
        let cur32 = per_critic(&c["current_quantiles"], n, m);
        let l32 = quantile_huber_and_grad(&cur32, &y32, m, &mut dq, false);
        let mut dq_parallel = Vec::new();
        let l_parallel = quantile_huber_and_grad(&cur32, &y32, m, &mut dq_parallel, true);
        assert_eq!(
            (l_parallel.to_bits(), &dq_parallel),
            (l32.to_bits(), &dq),
            "{}",
            name("critics side by side: the same bits")
        );
        close_rel(&name("fused critic loss"), &[l32], &[e["critic_loss"].as_f64().unwrap()], 1e-5);
        close_rel(
            &name("fused ∂L/∂θ"),
            &reference_order(&dq, m),
            &cubes(&e["grad_critic_loss_current_quantiles"]),
            1e-6,
        );
        let pi32 = per_critic(&c["q_pi_quantiles"], n, m);
        let la32 = tqc_actor_loss_and_grad(&f32s(&lp), &pi32, m, alpha, &mut dq);
        close_rel(&name("fused actor loss"), &[la32], &[e["actor_loss"].as_f64().unwrap()], 1e-5);
        close_rel(&name("fused ∂J_π/∂Z"), &reference_order(&dq, m), &cubes(&e["grad_actor_loss_q_pi_quantiles"]), 1e-6);
    }
}
