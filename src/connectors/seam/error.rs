//! What a connector's opening, change-stream and comparison functions fail with, so that the
//! engine names no connector's error type and a connector names no engine error.

use crate::jobfile::JobConfigError;

/// A connector's own error type, as the engine sees it: a message with its causes, and
/// whether it is the operator's to fix. Each connector implements it for its error type in
/// its own folder; the engine keeps it boxed ([`SeamError::Connector`]).
pub trait ConnectorError: std::error::Error + Send + Sync + 'static {
    /// True for problems in the job file or the schemas (what a client must fix: the API
    /// answers 400), false for databases that could not be reached or failed.
    fn is_config_problem(&self) -> bool;

    /// True when a target table cannot take the source's rows: the message lists every
    /// problem with what fixes it, and is told whole.
    fn is_schema_mismatch(&self) -> bool {
        false
    }
}

/// The error of the seam's functions that a connector implements.
#[derive(Debug, thiserror::Error)]
pub enum SeamError {
    /// The job file is invalid.
    #[error(transparent)]
    Config(#[from] JobConfigError),
    /// A data system refused the job, or failed it, in the connector's own words.
    #[error(transparent)]
    Connector(Box<dyn ConnectorError>),
    /// A read or write failed for good (after retries, where retrying is safe).
    #[error("{0}")]
    Failed(String),
    /// The job was cancelled before it finished.
    #[error("stopped before the end")]
    Stopped,
}

impl<E: ConnectorError> From<E> for SeamError {
    fn from(e: E) -> Self {
        Self::Connector(Box::new(e))
    }
}

// A boxed connector error is an error itself, its causes those of the connector's error, so
// that a job's message lists them (`SeamError` and `SeamError` show it transparently).
impl std::error::Error for Box<dyn ConnectorError> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).source()
    }
}
