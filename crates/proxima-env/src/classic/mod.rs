//! Native ports of Gymnasium 1.4's classic-control environments.
//!
//! Each replays `../shared/golden/classic_control.json` (see `tests/classic_control.rs`).

mod acrobot;
mod cartpole;
mod mountain_car;
mod mountain_car_continuous;
mod pendulum;

pub use acrobot::Acrobot;
pub use cartpole::CartPole;
pub use mountain_car::MountainCar;
pub use mountain_car_continuous::MountainCarContinuous;
pub use pendulum::Pendulum;
