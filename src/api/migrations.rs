//! `/api/v1/migrations`: submit, list, read and cancel migration jobs.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::jobs::{Accepted, JobView};
use crate::migrate::config::redacted_json;
use crate::migrate::job::{self, KIND};

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
    request_body(content = String, description = "Job config (ScyllaDB Migrator format)", content_type = "application/yaml"),
    responses(
        (status = 202, description = "Accepted; poll statusUrl", body = Accepted),
        (status = 400, description = "The job config or the schemas are invalid", body = ErrorBody),
        (status = 502, description = "A database could not be reached", body = ErrorBody),
    )
)]
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/yaml");
    let media = media.split(';').next().unwrap_or("").trim();
    if !matches!(
        media,
        "application/yaml"
            | "application/x-yaml"
            | "text/yaml"
            | "text/x-yaml"
            | "application/json"
            | ""
    ) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "unsupported Content-Type {media:?}, expected application/yaml or application/json"
            ),
        ));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|e| ApiError::bad_request(format!("job config: not UTF-8: {e}")))?;
    let launch = job::launch(text).await.map_err(|e| {
        let status = if e.is_config_problem() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::BAD_GATEWAY
        };
        ApiError::new(status, format!("job config: {e}"))
    })?;
    let record = state
        .jobs
        .submit(KIND, redacted_json(text), move |h| job::run(h, launch))
        .await?;
    Ok((StatusCode::ACCEPTED, Json(record.into())))
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
        migrations: state
            .jobs
            .list(Some(KIND))
            .into_iter()
            .map(JobView::from)
            .collect(),
    })
}

fn migration(state: &AppState, id: &str) -> Result<crate::jobs::JobRecord, ApiError> {
    let record = state.jobs.get(id)?;
    if record.kind != KIND {
        return Err(ApiError::not_found(format!("no migration with id {id:?}")));
    }
    Ok(record)
}

/// One migration: state, phase (`copying`, `waiting: <why>`, ...), and progress counters
/// (`unitsTotal`, `unitsDone`, `unitsSkipped`, `rowsRead`, `rowsWritten`, `bytesRead`,
/// `bytesWritten`, `rowsPerSecond`, `bytesPerSecond`, `etaSeconds`, `retries`, ...).
#[utoipa::path(
    get,
    path = "/api/v1/migrations/{id}",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, body = JobView), (status = 404, body = ErrorBody))
)]
pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(migration(&state, &id)?.into()))
}

/// Stops a migration: no new reads or writes start, writes in flight finish, and the job ends
/// `CANCELLED`. Units not completely written are not recorded as done.
#[utoipa::path(
    post,
    path = "/api/v1/migrations/{id}/cancel",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 202, body = JobView),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The job has already ended", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    migration(&state, &id)?;
    Ok((StatusCode::ACCEPTED, Json(state.jobs.cancel(&id)?.into())))
}
