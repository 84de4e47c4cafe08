//! `/api/v1/live-migration`: Cassandra Sidecar's live instance migration routes (same paths,
//! JSON field names and states), behind a filter that hides them unless live migration is
//! enabled and this node has the role a route needs.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use crate::config::Role;
use crate::jobs::kind::{JobKind, output_of, spec_of};
use crate::livemigration::copy::{self, CopyRequest};
use crate::livemigration::digest::{self, Algorithm};
use crate::livemigration::files::{self, PathError};
use crate::livemigration::kinds::{DataCopyTask, Verification, VerificationTask};
use crate::livemigration::range::{self, RangeRequest};
use crate::livemigration::tasks;
use crate::livemigration::verify::{VerifyReport, VerifyRequest};
use crate::livemigration::{LiveMigrationError, MigrationState, Status};

const PREFIX: &str = "/api/v1/live-migration";

/// Which role a live-migration path needs: `Some(true)` a source, `Some(false)` a
/// destination, `None` either.
fn needs_source(path: &str) -> Option<bool> {
    let rest = path.strip_prefix(PREFIX)?;
    // `/files-digest` answers on both sides: a destination compares its own with its source's.
    if rest == "/files" || rest.starts_with("/files/") {
        Some(true)
    } else if rest.starts_with("/data-copy-tasks") || rest.starts_with("/files-verification-tasks")
    {
        Some(false)
    } else {
        None
    }
}

/// The request filter: every live-migration route answers 404 unless live migration is
/// enabled and this node is in `migration_map` with the route's role. Authentication, when it
/// comes, sits in front of this layer.
pub async fn filter(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if !path.starts_with(PREFIX) {
        return next.run(request).await;
    }
    let live = &state.live;
    let allowed = live.enabled()
        && match (&live.role, needs_source(path)) {
            (Role::None, _) => false,
            (_, None) => true,
            (Role::Source { .. }, Some(source)) => source,
            (Role::Destination { .. }, Some(source)) => !source,
        };
    if allowed {
        next.run(request).await
    } else {
        ApiError::not_found(format!(
            "{path}: live migration is not enabled on this node, or this node is not a {} in live_migration.migration_map",
            match needs_source(path) {
                Some(true) => "source",
                Some(false) => "destination",
                None => "source or destination",
            }
        ))
        .into_response()
    }
}

fn state_error(e: LiveMigrationError) -> ApiError {
    match e {
        LiveMigrationError::Conflict(m) => ApiError::bad_request(m),
        other => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

/// One file or directory of the node.
#[derive(Debug, Serialize, Deserialize, ToSchema, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// Where to download it: `/api/v1/live-migration/files/{dirType}/{dirIndex}/{path}`.
    pub file_url: String,
    /// Bytes (0 for a directory).
    pub size: u64,
    /// `FILE` or `DIRECTORY`.
    pub file_type: String,
    /// Last modification, milliseconds since the epoch.
    pub last_modified_time: u64,
}

/// The files of the node.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileList {
    /// Sum of the files' sizes.
    pub total_size: u64,
    /// Every file and directory, minus exclusions.
    pub files: Vec<FileInfo>,
}

async fn listing(state: &AppState) -> Result<Vec<files::Entry>, ApiError> {
    let live = state.live.clone();
    tokio::task::spawn_blocking(move || files::list(&live.roots, &live.exclusions))
        .await
        .expect("listing does not panic")
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot list the node's files: {e}"),
            )
        })
}

/// Lists every file and directory of the node's configured directories (`data` with an index
/// per data directory, `commitlog`, `hints`, `saved_caches`, `cdc_raw`, `local_system_data`),
/// minus exclusions (snapshots and backups always). Source only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files",
    tag = "live-migration",
    responses((status = 200, body = FileList), (status = 404, description = "Not a source, or live migration off", body = ErrorBody))
)]
pub async fn list(State(state): State<AppState>) -> Result<Json<FileList>, ApiError> {
    let entries = listing(&state).await?;
    Ok(Json(FileList {
        total_size: entries.iter().map(|e| e.size).sum(),
        files: entries
            .iter()
            .map(|e| FileInfo {
                file_url: e.url(),
                size: e.size,
                file_type: if e.is_dir { "DIRECTORY" } else { "FILE" }.into(),
                last_modified_time: e.modified_ms,
            })
            .collect(),
    }))
}

/// `?digestAlgorithm=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DigestQuery {
    /// `sha256`, `xxh3`, `md5` or `xxhash32`: answer the file's digest instead of its bytes.
    #[param(value_type = Option<Algorithm>, inline)]
    pub digest_algorithm: Option<String>,
}

/// A digest.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DigestResponse {
    /// Lower-case hex.
    pub digest: String,
    /// The algorithm.
    pub digest_algorithm: String,
}

fn algorithm(q: &DigestQuery) -> Result<Option<Algorithm>, ApiError> {
    q.digest_algorithm
        .as_deref()
        .map(|a| a.parse::<Algorithm>())
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("digestAlgorithm: {e}")))
}

/// Streams one file of the node, or its digest with `?digestAlgorithm=`. A single `Range`
/// (`bytes=a-b`, `bytes=a-`, `bytes=-n`) gets 206, an unsatisfiable one 416. Source only;
/// refused once the migration is COMPLETED.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files/{dirType}/{dirIndex}/{*path}",
    tag = "live-migration",
    params(
        ("dirType" = String, Path, description = "data, commitlog, hints, saved_caches, cdc_raw or local_system_data"),
        ("dirIndex" = usize, Path, description = "Index of the directory among those of its type"),
        ("path" = String, Path, description = "Path below the directory"),
        ("Range" = Option<String>, Header, description = "One byte range"),
        DigestQuery,
    ),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The range", content_type = "application/octet-stream"),
        (status = 400, description = "Bad type, index or path (`..`, absolute)", body = ErrorBody),
        (status = 403, description = "The path leads outside its directory", body = ErrorBody),
        (status = 404, description = "Missing or excluded", body = ErrorBody),
        (status = 409, description = "The migration is COMPLETED", body = ErrorBody),
        (status = 416, description = "Range not satisfiable", body = ErrorBody),
        (status = 503, description = "Too many file requests at once; see Retry-After", body = ErrorBody),
    )
)]
pub async fn file(
    State(state): State<AppState>,
    Path((dir_type, dir_index, path)): Path<(String, String, String)>,
    Query(query): Query<DigestQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let algorithm = algorithm(&query)?;
    let live = state.live.clone();
    if live.status().state == MigrationState::Completed {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the live migration of this node is COMPLETED: no more files are served (DELETE /api/v1/live-migration/status to serve them again)",
        ));
    }
    let Ok(permit) = live.file_requests.clone().try_acquire_owned() else {
        let mut response = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "more than {} file requests at once (live_migration.max_concurrent_file_requests); retry later",
                live.config.max_concurrent_file_requests
            ),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return Ok(response);
    };
    let resolved = {
        let live = live.clone();
        tokio::task::spawn_blocking(move || {
            files::resolve(&live.roots, &live.exclusions, &dir_type, &dir_index, &path)
        })
        .await
        .expect("resolving does not panic")
    };
    let real = resolved.map_err(|e| match e {
        PathError::Invalid(m) => ApiError::bad_request(m),
        PathError::Outside(m) => ApiError::new(StatusCode::FORBIDDEN, m),
        PathError::NotFound(m) => ApiError::not_found(m),
    })?;
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ApiError::not_found("the file vanished (compacted away?)")
        } else {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the file: {e}"),
            )
        }
    };
    if let Some(algorithm) = algorithm {
        let digest = tokio::task::spawn_blocking(move || {
            let d = digest::of_file(&real, algorithm);
            drop(permit);
            d
        })
        .await
        .expect("hashing does not panic")
        .map_err(io)?;
        return Ok(Json(DigestResponse {
            digest,
            digest_algorithm: algorithm.name().into(),
        })
        .into_response());
    }
    let mut file = tokio::fs::File::open(&real).await.map_err(io)?;
    let len = file.metadata().await.map_err(io)?.len();
    let wanted = range::parse(
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        len,
    );
    let (status, start, count) = match wanted {
        RangeRequest::Whole => (StatusCode::OK, 0, len),
        RangeRequest::Part { start, end } => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
        RangeRequest::Unsatisfiable => {
            let mut response = ApiError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                format!("the range lies outside the file ({len} bytes)"),
            )
            .into_response();
            response.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{len}")).expect("ascii"),
            );
            return Ok(response);
        }
    };
    if start > 0 {
        use tokio::io::AsyncSeekExt;
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(io)?;
    }
    use tokio::io::AsyncReadExt;
    let stream = tokio_util::io::ReaderStream::with_capacity(file.take(count), 256 * 1024);
    // The permit lives as long as the body is being sent.
    let body = Body::from_stream(futures::StreamExt::map(stream, move |chunk| {
        let _held = &permit;
        chunk
    }));
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, count)
        .header(header::ACCEPT_RANGES, "bytes");
    if status == StatusCode::PARTIAL_CONTENT {
        response = response.header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", start + count - 1),
        );
    }
    Ok(response.body(body).expect("valid response"))
}

/// One digest over the node's file list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FilesDigest {
    /// Lower-case hex digest of the sorted `fileUrl size` lines of every file.
    pub digest: String,
    /// The algorithm.
    pub digest_algorithm: String,
    /// Files counted.
    pub files: usize,
    /// Sum of their sizes.
    pub total_size: u64,
}

/// The digest of the sorted (path, size) list of every file: two nodes compare their whole file
/// set in one request each. (Content is not read: see the verification tasks for that.)
pub fn list_digest(entries: &[files::Entry], algorithm: Algorithm) -> FilesDigest {
    let mut hasher = algorithm.hasher();
    let mut lines: Vec<String> = entries
        .iter()
        .filter(|e| !e.is_dir)
        .map(|e| format!("{} {}\n", e.url(), e.size))
        .collect();
    lines.sort();
    for l in &lines {
        hasher.update(l.as_bytes());
    }
    FilesDigest {
        digest: hasher.finish(),
        digest_algorithm: algorithm.name().into(),
        files: lines.len(),
        total_size: entries.iter().map(|e| e.size).sum(),
    }
}

/// The digest of the node's file list (paths and sizes; default `sha256`). On a source and
/// on a destination: equal digests mean both hold the same files with the same sizes.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files-digest",
    tag = "live-migration",
    params(DigestQuery),
    responses((status = 200, body = FilesDigest), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn files_digest(
    State(state): State<AppState>,
    Query(query): Query<DigestQuery>,
) -> Result<Json<FilesDigest>, ApiError> {
    let algorithm = algorithm(&query)?.unwrap_or(Algorithm::Sha256);
    let entries = listing(&state).await?;
    Ok(Json(list_digest(&entries, algorithm)))
}

/// The migration status of this node: `NOT_COMPLETED`, or `COMPLETED` with its `endTime`.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 404, body = ErrorBody))
)]
pub async fn status(State(state): State<AppState>) -> Json<Status> {
    Json(state.live.status())
}

/// Declares the migration complete (on a source: no more files are served). A second POST is
/// refused with 400.
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 400, description = "Already COMPLETED", body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn complete(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    Ok(Json(state.live.complete().map_err(state_error)?))
}

/// Sets the status back to `NOT_COMPLETED`.
#[utoipa::path(
    delete,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 404, body = ErrorBody))
)]
pub async fn reset(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    Ok(Json(state.live.reset().map_err(state_error)?))
}

/// Live migration on this node, as the admin route shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminView {
    /// Whether the live-migration routes answer.
    pub enabled: bool,
    /// `source`, `destination` or `none` (from `live_migration.migration_map`).
    pub role: String,
    /// The peer daemon (`host:port`), for a source or a destination.
    pub peer: Option<String>,
}

/// A switch of the live-migration routes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminChange {
    /// On or off.
    pub enabled: bool,
}

fn admin_view(state: &AppState) -> AdminView {
    let (role, peer) = match &state.live.role {
        Role::Source { destination } => ("source", Some(destination.clone())),
        Role::Destination { source } => ("destination", Some(source.clone())),
        Role::None => ("none", None),
    };
    AdminView {
        enabled: state.live.enabled(),
        role: role.into(),
        peer,
    }
}

/// Whether live migration is on, and this node's role.
#[utoipa::path(
    get,
    path = "/api/v1/admin/live-migration",
    tag = "live-migration",
    responses((status = 200, body = AdminView))
)]
pub async fn admin(State(state): State<AppState>) -> Json<AdminView> {
    Json(admin_view(&state))
}

/// Switches the live-migration routes on or off at runtime, without a restart; the choice is
/// kept in the state directory and wins over `live_migration.enabled`. (An admin call: the
/// security layer guards it.)
#[utoipa::path(
    put,
    path = "/api/v1/admin/live-migration",
    tag = "live-migration",
    request_body = AdminChange,
    responses((status = 200, body = AdminView), (status = 400, body = ErrorBody))
)]
pub async fn admin_set(
    State(state): State<AppState>,
    super::body::Payload(change): super::body::Payload<AdminChange>,
) -> Result<Json<AdminView>, ApiError> {
    state
        .live
        .set_enabled(change.enabled)
        .map_err(state_error)?;
    tracing::info!(enabled = change.enabled, "live migration switched");
    Ok(Json(admin_view(&state)))
}

// ---- destination: data-copy and verification tasks ----

/// The answer to a task submission (Sidecar's).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskAccepted {
    /// The task's id.
    pub task_id: String,
    /// Where to poll it.
    pub status_url: String,
}

/// A data-copy task (Sidecar's fields, plus drover's).
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
    /// drover: digest checked on each download.
    pub verify_digest: Option<String>,
    /// drover: bandwidth limit.
    pub max_bytes_per_second: Option<u64>,
    /// drover: the task's job state (`RUNNING`, `SUCCEEDED`, `FAILED`, `CANCELLED`,
    /// `INTERRUPTED`).
    pub state: String,
    /// drover: why it failed.
    pub error: Option<String>,
    /// One entry per iteration.
    pub status: Vec<crate::livemigration::copy::IterationStatus>,
}

/// Data-copy tasks, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DataCopyTaskList {
    /// Every task.
    pub tasks: Vec<DataCopyTaskView>,
}

fn copy_view(state: &AppState, r: crate::jobs::JobRecord) -> DataCopyTaskView {
    let request = spec_of::<DataCopyTask>(&r);
    let status = output_of::<DataCopyTask>(&r)
        .map(|o| o.status)
        .unwrap_or_default();
    let (host, port) = match &state.live.role {
        Role::Destination { source } => source
            .rsplit_once(':')
            .map(|(h, p)| (h.to_string(), p.parse().unwrap_or(0)))
            .unwrap_or_default(),
        _ => (String::new(), 0),
    };
    DataCopyTaskView {
        task_id: r.id,
        source: host,
        port,
        max_iterations: request.as_ref().map_or(0, |q| q.max_iterations),
        success_threshold: request.as_ref().map_or(0.0, |q| q.success_threshold),
        max_concurrency: request.as_ref().map_or(0, |q| q.max_concurrency),
        verify_digest: request.as_ref().and_then(|q| q.verify_digest.clone()),
        max_bytes_per_second: request.as_ref().and_then(|q| q.max_bytes_per_second),
        state: r.state.to_string(),
        error: r.error,
        status,
    }
}

/// Starts a data-copy task: the destination pulls the source's files in iterations until
/// `successThreshold` of the bytes are identical (see the docs for the iteration rules).
/// Refused while the local Cassandra answers on its native port (400) and while another task
/// runs (409). Destination only.
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
    super::body::Payload(request): super::body::Payload<CopyRequest>,
) -> Result<(StatusCode, Json<TaskAccepted>), ApiError> {
    request.check().map_err(ApiError::bad_request)?;
    let source = tasks::source_of(&state.live)
        .ok_or_else(|| ApiError::not_found("this node is not a live-migration destination"))?;
    if state.node.check().await.is_ok() {
        return Err(ApiError::bad_request(format!(
            "the local Cassandra node answers on {}: stop it before files are copied into its directories",
            state.node.address()
        )));
    }
    if let Some(running) = state
        .jobs
        .list_kind::<DataCopyTask>()
        .into_iter()
        .find(|r| r.state.is_active())
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "data-copy task {} is still {}; one task runs at a time",
                running.id, running.state
            ),
        ));
    }
    let task = copy::Task {
        request: request.clone(),
        source,
        local: tasks::local(&state.live),
    };
    let record = state
        .jobs
        .submit_kind::<DataCopyTask>(None, &request, task)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TaskAccepted {
            status_url: DataCopyTask::status_url(&record.id),
            task_id: record.id,
        }),
    ))
}

/// Lists data-copy tasks. Destination only.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/data-copy-tasks",
    tag = "live-migration",
    responses((status = 200, body = DataCopyTaskList), (status = 404, body = ErrorBody))
)]
pub async fn list_copies(State(state): State<AppState>) -> Json<DataCopyTaskList> {
    Json(DataCopyTaskList {
        tasks: state
            .jobs
            .list_kind::<DataCopyTask>()
            .into_iter()
            .map(|r| copy_view(&state, r))
            .collect(),
    })
}

/// One data-copy task, with the status of each iteration. Destination only.
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
    let r = state.jobs.get_kind::<DataCopyTask>(&id)?;
    Ok(Json(copy_view(&state, r)))
}

/// Cancels a data-copy task: running downloads stop (their staging files stay, so a next task
/// continues them). Destination only.
#[utoipa::path(
    patch,
    path = "/api/v1/live-migration/data-copy-tasks/{taskId}",
    tag = "live-migration",
    params(("taskId" = String, Path, description = "Task id")),
    responses(
        (status = 200, body = DataCopyTaskView),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The task has already ended", body = ErrorBody),
    )
)]
pub async fn cancel_copy(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<DataCopyTaskView>, ApiError> {
    state.jobs.get_kind::<DataCopyTask>(&id)?;
    let r = state.jobs.cancel(&id)?;
    Ok(Json(copy_view(&state, r)))
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

fn verify_view(r: crate::jobs::JobRecord) -> VerificationTaskView {
    VerificationTaskView {
        report: output_of::<VerificationTask>(&r),
        task_id: r.id,
        state: r.state.to_string(),
        error: r.error,
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
    super::body::Payload(request): super::body::Payload<VerifyRequest>,
) -> Result<(StatusCode, Json<TaskAccepted>), ApiError> {
    request.check().map_err(ApiError::bad_request)?;
    let source = tasks::source_of(&state.live)
        .ok_or_else(|| ApiError::not_found("this node is not a live-migration destination"))?;
    let local = tasks::local(&state.live);
    let verification = Verification {
        source,
        local,
        request: request.clone(),
    };
    let record = state
        .jobs
        .submit_kind::<VerificationTask>(None, &request, verification)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TaskAccepted {
            status_url: VerificationTask::status_url(&record.id),
            task_id: record.id,
        }),
    ))
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
        tasks: state
            .jobs
            .list_kind::<VerificationTask>()
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
    let r = state.jobs.get_kind::<VerificationTask>(&id)?;
    Ok(Json(verify_view(r)))
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
    state.jobs.get_kind::<VerificationTask>(&id)?;
    Ok(Json(verify_view(state.jobs.cancel(&id)?)))
}
