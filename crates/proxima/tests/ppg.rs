//! PPG (Cobbe et al. 2021): the auxiliary loss against a float64 evaluation of its definition
//! and against finite differences, the auxiliary phase's behaviour (the value is distilled, the
//! cloning KL holds the policy), when the phases run, and the buffer's checks.

use candle_core::Device;
use proxima::algo::ppg::{auxiliary_phase, AuxBuffer, PpgParams};
use proxima::algo::ppo::PpoParams;
use proxima::algo::{AdvantageNorm, Objective};
use proxima::config::Config;
use proxima::error::ProximaError;
use proxima::optim::Optimizer;
use proxima::policy::fused::FusedMlp;
use proxima::policy::{ActionKind, Activation, ActorCritic, AuxBatch, Policy, PolicySpec};
use proxima::train::Trainer;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const OBS: usize = 3;
const HIDDEN: usize = 5;

fn spec(action: ActionKind) -> PolicySpec {
    PolicySpec {
        cnn: None,
        obs_dim: OBS,
        action,
        net_arch: vec![HIDDEN],
        activation: Activation::Tanh,
        shared_trunk: false,
        log_std_init: -0.2,
        ortho_init: false, // PyTorch's uniform init: heads that are not ~0
        aux_value_head: true,
        recurrent: None,
        inputs: Vec::new(),
    }
}

fn actions() -> [ActionKind; 2] {
    [ActionKind::Discrete { n: 3 }, ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] }]
}

/// A batch of B random states, targets and a π_old that is not the current policy.
struct Data {
    obs: Vec<f32>,
    returns: Vec<f32>,
    old_head: Vec<f32>,
    old_log_std: Vec<f32>,
}

fn data(action: &ActionKind, b: usize, seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draw = |n: usize, s: f32| (0..n).map(|_| rng.random_range(-s..s)).collect::<Vec<f32>>();
    let old_log_std = match action {
        ActionKind::Continuous { dim, .. } => draw(*dim, 0.5),
        _ => Vec::new(),
    };
    Data { obs: draw(b * OBS, 2.0), returns: draw(b, 3.0), old_head: draw(b * action.head_dim(), 1.0), old_log_std }
}

/// L = ½·mean (V_aux − R)² + β·mean KL[π_old ‖ π] + ½·mean (V − R)² and its parts, in f64 from
/// the parameters (the spec's order: actor.0, actor.2, critic.0, critic.2, aux_critic, log-std).
fn reference(p: &[Vec<f64>], action: &ActionKind, d: &Data, beta: f64) -> [f64; 4] {
    let dense = |w: &[f64], b: &[f64], x: &[f64]| -> Vec<f64> {
        b.iter()
            .enumerate()
            .map(|(o, bo)| bo + x.iter().enumerate().map(|(i, xi)| w[o * x.len() + i] * xi).sum::<f64>())
            .collect()
    };
    let tanh = |v: Vec<f64>| v.into_iter().map(f64::tanh).collect::<Vec<_>>();
    let (hd, b) = (action.head_dim(), d.returns.len());
    let (mut aux_l, mut v_l, mut kl_sum) = (0.0, 0.0, 0.0);
    for r in 0..b {
        let x: Vec<f64> = d.obs[r * OBS..(r + 1) * OBS].iter().map(|&v| v as f64).collect();
        let h = tanh(dense(&p[0], &p[1], &x));
        let head = dense(&p[2], &p[3], &h);
        let v = dense(&p[6], &p[7], &tanh(dense(&p[4], &p[5], &x)))[0];
        let v_aux = dense(&p[8], &p[9], &h)[0];
        let ret = d.returns[r] as f64;
        aux_l += 0.5 * (v_aux - ret).powi(2);
        v_l += 0.5 * (v - ret).powi(2);
        let old: Vec<f64> = d.old_head[r * hd..(r + 1) * hd].iter().map(|&v| v as f64).collect();
        kl_sum += match action {
            ActionKind::Continuous { .. } => (0..hd)
                .map(|i| {
                    let (so, sn) = (d.old_log_std[i] as f64, p[10][i]);
                    sn - so + ((2.0 * so).exp() + (old[i] - head[i]).powi(2)) / (2.0 * (2.0 * sn).exp()) - 0.5
                })
                .sum::<f64>(),
            _ => {
                let lse = |z: &[f64]| z.iter().map(|v| v.exp()).sum::<f64>().ln();
                let (lo, ln) = (lse(&old), lse(&head));
                (0..hd).map(|i| (old[i] - lo).exp() * ((old[i] - lo) - (head[i] - ln))).sum::<f64>()
            }
        };
    }
    let n = b as f64;
    let (aux_l, v_l, kl) = (aux_l / n, v_l / n, kl_sum / n);
    [aux_l + beta * kl + v_l, aux_l, v_l, kl]
}

fn batch(d: &Data) -> AuxBatch<'_> {
    AuxBatch { observations: &d.obs, returns: &d.returns, old_head: &d.old_head, old_log_std: &d.old_log_std }
}

/// The loss and its parts equal the float64 definition (1e-5 relative: the network's tanh is a
/// rational approximation good to ~2e-7), and its gradient equals the reference's central
/// differences along random directions (every parameter moves: the actor through V_aux and the
/// KL, the critic through its own value loss, the log-std through the Gaussian KL).
#[test]
fn aux_loss_is_its_definition_and_its_gradient_matches_finite_differences() {
    for action in actions() {
        let mut net = ActorCritic::new(spec(action.clone()), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(5)).unwrap();
        let names: Vec<String> = net.param_names();
        assert!(names.iter().any(|n| n == "aux_critic.weight"), "{names:?}");
        let d = data(&action, 7, 6);
        let beta = 0.7;
        let got = net.aux_loss(&batch(&d), beta).unwrap().values;
        let theta: Vec<Vec<f64>> =
            net.params().unwrap().iter().map(|v| v.iter().map(|&x| x as f64).collect()).collect();
        let want = reference(&theta, &action, &d, beta);
        for (i, part) in ["loss", "aux_value_loss", "value_loss", "kl"].iter().enumerate() {
            let rel = (got[i] as f64 - want[i]).abs() / want[i].abs().max(1e-3);
            assert!(rel < 1e-5, "{action:?} {part}: {} vs float64 {}", got[i], want[i]);
        }
        assert!(want[3] > 1e-2, "π_old is not the current policy: a real KL term");
        let grads = net.backward().unwrap();
        assert!(grads.iter().all(Option::is_some), "every parameter gets a gradient: {names:?}");
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..4 {
            let dir: Vec<Vec<f64>> =
                theta.iter().map(|p| p.iter().map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
            let analytic: f64 = grads
                .iter()
                .zip(&dir)
                .map(|(g, d)| g.as_ref().unwrap().iter().zip(d).map(|(&a, &b)| a as f64 * b).sum::<f64>())
                .sum();
            let h = 1e-5;
            let at = |s: f64| {
                let t: Vec<Vec<f64>> =
                    theta.iter().zip(&dir).map(|(p, d)| p.iter().zip(d).map(|(&x, &y)| x + s * y).collect()).collect();
                reference(&t, &action, &d, beta)[0]
            };
            let numeric = (at(h) - at(-h)) / (2.0 * h);
            let rel = (numeric - analytic).abs() / analytic.abs().max(1e-2);
            assert!(rel < 1e-4, "{action:?}: ∇L·d {analytic} vs central difference {numeric}");
        }
    }
}

fn params(beta_clone: f64) -> PpgParams {
    PpgParams {
        ppo: PpoParams {
            n_epochs: 1,
            batch_size: 32,
            clip_range: 0.2,
            clip_range_vf: None,
            vf_coef: 0.5,
            ent_coef: 0.0,
            max_grad_norm: Some(0.5),
            target_kl: None,
            normalize_advantage: AdvantageNorm::Batch,
            objective: Objective::Clip,
            kl_target: 0.01,
            log_kl_divergence: true,
        },
        n_iteration: 2,
        e_auxiliary: 40,
        beta_clone,
        num_aux_rollouts: 2,
    }
}

/// A buffer of 2 rollouts × 16 steps × 2 envs whose value targets are a smooth function of s.
fn filled_buffer() -> AuxBuffer {
    let mut aux = AuxBuffer::new(16, 2, OBS);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let obs: Vec<f32> = (0..64 * OBS).map(|_| rng.random_range(-1.5..1.5)).collect();
    let returns: Vec<f32> = obs.chunks(OBS).map(|s| 2.0 * s[0] - s[1] + 0.5 * s[2] * s[2]).collect();
    aux.load(&obs, &returns, 3).unwrap();
    assert_eq!(aux.rollouts(), 2);
    aux
}

/// The auxiliary phase fits V_aux and V to the targets, and the cloning term holds π: with
/// β_clone = 1 the policy ends closer to π_old than with β_clone = 0 on the same data and seed.
#[test]
fn auxiliary_phase_distils_the_value_and_the_clone_term_holds_the_policy() {
    for action in actions() {
        let aux = filled_buffer();
        let mut kl_after = Vec::new();
        for beta in [1.0, 0.0] {
            let mut net =
                ActorCritic::new(spec(action.clone()), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
            let (old_head, old_log_std) = net.dist_params_host(&aux.observations).unwrap();
            let d = Data { obs: aux.observations.clone(), returns: aux.returns.clone(), old_head, old_log_std };
            let before = net.aux_loss(&batch(&d), beta).unwrap().values;
            let sizes: Vec<usize> = net.param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
            let mut opt = Optimizer::adam(&sizes, 1e-2, 1e-8);
            let s = auxiliary_phase(&mut net, &mut opt, &aux, &params(beta), 1e-2, &mut ChaCha8Rng::seed_from_u64(4))
                .unwrap();
            assert_eq!(s.minibatches, 40 * 2, "4 env rollouts in minibatches of 2, 40 epochs");
            assert_eq!(opt.t, 80);
            let after = net.aux_loss(&batch(&d), beta).unwrap().values;
            assert!(after[1] < 0.2 * before[1], "{action:?} β {beta}: V_aux loss {} → {}", before[1], after[1]);
            assert!(after[2] < 0.2 * before[2], "{action:?} β {beta}: V loss {} → {}", before[2], after[2]);
            kl_after.push(after[3]);
        }
        assert!(kl_after[0] < 0.5 * kl_after[1], "{action:?}: KL with β_clone 1 {} vs 0 {}", kl_after[0], kl_after[1]);
    }
}

/// A trainer on CartPole with N_π = 2 over 5 iterations: the auxiliary phase follows the
/// policy phase of iterations 2 and 4, not 1, 3 or 5; a run of 4 skips the one after its last.
#[test]
fn the_auxiliary_phase_runs_after_every_n_iteration_rollouts() {
    for (updates, with_aux) in [(5u64, vec![2u64, 4]), (4, vec![2])] {
        let sets: Vec<String> =
            ["n_envs=2", "n_steps=32", "batch_size=32", "n_iteration=2", "e_auxiliary=2", "num_aux_rollouts=1"]
                .iter()
                .map(|s| s.to_string())
                .chain([format!("total_timesteps={}", updates * 64)])
                .collect();
        let cfg = Config::resolve("ppg", None, &sets).unwrap();
        let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
        let mut seen = Vec::new();
        while !tr.is_done() {
            let r = tr.step().unwrap();
            if let Some(a) = r.stats.aux {
                assert_eq!(a.minibatches, 2 * 4, "2 epochs over 2 rollouts × 2 envs, one env rollout each");
                assert!(a.kl.is_finite() && a.kl >= 0.0 && a.value_loss.is_finite());
                seen.push(r.update);
            }
            assert!(r.stats.policy_loss.is_finite());
        }
        assert_eq!(seen, with_aux, "a run of {updates} iterations");
        assert_eq!(tr.policy.backend().as_str(), "candle", "backend = auto puts PPG on candle");
    }
}

/// A damaged auxiliary buffer is refused with a checkpoint error, not taken; the fused
/// backend refuses the auxiliary head.
#[test]
fn bad_buffers_and_backends_are_clear_errors() {
    let mut aux = AuxBuffer::new(16, 2, OBS);
    let obs = vec![0.0f32; 32 * OBS];
    for (o, r, max, want) in [
        (&obs[..32 * OBS - 1], &[0.0f32; 32][..], 3, "not whole rollouts"),
        (&obs[..], &[0.0f32; 32][..], 1, "an auxiliary phase runs after every 1"),
        (&obs[..], &[f32::NAN; 32][..], 3, "non-finite"),
    ] {
        match aux.load(o, r, max) {
            Err(ProximaError::Checkpoint(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(aux.rollouts(), 0, "nothing is taken from a refused buffer");
    }
    let err = FusedMlp::new(spec(ActionKind::Discrete { n: 2 }), &mut ChaCha8Rng::seed_from_u64(0)).unwrap_err();
    assert!(err.to_string().contains("auxiliary value head"), "{err}");
    // A network without the head refuses the auxiliary loss.
    let mut plain = ActorCritic::new(
        PolicySpec { aux_value_head: false, ..spec(ActionKind::Discrete { n: 2 }) },
        &Device::Cpu,
        &mut ChaCha8Rng::seed_from_u64(0),
    )
    .unwrap();
    let d = data(&ActionKind::Discrete { n: 2 }, 2, 1);
    let err = plain.aux_loss(&batch(&d), 1.0).unwrap_err();
    assert!(err.to_string().contains("no auxiliary value head"), "{err}");
}
