//! `mpirun -np N proxima train ENV …` (and `srun`): one learner per rank, data-parallel PPO
//! ([`proxima::distributed`]). The engine is MPI through rsmpi, built with the `mpi` feature
//! (`cargo build --release -p proxima-cli --features mpi`; needs `libopenmpi-dev openmpi-bin
//! libclang-dev`); without it, a launch by an MPI launcher is a clear error naming the feature.
//!
//! Rank 0 alone writes the run directory, its logs and checkpoints (holding every rank's envs
//! and streams, gathered after each update); the other ranks train silently. Before anything
//! starts, every rank checks that it runs rank 0's run ([`check_same_run`]). `--resume` under the
//! same number of ranks is exact: rank 0 reads the checkpoint and broadcasts it. A signal (mpirun
//! forwards Ctrl-C to every rank as SIGTERM) stops every rank after the same update (the ranks
//! sum their flags after each one); rank 0 saves. A rank that fails prints its error with its
//! rank and aborts the whole job (`MPI_Abort`); a rank that waits too long in a collective ends
//! it (the watchdog, `PROXIMA_MPI_TIMEOUT`); a rank ends with its launcher.

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

/// Refuses what a distributed run does not do, before anything starts.
///
/// # Errors
/// `--seeds` (each job is one data-parallel run).
#[cfg(feature = "mpi")]
pub fn check_args(seeds: bool) -> Result<()> {
    if seeds {
        bail!("--seeds under mpirun: run one seed per job (each job is one data-parallel run)");
    }
    Ok(())
}

/// Every rank must run the same command: rank 0 sends `run` (a description of what it is about
/// to run: the env and the resolved configuration, or the resume's arguments) and every other
/// rank compares its own, before any collective whose buffer sizes depend on it (an env with
/// other observation sizes would corrupt memory in the all-reduces; another learning rate
/// would silently let the ranks' parameters drift apart).
///
/// # Errors
/// On a rank whose `run` differs from rank 0's, naming the first line that differs; the
/// engine's.
#[cfg(feature = "mpi")]
pub fn check_same_run(comm: &dyn proxima::distributed::Collective, run: &str) -> Result<()> {
    let mut first = run.as_bytes().to_vec();
    comm.broadcast_bytes(&mut first)?;
    let first = String::from_utf8_lossy(&first);
    let differs = comm.rank() != 0 && first != run;
    // Every rank learns whether any differs before going on: rank 0 creates nothing then.
    let mut any = [f64::from(u8::from(differs))];
    comm.all_reduce_sum_f64(&mut any)?;
    if !differs {
        if any[0] > 0.0 {
            bail!("another rank was started with another run than rank 0 (its error names the difference)");
        }
        return Ok(());
    }
    let (mut here, mut there) = (run.lines(), first.lines());
    let (mine, theirs) = loop {
        match (here.next(), there.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (a, b) => break (a.unwrap_or("(nothing)"), b.unwrap_or("(nothing)")),
        }
    };
    bail!(
        "this rank was started with another run than rank 0: `{mine}` here, `{theirs}` on rank 0 (every rank must run the same command, with the same configuration files)"
    )
}

/// Makes this rank end (SIGKILL) when its launcher does: after a second Ctrl-C `mpirun` exits at
/// once, and its ranks must not train on without it (Linux; elsewhere nothing).
#[cfg(feature = "mpi")]
pub fn die_with_launcher() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and touches no memory.
    unsafe {
        let parent = libc::getppid();
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::raise(libc::SIGKILL); // the launcher was already gone
        }
    }
}

#[cfg(feature = "mpi")]
pub use engine::Mpi;

#[cfg(feature = "mpi")]
mod engine {
    use mpi::collective::SystemOperation;
    use mpi::datatype::{Equivalence, PartitionMut};
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use mpi::Count;
    use proxima::distributed::Collective;
    use proxima::{ProximaError, Result};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    /// The world communicator of an initialised MPI (finalised when this is dropped), with the
    /// time spent in its collectives and a watchdog on them.
    pub struct Mpi {
        world: SimpleCommunicator,
        _universe: mpi::environment::Universe,
        /// Nanoseconds inside all-reduces and their number: [gradients (f32), statistics (f64)].
        timing: [(AtomicU64, AtomicU64); 2],
        /// Since when this rank has waited in a collective: nanoseconds after `epoch`, plus one;
        /// 0 outside one. The watchdog ([`watchdog`]) reads it.
        waiting_since: Arc<AtomicU64>,
        epoch: Instant,
    }

    /// Seconds a rank may wait in one collective before it ends the job, from
    /// `PROXIMA_MPI_TIMEOUT` (0: never).
    pub const DEFAULT_TIMEOUT_S: u64 = 600;

    /// The collective timeout this job runs with (`PROXIMA_MPI_TIMEOUT`, seconds; 0: none).
    ///
    /// # Errors
    /// A value that is not a whole number of seconds.
    fn timeout() -> anyhow::Result<u64> {
        match std::env::var("PROXIMA_MPI_TIMEOUT") {
            Err(_) => Ok(DEFAULT_TIMEOUT_S),
            Ok(v) => v.trim().parse().map_err(|_| {
                anyhow::anyhow!("PROXIMA_MPI_TIMEOUT={v:?}: expected whole seconds (0 turns the timeout off)")
            }),
        }
    }

    /// A thread that ends the job when this rank has waited `limit_s` seconds in one collective:
    /// another rank is stuck (an env that never returns, a stopped process) or gone without MPI
    /// noticing. It prints which rank gave up and after how long, then kills this process
    /// (`MPI_Abort` may only be called from the training thread); `mpirun` then ends the others.
    fn watchdog(waiting_since: Arc<AtomicU64>, epoch: Instant, limit_s: u64, (rank, size): (i32, i32)) {
        let poll = std::time::Duration::from_millis((limit_s * 250).clamp(50, 1000));
        std::thread::Builder::new()
            .name("mpi-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(poll);
                let since = waiting_since.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_nanos() as u64 + 1;
                if since != 0 && now.saturating_sub(since) >= limit_s * 1_000_000_000 {
                    super::one_line(&format!(
                        "error on rank {rank} of {size}: waited {limit_s} s in an MPI collective for the other ranks (PROXIMA_MPI_TIMEOUT={limit_s}): a rank is stuck or gone; ending the job"
                    ));
                    // SIGKILL, not abort(): Open MPI's handler would print a backtrace of this thread.
                    let _ = signal_hook::low_level::raise(signal_hook::consts::SIGKILL);
                    std::process::abort();
                }
            })
            .expect("a thread starts");
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
            let limit_s = timeout()?;
            let universe =
                mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI could not be initialised (or was already)"))?;
            let world = universe.world();
            let (waiting_since, epoch) = (Arc::new(AtomicU64::new(0)), Instant::now());
            if limit_s > 0 {
                watchdog(waiting_since.clone(), epoch, limit_s, (world.rank(), world.size()));
            }
            Ok(Mpi { world, _universe: universe, timing: Default::default(), waiting_since, epoch })
        }

        /// `f` (one collective) under the watchdog.
        fn watched<T>(&self, f: impl FnOnce() -> T) -> T {
            self.waiting_since.store(self.epoch.elapsed().as_nanos() as u64 + 1, Ordering::Relaxed);
            let out = f();
            self.waiting_since.store(0, Ordering::Relaxed);
            out
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
            self.watched(|| self.world.all_reduce_into(&send[..], v, SystemOperation::sum()));
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
        fn gather_bytes(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
            self.watched(|| self.gather_to_root(bytes))
        }
        fn broadcast_bytes(&self, bytes: &mut Vec<u8>) -> Result<()> {
            self.watched(|| self.broadcast_from_root(bytes))
        }
    }

    impl Mpi {
        /// [`Collective::gather_bytes`], unwatched.
        fn gather_to_root(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
            let root = self.world.process_at_rank(0);
            let n = count(bytes.len())?;
            if self.world.rank() != 0 {
                root.gather_into(&n);
                root.gather_varcount_into(bytes);
                return Ok(Vec::new());
            }
            let mut counts = vec![0 as Count; self.world.size() as usize];
            root.gather_into_root(&n, &mut counts[..]);
            let displs: Vec<Count> = counts
                .iter()
                .scan(0 as Count, |at, &c| {
                    let d = *at;
                    *at = at.saturating_add(c);
                    Some(d)
                })
                .collect();
            let total = counts.iter().map(|&c| c as usize).sum::<usize>();
            count(total)?;
            // At least one byte: an empty buffer's dangling pointer could equal the (empty) send
            // buffer's, which Open MPI refuses as an aliased MPI_Gatherv.
            let mut all = vec![0u8; total.max(1)];
            root.gather_varcount_into_root(bytes, &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]));
            Ok(displs.iter().zip(&counts).map(|(&d, &c)| all[d as usize..(d + c) as usize].to_vec()).collect())
        }
        /// [`Collective::broadcast_bytes`], unwatched.
        fn broadcast_from_root(&self, bytes: &mut Vec<u8>) -> Result<()> {
            let root = self.world.process_at_rank(0);
            let mut n = bytes.len() as u64;
            root.broadcast_into(&mut n);
            count(n as usize)?;
            bytes.resize(n as usize, 0);
            root.broadcast_into(&mut bytes[..]);
            Ok(())
        }
    }

    /// `n` as MPI's element count.
    fn count(n: usize) -> Result<Count> {
        Count::try_from(n)
            .map_err(|_| ProximaError::InvalidArgument(format!("a message of {n} bytes: more than MPI's count")))
    }
}

/// `line` on stderr in one write, so that the ranks' lines do not interleave.
#[cfg(feature = "mpi")]
pub fn one_line(line: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
}
