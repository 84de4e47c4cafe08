//! The one error type of the engine, shared by migrations and validations.

use crate::connectors::seam::{ConnectorError, SeamError};
use crate::jobfile::JobConfigError;

/// Errors of a migration or a validation: both are the engine driving connectors over units.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The job file is invalid.
    #[error(transparent)]
    Config(#[from] JobConfigError),
    /// A data system refused the job (missing table, incompatible schema, unreachable) or
    /// failed it, in its connector's words.
    #[error(transparent)]
    Connector(Box<dyn ConnectorError>),
    /// A read or write failed for good (after retries, where retrying is safe).
    #[error("{0}")]
    Failed(String),
    /// Savepoints could not be read or written.
    #[error(transparent)]
    Savepoints(#[from] crate::savepoints::SavepointError),
    /// A new submission whose newest savepoint already records every unit as done: it would
    /// copy nothing and end `SUCCEEDED`, which hides a truncated or lost target.
    #[error(
        "savepoint {savepoint} in {place} already records every unit of this migration as \
         done, so this submission would copy nothing. To copy everything again (into a \
         truncated or new target), submit the job with `savepoints.autoResume: false`, or \
         remove that savepoint"
    )]
    AlreadyDone {
        /// The savepoint's name.
        savepoint: String,
        /// Where the savepoints are.
        place: String,
    },
    /// The job was cancelled before it finished.
    #[error("stopped before the end")]
    Stopped,
}

impl EngineError {
    /// True when another run of the job holds its savepoint directory.
    pub fn is_in_use(&self) -> bool {
        matches!(
            self,
            Self::Savepoints(crate::savepoints::SavepointError::InUse { .. })
        )
    }

    /// True when a new submission was refused because its savepoint covers everything.
    pub fn is_already_done(&self) -> bool {
        matches!(self, Self::AlreadyDone { .. })
    }

    /// True when a target table cannot take the source's rows: the message lists every
    /// problem with the CQL that fixes it, and is told whole.
    pub fn is_schema_mismatch(&self) -> bool {
        matches!(self, Self::Connector(e) if e.is_schema_mismatch())
    }

    /// True for problems in the job config or schemas (what a client must fix), false for
    /// databases that could not be reached or failed.
    pub fn is_config_problem(&self) -> bool {
        match self {
            Self::Config(_) => true,
            Self::Connector(e) => e.is_config_problem(),
            Self::Savepoints(e) => matches!(e, crate::savepoints::SavepointError::Config(_)),
            _ => false,
        }
    }
}

impl<E: ConnectorError> From<E> for EngineError {
    fn from(e: E) -> Self {
        Self::Connector(Box::new(e))
    }
}

impl From<SeamError> for EngineError {
    fn from(e: SeamError) -> Self {
        match e {
            SeamError::Config(e) => Self::Config(e),
            SeamError::Connector(e) => Self::Connector(e),
            SeamError::Failed(why) => Self::Failed(why),
            SeamError::Stopped => Self::Stopped,
        }
    }
}

impl crate::jobs::LaunchError for EngineError {
    fn is_config_problem(&self) -> bool {
        EngineError::is_config_problem(self)
    }

    fn is_already_done(&self) -> bool {
        EngineError::is_already_done(self)
    }

    fn is_in_use(&self) -> bool {
        EngineError::is_in_use(self)
    }

    fn is_schema_mismatch(&self) -> bool {
        EngineError::is_schema_mismatch(self)
    }
}
