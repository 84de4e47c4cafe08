//! The iterations of a data-copy task. Each iteration goes through the states of
//! [`IterationState`] in order, one step (method of [`Iteration`]) per state; the last
//! allowed pass only checks the threshold. Each starts by asking the source's live-migration
//! status: a source declared `COMPLETED` serves nothing more, and the task fails (Sidecar's).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::batched::{self, Work};
use super::fetch::{self, DownloadCounters, Downloader, Limiter};
use super::plan::{self, Plan, PlanLimits};
use super::request::{CopyRequest, IterationState, IterationStatus, counter, threshold_met};
use super::space;
use crate::livemigration::LiveMigrationError;
use crate::livemigration::batch::Features;
use crate::livemigration::digest::Algorithm;
use crate::livemigration::local::LocalFiles;
use crate::livemigration::peer::{PeerClient, RemoteFile};

/// Everything a data-copy task needs.
pub struct CopyTask {
    /// The request.
    pub request: CopyRequest,
    /// The source daemon.
    pub peer: PeerClient,
    /// This node's directories.
    pub local: Arc<LocalFiles>,
    /// What the configuration bounds.
    pub limits: TaskLimits,
}

/// What the configuration bounds in a task: how much of the destination a plan may delete,
/// and how much free space its downloads must leave.
#[derive(Debug, Clone, Copy)]
pub struct TaskLimits {
    /// `live_migration.max_delete_share`.
    pub max_delete_share: f64,
    /// `live_migration.min_free_disk`, in bytes.
    pub min_free_disk: u64,
}

impl From<&crate::config::LiveMigrationConfig> for TaskLimits {
    fn from(c: &crate::config::LiveMigrationConfig) -> Self {
        Self {
            max_delete_share: c.max_delete_share,
            min_free_disk: c.min_free_disk.as_u64(),
        }
    }
}

/// How a task ended: its iterations, and why it stopped without success if it did.
#[derive(Debug)]
pub struct CopyOutcome {
    /// Every iteration, the last one in its final state.
    pub iterations: Vec<IterationStatus>,
    /// Success, or why not.
    pub result: Result<(), LiveMigrationError>,
}

/// Runs a task; `publish` is called with the iterations whenever they change.
pub async fn run(
    task: CopyTask,
    cancel: CancellationToken,
    publish: impl Fn(&[IterationStatus]),
) -> CopyOutcome {
    let verify = match task.request.check() {
        Ok(v) => v,
        Err(e) => {
            return CopyOutcome {
                iterations: Vec::new(),
                result: Err(e),
            };
        }
    };
    let limiter = fetch::limiter(task.request.max_bytes_per_second);
    let iteration = Iteration {
        task: &task,
        cancel: &cancel,
        verify,
        limiter: limiter.as_ref(),
        deletions: std::sync::Mutex::new(plan::Deletions::default()),
        features: std::sync::Mutex::new(Features::default()),
    };
    let mut log = IterationLog {
        history: Vec::new(),
        publish,
    };
    let last = task.request.max_iterations;
    // One more pass than downloading iterations: the last one only checks the threshold.
    for i in 0..=last {
        match iteration.run(i, i == last, &mut log).await {
            Ok(Next::Again) => {}
            Ok(Next::Done) => return log.end(Ok(())),
            Err(e) => return log.end(Err(e)),
        }
    }
    unreachable!("the last pass returns")
}

/// The longest an iteration's start waits for the connections it opens beside the status
/// (see [`Iteration::starting`]); past it, the downloads open their own.
const OPENING_WAIT: Duration = Duration::from_secs(2);

/// Whether the task goes on after an iteration.
enum Next {
    /// Another iteration.
    Again,
    /// The threshold is met.
    Done,
}

/// The iterations so far, and who is told when they change.
struct IterationLog<P> {
    history: Vec<IterationStatus>,
    publish: P,
}

impl<P: Fn(&[IterationStatus])> IterationLog<P> {
    /// Starts iteration `i`, in state `STARTING`.
    fn begin(&mut self, i: u32) -> IterationStatus {
        let status = IterationStatus::starting(i);
        self.history.push(status.clone());
        (self.publish)(&self.history);
        status
    }

    /// Publishes the current iteration as it is now.
    fn update(&mut self, status: &IterationStatus) {
        *self.history.last_mut().expect("an iteration has begun") = status.clone();
        (self.publish)(&self.history);
    }

    /// Moves the current iteration to `state`.
    fn enter(&mut self, status: &mut IterationStatus, state: IterationState) {
        status.state = state;
        self.update(status);
    }

    /// Ends the task: an error leaves the last iteration `CANCELLED` or `FAILED`.
    fn end(self, result: Result<(), LiveMigrationError>) -> CopyOutcome {
        let mut iterations = self.history;
        if let (Err(e), Some(last)) = (&result, iterations.last_mut()) {
            last.state = if matches!(e, LiveMigrationError::Cancelled) {
                IterationState::Cancelled
            } else {
                IterationState::Failed
            };
        }
        CopyOutcome { iterations, result }
    }
}

/// What every iteration of a task shares.
struct Iteration<'a> {
    task: &'a CopyTask,
    cancel: &'a CancellationToken,
    verify: Option<Algorithm>,
    limiter: Option<&'a Limiter>,
    /// What this task's plans have deleted so far: the mass-deletion guard counts the whole
    /// task, or a source could take half of what is left at every iteration.
    deletions: std::sync::Mutex<plan::Deletions>,
    /// The drover extensions the source announced in the last listing.
    features: std::sync::Mutex<Features>,
}

impl Iteration<'_> {
    /// Runs iteration `i`; `last` when it may only check the threshold.
    async fn run<P: Fn(&[IterationStatus])>(
        &self,
        i: u32,
        last: bool,
        log: &mut IterationLog<P>,
    ) -> Result<Next, LiveMigrationError> {
        let mut status = log.begin(i);
        let began = std::time::Instant::now();
        let (remote, features, round_trip) = self.starting().await?;
        tracing::debug!(
            iteration = i,
            ms = began.elapsed().as_millis() as u64,
            files = remote.len(),
            "listed"
        );
        status.total_files = counter(remote.len() as u64);
        status.total_size = counter(
            remote
                .iter()
                .filter(|f| f.is_file())
                .fold(0u64, |sum, f| sum.saturating_add(f.size)),
        );
        log.enter(&mut status, IterationState::Cleaning);
        let mut plan = self.cleaning(remote, features).await?;
        self.preparing(&mut plan, features).await?;
        tracing::debug!(
            iteration = i,
            ms = began.elapsed().as_millis() as u64,
            "planned"
        );
        log.enter(&mut status, IterationState::Preparing);
        let request = &self.task.request;
        let (threshold, basis) = (request.success_threshold, request.threshold_basis);
        let shares = plan.shares();
        // Nothing left, or the threshold lets the rest wait: `bytesToDownload` and
        // `filesToDownload` stay unknown, as the Sidecar leaves them.
        if plan.download.is_empty() || threshold_met(basis, threshold, shares) {
            log.enter(&mut status, IterationState::Success);
            return Ok(Next::Done);
        }
        if last {
            return Err(LiveMigrationError::Invalid(format!(
                "the success threshold {threshold} (a share of {}) was not met in {i} iterations \
                 ({} of {} files, {} of {} bytes, {} entries in all still to fetch or create)",
                basis.name(),
                shares.missing_files,
                shares.total_files,
                shares.missing_bytes,
                shares.total_bytes,
                plan.download.len()
            )));
        }
        self.check_space(&plan).await?;
        status.bytes_to_download = counter(shares.missing_bytes);
        status.files_to_download = counter(plan.download.len() as u64);
        status.files_downloaded = 0;
        status.download_failures = 0;
        status.bytes_downloaded = 0;
        status.bytes_kept = 0;
        log.enter(&mut status, IterationState::Downloading);
        let local_failure = self
            .downloading(plan.download, features, round_trip, &mut status, log)
            .await;
        log.enter(&mut status, IterationState::DownloadComplete);
        self.download_complete(local_failure)?;
        Ok(Next::Again)
    }

    /// `STARTING`: asks the source's live-migration status, then lists the source.
    /// Returns the listing, the drover extensions the source announced, and how long its
    /// status took to come (how far the source is).
    ///
    /// Two things save round trips over a distant link (50 ms each), where a first copy of
    /// a few GB lasts seconds:
    /// - the task's other connections are opened while the status and listing come (one
    ///   status request on each), so the first downloads do not each wait for a handshake;
    /// - a source known to be a drover (it announced its extensions in the previous
    ///   iteration's listing) is listed at the same time as its status is asked; the listing
    ///   is not used when the status says `COMPLETED`. A source not known yet, a Sidecar
    ///   perhaps, is never listed before its status says it may be.
    async fn starting(&self) -> Result<(Vec<RemoteFile>, Features, Duration), LiveMigrationError> {
        if self.cancel.is_cancelled() {
            return Err(LiveMigrationError::Cancelled);
        }
        let peer = &self.task.peer;
        let known = *self.features.lock().unwrap_or_else(|p| p.into_inner());
        let drover = known.batch || known.block_digests;
        let opening = async {
            let others = self.task.request.max_concurrency.saturating_sub(1);
            // Only the connections are wanted: a failure here is the status's to report, and
            // a source slow to answer them must not hold the iteration.
            let all = futures::future::join_all((0..others).map(|_| peer.status()));
            let _ = tokio::time::timeout(OPENING_WAIT, all).await;
        };
        let asking = async {
            if drover {
                let (state, listing) = tokio::join!(self.status(), peer.list_with_features());
                let (state, round_trip) = state?;
                Ok::<_, LiveMigrationError>((state, round_trip, Some(listing)))
            } else {
                let (state, round_trip) = self.status().await?;
                Ok((state, round_trip, None))
            }
        };
        let answered = tokio::select! {
            (r, ()) = async { tokio::join!(asking, opening) } => r,
            _ = self.cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
        };
        let (state, round_trip, listing) = answered?;
        if state != "NOT_COMPLETED" {
            return Err(LiveMigrationError::SourceCompleted);
        }
        // A listing that failed beside the status (a source restarting while the status was
        // retried) is asked again, now that the source answers.
        let listing = match listing {
            Some(Ok(listing)) => Ok(listing),
            _ => tokio::select! {
                r = peer.list_with_features() => r,
                _ = self.cancel.cancelled() => Err(LiveMigrationError::Cancelled),
            },
        };
        let (files, features) = listing?;
        *self.features.lock().unwrap_or_else(|p| p.into_inner()) = features;
        Ok((files, features, round_trip))
    }

    /// The source's live-migration status, and how long it took to come. A source
    /// restarting between two iterations is waited for, with the backoff of downloads,
    /// rather than failing the task; one that stops answering must not hold a cancelled
    /// task forever.
    async fn status(&self) -> Result<(String, Duration), LiveMigrationError> {
        let mut delays = fetch::retry_delays();
        loop {
            let asked = std::time::Instant::now();
            let attempt = tokio::select! {
                r = self.task.peer.status() => r,
                _ = self.cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
            };
            match (attempt, delays.next()) {
                (Ok(state), _) => return Ok((state, asked.elapsed())),
                (Err(e @ LiveMigrationError::Peer(_)), Some(delay)) => {
                    tracing::warn!(error = %e, "source status failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
                    }
                }
                (Err(e), _) => return Err(e),
            }
        }
    }

    /// `CLEANING`: compares the listing with the local files, deletes what differs and
    /// creates the directories.
    async fn cleaning(
        &self,
        remote: Vec<RemoteFile>,
        features: Features,
    ) -> Result<Plan, LiveMigrationError> {
        let local = self.task.local.clone();
        let limits = PlanLimits {
            max_delete_share: self.task.limits.max_delete_share,
            allow_mass_deletion: self.task.request.allow_mass_deletion,
            before: *self.deletions.lock().unwrap_or_else(|p| p.into_inner()),
            keep_bases: features.block_digests,
        };
        let (p, deletions) = tokio::task::spawn_blocking(move || {
            let (p, deletions) = plan::plan(&local, &remote, limits)?;
            plan::clean(&local, &p)?;
            Ok::<_, LiveMigrationError>((p, deletions))
        })
        .await
        .expect("planning does not panic")?;
        *self.deletions.lock().unwrap_or_else(|p| p.into_inner()) = deletions;
        Ok(p)
    }

    /// Before `DOWNLOADING`: refuses downloads that would leave less than
    /// `live_migration.min_free_disk` free, before a byte is written.
    async fn check_space(&self, plan: &Plan) -> Result<(), LiveMigrationError> {
        let local = self.task.local.clone();
        let download = plan.download.clone();
        let margin = self.task.limits.min_free_disk;
        tokio::task::spawn_blocking(move || space::check(&local, &download, margin))
            .await
            .expect("checking free space does not panic")
    }

    /// `PREPARING`: with `verifyDigest`, files already here are compared by digest too,
    /// and fetched again when they differ. Without it, the final sync (`successThreshold`
    /// 1.0) still compares the segments written through a memory map.
    async fn preparing(
        &self,
        plan: &mut Plan,
        features: Features,
    ) -> Result<(), LiveMigrationError> {
        // Size and modification time do not prove content: a commit-log (or CDC) segment is
        // written through a memory map, keeps its size, and its mtime need not move when its
        // content does. A final sync that trusted them would leave a segment copied while
        // the node ran, without the writes made after, and the node would start without
        // them. XXHash32: a Sidecar source serves it too; a drover source, XXH3 (about twice
        // as fast).
        let (algorithm, mapped_only) = match self.verify {
            Some(algorithm) => (algorithm, false),
            None if self.task.request.success_threshold >= 1.0 && features.block_digests => {
                (Algorithm::Xxh3, true)
            }
            None if self.task.request.success_threshold >= 1.0 => (Algorithm::Xxhash32, true),
            None => return Ok(()),
        };
        // An empty file is what its size says; and a Sidecar source has no digest for it.
        let compared: Vec<_> = plan
            .present
            .iter()
            .filter(|(f, _)| f.size > 0 && (!mapped_only || written_through_a_map(&f.file_url)))
            .cloned()
            .collect();
        let stale = plan::differing(
            &self.task.peer,
            &compared,
            algorithm,
            self.task.request.max_concurrency,
            self.cancel,
        )
        .await?;
        // Not deleted first: the download replaces each by a rename once it is complete, so a
        // source that lies about digests cannot empty the node, and a failed download leaves
        // the old file for the next iteration.
        for (file, path) in stale {
            plan.download.push((file, path));
        }
        plan.order_downloads();
        Ok(())
    }

    /// `DOWNLOADING`: creates the directories and empty files, then fetches the files,
    /// publishing the counters every second. Failed downloads are counted, and left to the
    /// next iteration; the first local failure (a missing directory, a full disk) is
    /// returned, as iterating would not cure it.
    async fn downloading<P: Fn(&[IterationStatus])>(
        &self,
        download: Vec<(RemoteFile, PathBuf)>,
        features: Features,
        round_trip: Duration,
        status: &mut IterationStatus,
        log: &mut IterationLog<P>,
    ) -> Option<LiveMigrationError> {
        let counters = DownloadCounters::default();
        let touched: Vec<PathBuf> = download.iter().map(|(_, p)| p.clone()).collect();
        let (fetched, created): (Vec<_>, Vec<_>) = download
            .into_iter()
            .partition(|(f, _)| f.is_file() && f.size > 0);
        let mut local_failure = None;
        // Nothing to ask the source for: done at once, like the Sidecar's.
        let local = self.task.local.clone();
        let made = tokio::task::spawn_blocking(move || {
            created
                .iter()
                .map(|(f, p)| {
                    (
                        f.file_url.clone(),
                        fetch::create_without_request(&local, f, p),
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
        .expect("creating files does not panic");
        for (url, result) in made {
            match result {
                Ok(()) => {
                    counters.files_downloaded.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(file = %url, error = %e, "cannot create");
                    counters.download_failures.fetch_add(1, Ordering::Relaxed);
                    local_failure.get_or_insert(e);
                }
            }
        }
        copy_counters(&counters, status);
        log.update(status);
        let connections = tokio::sync::Semaphore::new(self.task.request.max_concurrency);
        let downloader = Downloader {
            local: self.task.local.clone(),
            connections: &connections,
            stripe: super::striped::stripe_for(round_trip),
            connections_total: self.task.request.max_concurrency,
            bytes_to_download: status.bytes_to_download.max(0) as u64,
            peer: &self.task.peer,
            verify: self.verify,
            limiter: self.limiter,
            counters: &counters,
            cancel: self.cancel,
            features,
        };
        let downloader = &downloader;
        tracing::info!(
            status_ms = round_trip.as_secs_f64() * 1e3,
            striped = downloader.stripe != u64::MAX,
            files = fetched.len(),
            "downloading"
        );
        let work = batched::group(fetched, features.batch);
        let mut downloads = futures::stream::iter(work)
            .map(move |work| async move {
                match work {
                    Work::One(file, path) => {
                        let r = downloader.download_with_retries(&file, &path).await;
                        vec![(file, r)]
                    }
                    Work::Batch(files) => downloader.download_batch(files).await,
                }
            })
            .buffer_unordered(self.task.request.max_concurrency)
            .flat_map(futures::stream::iter);
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        loop {
            let next = tokio::select! {
                n = downloads.next() => n,
                // Downloads not started yet must not start, however long the list.
                _ = self.cancel.cancelled() => break,
                _ = ticker.tick() => {
                    copy_counters(&counters, status);
                    log.update(status);
                    continue;
                }
            };
            let Some((file, result)) = next else { break };
            match result {
                Ok(_) => {
                    counters.files_downloaded.fetch_add(1, Ordering::Relaxed);
                }
                Err(LiveMigrationError::Cancelled) => {}
                Err(e) => {
                    tracing::warn!(file = %file.file_url, error = %e, "download failed");
                    counters.download_failures.fetch_add(1, Ordering::Relaxed);
                    if matches!(
                        e,
                        LiveMigrationError::Invalid(_) | LiveMigrationError::Local { .. }
                    ) {
                        local_failure.get_or_insert(e);
                    }
                }
            }
        }
        drop(downloads);
        let began = std::time::Instant::now();
        let local = self.task.local.clone();
        let synced =
            tokio::task::spawn_blocking(move || fetch::sync_dirs(&local, touched.into_iter()))
                .await
                .expect("syncing does not panic");
        tracing::debug!(
            ms = began.elapsed().as_millis() as u64,
            "directories synced"
        );
        if let Err(e) = synced {
            local_failure.get_or_insert(e);
        }
        copy_counters(&counters, status);
        local_failure
    }

    /// `DOWNLOAD_COMPLETE`: the task stops when it was cancelled or a local failure came up.
    fn download_complete(
        &self,
        local_failure: Option<LiveMigrationError>,
    ) -> Result<(), LiveMigrationError> {
        if self.cancel.is_cancelled() {
            return Err(LiveMigrationError::Cancelled);
        }
        match local_failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Whether a listed file is a segment the node writes through a memory map: commit-log and
/// CDC segments.
fn written_through_a_map(file_url: &str) -> bool {
    file_url
        .strip_prefix(crate::livemigration::files::URL_PREFIX)
        .is_some_and(|rest| rest.starts_with("commitlog/") || rest.starts_with("cdc_raw/"))
}

fn copy_counters(counters: &DownloadCounters, status: &mut IterationStatus) {
    let load = |c: &std::sync::atomic::AtomicU64| counter(c.load(Ordering::Relaxed));
    status.files_downloaded = load(&counters.files_downloaded);
    status.bytes_downloaded = load(&counters.bytes_downloaded);
    status.download_failures = load(&counters.download_failures);
    status.bytes_kept = load(&counters.bytes_kept);
}
