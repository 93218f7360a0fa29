//! Acting with a trained Proxima policy, and nothing else: [`Policy::load`] reads a checkpoint
//! (`model.safetensors` or `checkpoints/update_*.safetensors` of a run directory, or a model
//! saved from Python) and [`Policy::act`] gives the actions `predict(obs, deterministic=True)`
//! gives — the same bits, for the policies this crate covers — with the observation
//! normalisation's frozen statistics applied first and the actions made ready for the env
//! (clipped to the `Box`, or an off-policy actor's tanh rescaled to it).
//!
//! It links the fused backend's own kernels (`proxima-kernels`) and reads the checkpoint with
//! `safetensors` and `serde_json`: no candle, no Python, no training code. Covered: MLP policies
//! (`MlpPolicy`: separate or shared towers, tanh or ReLU; `Discrete`, `MultiDiscrete` and `Box`
//! actions; optional action masks) and `CnnPolicy` (the Nature CNN on frames as f32 pixels
//! 0..=255, channel-first) of PPO, A2C, A3C, REINFORCE, TRPO and PPG, and the actors of SAC, TQC,
//! TD3 and DDPG. Recurrent and `Dict`-with-image policies are an [`Error::Unsupported`] for now
//! (export them to ONNX instead: `proxima export --onnx`).
//!
//! ```text
//! let policy = proxima_policy::Policy::load("runs/cartpole/model.safetensors".as_ref())?;
//! let actions = policy.act(&observations)?; // [rows, policy.action_width()]
//! ```

mod checkpoint;
mod error;
mod policy;

pub use error::Error;
pub use policy::{ActionSpace, Policy};
