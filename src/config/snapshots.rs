//! `sstable_snapshots`: Cassandra Sidecar's snapshot routes, served beside a source node so
//! that a bulk reader (drover's `source.bulkRead: snapshot`, or a Sidecar client) can take a
//! snapshot of a table and fetch its SSTables instead of paging through CQL.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// Snapshots of the local node's tables and the download of their files. Off by default: the
/// routes answer 404 until `enabled: true` (the on-demand filter), whatever the caller's role.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SstableSnapshotsConfig {
    /// Whether the snapshot routes under `/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots`
    /// answer. Default false.
    pub enabled: bool,
    /// The `nodetool` that takes and clears snapshots, through the node's JMX at
    /// `cassandra.jmx_address` (default `127.0.0.1:7199`). Default `nodetool` (found on `PATH`).
    /// The files are found in `cassandra.data_file_directories`.
    pub nodetool: PathBuf,
    /// Longest time one `nodetool snapshot` may take. Default `10m`.
    #[serde(with = "humantime_serde")]
    pub command_timeout: Duration,
    /// Most files a snapshot listing returns; a snapshot with more is refused (500) rather than
    /// answered in an unbounded document. Default 100000.
    pub max_listed_files: usize,
    /// Component downloads served at once; more are answered 429. Default 32.
    pub concurrent_downloads: usize,
}

impl Default for SstableSnapshotsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            nodetool: PathBuf::from("nodetool"),
            command_timeout: Duration::from_secs(600),
            max_listed_files: 100_000,
            concurrent_downloads: 32,
        }
    }
}

impl SstableSnapshotsConfig {
    /// Checks the values; the key path and message of the first problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let key = |k: &str| format!("sstable_snapshots.{k}");
        if self.nodetool.as_os_str().is_empty() {
            return Err((key("nodetool"), "must not be empty".into()));
        }
        if self.command_timeout.is_zero() {
            return Err((key("command_timeout"), "must be more than 0s".into()));
        }
        if self.max_listed_files == 0 || self.max_listed_files > 10_000_000 {
            return Err((
                key("max_listed_files"),
                "must be between 1 and 10000000".into(),
            ));
        }
        if self.concurrent_downloads == 0 || self.concurrent_downloads > 10_000 {
            return Err((
                key("concurrent_downloads"),
                "must be between 1 and 10000".into(),
            ));
        }
        Ok(())
    }
}
