//! `proxima`: train and evaluate agents from the command line.
//!
//! ```text
//! proxima train ENV_ID [--preset NAME] [--config FILE.toml] [--set key=value ...] [--algo A]
//!               [--seed N] [--total-timesteps N] [--run-dir DIR]     # or: train --resume RUN_DIR
//! proxima eval RUN_DIR_OR_CHECKPOINT [--episodes N] [--deterministic] [--json] [--render FILE]
//! proxima ablation [--envs …] [--variants …] [--seeds …] --out DIR   # the paper's comparison
//! proxima lm sft|rm|grpo|ppo|dpo|resume|eval …                       # language models (proxima-lm)
//! proxima envs                                                       # native envs and presets
//! proxima bench-env ENV_ID [--steps N]                               # an env's own steps/s
//! ```
//!
//! Every error prints one `error: …` line naming what is wrong and exits with status 1
//! (usage errors: status 2, from clap).

mod distributed;
mod experiments;
mod lm;
mod plot;
mod rundirs;
mod signals;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima::config::{Config, PRESETS};
use proxima::env::NATIVE_ENV_IDS;
use proxima::train::{self, mean_std};
use rundirs::{claim_run_dir, latest_checkpoint, resolve_checkpoint};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// mimalloc instead of the system allocator: it keeps freed memory for reuse, where glibc's
/// returns every large block to the OS and takes page faults to get it back — a third of the
/// CNN's update time at Atari sizes (each minibatch allocates its im2col matrices anew).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "proxima", version, about = "Proximal Policy Optimization, fast and trustworthy, in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train an agent (PPO by default; A2C, A3C, TRPO, REINFORCE, PPG, SAC, TD3, DDPG with --algo) on an environment.
    Train(TrainArgs),
    /// Evaluate a trained policy: mean and std of the episodic return.
    Eval(EvalArgs),
    /// The PPO paper's comparison of objectives (and baselines), reproduced: runs every
    /// variant × env × seed in parallel, then writes results.csv, results.md (normalised
    /// scores: random policy 0, best setting 1) and one learning-curve PNG per env.
    Ablation(AblationArgs),
    /// PPO for language models on two-digit addition: sft, rm (reward model), grpo, ppo
    /// (RLHF-PPO), dpo, resume (an interrupted run), eval.
    Lm {
        #[command(subcommand)]
        command: lm::LmCommand,
    },
    /// List the native environments and the presets.
    Envs,
    /// Step an environment with uniformly random actions and report steps per second (the env's
    /// own cost, no policy): for comparing native, bridged and plain-Python stepping.
    BenchEnv(BenchEnvArgs),
}

#[derive(Args)]
struct TrainArgs {
    /// Environment id, e.g. CartPole-v1 (see `proxima envs`), or gym:ID for a Python Gymnasium
    /// env (build with --features gym); not needed with --resume.
    #[arg(required_unless_present = "resume")]
    env_id: Option<String>,
    /// Continue the run in RUN_DIR from its latest checkpoint (exactly: same weights as an
    /// uninterrupted run), or every unfinished seed of a multi-seed parent directory. Only
    /// --total-timesteps (single runs), --backend, --jobs (multi-seed) and --quiet may accompany it.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["preset", "config", "sets", "seed", "run_dir", "algo", "workers"])]
    resume: Option<PathBuf>,
    /// Algorithm: ppo, a2c, a3c, trpo, reinforce, ppg, sac, td3 or ddpg. Without --preset it also
    /// picks that algorithm's preset (ppo: cleanrl; a2c: a2c = SB3's A2C; a3c: a3c; trpo: trpo =
    /// sb3-contrib's TRPO; reinforce: reinforce, with a baseline unless --set baseline=false;
    /// ppg: CleanRL's ppg_procgen.py values; sac, td3, ddpg: SB3's SAC, TD3, DDPG).
    #[arg(long)]
    algo: Option<String>,
    /// A3C: number of asynchronous worker threads (n_workers).
    #[arg(long)]
    workers: Option<usize>,
    /// Hyperparameter preset: cleanrl (default), sb3, paper-mujoco, paper-atari, a2c, a3c, trpo,
    /// reinforce, ppg, sac, td3, ddpg.
    #[arg(long)]
    preset: Option<String>,
    /// A TOML file of hyperparameters overriding the preset (SB3 names, e.g. `n_steps = 256`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one hyperparameter, `key=value` (repeatable; `key=none` clears an optional one).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Random seed (network init, sampling, env resets).
    #[arg(long)]
    seed: Option<u64>,
    /// Environment steps to train for.
    #[arg(long)]
    total_timesteps: Option<u64>,
    /// Run directory (default: runs/<env>__<algo>__<seed>__<unix time>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Train one run per seed, in parallel: `1-16`, `1,4,9` or a mix; into one parent directory
    /// (--run-dir, default runs/<env>__<algo>__seeds<…>__<time>) with a run directory per seed,
    /// summary.md, summary.csv and learning_curves.png. Continue it with --resume PARENT.
    #[arg(long, value_name = "SEEDS", conflicts_with_all = ["seed", "resume"])]
    seeds: Option<String>,
    /// With --seeds (or --resume of a multi-seed run): runs at a time (default: one per core; one
    /// for `gym:`/`atari:` envs, which share one embedded Python).
    #[arg(long)]
    jobs: Option<usize>,
    /// The policy network's implementation: auto (default: the fused CPU kernels for PPO, A2C,
    /// A3C and REINFORCE, candle for TRPO, PPG, SAC, TD3 and DDPG), fused or candle. With --resume it
    /// moves the run to that backend.
    #[arg(long, value_parser = ["auto", "fused", "candle"])]
    backend: Option<String>,
    /// No progress bar; print one summary line at the end.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct EvalArgs {
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
    /// The policy network's implementation: auto (default, the fused CPU kernels; candle for
    /// SAC/TD3/DDPG), fused or candle; a checkpoint of either backend loads into both.
    #[arg(long, value_parser = ["auto", "fused", "candle"], default_value = "auto")]
    backend: String,
}

#[derive(Args)]
struct AblationArgs {
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

#[derive(Args)]
struct BenchEnvArgs {
    /// Environment id (native, or gym:ID with --features gym).
    env_id: String,
    /// Steps to take.
    #[arg(long, default_value_t = 100_000)]
    steps: u64,
    /// Seed of the resets and the random actions.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() -> ExitCode {
    signals::install(); // before anything starts Python (see its doc)
    quiet_on_closed_stdout();
    #[cfg(feature = "gym")]
    proxima_gym::register();
    // The library's warnings (and, with RUST_LOG=info, its notes) on stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .init();
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<signals::Interrupted>() {
            // What was saved and how to continue has been printed already.
            Some(i) => ExitCode::from(i.status()),
            None => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// A closed stdout (`proxima eval DIR | head -1`) ends the process quietly with the shell's code
/// for SIGPIPE (141), as other command-line tools, instead of `println!`'s panic message.
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        if msg.is_some_and(|m| m.starts_with("failed printing to stdout")) {
            std::process::exit(141);
        }
        default_hook(info)
    }));
}

/// Tensor ops run on this many threads; must be set before candle's first matmul.
fn set_threads(n: usize) {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(a) => train(a),
        Command::Eval(a) => eval(a),
        Command::Ablation(a) => ablation(a),
        Command::BenchEnv(a) => bench_env(a),
        Command::Lm { command } => lm::dispatch(command, claim_run_dir),
        Command::Envs => {
            println!("native environments: {}", NATIVE_ENV_IDS.join(", "));
            println!("presets: {}", PRESETS.join(", "));
            Ok(())
        }
    }
}

/// `proxima train`: a new run, or `--resume` of one, then training with a progress bar.
fn train(a: TrainArgs) -> Result<()> {
    if let Some((var, value)) = distributed::launched_by() {
        if cfg!(feature = "mpi") || !(var.ends_with("_SIZE") && value == 1) {
            return train_distributed(&a, &var, value);
        }
        // One process (`mpirun -np 1`, or a variable left in the shell): a plain run.
        eprintln!("note: {var}=1 is set; this build has no MPI, so this is a plain run of one process");
    }
    if a.seeds.is_some() {
        return train_seeds(&a, None);
    }
    if let Some(dir) = a.resume.as_deref().filter(|d| d.join(experiments::seeds::MANIFEST).is_file()) {
        return train_seeds(&a, Some(dir));
    }
    if a.jobs.is_some() {
        bail!("--jobs runs seeds in parallel: it needs --seeds (or --resume of a multi-seed run)");
    }
    let (trainer, run_dir) = match &a.resume {
        Some(dir) => match resumed_trainer(dir, a.env_id.as_deref(), a.total_timesteps, a.backend.as_deref())? {
            Some(trainer) => (trainer, dir.clone()),
            None => return Ok(()),
        },
        None => new_trainer(&a)?,
    };
    train_with_bar(&a, trainer, &run_dir, &signals::stop_requested)
}

/// One rank of `mpirun -np N proxima train …` (see `distributed.rs`): rank 0 trains as
/// [`train`] does, writing the run directory; the others train silently; a failure anywhere
/// aborts the job.
#[cfg(feature = "mpi")]
fn train_distributed(a: &TrainArgs, var: &str, value: usize) -> Result<()> {
    use proxima::dist::Collective;
    distributed::check_args(a.seeds.is_some())?;
    distributed::die_with_launcher();
    let mpi = std::sync::Arc::new(distributed::Mpi::init()?);
    let rank = mpi.rank();
    if var.ends_with("_SIZE") && value != mpi.size() {
        bail!(
            "{var}={value} says this is one of {value} processes, but MPI started {}: a variable left from another job (e.g. in an `srun --pty` shell)? Unset {var} to train in one process, or launch with mpirun/srun",
            mpi.size()
        );
    }
    if mpi.size() == 1 {
        eprintln!(
            "note: one MPI rank ({var}={value}): a distributed run of 1 rank, whose envs each sample from their own stream, so it is not the plain run of this seed (for that, run without mpirun and without launcher variables set)"
        );
    }
    // A signal stops every rank after the same update: after each one the ranks sum their
    // "signalled" flags (mpirun forwards Ctrl-C to every rank as SIGTERM, not at the same instant).
    let signalled = || {
        let mut any = [f64::from(u8::from(signals::stop_requested()))];
        mpi.all_reduce_sum_f64(&mut any).is_err() || any[0] > 0.0
    };
    let run = || -> Result<()> {
        let Some((mut trainer, dir)) = distributed_trainer(a, &mpi)? else { return Ok(()) };
        if rank == 0 {
            return train_with_bar(a, trainer, &dir, &signalled);
        }
        signals::training_started();
        while !trainer.is_done() {
            trainer.step()?;
            if signalled() {
                let signal = signals::received().unwrap_or(signal_hook::consts::SIGINT);
                return Err(signals::Interrupted { signal }.into());
            }
        }
        Ok(())
    };
    let t0 = std::time::Instant::now();
    let outcome = run();
    if let Err(e) = &outcome {
        if e.downcast_ref::<signals::Interrupted>().is_none() {
            one_line(&format!("error on rank {rank} of {}: {e:#}", mpi.size()));
            mpi.abort(1);
        }
    }
    if !a.quiet || std::env::var_os("PROXIMA_MPI_TIMING").is_some() {
        one_line(&comm_summary(&mpi, rank, t0.elapsed().as_secs_f64()));
    }
    outcome
}

/// This rank's trainer of a distributed run, new or resumed, and (on rank 0) its run directory;
/// `None` when there is nothing to train. Before anything else, the ranks check that they were
/// all started with the same run ([`distributed::check_same_run`]).
#[cfg(feature = "mpi")]
fn distributed_trainer(
    a: &TrainArgs,
    mpi: &std::sync::Arc<distributed::Mpi>,
) -> Result<Option<(train::Trainer, PathBuf)>> {
    use proxima::dist::Collective;
    let Some(dir) = &a.resume else {
        let (env_id, cfg) = train_config_over(a, mpi.size())?;
        distributed::check_same_run(&**mpi, &format!("train {env_id}\n{}", cfg.to_toml()))?;
        let (seed, label) = (cfg.seed, cfg.algo.clone());
        let trainer = train::Trainer::distributed(env_id, cfg, mpi.clone())?;
        if mpi.rank() != 0 {
            return Ok(Some((trainer, PathBuf::new())));
        }
        check_env_keys(a, &trainer)?;
        let dir = claim_run_dir(a.run_dir.clone(), &format!("{}__{label}__{seed}", safe_id(env_id)))?;
        return Ok(Some((trainer, dir)));
    };
    let given = |v: Option<String>| v.unwrap_or_else(|| "(not given)".into());
    let this_run = format!(
        "train --resume {}\n--total-timesteps {}\n--backend {}\nENV_ID {}",
        dir.display(),
        given(a.total_timesteps.map(|t| t.to_string())),
        given(a.backend.clone()),
        given(a.env_id.clone())
    );
    distributed::check_same_run(&**mpi, &this_run)?;
    Ok(resumed_distributed(a, dir, mpi.clone())?.map(|trainer| (trainer, dir.clone())))
}

/// `--resume DIR` under mpirun: rank 0 reads DIR's latest checkpoint and sends it to every rank
/// (no shared file system needed), and each rank takes its own envs and streams from it
/// ([`train::Trainer::resume_distributed`]); `None` when there is nothing to train.
#[cfg(feature = "mpi")]
fn resumed_distributed(
    a: &TrainArgs,
    dir: &Path,
    mpi: std::sync::Arc<distributed::Mpi>,
) -> Result<Option<train::Trainer>> {
    use proxima::dist::Collective;
    let (mut bytes, mut name) = (Vec::new(), Vec::new());
    let rank = mpi.rank();
    if rank == 0 {
        if dir.join(experiments::seeds::MANIFEST).is_file() {
            bail!(
                "{} is a multi-seed run (--seeds): its seeds are runs of one process each; resume it without mpirun",
                dir.display()
            );
        }
        let file = latest_checkpoint(dir)?;
        bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        name = file.display().to_string().into_bytes();
    }
    mpi.broadcast_bytes(&mut bytes)?;
    mpi.broadcast_bytes(&mut name)?;
    let file = PathBuf::from(String::from_utf8_lossy(&name).into_owned());
    let ck = proxima::checkpoint::load_bytes(&bytes, &file.display().to_string())?;
    check_resumed_env(dir, &ck, a.env_id.as_deref())?;
    if rank == 0 {
        rundirs::warn_if_config_edited(dir, &ck, &resume_flags(a.total_timesteps.is_some(), a.backend.is_some()));
    }
    let backend = a.backend.as_deref().map(parse_backend).transpose()?;
    let trainer = train::Trainer::resume_distributed(&ck, a.total_timesteps, backend, mpi)?;
    if rank == 0 {
        return ready_to_resume(dir, &file, trainer, a.total_timesteps);
    }
    set_threads(trainer.cfg.num_threads);
    Ok(Some(trainer))
}

/// `line` on stderr in one write, so that the ranks' lines do not interleave.
#[cfg(feature = "mpi")]
fn one_line(line: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
}

/// One line on the time this rank spent communicating.
#[cfg(feature = "mpi")]
fn comm_summary(mpi: &distributed::Mpi, rank: usize, wall: f64) -> String {
    use proxima::dist::Collective;
    let c = mpi.comm_time();
    let per_call = |(n, s): (u64, f64)| s / n.max(1) as f64 * 1e6;
    format!(
        "MPI rank {rank} of {}: {wall:.2} s; gradient all-reduces {} × {:.1} µs = {:.2} s, statistics all-reduces {} × {:.1} µs = {:.2} s ({:.1}% of the wall time communicating)",
        mpi.size(),
        c.grads.0,
        per_call(c.grads),
        c.grads.1,
        c.stats.0,
        per_call(c.stats),
        c.stats.1,
        100.0 * (c.grads.1 + c.stats.1) / wall.max(1e-9)
    )
}

/// Without the `mpi` feature a launch by mpirun/srun is refused, naming the feature.
#[cfg(not(feature = "mpi"))]
fn train_distributed(_: &TrainArgs, var: &str, value: usize) -> Result<()> {
    bail!(
        "proxima was started by an MPI launcher ({var}={value} is set) but built without MPI: rebuild with `cargo build --release -p proxima-cli --features mpi` (needs libopenmpi-dev, openmpi-bin and libclang-dev), or run it without mpirun"
    )
}

/// Trains `trainer` into `run_dir` with a progress bar and Ctrl-C handling, then reports;
/// `signalled` (asked once after every update) says whether to stop there.
fn train_with_bar(a: &TrainArgs, trainer: train::Trainer, run_dir: &Path, signalled: &dyn Fn() -> bool) -> Result<()> {
    let env_id = trainer.env_id.clone();
    let total = trainer.cfg.total_timesteps;
    let (a3c, last_update) = (trainer.cfg.algo == "a3c", trainer.num_updates);
    // How to continue a stopped run: a distributed one under mpirun with the same ranks.
    let launch = trainer.dist().map_or(String::new(), |d| format!("mpirun -np {} ", d.split.size));
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
        format!("deterministic eval over {} episodes: {m:.2} ± {sd:.2}", summary.eval_returns.len())
    };
    let earlier = summary.time_elapsed - summary.train_seconds;
    let all = if earlier > 0.05 {
        format!(" ({:.1} s with the earlier processes)", summary.time_elapsed)
    } else {
        String::new()
    };
    println!(
        "trained {env_id} for {} steps in {:.1} s{all} ({:.0} SPS; rollout {:.1} s, update {:.1} s); {eval}",
        summary.global_step, summary.train_seconds, summary.sps, summary.collect_seconds, summary.update_seconds,
    );
    println!("run directory: {}", summary.run_dir.display());
    Ok(())
}

/// Says where a run stopped on a signal and how to continue it (`launch`: what goes before
/// `proxima`, e.g. `mpirun -np 2 `); the error `main` exits with.
fn stopped_run(s: &train::Stopped, a3c: bool, launch: &str) -> signals::Interrupted {
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

/// The trainer `--resume DIR` continues, or `None` when there is nothing to train: a complete
/// run whose lost `model.safetensors` was just rewritten from its last checkpoint.
fn resumed_trainer(
    dir: &Path,
    env_id: Option<&str>,
    total_timesteps: Option<u64>,
    backend: Option<&str>,
) -> Result<Option<train::Trainer>> {
    let file = match latest_checkpoint(dir) {
        Ok(file) => file,
        Err(_) if dir.join("config.toml").is_file() && no_checkpoint_files(dir) => {
            return restarted_trainer(dir, env_id, total_timesteps, backend).map(Some);
        }
        Err(e) => return Err(e),
    };
    let ck = proxima::checkpoint::load(&file)?;
    check_resumed_env(dir, &ck, env_id)?;
    rundirs::warn_if_config_edited(dir, &ck, &resume_flags(total_timesteps.is_some(), backend.is_some()));
    let trainer = train::Trainer::resume_on(&ck, total_timesteps, backend.map(parse_backend).transpose()?)?;
    ready_to_resume(dir, &file, trainer, total_timesteps)
}

/// The config keys that `--resume`'s flags given (`--total-timesteps`, `--backend`) set.
fn resume_flags(total_timesteps: bool, backend: bool) -> Vec<&'static str> {
    [(total_timesteps, "total_timesteps"), (backend, "backend")].into_iter().filter(|f| f.0).map(|f| f.1).collect()
}

/// Refuses `--resume DIR ENV_ID` when DIR's run trained on another env.
fn check_resumed_env(dir: &Path, ck: &proxima::checkpoint::Checkpoint, env_id: Option<&str>) -> Result<()> {
    match env_id {
        Some(e) if e != ck.meta.env_id => bail!("{} was trained on {}, not {e}", dir.display(), ck.meta.env_id),
        _ => Ok(()),
    }
}

/// What `--resume` does with `trainer`, restored from `file` of run directory `dir`: training
/// left → the trainer (and a line saying where it resumes); all steps taken → finish the run
/// when it stopped before its evaluation, write a missing `model.safetensors` (then `None`), or
/// refuse.
fn ready_to_resume(
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
fn no_checkpoint_files(dir: &Path) -> bool {
    let ckpts = std::fs::read_dir(dir.join("checkpoints")).map(|d| d.count()).unwrap_or(0);
    !dir.join("model.safetensors").exists() && ckpts == 0
}

/// `--resume` of a run stopped before its first checkpoint: the run again from the start, from
/// its `config.toml` (same seed, so it ends exactly where the uninterrupted run ends).
fn restarted_trainer(
    dir: &Path,
    env_id: Option<&str>,
    total_timesteps: Option<u64>,
    backend: Option<&str>,
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
    let mut sets: Vec<String> = total_timesteps.map(|t| format!("total_timesteps={t}")).into_iter().collect();
    sets.extend(backend.map(|b| format!("backend={b}")));
    let cfg = Config::resolve(preset, Some(&text), &sets).with_context(|| format!("{}", path.display()))?;
    set_threads(cfg.num_threads);
    let trainer = train::Trainer::new(&saved_env, cfg)?;
    eprintln!(
        "{} holds no checkpoint yet: restarting the run from its config.toml (same seed: it ends where the uninterrupted run ends)",
        dir.display()
    );
    Ok(trainer)
}

/// A fresh trainer from the command line's env id, preset, config file and overrides, and its
/// run directory (claimed only once everything that can fail on bad input has been built).
fn new_trainer(a: &TrainArgs) -> Result<(train::Trainer, PathBuf)> {
    let (env_id, cfg) = train_config(a)?;
    let (seed, label) = (cfg.seed, cfg.algo.clone());
    // Build everything that can fail on bad input before touching the file system.
    let trainer = train::Trainer::new(env_id, cfg)?;
    check_env_keys(a, &trainer)?;
    let dir = claim_run_dir(a.run_dir.clone(), &format!("{}__{label}__{seed}", safe_id(env_id)))?;
    Ok((trainer, dir))
}

/// `gym:ALE/Pong-v5` → `gym-ALE-Pong-v5`: no `/` or `:` in directory names.
fn safe_id(env_id: &str) -> String {
    env_id.chars().map(|c| if c.is_ascii_alphanumeric() || "-._".contains(c) { c } else { '-' }).collect()
}

/// The env id and the resolved config of a new run: preset (or --algo's), --config, --set,
/// then the explicit flags.
fn train_config(a: &TrainArgs) -> Result<(&str, Config)> {
    train_config_over(a, 1)
}

/// [`train_config`] for a distributed run of `ranks` processes (`batch_size` checked against
/// the whole rollout: [`Config::validate_over`]).
fn train_config_over(a: &TrainArgs, ranks: usize) -> Result<(&str, Config)> {
    let env_id = a.env_id.as_deref().expect("clap requires ENV_ID without --resume");
    let file = match &a.config {
        Some(p) => {
            Some(std::fs::read_to_string(p).with_context(|| format!("cannot read config file {}", p.display()))?)
        }
        None => None,
    };
    let default_preset = match a.algo.as_deref() {
        None | Some("ppo") => "cleanrl",
        Some(x) if proxima::config::ALGOS.contains(&x) => x,
        Some(x) => bail!("unknown --algo `{x}`; algorithms: {}", proxima::config::ALGOS.join(", ")),
    };
    let mut sets = a.sets.clone();
    if let Some(x) = &a.algo {
        sets.insert(0, format!("algo={x}"));
    }
    if let Some(b) = &a.backend {
        sets.push(format!("backend={b}"));
    }
    if let Some(w) = a.workers {
        sets.push(format!("n_workers={w}"));
    }
    let preset = a.preset.as_deref().unwrap_or(default_preset);
    if let (Some(algo), Ok(p)) = (a.algo.as_deref(), Config::preset(preset)) {
        let off = |x: &str| matches!(x, "sac" | "td3" | "ddpg");
        if off(algo) != p.is_off_policy() {
            bail!(
                "--preset {preset} holds {}'s hyperparameters, which do not fit --algo {algo} ({} algorithm): leave --preset out (it defaults to --algo's own) or pick one of the same kind",
                p.algo.to_uppercase(),
                if off(algo) { "an off-policy" } else { "an on-policy" }
            );
        }
    }
    let mut cfg = Config::resolve_over(preset, file.as_deref(), &sets, ranks)?;
    // A config file's keys count where they differ from the preset the resolved config names (a
    // run's own config.toml names its own preset, e.g. a2c).
    let chosen = Config::chosen_keys(&cfg.preset, file.as_deref(), &sets);
    cfg.check_keys_used(&chosen).map_err(|e| flag_names(e, a.workers.is_some()))?;
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if let Some(t) = a.total_timesteps {
        cfg.total_timesteps = t;
    }
    cfg.validate_over(ranks)?;
    set_threads(cfg.num_threads);
    Ok((env_id, cfg))
}

/// An ignored-key error in the words of the command line: `n_workers` set by `--workers`.
fn flag_names(e: proxima::ProximaError, workers_flag: bool) -> anyhow::Error {
    let text = e.to_string();
    match workers_flag {
        true => anyhow::anyhow!("{}", text.replacen("`n_workers` (", "`--workers` / `n_workers` (", 1)),
        false => e.into(),
    }
}

/// `log_std_init` on an env whose actions are not continuous: the Gaussian it sets does not
/// exist there (the one ignored key that depends on the env, so it is checked once the env is
/// made).
fn check_env_keys(a: &TrainArgs, trainer: &train::Trainer) -> Result<()> {
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

/// Seeds trained at once: `--jobs`, else one per core — but one at a time for a bridged env,
/// whose runs share one embedded Python and its GIL (2 seeds of `gym:HalfCheetah-v5` took 8.3 s
/// side by side against 4.7 s one after the other, on 2 cores).
fn seed_jobs(jobs: Option<usize>, env_id: &str) -> usize {
    match jobs {
        Some(j) => j,
        None if proxima::env::needs_bridge(env_id) => 1,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// `proxima train ENV --seeds …`: one run per seed on the experiment pool, into one parent
/// directory; or `--resume PARENT` of such a run.
fn train_seeds(a: &TrainArgs, resume: Option<&Path>) -> Result<()> {
    use experiments::seeds;
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let backend = a.backend.as_deref().map(parse_backend).transpose()?;
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
        None => {
            let list = seeds::parse_seeds(a.seeds.as_deref().unwrap_or_default())?;
            let (env_id, cfg) = train_config(a)?;
            // Bad input fails before the file system is touched: build the first seed's trainer.
            let first = train::Trainer::new(env_id, Config { seed: list[0], ..cfg.clone() })?;
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
            let list_name: String =
                a.seeds.as_deref().unwrap_or_default().chars().filter(|c| !c.is_whitespace()).collect();
            let base = format!("{}__{}__seeds{}", safe_id(env_id), cfg.algo, safe_id(&list_name.replace(',', "_")));
            let parent = claim_run_dir(a.run_dir.clone(), &base)?;
            seeds::create(&parent, &seeds::Manifest { env_id: env_id.to_string(), seeds: list, config: cfg })?;
            parent
        }
    };
    let m = seeds::read_manifest(&parent)?;
    set_threads(m.config.num_threads);
    let jobs = seed_jobs(a.jobs, &m.env_id);
    if a.jobs.is_none() && jobs == 1 && proxima::env::needs_bridge(&m.env_id) && m.seeds.len() > 1 {
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
    let quiet = a.quiet;
    signals::training_started();
    let (m, runs) = seeds::run(&parent, jobs, backend, |r, done, total| {
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
    let (title, curves) = seeds::curves(&m, &runs);
    plot::seed_curves(&title, &curves, m.config.total_timesteps as f64, &parent.join("learning_curves.png"))?;
    if let Some(e) = seeds::failures(&parent, &runs) {
        return Err(e);
    }
    let finals: Vec<f64> = runs.iter().filter_map(|r| r.final_return).collect();
    let (mean, std, iqm, min) = seeds::aggregate(&finals);
    let score = if finals.is_empty() {
        "no evaluation (eval_episodes = 0)".to_string()
    } else {
        format!("final deterministic return {mean:.2} ± {std:.2} (IQM {iqm:.2}, min {min:.2})")
    };
    // On --resume a seed's own time (its line above) also counts the processes before this one.
    let this_run = if resume.is_some() { " (this process; the seeds' times count earlier ones too)" } else { "" };
    println!(
        "trained {n} seed{} of {} in {:.1} s{this_run}; {score}",
        if n == 1 { "" } else { "s" },
        m.env_id,
        t0.elapsed().as_secs_f64()
    );
    println!("parent directory: {} (summary.md, summary.csv, learning_curves.png)", parent.display());
    Ok(())
}

/// The `--backend` flag's value (clap has checked the spelling).
fn parse_backend(s: &str) -> Result<proxima::config::Backend> {
    use proxima::config::Backend;
    Ok(match s {
        "auto" => Backend::Auto,
        "fused" => Backend::Fused,
        "candle" => Backend::Candle,
        other => bail!("unknown backend `{other}`: auto, fused or candle"),
    })
}

/// `proxima eval`: episodes of a checkpoint's policy, optionally recorded.
fn eval(a: EvalArgs) -> Result<()> {
    let EvalArgs { path, episodes, deterministic, json, env, seed, render, render_episodes, fps, backend } = a;
    set_threads(1);
    if episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let file = resolve_checkpoint(&path)?;
    let ck = proxima::checkpoint::load(&file)?;
    let off_policy = ck.off_policy_nets();
    if off_policy.is_some() && backend == "fused" {
        bail!("--backend fused does not cover this checkpoint's off-policy networks (SAC/TD3/DDPG run on candle): leave --backend out");
    }
    // A deterministic actor (TD3, DDPG) acts the same either way.
    let deterministic =
        deterministic || off_policy.is_some_and(|(k, _)| k == proxima::policy::ActorKind::Deterministic);
    let policy = ck.build_network(parse_backend(&backend)?)?;
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
    let returns =
        train::evaluate_recorded(&policy, &env_id, episodes, deterministic, seed, norm.as_ref(), recording.as_ref())?;
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
            "{env_id}: mean return {m:.2} ± {sd:.2} over {episodes} episodes ({}) from {}",
            if deterministic { "deterministic" } else { "sampled" },
            file.display()
        );
    }
    if let Some(r) = &recording {
        eprintln!("recorded {} episode(s) to {}", r.episodes, r.path.display());
    }
    Ok(())
}

/// `proxima ablation`: the paper's comparison of objectives over envs × seeds.
fn ablation(a: AblationArgs) -> Result<()> {
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
    let continuing = claim_ablation_dir(&out, &experiments::ablation::manifest(&spec))?;
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

/// The ablation's output folder: a new or empty one (its manifest written; `false`), or the
/// folder of the same ablation, which continues (`true`). Another ablation's folder, or one
/// holding other files, is refused.
fn claim_ablation_dir(out: &Path, manifest: &str) -> Result<bool> {
    let path = out.join(experiments::ablation::MANIFEST);
    if path.is_file() {
        let saved = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if saved != manifest {
            bail!(
                "{} holds another ablation (its {} differs from this command's envs, variants, seeds, preset, --set or --total-timesteps); rerun that command to continue it, or choose a new --out directory",
                out.display(),
                experiments::ablation::MANIFEST
            );
        }
        return Ok(true);
    }
    if out.exists()
        && std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?.next().is_some()
    {
        bail!("{} exists and is not empty; choose a new --out directory", out.display());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    proxima::io::write_atomic(&path, manifest.as_bytes())?;
    Ok(false)
}

/// `proxima bench-env`: an env's own steps per second under uniformly random actions.
fn bench_env(a: BenchEnvArgs) -> Result<()> {
    use rand::SeedableRng;
    let BenchEnvArgs { env_id, steps, seed } = a;
    let mut env = proxima::env::make(&env_id)?;
    let space = env.action_space();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let t0 = std::time::Instant::now();
    env.reset(Some(seed))?;
    let (mut episodes, mut a) = (0u64, vec![0f32; space.flat_dim()]);
    for _ in 0..steps {
        let action = space.sample(&mut rng, &mut a);
        let r = env.step(action)?;
        if r.terminated || r.truncated {
            env.reset(None)?;
            episodes += 1;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    println!("{env_id}: {steps} random steps ({episodes} episodes) in {dt:.2} s: {:.0} steps/s", steps as f64 / dt);
    Ok(())
}
