//! SAC: the squashed Gaussian's log-probability against a float64 reference and finite
//! differences, each loss's gradient against finite differences (float64 networks), the target
//! networks' Polyak step, the off-policy loop (random actions before `learning_starts`) and the
//! exact resume with the replay buffer saved.

use candle_core::{DType, Device, Tensor};
use proxima::algo::sac::{actor_loss, critic_loss, ent_coef_loss, soft_q_target};
use proxima::config::{Config, ValidConfig};
use proxima::policy::offpolicy::{squashed_log_prob_f64, squashed_sample};
use proxima::policy::{ActionKind, Activation, ActorKind, OffPolicyNets, Policy, PolicySpec};
use proxima::train::Trainer;
use rand::{Rng, SeedableRng};

fn rng(seed: u64) -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, &Device::Cpu).unwrap()
}

fn vec64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap()
}

/// log π of a = tanh(μ + σ·ε) equals the definition in float64 (including saturated u, where a
/// naive log(1 − tanh²u) is −∞), in f32 to 1e-5 relative, and its gradient in μ and log σ equals
/// central finite differences of the reference.
#[test]
fn squashed_log_prob_matches_the_float64_definition_and_finite_differences() {
    let (b, d) = (5, 3);
    let mut r = rng(1);
    let mut mean: Vec<f64> = (0..b * d).map(|_| r.random_range(-2.0..2.0)).collect();
    let log_std: Vec<f64> = (0..b * d).map(|_| r.random_range(-1.5..0.5)).collect();
    let eps: Vec<f64> = (0..b * d).map(|_| r.random_range(-2.0..2.0)).collect();
    mean[0] = 12.0; // u ≈ 12: 1 − tanh²u is 1.5e-10 in f64, 0 in f32
    let (m, ls, e) = (t64(&mean, &[b, d]), t64(&log_std, &[b, d]), t64(&eps, &[b, d]));
    let (m, ls) = (candle_core::Var::from_tensor(&m).unwrap(), candle_core::Var::from_tensor(&ls).unwrap());
    let (a, lp) = squashed_sample(m.as_tensor(), ls.as_tensor(), &e).unwrap();
    let lp = vec64(&lp);
    let row = |v: &[f64], i: usize| v[i * d..(i + 1) * d].to_vec();
    for i in 0..b {
        let want = squashed_log_prob_f64(&row(&mean, i), &row(&log_std, i), &row(&eps, i));
        assert!((lp[i] - want).abs() < 1e-9 * want.abs().max(1.0), "row {i}: {} vs {want}", lp[i]);
    }
    assert!(vec64(&a).iter().all(|x| x.abs() <= 1.0));
    // f32, as training runs it: finite where the naive formula is not, and close.
    let f32t = |v: &[f64]| t64(v, &[b, d]).to_dtype(DType::F32).unwrap();
    let (_, lp32) = squashed_sample(&f32t(&mean), &f32t(&log_std), &f32t(&eps)).unwrap();
    for (x, y) in vec64(&lp32).iter().zip(&lp) {
        assert!(x.is_finite() && (x - y).abs() < 1e-5 * y.abs().max(1.0), "f32 {x} vs f64 {y}");
    }
    // ∇ of Σ log π against central differences of the reference.
    let (_, lp_t) = squashed_sample(m.as_tensor(), ls.as_tensor(), &e).unwrap();
    let g = lp_t.sum_all().unwrap().backward().unwrap();
    let (gm, gls) = (vec64(g.get(m.as_tensor()).unwrap()), vec64(g.get(ls.as_tensor()).unwrap()));
    let total = |mean: &[f64], log_std: &[f64]| -> f64 {
        (0..b).map(|i| squashed_log_prob_f64(&row(mean, i), &row(log_std, i), &row(&eps, i))).sum()
    };
    let h = 1e-6;
    for k in 0..b * d {
        let (mut up, mut dn) = (mean.clone(), mean.clone());
        up[k] += h;
        dn[k] -= h;
        let fd = (total(&up, &log_std) - total(&dn, &log_std)) / (2.0 * h);
        assert!((gm[k] - fd).abs() < 1e-5 * fd.abs().max(1.0), "∂/∂μ[{k}]: {} vs {fd}", gm[k]);
        let (mut up, mut dn) = (log_std.clone(), log_std.clone());
        up[k] += h;
        dn[k] -= h;
        let fd = (total(&mean, &up) - total(&mean, &dn)) / (2.0 * h);
        assert!((gls[k] - fd).abs() < 1e-5 * fd.abs().max(1.0), "∂/∂logσ[{k}]: {} vs {fd}", gls[k]);
    }
}

fn tiny_spec() -> PolicySpec {
    PolicySpec {
        cnn: None,
        obs_dim: 3,
        action: ActionKind::Continuous { dim: 2, low: vec![-2.0, -1.0], high: vec![2.0, 3.0] },
        net_arch: vec![6, 5],
        activation: Activation::Relu,
        shared_trunk: false,
        log_std_init: 0.0,
        ortho_init: false,
        aux_value_head: false,
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// Central finite differences of `loss` in every parameter of `params` (f64 networks), against
/// the gradient candle's backward gives.
fn check_gradient(
    nets: &OffPolicyNets,
    params: &[(String, candle_core::Var)],
    loss: &dyn Fn(&OffPolicyNets) -> Tensor,
) {
    let grads = loss(nets).backward().unwrap();
    let h = 1e-6;
    let mut checked = 0;
    for (name, var) in params {
        let g = vec64(grads.get(var.as_tensor()).unwrap_or_else(|| panic!("no gradient for {name}")));
        let base = vec64(var.as_tensor());
        for k in 0..base.len() {
            let set = |x: f64| {
                let mut v = base.clone();
                v[k] = x;
                var.set(&t64(&v, var.dims())).unwrap();
            };
            set(base[k] + h);
            let up = vec64(&loss(nets))[0];
            set(base[k] - h);
            let dn = vec64(&loss(nets))[0];
            set(base[k]);
            let fd = (up - dn) / (2.0 * h);
            assert!((g[k] - fd).abs() < 1e-6 * fd.abs().max(1.0), "{name}[{k}]: backward {} vs FD {fd}", g[k]);
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked} entries checked");
}

/// J_Q's gradient in both critics and J_π's in the actor (through the reparameterised,
/// squashed sample and the critics) equal central finite differences; the target y and J(log α)
/// are their formulas.
#[test]
fn sac_losses_match_finite_differences() {
    let nets = OffPolicyNets::sac(tiny_spec(), &mut rng(3)).unwrap().with_dtype(DType::F64).unwrap();
    let b = 4;
    let mut r = rng(4);
    let mut v = |n: usize, lo: f64, hi: f64| -> Vec<f64> { (0..n).map(|_| r.random_range(lo..hi)).collect() };
    let (obs, act, eps) =
        (t64(&v(b * 3, -1.0, 1.0), &[b, 3]), t64(&v(b * 2, -0.9, 0.9), &[b, 2]), t64(&v(b * 2, -1.5, 1.5), &[b, 2]));
    let y = t64(&v(b, -2.0, 2.0), &[b]);
    let critic = |n: &OffPolicyNets| critic_loss(&n.q_values(&obs, &act, false).unwrap(), &y).unwrap();
    check_gradient(&nets, nets.critic_params(), &critic);
    let actor = |n: &OffPolicyNets| {
        let (m, ls) = n.actor_dist(&obs).unwrap();
        let (a, lp) = squashed_sample(&m, &ls, &eps).unwrap();
        actor_loss(&lp, &n.q_values(&obs, &a, false).unwrap(), 0.3).unwrap()
    };
    check_gradient(&nets, nets.actor_params(), &actor);
    // y = r + γ(1 − d)(min Q̄ − α log π'), by hand.
    let (qa, qb, lpn) = (t64(&[1.0, 5.0], &[2]), t64(&[2.0, 4.0], &[2]), t64(&[-1.0, 0.5], &[2]));
    let got =
        vec64(&soft_q_target(&[qa, qb], &lpn, &t64(&[0.5, 1.0], &[2]), &t64(&[0.0, 1.0], &[2]), 0.9, 0.2).unwrap());
    assert!((got[0] - (0.5 + 0.9 * (1.0 + 0.2))).abs() < 1e-12 && (got[1] - 1.0).abs() < 1e-12, "{got:?}");
    // J(log α) = −log α·(mean log π + H̄); its derivative by central differences.
    let (l, g) = ent_coef_loss(0.4, -1.3, -2.0);
    let fd = (ent_coef_loss(0.4 + 1e-6, -1.3, -2.0).0 - ent_coef_loss(0.4 - 1e-6, -1.3, -2.0).0) / 2e-6;
    assert!((l - 0.4 * 3.3).abs() < 1e-12 && (g - fd).abs() < 1e-8 && (g - 3.3).abs() < 1e-12);
}

/// θ̄ ← τθ + (1 − τ)θ̄ moves every target parameter by exactly τ of the gap (τ = 1 copies), and
/// nothing else moves; the targets start as copies of the critics.
#[test]
fn target_networks_move_by_exactly_tau() {
    let nets = OffPolicyNets::sac(tiny_spec(), &mut rng(5)).unwrap().with_dtype(DType::F64).unwrap();
    for ((_, t), (_, c)) in nets.target_params().iter().zip(nets.critic_params()) {
        assert_eq!(vec64(t.as_tensor()), vec64(c.as_tensor()), "targets start as the critics");
    }
    let mut r = rng(6);
    for (_, c) in nets.critic_params() {
        let v: Vec<f64> = (0..c.elem_count()).map(|_| r.random_range(-1.0..1.0)).collect();
        c.set(&t64(&v, c.dims())).unwrap();
    }
    let before: Vec<Vec<f64>> = nets.target_params().iter().map(|(_, t)| vec64(t.as_tensor())).collect();
    let actor: Vec<Vec<f64>> = nets.actor_params().iter().map(|(_, t)| vec64(t.as_tensor())).collect();
    nets.polyak_update(0.1).unwrap();
    for (((_, t), (_, c)), old) in nets.target_params().iter().zip(nets.critic_params()).zip(&before) {
        for ((x, o), c) in vec64(t.as_tensor()).iter().zip(old).zip(vec64(c.as_tensor())) {
            assert!((x - (0.1 * c + 0.9 * o)).abs() < 1e-15, "{x} vs τ-step {}", 0.1 * c + 0.9 * o);
        }
    }
    assert_eq!(actor, nets.actor_params().iter().map(|(_, t)| vec64(t.as_tensor())).collect::<Vec<_>>());
    nets.polyak_update(1.0).unwrap();
    for ((_, t), (_, c)) in nets.target_params().iter().zip(nets.critic_params()) {
        assert_eq!(vec64(t.as_tensor()), vec64(c.as_tensor()), "τ = 1 copies");
    }
}

/// Actions are rescaled from (−1, 1) to the Box; the deterministic action is tanh(μ).
#[test]
fn sac_actions_land_in_the_box() {
    let nets = OffPolicyNets::sac(tiny_spec(), &mut rng(7)).unwrap();
    let out = nets.act(&[0.1, -0.2, 0.3, 1.0, 2.0, -3.0], false, &mut rng(8)).unwrap();
    assert_eq!((out.actions.len(), out.log_probs.len(), out.values.len()), (4, 2, 2));
    let mut a = [-1.0f32, 1.0];
    nets.env_action(&mut a);
    assert_eq!(a, [-2.0, 3.0]);
    let mut a = [0.0f32, 0.0];
    nets.env_action(&mut a);
    assert_eq!(a, [0.0, 1.0]);
}

fn sac_cfg(sets: &[&str]) -> Config {
    let mut all =
        vec!["n_steps=50", "batch_size=32", "net_arch=[16, 16]", "learning_starts=100", "total_timesteps=300"];
    all.extend_from_slice(sets);
    Config::resolve("sac", None, &all.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap().into_config()
}

/// Before `learning_starts` steps SAC only stores random transitions (no gradient step, the
/// networks untouched); after it, one gradient step per env step.
#[test]
fn sac_waits_for_learning_starts_then_steps_every_env_step() {
    let mut tr = Trainer::new("Pendulum-v1", sac_cfg(&[])).unwrap();
    let before = tr.policy.params().unwrap();
    for _ in 0..2 {
        let r = tr.step().unwrap();
        assert_eq!(r.stats.minibatches, 0);
        assert!(r.stats.policy_loss.is_nan());
    }
    assert_eq!(tr.policy.params().unwrap(), before, "nothing learns before learning_starts");
    assert_eq!(tr.replay_buffer().unwrap().len(), 100);
    let r = tr.step().unwrap();
    assert_eq!(r.stats.minibatches, 50, "one gradient step per env step after learning_starts");
    assert!(r.stats.policy_loss.is_finite() && r.stats.value_loss.is_finite());
    assert!(r.stats.ent_coef.unwrap() < 1.0, "α learned down from 1 toward the target entropy");
    assert_ne!(tr.policy.params().unwrap(), before);
}

/// A step observer (the Python package's SB3 callbacks) sees every env step of the off-policy
/// loop with the step count, is told of the iteration's end, and stops the run at the step it
/// answers `false`: that step counts, its transition is not stored, no update is reported.
#[test]
fn a_step_observer_sees_every_off_policy_step_and_stops_it() {
    struct Watch {
        steps: Vec<u64>,
        ends: usize,
        stop_at: u64,
    }
    impl proxima::collect::StepObserver for Watch {
        fn on_step(&mut self, s: &proxima::collect::StepView<'_>) -> proxima::Result<bool> {
            assert_eq!(s.new_obs.len(), 3);
            self.steps.push(s.global_step);
            Ok(s.global_step < self.stop_at)
        }
        fn on_rollout_end(&mut self, _: &dyn Policy, _: &proxima::normalize::Normalizer) -> proxima::Result<()> {
            self.ends += 1;
            Ok(())
        }
    }
    let mut tr = Trainer::new("Pendulum-v1", sac_cfg(&[])).unwrap();
    let mut w = Watch { steps: Vec::new(), ends: 0, stop_at: 120 };
    assert!(tr.step_observed(Some(&mut w)).unwrap().is_some());
    assert!(tr.step_observed(Some(&mut w)).unwrap().is_some());
    assert_eq!(w.steps, (1..=100).collect::<Vec<u64>>());
    assert_eq!(w.ends, 2, "once per iteration of n_steps (50)");
    assert!(tr.step_observed(Some(&mut w)).unwrap().is_none(), "stopped at step 120");
    assert_eq!((tr.global_step, tr.update, w.ends), (120, 2, 2));
    assert_eq!(tr.replay_buffer().unwrap().len(), 119, "the stopping step's transition is not stored");
}

/// A run stopped halfway, saved with its replay buffer and resumed, ends with the same networks,
/// bit for bit, as the run that never stopped.
#[test]
fn sac_resumes_exactly_with_its_replay_buffer() {
    for backend in ["fused", "candle"] {
        sac_resumes_exactly_on(backend);
    }
}

fn sac_resumes_exactly_on(backend: &str) {
    let dir = std::env::temp_dir().join(format!("proxima-sac-resume-{backend}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = sac_cfg(&[&format!("backend={backend}")]);
    let mut full = Trainer::new("Pendulum-v1", cfg.clone()).unwrap();
    assert_eq!(full.policy.backend().as_str(), backend);
    while !full.is_done() {
        full.step().unwrap();
    }
    let mut half = Trainer::new("Pendulum-v1", cfg).unwrap();
    for _ in 0..3 {
        half.step().unwrap();
    }
    let path = dir.join("update_000003.safetensors");
    half.save_checkpoint(&path).unwrap();
    assert!(proxima::train::replay_path(&path).is_file());
    let ck = proxima::checkpoint::load(&path).unwrap();
    let mut resumed = Trainer::resume(&ck, None).unwrap();
    assert_eq!(resumed.replay_buffer(), half.replay_buffer());
    while !resumed.is_done() {
        resumed.step().unwrap();
    }
    assert_eq!(resumed.policy.params().unwrap(), full.policy.params().unwrap(), "resumed = uninterrupted");
    assert_eq!(resumed.global_step, full.global_step);
    // The model evaluates from the checkpoint alone (as `proxima eval` loads it).
    let net = ck.build_network(proxima::policy::Backend::Auto).unwrap();
    assert_eq!(net.params().unwrap(), half.policy.params().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stop asked for in the middle of a long burst of gradient steps ends the iteration between
/// two of them (not after the burst); the steps the burst still owed are in the checkpoint and
/// taken first on resume, so the resumed run ends with the uninterrupted run's weights.
#[test]
fn a_stop_inside_a_burst_of_gradient_steps_lands_between_two_and_resumes_exactly() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cfg = sac_cfg(&["gradient_steps=40", "n_steps=4", "learning_starts=40", "total_timesteps=80"]);
    let mut full = Trainer::new("Pendulum-v1", cfg.clone()).unwrap();
    while !full.is_done() {
        full.step().unwrap();
    }
    // A yes at the 57th question: in the second burst; at the 1,550th: in the run's last burst
    // (40 env steps train, 40 gradient steps each, 39 questions), after its last env step.
    for at_question in [57, 1550] {
        let asked = std::sync::Arc::new(AtomicUsize::new(0));
        let mut cut = Trainer::new("Pendulum-v1", cfg.clone()).unwrap();
        let count = asked.clone();
        cut.set_interrupt(move || count.fetch_add(1, Ordering::SeqCst) + 1 == at_question);
        while !cut.is_done() && asked.load(Ordering::SeqCst) < at_question {
            cut.step().unwrap();
        }
        assert!(asked.load(Ordering::SeqCst) >= at_question, "the stop was asked for");
        assert!(!cut.is_done(), "{at_question}: the steps the burst owes are still to take");
        let dir = std::env::temp_dir().join(format!("proxima-sac-burst-{at_question}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("update_000009.safetensors");
        cut.save_checkpoint(&path).unwrap();
        let ck = proxima::checkpoint::load(&path).unwrap();
        assert!(!ck.meta.extra["off_policy_state"].contains("\"pending_gradient_steps\":0"), "some steps are owed");
        let mut resumed = Trainer::resume(&ck, None).unwrap();
        while !resumed.is_done() {
            resumed.step().unwrap();
        }
        assert_eq!(resumed.global_step, 80);
        assert_eq!(
            resumed.policy.params().unwrap(),
            full.policy.params().unwrap(),
            "{at_question}: resumed = uninterrupted"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A checkpoint of an off-policy run written before checkpoints recorded their backend, with
/// `backend = "auto"` in its config, was trained on candle (what `auto` chose then): it resumes
/// there; a recorded backend is kept, and `--backend` still moves a run.
#[test]
fn an_off_policy_run_resumes_on_the_backend_it_was_trained_on() {
    let dir = std::env::temp_dir().join(format!("proxima-sac-backend-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut tr = Trainer::new("Pendulum-v1", sac_cfg(&["backend=candle"])).unwrap();
    tr.step().unwrap();
    let path = dir.join("update_000001.safetensors");
    tr.save_checkpoint(&path).unwrap();
    let mut ck = proxima::checkpoint::load(&path).unwrap();
    assert_eq!(ck.meta.extra.get("backend").map(String::as_str), Some("candle"));
    ck.meta.extra.remove("backend");
    ck.meta.config_toml = ck.meta.config_toml.replace("backend = \"candle\"", "backend = \"auto\"");
    assert!(ck.meta.config_toml.contains("backend = \"auto\""));
    assert_eq!(Trainer::resume(&ck, None).unwrap().policy.backend().as_str(), "candle");
    let moved = Trainer::resume_on(&ck, None, Some(proxima::policy::Backend::Fused)).unwrap();
    assert_eq!(moved.policy.backend().as_str(), "fused");
    assert_eq!(moved.policy.params().unwrap(), tr.policy.params().unwrap(), "the weights move with the run");
    ck.meta.extra.insert("backend".into(), "fused".into());
    assert_eq!(Trainer::resume(&ck, None).unwrap().policy.backend().as_str(), "fused");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What SAC cannot take is a clear error.
#[test]
fn sac_bad_inputs_are_clear_errors() {
    let err = |preset: &str, sets: &[&str]| {
        Config::resolve(preset, None, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err().to_string()
    };
    let e = Trainer::new("CartPole-v1", sac_cfg(&[])).err().unwrap().to_string();
    assert!(e.contains("continuous (Box) action space"), "{e}");
    let e = Trainer::new("Pendulum-v1", sac_cfg(&["buffer_size=100000000000000"])).err().unwrap().to_string();
    assert!(e.contains("buffer_size") && e.contains("needs"), "{e}");
    // A batch that would not fit is refused before anything is allocated for it (it grew
    // without limit once): on either backend.
    for backend in ["fused", "candle"] {
        let cfg = sac_cfg(&["batch_size=1000000000", &format!("backend={backend}")]);
        let e = Trainer::new("Pendulum-v1", cfg).err().unwrap().to_string();
        assert!(e.contains("batch_size = 1000000000") && e.contains("needs") && e.contains("lower batch_size"), "{e}");
    }
    assert!(err("sac", &["learning_starts=5000", "total_timesteps=1000"]).contains("learning_starts = 5000"));
    assert!(err("sac", &["tau=0"]).contains("tau = 0"));
    assert!(err("sac", &["ent_coef=autox"]).contains("ent_coef"));
    assert!(err("sac", &["normalize_observation=true"]).contains("normalize_observation"));
    assert!(err("cleanrl", &["ent_coef=auto"]).contains("SAC's learned temperature"));
    let ppo = Config::resolve("cleanrl", None, &[]).unwrap();
    assert!(ppo.check_keys_used(&["tau"]).unwrap_err().to_string().contains("algo = `ppo`"));
    let sac = sac_cfg(&[]);
    assert!(sac.check_keys_used(&["gae_lambda"]).unwrap_err().to_string().contains("algo = `sac`"));
    assert!(sac.check_keys_used(&["tau", "batch_size", "learning_rate", "ent_coef"]).is_ok());
    let fixed = sac_cfg(&["ent_coef=0.2"]);
    assert!(fixed.check_keys_used(&["target_entropy"]).is_err());
}

/// TD3's critic loss (Σ_k MSE, no ½) and its actor loss −mean Q_0(s, μ(s)) through the
/// deterministic actor equal finite differences; y is clipped double Q; DDPG's networks have one
/// critic; the Polyak step moves the target actor too.
#[test]
fn td3_losses_match_finite_differences_and_targets_follow() {
    use proxima::algo::sac::sum_of_mse;
    use proxima::algo::td3::{td3_actor_loss, td3_target};
    let nets = OffPolicyNets::new(tiny_spec(), ActorKind::Deterministic, 2, &mut rng(9)).unwrap();
    let nets = nets.with_dtype(DType::F64).unwrap();
    let b = 4;
    let mut r = rng(10);
    let mut v = |n: usize| -> Vec<f64> { (0..n).map(|_| r.random_range(-0.9..0.9)).collect() };
    let (obs, act, y) = (t64(&v(b * 3), &[b, 3]), t64(&v(b * 2), &[b, 2]), t64(&v(b), &[b]));
    let critic = |n: &OffPolicyNets| sum_of_mse(&n.q_values(&obs, &act, false).unwrap(), &y).unwrap();
    check_gradient(&nets, nets.critic_params(), &critic);
    let actor = |n: &OffPolicyNets| {
        let mu = n.actor_action(&obs, false).unwrap();
        td3_actor_loss(&n.q_values(&obs, &mu, false).unwrap()[0]).unwrap()
    };
    check_gradient(&nets, nets.actor_params(), &actor);
    let (qa, qb) = (t64(&[1.0, 5.0], &[2]), t64(&[2.0, 4.0], &[2]));
    let got = vec64(&td3_target(&[qa, qb], &t64(&[0.5, 1.0], &[2]), &t64(&[0.0, 1.0], &[2]), 0.9).unwrap());
    assert!((got[0] - (0.5 + 0.9)).abs() < 1e-12 && (got[1] - 1.0).abs() < 1e-12, "{got:?}");
    // The target actor starts equal and follows by τ.
    let names: Vec<&str> = nets.target_params().iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"actor_target.mu.0.weight") && names.contains(&"critic_target.qf1.4.bias"), "{names:?}");
    for (_, p) in nets.actor_params() {
        p.set(&(p.as_tensor() + 1.0).unwrap()).unwrap();
    }
    let before =
        vec64(nets.target_params().iter().find(|(n, _)| n == "actor_target.mu.0.weight").unwrap().1.as_tensor());
    nets.polyak_update(0.25).unwrap();
    let after =
        vec64(nets.target_params().iter().find(|(n, _)| n == "actor_target.mu.0.weight").unwrap().1.as_tensor());
    for (a, b) in after.iter().zip(&before) {
        assert!((a - (b + 0.25)).abs() < 1e-12, "the target actor moves by τ of the gap: {a} vs {b} + 0.25");
    }
    let ddpg = OffPolicyNets::new(tiny_spec(), ActorKind::Deterministic, 1, &mut rng(11)).unwrap();
    assert_eq!(ddpg.n_critics(), 1);
    assert!(!ddpg.param_names().iter().any(|n| n.contains("qf1")));
}

/// TD3 and DDPG through the trainer: random actions first, then one critic step per env step and
/// an actor step every `policy_delay`; an exact resume with the replay buffer.
#[test]
fn td3_and_ddpg_train_and_resume_exactly() {
    for (algo, backend) in [("td3", "fused"), ("ddpg", "fused"), ("td3", "candle"), ("ddpg", "candle")] {
        let sets: Vec<String> = [
            "n_steps=50",
            "batch_size=32",
            "net_arch=[16, 16]",
            "learning_starts=100",
            "total_timesteps=300",
            &format!("backend={backend}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cfg = Config::resolve(algo, None, &sets).unwrap();
        let mut full = Trainer::new("Pendulum-v1", cfg.clone()).unwrap();
        let r = full.step().unwrap();
        assert_eq!(r.stats.minibatches, 0);
        full.step().unwrap();
        let r = full.step().unwrap();
        assert_eq!(r.stats.minibatches, 50, "{algo}");
        assert!(r.stats.value_loss.is_finite() && r.stats.policy_loss.is_finite() && r.stats.ent_coef.is_none());
        while !full.is_done() {
            full.step().unwrap();
        }
        let resumed = resumed_after_four_iterations(cfg, &format!("{algo}-{backend}"));
        assert_eq!(
            resumed.policy.params().unwrap(),
            full.policy.params().unwrap(),
            "{algo} on {backend}: resumed = uninterrupted"
        );
        assert_eq!(resumed.policy.backend().as_str(), backend);
    }
    let e = Trainer::new("CartPole-v1", Config::resolve("td3", None, &[]).unwrap()).err().unwrap().to_string();
    assert!(e.contains("TD3 needs a continuous (Box) action space"), "{e}");
    for algo in ["sac", "tqc", "ddpg"] {
        let e = Trainer::new("CartPole-v1", Config::resolve(algo, None, &[]).unwrap()).err().unwrap().to_string();
        let who = algo.to_uppercase();
        assert!(e.contains(&format!("{who} needs a continuous (Box) action space")), "{algo}: {e}");
    }
    let td3 = Config::resolve("td3", None, &[]).unwrap();
    assert!(td3.check_keys_used(&["ent_coef"]).is_err() && td3.check_keys_used(&["policy_delay", "noise_std"]).is_ok());
    let ddpg = Config::resolve("ddpg", None, &[]).unwrap();
    assert!(ddpg.check_keys_used(&["policy_delay"]).unwrap_err().to_string().contains("algo = `ddpg`"));
}

/// TQC through the trainer on both backends: random steps, then one gradient step per env step
/// with its temperature reported; an exact resume with the replay buffer; its bad inputs are
/// clear errors naming the keys.
#[test]
fn tqc_trains_resumes_exactly_and_refuses_bad_inputs() {
    for backend in ["fused", "candle"] {
        let sets: Vec<String> = [
            "n_steps=50",
            "batch_size=32",
            "net_arch=[16, 16]",
            "learning_starts=100",
            "total_timesteps=300",
            "n_quantiles=7",
            "n_critics=3",
            &format!("backend={backend}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cfg = Config::resolve("tqc", None, &sets).unwrap();
        let mut full = Trainer::new("Pendulum-v1", cfg.clone()).unwrap();
        let shapes = full.policy.param_shapes();
        assert!(shapes.iter().any(|(n, s)| n == "critic.qf2.4.weight" && s == &vec![7, 16]), "{shapes:?}");
        let mut last = None;
        while !full.is_done() {
            last = Some(full.step().unwrap().stats);
        }
        let r = last.unwrap();
        assert!(r.value_loss.is_finite() && r.policy_loss.is_finite() && r.ent_coef.is_some());
        let resumed = resumed_after_four_iterations(cfg, &format!("tqc-{backend}"));
        assert_eq!(
            resumed.policy.params().unwrap(),
            full.policy.params().unwrap(),
            "tqc on {backend}: resumed = uninterrupted"
        );
    }
    let err = |sets: &[&str]| Config::resolve("tqc", None, &strings(sets)).unwrap_err().to_string();
    let e = err(&["top_quantiles_to_drop_per_net=25"]);
    assert!(e.contains("top_quantiles_to_drop_per_net = 25") && e.contains("n_quantiles = 25"), "{e}");
    assert!(err(&["n_critics=0"]).contains("n_critics = 0"));
    assert!(err(&["n_quantiles=0"]).contains("n_quantiles = 0"));
    let e = Trainer::new("CartPole-v1", Config::resolve("tqc", None, &[]).unwrap()).err().unwrap().to_string();
    assert!(e.contains("continuous (Box) action space"), "{e}");
    let sac = Config::resolve("sac", None, &[]).unwrap();
    assert!(sac.check_keys_used(&["n_quantiles"]).unwrap_err().to_string().contains("algo = `sac`"));
    let tqc = Config::resolve("tqc", None, &[]).unwrap();
    assert!(tqc.check_keys_used(&["n_quantiles", "top_quantiles_to_drop_per_net", "n_critics", "ent_coef"]).is_ok());
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A run of `cfg` on Pendulum-v1 checkpointed after 4 iterations (into a temporary directory
/// named by `tag`, removed after), resumed from that checkpoint and run to its end.
fn resumed_after_four_iterations(cfg: ValidConfig, tag: &str) -> Trainer {
    let mut half = Trainer::new("Pendulum-v1", cfg).unwrap();
    for _ in 0..4 {
        half.step().unwrap();
    }
    let dir = std::env::temp_dir().join(format!("proxima-{tag}-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("update_000004.safetensors");
    half.save_checkpoint(&path).unwrap();
    let mut resumed = Trainer::resume(&proxima::checkpoint::load(&path).unwrap(), None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    while !resumed.is_done() {
        resumed.step().unwrap();
    }
    resumed
}
