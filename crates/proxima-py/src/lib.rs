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
    Ok(())
}
