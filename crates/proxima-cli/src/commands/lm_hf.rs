//! `proxima lm grpo --model DIR --dataset FILE.jsonl --reward MODULE:FUNCTION`: GRPO on a
//! Hugging Face model ([`proxima_lm::hf::GrpoTrainer`], TRL's `GRPOConfig` names through
//! `--set`) with reward functions written in Python, imported into the embedded interpreter
//! (a CLI built with `--features gym`). The run directory holds `config.json` (the command and
//! its settings), `progress.jsonl` (one log row per generation batch, TRL's keys),
//! `checkpoints/` (every `--save-steps` optimiser steps, on Ctrl-C and at the end) and, when
//! done, `model/` (a Hugging Face directory). `proxima lm resume RUN_DIR` continues it exactly.

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::ProgressBar;
use proxima_lm::hf::resume::run_fingerprint;
use proxima_lm::hf::{CausalLm, GrpoArgs, GrpoTrainer, HfTokenizer, RewardFunction};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The run's `config.json` `command`.
pub const COMMAND: &str = "grpo-hf";

/// `proxima lm grpo --model ...`'s flags.
#[derive(Args, Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct HfGrpoFlags {
    /// A Hugging Face model directory (config.json, *.safetensors, tokenizer.json): Llama,
    /// SmolLM, Qwen2, Qwen3 or GPT-2.
    #[arg(long)]
    pub model: PathBuf,
    /// The prompts: a JSONL file, one JSON object per line with a `prompt` (text, or a list of
    /// {"role", "content"} messages); its other columns go to the reward functions by name.
    #[arg(long)]
    pub dataset: PathBuf,
    /// A reward function, MODULE:FUNCTION (repeatable: their weighted sum is the reward), called as
    /// TRL calls reward_funcs; MODULE is found in the current directory (also when the run is
    /// resumed from elsewhere) or the Python of PROXIMA_PYTHON.
    #[arg(long = "reward", value_name = "MODULE:FUNCTION", required = true)]
    pub rewards: Vec<String>,
    /// A GRPOConfig field by TRL's name (repeatable): --set max_steps=100 --set learning_rate=1e-5
    /// --set loss_type=grpo --set 'peft_config={"r": 16, "lora_alpha": 32}'. The value is read as
    /// JSON, else as text.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Write a checkpoint every this many optimiser steps (TRL's save_steps); one is also written
    /// at the end and when Ctrl-C stops the run.
    #[arg(long, default_value_t = 50)]
    pub save_steps: u64,
}

/// The run's `config.json`: what `lm resume` rebuilds the trainer from.
#[derive(serde::Serialize, serde::Deserialize)]
struct RunConfig {
    command: String,
    model: PathBuf,
    dataset: PathBuf,
    rewards: Vec<String>,
    /// Where the reward modules are imported from first: the directory the run was started in.
    working_dir: PathBuf,
    save_steps: u64,
    args: GrpoArgs,
}

/// `GrpoArgs::default()` with `sets` applied.
///
/// # Errors
/// A `--set` without `=`, a field `GRPOConfig` lacks, or a value of the wrong type.
fn grpo_args(sets: &[String]) -> Result<GrpoArgs> {
    let mut v = serde_json::to_value(GrpoArgs::default())?;
    for s in sets {
        let Some((key, value)) = s.split_once('=') else { bail!("--set {s:?}: expected KEY=VALUE") };
        let key = key.trim();
        if v.get(key).is_none() {
            let known: Vec<&String> = v.as_object().map(|o| o.keys().collect()).unwrap_or_default();
            bail!(
                "--set {key}: not a GRPOConfig field Proxima reads (one of: {})",
                known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
        v[key] = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        serde_json::from_value::<GrpoArgs>(v.clone()).with_context(|| format!("--set {key}={value}"))?;
    }
    Ok(serde_json::from_value(v)?)
}

/// The rows of a JSONL file.
fn read_jsonl(path: &Path) -> Result<Vec<Map<String, Value>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--dataset {}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(Value::Object(m)) => rows.push(m),
            Ok(_) => bail!("{}: line {} is not a JSON object", path.display(), i + 1),
            Err(e) => bail!("{}: line {} is not JSON: {e}", path.display(), i + 1),
        }
    }
    Ok(rows)
}

/// A Python `MODULE:FUNCTION` as a reward function; its exception becomes an error with the
/// traceback.
#[cfg(feature = "gym")]
struct CliReward(proxima_gym::reward::PythonReward);

#[cfg(feature = "gym")]
impl RewardFunction for CliReward {
    fn name(&self) -> String {
        self.0.name().to_string()
    }

    fn call(
        &mut self,
        prompts: &[String],
        completions: &[String],
        ids: &[Vec<u32>],
        columns: &[Map<String, Value>],
    ) -> proxima::Result<Vec<Option<f64>>> {
        self.0.call(prompts, completions, ids, columns).map_err(|e| {
            let tb = proxima_gym::reward::PythonReward::describe(e);
            proxima::ProximaError::UserCode(format!("reward function `{}` raised:\n{tb}", self.0.name()))
        })
    }
}

fn reward_functions(specs: &[String], dir: &Path) -> Result<Vec<Box<dyn RewardFunction>>> {
    #[cfg(feature = "gym")]
    {
        specs
            .iter()
            .map(|s| {
                proxima_gym::reward::PythonReward::import(s, dir)
                    .map(|r| Box::new(CliReward(r)) as Box<dyn RewardFunction>)
                    .map_err(anyhow::Error::msg)
            })
            .collect()
    }
    #[cfg(not(feature = "gym"))]
    {
        let _ = (specs, dir);
        bail!("--reward runs Python: this proxima was built without its embedded Python; rebuild with `cargo build --release -p proxima-cli --features gym`")
    }
}

/// The trainer of `cfg`, the fingerprint of the weights it starts from, and its tokenizer-checked
/// model directory.
fn build(cfg: &RunConfig) -> Result<(GrpoTrainer, String)> {
    let rewards = reward_functions(&cfg.rewards, &cfg.working_dir)?;
    let rows = read_jsonl(&cfg.dataset)?;
    let dir = &cfg.model;
    if !dir.is_dir() {
        bail!(
            "--model {}: not a directory (a Hugging Face model directory: config.json, *.safetensors, tokenizer.json)",
            dir.display()
        );
    }
    let model = CausalLm::load(dir).with_context(|| format!("--model {}", dir.display()))?;
    let inputs = run_fingerprint(&model, &rows, &serde_json::to_value(&cfg.args)?)?;
    let tokenizer = HfTokenizer::load(dir).with_context(|| format!("--model {}", dir.display()))?;
    Ok((GrpoTrainer::new(model, tokenizer, rewards, cfg.args.clone(), rows)?, inputs))
}

/// `proxima lm grpo --model ...`: checks everything (the model, the dataset, the reward
/// functions, the settings) before claiming the run directory, then trains.
pub fn exec(
    flags: HfGrpoFlags,
    run_dir: Option<PathBuf>,
    quiet: bool,
    claim: &dyn Fn(Option<PathBuf>, &str) -> Result<PathBuf>,
) -> Result<()> {
    let absolute = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let cfg = RunConfig {
        command: COMMAND.into(),
        model: absolute(&flags.model),
        dataset: absolute(&flags.dataset),
        rewards: flags.rewards.clone(),
        working_dir: std::env::current_dir().context("the current directory")?,
        save_steps: flags.save_steps.max(1),
        args: grpo_args(&flags.sets)?,
    };
    let (trainer, inputs) = build(&cfg)?;
    let dir = claim(run_dir, &format!("lm-hf__grpo__{}", cfg.args.seed))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
    proxima::io::write_atomic(&dir.join("config.json"), serde_json::to_string_pretty(&cfg)?.as_bytes())?;
    train(trainer, &cfg, &inputs, &dir, quiet)
}

/// `proxima lm resume RUN_DIR` of a `grpo-hf` run: the trainer rebuilt from `config.json`, then
/// its latest checkpoint (none yet: from the start).
pub fn resume(dir: &Path, config: Value, quiet: bool) -> Result<()> {
    let cfg: RunConfig =
        serde_json::from_value(config).with_context(|| format!("{}: malformed config.json", dir.display()))?;
    if dir.join("model").join("config.json").is_file() {
        bail!("{} is complete (its model/ is written)", dir.display());
    }
    let (mut trainer, inputs) = build(&cfg)?;
    match proxima_lm::resume::latest_checkpoint(dir)? {
        Some(ck) => {
            trainer.restore_checkpoint(&ck, &inputs)?;
            eprintln!("resuming lm grpo in {} from step {}", dir.display(), trainer.global_step);
        }
        None => eprintln!("{} holds no checkpoint yet: restarting lm grpo from its config.json", dir.display()),
    }
    train(trainer, &cfg, &inputs, dir, quiet)
}

/// Trains to `max_steps`: a log row per generation batch into progress.jsonl, a checkpoint every
/// `save_steps` optimiser steps and at the end; the model into `dir/model/`. A first Ctrl-C
/// stops after the current batch with a checkpoint.
fn train(mut tr: GrpoTrainer, cfg: &RunConfig, inputs: &str, dir: &Path, quiet: bool) -> Result<()> {
    crate::signals::training_started();
    let log = dir.join("progress.jsonl");
    let rows: String = tr.log_history.iter().map(|r| format!("{r}\n")).collect();
    proxima::io::write_atomic(&log, rows.as_bytes())?; // the rows up to the checkpoint
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(tr.args.max_steps) };
    bar.set_position(tr.global_step);
    let start = std::time::Instant::now();
    while tr.global_step < tr.args.max_steps {
        let before = tr.global_step;
        let m = tr.step()?;
        append(&log, &m.to_json())?;
        bar.set_position(tr.global_step);
        bar.set_message(format!("reward {:.3}", m.reward));
        let stop = crate::signals::stop_requested();
        if tr.global_step / cfg.save_steps > before / cfg.save_steps || tr.global_step >= tr.args.max_steps || stop {
            tr.save_checkpoint(dir, inputs)?;
        }
        if stop && tr.global_step < tr.args.max_steps {
            bar.finish_and_clear();
            let signal = crate::signals::received().unwrap_or(signal_hook::consts::SIGINT);
            eprintln!(
                "{}: stopped after step {} of {}; its checkpoint is saved\ncontinue with: proxima lm resume {}",
                crate::signals::name(signal),
                tr.global_step,
                tr.args.max_steps,
                dir.display()
            );
            return Err(crate::signals::Interrupted { signal }.into());
        }
    }
    bar.finish_and_clear();
    tr.save_model(&dir.join("model"))?;
    let reward = |r: Option<&Value>| r.and_then(|r| r["reward"].as_f64()).unwrap_or(f64::NAN);
    println!(
        "lm grpo: mean reward {:.3} (first batch) -> {:.3} (last) in {:.1} s",
        reward(tr.log_history.first()),
        reward(tr.log_history.last()),
        start.elapsed().as_secs_f64()
    );
    println!("model: {} (a Hugging Face directory)", dir.join("model").display());
    println!("run directory: {}", dir.display());
    Ok(())
}

fn append(path: &Path, row: &Value) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).with_context(|| format!("{}", path.display()))?;
    writeln!(f, "{row}").with_context(|| format!("{}", path.display()))?;
    Ok(())
}
