//! The policy seam: the [`Policy`] trait every algorithm goes through, the network's
//! [`PolicySpec`] (its layers and parameter names, whatever implements it), the action
//! distributions ([`distributions`]) and the two implementations: candle's
//! ([`candle::ActorCritic`], general) and the fused CPU kernels ([`fused::FusedMlp`]: MLPs and
//! the Nature CNN), with [`Network`] holding either.
//!
//! The collector, PPO, A2C and A3C use nothing but [`Policy`] (TRPO's Fisher-vector products
//! need forward-mode derivatives and use the candle network directly).
//!
//! Default network (CleanRL's `Agent`, SB3's `MlpPolicy`): separate policy and value MLPs of
//! 2×64 tanh units; `shared_trunk = true` shares the hidden layers between the two heads.
//! `CnnPolicy`: the Nature CNN shared by both heads, on either backend (candle: each convolution
//! + ReLU one custom op, [`conv`]; fused: `fused/conv.rs`).
//! Orthogonal init (Saxe et al. 2014; openai/baselines): gain √2 on hidden layers, 0.01 on the
//! policy head, 1.0 on the value head, biases 0.
//!
//! Parameter names follow CleanRL's PyTorch module names (`actor.0.weight`, `critic.4.bias`,
//! `actor_logstd`), weights stored `[out, in]` as `torch.nn.Linear` does, so checkpoints read
//! naturally next to PyTorch ones.

pub mod candle;
mod conv;
pub mod distributions;
pub mod fast_tanh;
pub mod fused;
pub mod inputs;
mod interface;
mod network;
pub mod offpolicy;
pub mod recurrent;
mod recurrent_op;
mod spec;

pub use self::candle::{ActorCritic, DistParams};
pub use self::interface::{ActOutput, AuxBatch, FlatParams, Join, LossReport, Policy};
pub use self::network::{Backend, Network};
pub use self::offpolicy::{ActorKind, OffPolicyNets, OffPolicyShape};
pub use self::spec::{
    orthogonal, ActionKind, Activation, ImageShape, PolicyKind, PolicySpec, NATURE_CONVS, NATURE_FEATURES,
};
