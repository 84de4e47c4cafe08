//! `POST /api/v1/diagnostics/jobs`: a job that only waits, enabled by `server.diagnostics`.
//!
//! It lets an operator (and the test suite) see the job lifecycle of a deployment — queueing,
//! progress, cancellation, shutdown, `INTERRUPTED` after a crash — without touching any data.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::body::Payload;
use super::error::{ApiError, ErrorBody};
use super::jobs::Accepted;
use crate::jobs::{JobFailure, JobHandle};

/// The longest diagnostic job accepted.
const MAX_SECONDS: u64 = 86_400;

/// A diagnostic job.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DiagnosticJob {
    /// How long the job runs, 1 to 86400 seconds. It counts `secondsElapsed` as it goes.
    pub duration_seconds: u64,
    /// When set, the job ends `FAILED` with this message instead of `SUCCEEDED`.
    pub fail_with: Option<String>,
}

/// Starts a diagnostic job (only when `server.diagnostics` is true; otherwise 404).
#[utoipa::path(
    post,
    path = "/api/v1/diagnostics/jobs",
    tag = "diagnostics",
    request_body(content = DiagnosticJob, content_type = "application/json"),
    responses(
        (status = 202, body = Accepted),
        (status = 400, body = ErrorBody),
        (status = 404, description = "Diagnostics are disabled", body = ErrorBody),
    )
)]
pub async fn submit(
    State(state): State<AppState>,
    Payload(job): Payload<DiagnosticJob>,
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    if !state.config.server.diagnostics {
        return Err(ApiError::not_found(
            "diagnostic jobs are disabled (server.diagnostics: false)",
        ));
    }
    if !(1..=MAX_SECONDS).contains(&job.duration_seconds) {
        return Err(ApiError::bad_request(format!(
            "body: durationSeconds: must be between 1 and {MAX_SECONDS}, got {}",
            job.duration_seconds
        )));
    }
    let spec = serde_json::to_value(&job).expect("diagnostic jobs serialize");
    let record = state
        .jobs
        .submit("diagnostic", spec, move |h| run(h, job))
        .await?;
    Ok((StatusCode::ACCEPTED, Json(record.into())))
}

async fn run(handle: JobHandle, job: DiagnosticJob) -> Result<(), JobFailure> {
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
