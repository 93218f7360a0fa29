//! `mpirun -np N proxima train …`: this process as one rank of a data-parallel run (the engine
//! is `crate::distributed`): the same-run check, a new or resumed trainer on every rank, rank 0
//! training as a plain run does and the others silently, and a failure anywhere aborting the job.

use super::args::TrainArgs;
#[cfg(feature = "mpi")]
use super::flags::{check_env_keys, safe_id, train_config_over};
#[cfg(feature = "mpi")]
use super::progress::train_with_bar;
#[cfg(feature = "mpi")]
use super::resume::{check_resumed_env, ready_to_resume, resume_flags, resume_options};
#[cfg(feature = "mpi")]
use crate::experiments::{self, pool::set_threads};
#[cfg(feature = "mpi")]
use crate::rundirs::{self, claim_run_dir, latest_checkpoint};
#[cfg(feature = "mpi")]
use crate::{distributed, signals};
#[cfg(feature = "mpi")]
use anyhow::Context;
use anyhow::{bail, Result};
#[cfg(feature = "mpi")]
use proxima::train;
#[cfg(feature = "mpi")]
use std::path::{Path, PathBuf};

/// One rank of `mpirun -np N proxima train …` (see `distributed.rs`): rank 0 trains as
/// [`train`] does, writing the run directory; the others train silently; a failure anywhere
/// aborts the job.
#[cfg(feature = "mpi")]
pub(super) fn train_distributed(a: &TrainArgs, var: &str, value: usize) -> Result<()> {
    use proxima::distributed::Collective;
    distributed::check_args(a.seeds.is_some())?;
    distributed::die_with_launcher();
    let mpi = std::sync::Arc::new(distributed::Mpi::init()?);
    let rank = mpi.rank();
    if var.ends_with("_SIZE") && value != mpi.size() {
        bail!(
            "{var}={value} says this is one of {value} processes, but MPI started {}: a variable left from another job (e.g. in an `srun --pty` shell)? Unset {var} to train in one process, or launch with mpirun/srun",
            mpi.size()
        );
    }
    if mpi.size() == 1 {
        eprintln!(
            "note: one MPI rank ({var}={value}): a distributed run of 1 rank, whose envs each sample from their own stream, so it is not the plain run of this seed (for that, run without mpirun and without launcher variables set)"
        );
    }
    // A signal stops every rank after the same update: after each one the ranks sum their
    // "signalled" flags (mpirun forwards Ctrl-C to every rank as SIGTERM, not at the same instant).
    let signalled = || {
        let mut any = [f64::from(u8::from(signals::stop_requested()))];
        mpi.all_reduce_sum_f64(&mut any).is_err() || any[0] > 0.0
    };
    let run = || -> Result<()> {
        let Some((mut trainer, dir)) = distributed_trainer(a, &mpi)? else { return Ok(()) };
        if rank == 0 {
            return train_with_bar(a, trainer, &dir, &signalled);
        }
        signals::training_started();
        while !trainer.is_done() {
            trainer.step()?;
            if signalled() {
                let signal = signals::received().unwrap_or(signal_hook::consts::SIGINT);
                return Err(signals::Interrupted { signal }.into());
            }
        }
        Ok(())
    };
    let t0 = std::time::Instant::now();
    let outcome = run();
    if let Err(e) = &outcome {
        if e.downcast_ref::<signals::Interrupted>().is_none() {
            distributed::one_line(&format!("error on rank {rank} of {}: {e:#}", mpi.size()));
            mpi.abort(1);
        }
    }
    if !a.quiet || std::env::var_os("PROXIMA_MPI_TIMING").is_some() {
        distributed::one_line(&comm_summary(&mpi, rank, t0.elapsed().as_secs_f64()));
    }
    outcome
}

/// This rank's trainer of a distributed run, new or resumed, and (on rank 0) its run directory;
/// `None` when there is nothing to train. Before anything else, the ranks check that they were
/// all started with the same run ([`distributed::check_same_run`]).
#[cfg(feature = "mpi")]
pub(super) fn distributed_trainer(
    a: &TrainArgs,
    mpi: &std::sync::Arc<distributed::Mpi>,
) -> Result<Option<(train::Trainer, PathBuf)>> {
    use proxima::distributed::Collective;
    let Some(dir) = &a.resume else {
        let (env_id, cfg) = train_config_over(a, mpi.size())?;
        distributed::check_same_run(&**mpi, &format!("train {env_id}\n{}", cfg.to_toml()))?;
        let (seed, label) = (cfg.seed, cfg.algo);
        let trainer = train::Trainer::distributed(env_id, cfg, mpi.clone())?;
        if mpi.rank() != 0 {
            return Ok(Some((trainer, PathBuf::new())));
        }
        check_env_keys(a, &trainer)?;
        let dir = claim_run_dir(a.run_dir.clone(), &format!("{}__{label}__{seed}", safe_id(env_id)))?;
        return Ok(Some((trainer, dir)));
    };
    let given = |v: Option<String>| v.unwrap_or_else(|| "(not given)".into());
    let this_run = format!(
        "train --resume {}\n--total-timesteps {}\n--backend {}\n--vector-env {}\nENV_ID {}",
        dir.display(),
        given(a.total_timesteps.map(|t| t.to_string())),
        given(a.backend.clone()),
        given(a.vector_env.clone()),
        given(a.env_id.clone())
    );
    distributed::check_same_run(&**mpi, &this_run)?;
    Ok(resumed_distributed(a, dir, mpi.clone())?.map(|trainer| (trainer, dir.clone())))
}

/// `--resume DIR` under mpirun: rank 0 reads DIR's latest checkpoint and sends it to every rank
/// (no shared file system needed), and each rank takes its own envs and streams from it
/// ([`train::Trainer::resume_distributed`]); `None` when there is nothing to train.
#[cfg(feature = "mpi")]
pub(super) fn resumed_distributed(
    a: &TrainArgs,
    dir: &Path,
    mpi: std::sync::Arc<distributed::Mpi>,
) -> Result<Option<train::Trainer>> {
    use proxima::distributed::Collective;
    let (mut bytes, mut name) = (Vec::new(), Vec::new());
    let rank = mpi.rank();
    if rank == 0 {
        if dir.join(experiments::seeds::MANIFEST).is_file() {
            bail!(
                "{} is a multi-seed run (--seeds): its seeds are runs of one process each; resume it without mpirun",
                dir.display()
            );
        }
        let file = latest_checkpoint(dir)?;
        bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        name = file.display().to_string().into_bytes();
    }
    mpi.broadcast_bytes(&mut bytes)?;
    mpi.broadcast_bytes(&mut name)?;
    let file = PathBuf::from(String::from_utf8_lossy(&name).into_owned());
    let ck = proxima::checkpoint::load_bytes(&bytes, &file.display().to_string())?;
    check_resumed_env(dir, &ck, a.env_id.as_deref())?;
    let opts = resume_options(a)?;
    let trainer = train::Trainer::resume_distributed(&ck, opts, mpi)?;
    if rank == 0 {
        let ready = ready_to_resume(dir, &file, trainer, a.total_timesteps)?;
        if ready.is_some() {
            // Only a run that goes on rewrites its config.toml.
            rundirs::warn_if_config_edited(dir, &ck, &resume_flags(opts));
        }
        return Ok(ready);
    }
    set_threads(trainer.cfg.num_threads);
    Ok(Some(trainer))
}

/// One line on the time this rank spent communicating.
#[cfg(feature = "mpi")]
pub(super) fn comm_summary(mpi: &distributed::Mpi, rank: usize, wall: f64) -> String {
    use proxima::distributed::Collective;
    let c = mpi.comm_time();
    let per_call = |(n, s): (u64, f64)| s / n.max(1) as f64 * 1e6;
    format!(
        "MPI rank {rank} of {}: {wall:.2} s; gradient all-reduces {} × {:.1} µs = {:.2} s, statistics all-reduces {} × {:.1} µs = {:.2} s ({:.1}% of the wall time communicating)",
        mpi.size(),
        c.grads.0,
        per_call(c.grads),
        c.grads.1,
        c.stats.0,
        per_call(c.stats),
        c.stats.1,
        100.0 * (c.grads.1 + c.stats.1) / wall.max(1e-9)
    )
}

/// Without the `mpi` feature a launch by mpirun/srun is refused, naming the feature.
#[cfg(not(feature = "mpi"))]
pub(super) fn train_distributed(_: &TrainArgs, var: &str, value: usize) -> Result<()> {
    bail!(
        "proxima was started by an MPI launcher ({var}={value} is set) but built without MPI: rebuild with `cargo build --release -p proxima-cli --features mpi` (needs libopenmpi-dev, openmpi-bin and libclang-dev), or run it without mpirun"
    )
}
