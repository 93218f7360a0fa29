//! The thread pool every experiment runs its independent training runs on (many seeds, the
//! ablation's grid): `jobs` threads take tasks from one queue in order. Each run is
//! single-threaded and deterministic, so where a run lands does not change its result.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `f(i, &tasks[i])` for every task on `jobs` threads (at least 1, at most one per task)
/// and returns the results in task order. A task that fails does not stop the others.
pub fn run_all<T: Sync, R: Send>(jobs: usize, tasks: &[T], f: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(tasks.len()));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1).min(tasks.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(task) = tasks.get(i) else { break };
                let r = f(i, task);
                results.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Tensor ops run on this many threads; must be set before candle's first matmul.
pub fn set_threads(n: usize) {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_and_results_keep_task_order() {
        let tasks: Vec<u64> = (0..37).collect();
        for jobs in [1, 3, 64] {
            let out = run_all(jobs, &tasks, |i, &t| (i as u64, t * t));
            assert_eq!(out, tasks.iter().map(|&t| (t, t * t)).collect::<Vec<_>>());
        }
        assert!(run_all(4, &Vec::<u8>::new(), |_, _| ()).is_empty());
    }
}
