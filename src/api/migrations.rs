//! `/api/v1/migrations`: submit, list, read and cancel migration jobs.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::jobs::{Accepted, JobView, launch_error, of_kind, submit_kept};
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
    let text = super::jobs::job_text(&headers, &body)?;
    let mut launch = job::launch(text)
        .await
        .map_err(|e| launch_error(e.is_config_problem(), format!("job config: {e}")))?;
    launch.state_dir = Some(state.config.state_dir.clone());
    submit_kept(&state, KIND, text, move |h| job::run(h, launch)).await
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
    of_kind(state, id, KIND, "migration")
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

/// A savepoint of a migration, with a summary of its progress.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavepointView {
    /// File name (`savepoint_<epochMillis>_<counter>.yaml`).
    pub name: String,
    /// Creation time, milliseconds since the epoch.
    pub epoch_millis: u64,
    /// Completed token ranges (merged intervals) recorded in it.
    pub token_ranges: usize,
    /// Share of the token ring recorded complete, 0 to 1.
    pub ring_fraction: f64,
    /// Completed DynamoDB segments recorded in it.
    pub segments: usize,
    /// Completed Parquet files recorded in it.
    pub parquet_files: usize,
}

/// Savepoints of a migration.
#[derive(Debug, Serialize, ToSchema)]
pub struct SavepointList {
    /// Directory of the savepoint files.
    pub path: Option<String>,
    /// Newest first; only those of this migration (same source, target and renames).
    pub savepoints: Vec<SavepointView>,
}

/// Lists the savepoints of a migration with their progress.
#[utoipa::path(
    get,
    path = "/api/v1/migrations/{id}/savepoints",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, body = SavepointList), (status = 404, body = ErrorBody))
)]
pub async fn savepoints(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SavepointList>, ApiError> {
    use crate::savepoints::{FileStore, Progress, SavepointStore, identity};
    let record = migration(&state, &id)?;
    let Some(path) = record
        .spec
        .pointer("/savepoints/path")
        .and_then(|p| p.as_str())
        .map(str::to_string)
    else {
        return Ok(Json(SavepointList {
            path: None,
            savepoints: vec![],
        }));
    };
    let wanted = identity(&record.spec);
    let dir = std::path::PathBuf::from(&path);
    let views = tokio::task::spawn_blocking(
        move || -> Result<Vec<SavepointView>, crate::savepoints::SavepointError> {
            if !dir.is_dir() {
                return Ok(vec![]);
            }
            let store = FileStore::reader(&dir);
            let mut out = Vec::new();
            for info in store.list()? {
                let Ok(sp) = store.read(&info) else { continue };
                if identity(&sp.document) != wanted {
                    continue;
                }
                let Ok(p) = Progress::from_document(&sp.document) else {
                    continue;
                };
                out.push(SavepointView {
                    name: info.name,
                    epoch_millis: info.epoch_millis,
                    token_ranges: p.token_ranges.ranges().len(),
                    ring_fraction: p.token_ranges.width() as f64
                        / crate::savepoints::ranges::TokenRange::FULL.width() as f64,
                    segments: p.segments.len(),
                    parquet_files: p.parquet_files.len(),
                });
            }
            Ok(out)
        },
    )
    .await
    .expect("listing savepoints does not panic")
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(Json(SavepointList {
        path: Some(path),
        savepoints: views,
    }))
}

/// Resumes an `INTERRUPTED` migration (one the daemon did not resume by itself, or whose
/// resume failed): it continues from its newest savepoint.
#[utoipa::path(
    post,
    path = "/api/v1/migrations/{id}/resume",
    tag = "migrations",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 202, body = JobView),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The job is not INTERRUPTED", body = ErrorBody),
        (status = 502, description = "A database could not be reached", body = ErrorBody),
    )
)]
pub async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let record = migration(&state, &id)?;
    if record.state != crate::jobs::JobState::Interrupted {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "migration {id} is {}: resume needs INTERRUPTED",
                record.state
            ),
        ));
    }
    let resumed = job::resume(&state.jobs, &state.config.state_dir, &id)
        .await
        .map_err(|e| match e {
            crate::jobs::kept::ResumeError::Jobs(e) => ApiError::from(e),
            crate::jobs::kept::ResumeError::NoJobFile(m) => ApiError::new(StatusCode::CONFLICT, m),
            crate::jobs::kept::ResumeError::Launch {
                message,
                config_problem,
            } => launch_error(config_problem, message),
        })?;
    Ok((StatusCode::ACCEPTED, Json(resumed.into())))
}
