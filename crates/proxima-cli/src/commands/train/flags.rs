//! A new run from `proxima train`'s flags: its config (preset → file → `--set` → the typed
//! flags), the checks that need the env, and its run directory.

use super::args::TrainArgs;
use crate::experiments::pool::set_threads;
use crate::rundirs::claim_run_dir;
use anyhow::{bail, Context, Result};
use proxima::config::{AlgoName, Config, ValidConfig};
use proxima::train;
use std::path::PathBuf;

/// A fresh trainer from the command line's env id, preset, config file and overrides, and its
/// run directory (claimed only once everything that can fail on bad input has been built).
pub(super) fn new_trainer(a: &TrainArgs) -> Result<(train::Trainer, PathBuf)> {
    let (env_id, cfg) = train_config(a)?;
    let (seed, label, policy) = (cfg.seed, cfg.algo, cfg.policy);
    // Build everything that can fail on bad input before touching the file system.
    let trainer = train::Trainer::new(env_id, cfg)?;
    if env_id.starts_with("atari:") && !policy.is_cnn() {
        eprintln!(
            "note: {env_id} with policy = `{policy:?}`: an MLP on the stacked frames; the Atari presets (--preset paper-atari or cleanrl-atari) train the Nature CNN"
        );
    }
    check_env_keys(a, &trainer)?;
    let dir = claim_run_dir(a.run_dir.clone(), &format!("{}__{label}__{seed}", safe_id(env_id)))?;
    Ok((trainer, dir))
}

/// `gym:ALE/Pong-v5` → `gym-ALE-Pong-v5`: no `/` or `:` in directory names.
pub(super) fn safe_id(env_id: &str) -> String {
    env_id.chars().map(|c| if c.is_ascii_alphanumeric() || "-._".contains(c) { c } else { '-' }).collect()
}

/// The env id and the resolved config of a new run: preset (or --algo's), --config, --set,
/// then the explicit flags.
pub(super) fn train_config(a: &TrainArgs) -> Result<(&str, ValidConfig)> {
    train_config_over(a, 1)
}

/// [`train_config`] for a distributed run of `ranks` processes (`batch_size` checked against
/// the whole rollout: [`Config::validate_over`]). The config is validated once, with the flags
/// applied.
pub(super) fn train_config_over(a: &TrainArgs, ranks: usize) -> Result<(&str, ValidConfig)> {
    let env_id = a.env_id.as_deref().expect("clap requires ENV_ID without --resume");
    let file = match &a.config {
        Some(p) => {
            Some(std::fs::read_to_string(p).with_context(|| format!("cannot read config file {}", p.display()))?)
        }
        None => None,
    };
    let algo = match a.algo.as_deref() {
        None => None,
        Some(x) => match x.parse::<AlgoName>() {
            Ok(algo) => Some(algo),
            Err(_) => bail!("unknown --algo `{x}`; algorithms: {}", proxima::config::ALGOS.join(", ")),
        },
    };
    let default_preset = match algo {
        None | Some(AlgoName::Ppo) => "cleanrl",
        Some(algo) => algo.as_str(),
    };
    let flags = typed_flag_keys(a)?;
    let preset = a.preset.as_deref().unwrap_or(default_preset);
    if let (Some(algo), Some(_)) = (algo, &a.preset) {
        Config::check_preset_fits(preset, algo).map_err(|e| anyhow::anyhow!("--preset {preset} --algo {algo}: {e}"))?;
        let unread = Config::preset_keys_unread(preset, algo);
        if !unread.is_empty() {
            eprintln!(
                "note: --preset {preset} holds another algorithm's values; {algo} does not read its {}",
                unread.join(", ")
            );
        }
    }
    let mut cfg = Config::layered(preset, file.as_deref(), &a.sets)?;
    // The typed flags set their keys over the preset, the file and `--set`.
    cfg.algo = algo.unwrap_or(cfg.algo);
    if let Some(b) = &a.backend {
        cfg.backend = b.parse()?;
    }
    if let Some(v) = &a.vector_env {
        cfg.vector_env = v.parse()?;
    }
    cfg.n_workers = a.workers.unwrap_or(cfg.n_workers);
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if let Some(t) = a.total_timesteps {
        cfg.total_timesteps = t;
    }
    if games_in_workers(env_id, &cfg, ranks)
        && a.vector_env.is_none()
        && !Config::chosen_keys(preset, file.as_deref(), &a.sets).iter().any(|k| k == "vector_env")
    {
        cfg.vector_env = proxima::config::VectorEnv::Subproc;
    }
    let cfg = cfg.validate_over(ranks)?;
    // A config file's keys count where they differ from the preset the resolved config names (a
    // run's own config.toml names its own preset, e.g. a2c).
    let mut chosen = Config::chosen_keys(&cfg.preset, file.as_deref(), &a.sets);
    chosen.extend(flags.into_iter().map(String::from));
    cfg.check_keys_used(&chosen).map_err(|e| flag_names(e, a.workers.is_some()))?;
    set_threads(cfg.num_threads);
    Ok((env_id, cfg))
}

/// Whether an `atari:` run steps its games in worker processes of this binary unless the user
/// chose `vector_env` (ALE keeps Python's lock while it emulates, so only another process can
/// step games beside the learner; the run is the same, bit for bit): one process (not an MPI
/// rank: each would start its own), not A3C (its workers make their own envs), in a build with
/// the bridge.
fn games_in_workers(env_id: &str, cfg: &Config, ranks: usize) -> bool {
    cfg!(feature = "gym")
        && env_id.starts_with(proxima::env::atari::ATARI_PREFIX)
        && ranks == 1
        && cfg.algo != AlgoName::A3c
        && cfg.vector_env == proxima::config::VectorEnv::Off
}

/// The config keys the typed flags set (`--algo`, `--backend`, `--vector-env`, `--workers`), each once: a flag
/// and a `--set` of its key together are refused rather than one silently winning.
///
/// # Errors
/// A flag given together with `--set` of its key, naming both.
fn typed_flag_keys(a: &TrainArgs) -> Result<Vec<&'static str>> {
    let given = [
        ("--algo", "algo", a.algo.is_some()),
        ("--backend", "backend", a.backend.is_some()),
        ("--vector-env", "vector_env", a.vector_env.is_some()),
        ("--workers", "n_workers", a.workers.is_some()),
    ];
    let mut keys = Vec::new();
    for (flag, key, set) in given {
        if !set {
            continue;
        }
        if a.sets.iter().any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key)) {
            bail!("{flag} and --set {key}=… both set `{key}`: give one of them");
        }
        keys.push(key);
    }
    Ok(keys)
}

/// An ignored-key error in the words of the command line: `n_workers` set by `--workers`.
pub(super) fn flag_names(e: proxima::ProximaError, workers_flag: bool) -> anyhow::Error {
    let text = e.to_string();
    match workers_flag {
        true => anyhow::anyhow!("{}", text.replacen("`n_workers` (", "`--workers` / `n_workers` (", 1)),
        false => e.into(),
    }
}

/// `log_std_init` on an env whose actions are not continuous: the Gaussian it sets does not
/// exist there (the one ignored key that depends on the env, so it is checked once the env is
/// made).
pub(super) fn check_env_keys(a: &TrainArgs, trainer: &train::Trainer) -> Result<()> {
    use proxima::policy::Policy;
    let set_here = a.sets.iter().any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == "log_std_init"));
    let continuous = matches!(trainer.policy.spec().action, proxima::policy::ActionKind::Continuous { .. });
    if set_here && !continuous {
        bail!(
            "invalid config: `log_std_init` (the Gaussian's initial log-std) has no effect with {}'s discrete actions: remove it",
            trainer.env_id
        );
    }
    Ok(())
}
