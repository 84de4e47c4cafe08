//! Running a migration as a job of the registry: progress counters, rate, ETA and phase are
//! copied into the job record while the engine runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::config::{JobConfig, redacted_json};
use super::engine::{Migration, MigrationError, Progress};
use super::ranges::{RangeSet, TokenRange};
use crate::jobs::{JobFailure, JobHandle, JobResult};
use crate::savepoints::{self, FileStore, SavepointInfo, SavepointStore};

/// Job kind of migrations in the registry.
pub const KIND: &str = "migration";

/// Status derived from counters: rate over the last report interval and time left.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Rows written per second, recently.
    pub rows_per_second: u64,
    /// Bytes written per second, recently.
    pub bytes_per_second: u64,
    /// Seconds left at the average unit rate, once a unit is done.
    pub eta_seconds: Option<u64>,
}

/// Computes rates from two snapshots of (rows written, bytes written) and the unit counts.
pub fn rates(
    previous: (u64, u64),
    current: (u64, u64),
    interval: Duration,
    elapsed: Duration,
    units: (u64, u64, u64),
) -> Rates {
    let secs = interval.as_secs_f64().max(1e-3);
    let (total, done, skipped) = units;
    let copied = done.saturating_sub(skipped);
    let left = total.saturating_sub(done);
    let eta_seconds =
        (copied > 0).then(|| (elapsed.as_secs_f64() * left as f64 / copied as f64).round() as u64);
    Rates {
        rows_per_second: ((current.0.saturating_sub(previous.0)) as f64 / secs).round() as u64,
        bytes_per_second: ((current.1.saturating_sub(previous.1)) as f64 / secs).round() as u64,
        eta_seconds,
    }
}

/// Reads one counter of a snapshot.
pub fn counter(snapshot: &[(&'static str, u64)], name: &str) -> u64 {
    snapshot
        .iter()
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| *v)
}

/// A checked migration, with its savepoints and what it resumes from.
pub struct Launch {
    /// The planned copy.
    pub migration: Migration,
    /// Where progress is saved, when the job has `savepoints`.
    pub savepoints: Option<Savepoints>,
    /// The savepoint this run continues from.
    pub resumed_from: Option<String>,
    /// The daemon's state directory, where a job's config is kept for resumes (not set when
    /// the migration runs in the foreground).
    pub state_dir: Option<std::path::PathBuf>,
}

/// The savepoints of one run.
pub struct Savepoints {
    store: Arc<FileStore>,
    /// The redacted job document that every savepoint repeats.
    base: serde_json::Value,
    interval: Duration,
    initial: savepoints::Progress,
}

impl Savepoints {
    /// Writes a savepoint of `done` (which includes the ranges skipped at start).
    pub async fn write(&self, done: &RangeSet, why: &str) -> Result<SavepointInfo, MigrationError> {
        let mut progress = self.initial.clone();
        progress.merge(&savepoints::Progress {
            token_ranges: done.clone(),
            ..Default::default()
        });
        let mut doc = self.base.clone();
        progress.into_document(&mut doc);
        let store = self.store.clone();
        let info = tokio::task::spawn_blocking(move || store.write(&doc))
            .await
            .expect("writing a savepoint does not panic")?;
        tracing::info!(
            savepoint = %self.store.dir().join(&info.name).display(),
            ranges = progress.token_ranges.ranges().len(),
            "created a savepoint due to {why}"
        );
        Ok(info)
    }

    /// The directory of the savepoint files.
    pub fn dir(&self) -> &std::path::Path {
        self.store.dir()
    }
}

/// Parses, checks and plans a job; with `savepoints.autoResume` (the default), merges the
/// progress of the newest savepoint of the same migration. Nothing is written to the target.
pub async fn launch(text: &str) -> Result<Launch, MigrationError> {
    let mut config = JobConfig::parse(text)?;
    let base = redacted_json(text);
    let mut savepoints = None;
    let mut resumed_from = None;
    if let Some(sp) = &config.savepoints {
        let dir = sp.path.clone().expect("validated");
        let keep = sp.keep;
        let store = Arc::new(
            tokio::task::spawn_blocking(move || FileStore::open(&dir, keep))
                .await
                .expect("opening savepoints does not panic")?,
        );
        let mut initial = savepoints::Progress::from_document(&base).unwrap_or_else(|e| {
            // JobConfig::parse checked skipTokenRanges; only the skip lists of other
            // connectors, which do not apply to this job, can be unreadable here. They must
            // not take the job's own finished ranges with them.
            tracing::warn!("{e}: ignored");
            savepoints::Progress {
                token_ranges: RangeSet::from_ranges(
                    config
                        .skip_token_ranges
                        .iter()
                        .filter_map(|&(a, b)| TokenRange::new(a, b)),
                ),
                ..Default::default()
            }
        });
        if sp.auto_resume {
            let identity = savepoints::identity(&base);
            let lookup = store.clone();
            let savepoints::Lookup { found, warnings } =
                tokio::task::spawn_blocking(move || lookup.newest_usable(&identity))
                    .await
                    .expect("reading savepoints does not panic")?;
            for w in warnings {
                tracing::warn!("{w}");
            }
            if let Some((savepoint, progress)) = found {
                tracing::info!(
                    savepoint = %savepoint.info.name,
                    ranges = progress.token_ranges.ranges().len(),
                    "resuming from the newest savepoint of this migration"
                );
                initial.merge(&progress);
                resumed_from = Some(savepoint.info.name);
            }
        }
        config.skip_token_ranges = initial
            .token_ranges
            .ranges()
            .iter()
            .map(|r| (r.start, r.end))
            .collect();
        savepoints = Some(Savepoints {
            store,
            base,
            interval: Duration::from_secs(sp.interval_seconds.expect("validated")),
            initial,
        });
    }
    let migration = Migration::prepare(&config).await?;
    Ok(Launch {
        state_dir: None,
        migration,
        savepoints,
        resumed_from,
    })
}

/// Runs a launched migration: savepoints every interval and a final one however the run ends
/// (success, failure, cancel, shutdown).
pub async fn execute(
    launch: Launch,
    progress: Arc<Progress>,
    cancel: CancellationToken,
) -> Result<(), MigrationError> {
    let done = Arc::new(Mutex::new(RangeSet::new()));
    let savepoints = launch.savepoints.map(Arc::new);
    let periodic = savepoints.clone().map(|sp| {
        let done = done.clone();
        Periodic::start(sp.interval, move || {
            let sp = sp.clone();
            let snapshot = done.lock().unwrap_or_else(|p| p.into_inner()).clone();
            async move {
                if let Err(e) = sp.write(&snapshot, "schedule").await {
                    tracing::error!(error = %e, "cannot write a savepoint");
                }
            }
        })
    });
    let result = launch.migration.run(progress, done.clone(), cancel).await;
    if let Some(periodic) = periodic {
        periodic.stop().await;
    }
    if let Some(sp) = &savepoints {
        let snapshot = done.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let why = match &result {
            Ok(()) => "the end of the migration",
            Err(MigrationError::Stopped) => "the migration being stopped",
            Err(_) => "the migration failing",
        };
        if let Err(e) = sp.write(&snapshot, why).await {
            // The data written is not affected; the next run redoes what this one did.
            tracing::error!(error = %e, "cannot write the final savepoint");
            if result.is_ok() {
                return Err(e);
            }
        }
    }
    result
}

/// A task that calls `tick` every `interval` (not at once) until stopped.
pub struct Periodic {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Periodic {
    /// Starts the ticks.
    pub fn start<F, Fut>(interval: Duration, mut tick: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.tick().await;
            loop {
                tokio::select! {
                    _ = stopped.cancelled() => return,
                    _ = ticker.tick() => tick().await,
                }
            }
        });
        Self { stop, task }
    }

    /// Stops the ticks, waiting for one in progress: a savepoint being written when the job
    /// ends must not land after the final one.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Runs a launched migration as the job behind `handle`.
pub async fn run(handle: JobHandle, launch: Launch) -> JobResult {
    let state_dir = launch.state_dir.clone();
    if let Some(name) = &launch.resumed_from {
        tracing::info!(job = handle.id(), savepoint = %name, "migration resumes from a savepoint");
    }
    handle.set_phase("copying");
    let progress = Arc::new(Progress::default());
    let reporter = {
        let handle = handle.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            let interval = Duration::from_secs(1);
            let started = Instant::now();
            let mut previous = (0, 0);
            let mut ticker = tokio::time::interval(interval);
            loop {
                ticker.tick().await;
                previous = report(&handle, &progress, previous, interval, started.elapsed());
            }
        })
    };
    let result = execute(launch, progress.clone(), handle.cancelled().clone()).await;
    reporter.abort();
    report(
        &handle,
        &progress,
        (0, 0),
        Duration::from_secs(1),
        Duration::ZERO,
    );
    handle.set("rowsPerSecond", 0);
    handle.set("bytesPerSecond", 0);
    if !matches!(result, Err(MigrationError::Stopped))
        && let Some(dir) = &state_dir
    {
        // Succeeded or failed: no resume will need the credentials any more.
        forget_job_file(dir, handle.id());
    }
    end(
        &handle,
        match result {
            Ok(()) => Ending::Done("done".into()),
            Err(MigrationError::Stopped) => Ending::Stopped,
            Err(e) => Ending::Failed(e.to_string()),
        },
    )
}

fn report(
    handle: &JobHandle,
    progress: &Progress,
    previous: (u64, u64),
    interval: Duration,
    elapsed: Duration,
) -> (u64, u64) {
    publish(
        handle,
        &progress.snapshot(),
        progress.waiting(),
        ["rowsWritten", "bytesWritten"],
        (previous, interval, elapsed),
        "copying",
    )
}

/// Copies a job's counters into its record, with the rates of its `rate_keys` (rows, bytes)
/// since `previous` (`timing` = previous values, interval, elapsed), the ETA, and a phase:
/// `waiting: <why>` while a request is retried, else `phase`. Returns the current rate values.
pub fn publish(
    handle: &JobHandle,
    snapshot: &[(&'static str, u64)],
    waiting: Option<String>,
    [rows_key, bytes_key]: [&str; 2],
    (previous, interval, elapsed): ((u64, u64), Duration, Duration),
    phase: &str,
) -> (u64, u64) {
    for (k, v) in snapshot {
        handle.set(k, *v);
    }
    let current = (counter(snapshot, rows_key), counter(snapshot, bytes_key));
    let units = (
        counter(snapshot, "unitsTotal"),
        counter(snapshot, "unitsDone"),
        counter(snapshot, "unitsSkipped"),
    );
    let r = rates(previous, current, interval, elapsed, units);
    handle.set("rowsPerSecond", r.rows_per_second);
    handle.set("bytesPerSecond", r.bytes_per_second);
    if let Some(eta) = r.eta_seconds {
        handle.set("etaSeconds", eta);
    }
    match waiting {
        Some(reason) => {
            handle.set_last_error(&reason);
            handle.set_phase(&format!("waiting: {reason}"));
        }
        None => handle.set_phase(phase),
    }
    current
}

/// How a job's run ended, for [`end`].
pub enum Ending {
    /// Ran to the end; the phase to show.
    Done(String),
    /// Stopped by a cancel or a shutdown.
    Stopped,
    /// Failed, with the reason.
    Failed(String),
}

/// Sets the final phase of a job and its result for the registry.
pub fn end(handle: &JobHandle, ending: Ending) -> JobResult {
    match ending {
        Ending::Done(phase) => {
            handle.set_phase(&phase);
            Ok(())
        }
        Ending::Stopped => {
            handle.set_phase("stopped");
            Err(JobFailure::Stopped)
        }
        Ending::Failed(e) => {
            handle.set_phase("failed");
            Err(JobFailure::Error(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_eta() {
        let r = rates(
            (100, 1000),
            (300, 5000),
            Duration::from_secs(2),
            Duration::from_secs(10),
            (10, 5, 1),
        );
        assert_eq!(r.rows_per_second, 100);
        assert_eq!(r.bytes_per_second, 2000);
        // 4 units copied in 10 s, 5 left: 12.5 s.
        assert_eq!(r.eta_seconds, Some(13));
        assert_eq!(
            rates(
                (0, 0),
                (0, 0),
                Duration::from_secs(1),
                Duration::from_secs(1),
                (10, 3, 3)
            )
            .eta_seconds,
            None
        );
    }
}

/// Why an interrupted migration could not be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The registry refused (unknown job, not INTERRUPTED, shutting down).
    #[error(transparent)]
    Jobs(#[from] crate::jobs::JobError),
    /// The job's config was not kept.
    #[error("{0}")]
    NoJobFile(String),
    /// The job could not be launched again.
    #[error("{message}")]
    Launch {
        /// Why.
        message: String,
        /// The job file or the schemas are at fault (not an unreachable database).
        config_problem: bool,
    },
}

impl From<MigrationError> for ResumeError {
    fn from(e: MigrationError) -> Self {
        Self::Launch {
            config_problem: e.is_config_problem(),
            message: e.to_string(),
        }
    }
}

fn job_file(state_dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    state_dir.join("jobs").join(format!("{id}.job.yaml"))
}

/// Keeps a job's config (with its secrets: a resume needs the credentials) next to its record,
/// readable by the daemon's user only. Savepoints, logs and the API only ever see the redacted
/// form.
pub fn keep_job_file(state_dir: &std::path::Path, id: &str, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = job_file(state_dir, id);
    // A name remove_stale_temp_files recognises, should the daemon die mid-write.
    let tmp = path.with_file_name(format!(
        ".{id}.job.yaml.{}{}",
        std::process::id(),
        crate::fsutil::TMP_SUFFIX
    ));
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    crate::fsutil::sync_dir(path.parent().expect("in the jobs dir"))
}

/// Reads the kept config of job `id`.
pub fn read_job_file(state_dir: &std::path::Path, id: &str) -> Result<String, ResumeError> {
    let path = job_file(state_dir, id);
    std::fs::read_to_string(&path).map_err(|e| {
        ResumeError::NoJobFile(format!(
            "the config of job {id} was not kept ({}: {e}); submit it again",
            path.display()
        ))
    })
}

/// Deletes the kept config of a job that will not be resumed.
pub fn forget_job_file(state_dir: &std::path::Path, id: &str) {
    match std::fs::remove_file(job_file(state_dir, id)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(job = id, error = %e, "cannot delete the kept job config"),
    }
}

/// Resumes the `INTERRUPTED` migration `id` from its kept config; it continues from its
/// newest savepoint.
pub async fn resume(
    jobs: &crate::jobs::JobRegistry,
    state_dir: &std::path::Path,
    id: &str,
) -> Result<crate::jobs::JobRecord, ResumeError> {
    let text = read_job_file(state_dir, id)?;
    let mut launch = launch(&text).await?;
    launch.state_dir = Some(state_dir.to_path_buf());
    Ok(jobs.resume(id, move |h| run(h, launch)).await?)
}

/// Deletes the kept configs of migrations and validations that ended and can no longer be resumed (a crash
/// can leave some behind), so credentials do not stay on disk longer than needed.
pub fn sweep_job_files(jobs: &crate::jobs::JobRegistry, state_dir: &std::path::Path) {
    let kinds = [KIND, crate::validate::job::KIND];
    for record in kinds.iter().flat_map(|k| jobs.list(Some(k))) {
        if !record.state.is_active() && record.state != crate::jobs::JobState::Interrupted {
            forget_job_file(state_dir, &record.id);
        }
    }
}

/// Resumes every `INTERRUPTED` migration (after a restart). Failures are logged and leave the
/// job `INTERRUPTED` for `POST /api/v1/migrations/{id}/resume`.
pub async fn resume_interrupted(jobs: crate::jobs::JobRegistry, state_dir: std::path::PathBuf) {
    let interrupted: Vec<_> = jobs
        .list(Some(KIND))
        .into_iter()
        .filter(|r| r.state == crate::jobs::JobState::Interrupted)
        .collect();
    for record in interrupted {
        match resume(&jobs, &state_dir, &record.id).await {
            Ok(_) => tracing::info!(job = %record.id, "interrupted migration resumed"),
            Err(e) => {
                tracing::warn!(job = %record.id, error = %e, "interrupted migration not resumed")
            }
        }
    }
}
