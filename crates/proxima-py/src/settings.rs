//! The settings the Python layer hands over — a dict of the config's keys to typed Python values
//! (`int`, `float`, `bool`, `str`, `None`, or a list of them) — as the config's overrides.
//!
//! Each value becomes the [`toml::Value`] of its type here, with a `TypeError` / `ValueError`
//! naming the key when it has none; `None` clears an optional key (`clip_range_vf`,
//! `max_grad_norm`, `target_kl`) and is the word `none` elsewhere (`objective`). The config then
//! takes them as `key=value` overrides through [`proxima::config::Config::resolve`], the one
//! path every setting of the CLI takes too: a value's TOML text reads back as the same value (a
//! float as the shortest decimal that rounds to it, `inf` and `nan` as TOML writes them), so the
//! config is the one the typed values make.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// `settings` as the config's `key=value` overrides, in the dict's order (a later key wins, as a
/// later `--set` does).
pub fn overrides(settings: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    let Some(settings) = settings else { return Ok(Vec::new()) };
    let mut sets = Vec::with_capacity(settings.len());
    for (key, value) in settings.iter() {
        let key: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("a setting's key must be a str (a config key), got {}", type_name(&key)))
        })?;
        if value.is_none() {
            sets.push(format!("{key}=none"));
        } else {
            sets.push(set_text(&key, &toml_value(&key, &value)?));
        }
    }
    Ok(sets)
}

/// The keys of `settings` (what the user chose).
pub fn keys(settings: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    match settings {
        Some(s) => s.keys().iter().map(|k| k.extract::<String>()).collect(),
        None => Ok(Vec::new()),
    }
}

/// `key=value` with the value as TOML text, which the config reads back as `value`.
fn set_text(key: &str, value: &toml::Value) -> String {
    format!("{key}={value}")
}

/// The TOML value of one Python value (see the module docs).
fn toml_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.is_truthy()?));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().map(toml::Value::Integer).map_err(|_| {
            PyValueError::new_err(format!("setting '{key}': {v} is out of range (a 64-bit signed integer)"))
        });
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract::<f64>()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(v.extract::<String>()?));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in v.try_iter()? {
            let item = item?;
            if item.is_none() || item.is_instance_of::<PyList>() || item.is_instance_of::<PyTuple>() {
                return Err(PyTypeError::new_err(format!(
                    "setting '{key}': a list of {}; a list holds ints, floats, bools or strs",
                    type_name(&item)
                )));
            }
            items.push(toml_value(key, &item)?);
        }
        return Ok(toml::Value::Array(items));
    }
    Err(PyTypeError::new_err(format!(
        "setting '{key}': a value of type {}; settings are int, float, bool, str, None or a list of them",
        type_name(v)
    )))
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of value reads back from its `key=value` text as itself, floats bit for bit.
    #[test]
    fn a_values_text_reads_back_as_the_value() {
        let floats = [0.1 + 0.2, 1.0 / 3.0, 1e-300, 3e-4, 2048.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, 5e-324];
        let mut values: Vec<toml::Value> = floats.iter().map(|f| toml::Value::Float(*f)).collect();
        values.extend([
            toml::Value::Integer(i64::MIN),
            toml::Value::Integer(2048),
            toml::Value::Boolean(false),
            toml::Value::String("auto_0.1".into()),
            toml::Value::String("a \"quoted\" = word\n".into()),
            toml::Value::Array(vec![toml::Value::Integer(64), toml::Value::Integer(64)]),
        ]);
        for v in values {
            let text = set_text("x", &v);
            let back = read_back(&text).expect(&text);
            match (&v, &back) {
                (toml::Value::Float(a), toml::Value::Float(b)) => assert_eq!(a.to_bits(), b.to_bits(), "{text}"),
                _ => assert_eq!(v, back, "{text}"),
            }
        }
        assert!(read_back(&set_text("x", &toml::Value::Float(f64::NAN))).unwrap().as_float().unwrap().is_nan());
    }

    /// The value `Config::resolve` reads from a `key=value` override (its own steps).
    fn read_back(text: &str) -> Option<toml::Value> {
        let (_, v) = text.split_once('=')?;
        format!("x = {}", v.trim()).parse::<toml::Table>().ok()?.remove("x")
    }
}
