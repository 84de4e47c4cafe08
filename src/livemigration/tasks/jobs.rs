//! The bodies of the task jobs: they run the engine and report to the job registry.

use std::sync::Arc;
use std::time::Instant;

use super::shown::Rate;

use crate::jobs::running::{Ending, end};
use crate::jobs::{JobHandle, JobResult};
use crate::livemigration::LiveMigrationError;
use crate::livemigration::copy::{self, CopyReport, CopyTask, IterationStatus};
use crate::livemigration::local::LocalFiles;
use crate::livemigration::peer::PeerClient;
use crate::livemigration::verify::{self, VerifyRequest};

fn ending(e: LiveMigrationError) -> Ending {
    match e {
        LiveMigrationError::Cancelled => Ending::Stopped,
        other => Ending::Failed(other.to_string()),
    }
}

/// Runs a data-copy task as the job behind `handle`.
pub async fn run_copy(handle: JobHandle, task: CopyTask) -> JobResult {
    handle.set_phase("copying");
    // The rate and ETA of the downloads, from the counters as they are published (every
    // second while downloading).
    let rate = std::sync::Mutex::new(Rate::default());
    let publish = |history: &[IterationStatus]| {
        if let Some(last) = history.last() {
            handle.set("iteration", u64::from(last.iteration));
            // The counters of this iteration; those still unknown (-1) are 0, not what the
            // iteration before left (a task would show the last one's bytes as its own).
            for (name, value) in [
                ("bytesDownloaded", last.bytes_downloaded),
                ("bytesKept", last.bytes_kept),
                ("filesDownloaded", last.files_downloaded),
                ("downloadFailures", last.download_failures),
                ("bytesToDownload", last.bytes_to_download),
                ("filesToDownload", last.files_to_download),
            ] {
                handle.set(name, u64::try_from(value).unwrap_or(0));
            }
            let speed = rate
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .sample(Instant::now(), last);
            match speed {
                Some(speed) => {
                    handle.set("bytesPerSecond", speed.bytes_per_second);
                    match speed.eta_seconds {
                        Some(eta) => handle.set("etaSeconds", eta),
                        None => handle.unset("etaSeconds"),
                    }
                }
                None => {
                    handle.unset("bytesPerSecond");
                    handle.unset("etaSeconds");
                }
            }
        }
        let report = CopyReport {
            status: history.to_vec(),
        };
        handle.set_result(serde_json::to_value(report).expect("a copy report serializes"));
    };
    let cancel = handle.cancelled().clone();
    let local = task.local.clone();
    let outcome = copy::run(task, cancel, publish).await;
    publish(&outcome.iterations);
    // An ended task shows its average rate over the time it downloaded.
    if let Some(average) = rate.lock().unwrap_or_else(|p| p.into_inner()).average() {
        handle.set("bytesPerSecond", average);
    }
    // Whatever the outcome, partial downloads go: a resumed task continues them only after a
    // restart, when the daemon stops the task to start it again.
    if !handle.shutting_down() {
        let removed = tokio::task::spawn_blocking(move || local.remove_staging())
            .await
            .unwrap_or(0);
        if removed > 0 {
            tracing::info!(task = %handle.id(), removed, "staging files of the ended data-copy task removed");
        }
    }
    match outcome.result {
        Ok(()) => end(&handle, Ending::Done("done".into())),
        Err(e) => end(&handle, ending(e)),
    }
}

/// Runs a verification task as the job behind `handle`; its report is the job's result,
/// published as its counters change. Files that differ fail the job, with the Sidecar's
/// message as its error.
pub async fn run_verify(
    handle: JobHandle,
    peer: PeerClient,
    local: Arc<LocalFiles>,
    request: VerifyRequest,
) -> JobResult {
    handle.set_phase("verifying");
    let publish = |report: &verify::VerifyReport| {
        handle.set_result(serde_json::to_value(report).expect("a report serializes"));
    };
    match verify::run(&peer, local, &request, handle.cancelled(), publish).await {
        Ok(_) => end(&handle, Ending::Done("done: all files match".into())),
        Err(e) => end(&handle, ending(e)),
    }
}
