//! `proxima.lm`'s engines on a Hugging Face model directory: SFT and DPO
//! ([`proxima_lm::hf::SftTrainer`], [`proxima_lm::hf::DpoTrainer`]), and GRPO and RLHF-PPO
//! ([`proxima_lm::hf::GrpoTrainer`], [`proxima_lm::hf::PpoTrainer`]) with reward functions that
//! are Python callables, called as TRL calls them (`func(prompts=..., completions=...,
//! completion_ids=..., **columns)`, one list entry per completion). The trainers work with the
//! GIL released; a reward function's exception is raised as itself.

use crate::errors::IntoPy;
use proxima::ProximaError;
use proxima_gym::reward::PythonReward;
use proxima_lm::hf::{
    generate, CausalLm, DpoArgs, DpoTrainer, GrpoArgs, GrpoTrainer, HfTokenizer, PpoArgs, PpoTrainer, RewardFunction,
    SamplingConfig, SftArgs, SftTrainer,
};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

/// A Python callable as a reward function; its exception is kept in `error`.
struct PyReward {
    func: PythonReward,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl RewardFunction for PyReward {
    fn name(&self) -> String {
        self.func.name().to_string()
    }

    fn call(
        &mut self,
        prompts: &[String],
        completions: &[String],
        completion_ids: &[Vec<u32>],
        columns: &[Map<String, Value>],
    ) -> proxima::Result<Vec<Option<f64>>> {
        self.func.call(prompts, completions, completion_ids, columns).map_err(|e| {
            let msg = e.to_string();
            if let Ok(mut slot) = self.error.lock() {
                *slot = Some(e);
            }
            ProximaError::UserCode(format!("reward function `{}` raised {msg}", self.func.name()))
        })
    }
}

/// The trainers rewarded by Python functions.
enum Rewarded {
    Grpo(GrpoTrainer),
    Ppo(PpoTrainer),
}

impl Rewarded {
    fn step(&mut self) -> proxima::Result<String> {
        Ok(match self {
            Rewarded::Grpo(t) => t.step()?.to_json().to_string(),
            Rewarded::Ppo(t) => t.step()?.to_string(),
        })
    }

    fn steps(&self) -> (u64, u64) {
        match self {
            Rewarded::Grpo(t) => (t.global_step, t.args.max_steps),
            Rewarded::Ppo(t) => (t.global_step, t.args.max_steps),
        }
    }

    fn model(&self) -> &CausalLm {
        match self {
            Rewarded::Grpo(t) => &t.model,
            Rewarded::Ppo(t) => &t.model,
        }
    }
}

/// GRPO or RLHF-PPO on a Hugging Face model (the engine of `proxima.lm.GRPOTrainer` and
/// `PPOTrainer`).
#[pyclass(name = "_RewardedTrainer", module = "proxima._proxima")]
pub struct PyRewardedTrainer {
    inner: Mutex<Rewarded>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl PyRewardedTrainer {
    /// `r`'s error, or the reward function's own exception where one caused it.
    fn raise<T>(&self, r: proxima::Result<T>) -> PyResult<T> {
        r.map_err(|e| self.error.lock().ok().and_then(|mut s| s.take()).unwrap_or_else(|| crate::errors::to_py(e)))
    }

    fn trainer(&self) -> PyResult<std::sync::MutexGuard<'_, Rewarded>> {
        self.inner.try_lock().map_err(|_| PyRuntimeError::new_err("the trainer is busy (training in another thread)"))
    }
}

#[pymethods]
impl PyRewardedTrainer {
    /// `kind`: "grpo" or "ppo"; `model_dir`: a Hugging Face model directory; `args_json`: the
    /// `GRPOConfig` or `PPOConfig` fields Proxima reads, as JSON; `rows`: the dataset, one JSON
    /// object per row; `reward_funcs`: (name, callable) pairs.
    #[new]
    fn new(
        py: Python<'_>,
        kind: &str,
        model_dir: std::path::PathBuf,
        args_json: &str,
        rows: Vec<String>,
        reward_funcs: Vec<(String, Py<PyAny>)>,
    ) -> PyResult<Self> {
        let dataset = parse_rows(&rows)?;
        let error = Arc::new(Mutex::new(None));
        let funcs: Vec<Box<dyn RewardFunction>> = reward_funcs
            .into_iter()
            .map(|(name, func)| {
                Box::new(PyReward { func: PythonReward::new(func, name), error: error.clone() })
                    as Box<dyn RewardFunction>
            })
            .collect();
        let trainer = match kind {
            "grpo" => {
                let args: GrpoArgs = config("GRPOConfig", args_json)?;
                py.detach(|| -> proxima::Result<Rewarded> {
                    let (model, tok) = (CausalLm::load(&model_dir)?, HfTokenizer::load(&model_dir)?);
                    Ok(Rewarded::Grpo(GrpoTrainer::new(model, tok, funcs, args, dataset)?))
                })
            }
            "ppo" => {
                let args: PpoArgs = config("PPOConfig", args_json)?;
                py.detach(|| -> proxima::Result<Rewarded> {
                    let (model, tok) = (CausalLm::load(&model_dir)?, HfTokenizer::load(&model_dir)?);
                    Ok(Rewarded::Ppo(PpoTrainer::new(model, tok, funcs, args, dataset)?))
                })
            }
            other => return Err(pyo3::exceptions::PyValueError::new_err(format!("no trainer {other:?} (grpo, ppo)"))),
        }
        .py()?;
        Ok(PyRewardedTrainer { inner: Mutex::new(trainer), error })
    }

    /// One generation batch (GRPO) or update (PPO) and its optimiser steps; its log row as JSON.
    fn step(&self, py: Python<'_>) -> PyResult<String> {
        let mut guard = self.trainer()?;
        let tr: &mut Rewarded = &mut guard;
        let r = py.detach(|| tr.step());
        self.raise(r)
    }

    /// Whether `max_steps` steps are done.
    fn is_done(&self) -> PyResult<bool> {
        let (done, max) = self.trainer()?.steps();
        Ok(done >= max)
    }

    /// Steps taken.
    #[getter]
    fn global_step(&self) -> PyResult<u64> {
        Ok(self.trainer()?.steps().0)
    }

    /// Writes the model (and the tokenizer's files) as a Hugging Face directory.
    fn save_model(&self, py: Python<'_>, dir: std::path::PathBuf) -> PyResult<()> {
        let guard = self.trainer()?;
        let model = guard.model();
        py.detach(|| model.save(&dir)).py()
    }
}

/// The trainers that need no Python callback.
enum Engine {
    Sft(SftTrainer),
    Dpo(DpoTrainer),
}

impl Engine {
    fn step(&mut self) -> proxima::Result<String> {
        let row = match self {
            Engine::Sft(t) => t.step().map(|_| t.log_history.last().cloned())?,
            Engine::Dpo(t) => Some(t.step()?.to_json()),
        };
        Ok(row.map(|r| r.to_string()).unwrap_or_default())
    }

    fn is_done(&self) -> bool {
        match self {
            Engine::Sft(t) => t.global_step >= t.args.max_steps,
            Engine::Dpo(t) => t.global_step >= t.args.max_steps,
        }
    }

    fn model(&self) -> &CausalLm {
        match self {
            Engine::Sft(t) => &t.model,
            Engine::Dpo(t) => &t.model,
        }
    }
}

/// SFT or DPO on a Hugging Face model (the engine of `proxima.lm.SFTTrainer` and `DPOTrainer`).
#[pyclass(name = "_Trainer", module = "proxima._proxima")]
pub struct PyTrainer {
    inner: Mutex<Engine>,
}

impl PyTrainer {
    fn engine(&self) -> PyResult<std::sync::MutexGuard<'_, Engine>> {
        self.inner.try_lock().map_err(|_| PyRuntimeError::new_err("the trainer is busy (training in another thread)"))
    }
}

fn config<T: serde::de::DeserializeOwned>(name: &str, json: &str) -> PyResult<T> {
    serde_json::from_str(json).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("{name}: {e}")))
}

#[pymethods]
impl PyTrainer {
    /// `kind`: "sft" or "dpo"; `model_dir`: a Hugging Face model directory; `args_json`: the
    /// `SFTConfig` or `DPOConfig` fields Proxima reads, as JSON; `rows`: the dataset, one JSON
    /// object per row.
    #[new]
    fn new(
        py: Python<'_>,
        kind: &str,
        model_dir: std::path::PathBuf,
        args_json: &str,
        rows: Vec<String>,
    ) -> PyResult<Self> {
        let dataset = parse_rows(&rows)?;
        let engine = match kind {
            "sft" => {
                let args: SftArgs = config("SFTConfig", args_json)?;
                py.detach(|| -> proxima::Result<Engine> {
                    let (model, tok) = (CausalLm::load(&model_dir)?, HfTokenizer::load(&model_dir)?);
                    Ok(Engine::Sft(SftTrainer::new(model, tok, args, &dataset)?))
                })
            }
            "dpo" => {
                let args: DpoArgs = config("DPOConfig", args_json)?;
                py.detach(|| -> proxima::Result<Engine> {
                    let (model, tok) = (CausalLm::load(&model_dir)?, HfTokenizer::load(&model_dir)?);
                    Ok(Engine::Dpo(DpoTrainer::new(model, &tok, args, &dataset)?))
                })
            }
            other => return Err(pyo3::exceptions::PyValueError::new_err(format!("no trainer {other:?} (sft, dpo)"))),
        }
        .py()?;
        Ok(PyTrainer { inner: Mutex::new(engine) })
    }

    /// One optimiser step; its log row as JSON.
    fn step(&self, py: Python<'_>) -> PyResult<String> {
        let mut guard = self.engine()?;
        let engine: &mut Engine = &mut guard;
        py.detach(|| engine.step()).py()
    }

    /// Whether `max_steps` optimiser steps are done.
    fn is_done(&self) -> PyResult<bool> {
        Ok(self.engine()?.is_done())
    }

    /// Writes the model (and the tokenizer's files) as a Hugging Face directory.
    fn save_model(&self, py: Python<'_>, dir: std::path::PathBuf) -> PyResult<()> {
        let guard = self.engine()?;
        let model = guard.model();
        py.detach(|| model.save(&dir)).py()
    }
}

/// The dataset's rows, each a JSON object.
fn parse_rows(rows: &[String]) -> PyResult<Vec<Map<String, Value>>> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| match serde_json::from_str::<Value>(row) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(pyo3::exceptions::PyValueError::new_err(format!("dataset row {i} is not a JSON object"))),
        })
        .collect()
}

/// A Hugging Face model for generation (the engine of `proxima.lm.CausalLM`).
#[pyclass(name = "_CausalLm", module = "proxima._proxima")]
pub struct PyCausalLm {
    inner: CausalLm,
}

#[pymethods]
impl PyCausalLm {
    /// Loads the model in `model_dir` (`config.json` and safetensors weights).
    #[new]
    fn new(py: Python<'_>, model_dir: std::path::PathBuf) -> PyResult<Self> {
        Ok(PyCausalLm { inner: py.detach(|| CausalLm::load(&model_dir)).py()? })
    }

    /// New tokens for each prompt (token ids), and whether each row ran to `max_new_tokens`
    /// without a stop token; `sampling_json`: [`proxima_lm::hf::SamplingConfig`]'s fields.
    fn generate(
        &self,
        py: Python<'_>,
        prompts: Vec<Vec<u32>>,
        sampling_json: &str,
        seed: u64,
    ) -> PyResult<(Vec<Vec<u32>>, Vec<bool>)> {
        let v: Value =
            serde_json::from_str(sampling_json).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        let bad = |k: &str, want: &str, x: &Value| {
            pyo3::exceptions::PyValueError::new_err(format!("{k} must be {want}, got {x}"))
        };
        let present = |k: &str| v.get(k).filter(|x| !x.is_null());
        let count = |k: &str, d: usize| -> PyResult<usize> {
            present(k).map_or(Ok(d), |x| x.as_u64().map(|n| n as usize).ok_or_else(|| bad(k, "an integer ≥ 0", x)))
        };
        let real = |k: &str, d: f64| -> PyResult<f64> {
            present(k)
                .map_or(Ok(d), |x| x.as_f64().filter(|f| f.is_finite()).ok_or_else(|| bad(k, "a finite number", x)))
        };
        let d = SamplingConfig::default();
        let stops = match present("stop_token_ids") {
            None => Vec::new(),
            Some(x) => {
                serde_json::from_value::<Vec<u32>>(x.clone()).map_err(|_| bad("eos_token_id", "token ids ≥ 0", x))?
            }
        };
        let cfg = SamplingConfig {
            max_new_tokens: count("max_new_tokens", d.max_new_tokens)?,
            do_sample: present("do_sample").and_then(Value::as_bool).unwrap_or(d.do_sample),
            temperature: real("temperature", d.temperature)?,
            top_k: count("top_k", d.top_k)?,
            top_p: real("top_p", d.top_p)?,
            stop_token_ids: stops,
            pad_token_id: count("pad_token_id", d.pad_token_id as usize)? as u32,
        };
        let model = &self.inner;
        let out = py
            .detach(|| {
                generate(
                    model,
                    &prompts,
                    &cfg,
                    &mut <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed),
                )
            })
            .py()?;
        Ok((out.tokens, out.truncated))
    }
}
