//! The run directory, one optional observer of a [`Trainer`] ([`RunDir`], a [`Callback`]):
//! `config.toml`, `progress.csv`, TensorBoard scalars, checkpoints every `checkpoint_freq`
//! iterations, `model.safetensors` and `eval.json` (CleanRL's
//! `runs/<env>__<algo>__<seed>__<time>/`). Training itself writes no file.

use super::eval::{evaluate, mean_std};
use super::trainer::{Callback, Trainer, UpdateReport};
use crate::error::{ProximaError, Result};
use crate::io;
use crate::log::{keep_rows_up_to, CsvLogger, TensorBoardWriter};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Columns of `progress.csv`, one row per iteration.
pub const CSV_COLUMNS: [&str; 20] = [
    "global_step",
    "update",
    "time_elapsed",
    "sps",
    "learning_rate",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "epochs",
    "ep_return_mean",
    "ep_len_mean",
    "episodes",
    "kl_divergence",
    "kl_coef",
    "step_fraction",
    "ent_coef",
];

/// What a finished run leaves behind.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Path of the final model.
    pub model: PathBuf,
    /// Environment steps taken.
    pub global_step: u64,
    /// Wall time of training in this process (seconds), start-up included.
    pub train_seconds: f64,
    /// Wall time of training over every process of the run (a resumed run adds its earlier
    /// ones, as `progress.csv`'s `time_elapsed` does), seconds.
    pub time_elapsed: f64,
    /// Steps per second taken by this process.
    pub sps: f64,
    /// Final deterministic evaluation returns (`eval_episodes` of them).
    pub eval_returns: Vec<f64>,
    /// Seconds collecting rollouts / updating, of `train_seconds`.
    pub collect_seconds: f64,
    /// Seconds in GAE and updates.
    pub update_seconds: f64,
}

/// The run directory as an observer of training: created before the first iteration,
/// written after every one ([`Callback::on_update`]), finished with the model and the
/// evaluation ([`RunDir::finish`]).
pub struct RunDir {
    dir: PathBuf,
    csv: CsvLogger,
    tb: TensorBoardWriter,
    /// Seconds collecting / updating, as of the last iteration.
    seconds: (f64, f64),
}

impl RunDir {
    /// Writes `config.toml` and opens `progress.csv` (keeping the rows up to a resumed
    /// trainer's update, whose last `time_elapsed` the trainer's clock continues from) and a
    /// new TensorBoard event file in `dir`.
    ///
    /// # Errors
    /// `Io` naming the path that cannot be created or written.
    pub fn create(dir: &Path, trainer: &mut Trainer) -> Result<RunDir> {
        let ckpt_dir = dir.join("checkpoints");
        std::fs::create_dir_all(&ckpt_dir).map_err(|e| ProximaError::io(&ckpt_dir, e))?;
        let mut config = format!("env_id = {:?}\n{}", trainer.env_id, trainer.cfg.to_toml());
        if let Some(d) = trainer.ranks() {
            // A comment, so that the file still reads back as a config.
            let (ranks, n, total) = (d.split.size, d.split.n_envs, d.split.total_envs());
            let ranks = if ranks == 1 { "1 MPI rank".to_string() } else { format!("{ranks} MPI ranks") };
            config.push_str(&format!("# a distributed run: {ranks} × {n} envs = {total} envs in all\n"));
        }
        io::write_atomic(&dir.join("config.toml"), config.as_bytes())?;
        let csv_path = dir.join("progress.csv");
        if trainer.update > 0 {
            let before = keep_rows_up_to(&csv_path, "update", trainer.update as f64, "time_elapsed")?;
            trainer.clock.elapsed_offset = before.unwrap_or(0.0);
        }
        let csv = CsvLogger::create(&csv_path, &CSV_COLUMNS, trainer.update > 0)?;
        let tb = TensorBoardWriter::create(dir)?;
        Ok(RunDir { dir: dir.to_path_buf(), csv, tb, seconds: (0.0, 0.0) })
    }

    /// One row of `progress.csv` (in [`CSV_COLUMNS`]' order) for an iteration's report.
    fn csv_row(r: &UpdateReport) -> [f64; 20] {
        let (s, nan) = (&r.stats, f64::NAN);
        [
            r.global_step as f64,
            r.update as f64,
            r.time_elapsed,
            r.sps,
            s.learning_rate,
            s.policy_loss,
            s.value_loss,
            s.entropy,
            s.approx_kl,
            s.clip_fraction,
            s.explained_variance,
            s.grad_norm,
            s.epochs as f64,
            r.ep_return_mean.unwrap_or(nan),
            r.ep_len_mean.unwrap_or(nan),
            r.finished.len() as f64,
            s.kl_divergence,
            s.kl_coef,
            s.step_fraction,
            s.ent_coef.unwrap_or(nan),
        ]
    }

    /// After training: `model.safetensors`, the deterministic evaluation (`eval_episodes`
    /// episodes, seeds `seed + 10000 + i`) and `eval.json`. `t0` is when training started.
    ///
    /// # Errors
    /// `Io`; evaluation errors.
    pub fn finish(self, trainer: &Trainer, t0: Instant) -> Result<RunSummary> {
        let train_seconds = t0.elapsed().as_secs_f64();
        let time_elapsed = trainer.clock.elapsed_offset + train_seconds;
        let sps = trainer.global_step.saturating_sub(trainer.clock.start_step) as f64 / train_seconds.max(1e-9);
        let model = self.dir.join("model.safetensors");
        trainer.save(&model)?;
        // An off-policy run keeps its last state with the replay buffer too, so that extending it
        // (`--resume --total-timesteps`) continues exactly.
        let last = self.dir.join("checkpoints").join(format!("update_{:06}.safetensors", trainer.update));
        if trainer.replay_buffer().is_some() && trainer.cfg.save_replay_buffer && !last.is_file() {
            trainer.save_checkpoint(&last)?;
        }
        let cfg = &trainer.cfg;
        let eval_returns = if cfg.eval_episodes > 0 {
            let norm = Some(&trainer.collector.norm);
            let (episodes, seed) = (cfg.eval_episodes, cfg.seed.wrapping_add(10_000));
            // Under the envs' masks when the policy trained under them (MaskablePPO).
            let masked = trainer.buffer().mask_dim > 0;
            evaluate(&trainer.policy, &trainer.env_id, (episodes, true, seed), norm, masked)?
        } else {
            Vec::new()
        };
        let (m, sd) = mean_std(&eval_returns);
        let (m, sd) = if eval_returns.is_empty() { (None, None) } else { (Some(m), Some(sd)) };
        let (collect_seconds, update_seconds) = self.seconds;
        let eval = serde_json::json!({
            "env_id": trainer.env_id, "seed": cfg.seed, "global_step": trainer.global_step, "train_seconds": train_seconds, "time_elapsed": time_elapsed,
            "sps": sps, "collect_seconds": collect_seconds, "update_seconds": update_seconds, "episodes": eval_returns.len(), "deterministic": true,
            "mean_return": m, "std_return": sd, "returns": eval_returns,
        });
        io::write_atomic(&self.dir.join("eval.json"), format!("{eval}\n").as_bytes())?;
        Ok(RunSummary {
            run_dir: self.dir,
            model,
            global_step: trainer.global_step,
            train_seconds,
            time_elapsed,
            sps,
            eval_returns,
            collect_seconds,
            update_seconds,
        })
    }
}

impl Callback for RunDir {
    /// Writes the iteration's row of `progress.csv`, its TensorBoard scalars and, every
    /// `checkpoint_freq` iterations, `checkpoints/update_<n>.safetensors`.
    fn on_update(&mut self, trainer: &Trainer, r: &UpdateReport) -> Result<bool> {
        self.seconds = (r.collect_seconds, r.update_seconds);
        self.csv.write(&Self::csv_row(r))?;
        write_tensorboard(&mut self.tb, trainer.cfg.is_off_policy(), r)?;
        let freq = trainer.cfg.checkpoint_freq as u64;
        if freq > 0 && r.update % freq == 0 {
            trainer
                .save_checkpoint(&self.dir.join("checkpoints").join(format!("update_{:06}.safetensors", r.update)))?;
        }
        Ok(true)
    }
}

/// An iteration's TensorBoard scalars, CleanRL's tags (`charts/episodic_return` per finished
/// episode, `losses/approx_kl`, …; for SAC, TD3, DDPG and TQC (`off_policy`) those of CleanRL's
/// `sac_continuous_action.py` and `td3_continuous_action.py`: `losses/qf_loss`,
/// `losses/actor_loss`, `losses/alpha`), flushed: what a run directory writes, and the Python
/// package's `tensorboard_log`.
///
/// # Errors
/// `Io`.
pub fn write_tensorboard(tb: &mut TensorBoardWriter, off_policy: bool, r: &UpdateReport) -> Result<()> {
    let s = &r.stats;
    for (step, ep) in &r.finished {
        tb.add_scalar("charts/episodic_return", ep.episode_return, *step)?;
        tb.add_scalar("charts/episodic_length", ep.length as f64, *step)?;
    }
    if off_policy {
        let entropy = Some(("losses/entropy", s.entropy)).filter(|(_, v)| v.is_finite());
        let alpha = s.ent_coef.map(|a| ("losses/alpha", a));
        let actor = Some(("losses/actor_loss", s.policy_loss)).filter(|(_, v)| v.is_finite());
        let always =
            [("charts/learning_rate", s.learning_rate), ("charts/SPS", r.sps), ("losses/qf_loss", s.value_loss)];
        for (tag, v) in always.into_iter().chain(actor).chain(entropy).chain(alpha) {
            tb.add_scalar(tag, v, r.global_step)?;
        }
        return tb.flush();
    }
    for (tag, v) in [
        ("charts/learning_rate", s.learning_rate),
        ("charts/SPS", r.sps),
        ("losses/policy_loss", s.policy_loss),
        ("losses/value_loss", s.value_loss),
        ("losses/entropy", s.entropy),
        ("losses/approx_kl", s.approx_kl),
        ("losses/clipfrac", s.clip_fraction),
        ("losses/explained_variance", s.explained_variance),
        ("losses/grad_norm", s.grad_norm),
        ("losses/kl_divergence", s.kl_divergence),
        ("charts/kl_coef", s.kl_coef),
        ("charts/step_fraction", s.step_fraction),
    ] {
        tb.add_scalar(tag, v, r.global_step)?;
    }
    if let Some(alpha) = s.ent_coef {
        tb.add_scalar("losses/alpha", alpha, r.global_step)?;
    }
    if let Some(aux) = s.aux {
        // CleanRL's ppg_procgen.py tags.
        tb.add_scalar("losses/aux/kl_loss", aux.kl, r.global_step)?;
        tb.add_scalar("losses/aux/aux_value_loss", aux.aux_value_loss, r.global_step)?;
        tb.add_scalar("losses/aux/real_value_loss", aux.value_loss, r.global_step)?;
    }
    tb.flush()
}

/// How [`run`] ended.
#[derive(Clone, Debug)]
pub enum RunOutcome {
    /// Trained to `total_timesteps`: the model, its evaluation and `eval.json` are written.
    Finished(RunSummary),
    /// Stopped early at the caller's request (e.g. on Ctrl-C) after a whole update: a
    /// checkpoint of that update and `model.safetensors` are written, and resuming from the
    /// run directory continues exactly (no evaluation, no `eval.json`).
    Stopped(Stopped),
}

/// Where a stopped run left off.
#[derive(Clone, Debug)]
pub struct Stopped {
    /// The run directory.
    pub run_dir: PathBuf,
    /// The checkpoint written at the stop, `checkpoints/update_<n>.safetensors`.
    pub checkpoint: PathBuf,
    /// Updates completed.
    pub update: u64,
    /// Environment steps taken.
    pub global_step: u64,
}

impl RunDir {
    /// After a stop: a checkpoint of the last whole update (unless `checkpoint_freq` has just
    /// written it) and `model.safetensors` holding the same state.
    ///
    /// # Errors
    /// `Io`.
    pub fn stop(self, trainer: &Trainer) -> Result<Stopped> {
        let checkpoint = self.dir.join("checkpoints").join(format!("update_{:06}.safetensors", trainer.update));
        if !checkpoint.is_file() {
            trainer.save_checkpoint(&checkpoint)?;
        }
        trainer.save(&self.dir.join("model.safetensors"))?;
        Ok(Stopped { run_dir: self.dir, checkpoint, update: trainer.update, global_step: trainer.global_step })
    }
}

/// Trains into `run_dir` ([`RunDir`]): writes `config.toml`, `progress.csv`, a TensorBoard
/// event file, `checkpoints/update_<n>.safetensors` every `checkpoint_freq` iterations,
/// `model.safetensors` at the end, and `eval.json` with a deterministic evaluation. `trainer`
/// is fresh ([`Trainer::new`]) or resumed ([`Trainer::resume`]); when resumed, `progress.csv`
/// keeps the rows up to the resumed update and continues after them. `on_update` sees every
/// iteration's report (the CLI draws its progress bar from it) and returns whether to go on:
/// `false` stops the run there ([`RunOutcome::Stopped`], with a checkpoint to resume from).
///
/// # Errors
/// A run directory that cannot be created or written (nothing half-written is left: every
/// model file is written atomically), plus everything [`Trainer::step`] can return.
pub fn run(
    mut trainer: Trainer,
    run_dir: &Path,
    mut on_update: impl FnMut(&UpdateReport) -> bool,
) -> Result<RunOutcome> {
    let t0 = Instant::now();
    let mut dir = RunDir::create(run_dir, &mut trainer)?;
    let total = trainer.cfg.total_timesteps;
    let mut stopped = false;
    trainer.learn(total, &mut |tr: &Trainer, r: &UpdateReport| {
        dir.on_update(tr, r)?;
        stopped = !on_update(r);
        Ok(!stopped)
    })?;
    if stopped {
        // Also after the last update: the evaluation is left for the resume to do.
        return Ok(RunOutcome::Stopped(dir.stop(&trainer)?));
    }
    Ok(RunOutcome::Finished(dir.finish(&trainer, t0)?))
}
