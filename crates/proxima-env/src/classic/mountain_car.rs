//! MountainCar-v0, ported from `gymnasium/envs/classic_control/mountain_car.py` (Gymnasium 1.4).
//!
//! Moore (1990). An under-powered car in a valley `y = sin(3x)`; dynamics in f64 exactly as
//! Gymnasium computes them:
//! `v ← clip(v + (a − 1)·force + cos(3x)·(−gravity), ±max_speed)`, `x ← clip(x + v, [−1.2, 0.6])`,
//! and an inelastic wall at the left (`v ← 0` when `x = −1.2` and `v < 0`). Observations are the
//! state cast to f32. Reward −1 every step, including the terminating one.

use crate::error::{EnvError, Result};
use crate::{env_rng, expect_discrete, Action, Env, EnvRng, Info, Space, StepResult};
use rand::Rng;

const MIN_POSITION: f64 = -1.2; // [m]
const MAX_POSITION: f64 = 0.6; // [m]
const MAX_SPEED: f64 = 0.07; // [m/step]
const GOAL_POSITION: f64 = 0.5; // [m]
const GOAL_VELOCITY: f64 = 0.0; // [m/step]
const FORCE: f64 = 0.001;
const GRAVITY: f64 = 0.0025;

/// MountainCar-v0 without its time limit (use [`crate::make`] for the registered one).
///
/// Observation: `Box(2)` = `[position, velocity]` (position in [−1.2, 0.6], velocity in
/// [−0.07, 0.07]); action: `Discrete(3)` (0 accelerate left, 1 none, 2 right). Terminates when
/// position ≥ 0.5 with velocity ≥ 0.
pub struct MountainCar {
    state: [f64; 2],
    rng: EnvRng,
}

impl Default for MountainCar {
    fn default() -> Self {
        Self::new()
    }
}

impl MountainCar {
    /// A MountainCar seeded with 0; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        MountainCar { state: [0.0; 2], rng: env_rng(0) }
    }
    fn obs(&self) -> Vec<f32> {
        self.state.iter().map(|&v| v as f32).collect()
    }
}

impl Env for MountainCar {
    fn render(&mut self) -> Result<crate::render::Frame> {
        Ok(crate::render::scenes::mountain_car(self.state[0], GOAL_POSITION))
    }
    fn render_fps(&self) -> u32 {
        30
    }
    fn id(&self) -> &str {
        "MountainCar-v0"
    }
    fn observation_space(&self) -> Space {
        Space::Box {
            low: vec![MIN_POSITION as f32, -MAX_SPEED as f32],
            high: vec![MAX_POSITION as f32, MAX_SPEED as f32],
            shape: vec![2],
            dtype: crate::Dtype::Float32,
        }
    }
    fn action_space(&self) -> Space {
        Space::Discrete { n: 3 }
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if let Some(s) = seed {
            self.rng = env_rng(s);
        }
        self.state = [self.rng.random_range(-0.6..-0.4), 0.0];
        Ok((self.obs(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let a = expect_discrete(self.id(), action, 3)?;
        let [mut position, mut velocity] = self.state;
        velocity += (a as f64 - 1.0) * FORCE + (3.0 * position).cos() * (-GRAVITY);
        velocity = velocity.clamp(-MAX_SPEED, MAX_SPEED);
        position += velocity;
        position = position.clamp(MIN_POSITION, MAX_POSITION);
        if position == MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        let terminated = position >= GOAL_POSITION && velocity >= GOAL_VELOCITY;
        self.state = [position, velocity];
        Ok(StepResult { observation: self.obs(), reward: -1.0, terminated, truncated: false, info: Info::default() })
    }
    fn rng(&self) -> Option<&EnvRng> {
        Some(&self.rng)
    }
    fn rng_mut(&mut self) -> Option<&mut EnvRng> {
        Some(&mut self.rng)
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(self.state.to_vec())
    }
    fn set_state(&mut self, state: &[f64]) -> Result<()> {
        self.state = state.try_into().map_err(|_| {
            EnvError::InvalidArgument(format!("MountainCar-v0 state has 2 values, got {}", state.len()))
        })?;
        Ok(())
    }
}
