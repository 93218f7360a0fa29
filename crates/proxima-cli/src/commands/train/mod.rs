//! `proxima train`: its flags ([`args`]), the config they make ([`flags`]), `--resume`
//! ([`resume`]), `--seeds` ([`seeds`]), a rank under mpirun ([`mpi`]) and the progress bar
//! ([`progress`]); [`run::exec`] chooses between them.

mod args;
mod flags;
mod mpi;
mod progress;
mod resume;
mod run;
mod seeds;

pub use args::TrainArgs;
pub use run::exec;
