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
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            max_running: std::num::NonZeroUsize::new(4).expect("non-zero"),
            progress_flush_interval: Duration::from_secs(2),
            resume_interrupted: true,
        }
    }
}
