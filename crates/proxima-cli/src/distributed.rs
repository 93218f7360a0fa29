//! `mpirun -np N proxima train ENV …` (and `srun`): one learner per rank, data-parallel PPO
//! ([`proxima::dist`]). The engine is MPI through rsmpi, built with the `mpi` feature
//! (`cargo build --release -p proxima-cli --features mpi`; needs `libopenmpi-dev openmpi-bin
//! libclang-dev`); without it, a launch by an MPI launcher is a clear error naming the feature.
//!
//! Rank 0 alone writes the run directory, its logs and checkpoints; the other ranks train
//! silently. A signal (mpirun forwards Ctrl-C to every rank as SIGTERM) stops every rank after
//! the same update (the ranks sum their flags after each one); rank 0 saves. A rank that fails
//! prints its error with its rank and aborts the whole job (`MPI_Abort`), so no rank waits
//! forever in a collective.

#[cfg(feature = "mpi")]
use anyhow::{bail, Result};

/// One of the environment variables MPI launchers set in every rank (Open MPI's `mpirun`:
/// `OMPI_COMM_WORLD_SIZE`; PMI-2 and PMIx as `srun` and MPICH's `mpiexec` use them: `PMI_SIZE`,
/// `PMIX_RANK`), with its value, when launched so.
pub fn launched_by() -> Option<(String, usize)> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse().ok()).map(|n| (k.to_string(), n)))
}

/// Refuses what a distributed run does not do yet, before anything starts.
#[cfg(feature = "mpi")]
///
/// # Errors
/// `--seeds`, `--resume` (a checkpoint holds rank 0's envs and streams only, for now).
pub fn check_args(seeds: bool, resume: bool) -> Result<()> {
    if seeds {
        bail!("--seeds under mpirun: run one seed per job (each job is one data-parallel run)");
    }
    if resume {
        bail!("--resume under mpirun is not supported yet (a distributed run's checkpoint holds rank 0's envs and sampling streams only): start a new run");
    }
    Ok(())
}

#[cfg(feature = "mpi")]
pub use engine::Mpi;

#[cfg(feature = "mpi")]
mod engine {
    use mpi::collective::SystemOperation;
    use mpi::datatype::Equivalence;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use proxima::dist::Collective;
    use proxima::{ProximaError, Result};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    /// The world communicator of an initialised MPI (finalised when this is dropped), with the
    /// time spent in its collectives.
    pub struct Mpi {
        world: SimpleCommunicator,
        _universe: mpi::environment::Universe,
        /// Nanoseconds inside all-reduces and their number: [gradients (f32), statistics (f64)].
        timing: [(AtomicU64, AtomicU64); 2],
    }

    /// Time spent in all-reduces: (calls, seconds).
    #[derive(Clone, Copy, Debug)]
    pub struct CommTime {
        /// The gradients' (one per minibatch).
        pub grads: (u64, f64),
        /// The statistics' (advantages, losses and KL, rollout KL, episodes).
        pub stats: (u64, f64),
    }

    // SAFETY: MPI is initialised with the default threading level and every call is made from
    // the thread that trains (the main thread); the communicator handle is only an id there.
    unsafe impl Send for Mpi {}
    // SAFETY: as above: `&Mpi` is only used from the training thread.
    unsafe impl Sync for Mpi {}

    impl Mpi {
        /// Initialises MPI.
        ///
        /// # Errors
        /// MPI already initialised, or failing to start.
        pub fn init() -> anyhow::Result<Mpi> {
            let universe =
                mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI could not be initialised (or was already)"))?;
            Ok(Mpi { world: universe.world(), _universe: universe, timing: Default::default() })
        }

        /// Ends the whole job with `code` (every rank), after this rank's message.
        pub fn abort(&self, code: i32) -> ! {
            self.world.abort(code)
        }

        /// The time spent in all-reduces so far.
        pub fn comm_time(&self) -> CommTime {
            let read = |k: usize| {
                let (ns, calls) = &self.timing[k];
                (calls.load(Ordering::Relaxed), ns.load(Ordering::Relaxed) as f64 * 1e-9)
            };
            CommTime { grads: read(0), stats: read(1) }
        }

        /// `v ← Σ_ranks v`, timed under `kind` (0: gradients, 1: statistics).
        fn sum<T: Equivalence + Clone>(&self, v: &mut [T], kind: usize) -> Result<()> {
            if v.len() > i32::MAX as usize {
                let n = v.len();
                return Err(ProximaError::InvalidArgument(format!(
                    "an all-reduce of {n} values: more than MPI's count"
                )));
            }
            let t = Instant::now();
            let send = v.to_vec();
            self.world.all_reduce_into(&send[..], v, SystemOperation::sum());
            let (ns, calls) = &self.timing[kind];
            ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    impl Collective for Mpi {
        fn rank(&self) -> usize {
            self.world.rank() as usize
        }
        fn size(&self) -> usize {
            self.world.size() as usize
        }
        fn all_reduce_sum_f32(&self, v: &mut [f32]) -> Result<()> {
            self.sum(v, 0)
        }
        fn all_reduce_sum_f64(&self, v: &mut [f64]) -> Result<()> {
            self.sum(v, 1)
        }
    }
}
