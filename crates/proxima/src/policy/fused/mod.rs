//! The fused CPU backend for MLP actor-critics and the Nature CNN (`CnnPolicy`): the network of a
//! [`crate::policy::PolicySpec`] with hand-written forward and backward passes on contiguous f32
//! buffers ([`kernels`]; the convolutions in `conv`), the PPO and A2C losses in closed form
//! ([`heads`]), and θ, ∇θ as flat vectors the optimiser steps in place; with two threads or more
//! an MLP's actor and critic run side by side ([`second_thread`]) and the CNN's products split in
//! two. It covers what PPO, A2C, A3C and REINFORCE need; TRPO's forward-mode products stay on
//! candle.

mod batched_head;
mod heads;
pub(super) mod kernels;
mod mlp;
mod net;
mod offpolicy;
mod second_thread;

pub use self::batched_head::{cols_len, head_loss_f32};
pub use self::heads::{head_loss, kl_sum, scratch_len, HeadBatch, HeadGrads, HeadLoss};
pub use self::mlp::{FusedMlp, MIN_SHARD_ROWS};
pub use self::offpolicy::{
    cat_rows, cat_rows_into, squash, squash_backward, FusedOffPolicy, Pass, ACTOR, CRITICS, TARGETS,
};
