//! The validator: proves a copy complete by comparing the target table with the source, row
//! by row and cell by cell, both ways (rows missing from the target and rows only the target
//! has), and says exactly which rows differ.
//!
//! It takes the migration's job file; its `validation` section tunes the comparison.

pub mod engine;
pub mod job;
pub mod report;
pub mod value;

use crate::migrate::config::JobConfigError;
use crate::migrate::cql::CqlError;

/// Errors of a validation.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// The job file is invalid.
    #[error(transparent)]
    Config(#[from] JobConfigError),
    /// The databases refused the job (missing table, incompatible schema, unreachable).
    #[error(transparent)]
    Cql(#[from] CqlError),
    /// A read or a repair write failed for good.
    #[error("{0}")]
    Failed(String),
    /// Savepoints could not be read or written.
    #[error(transparent)]
    Savepoints(#[from] crate::savepoints::SavepointError),
    /// The validation was cancelled before it finished.
    #[error("stopped before the end")]
    Stopped,
}

impl ValidationError {
    /// True for problems in the job config or schemas (what a client must fix), false for
    /// databases that could not be reached or failed.
    pub fn is_config_problem(&self) -> bool {
        matches!(
            self,
            Self::Config(_) | Self::Cql(CqlError::Invalid { .. } | CqlError::Tls { .. })
        )
    }
}
