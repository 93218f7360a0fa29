//! Pendulum-v1, ported from `gymnasium/envs/classic_control/pendulum.py` (Gymnasium 1.4).
//!
//! The inverted-pendulum swing-up. Dynamics in f64 as Gymnasium computes them, except where
//! Gymnasium (NumPy 2) computes in float32: the torque `u` arrives as float32 and stays float32
//! after `np.clip`, so `3/(m·l²)·u` and `0.001·u²` are float32 products (the Python-float factor
//! rounded to f32 first), widened when they meet the f64 terms.
//!
//! `θ̇ ← clip(θ̇ + (3g/(2l)·sin θ + 3/(m·l²)·u)·dt, ±8)`, `θ ← θ + θ̇·dt` (semi-implicit Euler,
//! dt = 0.05 s). Reward `−(angle_normalize(θ)² + 0.1·θ̇² + 0.001·u²)`, computed on the state
//! *before* the step; never terminates.

use crate::error::{EnvError, Result};
use crate::{env_rng, expect_box, Action, Env, EnvRng, Info, Space, StepResult};
use rand::Rng;
use std::f64::consts::PI;

const MAX_SPEED: f64 = 8.0; // [rad/s]
const MAX_TORQUE: f32 = 2.0; // [N m]
const DT: f64 = 0.05; // [s]
const G: f64 = 10.0; // [m/s²] gravity (Gymnasium's default `g`)
const M: f64 = 1.0; // [kg]
const L: f64 = 1.0; // [m]

/// Initial θ is uniform in ±`DEFAULT_X` (rad), θ̇ uniform in ±`DEFAULT_Y` (rad/s).
const DEFAULT_X: f64 = PI;
const DEFAULT_Y: f64 = 1.0;

/// `angle_normalize(x) = ((x + π) mod 2π) − π`, with NumPy's (floored) float modulo.
fn angle_normalize(x: f64) -> f64 {
    (x + PI).rem_euclid(2.0 * PI) - PI
}

/// Pendulum-v1 without its time limit (use [`crate::make`] for the registered one).
///
/// State `[θ, θ̇]` (rad, 0 = upright; rad/s). Observation: `Box(3)` = `[cos θ, sin θ, θ̇]` in
/// `[−1, 1] × [−1, 1] × [−8, 8]`; action: `Box(1)` torque in [−2, 2] N m (larger values are
/// clipped, as Gymnasium does). Never terminates (the registered time limit is 200 steps).
pub struct Pendulum {
    state: [f64; 2],
    rng: EnvRng,
}

impl Default for Pendulum {
    fn default() -> Self {
        Self::new()
    }
}

impl Pendulum {
    /// A Pendulum seeded with 0; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        Pendulum { state: [0.0; 2], rng: env_rng(0) }
    }
    fn obs(&self) -> Vec<f32> {
        let [theta, thetadot] = self.state;
        vec![theta.cos() as f32, theta.sin() as f32, thetadot as f32]
    }
}

impl Env for Pendulum {
    fn render(&mut self) -> Result<crate::render::Frame> {
        Ok(crate::render::scenes::pendulum(&self.state))
    }
    fn render_fps(&self) -> u32 {
        30
    }
    fn id(&self) -> &str {
        "Pendulum-v1"
    }
    fn observation_space(&self) -> Space {
        let high = [1.0, 1.0, MAX_SPEED as f32];
        Space::Box {
            low: high.iter().map(|h| -h).collect(),
            high: high.to_vec(),
            shape: vec![3],
            dtype: crate::Dtype::Float32,
        }
    }
    fn action_space(&self) -> Space {
        Space::uniform_box(-MAX_TORQUE, MAX_TORQUE, &[1])
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if let Some(s) = seed {
            self.rng = env_rng(s);
        }
        self.state = [self.rng.random_range(-DEFAULT_X..DEFAULT_X), self.rng.random_range(-DEFAULT_Y..DEFAULT_Y)];
        Ok((self.obs(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let u: f32 = expect_box(self.id(), action, 1)?[0].clamp(-MAX_TORQUE, MAX_TORQUE);
        let [th, thdot] = self.state;
        // float32: `0.001 * (u**2)` and `3.0 / (m * l**2) * u` (NumPy 2 keeps u's dtype).
        let torque_cost = 0.001f32 * (u * u);
        let torque_acc = (3.0 / (M * (L * L))) as f32 * u;
        let an = angle_normalize(th);
        let costs = an * an + 0.1 * (thdot * thdot) + f64::from(torque_cost);
        let newthdot = thdot + (3.0 * G / (2.0 * L) * th.sin() + f64::from(torque_acc)) * DT;
        let newthdot = newthdot.clamp(-MAX_SPEED, MAX_SPEED);
        let newth = th + newthdot * DT;
        self.state = [newth, newthdot];
        Ok(StepResult {
            observation: self.obs(),
            reward: -costs,
            terminated: false,
            truncated: false,
            info: Info::default(),
        })
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
        self.state = state
            .try_into()
            .map_err(|_| EnvError::InvalidArgument(format!("Pendulum-v1 state has 2 values, got {}", state.len())))?;
        Ok(())
    }
}
