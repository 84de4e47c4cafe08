//! Job records on disk: one JSON file per job, written atomically.

use std::fs;
use std::path::{Path, PathBuf};

use super::{JobError, JobRecord};
use crate::fsutil;

/// The directory of job records.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    pub(crate) fn open(dir: &Path) -> Result<Self, JobError> {
        let io = |source| JobError::Storage {
            path: dir.to_path_buf(),
            source,
        };
        fs::create_dir_all(dir).map_err(io)?;
        let removed = fsutil::remove_stale_temp_files(dir).map_err(io)?;
        if removed > 0 {
            tracing::info!(
                removed,
                "removed temporary job files left by an earlier crash"
            );
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    pub(crate) fn save(&self, record: &JobRecord) -> Result<(), JobError> {
        let path = self.path_of(&record.id);
        let bytes = serde_json::to_vec_pretty(record).expect("job records always serialize");
        fsutil::write_atomic(&path, &bytes).map_err(|source| JobError::Storage { path, source })
    }

    /// Deletes the record of job `id` and its kept job file; missing files are not an error.
    pub(crate) fn remove(&self, id: &str) -> Result<(), JobError> {
        for path in [self.path_of(id), self.dir.join(super::kept::file_name(id))] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(JobError::Storage { path, source }),
            }
        }
        fsutil::sync_dir(&self.dir).map_err(|source| JobError::Storage {
            path: self.dir.clone(),
            source,
        })
    }

    /// Reads every record. A file that cannot be parsed is renamed to `*.corrupt` (kept for the
    /// operator to look at) and skipped, so one bad file never stops the daemon.
    pub(crate) fn load_all(&self) -> Result<Vec<JobRecord>, JobError> {
        let io = |source| JobError::Storage {
            path: self.dir.clone(),
            source,
        };
        let mut records = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let parsed = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<JobRecord>(&bytes).map_err(|e| e.to_string())
                });
            match parsed {
                Ok(record) => records.push(record),
                Err(reason) => {
                    let aside = path.with_extension("json.corrupt");
                    tracing::warn!(path = %path.display(), %reason, aside = %aside.display(), "unreadable job record set aside");
                    fs::rename(&path, &aside).map_err(|source| JobError::Storage {
                        path: path.clone(),
                        source,
                    })?;
                }
            }
        }
        records.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(records)
    }
}
