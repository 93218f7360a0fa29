//! SIGINT (Ctrl-C) and SIGTERM: the first one asks the running command to stop after the
//! current update, save and exit with status 128 + the signal's number (130, 143); a second one
//! exits at once with that status (files are written atomically, so nothing is left torn) —
//! unless it comes within [`DUPLICATE_WINDOW`] of the first, when it is the same request sent
//! twice (coreutils' `timeout` signals the command and then its whole process group) and is
//! ignored.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A second signal this soon after the first is taken as a copy of it, not as a request to quit
/// at once: `timeout` (without `--foreground`) sends its signal to the command and then to its
/// own process group, microseconds apart; a person pressing Ctrl-C twice takes longer.
pub const DUPLICATE_WINDOW: Duration = Duration::from_millis(100);

struct Flags {
    /// Set before training starts and once it is over (the model is being written and
    /// evaluated): a signal then takes its default action and ends the process at once.
    over: Arc<AtomicBool>,
    /// The first signal's number, 0 before any.
    signal: Arc<AtomicUsize>,
    /// Set by the first signal: a later one (outside [`DUPLICATE_WINDOW`]) then exits at once.
    armed: Arc<AtomicBool>,
    /// When the first signal came, in nanoseconds since [`install`].
    first_at: Arc<AtomicU64>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();

/// Installs the handlers (once; later calls do nothing), first thing in `main`: until
/// [`training_started`] a signal still takes its default action (the process ends at once).
/// Without them (an error installing them), a signal keeps its default action.
///
/// Why first: the embedded Python of the Gymnasium bridge installs its own SIGINT handler (a
/// `KeyboardInterrupt` raised inside the env's code, which stops training with a traceback
/// instead of saving) when its `signal` module is imported while SIGINT still has its default
/// action; these handlers would then call it. Installed before anything starts Python, they are
/// what Python finds, and it leaves them alone.
pub fn install() {
    FLAGS.get_or_init(|| {
        let flags = Flags {
            over: Arc::new(AtomicBool::new(true)),
            signal: Arc::new(AtomicUsize::new(0)),
            armed: Arc::new(AtomicBool::new(false)),
            first_at: Arc::new(AtomicU64::new(0)),
        };
        let start = Instant::now();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // The order matters: the exits check `over` and `armed` before this signal sets them.
            let (armed, first_at) = (flags.armed.clone(), flags.first_at.clone());
            let quit_or_note = move || quit_unless_a_copy(sig, start, &armed, &first_at);
            let installed = signal_hook::flag::register_conditional_default(sig, flags.over.clone())
                // SAFETY: `quit_unless_a_copy` is async-signal-safe (see its docs).
                .and_then(|_| unsafe { signal_hook::low_level::register(sig, quit_or_note) })
                .and_then(|_| signal_hook::flag::register_usize(sig, flags.signal.clone(), sig as usize))
                .and_then(|_| signal_hook::flag::register(sig, flags.armed.clone()));
            if let Err(e) = installed {
                eprintln!("warning: cannot handle signal {sig} ({e}); it will end the process without saving");
            }
        }
        acknowledge_the_first_signal();
        flags
    });
}

/// In the signal handler, before the first signal sets `armed`: the first signal notes when it
/// came; a later one exits at once with status 128 + `sig`, saying so, unless it comes within
/// [`DUPLICATE_WINDOW`] of the first (then it is a copy, and ignored). Async-signal-safe: atomics,
/// the monotonic clock (`clock_gettime`, no lock), one `write(2)` to stderr and `_exit`.
fn quit_unless_a_copy(sig: i32, start: Instant, armed: &AtomicBool, first_at: &AtomicU64) {
    let now = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
    if !armed.load(Ordering::SeqCst) {
        first_at.store(now, Ordering::SeqCst);
        return;
    }
    if now.saturating_sub(first_at.load(Ordering::SeqCst)) < DUPLICATE_WINDOW.as_nanos() as u64 {
        return;
    }
    let message: &[u8] = match sig {
        signal_hook::consts::SIGTERM => {
            b"\nSIGTERM again: quitting at once, without saving (the files already written are whole)\n"
        }
        _ => b"\nSIGINT again: quitting at once, without saving (the files already written are whole)\n",
    };
    #[cfg(unix)]
    {
        use std::io::Write;
        use std::os::fd::FromRawFd;
        // SAFETY: fd 2 is stderr, open for the whole process; ManuallyDrop keeps it open. A write
        // on a `File` is one write(2) call, with no lock and no allocation.
        let mut stderr = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(2) });
        let _ = stderr.write(message);
    }
    signal_hook::low_level::exit(128 + sig);
}

/// Says at once that the first signal was heard (the stop itself waits for the current update
/// or step to end): from a thread of its own, since a signal handler may not print.
fn acknowledge_the_first_signal() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!(
                    "\n{}: stopping after the current update (or step), then saving; another signal quits at once",
                    name(sig)
                );
            }
        });
        drop(spawned); // without the thread, the stop still happens, only unannounced
    }
}

/// Training starts: from now on the first signal asks it to stop after the current update (or
/// step) and save. Installs the handlers if [`install`] was not called.
pub fn training_started() {
    install();
    if let Some(f) = FLAGS.get() {
        f.over.store(false, Ordering::SeqCst);
    }
}

/// Training is over (its last update is done; what follows is writing and evaluating the model):
/// from now on a signal ends the process at once, as without these handlers.
pub fn training_over() {
    if let Some(f) = FLAGS.get() {
        f.over.store(true, Ordering::SeqCst);
    }
}

/// Asked after every update (or language-model step) of every run: whether a signal has asked
/// training to stop. First, the test hook [`test_hold`].
pub fn stop_requested() -> bool {
    test_hold();
    received().is_some()
}

/// What [`test_hold`] reads, once: `PROXIMA_TEST_HOLD_UPDATE`.
static HOLD: OnceLock<Option<(u64, bool)>> = OnceLock::new();
/// Updates (and language-model steps) this process has finished, over all its runs.
static UPDATES_DONE: AtomicU64 = AtomicU64::new(0);
/// The longest a hold lasts: then it says so, and the run goes on.
const HOLD_LIMIT: Duration = Duration::from_secs(300);

/// A test hook, for the CLI's own tests (`tests/interrupts.rs`, `tests/mpi.rs`): with
/// `PROXIMA_TEST_HOLD_UPDATE=N` set, the process waits after the N-th update (or language-model
/// step) it finishes — counted over all its runs, once that update's row and checkpoint are
/// written — until a first SIGINT or SIGTERM has come, so that a test's signal lands after that
/// update however fast the machine is; `N:forever` holds until the process is ended (by a second
/// signal, or SIGKILL). A hold gives up after [`HOLD_LIMIT`], saying so. Unset (or empty), as
/// for every user, this costs one atomic increment per update.
fn test_hold() {
    let hold = HOLD.get_or_init(|| {
        let v = std::env::var("PROXIMA_TEST_HOLD_UPDATE").ok().filter(|v| !v.is_empty())?;
        let (n, forever) = v.strip_suffix(":forever").map_or((v.as_str(), false), |n| (n, true));
        let parsed = n.parse().ok().map(|n| (n, forever));
        if parsed.is_none() {
            eprintln!("warning: PROXIMA_TEST_HOLD_UPDATE={v:?} ignored (a test hook: N or N:forever)");
        }
        parsed
    });
    let Some((at, forever)) = *hold else { return };
    if UPDATES_DONE.fetch_add(1, Ordering::SeqCst) + 1 != at {
        return;
    }
    let t0 = Instant::now();
    while forever || received().is_none() {
        if t0.elapsed() > HOLD_LIMIT {
            eprintln!("PROXIMA_TEST_HOLD_UPDATE: no signal ended the hold in {} s; going on", HOLD_LIMIT.as_secs());
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The number of the first signal received, if one was.
pub fn received() -> Option<i32> {
    let n = FLAGS.get()?.signal.load(Ordering::SeqCst);
    (n != 0).then_some(n as i32)
}

/// The signal's name, for messages.
pub fn name(sig: i32) -> &'static str {
    match sig {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// The error a command returns after stopping on a signal: `main` exits with its status.
#[derive(Debug)]
pub struct Interrupted {
    /// The signal's number.
    pub signal: i32,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {}", name(self.signal))
    }
}

impl std::error::Error for Interrupted {}

impl Interrupted {
    /// The exit status: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
    pub fn status(&self) -> u8 {
        (128 + self.signal).clamp(0, 255) as u8
    }
}
