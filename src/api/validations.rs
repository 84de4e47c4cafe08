//! `/api/v1/validations`: compare a migration's target with its source, as a job.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::jobs::{Accepted, JobView, KindId, cancel_of, get_of, list_of, submit_file};
use crate::validate::kind::ValidationJob;
use crate::validate::report::Report;

/// Validations, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ValidationList {
    /// Every validation job.
    pub validations: Vec<JobView>,
}

/// Starts a validation. The body is the migration's job file (ScyllaDB Migrator format, YAML
/// or JSON); its `validation` section tunes the comparison (`compareTimestamps`,
/// `ttlToleranceMillis`, `writetimeToleranceMillis`, `failuresToFetch`,
/// `floatingPointTolerance`, `timestampMsTolerance`, `copyMissingRows`). It is checked
/// completely before the job is accepted.
#[utoipa::path(
    post,
    path = "/api/v1/validations",
    tag = "validations",
    request_body(
        description = "Job config (ScyllaDB Migrator format), as YAML or JSON",
        content((Object = "application/yaml"), (Object = "application/json"))
    ),
    responses(
        (status = 202, description = "Accepted; poll statusUrl", body = Accepted),
        (status = 400, description = "The job config or the schemas are invalid", body = ErrorBody),
        (status = 409, description = "Another run of the job holds its savepoints (directory, bucket folder or table)", body = ErrorBody),
        (status = 502, description = "A database could not be reached", body = ErrorBody),
    )
)]
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    super::body::RawBody(body): super::body::RawBody,
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    submit_file::<ValidationJob>(&state, &headers, &body).await
}

/// Lists validations.
#[utoipa::path(
    get,
    path = "/api/v1/validations",
    tag = "validations",
    responses((status = 200, body = ValidationList))
)]
pub async fn list(State(state): State<AppState>) -> Json<ValidationList> {
    Json(ValidationList {
        validations: list_of::<ValidationJob>(&state),
    })
}

/// One validation: state, phase (`comparing`, `done: no differences in N rows`,
/// `done: K of N rows differ`, ...), progress counters (`unitsTotal`, `unitsDone`,
/// `sourceRows`, `targetRows`, `rowsWithDifferences`, `rowsCopied`, `rowsPerSecond`, ...) and
/// `result`, the report (a [`Report`]; while running, the findings so far). A validation that
/// ran to the end is `SUCCEEDED` when the target holds exactly the source's rows, and
/// `DIFFERENCES_FOUND` when rows are missing, extra or different (`result.rowsWithDifferences`
/// counts them).
#[utoipa::path(
    get,
    path = "/api/v1/validations/{id}",
    tag = "validations",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 200, body = JobView),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    KindId { id, .. }: KindId<ValidationJob>,
) -> Result<Json<JobView>, ApiError> {
    get_of::<ValidationJob>(&state, &id)
}

/// The report of a validation alone (its findings so far while it runs).
#[utoipa::path(
    get,
    path = "/api/v1/validations/{id}/report",
    tag = "validations",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 200, body = Report),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, description = "No such validation, or it has not started", body = ErrorBody),
    )
)]
pub async fn report(
    State(state): State<AppState>,
    KindId { id, .. }: KindId<ValidationJob>,
) -> Result<Json<serde_json::Value>, ApiError> {
    state
        .jobs
        .get_kind::<ValidationJob>(&id)?
        .result
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("validation {id} has no report yet")))
}

/// Stops a validation: reads in flight finish, the ranges compared completely are saved (with
/// `savepoints`) and the job ends `CANCELLED` with the report of what was compared.
#[utoipa::path(
    post,
    path = "/api/v1/validations/{id}/cancel",
    tag = "validations",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 202, body = JobView),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The job has already ended", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    KindId { id, .. }: KindId<ValidationJob>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    cancel_of::<ValidationJob>(&state, &id)
}
