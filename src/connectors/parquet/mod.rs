//! The Parquet connector: loading Parquet files into a CQL table file by file (each finished
//! file recorded in `skipParquetFiles`), and exporting a CQL table to Parquet files, one per
//! token-range unit, each made visible only once complete — on the local disk or in S3.

mod connector;
pub mod config;
pub mod decode;
pub mod encode;
pub mod export;
pub mod load;
pub mod store;

pub use connector::Parquet;
pub use config::{ParquetSource, ParquetTarget};

use crate::connectors::seam::{RequestError, Retry};

/// The Parquet files already loaded, as recorded (`file:/path`, `s3a://bucket/key`; ScyllaDB
/// Migrator's key).
pub static FILES: crate::savepoints::Key = crate::savepoints::Key {
    name: "skipParquetFiles",
    shape: crate::savepoints::Shape::Names { listed: true },
    label: "Parquet files",
    always: true,
};

/// drover: what each loaded Parquet file was when it was loaded (size, modification time,
/// ETag), so that a file changed since is read again instead of skipped. A key of its own:
/// ScyllaDB Migrator reads `skipParquetFiles` as plain names and ignores this one.
pub static VERSIONS: crate::savepoints::Key = crate::savepoints::Key {
    name: "parquetFileVersions",
    shape: crate::savepoints::Shape::Versions,
    label: "Parquet file versions",
    always: false,
};

/// Column name prefix ScyllaDB Migrator gives the writetime and TTL columns it writes beside
/// each regular column (`__migrator_meta_<column>_writetime`, `…_ttl`).
pub const META_PREFIX: &str = "__migrator_meta_";
/// Footer key of the time (epoch milliseconds) a file's rows were read from the source: TTLs
/// in the file count from then, and a load shortens them by the time since.
pub const READ_AT_KEY: &str = "drover.readAtMillis";
/// Footer key of the token ranges a file of an export holds (`start:end,…`).
pub const RANGES_KEY: &str = "drover.tokenRanges";

/// Errors of the Parquet connector.
#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    /// The job cannot run as written: a missing path, a file that is not Parquet, a column
    /// that cannot be converted. Found before anything is written.
    #[error("{key}: {message}")]
    Invalid {
        /// The job config key concerned.
        key: String,
        /// What is wrong, naming the file and column.
        message: String,
    },
    /// The target table cannot take the files' rows: every problem, each with the CQL that
    /// fixes it where one does.
    #[error("target.table: {0}")]
    Mismatch(Box<crate::connectors::cql::schema::Mismatch>),
    /// The disk or object store failed (after the store's own retries).
    #[error("{side}: {message}")]
    Store {
        /// `source` or `target`.
        side: &'static str,
        /// What failed.
        message: String,
    },
    /// A value could not be read or converted: the file, row group and column are named.
    #[error("{file}, row group {row_group}: {message}")]
    Read {
        /// The file (as recorded in `skipParquetFiles`).
        file: String,
        /// The row group.
        row_group: usize,
        /// What went wrong.
        message: String,
        /// Whether reading again can help (an object store's hiccup) or not (a bad value).
        retry: Retry,
    },
    /// A Parquet file could not be written.
    #[error("writing {file}: {message}")]
    Write {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
}

impl crate::connectors::seam::ConnectorError for ParquetError {
    fn is_config_problem(&self) -> bool {
        matches!(self, Self::Invalid { .. } | Self::Mismatch(_))
    }

    fn is_schema_mismatch(&self) -> bool {
        matches!(self, Self::Mismatch(_))
    }
}

impl RequestError for ParquetError {
    fn retry(&self) -> Retry {
        match self {
            Self::Read { retry, .. } => *retry,
            // object_store retried already; a file half written cannot be continued.
            _ => Retry::Never,
        }
    }
}
