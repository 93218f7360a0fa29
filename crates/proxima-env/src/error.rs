//! The error type of environments. Every fallible function of this crate returns [`Result`].
//!
//! The variants and their messages are those of `proxima::ProximaError`, which converts each into
//! its namesake, so an env error reads the same wherever it surfaces.

use thiserror::Error;

/// What can go wrong in an environment, by kind.
#[derive(Debug, Error)]
pub enum EnvError {
    /// An environment id the registry does not know.
    #[error("{0}")]
    UnknownEnv(String),
    /// An action outside the env's action space.
    #[error("invalid action: {0}")]
    InvalidAction(String),
    /// A bad argument (wrong length, a state of the wrong size, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A non-finite observation or reward.
    #[error("numerical error: {0}")]
    NonFinite(String),
    /// An error raised inside an environment (e.g. a Python exception through the bridge, with
    /// its traceback).
    #[error("environment error: {0}")]
    Env(String),
    /// An operation the env does not support (no settable state, no rendering, …).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A file-system error, with the path it concerns.
    #[error("{path}: {err}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error (shown in the message, not chained, so it prints once).
        err: std::io::Error,
    },
}

/// `Result` with [`EnvError`].
pub type Result<T> = std::result::Result<T, EnvError>;

impl EnvError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        EnvError::Io { path: path.as_ref().display().to_string(), err: source }
    }
}
