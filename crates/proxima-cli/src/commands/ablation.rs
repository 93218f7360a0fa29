//! `proxima ablation`: the PPO paper's comparison of objectives over envs × seeds.

use crate::experiments::{self, pool::set_threads};
use crate::{plot, signals};
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct AblationArgs {
    /// Comma-separated env ids.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "CartPole-v1,Acrobot-v1,MountainCar-v0,MountainCarContinuous-v0,Pendulum-v1"
    )]
    envs: Vec<String>,
    /// Comma-separated settings: clip[=ε], adaptive_kl[=d_targ], fixed_kl[=β], none, a2c, a3c, trpo,
    /// reinforce, reinforce_no_baseline.
    #[arg(long, value_delimiter = ',', default_value = "none,clip=0.2,adaptive_kl=0.01,fixed_kl=1")]
    variants: Vec<String>,
    /// Comma-separated seeds.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
    /// Steps per run.
    #[arg(long, default_value_t = 200_000)]
    total_timesteps: u64,
    /// Preset the PPO objectives start from (the paper's continuous-control settings by default).
    #[arg(long, default_value = "paper-mujoco")]
    preset: String,
    /// Override one hyperparameter of every run, `key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Runs in parallel (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (must be new or empty).
    #[arg(long, default_value = "ablation")]
    out: PathBuf,
}

/// `proxima ablation`: the paper's comparison of objectives over envs × seeds.
pub fn exec(a: AblationArgs) -> Result<()> {
    let AblationArgs { envs, variants, seeds, total_timesteps, preset, sets, jobs, out } = a;
    set_threads(1);
    let variants =
        variants.iter().map(|v| experiments::ablation::Variant::parse(v)).collect::<proxima::Result<Vec<_>>>()?;
    if total_timesteps == 0 {
        bail!("--total-timesteps must be at least 1");
    }
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let spec = experiments::ablation::AblationSpec {
        envs,
        variants,
        seeds,
        base_preset: preset,
        sets,
        total_timesteps,
        jobs,
        out: out.clone(),
    };
    // Bad configs, repeated or identical settings and unknown env ids fail before anything
    // is created or run.
    experiments::ablation::check(&spec)?;
    let continuing = experiments::ablation::claim_dir(&out, &experiments::ablation::manifest(&spec))?;
    let n_runs = spec.envs.len() * spec.variants.len() * spec.seeds.len();
    let verb = if continuing { "continuing" } else { "ablation:" };
    eprintln!("{verb} {n_runs} runs of {total_timesteps} steps, {jobs} at a time, into {}", out.display());
    let t0 = std::time::Instant::now();
    signals::training_started();
    let res = experiments::ablation::run(&spec, |done, total, r| {
        eprintln!(
            "[{done}/{total}] {} on {} seed {}: score {:.1} ({:.0} s)",
            spec.variants[r.variant].label, r.env, r.seed, r.score, r.seconds
        );
    });
    if let Some(signal) = signals::received() {
        eprintln!(
            "{}: every running run stopped after its current update and saved a checkpoint\ncontinue with the same command (finished runs are kept, interrupted ones resume)",
            signals::name(signal)
        );
        return Err(signals::Interrupted { signal }.into());
    }
    let res = res?;
    proxima::io::write_atomic(&out.join("results.csv"), res.to_csv().as_bytes())?;
    let md = res.to_markdown();
    proxima::io::write_atomic(&out.join("results.md"), md.as_bytes())?;
    for (e, env) in spec.envs.iter().enumerate() {
        plot::learning_curves(&res, e, &out.join(format!("curves_{}.png", experiments::ablation::slug(env))))?;
    }
    println!("{md}");
    println!("{} runs in {:.0} s; results in {}", n_runs, t0.elapsed().as_secs_f64(), out.display());
    Ok(())
}
