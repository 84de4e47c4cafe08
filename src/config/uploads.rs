//! `sstable_uploads`: Cassandra Sidecar's SSTable upload and import routes, served beside a
//! target node so that a bulk writer (drover's `target.bulkWrite: sstable`, or a Sidecar
//! client) can hand it ready SSTables instead of CQL writes.

use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use serde::Deserialize;

/// SSTable uploads and imports into the local node. Off by default: the routes answer 404
/// until `enabled: true` (the on-demand filter), whatever the caller's role.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SstableUploadsConfig {
    /// Whether the routes under `/api/v1/uploads` answer. Default false.
    pub enabled: bool,
    /// Where uploaded components wait for their import, as
    /// `<staging_dir>/<uploadId>/<keyspace>/<table>/<component>`. The node moves imported
    /// files from here into its data directories, so keep it on the same file system as
    /// them (or set `copy_data`). A relative path is taken from the working directory.
    /// Default `<state_dir>/sstable-uploads`.
    pub staging_dir: Option<PathBuf>,
    /// Component uploads received at once; more are answered 429 (Sidecar's
    /// `concurrent_upload_limit`). Default 80.
    pub concurrent_upload_limit: usize,
    /// Free space (percent of the staging file system) that uploads always leave: each upload
    /// reserves its `Content-Length` before reading a byte (one without it reserves each chunk
    /// before writing it), and the free space less every reservation of the uploads in flight
    /// is checked again before each chunk. An upload that would go below it is answered 507,
    /// before writing anything when its length is declared (Sidecar's
    /// `min_free_space_percent`, which the Sidecar checks only when an upload starts). 0 lets
    /// uploads use the file system to its end, never beyond. Default 10.
    pub min_free_space_percent: f64,
    /// The largest component accepted; a longer body is cut off and answered 413. Default
    /// `64 GiB`.
    pub max_component_size: ByteSize,
    /// Longest time an upload's body may send nothing: a body silent for longer is given up
    /// with 408 and its temporary file removed. An upload is bounded by this instead of by
    /// `server.request_timeout`, so a slow one that keeps sending succeeds however long it
    /// takes. `server.idle_timeout` closes a silent connection too: keep this below it.
    /// Default `60s`.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Upload directories staged at once (uploaded, not yet imported nor deleted); a new
    /// upload id beyond them is answered 429. Default 1000.
    pub max_staged_uploads: usize,
    /// Staged uploads untouched for this long are deleted (a writer that died before its
    /// import leaves them behind). Default `24h`.
    #[serde(with = "humantime_serde")]
    pub staged_upload_expiry: Duration,
    /// How imports reach the node, both through its JMX at `cassandra.jmx_address`
    /// (default `127.0.0.1:7199`), with the node's checks on:
    /// - `jmx` (default): one JVM that drover starts at the first import and keeps running
    ///   (`java` in source-file mode, so it needs a JDK, as nodetool's own scripts do) calls
    ///   the node's `importNewSSTables` for each batch;
    /// - `nodetool`: `nodetool import` for each batch, a JVM start each time (about a second).
    pub importer: ImporterKind,
    /// The `java` that runs the `jmx` importer. Default `java` (found on `PATH`).
    pub java: PathBuf,
    /// The `nodetool` of the `nodetool` importer. Default `nodetool` (found on `PATH`).
    pub nodetool: PathBuf,
    /// Longest time one import may take; an import still running then is stopped and
    /// reported failed. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub import_timeout: Duration,
    /// Have the node copy the files instead of moving them (`nodetool import --copy-data`),
    /// for a staging directory on another file system than the node's data. Default false.
    pub copy_data: bool,
    /// How long the outcome of an import is remembered, so that a writer asking again (after
    /// a crash, say) learns that an upload id was imported instead of importing it twice.
    /// Default `7days`.
    #[serde(with = "humantime_serde")]
    pub imported_expiry: Duration,
}

/// `sstable_uploads.importer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImporterKind {
    /// A JVM kept running that calls the node's MBean.
    #[default]
    Jmx,
    /// `nodetool import` per batch.
    Nodetool,
}

impl Default for SstableUploadsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            staging_dir: None,
            concurrent_upload_limit: 80,
            min_free_space_percent: 10.0,
            max_component_size: ByteSize::gib(64),
            idle_timeout: Duration::from_secs(60),
            max_staged_uploads: 1000,
            staged_upload_expiry: Duration::from_secs(24 * 3600),
            importer: ImporterKind::Jmx,
            java: PathBuf::from("java"),
            nodetool: PathBuf::from("nodetool"),
            import_timeout: Duration::from_secs(3600),
            copy_data: false,
            imported_expiry: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl SstableUploadsConfig {
    /// The staging directory, `state_dir` giving the default.
    pub fn staging_dir(&self, state_dir: &std::path::Path) -> PathBuf {
        self.staging_dir
            .clone()
            .unwrap_or_else(|| state_dir.join("sstable-uploads"))
    }

    /// Checks the values; the key path and message of the first problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let key = |k: &str| format!("sstable_uploads.{k}");
        if self.concurrent_upload_limit == 0 || self.concurrent_upload_limit > 10_000 {
            return Err((
                key("concurrent_upload_limit"),
                "must be between 1 and 10000".into(),
            ));
        }
        if !(0.0..=100.0).contains(&self.min_free_space_percent) {
            return Err((
                key("min_free_space_percent"),
                "must be between 0 and 100".into(),
            ));
        }
        if self.max_component_size.as_u64() == 0 {
            return Err((key("max_component_size"), "must be more than 0".into()));
        }
        if self.max_staged_uploads == 0 || self.max_staged_uploads > 1_000_000 {
            return Err((
                key("max_staged_uploads"),
                "must be between 1 and 1000000".into(),
            ));
        }
        for (name, value) in [
            ("idle_timeout", self.idle_timeout),
            ("staged_upload_expiry", self.staged_upload_expiry),
            ("import_timeout", self.import_timeout),
            ("imported_expiry", self.imported_expiry),
        ] {
            if value.is_zero() {
                return Err((key(name), "must be more than 0s".into()));
            }
        }
        if self.nodetool.as_os_str().is_empty() {
            return Err((key("nodetool"), "must not be empty".into()));
        }
        if self.java.as_os_str().is_empty() {
            return Err((key("java"), "must not be empty".into()));
        }
        Ok(())
    }
}
