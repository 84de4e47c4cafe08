//! Savepoints: the progress of a migration written next to its redacted configuration, so an
//! interrupted job continues where it left off (ScyllaDB Migrator's format and naming).
//!
//! The progress model is shared by every connector: completed token ranges (CQL), completed
//! scan segments (DynamoDB) and completed files (Parquet). A store is anything that can write
//! a savepoint and list the existing ones; files are the first backend, a table in the target
//! database can be the second behind the same trait.

pub mod blobs;
mod file;
mod identity;
pub mod location;
pub mod lock;
mod object;
pub mod ranges;
pub mod sealed;
pub mod stream;
mod summary;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use file::{FileStore, parse_document, parse_name, render_document};
pub use identity::identity;
pub use location::{Location, Writer};
pub use object::{ObjectLease, ObjectStoreSavepoints};
pub use stream::StreamPositions;

use ranges::RangeSet;

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

/// The savepoint key of [`Progress::parquet_versions`].
pub const VERSIONS_KEY: &str = "parquetFileVersions";

/// The savepoint key of [`StreamPositions`].
pub const STREAM_KEY: &str = "streamPositions";
/// drover's key for the completed ranges of a MySQL source.
pub const MYSQL_KEY: &str = "skipMySqlRanges";
/// drover's key for the completed data files of a DynamoDB S3 export source.
pub const EXPORT_KEY: &str = "skipExportDataFiles";
/// drover's key for the load a `target.bulkWrite: sstable` copy belongs to.
pub const BULK_RUN_KEY: &str = "bulkWriteRun";

/// What is already done, in the job file's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Completed token ranges, merged.
    pub token_ranges: RangeSet,
    /// Completed DynamoDB scan segments.
    pub segments: BTreeSet<u32>,
    /// Completed Parquet files.
    pub parquet_files: BTreeSet<String>,
    /// drover: what each completed Parquet file was when it was loaded (size, modification
    /// time, ETag), so that a file changed since is read again instead of skipped. Kept under
    /// its own key: ScyllaDB Migrator reads `skipParquetFiles` as plain names and ignores it.
    pub parquet_versions: BTreeMap<String, String>,
    /// Where the replication of the source's change stream stands (`streamChanges`).
    pub stream: Option<StreamPositions>,
    /// drover: completed ranges of a MySQL table, each as the condition that selects it
    /// (ScyllaDB Migrator keeps no progress for MySQL; the key is drover's own).
    pub mysql_ranges: BTreeSet<String>,
    /// drover: completed data files of a DynamoDB S3 export (`s3://bucket/key`; ScyllaDB
    /// Migrator keeps no progress for exports; the key is drover's own).
    pub export_files: BTreeSet<String>,
    /// drover: the load a `target.bulkWrite: sstable` copy belongs to. Its SSTable uploads
    /// are named after it, so a resumed run finds the imports of the run it continues, and a
    /// new load (no savepoint resumed) is never taken for an earlier one.
    pub bulk_run: Option<String>,
}

impl Progress {
    /// Adds everything of `other`.
    pub fn merge(&mut self, other: &Progress) {
        for r in other.token_ranges.recorded() {
            self.token_ranges.insert(*r);
        }
        self.segments.extend(other.segments.iter().copied());
        self.parquet_files
            .extend(other.parquet_files.iter().cloned());
        self.parquet_versions.extend(
            other
                .parquet_versions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        self.mysql_ranges.extend(other.mysql_ranges.iter().cloned());
        self.export_files.extend(other.export_files.iter().cloned());
        if self.bulk_run.is_none() {
            self.bulk_run.clone_from(&other.bulk_run);
        }
        match (&mut self.stream, &other.stream) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.stream = Some(theirs.clone()),
            (_, None) => {}
        }
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.token_ranges.ranges().is_empty()
            && self.segments.is_empty()
            && self.parquet_files.is_empty()
            && self.mysql_ranges.is_empty()
            && self.export_files.is_empty()
            && self.stream.is_none()
    }

    /// Reads the progress keys of a job or savepoint document.
    pub fn from_document(doc: &serde_json::Value) -> Result<Self, String> {
        let mut progress = Progress::default();
        if let Some(ranges) = doc.get("skipTokenRanges").filter(|v| !v.is_null()) {
            for r in ranges::parse_skip_ranges(ranges)? {
                progress.token_ranges.insert(r);
            }
        }
        if let Some(s) = doc.get("skipSegments").filter(|v| !v.is_null()) {
            progress.segments =
                serde_json::from_value(s.clone()).map_err(|e| format!("skipSegments: {e}"))?;
        }
        if let Some(f) = doc.get("skipParquetFiles").filter(|v| !v.is_null()) {
            progress.parquet_files =
                serde_json::from_value(f.clone()).map_err(|e| format!("skipParquetFiles: {e}"))?;
        }
        if let Some(f) = doc.get(VERSIONS_KEY).filter(|v| !v.is_null()) {
            progress.parquet_versions =
                serde_json::from_value(f.clone()).map_err(|e| format!("{VERSIONS_KEY}: {e}"))?;
        }
        if let Some(f) = doc.get(MYSQL_KEY).filter(|v| !v.is_null()) {
            progress.mysql_ranges =
                serde_json::from_value(f.clone()).map_err(|e| format!("{MYSQL_KEY}: {e}"))?;
        }
        if let Some(f) = doc.get(EXPORT_KEY).filter(|v| !v.is_null()) {
            progress.export_files =
                serde_json::from_value(f.clone()).map_err(|e| format!("{EXPORT_KEY}: {e}"))?;
        }
        if let Some(r) = doc.get(BULK_RUN_KEY).filter(|v| !v.is_null()) {
            progress.bulk_run = Some(
                r.as_str()
                    .filter(|r| !r.is_empty() && r.len() <= 64)
                    .ok_or_else(|| format!("{BULK_RUN_KEY}: expected an id of 1 to 64 characters"))?
                    .to_string(),
            );
        }
        if let Some(p) = doc.get(STREAM_KEY).filter(|v| !v.is_null()) {
            progress.stream =
                Some(serde_json::from_value(p.clone()).map_err(|e| format!("{STREAM_KEY}: {e}"))?);
        }
        Ok(progress)
    }

    /// Writes the progress keys into a document, replacing what was there.
    pub fn into_document(&self, doc: &mut serde_json::Value) {
        let Some(map) = doc.as_object_mut() else {
            return;
        };
        // Each range as recorded, not merged: ScyllaDB Migrator resumes only ranges whose
        // exact pair it finds (merged past ranges::MAX_PAIRS).
        map.insert(
            "skipTokenRanges".into(),
            ranges::encode_skip_ranges(self.token_ranges.recorded()),
        );
        map.insert(
            "skipSegments".into(),
            serde_json::to_value(&self.segments).expect("set serializes"),
        );
        map.insert(
            "skipParquetFiles".into(),
            serde_json::to_value(&self.parquet_files).expect("set serializes"),
        );
        if self.parquet_versions.is_empty() {
            map.remove(VERSIONS_KEY);
        } else {
            map.insert(
                VERSIONS_KEY.into(),
                serde_json::to_value(&self.parquet_versions).expect("map serializes"),
            );
        }
        if self.mysql_ranges.is_empty() {
            map.remove(MYSQL_KEY);
        } else {
            map.insert(
                MYSQL_KEY.into(),
                serde_json::to_value(&self.mysql_ranges).expect("set serializes"),
            );
        }
        if self.export_files.is_empty() {
            map.remove(EXPORT_KEY);
        } else {
            map.insert(
                EXPORT_KEY.into(),
                serde_json::to_value(&self.export_files).expect("set serializes"),
            );
        }
        match &self.bulk_run {
            Some(r) => {
                map.insert(BULK_RUN_KEY.into(), r.clone().into());
            }
            None => {
                map.remove(BULK_RUN_KEY);
            }
        }
        match &self.stream {
            Some(p) => {
                map.insert(
                    STREAM_KEY.into(),
                    serde_json::to_value(p).expect("positions serialize"),
                );
            }
            None => {
                map.remove(STREAM_KEY);
            }
        }
    }
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
    fn newest_usable(&self, identity: &serde_json::Value) -> Result<Lookup, SavepointError> {
        self.newest_matching(&|document| {
            if &identity::identity(document) == identity {
                Ok(())
            } else {
                Err("belongs to another migration (source, target or renames differ)".into())
            }
        })
    }

    /// The newest savepoint that parses and that `accept` takes (it says why not otherwise).
    fn newest_matching(
        &self,
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
            match Progress::from_document(&savepoint.document) {
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
