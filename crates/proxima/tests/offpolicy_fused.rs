//! SAC, TD3 and DDPG on the fused kernels against candle: the same initial values from a seed;
//! every gradient of a gradient step (the critics' loss, then the actor's through the critics
//! and the squashed sample) equal to candle's autograd on the same batch and noise; whole
//! training steps that stay together; bit-identical reruns.

use candle_core::{DType, Tensor, Var};
use proxima::algo::offpolicy::LoopParams;
use proxima::algo::sac::{actor_loss, critic_loss, soft_q_target, EntCoef, Sac, SacParams};
use proxima::algo::td3::{td3_actor_loss, td3_target, Td3, Td3Params};
use proxima::policy::fused::{FusedOffPolicy, ACTOR, CRITICS};
use proxima::policy::offpolicy::squashed_sample;
use proxima::policy::{ActionKind, Activation, ActorKind, OffPolicyNets, Policy, PolicySpec};
use proxima::replay::{ReplayBuffer, ReplaySample};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

const BATCH: usize = 48;

/// 7 observations, 3 actions; hidden widths from narrow (below the kernels' 8) to wide.
fn spec(net_arch: &[usize]) -> PolicySpec {
    PolicySpec {
        cnn: None,
        obs_dim: 7,
        action: ActionKind::Continuous { dim: 3, low: vec![-2.0, -1.0, 0.0], high: vec![2.0, 3.0, 1.0] },
        net_arch: net_arch.to_vec(),
        activation: Activation::Relu,
        shared_trunk: false,
        log_std_init: 0.0,
        ortho_init: false,
        aux_value_head: false,
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// A buffer of 200 random transitions (1 env), some terminal.
fn filled_buffer(spec: &PolicySpec) -> ReplayBuffer {
    let (od, ad) = (spec.obs_dim, spec.action.act_dim());
    let mut rb = ReplayBuffer::new(1000, 1, od, ad).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for _ in 0..200 {
        let o: Vec<f32> = (0..od).map(|_| rng.random_range(-2.0..2.0)).collect();
        let o2: Vec<f32> = (0..od).map(|_| rng.random_range(-2.0..2.0)).collect();
        let a: Vec<f32> = (0..ad).map(|_| rng.random_range(-1.0..1.0)).collect();
        let r = [rng.random_range(-1.0f32..1.0)];
        rb.add(&o, &o2, &a, &r, &[rng.random_bool(0.1)], &[false]).unwrap();
    }
    rb
}

fn sizes(nets: &FusedOffPolicy) -> (Vec<usize>, Vec<usize>) {
    (nets.sizes(ACTOR), nets.sizes(CRITICS))
}

fn looping() -> LoopParams {
    LoopParams { learning_starts: 0, train_freq: 1, gradient_steps: 1, batch_size: BATCH }
}

fn sac_params(ent_coef: EntCoef) -> SacParams {
    SacParams { looping: looping(), gamma: 0.97, tau: 0.05, target_update_interval: 1, target_entropy: -3.0, ent_coef }
}

fn td3_params(policy_delay: usize, smoothing: bool) -> Td3Params {
    Td3Params {
        looping: looping(),
        gamma: 0.97,
        tau: 0.05,
        policy_delay,
        target_policy_noise: if smoothing { 0.2 } else { 0.0 },
        target_noise_clip: if smoothing { 0.5 } else { 0.0 },
        noise_std: 0.1,
    }
}

fn tensor(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, &candle_core::Device::Cpu).unwrap()
}

/// candle's gradient of `loss` in each of `vars`, concatenated in order (0 where none).
fn grads_of(loss: &Tensor, vars: &[(String, Var)]) -> Vec<f32> {
    let store = loss.backward().unwrap();
    vars.iter()
        .flat_map(|(_, v)| match store.get(v.as_tensor()) {
            Some(g) => g.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            None => vec![0.0; v.elem_count()],
        })
        .collect()
}

/// Every element of `got` within 1e-5 of `want`, relative to `want`'s largest magnitude (≥ 1);
/// `want` not all zero (a gradient that vanished would compare equal to anything small).
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_near(got, want, what);
    assert!(want.iter().any(|&x| x != 0.0), "{what}: the reference gradient is all zero");
}

/// [`assert_close`] without the non-zero check.
fn assert_near(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1f32, |m, &x| m.max(x.abs()));
    let (i, worst) =
        got.iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .enumerate()
            .fold((0, 0f32), |m, (i, d)| if d > m.1 { (i, d) } else { m });
    assert!(
        worst <= 1e-5 * scale,
        "{what}: |Δ| {worst:e} at {i} (fused {} vs candle {}; scale {scale})",
        got[i],
        want[i]
    );
}

/// The batch and the N(0, 1) draws (`draws` arrays of `n` f32) a gradient step makes after it,
/// from a copy of its generator.
fn draws(rb: &ReplayBuffer, rng: &ChaCha8Rng, arrays: usize, n: usize) -> (ReplaySample, Vec<Vec<f32>>) {
    let mut r = rng.clone();
    let mut s = ReplaySample::default();
    rb.sample_into(BATCH, &mut r, &mut s).unwrap();
    let eps = (0..arrays).map(|_| (0..n).map(|_| r.sample::<f32, _>(StandardNormal)).collect()).collect();
    (s, eps)
}

/// One SAC gradient step at learning rate 0 on the fused networks (so every loss is taken at
/// the initial values): its critics' and actor's gradients equal candle's autograd of
/// `critic_loss` and `actor_loss` on the same batch and noise.
#[test]
fn sac_gradients_equal_candles_autograd() {
    for net_arch in [vec![64, 32], vec![5, 6], vec![20]] {
        let spec = spec(&net_arch);
        let candle =
            OffPolicyNets::new(spec.clone(), ActorKind::SquashedGaussian, 2, &mut ChaCha8Rng::seed_from_u64(3))
                .unwrap();
        let mut fused =
            FusedOffPolicy::new(spec.clone(), ActorKind::SquashedGaussian, 2, &mut ChaCha8Rng::seed_from_u64(3))
                .unwrap();
        assert_eq!(fused.params().unwrap(), candle.params().unwrap(), "the same initial values from a seed");
        let rb = filled_buffer(&spec);
        let mut sac = Sac::new(
            sac_params(EntCoef::Auto(0.7)),
            rb.clone(),
            (&fused.sizes(ACTOR), &fused.sizes(CRITICS)),
            3e-4,
            1e-8,
        );
        let rng = ChaCha8Rng::seed_from_u64(5);
        let (s, eps) = draws(&rb, &rng, 2, BATCH * 3);
        let losses = sac.fused_gradient_step(&mut fused, 0.0, &mut rng.clone()).unwrap();
        let online = fused.sizes(ACTOR).len() + fused.sizes(CRITICS).len();
        assert_eq!(fused.params().unwrap()[..online], candle.params().unwrap()[..online], "lr 0 leaves θ as it was");
        // candle, step by step, on the same batch and noise.
        let (b, od, ad) = (BATCH, 7, 3);
        let (obs, next_obs) = (tensor(&s.observations, &[b, od]), tensor(&s.next_observations, &[b, od]));
        let (mean, log_std) = candle.actor_dist(&obs).unwrap();
        let (a_pi, log_prob) = squashed_sample(&mean, &log_std, &tensor(&eps[0], &[b, ad])).unwrap();
        let alpha = 0.7;
        let (m2, ls2) = candle.actor_dist(&next_obs).unwrap();
        let (a2, lp2) = squashed_sample(&m2.detach(), &ls2.detach(), &tensor(&eps[1], &[b, ad])).unwrap();
        let q_next = candle.q_values(&next_obs, &a2, true).unwrap();
        let y = soft_q_target(&q_next, &lp2, &tensor(&s.rewards, &[b]), &tensor(&s.dones, &[b]), 0.97, alpha).unwrap();
        let lq = critic_loss(&candle.q_values(&obs, &tensor(&s.actions, &[b, ad]), false).unwrap(), &y).unwrap();
        let lq_value = lq.to_scalar::<f32>().unwrap() as f64;
        assert!(
            (losses.critic_loss - lq_value).abs() <= 1e-5 * lq_value.abs().max(1.0),
            "critic loss {} vs {lq_value}",
            losses.critic_loss
        );
        assert_close(fused.grads(CRITICS), &grads_of(&lq, candle.critic_params()), &format!("{net_arch:?}: ∇ critics"));
        let lpi = actor_loss(&log_prob, &candle.q_values(&obs, &a_pi, false).unwrap(), alpha).unwrap();
        let lpi_value = lpi.to_scalar::<f32>().unwrap() as f64;
        let actor = losses.actor_loss.unwrap();
        assert!((actor - lpi_value).abs() <= 1e-5 * lpi_value.abs().max(1.0), "actor loss {actor} vs {lpi_value}");
        assert_close(fused.grads(ACTOR), &grads_of(&lpi, candle.actor_params()), &format!("{net_arch:?}: ∇ actor"));
    }
}

/// The same for TD3 (two critics, smoothing) and DDPG (one critic, none): the critics' loss
/// Σ_k mean((Q_k − y)²) and the actor's −mean Q_0(s, μ(s)).
#[test]
fn td3_and_ddpg_gradients_equal_candles_autograd() {
    for (n_critics, smoothing) in [(2, true), (1, false)] {
        let spec = spec(&[64, 32]);
        let kind = ActorKind::Deterministic;
        let candle = OffPolicyNets::new(spec.clone(), kind, n_critics, &mut ChaCha8Rng::seed_from_u64(4)).unwrap();
        let mut fused = FusedOffPolicy::new(spec.clone(), kind, n_critics, &mut ChaCha8Rng::seed_from_u64(4)).unwrap();
        assert_eq!(fused.params().unwrap(), candle.params().unwrap());
        let rb = filled_buffer(&spec);
        let p = td3_params(1, smoothing);
        let mut td3 = Td3::new(p, rb.clone(), (&fused.sizes(ACTOR), &fused.sizes(CRITICS)), 3e-4, 1e-8);
        let rng = ChaCha8Rng::seed_from_u64(6);
        let mut r = rng.clone();
        let mut s = ReplaySample::default();
        rb.sample_into(BATCH, &mut r, &mut s).unwrap();
        let noise: Vec<f32> = (0..BATCH * 3)
            .map(|_| {
                let e: f64 = r.sample(StandardNormal);
                (e * p.target_policy_noise).clamp(-p.target_noise_clip, p.target_noise_clip) as f32
            })
            .collect();
        let losses = td3.fused_gradient_step(&mut fused, 0.0, &mut rng.clone()).unwrap();
        let (b, od, ad) = (BATCH, 7, 3);
        let (obs, next_obs) = (tensor(&s.observations, &[b, od]), tensor(&s.next_observations, &[b, od]));
        let a2 = (candle.actor_action(&next_obs, true).unwrap() + tensor(&noise, &[b, ad]))
            .unwrap()
            .clamp(-1.0, 1.0)
            .unwrap();
        let y = td3_target(
            &candle.q_values(&next_obs, &a2, true).unwrap(),
            &tensor(&s.rewards, &[b]),
            &tensor(&s.dones, &[b]),
            0.97,
        )
        .unwrap();
        let lq =
            proxima::algo::sac::sum_of_mse(&candle.q_values(&obs, &tensor(&s.actions, &[b, ad]), false).unwrap(), &y)
                .unwrap();
        let lq_value = lq.to_scalar::<f32>().unwrap() as f64;
        assert!((losses.critic_loss - lq_value).abs() <= 1e-5 * lq_value.abs().max(1.0));
        assert_close(
            fused.grads(CRITICS),
            &grads_of(&lq, candle.critic_params()),
            &format!("{n_critics} critics: ∇ critics"),
        );
        let mu = candle.actor_action(&obs, false).unwrap();
        let la = td3_actor_loss(&candle.q_values(&obs, &mu, false).unwrap().swap_remove(0)).unwrap();
        let la_value = la.to_scalar::<f32>().unwrap() as f64;
        assert!((losses.actor_loss.unwrap() - la_value).abs() <= 1e-5 * la_value.abs().max(1.0));
        assert_close(
            fused.grads(ACTOR),
            &grads_of(&la, candle.actor_params()),
            &format!("{n_critics} critics: ∇ actor"),
        );
    }
}

/// 30 whole gradient steps (Adam, the temperature, Polyak averaging) on each backend from the
/// same values, batches and noise: the losses stay within 1e-3 of each other (the backends' sums
/// round differently, and Adam's first steps amplify tiny gradients' differences), and a rerun
/// of the fused steps gives the same bits, on one thread or two (critics side by side).
#[test]
fn whole_steps_stay_with_candle_and_rerun_bit_for_bit() {
    for (kind, n_critics) in
        [(ActorKind::SquashedGaussian, 2), (ActorKind::Deterministic, 2), (ActorKind::Deterministic, 1)]
    {
        let spec = spec(&[64, 64]);
        let run_fused = |threads: usize| {
            let mut nets =
                FusedOffPolicy::new(spec.clone(), kind, n_critics, &mut ChaCha8Rng::seed_from_u64(8)).unwrap();
            nets.set_threads(threads);
            let (a, c) = sizes(&nets);
            let rb = filled_buffer(&spec);
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let mut out = Vec::new();
            match kind {
                ActorKind::SquashedGaussian => {
                    let mut sac = Sac::new(sac_params(EntCoef::Auto(1.0)), rb, (&a, &c), 1e-3, 1e-8);
                    for _ in 0..30 {
                        out.push(sac.fused_gradient_step(&mut nets, 1e-3, &mut rng).unwrap());
                    }
                }
                ActorKind::Deterministic => {
                    let mut td3 = Td3::new(td3_params(2, n_critics == 2), rb, (&a, &c), 1e-3, 1e-8);
                    for _ in 0..30 {
                        out.push(td3.fused_gradient_step(&mut nets, 1e-3, &mut rng).unwrap());
                    }
                }
            }
            (out, nets.params().unwrap())
        };
        let (fused, theta) = run_fused(1);
        assert_eq!(run_fused(1), (fused.clone(), theta.clone()), "{kind:?}: a rerun gives other bits");
        assert_eq!(run_fused(2), (fused.clone(), theta), "{kind:?}: two threads give other bits");
        let candle = OffPolicyNets::new(spec.clone(), kind, n_critics, &mut ChaCha8Rng::seed_from_u64(8)).unwrap();
        let sizes_c = |p: &[(String, Var)]| p.iter().map(|(_, v)| v.elem_count()).collect::<Vec<_>>();
        let (a, c) = (sizes_c(candle.actor_params()), sizes_c(candle.critic_params()));
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let reference: Vec<_> = match kind {
            ActorKind::SquashedGaussian => {
                let mut sac = Sac::new(sac_params(EntCoef::Auto(1.0)), filled_buffer(&spec), (&a, &c), 1e-3, 1e-8);
                (0..30).map(|_| sac.gradient_step(&candle, 1e-3, &mut rng).unwrap()).collect()
            }
            ActorKind::Deterministic => {
                let mut td3 = Td3::new(td3_params(2, n_critics == 2), filled_buffer(&spec), (&a, &c), 1e-3, 1e-8);
                (0..30).map(|_| td3.gradient_step(&candle, 1e-3, &mut rng).unwrap()).collect()
            }
        };
        for (k, (f, c)) in fused.iter().zip(&reference).enumerate() {
            let near = |x: f64, y: f64| (x - y).abs() <= 1e-3 * y.abs().max(1.0);
            assert!(
                near(f.critic_loss, c.critic_loss),
                "{kind:?} step {k}: critic loss {} vs {}",
                f.critic_loss,
                c.critic_loss
            );
            assert_eq!(f.actor_loss.is_some(), c.actor_loss.is_some());
            if let (Some(x), Some(y)) = (f.actor_loss, c.actor_loss) {
                assert!(near(x, y), "{kind:?} step {k}: actor loss {x} vs {y}");
            }
        }
    }
}

/// Acting on the fused networks: the actions and values candle's give (SAC's sample from the
/// same ε, its deterministic action, TD3's μ), to 1e-5.
#[test]
fn fused_acting_equals_candles() {
    for kind in [ActorKind::SquashedGaussian, ActorKind::Deterministic] {
        let spec = spec(&[64, 32]);
        let candle = OffPolicyNets::new(spec.clone(), kind, 2, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
        let fused = FusedOffPolicy::new(spec.clone(), kind, 2, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
        let obs: Vec<f32> = (0..5 * 7).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
        for deterministic in [true, false] {
            let c = candle.act(&obs, deterministic, &mut ChaCha8Rng::seed_from_u64(2)).unwrap();
            let f = fused.act(&obs, deterministic, &mut ChaCha8Rng::seed_from_u64(2)).unwrap();
            assert_close(&f.actions, &c.actions, "actions");
            assert_close(&f.values, &c.values, "values");
            assert_near(&f.log_probs, &c.log_probs, "log π");
        }
        assert_close(&fused.predict_values(&obs).unwrap(), &candle.predict_values(&obs).unwrap(), "predict_values");
    }
}

/// TQC (SAC's actor, 3 critics of 5 quantiles, 2 dropped per critic): one gradient step at
/// learning rate 0 on the fused networks, against candle's autograd of the truncated target, the
/// quantile Huber loss and the actor loss on the same batch and noise; then 20 whole steps on
/// each backend stay within 1e-3, and a two-thread fused run gives the same bits.
#[test]
fn tqc_gradients_equal_candles_autograd_and_whole_steps_stay_with_it() {
    use proxima::algo::tqc::{quantile_huber_loss, tqc_actor_loss, truncated_target, Tqc};
    use proxima::policy::OffPolicyShape;
    let spec = spec(&[64, 32]);
    let shape = OffPolicyShape { kind: ActorKind::SquashedGaussian, n_critics: 3, quantiles: 5 };
    let candle = OffPolicyNets::with_shape(spec.clone(), shape, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
    let fused_at = |threads: usize| {
        let mut f = FusedOffPolicy::with_shape(spec.clone(), shape, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
        f.set_threads(threads);
        f
    };
    let mut fused = fused_at(1);
    assert_eq!(fused.params().unwrap(), candle.params().unwrap(), "the same initial values from a seed");
    let rb = filled_buffer(&spec);
    let tqc = |sizes: (&[usize], &[usize])| Tqc {
        sac: Sac::new(sac_params(EntCoef::Auto(0.7)), rb.clone(), sizes, 3e-4, 1e-8),
        n_quantiles: 5,
        top_quantiles_to_drop_per_net: 2,
    };
    let (sa, sc) = (fused.sizes(ACTOR), fused.sizes(CRITICS));
    let mut t = tqc((&sa, &sc));
    let rng = ChaCha8Rng::seed_from_u64(5);
    let (s, eps) = draws(&rb, &rng, 2, BATCH * 3);
    let losses = t.fused_gradient_step(&mut fused, 0.0, &mut rng.clone()).unwrap();
    let (b, od, ad) = (BATCH, 7, 3);
    let (obs, next_obs) = (tensor(&s.observations, &[b, od]), tensor(&s.next_observations, &[b, od]));
    let (mean, log_std) = candle.actor_dist(&obs).unwrap();
    let (a_pi, log_prob) = squashed_sample(&mean, &log_std, &tensor(&eps[0], &[b, ad])).unwrap();
    let (m2, ls2) = candle.actor_dist(&next_obs).unwrap();
    let (a2, lp2) = squashed_sample(&m2.detach(), &ls2.detach(), &tensor(&eps[1], &[b, ad])).unwrap();
    let z_next = candle.quantiles(&next_obs, &a2, true).unwrap();
    let y =
        truncated_target(&z_next, &lp2, (&tensor(&s.rewards, &[b]), &tensor(&s.dones, &[b])), (0.97, 0.7), 2).unwrap();
    let lq = quantile_huber_loss(&candle.quantiles(&obs, &tensor(&s.actions, &[b, ad]), false).unwrap(), &y).unwrap();
    let lq_value = lq.to_scalar::<f32>().unwrap() as f64;
    assert!(
        (losses.critic_loss - lq_value).abs() <= 1e-5 * lq_value.abs().max(1.0),
        "critic loss {} vs {lq_value}",
        losses.critic_loss
    );
    assert_close(fused.grads(CRITICS), &grads_of(&lq, candle.critic_params()), "TQC ∇ critics");
    let lpi = tqc_actor_loss(&log_prob, &candle.quantiles(&obs, &a_pi, false).unwrap(), 0.7).unwrap();
    let lpi_value = lpi.to_scalar::<f32>().unwrap() as f64;
    let actor = losses.actor_loss.unwrap();
    assert!((actor - lpi_value).abs() <= 1e-5 * lpi_value.abs().max(1.0), "actor loss {actor} vs {lpi_value}");
    assert_close(fused.grads(ACTOR), &grads_of(&lpi, candle.actor_params()), "TQC ∇ actor");
    // Whole steps.
    let run_fused = |threads: usize| {
        let mut nets = fused_at(threads);
        let mut t = tqc((&sa, &sc));
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let out: Vec<_> = (0..20).map(|_| t.fused_gradient_step(&mut nets, 1e-3, &mut rng).unwrap()).collect();
        (out, nets.params().unwrap())
    };
    let (f1, theta) = run_fused(1);
    assert_eq!(run_fused(2), (f1.clone(), theta), "two threads give other bits");
    let mut t = tqc((&sa, &sc));
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for (k, f) in f1.iter().enumerate() {
        let c = t.gradient_step(&candle, 1e-3, &mut rng).unwrap();
        let near = |x: f64, y: f64| (x - y).abs() <= 1e-3 * y.abs().max(1.0);
        assert!(near(f.critic_loss, c.critic_loss), "step {k}: critic loss {} vs {}", f.critic_loss, c.critic_loss);
        assert!(near(f.actor_loss.unwrap(), c.actor_loss.unwrap()), "step {k}: actor loss");
    }
}
