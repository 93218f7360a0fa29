//! `proxima._proxima`: the extension module under the `proxima` Python package (maturin builds
//! it from `pyproject.toml`). It holds [`model::Model`] — a training run or a loaded policy —,
//! [`lm::PyGrpoTrainer`] — GRPO on a Hugging Face model, `proxima.lm`'s engine — and the error
//! mapping; the package's Python layer (`python/proxima/`) gives it
//! Stable-Baselines3's API (constructors, keyword checks, spaces, callbacks, evaluation).
//!
//! Everything heavy runs in Rust with the GIL released; envs written in Python take it back for
//! their own calls only (the bridge's `GymEnv`, `GymVectorEnv`).

mod envs;
mod errors;
mod lm;
mod model;
mod settings;

use pyo3::prelude::*;

/// The module `proxima._proxima`.
#[pymodule]
fn _proxima(m: &Bound<'_, PyModule>) -> PyResult<()> {
    proxima_gym::register(); // `gym:ID` ids make Gymnasium envs in this interpreter
    m.add_class::<model::Model>()?;
    m.add_class::<lm::PyRewardedTrainer>()?;
    m.add_class::<lm::PyTrainer>()?;
    m.add_class::<lm::PyCausalLm>()?;
    m.add("NATIVE_ENV_IDS", proxima::env::NATIVE_ENV_IDS.to_vec())?;
    m.add("PRESETS", proxima::config::PRESETS.to_vec())?;
    m.add("CONFIG_KEYS", proxima::config::Config::keys())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(parse_atari_id, m)?)?;
    m.add_function(wrap_pyfunction!(preset_keys_unread, m)?)?;
    m.add_function(wrap_pyfunction!(ignored_keys, m)?)?;
    Ok(())
}

/// Each key the run of `config_toml` (a model's `config_toml`) does not read, with why, in the
/// words `train --set` refuses it with (TD3's `ent_coef`): SB3 has no such attribute either. It
/// reads the text alone, so a callback may ask while the model trains.
///
/// Errors: `ValueError` for a config that does not parse.
#[pyfunction]
fn ignored_keys(config_toml: &str) -> PyResult<std::collections::HashMap<&'static str, String>> {
    let preset = proxima::config::Config::saved_preset(config_toml);
    let cfg = proxima::config::Config::layered(&preset, Some(config_toml), &[])
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok(proxima::config::Config::keys().into_iter().filter_map(|k| cfg.ignored_key(k).map(|why| (k, why))).collect())
}

/// The keys preset `preset` gives its own on-policy algorithm that `algo` does not read
/// (`paper-atari`'s `n_epochs`, `batch_size`, `clip_range` for `a2c`), for `from_preset`'s
/// warning; empty for the algorithm's own preset (`Config::preset_keys_unread`).
///
/// Errors: `ValueError` for an unknown algorithm.
#[pyfunction]
fn preset_keys_unread(preset: &str, algo: &str) -> PyResult<Vec<&'static str>> {
    let algo = algo
        .parse::<proxima::config::AlgoName>()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok(proxima::config::Config::preset_keys_unread(preset, algo))
}

/// What an `atari:` id names, read by the parser training uses: `(game_id, options)`, the
/// Gymnasium id of the game (`"ALE/Breakout-v5"`) and the wrappers' settings by SB3's names
/// (`noop_max`, `frame_skip`, `screen_size`, `terminal_on_life_loss`, `clip_reward`,
/// `frame_stack`, `repeat_action_probability`), defaults filled in.
///
/// Errors: `ValueError` for an id without the `atari:` prefix or one training refuses (an unknown
/// option, a bad value), with training's message.
#[pyfunction]
fn parse_atari_id(py: Python<'_>, env_id: &str) -> PyResult<(String, Py<pyo3::types::PyDict>)> {
    use proxima::env::atari::{parse_atari_spec, ATARI_PREFIX};
    let bad = pyo3::exceptions::PyValueError::new_err;
    let spec =
        env_id.strip_prefix(ATARI_PREFIX).ok_or_else(|| bad(format!("{env_id:?} is not an `{ATARI_PREFIX}` id")))?;
    let spec = parse_atari_spec(spec).map_err(|e| bad(e.to_string()))?;
    let o = &spec.options;
    let options = pyo3::types::PyDict::new(py);
    options.set_item("noop_max", o.noop_max)?;
    options.set_item("frame_skip", o.frame_skip)?;
    options.set_item("screen_size", o.screen_size)?;
    options.set_item("terminal_on_life_loss", o.terminal_on_life_loss)?;
    options.set_item("clip_reward", o.clip_reward)?;
    options.set_item("frame_stack", o.frame_stack)?;
    options.set_item("repeat_action_probability", o.repeat_action_probability)?;
    Ok((spec.game_id, options.unbind()))
}
