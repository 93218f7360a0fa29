//! Run directories on disk, for every command: claiming a new one (never mixing two runs in
//! one directory) and finding a run's latest checkpoint.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The run directory to write into. An explicit `--run-dir` must be absent or empty (so two
/// runs never mix in one directory: continue a run with `--resume`); the default
/// `runs/<base>__<unix time>` is created atomically, with a `_2`, `_3`, … suffix when another
/// run took the name in the same second.
pub fn claim_run_dir(explicit: Option<PathBuf>, base: &str) -> Result<PathBuf> {
    if let Some(d) = explicit {
        if d.exists() {
            if !d.is_dir() {
                bail!("--run-dir {}: exists and is not a directory", d.display());
            }
            if std::fs::read_dir(&d).with_context(|| format!("--run-dir {}", d.display()))?.next().is_some() {
                // Only a run (its config.toml, or a multi-seed parent's seeds.toml) can be continued.
                if d.join("config.toml").is_file() || d.join("seeds.toml").is_file() {
                    bail!(
                        "--run-dir {} already holds a run; continue it with `proxima train --resume {}`, or choose an empty or new directory",
                        d.display(),
                        d.display()
                    );
                }
                if is_lm_run(&d) {
                    bail!(
                        "--run-dir {} already holds a language-model run (`proxima lm`); continue it with `proxima lm resume {}`, or choose an empty or new directory",
                        d.display(),
                        d.display()
                    );
                }
                bail!("--run-dir {} already holds files (not a run); choose an empty or new directory", d.display());
            }
        }
        return Ok(d);
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    std::fs::create_dir_all("runs").context("cannot create runs/")?;
    for k in 1.. {
        let name = if k == 1 { format!("{base}__{t}") } else { format!("{base}__{t}_{k}") };
        let dir = PathBuf::from("runs").join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    unreachable!("the suffix loop only ends by returning")
}

/// The checkpoint of a run directory with the most updates (model.safetensors or checkpoints/*);
/// damaged files are skipped with a warning.
pub fn latest_checkpoint(dir: &Path) -> Result<PathBuf> {
    if dir.is_file() {
        bail!("{}: a file; give the run directory that holds it", dir.display());
    }
    if !dir.is_dir() {
        bail!("{}: no such run directory", dir.display());
    }
    if is_hf_lm_run(dir) {
        bail!("{}", hf_run_note(dir));
    }
    if is_lm_run(dir) {
        bail!(
            "{}: a language-model run directory (`proxima lm`), not a reinforcement-learning one; evaluate it with `proxima lm eval {}`, continue it with `proxima lm resume {}`",
            dir.display(),
            dir.display(),
            dir.display()
        );
    }
    // model.safetensors first: on a tie with the last checkpoint, the final model is the one taken,
    // unless the checkpoint has an off-policy run's replay buffer beside it (the same state, and
    // the buffer an exact resume needs).
    let mut files = vec![dir.join("model.safetensors")];
    if let Ok(d) = std::fs::read_dir(dir.join("checkpoints")) {
        files.extend(
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
                .filter(|p| !p.to_string_lossy().ends_with(proxima::train::REPLAY_SUFFIX)),
        );
    }
    files[1..].sort(); // the warnings in the checkpoints' order, whatever the directory's
    let mut best: Option<(u64, PathBuf)> = None;
    let mut last_err = None;
    let files: Vec<PathBuf> = files.into_iter().filter(|f| f.is_file()).collect();
    for f in &files {
        match proxima::checkpoint::load(f) {
            Ok(ck) if best.as_ref().is_none_or(|(u, _)| ck.meta.update > *u) => {
                best = Some((ck.meta.update, f.clone()))
            }
            Ok(ck)
                if best.as_ref().is_some_and(|(u, _)| ck.meta.update == *u)
                    && proxima::train::replay_path(f).is_file() =>
            {
                best = Some((ck.meta.update, f.clone()))
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("warning: a damaged checkpoint, skipped: {e}");
                last_err = Some(e); // a damaged file: fall back to the others
            }
        }
    }
    match (best, last_err) {
        (Some((_, f)), _) => Ok(f),
        (None, Some(e)) => bail!(
            "{}: none of its {} checkpoint files loads (the last one's error: {e}); nothing to resume or evaluate",
            dir.display(),
            files.len()
        ),
        (None, None) if dir.join("seeds.toml").is_file() => bail!(
            "{}: a multi-seed run's parent directory, which holds no checkpoint itself; give one of its seeds' \
             directories (`{}/seed_N`)",
            dir.display(),
            dir.display()
        ),
        (None, None) => {
            bail!("{}: holds no checkpoint (neither model.safetensors nor checkpoints/*.safetensors)", dir.display())
        }
    }
}

/// A checkpoint file as given, or a run directory's most advanced loadable checkpoint
/// (normally `model.safetensors`).
pub fn resolve_checkpoint(path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        bail!("{}: no such run directory or checkpoint file", path.display());
    }
    let best = latest_checkpoint(path)?;
    // The final model where it holds the same state as the checkpoint a resume would take.
    let model = path.join("model.safetensors");
    let update = |f: &Path| proxima::checkpoint::load(f).ok().map(|c| c.meta.update);
    if best != model && model.is_file() && update(&model).is_some_and(|u| Some(u) == update(&best)) {
        return Ok(model);
    }
    Ok(best)
}

/// Whether `dir` holds a run of `proxima lm` (its `config.json`, and none of the files of a
/// `proxima train` run).
pub fn is_lm_run(dir: &Path) -> bool {
    dir.join("config.json").is_file() && !is_rl_run(dir)
}

/// Whether `dir` holds a run of `proxima lm grpo --model` (its `config.json` says so).
pub fn is_hf_lm_run(dir: &Path) -> bool {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| v["command"] == crate::commands::lm_hf::COMMAND)
}

/// What to do with a `proxima lm grpo --model` run directory where a command cannot use it.
pub fn hf_run_note(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "{d}: a GRPO run on a Hugging Face model (`proxima lm grpo --model`): its trained model is {d}/model, a Hugging Face directory (load it with proxima.lm.CausalLM or transformers' from_pretrained); an unfinished run continues with `proxima lm resume {d}`"
    )
}

/// Whether `dir` holds a run of `proxima train` (its `config.toml`, or a multi-seed parent's
/// `seeds.toml`).
pub fn is_rl_run(dir: &Path) -> bool {
    dir.join("config.toml").is_file() || dir.join("seeds.toml").is_file()
}

/// `--resume DIR` continues with the config saved in its checkpoint `ck` and writes that config
/// back to `DIR/config.toml`: when the file says otherwise (it was edited), a warning names the
/// keys that differ, not counting `flags` (those `--resume`'s own flags set).
pub fn warn_if_config_edited(dir: &Path, ck: &proxima::checkpoint::Checkpoint, flags: &[&str]) {
    let path = dir.join("config.toml");
    let Ok(text) = std::fs::read_to_string(&path) else { return };
    let saved = format!("env_id = {:?}\n{}", ck.meta.env_id, ck.meta.config_toml);
    let (Ok(file), Ok(saved)) = (text.parse::<toml::Table>(), saved.parse::<toml::Table>()) else {
        eprintln!(
            "warning: {} is not the config of the checkpoint this run resumes from (it does not parse); it is not used, and is rewritten from the checkpoint's",
            path.display()
        );
        return;
    };
    let mut keys: Vec<&String> = file.keys().chain(saved.keys().filter(|k| !file.contains_key(*k))).collect();
    keys.retain(|k| !flags.contains(&k.as_str()) && file.get(*k) != saved.get(*k));
    if keys.is_empty() {
        return;
    }
    let shown = |v: Option<&toml::Value>| v.map_or("(absent)".to_string(), |v| v.to_string());
    let diffs: Vec<String> = keys
        .iter()
        .map(|k| format!("{k} = {} in the file, {} in the checkpoint", shown(file.get(*k)), shown(saved.get(*k))))
        .collect();
    eprintln!(
        "warning: {} differs from the config saved in the checkpoint this run resumes from ({}); the file is not used: \
         --resume continues with the checkpoint's config and rewrites the file from it (to train with other settings, \
         start a new run with --config)",
        path.display(),
        diffs.join("; ")
    );
}
