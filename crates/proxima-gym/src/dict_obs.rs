//! `Dict` and `Tuple` observation spaces (nested too), as Stable-Baselines3's `MultiInputPolicy`
//! reads the non-image ones: each key's observation flattened — a `Box` as its values, a
//! `Discrete` one-hot, a `MultiDiscrete` as its components' one-hots, a `MultiBinary` as its bits —
//! and the keys concatenated in the space's order (SB3's `CombinedExtractor` with `nn.Flatten`
//! per key over `preprocess_obs`). Gymnasium's `spaces.flatten` does exactly that, so an
//! observation crosses the bridge flattened by it, as one `Box` of `flatdim` values that the MLP
//! reads. A top-level image key (SB3's `is_image_space`) crosses as its raw pixels, in the env's
//! layout, and is reported as one ([`proxima_env::ObsKey::image`]) for the policy's CNN; image
//! keys nested deeper are refused.

use crate::py_err;
use proxima_env::{EnvError, KeyImage, ObsKey, Result};
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
    keys: Vec<ObsKey>,
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
        check_leaves(space, "", 0, id)?;
        let spaces = py.import("gymnasium.spaces").map_err(|e| EnvError::Env(py_err(py, e)))?;
        let repr = space.repr().map(|r| r.to_string()).unwrap_or_default();
        let flat = spaces.call_method1("flatten_space", (space,)).map_err(|e| {
            EnvError::Unsupported(format!("{id}: its observation space {repr} cannot be flattened: {}", py_err(py, e)))
        })?;
        let flatten = flatten_checked(py).map_err(|e| EnvError::Env(py_err(py, e)))?.unbind();
        let keys = top_level_keys(&spaces, space).map_err(|e| EnvError::Env(format!("{id}: {}", py_err(py, e))))?;
        Ok((StructuredObs { space: space.clone().unbind(), flatten, repr, keys }, flat))
    }

    /// The top-level keys (a `Tuple`'s indices, as text), their flat lengths and image layouts,
    /// in the order the flat observation holds them ([`proxima_env::Env::observation_keys`]).
    pub(crate) fn keys(&self) -> Vec<ObsKey> {
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

/// `dict_check.py` (also the subproc worker's first lines): Gymnasium's flattening after a check
/// of every value's shape.
pub(crate) const DICT_CHECK_PY: &str = include_str!("dict_check.py");

/// `dict_check.py`'s `flatten_checked(space, obs)`.
fn flatten_checked(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let code = std::ffi::CString::new(DICT_CHECK_PY).expect("no NUL in dict_check.py");
    PyModule::from_code(py, &code, c"dict_check.py", c"proxima_dict_check")?.getattr("flatten_checked")
}

/// `space`'s top-level keys (a `Dict`'s names in its order, a `Tuple`'s indices) with each one's
/// `gymnasium.spaces.flatdim` and, for an image key, its layout.
fn top_level_keys(spaces: &Bound<'_, PyAny>, space: &Bound<'_, PyAny>) -> PyResult<Vec<ObsKey>> {
    let children = space.getattr("spaces")?;
    let named: Vec<(String, Bound<'_, PyAny>)> = if children.hasattr("items")? {
        children.call_method0("items")?.try_iter()?.map(|i| i?.extract()).collect::<PyResult<_>>()?
    } else {
        children.try_iter()?.enumerate().map(|(i, v)| Ok((i.to_string(), v?))).collect::<PyResult<_>>()?
    };
    named
        .into_iter()
        .map(|(name, v)| {
            Ok(ObsKey { len: spaces.call_method1("flatdim", (&v,))?.extract()?, image: image_of(&v), name })
        })
        .collect()
}

/// SB3's `is_image_space` (without its channel check, as its `CombinedExtractor` calls it): a
/// `uint8` `Box` of 3 dimensions bounded by 0 and 255; channel-first when its first dimension is
/// the smallest (`is_image_space_channels_first`), else channel-last.
fn image_of(space: &Bound<'_, PyAny>) -> Option<KeyImage> {
    if space.get_type().name().ok()?.to_string() != "Box" {
        return None;
    }
    let shape: Vec<usize> = space.getattr("shape").and_then(|s| s.extract()).ok()?;
    let dtype = space.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).ok()?;
    let bounds = |attr: &str, want: f64| -> Option<bool> {
        let values: Vec<f64> =
            space.getattr(attr).and_then(|b| b.call_method0("ravel")?.call_method0("tolist")?.extract()).ok()?;
        Some(values.iter().all(|&v| v == want))
    };
    if dtype != "uint8" || shape.len() != 3 || !bounds("low", 0.0)? || !bounds("high", 255.0)? {
        return None;
    }
    let smallest = (0..3).min_by_key(|&i| shape[i]).unwrap_or(0);
    Some(match smallest {
        0 => KeyImage { chw: [shape[0], shape[1], shape[2]], channels_last: false },
        _ => KeyImage { chw: [shape[2], shape[0], shape[1]], channels_last: true },
    })
}

/// Refuses the leaves of a structured space that SB3's `MultiInputPolicy` would not read: image
/// keys below the top level (its CNN reads top-level ones) and spaces without a flat form.
/// `path` is empty for the space itself, at `depth` 0.
fn check_leaves(space: &Bound<'_, PyAny>, path: &str, depth: usize, id: &str) -> Result<()> {
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
            if let (Some(img), true) = (image_of(space), depth > 1) {
                return Err(EnvError::Unsupported(format!(
                    "{id}: the observation key {path} is an image ({:?}, uint8) inside a nested Dict/Tuple; MultiInputPolicy's CNN reads top-level image keys only (move it up)",
                    img.chw
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
    children.iter().try_for_each(|(p, child)| check_leaves(child, p, depth + 1, id))
}
