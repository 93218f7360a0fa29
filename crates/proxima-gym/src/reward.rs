//! Reward functions written in Python, for the language-model trainers: a callable called as
//! TRL's `GRPOTrainer` calls its `reward_funcs` — `func(prompts=..., completions=...,
//! completion_ids=..., **columns)`, one list entry per completion, the dataset's other columns
//! passed by name; for a conversational dataset the prompts as their messages and each
//! completion as `[{"role": "assistant", "content": ...}]` — returning one float (or `None`) per
//! completion. The CLI imports one by `module:function` ([`PythonReward::import`]); the Python
//! package passes the user's callable ([`PythonReward::new`]).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};

/// A Python callable used as a reward function.
pub struct PythonReward {
    func: Py<PyAny>,
    name: String,
}

impl PythonReward {
    /// `func`, reported as `name`.
    pub fn new(func: Py<PyAny>, name: String) -> PythonReward {
        PythonReward { func, name }
    }

    /// The function `function` of the module `module` (`spec` = `module:function`, the module
    /// found on the user's `sys.path` with `dir` first — the directory the run was started in —
    /// as `python -c` run there finds it).
    ///
    /// # Errors
    /// The text of the error: a malformed spec, no embedded Python or the wrong one
    /// ([`crate::init`]'s, without needing gymnasium), the import's traceback, a missing or
    /// non-callable attribute.
    pub fn import(spec: &str, dir: &std::path::Path) -> std::result::Result<PythonReward, String> {
        let Some((module, function)) = spec.split_once(':').filter(|(m, f)| !m.is_empty() && !f.is_empty()) else {
            return Err(format!(
                "--reward {spec:?}: expected MODULE:FUNCTION (a function in MODULE.py or an installed module)"
            ));
        };
        crate::init_interpreter().map_err(|e| e.to_string())?;
        Python::attach(|py| {
            let sys_path = py.import("sys").and_then(|s| s.getattr("path")).map_err(|e| crate::py_err(py, e))?;
            let _ = sys_path.call_method1("insert", (0, dir.display().to_string()));
            let m = py
                .import(module)
                .map_err(|e| format!("--reward {spec}: importing `{module}` failed:\n{}", crate::py_err(py, e)))?;
            let f =
                m.getattr(function).map_err(|_| format!("--reward {spec}: module `{module}` has no `{function}`"))?;
            if !f.is_callable() {
                return Err(format!("--reward {spec}: `{module}.{function}` is not callable"));
            }
            Ok(PythonReward { func: f.unbind(), name: function.to_string() })
        })
    }

    /// The name it is logged under (`rewards/{name}/mean`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One reward (or `None`) per completion.
    ///
    /// # Errors
    /// The function's exception; a `TypeError` when it returns anything but a list of floats or
    /// `None`s (the length is the caller's to check).
    pub fn call(
        &self,
        prompts: &[String],
        completions: &[String],
        completion_ids: &[Vec<u32>],
        columns: &[Map<String, Value>],
    ) -> PyResult<Vec<Option<f64>>> {
        Python::attach(|py| {
            let kwargs = PyDict::new(py);
            let json = py.import("json")?;
            let from_json = |v: &Value| json.call_method1("loads", (v.to_string(),));
            for key in columns.first().map(|c| c.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                if key != "prompt" {
                    let values: Vec<Value> =
                        columns.iter().map(|c| c.get(&key).cloned().unwrap_or(Value::Null)).collect();
                    kwargs.set_item(&key, from_json(&Value::Array(values))?)?;
                }
            }
            if columns.first().is_some_and(|c| c.get("prompt").is_some_and(Value::is_array)) {
                let messages: Vec<Value> = columns.iter().map(|c| c["prompt"].clone()).collect();
                let replies: Vec<Value> =
                    completions.iter().map(|c| serde_json::json!([{"role": "assistant", "content": c}])).collect();
                kwargs.set_item("prompts", from_json(&Value::Array(messages))?)?;
                kwargs.set_item("completions", from_json(&Value::Array(replies))?)?;
            } else {
                kwargs.set_item("prompts", prompts.to_vec())?;
                kwargs.set_item("completions", completions.to_vec())?;
            }
            kwargs.set_item("completion_ids", completion_ids.to_vec())?;
            let out = self.func.bind(py).call((), Some(&kwargs))?;
            out.extract::<Vec<Option<f64>>>().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "reward function `{}` must return a list of floats (or None), one per completion; it returned {}",
                    self.name,
                    out.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
            })
        })
    }

    /// A Python exception as text, its traceback formatted as Python prints it.
    pub fn describe(e: PyErr) -> String {
        Python::attach(|py| crate::py_err(py, e))
    }
}
