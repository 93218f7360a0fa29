//! Experiments built on the library: runs over grids of settings, envs and seeds. They are
//! the CLI's, not the library's: the library trains one run; an experiment decides which runs
//! to make and how to score them.

pub mod ablation;
pub mod pool;
pub mod seeds;
