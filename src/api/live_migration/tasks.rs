//! The destination's routes: data-copy and files-verification tasks.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::AppState;
use crate::api::body::Payload;
use crate::api::error::{ApiError, ErrorBody};
use crate::jobs::JobRecord;
use crate::livemigration::copy::{CopyRequest, IterationStatus, ThresholdBasis};
use crate::livemigration::tasks::{self, DataCopyTask, VerificationTask};
use crate::livemigration::verify::{VerifyReport, VerifyRequest};

/// The answer to a task submission (Sidecar's).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskAccepted {
    /// The task's id.
    pub task_id: String,
    /// Where to poll it.
    pub status_url: String,
}

/// A data-copy task: the Sidecar's fields, in its order, then drover's.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataCopyTaskView {
    /// Task id.
    pub task_id: String,
    /// The source daemon's host.
    pub source: String,
    /// The source daemon's port.
    pub port: u16,
    /// As requested.
    pub max_iterations: u32,
    /// As requested.
    pub success_threshold: f64,
    /// As requested.
    pub max_concurrency: usize,
    /// One entry per iteration, oldest first; the last one's state is the task's, as the
    /// Sidecar reports it.
    pub status: Vec<IterationStatus>,
    /// drover: the task's job state (`QUEUED`, `RUNNING`, `SUCCEEDED`, `FAILED`,
    /// `CANCELLED`, `INTERRUPTED`).
    pub state: String,
    /// drover: why it failed.
    pub error: Option<String>,
    /// drover: digest checked on each download.
    pub verify_digest: Option<String>,
    /// drover: bandwidth limit.
    pub max_bytes_per_second: Option<u64>,
    /// drover: whether the task may delete more than `live_migration.max_delete_share` of the
    /// destination's files.
    pub allow_mass_deletion: bool,
    /// drover: what `successThreshold` is a share of (`bytes` or `files`).
    pub threshold_basis: ThresholdBasis,
}

/// Options of the data-copy task list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CopyListQuery {
    /// drover: every data-copy task this daemon keeps, oldest first, instead of the Sidecar's
    /// current task only.
    #[serde(default)]
    pub all: bool,
}

fn copy_view(state: &AppState, task: DataCopyTask) -> DataCopyTaskView {
    let (source, port) = state.live.source_host_port();
    let request = task.request.as_ref();
    DataCopyTaskView {
        task_id: task.id,
        source,
        port,
        max_iterations: request.map_or(0, |q| q.max_iterations),
        success_threshold: request.map_or(0.0, |q| q.success_threshold),
        max_concurrency: request.map_or(0, |q| q.max_concurrency),
        status: task.iterations,
        state: task.state.to_string(),
        error: task.error,
        verify_digest: request.and_then(|q| q.verify_digest.clone()),
        max_bytes_per_second: request.and_then(|q| q.max_bytes_per_second),
        allow_mass_deletion: request.is_some_and(|q| q.allow_mass_deletion),
        threshold_basis: request.map_or(ThresholdBasis::default(), |q| q.threshold_basis),
    }
}

fn accepted(record: JobRecord) -> (StatusCode, Json<TaskAccepted>) {
    (
        StatusCode::ACCEPTED,
        Json(TaskAccepted {
            status_url: crate::api::jobs::status_url(&record.kind, &record.id),
            task_id: record.id,
        }),
    )
}

/// Starts a data-copy task: the destination pulls the source's files in iterations until
/// the share of the source's bytes already identical is above `successThreshold` (of its
/// files with `"thresholdBasis": "files"`), or nothing is left (see the docs for the
/// iteration rules). Fields it does not know are ignored (and logged). Refused while the local
/// Cassandra answers on its native port or, when `cassandra.jmx_address` is set, its JMX port
/// (400), and while another task runs (409). Destination only.
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/data-copy-tasks",
    tag = "live-migration",
    request_body = CopyRequest,
    responses(
        (status = 202, body = TaskAccepted),
        (status = 400, description = "Bad request, or the local Cassandra is running", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A data-copy task is already running", body = ErrorBody),
    )
)]
pub async fn start_copy(
    State(state): State<AppState>,
    Payload(request): Payload<CopyRequest>,
) -> Result<(StatusCode, Json<TaskAccepted>), ApiError> {
    for field in request.ignored_fields() {
        tracing::warn!(field, "data-copy task request: unknown field ignored");
    }
    let record = tasks::start_copy(&state.live, &state.jobs, &state.node, request).await?;
    Ok(accepted(record))
}

/// The current data-copy task, as the Sidecar lists it: a bare array holding the most recent
/// live-migration task when it is a data-copy task (`[]` when there is none, or when the most
/// recent task is a verification: the Sidecar keeps one task of either kind). With
/// `?all=true` (drover), every data-copy task kept, oldest first. Destination only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/data-copy-tasks",
    tag = "live-migration",
    params(CopyListQuery),
    responses((status = 200, body = Vec<DataCopyTaskView>), (status = 404, body = ErrorBody))
)]
pub async fn list_copies(
    State(state): State<AppState>,
    Query(query): Query<CopyListQuery>,
) -> Json<Vec<DataCopyTaskView>> {
    let tasks = if query.all {
        tasks::copy_tasks(&state.jobs)
    } else {
        tasks::current_copy_task(&state.jobs).into_iter().collect()
    };
    Json(tasks.into_iter().map(|t| copy_view(&state, t)).collect())
}

/// One data-copy task, with the status of each iteration; older tasks than the current one
/// too (drover). Destination only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/data-copy-tasks/{taskId}",
    tag = "live-migration",
    params(("taskId" = String, Path, description = "Task id")),
    responses((status = 200, body = DataCopyTaskView), (status = 404, body = ErrorBody))
)]
pub async fn get_copy(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<DataCopyTaskView>, ApiError> {
    let task = tasks::copy_task(&state.jobs, &id)?;
    Ok(Json(copy_view(&state, task)))
}

/// Cancels a data-copy task: running downloads stop at once and their staging files are
/// removed; the answer shows the last iteration `CANCELLED`. A task that has ended is
/// answered as it is (200), as the Sidecar does. Destination only.
#[utoipa::path(
    patch,
    path = "/api/v1/live-migration/data-copy-tasks/{taskId}",
    tag = "live-migration",
    params(("taskId" = String, Path, description = "Task id")),
    responses(
        (status = 200, body = DataCopyTaskView),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn cancel_copy(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<DataCopyTaskView>, ApiError> {
    let task = tasks::cancel_copy(&state.jobs, &id).await?;
    Ok(Json(copy_view(&state, task)))
}

/// A files-verification task.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationTaskView {
    /// Task id.
    pub task_id: String,
    /// The job state (`RUNNING`, `SUCCEEDED`, ...).
    pub state: String,
    /// Why it failed.
    pub error: Option<String>,
    /// What it found (once done).
    #[serde(flatten)]
    pub report: Option<VerifyReport>,
}

/// Verification tasks, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct VerificationTaskList {
    /// Every task.
    pub tasks: Vec<VerificationTaskView>,
}

fn verify_view(task: VerificationTask) -> VerificationTaskView {
    VerificationTaskView {
        task_id: task.id,
        state: task.state.to_string(),
        error: task.error,
        report: task.report,
    }
}

/// Starts a verification task: both sides' file lists are compared (type, size), then the
/// content digest of every file present on both. Destination only.
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/files-verification-tasks",
    tag = "live-migration",
    request_body = VerifyRequest,
    responses((status = 202, body = TaskAccepted), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn start_verify(
    State(state): State<AppState>,
    Payload(request): Payload<VerifyRequest>,
) -> Result<(StatusCode, Json<TaskAccepted>), ApiError> {
    let record = tasks::start_verification(&state.live, &state.jobs, request).await?;
    Ok(accepted(record))
}

/// Lists verification tasks. Destination only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files-verification-tasks",
    tag = "live-migration",
    responses((status = 200, body = VerificationTaskList), (status = 404, body = ErrorBody))
)]
pub async fn list_verifies(State(state): State<AppState>) -> Json<VerificationTaskList> {
    Json(VerificationTaskList {
        tasks: tasks::verification_tasks(&state.jobs)
            .into_iter()
            .map(verify_view)
            .collect(),
    })
}

/// One verification task and, once done, what it found. Destination only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files-verification-tasks/{taskId}",
    tag = "live-migration",
    params(("taskId" = String, Path, description = "Task id")),
    responses((status = 200, body = VerificationTaskView), (status = 404, body = ErrorBody))
)]
pub async fn get_verify(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<VerificationTaskView>, ApiError> {
    Ok(Json(verify_view(tasks::verification_task(
        &state.jobs,
        &id,
    )?)))
}

/// Cancels a verification task. Destination only.
#[utoipa::path(
    patch,
    path = "/api/v1/live-migration/files-verification-tasks/{taskId}",
    tag = "live-migration",
    params(("taskId" = String, Path, description = "Task id")),
    responses(
        (status = 200, body = VerificationTaskView),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The task has already ended", body = ErrorBody),
    )
)]
pub async fn cancel_verify(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<VerificationTaskView>, ApiError> {
    Ok(Json(verify_view(tasks::cancel_verification(
        &state.jobs,
        &id,
    )?)))
}
