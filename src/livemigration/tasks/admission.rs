//! Admission of tasks, as the Sidecar admits them: only on a destination whose migration is
//! not COMPLETED, with a `maxConcurrency` within `live_migration.max_concurrent_file_requests`,
//! a data copy only while the local node is down, and one task of either kind at a time (the
//! Sidecar's one task slot per node). The check for a task that has not ended and the
//! submission happen under one lock, so two requests at once cannot both find none.

use super::jobs::{run_copy, run_verify};
use super::{DataCopyTask, active_task, active_task_settled, noun_of};
use crate::cassandra::LocalNode;
use crate::jobs::kind::JobKind;
use crate::jobs::{JobRecord, JobRegistry, JobState};
use crate::livemigration::copy::{CopyRequest, CopyTask};
use crate::livemigration::kinds::{DataCopyKind, VerificationKind};
use crate::livemigration::verify::VerifyRequest;
use crate::livemigration::{LiveMigration, LiveMigrationError, MigrationState};

/// Refuses new tasks once this node's migration is COMPLETED (Sidecar's
/// `allowIfMigrationNotComplete`).
fn not_completed(live: &LiveMigration) -> Result<(), LiveMigrationError> {
    if live.status().state == MigrationState::Completed {
        return Err(LiveMigrationError::MigrationCompleted);
    }
    Ok(())
}

/// Refuses a `maxConcurrency` above `live_migration.max_concurrent_file_requests`: the
/// source, configured alike, would refuse the excess requests (Sidecar's message).
fn within_file_request_limit(
    live: &LiveMigration,
    concurrency: usize,
) -> Result<(), LiveMigrationError> {
    let limit = live.config.max_concurrent_file_requests;
    if concurrency > limit {
        return Err(LiveMigrationError::InvalidRequest(format!(
            "max concurrency can not be more than {limit}"
        )));
    }
    Ok(())
}

/// Starts a data-copy task. Refused when the request is wrong, this node is no destination,
/// its migration is COMPLETED, the local Cassandra node answers, or a task of either kind
/// has not ended.
pub async fn start_copy(
    live: &LiveMigration,
    jobs: &JobRegistry,
    node: &LocalNode,
    request: CopyRequest,
) -> Result<JobRecord, LiveMigrationError> {
    let peer = live.peer().ok_or(LiveMigrationError::NotDestination)?;
    // In the Sidecar's order: its filter first, then the limit, then the other values.
    not_completed(live)?;
    within_file_request_limit(live, request.max_concurrency)?;
    request.check()?;
    if let Some(address) = node.running().await {
        return Err(LiveMigrationError::NodeRunning { address });
    }
    let _admitting = live.task_admission.lock().await;
    if let Some(active) = active_task_settled(jobs).await {
        return Err(LiveMigrationError::CopyTaskActive {
            noun: noun_of(&active),
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
    let identity = DataCopyKind::identity(&task.request, &task);
    Ok(jobs
        .submit_with_id(
            JobRegistry::new_id(),
            DataCopyKind::NAME,
            identity,
            spec,
            move |h| run_copy(h, task),
        )
        .await?)
}

/// Starts a verification task. Refused when the request is wrong, this node is no
/// destination, its migration is COMPLETED, or a task of either kind has not ended. Fields
/// of the request drover does not know are logged and dropped.
pub async fn start_verification(
    live: &LiveMigration,
    jobs: &JobRegistry,
    request: VerifyRequest,
) -> Result<JobRecord, LiveMigrationError> {
    let request =
        request.without_extra_fields("POST /api/v1/live-migration/files-verification-tasks");
    let peer = live.peer().ok_or(LiveMigrationError::NotDestination)?;
    not_completed(live)?;
    // The limit too, in the Sidecar's order of checks.
    request.check(live.config.max_concurrent_file_requests)?;
    let local = live.local_files();
    let spec = serde_json::to_value(&request).expect("a request serializes");
    let _admitting = live.task_admission.lock().await;
    if let Some(active) = active_task_settled(jobs).await {
        return Err(LiveMigrationError::VerificationTaskActive {
            noun: noun_of(&active),
            id: active.id,
            state: active.state,
        });
    }
    let verification = crate::livemigration::kinds::Verification {
        peer,
        local,
        request,
    };
    let identity = VerificationKind::identity(&verification.request, &verification);
    Ok(jobs
        .submit_with_id(
            JobRegistry::new_id(),
            VerificationKind::NAME,
            identity,
            spec,
            move |h| {
                run_verify(
                    h,
                    verification.peer,
                    verification.local,
                    verification.request,
                )
            },
        )
        .await?)
}

/// Resumes the data-copy task a restart interrupted (a new iteration starts; files already
/// in place are kept and partial downloads continue), unless the local node now answers,
/// this node's migration is COMPLETED, or a task of either kind runs.
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
        if not_completed(&live).is_err() {
            tracing::warn!(task = %id, "interrupted data-copy task not resumed: this node's live migration is COMPLETED");
            continue;
        }
        if node_up {
            tracing::warn!(task = %id, "interrupted data-copy task not resumed: the local Cassandra node answers");
            continue;
        }
        let Some(request) = DataCopyTask::from_record(record).request else {
            tracing::warn!(task = %id, "interrupted data-copy task not resumed: unreadable request");
            continue;
        };
        // Under the admission lock: a task of either kind submitted meanwhile would make two
        // at once.
        let _admitting = live.task_admission.lock().await;
        if let Some(active) = active_task(&jobs) {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::jobs::RegistryOptions;

    /// A destination whose local node and source are not reachable.
    fn destination(state_dir: &std::path::Path) -> (Arc<LiveMigration>, Arc<LocalNode>) {
        let text = format!(
            "state_dir: {}\ncassandra:\n  native_address: 127.0.0.1:1\n  data_file_directories: [{0}/data]\nlive_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"127.0.0.1:1\": \"destination:1\"\n",
            state_dir.display()
        );
        let config =
            crate::config::DaemonConfig::parse("test", &text, state_dir, |_| None, &[]).unwrap();
        let live = LiveMigration::open(&config, "127.0.0.1:2".parse().unwrap()).unwrap();
        (
            Arc::new(live),
            Arc::new(LocalNode::new(config.cassandra.clone())),
        )
    }

    /// A job that runs until it is stopped.
    async fn forever(h: crate::jobs::JobHandle) -> crate::jobs::JobResult {
        h.cancelled().cancelled().await;
        Err(crate::jobs::JobFailure::Stopped)
    }

    /// A data-copy task interrupted by a restart is not resumed while a verification runs
    /// (one task of either kind at a time, also across a restart), nor once the node's
    /// migration is COMPLETED.
    #[tokio::test]
    async fn an_interrupted_copy_is_not_resumed_while_a_verification_runs_nor_once_completed() {
        let dir = tempfile::tempdir().unwrap();
        let jobs_dir = dir.path().join("jobs");
        let spec =
            serde_json::json!({"maxIterations": 1, "successThreshold": 0.9, "maxConcurrency": 1});
        let copy = {
            let jobs = JobRegistry::open(&jobs_dir, RegistryOptions::default())
                .await
                .unwrap();
            let copy = jobs
                .submit(DataCopyKind::NAME, spec, forever)
                .await
                .unwrap();
            while jobs.get(&copy.id).unwrap().state != JobState::Running {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            jobs.shutdown(Duration::from_secs(5)).await;
            copy.id
        };
        let jobs = JobRegistry::open(&jobs_dir, RegistryOptions::default())
            .await
            .unwrap();
        assert_eq!(jobs.get(&copy).unwrap().state, JobState::Interrupted);
        let (live, node) = destination(dir.path());
        let verification = jobs
            .submit(VerificationKind::NAME, serde_json::json!({}), forever)
            .await
            .unwrap();
        resume_interrupted(jobs.clone(), live.clone(), node.clone()).await;
        assert_eq!(jobs.get(&copy).unwrap().state, JobState::Interrupted);
        // Once the verification has ended, the copy is resumed.
        jobs.cancel(&verification.id).unwrap();
        jobs.wait_finished(&verification.id, Duration::from_secs(5))
            .await
            .unwrap();
        // Nor once this node's migration is COMPLETED.
        live.complete().unwrap();
        resume_interrupted(jobs.clone(), live.clone(), node.clone()).await;
        assert_eq!(jobs.get(&copy).unwrap().state, JobState::Interrupted);
        // The status cleared (as DELETE /status would, once out of the map): resumed.
        drop(live);
        std::fs::remove_file(dir.path().join("live-migration.json")).unwrap();
        let (live, node) = destination(dir.path());
        resume_interrupted(jobs.clone(), live, node).await;
        // Resumed (it may already have failed: its source does not answer).
        assert_ne!(jobs.get(&copy).unwrap().state, JobState::Interrupted);
        jobs.shutdown(Duration::from_secs(5)).await;
    }
}
