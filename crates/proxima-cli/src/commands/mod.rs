//! One module per subcommand, as cargo's `commands/`: each holds its flags (clap `Args`) and
//! its `exec`; `main` holds the command enum and the dispatch.

pub mod ablation;
pub mod bench_env;
pub mod eval;
pub mod export;
pub mod lm;
pub mod lm_hf;
pub mod train;
