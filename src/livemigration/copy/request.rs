//! What a data-copy task is asked to do, and what it reports per iteration (Sidecar's field
//! names, states and counters).

use serde::{Deserialize, Serialize};

use crate::livemigration::LiveMigrationError;
use crate::livemigration::digest::Algorithm;

/// A data-copy task request: Sidecar's fields, plus drover's `verifyDigest`,
/// `maxBytesPerSecond`, `allowMassDeletion` and `thresholdBasis`. Fields it does not know are
/// ignored, as the Sidecar ignores them, and logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopyRequest {
    /// Most downloading iterations (at least 1); one more pass then only checks the threshold.
    pub max_iterations: u32,
    /// Share (0 to 1) of the source's bytes (see `thresholdBasis`) that must already be
    /// identical at the destination for an iteration to succeed without downloading: it
    /// succeeds when the share is strictly above it, so 1 means every byte (the final copy
    /// after the source node stopped).
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
    /// drover: what `successThreshold` is a share of: `bytes` (default, the Sidecar's
    /// meaning) or `files` (drover's earlier meaning: the share of the source's files already
    /// identical, reached with `>=`; useful while the source node runs, whose preallocated
    /// commit-log segments keep a share of bytes low).
    #[serde(default)]
    pub threshold_basis: ThresholdBasis,
    /// Fields this version does not know: ignored, as the Sidecar ignores them.
    #[serde(flatten, skip_serializing)]
    #[schema(ignore)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What `successThreshold` is a share of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThresholdBasis {
    /// The source's bytes (Sidecar's).
    #[default]
    Bytes,
    /// The source's files.
    Files,
}

impl ThresholdBasis {
    /// The name requests use.
    pub fn name(self) -> &'static str {
        match self {
            ThresholdBasis::Bytes => "bytes",
            ThresholdBasis::Files => "files",
        }
    }
}

/// The most passes of a data-copy task.
pub const MAX_ITERATIONS: u32 = 100;
/// The most files a data-copy task downloads at once.
pub const MAX_CONCURRENCY: usize = 256;

impl CopyRequest {
    /// A request with the Sidecar's three fields and drover's defaults for the rest.
    pub fn new(max_iterations: u32, success_threshold: f64, max_concurrency: usize) -> Self {
        Self {
            max_iterations,
            success_threshold,
            max_concurrency,
            verify_digest: None,
            max_bytes_per_second: None,
            allow_mass_deletion: false,
            threshold_basis: ThresholdBasis::default(),
            extra: serde_json::Map::new(),
        }
    }

    /// The names of the fields that were sent and are ignored.
    pub fn ignored_fields(&self) -> impl Iterator<Item = &str> {
        self.extra.keys().map(String::as_str)
    }

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

/// One iteration of a task: the Sidecar's fields, in its order and with its types. The
/// first four are -1 until known: `totalSize` and `totalFiles` once the source is listed
/// (`CLEANING`), `bytesToDownload` and `filesToDownload` once the download starts
/// (`DOWNLOADING`; an iteration that succeeds without downloading keeps -1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IterationStatus {
    /// Number, from 0.
    pub iteration: u32,
    /// Where it is.
    pub state: IterationState,
    /// Bytes of the source's files (-1 until listed).
    pub total_size: i64,
    /// Entries of the source's listing, files and directories (-1 until listed).
    pub total_files: i64,
    /// Bytes of the files to download (-1 until downloading).
    pub bytes_to_download: i64,
    /// Entries to download or create: files, empty files and directories (-1 until
    /// downloading).
    pub files_to_download: i64,
    /// Entries downloaded or created.
    pub files_downloaded: i64,
    /// Entries that could not be downloaded or created.
    pub download_failures: i64,
    /// Bytes downloaded.
    pub bytes_downloaded: i64,
    /// drover: bytes of changed files not downloaded because the version here already had
    /// them (a prefix matched by the source's block digests). Not in Sidecar's status.
    #[serde(default)]
    pub bytes_kept: i64,
}

impl IterationStatus {
    /// Iteration `iteration` as it starts: nothing known yet.
    pub fn starting(iteration: u32) -> Self {
        Self {
            iteration,
            state: IterationState::Starting,
            total_size: UNKNOWN,
            total_files: UNKNOWN,
            bytes_to_download: UNKNOWN,
            files_to_download: UNKNOWN,
            files_downloaded: 0,
            download_failures: 0,
            bytes_downloaded: 0,
            bytes_kept: 0,
        }
    }
}

/// A counter not known yet (Sidecar's sentinel).
pub const UNKNOWN: i64 = -1;

/// A count as a status counter (saturated: a status cannot show more than `i64::MAX`).
pub fn counter(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What the source lists and what of it an iteration still has to fetch, in bytes and in
/// files (regular files only: directories have no bytes, and drover's files basis never
/// counted them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shares {
    /// Bytes of the source's files.
    pub total_bytes: u64,
    /// The source's files.
    pub total_files: u64,
    /// Bytes still to fetch.
    pub missing_bytes: u64,
    /// Files still to fetch or create.
    pub missing_files: u64,
}

/// Whether the threshold lets an iteration that still has something to fetch succeed
/// without fetching it.
///
/// `bytes` (the Sidecar's rule): when the share of the source's bytes already here is
/// strictly above `threshold`. Nothing is skipped when no bytes are missing (what is left are
/// directories and empty files, created at once), and `1.0` means everything, since a share
/// never exceeds 1.
///
/// `files` (drover's rule before): when the share of the source's files already here reaches
/// `threshold`, and `threshold` is below 1. A running node keeps rewriting its preallocated
/// commit-log segments, which can keep a share of bytes below a useful threshold until the
/// node stops, while a share of files moves past it.
pub fn threshold_met(basis: ThresholdBasis, threshold: f64, s: Shares) -> bool {
    match basis {
        ThresholdBasis::Bytes => {
            if s.missing_bytes == 0 || s.total_bytes == 0 {
                return false;
            }
            let present = s.total_bytes - s.missing_bytes.min(s.total_bytes);
            present as f64 / s.total_bytes as f64 > threshold
        }
        ThresholdBasis::Files => {
            if s.missing_files == 0 {
                return false;
            }
            let present = s.total_files - s.missing_files.min(s.total_files);
            present as f64 / s.total_files.max(1) as f64 >= threshold && threshold < 1.0
        }
    }
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

    fn shares(
        total_bytes: u64,
        missing_bytes: u64,
        total_files: u64,
        missing_files: u64,
    ) -> Shares {
        Shares {
            total_bytes,
            total_files,
            missing_bytes,
            missing_files,
        }
    }

    #[test]
    fn the_threshold_counts_bytes_by_default_as_the_sidecar() {
        let met = |t: f64, s: Shares| threshold_met(ThresholdBasis::Bytes, t, s);
        // 90 of 100 bytes here: strictly above 0.8, not above 0.9 (the Sidecar's `>`).
        assert!(met(0.8, shares(100, 10, 10, 1)));
        assert!(!met(0.9, shares(100, 10, 10, 1)));
        // Bytes, not files: one file of ten missing, but it holds most of the bytes.
        assert!(!met(0.5, shares(100, 90, 10, 1)));
        // 1.0 means everything: never met while a byte is missing.
        assert!(!met(1.0, shares(1_000_000, 1, 10, 1)));
        // 0.0: met as soon as any byte is here.
        assert!(met(0.0, shares(100, 99, 10, 9)));
        assert!(!met(0.0, shares(100, 100, 10, 10)));
        // No bytes missing: nothing is skipped by the threshold (directories and empty files
        // are created).
        assert!(!met(0.0, shares(100, 0, 10, 1)));
    }

    #[test]
    fn the_files_basis_keeps_drovers_rule() {
        let met = |t: f64, s: Shares| threshold_met(ThresholdBasis::Files, t, s);
        // 9 of 10 files here, whatever their bytes.
        assert!(met(0.9, shares(100, 90, 10, 1)));
        assert!(!met(0.9, shares(100, 1, 10, 2)));
        // 1.0 means every file, never a share rounded up.
        assert!(!met(1.0, shares(100, 1, 1_000_000, 1)));
        assert!(met(0.0, shares(100, 100, 10, 10)));
        assert!(!met(0.5, shares(0, 0, 10, 0)));
    }

    #[test]
    fn counters_start_unknown_and_serialize_in_the_sidecars_order() {
        let s = IterationStatus::starting(0);
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(
            text,
            r#"{"iteration":0,"state":"STARTING","totalSize":-1,"totalFiles":-1,"bytesToDownload":-1,"filesToDownload":-1,"filesDownloaded":0,"downloadFailures":0,"bytesDownloaded":0,"bytesKept":0}"#,
            "the Sidecar's fields in its order, then drover's"
        );
        assert_eq!(counter(u64::MAX), i64::MAX);
    }

    #[test]
    fn unknown_fields_are_ignored_and_named() {
        let r: CopyRequest = serde_json::from_value(serde_json::json!({
            "maxIterations": 2, "successThreshold": 0.5, "maxConcurrency": 1,
            "skipGossipCheck": true, "thresholdBasis": "files"
        }))
        .unwrap();
        assert_eq!(r.ignored_fields().collect::<Vec<_>>(), ["skipGossipCheck"]);
        assert_eq!(r.threshold_basis, ThresholdBasis::Files);
        // Not kept with the task: the spec holds what drover understood.
        let spec = serde_json::to_value(&r).unwrap();
        assert!(spec.get("skipGossipCheck").is_none(), "{spec}");
        assert_eq!(spec["thresholdBasis"], "files");
        // The Sidecar's three fields are required; drover's default.
        for missing in ["maxIterations", "successThreshold", "maxConcurrency"] {
            let mut body = serde_json::json!({"maxIterations": 2, "successThreshold": 0.5, "maxConcurrency": 1});
            body.as_object_mut().unwrap().remove(missing);
            assert!(
                serde_json::from_value::<CopyRequest>(body).is_err(),
                "{missing}"
            );
        }
        let bad = serde_json::json!({"maxIterations": 2, "successThreshold": 0.5, "maxConcurrency": 1, "thresholdBasis": "rows"});
        assert!(serde_json::from_value::<CopyRequest>(bad).is_err());
    }

    #[test]
    fn requests_are_checked() {
        let ok = CopyRequest {
            verify_digest: Some("xxh3".into()),
            ..CopyRequest::new(3, 0.9, 4)
        };
        assert_eq!(ok.check().unwrap(), Some(Algorithm::Xxh3));
        let bad = |f: &dyn Fn(&mut CopyRequest)| {
            let mut r = ok.clone();
            f(&mut r);
            r.check().unwrap_err().to_string()
        };
        assert!(bad(&|r| r.max_iterations = 0).starts_with("maxIterations"));
        assert!(bad(&|r| r.success_threshold = 1.5).starts_with("successThreshold"));
        assert!(bad(&|r| r.success_threshold = -0.1).starts_with("successThreshold"));
        assert!(bad(&|r| r.max_iterations = MAX_ITERATIONS + 1).starts_with("maxIterations"));
        assert!(bad(&|r| r.max_concurrency = MAX_CONCURRENCY + 1).starts_with("maxConcurrency"));
        // The bounds themselves are taken.
        let mut top = ok.clone();
        top.max_iterations = MAX_ITERATIONS;
        top.max_concurrency = MAX_CONCURRENCY;
        assert!(top.check().is_ok());
        let mut least = ok.clone();
        least.max_iterations = 1;
        least.max_concurrency = 1;
        assert!(least.check().is_ok());
        // The Sidecar's bounds are inclusive: 0 and 1 are thresholds.
        for t in [0.0, 1.0] {
            let mut r = ok.clone();
            r.success_threshold = t;
            assert!(r.check().is_ok(), "{t}");
        }
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
