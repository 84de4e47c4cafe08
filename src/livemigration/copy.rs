//! Data-copy tasks: a destination pulls the files of its source in iterations, rsync-like,
//! until the share of bytes already identical reaches the success threshold.
//!
//! Each iteration lists the source's files, deletes local files that are gone at the source or
//! differ in size or modification time, creates the source's directories, and, unless the
//! threshold is met (or nothing is left), downloads what is missing, largest first. A download
//! goes to a staging file next to its final path (`.<name>.<size>-<mtime>.drover-part`),
//! resumes with a `Range` request after an interruption, is checked against the source's
//! digest when asked, gets the source's modification time, and is renamed into place only when
//! complete: no truncated file is ever left at a final path.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use super::digest::Algorithm;
use super::files::{self, DirType, Exclusions, PART_SUFFIX, Roots};

/// A data-copy task request (Sidecar's fields, plus drover's `verifyDigest` and
/// `maxBytesPerSecond`).
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
}

impl CopyRequest {
    /// Checks the values; the message names the field.
    pub fn check(&self) -> Result<Option<Algorithm>, String> {
        if self.max_iterations == 0 {
            return Err("maxIterations: must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.success_threshold) {
            return Err("successThreshold: must be between 0 and 1".into());
        }
        if self.max_concurrency == 0 {
            return Err("maxConcurrency: must be at least 1".into());
        }
        if self.max_bytes_per_second == Some(0) {
            return Err("maxBytesPerSecond: must be at least 1 (leave it out for no limit)".into());
        }
        match self.verify_digest.as_deref() {
            None | Some("none") => Ok(None),
            Some("sha256") => Ok(Some(Algorithm::Sha256)),
            Some("xxh3") => Ok(Some(Algorithm::Xxh3)),
            Some(other) => Err(format!(
                "verifyDigest: {other:?} is not one of none, sha256, xxh3"
            )),
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

/// A file of the source as its listing shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteFile {
    /// Where to download it.
    pub file_url: String,
    /// Bytes.
    pub size: u64,
    /// `FILE` or `DIRECTORY`.
    pub file_type: String,
    /// Milliseconds since the epoch.
    pub last_modified_time: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RemoteList {
    files: Vec<RemoteFile>,
}

/// The local place of a source file: `(type, index, path)` from its URL.
pub fn local_key(url: &str) -> Result<(DirType, usize, String), String> {
    let rest = url
        .strip_prefix("/api/v1/live-migration/files/")
        .ok_or_else(|| format!("unexpected file URL {url:?}"))?;
    let mut parts = rest.splitn(3, '/');
    let (t, i, p) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let t = DirType::parse(t).ok_or_else(|| format!("unknown directory type in {url:?}"))?;
    let i: usize = i
        .parse()
        .map_err(|_| format!("bad directory index in {url:?}"))?;
    files::check_relative(p).map_err(|e| format!("{url:?}: {e}"))?;
    Ok((t, i, p.to_string()))
}

/// Why a task or a download failed.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The source could not be reached or answered an error.
    #[error("source {0}")]
    Source(String),
    /// A local file could not be written.
    #[error("{}: {source}", path.display())]
    Local {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The source no longer has the file (compacted away): the next iteration sorts it out.
    #[error("{0}")]
    Gone(String),
    /// The downloaded bytes do not have the source's digest.
    #[error("{0}")]
    Digest(String),
    /// The task was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The task cannot run on this node.
    #[error("{0}")]
    Invalid(String),
}

/// A client of the source daemon.
#[derive(Clone)]
pub struct Source {
    http: reqwest::Client,
    base: String,
}

impl Source {
    /// The source daemon at `host:port`.
    pub fn new(address: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client builds"),
            base: format!("http://{address}"),
        }
    }

    /// The source's address.
    pub fn base(&self) -> &str {
        &self.base
    }

    async fn error_of(response: reqwest::Response, what: &str) -> CopyError {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or(body);
        CopyError::Source(format!("{what}: {status}: {message}"))
    }

    /// The source's files.
    pub async fn list(&self) -> Result<Vec<RemoteFile>, CopyError> {
        let url = format!("{}/api/v1/live-migration/files", self.base);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| CopyError::Source(format!("listing files at {url}: {e}")))?;
        if !response.status().is_success() {
            return Err(Self::error_of(response, "listing files").await);
        }
        let list: RemoteList = response
            .json()
            .await
            .map_err(|e| CopyError::Source(format!("listing files at {url}: {e}")))?;
        Ok(list.files)
    }

    /// The digest of one source file.
    pub async fn digest(&self, file_url: &str, algorithm: Algorithm) -> Result<String, CopyError> {
        let url = format!(
            "{}{file_url}?digestAlgorithm={}",
            self.base,
            algorithm.name()
        );
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| CopyError::Source(format!("digest of {file_url}: {e}")))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(CopyError::Gone(format!("{file_url} is gone at the source")));
        }
        if !response.status().is_success() {
            return Err(Self::error_of(response, &format!("digest of {file_url}")).await);
        }
        let v: serde_json::Value = response
            .json()
            .await
            .map_err(|e| CopyError::Source(format!("digest of {file_url}: {e}")))?;
        v["digest"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| CopyError::Source(format!("digest of {file_url}: no digest in {v}")))
    }
}

/// Live counters of a task, copied into the iteration status.
#[derive(Debug, Default)]
pub struct Counters {
    /// Files downloaded in the current iteration.
    pub files_downloaded: AtomicU64,
    /// Bytes downloaded in the current iteration.
    pub bytes_downloaded: AtomicU64,
    /// Failed files in the current iteration.
    pub download_failures: AtomicU64,
}

/// Where and how files are written.
pub struct Local {
    /// The node's directories.
    pub roots: Roots,
    /// What is never copied.
    pub exclusions: Exclusions,
}

impl Local {
    /// The final path of a source file here.
    pub fn path_of(&self, url: &str) -> Result<PathBuf, CopyError> {
        let (t, i, p) = local_key(url).map_err(CopyError::Source)?;
        let root = self.roots.get(t, i).ok_or_else(|| {
            CopyError::Invalid(format!(
                "the source has a {} directory number {i} that this node does not have; configure it in the cassandra section",
                t.name()
            ))
        })?;
        Ok(root.join(p))
    }
}

/// The staging file of a download of `file`: its name carries the source's size and mtime, so
/// a resumed download only continues bytes of the same version of the file.
pub fn staging_path(final_path: &Path, file: &RemoteFile) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(
        ".{name}.{}-{}{PART_SUFFIX}",
        file.size, file.last_modified_time
    ))
}

/// A bandwidth limit shared by the downloads of a task.
pub type Limiter = governor::DefaultDirectRateLimiter;

/// What the downloads of one iteration share.
pub struct Fetch<'a> {
    /// The source daemon.
    pub source: &'a Source,
    /// Digest checked on each download.
    pub verify: Option<Algorithm>,
    /// The task's bandwidth limit.
    pub limiter: Option<&'a Limiter>,
    /// The iteration's counters.
    pub counters: &'a Counters,
    /// Fires when the task is cancelled.
    pub cancel: &'a CancellationToken,
}

/// Downloads one file into place, resuming a staging file left by an interrupted attempt.
pub async fn download(
    fetch: &Fetch<'_>,
    file: &RemoteFile,
    final_path: &Path,
) -> Result<u64, CopyError> {
    let Fetch {
        source,
        verify,
        limiter,
        counters,
        cancel,
    } = *fetch;
    let local = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CopyError::Local { path, source }
    };
    let staging = staging_path(final_path, file);
    if let Some(dir) = staging.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(local(dir))?;
    }
    let mut have = match tokio::fs::metadata(&staging).await {
        Ok(m) if m.len() <= file.size => m.len(),
        _ => 0,
    };
    if have == file.size && have > 0 {
        // Complete already (a crash came between the last byte and the rename).
        return finish(source, file, &staging, final_path, verify, None)
            .await
            .map(|()| 0);
    }
    let mut request = source.http.get(format!("{}{}", source.base, file.file_url));
    if have > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let response = request
        .send()
        .await
        .map_err(|e| CopyError::Source(format!("downloading {}: {e}", file.file_url)))?;
    let status = response.status();
    if status == reqwest::StatusCode::OK {
        have = 0;
    } else if status == reqwest::StatusCode::RANGE_NOT_SATISFIABLE && have > 0 {
        // The source file shrank: this version is gone.
        let _ = tokio::fs::remove_file(&staging).await;
        return Err(CopyError::Source(format!(
            "{} changed while being downloaded",
            file.file_url
        )));
    } else if status == reqwest::StatusCode::NOT_FOUND {
        let _ = tokio::fs::remove_file(&staging).await;
        return Err(CopyError::Gone(format!(
            "{} is gone at the source",
            file.file_url
        )));
    } else if status != reqwest::StatusCode::PARTIAL_CONTENT {
        return Err(Source::error_of(response, &format!("downloading {}", file.file_url)).await);
    }
    // Network chunks are small; each write to a tokio file is a hop to the blocking pool, so
    // they are gathered into large writes.
    let mut out = tokio::io::BufWriter::with_capacity(
        1 << 20,
        tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(have > 0)
            .truncate(have == 0)
            .open(&staging)
            .await
            .map_err(local(&staging))?,
    );
    // The digest covers the whole file: the part already on disk is read again first.
    let mut hasher = match verify {
        Some(a) if have > 0 => {
            let partial = staging.clone();
            let mut h = a.hasher();
            let part = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
                use std::io::Read;
                let mut f = std::fs::File::open(&partial)?;
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = f.read(&mut buf)?;
                    if n == 0 {
                        return Ok(h);
                    }
                    h.update(&buf[..n]);
                }
            })
            .await
            .expect("hashing does not panic")
            .map_err(local(&staging))?;
            Some(part)
        }
        Some(a) => Some(a.hasher()),
        None => None,
    };
    let mut stream = response.bytes_stream();
    let mut got = 0u64;
    while let Some(chunk) = tokio::select! {
        c = stream.next() => c,
        _ = cancel.cancelled() => return Err(CopyError::Cancelled),
    } {
        let chunk =
            chunk.map_err(|e| CopyError::Source(format!("downloading {}: {e}", file.file_url)))?;
        if let Some(limiter) = limiter {
            // Chunks are at most a few hundred KiB; a limit below that lets one through a second.
            let n = std::num::NonZeroU32::new(u32::try_from(chunk.len()).unwrap_or(u32::MAX))
                .unwrap_or(std::num::NonZeroU32::MIN);
            if limiter.until_n_ready(n).await.is_err() {
                limiter.until_ready().await;
            }
        }
        out.write_all(&chunk).await.map_err(local(&staging))?;
        if let Some(h) = hasher.as_mut() {
            h.update(&chunk);
        }
        got += chunk.len() as u64;
        counters
            .bytes_downloaded
            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
    out.flush().await.map_err(local(&staging))?;
    out.get_ref().sync_all().await.map_err(local(&staging))?;
    drop(out);
    finish(source, file, &staging, final_path, verify, hasher).await?;
    Ok(got)
}

/// Checks a complete staging file against the source's digest (with `verify`; `hasher` holds
/// the digest computed while streaming, else the file is read), gives it the source's
/// modification time and renames it into place.
async fn finish(
    source: &Source,
    file: &RemoteFile,
    staging: &Path,
    final_path: &Path,
    verify: Option<Algorithm>,
    hasher: Option<super::digest::Hasher>,
) -> Result<(), CopyError> {
    let local = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CopyError::Local { path, source }
    };
    if let Some(a) = verify {
        let mine = match hasher {
            Some(h) => h.finish(),
            None => {
                let path = staging.to_path_buf();
                tokio::task::spawn_blocking(move || super::digest::of_file(&path, a))
                    .await
                    .expect("hashing does not panic")
                    .map_err(local(staging))?
            }
        };
        let theirs = source.digest(&file.file_url, a).await?;
        if mine != theirs {
            let _ = tokio::fs::remove_file(staging).await;
            return Err(CopyError::Digest(format!(
                "{}: {} digest {mine} differs from the source's {theirs}",
                file.file_url,
                a.name()
            )));
        }
    }
    let mtime = filetime::FileTime::from_unix_time(
        (file.last_modified_time / 1000) as i64,
        ((file.last_modified_time % 1000) * 1_000_000) as u32,
    );
    filetime::set_file_mtime(staging, mtime).map_err(local(staging))?;
    // The directory is synced once per iteration for all its files (see `sync_dirs`): a
    // rename lost in a crash leaves a complete staging file, which the next pass finishes.
    tokio::fs::rename(staging, final_path)
        .await
        .map_err(local(final_path))?;
    Ok(())
}

/// Makes the renames of an iteration durable: each directory that received files is synced
/// once, instead of once per file (a directory sync commits the file system's journal).
fn sync_dirs(paths: impl Iterator<Item = PathBuf>) -> Result<(), CopyError> {
    let dirs: std::collections::BTreeSet<PathBuf> = paths
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    for dir in dirs {
        crate::fsutil::sync_dir(&dir).map_err(|source| CopyError::Local { path: dir, source })?;
    }
    Ok(())
}

/// Downloads one file, retried with backoff (connection errors, a source restarting) up to 5
/// times; each retry continues the staging file.
pub async fn download_with_retries(
    fetch: &Fetch<'_>,
    file: &RemoteFile,
    final_path: &Path,
) -> Result<u64, CopyError> {
    let cancel = fetch.cancel;
    let mut delays = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(5)
        .with_jitter()
        .build();
    loop {
        // The request and the digest asked at the end wait on the source too: a cancel must
        // not wait for a source that stopped answering.
        let attempt = tokio::select! {
            r = download(fetch, file, final_path) => r,
            _ = cancel.cancelled() => Err(CopyError::Cancelled),
        };
        match attempt {
            Ok(n) => return Ok(n),
            Err(CopyError::Cancelled) => return Err(CopyError::Cancelled),
            Err(e @ (CopyError::Invalid(_) | CopyError::Gone(_))) => return Err(e),
            Err(e) => match delays.next() {
                Some(delay) => {
                    tracing::warn!(file = %file.file_url, error = %e, "download failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = cancel.cancelled() => return Err(CopyError::Cancelled),
                    }
                }
                None => return Err(e),
            },
        }
    }
}

/// What to do with the local files in one iteration.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Local files to delete (gone at the source, or different).
    pub delete: Vec<PathBuf>,
    /// Directories to create.
    pub mkdirs: Vec<PathBuf>,
    /// Source files to download, largest first.
    pub download: Vec<(RemoteFile, PathBuf)>,
    /// Source files already here with the same size and modification time.
    pub present: Vec<(RemoteFile, PathBuf)>,
    /// Bytes of the source's files.
    pub total_size: u64,
    /// The source's files.
    pub total_files: u64,
}

/// Compares the source's listing with the local files.
pub fn plan(local: &Local, remote: &[RemoteFile]) -> Result<Plan, CopyError> {
    let mine = files::list(&local.roots, &local.exclusions).map_err(|source| CopyError::Local {
        path: PathBuf::from("(listing)"),
        source,
    })?;
    let mut theirs = std::collections::HashMap::new();
    let mut plan = Plan::default();
    for f in remote {
        let path = local.path_of(&f.file_url)?;
        if f.file_type == "DIRECTORY" {
            plan.mkdirs.push(path.clone());
        } else {
            plan.total_size += f.size;
            plan.total_files += 1;
        }
        theirs.insert(path, f);
    }
    let mut present = std::collections::HashSet::new();
    for e in &mine {
        if e.is_dir {
            continue;
        }
        let path = local
            .roots
            .get(e.dir_type, e.dir_index)
            .expect("listed from the roots")
            .join(&e.path);
        match theirs.get(&path) {
            Some(f)
                if f.file_type == "FILE"
                    && f.size == e.size
                    && f.last_modified_time == e.modified_ms =>
            {
                present.insert(path);
            }
            _ => plan.delete.push(path),
        }
    }
    for f in remote {
        if f.file_type != "FILE" {
            continue;
        }
        let path = local.path_of(&f.file_url)?;
        if present.contains(&path) {
            plan.present.push((f.clone(), path));
        } else {
            plan.download.push((f.clone(), path));
        }
    }
    plan.download.sort_by(|a, b| {
        b.0.size
            .cmp(&a.0.size)
            .then_with(|| a.0.file_url.cmp(&b.0.file_url))
    });
    Ok(plan)
}

/// The files of `present` whose content here differs from the source's.
async fn differing(
    source: &Source,
    present: &[(RemoteFile, PathBuf)],
    algorithm: Algorithm,
    concurrency: usize,
    cancel: &CancellationToken,
) -> Result<Vec<(RemoteFile, PathBuf)>, CopyError> {
    let mut checks = futures::stream::iter(present.iter().cloned())
        .map(|(file, path)| async move {
            let here = path.clone();
            let (theirs, mine) = tokio::join!(
                source.digest(&file.file_url, algorithm),
                tokio::task::spawn_blocking(move || super::digest::of_file(&here, algorithm))
            );
            (file, path, theirs, mine.expect("hashing does not panic"))
        })
        .buffer_unordered(concurrency.max(1));
    let mut stale = Vec::new();
    while let Some(checked) = tokio::select! {
        c = checks.next() => c,
        _ = cancel.cancelled() => return Err(CopyError::Cancelled),
    } {
        match checked {
            (_, _, Err(CopyError::Gone(_)), _) => {}
            (_, _, Err(e), _) => return Err(e),
            (file, path, Ok(theirs), Ok(mine)) => {
                if theirs != mine {
                    tracing::info!(file = %file.file_url, "same size and time, other content: fetched again");
                    stale.push((file, path));
                }
            }
            // Vanished here meanwhile: it is downloaded like any missing file.
            (file, path, Ok(_), Err(_)) => stale.push((file, path)),
        }
    }
    Ok(stale)
}

/// Everything a task needs.
pub struct Task {
    /// The request.
    pub request: CopyRequest,
    /// The source daemon.
    pub source: Source,
    /// This node's directories.
    pub local: Arc<Local>,
}

/// Runs a task; `publish` is called with the iterations whenever they change.
pub async fn run(
    task: Task,
    cancel: CancellationToken,
    publish: impl Fn(&[IterationStatus]),
) -> Result<Vec<IterationStatus>, (Vec<IterationStatus>, CopyError)> {
    let verify = task
        .request
        .check()
        .map_err(|e| (vec![], CopyError::Invalid(e)))?;
    let limiter = task.request.max_bytes_per_second.and_then(|b| {
        std::num::NonZeroU32::new(u32::try_from(b).unwrap_or(u32::MAX))
            .map(|n| governor::RateLimiter::direct(governor::Quota::per_second(n)))
    });
    let mut history: Vec<IterationStatus> = Vec::new();
    let iterations = task.request.max_iterations;
    // One more pass than downloading iterations: the last one only checks the threshold.
    for i in 0..=iterations {
        let mut status = IterationStatus {
            iteration: i,
            state: IterationState::Starting,
            total_size: 0,
            total_files: 0,
            bytes_to_download: 0,
            files_to_download: 0,
            files_downloaded: 0,
            download_failures: 0,
            bytes_downloaded: 0,
        };
        history.push(status.clone());
        publish(&history);
        let fail = |history: &mut Vec<IterationStatus>, e: CopyError| {
            if let Some(last) = history.last_mut() {
                last.state = if matches!(e, CopyError::Cancelled) {
                    IterationState::Cancelled
                } else {
                    IterationState::Failed
                };
            }
            (std::mem::take(history), e)
        };
        if cancel.is_cancelled() {
            return Err(fail(&mut history, CopyError::Cancelled));
        }
        // A source that stops answering must not hold a cancelled task forever.
        let listed = tokio::select! {
            r = task.source.list() => r,
            _ = cancel.cancelled() => Err(CopyError::Cancelled),
        };
        let remote = match listed {
            Ok(r) => r,
            Err(e) => return Err(fail(&mut history, e)),
        };
        status.state = IterationState::Cleaning;
        *history.last_mut().expect("pushed") = status.clone();
        publish(&history);
        let local = task.local.clone();
        let planned = tokio::task::spawn_blocking(move || {
            let p = plan(&local, &remote)?;
            for path in &p.delete {
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(CopyError::Local {
                            path: path.clone(),
                            source,
                        });
                    }
                }
            }
            // The node's own directories first: Cassandra expects them, even empty.
            let roots: Vec<PathBuf> = local
                .roots
                .iter()
                .map(|(_, _, d)| d.to_path_buf())
                .collect();
            for dir in roots.iter().chain(&p.mkdirs) {
                std::fs::create_dir_all(dir).map_err(|source| CopyError::Local {
                    path: dir.clone(),
                    source,
                })?;
            }
            Ok(p)
        })
        .await
        .expect("planning does not panic");
        let mut planned = match planned {
            Ok(p) => p,
            Err(e) => return Err(fail(&mut history, e)),
        };
        if let Some(algorithm) = verify {
            // Size and modification time do not prove content (a commit log written through a
            // memory map keeps its size, and not always its mtime): with verifyDigest, files
            // already here are compared by digest too, and fetched again when they differ.
            let stale = match differing(
                &task.source,
                &planned.present,
                algorithm,
                task.request.max_concurrency,
                &cancel,
            )
            .await
            {
                Ok(s) => s,
                Err(e) => return Err(fail(&mut history, e)),
            };
            for (file, path) in stale {
                match std::fs::remove_file(&path) {
                    Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                        return Err(fail(&mut history, CopyError::Local { path, source }));
                    }
                    _ => {}
                }
                planned.download.push((file, path));
            }
            planned.download.sort_by(|a, b| {
                b.0.size
                    .cmp(&a.0.size)
                    .then_with(|| a.0.file_url.cmp(&b.0.file_url))
            });
        }
        status.state = IterationState::Preparing;
        status.total_size = planned.total_size;
        status.total_files = planned.total_files;
        status.files_to_download = planned.download.len() as u64;
        status.bytes_to_download = planned.download.iter().map(|(f, _)| f.size).sum();
        *history.last_mut().expect("pushed") = status.clone();
        publish(&history);
        if threshold_met(
            status.total_files,
            status.files_to_download,
            task.request.success_threshold,
        ) {
            status.state = IterationState::Success;
            *history.last_mut().expect("pushed") = status;
            publish(&history);
            return Ok(history);
        }
        if i == iterations {
            let e = CopyError::Invalid(format!(
                "the success threshold {} was not met in {iterations} iterations ({} of {} files still differ)",
                task.request.success_threshold, status.files_to_download, status.total_files
            ));
            return Err(fail(&mut history, e));
        }
        status.state = IterationState::Downloading;
        *history.last_mut().expect("pushed") = status.clone();
        publish(&history);
        let counters = Counters::default();
        let downloaded: Vec<PathBuf> = planned.download.iter().map(|(_, p)| p.clone()).collect();
        let fetch = Fetch {
            source: &task.source,
            verify,
            limiter: limiter.as_ref(),
            counters: &counters,
            cancel: &cancel,
        };
        let fetch = &fetch;
        let mut downloads = futures::stream::iter(planned.download)
            .map(move |(file, path)| async move {
                let r = download_with_retries(fetch, &file, &path).await;
                (file, r)
            })
            .buffer_unordered(task.request.max_concurrency);
        let mut invalid = None;
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        loop {
            let next = tokio::select! {
                n = downloads.next() => n,
                _ = ticker.tick() => {
                    status.files_downloaded = counters.files_downloaded.load(Ordering::Relaxed);
                    status.bytes_downloaded = counters.bytes_downloaded.load(Ordering::Relaxed);
                    status.download_failures = counters.download_failures.load(Ordering::Relaxed);
                    *history.last_mut().expect("pushed") = status.clone();
                    publish(&history);
                    continue;
                }
            };
            let Some((file, result)) = next else { break };
            match result {
                Ok(_) => {
                    counters.files_downloaded.fetch_add(1, Ordering::Relaxed);
                }
                Err(CopyError::Cancelled) => {}
                Err(e) => {
                    tracing::warn!(file = %file.file_url, error = %e, "download failed");
                    counters.download_failures.fetch_add(1, Ordering::Relaxed);
                    if matches!(e, CopyError::Invalid(_) | CopyError::Local { .. }) {
                        invalid.get_or_insert(e);
                    }
                }
            }
        }
        drop(downloads);
        let synced = tokio::task::spawn_blocking(move || sync_dirs(downloaded.into_iter()))
            .await
            .expect("syncing does not panic");
        if let Err(e) = synced {
            invalid.get_or_insert(e);
        }
        status.files_downloaded = counters.files_downloaded.load(Ordering::Relaxed);
        status.bytes_downloaded = counters.bytes_downloaded.load(Ordering::Relaxed);
        status.download_failures = counters.download_failures.load(Ordering::Relaxed);
        status.state = IterationState::DownloadComplete;
        *history.last_mut().expect("pushed") = status.clone();
        publish(&history);
        if cancel.is_cancelled() {
            return Err(fail(&mut history, CopyError::Cancelled));
        }
        if let Some(e) = invalid {
            // A local problem (a missing directory, a full disk) does not go away by iterating.
            return Err(fail(&mut history, e));
        }
    }
    unreachable!("the last pass returns")
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
    fn file_urls_map_to_local_places() {
        assert_eq!(
            local_key("/api/v1/live-migration/files/data/1/ks/t-1/nb-1-big-Data.db"),
            Ok((DirType::Data, 1, "ks/t-1/nb-1-big-Data.db".to_string()))
        );
        assert!(local_key("/api/v1/live-migration/files/data/0/../x").is_err());
        assert!(local_key("/api/v1/live-migration/files/tmp/0/x").is_err());
        assert!(local_key("/elsewhere/data/0/x").is_err());
    }

    #[test]
    fn requests_are_checked() {
        let ok = CopyRequest {
            max_iterations: 3,
            success_threshold: 0.9,
            max_concurrency: 4,
            verify_digest: Some("xxh3".into()),
            max_bytes_per_second: None,
        };
        assert_eq!(ok.check(), Ok(Some(Algorithm::Xxh3)));
        let bad = |f: &dyn Fn(&mut CopyRequest)| {
            let mut r = ok.clone();
            f(&mut r);
            r.check().unwrap_err()
        };
        assert!(bad(&|r| r.max_iterations = 0).starts_with("maxIterations"));
        assert!(bad(&|r| r.success_threshold = 1.5).starts_with("successThreshold"));
        assert!(bad(&|r| r.max_concurrency = 0).starts_with("maxConcurrency"));
        assert!(bad(&|r| r.verify_digest = Some("md5".into())).starts_with("verifyDigest"));
    }
}
