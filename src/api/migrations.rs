//! `/api/v1/migrations`: submit, list, read and cancel migration jobs.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::jobs::{Accepted, JobView, KindId, cancel_of, get_of, list_of, resume_of, submit_file};
use crate::migrate::kind::MigrationJob;
use crate::migrate::saved::SavepointList;

/// Migrations, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct MigrationList {
    /// Every migration job.
    pub migrations: Vec<JobView>,
}

/// Submits a migration. The body is a ScyllaDB Migrator job file, as YAML
/// (`application/yaml`) or JSON. It is checked completely (keys, both clusters reachable,
/// keyspaces and tables present, target schema able to hold every source column after
/// `renames`) before the job is accepted; nothing is written when it is refused.
#[utoipa::path(
    post,
    path = "/api/v1/migrations",
    tag = "migrations",
    request_body(
        description = "Job config (ScyllaDB Migrator format), as YAML or JSON",
        content((Object = "application/yaml"), (Object = "application/json"))
    ),
    responses(
        (status = 202, description = "Accepted; poll statusUrl", body = Accepted),
        (status = 400, description = "The job config or the schemas are invalid", body = ErrorBody),
        (status = 409, description = "Another run of the job holds its savepoints (directory, bucket folder or table), or its newest savepoint already records every unit as done (the message names it; submit with `savepoints.autoResume: false` to copy everything again)", body = ErrorBody),
        (status = 502, description = "A database could not be reached", body = ErrorBody),
    )
)]
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    super::body::RawBody(body): super::body::RawBody,
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    submit_file::<MigrationJob>(&state, &headers, &body).await
}

/// Lists migrations.
#[utoipa::path(
    get,
    path = "/api/v1/migrations",
    tag = "migrations",
    responses((status = 200, body = MigrationList))
)]
pub async fn list(State(state): State<AppState>) -> Json<MigrationList> {
    Json(MigrationList {
        migrations: list_of::<MigrationJob>(&state),
    })
}

/// One migration: state, phase (`copying`, `streaming`, `waiting: <why>`, ...), and progress
/// counters (`unitsTotal`, `unitsDone`, `unitsSkipped`, `rowsRead`, `rowsWritten`, `bytesRead`,
/// `bytesWritten`, `rowsTotalEstimate`, `bytesTotalEstimate`, `progressPermille` (rows handled
/// of the estimate, in thousandths: the share every screen shows), `rowsPerSecond` and
/// `bytesPerSecond` (over the last 30 s; the run's average once ended), `etaSeconds`,
/// `retries`, and the connector's own, such as DynamoDB's `itemsExpired`,
/// `readCapacityUnits`, `streamRecordsRead` and `streamLagSeconds`).
#[utoipa::path(
    get,
    path = "/api/v1/migrations/{id}",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 200, body = JobView),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    KindId { id, .. }: KindId<MigrationJob>,
) -> Result<Json<JobView>, ApiError> {
    get_of::<MigrationJob>(&state, &id)
}

/// Stops a migration: no new reads or writes start, writes in flight finish, and the job ends
/// `CANCELLED` (for a stream replication, the cut-over: its positions are saved). Units not completely written are not recorded as done.
#[utoipa::path(
    post,
    path = "/api/v1/migrations/{id}/cancel",
    tag = "migrations",
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
    KindId { id, .. }: KindId<MigrationJob>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    cancel_of::<MigrationJob>(&state, &id)
}

/// Lists the savepoints of a migration with their progress.
#[utoipa::path(
    get,
    path = "/api/v1/migrations/{id}/savepoints",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 200, body = SavepointList),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 502, description = "The bucket or table of the savepoints cannot be read", body = ErrorBody)
    )
)]
pub async fn savepoints(
    State(state): State<AppState>,
    KindId { id, .. }: KindId<MigrationJob>,
) -> Result<Json<SavepointList>, ApiError> {
    let record = state.jobs.get_kind::<MigrationJob>(&id)?;
    let job_file = crate::jobs::kept::read_job_file(&state.config.state_dir, &id).ok();
    Ok(Json(
        crate::migrate::saved::list(&record.spec, job_file).await?,
    ))
}

/// Resumes an `INTERRUPTED` migration (one the daemon did not resume by itself, or whose
/// resume failed) or a `CANCELLED` one: it continues, under the same id, from its newest
/// savepoint.
#[utoipa::path(
    post,
    path = "/api/v1/migrations/{id}/resume",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 202, body = JobView),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The job is not INTERRUPTED or CANCELLED", body = ErrorBody),
        (status = 502, description = "A database could not be reached", body = ErrorBody),
    )
)]
pub async fn resume(
    State(state): State<AppState>,
    KindId { id, .. }: KindId<MigrationJob>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    resume_of::<MigrationJob>(&state, &id).await
}
