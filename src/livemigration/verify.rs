//! Files-verification tasks, as Cassandra Sidecar runs them: the destination's files are
//! compared with the source's by listing (type, size, modification time); only when both
//! lists agree is the content digest of every file compared. The counters are published as
//! they change, so a task being polled shows its progress.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::LiveMigrationError;
use super::digest::{self, Algorithm};
use super::files;
use super::local::LocalFiles;
use super::peer::{PeerClient, RemoteFile};

/// A verification request (Sidecar's `LiveMigrationFilesVerificationRequest`). Both fields
/// are required; fields drover does not know are ignored, as the Sidecar ignores them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyRequest {
    /// Files hashed at once on each side: at least 1, at most
    /// `live_migration.max_concurrent_file_requests`. Required.
    #[serde(default)]
    #[schema(required = true, minimum = 1, value_type = i64)]
    pub max_concurrency: Option<i64>,
    /// `MD5` or `XXHash32` (Sidecar's, case-insensitive), or drover's `sha256` or `xxh3`.
    /// Required; the task shows it as it was sent.
    #[serde(default)]
    #[schema(required = true, value_type = String)]
    pub digest_algorithm: Option<String>,
    /// Fields drover does not know: ignored, each one logged at `warn`.
    #[serde(flatten, default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schema(ignore)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What a checked [`VerifyRequest`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The digest compared.
    pub algorithm: Algorithm,
    /// Files hashed at once.
    pub concurrency: usize,
}

impl VerifyRequest {
    /// The request's settings, checked in the Sidecar's order; `limit` is
    /// `live_migration.max_concurrent_file_requests`. Messages are the Sidecar's.
    pub fn check(&self, limit: usize) -> Result<Settings, LiveMigrationError> {
        let bad = |m: String| Err(LiveMigrationError::InvalidRequest(m));
        let concurrency = match self.max_concurrency {
            None => return bad("maxConcurrency is required; it must be >= 1".into()),
            Some(n) if n < 1 => return bad("maxConcurrency must be >= 1".into()),
            Some(n) => n,
        };
        let name = match self.digest_algorithm.as_deref().map(str::trim) {
            None | Some("") => return bad("digestAlgorithm cannot be null or empty".into()),
            Some(name) => name,
        };
        if concurrency as u64 > limit as u64 {
            return bad(format!("max concurrency can not be more than {limit}"));
        }
        let algorithm = name
            .parse::<Algorithm>()
            .map_err(|_| LiveMigrationError::InvalidRequest(digest::unsupported(name)))?;
        Ok(Settings {
            algorithm,
            concurrency: concurrency as usize,
        })
    }

    /// Logs each field that is ignored, and drops them: they are not kept with the task.
    pub fn without_extra_fields(mut self, route: &str) -> Self {
        let extra = std::mem::take(&mut self.extra);
        super::log_ignored_fields(route, extra.keys().map(String::as_str));
        self
    }
}

/// What a verification found (Sidecar's counters, plus the files that differ).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Files and directories here that the source does not list.
    pub files_not_found_at_source: u64,
    /// Files and directories the source lists that are not here.
    pub files_not_found_at_destination: u64,
    /// Files with the same type, size and modification time on both sides, and directories on
    /// both sides.
    pub metadata_matched: u64,
    /// Entries on both sides whose type, size or modification time differ.
    pub metadata_mismatches: u64,
    /// Files whose content digests differ.
    pub digest_mismatches: u64,
    /// Files whose digest could not be computed on one side.
    pub digest_verification_failures: u64,
    /// Files (not directories) whose digests are equal.
    pub files_matched: u64,
    /// The algorithm, as the request named it.
    pub digest_algorithm: String,
    /// Up to 100 differing files, with what differs.
    pub differences: Vec<String>,
}

/// The most differences a report lists (all are counted).
pub const MAX_DIFFERENCES: usize = 100;

impl VerifyReport {
    /// Whether the two lists of files disagree (the task then fails before any digest).
    pub fn lists_differ(&self) -> bool {
        self.files_not_found_at_source > 0
            || self.files_not_found_at_destination > 0
            || self.metadata_mismatches > 0
    }

    /// Whether some digest differs or could not be computed.
    pub fn digests_differ(&self) -> bool {
        self.digest_mismatches > 0 || self.digest_verification_failures > 0
    }

    /// Each difference is clipped ([`crate::answer::clip`]): it quotes the source's URLs,
    /// whose length the source decides.
    fn note(&mut self, what: String) {
        if self.differences.len() < MAX_DIFFERENCES {
            self.differences.push(crate::answer::clip(&what));
        }
    }
}

/// Compares both lists by URL, as the Sidecar does: an entry on both sides matches when both
/// are directories (their times are not compared), or both are files of the same size and
/// modification time (milliseconds). Returns the report and the URLs (with sizes) of the
/// files whose digests are to be compared.
pub fn compare(
    mine: &[files::Entry],
    theirs: &[RemoteFile],
    report: &mut VerifyReport,
) -> Vec<(String, u64)> {
    let mine: HashMap<String, &files::Entry> = mine.iter().map(|e| (e.url(), e)).collect();
    let theirs_by_url: HashMap<&str, &RemoteFile> =
        theirs.iter().map(|f| (f.file_url.as_str(), f)).collect();
    let mut local_only: Vec<&String> = mine
        .keys()
        .filter(|url| !theirs_by_url.contains_key(url.as_str()))
        .collect();
    local_only.sort();
    for url in local_only {
        report.files_not_found_at_source += 1;
        report.note(format!("{url}: not at the source"));
    }
    let mut to_hash = Vec::new();
    for f in theirs {
        let Some(e) = mine.get(&f.file_url) else {
            report.files_not_found_at_destination += 1;
            report.note(format!("{}: not at the destination", f.file_url));
            continue;
        };
        let both_dirs = f.is_dir() && e.is_dir;
        let same_file =
            f.is_file() && !e.is_dir && f.size == e.size && f.last_modified_time == e.modified_ms;
        if both_dirs {
            report.metadata_matched += 1;
        } else if same_file {
            report.metadata_matched += 1;
            to_hash.push((f.file_url.clone(), f.size));
        } else {
            report.metadata_mismatches += 1;
            report.note(format!(
                "{}: {} of {} bytes modified at {} ms at the source, {} of {} bytes modified at {} ms here",
                f.file_url,
                f.file_type,
                f.size,
                f.last_modified_time,
                e.file_type(),
                e.size,
                e.modified_ms
            ));
        }
    }
    to_hash
}

/// Compares the files here with the source's; `publish` gets the report each time it
/// changes. Ends with the report when every file matches, else with
/// [`LiveMigrationError::FilesListMismatch`] (before any digest) or
/// [`LiveMigrationError::DigestMismatch`]; the report published last says what differs.
pub async fn run(
    peer: &PeerClient,
    local: Arc<LocalFiles>,
    request: &VerifyRequest,
    cancel: &CancellationToken,
    publish: impl Fn(&VerifyReport),
) -> Result<VerifyReport, LiveMigrationError> {
    // Checked against the config when the task was admitted.
    let Settings {
        algorithm,
        concurrency,
    } = request.check(usize::MAX)?;
    let mut report = VerifyReport {
        digest_algorithm: request.digest_algorithm.clone().unwrap_or_default(),
        ..Default::default()
    };
    publish(&report);
    let listed = local.clone();
    let mine = tokio::task::spawn_blocking(move || listed.list());
    // A source that stops answering, or a long local walk, must not hold a cancelled task.
    let (remote, mine) = tokio::select! {
        r = async { tokio::join!(peer.list(), mine) } => r,
        _ = cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
    };
    let remote = remote?;
    let mine = mine.expect("listing does not panic")?;
    let to_hash = compare(&mine, &remote, &mut report);
    publish(&report);
    if report.lists_differ() {
        return Err(LiveMigrationError::FilesListMismatch);
    }
    let mut results = futures::stream::iter(to_hash)
        .map(|(url, size)| {
            let local = local.clone();
            async move {
                let path = local.path_of(&url)?;
                let (theirs, mine) = tokio::join!(
                    peer.digest(&url, algorithm, size),
                    tokio::task::spawn_blocking(move || digest::of_file(&path, algorithm))
                );
                let mine = mine.expect("hashing does not panic");
                Ok::<_, LiveMigrationError>((url, theirs, mine))
            }
        })
        .buffer_unordered(concurrency);
    while let Some(r) = tokio::select! {
        r = results.next() => r,
        _ = cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
    } {
        match r {
            Ok((_, Ok(a), Ok(b))) if a == b => report.files_matched += 1,
            Ok((url, Ok(a), Ok(b))) => {
                report.digest_mismatches += 1;
                report.note(format!("{url}: digest {a} at the source, {b} here"));
            }
            Ok((url, theirs, mine)) => {
                report.digest_verification_failures += 1;
                let why = theirs
                    .err()
                    .map(|e| e.to_string())
                    .or(mine.err().map(|e| format!("here: {e}")))
                    .unwrap_or_default();
                report.note(format!("{url}: digest not computed: {why}"));
            }
            Err(e) => {
                report.digest_verification_failures += 1;
                report.note(e.to_string());
            }
        }
        publish(&report);
    }
    if report.digests_differ() {
        return Err(LiveMigrationError::DigestMismatch);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::livemigration::files::{DirType, Entry};

    fn mine(path: &str, size: u64, is_dir: bool, modified_ms: u64) -> Entry {
        Entry {
            dir_type: DirType::Data,
            dir_index: 0,
            path: path.into(),
            size,
            is_dir,
            modified_ms,
            mode: 0o644,
        }
    }

    fn theirs(path: &str, size: u64, is_dir: bool, modified_ms: u64) -> RemoteFile {
        RemoteFile {
            file_url: format!("/api/v1/live-migration/files/data/0/{path}"),
            size,
            file_type: if is_dir { "DIRECTORY" } else { "FILE" }.into(),
            last_modified_time: modified_ms,
            mode: None,
        }
    }

    #[test]
    fn lists_match_by_type_size_and_time_and_directories_by_type() {
        let here = [
            mine("ks", 0, true, 1),
            mine("ks/a", 3, false, 10),
            mine("ks/empty", 0, false, 11),
        ];
        // A directory's time differs: still a match.
        let there = [
            theirs("ks", 0, true, 999),
            theirs("ks/a", 3, false, 10),
            theirs("ks/empty", 0, false, 11),
        ];
        let mut report = VerifyReport::default();
        let to_hash = compare(&here, &there, &mut report);
        // Directories count as matched metadata, and are not hashed.
        assert_eq!(report.metadata_matched, 3);
        assert_eq!(to_hash.len(), 2, "{to_hash:?}");
        assert!(
            to_hash.iter().all(|(u, _)| !u.ends_with("/ks")),
            "{to_hash:?}"
        );
        // Each with its listed size, which bounds how long its digest may take.
        let mut sizes: Vec<u64> = to_hash.iter().map(|(_, size)| *size).collect();
        sizes.sort();
        assert_eq!(sizes, [0, 3]);
        assert!(!report.lists_differ());
        assert!(report.differences.is_empty());
    }

    #[test]
    fn a_time_size_or_type_difference_is_a_metadata_mismatch() {
        let here = [
            mine("ks/touched", 3, false, 10),
            mine("ks/longer", 4, false, 10),
            mine("ks/was_dir", 0, false, 10),
            mine("ks/stray", 1, false, 10),
        ];
        let there = [
            theirs("ks/touched", 3, false, 11),
            theirs("ks/longer", 3, false, 10),
            theirs("ks/was_dir", 0, true, 10),
            theirs("ks/missing", 1, false, 10),
        ];
        let mut report = VerifyReport::default();
        let to_hash = compare(&here, &there, &mut report);
        assert!(to_hash.is_empty(), "{to_hash:?}");
        assert_eq!(report.metadata_mismatches, 3, "{report:?}");
        assert_eq!(report.metadata_matched, 0);
        assert_eq!(report.files_not_found_at_source, 1);
        assert_eq!(report.files_not_found_at_destination, 1);
        assert!(report.lists_differ());
        assert_eq!(report.differences.len(), 5, "{report:?}");
        assert!(
            report.differences.iter().any(|d| d.contains("ks/touched")
                && d.contains("modified at 11 ms at the source")
                && d.contains("modified at 10 ms here")),
            "{report:?}"
        );
    }

    #[test]
    fn differences_are_counted_all_and_listed_up_to_100() {
        let here: Vec<Entry> = (0..150)
            .map(|i| mine(&format!("ks/f{i}"), 1, false, 1))
            .collect();
        let mut report = VerifyReport::default();
        compare(&here, &[], &mut report);
        assert_eq!(report.files_not_found_at_source, 150);
        assert_eq!(report.differences.len(), MAX_DIFFERENCES);
    }

    #[test]
    fn requests_are_checked_in_the_sidecars_order_with_its_messages() {
        let request = |c: Option<i64>, a: Option<&str>| VerifyRequest {
            max_concurrency: c,
            digest_algorithm: a.map(str::to_string),
            extra: Default::default(),
        };
        let error = |r: VerifyRequest| r.check(20).unwrap_err().to_string();
        assert_eq!(
            error(request(None, Some("MD5"))),
            "maxConcurrency is required; it must be >= 1"
        );
        assert_eq!(
            error(request(Some(0), Some("MD5"))),
            "maxConcurrency must be >= 1"
        );
        assert_eq!(
            error(request(Some(4), None)),
            "digestAlgorithm cannot be null or empty"
        );
        assert_eq!(
            error(request(Some(4), Some(" "))),
            "digestAlgorithm cannot be null or empty"
        );
        assert_eq!(
            error(request(Some(21), Some("crc32"))),
            "max concurrency can not be more than 20"
        );
        assert_eq!(
            error(request(Some(4), Some("crc32"))),
            "Unsupported digest algorithm crc32; accepted (any case): MD5, XXHash32, sha256, xxh3"
        );
        for (name, algorithm) in [
            ("MD5", Algorithm::Md5),
            ("md5", Algorithm::Md5),
            ("XXHash32", Algorithm::Xxhash32),
            ("xxhash32", Algorithm::Xxhash32),
            ("sha256", Algorithm::Sha256),
            ("xxh3", Algorithm::Xxh3),
        ] {
            assert_eq!(
                request(Some(20), Some(name)).check(20).unwrap(),
                Settings {
                    algorithm,
                    concurrency: 20
                }
            );
        }
    }

    #[test]
    fn unknown_fields_are_ignored_and_not_kept() {
        let request: VerifyRequest = serde_json::from_value(serde_json::json!({
            "maxConcurrency": 2, "digestAlgorithm": "XXHash32", "priority": "high"
        }))
        .unwrap();
        assert_eq!(request.extra.len(), 1);
        let kept = request.without_extra_fields("test");
        assert_eq!(
            serde_json::to_value(&kept).unwrap(),
            serde_json::json!({"maxConcurrency": 2, "digestAlgorithm": "XXHash32"})
        );
    }
}
