//! Data-copy and verification tasks as jobs of the registry: their state survives a restart
//! (the record keeps the request and the iterations), and a destination restarted in the middle
//! of a data-copy task resumes it.
//!
//! The job record holds a task's request and result as JSON; this module is the one place
//! that reads them back, into [`DataCopyTask`] and [`VerificationTask`].

mod admission;
mod jobs;
pub mod shown;

use std::sync::Arc;

pub use admission::{resume_interrupted, start_copy, start_verification};
pub use jobs::{run_copy, run_verify};

use super::copy::{CopyReport, CopyRequest, IterationState, IterationStatus};
use super::kinds::{DataCopyKind, VerificationKind};
use super::local::LocalFiles;
use super::verify::{VerifyReport, VerifyRequest};
use super::{LiveMigration, LiveMigrationError};
use crate::config::Role;
use crate::jobs::kind::JobKind;
use crate::jobs::{JobRecord, JobRegistry, JobState};

/// A data-copy task as its job record keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct DataCopyTask {
    /// Task id.
    pub id: String,
    /// The job's state.
    pub state: JobState,
    /// Why it failed.
    pub error: Option<String>,
    /// The request; `None` when the kept one cannot be read (written by another version).
    pub request: Option<CopyRequest>,
    /// One entry per iteration so far.
    pub iterations: Vec<IterationStatus>,
}

impl DataCopyTask {
    /// Reads a data-copy job's record. A task asked to stop shows its last iteration
    /// `CANCELLED` at once, as the Sidecar's cancel does, though its downloads may take a
    /// moment to stop. A task that stopped otherwise (a restart that did not resume it, a
    /// failure outside the iterations) shows it `FAILED`: a Sidecar client polls until the
    /// last iteration's state is a final one.
    pub fn from_record(r: JobRecord) -> Self {
        let mut iterations = r
            .result
            .and_then(|v| serde_json::from_value::<CopyReport>(v).ok())
            .map(|report| report.status)
            .unwrap_or_default();
        if let Some(last) = iterations.last_mut()
            && !matches!(
                last.state,
                IterationState::Success | IterationState::Failed | IterationState::Cancelled
            )
        {
            if r.cancel_requested || r.state == JobState::Cancelled {
                last.state = IterationState::Cancelled;
            } else if matches!(r.state, JobState::Interrupted | JobState::Failed) {
                last.state = IterationState::Failed;
            }
        }
        Self {
            request: serde_json::from_value(r.spec).ok(),
            iterations,
            id: r.id,
            state: r.state,
            error: r.error,
        }
    }
}

/// A files-verification task as its job record keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationTask {
    /// Task id.
    pub id: String,
    /// The job's state.
    pub state: JobState,
    /// An operator asked it to stop (it may still be stopping).
    pub cancel_requested: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// The request; `None` when the kept one cannot be read (written by another version).
    pub request: Option<VerifyRequest>,
    /// What it found so far (counters are published while it runs).
    pub report: Option<VerifyReport>,
}

impl VerificationTask {
    /// Reads a verification job's record.
    pub fn from_record(r: JobRecord) -> Self {
        Self {
            request: serde_json::from_value(r.spec).ok(),
            report: r.result.and_then(|v| serde_json::from_value(v).ok()),
            id: r.id,
            state: r.state,
            cancel_requested: r.cancel_requested,
            error: r.error,
        }
    }
}

/// Whether a job is a live-migration task (data copy or verification).
fn is_task(r: &JobRecord) -> bool {
    r.kind == DataCopyKind::NAME || r.kind == VerificationKind::NAME
}

/// The live-migration task of either kind that has not ended, if any: a node runs one at a
/// time.
pub fn active_task(jobs: &JobRegistry) -> Option<JobRecord> {
    jobs.list(None)
        .into_iter()
        .find(|r| is_task(r) && r.state.is_active())
}

/// Whether a data-copy task has published its final iteration state (`SUCCESS`, `FAILED` or
/// `CANCELLED`) and is only ending: removing its staging files and recording its end. A
/// Sidecar client that saw that state asks for the next task at once.
fn ending(r: &JobRecord) -> bool {
    r.kind == DataCopyKind::NAME
        && r.result
            .as_ref()
            .and_then(|v| serde_json::from_value::<CopyReport>(v.clone()).ok())
            .and_then(|report| report.status.last().map(|i| i.state))
            .is_some_and(|s| {
                matches!(
                    s,
                    IterationState::Success | IterationState::Failed | IterationState::Cancelled
                )
            })
}

/// How long admission waits for a task that is only ending ([`ending`]) to end.
const ENDING_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// [`active_task`], once a task that is only ending has ended (waited for up to
/// [`ENDING_WAIT`]): the next task of a client that saw the last one's final state is
/// admitted, not refused for a task whose work is over.
pub async fn active_task_settled(jobs: &JobRegistry) -> Option<JobRecord> {
    let deadline = tokio::time::Instant::now() + ENDING_WAIT;
    loop {
        let active = active_task(jobs)?;
        if !ending(&active) || tokio::time::Instant::now() >= deadline {
            return Some(active);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The most recent live-migration task of either kind — the Sidecar's one task slot of a
/// node: the task that has not ended if there is one (a resumed task may be older than one
/// that ended since), else the one submitted last.
pub fn latest_task(jobs: &JobRegistry) -> Option<JobRecord> {
    active_task(jobs).or_else(|| jobs.list(None).into_iter().rfind(is_task))
}

/// The noun of a task's kind in messages.
pub fn noun_of(r: &JobRecord) -> &'static str {
    if r.kind == DataCopyKind::NAME {
        DataCopyKind::NOUN
    } else {
        VerificationKind::NOUN
    }
}

/// Every data-copy task, oldest first.
pub fn copy_tasks(jobs: &JobRegistry) -> Vec<DataCopyTask> {
    jobs.list(Some(DataCopyKind::NAME))
        .into_iter()
        .map(DataCopyTask::from_record)
        .collect()
}

/// The current data-copy task as the Sidecar's list shows it: the latest task of either kind
/// when it is a data-copy task.
pub fn current_copy_task(jobs: &JobRegistry) -> Option<DataCopyTask> {
    latest_task(jobs)
        .filter(|r| r.kind == DataCopyKind::NAME)
        .map(DataCopyTask::from_record)
}

/// Every verification task, oldest first.
pub fn verification_tasks(jobs: &JobRegistry) -> Vec<VerificationTask> {
    jobs.list(Some(VerificationKind::NAME))
        .into_iter()
        .map(VerificationTask::from_record)
        .collect()
}

/// The job `id` when it is of `kind`; `noun` names the task in the error.
fn record_of(
    jobs: &JobRegistry,
    id: &str,
    kind: &str,
    noun: &'static str,
) -> Result<JobRecord, LiveMigrationError> {
    let record = jobs.get(id)?;
    if record.kind != kind {
        return Err(LiveMigrationError::NoSuchTask {
            noun,
            id: id.to_string(),
        });
    }
    Ok(record)
}

/// One data-copy task.
pub fn copy_task(jobs: &JobRegistry, id: &str) -> Result<DataCopyTask, LiveMigrationError> {
    record_of(jobs, id, DataCopyKind::NAME, "data-copy task").map(DataCopyTask::from_record)
}

/// One verification task.
pub fn verification_task(
    jobs: &JobRegistry,
    id: &str,
) -> Result<VerificationTask, LiveMigrationError> {
    record_of(jobs, id, VerificationKind::NAME, "verification task")
        .map(VerificationTask::from_record)
}

/// Removes the staging files a previous process left (a crash, a task that ended while its
/// removal failed), unless an interrupted data-copy task is there to continue them.
pub async fn sweep_staging(jobs: &JobRegistry, live: &LiveMigration) {
    let resumable = jobs
        .list(Some(DataCopyKind::NAME))
        .iter()
        .any(|r| r.state == JobState::Interrupted);
    if resumable {
        return;
    }
    let local = live.local_files();
    let removed = tokio::task::spawn_blocking(move || local.remove_staging())
        .await
        .unwrap_or(0);
    if removed > 0 {
        tracing::info!(removed, "staging files left by an earlier run removed");
    }
}

/// Cancels a data-copy task: running downloads stop, and its staging files are removed once
/// it has stopped. Returns once the cancel is on disk, so a restart cannot resume the task,
/// and once the task has stopped (or after [`TASK_STOP_WAIT`], still stopping).
/// A task that has ended is returned as it is (the Sidecar answers a cancel of a finished
/// task with its last status).
pub async fn cancel_copy(jobs: &JobRegistry, id: &str) -> Result<DataCopyTask, LiveMigrationError> {
    let task = copy_task(jobs, id)?;
    if !task.state.is_active() {
        return Ok(task);
    }
    match jobs.cancel_recorded(id).await {
        Ok(_) => {}
        // Ended meanwhile.
        Err(crate::jobs::JobError::WrongState { .. }) => return copy_task(jobs, id),
        Err(e) => return Err(e.into()),
    }
    let record = jobs.wait_finished(id, TASK_STOP_WAIT).await?;
    Ok(DataCopyTask::from_record(record))
}

/// How long a cancel waits for its task to stop, so that its answer, and a task submitted
/// right after it (the Sidecar's slot is free once a task is cancelled), find it ended: the
/// downloads and digests stop at once; a file being read or renamed takes a moment.
const TASK_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Cancels a verification task, as the Sidecar does: a task that has ended is left as it is
/// (and returned); a running one is stopped, and returned once it has stopped (or after
/// [`TASK_STOP_WAIT`], still stopping).
pub async fn cancel_verification(
    jobs: &JobRegistry,
    id: &str,
) -> Result<VerificationTask, LiveMigrationError> {
    let task = verification_task(jobs, id)?;
    if !task.state.is_active() {
        return Ok(task);
    }
    match jobs.cancel_recorded(id).await {
        Ok(_) => {}
        // It ended meanwhile.
        Err(crate::jobs::JobError::WrongState { .. }) => return verification_task(jobs, id),
        Err(e) => return Err(e.into()),
    }
    let record = jobs.wait_finished(id, TASK_STOP_WAIT).await?;
    Ok(VerificationTask::from_record(record))
}

impl LiveMigration {
    /// The files side of tasks: this node's directories and exclusions.
    pub fn local_files(&self) -> Arc<LocalFiles> {
        Arc::new(LocalFiles {
            roots: self.roots.clone(),
            exclusions: self.exclusions.clone(),
        })
    }

    /// The source daemon's host and port, as task views show them (`("", 0)` when unknown).
    pub fn source_host_port(&self) -> (String, u16) {
        match &self.role {
            Role::Destination { source } => source
                .rsplit_once(':')
                .map(|(h, p)| (h.to_string(), p.parse().unwrap_or(0)))
                .unwrap_or_default(),
            _ => (String::new(), 0),
        }
    }
}
