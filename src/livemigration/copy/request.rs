//! What a data-copy task is asked to do, and what it reports per iteration (Sidecar's field
//! names and states).

use serde::{Deserialize, Serialize};

use crate::livemigration::LiveMigrationError;
use crate::livemigration::digest::Algorithm;

/// A data-copy task request (Sidecar's fields, plus drover's `verifyDigest`,
/// `maxBytesPerSecond` and `allowMassDeletion`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopyRequest {
    /// Most iterations (at least 1).
    pub max_iterations: u32,
    /// Share (0 to 1) of the source's bytes that must already be identical at the destination
    /// for the task to succeed; 1 for the final copy after the source node stopped.
    pub success_threshold: f64,
    /// Files downloaded at once (at least 1).
    pub max_concurrency: usize,
    /// drover: check each download against the source's digest (`none`, `sha256`, `xxh3`).
    #[serde(default)]
    pub verify_digest: Option<String>,
    /// drover: most bytes per second downloaded, all files together (unset: no limit).
    #[serde(default)]
    pub max_bytes_per_second: Option<u64>,
    /// drover: let an iteration delete more than `live_migration.max_delete_share` of the
    /// destination's files, or all of them (default false: such a plan fails the task, since
    /// an empty or truncated listing from the source would otherwise wipe the node).
    #[serde(default)]
    pub allow_mass_deletion: bool,
}

/// The most passes of a data-copy task.
pub const MAX_ITERATIONS: u32 = 100;
/// The most files a data-copy task downloads at once.
pub const MAX_CONCURRENCY: usize = 256;

impl CopyRequest {
    /// Checks the values; the message names the field.
    pub fn check(&self) -> Result<Option<Algorithm>, LiveMigrationError> {
        let bad = |m: &str| Err(LiveMigrationError::InvalidRequest(m.into()));
        // Upper bounds too: each iteration lists the whole node and each unit of concurrency
        // holds a connection and a buffer, so these numbers must not size the daemon's memory.
        if !(1..=MAX_ITERATIONS).contains(&self.max_iterations) {
            return bad(&format!("maxIterations: must be 1 to {MAX_ITERATIONS}"));
        }
        if !(0.0..=1.0).contains(&self.success_threshold) {
            return bad("successThreshold: must be between 0 and 1");
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.max_concurrency) {
            return bad(&format!("maxConcurrency: must be 1 to {MAX_CONCURRENCY}"));
        }
        // The rate limiter counts in 32-bit cells: a larger value would be cut silently.
        if let Some(rate) = self.max_bytes_per_second
            && !(1..=u64::from(u32::MAX)).contains(&rate)
        {
            return bad(&format!(
                "maxBytesPerSecond: must be 1 to {} (leave it out for no limit), not {rate}",
                u32::MAX
            ));
        }
        match self.verify_digest.as_deref() {
            None | Some("none") => Ok(None),
            Some("sha256") => Ok(Some(Algorithm::Sha256)),
            Some("xxh3") => Ok(Some(Algorithm::Xxh3)),
            Some(other) => Err(LiveMigrationError::InvalidRequest(format!(
                "verifyDigest: {other:?} is not one of none, sha256, xxh3"
            ))),
        }
    }
}

/// States of an iteration (Sidecar's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IterationState {
    /// Listing the source.
    Starting,
    /// Deleting local files that differ from the source's.
    Cleaning,
    /// Creating directories, computing what to download.
    Preparing,
    /// Downloading.
    Downloading,
    /// Downloads of this iteration done.
    DownloadComplete,
    /// The threshold is met: the task succeeded.
    Success,
    /// The task failed.
    Failed,
    /// The task was cancelled.
    Cancelled,
}

/// One iteration of a task (Sidecar's fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IterationStatus {
    /// Number, from 0.
    pub iteration: u32,
    /// Where it is.
    pub state: IterationState,
    /// Bytes of the source's files.
    pub total_size: u64,
    /// The source's files.
    pub total_files: u64,
    /// Bytes to download in this iteration.
    pub bytes_to_download: u64,
    /// Files to download in this iteration.
    pub files_to_download: u64,
    /// Files downloaded.
    pub files_downloaded: u64,
    /// Files that could not be downloaded.
    pub download_failures: u64,
    /// Bytes downloaded.
    pub bytes_downloaded: u64,
}

/// Whether an iteration may stop: nothing left to download, or the share of the source's files
/// already identical at the destination reaches `threshold`. Files, not bytes: a running node
/// keeps rewriting its preallocated commit-log segments, which would keep a share of bytes
/// below any useful threshold until the node stops. `1.0` means every file.
pub fn threshold_met(total_files: u64, files_to_download: u64, threshold: f64) -> bool {
    if files_to_download == 0 {
        return true;
    }
    let share =
        (total_files - files_to_download.min(total_files)) as f64 / total_files.max(1) as f64;
    share >= threshold && threshold < 1.0
}

/// What a data-copy job keeps as its result: the iterations so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CopyReport {
    /// One entry per iteration, oldest first.
    pub status: Vec<IterationStatus>,
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        // Nothing to download: done, whatever the threshold.
        assert!(threshold_met(2, 0, 1.0));
        // 9 of 10 files identical.
        assert!(threshold_met(10, 1, 0.9));
        assert!(!threshold_met(10, 2, 0.9));
        // 1.0 means every file, never a share rounded up.
        assert!(!threshold_met(1_000_000, 1, 1.0));
        assert!(threshold_met(10, 10, 0.0));
    }

    #[test]
    fn requests_are_checked() {
        let ok = CopyRequest {
            max_iterations: 3,
            success_threshold: 0.9,
            max_concurrency: 4,
            verify_digest: Some("xxh3".into()),
            max_bytes_per_second: None,
            allow_mass_deletion: false,
        };
        assert_eq!(ok.check().unwrap(), Some(Algorithm::Xxh3));
        let bad = |f: &dyn Fn(&mut CopyRequest)| {
            let mut r = ok.clone();
            f(&mut r);
            r.check().unwrap_err().to_string()
        };
        assert!(bad(&|r| r.max_iterations = 0).starts_with("maxIterations"));
        assert!(bad(&|r| r.success_threshold = 1.5).starts_with("successThreshold"));
        assert!(bad(&|r| r.max_concurrency = 0).starts_with("maxConcurrency"));
        assert!(bad(&|r| r.verify_digest = Some("md5".into())).starts_with("verifyDigest"));
        for rate in [0, u64::from(u32::MAX) + 1, u64::MAX] {
            let e = bad(&|r| r.max_bytes_per_second = Some(rate));
            assert!(
                e.starts_with("maxBytesPerSecond: must be 1 to 4294967295"),
                "{e}"
            );
        }
        let mut top = ok.clone();
        top.max_bytes_per_second = Some(u64::from(u32::MAX));
        assert!(top.check().is_ok());
    }
}
