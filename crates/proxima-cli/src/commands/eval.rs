//! `proxima eval`: episodes of a checkpoint's policy, optionally recorded.

use crate::experiments::pool::set_threads;
use crate::rundirs::resolve_checkpoint;
use anyhow::{bail, Result};
use clap::Args;
use proxima::train::{self, mean_std};
use std::path::PathBuf;

#[derive(Args)]
pub struct EvalArgs {
    /// A run directory (uses its model.safetensors, else its latest checkpoint) or a checkpoint file.
    path: PathBuf,
    /// Number of episodes.
    #[arg(long, default_value_t = 10)]
    episodes: usize,
    /// Take the mode of the action distribution instead of sampling.
    #[arg(long)]
    deterministic: bool,
    /// Print one JSON object (mean_return, std_return, episodes, returns, …).
    #[arg(long)]
    json: bool,
    /// Evaluate on another environment id than the one the checkpoint was trained on.
    #[arg(long)]
    env: Option<String>,
    /// Seed of the first evaluation episode (episode i uses seed + i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Record the first episode(s) to this file (.gif, or .mp4 with ffmpeg on PATH), from the
    /// env's render_mode="rgb_array" frames.
    #[arg(long, value_name = "FILE")]
    render: Option<PathBuf>,
    /// How many leading episodes --render records (at most --episodes: more are capped, with a
    /// note).
    #[arg(long, default_value_t = 1, requires = "render")]
    render_episodes: usize,
    /// Playback frames per second of the recording (default: the env's render_fps).
    #[arg(long, requires = "render")]
    fps: Option<u32>,
    /// The policy network's implementation: auto (default: the fused CPU kernels, candle for the
    /// networks they do not cover), fused or candle; a checkpoint of either backend loads into both.
    #[arg(long, value_parser = ["auto", "fused", "candle"], default_value = "auto")]
    backend: String,
    /// Not an option: PyTorch users reach for it, and are told that Proxima runs on the CPU.
    #[arg(long, hide = true, value_name = "DEVICE")]
    device: Option<String>,
}

/// `proxima eval`: episodes of a checkpoint's policy, optionally recorded.
pub fn exec(a: EvalArgs) -> Result<()> {
    let EvalArgs { path, episodes, deterministic, json, env, seed, render, render_episodes, fps, backend, device } = a;
    if let Some(device) = device {
        bail!("--device {device}: {}", proxima::config::CPU_ONLY);
    }
    set_threads(1);
    if episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let file = resolve_checkpoint(&path)?;
    let ck = proxima::checkpoint::load(&file)?;
    let off_policy = ck.off_policy_nets();
    // A deterministic actor (TD3, DDPG) acts the same either way.
    let deterministic =
        deterministic || off_policy.is_some_and(|s| s.kind == proxima::policy::ActorKind::Deterministic);
    let policy = ck.build_network(backend.parse()?)?;
    let given_env = env.is_some();
    let env_id = env.unwrap_or_else(|| ck.meta.env_id.clone());
    // Normalisation statistics saved with the model are applied, frozen.
    let norm = train::saved_normalizer(&ck)?;
    if render_episodes == 0 {
        bail!("--render-episodes must be at least 1");
    }
    if fps == Some(0) {
        bail!("--fps must be at least 1");
    }
    if render.is_some() && render_episodes > episodes {
        eprintln!("note: --render-episodes {render_episodes} is more than --episodes {episodes}: recording {episodes}");
    }
    let recording =
        render.as_ref().map(|p| train::Recording { path: p.clone(), episodes: render_episodes.min(episodes), fps });
    let masked = trained_masked(&ck.meta.config_toml);
    let returns = train::evaluate_recorded(
        &policy,
        &env_id,
        (episodes, deterministic, seed),
        norm.as_ref(),
        masked,
        recording.as_ref(),
    )
    .map_err(|e| {
        let unknown = e.to_string().contains("unknown environment id");
        let hint = if unknown && !given_env {
            let atari = proxima::env::atari::is_ale_game_id(&env_id);
            let this = if atari { format!(" (for this Atari game: --env atari:{env_id})") } else { String::new() };
            format!(
                "\n  the checkpoint records `{env_id}` as its env, which is not an id Proxima can make (a model trained from Python on an env object records its class name): pass --env ID (a native id, gym:ID with a Gymnasium id, or atari:GAME for an Atari game with SB3's wrappers){this}"
            )
        } else {
            String::new()
        };
        anyhow::anyhow!("{e}{hint}")
    })?;
    let (m, sd) = mean_std(&returns);
    if json {
        let out = serde_json::json!({
            "checkpoint": file.display().to_string(), "env_id": env_id, "episodes": episodes,
            "deterministic": deterministic, "seed": seed, "mean_return": m, "std_return": sd, "returns": returns,
            "global_step": ck.meta.global_step, "recording": recording.as_ref().map(|r| r.path.display().to_string()),
        });
        println!("{out}");
    } else {
        println!(
            "{env_id}: mean return {m:.2} ± {sd:.2} over {episodes} episode{} ({}) from {}",
            if episodes == 1 { "" } else { "s" },
            if deterministic { "deterministic" } else { "sampled" },
            file.display()
        );
    }
    if let Some(r) = &recording {
        eprintln!("recorded {} episode(s) to {}", r.episodes, r.path.display());
    }
    Ok(())
}

/// Whether the saved config trained under the envs' action masks (PPO with `use_masking`, as
/// sb3-contrib's MaskablePPO): its evaluation acts under them too; other models ignore them, as
/// they did in training.
fn trained_masked(config_toml: &str) -> bool {
    let Ok(cfg) = config_toml.parse::<toml::Table>() else { return false };
    let ppo = cfg.get("algo").and_then(|a| a.as_str()).is_none_or(|a| a == "ppo");
    ppo && cfg.get("use_masking").and_then(|m| m.as_bool()).unwrap_or(false)
}
