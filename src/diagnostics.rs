//! Diagnostic jobs: jobs that only wait, enabled by `server.diagnostics`.
//!
//! They let an operator (and the test suite) see the job lifecycle of a deployment — queueing,
//! progress, cancellation, shutdown, `INTERRUPTED` after a crash — without touching any data.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::jobs::kind::JobKind;
use crate::jobs::{JobError, JobFailure, JobHandle, JobRecord, JobRegistry, JobResult};

/// The longest diagnostic job accepted.
const MAX_SECONDS: u64 = 86_400;

/// The longest `failWith` accepted, in bytes: it is stored with the job and shown in every
/// list of jobs, so it is bounded like every other value the daemon echoes.
pub const MAX_FAIL_WITH: usize = 1024;

/// Why a diagnostic job was refused.
#[derive(Debug, thiserror::Error)]
pub enum DiagnosticError {
    /// `server.diagnostics` is off.
    #[error("diagnostic jobs are disabled (server.diagnostics: false)")]
    Disabled,
    /// The duration is out of bounds.
    #[error("durationSeconds: must be between 1 and {MAX_SECONDS}, got {0}")]
    Duration(u64),
    /// `failWith` is too long.
    #[error("failWith: at most {MAX_FAIL_WITH} bytes, got {0}")]
    FailWith(usize),
    /// The registry refused the job.
    #[error(transparent)]
    Jobs(#[from] JobError),
}

/// A diagnostic job.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DiagnosticJob {
    /// How long the job runs, 1 to 86400 seconds. It counts `secondsElapsed` as it goes.
    pub duration_seconds: u64,
    /// When set, the job ends `FAILED` with this message instead of `SUCCEEDED`. At most 1024
    /// bytes.
    pub fail_with: Option<String>,
}

/// The diagnostic kind.
pub struct Diagnostic;

impl JobKind for Diagnostic {
    const NAME: &'static str = "diagnostic";
    const NOUN: &'static str = "diagnostic job";
    type Spec = DiagnosticJob;
    /// A diagnostic job produces nothing.
    type Output = ();
    type Launch = DiagnosticJob;

    fn run(handle: JobHandle, job: DiagnosticJob) -> impl Future<Output = JobResult> + Send {
        run(handle, job)
    }

    /// Called after what it does: `diagnostic: wait 30s` (`, then fail` with `failWith`).
    fn identity(job: &DiagnosticJob, _launch: &DiagnosticJob) -> crate::jobs::Identity {
        let fails = if job.fail_with.is_some() {
            ", then fail"
        } else {
            ""
        };
        crate::jobs::Identity::named(&format!(
            "diagnostic: wait {}{fails}",
            humantime::format_duration(Duration::from_secs(job.duration_seconds))
        ))
    }
}

/// Starts a diagnostic job when `enabled` (`server.diagnostics`).
pub async fn submit(
    jobs: &JobRegistry,
    enabled: bool,
    job: DiagnosticJob,
) -> Result<JobRecord, DiagnosticError> {
    if !enabled {
        return Err(DiagnosticError::Disabled);
    }
    if !(1..=MAX_SECONDS).contains(&job.duration_seconds) {
        return Err(DiagnosticError::Duration(job.duration_seconds));
    }
    if let Some(message) = &job.fail_with
        && message.len() > MAX_FAIL_WITH
    {
        return Err(DiagnosticError::FailWith(message.len()));
    }
    Ok(jobs
        .submit_kind::<Diagnostic>(None, &job, job.clone())
        .await?)
}

async fn run(handle: JobHandle, job: DiagnosticJob) -> JobResult {
    handle.set_phase("waiting");
    handle.set("secondsTotal", job.duration_seconds);
    for _ in 0..job.duration_seconds {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => handle.add("secondsElapsed", 1),
            _ = handle.cancelled().cancelled() => return Err(JobFailure::Stopped),
        }
    }
    match job.fail_with {
        Some(message) => Err(JobFailure::Error(message)),
        None => Ok(()),
    }
}
