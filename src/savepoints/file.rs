//! Savepoints as files: `savepoint_<13-digit epoch millis>_<10-digit counter>.yaml`.
//!
//! Both parts are zero-padded so that the alphabetical order of names is their chronological
//! order (`ls | tail -n 1` is the newest). Names strictly increase within a process even if the
//! clock steps back: the millisecond part never decreases and the counter, seeded from the
//! names already in the directory, always grows. Each file is written to a temporary name,
//! fsynced and renamed, so a crash never leaves a half-written savepoint under a final name.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Savepoint, SavepointError, SavepointInfo, SavepointStore};
use crate::fsutil;

/// Savepoint files in one directory.
pub struct FileStore {
    dir: PathBuf,
    keep: usize,
    names: Namer,
}

/// Makes savepoint names that increase strictly, seeded from the names already stored.
#[derive(Default)]
pub(super) struct Namer {
    /// Last (millis, counter) used.
    last: Mutex<(u64, u64)>,
}

impl Namer {
    /// Continues after every name of `existing`.
    pub(super) fn seed(&self, existing: &[SavepointInfo]) {
        let newest = existing
            .iter()
            .map(|i| (i.epoch_millis, i.counter))
            .fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last = (last.0.max(newest.0), last.1.max(newest.1));
    }

    /// The next name.
    pub(super) fn next(&self) -> SavepointInfo {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let millis = now.max(last.0);
        let counter = last.1 + 1;
        *last = (millis, counter);
        SavepointInfo {
            name: format!("savepoint_{millis:013}_{counter:010}.yaml"),
            epoch_millis: millis,
            counter,
        }
    }
}

/// The savepoints of `names` (any order), newest first.
pub(super) fn newest_first(names: impl IntoIterator<Item = String>) -> Vec<SavepointInfo> {
    let mut out: Vec<_> = names
        .into_iter()
        .filter_map(|name| {
            let (epoch_millis, counter) = parse_name(&name)?;
            Some(SavepointInfo {
                name,
                epoch_millis,
                counter,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (b.epoch_millis, b.counter, &b.name).cmp(&(a.epoch_millis, a.counter, &a.name))
    });
    out
}

/// Of `newest_first`, those beyond the newest `keep` of the current format: what retention
/// deletes (legacy names are left alone, they are not ours to judge).
pub(super) fn beyond_retention(newest_first: &[SavepointInfo], keep: usize) -> Vec<&SavepointInfo> {
    newest_first
        .iter()
        .filter(|i| is_current_format(&i.name))
        .skip(keep)
        .collect()
}

/// Parses a savepoint document as stored (YAML, with or without the header comment).
pub fn parse_document(name: &str, text: &str) -> Result<serde_json::Value, SavepointError> {
    let document: serde_json::Value =
        crate::config::yaml::from_str(text).map_err(|e| SavepointError::Corrupt {
            name: name.to_string(),
            message: e.to_string(),
        })?;
    if !document.is_object() {
        return Err(SavepointError::Corrupt {
            name: name.to_string(),
            message: "not a mapping".into(),
        });
    }
    Ok(document)
}

/// A savepoint document as stored: the header comment, then the YAML.
pub fn render_document(document: &serde_json::Value) -> String {
    let body = yaml_serde::to_string(document).expect("JSON values serialize as YAML");
    format!("{HEADER}{body}")
}

/// Parses a savepoint file name: the current format, or the legacy `savepoint_<epochSeconds>.yaml`.
pub fn parse_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_prefix("savepoint_")?.strip_suffix(".yaml")?;
    match stem.split_once('_') {
        Some((ms, counter)) if ms.len() == 13 && counter.len() == 10 => {
            Some((ms.parse().ok()?, counter.parse().ok()?))
        }
        None if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()) => {
            Some((stem.parse::<u64>().ok()?.checked_mul(1000)?, 0))
        }
        _ => None,
    }
}

fn is_current_format(name: &str) -> bool {
    name.strip_prefix("savepoint_")
        .and_then(|s| s.strip_suffix(".yaml"))
        .is_some_and(|s| s.len() == 24 && s.as_bytes()[13] == b'_')
}

impl FileStore {
    /// Opens (creating) `dir`, keeping the newest `keep` savepoints of the current format.
    pub fn open(dir: &Path, keep: usize) -> Result<Self, SavepointError> {
        let io = |source| SavepointError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        fsutil::remove_stale_temp_files(dir).map_err(io)?;
        let store = Self {
            dir: dir.to_path_buf(),
            keep: keep.max(1),
            names: Namer::default(),
        };
        store.names.seed(&store.list()?);
        Ok(store)
    }

    /// [`open`](Self::open) on a blocking thread for a job just accepted, holding the
    /// directory's writer lease (taken before stale temporary files are swept: they may be
    /// another run's, which the lease then refuses). The lease is renewed until dropped.
    pub async fn open_for_writing(
        dir: std::path::PathBuf,
        keep: usize,
    ) -> Result<(Self, super::lock::WriterLock), SavepointError> {
        let (store, lock) = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|source| SavepointError::Io {
                path: dir.clone(),
                source,
            })?;
            let lock = super::lock::WriterLock::acquire(&dir)?;
            Ok::<_, SavepointError>((Self::open(&dir, keep)?, lock))
        })
        .await
        .expect("opening savepoints does not panic")?;
        Ok((store, lock.keep_alive()))
    }

    /// A store for reading an existing directory only (listing, resume lookups by others):
    /// unlike [`open`](Self::open) it creates nothing and leaves temporary files alone, since
    /// a running job may be writing one at that moment.
    pub fn reader(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            keep: usize::MAX,
            names: Namer::default(),
        }
    }
}

const HEADER: &str = "# drover savepoint: the job config with its secrets redacted, and the progress made\n\
# (skipTokenRanges, skipSegments, skipParquetFiles, skipMySqlRanges, skipExportDataFiles,\n\
# streamPositions). It is not a job config: run the original config again and automatic\n\
# resume (savepoints.autoResume, on by default) continues from here.\n";

impl SavepointStore for FileStore {
    fn write(&self, document: &serde_json::Value) -> Result<SavepointInfo, SavepointError> {
        let info = self.names.next();
        let path = self.dir.join(&info.name);
        fsutil::write_atomic_private(&path, render_document(document).as_bytes()).map_err(
            |source| SavepointError::Io {
                path: path.clone(),
                source,
            },
        )?;
        for old in beyond_retention(&self.list()?, self.keep) {
            let path = self.dir.join(&old.name);
            std::fs::remove_file(&path).map_err(|source| SavepointError::Io { path, source })?;
        }
        Ok(info)
    }

    fn list(&self) -> Result<Vec<SavepointInfo>, SavepointError> {
        let io = |source| SavepointError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(io)? {
            names.push(
                entry
                    .map_err(io)?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        Ok(newest_first(names))
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn read(&self, info: &SavepointInfo) -> Result<Savepoint, SavepointError> {
        let path = self.dir.join(&info.name);
        let text =
            std::fs::read_to_string(&path).map_err(|source| SavepointError::Io { path, source })?;
        let document = parse_document(&info.name, &text)?;
        Ok(Savepoint {
            info: info.clone(),
            document,
        })
    }
}
