//! Invalid-action masking end to end (sb3-contrib's MaskablePPO): a native env with
//! `action_masks()`, written here, on which ignoring the masks cannot succeed; PPO trains masked
//! on both backends, never takes a masked action, and learns what the masks leave to learn.

use proxima::config::Config;
use proxima::env::{env_rng, Action, Env, EnvError, EnvRng, Info, Result, Space, StepResult, TimeLimit};
use proxima::policy::{ActOutput, Policy};
use proxima::train::Trainer;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const N_ACTIONS: usize = 6;
const EPISODE: usize = 16;

/// "Pick one of two": at each step two of six actions are valid, drawn by the env and not
/// observed; the observation (±1) says which of the two pays +1 — the higher one at +1, the
/// lower at −1 — and the other pays 0; a masked action pays −1 and ends the episode. 16 steps,
/// so the best return is 16. Played at random, a policy that ignores the masks picks a valid
/// action a third of the time and is ended within a step or two; a masked one scores 8 at
/// random and 16 once it reads the sign. With `MultiDiscrete` components (`nvec`) each
/// component is such a game of its own, with its own sign, and pays its own reward (best return
/// 16 per component). Every masked action taken is counted in `invalid`.
struct PickOfTwo {
    /// `None`: `Discrete(6)`; else the sizes of the `MultiDiscrete` components.
    nvec: Option<Vec<usize>>,
    valid: Vec<[usize; 2]>,
    higher: Vec<bool>,
    rng: EnvRng,
    invalid: Arc<AtomicUsize>,
}

impl PickOfTwo {
    fn sizes(&self) -> Vec<usize> {
        self.nvec.clone().unwrap_or(vec![N_ACTIONS])
    }
    fn draw(&mut self) -> Vec<f32> {
        let sizes = self.sizes();
        self.valid.clear();
        self.higher.clear();
        for n in sizes {
            let a = self.rng.random_range(0..n);
            let b = (a + self.rng.random_range(1..n)) % n;
            self.valid.push([a.min(b), a.max(b)]);
            self.higher.push(self.rng.random_bool(0.5));
        }
        self.higher.iter().map(|&h| if h { 1.0 } else { -1.0 }).collect()
    }
}

impl Env for PickOfTwo {
    fn id(&self) -> &str {
        "PickOfTwo-v0"
    }
    fn observation_space(&self) -> Space {
        Space::uniform_box(-1.0, 1.0, &[self.sizes().len()])
    }
    fn action_space(&self) -> Space {
        match &self.nvec {
            None => Space::Discrete { n: N_ACTIONS },
            Some(nvec) => Space::MultiDiscrete { nvec: nvec.clone() },
        }
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if let Some(s) = seed {
            self.rng = env_rng(s);
        }
        Ok((self.draw(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let picks: Vec<usize> = match action {
            Action::Discrete(a) => vec![a],
            Action::Continuous(a) => a.iter().map(|&x| x as usize).collect(),
        };
        if picks.len() != self.valid.len() {
            return Err(EnvError::InvalidAction(format!(
                "PickOfTwo-v0: {action:?} is not in {:?}",
                self.action_space()
            )));
        }
        let (mut reward, mut terminated) = (0.0, false);
        for ((&a, valid), &higher) in picks.iter().zip(&self.valid).zip(&self.higher) {
            if !valid.contains(&a) {
                self.invalid.fetch_add(1, Ordering::Relaxed);
                (reward, terminated) = (-1.0, true);
                break;
            }
            reward += f64::from(u8::from(a == valid[usize::from(higher)]));
        }
        let observation = self.draw();
        Ok(StepResult { observation, reward, terminated, truncated: false, info: Info::default() })
    }
    fn action_masks(&mut self, out: &mut [bool]) -> Result<bool> {
        let mut at = 0;
        for (n, valid) in self.sizes().into_iter().zip(&self.valid) {
            for (i, m) in out[at..at + n].iter_mut().enumerate() {
                *m = valid.contains(&i);
            }
            at += n;
        }
        Ok(true)
    }
}

/// A maker of PickOfTwo envs (`nvec`: MultiDiscrete components) counting their masked actions
/// into `invalid`.
fn pick_of_two_with(nvec: Option<Vec<usize>>, invalid: &Arc<AtomicUsize>) -> impl FnMut() -> Result<Box<dyn Env>> {
    let invalid = invalid.clone();
    move || {
        let env =
            PickOfTwo { nvec: nvec.clone(), valid: vec![], higher: vec![], rng: env_rng(0), invalid: invalid.clone() };
        Ok(Box::new(TimeLimit::new(env, EPISODE)))
    }
}

fn pick_of_two(invalid: &Arc<AtomicUsize>) -> impl FnMut() -> Result<Box<dyn Env>> {
    pick_of_two_with(None, invalid)
}

/// PPO on PickOfTwo for `steps` with `extra` settings; returns the trainer, the last rollouts'
/// mean episode return and the masked actions the envs saw taken.
fn train(steps: u64, extra: &[&str]) -> (Trainer, f64, usize) {
    train_on(None, steps, extra)
}

/// [`train`] on the game with MultiDiscrete components `nvec` (`None`: Discrete(6)).
fn train_on(nvec: Option<Vec<usize>>, steps: u64, extra: &[&str]) -> (Trainer, f64, usize) {
    let mut settings = vec![format!("total_timesteps={steps}"), "learning_rate=1e-3".into()];
    settings.extend(extra.iter().map(|s| s.to_string()));
    let cfg = Config::resolve("cleanrl", None, &settings).unwrap();
    let invalid = Arc::new(AtomicUsize::new(0));
    let mut tr = Trainer::with_env_fn("PickOfTwo-v0", cfg, pick_of_two_with(nvec, &invalid)).unwrap();
    let mut last = f64::NAN;
    while !tr.is_done() {
        last = tr.step().unwrap().ep_return_mean.unwrap_or(f64::NAN);
    }
    (tr, last, invalid.load(Ordering::Relaxed))
}

/// Masked PPO learns the game on both backends without ever taking a masked action; the
/// rollout stores the masks it acted under.
#[test]
fn masked_ppo_learns_pick_of_two_and_never_takes_a_masked_action() {
    for backend in ["fused", "candle"] {
        let (tr, ret, invalid) = train(40_000, &[&format!("backend={backend}")]);
        eprintln!("{backend}: mean return {ret:.2} after 40k steps, {invalid} masked actions taken");
        assert_eq!(invalid, 0, "{backend}: masked actions were taken while training");
        // Random masked play scores 8; the sign read right scores 16.
        assert!(ret > 14.0, "{backend}: mean return {ret} after 40k steps");
        let buf = tr.buffer();
        assert_eq!((buf.mask_dim, buf.action_masks.len()), (N_ACTIONS, buf.len() * N_ACTIONS));
        let valid_per_row = buf.action_masks.chunks(N_ACTIONS).map(|m| m.iter().map(|&v| v as usize).sum::<usize>());
        assert!(valid_per_row.into_iter().all(|v| v == 2), "{backend}: stored masks are not the env's");
    }
}

/// MultiDiscrete masks (the components' side by side, sb3-contrib's layout): masked PPO learns
/// both components' games on both backends and never takes a masked action in either.
#[test]
fn masked_ppo_learns_a_multidiscrete_pick_of_two() {
    for backend in ["fused", "candle"] {
        let (tr, ret, invalid) = train_on(Some(vec![3, 5]), 40_000, &[&format!("backend={backend}")]);
        eprintln!("{backend}: MultiDiscrete([3, 5]) mean return {ret:.2}, {invalid} masked actions taken");
        assert_eq!(invalid, 0, "{backend}: masked actions were taken while training");
        assert_eq!(tr.buffer().mask_dim, 8);
        // Random masked play scores 8 per component; both read right score 32.
        assert!(ret > 28.0, "{backend}: mean return {ret} after 40k steps");
    }
}

/// With `use_masking = false` the same PPO ignores the masks and cannot succeed: masked actions
/// end its episodes early.
#[test]
fn without_masks_ppo_cannot_play_pick_of_two() {
    let (tr, ret, invalid) = train(40_000, &["use_masking=false"]);
    eprintln!("use_masking=false: mean return {ret:.2}, {invalid} masked actions taken");
    assert_eq!(tr.buffer().mask_dim, 0);
    assert!(invalid > 1000, "only {invalid} masked actions taken without masks");
    assert!(ret < 8.0, "mean return {ret} without masks");
}

/// The evaluation acts under the env's masks (sb3-contrib's `evaluate_policy` with
/// `use_masking`): even an untrained policy's deterministic play takes no masked action.
#[test]
fn evaluation_and_predict_use_the_masks() {
    let (tr, _, _) = train(512, &["n_envs=1", "n_steps=512"]);
    let invalid = Arc::new(AtomicUsize::new(0));
    let mut env = pick_of_two(&invalid)().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let (mut obs, _) = env.reset(Some(5)).unwrap();
    let (mut masks, mut out, mut steps) = (vec![false; N_ACTIONS], ActOutput::default(), 0);
    while steps < 200 {
        assert!(env.action_masks(&mut masks).unwrap());
        let m: Vec<u8> = masks.iter().map(|&v| u8::from(v)).collect();
        tr.policy.act_into(&obs, Some(&m), steps % 2 == 0, &mut rng, &mut out).unwrap();
        let r = env.step(Action::Discrete(out.actions[0] as usize)).unwrap();
        obs = if r.terminated || r.truncated { env.reset(None).unwrap().0 } else { r.observation };
        steps += 1;
    }
    assert_eq!(invalid.load(Ordering::Relaxed), 0, "predict with masks took a masked action");
}

/// An env whose mask leaves no valid action is a clear error naming the env, not a panic or a
/// silent uniform draw.
#[test]
fn a_mask_without_a_valid_action_is_an_error() {
    struct NoValid(PickOfTwo);
    impl Env for NoValid {
        fn id(&self) -> &str {
            "NoValid-v0"
        }
        fn observation_space(&self) -> Space {
            self.0.observation_space()
        }
        fn action_space(&self) -> Space {
            self.0.action_space()
        }
        fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
            self.0.reset(seed)
        }
        fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
            self.0.step(action)
        }
        fn action_masks(&mut self, out: &mut [bool]) -> Result<bool> {
            out.fill(false);
            Ok(true)
        }
    }
    let cfg = Config::resolve("cleanrl", None, &["total_timesteps=512".into()]).unwrap();
    let invalid = Arc::new(AtomicUsize::new(0));
    let make = move || -> Result<Box<dyn Env>> {
        Ok(Box::new(NoValid(PickOfTwo {
            nvec: None,
            valid: vec![],
            higher: vec![],
            rng: env_rng(0),
            invalid: invalid.clone(),
        })))
    };
    let e = Trainer::with_env_fn("NoValid-v0", cfg, make).err().expect("an error").to_string();
    assert!(e.contains("NoValid-v0") && e.contains("allows no action"), "{e}");
}
