//! Savepoints: the progress of a migration written next to its redacted configuration, so an
//! interrupted job continues where it left off (ScyllaDB Migrator's format and naming).
//!
//! The progress model ([`Progress`]) records each kind of completed work under its key; the
//! connectors declare their keys (token ranges, scan segments, files, ...). A store is anything that can write
//! a savepoint and list the existing ones; files are the first backend, a table in the target
//! database can be the second behind the same trait.

pub mod blobs;
mod file;
mod identity;
pub mod location;
pub mod lock;
mod object;
mod progress;
pub mod ranges;
pub mod sealed;
pub mod stream;
mod summary;

use serde::{Deserialize, Serialize};

pub use file::{FileStore, parse_document, parse_name, render_document};
pub use identity::identity;
pub use location::{Location, Writer};
pub use object::{ObjectLease, ObjectStoreSavepoints};
pub use progress::{Done, Key, Progress, Shape, TOKEN_RANGES};
pub use stream::StreamPositions;

/// Errors of the savepoint subsystem.
#[derive(Debug, thiserror::Error)]
pub enum SavepointError {
    /// A savepoint file or directory could not be read or written.
    #[error("savepoints {}: {source}", path.display())]
    Io {
        /// File or directory.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Another run of a job writes savepoints in the same place.
    #[error(
        "savepoints {location}: in use by another run ({holder}); stop that run first (a lease not renewed for {} seconds, or of a process gone from this host, is taken over)",
        lock::LEASE.as_secs()
    )]
    InUse {
        /// The directory, folder or table.
        location: String,
        /// Who holds it.
        holder: String,
    },
    /// An object store or the target database failed or refused a request.
    #[error("savepoints {location}: {message}")]
    Remote {
        /// Where: `s3://…`, `gs://…`, `keyspace.table (job …)`.
        location: String,
        /// What failed.
        message: String,
    },
    /// The savepoint backend cannot be used as configured.
    #[error("savepoints: {0}")]
    Config(String),
    /// A savepoint could not be parsed.
    #[error("savepoint {name}: {message}")]
    Corrupt {
        /// File name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// One stored savepoint, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavepointInfo {
    /// File name (or row id for other stores).
    pub name: String,
    /// Creation time, milliseconds since the epoch (from the name).
    pub epoch_millis: u64,
    /// Disambiguating sequence number (from the name; 0 for legacy names).
    pub counter: u64,
}

/// A savepoint with its content.
#[derive(Debug, Clone)]
pub struct Savepoint {
    /// Where it is.
    pub info: SavepointInfo,
    /// The redacted job document with its progress keys.
    pub document: serde_json::Value,
}

/// The result of looking for a savepoint to resume from.
#[derive(Debug, Default)]
pub struct Lookup {
    /// The newest usable savepoint of the migration, with its progress.
    pub found: Option<(Savepoint, Progress)>,
    /// One line per savepoint skipped, newest first.
    pub warnings: Vec<String>,
}

/// What a savepoint backend does.
pub trait SavepointStore: Send + Sync {
    /// Writes a new savepoint of `document` (already redacted, progress included).
    fn write(&self, document: &serde_json::Value) -> Result<SavepointInfo, SavepointError>;
    /// Every savepoint, newest first.
    fn list(&self) -> Result<Vec<SavepointInfo>, SavepointError>;
    /// Reads one savepoint.
    fn read(&self, info: &SavepointInfo) -> Result<Savepoint, SavepointError>;
    /// Where the savepoints are, for messages (a directory, `s3://bucket/prefix`, a table).
    fn describe(&self) -> String;

    /// The newest savepoint that parses and belongs to the migration `identity`. Unusable
    /// ones are skipped with a warning each (returned as well, for the caller to report).
    fn newest_usable(
        &self,
        identity: &serde_json::Value,
        keys: &[&'static Key],
    ) -> Result<Lookup, SavepointError> {
        self.newest_matching(keys, &|document| {
            if &identity::identity(document) == identity {
                Ok(())
            } else {
                Err("belongs to another migration (source, target or renames differ)".into())
            }
        })
    }

    /// The newest savepoint whose progress (the keys of `keys`) parses and that `accept`
    /// takes (it says why not otherwise).
    fn newest_matching(
        &self,
        keys: &[&'static Key],
        accept: &dyn Fn(&serde_json::Value) -> Result<(), String>,
    ) -> Result<Lookup, SavepointError> {
        let mut warnings = Vec::new();
        for info in self.list()? {
            let savepoint = match self.read(&info) {
                Ok(s) => s,
                Err(e) => {
                    warnings.push(format!("{e}; trying an older savepoint"));
                    continue;
                }
            };
            if let Err(why) = accept(&savepoint.document) {
                warnings.push(format!("savepoint {}: {why}; ignored", info.name));
                continue;
            }
            match Progress::from_document(&savepoint.document, keys) {
                Ok(progress) => {
                    return Ok(Lookup {
                        found: Some((savepoint, progress)),
                        warnings,
                    });
                }
                Err(e) => warnings.push(format!(
                    "savepoint {}: {e}; trying an older savepoint",
                    info.name
                )),
            }
        }
        Ok(Lookup {
            found: None,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests;
