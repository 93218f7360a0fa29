//! The fused backend against the candle backend (the reference) and against finite
//! differences: same weights and minibatch → the same loss, gradients and updated parameters,
//! for every objective × action space × trunk × activation.

use proxima::algo::update::apply_gradients;
use proxima::config::Objective;
use proxima::loss::PpoCoefs;
use proxima::optim::Optimizer;
use proxima::policy::fused::FusedMlp;
use proxima::policy::{ActionKind, Activation, ActorCritic, Policy, PolicySpec};
use proxima::rollout::Minibatch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[path = "support/backends.rs"]
mod backends;
use backends::assert_close;

const OBS_DIM: usize = 5;
const B: usize = 37;

fn actions() -> [(&'static str, ActionKind); 3] {
    [
        ("discrete", ActionKind::Discrete { n: 3 }),
        ("multidiscrete", ActionKind::MultiDiscrete { nvec: vec![3, 2] }),
        ("gaussian", ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] }),
    ]
}

fn spec(action: ActionKind, shared: bool, activation: Activation) -> PolicySpec {
    PolicySpec {
        cnn: None,
        obs_dim: OBS_DIM,
        action,
        net_arch: vec![24, 16],
        activation,
        shared_trunk: shared,
        log_std_init: -0.4,
        ortho_init: false, // U(±1/√fan_in): a policy head far from 0, so ratios spread out
        aux_value_head: false,
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// Both backends built from one RNG state (they draw the same initial values).
fn pair(spec: &PolicySpec, seed: u64) -> (ActorCritic, FusedMlp) {
    let c = ActorCritic::new(spec.clone(), &candle_core::Device::Cpu, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap();
    let f = FusedMlp::new(spec.clone(), &mut ChaCha8Rng::seed_from_u64(seed)).unwrap();
    assert_eq!(Policy::params(&c).unwrap(), f.params().unwrap(), "same initial parameters");
    assert_eq!(Policy::param_names(&c), f.param_names());
    (c, f)
}

/// A minibatch with real actions of the candle policy, old log-probs shifted by ±0.4 (so some
/// ratios fall outside [1−ε, 1+ε] on both sides), old values ±0.5 from V (some beyond ε_v),
/// and π_θold's head a perturbation of the current one.
fn minibatch(policy: &ActorCritic, seed: u64) -> (Minibatch, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let obs: Vec<f32> = (0..B * OBS_DIM).map(|_| rng.random_range(-2.0..2.0)).collect();
    let out = Policy::act(policy, &obs, false, &mut rng).unwrap();
    let (head, log_std) = Policy::dist_params_host(policy, &obs).unwrap();
    let jitter =
        |v: &[f32], s: f32, rng: &mut ChaCha8Rng| v.iter().map(|x| x + rng.random_range(-s..s)).collect::<Vec<_>>();
    let advantages: Vec<f32> = (0..B).map(|_| rng.random_range(-2.0..2.0)).collect();
    let old_values = jitter(&out.values, 0.5, &mut rng);
    let returns = jitter(&out.values, 1.0, &mut rng);
    let mb = Minibatch {
        len: B,
        observations: obs,
        actions: out.actions,
        old_log_probs: jitter(&out.log_probs, 0.4, &mut rng),
        advantages,
        old_values,
        returns,
        old_head: jitter(&head, 0.3, &mut rng),
        action_masks: Vec::new(),
        sequences: None,
        pixels: Vec::new(),
    };
    let old_log_std = jitter(&log_std, 0.2, &mut rng);
    (mb, old_log_std)
}

enum Loss {
    Ppo(PpoCoefs),
    A2c,
}

fn losses() -> Vec<(String, Loss)> {
    let mut out = Vec::new();
    for objective in [Objective::Clip, Objective::AdaptiveKl, Objective::FixedKl, Objective::None] {
        for clip_vf in [None, Some(0.2)] {
            let coefs = PpoCoefs {
                clip_range: 0.2,
                clip_range_vf: clip_vf,
                vf_coef: 0.5,
                ent_coef: 0.01,
                objective,
                kl_coef: 0.7,
            };
            out.push((format!("{objective:?} clip_vf {clip_vf:?}"), Loss::Ppo(coefs)));
        }
    }
    out.push(("a2c".into(), Loss::A2c));
    out
}

fn eval(p: &mut dyn Policy, loss: &Loss, mb: &Minibatch, old_log_std: &[f32]) -> [f32; 4] {
    match loss {
        Loss::Ppo(c) => p.ppo_loss(mb, old_log_std, c).unwrap().values,
        Loss::A2c => p.a2c_loss(mb, 0.5, 0.01).unwrap().values,
    }
}

#[test]
fn fused_loss_gradients_and_step_agree_with_candle_everywhere() {
    let mut cases = 0;
    for (aname, action) in actions() {
        for shared in [false, true] {
            for activation in [Activation::Tanh, Activation::Relu] {
                for (lname, loss) in losses() {
                    let what = format!("{aname} shared {shared} {activation:?} {lname}");
                    let sp = spec(action.clone(), shared, activation);
                    let (mut c, mut f) = pair(&sp, 3);
                    let (mb, old_log_std) = minibatch(&c, 4);
                    let (lc, lf) = (eval(&mut c, &loss, &mb, &old_log_std), eval(&mut f, &loss, &mb, &old_log_std));
                    assert_close(&format!("{what} loss parts"), &lf, &lc, 1e-5);
                    assert_close(&format!("{what} log r"), f.log_ratio(), c.log_ratio(), 1e-5);
                    let (gc, gf) = (Policy::backward(&mut c).unwrap(), f.backward().unwrap());
                    for ((name, gc), gf) in c.param_names().iter().zip(&gc).zip(&gf) {
                        let gc = gc.clone().unwrap_or_else(|| vec![0.0; gf.as_ref().unwrap().len()]);
                        assert_close(&format!("{what} ∂L/∂{name}"), gf.as_ref().unwrap(), &gc, 1e-5);
                    }
                    // One Adam step each, through the seam (candle: host copies; fused: flat, in place).
                    let sizes: Vec<usize> = sp.param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
                    let (mut oc, mut of) = (Optimizer::adam(&sizes, 1e-3, 1e-5), Optimizer::adam(&sizes, 1e-3, 1e-5));
                    eval(&mut c, &loss, &mb, &old_log_std);
                    eval(&mut f, &loss, &mb, &old_log_std);
                    let ic = apply_gradients(&mut c, &mut oc, Some(0.5)).unwrap();
                    let i_f = apply_gradients(&mut f, &mut of, Some(0.5)).unwrap();
                    assert!((ic.grad_norm - i_f.grad_norm).abs() <= 1e-5 * ic.grad_norm, "{what} grad norm");
                    // θ after the step to 1e-5 of θ's scale (a bias starting at 0 moves by ≈ lr·g/(|g| + eps):
                    // near g = 0 Adam's first step amplifies a gradient's last bits by lr/eps).
                    let (pc, pf) = (Policy::params(&c).unwrap(), f.params().unwrap());
                    let (pc, pf): (Vec<f32>, Vec<f32>) = (pc.concat(), pf.concat());
                    assert_close(&format!("{what} updated θ"), &pf, &pc, 1e-5);
                    for ((name, mc), mf) in c.param_names().iter().zip(&oc.m).zip(&of.m) {
                        assert_close(&format!("{what} Adam m of {name}"), mf, mc, 1e-5);
                    }
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 3 * 2 * 2 * 9);
}

#[test]
fn fused_inference_agrees_with_candle() {
    for (aname, action) in actions() {
        for shared in [false, true] {
            let sp = spec(action.clone(), shared, Activation::Tanh);
            let (c, f) = pair(&sp, 11);
            let (mb, _) = minibatch(&c, 12);
            let (hc, sc) = Policy::dist_params_host(&c, &mb.observations).unwrap();
            let (hf, sf) = f.dist_params_host(&mb.observations).unwrap();
            assert_close(&format!("{aname} head"), &hf, &hc, 1e-5);
            assert_eq!(sf, sc);
            let vc = Policy::predict_values(&c, &mb.observations).unwrap();
            assert_close(&format!("{aname} values"), &f.predict_values(&mb.observations).unwrap(), &vc, 1e-5);
            let kc = Policy::rollout_kl(&c, &mb.observations, &mb.old_head, &sc, None).unwrap();
            let kf = f.rollout_kl(&mb.observations, &mb.old_head, &sc, None).unwrap();
            assert!((kc - kf).abs() <= 1e-5 * kc.abs().max(1e-6), "{aname} rollout KL {kf} vs {kc}");
            // Deterministic actions: the mode of the same head.
            let mut rng = ChaCha8Rng::seed_from_u64(0);
            let (ac, af) = (
                Policy::act(&c, &mb.observations, true, &mut rng).unwrap(),
                f.act(&mb.observations, true, &mut rng).unwrap(),
            );
            assert_close(&format!("{aname} deterministic actions"), &af.actions, &ac.actions, 1e-5);
            assert_close(&format!("{aname} their log-probs"), &af.log_probs, &ac.log_probs, 1e-5);
        }
    }
}

/// L(θ) of the fused network as f64, for finite differences.
fn loss_at(f: &mut FusedMlp, theta: &[Vec<f32>], loss: &Loss, mb: &Minibatch, old_log_std: &[f32]) -> f64 {
    f.set_params(theta).unwrap();
    eval(f, loss, mb, old_log_std)[0] as f64
}

/// The directional derivative ∇L·d against (L(θ+hd) − L(θ−hd)) / 2h along random directions,
/// for smooth losses (tanh; no clipping kinks near θ: the plain and the KL surrogates, A2C).
#[test]
fn fused_gradients_match_finite_differences() {
    let smooth = |c: Objective| PpoCoefs {
        clip_range: 0.2,
        clip_range_vf: None,
        vf_coef: 0.5,
        ent_coef: 0.05,
        objective: c,
        kl_coef: 0.7,
    };
    for (aname, action) in actions() {
        for shared in [false, true] {
            for (lname, loss) in [
                ("none", Loss::Ppo(smooth(Objective::None))),
                ("kl", Loss::Ppo(smooth(Objective::FixedKl))),
                ("a2c", Loss::A2c),
            ] {
                let sp = spec(action.clone(), shared, Activation::Tanh);
                let (c, mut f) = pair(&sp, 21);
                let (mb, old_log_std) = minibatch(&c, 22);
                let theta = f.params().unwrap();
                eval(&mut f, &loss, &mb, &old_log_std);
                let g = f.backward().unwrap();
                let mut rng = ChaCha8Rng::seed_from_u64(23);
                for trial in 0..3 {
                    let mut d: Vec<Vec<f32>> =
                        theta.iter().map(|p| p.iter().map(|_| rng.random_range(-1.0f32..1.0)).collect()).collect();
                    let norm = d.iter().flatten().map(|x| x * x).sum::<f32>().sqrt();
                    d.iter_mut().flatten().for_each(|x| *x /= norm); // a unit direction
                    let analytic: f64 = g
                        .iter()
                        .zip(&d)
                        .map(|(g, d)| {
                            g.as_ref().unwrap().iter().zip(d).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>()
                        })
                        .sum();
                    let h = 1e-2f32;
                    let shift = |s: f32| -> Vec<Vec<f32>> {
                        theta.iter().zip(&d).map(|(p, d)| p.iter().zip(d).map(|(&x, &y)| x + s * y).collect()).collect()
                    };
                    let (up, down) = (shift(h), shift(-h));
                    let numeric = (loss_at(&mut f, &up, &loss, &mb, &old_log_std)
                        - loss_at(&mut f, &down, &loss, &mb, &old_log_std))
                        / (2.0 * h as f64);
                    let rel = (numeric - analytic).abs() / analytic.abs().max(1e-3);
                    assert!(
                        rel < 5e-3,
                        "{aname} shared {shared} {lname} trial {trial}: FD {numeric} vs ∇L·d {analytic} (rel {rel:e})"
                    );
                }
            }
        }
    }
}

/// A checkpoint written on one backend evaluates and resumes on the other: the parameters read
/// back exactly, the two networks agree, and the resumed run trains on.
#[test]
fn checkpoints_move_between_backends() {
    use proxima::config::{Backend, Config};
    use proxima::train::Trainer;
    for (from, to) in [(Backend::Fused, Backend::Candle), (Backend::Candle, Backend::Fused)] {
        let sets =
            ["n_envs=2", "n_steps=32", "batch_size=16", "total_timesteps=256", &format!("backend={}", from.as_str())]
                .map(String::from);
        let mut tr = Trainer::new("Pendulum-v1", Config::resolve("paper-mujoco", None, &sets).unwrap()).unwrap();
        assert_eq!(tr.policy.backend(), from);
        tr.step().unwrap();
        tr.step().unwrap();
        let path =
            std::env::temp_dir().join(format!("proxima-cross-{}-{}.safetensors", from.as_str(), std::process::id()));
        tr.save(&path).unwrap();
        let ck = proxima::checkpoint::load(&path).unwrap();
        let net = ck.build_network(to).unwrap();
        assert_eq!(net.backend(), to);
        assert_eq!(
            net.params().unwrap(),
            tr.policy.params().unwrap(),
            "{from:?} → {to:?}: parameters read back exactly"
        );
        let obs = &tr.buffer().observations.to_f32();
        let (hf, _) = tr.policy.dist_params_host(obs).unwrap();
        let (ht, _) = net.dist_params_host(obs).unwrap();
        assert_close(&format!("{from:?} → {to:?} head"), &ht, &hf, 1e-5);
        let mut resumed = Trainer::resume_on(&ck, None, Some(to)).unwrap();
        assert_eq!((resumed.policy.backend(), resumed.update), (to, 2));
        assert_eq!(resumed.policy.params().unwrap(), tr.policy.params().unwrap());
        let r = resumed.step().unwrap();
        assert!(r.stats.policy_loss.is_finite() && r.update == 3);
        std::fs::remove_file(&path).unwrap();
    }
    // TRPO is candle's alone: asking for the fused backend is a clear error, `auto` picks candle.
    let trpo = |b: &str| Config::resolve("trpo", None, &[format!("backend={b}")]);
    let e = trpo("fused").unwrap_err().to_string();
    assert!(e.contains("backend = `fused` does not cover algo = `trpo`"), "{e}");
    assert_eq!(trpo("auto").unwrap().resolved_backend(), Backend::Candle);
    let e = Config::resolve("cleanrl", None, &["backend=gpu".into()]).unwrap_err().to_string();
    assert!(e.contains("backend") && e.contains("fused"), "{e}");
}

/// `num_threads` > 1. Two threads run the actor and critic side by side: the same bits as one
/// thread (loss, log r, every gradient, inference), separate towers or a shared trunk. Four also
/// split a minibatch's rows into two shards: the one-thread loss and gradient to f32 rounding (the
/// sums are grouped differently), and the same bits on every run with the same thread count.
#[test]
fn threaded_minibatches_agree_with_one_thread_and_repeat_exactly() {
    for ((aname, action), shared) in actions().into_iter().flat_map(|a| [(a.clone(), false), (a, true)]) {
        let aname = format!("{aname} (shared trunk {shared})");
        let sp = spec(action.clone(), shared, Activation::Tanh);
        let (c, one) = pair(&sp, 31);
        let mut rng = ChaCha8Rng::seed_from_u64(32);
        // A minibatch of 256 rows (two shards of 128 at 4 threads) from the candle policy's actions.
        let obs: Vec<f32> = (0..256 * OBS_DIM).map(|_| rng.random_range(-2.0..2.0)).collect();
        let out = Policy::act(&c, &obs, false, &mut rng).unwrap();
        let (head, _) = Policy::dist_params_host(&c, &obs).unwrap();
        let mb = Minibatch {
            len: 256,
            observations: obs,
            actions: out.actions,
            old_log_probs: out.log_probs.iter().map(|l| l + rng.random_range(-0.4..0.4)).collect(),
            advantages: (0..256).map(|_| rng.random_range(-2.0..2.0)).collect(),
            old_values: out.values.iter().map(|v| v + rng.random_range(-0.5..0.5)).collect(),
            returns: out.values.iter().map(|v| v + rng.random_range(-1.0..1.0)).collect(),
            old_head: head.iter().map(|h| h + rng.random_range(-0.3..0.3)).collect(),
            action_masks: Vec::new(),
            sequences: None,
            pixels: Vec::new(),
        };
        let coefs = PpoCoefs {
            clip_range: 0.2,
            clip_range_vf: Some(0.2),
            vf_coef: 0.5,
            ent_coef: 0.01,
            objective: Objective::AdaptiveKl,
            kl_coef: 0.7,
        };
        let run = |threads: usize| {
            let mut f = FusedMlp::from_params(sp.clone(), &one.params().unwrap()).unwrap();
            f.set_threads(threads);
            let v = f.ppo_loss(&mb, &[-0.3, -0.5], &coefs).unwrap().values;
            let lr = f.log_ratio().to_vec();
            let grads = f.backward().unwrap().into_iter().map(Option::unwrap).collect::<Vec<_>>();
            let inference = (
                f.act(&mb.observations, true, &mut ChaCha8Rng::seed_from_u64(1)).unwrap(),
                f.dist_params_host(&mb.observations).unwrap(),
                f.predict_values(&mb.observations).unwrap(),
            );
            (v, lr, grads, inference)
        };
        let (v1, lr1, g1, inf1) = run(1);
        let (v2, lr2, g2, inf2) = run(2);
        assert_eq!((&v2, &lr2, &g2), (&v1, &lr1, &g1), "{aname}: two threads give one thread's bits");
        assert_eq!(inf2.0.actions, inf1.0.actions, "{aname}: inference on two threads");
        assert_eq!(
            (inf2.0.log_probs, inf2.0.values, inf2.1, inf2.2),
            (inf1.0.log_probs, inf1.0.values, inf1.1, inf1.2)
        );
        let (v4, lr4, g4, _) = run(4);
        assert_close(&format!("{aname} loss parts"), &v4, &v1, 1e-5);
        // gemm tiles a shard of 128 rows differently from 256: a row's last bits may move.
        assert_close(&format!("{aname} log r sharded"), &lr4, &lr1, 1e-5);
        for (i, (a, b)) in g4.iter().zip(&g1).enumerate() {
            assert_close(&format!("{aname} ∂L/∂θ[{i}] sharded"), a, b, 1e-5);
        }
        let (v4b, _, g4b, _) = run(4);
        assert_eq!((v4b, g4b), (v4, g4), "{aname}: the same thread count gives the same bits");
    }
}

/// A whole run with `num_threads = 2` (the towers side by side from the rollout's 512-row
/// passes to every minibatch of 128) ends with the one-thread run's parameters and statistics,
/// bit for bit.
#[test]
fn a_two_thread_run_repeats_the_one_thread_run_exactly() {
    use proxima::config::Config;
    use proxima::train::Trainer;
    let run = |threads: usize| {
        let sets = [format!("num_threads={threads}"), "total_timesteps=2048".into(), "backend=fused".into()];
        let mut tr = Trainer::new("CartPole-v1", Config::resolve("cleanrl", None, &sets).unwrap()).unwrap();
        let stats: Vec<_> = (0..4).map(|_| tr.step().unwrap().stats.policy_loss).collect();
        (tr.policy.params().unwrap(), stats)
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(two.1, one.1, "policy loss per update");
    assert_eq!(two.0, one.0, "parameters after 4 updates");
}

/// The fused backend's rows do not depend on their batch, so the head `act` returns for a few
/// rows (what the collector stores as π_θold's) is, bit for bit, what one pass over the whole
/// rollout gives (what it stored before, and what candle still computes after the rollout).
#[test]
fn the_act_time_head_is_the_batched_head_bit_for_bit() {
    for (name, action) in actions() {
        for shared in [false, true] {
            let sp = spec(action.clone(), shared, Activation::Tanh);
            let (candle, fused) = pair(&sp, 5);
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let obs: Vec<f32> = (0..B * OBS_DIM).map(|_| rng.random_range(-2.0..2.0)).collect();
            let (batched, log_std) = fused.dist_params_host(&obs).unwrap();
            let hd = sp.action.head_dim();
            for rows in obs.chunks(4 * OBS_DIM) {
                let out = fused.act(rows, false, &mut rng).unwrap();
                let n = rows.len() / OBS_DIM;
                let start = (rows.as_ptr() as usize - obs.as_ptr() as usize) / 4 / OBS_DIM;
                assert_eq!(out.head, batched[start * hd..(start + n) * hd], "{name} shared={shared}: rows {start}..");
            }
            assert_eq!(fused.dist_params_host(&[]).unwrap().1, log_std, "{name}: log σ of no rows");
            let out = Policy::act(&candle, &obs[..4 * OBS_DIM], false, &mut rng).unwrap();
            assert!(out.head.is_empty(), "{name}: candle's rows depend on the batch: no head from act");
        }
    }
}

/// Random action masks `[rows, head_dim]` for a Categorical `kind`: about half the actions
/// masked, each component of each row keeping at least one valid action.
fn random_masks(kind: &ActionKind, rows: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let comps = kind.categorical_components().expect("a Categorical action space");
    let mut masks = Vec::with_capacity(rows * kind.head_dim());
    for _ in 0..rows {
        for &n in &comps {
            let keep = rng.random_range(0..n);
            masks.extend((0..n).map(|j| u8::from(j == keep || rng.random_bool(0.5))));
        }
    }
    masks
}

/// Whether every stored action (`[rows, act_dim]`, indices) is valid under `masks`.
fn all_valid(kind: &ActionKind, actions: &[f32], masks: &[u8]) -> bool {
    let comps = kind.categorical_components().unwrap();
    let (ad, hd) = (comps.len(), kind.head_dim());
    actions.chunks(ad).zip(masks.chunks(hd)).all(|(a, m)| {
        let mut off = 0;
        a.iter().zip(&comps).all(|(&a, &n)| {
            let ok = m[off + a as usize] == 1;
            off += n;
            ok
        })
    })
}

/// Invalid-action masking (sb3-contrib's MaskablePPO) on both backends: the same masked
/// actions (never an invalid one), the same masked loss, log r, gradient and rollout KL, on
/// every path of the fused loss (one thread, the towers side by side, a shared trunk).
#[test]
fn masked_acting_loss_gradients_and_kl_agree_with_candle() {
    const ROWS: usize = 300; // ≥ the fused towers' side-by-side threshold
    let coefs = |objective| PpoCoefs {
        clip_range: 0.2,
        clip_range_vf: Some(0.2),
        vf_coef: 0.5,
        ent_coef: 0.01,
        objective,
        kl_coef: 0.7,
    };
    let losses = [Loss::Ppo(coefs(Objective::Clip)), Loss::Ppo(coefs(Objective::AdaptiveKl)), Loss::A2c];
    for (aname, action) in actions().into_iter().take(2) {
        for (shared, threads) in [(false, 1), (false, 2), (true, 2)] {
            let what = format!("{aname} shared {shared} threads {threads}");
            let sp = spec(action.clone(), shared, Activation::Tanh);
            let (mut c, mut f) = pair(&sp, 5);
            f.set_threads(threads);
            let mut rng = ChaCha8Rng::seed_from_u64(6);
            let obs: Vec<f32> = (0..ROWS * OBS_DIM).map(|_| rng.random_range(-2.0..2.0)).collect();
            let masks = random_masks(&action, ROWS, &mut rng);
            let sampled = c.act_masked(&obs, Some(&masks), false, &mut ChaCha8Rng::seed_from_u64(7)).unwrap();
            assert!(all_valid(&action, &sampled.actions, &masks), "{what}: candle sampled a masked action");
            let mut out = proxima::policy::ActOutput::default();
            f.act_into(&obs, Some(&masks), false, &mut ChaCha8Rng::seed_from_u64(7), &mut out).unwrap();
            assert!(all_valid(&action, &out.actions, &masks), "{what}: fused sampled a masked action");
            f.act_into(&obs, Some(&masks), true, &mut rng, &mut out).unwrap();
            let mode = c.act_masked(&obs, Some(&masks), true, &mut rng).unwrap();
            assert_eq!(out.actions, mode.actions, "{what}: masked modes");
            assert!(all_valid(&action, &mode.actions, &masks), "{what}: a masked mode");
            assert_close(&format!("{what} masked mode log-probs"), &out.log_probs, &mode.log_probs, 1e-5);

            let (mut old_head, log_std) = Policy::dist_params_host(&c, &obs).unwrap();
            old_head.iter_mut().for_each(|h| *h += rng.random_range(-0.3..0.3));
            proxima::policy::distributions::mask_logits_in_place(&mut old_head, &masks);
            let mb = Minibatch {
                len: ROWS,
                observations: obs.clone(),
                actions: sampled.actions.clone(),
                old_log_probs: sampled.log_probs.iter().map(|l| l + rng.random_range(-0.4..0.4)).collect(),
                advantages: (0..ROWS).map(|_| rng.random_range(-2.0..2.0)).collect(),
                old_values: sampled.values.iter().map(|v| v + rng.random_range(-0.5..0.5)).collect(),
                returns: sampled.values.iter().map(|v| v + rng.random_range(-1.0..1.0)).collect(),
                old_head,
                action_masks: masks.clone(),
                sequences: None,
                pixels: Vec::new(),
            };
            for loss in &losses {
                let (lc, lf) = (eval(&mut c, loss, &mb, &log_std), eval(&mut f, loss, &mb, &log_std));
                assert_close(&format!("{what} masked loss parts"), &lf, &lc, 1e-5);
                assert_close(&format!("{what} masked log r"), f.log_ratio(), c.log_ratio(), 1e-5);
                let (gc, gf) = (Policy::backward(&mut c).unwrap(), f.backward().unwrap());
                for ((name, gc), gf) in c.param_names().iter().zip(&gc).zip(&gf) {
                    let gc = gc.clone().unwrap_or_else(|| vec![0.0; gf.as_ref().unwrap().len()]);
                    assert_close(&format!("{what} masked ∂L/∂{name}"), gf.as_ref().unwrap(), &gc, 1e-5);
                }
            }
            // The masks change the loss: the unmasked one differs (entropy over all actions).
            let unmasked = Minibatch { action_masks: Vec::new(), ..mb.clone() };
            let (lm, lu) = (eval(&mut f, &losses[0], &mb, &log_std), eval(&mut f, &losses[0], &unmasked, &log_std));
            assert!((lm[3] - lu[3]).abs() > 1e-3, "{what}: masked entropy {} = unmasked {}", lm[3], lu[3]);
            let kc = Policy::rollout_kl(&c, &obs, &mb.old_head, &log_std, Some(&masks)).unwrap();
            let kf = f.rollout_kl(&obs, &mb.old_head, &log_std, Some(&masks)).unwrap();
            assert!(kc.is_finite() && kc > 0.0, "{what}: masked KL {kc}");
            assert!((kc - kf).abs() <= 1e-5 * kc.abs(), "{what} masked rollout KL {kf} vs {kc}");
        }
    }
}

/// Bad masks are errors on both backends, never a panic: the wrong length, a row (or a
/// MultiDiscrete component) without a valid action, masks on a continuous action space.
#[test]
fn bad_action_masks_are_errors_on_both_backends() {
    let obs = vec![0.1f32; 2 * OBS_DIM];
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let cases: [(usize, Vec<u8>, &str); 4] = [
        (0, vec![1, 1, 1, 1, 1], "expected 2 × 3"),
        (0, vec![1, 0, 1, 0, 0, 0], "row 1 allows no action"),
        (1, vec![1, 1, 1, 0, 0, 1, 1, 1, 1, 1], "row 0 allows no action in component 1"),
        (2, vec![1, 1, 1, 1], "Discrete or MultiDiscrete"),
    ];
    for (which, masks, expected) in cases {
        let (aname, action) = actions()[which].clone();
        let (c, f) = pair(&spec(action, false, Activation::Tanh), 1);
        let mut out = proxima::policy::ActOutput::default();
        for (backend, p) in [("candle", &c as &dyn Policy), ("fused", &f as &dyn Policy)] {
            let e = p.act_into(&obs, Some(&masks), false, &mut rng, &mut out).unwrap_err().to_string();
            assert!(e.contains(expected), "{backend} {aname} {masks:?}: {e}");
        }
    }
}
