//! The named presets: one function per preset, its source in its doc. `cleanrl` lists every
//! key; the others are its values with their own differences (`..cleanrl()`), so each reads as
//! what sets it apart.

use super::{AdvantageNorm, AlgoName, Backend, Config, EntCoef, Objective, OptimizerName, VectorEnv};
use crate::error::{ProximaError, Result};
use crate::policy::{Activation, PolicyKind};

/// A preset's values.
type PresetValues = fn() -> Config;

/// Each preset's name and its values, in the order `--help` lists them.
const TABLE: [(&str, PresetValues); 14] = [
    ("cleanrl", cleanrl),
    ("sb3", sb3),
    ("paper-mujoco", paper_mujoco),
    ("paper-atari", paper_atari),
    ("cleanrl-atari", cleanrl_atari),
    ("a2c", a2c),
    ("a3c", a3c),
    ("trpo", trpo),
    ("reinforce", reinforce),
    ("ppg", ppg),
    ("sac", sac),
    ("td3", td3),
    ("ddpg", ddpg),
    ("tqc", tqc),
];

/// Names of the presets, in the order `--help` lists them.
pub const PRESETS: [&str; 14] = {
    let mut names = [""; 14];
    let mut i = 0;
    while i < names.len() {
        names[i] = TABLE[i].0;
        i += 1;
    }
    names
};

impl Config {
    /// A named preset, one of [`PRESETS`]: CleanRL's, Stable-Baselines3's and sb3-contrib's
    /// defaults, the PPO paper's settings and the textbook REINFORCE, each with its source in
    /// the doc of its function in `config/presets.rs`.
    ///
    /// # Errors
    /// `Config` naming the unknown preset (with a "did you mean" when one is close) and the
    /// known ones.
    pub fn preset(name: &str) -> Result<Config> {
        if let Some((_, values)) = TABLE.iter().find(|(n, _)| *n == name) {
            return Ok(values());
        }
        let hint =
            crate::did_you_mean::closest(name, &PRESETS).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
        Err(ProximaError::Config(format!("unknown preset `{name}`{hint}; presets: {}", PRESETS.join(", "))))
    }

    /// Whether the preset `name` fits `algo`: an on-policy preset for an on-policy algorithm,
    /// and for SAC, TD3, DDPG and TQC their own preset (another's would run the algorithm with
    /// the other's critics, noise and entropy term: SAC on `td3` would train with α fixed at 0).
    ///
    /// # Errors
    /// `Config` naming the preset, the algorithm and what to give instead; an unknown preset as
    /// [`Config::preset`].
    pub fn check_preset_fits(name: &str, algo: AlgoName) -> Result<()> {
        let p = Config::preset(name)?;
        let (own, theirs) = (algo.as_str(), p.algo.as_str().to_uppercase());
        if algo.is_off_policy() != p.is_off_policy() {
            let kind = if algo.is_off_policy() { "an off-policy" } else { "an on-policy" };
            return Err(ProximaError::Config(format!(
                "preset `{name}` holds {theirs}'s hyperparameters, which do not fit algo `{own}` ({kind} algorithm): leave the preset out (it defaults to the algorithm's own) or pick one of the same kind"
            )));
        }
        if algo.is_off_policy() && p.algo != algo {
            return Err(ProximaError::Config(format!(
                "preset `{name}` holds {theirs}'s hyperparameters, which would run algo `{own}` with {theirs}'s critics, noise and entropy term: SAC, TD3, DDPG and TQC each take their own preset; leave the preset out or give `{own}`"
            )));
        }
        Ok(())
    }

    /// The preset a checkpoint's saved config (its TOML text) started from: its `preset` key
    /// when that names a preset, else `cleanrl` (files saved before the key was recorded). Its
    /// config is layered over it, so that keys left out fall back to the run's own preset.
    pub fn saved_preset(config_toml: &str) -> String {
        let table = config_toml.parse::<toml::Table>().ok();
        table
            .as_ref()
            .and_then(|t| t.get("preset").and_then(|p| p.as_str()))
            .filter(|p| PRESETS.contains(p))
            .unwrap_or("cleanrl")
            .to_string()
    }

    /// The keys preset `name` gives its own on-policy algorithm other values than `algo`'s own
    /// preset does, and that `algo` does not read (`paper-atari`'s `n_epochs`, `batch_size` and
    /// `clip_range` under `a2c`): what a note says is left unused when a preset of another
    /// on-policy algorithm is taken. Empty for the algorithm's own preset and unknown names.
    pub fn preset_keys_unread(name: &str, algo: AlgoName) -> Vec<&'static str> {
        let own_name = if algo == AlgoName::Ppo { "cleanrl" } else { algo.as_str() };
        let (Ok(given), Ok(own)) = (Config::preset(name), Config::preset(own_name)) else { return Vec::new() };
        if given.algo == algo || given.is_off_policy() || algo.is_off_policy() {
            return Vec::new();
        }
        let table = |c: &Config| c.to_toml().parse::<toml::Table>().unwrap_or_default();
        let (given_values, own_values) = (table(&given), table(&own));
        let under_algo = Config { algo, ..given.clone() };
        Config::keys()
            .into_iter()
            .filter(|k| given.ignored_key(k).is_none() && under_algo.ignored_key(k).is_some())
            .filter(|k| given_values.get(*k) != own_values.get(*k))
            .collect()
    }
}

/// CleanRL `ppo.py` defaults (Huang et al. 2022): 4 envs × 128 steps, 4 minibatches, 4 epochs,
/// lr 2.5e-4 annealed, γ .99, λ .95, ε .2, c₂ .01, c₁ .5, value clipping .2, max_grad_norm .5,
/// 500k steps. The other algorithms' keys hold their own libraries' defaults.
fn cleanrl() -> Config {
    Config {
        algo: AlgoName::Ppo,
        preset: "cleanrl".into(),
        seed: 1,
        total_timesteps: 500_000,
        n_envs: 4,
        n_steps: 128,
        batch_size: 128,
        n_epochs: 4,
        learning_rate: 2.5e-4,
        anneal_lr: true,
        anneal_clip_range: false,
        log_kl_divergence: true,
        use_masking: true,
        gamma: 0.99,
        gae_lambda: 0.95,
        clip_range: 0.2,
        clip_range_vf: Some(0.2),
        normalize_advantage: AdvantageNorm::Minibatch,
        ent_coef: EntCoef::Fixed(0.01),
        vf_coef: 0.5,
        max_grad_norm: Some(0.5),
        target_kl: None,
        adam_eps: 1e-5,
        normalize_observation: false,
        norm_obs_keys: Vec::new(),
        normalize_reward: false,
        clip_obs: 10.0,
        clip_reward: 10.0,
        net_arch: vec![64, 64],
        activation: Activation::Tanh,
        shared_trunk: false,
        ortho_init: true,
        log_std_init: 0.0,
        policy: PolicyKind::MlpPolicy,
        lstm_hidden_size: 256,
        n_lstm_layers: 1,
        shared_lstm: false,
        enable_critic_lstm: true,
        recurrent_cell: crate::policy::recurrent::CellKind::Lstm,
        num_threads: 1,
        backend: Backend::Auto,
        vector_env: VectorEnv::Off,
        checkpoint_freq: 100,
        eval_episodes: 10,
        objective: Objective::Clip,
        kl_coef: 1.0,
        kl_target: 0.01,
        optimizer: OptimizerName::Adam,
        rms_prop_alpha: 0.99,
        rms_prop_eps: 1e-5,
        n_workers: 2,
        cg_max_steps: 15,
        cg_damping: 0.1,
        line_search_shrinking_factor: 0.8,
        line_search_max_iter: 10,
        n_critic_updates: 10,
        baseline: true,
        buffer_size: 1_000_000,
        learning_starts: 100,
        tau: 0.005,
        train_freq: 1,
        gradient_steps: 1,
        target_update_interval: 1,
        target_entropy: None,
        save_replay_buffer: true,
        n_critics: 2,
        n_quantiles: 25,
        top_quantiles_to_drop_per_net: 2,
        policy_delay: 2,
        target_policy_noise: 0.2,
        target_noise_clip: 0.5,
        noise_std: 0.1,
        n_iteration: 32,
        e_policy: 1,
        e_auxiliary: 6,
        beta_clone: 1.0,
        num_aux_rollouts: 4,
    }
}

/// Stable-Baselines3 `PPO` defaults: 1 env × 2048 steps, batch 64, 10 epochs, lr 3e-4 constant,
/// ε .2, no value clipping, c₂ 0, c₁ .5, max_grad_norm .5; 1M steps.
fn sb3() -> Config {
    Config {
        preset: "sb3".into(),
        total_timesteps: 1_000_000,
        n_envs: 1,
        n_steps: 2048,
        batch_size: 64,
        n_epochs: 10,
        learning_rate: 3e-4,
        anneal_lr: false,
        clip_range_vf: None,
        ent_coef: EntCoef::Fixed(0.0),
        ..cleanrl()
    }
}

/// Schulman et al. 2017, Table 3: T 2048, Adam 3e-4, K 10, minibatch 64, γ .99, λ .95, ε .2,
/// 1 env, 1M steps (lr annealed as in CleanRL's continuous PPO; observations and rewards
/// normalised).
fn paper_mujoco() -> Config {
    Config {
        preset: "paper-mujoco".into(),
        total_timesteps: 1_000_000,
        n_envs: 1,
        n_steps: 2048,
        batch_size: 64,
        n_epochs: 10,
        learning_rate: 3e-4,
        anneal_lr: true,
        clip_range_vf: None,
        ent_coef: EntCoef::Fixed(0.0),
        normalize_observation: true,
        normalize_reward: true,
        ..cleanrl()
    }
}

/// Schulman et al. 2017, Table 5: 8 actors, T 128, K 3, minibatch 32·8 = 256, ε .1, lr 2.5e-4
/// annealed, c₁ 1.0, c₂ .01, γ .99, λ .95, 10M steps, `CnnPolicy` (the paper also anneals ε with
/// α: `anneal_clip_range = true`; kept fixed by default, as CleanRL).
fn paper_atari() -> Config {
    Config {
        preset: "paper-atari".into(),
        total_timesteps: 10_000_000,
        n_envs: 8,
        n_steps: 128,
        batch_size: 256,
        n_epochs: 3,
        learning_rate: 2.5e-4,
        anneal_lr: true,
        clip_range: 0.1,
        clip_range_vf: None,
        ent_coef: EntCoef::Fixed(0.01),
        vf_coef: 1.0,
        policy: PolicyKind::CnnPolicy,
        log_kl_divergence: false,
        num_threads: 2,
        ..cleanrl()
    }
}

/// CleanRL `ppo_atari.py`: 8 envs × 128 steps, 4 minibatches (256), 4 epochs, lr 2.5e-4
/// annealed, ε .1, value clipping .1, c₁ .5, c₂ .01, max_grad_norm .5, 10M steps, `CnnPolicy`.
/// Both Atari presets split the CNN's passes over two threads (the fused backend's result does
/// not depend on it) and do not measure the rollout KL (a pass SB3 does not make).
fn cleanrl_atari() -> Config {
    Config {
        preset: "cleanrl-atari".into(),
        total_timesteps: 10_000_000,
        n_envs: 8,
        n_steps: 128,
        batch_size: 256,
        n_epochs: 4,
        clip_range: 0.1,
        clip_range_vf: Some(0.1),
        policy: PolicyKind::CnnPolicy,
        log_kl_divergence: false,
        num_threads: 2,
        ..cleanrl()
    }
}

/// Stable-Baselines3 `A2C` defaults: 1 env × 5 steps, one gradient step per rollout, RMSprop
/// (α .99, ε 1e-5) lr 7e-4 constant, γ .99, λ 1 (n-step returns), c₂ 0, c₁ .5, max_grad_norm .5,
/// no advantage normalisation; 1M steps.
fn a2c() -> Config {
    Config {
        algo: AlgoName::A2c,
        preset: "a2c".into(),
        total_timesteps: 1_000_000,
        n_envs: 1,
        n_steps: 5,
        batch_size: 5,
        n_epochs: 1,
        learning_rate: 7e-4,
        anneal_lr: false,
        gae_lambda: 1.0,
        clip_range_vf: None,
        normalize_advantage: AdvantageNorm::Off,
        ent_coef: EntCoef::Fixed(0.0),
        optimizer: OptimizerName::Rmsprop,
        ..cleanrl()
    }
}

/// The `a2c` values with `algo = "a3c"` and 2 asynchronous workers (`n_workers`, as in
/// `cleanrl`; Mnih et al. 2016 use t_max 5 and a shared RMSprop as here).
fn a3c() -> Config {
    Config { algo: AlgoName::A3c, preset: "a3c".into(), ..a2c() }
}

/// sb3-contrib `TRPO` defaults: 1 env × 2048 steps, δ (`target_kl`) .01, 15 CG iterations,
/// damping .1, line search 10 × 0.8, critic: 10 epochs of Adam lr 1e-3 on minibatches of 128,
/// γ .99, λ .95, Â normalised over the rollout; 1M steps.
fn trpo() -> Config {
    Config {
        algo: AlgoName::Trpo,
        preset: "trpo".into(),
        total_timesteps: 1_000_000,
        n_envs: 1,
        n_steps: 2048,
        batch_size: 128,
        n_epochs: 1,
        learning_rate: 1e-3,
        anneal_lr: false,
        clip_range_vf: None,
        normalize_advantage: AdvantageNorm::Batch,
        ent_coef: EntCoef::Fixed(0.0),
        max_grad_norm: None,
        target_kl: Some(0.01),
        ..cleanrl()
    }
}

/// REINFORCE with a learned baseline (Williams 1992; Sutton & Barto 2018, §13.4; no library
/// ships one to copy, so these are the textbook's choices at CleanRL's scale): 1 env × 2048
/// steps (well above CartPole's 500-step episodes: only finished episodes train), one Adam step
/// per rollout at lr 1e-3 constant, γ .99, weights G − V normalised over the rollout, c₁ .5,
/// c₂ 0, no gradient clipping; 500k steps.
fn reinforce() -> Config {
    Config {
        algo: AlgoName::Reinforce,
        preset: "reinforce".into(),
        n_envs: 1,
        n_steps: 2048,
        batch_size: 2048,
        n_epochs: 1,
        learning_rate: 1e-3,
        anneal_lr: false,
        clip_range_vf: None,
        normalize_advantage: AdvantageNorm::Batch,
        ent_coef: EntCoef::Fixed(0.0),
        max_grad_norm: None,
        ..cleanrl()
    }
}

/// CleanRL's `ppg_procgen.py` defaults (Cobbe et al. 2021's values): 64 envs × 256 steps, 8
/// minibatches (2048), lr 5e-4 constant (Adam ε 1e-8), γ .999, λ .95, Â normalised over the
/// rollout, ε .2, value clipping .2, c₂ .01, c₁ .5, max_grad_norm .5, reward normalisation
/// (clip 10); N_π 32, E_π 1, E_aux 6, β_clone 1, 4 rollouts per auxiliary minibatch; 25M steps.
/// The networks are the MLPs of the other presets (CleanRL's is an IMPALA CNN for Procgen).
fn ppg() -> Config {
    Config {
        algo: AlgoName::Ppg,
        preset: "ppg".into(),
        total_timesteps: 25_000_000,
        n_envs: 64,
        n_steps: 256,
        batch_size: 2048,
        learning_rate: 5e-4,
        anneal_lr: false,
        gamma: 0.999,
        normalize_advantage: AdvantageNorm::Batch,
        adam_eps: 1e-8,
        normalize_reward: true,
        ..cleanrl()
    }
}

/// Stable-Baselines3's `SAC` defaults: 1 env, Adam lr 3e-4 (ε 1e-8, PyTorch's), buffer 1e6,
/// 100 random steps first, batch 256, τ .005, γ .99, one gradient step per env step, α learned
/// (`ent_coef = "auto"`, H̄ = −dim(A)), 2×256 ReLU actor and twin critics; 1M steps. `n_steps`
/// (100) is only how many env steps one logged iteration takes (and how often a Ctrl-C is
/// looked at); a checkpoint every 250 iterations (25k steps).
fn sac() -> Config {
    Config {
        algo: AlgoName::Sac,
        preset: "sac".into(),
        total_timesteps: 1_000_000,
        n_envs: 1,
        n_steps: 100,
        batch_size: 256,
        n_epochs: 1,
        learning_rate: 3e-4,
        anneal_lr: false,
        clip_range_vf: None,
        ent_coef: EntCoef::Auto(1.0),
        max_grad_norm: None,
        adam_eps: 1e-8,
        net_arch: vec![256, 256],
        activation: Activation::Relu,
        ortho_init: false,
        checkpoint_freq: 250,
        ..cleanrl()
    }
}

/// Stable-Baselines3's `TD3` defaults (lr 1e-3, buffer 1e6, 100 random steps, batch 256,
/// τ .005, γ .99, `policy_delay` 2, smoothing noise .2 clipped at .5, 2 critics, 400×300 ReLU
/// networks) with Gaussian exploration noise σ .1 (SB3 has none by default; rl-zoo and the
/// paper add it); 1M steps.
fn td3() -> Config {
    Config {
        algo: AlgoName::Td3,
        preset: "td3".into(),
        total_timesteps: 1_000_000,
        n_envs: 1,
        n_steps: 100,
        batch_size: 256,
        n_epochs: 1,
        learning_rate: 1e-3,
        anneal_lr: false,
        clip_range_vf: None,
        ent_coef: EntCoef::Fixed(0.0),
        max_grad_norm: None,
        adam_eps: 1e-8,
        net_arch: vec![400, 300],
        activation: Activation::Relu,
        ortho_init: false,
        checkpoint_freq: 250,
        policy_delay: 2,
        target_policy_noise: 0.2,
        target_noise_clip: 0.5,
        n_critics: 2,
        ..cleanrl()
    }
}

/// Stable-Baselines3's `DDPG`: the `td3` values with one critic, no smoothing noise and no
/// delay.
fn ddpg() -> Config {
    Config {
        algo: AlgoName::Ddpg,
        preset: "ddpg".into(),
        policy_delay: 1,
        target_policy_noise: 0.0,
        target_noise_clip: 0.0,
        n_critics: 1,
        ..td3()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_round_trip_through_toml() {
        for p in PRESETS {
            let c = Config::preset(p).unwrap();
            c.clone().validate().unwrap();
            let back = Config::resolve(p, Some(&c.to_toml()), &[]).unwrap();
            assert_eq!(*back, c, "{p}");
        }
        // A run's config.toml is complete: fed back on top of *another* preset it gives the same
        // config, optional keys that are off included (they are written as "none").
        for p in PRESETS {
            let c = Config::preset(p).unwrap();
            assert_eq!(*Config::resolve("cleanrl", Some(&c.to_toml()), &[]).unwrap(), c, "{p} over cleanrl");
        }
        assert!(Config::preset("trpo").unwrap().to_toml().contains("max_grad_norm = \"none\""));
        let e = Config::resolve("cleanrl", Some("max_grad_norm = \"off\""), &[]).unwrap_err().to_string();
        assert!(e.contains("expected a number or \"none\""), "{e}");
        let c = Config::preset("cleanrl").unwrap();
        assert_eq!((c.n_envs, c.n_steps, c.n_minibatches(), c.n_epochs), (4, 128, 4, 4));
        assert_eq!(Config::preset("paper-atari").unwrap().n_minibatches(), 4);
        assert_eq!(Config::preset("paper-mujoco").unwrap().n_minibatches(), 32);
    }

    #[test]
    fn an_off_policy_algorithm_takes_its_own_preset_and_an_on_policy_one_any_on_policy_preset() {
        for p in PRESETS {
            let own = Config::preset(p).unwrap().algo;
            for algo in [AlgoName::Ppo, AlgoName::A2c, AlgoName::Sac, AlgoName::Td3, AlgoName::Ddpg, AlgoName::Tqc] {
                let fits = if algo.is_off_policy() { own == algo } else { !own.is_off_policy() };
                let got = Config::check_preset_fits(p, algo);
                assert_eq!(got.is_ok(), fits, "preset {p}, algo {algo}: {got:?}");
            }
        }
        let e = Config::check_preset_fits("ddpg", AlgoName::Tqc).unwrap_err().to_string();
        assert!(e.contains("preset `ddpg` holds DDPG's hyperparameters, which would run algo `tqc`"), "{e}");
        assert!(Config::check_preset_fits("nope", AlgoName::Sac).unwrap_err().to_string().contains("unknown preset"));
        // An on-policy algorithm on another's preset fits; what it leaves unread is named.
        let unread = Config::preset_keys_unread("paper-atari", AlgoName::A2c);
        for k in ["n_epochs", "batch_size", "clip_range"] {
            assert!(unread.contains(&k), "{unread:?}");
        }
        assert!(!unread.contains(&"learning_rate") && !unread.contains(&"n_steps"), "{unread:?}");
        assert!(Config::preset_keys_unread("a2c", AlgoName::A2c).is_empty());
        assert!(Config::preset_keys_unread("cleanrl", AlgoName::Ppo).is_empty());
        assert!(Config::preset_keys_unread("sac", AlgoName::Sac).is_empty());
    }
}

/// sb3-contrib's `TQC` defaults: SAC's (1 env, Adam lr 3e-4, buffer 1e6, 100 random steps, batch
/// 256, τ .005, γ .99, one gradient step per env step, α learned, 2×256 ReLU networks; 1M steps),
/// with 2 critics of 25 quantiles and the top 2 of each dropped from the target.
fn tqc() -> Config {
    Config {
        algo: AlgoName::Tqc,
        preset: "tqc".into(),
        n_critics: 2,
        n_quantiles: 25,
        top_quantiles_to_drop_per_net: 2,
        ..sac()
    }
}
