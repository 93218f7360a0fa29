//! What can go wrong loading a policy or acting with it.

/// An error of [`crate::Policy`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a Proxima checkpoint, or one whose contents do not fit together.
    #[error("{0}")]
    Checkpoint(String),
    /// A policy this crate does not run (yet).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Observations or masks that do not fit the policy.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
