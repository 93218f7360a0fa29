//! Proxima's errors as Python exceptions: a bad argument or config is a `ValueError`, something
//! not built yet a `NotImplementedError`, a file problem an `OSError`; an exception raised by
//! the user's own Python env comes back as that very exception (its type and traceback).

use proxima::ProximaError;
use pyo3::exceptions::{PyNotImplementedError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::PyErr;

/// The Python exception for `e`.
pub fn to_py(e: ProximaError) -> PyErr {
    let msg = e.to_string();
    // Taken whatever the error: a kept exception holds its traceback's frames and, through their
    // `f_back`, the caller's frames and globals (a model among them, alive past the interpreter's
    // exit).
    let original = proxima_gym::take_python_error();
    if matches!(e, ProximaError::Env(_)) {
        // The exception the error's text came from (not an older one left on this thread).
        // An exception without a message (`KeyboardInterrupt`) shows as "KeyboardInterrupt: "
        // but its traceback's last line is "KeyboardInterrupt".
        let shown = |o: &PyErr| o.to_string().trim_end().trim_end_matches(':').to_string();
        if let Some(original) = original.filter(|o| msg.contains(&shown(o))) {
            return original;
        }
    }
    match e {
        ProximaError::Unsupported(_) => PyNotImplementedError::new_err(msg),
        ProximaError::Io { .. } => PyOSError::new_err(msg),
        ProximaError::Env(_) | ProximaError::UserCode(_) | ProximaError::Tensor(_) => PyRuntimeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// `Result<T, ProximaError>` → `PyResult<T>`.
pub trait IntoPy<T> {
    /// Maps the error with [`to_py`].
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPy<T> for proxima::Result<T> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}
