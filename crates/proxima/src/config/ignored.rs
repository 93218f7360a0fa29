//! Options the chosen algorithm would ignore: which keys of a [`Config`] have no effect under
//! its `algo`, `objective`, `optimizer` and normalisation switches, so that setting one is an
//! error naming the key and the algorithm rather than a silent no-op.

use super::{AlgoName, Config, EntCoef, Objective, OptimizerName};
use crate::error::{ProximaError, Result};

/// Keys only PPO reads (besides the objective-specific ones below).
const PPO_ONLY: [(&str, &str); 6] = [
    ("log_kl_divergence", "PPO's rollout KL in the logs"),
    ("use_masking", "PPO's invalid-action masking"),
    ("n_epochs", "PPO's K epochs over each rollout"),
    ("anneal_clip_range", "PPO's ε annealing"),
    ("clip_range_vf", "PPO's value clipping"),
    ("objective", "PPO's surrogate objective"),
];

/// Keys only PPG reads.
const PPG_ONLY: [(&str, &str); 5] = [
    ("n_iteration", "PPG's policy-phase iterations per auxiliary phase"),
    ("e_policy", "PPG's policy-phase epochs"),
    ("e_auxiliary", "PPG's auxiliary epochs"),
    ("beta_clone", "PPG's behavioural-cloning weight"),
    ("num_aux_rollouts", "PPG's auxiliary minibatch size"),
];

/// Keys only TRPO reads.
const TRPO_ONLY: [(&str, &str); 5] = [
    ("cg_max_steps", "TRPO's conjugate-gradient iterations"),
    ("cg_damping", "TRPO's Fisher damping"),
    ("line_search_shrinking_factor", "TRPO's line search"),
    ("line_search_max_iter", "TRPO's line search"),
    ("n_critic_updates", "TRPO's critic epochs"),
];

/// Keys only the off-policy algorithms (SAC, TD3, DDPG, TQC) read.
const OFF_POLICY_ONLY: [(&str, &str); 6] = [
    ("buffer_size", "the replay buffer's size"),
    ("learning_starts", "the random steps before learning"),
    ("tau", "the target networks' Polyak τ"),
    ("train_freq", "the env steps between trainings"),
    ("gradient_steps", "the gradient steps per training"),
    ("save_replay_buffer", "saving the replay buffer"),
];

/// Keys only SAC and TQC read.
const SAC_ONLY: [(&str, &str); 2] = [
    ("target_update_interval", "the target update interval of SAC and TQC"),
    ("target_entropy", "the temperature target of SAC and TQC"),
];

/// Keys only TQC reads.
const TQC_ONLY: [(&str, &str); 2] = [
    ("n_quantiles", "TQC's quantiles per critic"),
    ("top_quantiles_to_drop_per_net", "TQC's truncation of the target"),
];

/// Keys only TD3 reads (DDPG fixes them: one critic, no smoothing, no delay).
const TD3_ONLY: [(&str, &str); 4] = [
    ("policy_delay", "TD3's delayed actor updates"),
    ("target_policy_noise", "TD3's target smoothing noise"),
    ("target_noise_clip", "TD3's target smoothing clip"),
    ("n_critics", "the number of critics"),
];

/// On-policy keys the off-policy algorithms do not read.
const NOT_OFF_POLICY: [(&str, &str); 9] = [
    ("gae_lambda", "GAE's λ"),
    ("vf_coef", "the value-loss coefficient"),
    ("normalize_advantage", "advantage normalisation"),
    ("max_grad_norm", "gradient clipping"),
    ("target_kl", "PPO's early stop, TRPO's δ"),
    ("log_std_init", "the state-independent log-std"),
    ("ortho_init", "orthogonal init; the off-policy layers use PyTorch's default"),
    ("shared_trunk", "a shared trunk; the off-policy actor and critics are separate"),
    ("activation", "the activation; the off-policy networks use ReLU"),
];

impl Config {
    /// Why the network (`policy`) ignores `key`: the MLP's shape under `CnnPolicy` and
    /// `CnnLstmPolicy`, recurrent PPO's layers without `MlpLstmPolicy` or `CnnLstmPolicy`.
    fn ignored_by_policy(&self, key: &str) -> Option<String> {
        let not_read = |what: &str, by: String| Some(format!("`{key}` ({what}) has no effect with {by}"));
        if self.policy.is_cnn() && matches!(key, "net_arch" | "activation" | "shared_trunk") {
            return not_read(
                "the MLP's shape",
                format!("policy = `{:?}` (the Nature CNN, shared by both heads)", self.policy),
            );
        }
        let lstm = matches!(
            key,
            "lstm_hidden_size" | "n_lstm_layers" | "shared_lstm" | "enable_critic_lstm" | "recurrent_cell"
        );
        if !self.policy.is_recurrent() && lstm {
            return not_read(
                "recurrent PPO's layers",
                format!("policy = `{:?}` (they shape `MlpLstmPolicy` and `CnnLstmPolicy`)", self.policy),
            );
        }
        None
    }

    /// Why setting `key` would change nothing under this config (`None` when it is read).
    /// The reason names the key, what it is, and the setting that ignores it.
    pub fn ignored_key(&self, key: &str) -> Option<String> {
        let algo = self.algo;
        let not_read = |what: &str, by: String| Some(format!("`{key}` ({what}) has no effect with {by}"));
        let by_algo = || format!("algo = `{algo}`");
        if let Some(why) = self.ignored_by_policy(key) {
            return Some(why);
        }
        if let Some((_, what)) = PPO_ONLY.iter().find(|(k, _)| *k == key) {
            // PPG's policy phase is PPO-Clip with value clipping, for `e_policy` epochs.
            let read = algo == AlgoName::Ppo
                || (algo == AlgoName::Ppg && matches!(key, "clip_range_vf" | "log_kl_divergence"));
            let what = if algo == AlgoName::Ppg && key == "n_epochs" {
                "PPO's K; PPG's policy phase runs e_policy epochs"
            } else {
                what
            };
            return (!read).then(|| not_read(what, by_algo())).flatten();
        }
        if let Some((_, what)) = PPG_ONLY.iter().find(|(k, _)| *k == key) {
            return (algo != AlgoName::Ppg).then(|| not_read(what, by_algo())).flatten();
        }
        if let Some((_, what)) = TRPO_ONLY.iter().find(|(k, _)| *k == key) {
            return (algo != AlgoName::Trpo).then(|| not_read(what, by_algo())).flatten();
        }
        if let Some(why) = self.ignored_off_policy_key(key) {
            return why;
        }
        let objective = format!("algo = `{algo}`, objective = `{}`", objective_name(self.objective));
        match key {
            "n_workers" if algo != AlgoName::A3c => not_read("A3C's worker threads", by_algo()),
            "batch_size" if algo.steps_on_whole_rollout() => {
                let what =
                    format!("the minibatch size; {} takes one step on the whole rollout", algo.as_str().to_uppercase());
                not_read(&what, by_algo())
            }
            "target_kl" if algo.steps_on_whole_rollout() => not_read("PPO's early stop, TRPO's δ", by_algo()),
            "gae_lambda" if algo == AlgoName::Reinforce => {
                not_read("GAE's λ; REINFORCE weights by Monte-Carlo returns", by_algo())
            }
            "baseline" if algo != AlgoName::Reinforce => not_read("REINFORCE's baseline switch", by_algo()),
            "vf_coef" if algo == AlgoName::Reinforce && !self.baseline => {
                not_read("the value-loss coefficient", "algo = `reinforce`, baseline = false".into())
            }
            "vf_coef" | "ent_coef" if algo == AlgoName::Trpo => {
                not_read("a coefficient of the joint loss; TRPO steps the policy alone", by_algo())
            }
            "clip_range" if algo == AlgoName::Ppg => None,
            "clip_range" if algo != AlgoName::Ppo || self.objective != Objective::Clip => {
                not_read("PPO-Clip's ε", if algo == AlgoName::Ppo { objective } else { by_algo() })
            }
            "kl_coef"
                if algo != AlgoName::Ppo || !matches!(self.objective, Objective::AdaptiveKl | Objective::FixedKl) =>
            {
                not_read("the KL penalty's β", if algo == AlgoName::Ppo { objective } else { by_algo() })
            }
            "kl_target" if algo != AlgoName::Ppo || self.objective != Objective::AdaptiveKl => {
                not_read("adaptive KL's d_targ", if algo == AlgoName::Ppo { objective } else { by_algo() })
            }
            "adam_eps" if self.optimizer != OptimizerName::Adam => not_read("Adam's ε", "optimizer = `rmsprop`".into()),
            "rms_prop_alpha" | "rms_prop_eps" if self.optimizer != OptimizerName::Rmsprop => {
                not_read("RMSprop's settings", "optimizer = `adam`".into())
            }
            "norm_obs_keys" if !self.normalize_observation => {
                not_read("the keys observation normalisation reads", "normalize_observation = false".into())
            }
            "clip_obs" if !self.normalize_observation => {
                not_read("the clip of normalised observations", "normalize_observation = false".into())
            }
            "clip_reward" if !self.normalize_reward => {
                not_read("the clip of scaled rewards", "normalize_reward = false".into())
            }
            _ => None,
        }
    }

    /// [`Config::ignored_key`] for the off-policy keys, and the on-policy keys an off-policy
    /// algorithm ignores: `Some(answer)` when `key` is one of those, `None` to look further.
    fn ignored_off_policy_key(&self, key: &str) -> Option<Option<String>> {
        let algo = self.algo;
        let off = self.is_off_policy();
        let not_read = |what: &str, by: String| Some(format!("`{key}` ({what}) has no effect with {by}"));
        let by_algo = || format!("algo = `{algo}`");
        let find = |list: &[(&'static str, &'static str)]| list.iter().find(|(k, _)| *k == key).map(|(_, w)| *w);
        if let Some(what) = find(&OFF_POLICY_ONLY) {
            return Some((!off).then(|| not_read(what, by_algo())).flatten());
        }
        if let Some(what) = find(&TQC_ONLY) {
            return Some((algo != AlgoName::Tqc).then(|| not_read(what, by_algo())).flatten());
        }
        if let Some(what) = find(&SAC_ONLY) {
            if !algo.has_temperature() {
                return Some(not_read(what, by_algo()));
            }
            let fixed = key == "target_entropy" && matches!(self.ent_coef, EntCoef::Fixed(_));
            return Some(fixed.then(|| not_read(what, "a fixed ent_coef".into())).flatten());
        }
        if let Some(what) = find(&TD3_ONLY) {
            let reads = algo == AlgoName::Td3 || (key == "n_critics" && algo.has_temperature());
            return Some((!reads).then(|| not_read(what, by_algo())).flatten());
        }
        if key == "noise_std" {
            let reads = matches!(algo, AlgoName::Td3 | AlgoName::Ddpg);
            return Some((!reads).then(|| not_read("the exploration noise of TD3 and DDPG", by_algo())).flatten());
        }
        if off {
            if let Some(what) = find(&NOT_OFF_POLICY) {
                return Some(not_read(what, by_algo()));
            }
            if key == "ent_coef" && !algo.has_temperature() {
                return Some(not_read(
                    "the temperature α of SAC and TQC; TD3 and DDPG explore with `noise_std`",
                    by_algo(),
                ));
            }
        }
        None
    }

    /// Refuses options this config would ignore: `keys` are the ones the user set (a `--set`,
    /// a config file's key whose value differs from the preset's, a flag).
    ///
    /// # Errors
    /// `Config` naming the first such key, what it is and the setting that ignores it.
    pub fn check_keys_used<S: AsRef<str>>(&self, keys: &[S]) -> Result<()> {
        match keys.iter().find_map(|k| self.ignored_key(k.as_ref())) {
            Some(why) => Err(ProximaError::Config(format!("{why}: remove it, or choose a setting that uses it"))),
            None => Ok(()),
        }
    }
}

fn objective_name(o: Objective) -> String {
    serde_json::to_value(o).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| format!("{o:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(preset: &str, sets: &[&str]) -> Config {
        Config::resolve(preset, None, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap().into_config()
    }

    #[test]
    fn each_algorithm_refuses_what_it_does_not_read() {
        let ppo = cfg("cleanrl", &[]);
        let a2c = cfg("a2c", &[]);
        let trpo = cfg("trpo", &[]);
        let adaptive = cfg("cleanrl", &["objective=adaptive_kl"]);
        let reinforce = cfg("reinforce", &[]);
        let no_baseline = cfg("reinforce", &["baseline=false"]);
        let ppg = cfg("ppg", &[]);
        for (c, key, by) in [
            (&ppg, "n_epochs", "algo = `ppg`"),
            (&ppg, "objective", "algo = `ppg`"),
            (&ppg, "kl_coef", "algo = `ppg`"),
            (&ppo, "e_auxiliary", "algo = `ppo`"),
            (&ppo, "beta_clone", "algo = `ppo`"),
            (&ppo, "n_workers", "algo = `ppo`"),
            (&ppo, "kl_target", "objective = `clip`"),
            (&ppo, "kl_coef", "objective = `clip`"),
            (&ppo, "cg_damping", "algo = `ppo`"),
            (&ppo, "rms_prop_alpha", "optimizer = `adam`"),
            (&ppo, "clip_obs", "normalize_observation = false"),
            (&ppo, "norm_obs_keys", "normalize_observation = false"),
            (&adaptive, "clip_range", "objective = `adaptive_kl`"),
            (&a2c, "clip_range", "algo = `a2c`"),
            (&a2c, "n_epochs", "algo = `a2c`"),
            (&a2c, "batch_size", "algo = `a2c`"),
            (&a2c, "adam_eps", "optimizer = `rmsprop`"),
            (&trpo, "ent_coef", "algo = `trpo`"),
            (&trpo, "objective", "algo = `trpo`"),
            (&reinforce, "gae_lambda", "algo = `reinforce`"),
            (&reinforce, "batch_size", "algo = `reinforce`"),
            (&reinforce, "clip_range", "algo = `reinforce`"),
            (&no_baseline, "vf_coef", "baseline = false"),
            (&ppo, "baseline", "algo = `ppo`"),
        ] {
            let why = c.ignored_key(key).unwrap_or_else(|| panic!("{key} is read by {}", c.algo));
            assert!(why.starts_with(&format!("`{key}`")) && why.contains(by), "{why}");
            assert!(c.check_keys_used(&["seed", key]).is_err());
        }
        for (c, key) in [
            (&ppo, "clip_range"),
            (&ppo, "n_epochs"),
            (&adaptive, "kl_target"),
            (&adaptive, "kl_coef"),
            (&a2c, "rms_prop_eps"),
            (&trpo, "batch_size"),
            (&trpo, "target_kl"),
            (&trpo, "cg_damping"),
            (&cfg("a3c", &[]), "n_workers"),
            (&reinforce, "vf_coef"),
            (&reinforce, "baseline"),
            (&no_baseline, "ent_coef"),
            (&ppg, "clip_range"),
            (&ppg, "clip_range_vf"),
            (&ppg, "e_policy"),
            (&ppg, "n_iteration"),
            (&ppg, "target_kl"),
            (&cfg("cleanrl", &["normalize_reward=true"]), "clip_reward"),
        ] {
            assert_eq!(c.ignored_key(key), None, "{key} with {}", c.algo);
        }
        // Every key that is never ignored stays allowed.
        assert!(ppo.check_keys_used(&["seed", "n_steps", "learning_rate", "gamma", "net_arch"]).is_ok());
    }
}
