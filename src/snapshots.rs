//! Snapshots of the local node's tables: Cassandra Sidecar's snapshot routes without HTTP. A
//! bulk reader has the node snapshot a table (`nodetool snapshot`, through the node's JMX),
//! lists the snapshot's files in the node's data directories, downloads them, and clears the
//! snapshot when done. A snapshot is hard links to immutable SSTables: the files stay what
//! they were when it was taken, whatever the node writes or compacts meanwhile.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use regex::Regex;
use tokio::sync::Semaphore;

use crate::config::SstableSnapshotsConfig;
use crate::uploads::{UploadError, names};

/// Why a snapshot request was refused or failed. Each message is a complete sentence for the
/// caller; the API maps variants to statuses.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The routes are off (`sstable_snapshots.enabled`).
    #[error("SSTable snapshots are not enabled on this node (sstable_snapshots.enabled)")]
    Disabled,
    /// A name or a parameter is malformed.
    #[error("{0}")]
    Invalid(String),
    /// A system keyspace.
    #[error("{0}")]
    Forbidden(String),
    /// No such snapshot, table or file.
    #[error("{0}")]
    NotFound(String),
    /// A snapshot of that name exists already.
    #[error("{0}")]
    Exists(String),
    /// Too many downloads at once.
    #[error("{0}")]
    Busy(String),
    /// nodetool failed, or the node refused.
    #[error("{0}")]
    Failed(String),
    /// A directory of the node could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl From<UploadError> for SnapshotError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::Forbidden(m) => Self::Forbidden(m),
            other => Self::Invalid(other.to_string()),
        }
    }
}

static SNAPSHOT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z0-9_-][a-zA-Z0-9_.-]{0,127}$").expect("a valid pattern"));
static TTL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9]{1,9}(d|h|m|s)$").expect("a valid pattern"));
// A table's directory: its name, then `-` and the table id (32 hex digits) since 2.1.
static TABLE_DIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.+)-[0-9a-f]{32}$").expect("a valid pattern"));

/// A snapshot name: letters, digits, `_`, `-` and `.` (not first), at most 128: one plain
/// directory name, never `..` nor a separator.
pub fn snapshot_name(raw: &str) -> Result<&str, SnapshotError> {
    if SNAPSHOT.is_match(raw) {
        Ok(raw)
    } else {
        Err(SnapshotError::Invalid(format!(
            "Invalid characters in snapshot name: {} (expected letters, digits, '_', '-' and '.', at most 128)",
            crate::jobfile::cap(raw)
        )))
    }
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// Bytes.
    pub size: u64,
    /// The index of its data directory in `cassandra.data_file_directories`.
    pub data_dir_index: usize,
    /// Its file name (`nb-1-big-Data.db`, `manifest.json`, ...).
    pub file_name: String,
}

/// A file opened for download, with its download slot.
pub struct OpenedComponent {
    /// The open file.
    pub file: std::fs::File,
    /// The slot; to be kept until the last byte is sent.
    pub permit: tokio::sync::OwnedSemaphorePermit,
}

/// Snapshots of the local node.
pub struct Snapshots {
    enabled: bool,
    nodetool: PathBuf,
    jmx: Option<String>,
    data_dirs: Vec<PathBuf>,
    timeout: Duration,
    max_files: usize,
    downloads: Arc<Semaphore>,
}

impl Snapshots {
    /// Snapshots as `config` says, of the node at `jmx` whose data is in `data_dirs`.
    pub fn new(
        config: &SstableSnapshotsConfig,
        jmx: Option<String>,
        data_dirs: Vec<PathBuf>,
    ) -> Self {
        Self {
            enabled: config.enabled,
            nodetool: config.nodetool.clone(),
            jmx,
            data_dirs,
            timeout: config.command_timeout,
            max_files: config.max_listed_files,
            downloads: Arc::new(Semaphore::new(config.concurrent_downloads)),
        }
    }

    /// Whether the routes answer.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self) -> Result<(), SnapshotError> {
        if self.enabled {
            Ok(())
        } else {
            Err(SnapshotError::Disabled)
        }
    }

    /// Takes snapshot `name` of `keyspace.table`; Cassandra removes it after `ttl` (`30m`,
    /// `2h`, `1d`, ...) when given.
    pub async fn create(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
        ttl: Option<&str>,
    ) -> Result<(), SnapshotError> {
        self.check()?;
        let (keyspace, table, name) = (
            names::keyspace(keyspace)?,
            names::table(table)?,
            snapshot_name(name)?,
        );
        if let Some(ttl) = ttl
            && !TTL.is_match(ttl)
        {
            return Err(SnapshotError::Invalid(format!(
                "Invalid ttl: {} (expected a number and a unit, d, h, m or s: 2h)",
                crate::jobfile::cap(ttl)
            )));
        }
        let mut args = vec!["snapshot".to_string(), "-t".into(), name.into()];
        if let Some(ttl) = ttl {
            args.extend(["--ttl".into(), ttl.into()]);
        }
        args.extend(["-kt".into(), format!("{keyspace}.{table}")]);
        self.nodetool(&args).await.map_err(|said| {
            let lower = said.to_ascii_lowercase();
            if lower.contains("already exists") {
                SnapshotError::Exists(format!("Snapshot {name} already exists: {said}"))
            } else if lower.contains("does not exist") || lower.contains("unknown keyspace") {
                SnapshotError::NotFound(format!("No table {keyspace}.{table}: {said}"))
            } else {
                SnapshotError::Failed(format!(
                    "Failed to snapshot {keyspace}.{table} as {name}: {said}"
                ))
            }
        })?;
        tracing::info!(keyspace, table, snapshot = name, "snapshot taken");
        Ok(())
    }

    /// The files of snapshot `name` of `keyspace.table`, in every data directory.
    pub async fn list(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
    ) -> Result<Vec<SnapshotFile>, SnapshotError> {
        self.check()?;
        let dirs = self.snapshot_dirs(keyspace, table, name).await?;
        let max = self.max_files;
        let name = name.to_string();
        tokio::task::spawn_blocking(move || {
            let mut files = Vec::new();
            for (index, dir) in dirs {
                let entries = std::fs::read_dir(&dir).map_err(|source| SnapshotError::Io {
                    path: dir.clone(),
                    source,
                })?;
                for entry in entries {
                    let entry = entry.map_err(|source| SnapshotError::Io {
                        path: dir.clone(),
                        source,
                    })?;
                    // Files only: secondary indexes' directories are not part of the table's
                    // data, and a symbolic link is never followed.
                    let Ok(meta) = entry.path().symlink_metadata() else {
                        continue;
                    };
                    let file_name = entry.file_name().to_string_lossy().into_owned();
                    if !meta.is_file() || names::component(&file_name).is_err() {
                        continue;
                    }
                    if files.len() == max {
                        return Err(SnapshotError::Failed(format!(
                            "Snapshot {name} has more than {max} files (sstable_snapshots.max_listed_files)"
                        )));
                    }
                    files.push(SnapshotFile {
                        size: meta.len(),
                        data_dir_index: index,
                        file_name,
                    });
                }
            }
            files.sort_by(|a, b| {
                (a.data_dir_index, &a.file_name).cmp(&(b.data_dir_index, &b.file_name))
            });
            Ok(files)
        })
        .await
        .expect("listing does not panic")
    }

    /// Opens `component` of snapshot `name` for download, from data directory
    /// `data_dir_index` (the first holding it when not given).
    pub async fn open(
        &self,
        (keyspace, table, name): (&str, &str, &str),
        component: &str,
        data_dir_index: Option<usize>,
    ) -> Result<OpenedComponent, SnapshotError> {
        self.check()?;
        let component = names::component(component)?.to_string();
        let permit = self.downloads.clone().try_acquire_owned().map_err(|_| {
            SnapshotError::Busy(format!(
                "too many downloads at once ({}, sstable_snapshots.concurrent_downloads); retry later",
                self.downloads.available_permits()
            ))
        })?;
        let dirs = self.snapshot_dirs(keyspace, table, name).await?;
        let missing = format!("Snapshot {name} of {keyspace}.{table} has no file {component}");
        let file = tokio::task::spawn_blocking(move || {
            for (index, dir) in dirs {
                if data_dir_index.is_some_and(|i| i != index) {
                    continue;
                }
                let path = dir.join(&component);
                match path.symlink_metadata() {
                    Ok(meta) if meta.is_file() => {
                        return std::fs::File::open(&path)
                            .map_err(|source| SnapshotError::Io { path, source });
                    }
                    _ => continue,
                }
            }
            Err(SnapshotError::NotFound(missing))
        })
        .await
        .expect("opening does not panic")?;
        Ok(OpenedComponent { file, permit })
    }

    /// Clears snapshot `name` (of the whole keyspace, as `nodetool clearsnapshot -t` does: the
    /// name is the reader's own).
    pub async fn clear(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
    ) -> Result<(), SnapshotError> {
        self.check()?;
        let dirs = self.snapshot_dirs(keyspace, table, name).await?;
        if dirs.is_empty() {
            return Err(SnapshotError::NotFound(format!(
                "Snapshot '{name}' not found"
            )));
        }
        let keyspace = names::keyspace(keyspace)?;
        let args = ["clearsnapshot", "-t", name, "--", keyspace].map(String::from);
        self.nodetool(&args).await.map_err(|said| {
            SnapshotError::Failed(format!("Failed to clear snapshot {name}: {said}"))
        })?;
        tracing::info!(keyspace, table, snapshot = name, "snapshot cleared");
        Ok(())
    }

    /// The directories of snapshot `name` of `keyspace.table`, with their data directory's
    /// index; none is 404.
    async fn snapshot_dirs(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
    ) -> Result<Vec<(usize, PathBuf)>, SnapshotError> {
        let snapshot_name_shown = name;
        let (keyspace, table, name) = (
            names::keyspace(keyspace)?.to_string(),
            names::table(table)?.to_string(),
            snapshot_name(name)?.to_string(),
        );
        if self.data_dirs.is_empty() {
            return Err(SnapshotError::Failed(
                "the node's data directories are not known (cassandra.data_file_directories, or cassandra.cassandra_yaml)".into(),
            ));
        }
        let data_dirs = self.data_dirs.clone();
        let found = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            for (index, data) in data_dirs.iter().enumerate() {
                let Ok(tables) = std::fs::read_dir(data.join(&keyspace)) else {
                    continue;
                };
                for t in tables.flatten() {
                    let dir_name = t.file_name().to_string_lossy().into_owned();
                    let of_table = dir_name == table
                        || TABLE_DIR.captures(&dir_name).is_some_and(|c| c[1] == table);
                    let dir = t.path().join("snapshots").join(&name);
                    if of_table && is_dir(&dir) {
                        found.push((index, dir));
                    }
                }
            }
            found
        })
        .await
        .expect("listing does not panic");
        if found.is_empty() {
            return Err(SnapshotError::NotFound(format!(
                "Snapshot '{}' not found",
                crate::jobfile::cap(snapshot_name_shown)
            )));
        }
        Ok(found)
    }

    /// Runs nodetool with `args`; what it said when it failed.
    async fn nodetool(&self, args: &[String]) -> Result<(), String> {
        use crate::cassandra::nodetool::{Failure, run};
        let shown = format!("{} {}", self.nodetool.display(), args[0]);
        run(&self.nodetool, self.jmx.as_deref(), args, self.timeout)
            .await
            .map_err(|f| match f {
                Failure::TimedOut => format!(
                    "{shown} did not end within sstable_snapshots.command_timeout ({})",
                    humantime::format_duration(self.timeout)
                ),
                Failure::NotRun(e) => {
                    format!("{shown} could not be run (sstable_snapshots.nodetool): {e}")
                }
                Failure::Failed(status, said) => format!("{shown} ended with {status}: {said}"),
            })
    }
}

fn is_dir(p: &Path) -> bool {
    p.symlink_metadata().is_ok_and(|m| m.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_are_one_plain_directory_name() {
        for good in ["drover-0190c0de", "a", "snap_1.2"] {
            assert!(snapshot_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            &"x".repeat(129),
            "sp ace",
        ] {
            assert!(snapshot_name(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_snapshot_lists_its_files_in_every_data_directory_and_opens_none_outside() {
        let root = tempfile::tempdir().unwrap();
        let d0 = root.path().join("d0");
        let d1 = root.path().join("d1");
        for (d, f) in [(&d0, "nb-1-big-Data.db"), (&d1, "nb-2-big-Data.db")] {
            let snap = d.join("ks/t-0123456789abcdef0123456789abcdef/snapshots/s1");
            std::fs::create_dir_all(snap.join("idx")).unwrap();
            std::fs::write(snap.join(f), b"12345").unwrap();
        }
        // Another table whose name starts the same is not this one's.
        let other = d0.join("ks/t2-0123456789abcdef0123456789abcdef/snapshots/s1");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("nb-9-big-Data.db"), b"x").unwrap();
        let config = SstableSnapshotsConfig {
            enabled: true,
            ..Default::default()
        };
        let s = Snapshots::new(&config, None, vec![d0, d1]);
        let files = s.list("ks", "t", "s1").await.unwrap();
        assert_eq!(
            files,
            vec![
                SnapshotFile {
                    size: 5,
                    data_dir_index: 0,
                    file_name: "nb-1-big-Data.db".into()
                },
                SnapshotFile {
                    size: 5,
                    data_dir_index: 1,
                    file_name: "nb-2-big-Data.db".into()
                },
            ]
        );
        assert!(matches!(
            s.list("ks", "t", "s2").await,
            Err(SnapshotError::NotFound(_))
        ));
        assert!(
            s.open(("ks", "t", "s1"), "nb-2-big-Data.db", Some(1))
                .await
                .is_ok()
        );
        assert!(matches!(
            s.open(("ks", "t", "s1"), "nb-2-big-Data.db", Some(0)).await,
            Err(SnapshotError::NotFound(_))
        ));
        assert!(matches!(
            s.open(
                ("ks", "t", "s1"),
                "../../t2-0123456789abcdef0123456789abcdef/snapshots/s1/nb-9-big-Data.db",
                None
            )
            .await,
            Err(SnapshotError::Invalid(_))
        ));
        assert!(matches!(
            s.list("system", "t", "s1").await,
            Err(SnapshotError::Forbidden(_))
        ));
        let off = Snapshots::new(&SstableSnapshotsConfig::default(), None, vec![]);
        assert!(matches!(
            off.list("ks", "t", "s1").await,
            Err(SnapshotError::Disabled)
        ));
    }

    /// `max_listed_files` files are listed, counted across data directories; one more file
    /// refuses the listing, naming the snapshot, the bound and the setting.
    #[tokio::test]
    async fn a_snapshot_of_max_listed_files_is_listed_and_one_file_more_refused() {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = (0..2).map(|i| root.path().join(format!("d{i}"))).collect();
        let snap = |d: &PathBuf| d.join("ks/t-0123456789abcdef0123456789abcdef/snapshots/s1");
        for (i, d) in dirs.iter().enumerate() {
            std::fs::create_dir_all(snap(d)).unwrap();
            for n in 0..2 {
                std::fs::write(snap(d).join(format!("nb-{i}{n}-big-Data.db")), b"x").unwrap();
            }
        }
        let config = SstableSnapshotsConfig {
            enabled: true,
            max_listed_files: 4,
            ..Default::default()
        };
        let s = Snapshots::new(&config, None, dirs.clone());
        assert_eq!(s.list("ks", "t", "s1").await.unwrap().len(), 4);
        std::fs::write(snap(&dirs[1]).join("nb-99-big-Data.db"), b"x").unwrap();
        let e = s.list("ks", "t", "s1").await.unwrap_err().to_string();
        assert!(
            e.contains("Snapshot s1 has more than 4 files (sstable_snapshots.max_listed_files)"),
            "{e}"
        );
    }
}
