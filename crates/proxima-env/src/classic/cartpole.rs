//! CartPole-v1, ported from `gymnasium/envs/classic_control/cartpole.py` (Gymnasium 1.4).
//!
//! Barto, Sutton & Anderson (1983). Dynamics in f64 exactly as Gymnasium computes them
//! (`θ̇²` and `cos²θ` squared first, explicit Euler with τ = 0.02 s); observations are the
//! state cast to f32. Reward 1 every step, including the terminating one.

use crate::error::{EnvError, Result};
use crate::{env_rng, expect_discrete, Action, Env, EnvRng, Info, Space, StepResult};
use rand::Rng;

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
const LENGTH: f64 = 0.5; // half the pole's length
const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02; // seconds between state updates
const THETA_THRESHOLD_RADIANS: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const X_THRESHOLD: f64 = 2.4;

/// CartPole-v1 without its time limit (use [`crate::make`] for the registered one).
///
/// Observation: `Box(4)` = `[x, ẋ, θ, θ̇]` (m, m/s, rad, rad/s); action: `Discrete(2)`
/// (0 push left, 1 push right). Terminates when |x| > 2.4 or |θ| > 12°.
pub struct CartPole {
    state: [f64; 4],
    rng: EnvRng,
}

impl Default for CartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl CartPole {
    /// A CartPole seeded with 0; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        CartPole { state: [0.0; 4], rng: env_rng(0) }
    }
    fn obs(&self) -> Vec<f32> {
        self.state.iter().map(|&v| v as f32).collect()
    }
}

impl Env for CartPole {
    fn render(&mut self) -> Result<crate::render::Frame> {
        Ok(crate::render::scenes::cartpole(&self.state))
    }
    fn render_fps(&self) -> u32 {
        50
    }
    fn id(&self) -> &str {
        "CartPole-v1"
    }
    fn observation_space(&self) -> Space {
        let high = [X_THRESHOLD * 2.0, f32::MAX as f64, THETA_THRESHOLD_RADIANS * 2.0, f32::MAX as f64];
        Space::Box {
            low: high.iter().map(|h| -(*h as f32)).collect(),
            high: high.iter().map(|h| *h as f32).collect(),
            shape: vec![4],
            dtype: crate::Dtype::Float32,
        }
    }
    fn action_space(&self) -> Space {
        Space::Discrete { n: 2 }
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        if let Some(s) = seed {
            self.rng = env_rng(s);
        }
        for v in self.state.iter_mut() {
            *v = self.rng.random_range(-0.05..0.05);
        }
        Ok((self.obs(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let a = expect_discrete(self.id(), action, 2)?;
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if a == 1 { FORCE_MAG } else { -FORCE_MAG };
        let (sintheta, costheta) = (theta.sin(), theta.cos());
        let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
        // Explicit Euler ("euler" kinematics_integrator, Gymnasium's default).
        self.state = [x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot, theta_dot + TAU * thetaacc];
        let [x, _, theta, _] = self.state;
        let terminated = !(-X_THRESHOLD..=X_THRESHOLD).contains(&x)
            || !(-THETA_THRESHOLD_RADIANS..=THETA_THRESHOLD_RADIANS).contains(&theta);
        Ok(StepResult { observation: self.obs(), reward: 1.0, terminated, truncated: false, info: Info::default() })
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
            .map_err(|_| EnvError::InvalidArgument(format!("CartPole-v1 state has 4 values, got {}", state.len())))?;
        Ok(())
    }
}
