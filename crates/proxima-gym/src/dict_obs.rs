//! `Dict` and `Tuple` observation spaces (nested too), as Stable-Baselines3's `MultiInputPolicy`
//! reads the non-image ones: each key's observation flattened — a `Box` as its values, a
//! `Discrete` one-hot, a `MultiDiscrete` as its components' one-hots, a `MultiBinary` as its bits —
//! and the keys concatenated in the space's order (SB3's `CombinedExtractor` with `nn.Flatten`
//! per key over `preprocess_obs`). Gymnasium's `spaces.flatten` does exactly that, so an
//! observation crosses the bridge flattened by it, as one `Box` of `flatdim` values that the MLP
//! reads. Image keys (SB3 sends them through the Nature CNN) are refused.

use crate::py_err;
use proxima_env::{EnvError, Result};
use pyo3::prelude::*;

/// The space kinds this module flattens.
const STRUCTURED: [&str; 2] = ["Dict", "Tuple"];

/// A `Dict`/`Tuple` observation space and Gymnasium's `spaces.flatten`, to flatten the env's
/// observations with.
pub(crate) struct StructuredObs {
    space: Py<PyAny>,
    flatten: Py<PyAny>,
    /// The space as Gymnasium prints it (for errors).
    repr: String,
    /// The top-level keys (a `Tuple`'s indices) and their flat lengths, in the flat order.
    keys: Vec<(String, usize)>,
}

/// Whether `space` is a `Dict` or `Tuple` space.
pub(crate) fn is_structured(space: &Bound<'_, PyAny>) -> bool {
    let kind = space.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    STRUCTURED.contains(&kind.as_str())
}

impl StructuredObs {
    /// The flattening of `space` (a `Dict` or `Tuple`) and the `Box` it flattens to
    /// (`gymnasium.spaces.flatten_space`).
    ///
    /// # Errors
    /// `Unsupported` naming the key for an image key (a `uint8` `Box` of 3 dimensions) or a leaf
    /// space Gymnasium cannot flatten (`Text`, `Graph`, `Sequence`).
    pub(crate) fn new<'py>(py: Python<'py>, space: &Bound<'py, PyAny>, id: &str) -> Result<(Self, Bound<'py, PyAny>)> {
        check_leaves(space, "", id)?;
        let spaces = py.import("gymnasium.spaces").map_err(|e| EnvError::Env(py_err(py, e)))?;
        let repr = space.repr().map(|r| r.to_string()).unwrap_or_default();
        let flat = spaces.call_method1("flatten_space", (space,)).map_err(|e| {
            EnvError::Unsupported(format!("{id}: its observation space {repr} cannot be flattened: {}", py_err(py, e)))
        })?;
        let flatten = spaces.getattr("flatten").map_err(|e| EnvError::Env(py_err(py, e)))?.unbind();
        let keys = top_level_keys(&spaces, space).map_err(|e| EnvError::Env(format!("{id}: {}", py_err(py, e))))?;
        Ok((StructuredObs { space: space.clone().unbind(), flatten, repr, keys }, flat))
    }

    /// The top-level keys (a `Tuple`'s indices, as text) and their flat lengths, in the order
    /// the flat observation holds them ([`proxima_env::Env::observation_keys`]).
    pub(crate) fn keys(&self) -> Vec<(String, usize)> {
        self.keys.clone()
    }

    /// One observation of the space, flattened (a NumPy array of `flatdim` values).
    ///
    /// # Errors
    /// `Env` naming the env, the space and Gymnasium's complaint for an observation that does not
    /// fit the space (a missing key, a value of the wrong shape).
    pub(crate) fn flatten<'py>(&self, py: Python<'py>, obs: &Bound<'py, PyAny>, id: &str) -> Result<Bound<'py, PyAny>> {
        // The flattening's exception is not the env's own: its text only, not kept for re-raising.
        self.flatten.bind(py).call1((self.space.bind(py), obs)).map_err(|e| {
            EnvError::Env(format!(
                "{id} returned an observation that does not fit its observation_space {}: {e}",
                self.repr
            ))
        })
    }

    /// A vector env's batch of observations (`single` space's, batched as Gymnasium batches
    /// them), flattened row by row into `[n, flatdim]`.
    ///
    /// # Errors
    /// As [`StructuredObs::flatten`].
    pub(crate) fn flatten_batch<'py>(
        &self,
        py: Python<'py>,
        batched_space: &Bound<'py, PyAny>,
        obs: &Bound<'py, PyAny>,
        id: &str,
    ) -> Result<Bound<'py, PyAny>> {
        let fit = |e: PyErr| {
            EnvError::Env(format!(
                "{id} returned observations that do not fit its observation_space {}: {e}",
                self.repr
            ))
        };
        let iterate = py.import("gymnasium.vector.utils").and_then(|u| u.getattr("iterate")).map_err(fit)?;
        let rows = iterate.call1((batched_space, obs)).map_err(fit)?;
        let mut flat = Vec::new();
        for row in rows.try_iter().map_err(fit)? {
            flat.push(self.flatten(py, &row.map_err(fit)?, id)?);
        }
        py.import("numpy").and_then(|np| np.call_method1("stack", (flat,))).map_err(fit)
    }
}

/// `space`'s top-level keys (a `Dict`'s names in its order, a `Tuple`'s indices) with each one's
/// `gymnasium.spaces.flatdim`.
fn top_level_keys(spaces: &Bound<'_, PyAny>, space: &Bound<'_, PyAny>) -> PyResult<Vec<(String, usize)>> {
    let children = space.getattr("spaces")?;
    let named: Vec<(String, Bound<'_, PyAny>)> = if children.hasattr("items")? {
        children.call_method0("items")?.try_iter()?.map(|i| i?.extract()).collect::<PyResult<_>>()?
    } else {
        children.try_iter()?.enumerate().map(|(i, v)| Ok((i.to_string(), v?))).collect::<PyResult<_>>()?
    };
    named.into_iter().map(|(k, v)| Ok((k, spaces.call_method1("flatdim", (v,))?.extract()?))).collect()
}

/// Refuses the leaves of a structured space that SB3's `MultiInputPolicy` would not flatten:
/// image keys (they go through its CNN) and spaces without a flat form.
fn check_leaves(space: &Bound<'_, PyAny>, path: &str, id: &str) -> Result<()> {
    let kind = space.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    let children: Vec<(String, Bound<'_, PyAny>)> = match kind.as_str() {
        "Dict" => {
            let items = space.getattr("spaces").and_then(|s| s.call_method0("items"));
            let items = items.and_then(|i| i.try_iter()).map_err(|e| EnvError::Env(e.to_string()))?;
            let mut out = Vec::new();
            for item in items {
                let (k, v): (String, Bound<'_, PyAny>) =
                    item.and_then(|i| i.extract()).map_err(|e| EnvError::Unsupported(format!("{id}: {e}")))?;
                out.push((format!("{path}[{k:?}]"), v));
            }
            out
        }
        "Tuple" => {
            let items = space.getattr("spaces").and_then(|s| s.try_iter()).map_err(|e| EnvError::Env(e.to_string()))?;
            items.enumerate().filter_map(|(i, v)| Some((format!("{path}[{i}]"), v.ok()?))).collect()
        }
        "Box" => {
            let shape: Vec<usize> = space.getattr("shape").and_then(|s| s.extract()).unwrap_or_default();
            let dtype = space.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
            if dtype == "uint8" && shape.len() == 3 {
                return Err(EnvError::Unsupported(format!(
                    "{id}: the observation key {path} is an image (Box{shape:?}, uint8); MultiInputPolicy's CNN for image keys is not supported yet (flatten it into a vector, or observe the image alone with CnnPolicy)"
                )));
            }
            return Ok(());
        }
        "Discrete" | "MultiDiscrete" | "MultiBinary" => return Ok(()),
        other => {
            return Err(EnvError::Unsupported(format!(
                "{id}: the observation key {path} is a {other} space; Dict/Tuple observations take Box, Discrete, MultiDiscrete and MultiBinary keys (and nested Dict/Tuple)"
            )))
        }
    };
    children.iter().try_for_each(|(p, child)| check_leaves(child, p, id))
}
