//! `proxima train --resume RUN_DIR`: the trainer a run directory continues.

use crate::experiments::pool::set_threads;
use crate::rundirs::{self, latest_checkpoint};
use anyhow::{bail, Context, Result};
use proxima::config::Config;
use proxima::train;
use std::path::Path;

/// The trainer `--resume DIR` continues, or `None` when there is nothing to train: a complete
/// run whose lost `model.safetensors` was just rewritten from its last checkpoint.
pub(super) fn resumed_trainer(
    dir: &Path,
    env_id: Option<&str>,
    opts: train::ResumeOptions,
) -> Result<Option<train::Trainer>> {
    let file = match latest_checkpoint(dir) {
        Ok(file) => file,
        Err(_) if dir.join("config.toml").is_file() && no_checkpoint_files(dir) => {
            return restarted_trainer(dir, env_id, opts).map(Some);
        }
        Err(e) => return Err(e),
    };
    let ck = proxima::checkpoint::load(&file)?;
    check_resumed_env(dir, &ck, env_id)?;
    if opts.total_timesteps.is_none() && finished_and_evaluated(dir, &file, &ck) {
        // Refused before its envs are made (an Atari game's emulator, a Python interpreter).
        bail!(
            "{} is complete ({} steps, {} updates, evaluated); pass a larger --total-timesteps to continue it",
            dir.display(),
            ck.meta.global_step,
            ck.meta.update
        );
    }
    let trainer = train::Trainer::resume_with(&ck, opts)?;
    let ready = ready_to_resume(dir, &file, trainer, opts.total_timesteps)?;
    if ready.is_some() {
        // Only a run that goes on rewrites its config.toml.
        rundirs::warn_if_config_edited(dir, &ck, &resume_flags(opts));
    }
    Ok(ready)
}

/// Whether run directory `dir` finished: its latest checkpoint `file` (`ck`) has taken its
/// config's `total_timesteps`, its `model.safetensors` is there, and its `eval.json`, written
/// after the final model, is at least as new as that file (a run extended since, or stopped, has
/// newer files than its old evaluation). Never for an A3C run or a distributed one, which the
/// trainer refuses in one process with their own reasons.
fn finished_and_evaluated(dir: &Path, file: &Path, ck: &proxima::checkpoint::Checkpoint) -> bool {
    let Ok(config) = ck.meta.config_toml.parse::<toml::Table>() else { return false };
    let total = config.get("total_timesteps").and_then(toml::Value::as_integer);
    let a3c = config.get("algo").and_then(toml::Value::as_str) == Some("a3c");
    if a3c || ck.meta.extra.contains_key("mpi_ranks") {
        return false;
    }
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let evaluated_after = match (modified(&dir.join("eval.json")), modified(file)) {
        (Some(eval), Some(ck_time)) => eval >= ck_time,
        _ => false,
    };
    // Without its model, the run goes the long way: the model is rewritten from the checkpoint.
    let has_model = dir.join("model.safetensors").is_file();
    total.is_some_and(|t| ck.meta.global_step >= t as u64) && evaluated_after && has_model
}

/// What `--resume`'s flags (`--total-timesteps`, `--backend`, `--vector-env`) change.
///
/// # Errors
/// A `--backend` or `--vector-env` word the library does not know (clap checks them first).
pub(super) fn resume_options(a: &super::args::TrainArgs) -> Result<train::ResumeOptions> {
    Ok(train::ResumeOptions {
        total_timesteps: a.total_timesteps,
        backend: a.backend.as_deref().map(str::parse).transpose()?,
        vector_env: a.vector_env.as_deref().map(str::parse).transpose()?,
    })
}

/// The config keys that `--resume`'s flags given set.
pub(super) fn resume_flags(opts: train::ResumeOptions) -> Vec<&'static str> {
    [
        (opts.total_timesteps.is_some(), "total_timesteps"),
        (opts.backend.is_some(), "backend"),
        (opts.vector_env.is_some(), "vector_env"),
    ]
    .into_iter()
    .filter(|f| f.0)
    .map(|f| f.1)
    .collect()
}

/// Refuses `--resume DIR ENV_ID` when DIR's run trained on another env.
pub(super) fn check_resumed_env(dir: &Path, ck: &proxima::checkpoint::Checkpoint, env_id: Option<&str>) -> Result<()> {
    match env_id {
        Some(e) if e != ck.meta.env_id => bail!("{} was trained on {}, not {e}", dir.display(), ck.meta.env_id),
        _ => Ok(()),
    }
}

/// What `--resume` does with `trainer`, restored from `file` of run directory `dir`: training
/// left → the trainer (and a line saying where it resumes); all steps taken → finish the run
/// when it stopped before its evaluation, write a missing `model.safetensors` (then `None`), or
/// refuse.
pub(super) fn ready_to_resume(
    dir: &Path,
    file: &Path,
    trainer: train::Trainer,
    total_timesteps: Option<u64>,
) -> Result<Option<train::Trainer>> {
    if trainer.is_done() {
        if let Some(t) = total_timesteps {
            bail!(
                "{} has already taken {} steps; --total-timesteps {t} does not extend it",
                dir.display(),
                trainer.global_step
            );
        }
        let model = dir.join("model.safetensors");
        if model.is_file() && !dir.join("eval.json").is_file() && total_timesteps.is_none() {
            // Stopped after its last update, before the evaluation: finish it.
            eprintln!("{} has trained all its steps; finishing it (model and evaluation)", dir.display());
            return Ok(Some(trainer));
        }
        if !model.is_file() {
            trainer.save(&model)?;
            println!(
                "{} was complete at update {}; wrote {} from its last checkpoint",
                dir.display(),
                trainer.update,
                model.display()
            );
            return Ok(None);
        }
        bail!(
            "{} is complete ({} of {} updates); pass a larger --total-timesteps to continue it",
            dir.display(),
            trainer.update,
            trainer.num_updates
        );
    }
    set_threads(trainer.cfg.num_threads);
    eprintln!(
        "resuming {} from {} (update {}, step {})",
        trainer.env_id,
        file.display(),
        trainer.update,
        trainer.global_step
    );
    Ok(Some(trainer))
}

/// Whether a run directory holds no checkpoint file at all (damaged ones included: a damaged
/// checkpoint is an error, never a silent restart).
pub(super) fn no_checkpoint_files(dir: &Path) -> bool {
    let ckpts = std::fs::read_dir(dir.join("checkpoints")).map(|d| d.count()).unwrap_or(0);
    !dir.join("model.safetensors").exists() && ckpts == 0
}

/// `--resume` of a run stopped before its first checkpoint: the run again from the start, from
/// its `config.toml` (same seed, so it ends exactly where the uninterrupted run ends).
pub(super) fn restarted_trainer(
    dir: &Path,
    env_id: Option<&str>,
    opts: train::ResumeOptions,
) -> Result<train::Trainer> {
    let path = dir.join("config.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let table: toml::Table = text.parse().with_context(|| format!("{}: malformed TOML", path.display()))?;
    let saved_env = table.get("env_id").and_then(|v| v.as_str()).map(str::to_string);
    let saved_env = saved_env.with_context(|| format!("{}: has no env_id", path.display()))?;
    if let Some(e) = env_id.filter(|e| *e != saved_env) {
        bail!("{} was started on {saved_env}, not {e}", dir.display());
    }
    let preset = table.get("preset").and_then(|v| v.as_str()).unwrap_or("cleanrl");
    let mut sets: Vec<String> = opts.total_timesteps.map(|t| format!("total_timesteps={t}")).into_iter().collect();
    sets.extend(opts.backend.map(|b| format!("backend={}", b.as_str())));
    sets.extend(opts.vector_env.map(|v| format!("vector_env={}", v.as_str())));
    let cfg = Config::resolve(preset, Some(&text), &sets).with_context(|| format!("{}", path.display()))?;
    set_threads(cfg.num_threads);
    let trainer = train::Trainer::new(&saved_env, cfg)?;
    eprintln!(
        "{} holds no checkpoint yet: restarting the run from its config.toml (same seed: it ends where the uninterrupted run ends)",
        dir.display()
    );
    Ok(trainer)
}
