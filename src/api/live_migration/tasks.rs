//! The destination's routes: data-copy and files-verification tasks.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::AppState;
use crate::api::body::Payload;
use crate::api::error::{ApiError, ErrorBody};
use crate::jobs::kind::JobKind;
use crate::jobs::{JobRecord, JobState};
use crate::livemigration::copy::{CopyRequest, IterationStatus, ThresholdBasis};
use crate::livemigration::kinds::VerificationKind;
use crate::livemigration::tasks::{self, DataCopyTask, VerificationTask};
use crate::livemigration::verify::VerifyRequest;

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
    crate::livemigration::log_ignored_fields(
        "POST /api/v1/live-migration/data-copy-tasks",
        request.ignored_fields(),
    );
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

/// The state of a files-verification task (Sidecar's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VerificationState {
    /// Accepted, waiting for a job slot (`jobs.max_running`).
    NotStarted,
    /// Listing and comparing.
    InProgress,
    /// Every file matched, by listing and by digest.
    Completed,
    /// Files differ (`error` says whether the lists or the digests), the task could not run,
    /// or the daemon stopped while it ran (verifications are not resumed).
    Failed,
    /// Cancelled by an operator.
    Cancelled,
}

impl VerificationState {
    /// The state a task shows, from its job's state and whether it was cancelled.
    fn of(task: &VerificationTask) -> Self {
        match task.state {
            // The Sidecar shows a cancel at once; drover's job may still be stopping.
            _ if task.cancel_requested => Self::Cancelled,
            JobState::Queued => Self::NotStarted,
            JobState::Running => Self::InProgress,
            JobState::Succeeded => Self::Completed,
            // Verifications end FAILED when files differ (the Sidecar's way); a differences
            // state would mean the same here.
            JobState::Failed | JobState::DifferencesFound | JobState::Interrupted => Self::Failed,
            JobState::Cancelled => Self::Cancelled,
        }
    }
}

/// A files-verification task: the Sidecar's `LiveMigrationFilesVerificationResponse`, in its
/// order, then drover's fields. The counters are live while the task runs.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationTaskView {
    /// Task id.
    pub id: String,
    /// As requested (its case kept).
    pub digest_algorithm: String,
    /// Where the task is.
    pub state: VerificationState,
    /// The source daemon's host.
    pub source: String,
    /// The source daemon's port.
    pub port: u16,
    /// Files and directories here that the source does not list.
    pub files_not_found_at_source: u64,
    /// Files and directories the source lists that are not here.
    pub files_not_found_at_destination: u64,
    /// Files with the same size and modification time on both sides, and directories on
    /// both sides.
    pub metadata_matched: u64,
    /// Entries whose type, size or modification time differ.
    pub metadata_mismatches: u64,
    /// Files whose digests differ.
    pub digest_mismatches: u64,
    /// Files whose digest could not be computed on one side.
    pub digest_verification_failures: u64,
    /// Files (not directories) whose digests are equal.
    pub files_matched: u64,
    /// drover: the task id again (the POST answer's name for it).
    pub task_id: String,
    /// drover: as requested.
    pub max_concurrency: Option<i64>,
    /// drover: why it failed (the Sidecar's message when files differ).
    pub error: Option<String>,
    /// drover: up to 100 differing files, with what differs.
    pub differences: Vec<String>,
}

/// `?all=true`: every task, not only the current one (drover).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VerificationListQuery {
    /// drover: every verification task, oldest first, instead of the current task only.
    #[serde(default)]
    pub all: bool,
}

fn verify_view(state: &AppState, task: VerificationTask) -> VerificationTaskView {
    let (source, port) = state.live.source_host_port();
    let view_state = VerificationState::of(&task);
    let report = task.report.unwrap_or_default();
    let request = task.request.unwrap_or_default();
    let error = task.error.or_else(|| {
        (task.state == JobState::Interrupted).then(|| {
            "the daemon stopped while the verification ran; verifications are not resumed: start a new one".to_string()
        })
    });
    VerificationTaskView {
        id: task.id.clone(),
        digest_algorithm: request.digest_algorithm.unwrap_or(report.digest_algorithm),
        state: view_state,
        source,
        port,
        files_not_found_at_source: report.files_not_found_at_source,
        files_not_found_at_destination: report.files_not_found_at_destination,
        metadata_matched: report.metadata_matched,
        metadata_mismatches: report.metadata_mismatches,
        digest_mismatches: report.digest_mismatches,
        digest_verification_failures: report.digest_verification_failures,
        files_matched: report.files_matched,
        task_id: task.id,
        max_concurrency: request.max_concurrency,
        error,
        differences: report.differences,
    }
}

/// Starts a verification task (Sidecar's algorithm): both sides' file lists are compared by
/// type, size and modification time, and only when they agree, the content digest of every
/// file. `maxConcurrency` and `digestAlgorithm` are required; fields drover does not know are
/// ignored. Refused once this node's migration is COMPLETED (400) and while a task of either
/// kind runs (409). Destination only.
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/files-verification-tasks",
    tag = "live-migration",
    request_body = VerifyRequest,
    responses(
        (status = 202, body = TaskAccepted),
        (status = 400, description = "Bad request, or this node's migration is COMPLETED", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A data-copy or verification task is running", body = ErrorBody),
    )
)]
pub async fn start_verify(
    State(state): State<AppState>,
    Payload(request): Payload<VerifyRequest>,
) -> Result<(StatusCode, Json<TaskAccepted>), ApiError> {
    let record = tasks::start_verification(&state.live, &state.jobs, request).await?;
    Ok(accepted(record))
}

/// The current verification task, as a bare array (Sidecar's): the most recent task of
/// either kind if it is a verification, else `[]`. With `?all=true` (drover), every
/// verification task, oldest first. Destination only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files-verification-tasks",
    tag = "live-migration",
    params(VerificationListQuery),
    responses((status = 200, body = Vec<VerificationTaskView>), (status = 404, body = ErrorBody))
)]
pub async fn list_verifies(
    State(state): State<AppState>,
    Query(query): Query<VerificationListQuery>,
) -> Json<Vec<VerificationTaskView>> {
    let tasks = if query.all {
        tasks::verification_tasks(&state.jobs)
    } else {
        tasks::latest_task(&state.jobs)
            .filter(|r| r.kind == VerificationKind::NAME)
            .map(VerificationTask::from_record)
            .into_iter()
            .collect()
    };
    Json(tasks.into_iter().map(|t| verify_view(&state, t)).collect())
}

/// One verification task, with its counters so far. Destination only.
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
    let task = tasks::verification_task(&state.jobs, &id)?;
    Ok(Json(verify_view(&state, task)))
}

/// Cancels a verification task (Sidecar's): a running one is stopped and answered
/// `CANCELLED`; one that has ended is answered as it is. Destination only.
#[utoipa::path(
    patch,
    path = "/api/v1/live-migration/files-verification-tasks/{taskId}",
    tag = "live-migration",
    params(("taskId" = String, Path, description = "Task id")),
    responses((status = 200, body = VerificationTaskView), (status = 404, body = ErrorBody))
)]
pub async fn cancel_verify(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<VerificationTaskView>, ApiError> {
    let task = tasks::cancel_verification(&state.jobs, &id).await?;
    Ok(Json(verify_view(&state, task)))
}
