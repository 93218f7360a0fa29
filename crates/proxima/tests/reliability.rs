//! Guards that stop a run cleanly instead of training on garbage: non-finite observations and
//! rewards from an env, observations of the wrong shape, diverging updates, degenerate
//! minibatches.

use proxima::config::Config;
use proxima::env::{make, Action, Env, Info, Result, Space, StepResult};
use proxima::policy::Policy;
use proxima::train::Trainer;
use proxima::ProximaError;

/// CartPole that misbehaves from its `bad_from`-th step on, in one of several ways.
struct Faulty {
    inner: Box<dyn Env>,
    steps: usize,
    bad_from: usize,
    fault: Fault,
}

#[derive(Clone, Copy)]
enum Fault {
    NanObservation,
    InfReward,
    ShortObservation,
}

impl Env for Faulty {
    fn id(&self) -> &str {
        "Faulty-v0"
    }
    fn observation_space(&self) -> Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> Space {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        self.inner.reset(seed)
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let mut r = self.inner.step(action)?;
        self.steps += 1;
        if self.steps >= self.bad_from {
            match self.fault {
                Fault::NanObservation => r.observation[2] = f32::NAN,
                Fault::InfReward => r.reward = f64::INFINITY,
                Fault::ShortObservation => r.observation.truncate(3),
            }
        }
        Ok(r)
    }
}

fn small_cfg() -> Config {
    Config::resolve(
        "cleanrl",
        None,
        &["n_envs=2".into(), "n_steps=16".into(), "batch_size=8".into(), "total_timesteps=256".into()],
    )
    .unwrap()
    .into_config()
}

fn faulty_run(fault: Fault) -> String {
    let mut k = 0;
    let mut tr = Trainer::with_env_fn("Faulty-v0", small_cfg(), || {
        k += 1;
        // The second env goes bad at its 21st step (in the second rollout).
        Ok(Box::new(Faulty {
            inner: make("CartPole-v1")?,
            steps: 0,
            bad_from: if k == 2 { 21 } else { usize::MAX },
            fault,
        }))
    })
    .unwrap();
    tr.step().expect("the first rollout is clean");
    match tr.step() {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a faulty env must stop the run"),
    }
}

#[test]
fn nan_observation_names_env_index_and_step() {
    let e = faulty_run(Fault::NanObservation);
    assert!(
        e.contains("Faulty-v0 (env index 1)")
            && e.contains("non-finite observation (component 2 = NaN)")
            && e.contains("vector step 21"),
        "{e}"
    );
}

#[test]
fn infinite_reward_names_env_index_and_step() {
    let e = faulty_run(Fault::InfReward);
    assert!(e.contains("Faulty-v0 (env index 1) returned reward inf at vector step 21"), "{e}");
}

#[test]
fn wrong_observation_shape_is_an_error() {
    let e = faulty_run(Fault::ShortObservation);
    assert!(e.contains("observation of 3 values") && e.contains("has 4"), "{e}");
}

#[test]
fn divergence_stops_with_the_update_number_and_keeps_parameters_finite() {
    let cfg = Config::resolve(
        "cleanrl",
        None,
        &[
            "n_envs=2".into(),
            "n_steps=16".into(),
            "batch_size=8".into(),
            "learning_rate=1e38".into(),
            "max_grad_norm=none".into(),
            "total_timesteps=100000".into(),
        ],
    )
    .unwrap();
    let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
    let err = loop {
        match tr.step() {
            Ok(r) => assert!(r.update < 50, "a learning rate of 1e38 must diverge"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, ProximaError::NonFinite(_)), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("update ") && msg.contains("global step"), "{msg}");
    for (name, x) in tr.policy.param_names().iter().zip(tr.policy.params().unwrap()) {
        assert!(x.iter().all(|p| p.is_finite()), "{name} holds a non-finite value after the guard");
    }
}

#[test]
fn minibatch_of_one_trains_without_nan() {
    let cfg = Config::resolve(
        "cleanrl",
        None,
        &["n_envs=1".into(), "n_steps=8".into(), "batch_size=1".into(), "total_timesteps=32".into()],
    )
    .unwrap();
    let mut tr = Trainer::new("CartPole-v1", cfg).unwrap();
    while !tr.is_done() {
        let r = tr.step().unwrap();
        assert!(r.stats.policy_loss.is_finite() && r.stats.value_loss.is_finite());
    }
}

/// Same config and seed give bit-identical weights and statistics on every native env, on
/// each backend.
#[test]
fn every_native_env_trains_reproducibly() {
    let bits =
        |tr: &Trainer| -> Vec<u32> { tr.policy.params().unwrap().into_iter().flatten().map(f32::to_bits).collect() };
    for (id, backend) in proxima::env::NATIVE_ENV_IDS.iter().flat_map(|id| [(id, "fused"), (id, "candle")]) {
        let id = *id;
        let sets =
            ["n_envs=2", "n_steps=32", "batch_size=16", "seed=9", &format!("backend={backend}")].map(String::from);
        let cfg = Config::resolve("cleanrl", None, &sets).unwrap();
        assert_eq!(Trainer::new(id, cfg.clone()).unwrap().policy.backend().as_str(), backend);
        let (mut a, mut b) = (Trainer::new(id, cfg.clone()).unwrap(), Trainer::new(id, cfg).unwrap());
        for _ in 0..2 {
            let (ra, rb) = (a.step().unwrap(), b.step().unwrap());
            assert_eq!(ra.stats.policy_loss.to_bits(), rb.stats.policy_loss.to_bits(), "{id}");
            assert_eq!(ra.stats.approx_kl.to_bits(), rb.stats.approx_kl.to_bits(), "{id}");
        }
        assert_eq!(bits(&a), bits(&b), "{id}: weights differ between identical runs");
        let mut other_seed = sets.clone();
        other_seed[3] = "seed=10".into();
        let mut c = Trainer::new(id, Config::resolve("cleanrl", None, &other_seed).unwrap()).unwrap();
        c.step().unwrap();
        c.step().unwrap();
        assert_ne!(bits(&a), bits(&c), "{id}: another seed must give another run");
    }
}

/// A checkpoint of a run that normalised observations must carry the statistics evaluation
/// applies; without them evaluation is refused rather than silently giving other returns.
#[test]
fn evaluation_refuses_a_normalised_checkpoint_without_its_statistics() {
    let sets = ["n_envs=1".to_string(), "n_steps=64".into(), "batch_size=32".into(), "total_timesteps=64".into()];
    let cfg = Config::resolve("paper-mujoco", None, &sets).unwrap();
    let mut tr = Trainer::new("Pendulum-v1", cfg).unwrap();
    tr.step().unwrap();
    let path = std::env::temp_dir().join(format!("proxima-norm-ck-{}.safetensors", std::process::id()));
    tr.save(&path).unwrap();
    let mut ck = proxima::checkpoint::load(&path).unwrap();
    let norm = proxima::train::saved_normalizer(&ck).unwrap().expect("statistics saved");
    assert_eq!(norm, tr.collector.norm, "the statistics read back exactly");
    ck.meta.extra.remove("normalization");
    let e = proxima::train::saved_normalizer(&ck).unwrap_err().to_string();
    assert!(e.contains("normalize_observation = true") && e.contains("no normalization statistics"), "{e}");
    std::fs::remove_file(&path).unwrap();
}
