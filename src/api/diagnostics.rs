//! `POST /api/v1/diagnostics/jobs`: a job that only waits, enabled by `server.diagnostics`
//! (the job itself is in [`crate::diagnostics`]).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::AppState;
use super::body::Payload;
use super::error::{ApiError, ErrorBody};
use super::jobs::Accepted;
use crate::diagnostics::{self, DiagnosticJob};

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
    let record = diagnostics::submit(&state.jobs, state.config.server.diagnostics, job).await?;
    Ok((StatusCode::ACCEPTED, Json(record.into())))
}
