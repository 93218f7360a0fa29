//! Layering: a run's config is its preset, then the TOML of a config file, then `--set
//! key=value` overrides (the CLI's explicit flags come last, on the layered config), then one
//! validation.

use super::validate::COUNTS_FROM_ONE;
use super::{AlgoName, Config, ValidConfig, OPTIONAL_KEYS};
use crate::error::{ProximaError, Result};

impl Config {
    /// Resolves a config: `preset`, then the TOML text of a config file (if any; an `env_id`
    /// key there, as a run's `config.toml` records it, is ignored), then `key=value` overrides
    /// (values in TOML syntax; a bare word is taken as a string, and `none` clears an optional
    /// key), then validation.
    ///
    /// # Errors
    /// `Config` for an unknown preset or key (with a suggestion), malformed TOML, a value of
    /// the wrong type, or a value out of range.
    pub fn resolve(preset: &str, file_toml: Option<&str>, sets: &[String]) -> Result<ValidConfig> {
        Self::resolve_over(preset, file_toml, sets, 1)
    }

    /// [`Config::resolve`] for a run over `ranks` processes ([`Config::validate_over`]).
    ///
    /// # Errors
    /// As [`Config::resolve`].
    pub fn resolve_over(preset: &str, file_toml: Option<&str>, sets: &[String], ranks: usize) -> Result<ValidConfig> {
        Self::layered(preset, file_toml, sets)?.validate_over(ranks)
    }

    /// [`Config::resolve`] without the validation, for a caller that changes the config further
    /// (the CLI's `--seed`, a resumed run's `--total-timesteps`) and then validates it once.
    ///
    /// # Errors
    /// As [`Config::resolve`], but for values out of range.
    pub fn layered(preset: &str, file_toml: Option<&str>, sets: &[String]) -> Result<Config> {
        let mut table =
            toml::Table::try_from(Config::preset(preset)?).map_err(|e| ProximaError::Config(e.to_string()))?;
        let preset_table = table.clone();
        if let Some(text) = file_toml {
            for (k, v) in parse_file(text)? {
                if k == "env_id" {
                    continue; // recorded in a run's config.toml for reference; the command line names the env
                }
                check_key(&k)?;
                table.insert(k, v);
            }
        }
        for s in sets {
            apply_set(&mut table, s)?;
        }
        whole_floats_as_integers(&mut table, &preset_table);
        from_table(table)
    }

    /// The keys a resolve of `preset`, `file_toml` and `sets` sets by the user's choice (the
    /// input of [`Config::check_keys_used`]): every `--set` key, and a file's keys whose value
    /// differs from the preset's (a run's own `config.toml` lists every key; those at the
    /// preset's value are no choice). Unreadable input gives no keys: [`Config::resolve`]
    /// reports it.
    pub fn chosen_keys(preset: &str, file_toml: Option<&str>, sets: &[String]) -> Vec<String> {
        let mut keys: Vec<String> =
            sets.iter().filter_map(|s| s.split_once('=')).map(|(k, _)| k.trim().to_string()).collect();
        let base = Config::preset(preset).ok().and_then(|c| toml::Table::try_from(&c).ok()).unwrap_or_default();
        if let Some(file) = file_toml.and_then(|t| t.parse::<toml::Table>().ok()) {
            keys.extend(file.into_iter().filter(|(k, v)| k != "env_id" && base.get(k) != Some(v)).map(|(k, _)| k));
        }
        keys
    }
}

/// A config file's TOML as a table.
///
/// # Errors
/// `Config`: "malformed TOML at line L, column C: …", on one line.
fn parse_file(text: &str) -> Result<toml::Table> {
    text.parse().map_err(|e: toml::de::Error| {
        let at = e.span().map(|r| {
            let before = &text[..r.start.min(text.len())];
            format!(
                " at line {}, column {}",
                before.matches('\n').count() + 1,
                before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1
            )
        });
        ProximaError::Config(format!(
            "malformed TOML{}: {}",
            at.unwrap_or_default(),
            e.message().trim().replace('\n', "; ")
        ))
    })
}

/// One `--set key=value` into `table`: the value in TOML syntax, a bare word as a string;
/// `none` (or nothing) removes an optional key, which then reads as absent.
///
/// # Errors
/// `Config` for a missing `=` or an unknown key.
fn apply_set(table: &mut toml::Table, set: &str) -> Result<()> {
    let (k, v) =
        set.split_once('=').ok_or_else(|| ProximaError::Config(format!("`--set {set}`: expected key=value")))?;
    let (k, v) = (k.trim(), v.trim());
    check_key(k)?;
    // `none` clears an optional key; elsewhere it is a value (`objective=none`).
    if OPTIONAL_KEYS.contains(&k) && (v.eq_ignore_ascii_case("none") || v.is_empty()) {
        table.remove(k);
        return Ok(());
    }
    let value = match format!("x = {v}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("x").expect("parsed key"),
        Err(_) => toml::Value::String(v.to_string()),
    };
    table.insert(k.to_string(), value);
    Ok(())
}

/// The config `table` holds, types checked by serde.
///
/// An unknown `algo` name is reported after the other keys' type errors, with its own message
/// ([`AlgoName`]'s `FromStr`): its place and words from when `algo` was a string that
/// validation checked, rather than serde's wording.
///
/// # Errors
/// `Config` with serde's message for a value of the wrong type, or the unknown `algo`.
fn from_table(mut table: toml::Table) -> Result<Config> {
    let unknown_algo = match table.get("algo") {
        Some(toml::Value::String(name)) => name.parse::<AlgoName>().err(),
        _ => None,
    };
    if unknown_algo.is_some() {
        table.insert("algo".into(), AlgoName::Ppo.as_str().into());
    }
    let cfg: Config = toml::Value::Table(table.clone())
        .try_into()
        .map_err(|e: toml::de::Error| ProximaError::Config(in_config_words(e.to_string().trim(), &table)))?;
    match unknown_algo {
        Some(e) => Err(e),
        None => Ok(cfg),
    }
}

/// serde's message for a value of the wrong type or sign (``invalid value: integer `-1`, expected
/// usize in `gradient_steps` ``) in the config's words: "`gradient_steps` = -1: must be a whole
/// number ≥ 0", with what SB3 users write there and Proxima does not take; the value as `table`
/// (the config being read) has it, and for a name (an enum) the names it takes. Another message
/// comes back as it is, on one line.
fn in_config_words(serde: &str, table: &toml::Table) -> String {
    let one_line = serde.replace('\n', " ");
    let parsed = one_line.split_once(", expected ").and_then(|(got, rest)| {
        let (expected, key) = rest.rsplit_once(" in `")?;
        let value = got.strip_prefix("invalid value: ").or_else(|| got.strip_prefix("invalid type: "))?;
        Some((key.strip_suffix('`')?, expected, value))
    });
    let Some((key, expected, value)) = parsed else { return one_line };
    let given = table.get(key);
    // serde names an element's value when an element is wrong, "sequence" when the list is.
    let element = matches!(given, Some(toml::Value::Array(_))) && value != "sequence";
    let value = match given {
        Some(v) => v.to_string(),
        None => value.to_string(),
    };
    let every = if element { "every element " } else { "" };
    let must = match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" if COUNTS_FROM_ONE.contains(&key) => "a whole number ≥ 1".to_string(),
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number ≥ 0".to_string(),
        "i64" | "i32" => "a whole number".to_string(),
        "f64" | "f32" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "string only" => names_of(key, table).unwrap_or_else(|| "a name (a string)".into()),
        other => other.to_string(),
    };
    let sb3 = match (key, value.as_str()) {
        ("gradient_steps", "-1") => {
            " (SB3's -1, as many gradient steps as env steps, is not supported yet: give the number)"
        }
        ("train_freq", v) if v.contains("episode") => " (env steps; SB3's (n, \"episode\") is not supported yet)",
        _ => "",
    };
    format!("`{key}` = {value}: {every}must be {must}{sb3}")
}

/// The names an enum-valued `key` takes, as serde lists them for a name it does not know
/// ("one of `minibatch`, `batch`, `off`"), or `None`.
fn names_of(key: &str, table: &toml::Table) -> Option<String> {
    let mut probe = table.clone();
    probe.insert(key.to_string(), toml::Value::String("\u{1}".into()));
    let e = toml::Value::Table(probe).try_into::<Config>().err()?.to_string().trim().replace('\n', " ");
    let names = e.split_once("expected ")?.1.rsplit_once(" in `")?.0;
    names.starts_with("one of").then(|| names.to_string())
}

/// An integer key given a whole number written as a float (`buffer_size=1e6`, as rl-zoo's YAML
/// and SB3's docs write it) takes its integer value; other floats stay and fail serde's check.
fn whole_floats_as_integers(table: &mut toml::Table, preset: &toml::Table) {
    for (k, v) in table.iter_mut() {
        if let (Some(toml::Value::Integer(_)), toml::Value::Float(f)) = (preset.get(k), &*v) {
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 {
                *v = toml::Value::Integer(*f as i64);
            }
        }
    }
}

/// What Proxima says to a user who asks for a device (`device = "cuda"`, `--device`).
pub const CPU_ONLY: &str =
    "Proxima trains on the CPU (the fused kernels, or candle on the CPU); there is no CUDA build, \
                            and `num_threads` sets how many cores a run uses";

/// `Config` for a key the config does not have, with the closest one when there is one.
fn check_key(k: &str) -> Result<()> {
    let keys = Config::keys();
    if keys.contains(&k) {
        return Ok(());
    }
    let hint = match k {
        // What other libraries' users reach for first: say what Proxima does instead.
        "device" => format!(": {CPU_ONLY}"),
        "noop_max"
        | "frame_skip"
        | "screen_size"
        | "frame_stack"
        | "terminal_on_life_loss"
        | "clip_reward"
        | "repeat_action_probability" => format!(
            ": an Atari wrapper's option, which goes in the env id: `atari:Breakout?{k}=…` (several joined by `&`)"
        ),
        "precision" | "dtype" => {
            ": Proxima trains in float32 on every backend; there is no other precision to choose".to_string()
        }
        _ => crate::did_you_mean::closest(k, &keys).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default(),
    };
    Err(ProximaError::Config(format!("unknown key `{k}`{hint}")))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for (set, says) in [
            ("learning_starts=-1", "`learning_starts` = -1: must be a whole number ≥ 0"),
            ("top_quantiles_to_drop_per_net=-2", "`top_quantiles_to_drop_per_net` = -2: must be a whole number ≥ 0"),
            ("gradient_steps=-1", "`gradient_steps` = -1: must be a whole number ≥ 1 (SB3's -1"),
            ("train_freq=1episode", "`train_freq` = \"1episode\": must be a whole number ≥ 1 (env steps; SB3's"),
            ("tau=abc", "`tau` = \"abc\": must be a number"),
            ("normalize_advantage=3", "`normalize_advantage` = 3: must be one of `minibatch`, `batch`, `off`"),
            ("net_arch=[64, -1]", "`net_arch` = [64, -1]: every element must be a whole number ≥ 0"),
            ("num_threads=-1", "`num_threads` = -1: must be a whole number ≥ 1"),
        ] {
            let e = Config::resolve("tqc", None, &[set.into()]).unwrap_err().to_string();
            assert!(e.contains(says), "{set}: {e}");
        }
        let e = Config::resolve("paper-atari", None, &["frame_stack=0".into()]).unwrap_err().to_string();
        assert!(e.contains("`atari:Breakout?frame_stack=…`"), "{e}");
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
    fn an_unknown_algo_is_named_after_type_errors_with_its_own_message() {
        let e = Config::resolve("cleanrl", Some("algo = \"sacc\""), &[]).unwrap_err().to_string();
        assert!(e.ends_with("algo = `sacc` (did you mean `sac`?): known algorithms are ppo, a2c, a3c, trpo, reinforce, ppg, sac, td3, ddpg, tqc"), "{e}");
        let e = Config::resolve("cleanrl", Some("algo = \"sacc\"\nlearning_rate = \"x\""), &[]).unwrap_err();
        assert!(e.to_string().contains("`learning_rate` = \"x\": must be a number"), "{e}");
        let e = Config::resolve("cleanrl", None, &["algo=5".into()]).unwrap_err().to_string();
        assert!(e.ends_with("`algo` = 5: must be a string"), "{e}");
        assert_eq!(Config::resolve("cleanrl", None, &["algo=td3".into()]).err().map(|_| ()), Some(()));
        assert_eq!(Config::resolve("a2c", None, &["algo=a3c".into()]).unwrap().algo, AlgoName::A3c);
    }
}
