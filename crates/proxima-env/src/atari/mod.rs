//! Atari preprocessing (issue 16), as Stable-Baselines3's `AtariWrapper` and CleanRL's
//! `ppo_atari.py` stack it: [`frame`], the pixel operations exact to OpenCV
//! (grayscale, INTER_AREA resize, the max of two frames), and [`wrappers`], the wrapper stack
//! (NoopReset, MaxAndSkip, EpisodicLife, FireReset, WarpFrame, ClipReward, FrameStack) over any
//! [`AtariGame`] (ALE games implement it in `proxima-gym`'s `AleGame`), and [`env`], the stack as
//! an [`crate::Env`] with uint8 observations, named by `atari:` ids.

pub mod env;
pub mod frame;
pub mod wrappers;

pub use env::{is_ale_game_id, parse_atari_spec, AtariEnv, AtariSpec, GameEpisode, ATARI_PREFIX};
pub use frame::{max_frames, rgb_to_gray, AreaResize};
pub use wrappers::{AtariGame, AtariOptions, AtariStep, AtariWrapper, GameStep};
