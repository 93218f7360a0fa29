//! Acrobot-v1, ported from `gymnasium/envs/classic_control/acrobot.py` (Gymnasium 1.4).
//!
//! Sutton (1996) and Sutton & Barto's book: two links hanging from a fixed pivot, torque on the
//! joint between them. Dynamics are the book's equations (`book_or_nips = "book"`), integrated
//! over one step of `dt = 0.2 s` by a single classical Runge–Kutta step (`rk4` with `_dsdt`), in
//! f64 with Gymnasium's order of operations. After the step the angles are wrapped into [−π, π]
//! (`wrap`) and the velocities clamped to ±4π / ±9π (`bound`). No torque noise
//! (`torque_noise_max = 0`), so `step` draws nothing from the RNG.
//!
//! Reward −1 every step, 0 on the terminating one.

use crate::error::{EnvError, Result};
use crate::{env_rng, expect_discrete, Action, Env, EnvRng, Info, Space, StepResult};
use rand::Rng;
use std::f64::consts::PI;

const DT: f64 = 0.2; // seconds per step
const LINK_LENGTH_1: f64 = 1.0; // [m]
const LINK_MASS_1: f64 = 1.0; // [kg] mass of link 1
const LINK_MASS_2: f64 = 1.0; // [kg] mass of link 2
const LINK_COM_POS_1: f64 = 0.5; // [m] position of the centre of mass of link 1
const LINK_COM_POS_2: f64 = 0.5; // [m] position of the centre of mass of link 2
const LINK_MOI: f64 = 1.0; // [kg m²] moment of inertia of both links
const GRAVITY: f64 = 9.8; // [m/s²] (`g` in `_dsdt`)
const MAX_VEL_1: f64 = 4.0 * PI; // [rad/s]
const MAX_VEL_2: f64 = 9.0 * PI; // [rad/s]
const AVAIL_TORQUE: [f64; 3] = [-1.0, 0.0, 1.0]; // [N m]

/// Acrobot-v1 without its time limit (use [`crate::make`] for the registered one).
///
/// State `[θ₁, θ₂, θ̇₁, θ̇₂]` (rad, rad, rad/s, rad/s; θ₂ relative to link 1, 0 = hanging down).
/// Observation: `Box(6)` = `[cos θ₁, sin θ₁, cos θ₂, sin θ₂, θ̇₁, θ̇₂]`; action: `Discrete(3)`
/// (torque −1, 0, +1 N m on the joint). Terminates when the free end rises above the pivot by
/// more than one link length: `−cos θ₁ − cos(θ₂ + θ₁) > 1`.
pub struct Acrobot {
    state: [f64; 4],
    rng: EnvRng,
}

impl Default for Acrobot {
    fn default() -> Self {
        Self::new()
    }
}

impl Acrobot {
    /// An Acrobot seeded with 0; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        Acrobot { state: [0.0; 4], rng: env_rng(0) }
    }
    fn obs(&self) -> Vec<f32> {
        let [t1, t2, dt1, dt2] = self.state;
        [t1.cos(), t1.sin(), t2.cos(), t2.sin(), dt1, dt2].iter().map(|&v| v as f32).collect()
    }
    fn terminal(&self) -> bool {
        let [t1, t2, _, _] = self.state;
        -t1.cos() - (t2 + t1).cos() > 1.0
    }
}

/// `_dsdt`: time derivative of the augmented state `[θ₁, θ₂, θ̇₁, θ̇₂, torque]` (book dynamics).
fn dsdt(s: &[f64; 5]) -> [f64; 5] {
    let (m1, m2, l1, lc1, lc2) = (LINK_MASS_1, LINK_MASS_2, LINK_LENGTH_1, LINK_COM_POS_1, LINK_COM_POS_2);
    let (i1, i2, g) = (LINK_MOI, LINK_MOI, GRAVITY);
    let [theta1, theta2, dtheta1, dtheta2, a] = *s;
    let d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2.0 * l1 * lc2 * theta2.cos()) + i1 + i2;
    let d2 = m2 * (lc2 * lc2 + l1 * lc2 * theta2.cos()) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * theta2.sin()
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * theta2.sin()
        + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * theta2.sin() - phi2)
        / (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0]
}

/// `rk4(_dsdt, y0, [0, dt])`: one classical Runge–Kutta step, returning the first 4 components.
fn rk4(y0: [f64; 5]) -> [f64; 4] {
    let dt = DT - 0.0; // t[1] - t[0]
    let dt2 = dt / 2.0;
    let shifted = |k: &[f64; 5], h: f64| -> [f64; 5] { std::array::from_fn(|i| y0[i] + h * k[i]) };
    let k1 = dsdt(&y0);
    let k2 = dsdt(&shifted(&k1, dt2));
    let k3 = dsdt(&shifted(&k2, dt2));
    let k4 = dsdt(&shifted(&k3, dt));
    std::array::from_fn(|i| y0[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]))
}

/// `wrap(x, m, M)`: shifts `x` by multiples of `M − m` into `[m, M]`.
///
/// Non-finite `x` passes through, and an `x` more than a million periods away (unreachable by
/// stepping, only by [`Env::set_state`]) is first reduced with `rem_euclid`, where Gymnasium
/// would loop (forever, once `x − diff == x`).
fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    if !x.is_finite() {
        return x;
    }
    if (x - m).abs() > 1e6 * diff {
        x = m + (x - m).rem_euclid(diff);
    }
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

/// `bound(x, m, M)` = `min(max(x, m), M)`.
fn bound(x: f64, m: f64, big_m: f64) -> f64 {
    x.max(m).min(big_m)
}

impl Env for Acrobot {
    fn render(&mut self) -> Result<crate::render::Frame> {
        Ok(crate::render::scenes::acrobot(&self.state))
    }
    fn render_fps(&self) -> u32 {
        15
    }
    fn id(&self) -> &str {
        "Acrobot-v1"
    }
    fn observation_space(&self) -> Space {
        let high = [1.0, 1.0, 1.0, 1.0, MAX_VEL_1 as f32, MAX_VEL_2 as f32];
        Space::Box {
            low: high.iter().map(|h| -h).collect(),
            high: high.to_vec(),
            shape: vec![6],
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
        // Gymnasium draws uniform(−0.1, 0.1) and stores the state as float32 (`.astype(np.float32)`).
        for v in self.state.iter_mut() {
            *v = self.rng.random_range(-0.1..0.1) as f32 as f64;
        }
        Ok((self.obs(), Info::default()))
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let a = expect_discrete(self.id(), action, 3)?;
        let torque = AVAIL_TORQUE[a];
        let [t1, t2, dt1, dt2] = self.state;
        let ns = rk4([t1, t2, dt1, dt2, torque]);
        self.state = [
            wrap(ns[0], -PI, PI),
            wrap(ns[1], -PI, PI),
            bound(ns[2], -MAX_VEL_1, MAX_VEL_1),
            bound(ns[3], -MAX_VEL_2, MAX_VEL_2),
        ];
        let terminated = self.terminal();
        let reward = if terminated { 0.0 } else { -1.0 };
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
        self.state = state
            .try_into()
            .map_err(|_| EnvError::InvalidArgument(format!("Acrobot-v1 state has 4 values, got {}", state.len())))?;
        Ok(())
    }
}
