//! `proxima train ENV --seeds …`: the parent directory of a multi-seed run, made from the flags
//! (its runs and their report are `experiments::seeds::run_and_report`'s), or `--resume PARENT`.

use super::args::TrainArgs;
use super::flags::{check_env_keys, safe_id, train_config};
use crate::experiments::seeds::{self, seed_jobs};
use crate::rundirs::claim_run_dir;
use anyhow::{bail, Result};
use proxima::config::Config;
use proxima::train;
use std::path::{Path, PathBuf};

/// `proxima train ENV --seeds …`: one run per seed on the experiment pool, into one parent
/// directory; or `--resume PARENT` of such a run.
pub(super) fn train_seeds(a: &TrainArgs, resume: Option<&Path>) -> Result<()> {
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let moves = super::resume::resume_options(a)?;
    let parent = match resume {
        Some(dir) => {
            if a.total_timesteps.is_some() {
                bail!(
                    "--total-timesteps cannot change a multi-seed run on --resume; its seeds train to {}'s total",
                    dir.display()
                );
            }
            dir.to_path_buf()
        }
        None => new_parent(a)?,
    };
    seeds::run_and_report(&parent, a.jobs, moves, a.quiet, resume.is_some())
}

/// A new multi-seed run's parent directory, with its manifest: the seeds and the config the
/// flags make. Bad input fails before the file system is touched: the first seed's trainer is
/// built first, and the replay buffers the runs at once would hold are checked against memory.
fn new_parent(a: &TrainArgs) -> Result<PathBuf> {
    let list = seeds::parse_seeds(a.seeds.as_deref().unwrap_or_default())?;
    let (env_id, cfg) = train_config(a)?;
    let first = train::Trainer::new(env_id, Config { seed: list[0], ..cfg.clone().into_config() })?;
    check_env_keys(a, &first)?;
    if let Some(rb) = first.replay_buffer() {
        // The runs that train at once each hold a replay buffer.
        let at_once = seed_jobs(a.jobs, env_id).min(list.len()) as u64;
        let (need, limit) = (at_once * rb.memory_bytes(), proxima::replay::memory_limit());
        if need > limit {
            bail!(
                "{at_once} runs at a time would hold {at_once} replay buffers of {} each, {} in all, more than the {} this machine can give them: lower --jobs or buffer_size",
                proxima::replay::human_bytes(rb.memory_bytes()),
                proxima::replay::human_bytes(need),
                proxima::replay::human_bytes(limit)
            );
        }
    }
    let list_name: String = a.seeds.as_deref().unwrap_or_default().chars().filter(|c| !c.is_whitespace()).collect();
    let base = format!("{}__{}__seeds{}", safe_id(env_id), cfg.algo, safe_id(&list_name.replace(',', "_")));
    let parent = claim_run_dir(a.run_dir.clone(), &base)?;
    seeds::create(&parent, &seeds::Manifest { env_id: env_id.to_string(), seeds: list, config: cfg.into_config() })?;
    Ok(parent)
}
