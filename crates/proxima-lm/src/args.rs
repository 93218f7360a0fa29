//! The settings of `proxima lm sft|rm|grpo|ppo|dpo`, their defaults (from the tuning runs in the
//! README) and their checks. Each struct is also the command's `clap` arguments (`#[derive(Args)]`,
//! one flag per field) and what `config.json` records.

use crate::grpo::Aggregation;
use crate::grpo_step::GrpoConfig;
use crate::ppo::PpoLmConfig;
use crate::reward::Labeller;
use crate::weights::Weights;
use proxima::{ProximaError, Result};
use std::path::PathBuf;

/// The largest number of sequences any command puts in one batch: a bound so that a typo cannot
/// become an out-of-memory abort (a 65,536 × 10-token batch of this model needs ~2 GB).
pub const MAX_BATCH: usize = 65_536;

fn check_batch(batch_size: usize) -> Result<()> {
    check(batch_size >= 1, "batch_size must be at least 1")?;
    check(batch_size <= MAX_BATCH, &format!("batch_size must be at most {MAX_BATCH}"))
}

fn check(cond: bool, what: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(ProximaError::Config(what.to_string()))
    }
}

/// `proxima lm sft`: supervised pre-training (the π_ref).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct SftArgs {
    /// Optimiser steps.
    #[arg(long, default_value_t = SftArgs::default().steps)]
    pub steps: usize,
    /// Problems per step.
    #[arg(long, default_value_t = SftArgs::default().batch_size)]
    pub batch_size: usize,
    /// Adam step size.
    #[arg(long, allow_negative_numbers = true, default_value_t = SftArgs::default().learning_rate)]
    pub learning_rate: f64,
    /// Probability that a training answer is replaced by a wrong one.
    #[arg(long, allow_negative_numbers = true, default_value_t = SftArgs::default().label_noise)]
    pub label_noise: f64,
    /// Seed of the init and the batches.
    #[arg(long, default_value_t = SftArgs::default().seed)]
    pub seed: u64,
    /// Evaluate (and log a row) every this many steps.
    #[arg(long, default_value_t = SftArgs::default().eval_every)]
    pub eval_every: usize,
}

impl SftArgs {
    /// Checks every setting.
    ///
    /// # Errors
    /// `Config` naming the bad one.
    pub fn validate(&self) -> Result<()> {
        check_common(self.steps, self.learning_rate, self.eval_every, None)?;
        check_batch(self.batch_size)?;
        check((0.0..=1.0).contains(&self.label_noise), "label_noise must be in [0, 1]")
    }
}

impl Default for SftArgs {
    /// Stopped early on purpose: 160 steps of batch 128 at 1e-3 leave the policy partly right
    /// (48.9% held-out greedy accuracy with seed 1).
    fn default() -> Self {
        SftArgs { steps: 160, batch_size: 128, learning_rate: 1e-3, label_noise: 0.0, seed: 1, eval_every: 10 }
    }
}

/// `proxima lm rm`: a Bradley–Terry reward model on scripted preference pairs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct RmArgs {
    /// The SFT run (or weights file) whose samples are compared.
    #[arg(long)]
    pub sft: PathBuf,
    /// The SFT run whose weights initialise the reward model (default: --sft's).
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// The scripted labeller.
    #[arg(long, value_enum, default_value_t = RmArgs::default().labeller)]
    pub labeller: Labeller,
    /// Optimiser steps.
    #[arg(long, default_value_t = RmArgs::default().steps)]
    pub steps: usize,
    /// Pairs per step.
    #[arg(long, default_value_t = RmArgs::default().batch_size)]
    pub batch_size: usize,
    /// Adam step size at the start (decayed linearly to 0).
    #[arg(long, allow_negative_numbers = true, default_value_t = RmArgs::default().learning_rate)]
    pub learning_rate: f64,
    /// Policy samples per prompt among the candidates.
    #[arg(skip = RmArgs::default().samples_per_prompt)]
    pub samples_per_prompt: usize,
    /// Pairs drawn per prompt.
    #[arg(skip = RmArgs::default().pairs_per_prompt)]
    pub pairs_per_prompt: usize,
    /// Seed.
    #[arg(long, default_value_t = RmArgs::default().seed)]
    pub seed: u64,
    /// Evaluate every this many steps.
    #[arg(long, default_value_t = RmArgs::default().eval_every)]
    pub eval_every: usize,
}

impl RmArgs {
    /// Checks every setting and that `sft` holds an SFT policy (read into `weights`).
    ///
    /// # Errors
    /// `Config` naming the bad setting; `Io`/`Checkpoint` for the SFT weights.
    pub fn validate(&self, weights: &mut Weights) -> Result<()> {
        check_common(self.steps, self.learning_rate, self.eval_every, None)?;
        check_batch(self.batch_size)?;
        check(
            (1..=64).contains(&self.pairs_per_prompt) && (1..=64).contains(&self.samples_per_prompt),
            "pairs_per_prompt and samples_per_prompt must be in 1..=64",
        )?;
        if let Some(init) = &self.init {
            weights.model(init, &["sft"])?;
        }
        weights.model(&self.sft, &["sft"]).map(|_| ())
    }
}

impl Default for RmArgs {
    fn default() -> Self {
        RmArgs {
            sft: PathBuf::new(),
            init: None,
            labeller: Labeller::Graded,
            steps: 2000,
            batch_size: 64,
            learning_rate: 3e-4,
            samples_per_prompt: 2,
            pairs_per_prompt: 2,
            seed: 1,
            eval_every: 100,
        }
    }
}

/// `proxima lm grpo`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct GrpoArgs {
    /// The SFT run: the starting policy and the frozen π_ref.
    #[arg(long)]
    pub sft: PathBuf,
    /// GRPO steps (each samples a fresh batch).
    #[arg(long, default_value_t = GrpoArgs::default().steps)]
    pub steps: usize,
    /// Adam step size.
    #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().learning_rate)]
    pub learning_rate: f64,
    /// Prompts per step.
    #[arg(long, default_value_t = GrpoArgs::default().prompts)]
    pub prompts: usize,
    /// G, samples per prompt.
    #[arg(long, default_value_t = GrpoArgs::default().group_size)]
    pub group_size: usize,
    /// β of the k3 KL penalty.
    #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().beta)]
    pub beta: f64,
    /// Lower clip ε_low.
    #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().eps_low)]
    pub eps_low: f64,
    /// Upper clip ε_high (> ε_low: DAPO's clip-higher).
    #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().eps_high)]
    pub eps_high: f64,
    /// μ, optimiser passes per batch.
    #[arg(long, default_value_t = GrpoArgs::default().inner_iters)]
    pub inner_iters: usize,
    /// Divide the group-centred rewards by the group's std (GRPO); off (--no-scale-advantages):
    /// Dr. GRPO's mean-centring only.
    #[arg(long = "no-scale-advantages", action = clap::ArgAction::SetFalse)]
    pub scale_advantages: bool,
    /// `seq-mean-token-mean` (GRPO), `token-mean` (DAPO) or `constant-length` (Dr. GRPO,
    /// length = the longest response, 4).
    #[arg(long, default_value_t = GrpoArgs::default().aggregation)]
    pub aggregation: String,
    /// Skip groups whose rewards are all equal.
    #[arg(long)]
    pub drop_flat_groups: bool,
    /// Control: shuffle rewards across all samples of a step.
    #[arg(long)]
    pub shuffle_rewards: bool,
    /// Sequences per forward/backward pass (gradient accumulation; default: the whole batch).
    #[arg(long)]
    pub micro_batch: Option<usize>,
    /// Seed.
    #[arg(long, default_value_t = GrpoArgs::default().seed)]
    pub seed: u64,
    /// Evaluate every this many steps.
    #[arg(long, default_value_t = GrpoArgs::default().eval_every)]
    pub eval_every: usize,
}

impl GrpoArgs {
    /// Checks every setting and that `sft` holds an SFT policy (read into `weights`).
    ///
    /// # Errors
    /// `Config` naming the bad setting; `Io`/`Checkpoint` for the SFT weights.
    pub fn validate(&self, weights: &mut Weights) -> Result<()> {
        check_common(self.steps, self.learning_rate, self.eval_every, self.micro_batch)?;
        check(self.group_size >= 2, "group_size must be at least 2")?;
        check(self.prompts >= 1, "prompts must be at least 1")?;
        check(
            self.prompts.saturating_mul(self.group_size) <= MAX_BATCH,
            &format!("prompts × group_size must be at most {MAX_BATCH}"),
        )?;
        check((1..=100).contains(&self.inner_iters), "inner_iters must be in 1..=100")?;
        check(self.beta >= 0.0 && self.beta.is_finite(), "beta must be a finite number ≥ 0")?;
        check(self.eps_low > 0.0 && self.eps_low < 1.0, "eps_low must be in (0, 1)")?;
        check(self.eps_high > 0.0 && self.eps_high.is_finite(), "eps_high must be a finite number > 0")?;
        parse_aggregation(&self.aggregation)?;
        weights.model(&self.sft, &["sft"]).map(|_| ())
    }
}

impl Default for GrpoArgs {
    fn default() -> Self {
        let g = GrpoConfig::default();
        GrpoArgs {
            sft: PathBuf::new(),
            steps: 300,
            learning_rate: 2e-4,
            prompts: g.prompts,
            group_size: g.group_size,
            beta: g.beta,
            eps_low: g.eps_low,
            eps_high: g.eps_high,
            inner_iters: g.inner_iters,
            scale_advantages: g.scale_advantages,
            aggregation: "seq-mean-token-mean".into(),
            drop_flat_groups: g.drop_flat_groups,
            shuffle_rewards: false,
            micro_batch: None,
            seed: 1,
            eval_every: 10,
        }
    }
}

/// Parses an aggregation name.
///
/// # Errors
/// `Config` naming the valid ones.
pub fn parse_aggregation(s: &str) -> Result<Aggregation> {
    match s {
        "seq-mean-token-mean" => Ok(Aggregation::SeqMeanTokenMean),
        "token-mean" => Ok(Aggregation::TokenMean),
        "constant-length" => Ok(Aggregation::ConstantLength(crate::task::MAX_ANSWER_LEN)),
        _ => Err(ProximaError::Config(format!(
            "unknown aggregation `{s}`; one of seq-mean-token-mean, token-mean, constant-length"
        ))),
    }
}

/// The settings every `proxima lm` command has.
fn check_common(steps: usize, lr: f64, eval_every: usize, micro: Option<usize>) -> Result<()> {
    check(steps > 0 && eval_every > 0, "steps and eval_every must be at least 1")?;
    check(lr > 0.0 && lr.is_finite(), "learning_rate must be a positive number")?;
    check(micro != Some(0), "micro_batch must be ≥ 1")
}

/// `proxima lm ppo`: RLHF-PPO against a reward model.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct PpoArgs {
    /// The SFT run: the starting policy and π_ref.
    #[arg(long)]
    pub sft: PathBuf,
    /// The reward-model run: the reward and the critic's initialisation (required unless
    /// --verifiable-reward).
    #[arg(long, required_unless_present = "verifiable_reward")]
    pub rm: Option<PathBuf>,
    /// PPO steps (each samples --prompts responses).
    #[arg(long, default_value_t = PpoArgs::default().steps)]
    pub steps: usize,
    /// Adam step size of the policy.
    #[arg(long, allow_negative_numbers = true, default_value_t = PpoArgs::default().learning_rate)]
    pub learning_rate: f64,
    /// Adam step size of the critic.
    #[arg(long, allow_negative_numbers = true, default_value_t = PpoArgs::default().critic_learning_rate)]
    pub critic_learning_rate: f64,
    /// The PPO settings.
    #[command(flatten)]
    pub ppo: PpoLmConfig,
    /// Initial β of the per-token KL penalty.
    #[arg(long, allow_negative_numbers = true, default_value_t = PpoArgs::default().kl_coef)]
    pub kl_coef: f64,
    /// Target KL per response: adapt β with Ziegler et al.'s controller (default: β fixed).
    #[arg(long, allow_negative_numbers = true)]
    pub kl_target: Option<f64>,
    /// Horizon of the adaptive controller (responses).
    #[arg(skip = PpoArgs::default().kl_horizon)]
    pub kl_horizon: f64,
    /// Critic warm-up: the first this many steps update only the critic (OpenRLHF's
    /// `freezing_actor_steps`), so the policy is not pushed by a critic that has not yet
    /// learnt this policy's values.
    #[arg(long, default_value_t = PpoArgs::default().freezing_actor_steps)]
    pub freezing_actor_steps: usize,
    /// Seed.
    #[arg(long, default_value_t = PpoArgs::default().seed)]
    pub seed: u64,
    /// Evaluate every this many steps.
    #[arg(long, default_value_t = PpoArgs::default().eval_every)]
    pub eval_every: usize,
    /// Control: optimise the task's exact-match reward instead of a reward model (the critic
    /// then starts from the SFT weights).
    #[arg(long, conflicts_with = "rm")]
    #[serde(skip)]
    pub verifiable_reward: bool,
    /// Clip of the value change around V_old: a number, or `none` for an unclipped value loss
    /// [default: 0.2]
    //
    // The command line's form of `ppo.clip_range_vf`, which `with_cli_flags` sets from it.
    #[arg(long = "clip-range-vf", value_name = "CLIP_RANGE_VF|none", allow_negative_numbers = true)]
    #[serde(skip)]
    pub clip_range_vf_arg: Option<String>,
}

impl PpoArgs {
    /// Applies the command line's `--clip-range-vf` (`clip_range_vf_arg`: a number or `none`)
    /// to `ppo.clip_range_vf`.
    ///
    /// # Errors
    /// `Config` for a value that is neither.
    pub fn with_cli_flags(mut self) -> Result<Self> {
        if let Some(s) = self.clip_range_vf_arg.take() {
            self.ppo.clip_range_vf =
                match s.as_str() {
                    "none" => None,
                    _ => Some(s.parse::<f64>().map_err(|_| {
                        ProximaError::Config(format!("--clip-range-vf `{s}` is not a number or `none`"))
                    })?),
                };
        }
        Ok(self)
    }

    /// Checks every setting and the kinds of the `sft` and `rm` weights (read into `weights`).
    ///
    /// # Errors
    /// `Config` naming the bad setting; `Io`/`Checkpoint` for the weights.
    pub fn validate(&self, weights: &mut Weights) -> Result<()> {
        check_common(self.steps, self.learning_rate, self.eval_every, self.ppo.micro_batch)?;
        check(
            self.critic_learning_rate > 0.0 && self.critic_learning_rate.is_finite(),
            "critic_learning_rate must be a positive number",
        )?;
        check((1..=MAX_BATCH).contains(&self.ppo.prompts), &format!("prompts must be in 1..={MAX_BATCH}"))?;
        check((1..=100).contains(&self.ppo.n_epochs), "n_epochs must be in 1..=100")?;
        check(self.ppo.batch_size >= 1, "batch_size must be at least 1")?;
        check(
            self.freezing_actor_steps < self.steps,
            "freezing_actor_steps must be less than steps (otherwise the policy is never updated)",
        )?;
        check(self.ppo.clip_range > 0.0 && self.ppo.clip_range < 1.0, "clip_range must be in (0, 1)")?;
        check(
            self.ppo.clip_range_vf.is_none_or(|c| c > 0.0 && c.is_finite()),
            "clip_range_vf must be a finite number > 0",
        )?;
        check(
            (0.0..=1.0).contains(&self.ppo.gamma) && (0.0..=1.0).contains(&self.ppo.gae_lambda),
            "gamma and gae_lambda must be in [0, 1]",
        )?;
        check(self.kl_coef >= 0.0 && self.kl_coef.is_finite(), "kl_coef must be a finite number ≥ 0")?;
        check(self.kl_target.is_none_or(|t| t > 0.0 && t.is_finite()), "kl_target must be a finite number > 0")?;
        check(self.kl_horizon > 0.0 && self.kl_horizon.is_finite(), "kl_horizon must be a finite number > 0")?;
        weights.model(&self.sft, &["sft"])?;
        match &self.rm {
            Some(rm) => weights.model(rm, &["rm"]).map(|_| ()),
            None => Ok(()),
        }
    }
}

impl Default for PpoArgs {
    fn default() -> Self {
        PpoArgs {
            sft: PathBuf::new(),
            rm: None,
            steps: 200,
            learning_rate: 1e-4,
            critic_learning_rate: 1e-4,
            ppo: PpoLmConfig::default(),
            kl_coef: 0.1,
            kl_target: None,
            kl_horizon: 10_000.0,
            freezing_actor_steps: 10,
            seed: 1,
            eval_every: 10,
            verifiable_reward: false,
            clip_range_vf_arg: None,
        }
    }
}

/// `proxima lm dpo`: Direct Preference Optimization (Rafailov et al. 2023) on preference pairs,
/// from the SFT policy, which is also π_ref.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct DpoArgs {
    /// The SFT run: the starting policy and π_ref.
    #[arg(long)]
    pub sft: PathBuf,
    /// A reward-model run (`lm rm`) whose preference pairs to train on: its labeller, pair seed,
    /// samples and pairs per prompt are taken (its --sft must be this --sft), so DPO and the
    /// reward model see the very same pairs. Without it the pairs are drawn as `lm rm` draws
    /// them, with --labeller and --pair-seed.
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    /// The scripted labeller of the pairs (without --pairs).
    #[arg(long, value_enum, default_value_t = DpoArgs::default().labeller, conflicts_with = "pairs")]
    pub labeller: Labeller,
    /// The seed the pairs are drawn with (`lm rm`'s --seed; without --pairs).
    #[arg(long, default_value_t = DpoArgs::default().pair_seed, conflicts_with = "pairs")]
    pub pair_seed: u64,
    /// Responses sampled per prompt as pair candidates (as `lm rm`).
    #[arg(skip = DpoArgs::default().samples_per_prompt)]
    pub samples_per_prompt: usize,
    /// Pairs kept per prompt (as `lm rm`).
    #[arg(skip = DpoArgs::default().pairs_per_prompt)]
    pub pairs_per_prompt: usize,
    /// Optimiser steps.
    #[arg(long, default_value_t = DpoArgs::default().steps)]
    pub steps: usize,
    /// Pairs per step.
    #[arg(long, default_value_t = DpoArgs::default().batch_size)]
    pub batch_size: usize,
    /// Adam step size.
    #[arg(long, allow_negative_numbers = true, default_value_t = DpoArgs::default().learning_rate)]
    pub learning_rate: f64,
    /// β: the strength of the implicit KL constraint to π_ref (the paper's default 0.1).
    #[arg(long, allow_negative_numbers = true, default_value_t = DpoArgs::default().beta)]
    pub beta: f64,
    /// Seed of the batches and of the evaluation's samples.
    #[arg(long, default_value_t = DpoArgs::default().seed)]
    pub seed: u64,
    /// Evaluate (and log a row, and checkpoint) every this many steps.
    #[arg(long, default_value_t = DpoArgs::default().eval_every)]
    pub eval_every: usize,
}

impl DpoArgs {
    /// With `--pairs`: the pair settings of that reward-model run, whose SFT run must be this
    /// one's. Without: unchanged.
    ///
    /// # Errors
    /// `Io`/`Config` for a run directory that is not a reward-model run, or one drawn from
    /// another SFT run.
    pub fn with_pairs_run(mut self) -> Result<Self> {
        let Some(dir) = &self.pairs else { return Ok(self) };
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| ProximaError::io(&path, e))?;
        let cfg: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ProximaError::Config(format!("{}: malformed ({e})", path.display())))?;
        if cfg["command"] != "rm" {
            return Err(ProximaError::Config(format!("--pairs {}: not a reward-model (`lm rm`) run", dir.display())));
        }
        let rm: RmArgs = serde_json::from_value(cfg["args"].clone())
            .map_err(|e| ProximaError::Config(format!("{}: malformed `args` ({e})", path.display())))?;
        let same =
            |a: &PathBuf, b: &PathBuf| a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(x, y)| x == y);
        if !same(&rm.sft, &self.sft) {
            return Err(ProximaError::Config(format!(
                "--pairs {}: its pairs were drawn from the SFT run {}, not --sft {}",
                dir.display(),
                rm.sft.display(),
                self.sft.display()
            )));
        }
        (self.labeller, self.pair_seed) = (rm.labeller, rm.seed);
        (self.samples_per_prompt, self.pairs_per_prompt) = (rm.samples_per_prompt, rm.pairs_per_prompt);
        Ok(self)
    }

    /// Checks every setting and the kind of the `sft` weights (read into `weights`).
    ///
    /// # Errors
    /// `Config` naming the bad setting; `Io`/`Checkpoint` for the weights.
    pub fn validate(&self, weights: &mut Weights) -> Result<()> {
        check_common(self.steps, self.learning_rate, self.eval_every, None)?;
        check_batch(self.batch_size)?;
        check(self.beta > 0.0 && self.beta.is_finite(), "beta must be a positive number")?;
        check(
            (1..=64).contains(&self.pairs_per_prompt) && (1..=64).contains(&self.samples_per_prompt),
            "pairs_per_prompt and samples_per_prompt must be in 1..=64",
        )?;
        weights.model(&self.sft, &["sft"]).map(|_| ())
    }
}

impl Default for DpoArgs {
    /// The pairs of `lm rm`'s defaults; β = 0.1 as the paper; 600 steps of 64 pairs at 3e-5
    /// (the README's tuning: at 1e-4 the policy collapses).
    fn default() -> Self {
        let rm = RmArgs::default();
        DpoArgs {
            sft: PathBuf::new(),
            pairs: None,
            labeller: rm.labeller,
            pair_seed: rm.seed,
            samples_per_prompt: rm.samples_per_prompt,
            pairs_per_prompt: rm.pairs_per_prompt,
            steps: 600,
            batch_size: 64,
            learning_rate: 3e-5,
            beta: 0.1,
            seed: 1,
            eval_every: 50,
        }
    }
}
