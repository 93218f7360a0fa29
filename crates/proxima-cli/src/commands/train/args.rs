//! `proxima train`'s flags.

use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct TrainArgs {
    /// Environment id, e.g. CartPole-v1 (see `proxima envs`), gym:ID for a Python Gymnasium env or
    /// atari:GAME for an Atari game in SB3's wrappers, e.g. atari:Breakout (both built with
    /// --features gym); not needed with --resume.
    #[arg(required_unless_present = "resume")]
    pub(super) env_id: Option<String>,
    /// Continue the run in RUN_DIR from its latest checkpoint (exactly: same weights as an
    /// uninterrupted run on a native env; bridged `gym:`/`atari:` envs restart their episodes),
    /// or every unfinished seed of a multi-seed parent directory. Only --total-timesteps (single
    /// runs), --backend, --vector-env, --jobs (multi-seed) and --quiet may accompany it.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["preset", "config", "sets", "seed", "run_dir", "algo", "workers"])]
    pub(super) resume: Option<PathBuf>,
    /// Algorithm: ppo, a2c, a3c, trpo, reinforce, ppg, sac, td3, ddpg or tqc. Without --preset it also
    /// picks that algorithm's preset (ppo: cleanrl; a2c: a2c = SB3's A2C; a3c: a3c; trpo: trpo =
    /// sb3-contrib's TRPO; reinforce: reinforce, with a baseline unless --set baseline=false;
    /// ppg: CleanRL's ppg_procgen.py values; sac, td3, ddpg: SB3's SAC, TD3, DDPG; tqc: sb3-contrib's TQC).
    #[arg(long)]
    pub(super) algo: Option<String>,
    /// A3C: number of asynchronous worker threads (n_workers).
    #[arg(long)]
    pub(super) workers: Option<usize>,
    /// Hyperparameter preset: cleanrl (default), sb3, paper-mujoco, paper-atari, cleanrl-atari, a2c,
    /// a3c, trpo, reinforce, ppg, sac, td3, ddpg, tqc.
    #[arg(long)]
    pub(super) preset: Option<String>,
    /// A TOML file of hyperparameters overriding the preset (SB3 names, e.g. `n_steps = 256`).
    #[arg(long)]
    pub(super) config: Option<PathBuf>,
    /// Override one hyperparameter, `key=value` (repeatable; `key=none` clears an optional one).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(super) sets: Vec<String>,
    /// Random seed (network init, sampling, env resets).
    #[arg(long)]
    pub(super) seed: Option<u64>,
    /// Environment steps to train for.
    #[arg(long)]
    pub(super) total_timesteps: Option<u64>,
    /// Run directory (default: runs/<env>__<algo>__<seed>__<unix time>).
    #[arg(long)]
    pub(super) run_dir: Option<PathBuf>,
    /// Train one run per seed, in parallel: `1-16`, `1,4,9` or a mix; into one parent directory
    /// (--run-dir, default runs/<env>__<algo>__seeds<…>__<time>) with a run directory per seed,
    /// summary.md, summary.csv and learning_curves.png. Continue it with --resume PARENT.
    #[arg(long, value_name = "SEEDS", conflicts_with_all = ["seed", "resume"])]
    pub(super) seeds: Option<String>,
    /// With --seeds (or --resume of a multi-seed run): runs at a time (default: one per core; one
    /// for `gym:`/`atari:` envs, which share one embedded Python).
    #[arg(long)]
    pub(super) jobs: Option<usize>,
    /// The policy network's implementation: auto (default: the fused CPU kernels for PPO, A2C,
    /// A3C, REINFORCE, SAC, TD3, DDPG and TQC, the Nature CNN included; recurrent policies as
    /// candle networks with their LSTM/GRU layers on the kernels; candle for TRPO, PPG and image
    /// keys in a Dict), fused or candle. With --resume it moves the run to that backend.
    #[arg(long, value_parser = ["auto", "fused", "candle"])]
    pub(super) backend: Option<String>,
    /// How bridged (`gym:`, `atari:`) envs are stepped (the config's vector_env): off, sync, async
    /// or subproc (worker processes beside the learner; what `atari:` runs take by default). The
    /// results are the same in every mode. With --resume it moves the run to that mode.
    #[arg(long, value_parser = ["off", "sync", "async", "subproc"])]
    pub(super) vector_env: Option<String>,
    /// No progress bar; print one summary line at the end.
    #[arg(long, short)]
    pub(super) quiet: bool,
    /// Not an option: PyTorch users reach for it, and are told that Proxima trains on the CPU.
    #[arg(long, hide = true, value_name = "DEVICE")]
    pub(super) device: Option<String>,
}
