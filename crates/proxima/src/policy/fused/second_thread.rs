//! [`SecondThread`]: one persistent second thread that runs a closure while the calling thread runs
//! another — the fused backend's two towers side by side, a fork-join of two tasks per pass.
//!
//! Why not `rayon::join`: the trainer's thread is not one of rayon's workers, and a join from
//! outside the pool queues the work, sleeps on a lock and is woken again — about 20 µs per call
//! on this project's 2-core machine, a third of a minibatch update. Here the caller runs its own
//! half itself and waits by spinning, and the helper spins for [`SPIN`] after each task before it
//! parks: a join costs well under a microsecond while the tasks keep coming (the minibatch
//! updates), and the helper sleeps through the rollout.
//!
//! The closures borrow the caller's stack; [`SecondThread::join`] does not return — nor unwind — before
//! the helper has finished its task (a scoped-thread guarantee, kept by a guard's `Drop`). A
//! panic in the helper's task is carried back and resumed on the caller's thread.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the helper spins for its next task, and the caller for the helper's result, before
/// the helper parks (the caller yields instead).
pub const SPIN: Duration = Duration::from_micros(50);

const IDLE: u32 = 0;
const POSTED: u32 = 1;
const DONE: u32 = 2;
const EXIT: u32 = 3;

/// The task as the helper sees it: a closure on the caller's stack, its lifetime erased.
type Task = *mut (dyn FnMut() + Send);

/// State shared by the caller and the helper thread. `task` and `panic` are handed over by
/// `state` (written before a Release store, read after the Acquire load that sees it).
struct Shared {
    state: AtomicU32,
    task: UnsafeCell<Option<Task>>,
    panic: UnsafeCell<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `task` and `panic` are only touched by the side that `state` hands them to.
unsafe impl Sync for Shared {}
// SAFETY: the task pointer is to a `Send` closure, and the caller waits for it (module docs).
unsafe impl Send for Shared {}

/// A second thread for [`SecondThread::join`] (module docs).
pub struct SecondThread {
    shared: Arc<Shared>,
    /// One join at a time: a second one meanwhile (nested, or from another thread) runs its two
    /// closures one after the other instead.
    busy: AtomicBool,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for SecondThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecondThread").finish_non_exhaustive()
    }
}

/// Spins until `done()`, for [`SPIN`], then calls `idle()` between checks.
fn wait_until(done: impl Fn() -> bool, idle: impl Fn()) {
    let start = Instant::now();
    let mut n = 0u32;
    while !done() {
        n = n.wrapping_add(1);
        if n.is_multiple_of(64) && start.elapsed() > SPIN {
            idle();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The helper thread: waits for a task, runs it, reports, until told to exit.
fn serve(shared: &Shared) {
    loop {
        let state = || shared.state.load(Ordering::Acquire);
        wait_until(|| matches!(state(), POSTED | EXIT), std::thread::park);
        if state() == EXIT {
            return;
        }
        // SAFETY: POSTED hands `task` to this thread; the caller keeps the closure alive until DONE.
        let task = unsafe { (*shared.task.get()).take() };
        let result = match task {
            // SAFETY: as above; the closure is `Send` and nobody else touches it meanwhile.
            Some(t) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*t)() })),
            None => Ok(()),
        };
        // SAFETY: `panic` belongs to this thread until the DONE store below.
        unsafe { *shared.panic.get() = result.err() };
        shared.state.store(DONE, Ordering::Release);
    }
}

impl SecondThread {
    /// Starts the helper thread.
    ///
    /// # Errors
    /// The OS's, if it cannot start a thread.
    pub fn new() -> std::io::Result<Self> {
        let shared =
            Arc::new(Shared { state: AtomicU32::new(IDLE), task: UnsafeCell::new(None), panic: UnsafeCell::new(None) });
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("proxima-fused-helper".into()).spawn(move || serve(&theirs))?;
        Ok(SecondThread { shared, busy: AtomicBool::new(false), thread: Some(thread) })
    }

    /// Runs `a` on this thread and `b` on the helper at the same time; returns when both are done.
    /// (When the helper is already busy — a join inside a join — `a` then `b` on this thread.)
    /// A panic in either is resumed here once both have finished.
    pub fn join(&self, a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
        if self.busy.swap(true, Ordering::Acquire) {
            a();
            b();
            return;
        }
        let mut b = Some(b);
        let mut call = || {
            if let Some(b) = b.take() {
                b()
            }
        };
        let task: &mut (dyn FnMut() + Send) = &mut call;
        // SAFETY: only the lifetime is erased; `Finish` below waits for the helper to be done
        // with the closure before this frame can end, by return or by unwinding.
        let task: Task = unsafe { std::mem::transmute::<&mut (dyn FnMut() + Send), Task>(task) };
        // SAFETY: the state is IDLE (we hold `busy`), so the helper does not read `task` now.
        unsafe { *self.shared.task.get() = Some(task) };
        self.shared.state.store(POSTED, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        struct Finish<'a>(&'a SecondThread);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                let state = &self.0.shared.state;
                wait_until(|| state.load(Ordering::Acquire) == DONE, std::thread::yield_now);
                state.store(IDLE, Ordering::Relaxed);
                self.0.busy.store(false, Ordering::Release);
            }
        }
        let finish = Finish(self);
        a();
        drop(finish);
        // SAFETY: DONE handed `panic` back to this thread.
        if let Some(p) = unsafe { (*self.shared.panic.get()).take() } {
            std::panic::resume_unwind(p);
        }
    }
}

impl Drop for SecondThread {
    fn drop(&mut self) {
        self.shared.state.store(EXIT, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl crate::policy::Join for SecondThread {
    fn run_both(&self, a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
        self.join(a, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_run_and_write_the_callers_data() {
        let h = SecondThread::new().unwrap();
        for round in 0..1000u64 {
            let (mut x, mut y) = (vec![0u64; 64], vec![0u64; 64]);
            h.join(|| x.iter_mut().for_each(|v| *v = round), || y.iter_mut().for_each(|v| *v = round + 1));
            assert!(x.iter().all(|&v| v == round) && y.iter().all(|&v| v == round + 1), "round {round}");
        }
    }

    #[test]
    fn the_helpers_half_runs_on_another_thread_and_after_a_pause() {
        let h = SecondThread::new().unwrap();
        let me = std::thread::current().id();
        let mut other = None;
        std::thread::sleep(SPIN * 4); // the helper has parked by now
        h.join(|| {}, || other = Some(std::thread::current().id()));
        assert!(other.is_some_and(|id| id != me));
    }

    #[test]
    fn a_panic_in_the_helper_reaches_the_caller_and_the_helper_lives_on() {
        let h = SecondThread::new().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.join(|| {}, || panic!("in the helper"))));
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"in the helper"));
        let mut ran = false;
        h.join(|| {}, || ran = true);
        assert!(ran);
    }

    #[test]
    fn a_panic_in_the_callers_half_waits_for_the_helpers() {
        let h = SecondThread::new().unwrap();
        let mut done = false;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            h.join(
                || panic!("in the caller"),
                || {
                    std::thread::sleep(Duration::from_millis(20));
                    done = true;
                },
            )
        }));
        assert!(r.is_err());
        assert!(done, "the helper's half finished before join unwound");
    }

    #[test]
    fn a_nested_join_runs_in_sequence() {
        let h = SecondThread::new().unwrap();
        let (mut a, mut b, mut c) = (0, 0, 0);
        h.join(|| h.join(|| a = 1, || b = 2), || c = 3);
        assert_eq!((a, b, c), (1, 2, 3));
    }
}
