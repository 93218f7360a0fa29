//! The training run, readable top to bottom like the paper's Algorithm 1:
//!
//! ```text
//! for iteration = 1, 2, …:
//!     collect: run π_θold in N envs for T steps                  (Collector::collect)
//!     compute Â_1 … Â_T with GAE(γ, λ)                           (RolloutBuffer::compute_advantages)
//!     optimise L^CLIP + c₁L^VF − c₂S for K epochs, minibatch M   (algo::ppo::update)
//!     θ_old ← θ
//! ```
//!
//! That loop is [`Trainer::step`] (`trainer.rs`). The other algorithms replace only the optimise
//! line: `a2c` one gradient step (`algo::a2c::update`), `trpo` the natural-gradient step with
//! line search plus the critic's epochs (`algo::trpo::update`), `a3c` asynchronous workers that
//! each run this same collect → returns → gradient cycle on their own collector
//! (`algo::a3c::run_iteration`), `reinforce` one gradient step on Monte-Carlo returns
//! (`algo::reinforce::update`). The off-policy algorithms (SAC, TD3, DDPG) replace the whole
//! iteration: `n_steps` env steps into a replay buffer, with `gradient_steps` gradient steps every
//! `train_freq` of them (`Trainer::off_policy_iteration`, `algo::offpolicy`, `algo::sac`,
//! `algo::td3`).
//!
//! [`Trainer`] holds the explicit training state and writes no file: `step()` runs one
//! iteration, `learn(total_timesteps, callback)` runs them all and tells a [`Callback`] after
//! each. [`snapshot`] saves and resumes a trainer exactly; [`RunDir`] (`run_dir.rs`) is the
//! run directory as a callback (config, CSV, TensorBoard, checkpoints, final model and
//! evaluation), and [`run`] trains into one; [`eval`] runs episodes of a policy.

mod algorithm;
pub mod eval;
mod run_dir;
pub mod snapshot;
mod trainer;

pub use eval::{evaluate, evaluate_episodes, evaluate_recorded, mean_std, saved_normalizer, Recording};
pub use run_dir::{run, write_tensorboard, RunDir, RunOutcome, RunSummary, Stopped, CSV_COLUMNS};
pub use snapshot::{replay_path, ResumeOptions, REPLAY_SUFFIX};
pub use trainer::{policy_spec, Callback, NoCallback, Trainer, UpdateReport, NOTE_PREFIX};
