//! PPO with `CnnPolicy` on the fused kernels through the trainer: a toy image env (registered
//! under `imgtest:`, native, so every step of it is Proxima's and a resume is exact) trains,
//! reproduces from a seed, resumes bit for bit from a checkpoint, and moves to candle.

use proxima::config::{Config, ValidConfig};
use proxima::env::{Action, Env, EnvError, Info, Space, StepResult};
use proxima::policy::{Backend, Policy};
use proxima::train::Trainer;

const SIDE: usize = 36;

/// A bright 6 × 6 square somewhere in a dark 36 × 36 frame, the last two frames stacked
/// (`[2, 36, 36]` uint8); the action says which third of the frame (left, middle, right) the
/// square is in now: reward 1 when right. The square's next place is a hash of the step and
/// its place, so the whole state is `(t, x, y, previous x, previous y)`.
struct Square {
    state: [f64; 5],
}

impl Square {
    fn frame(&self) -> Vec<f32> {
        let [_, x, y, px, py] = self.state.map(|v| v as usize);
        let mut obs = vec![0f32; 2 * SIDE * SIDE];
        for (c, (sx, sy)) in [(px, py), (x, y)].into_iter().enumerate() {
            for r in sy..sy + 6 {
                for col in sx..sx + 6 {
                    obs[c * SIDE * SIDE + r * SIDE + col] = 255.0;
                }
            }
        }
        obs
    }

    fn place(t: u64, salt: u64) -> (f64, f64) {
        let h = (t.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xBF58_476D_1CE4_E5B9)).rotate_left(29);
        ((h % 31) as f64, ((h >> 8) % 31) as f64)
    }
}

impl Env for Square {
    fn id(&self) -> &str {
        "imgtest:square"
    }
    fn observation_space(&self) -> Space {
        Space::image(&[2, SIDE, SIDE])
    }
    fn action_space(&self) -> Space {
        Space::Discrete { n: 3 }
    }
    fn reset(&mut self, seed: Option<u64>) -> proxima::env::Result<(Vec<f32>, Info)> {
        let (x, y) = Square::place(seed.unwrap_or(self.state[0] as u64), 7);
        self.state = [0.0, x, y, x, y];
        Ok((self.frame(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> proxima::env::Result<StepResult> {
        let Action::Discrete(a) = action else { return Err(EnvError::InvalidAction("discrete".into())) };
        let [t, x, y, _, _] = self.state;
        let reward = if a == (x as usize * 3) / 31 { 1.0 } else { 0.0 };
        let (nx, ny) = Square::place(t as u64 + 1, x as u64 * 31 + y as u64);
        self.state = [t + 1.0, nx, ny, x, y];
        let truncated = self.state[0] >= 20.0;
        Ok(StepResult { observation: self.frame(), reward, terminated: false, truncated, info: Info::default() })
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(self.state.to_vec())
    }
    fn set_state(&mut self, state: &[f64]) -> proxima::env::Result<()> {
        self.state.copy_from_slice(state);
        Ok(())
    }
}

fn setup() {
    proxima::env::register_prefix("imgtest:", |_, _| Ok(Box::new(Square { state: [0.0; 5] })));
}

fn config(total: u64, backend: &str) -> ValidConfig {
    let sets = [
        "n_envs=2",
        "n_steps=16",
        "batch_size=16",
        "n_epochs=2",
        &format!("total_timesteps={total}"),
        &format!("backend={backend}"),
    ];
    Config::resolve("paper-atari", None, &sets.map(String::from)).unwrap()
}

fn train(tr: &mut Trainer) {
    while !tr.is_done() {
        let r = tr.step().unwrap();
        assert!(r.stats.policy_loss.is_finite() && r.stats.value_loss.is_finite());
        assert!(r.stats.kl_divergence.is_nan(), "the Atari presets do not measure the rollout KL");
    }
}

#[test]
fn the_fused_cnn_trains_reproduces_and_resumes_exactly() {
    setup();
    let mut whole = Trainer::new("imgtest:square", config(192, "auto")).unwrap();
    assert_eq!(whole.policy.backend(), Backend::Fused, "auto picks the fused kernels for CnnPolicy");
    train(&mut whole);
    let mut again = Trainer::new("imgtest:square", config(192, "auto")).unwrap();
    train(&mut again);
    let theta = whole.policy.params().unwrap();
    assert_eq!(theta, again.policy.params().unwrap(), "the same seed gives the same weights");
    assert_ne!(theta, Trainer::new("imgtest:square", config(192, "auto")).unwrap().policy.params().unwrap());

    // Half the run, a checkpoint, the other half from it: the uninterrupted run's weights.
    let mut half = Trainer::new("imgtest:square", config(192, "auto")).unwrap();
    for _ in 0..3 {
        half.step().unwrap();
    }
    let path = std::env::temp_dir().join(format!("proxima-cnn-resume-{}.safetensors", std::process::id()));
    half.save(&path).unwrap();
    let ck = proxima::checkpoint::load(&path).unwrap();
    let mut resumed = Trainer::resume(&ck, None).unwrap();
    assert_eq!(resumed.policy.backend(), Backend::Fused);
    train(&mut resumed);
    assert_eq!(resumed.policy.params().unwrap(), theta, "resumed ≠ uninterrupted");

    // The same checkpoint continues on candle: the network moves, the run goes on.
    let mut on_candle = Trainer::resume_on(&ck, None, Some(Backend::Candle)).unwrap();
    assert_eq!(on_candle.policy.backend(), Backend::Candle);
    assert_eq!(on_candle.policy.params().unwrap(), half.policy.params().unwrap());
    train(&mut on_candle);
    let _ = std::fs::remove_file(&path);
}
