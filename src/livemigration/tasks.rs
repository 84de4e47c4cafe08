//! Data-copy and verification tasks as jobs of the registry: their state survives a restart
//! (the record keeps the request and the iterations), and a destination restarted in the middle
//! of a data-copy task resumes it.

use std::sync::Arc;

use super::LiveMigration;
use super::copy::{self, CopyError, CopyRequest, Local, Source, Task};
use super::verify::{self, VerifyRequest};
use crate::config::Role;
use crate::jobs::running::{Ending, end};
use crate::jobs::{JobHandle, JobRegistry, JobResult, JobState};

/// Job kind of data-copy tasks.
pub const COPY_KIND: &str = "data-copy-task";
/// Job kind of files-verification tasks.
pub const VERIFY_KIND: &str = "files-verification-task";

/// The local side of tasks, from the live-migration settings.
pub fn local(live: &LiveMigration) -> Arc<Local> {
    Arc::new(Local {
        roots: live.roots.clone(),
        exclusions: live.exclusions.clone(),
    })
}

/// The source daemon of a destination.
pub fn source_of(live: &LiveMigration) -> Option<Source> {
    match &live.role {
        Role::Destination { source } => Some(Source::new(source)),
        _ => None,
    }
}

fn ending(e: CopyError) -> Ending {
    match e {
        CopyError::Cancelled => Ending::Stopped,
        other => Ending::Failed(other.to_string()),
    }
}

/// Runs a data-copy task as the job behind `handle`.
pub async fn run_copy(handle: JobHandle, task: Task) -> JobResult {
    handle.set_phase("copying");
    let publish = |history: &[copy::IterationStatus]| {
        if let Some(last) = history.last() {
            handle.set("iteration", u64::from(last.iteration));
            handle.set("bytesDownloaded", last.bytes_downloaded);
            handle.set("filesDownloaded", last.files_downloaded);
            handle.set("downloadFailures", last.download_failures);
            handle.set("bytesToDownload", last.bytes_to_download);
            handle.set("filesToDownload", last.files_to_download);
        }
        handle.set_result(serde_json::json!({ "status": history }));
    };
    let cancel = handle.cancelled().clone();
    match copy::run(task, cancel, publish).await {
        Ok(history) => {
            publish(&history);
            end(&handle, Ending::Done("done".into()))
        }
        Err((history, e)) => {
            publish(&history);
            end(&handle, ending(e))
        }
    }
}

/// Runs a verification task as the job behind `handle`; its report is the job's result.
pub async fn run_verify(
    handle: JobHandle,
    source: Source,
    local: Arc<Local>,
    request: VerifyRequest,
) -> JobResult {
    handle.set_phase("verifying");
    match verify::run(&source, local, &request, handle.cancelled()).await {
        Ok(report) => {
            let phase = if report.all_matched() {
                "done: all files match"
            } else {
                "done: files differ"
            };
            handle.set_result(serde_json::to_value(&report).expect("a report serializes"));
            end(&handle, Ending::Done(phase.into()))
        }
        Err(e) => end(&handle, ending(e)),
    }
}

/// Resumes the data-copy task a restart interrupted (a new iteration starts; files already
/// in place are kept and partial downloads continue), unless the local node now answers.
pub async fn resume_interrupted(
    jobs: JobRegistry,
    live: Arc<LiveMigration>,
    node: Arc<crate::cassandra::LocalNode>,
) {
    let Some(source) = source_of(&live) else {
        return;
    };
    let interrupted: Vec<_> = jobs
        .list(Some(COPY_KIND))
        .into_iter()
        .filter(|r| r.state == JobState::Interrupted)
        .collect();
    // Only asked when there is something to resume: most daemons are not destinations.
    let node_up = !interrupted.is_empty() && node.check().await.is_ok();
    for record in interrupted {
        if node_up {
            tracing::warn!(task = %record.id, "interrupted data-copy task not resumed: the local Cassandra node answers");
            continue;
        }
        let Ok(request) = serde_json::from_value::<CopyRequest>(record.spec.clone()) else {
            tracing::warn!(task = %record.id, "interrupted data-copy task not resumed: unreadable request");
            continue;
        };
        let task = Task {
            request,
            source: source.clone(),
            local: local(&live),
        };
        match jobs.resume(&record.id, move |h| run_copy(h, task)).await {
            Ok(_) => tracing::info!(task = %record.id, "interrupted data-copy task resumed"),
            Err(e) => tracing::warn!(task = %record.id, error = %e, "data-copy task not resumed"),
        }
    }
}
