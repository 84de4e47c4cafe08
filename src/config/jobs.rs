//! `jobs`: how the daemon runs long work (migrations, validations, data-copy tasks).

use std::time::Duration;

use serde::Deserialize;

/// Job execution settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// Jobs allowed to run at once; further jobs wait in state `QUEUED`. Each job has its own
    /// concurrency settings, so this bounds the load put on the databases. Default `4`.
    pub max_running: std::num::NonZeroUsize,
    /// How often progress counters of running jobs are written to disk. After `kill -9` a job's
    /// counters are at most this old; its state and savepoints are always exact. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub progress_flush_interval: Duration,
    /// On start, resume the migrations that were running when the daemon last stopped
    /// (crash, `kill -9`, shutdown); they continue from their newest savepoint. Default true.
    pub resume_interrupted: bool,
    /// Which finished jobs (`SUCCEEDED`, `DIFFERENCES_FOUND`, `FAILED`, `CANCELLED`) are kept; the
    /// others are dropped with their records and kept job files.
    pub keep_finished: KeepFinished,
    /// A file holding the secret key (16 to 4096 bytes, e.g. 32 random bytes) with which
    /// savepoints kept in a table of the target database (`savepoints.target.type:
    /// target-table`) store a source `where` filter: as its HMAC-SHA256, so that readers of
    /// the table cannot confirm guesses of the filter. Daemons sharing jobs must share the
    /// key. Unset: such jobs with a `where` filter are refused. Default unset.
    pub savepoint_filter_key_file: Option<std::path::PathBuf>,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            max_running: std::num::NonZeroUsize::new(4).expect("non-zero"),
            progress_flush_interval: Duration::from_secs(2),
            resume_interrupted: true,
            keep_finished: KeepFinished::default(),
            savepoint_filter_key_file: None,
        }
    }
}

/// `jobs.keep_finished`: retention of finished jobs. A job is dropped when either limit says
/// so; `null` turns a limit off. `INTERRUPTED` jobs are kept until resumed or deleted.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeepFinished {
    /// Keep at most this many finished jobs, the most recently ended. Default `1000`.
    pub count: Option<usize>,
    /// Drop finished jobs that ended longer ago than this. Default `30days`.
    #[serde(with = "humantime_serde")]
    pub age: Option<Duration>,
}

impl Default for KeepFinished {
    fn default() -> Self {
        Self {
            count: Some(1000),
            age: Some(Duration::from_secs(30 * 24 * 3600)),
        }
    }
}

impl JobsConfig {
    /// Checks what serde cannot; errors name the key.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        if let Some(path) = &self.savepoint_filter_key_file {
            read_filter_key(path).map_err(|m| ("jobs.savepoint_filter_key_file".to_string(), m))?;
        }
        if self.keep_finished.count == Some(0) {
            return Err((
                "jobs.keep_finished.count".into(),
                "must be at least 1 (a finished job must stay readable for a while; null keeps every finished job)".into(),
            ));
        }
        if self.keep_finished.age.is_some_and(|a| a.is_zero()) {
            return Err((
                "jobs.keep_finished.age".into(),
                "must be more than 0s (null keeps finished jobs whatever their age)".into(),
            ));
        }
        Ok(())
    }
}
/// Reads a filter key file (`jobs.savepoint_filter_key_file`, `DROVER_SAVEPOINT_FILTER_KEY_FILE`):
/// its bytes, 16 to 4096 of them (trailing newline excluded).
pub fn read_filter_key(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > 4097 {
        return Err(format!(
            "{}: {} bytes; a key is 16 to 4096 bytes",
            path.display(),
            meta.len()
        ));
    }
    let mut key = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if key.last() == Some(&b'\n') {
        key.pop();
    }
    if key.len() < 16 {
        return Err(format!(
            "{}: {} bytes; a key is at least 16 bytes (head -c 32 /dev/urandom > FILE makes one)",
            path.display(),
            key.len()
        ));
    }
    Ok(key)
}
