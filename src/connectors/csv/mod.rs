//! The CSV and JSON connector: a CQL table unloaded to CSV or JSON files, one per token-range
//! unit, and such files loaded into a CQL table, one file per unit — in the forms DataStax Bulk
//! Loader (DSBulk) writes and reads (`docs/design/csv-json-formats.md`), so that files move
//! between drover, DSBulk and `cqlsh COPY`. With `preserveTimestamps` an unload writes each
//! cell's writetime and TTL in DSBulk's `writetime(col)` and `ttl(col)` fields, and a load
//! writes the cells with them.

mod connector;
pub mod codec;
pub mod config;
pub mod load;
pub mod record;
pub mod unload;

pub use connector::Csv;
pub use config::{CsvSource, CsvTarget};

use crate::connectors::seam::{RequestError, Retry};

/// The two formats of the connector: DSBulk's `connector.csv` and `connector.json` (one JSON
/// object per line, DSBulk's `MULTI_DOCUMENT` mode, or one array of objects,
/// `SINGLE_DOCUMENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `type: csv`.
    Csv,
    /// `type: json`.
    Json,
}

impl Format {
    /// The `type` name, for messages and job names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Json => "json",
        }
    }

    /// The suffix of data files (`.csv`, `.json`).
    pub fn extension(self) -> &'static str {
        match self {
            Self::Csv => ".csv",
            Self::Json => ".json",
        }
    }

    /// Where a load records its finished files, and their versions.
    pub fn keys(
        self,
    ) -> (
        &'static crate::savepoints::Key,
        &'static crate::savepoints::Key,
    ) {
        match self {
            Self::Csv => (&FILES, &VERSIONS),
            Self::Json => (&JSON_FILES, &JSON_VERSIONS),
        }
    }
}

/// drover: the CSV files already loaded, as recorded (`file:/path`, `s3a://bucket/key`).
pub static FILES: crate::savepoints::Key = crate::savepoints::Key {
    name: "skipCsvFiles",
    shape: crate::savepoints::Shape::Names { listed: true },
    label: "CSV files",
    always: false,
};

/// drover: what each loaded CSV file was when it was loaded (size, modification time,
/// ETag), so that a file changed since is read again instead of skipped.
pub static VERSIONS: crate::savepoints::Key = crate::savepoints::Key {
    name: "csvFileVersions",
    shape: crate::savepoints::Shape::Versions,
    label: "CSV file versions",
    always: false,
};

/// drover: the JSON files already loaded, as `skipCsvFiles` records CSV files.
pub static JSON_FILES: crate::savepoints::Key = crate::savepoints::Key {
    name: "skipJsonFiles",
    shape: crate::savepoints::Shape::Names { listed: true },
    label: "JSON files",
    always: false,
};

/// drover: what each loaded JSON file was when it was loaded, as `csvFileVersions`.
pub static JSON_VERSIONS: crate::savepoints::Key = crate::savepoints::Key {
    name: "jsonFileVersions",
    shape: crate::savepoints::Shape::Versions,
    label: "JSON file versions",
    always: false,
};

/// Errors of the CSV connector.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    /// The job cannot run as written: a missing path, a header that names no column of the
    /// target, a table the format cannot carry. Found before anything is written.
    #[error("{key}: {message}")]
    Invalid {
        /// The job config key concerned.
        key: String,
        /// What is wrong, naming the file and column.
        message: String,
    },
    /// The target table cannot take the files' fields: every problem, each with the CQL that
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
    /// A record could not be read or a field converted: the file and line are named.
    #[error("{file}: {message}")]
    Read {
        /// The file (as recorded in `skipCsvFiles`).
        file: String,
        /// What went wrong, from `line N`.
        message: String,
        /// Whether reading again can help (a download that broke) or not (a bad field).
        retry: Retry,
    },
    /// A file could not be written, or a value has no CSV form.
    #[error("writing {file}: {message}")]
    Write {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
}

impl From<crate::connectors::parquet::ParquetError> for CsvError {
    /// The file stores are shared with the Parquet connector; their errors keep their words.
    fn from(e: crate::connectors::parquet::ParquetError) -> Self {
        use crate::connectors::parquet::ParquetError as P;
        match e {
            P::Invalid { key, message } => Self::Invalid { key, message },
            P::Store { side, message } => Self::Store { side, message },
            other => Self::Store {
                side: "files",
                message: other.to_string(),
            },
        }
    }
}

impl crate::connectors::seam::ConnectorError for CsvError {
    fn is_config_problem(&self) -> bool {
        matches!(self, Self::Invalid { .. } | Self::Mismatch(_))
    }

    fn is_schema_mismatch(&self) -> bool {
        matches!(self, Self::Mismatch(_))
    }
}

impl RequestError for CsvError {
    fn retry(&self) -> Retry {
        match self {
            Self::Read { retry, .. } => *retry,
            // object_store retried already; a file half written cannot be continued.
            _ => Retry::Never,
        }
    }
}
