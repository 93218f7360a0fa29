//! The one error type of the library. Every fallible public function returns [`Result`].
//!
//! Variants name *what* is wrong so the CLI can print one clear line and exit non-zero;
//! nothing in the library panics on user input.

use thiserror::Error;

/// Everything that can go wrong in Proxima, by kind.
#[derive(Debug, Error)]
pub enum ProximaError {
    /// An environment id the registry does not know.
    #[error("{0}")]
    UnknownEnv(String),
    /// An action outside the env's action space.
    #[error("invalid action: {0}")]
    InvalidAction(String),
    /// A malformed or inconsistent configuration (unknown key, wrong type, bad value).
    #[error("invalid config: {0}")]
    Config(String),
    /// A bad argument to a library function (wrong length, shape, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A checkpoint that cannot be read or does not match the network/env.
    #[error("checkpoint error: {0}")]
    Checkpoint(String),
    /// Non-finite values in training (loss, gradient, parameter, observation, reward).
    #[error("numerical error: {0}")]
    NonFinite(String),
    /// An error raised inside an environment (e.g. a Python exception through the bridge,
    /// with its traceback).
    #[error("environment error: {0}")]
    Env(String),
    /// An exception raised by the user's code that a trainer calls (a reward function written in
    /// Python), with its traceback.
    #[error("{0}")]
    UserCode(String),
    /// An operation the object does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A run stopped at its caller's request (e.g. on Ctrl-C), after saving what it needs to
    /// resume; the message says where.
    #[error("{0}")]
    Stopped(String),
    /// A tensor-library error.
    #[error("tensor error: {0}")]
    Tensor(#[from] candle_core::Error),
    /// A file-system error, with the path it concerns.
    #[error("{path}: {err}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error (shown in the message, not chained, so it prints once).
        err: std::io::Error,
    },
}

/// `Result` with [`ProximaError`].
pub type Result<T> = std::result::Result<T, ProximaError>;

/// Each env error becomes its namesake, with the same message.
impl From<proxima_env::EnvError> for ProximaError {
    fn from(e: proxima_env::EnvError) -> Self {
        use proxima_env::EnvError as E;
        match e {
            E::UnknownEnv(m) => ProximaError::UnknownEnv(m),
            E::InvalidAction(m) => ProximaError::InvalidAction(m),
            E::InvalidArgument(m) => ProximaError::InvalidArgument(m),
            E::NonFinite(m) => ProximaError::NonFinite(m),
            E::Env(m) => ProximaError::Env(m),
            E::Unsupported(m) => ProximaError::Unsupported(m),
            E::Io { path, err } => ProximaError::Io { path, err },
        }
    }
}

impl ProximaError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        ProximaError::Io { path: path.as_ref().display().to_string(), err: source }
    }
}
