//! Files-verification tasks: compare the destination's files with the source's, by listing
//! (path, type, size) and by content digest, and say which differ.

use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::LiveMigrationError;
use super::digest::{self, Algorithm};
use super::files;
use super::local::LocalFiles;
use super::peer::PeerClient;

/// A verification request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyRequest {
    /// `sha256` (default), `xxh3`, `md5` or `xxhash32`.
    #[serde(default)]
    pub digest_algorithm: Option<String>,
    /// Files hashed at once on each side (default 4).
    #[serde(default)]
    pub max_concurrency: Option<usize>,
}

impl VerifyRequest {
    /// The algorithm and concurrency, checked.
    pub fn check(&self) -> Result<(Algorithm, usize), LiveMigrationError> {
        let algorithm = self
            .digest_algorithm
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e| LiveMigrationError::InvalidRequest(format!("digestAlgorithm: {e}")))?
            .unwrap_or(Algorithm::Sha256);
        let concurrency = self.max_concurrency.unwrap_or(4);
        if concurrency == 0 {
            return Err(LiveMigrationError::InvalidRequest(
                "maxConcurrency: must be at least 1".into(),
            ));
        }
        Ok((algorithm, concurrency))
    }
}

/// What a verification found (Sidecar's counters, plus the files that differ).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Files here that the source does not have.
    pub files_not_found_at_source: u64,
    /// Source files missing here.
    pub files_not_found_at_destination: u64,
    /// Files with the same type and size on both sides.
    pub metadata_matched: u64,
    /// Files whose type or size differ.
    pub metadata_mismatches: u64,
    /// Files with the same size but different content.
    pub digest_mismatches: u64,
    /// Files whose digest could not be computed on one side.
    pub digest_verification_failures: u64,
    /// Files identical on both sides.
    pub files_matched: u64,
    /// The algorithm used.
    pub digest_algorithm: String,
    /// Up to 100 differing files, with what differs.
    pub differences: Vec<String>,
}

impl VerifyReport {
    /// Whether both sides hold the same files with the same content.
    pub fn all_matched(&self) -> bool {
        self.files_not_found_at_source == 0
            && self.files_not_found_at_destination == 0
            && self.metadata_mismatches == 0
            && self.digest_mismatches == 0
            && self.digest_verification_failures == 0
    }

    fn note(&mut self, what: String) {
        if self.differences.len() < 100 {
            self.differences.push(what);
        }
    }
}

/// Compares the files here with the source's.
pub async fn run(
    peer: &PeerClient,
    local: Arc<LocalFiles>,
    request: &VerifyRequest,
    cancel: &CancellationToken,
) -> Result<VerifyReport, LiveMigrationError> {
    let (algorithm, concurrency) = request.check()?;
    // A source that stops answering must not hold a cancelled task forever.
    let remote = tokio::select! {
        r = peer.list() => r?,
        _ = cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
    };
    let listed = local.clone();
    let mine = tokio::task::spawn_blocking(move || listed.list())
        .await
        .expect("listing does not panic")?;
    let mut report = VerifyReport {
        digest_algorithm: algorithm.name().into(),
        ..Default::default()
    };
    let mine: std::collections::HashMap<String, &files::Entry> =
        mine.iter().map(|e| (e.url(), e)).collect();
    let theirs: std::collections::HashSet<&str> =
        remote.iter().map(|f| f.file_url.as_str()).collect();
    for url in mine.keys() {
        if !theirs.contains(url.as_str()) {
            report.files_not_found_at_source += 1;
            report.note(format!("{url}: not at the source"));
        }
    }
    let mut to_hash = Vec::new();
    for f in &remote {
        let Some(e) = mine.get(&f.file_url) else {
            report.files_not_found_at_destination += 1;
            report.note(format!("{}: not at the destination", f.file_url));
            continue;
        };
        let same_type = f.is_dir() == e.is_dir;
        if !same_type || (!e.is_dir && f.size != e.size) {
            report.metadata_mismatches += 1;
            report.note(format!(
                "{}: {} of {} bytes at the source, {} of {} bytes here",
                f.file_url,
                f.file_type,
                f.size,
                e.file_type(),
                e.size
            ));
            continue;
        }
        report.metadata_matched += 1;
        if e.is_dir {
            report.files_matched += 1;
        } else {
            to_hash.push(f.file_url.clone());
        }
    }
    let mut results = futures::stream::iter(to_hash)
        .map(|url| {
            let local = local.clone();
            async move {
                let path = local.path_of(&url)?;
                let (theirs, mine) = tokio::join!(
                    peer.digest(&url, algorithm),
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
    }
    Ok(report)
}
