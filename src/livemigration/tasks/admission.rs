//! Admission of tasks: a data-copy task only on a destination whose local node is down, and
//! one at a time. The check and the submission happen under one lock, so two requests at
//! once cannot both find no task running.

use super::DataCopyTask;
use super::jobs::{run_copy, run_verify};
use crate::cassandra::LocalNode;
use crate::jobs::kind::JobKind;
use crate::jobs::{JobRecord, JobRegistry, JobState};
use crate::livemigration::copy::{CopyRequest, CopyTask};
use crate::livemigration::kinds::{DataCopyKind, VerificationKind};
use crate::livemigration::verify::VerifyRequest;
use crate::livemigration::{LiveMigration, LiveMigrationError};

/// The data-copy task that has not ended, if any.
fn active_copy(jobs: &JobRegistry) -> Option<JobRecord> {
    jobs.list(Some(DataCopyKind::NAME))
        .into_iter()
        .find(|r| r.state.is_active())
}

/// Starts a data-copy task. Refused when the request is wrong, this node is no destination,
/// the local Cassandra node answers, or another data-copy task has not ended.
pub async fn start_copy(
    live: &LiveMigration,
    jobs: &JobRegistry,
    node: &LocalNode,
    request: CopyRequest,
) -> Result<JobRecord, LiveMigrationError> {
    request.check()?;
    let peer = live.peer().ok_or(LiveMigrationError::NotDestination)?;
    if let Some(address) = node.running().await {
        return Err(LiveMigrationError::NodeRunning { address });
    }
    let _admitting = live.copy_admission.lock().await;
    if let Some(active) = active_copy(jobs) {
        return Err(LiveMigrationError::CopyTaskActive {
            id: active.id,
            state: active.state,
        });
    }
    let spec = serde_json::to_value(&request).expect("a request serializes");
    let task = CopyTask {
        request,
        peer,
        local: live.local_files(),
        limits: (&live.config).into(),
    };
    Ok(jobs
        .submit(DataCopyKind::NAME, spec, move |h| run_copy(h, task))
        .await?)
}

/// Starts a verification task (any number may run).
pub async fn start_verification(
    live: &LiveMigration,
    jobs: &JobRegistry,
    request: VerifyRequest,
) -> Result<JobRecord, LiveMigrationError> {
    request.check()?;
    let peer = live.peer().ok_or(LiveMigrationError::NotDestination)?;
    let local = live.local_files();
    let spec = serde_json::to_value(&request).expect("a request serializes");
    Ok(jobs
        .submit(VerificationKind::NAME, spec, move |h| {
            run_verify(h, peer, local, request)
        })
        .await?)
}

/// Resumes the data-copy task a restart interrupted (a new iteration starts; files already
/// in place are kept and partial downloads continue), unless the local node now answers.
pub async fn resume_interrupted(
    jobs: JobRegistry,
    live: std::sync::Arc<LiveMigration>,
    node: std::sync::Arc<LocalNode>,
) {
    let Some(peer) = live.peer() else {
        return;
    };
    let interrupted: Vec<_> = jobs
        .list(Some(DataCopyKind::NAME))
        .into_iter()
        .filter(|r| r.state == JobState::Interrupted)
        .collect();
    // Only asked when there is something to resume: most daemons are not destinations.
    let node_up = !interrupted.is_empty() && node.running().await.is_some();
    for record in interrupted {
        let id = record.id.clone();
        if node_up {
            tracing::warn!(task = %id, "interrupted data-copy task not resumed: the local Cassandra node answers");
            continue;
        }
        let Some(request) = DataCopyTask::from_record(record).request else {
            tracing::warn!(task = %id, "interrupted data-copy task not resumed: unreadable request");
            continue;
        };
        // Under the admission lock: a task submitted meanwhile would make two at once.
        let _admitting = live.copy_admission.lock().await;
        if let Some(active) = active_copy(&jobs) {
            tracing::warn!(task = %id, running = %active.id, "interrupted data-copy task not resumed: another one runs");
            continue;
        }
        let task = CopyTask {
            request,
            peer: peer.clone(),
            local: live.local_files(),
            limits: (&live.config).into(),
        };
        match jobs.resume(&id, move |h| run_copy(h, task)).await {
            Ok(_) => tracing::info!(task = %id, "interrupted data-copy task resumed"),
            Err(e) => tracing::warn!(task = %id, error = %e, "data-copy task not resumed"),
        }
    }
}
