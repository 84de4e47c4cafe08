//! Data-copy and verification tasks as jobs of the registry: their state survives a restart
//! (the record keeps the request and the iterations), and a destination restarted in the middle
//! of a data-copy task resumes it.

use std::sync::Arc;

use super::LiveMigration;
use super::copy::{self, CopyError, Local, Source, Task};
use super::verify::{self, VerifyRequest};
use crate::config::Role;
use crate::jobs::running::{Ending, end};
use crate::jobs::{JobHandle, JobResult};

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
