//! `proxima train`: a new run, `--resume` of one, many seeds, or one rank under mpirun.

use super::args::TrainArgs;
use super::flags::new_trainer;
use super::mpi::train_distributed;
use super::progress::train_with_bar;
use super::resume::{resume_options, resumed_trainer};
use super::seeds::train_seeds;
use crate::{distributed, experiments, signals};
use anyhow::{bail, Result};

/// `proxima train`: a new run, or `--resume` of one, then training with a progress bar.
pub fn exec(a: TrainArgs) -> Result<()> {
    if let Some(device) = &a.device {
        bail!("--device {device}: {}", proxima::config::CPU_ONLY);
    }
    if let Some((var, value)) = distributed::launched_by() {
        if cfg!(feature = "mpi") || !(var.ends_with("_SIZE") && value == 1) {
            return train_distributed(&a, &var, value);
        }
        // One process (`mpirun -np 1`, or a variable left in the shell): a plain run.
        eprintln!("note: {var}=1 is set; this build has no MPI, so this is a plain run of one process");
    }
    if a.seeds.is_some() {
        return train_seeds(&a, None);
    }
    if let Some(dir) = a.resume.as_deref().filter(|d| d.join(experiments::seeds::MANIFEST).is_file()) {
        return train_seeds(&a, Some(dir));
    }
    if a.jobs.is_some() {
        bail!("--jobs runs seeds in parallel: it needs --seeds (or --resume of a multi-seed run)");
    }
    let (mut trainer, run_dir) = match &a.resume {
        Some(dir) => match resumed_trainer(dir, a.env_id.as_deref(), resume_options(&a)?)? {
            Some(trainer) => (trainer, dir.clone()),
            None => return Ok(()),
        },
        None => new_trainer(&a)?,
    };
    // A Ctrl-C lands between two gradient steps of an off-policy burst too.
    trainer.set_interrupt(signals::stop_requested);
    train_with_bar(&a, trainer, &run_dir, &signals::stop_requested)
}
