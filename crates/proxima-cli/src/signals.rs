//! SIGINT (Ctrl-C) and SIGTERM: the first one asks the running command to stop after the
//! current update, save and exit with status 128 + the signal's number (130, 143); a second one
//! exits at once with that status (files are written atomically, so nothing is left torn).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

struct Flags {
    /// Set before training starts and once it is over (the model is being written and
    /// evaluated): a signal then takes its default action and ends the process at once.
    over: Arc<AtomicBool>,
    /// The first signal's number, 0 before any.
    signal: Arc<AtomicUsize>,
    /// Set by the first signal: the second one then exits at once.
    armed: Arc<AtomicBool>,
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
        };
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // The order matters: the exits check `over` and `armed` before this signal sets them.
            let installed = signal_hook::flag::register_conditional_default(sig, flags.over.clone())
                .and_then(|_| signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, flags.armed.clone()))
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

/// Says at once that the first signal was heard (the stop itself waits for the current update
/// or step to end): from a thread of its own, since a signal handler may not print.
fn acknowledge_the_first_signal() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!(
                    "\n{}: stopping after the current update (or step), then saving; a second signal quits at once",
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
