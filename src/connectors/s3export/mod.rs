//! DynamoDB S3 exports, both ways: reading an export (AWS's own, ScyllaDB Migrator's or
//! drover's) into a DynamoDB or Alternator table, one data file per unit recorded in
//! savepoints (`skipExportDataFiles`), and writing a table as an export, one data file per
//! scan segment, listed in the manifest only once every file is complete.
//!
//! The format is AWS's (`S3DataExport.Output.html`): `manifest-summary.json` names
//! `manifest-files.json`, which lists gzipped data files of DynamoDB JSON (or Amazon Ion), one
//! item per line.

mod connector;
pub mod config;
pub mod format;
pub mod ion;
pub mod read;
pub mod write;

pub use connector::S3Export;
pub use config::{ExportSource, ExportTarget};

use crate::connectors::seam::{RequestError, Retry};

/// drover: the data files of a DynamoDB S3 export already loaded (`s3://bucket/key`; ScyllaDB
/// Migrator keeps no progress for exports).
pub static FILES: crate::savepoints::Key = crate::savepoints::Key {
    name: "skipExportDataFiles",
    shape: crate::savepoints::Shape::Names { listed: false },
    label: "export data files",
    always: false,
};

/// Errors of the S3-export connector.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The job cannot run as written: a missing manifest, an export of another kind or
    /// format, a target path that already holds files. Found before anything is written.
    #[error("{key}: {message}")]
    Invalid {
        /// The job config key concerned.
        key: String,
        /// What is wrong, naming the object.
        message: String,
    },
    /// A data file could not be read, or is not what its manifest says.
    #[error("data file {file}: {message}")]
    Read {
        /// The file, as `s3://bucket/key`.
        file: String,
        /// What went wrong (the line, the attribute, the digest).
        message: String,
        /// Whether reading again can help (a connection lost) or not (a corrupt file).
        retry: Retry,
    },
    /// A file of the export being written could not be written.
    #[error("writing {file}: {message}")]
    Write {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
}

impl crate::connectors::seam::ConnectorError for ExportError {
    fn is_config_problem(&self) -> bool {
        matches!(self, Self::Invalid { .. })
    }
}

impl RequestError for ExportError {
    fn retry(&self) -> Retry {
        match self {
            Self::Read { retry, .. } => *retry,
            // object_store retried already; a file half written is written again whole.
            _ => Retry::Never,
        }
    }
}
