//! Many seeds at once: `proxima train ENV --seeds 1-16 [--jobs N]` trains one run per seed on
//! the experiment pool ([`super::pool`]) into one parent directory:
//!
//! ```text
//! PARENT/seeds.toml            env id, seeds and the run's config (what `--resume PARENT` reads)
//! PARENT/seed_<n>/             an ordinary run directory per seed (config.toml, progress.csv, …)
//! PARENT/summary.md, .csv      final deterministic return per seed; mean ± std, IQM, min
//! PARENT/learning_curves.png   every seed's training return against environment steps
//! ```
//!
//! `--resume PARENT` finishes what is missing: a complete seed (its `model.safetensors` and
//! `eval.json` written) is read back, a seed with checkpoints resumes exactly from its latest,
//! and a seed that never reached its first checkpoint starts again from nothing.

use super::pool;
use super::pool::set_threads;
use crate::rundirs::latest_checkpoint;
use crate::{plot, signals};
use anyhow::{bail, Context, Result};
use proxima::config::Config;
use proxima::train::ResumeOptions;
use proxima::train::{self, Trainer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A curve's label and its (environment step, return) points.
pub type LabelledCurve = (String, Vec<(f64, f64)>);

/// The parent directory's description of its runs.
pub const MANIFEST: &str = "seeds.toml";

/// At most this many seeds in one command (a typo such as `1-100000` fails instead of filling
/// the disk).
pub const MAX_SEEDS: usize = 1024;

/// What [`MANIFEST`] holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// The environment id every seed trains on.
    pub env_id: String,
    /// The seeds, in the order given.
    pub seeds: Vec<u64>,
    /// The resolved config (its `seed` replaced by each run's).
    pub config: Config,
}

/// Parses `1-16`, `1,4,9` or a mix (`1-4,9`) into seeds, in the order given.
///
/// # Errors
/// An empty list, a bad number or range (`5-2`), a repeated seed, or more than [`MAX_SEEDS`].
pub fn parse_seeds(spec: &str) -> Result<Vec<u64>> {
    let mut seeds = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .with_context(|| format!("--seeds {spec}: `{part}` is not a seed or a range of seeds"))
        };
        if part.starts_with('-') {
            bail!("--seeds {spec}: `{part}`: seeds are whole numbers from 0 (a range is `LO-HI`)");
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            bail!("--seeds {spec}: the range {part} runs backwards");
        }
        if hi - lo >= MAX_SEEDS as u64 || seeds.len() + (hi - lo) as usize >= MAX_SEEDS {
            bail!("--seeds {spec}: more than {MAX_SEEDS} seeds");
        }
        for s in lo..=hi {
            if seeds.contains(&s) {
                bail!("--seeds {spec}: seed {s} is given twice");
            }
            seeds.push(s);
        }
    }
    Ok(seeds)
}

/// One seed's outcome.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// Mean return of the deterministic evaluation at the end (`None` without one).
    pub final_return: Option<f64>,
    /// Episodes of that evaluation.
    pub episodes: usize,
    /// Training seconds of the process that finished it.
    pub train_seconds: f64,
    /// (environment step, mean training return of the last 100 episodes), from `progress.csv`.
    pub curve: Vec<(f64, f64)>,
    /// Why the seed failed, if it did.
    pub error: Option<String>,
}

/// Writes the parent directory's manifest (the directory is claimed and empty).
///
/// # Errors
/// File-system errors.
pub fn create(parent: &Path, manifest: &Manifest) -> Result<()> {
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let text = toml::to_string(manifest).context("the manifest serialises")?;
    proxima::io::write_atomic(&parent.join(MANIFEST), text.as_bytes())?;
    Ok(())
}

/// Reads `parent`'s manifest.
///
/// # Errors
/// A missing or malformed manifest, or a config in it that no longer validates.
pub fn read_manifest(parent: &Path) -> Result<Manifest> {
    let path = parent.join(MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let m: Manifest = toml::from_str(&text).with_context(|| format!("{} is malformed", path.display()))?;
    m.config.clone().validate()?;
    let bad = |why: &str| anyhow::anyhow!("{}: {why}", path.display());
    if m.seeds.is_empty() || m.seeds.len() > MAX_SEEDS {
        return Err(bad(&format!("`seeds` must list 1 to {MAX_SEEDS} seeds, not {}", m.seeds.len())));
    }
    if let Some(s) = m.seeds.iter().enumerate().find_map(|(i, s)| m.seeds[..i].contains(s).then_some(s)) {
        return Err(bad(&format!("seed {s} is listed twice")));
    }
    if m.env_id.is_empty() {
        return Err(bad("`env_id` is empty"));
    }
    Ok(m)
}

/// The run directory of `seed` inside `parent`.
pub fn seed_dir(parent: &Path, seed: u64) -> PathBuf {
    parent.join(format!("seed_{seed}"))
}

/// Trains every seed of `parent`'s manifest that is not complete, `jobs` at a time (moving
/// the seeds to `moves`' backend and vector_env when given), then writes the summary. `progress` sees each seed
/// as it finishes, with (done, total). A seed that fails does not stop the others: its error is
/// in its [`SeedRun`] (see [`failures`]).
///
/// # Errors
/// A manifest that cannot be read; a summary that cannot be written.
pub fn run(
    parent: &Path,
    jobs: usize,
    moves: ResumeOptions,
    progress: impl Fn(&SeedRun, usize, usize) + Sync,
) -> Result<(Manifest, Vec<SeedRun>)> {
    let mut m = read_manifest(parent)?;
    let mut moved = m.config.clone();
    moved.backend = moves.backend.unwrap_or(moved.backend);
    moved.vector_env = moves.vector_env.unwrap_or(moved.vector_env);
    if (moved.backend, moved.vector_env) != (m.config.backend, m.config.vector_env) {
        // Seeds that start from nothing follow the move too, now and in later resumes.
        moved.clone().validate()?;
        m.config = moved;
        create(parent, &m)?;
    }
    let done = std::sync::atomic::AtomicUsize::new(0);
    let runs = pool::run_all(jobs, &m.seeds, |_, &seed| {
        let r = run_seed(parent, &m, seed, moves);
        let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        progress(&r, n, m.seeds.len());
        r
    });
    if crate::signals::received().is_none() {
        // (A stopped run's summary would count its unfinished seeds as failures.)
        write_summary(parent, &m, &runs)?;
    }
    Ok((m, runs))
}

/// The title and the curves of the one chart of every seed (`learning_curves.png`).
pub fn curves(m: &Manifest, runs: &[SeedRun]) -> (String, Vec<LabelledCurve>) {
    let title = format!("{} — {} ({}), {} seeds", m.env_id, m.config.algo, m.config.preset, m.seeds.len());
    (title, runs.iter().map(|r| (format!("seed {}", r.seed), r.curve.clone())).collect())
}

/// The seeds that failed, as one error naming each and how to continue (`None` when none did).
pub fn failures(parent: &Path, runs: &[SeedRun]) -> Option<anyhow::Error> {
    let failed: Vec<String> =
        runs.iter().filter_map(|r| r.error.as_ref().map(|e| format!("seed {}: {e}", r.seed))).collect();
    (!failed.is_empty()).then(|| {
        anyhow::anyhow!(
            "{} of {} seeds failed (fix or delete their seed_<n> directories — a deleted seed trains again from the start — then `proxima train --resume {}`):\n  {}",
            failed.len(),
            runs.len(),
            parent.display(),
            failed.join("\n  ")
        )
    })
}

/// One seed: read back if complete, else resumed from its latest checkpoint, else trained
/// from the start.
fn run_seed(parent: &Path, m: &Manifest, seed: u64, moves: ResumeOptions) -> SeedRun {
    let dir = seed_dir(parent, seed);
    let outcome = (|| -> Result<f64> {
        if is_complete(&dir) {
            return Ok(0.0);
        }
        if let Some(sig) = crate::signals::received() {
            bail!("not started ({} received)", crate::signals::name(sig));
        }
        let mut trainer = match latest_checkpoint(&dir) {
            Ok(file) if dir.join("checkpoints").is_dir() => {
                let ck = proxima::checkpoint::load(&file)?;
                if ck.meta.env_id != m.env_id {
                    bail!(
                        "{} was trained on {}, the parent's {MANIFEST} says {}",
                        dir.display(),
                        ck.meta.env_id,
                        m.env_id
                    );
                }
                Trainer::resume_with(&ck, ResumeOptions { total_timesteps: None, ..moves })?
            }
            _ => {
                if dir.exists() {
                    // Nothing learned is kept there: no checkpoint was written yet.
                    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
                }
                let mut cfg = m.config.clone();
                cfg.seed = seed;
                Trainer::new(&m.env_id, cfg)?
            }
        };
        trainer.set_interrupt(crate::signals::stop_requested);
        match train::run(trainer, &dir, |_| !crate::signals::stop_requested())? {
            train::RunOutcome::Finished(summary) => Ok(summary.time_elapsed),
            train::RunOutcome::Stopped(s) => {
                bail!("stopped after update {} (saved {})", s.update, s.checkpoint.display())
            }
        }
    })();
    let mut r = SeedRun { seed, final_return: None, episodes: 0, train_seconds: 0.0, curve: Vec::new(), error: None };
    match outcome.and_then(|secs| read_back(&dir, &m.env_id, &mut r).map(|()| secs)) {
        Ok(secs) => r.train_seconds = if secs > 0.0 { secs } else { r.train_seconds },
        Err(e) => r.error = Some(format!("{e:#}")),
    }
    r
}

/// A seed is complete when its final model loads and its `eval.json` is there (a damaged model
/// is trained again from the latest checkpoint).
fn is_complete(dir: &Path) -> bool {
    dir.join("eval.json").is_file() && proxima::checkpoint::load(&dir.join("model.safetensors")).is_ok()
}

/// Fills `r` from a finished seed's `eval.json` and `progress.csv` (a run of `env_id`).
fn read_back(dir: &Path, env_id: &str, r: &mut SeedRun) -> Result<()> {
    let path = dir.join("eval.json");
    let eval: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?,
    )
    .with_context(|| format!("{} is malformed", path.display()))?;
    if eval["env_id"].as_str() != Some(env_id) {
        bail!("{} is a run of {}, the parent's {MANIFEST} says {env_id}", path.display(), eval["env_id"]);
    }
    r.final_return = eval["mean_return"].as_f64();
    r.episodes = eval["episodes"].as_u64().unwrap_or(0) as usize;
    // The whole run's training time (eval.json of a run before issue 14: this process's only).
    r.train_seconds = eval["time_elapsed"].as_f64().or(eval["train_seconds"].as_f64()).unwrap_or(0.0);
    let csv = std::fs::read_to_string(dir.join("progress.csv")).unwrap_or_default();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    if let (Some(step), Some(ret)) = (col("global_step"), col("ep_return_mean")) {
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            if let (Some(Ok(x)), Some(Ok(y))) =
                (f.get(step).map(|s| s.parse::<f64>()), f.get(ret).map(|s| s.parse::<f64>()))
            {
                r.curve.push((x, y));
            }
        }
    }
    Ok(())
}

/// Mean, standard deviation (population), interquartile mean (rliable's: the mean after
/// trimming ⌊n/4⌋ values from each end) and minimum of `x` (NaN when empty).
pub fn aggregate(x: &[f64]) -> (f64, f64, f64, f64) {
    if x.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
    }
    let (mean, std) = proxima::train::mean_std(x);
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    let k = s.len() / 4;
    let mid = &s[k..s.len() - k];
    (mean, std, mid.iter().sum::<f64>() / mid.len() as f64, s[0])
}

/// "N steps", or "N steps asked, M run (whole rollouts)" when the seeds' last logged step (their
/// learning curves' ends) passed the asked total: training runs whole rollouts.
fn steps_label(total: u64, runs: &[SeedRun]) -> String {
    let ran = runs.iter().filter_map(|r| r.curve.last().map(|&(step, _)| step as u64)).max();
    match ran {
        Some(ran) if ran > total => format!("{total} steps asked, {ran} run (whole rollouts)"),
        _ => format!("{total} steps"),
    }
}

/// Writes `summary.csv` and `summary.md`.
fn write_summary(parent: &Path, m: &Manifest, runs: &[SeedRun]) -> Result<()> {
    let finals: Vec<f64> = runs.iter().filter_map(|r| r.final_return).collect();
    let (mean, std, iqm, min) = aggregate(&finals);
    let mut csv = String::from("seed,final_return,episodes,train_seconds,error\n");
    let mut md = format!(
        "# {} — {} (`{}` preset, backend `{}`), {} seeds × {}\n\n| seed | final return (deterministic) | episodes | training seconds |\n|---|---|---|---|\n",
        m.env_id,
        m.config.algo,
        m.config.preset,
        m.config.resolved_backend().as_str(),
        m.seeds.len(),
        steps_label(m.config.total_timesteps, runs)
    );
    for r in runs {
        let ret = r.final_return.map_or(String::new(), |v| format!("{v}"));
        let err = r.error.as_deref().unwrap_or("").replace([',', '\n'], ";");
        csv.push_str(&format!("{},{ret},{},{:.2},{err}\n", r.seed, r.episodes, r.train_seconds));
        let shown = match (&r.error, r.final_return) {
            (Some(e), _) => format!("failed: {}", e.lines().next().unwrap_or("")),
            (None, Some(v)) => format!("{v:.2}"),
            (None, None) => "no evaluation".into(),
        };
        md.push_str(&format!("| {} | {shown} | {} | {:.1} |\n", r.seed, r.episodes, r.train_seconds));
    }
    md.push_str(&format!(
        "\nOver {} seeds: mean ± std **{mean:.2} ± {std:.2}**, IQM **{iqm:.2}**, min **{min:.2}**.\n",
        finals.len()
    ));
    for (name, v) in [("mean", mean), ("std", std), ("iqm", iqm), ("min", min)] {
        csv.push_str(&format!("{name},{v},,,\n"));
    }
    proxima::io::write_atomic(&parent.join("summary.csv"), csv.as_bytes())?;
    proxima::io::write_atomic(&parent.join("summary.md"), md.as_bytes())?;
    Ok(())
}

/// Seeds trained at once: `--jobs`, else one per core — but one at a time for a bridged env,
/// whose runs share one embedded Python and its GIL (2 seeds of `gym:HalfCheetah-v5` took 8.3 s
/// side by side against 4.7 s one after the other, on 2 cores).
pub fn seed_jobs(jobs: Option<usize>, env_id: &str) -> usize {
    match jobs {
        Some(j) => j,
        None if proxima::env::needs_bridge(env_id) => 1,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Trains every unfinished seed of the multi-seed run in `parent` (`jobs_flag` at a time, else
/// [`seed_jobs`]; moved to `moves` where given), with one line per finished seed unless `quiet`; then
/// its learning curves and the summary line. `resumed`: this process continues an earlier one.
///
/// # Errors
/// A seed that failed (named, with its log), a signal (after every running seed saved), the
/// parent's files.
pub fn run_and_report(
    parent: &Path,
    jobs_flag: Option<usize>,
    moves: ResumeOptions,
    quiet: bool,
    resumed: bool,
) -> Result<()> {
    let m = read_manifest(&parent)?;
    set_threads(m.config.num_threads);
    let jobs = seed_jobs(jobs_flag, &m.env_id);
    if jobs_flag.is_none() && jobs == 1 && proxima::env::needs_bridge(&m.env_id) && m.seeds.len() > 1 {
        eprintln!(
            "note: the seeds of {} run one at a time: bridged envs share one embedded Python and its lock (the GIL), \
             so seeds side by side ran slower here; --jobs N overrides",
            m.env_id
        );
    }
    let n = m.seeds.len();
    eprintln!(
        "{n} seed{} of {} on {}, {} at a time, into {}",
        if n == 1 { "" } else { "s" },
        m.config.algo,
        m.env_id,
        jobs.min(n),
        parent.display()
    );
    let t0 = std::time::Instant::now();
    signals::training_started();
    let (m, runs) = run(parent, jobs, moves, |r, done, total| {
        if quiet {
            return;
        }
        match (&r.error, r.final_return) {
            (Some(e), _) if signals::received().is_some() => eprintln!("[{done}/{total}] seed {}: {e}", r.seed),
            (Some(e), _) => eprintln!("[{done}/{total}] seed {}: failed: {e}", r.seed),
            (None, Some(v)) => {
                eprintln!("[{done}/{total}] seed {}: final return {v:.2} ({:.1} s)", r.seed, r.train_seconds)
            }
            (None, None) => {
                eprintln!("[{done}/{total}] seed {}: done ({:.1} s, no evaluation)", r.seed, r.train_seconds)
            }
        }
    })?;
    if let Some(signal) = signals::received() {
        eprintln!(
            "{}: every running seed stopped after its current update and saved a checkpoint\ncontinue with: proxima train --resume {}",
            signals::name(signal),
            parent.display()
        );
        return Err(signals::Interrupted { signal }.into());
    }
    let (title, curves) = curves(&m, &runs);
    plot::seed_curves(&title, &curves, m.config.total_timesteps as f64, &parent.join("learning_curves.png"))?;
    if let Some(e) = failures(&parent, &runs) {
        return Err(e);
    }
    let finals: Vec<f64> = runs.iter().filter_map(|r| r.final_return).collect();
    let (mean, std, iqm, min) = aggregate(&finals);
    let score = if finals.is_empty() {
        "no evaluation (eval_episodes = 0)".to_string()
    } else {
        format!("final deterministic return {mean:.2} ± {std:.2} (IQM {iqm:.2}, min {min:.2})")
    };
    // On --resume a seed's own time (its line above) also counts the processes before this one.
    let this_run = if resumed { " (this process; the seeds' times count earlier ones too)" } else { "" };
    println!(
        "trained {n} seed{} of {} in {:.1} s{this_run}; {score}",
        if n == 1 { "" } else { "s" },
        m.env_id,
        t0.elapsed().as_secs_f64()
    );
    println!("parent directory: {} (summary.md, summary.csv, learning_curves.png)", parent.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_how_many_steps_ran() {
        let run = |last: f64| SeedRun {
            seed: 1,
            final_return: Some(500.0),
            episodes: 10,
            train_seconds: 1.0,
            curve: vec![(512.0, 20.0), (last, 500.0)],
            error: None,
        };
        assert_eq!(steps_label(500_000, &[run(500_224.0)]), "500000 steps asked, 500224 run (whole rollouts)");
        assert_eq!(steps_label(500_000, &[run(500_000.0)]), "500000 steps");
        assert_eq!(steps_label(500_000, &[]), "500000 steps");
    }

    #[test]
    fn seed_lists_and_their_errors() {
        assert_eq!(parse_seeds("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_seeds("1,4,9").unwrap(), vec![1, 4, 9]);
        assert_eq!(parse_seeds("7, 1-2").unwrap(), vec![7, 1, 2]);
        for (bad, says) in [
            ("", "not a seed"),
            ("5-2", "backwards"),
            ("1,1", "twice"),
            ("1-3,2", "twice"),
            ("x", "not a seed"),
            ("0-100000", "more than"),
            ("-1", "seeds are whole numbers from 0"),
            ("3,-1-2", "seeds are whole numbers from 0"),
        ] {
            let e = format!("{:#}", parse_seeds(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn aggregates_match_their_definitions() {
        let (mean, std, iqm, min) = aggregate(&[1.0, 2.0, 3.0, 4.0, 100.0, 6.0, 7.0, 8.0]);
        assert_eq!((mean, min), (16.375, 1.0));
        assert_eq!(iqm, (3.0 + 4.0 + 6.0 + 7.0) / 4.0, "⌊8/4⌋ = 2 trimmed from each end");
        assert!(std > 0.0);
        assert!(aggregate(&[]).0.is_nan());
        assert_eq!(aggregate(&[5.0]).2, 5.0);
    }
}
