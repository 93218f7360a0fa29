//! MountainCarContinuous-v0, ported from `gymnasium/envs/classic_control/continuous_mountain_car.py`
//! (Gymnasium 1.4).
//!
//! The continuous-action Mountain Car (Moore 1990; de Broissia's variant with the goal at 0.45):
//! `v ← clamp(v + force·power − 0.0025·cos(3x), ±0.07)`, `x ← clamp(x + v, [−1.2, 0.6])`, an
//! inelastic wall on the left, with `force` the action clipped to [−1, 1] and `power = 0.0015`.
//! Reward `−0.1·a²` on the *unclipped* action `a`, plus 100 on reaching the goal.
//!
//! Precision follows Gymnasium with NumPy 2 exactly. Gymnasium stores the state as float32 after
//! every step, while `reset` leaves it float64, so:
//! * the first step after `reset` runs in f64, except that an in-range `force` is a float32
//!   scalar, making `force·power − 0.0025·cos(3x)` a float32 expression (`power` and the Python
//!   float `0.0025·cos(3x)` rounded to f32 first);
//! * every later step runs in f32 (`3x` too; `cos` itself in f64 via `math.cos`), with the Python
//!   float clamps 0.07 / −1.2 / 0.6 acting on f32 values.
//!
//! [`MountainCarContinuous`] tracks which of the two the current state is: `reset` makes it f64,
//! `step` makes it f32, and `set_state` picks f32 exactly when every value is an f32 (so a state
//! saved with [`Env::state`] mid-episode resumes bit-exactly).

use crate::error::{EnvError, Result};
use crate::{env_rng, expect_box, Action, Env, EnvRng, Info, Space, StepResult};
use rand::Rng;

const MIN_ACTION: f32 = -1.0;
const MAX_ACTION: f32 = 1.0;
const MIN_POSITION: f64 = -1.2; // [m]
const MAX_POSITION: f64 = 0.6; // [m]
const MAX_SPEED: f64 = 0.07; // [m/step]
const GOAL_POSITION: f64 = 0.45; // [m] (0.5 in the discrete MountainCar)
const GOAL_VELOCITY: f64 = 0.0; // [m/step]
const POWER: f64 = 0.0015;
const GRAVITY: f64 = 0.0025; // the literal `0.0025` in `step`

/// MountainCarContinuous-v0 without its time limit (use [`crate::make`] for the registered one).
///
/// Observation: `Box(2)` = `[position, velocity]` (position in [−1.2, 0.6], velocity in
/// [−0.07, 0.07]); action: `Box(1)` force in [−1, 1] (values outside are clipped for the
/// dynamics but penalised in full). Terminates when position ≥ 0.45 with velocity ≥ 0.
pub struct MountainCarContinuous {
    state: [f64; 2],
    /// Whether `state` holds float32 values (Gymnasium's state after any `step`).
    f32_state: bool,
    rng: EnvRng,
}

impl Default for MountainCarContinuous {
    fn default() -> Self {
        Self::new()
    }
}

impl MountainCarContinuous {
    /// A MountainCarContinuous seeded with 0; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        MountainCarContinuous { state: [0.0; 2], f32_state: false, rng: env_rng(0) }
    }
    fn obs(&self) -> Vec<f32> {
        self.state.iter().map(|&v| v as f32).collect()
    }

    /// One step from the float64 state `reset` leaves; returns the new `(position, velocity)`.
    fn step_f64(&self, a: f32) -> (f64, f64) {
        let [mut position, mut velocity] = self.state;
        let c = GRAVITY * (3.0 * position).cos();
        velocity += if (MIN_ACTION..=MAX_ACTION).contains(&a) {
            // np.float32 force: `force * power - c` is float32.
            f64::from(a * POWER as f32 - c as f32)
        } else {
            // Python float force (±1.0): everything f64.
            f64::from(a.clamp(MIN_ACTION, MAX_ACTION)) * POWER - c
        };
        velocity = velocity.clamp(-MAX_SPEED, MAX_SPEED);
        position += velocity;
        position = position.clamp(MIN_POSITION, MAX_POSITION);
        if position == MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        (position, velocity)
    }

    /// One step from a float32 state (every step after the first); all arithmetic in f32 but
    /// `cos` and the clipped-force product.
    fn step_f32(&self, a: f32) -> (f64, f64) {
        let (mut position, mut velocity) = (self.state[0] as f32, self.state[1] as f32);
        let c = GRAVITY * f64::from(3.0f32 * position).cos();
        let delta: f32 = if (MIN_ACTION..=MAX_ACTION).contains(&a) {
            a * POWER as f32 - c as f32
        } else {
            (f64::from(a.clamp(MIN_ACTION, MAX_ACTION)) * POWER - c) as f32
        };
        velocity += delta;
        velocity = velocity.clamp(-MAX_SPEED as f32, MAX_SPEED as f32);
        position += velocity;
        position = position.clamp(MIN_POSITION as f32, MAX_POSITION as f32);
        if position == MIN_POSITION as f32 && velocity < 0.0 {
            velocity = 0.0;
        }
        (f64::from(position), f64::from(velocity))
    }
}

impl Env for MountainCarContinuous {
    fn render(&mut self) -> Result<crate::render::Frame> {
        Ok(crate::render::scenes::mountain_car(self.state[0], GOAL_POSITION))
    }
    fn render_fps(&self) -> u32 {
        30
    }
    fn id(&self) -> &str {
        "MountainCarContinuous-v0"
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
        Space::uniform_box(MIN_ACTION, MAX_ACTION, &[1])
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if let Some(s) = seed {
            self.rng = env_rng(s);
        }
        self.state = [self.rng.random_range(-0.6..-0.4), 0.0];
        self.f32_state = false;
        Ok((self.obs(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let a = expect_box(self.id(), action, 1)?[0];
        let (position, velocity) = if self.f32_state { self.step_f32(a) } else { self.step_f64(a) };
        // NumPy 2 compares a float32 scalar with the Python float 0.45 in float32.
        let terminated = if self.f32_state {
            position as f32 >= GOAL_POSITION as f32 && velocity >= GOAL_VELOCITY
        } else {
            position >= GOAL_POSITION && velocity >= GOAL_VELOCITY
        };
        let a = f64::from(a);
        let reward = (if terminated { 100.0 } else { 0.0 }) - a * a * 0.1;
        self.state = [position as f32 as f64, velocity as f32 as f64];
        self.f32_state = true;
        Ok(StepResult { observation: self.obs(), reward, terminated, truncated: false, info: Info::default() })
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
            EnvError::InvalidArgument(format!("MountainCarContinuous-v0 state has 2 values, got {}", state.len()))
        })?;
        self.f32_state = self.state.iter().all(|&v| f64::from(v as f32) == v);
        Ok(())
    }
}
