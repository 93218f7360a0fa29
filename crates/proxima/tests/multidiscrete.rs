//! MultiDiscrete action spaces: independent Categoricals whose log-probabilities and entropies
//! are summed, on a toy env written here ("hit both targets").

use candle_core::{Device, Tensor};
use proxima::config::Config;
use proxima::env::{env_rng, Action, Env, EnvError, EnvRng, Info, Result, Space, StepResult, TimeLimit};
use proxima::policy::distributions::categorical;
use proxima::policy::{ActionKind, Activation, ActorCritic, PolicySpec};
use proxima::train::Trainer;
use rand::{Rng, SeedableRng};

/// Observation: two targets scaled to [0, 1]; action: MultiDiscrete([3, 4]); reward: number of
/// components that hit their target. New targets every step.
struct Targets {
    t: [usize; 2],
    rng: EnvRng,
}

impl Targets {
    fn obs(&self) -> Vec<f32> {
        vec![self.t[0] as f32 / 2.0, self.t[1] as f32 / 3.0]
    }
    fn draw(&mut self) {
        self.t = [self.rng.random_range(0..3), self.rng.random_range(0..4)];
    }
}

impl Env for Targets {
    fn id(&self) -> &str {
        "Targets-v0"
    }
    fn observation_space(&self) -> Space {
        Space::uniform_box(0.0, 1.0, &[2])
    }
    fn action_space(&self) -> Space {
        Space::MultiDiscrete { nvec: vec![3, 4] }
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if let Some(s) = seed {
            self.rng = env_rng(s);
        }
        self.draw();
        Ok((self.obs(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let a = match action {
            Action::Continuous(a) if self.action_space().contains(a) => a,
            other => {
                return Err(EnvError::InvalidAction(format!("Targets-v0: {other:?} is not in MultiDiscrete([3, 4])")))
            }
        };
        let reward = (a[0] as usize == self.t[0]) as u8 as f64 + (a[1] as usize == self.t[1]) as u8 as f64;
        self.draw();
        Ok(StepResult { observation: self.obs(), reward, terminated: false, truncated: false, info: Info::default() })
    }
}

fn targets() -> Result<Box<dyn Env>> {
    Ok(Box::new(TimeLimit::new(Targets { t: [0, 0], rng: env_rng(0) }, 8)))
}

#[test]
fn log_prob_and_entropy_are_sums_over_components() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let spec = PolicySpec {
        cnn: None,
        obs_dim: 2,
        action: ActionKind::MultiDiscrete { nvec: vec![3, 4] },
        net_arch: vec![8],
        activation: Activation::Tanh,
        shared_trunk: false,
        log_std_init: 0.0,
        ortho_init: false,
        aux_value_head: false,
        recurrent: None,
        inputs: Vec::new(),
    };
    let net = ActorCritic::new(spec, &Device::Cpu, &mut rng).unwrap();
    let obs = [0.5f32, 1.0, 0.0, 0.3];
    let out = net.act(&obs, false, &mut rng).unwrap();
    assert_eq!(out.actions.len(), 4);
    let x = net.obs_tensor(&obs).unwrap();
    let (head, _) = net.forward(&x).unwrap();
    let head = head.to_vec2::<f32>().unwrap();
    let acts = Tensor::from_slice(&out.actions, (2, 2), &Device::Cpu).unwrap();
    let (lp, ent, _) = net.evaluate_actions(&x, &acts).unwrap();
    let (lp, ent) = (lp.to_vec1::<f32>().unwrap(), ent.to_vec1::<f32>().unwrap());
    for b in 0..2 {
        let (mut want_lp, mut want_ent) = (0f32, 0f32);
        for (i, (off, n)) in [(0usize, 3usize), (3, 4)].into_iter().enumerate() {
            let mut l = vec![0f32; n];
            categorical::log_softmax(&head[b][off..off + n], &mut l);
            want_lp += l[out.actions[b * 2 + i] as usize];
            want_ent -= l.iter().map(|x| x.exp() * x).sum::<f32>();
        }
        assert!((lp[b] - want_lp).abs() < 1e-5 && (out.log_probs[b] - want_lp).abs() < 1e-5, "log-prob of row {b}");
        assert!((ent[b] - want_ent).abs() < 1e-5, "entropy of row {b}");
        assert!(out.actions[b * 2] < 3.0 && out.actions[b * 2 + 1] < 4.0);
    }
    assert!(ActionKind::from_space(&Space::MultiDiscrete { nvec: vec![3, 0] })
        .unwrap_err()
        .to_string()
        .contains("MultiDiscrete([3, 0])"));
}

#[test]
fn multidiscrete_trains_end_to_end() {
    let cfg = Config::resolve(
        "cleanrl",
        None,
        &["n_envs=2".into(), "n_steps=32".into(), "batch_size=16".into(), "total_timesteps=256".into()],
    )
    .unwrap();
    let mut tr = Trainer::with_env_fn("Targets-v0", cfg, targets).unwrap();
    while !tr.is_done() {
        let r = tr.step().unwrap();
        assert!(r.stats.entropy > 0.0 && r.stats.entropy <= (3f64.ln() + 4f64.ln()) + 1e-6);
    }
}

/// Learning check (run with `--ignored`; `.ci/run` does): random play scores 1/3 + 1/4 ≈ 0.58
/// per step (max 2); PPO learns to hit both targets nearly always (measured: 1.47 at update 50,
/// 1.83 at 100, 1.99 at 350 of 391).
#[test]
#[ignore = "a learning check of 200k steps (about a minute in the test build); .ci/run runs it"]
fn ppo_learns_to_hit_both_targets() {
    let cfg = Config::resolve(
        "cleanrl",
        None,
        &["total_timesteps=200000".into(), "ent_coef=0.0".into(), "learning_rate=1e-3".into()],
    )
    .unwrap();
    let mut tr = Trainer::with_env_fn("Targets-v0", cfg, targets).unwrap();
    let mut last = 0.0;
    while !tr.is_done() {
        last = tr.step().unwrap().ep_return_mean.unwrap_or(0.0);
        if tr.update % 50 == 0 {
            eprintln!("update {} mean reward per step {:.3}", tr.update, last / 8.0);
        }
    }
    assert!(last / 8.0 > 1.8, "mean reward per step {}", last / 8.0);
}
