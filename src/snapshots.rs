//! Snapshots of the local node's tables: Cassandra Sidecar's snapshot routes without HTTP. A
//! bulk reader has the node snapshot a table (`nodetool snapshot`, through the node's JMX),
//! lists the snapshot's files in the node's data directories, downloads them, and clears the
//! snapshot when done. A snapshot is hard links to immutable SSTables: the files stay what
//! they were when it was taken, whatever the node writes or compacts meanwhile.
//!
//! Below each data directory nothing is reached through a symbolic link: every directory is
//! opened from its parent's handle without following links (see
//! [`crate::fsutil::beneath`]), and a keyspace, table or snapshot directory that is a
//! link is refused (403), as the live-migration routes refuse it — else a link in the data
//! directory would serve, or delete, files from anywhere the daemon can read.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use regex::Regex;
use tokio::sync::Semaphore;

use crate::cassandra::names::{self, NameError};
use crate::config::SstableSnapshotsConfig;
use crate::fsutil::beneath::{self, BeneathError};

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

impl SnapshotError {
    /// The same refusal, for every caller that shared one snapshot's run.
    fn duplicate(&self) -> Self {
        match self {
            Self::Disabled => Self::Disabled,
            Self::Invalid(m) => Self::Invalid(m.clone()),
            Self::Forbidden(m) => Self::Forbidden(m.clone()),
            Self::NotFound(m) => Self::NotFound(m.clone()),
            Self::Exists(m) => Self::Exists(m.clone()),
            Self::Busy(m) => Self::Busy(m.clone()),
            Self::Failed(m) => Self::Failed(m.clone()),
            Self::Io { path, source } => Self::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
        }
    }
}

/// Snapshots being taken, by keyspace, table, name and ttl, each with its one run's answer.
type Pending = std::collections::HashMap<
    (String, String, String, Option<String>),
    Arc<tokio::sync::OnceCell<Result<(), SnapshotError>>>,
>;

impl From<NameError> for SnapshotError {
    fn from(e: NameError) -> Self {
        match e {
            NameError::Forbidden(m) => Self::Forbidden(m),
            NameError::Invalid(m) => Self::Invalid(m),
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
            crate::answer::cap(raw)
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

/// A snapshot's directory: `rel` (`<keyspace>/<table dir>/snapshots/<name>`) below data
/// directory `data`, number `index`.
#[derive(Debug, Clone)]
struct SnapshotDir {
    index: usize,
    data: PathBuf,
    rel: String,
}

impl SnapshotDir {
    fn path(&self) -> PathBuf {
        self.data.join(&self.rel)
    }

    /// The snapshot's directory, opened through no link.
    fn open(&self) -> Result<OwnedFd, SnapshotError> {
        beneath::open_dir(&self.data, &self.rel, false).map_err(|e| refusal(e, self.path()))
    }
}

/// What a failure to open `path` below a data directory means.
fn refusal(e: BeneathError, path: PathBuf) -> SnapshotError {
    match e {
        BeneathError::Outside => linked(&path),
        BeneathError::NotFound | BeneathError::Directory => SnapshotError::NotFound(format!(
            "{} is gone (the snapshot was cleared meanwhile?)",
            path.display()
        )),
        BeneathError::Io(source) => SnapshotError::Io { path, source },
    }
}

/// The refusal of a directory that is, or leads through, a symbolic link.
fn linked(path: &std::path::Path) -> SnapshotError {
    SnapshotError::Forbidden(format!(
        "{} is or leads through a symbolic link: snapshot files are served and cleared only          within the node's data directories, never through a link",
        path.display()
    ))
}

/// The names in the directory `dir` with their type (a link is a link, never followed).
fn entries(dir: &OwnedFd) -> std::io::Result<Vec<(String, rustix::fs::Stat)>> {
    let mut out = Vec::new();
    let mut listing = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        // Gone since it was read: left out.
        if let Ok(st) = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            out.push((name.to_string(), st));
        }
    }
    Ok(out)
}

fn is_type(st: &rustix::fs::Stat, t: rustix::fs::FileType) -> bool {
    rustix::fs::FileType::from_raw_mode(st.st_mode) == t
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
    pending: std::sync::Mutex<Pending>,
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
            pending: std::sync::Mutex::new(Pending::new()),
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
                crate::answer::cap(ttl)
            )));
        }
        // Concurrent requests for one snapshot share one nodetool run and its answer: a bulk
        // reader asks once per task (Cassandra Analytics' reader sent 16 at once, and 16 JVMs
        // started: one succeeded, 15 failed with "already exists" after up to 6.7 s).
        let key = (
            keyspace.to_string(),
            table.to_string(),
            name.to_string(),
            ttl.map(str::to_string),
        );
        let cell = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            pending.entry(key.clone()).or_default().clone()
        };
        let taken = cell
            .get_or_init(|| self.take(keyspace, table, name, ttl))
            .await;
        let answer = match taken {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        };
        // The run is over: a later request is a new one (and meets the snapshot it made).
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            pending.remove(&key);
        }
        answer
    }

    /// Runs `nodetool snapshot` once.
    async fn take(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
        ttl: Option<&str>,
    ) -> Result<(), SnapshotError> {
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
            for dir in dirs {
                let handle = dir.open()?;
                let listed = entries(&handle).map_err(|source| SnapshotError::Io {
                    path: dir.path(),
                    source,
                })?;
                for (file_name, st) in listed {
                    // Files only: secondary indexes' directories are not part of the table's
                    // data, and a symbolic link is never followed.
                    if !is_type(&st, rustix::fs::FileType::RegularFile)
                        || names::component(&file_name).is_err()
                    {
                        continue;
                    }
                    if files.len() == max {
                        return Err(SnapshotError::Failed(format!(
                            "Snapshot {name} has more than {max} files (sstable_snapshots.max_listed_files)"
                        )));
                    }
                    files.push(SnapshotFile {
                        size: st.st_size as u64,
                        data_dir_index: dir.index,
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
            for dir in dirs {
                if data_dir_index.is_some_and(|i| i != dir.index) {
                    continue;
                }
                // The open is the check: a link anywhere below the data directory is refused.
                let rel = format!("{}/{component}", dir.rel);
                match beneath::open_file(&dir.data, &rel) {
                    Ok(file) => return Ok(file),
                    Err(BeneathError::NotFound | BeneathError::Directory) => continue,
                    Err(e) => return Err(refusal(e, dir.data.join(&rel))),
                }
            }
            Err(SnapshotError::NotFound(missing))
        })
        .await
        .expect("opening does not panic")?;
        Ok(OpenedComponent { file, permit })
    }

    /// Clears snapshot `name` of `keyspace.table` only, as the Sidecar's route does: its
    /// `snapshots/<name>` directory is removed in every data directory, each reached and
    /// emptied without following links. `nodetool clearsnapshot` takes a keyspace, not a
    /// table: it would clear the tag of every table of the keyspace, other readers' included.
    pub async fn clear(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
    ) -> Result<(), SnapshotError> {
        self.check()?;
        let dirs = self.snapshot_dirs(keyspace, table, name).await?;
        let tag = snapshot_name(name)?.to_string();
        tokio::task::spawn_blocking(move || {
            for dir in dirs {
                let parent = dir
                    .rel
                    .strip_suffix(&format!("/{tag}"))
                    .expect("a snapshot directory ends with its name");
                let path = dir.path();
                let handle = beneath::open_dir(&dir.data, parent, false)
                    .map_err(|e| refusal(e, path.clone()))?;
                beneath::remove_at(&handle, &tag)
                    .map_err(|source| SnapshotError::Io { path, source })?;
            }
            Ok::<_, SnapshotError>(())
        })
        .await
        .expect("clearing does not panic")?;
        tracing::info!(keyspace, table, snapshot = name, "snapshot cleared");
        Ok(())
    }

    /// The directories of snapshot `name` of `keyspace.table`, in every data directory; none
    /// is 404. A keyspace, table or snapshot directory that is a symbolic link is refused
    /// (403), not followed nor skipped silently.
    async fn snapshot_dirs(
        &self,
        keyspace: &str,
        table: &str,
        name: &str,
    ) -> Result<Vec<SnapshotDir>, SnapshotError> {
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
                let tables = match beneath::open_dir(data, &keyspace, false) {
                    Ok(handle) => handle,
                    Err(BeneathError::NotFound) => continue,
                    Err(e) => return Err(refusal(e, data.join(&keyspace))),
                };
                let listed = entries(&tables).map_err(|source| SnapshotError::Io {
                    path: data.join(&keyspace),
                    source,
                })?;
                for (dir_name, st) in listed {
                    let of_table = dir_name == table
                        || TABLE_DIR.captures(&dir_name).is_some_and(|c| c[1] == table);
                    if !of_table {
                        continue;
                    }
                    if is_type(&st, rustix::fs::FileType::Symlink) {
                        return Err(linked(&data.join(&keyspace).join(&dir_name)));
                    }
                    let dir = SnapshotDir {
                        index,
                        data: data.clone(),
                        rel: format!("{keyspace}/{dir_name}/snapshots/{name}"),
                    };
                    match beneath::open_dir(&dir.data, &dir.rel, false) {
                        Ok(_) => found.push(dir),
                        Err(BeneathError::NotFound) => {}
                        Err(e) => return Err(refusal(e, dir.path())),
                    }
                }
            }
            Ok(found)
        })
        .await
        .expect("listing does not panic")?;
        if found.is_empty() {
            return Err(SnapshotError::NotFound(format!(
                "Snapshot '{}' not found",
                crate::answer::cap(snapshot_name_shown)
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

    /// A table directory that is a link to elsewhere is refused (403) for listing, reading
    /// and clearing, and nothing it points to is read or removed; clearing one table's
    /// snapshot leaves another table's of the same name.
    #[tokio::test]
    async fn links_below_the_data_directory_are_refused_and_a_clear_is_one_tables() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("d0");
        let id = "0123456789abcdef0123456789abcdef";
        let outside = root.path().join("outside");
        std::fs::create_dir_all(outside.join("snapshots/s1")).unwrap();
        std::fs::write(outside.join("snapshots/s1/nb-1-big-Data.db"), b"secret").unwrap();
        std::fs::create_dir_all(data.join("ks")).unwrap();
        std::os::unix::fs::symlink(&outside, data.join(format!("ks/linked-{id}"))).unwrap();
        for t in ["a", "b"] {
            let snap = data.join(format!("ks/{t}-{id}/snapshots/s1"));
            std::fs::create_dir_all(&snap).unwrap();
            std::fs::write(snap.join("nb-1-big-Data.db"), b"x").unwrap();
        }
        let config = SstableSnapshotsConfig {
            enabled: true,
            ..Default::default()
        };
        let s = Snapshots::new(&config, None, vec![data.clone()]);
        assert!(matches!(
            s.list("ks", "linked", "s1").await,
            Err(SnapshotError::Forbidden(_))
        ));
        assert!(matches!(
            s.open(("ks", "linked", "s1"), "nb-1-big-Data.db", None)
                .await,
            Err(SnapshotError::Forbidden(_))
        ));
        assert!(matches!(
            s.clear("ks", "linked", "s1").await,
            Err(SnapshotError::Forbidden(_))
        ));
        assert!(outside.join("snapshots/s1/nb-1-big-Data.db").exists());
        s.clear("ks", "a", "s1").await.unwrap();
        assert!(!data.join(format!("ks/a-{id}/snapshots/s1")).exists());
        assert!(data.join(format!("ks/a-{id}/snapshots")).is_dir());
        assert_eq!(s.list("ks", "b", "s1").await.unwrap().len(), 1);
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
