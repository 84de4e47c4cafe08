//! The job registry: long-running work (migrations, validations, data-copy tasks) with ids,
//! lifecycle states, progress counters, cancellation and records that survive the process.
//!
//! Nothing here knows about HTTP. A job is an async function given a [`JobHandle`]; the registry
//! owns its state transitions, so a job cannot end up `RUNNING` forever by forgetting to report.
//! Every state change is written to disk before it is visible to readers, and progress counters
//! are flushed on an interval, so after `kill -9` the list of jobs is complete and a job that was
//! running shows `INTERRUPTED`.

pub mod identity;
pub mod kept;
pub mod kind;
mod record;
pub mod running;
pub mod shown;
mod store;
mod tally;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use identity::{Identity, Summary};
pub use record::{JobRecord, JobState};
use store::Store;
use tally::Tally;
pub use tally::Totals;

/// Errors of the job subsystem.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// No job (of the kind asked for) has this id.
    #[error("no {noun} with id {id:?}")]
    NotFound {
        /// What was looked for: `job`, or the noun of a kind (`migration`, ...).
        noun: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A shortened id that starts more than one job's id.
    #[error("job id prefix {prefix:?} is ambiguous: it starts {total} job ids ({}{}); give more of the id", shown.join(", "), if *total > shown.len() { ", …" } else { "" })]
    Ambiguous {
        /// The prefix asked for.
        prefix: String,
        /// The first ids it starts, oldest first (at most [`AMBIGUOUS_SHOWN`]).
        shown: Vec<String>,
        /// How many ids it starts.
        total: usize,
    },
    /// The operation needs another state (cancel a finished job, resume a running one).
    #[error("{noun} {id} is {state}: {action} needs {needs}")]
    WrongState {
        /// What the job is: `job`, or the noun of its kind.
        noun: &'static str,
        /// The job.
        id: String,
        /// Its state.
        state: JobState,
        /// What was asked.
        action: &'static str,
        /// The states that allow it.
        needs: &'static str,
    },
    /// The daemon is stopping and takes no new work.
    #[error("the daemon is shutting down and accepts no new jobs")]
    ShuttingDown,
    /// A record could not be read or written.
    #[error("job storage {}: {source}", path.display())]
    Storage {
        /// File or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A job's config could not be kept in the state directory for its resumes.
    #[error("cannot keep the job config in the state directory: {0}")]
    KeepJobFile(#[source] std::io::Error),
    /// The config of an interrupted job was not kept.
    #[error("the config of job {id} was not kept ({}: {source}); submit it again", path.display())]
    NoJobFile {
        /// The job.
        id: String,
        /// Where its config should be.
        path: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// A job's record holds no spec its kind can read (written by another version, or edited).
    #[error("the record of {kind} job {id} holds no readable spec")]
    UnreadableSpec {
        /// The kind.
        kind: &'static str,
        /// The job.
        id: String,
    },
    /// Jobs of this kind are not resumed.
    #[error("{kind} jobs cannot be resumed")]
    NotResumable {
        /// The kind.
        kind: &'static str,
    },
    /// A submitted job file was refused by the engine (invalid, or a database unreachable).
    #[error("{prefix}{0}", prefix = launch_prefix(.0.as_ref()))]
    Launch(#[source] Box<dyn LaunchError>),
    /// An interrupted job could not be launched again from its kept job file.
    #[error(transparent)]
    Relaunch(Box<dyn LaunchError>),
}

/// Why a kind refused to launch a job, as the registry and the HTTP edge need to tell it: the
/// kind's own error (the engine's, for job files), kept boxed so the framework names no kind.
pub trait LaunchError: std::error::Error + Send + Sync + 'static {
    /// The job file or a schema is wrong: the operator must change the job.
    fn is_config_problem(&self) -> bool;
    /// A new submission whose savepoint already records everything as done.
    fn is_already_done(&self) -> bool;
    /// Another run of the job holds what it needs (its savepoint directory).
    fn is_in_use(&self) -> bool;
    /// A target table cannot take the source's rows: the message is told whole.
    fn is_schema_mismatch(&self) -> bool;
}

// A boxed launch error is an error itself, with the causes of the kind's error.
impl std::error::Error for Box<dyn LaunchError> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).source()
    }
}

/// Says whether the operator must change the job file (`job config: `) or the job could not
/// start for another reason, such as a database that did not answer: the job file is right
/// then, and blaming it sent operators looking in the wrong place.
fn launch_prefix(err: &dyn LaunchError) -> &'static str {
    if err.is_config_problem() || err.is_already_done() {
        "job config: "
    } else {
        "cannot start the job: "
    }
}

/// How a job's work ended, as told by the job itself.
#[derive(Debug)]
pub enum JobFailure {
    /// The job saw its cancellation token fire and stopped early.
    Stopped,
    /// The job could not do its work.
    Error(String),
    /// The job ran to the end and found that the target differs from the source (a validation):
    /// not an error, but an outcome an operator must not mistake for a success. It ends
    /// `DIFFERENCES_FOUND`, with its findings in the record's `result`.
    Differences,
}

impl<E: std::error::Error> From<E> for JobFailure {
    fn from(err: E) -> Self {
        // Include the cause chain: "write failed: connection refused" is what an operator needs.
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        JobFailure::Error(message)
    }
}

/// What a job function returns.
pub type JobResult = Result<(), JobFailure>;

type JobFuture = Pin<Box<dyn Future<Output = JobResult> + Send + 'static>>;

const NOT_CANCELLED: u8 = 0;
const CANCELLED_BY_USER: u8 = 1;
const CANCELLED_BY_SHUTDOWN: u8 = 2;

/// Settings of a registry.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Jobs running at once.
    pub max_running: usize,
    /// How often dirty progress counters are written.
    pub flush_interval: Duration,
    /// Which finished jobs are kept.
    pub keep_finished: Retention,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            max_running: 4,
            flush_interval: Duration::from_secs(2),
            keep_finished: Retention::default(),
        }
    }
}

/// Which finished jobs (`SUCCEEDED`, `DIFFERENCES_FOUND`, `FAILED`, `CANCELLED`) the registry
/// keeps; the others are dropped with their records and kept job files. `INTERRUPTED` jobs are
/// never dropped by retention: they wait to be resumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most this many finished jobs, the most recently ended ones.
    pub count: Option<usize>,
    /// Drop finished jobs that ended longer ago than this.
    pub age: Option<Duration>,
}

impl From<&crate::config::KeepFinished> for Retention {
    fn from(k: &crate::config::KeepFinished) -> Self {
        Self {
            count: k.count,
            age: k.age,
        }
    }
}

impl Retention {
    /// The ids to drop among finished jobs given as (id, end time), at `now`.
    fn expired(
        &self,
        mut finished: Vec<(String, chrono::DateTime<Utc>)>,
        now: chrono::DateTime<Utc>,
    ) -> Vec<String> {
        // Newest first; ids (UUIDv7) break ties in creation order.
        finished.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        finished
            .into_iter()
            .enumerate()
            .filter(|(rank, (_, ended))| {
                self.count.is_some_and(|n| *rank >= n)
                    || self.age.is_some_and(|age| {
                        chrono::Duration::from_std(age).is_ok_and(|age| now - *ended > age)
                    })
            })
            .map(|(_, (id, _))| id)
            .collect()
    }
}

/// Terminal states: the job will not run again.
fn is_finished(state: JobState) -> bool {
    matches!(
        state,
        JobState::Succeeded | JobState::DifferencesFound | JobState::Failed | JobState::Cancelled
    )
}

/// The registry of every job this daemon knows, running or finished.
#[derive(Clone)]
pub struct JobRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    jobs: RwLock<BTreeMap<String, Arc<Entry>>>,
    stopping: CancellationToken,
    tracker: TaskTracker,
    slots: Arc<Semaphore>,
    retention: Retention,
    /// What jobs did, summed per kind (for the metrics' counters).
    tally: Tally,
}

struct Entry {
    id: String,
    record: Mutex<Versioned>,
    cancel: CancellationToken,
    cancel_reason: AtomicU8,
    /// Set when the job is deleted: its record must not be written again.
    removed: AtomicBool,
    /// Serialises writes of this record and remembers the last version written, so an older
    /// snapshot can never overwrite a newer one.
    written: tokio::sync::Mutex<u64>,
    /// When the run ended, as the job fixed it for its final rates ([`JobHandle::end_run`]):
    /// the record's `endedAt`, so those rates and the summary's averages share one clock.
    run_ended: Mutex<Option<DateTime<Utc>>>,
}

struct Versioned {
    record: JobRecord,
    version: u64,
}

impl Entry {
    fn new(record: JobRecord, written: u64) -> Arc<Self> {
        Arc::new(Self {
            id: record.id.clone(),
            record: Mutex::new(Versioned {
                record,
                version: written,
            }),
            cancel: CancellationToken::new(),
            cancel_reason: AtomicU8::new(NOT_CANCELLED),
            removed: AtomicBool::new(false),
            written: tokio::sync::Mutex::new(written),
            run_ended: Mutex::new(None),
        })
    }

    fn snapshot(&self) -> JobRecord {
        self.lock().record.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Versioned> {
        // A panic while holding this lock leaves a record that is still consistent (each
        // update is a few field assignments), so poisoning is not a reason to stop serving.
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut JobRecord)) {
        let mut guard = self.lock();
        f(&mut guard.record);
        guard.record.updated_at = Utc::now();
        guard.version += 1;
    }

    fn is_dirty(&self) -> bool {
        let version = self.lock().version;
        self.written.try_lock().is_ok_and(|w| *w < version)
    }

    fn request_cancel(&self, reason: u8) {
        // The first reason wins: a job cancelled by its operator stays CANCELLED even if the
        // daemon then shuts down before it has stopped.
        let _ = self.cancel_reason.compare_exchange(
            NOT_CANCELLED,
            reason,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.cancel.cancel();
    }
}

/// How many of the ids an ambiguous prefix starts are named in the error.
pub const AMBIGUOUS_SHOWN: usize = 10;

/// The states a resume starts from, as error messages name them.
pub const RESUMABLE: &str = "INTERRUPTED or CANCELLED";

impl JobRegistry {
    /// Opens the registry stored in `dir`, loading every record. Jobs that were queued or running
    /// when the previous process ended are marked `INTERRUPTED`.
    pub async fn open(dir: &Path, options: RegistryOptions) -> Result<Self, JobError> {
        let dir = dir.to_path_buf();
        let (store, records) = tokio::task::spawn_blocking(move || {
            let store = Store::open(&dir)?;
            let mut records = store.load_all()?;
            for record in records.iter_mut().filter(|r| {
                r.state.is_active() || (r.state == JobState::Interrupted && r.cancel_requested)
            }) {
                if record.cancel_requested {
                    tracing::warn!(job = %record.id, kind = %record.kind, was = %record.state, "job was cancelled before the previous process ended: it stays cancelled");
                    record.state = JobState::Cancelled;
                } else {
                    tracing::warn!(job = %record.id, kind = %record.kind, was = %record.state, "job was interrupted by the end of the previous process");
                    record.state = JobState::Interrupted;
                }
                record.ended_at = Some(record.updated_at);
                record.updated_at = Utc::now();
                store.save(record)?;
            }
            Ok::<_, JobError>((store, records))
        })
        .await
        .expect("job loading does not panic")?;

        let jobs = records
            .into_iter()
            .map(|r| (r.id.clone(), Entry::new(r, 0)))
            .collect();
        let inner = Arc::new(Inner {
            store,
            jobs: RwLock::new(jobs),
            stopping: CancellationToken::new(),
            tracker: TaskTracker::new(),
            slots: Arc::new(Semaphore::new(options.max_running.max(1))),
            retention: options.keep_finished,
            tally: Tally::default(),
        });
        inner.prune().await;
        tokio::spawn(flush_progress(
            Arc::downgrade(&inner),
            inner.stopping.clone(),
            options.flush_interval,
        ));
        Ok(Self { inner })
    }

    /// A fresh job id (UUIDv7: ids sort by creation time), for callers that must store
    /// something under the id before the job starts.
    pub fn new_id() -> String {
        uuid::Uuid::now_v7().to_string()
    }

    /// Records a new job and starts it as soon as a slot is free. `spec` is stored with the
    /// record (redact secrets before passing it). Returns the new record.
    pub async fn submit<F, Fut>(
        &self,
        kind: &str,
        spec: serde_json::Value,
        run: F,
    ) -> Result<JobRecord, JobError>
    where
        F: FnOnce(JobHandle) -> Fut + Send + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.submit_with_id(Self::new_id(), kind, Identity::default(), spec, run)
            .await
    }

    /// [`submit`](Self::submit) with an id from [`new_id`](Self::new_id) and what the job is
    /// called and moves.
    pub async fn submit_with_id<F, Fut>(
        &self,
        id: String,
        kind: &str,
        identity: Identity,
        spec: serde_json::Value,
        run: F,
    ) -> Result<JobRecord, JobError>
    where
        F: FnOnce(JobHandle) -> Fut + Send + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        if self.inner.stopping.is_cancelled() {
            return Err(JobError::ShuttingDown);
        }
        let now = Utc::now();
        let record = JobRecord {
            id,
            kind: kind.to_string(),
            name: identity.name,
            source: identity.source,
            target: identity.target,
            state: JobState::Queued,
            phase: None,
            created_at: now,
            started_at: None,
            ended_at: None,
            updated_at: now,
            attempts: 0,
            progress: BTreeMap::new(),
            error: None,
            last_error: None,
            spec,
            result: None,
            cancel_requested: false,
        };
        let entry = Entry::new(record, 0);
        entry.update(|_| {});
        self.inner.persist(&entry).await?;
        self.inner
            .jobs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(entry.id.clone(), entry.clone());
        self.start(entry.clone(), Box::new(move |h| Box::pin(run(h))));
        Ok(entry.snapshot())
    }

    /// Starts an `INTERRUPTED` or `CANCELLED` job again; `run` continues its work (the job's
    /// own savepoints tell it where to pick up). Progress counters are kept. A cancel is not a
    /// dead end: the operator who stopped a job can let it go on under the same id.
    pub async fn resume<F, Fut>(&self, id: &str, run: F) -> Result<JobRecord, JobError>
    where
        F: FnOnce(JobHandle) -> Fut + Send + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        if self.inner.stopping.is_cancelled() {
            return Err(JobError::ShuttingDown);
        }
        let old = self.entry(id)?;
        let record = old.snapshot();
        if !record.state.is_resumable() {
            return Err(JobError::WrongState {
                noun: "job",
                id: id.to_string(),
                state: record.state,
                action: "resume",
                needs: RESUMABLE,
            });
        }
        // A fresh entry: the old cancellation token may have fired during the shutdown that
        // interrupted the job.
        let entry = Entry::new(record, 0);
        entry.update(|r| {
            r.state = JobState::Queued;
            r.ended_at = None;
            r.error = None;
            // Else a restart would take the resumed job for the cancelled one.
            r.cancel_requested = false;
        });
        self.inner.persist(&entry).await?;
        self.inner
            .jobs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), entry.clone());
        self.start(entry.clone(), Box::new(move |h| Box::pin(run(h))));
        Ok(entry.snapshot())
    }

    fn start(&self, entry: Arc<Entry>, run: Box<dyn FnOnce(JobHandle) -> JobFuture + Send>) {
        let inner = self.inner.clone();
        self.inner.tracker.spawn(async move {
            let permit = tokio::select! {
                permit = inner.slots.clone().acquire_owned() => permit.ok(),
                _ = entry.cancel.cancelled() => None,
            };
            let result = match permit {
                Some(_permit) => {
                    entry.update(|r| {
                        r.state = JobState::Running;
                        r.started_at = Some(Utc::now());
                        r.attempts += 1;
                    });
                    if let Err(e) = inner.persist(&entry).await {
                        tracing::error!(error = %e, "cannot record job start");
                    }
                    let handle = JobHandle {
                        entry: entry.clone(),
                        inner: inner.clone(),
                    };
                    // A panicking job must still reach a final state.
                    match tokio::spawn(run(handle)).await {
                        Ok(result) => result,
                        Err(join) => Err(JobFailure::Error(format!("job panicked: {join}"))),
                    }
                }
                None => Err(JobFailure::Stopped),
            };
            inner.finish(&entry, result).await;
        });
    }

    /// Asks a queued or running job to stop; it ends `CANCELLED` once it has stopped.
    pub fn cancel(&self, id: &str) -> Result<JobRecord, JobError> {
        let entry = self.entry(id)?;
        let record = entry.snapshot();
        if !record.state.is_active() {
            return Err(JobError::WrongState {
                noun: "job",
                id: id.to_string(),
                state: record.state,
                action: "cancel",
                needs: "QUEUED or RUNNING",
            });
        }
        entry.request_cancel(CANCELLED_BY_USER);
        if entry.cancel_reason.load(Ordering::SeqCst) == CANCELLED_BY_USER {
            entry.update(|r| r.cancel_requested = true);
            let inner = self.inner.clone();
            let written = entry.clone();
            tokio::spawn(async move {
                if let Err(e) = inner.persist(&written).await {
                    tracing::error!(job = %written.id, error = %e, "cannot record a cancel");
                }
            });
        }
        Ok(entry.snapshot())
    }

    /// [`cancel`](Self::cancel), returning once the request is on disk: a cancel that was
    /// answered survives the process ending before the job has stopped.
    pub async fn cancel_recorded(&self, id: &str) -> Result<JobRecord, JobError> {
        self.cancel(id)?;
        let entry = self.entry(id)?;
        self.inner.persist(&entry).await?;
        Ok(entry.snapshot())
    }

    /// The full id of the job that `id` names: its whole id, or a prefix of exactly one id
    /// (the console and `drover jobs` show ids shortened; a UUIDv7's first 13 characters are
    /// its creation millisecond). An id that starts several ids is refused, naming some.
    pub fn resolve(&self, id: &str) -> Result<String, JobError> {
        self.resolve_as(id, "job")
    }

    /// [`resolve`](Self::resolve) for a route of one kind's resource: an id that names no job
    /// is "no `noun` with id …" (`no validation with id "x"`), what the caller asked for.
    pub fn resolve_as(&self, id: &str, noun: &'static str) -> Result<String, JobError> {
        let jobs = self.inner.jobs.read().unwrap_or_else(|p| p.into_inner());
        if jobs.contains_key(id) {
            return Ok(id.to_string());
        }
        let mut matching = jobs
            .range::<str, _>((std::ops::Bound::Included(id), std::ops::Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(id) && !id.is_empty());
        let Some(first) = matching.next() else {
            return Err(JobError::NotFound {
                noun,
                id: id.to_string(),
            });
        };
        let rest: Vec<&String> = matching.collect();
        if rest.is_empty() {
            return Ok(first.clone());
        }
        Err(JobError::Ambiguous {
            prefix: id.to_string(),
            total: rest.len() + 1,
            shown: std::iter::once(first)
                .chain(rest)
                .take(AMBIGUOUS_SHOWN)
                .cloned()
                .collect(),
        })
    }

    /// The record of one job.
    pub fn get(&self, id: &str) -> Result<JobRecord, JobError> {
        Ok(self.entry(id)?.snapshot())
    }

    /// Every job, oldest first, optionally only of one kind.
    pub fn list(&self, kind: Option<&str>) -> Vec<JobRecord> {
        self.inner
            .jobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|e| e.snapshot())
            .filter(|r| kind.is_none_or(|k| r.kind == k))
            .collect()
    }

    /// One page of the jobs that pass `keep`, newest first: `limit` records from the
    /// `offset`-th, and how many pass in all. Only the page's records are copied, so a page of
    /// a registry of many thousand jobs costs a look at each, not a copy of each.
    pub fn page(
        &self,
        keep: impl Fn(&str, JobState) -> bool,
        offset: usize,
        limit: usize,
    ) -> (usize, Vec<JobRecord>) {
        let jobs = self.inner.jobs.read().unwrap_or_else(|p| p.into_inner());
        let mut total = 0;
        let mut page = Vec::with_capacity(limit.min(1000));
        for entry in jobs.values().rev() {
            let guard = entry.lock();
            if !keep(&guard.record.kind, guard.record.state) {
                continue;
            }
            if total >= offset && page.len() < limit {
                page.push(guard.record.clone());
            }
            total += 1;
        }
        (total, page)
    }

    /// The jobs that pass `keep` and whose id sorts after `after` (ids are UUIDv7, so oldest
    /// first): at most `limit` of them, and the id to continue after when more pass. Only the
    /// returned records are copied.
    pub fn after(
        &self,
        keep: impl Fn(&str, JobState) -> bool,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<JobRecord>, Option<String>) {
        use std::ops::Bound;
        let jobs = self.inner.jobs.read().unwrap_or_else(|p| p.into_inner());
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut page = Vec::with_capacity(limit.min(1000));
        for (_, entry) in jobs.range::<str, _>((from, Bound::Unbounded)) {
            let guard = entry.lock();
            if !keep(&guard.record.kind, guard.record.state) {
                continue;
            }
            if page.len() == limit {
                let next = page.last().map(|r: &JobRecord| r.id.clone());
                return (page, next);
            }
            page.push(guard.record.clone());
        }
        (page, None)
    }

    /// What jobs of each kind have done since the daemon started, for metrics.
    pub fn totals(&self) -> Totals {
        self.inner.tally.snapshot()
    }

    /// Waits until a job is in a state that is not active, or `timeout` passes.
    pub async fn wait_finished(&self, id: &str, timeout: Duration) -> Result<JobRecord, JobError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let record = self.get(id)?;
            if !record.state.is_active() || tokio::time::Instant::now() >= deadline {
                return Ok(record);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops taking jobs, tells every running job to checkpoint and stop, and waits up to
    /// `timeout` for them. Jobs stopped this way are `INTERRUPTED`; jobs still running after the
    /// timeout are recorded `INTERRUPTED` as well, since the process is about to exit. Returns
    /// how many jobs had to be left behind.
    pub async fn shutdown(&self, timeout: Duration) -> usize {
        self.inner.stopping.cancel();
        let entries: Vec<_> = self
            .inner
            .jobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for entry in &entries {
            entry.request_cancel(CANCELLED_BY_SHUTDOWN);
        }
        self.inner.tracker.close();
        if tokio::time::timeout(timeout, self.inner.tracker.wait())
            .await
            .is_ok()
        {
            return 0;
        }
        let mut left = 0;
        for entry in entries.iter().filter(|e| e.snapshot().state.is_active()) {
            left += 1;
            let cancelled = entry.cancel_reason.load(Ordering::SeqCst) == CANCELLED_BY_USER;
            entry.update(|r| {
                r.state = if cancelled {
                    JobState::Cancelled
                } else {
                    JobState::Interrupted
                };
                r.ended_at = Some(Utc::now());
                r.error = Some(format!(
                    "did not stop within the shutdown timeout of {}",
                    humantime::format_duration(timeout)
                ));
            });
            if let Err(e) = self.inner.persist(entry).await {
                tracing::error!(error = %e, "cannot record job interruption");
            }
        }
        left
    }

    fn entry(&self, id: &str) -> Result<Arc<Entry>, JobError> {
        self.inner
            .jobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| JobError::NotFound {
                noun: "job",
                id: id.to_string(),
            })
    }

    /// Forgets a job that is not queued or running: its record and its kept job file are
    /// deleted. Returns its last record.
    pub async fn delete(&self, id: &str) -> Result<JobRecord, JobError> {
        let entry = {
            let mut jobs = self.inner.jobs.write().unwrap_or_else(|p| p.into_inner());
            let entry = jobs.get(id).cloned().ok_or_else(|| JobError::NotFound {
                noun: "job",
                id: id.to_string(),
            })?;
            // Checked under the map's lock, so that a resume cannot slip in between.
            let state = entry.snapshot().state;
            if state.is_active() {
                return Err(JobError::WrongState {
                    noun: "job",
                    id: id.to_string(),
                    state,
                    action: "delete",
                    needs: "SUCCEEDED, DIFFERENCES_FOUND, FAILED, CANCELLED or INTERRUPTED",
                });
            }
            jobs.remove(id);
            entry
        };
        let record = entry.snapshot();
        self.inner.remove_files(&entry).await?;
        tracing::info!(job = %record.id, kind = %record.kind, "job deleted");
        Ok(record)
    }
}

impl Inner {
    /// Writes the entry's current record unless a newer or equal version is already on disk.
    async fn persist(&self, entry: &Arc<Entry>) -> Result<(), JobError> {
        let mut written = entry.written.lock().await;
        if entry.removed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (record, version) = {
            let guard = entry.lock();
            (guard.record.clone(), guard.version)
        };
        if version <= *written {
            return Ok(());
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.save(&record))
            .await
            .expect("saving a job record does not panic")?;
        *written = version;
        Ok(())
    }

    async fn finish(&self, entry: &Arc<Entry>, result: JobResult) {
        let reason = entry.cancel_reason.load(Ordering::SeqCst);
        let stopped_state = if reason == CANCELLED_BY_SHUTDOWN {
            JobState::Interrupted
        } else {
            JobState::Cancelled
        };
        let (state, error) = match result {
            Ok(()) => (JobState::Succeeded, None),
            // Like a success, it ran to the end: a cancel that came too late does not change it.
            Err(JobFailure::Differences) => (JobState::DifferencesFound, None),
            Err(JobFailure::Stopped) => (stopped_state, None),
            // An error raised while stopping is most likely caused by the stop itself; the job
            // is not failed, but the message is kept.
            Err(JobFailure::Error(msg)) if reason != NOT_CANCELLED => (stopped_state, Some(msg)),
            Err(JobFailure::Error(msg)) => (JobState::Failed, Some(msg)),
        };
        let ended_at = entry
            .run_ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(Utc::now);
        entry.update(|r| {
            r.state = state;
            r.ended_at = Some(ended_at);
            r.error = error;
        });
        let record = entry.snapshot();
        self.tally.ended(&record.kind, record.state);
        tracing::info!(job = %record.id, kind = %record.kind, state = %record.state, error = record.error.as_deref().unwrap_or(""), "job ended");
        if let Err(e) = self.persist(entry).await {
            tracing::error!(job = %record.id, error = %e, "cannot record the end of a job");
        }
        self.prune().await;
    }

    /// Deletes the files of an entry already taken out of the map. Holding the write lock
    /// while marking it removed means no write of the record is in flight or can follow.
    async fn remove_files(&self, entry: &Arc<Entry>) -> Result<(), JobError> {
        let _written = entry.written.lock().await;
        entry.removed.store(true, Ordering::SeqCst);
        let store = self.store.clone();
        let id = entry.id.clone();
        tokio::task::spawn_blocking(move || store.remove(&id))
            .await
            .expect("removing a job record does not panic")
    }

    /// Drops the finished jobs that `jobs.keep_finished` no longer keeps.
    async fn prune(&self) {
        if self.retention == Retention::default() {
            return;
        }
        let expired = {
            let jobs = self.jobs.read().unwrap_or_else(|p| p.into_inner());
            let finished = jobs
                .values()
                .filter_map(|e| {
                    let guard = e.lock();
                    let r = &guard.record;
                    is_finished(r.state).then(|| (r.id.clone(), r.ended_at.unwrap_or(r.updated_at)))
                })
                .collect();
            self.retention.expired(finished, Utc::now())
        };
        for id in expired {
            // Finished jobs never run again, so only a DELETE can race with this; both remove
            // the same files. The files go first, so that a job no longer listed has none left.
            let entry = {
                let jobs = self.jobs.read().unwrap_or_else(|p| p.into_inner());
                jobs.get(&id)
                    .filter(|e| is_finished(e.snapshot().state))
                    .cloned()
            };
            let Some(entry) = entry else { continue };
            if let Err(e) = self.remove_files(&entry).await {
                tracing::warn!(job = %id, error = %e, "cannot drop a finished job");
                continue;
            }
            let mut jobs = self.jobs.write().unwrap_or_else(|p| p.into_inner());
            if jobs.get(&id).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
                jobs.remove(&id);
            }
            drop(jobs);
            tracing::info!(job = %id, "finished job dropped (jobs.keep_finished)");
        }
    }
}

/// Writes progress counters of running jobs every `interval`, until the registry stops.
async fn flush_progress(
    inner: std::sync::Weak<Inner>,
    stopping: CancellationToken,
    interval: Duration,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopping.cancelled() => return,
        }
        let Some(inner) = inner.upgrade() else { return };
        let dirty: Vec<_> = inner
            .jobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|e| e.is_dirty())
            .cloned()
            .collect();
        for entry in dirty {
            if let Err(e) = inner.persist(&entry).await {
                tracing::warn!(error = %e, "cannot write job progress");
            }
        }
        // Jobs age out of jobs.keep_finished.age while nothing else happens.
        inner.prune().await;
    }
}

/// A running job's view of itself: its cancellation token and its progress counters.
#[derive(Clone)]
pub struct JobHandle {
    entry: Arc<Entry>,
    inner: Arc<Inner>,
}

impl JobHandle {
    /// The job's id.
    pub fn id(&self) -> &str {
        &self.entry.id
    }

    /// Fires when the job must stop: cancelled by an operator, or the daemon shutting down.
    /// The job should write its checkpoint and return [`JobFailure::Stopped`].
    pub fn cancelled(&self) -> &CancellationToken {
        &self.entry.cancel
    }

    /// Whether the daemon is shutting down (the job is stopped to be resumed at the next start,
    /// not cancelled).
    pub fn shutting_down(&self) -> bool {
        self.inner.stopping.is_cancelled()
    }

    /// Names what the job is doing now.
    pub fn set_phase(&self, phase: &str) {
        self.entry.update(|r| r.phase = Some(phase.to_string()));
    }

    /// Records a transient error (one being retried).
    pub fn set_last_error(&self, error: &str) {
        let changed = self.entry.lock().record.last_error.as_deref() != Some(error);
        if changed {
            let mut kind = String::new();
            self.entry.update(|r| {
                r.last_error = Some(error.to_string());
                kind.clone_from(&r.kind);
            });
            self.inner.tally.error(&kind);
        }
    }

    /// Adds `n` to a progress counter.
    pub fn add(&self, counter: &str, n: u64) {
        let mut kind = String::new();
        self.entry.update(|r| {
            *r.progress.entry(counter.to_string()).or_insert(0) += n;
            kind.clone_from(&r.kind);
        });
        self.inner.tally.rise(&kind, counter, n);
    }

    /// Sets a progress counter.
    pub fn set(&self, counter: &str, value: u64) {
        let (mut kind, mut rose) = (String::new(), 0);
        self.entry.update(|r| {
            let before = r.progress.insert(counter.to_string(), value).unwrap_or(0);
            rose = if value >= before {
                value - before
            } else {
                value
            };
            kind.clone_from(&r.kind);
        });
        self.inner.tally.rise(&kind, counter, rose);
    }

    /// Removes a progress counter that no longer means anything (an ETA once nothing is
    /// downloading): a counter left from before would be shown as current.
    pub fn unset(&self, counter: &str) {
        self.entry.update(|r| {
            r.progress.remove(counter);
        });
    }

    /// Sets what the job found or produced (replacing an earlier result).
    pub fn set_result(&self, result: serde_json::Value) {
        self.entry.update(|r| r.result = Some(result));
    }

    /// Fixes the end of this run at now (the record's `endedAt` once the job ends, a moment
    /// later) and returns how long the run took from its recorded `startedAt`: a job's final
    /// rates are taken over this duration, which is the one its summary divides by.
    pub fn end_run(&self) -> Option<Duration> {
        let now = Utc::now();
        *self
            .entry
            .run_ended
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(now);
        let started = self.entry.lock().record.started_at?;
        (now - started).to_std().ok()
    }

    /// Writes the record now instead of at the next flush (after a unit of work was made
    /// durable elsewhere, for instance).
    pub async fn checkpoint(&self) -> Result<(), JobError> {
        self.inner.persist(&self.entry).await
    }
}

#[cfg(test)]
mod tests;
