//! The one error type of the engine, shared by migrations and validations.

use crate::connectors::cql::CqlError;
use crate::jobfile::JobConfigError;

/// Errors of a migration or a validation: both are the engine driving connectors over units.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The job file is invalid.
    #[error(transparent)]
    Config(#[from] JobConfigError),
    /// The databases refused the job (missing table, incompatible schema, unreachable).
    #[error(transparent)]
    Cql(#[from] CqlError),
    /// A DynamoDB-API server refused the job (missing table, different key, unreachable).
    #[error(transparent)]
    Dynamo(#[from] crate::connectors::dynamodb::DynamoError),
    /// Parquet files could not be read or written, or do not fit the job.
    #[error(transparent)]
    Parquet(#[from] crate::connectors::parquet::ParquetError),
    /// A MySQL table could not be read, or does not fit the job.
    #[error(transparent)]
    Mysql(#[from] crate::connectors::mysql::MysqlError),
    /// A DynamoDB S3 export could not be read or written, or does not fit the job.
    #[error(transparent)]
    Export(#[from] crate::connectors::s3export::ExportError),
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
        matches!(
            self,
            Self::Cql(CqlError::Mismatch(_))
                | Self::Mysql(crate::connectors::mysql::MysqlError::Mismatch(_))
                | Self::Parquet(crate::connectors::parquet::ParquetError::Mismatch(_))
        )
    }

    /// True for problems in the job config or schemas (what a client must fix), false for
    /// databases that could not be reached or failed.
    pub fn is_config_problem(&self) -> bool {
        matches!(
            self,
            Self::Config(_)
                | Self::Cql(
                    CqlError::Invalid { .. } | CqlError::Tls { .. } | CqlError::Mismatch(_)
                )
                | Self::Savepoints(crate::savepoints::SavepointError::Config(_))
        ) || matches!(self, Self::Dynamo(e) if e.invalid)
            || matches!(
                self,
                Self::Parquet(
                    crate::connectors::parquet::ParquetError::Invalid { .. }
                        | crate::connectors::parquet::ParquetError::Mismatch(_)
                ) | Self::Mysql(crate::connectors::mysql::MysqlError::Invalid { .. })
                    | Self::Mysql(crate::connectors::mysql::MysqlError::Mismatch(_))
                    | Self::Export(crate::connectors::s3export::ExportError::Invalid { .. })
            )
    }
}
