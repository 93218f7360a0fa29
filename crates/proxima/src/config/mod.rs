//! Hyperparameters (SB3's names), named presets, and the layering that resolves a run's config:
//! preset → `--config FILE.toml` → `--set key=value` → explicit CLI flags.
//!
//! Configs are data: every key has a default, a doc line and a source. Unknown keys are errors
//! with a "did you mean" suggestion; values are type-checked by serde and range-checked once by
//! [`Config::validate`], which gives the [`ValidConfig`] a run takes.
//!
//! One job per file: `schema` (the [`Config`] struct, its keys and TOML), `algo_name` (the
//! `algo` key's [`AlgoName`]), `presets` (the named presets), `resolve` (the layering),
//! `validate` (the checks and [`ValidConfig`]), `legacy` (values for keys that configs saved
//! before them lack), `ignored` (keys the chosen algorithm would not read).

pub use crate::algo::sac::EntCoef;
pub use crate::algo::{AdvantageNorm, Objective};
pub use crate::optim::OptimizerName;
pub use crate::policy::Backend;
pub use algo_name::{AlgoName, ALGOS};
pub use presets::PRESETS;
pub use schema::{Config, VectorEnv, OPTIONAL_KEYS};
pub use validate::{IntoValidConfig, ValidConfig, MAX_ENVS, MAX_HIDDEN_WEIGHTS, MAX_ROLLOUT, MAX_THREADS, MAX_WIDTH};

mod algo_name;
mod ignored;
mod legacy;
mod presets;
mod resolve;
mod schema;
mod validate;

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
    fn layering_and_errors() {
        let c = Config::resolve(
            "cleanrl",
            Some("n_epochs = 7\nclip_range = 0.1"),
            &["n_epochs=9".into(), "clip_range_vf=none".into()],
        )
        .unwrap();
        assert_eq!((c.n_epochs, c.clip_range, c.clip_range_vf), (9, 0.1, None));
        let e = Config::resolve("cleanrl", None, &["n_step=5".into()]).unwrap_err().to_string();
        assert!(e.contains("n_step") && e.contains("did you mean `n_steps`"), "{e}");
        let e = Config::resolve("cleanrl", None, &["batch_size=100".into()]).unwrap_err().to_string();
        assert!(e.contains("batch_size = 100"), "{e}");
        let c = Config::resolve("sac", Some("learning_starts = 1e3"), &["buffer_size=1e6".into()]).unwrap();
        assert_eq!((c.buffer_size, c.learning_starts), (1_000_000, 1000), "whole floats for integer keys");
        let e = Config::resolve("sac", None, &["buffer_size=1000.5".into()]).unwrap_err().to_string();
        assert!(e.contains("buffer_size"), "not a whole number: refused: {e}");
        let e = Config::resolve("cleanrl", None, &["learning_rate=fast".into()]).unwrap_err().to_string();
        assert!(e.contains("learning_rate"), "{e}");
        let e = Config::resolve("cleanrl", Some("gamma = ["), &[]).unwrap_err().to_string();
        assert!(e.contains("malformed TOML"), "{e}");
        let e = Config::resolve("cleanrl", None, &["gamma=1.5".into()]).unwrap_err().to_string();
        assert!(e.contains("gamma"), "{e}");
        assert!(Config::resolve("clenrl", None, &[]).unwrap_err().to_string().contains("did you mean `cleanrl`"));
        for v in ["50", "-20.5", "nan", "inf"] {
            let e = Config::resolve("cleanrl", None, &[format!("log_std_init={v}")]).unwrap_err().to_string();
            assert!(e.contains("log_std_init") && e.contains("[-20, 20]"), "log_std_init = {v}: {e}");
        }
        for v in ["20", "-20", "-0.5"] {
            assert!(Config::resolve("cleanrl", None, &[format!("log_std_init={v}")]).is_ok(), "log_std_init = {v}");
        }
    }

    #[test]
    fn keys_are_the_struct_fields_and_the_toml_writes_each_once() {
        let keys = Config::keys();
        assert_eq!(keys.len(), 67);
        assert_eq!((keys[0], keys[66]), ("algo", "num_aux_rollouts"), "declaration order");
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "no key twice");
        for p in PRESETS {
            // Every key written, optional ones included ("none", "auto"), and nothing else.
            let table: toml::Table = Config::preset(p).unwrap().to_toml().parse().unwrap();
            let mut written: Vec<&str> = table.keys().map(String::as_str).collect();
            written.sort_unstable();
            assert_eq!(written, unique, "{p}");
        }
        for k in OPTIONAL_KEYS {
            assert!(keys.contains(&k), "{k}");
            let c = Config::resolve("cleanrl", None, &[format!("{k}=none")]).unwrap();
            assert!(c.to_toml().contains(&format!("{k} = \"none\"")), "{k}");
        }
    }

    #[test]
    fn a_valid_config_is_validated_again_only_for_another_number_of_ranks() {
        // cleanrl's rollout is 4 × 128 = 512: a global minibatch of 1024 needs 2 ranks.
        let sets = ["batch_size=1024".to_string()];
        let two = Config::resolve_over("cleanrl", None, &sets, 2).unwrap();
        assert_eq!(two.ranks(), 2);
        assert_eq!(two.clone().into_valid_config(2).unwrap(), two);
        let e = two.clone().into_valid_config(1).unwrap_err().to_string();
        assert!(e.contains("batch_size = 1024 does not divide the rollout"), "{e}");
        assert!(Config::layered("cleanrl", None, &sets).unwrap().validate().is_err());
        let one = Config::resolve_over("cleanrl", None, &[], 0).unwrap();
        assert_eq!(one.ranks(), 1, "0 ranks count as 1");
        let config = one.clone().into_config();
        assert_eq!(config.into_valid_config(1).unwrap(), one);
    }

    #[test]
    fn an_unknown_algo_is_named_after_type_errors_with_its_own_message() {
        let e = Config::resolve("cleanrl", Some("algo = \"sacc\""), &[]).unwrap_err().to_string();
        assert!(e.ends_with("algo = `sacc` (did you mean `sac`?): known algorithms are ppo, a2c, a3c, trpo, reinforce, ppg, sac, td3, ddpg"), "{e}");
        let e = Config::resolve("cleanrl", Some("algo = \"sacc\"\nlearning_rate = \"x\""), &[]).unwrap_err();
        assert!(e.to_string().contains("in `learning_rate`"), "{e}");
        let e = Config::resolve("cleanrl", None, &["algo=5".into()]).unwrap_err().to_string();
        assert!(e.ends_with("expected a string in `algo`"), "{e}");
        assert_eq!(Config::resolve("cleanrl", None, &["algo=td3".into()]).err().map(|_| ()), Some(()));
        assert_eq!(Config::resolve("a2c", None, &["algo=a3c".into()]).unwrap().algo, AlgoName::A3c);
    }

    /// Keys added after the first release: a saved config without them still loads.
    const LEGACY_KEYS: [&str; 42] = [
        "anneal_clip_range",
        "clip_range_vf",
        "max_grad_norm",
        "target_kl",
        "normalize_observation",
        "normalize_reward",
        "clip_obs",
        "clip_reward",
        "policy",
        "backend",
        "vector_env",
        "objective",
        "kl_coef",
        "kl_target",
        "optimizer",
        "rms_prop_alpha",
        "rms_prop_eps",
        "n_workers",
        "cg_max_steps",
        "cg_damping",
        "line_search_shrinking_factor",
        "line_search_max_iter",
        "n_critic_updates",
        "baseline",
        "buffer_size",
        "learning_starts",
        "tau",
        "train_freq",
        "gradient_steps",
        "target_update_interval",
        "target_entropy",
        "save_replay_buffer",
        "n_critics",
        "policy_delay",
        "target_policy_noise",
        "target_noise_clip",
        "noise_std",
        "n_iteration",
        "e_policy",
        "e_auxiliary",
        "beta_clone",
        "num_aux_rollouts",
    ];

    #[test]
    fn a_config_saved_before_the_legacy_keys_loads_with_their_old_values() {
        let full: toml::Table = Config::preset("cleanrl").unwrap().to_toml().parse().unwrap();
        let old: toml::Table = full
            .iter()
            .filter(|(k, _)| !LEGACY_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let loaded: Config = toml::Value::Table(old.clone()).try_into().unwrap();
        // Every legacy value is cleanrl's (the values the first runs had), except the backend:
        // those runs trained on candle. Absent optional numbers read as absent.
        let expected = Config {
            backend: Backend::Candle,
            clip_range_vf: None,
            max_grad_norm: None,
            ..Config::preset("cleanrl").unwrap()
        };
        assert_eq!(loaded, expected);
        for k in old.keys() {
            let mut without = old.clone();
            without.remove(k);
            let e = toml::Value::Table(without).try_into::<Config>().unwrap_err().to_string();
            assert!(e.contains(&format!("missing field `{k}`")), "{k} is required: {e}");
        }
    }
}
