//! The PPO paper's comparison of surrogate objectives (Schulman et al. 2017, Sec. 6.1 and
//! Table 1), and its baselines, reproduced: a grid of variants × environments × seeds, run in
//! parallel, scored and normalised as the paper does.
//!
//! * **Score** of a run: the mean total reward of its last 100 training episodes (the paper's
//!   "average total reward of the last 100 episodes").
//! * **Normalised score** of a variant on an environment: (mean score over seeds − random) /
//!   (best − random), where *random* is a uniformly random policy's mean return over 100
//!   episodes and *best* the highest mean score any variant reached there (so the best variant
//!   gets 1 and a random policy 0, as in the paper). Where no variant beats the random policy
//!   the environment cannot be normalised and is left out of the averages (reported as such).
//!
//! Variants (`--variants`): `clip[=ε]`, `adaptive_kl[=d_targ]`, `fixed_kl[=β]`, `none` (PPO
//! objectives on the base preset), and `a2c`, `a3c`, `trpo`, `reinforce` (those algorithms with
//! their own presets) and `reinforce_no_baseline`. All runs share `total_timesteps`.

use super::pool;
use proxima::config::{AlgoName, Config};
use proxima::env::make;
use proxima::train::{self, Trainer};
use proxima::{ProximaError, Result};
use rand::SeedableRng;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One setting of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Its label in tables and plots, e.g. `clip ε=0.2`.
    pub label: String,
    /// The preset it starts from (`None` = the ablation's base preset).
    pub preset: Option<String>,
    /// `key=value` overrides.
    pub sets: Vec<String>,
}

impl Variant {
    /// Parses `clip`, `clip=0.1`, `adaptive_kl=0.003`, `fixed_kl=3`, `none`, `a2c`, `a3c`,
    /// `trpo`, `reinforce`, `reinforce_no_baseline`.
    ///
    /// # Errors
    /// `Config` for an unknown name or a parameter that is not a positive number.
    pub fn parse(text: &str) -> Result<Variant> {
        let (name, param) = match text.split_once('=') {
            Some((n, p)) => (n.trim(), Some(p.trim())),
            None => (text.trim(), None),
        };
        let value = match param {
            Some(p) => match p.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Some(v),
                _ => return Err(ProximaError::Config(format!("variant `{text}`: `{p}` is not a positive number"))),
            },
            None => None,
        };
        let v = |label: String, sets: Vec<String>| Variant { label, preset: None, sets };
        Ok(match (name, value) {
            ("clip", None) => v("clip".into(), vec!["objective=clip".into()]),
            ("clip", Some(e)) => v(format!("clip ε={e}"), vec!["objective=clip".into(), format!("clip_range={e}")]),
            ("adaptive_kl", None) => v("adaptive KL".into(), vec!["objective=adaptive_kl".into()]),
            ("adaptive_kl", Some(d)) => v(format!("adaptive KL d_targ={d}"), vec!["objective=adaptive_kl".into(), format!("kl_target={d}")]),
            ("fixed_kl", None) => v("fixed KL".into(), vec!["objective=fixed_kl".into()]),
            ("fixed_kl", Some(b)) => v(format!("fixed KL β={b}"), vec!["objective=fixed_kl".into(), format!("kl_coef={b}")]),
            ("none", None) => v("no clipping or penalty".into(), vec!["objective=none".into()]),
            ("a2c" | "a3c" | "trpo" | "reinforce", None) => Variant { label: name.to_uppercase(), preset: Some(name.into()), sets: vec![] },
            ("reinforce_no_baseline", None) => Variant {
                label: "REINFORCE without baseline".into(),
                preset: Some("reinforce".into()),
                sets: vec!["baseline=false".into()],
            },
            _ => {
                return Err(ProximaError::Config(format!(
                    "unknown variant `{text}`; variants: clip[=ε], adaptive_kl[=d_targ], fixed_kl[=β], none, a2c, a3c, trpo, reinforce, reinforce_no_baseline"
                )))
            }
        })
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct AblationSpec {
    /// Environment ids.
    pub envs: Vec<String>,
    /// Settings compared.
    pub variants: Vec<Variant>,
    /// Seeds of each (variant, env).
    pub seeds: Vec<u64>,
    /// Preset the PPO objective variants start from (the paper's continuous-control settings:
    /// `paper-mujoco`).
    pub base_preset: String,
    /// Extra `key=value` overrides applied to every run.
    pub sets: Vec<String>,
    /// Steps per run.
    pub total_timesteps: u64,
    /// Runs in parallel (one thread each).
    pub jobs: usize,
    /// Output directory: `runs/<env>__<variant>__<seed>/` plus the tables.
    pub out: PathBuf,
}

/// One finished run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// Index into the spec's variants.
    pub variant: usize,
    /// The environment id.
    pub env: String,
    /// The seed.
    pub seed: u64,
    /// Mean return of the last 100 training episodes.
    pub score: f64,
    /// (global_step, mean return of the last 100 episodes) after each update.
    pub curve: Vec<(u64, f64)>,
    /// Wall time of the run, seconds.
    pub seconds: f64,
}

/// The whole comparison's results.
#[derive(Clone, Debug)]
pub struct AblationResults {
    /// The spec that produced them.
    pub spec: AblationSpec,
    /// Every run.
    pub runs: Vec<RunResult>,
    /// A random policy's mean return per env (same order as `spec.envs`).
    pub random: Vec<f64>,
}

/// Updates between the checkpoints of an ablation's runs, at least.
pub const CHECKPOINT_FREQ: usize = 10;

/// Env steps between the checkpoints of an ablation's runs, at least, in runs long enough for
/// four such stretches (A2C's 5-step updates would otherwise write 10,000 checkpoints in a
/// 500k-step run).
pub const CHECKPOINT_STEPS: u64 = 10_000;

/// Builds the config of one run.
///
/// # Errors
/// `Config` for a bad combination.
pub fn run_config(spec: &AblationSpec, v: &Variant, seed: u64) -> Result<Config> {
    // The ablation-wide overrides first, the variant's own settings last: a `--set` can never
    // silently change what a variant's label says it is.
    let mut sets = spec.sets.clone();
    sets.extend(v.sets.iter().cloned());
    sets.push(format!("seed={seed}"));
    sets.push(format!("total_timesteps={}", spec.total_timesteps));
    sets.push("eval_episodes=0".into());
    let mut cfg = Config::resolve(v.preset.as_deref().unwrap_or(&spec.base_preset), None, &sets)?.into_config();
    // Checkpoints let an interrupted grid continue each run where it stopped: every 10 updates
    // or more — 10k env steps apart where the run has 4 such stretches, else a quarter of its
    // updates apart.
    let per_update = ((cfg.n_steps * cfg.n_envs) as u64).max(1);
    let quarter = cfg.total_timesteps.div_ceil(per_update).div_ceil(4);
    cfg.checkpoint_freq = CHECKPOINT_FREQ.max(CHECKPOINT_STEPS.div_ceil(per_update).min(quarter) as usize);
    Ok(cfg)
}

/// Mean return of a uniformly random policy over `episodes` episodes of `env_id`.
///
/// # Errors
/// Env errors.
pub fn random_policy_return(env_id: &str, episodes: usize, seed: u64) -> Result<f64> {
    let mut env = make(env_id)?;
    let space = env.action_space();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut a = vec![0f32; space.flat_dim()];
    let mut total = 0.0;
    for i in 0..episodes {
        env.reset(Some(seed + i as u64))?;
        loop {
            let action = space.sample(&mut rng, &mut a);
            let r = env.step(action)?;
            total += r.reward;
            if r.terminated || r.truncated {
                break;
            }
        }
    }
    Ok(total / episodes.max(1) as f64)
}

/// File-name-safe form of a label or env id.
pub fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
}

/// Everything about `spec` that can be wrong before a run starts: empty lists, a repeated env,
/// seed or variant, two variants that resolve to the same config (e.g. `clip` and
/// `clip=0.2`), a config that does not validate, an unknown env id. [`run`] calls it first; the
/// CLI calls it before creating the output directory.
///
/// # Errors
/// `Config` or `UnknownEnv` naming the problem.
pub fn check(spec: &AblationSpec) -> Result<()> {
    if spec.envs.is_empty() || spec.variants.is_empty() || spec.seeds.is_empty() {
        return Err(ProximaError::Config("the ablation needs at least one env, variant and seed".into()));
    }
    let dup = |what: &str, items: Vec<String>| -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        match items.into_iter().find(|x| !seen.insert(x.clone())) {
            Some(x) => Err(ProximaError::Config(format!("{what} `{x}` is listed twice"))),
            None => Ok(()),
        }
    };
    dup("env", spec.envs.clone())?;
    dup("variant", spec.variants.iter().map(|v| v.label.clone()).collect())?;
    dup("seed", spec.seeds.iter().map(|s| s.to_string()).collect())?;
    // Two variants that resolve to the same config (e.g. `clip` and `clip=0.2`) are one setting.
    let first_seed = spec.seeds[0];
    let resolved = spec
        .variants
        .iter()
        .map(|v| run_config(spec, v, first_seed).map(|c| c.to_toml()))
        .collect::<Result<Vec<_>>>()?;
    for i in 0..resolved.len() {
        if let Some(j) = (0..i).find(|&j| resolved[j] == resolved[i]) {
            return Err(ProximaError::Config(format!(
                "variants `{}` and `{}` are the same setting",
                spec.variants[j].label, spec.variants[i].label
            )));
        }
    }
    // A `--set` every variant ignores (e.g. `kl_target` without an adaptive-KL variant) is a
    // mistake; one that some variants read applies to those.
    let configs = spec.variants.iter().map(|v| run_config(spec, v, first_seed)).collect::<Result<Vec<_>>>()?;
    for key in Config::chosen_keys(&spec.base_preset, None, &spec.sets) {
        if let Some(why) = configs.iter().map(|c| c.ignored_key(&key)).collect::<Option<Vec<_>>>() {
            return Err(ProximaError::Config(format!("--set {key}: no variant reads it ({})", why[0])));
        }
    }
    for env in &spec.envs {
        make(env)?;
    }
    Ok(())
}

/// Runs the grid: every (variant, env, seed) in `spec.jobs` parallel threads, each run into
/// `out/runs/<env>__<variant>__<seed>/` (config, progress.csv, TensorBoard, model). `progress`
/// is called after each finished run with (done, total, result).
///
/// # Errors
/// [`check`]'s errors (before anything runs), or the first run error (the other runs finish
/// first).
pub fn run(spec: &AblationSpec, progress: impl Fn(usize, usize, &RunResult) + Sync) -> Result<AblationResults> {
    check(spec)?;
    let mut jobs = Vec::new();
    for (vi, v) in spec.variants.iter().enumerate() {
        for env in &spec.envs {
            for &seed in &spec.seeds {
                let cfg = run_config(spec, v, seed)?;
                jobs.push((vi, env.clone(), seed, cfg));
            }
        }
    }
    let random = spec.envs.iter().map(|e| random_policy_return(e, 100, 12_345)).collect::<Result<Vec<_>>>()?;
    let done = AtomicUsize::new(0);
    let total = jobs.len();
    let results = pool::run_all(spec.jobs, &jobs, |_, (vi, env, seed, cfg)| {
        let dir = spec.out.join("runs").join(format!("{}__{}__{seed}", slug(env), slug(&spec.variants[*vi].label)));
        let r = run_one(env, cfg.clone(), &dir).map(|(score, curve, seconds)| RunResult {
            variant: *vi,
            env: env.clone(),
            seed: *seed,
            score,
            curve,
            seconds,
        });
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(r) = &r {
            progress(n, total, r);
        }
        r
    });
    let mut runs = Vec::new();
    for r in results {
        runs.push(r?);
    }
    runs.sort_by(|a, b| (a.variant, &a.env, a.seed).cmp(&(b.variant, &b.env, b.seed)));
    Ok(AblationResults { spec: spec.clone(), runs, random })
}

/// What a finished run of the grid reports: its score, its curve (global_step, mean return of
/// the last 100 episodes) and its training seconds.
type RunRecord = (f64, Vec<(u64, f64)>, f64);

/// One run of the grid, into `dir`: read back when it finished before (its `eval.json` is
/// there), resumed from its latest checkpoint when it was interrupted, else trained from the
/// start. Score, curve and seconds are read from its `progress.csv` in every case, so a grid
/// that was interrupted and continued reports what an uninterrupted one reports.
fn run_one(env: &str, cfg: Config, dir: &Path) -> Result<RunRecord> {
    if !dir.join("eval.json").is_file() {
        if let Some(sig) = crate::signals::received() {
            return Err(ProximaError::Stopped(format!("not started ({} received)", crate::signals::name(sig))));
        }
        // An A3C run cannot resume (its workers' interleaving is not reproducible): it restarts.
        let checkpoint = if cfg.algo == AlgoName::A3c { None } else { crate::rundirs::latest_checkpoint(dir).ok() };
        let trainer = match checkpoint {
            Some(file) => {
                let ck = proxima::checkpoint::load(&file)?;
                if ck.meta.config_toml != cfg.to_toml() {
                    return Err(ProximaError::Config(format!(
                        "{} holds a run of another config than this ablation's (delete it to train it again)",
                        dir.display()
                    )));
                }
                Trainer::resume(&ck, None)?
            }
            None => {
                if dir.exists() {
                    // No checkpoint was written yet (or an A3C run): it trains again from the start.
                    std::fs::remove_dir_all(dir).map_err(|e| ProximaError::io(dir, e))?;
                }
                Trainer::new(env, cfg)?
            }
        };
        if let train::RunOutcome::Stopped(s) = train::run(trainer, dir, |_| !crate::signals::stop_requested())? {
            return Err(ProximaError::Stopped(format!(
                "stopped after update {} (saved {})",
                s.update,
                s.checkpoint.display()
            )));
        }
    }
    read_back(dir)
}

/// A finished run's score (the last mean return of the last 100 episodes), curve and training
/// seconds, from its `progress.csv`.
fn read_back(dir: &Path) -> Result<RunRecord> {
    let path = dir.join("progress.csv");
    let text = std::fs::read_to_string(&path).map_err(|e| ProximaError::io(&path, e))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| ProximaError::Config(format!("{}: no `{name}` column", path.display())))
    };
    let (step, ret, time) = (col("global_step")?, col("ep_return_mean")?, col("time_elapsed")?);
    let (mut curve, mut seconds) = (Vec::new(), 0.0);
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok());
        seconds = num(time).unwrap_or(seconds);
        if let (Some(x), Some(y)) = (num(step), num(ret)) {
            curve.push((x as u64, y));
        }
    }
    let score = curve.last().map_or(f64::NAN, |&(_, y)| y);
    Ok((score, curve, seconds))
}

/// The ablation's own record in its output folder (`ablation.json`): what it compares, so that
/// rerunning the same command there continues it, and another command is refused.
pub const MANIFEST: &str = "ablation.json";

/// `ablation.json`'s text for `spec` (all of it but `jobs` and `out`, which do not change any
/// result).
pub fn manifest(spec: &AblationSpec) -> String {
    let variants: Vec<serde_json::Value> = spec
        .variants
        .iter()
        .map(|v| serde_json::json!({"label": v.label, "preset": v.preset, "sets": v.sets}))
        .collect();
    let m = serde_json::json!({
        "envs": spec.envs, "variants": variants, "seeds": spec.seeds, "preset": spec.base_preset,
        "sets": spec.sets, "total_timesteps": spec.total_timesteps,
    });
    format!("{}\n", serde_json::to_string_pretty(&m).expect("manifest serialises"))
}

impl AblationResults {
    /// Mean score over seeds of (variant, env index), NaN when no run finished an episode.
    pub fn mean_score(&self, variant: usize, env: usize) -> f64 {
        let s: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.variant == variant && r.env == self.spec.envs[env])
            .map(|r| r.score)
            .filter(|s| s.is_finite())
            .collect();
        if s.is_empty() {
            f64::NAN
        } else {
            s.iter().sum::<f64>() / s.len() as f64
        }
    }

    /// The normalised score of (variant, env index): random = 0, best variant = 1; `None` when
    /// no variant beats the random policy on that env.
    pub fn normalized(&self, variant: usize, env: usize) -> Option<f64> {
        let best = (0..self.spec.variants.len())
            .map(|v| self.mean_score(v, env))
            .filter(|s| s.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        let random = self.random[env];
        if !(best > random + 1e-9 * random.abs().max(1.0)) {
            return None;
        }
        Some((self.mean_score(variant, env) - random) / (best - random))
    }

    /// The average normalised score of a variant over the envs that can be normalised.
    pub fn average_normalized(&self, variant: usize) -> Option<f64> {
        let v: Vec<f64> = (0..self.spec.envs.len()).filter_map(|e| self.normalized(variant, e)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// `results.csv`: one row per run (variant, env, seed, score, normalised score of the
    /// variant's mean on that env, random score, seconds).
    pub fn to_csv(&self) -> String {
        let mut out = String::from("variant,env,seed,score,variant_mean,normalized,random,seconds\n");
        for r in &self.runs {
            let e = self.spec.envs.iter().position(|x| *x == r.env).expect("env of a run");
            let norm = self.normalized(r.variant, e).map_or("".to_string(), |v| format!("{v:.4}"));
            out.push_str(&format!(
                "\"{}\",{},{},{:.3},{:.3},{norm},{:.3},{:.1}\n",
                self.spec.variants[r.variant].label,
                r.env,
                r.seed,
                r.score,
                self.mean_score(r.variant, e),
                self.random[e],
                r.seconds
            ));
        }
        out
    }

    /// `results.md`: the normalised scores, variants as rows, envs as columns, average last
    /// (the paper's Table 1 layout), then the raw mean scores.
    pub fn to_markdown(&self) -> String {
        let envs = &self.spec.envs;
        let mut out = format!(
            "Normalised score (random policy = 0, best setting = 1), mean over seeds {:?}, {} steps per run:\n\n| setting | {} | average |\n|---|{}---|\n",
            self.spec.seeds,
            self.spec.total_timesteps,
            envs.join(" | "),
            "---|".repeat(envs.len())
        );
        for (v, var) in self.spec.variants.iter().enumerate() {
            let cells: Vec<String> =
                (0..envs.len()).map(|e| self.normalized(v, e).map_or("n/a".into(), |x| format!("{x:.2}"))).collect();
            let avg = self.average_normalized(v).map_or("n/a".into(), |x| format!("**{x:.2}**"));
            out.push_str(&format!("| {} | {} | {avg} |\n", var.label, cells.join(" | ")));
        }
        out.push_str(&format!("\nMean score (last 100 training episodes), mean over seeds; random policy in the last row:\n\n| setting | {} |\n|---|{}\n", envs.join(" | "), "---|".repeat(envs.len())));
        for (v, var) in self.spec.variants.iter().enumerate() {
            let cells: Vec<String> = (0..envs.len()).map(|e| format!("{:.1}", self.mean_score(v, e))).collect();
            out.push_str(&format!("| {} | {} |\n", var.label, cells.join(" | ")));
        }
        let cells: Vec<String> = self.random.iter().map(|r| format!("{r:.1}")).collect();
        out.push_str(&format!("| random policy | {} |\n", cells.join(" | ")));
        let unnormalised: Vec<&str> =
            (0..envs.len()).filter(|&e| self.normalized(0, e).is_none()).map(|e| envs[e].as_str()).collect();
        if !unnormalised.is_empty() {
            out.push_str(&format!("\nn/a: no setting beat the random policy on {} within the budget, so it cannot be normalised and is left out of the averages.\n", unnormalised.join(", ")));
        }
        out
    }

    /// The mean learning curve of (variant, env index) over seeds, on a grid of `points`
    /// steps (each seed's curve held constant between its updates).
    pub fn mean_curve(&self, variant: usize, env: usize, points: usize) -> Vec<(f64, f64)> {
        let curves: Vec<&Vec<(u64, f64)>> = self
            .runs
            .iter()
            .filter(|r| r.variant == variant && r.env == self.spec.envs[env] && !r.curve.is_empty())
            .map(|r| &r.curve)
            .collect();
        if curves.is_empty() {
            return Vec::new();
        }
        let max =
            curves.iter().flat_map(|c| c.iter().map(|p| p.0 as f64)).fold(self.spec.total_timesteps as f64, f64::max);
        (1..=points)
            .filter_map(|k| {
                let x = max * k as f64 / points as f64;
                let ys: Vec<f64> = curves
                    .iter()
                    .filter_map(|c| c.iter().take_while(|(s, _)| *s as f64 <= x).last().map(|p| p.1))
                    .collect();
                (!ys.is_empty()).then(|| (x, ys.iter().sum::<f64>() / ys.len() as f64))
            })
            .collect()
    }
}

/// The ablation's output folder: a new or empty one (its manifest written; `false`), or the
/// folder of the same ablation, which continues (`true`). Another ablation's folder, or one
/// holding other files, is refused.
pub fn claim_dir(out: &Path, manifest: &str) -> anyhow::Result<bool> {
    use anyhow::{bail, Context};
    let path = out.join(MANIFEST);
    if path.is_file() {
        let saved = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if saved != manifest {
            bail!(
                "{} holds another ablation (its {} differs from this command's envs, variants, seeds, preset, --set or --total-timesteps); rerun that command to continue it, or choose a new --out directory",
                out.display(),
                MANIFEST
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_to_the_papers_settings() {
        let v = Variant::parse("clip=0.1").unwrap();
        assert_eq!(
            (v.label.as_str(), v.sets.clone()),
            ("clip ε=0.1", vec!["objective=clip".to_string(), "clip_range=0.1".into()])
        );
        assert_eq!(Variant::parse("adaptive_kl=0.003").unwrap().sets[1], "kl_target=0.003");
        assert_eq!(Variant::parse("fixed_kl=10").unwrap().sets[1], "kl_coef=10");
        assert_eq!(Variant::parse("none").unwrap().sets, vec!["objective=none".to_string()]);
        assert_eq!(Variant::parse("trpo").unwrap().preset.as_deref(), Some("trpo"));
        assert!(Variant::parse("clipp").unwrap_err().to_string().contains("unknown variant"));
        assert!(Variant::parse("clip=-1").unwrap_err().to_string().contains("positive number"));
        assert!(Variant::parse("none=3").is_err());
    }

    fn results(scores: &[(usize, &str, f64)], random: Vec<f64>) -> AblationResults {
        let spec = AblationSpec {
            envs: vec!["A".into(), "B".into()],
            variants: vec![Variant::parse("clip").unwrap(), Variant::parse("none").unwrap()],
            seeds: vec![1, 2],
            base_preset: "cleanrl".into(),
            sets: vec![],
            total_timesteps: 100,
            jobs: 1,
            out: PathBuf::from("/nonexistent"),
        };
        let runs = scores
            .iter()
            .enumerate()
            .map(|(i, &(variant, env, score))| RunResult {
                variant,
                env: env.into(),
                seed: i as u64,
                score,
                curve: vec![(50, score / 2.0), (100, score)],
                seconds: 0.0,
            })
            .collect();
        AblationResults { spec, runs, random }
    }

    #[test]
    fn normalisation_puts_random_at_0_and_the_best_at_1() {
        // env A: random 10; clip mean (90+110)/2 = 100, none mean 55 → 1 and 0.5.
        // env B: random −100; clip −50, none −100 → 1 and 0.
        let r = results(
            &[(0, "A", 90.0), (0, "A", 110.0), (1, "A", 50.0), (1, "A", 60.0), (0, "B", -50.0), (1, "B", -100.0)],
            vec![10.0, -100.0],
        );
        assert_eq!(r.mean_score(0, 0), 100.0);
        assert_eq!(r.normalized(0, 0), Some(1.0));
        assert_eq!(r.normalized(1, 0), Some(0.5));
        assert_eq!(r.normalized(1, 1), Some(0.0));
        assert_eq!(r.average_normalized(1), Some(0.25));
        let md = r.to_markdown();
        assert!(md.contains("| no clipping or penalty | 0.50 | 0.00 | **0.25** |"), "{md}");
        assert_eq!(r.to_csv().lines().count(), 7);
        // Mean curve over seeds on a grid: at step 50, clip on A averages 45 and 55.
        assert_eq!(r.mean_curve(0, 0, 2), vec![(50.0, 50.0), (100.0, 100.0)]);
        // Nobody beats random on an env: it cannot be normalised.
        let r = results(&[(0, "A", 5.0), (1, "A", 1.0), (0, "B", 1.0), (1, "B", 2.0)], vec![10.0, 0.0]);
        assert_eq!(r.normalized(0, 0), None);
        assert_eq!(r.average_normalized(1), Some(1.0));
        assert!(r.to_markdown().contains("n/a: no setting beat the random policy on A"));
    }
}
