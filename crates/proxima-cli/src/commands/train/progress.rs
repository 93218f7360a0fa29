//! Training a run into its directory with a progress bar, and what a stopped run says.

use super::args::TrainArgs;
use crate::signals;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima::config::AlgoName;
use proxima::train::{self, mean_std};
use std::path::Path;

/// Trains `trainer` into `run_dir` with a progress bar and Ctrl-C handling, then reports;
/// `signalled` (asked once after every update) says whether to stop there.
pub(super) fn train_with_bar(
    a: &TrainArgs,
    trainer: train::Trainer,
    run_dir: &Path,
    signalled: &dyn Fn() -> bool,
) -> Result<()> {
    let env_id = trainer.env_id.clone();
    let total = trainer.cfg.total_timesteps;
    let (a3c, last_update) = (trainer.cfg.algo == AlgoName::A3c, trainer.num_updates);
    // How to continue a stopped run: a distributed one under mpirun with the same ranks.
    let launch = trainer.ranks().map_or(String::new(), |d| format!("mpirun -np {} ", d.split.size));
    if let Some(rb) = trainer.replay_buffer().filter(|_| !a.quiet) {
        eprintln!(
            "replay buffer: {} transitions of {} observation and {} action values, {} in memory{}",
            rb.capacity * rb.n_envs,
            rb.obs_dim,
            rb.act_dim,
            proxima::replay::human_bytes(rb.memory_bytes()),
            if trainer.cfg.save_replay_buffer { ", saved with every checkpoint" } else { "" }
        );
    }
    let bar = if a.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} steps | {msg}")
            .expect("valid template"),
    );
    signals::training_started();
    let outcome = train::run(trainer, run_dir, |r| {
        bar.set_position(r.global_step);
        let ret = r.ep_return_mean.map_or("-".to_string(), |m| format!("{m:.1}"));
        bar.set_message(match r.stats.ent_coef {
            Some(alpha) => format!("{:.0} SPS | return {ret} | α {alpha:.3}", r.sps),
            None => format!(
                "{:.0} SPS | return {ret} | kl {:.4} | clip {:.3}",
                r.sps, r.stats.approx_kl, r.stats.clip_fraction
            ),
        });
        let go_on = !signalled();
        if go_on && r.update >= last_update {
            // Trained: the model is written next, then evaluated; a signal now ends the process.
            signals::training_over();
        }
        go_on
    })?;
    bar.finish_and_clear();
    let summary = match outcome {
        train::RunOutcome::Finished(summary) => summary,
        train::RunOutcome::Stopped(s) => return Err(stopped_run(&s, a3c, &launch).into()),
    };
    let (m, sd) = mean_std(&summary.eval_returns);
    let eval = if summary.eval_returns.is_empty() {
        "no evaluation (eval_episodes = 0)".to_string()
    } else {
        let n = summary.eval_returns.len();
        format!("deterministic eval over {n} episode{}: {m:.2} ± {sd:.2}", if n == 1 { "" } else { "s" })
    };
    // A resumed run's steps are the run's, its seconds and SPS this process's: say which is which.
    let resumed = summary.time_elapsed - summary.train_seconds > 0.05;
    let (steps, seconds) = (summary.global_step, summary.train_seconds);
    let took = if resumed {
        format!("to {steps} steps; {seconds:.1} s in this process, {:.1} s with the earlier ones", summary.time_elapsed)
    } else {
        format!("for {steps} steps in {seconds:.1} s")
    };
    println!(
        "trained {env_id} {took} ({:.0} SPS; rollout {:.1} s, update {:.1} s); {eval}",
        summary.sps, summary.collect_seconds, summary.update_seconds,
    );
    println!("run directory: {}", summary.run_dir.display());
    Ok(())
}

/// Says where a run stopped on a signal and how to continue it (`launch`: what goes before
/// `proxima`, e.g. `mpirun -np 2 `); the error `main` exits with.
pub(super) fn stopped_run(s: &train::Stopped, a3c: bool, launch: &str) -> signals::Interrupted {
    let signal = signals::received().unwrap_or(signal_hook::consts::SIGINT);
    if a3c {
        eprintln!(
            "{}: stopped after update {} (step {}); saved {} (A3C runs cannot be resumed: evaluate it with proxima eval {})",
            signals::name(signal),
            s.update,
            s.global_step,
            s.run_dir.join("model.safetensors").display(),
            s.run_dir.display()
        );
        return signals::Interrupted { signal };
    }
    eprintln!(
        "{}: stopped after update {} (step {}); saved {} and {}\ncontinue with: {launch}proxima train --resume {}",
        signals::name(signal),
        s.update,
        s.global_step,
        s.checkpoint.display(),
        s.run_dir.join("model.safetensors").display(),
        s.run_dir.display()
    );
    signals::Interrupted { signal }
}
