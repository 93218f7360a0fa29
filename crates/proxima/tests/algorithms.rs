//! The paper's variants and baselines: KL-penalty PPO, A2C, A3C, TRPO and REINFORCE (TRPO's
//! Fisher-vector products against an explicitly built Fisher matrix, conjugate gradient, the line
//! search).

use candle_core::{Device, Tensor};
use proxima::algo::ppo::adapt_kl_coef;
use proxima::algo::trpo::{actor_params_flat, conjugate_gradient, fisher_vector_product, set_actor_params_flat};
use proxima::config::{Config, Objective};
use proxima::policy::{ActionKind, Activation, ActorCritic, Policy, PolicySpec};
use proxima::train::Trainer;
use rand::{Rng, SeedableRng};

fn tiny(action: ActionKind, seed: u64) -> ActorCritic {
    let spec = PolicySpec {
        cnn: None,
        obs_dim: 3,
        action,
        net_arch: vec![4],
        activation: Activation::Tanh,
        shared_trunk: false,
        log_std_init: -0.3,
        ortho_init: false, // PyTorch's uniform init: a policy head that is not ~0, so F is not tiny
        aux_value_head: false,
        recurrent: None,
        inputs: Vec::new(),
    };
    ActorCritic::new(spec, &Device::Cpu, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed)).unwrap()
}

fn random_obs(b: usize, seed: u64) -> (Vec<f32>, Tensor) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let v: Vec<f32> = (0..b * 3).map(|_| rng.random_range(-2.0..2.0)).collect();
    let t = Tensor::from_slice(&v, (b, 3), &Device::Cpu).unwrap();
    (v, t)
}

/// ∇θ log π(a|s) for one state and action, flattened over the actor's parameters.
fn score(policy: &ActorCritic, obs: &[f32], action: &[f32]) -> Vec<f64> {
    let o = Tensor::from_slice(obs, (1, 3), &Device::Cpu).unwrap();
    let a = Tensor::from_slice(action, (1, action.len()), &Device::Cpu).unwrap();
    let (lp, _, _) = policy.evaluate_actions(&o, &a).unwrap();
    let g = lp.sum_all().unwrap().backward().unwrap();
    let mut out = Vec::new();
    for i in policy.actor_param_indices() {
        let v = &policy.named_params()[i].1;
        match g.get(v.as_tensor()) {
            Some(t) => out.extend(t.flatten_all().unwrap().to_vec1::<f32>().unwrap().into_iter().map(f64::from)),
            None => out.extend(std::iter::repeat_n(0.0, v.elem_count())),
        }
    }
    out
}

/// F = (1/B) Σ_s Σ_a π(a|s) ∇log π(a|s) ∇log π(a|s)ᵀ, built explicitly for a Categorical
/// policy on a tiny network, against the Gauss–Newton Fisher-vector product.
#[test]
fn fisher_vector_product_matches_the_explicit_fisher_matrix_categorical() {
    let policy = tiny(ActionKind::Discrete { n: 3 }, 1);
    let b = 5;
    let (obs, obs_t) = random_obs(b, 2);
    let dim = actor_params_flat(&policy).unwrap().len();
    let mut fisher = vec![vec![0f64; dim]; dim];
    let (head, _) = policy.forward(&obs_t).unwrap();
    let logits = head.to_vec2::<f32>().unwrap();
    for s in 0..b {
        let z: f64 = logits[s].iter().map(|&l| (l as f64).exp()).sum();
        for a in 0..3 {
            let p = (logits[s][a] as f64).exp() / z;
            let g = score(&policy, &obs[s * 3..(s + 1) * 3], &[a as f32]);
            for i in 0..dim {
                for j in 0..dim {
                    fisher[i][j] += p * g[i] * g[j] / b as f64;
                }
            }
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for _ in 0..3 {
        let v: Vec<f64> = (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect();
        let got = fisher_vector_product(&policy, &obs_t, &v, 0.0).unwrap();
        let want: Vec<f64> = fisher.iter().map(|row| row.iter().zip(&v).map(|(f, x)| f * x).sum()).collect();
        let scale = want.iter().map(|x| x.abs()).fold(0.0, f64::max);
        assert!(scale > 1e-4, "the Fisher should not be ~0 here");
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-4 * scale.max(1.0), "F·v: got {g}, explicit {w}");
        }
        // Damping adds λ·v.
        let damped = fisher_vector_product(&policy, &obs_t, &v, 0.1).unwrap();
        for ((d, g), x) in damped.iter().zip(&got).zip(&v) {
            assert!((d - g - 0.1 * x).abs() < 1e-5);
        }
    }
}

/// For a diagonal Gaussian, F·v against finite differences of the KL's gradient:
/// F·v ≈ (∇KL(θ_old ‖ θ_old + εv) − ∇KL(θ_old ‖ θ_old − εv)) / 2ε (F is the KL's Hessian).
#[test]
fn fisher_vector_product_matches_the_kl_hessian_gaussian() {
    let policy = tiny(ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] }, 4);
    let (_, obs_t) = random_obs(6, 5);
    let old = policy.dist_params(&obs_t).unwrap();
    let theta0 = actor_params_flat(&policy).unwrap();
    let dim = theta0.len();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
    let v: Vec<f64> = (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect();
    let got = fisher_vector_product(&policy, &obs_t, &v, 0.0).unwrap();
    let grad_kl_at = |eps: f64| -> Vec<f64> {
        let th: Vec<f32> = theta0.iter().zip(&v).map(|(&t, &x)| (t as f64 + eps * x) as f32).collect();
        set_actor_params_flat(&policy, &th).unwrap();
        let kl = policy.kl_from(&obs_t, &old).unwrap().mean_all().unwrap();
        let g = kl.backward().unwrap();
        let mut out = Vec::new();
        for i in policy.actor_param_indices() {
            let p = &policy.named_params()[i].1;
            out.extend(
                g.get(p.as_tensor())
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap()
                    .into_iter()
                    .map(f64::from),
            );
        }
        out
    };
    let eps = 1e-2;
    let (gp, gm) = (grad_kl_at(eps), grad_kl_at(-eps));
    set_actor_params_flat(&policy, &theta0).unwrap();
    let scale = got.iter().map(|x| x.abs()).fold(0.0, f64::max);
    for i in 0..dim {
        let fd = (gp[i] - gm[i]) / (2.0 * eps);
        assert!((fd - got[i]).abs() < 2e-3 * scale.max(1.0), "param {i}: F·v {} vs finite difference {fd}", got[i]);
    }
    // The log-std block is 2·v (the last `dim` = 2 entries).
    assert!((got[dim - 1] - 2.0 * v[dim - 1]).abs() < 1e-9);
}

#[test]
fn conjugate_gradient_solves_a_positive_definite_system() {
    // A = MᵀM + I, 6×6.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let n = 6;
    let m: Vec<Vec<f64>> = (0..n).map(|_| (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
    let a: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..n).map(|j| (0..n).map(|k| m[k][i] * m[k][j]).sum::<f64>() + if i == j { 1.0 } else { 0.0 }).collect()
        })
        .collect();
    let b: Vec<f64> = (0..n).map(|i| i as f64 - 2.5).collect();
    let av = |v: &[f64]| -> proxima::Result<Vec<f64>> {
        Ok(a.iter().map(|row| row.iter().zip(v).map(|(x, y)| x * y).sum()).collect())
    };
    let x = conjugate_gradient(av, &b, n, 1e-20).unwrap();
    let ax = av(&x).unwrap();
    for (l, r) in ax.iter().zip(&b) {
        assert!((l - r).abs() < 1e-8, "{ax:?} vs {b:?}");
    }
    // Fewer iterations: a partial solution that still reduces the residual.
    let x2 = conjugate_gradient(av, &b, 2, 1e-20).unwrap();
    let r2: f64 = av(&x2).unwrap().iter().zip(&b).map(|(l, r)| (l - r).powi(2)).sum();
    assert!(r2 < b.iter().map(|x| x * x).sum::<f64>());
}

#[test]
fn adaptive_kl_rule_is_the_papers() {
    assert_eq!(adapt_kl_coef(1.0, 0.02, 0.01), 2.0); // d > 1.5·d_targ
    assert_eq!(adapt_kl_coef(1.0, 0.005, 0.01), 0.5); // d < d_targ/1.5
    assert_eq!(adapt_kl_coef(1.0, 0.01, 0.01), 1.0);
    assert_eq!(adapt_kl_coef(1.0, 0.0149, 0.01), 1.0);
    assert_eq!(adapt_kl_coef(1.0, 0.0067, 0.01), 1.0);
}

fn quick(algo_preset: &str, sets: &[&str]) -> Config {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::resolve(algo_preset, None, &sets).unwrap().into_config()
}

/// An adaptive-KL run measures d after each update and moves β by the paper's rule; the
/// measured KL of every objective is the analytic one (≥ 0).
#[test]
fn kl_objectives_log_beta_and_kl() {
    for (objective, name) in
        [(Objective::AdaptiveKl, "adaptive_kl"), (Objective::FixedKl, "fixed_kl"), (Objective::None, "none")]
    {
        let cfg =
            quick("cleanrl", &[&format!("objective={name}"), "total_timesteps=2048", "kl_coef=1.0", "kl_target=0.01"]);
        assert_eq!(cfg.objective, objective);
        let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
        let mut beta = 1.0;
        while !tr.is_done() {
            let r = tr.step().unwrap();
            let s = r.stats;
            assert!(s.kl_divergence >= 0.0 && s.kl_divergence.is_finite());
            match objective {
                Objective::AdaptiveKl => {
                    assert_eq!(s.kl_coef, beta, "β used in the update");
                    beta = adapt_kl_coef(beta, s.kl_divergence, 0.01);
                    assert_eq!(tr.kl_coef(), beta, "β after the update");
                }
                Objective::FixedKl => assert_eq!((s.kl_coef, tr.kl_coef()), (1.0, 1.0)),
                _ => assert_eq!(s.kl_coef, 0.0),
            }
        }
    }
}

/// TRPO's step respects the trust region: the accepted step's KL is ≤ δ and the surrogate
/// improves (policy_loss = −L goes down from L(θ_old)'s); a rejected step leaves θ unchanged.
#[test]
fn trpo_steps_stay_inside_the_trust_region() {
    let cfg = quick("trpo", &["n_steps=512", "batch_size=128", "total_timesteps=4096", "n_critic_updates=2"]);
    let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
    let mut accepted = 0;
    while !tr.is_done() {
        let before = actor_params_flat(tr.policy.candle().unwrap()).unwrap();
        let s = tr.step().unwrap().stats;
        let after = actor_params_flat(tr.policy.candle().unwrap()).unwrap();
        if s.step_fraction > 0.0 {
            accepted += 1;
            assert!(s.kl_divergence <= 0.01 + 1e-9 && s.kl_divergence > 0.0, "KL {}", s.kl_divergence);
            assert_ne!(before, after);
        } else {
            assert_eq!(before, after, "a rejected step keeps θ_old");
        }
    }
    assert!(accepted >= 6, "most of 8 steps are accepted on CartPole ({accepted})");
}

/// A3C: workers run concurrently against the global parameters; no update is lost (the
/// global count equals the sum of the workers') and nothing deadlocks.
#[test]
fn a3c_counts_every_worker_update() {
    for workers in [1usize, 3, 4] {
        let cfg = quick("a3c", &[&format!("n_workers={workers}"), "total_timesteps=4000"]);
        let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
        let before = tr.policy.params().unwrap();
        while !tr.is_done() {
            tr.step().unwrap();
        }
        let per_worker = tr.worker_updates();
        assert_eq!(per_worker.len(), workers);
        assert_eq!(per_worker.iter().sum::<u64>(), tr.a3c_global_updates());
        // Every worker ran its share (16 updates of 5 steps per iteration).
        let iterations = 4000u64.div_ceil(5 * workers as u64 * 16);
        assert!(per_worker.iter().all(|&u| u == 16 * iterations), "{per_worker:?}");
        assert_eq!(tr.global_step, 5 * 16 * iterations * workers as u64);
        assert_ne!(tr.policy.params().unwrap(), before, "the global network moved");
    }
}

/// A2C takes exactly one optimiser step per rollout, with SB3's loss: the policy loss at the
/// first update is −mean(log π(a|s)·Â) of the rollout it collected.
#[test]
fn a2c_is_one_rmsprop_step_per_rollout() {
    let cfg = quick("a2c", &["total_timesteps=50"]);
    let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
    let r = tr.step().unwrap();
    assert_eq!((r.stats.minibatches, r.stats.epochs, r.global_step), (1, 1, 5));
    assert_eq!(tr.opt.t, 1);
    assert!(tr.opt.name == proxima::optim::OptimizerName::Rmsprop && tr.opt.alpha == 0.99);
    while !tr.is_done() {
        tr.step().unwrap();
    }
    assert_eq!(tr.opt.t, 10);
}

#[test]
fn config_errors_name_the_problem() {
    let err = |sets: &[&str], preset: &str| {
        Config::resolve(preset, None, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err().to_string()
    };
    assert!(err(&["algo=trop"], "cleanrl").contains("did you mean `trpo`"));
    assert!(err(&["objective=adaptive"], "cleanrl").contains("objective"));
    assert!(err(&["target_kl=none"], "trpo").contains("needs target_kl"));
    assert!(err(&["shared_trunk=true"], "trpo").contains("separate policy and value"));
    assert!(err(&["n_workers=0"], "a3c").contains("n_workers = 0"));
    assert!(err(&["normalize_observation=true"], "a3c").contains("a3c"));
    assert!(err(&["line_search_shrinking_factor=1.5"], "trpo").contains("(0, 1)"));
    assert!(err(&["kl_coef=-1"], "cleanrl").contains("kl_coef"));
}

/// REINFORCE trains on the transitions whose episode ended within the rollout, weighted by
/// Â = G − V_old (with a baseline) or G, with the value target G.
#[test]
fn reinforce_weights_finished_episodes_by_their_returns() {
    use proxima::algo::reinforce::{episode_batch, ReinforceParams};
    use proxima::algo::AdvantageNorm;
    use proxima::rollout::RolloutBuffer;
    // Two envs × four steps; env 0 ends an episode at t = 1 and runs on; env 1 is cut at t = 3.
    let mut buf = RolloutBuffer::new(4, 2, 1, 1, 0);
    buf.rewards = vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0];
    buf.terminated[2] = true;
    buf.truncated[7] = true;
    buf.values = vec![0.5; 8];
    buf.observations = proxima::rollout::Observations::F32((0..8).map(|i| i as f32).collect());
    let mut p = ReinforceParams {
        gamma: 0.5,
        baseline: true,
        vf_coef: 0.5,
        ent_coef: 0.0,
        max_grad_norm: None,
        normalize_advantage: AdvantageNorm::Off,
    };
    let b = episode_batch(&buf, &p).unwrap().unwrap();
    assert_eq!(b.len, 6);
    assert_eq!(b.observations, vec![0.0, 1.0, 2.0, 3.0, 5.0, 7.0], "env 0's last two steps are unfinished");
    assert_eq!(b.returns, vec![1.5, 3.75, 1.0, 3.5, 3.0, 2.0]);
    assert_eq!(b.advantages, vec![1.0, 3.25, 0.5, 3.0, 2.5, 1.5]);
    p.baseline = false;
    assert_eq!(episode_batch(&buf, &p).unwrap().unwrap().advantages, b.returns);
    p.normalize_advantage = AdvantageNorm::Batch;
    let normed = episode_batch(&buf, &p).unwrap().unwrap().advantages;
    assert!(normed.iter().sum::<f32>().abs() < 1e-5, "return normalisation: mean 0 ({normed:?})");
    buf.terminated[2] = false;
    buf.truncated[7] = false;
    assert!(episode_batch(&buf, &p).unwrap().is_none(), "no episode ended: nothing to train on");
}

/// A REINFORCE run is one optimiser step per rollout; without a baseline the critic never
/// moves (it gets no gradient), on both backends, while the actor learns.
#[test]
fn reinforce_without_baseline_leaves_the_critic_alone() {
    for backend in ["fused", "candle"] {
        let b = format!("backend={backend}");
        let cfg = quick("reinforce", &["baseline=false", "n_steps=256", "total_timesteps=2048", &b]);
        let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
        let names = tr.policy.param_names();
        let before = tr.policy.params().unwrap();
        while !tr.is_done() {
            let r = tr.step().unwrap();
            assert_eq!((r.stats.minibatches, r.stats.epochs), (1, 1));
            assert!(r.stats.value_loss.is_nan(), "no value loss without a baseline");
        }
        assert_eq!(tr.opt.t, 8);
        let after = tr.policy.params().unwrap();
        for ((name, b), a) in names.iter().zip(&before).zip(&after) {
            if name.starts_with("critic") {
                assert_eq!(b, a, "{backend}: {name} moved without a baseline");
            } else {
                assert_ne!(b, a, "{backend}: {name} did not learn");
            }
        }
        // With the baseline the critic learns too.
        let cfg = quick("reinforce", &["n_steps=256", "total_timesteps=512", &b]);
        let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
        let before = tr.policy.params().unwrap();
        tr.step().unwrap();
        let after = tr.policy.params().unwrap();
        let critic = names.iter().position(|n| n.starts_with("critic")).unwrap();
        assert_ne!(before[critic], after[critic], "{backend}: the baseline is trained");
    }
}

/// `anneal_clip_range` (the paper's ε·α): the first update clips at ε, as without it (the same
/// weights bit for bit), and the later ones at ε·α, α = 1 − (iteration − 1)/iterations: the
/// runs part.
#[test]
fn anneal_clip_range_anneals_epsilon_from_the_second_update() {
    let run = |sets: &[&str]| {
        let mut tr = Trainer::new("CartPole-v1", quick("cleanrl", sets)).unwrap();
        let mut params = Vec::new();
        while !tr.is_done() {
            tr.step().unwrap();
            params.push(tr.policy.params().unwrap());
        }
        params
    };
    // A large step so that the ratios leave 1 ± ε·α within the first updates.
    let base = ["total_timesteps=2048", "clip_range_vf=none", "learning_rate=0.01", "anneal_lr=false"];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    let fixed = run(&base);
    let annealed = run(&with(&["anneal_clip_range=true"]));
    assert_eq!(fixed.len(), 4);
    assert!(fixed[0] == annealed[0], "update 1: α = 1, the same weights");
    assert!(fixed[3] != annealed[3], "updates 2-4 clip at ε·α < ε: other weights");
}
