//! `/api/v1/jobs`: every job of every kind, read and cancelled the same way.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use crate::engine::job_file::{FileJobKind, submit_job_file};
use crate::jobs::kind::JobKind;
use crate::jobs::{JobRecord, JobState};

/// A job as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    /// Job id.
    pub id: String,
    /// Kind of work: `migration`, `validation`, `diagnostic`, ...
    pub kind: String,
    /// What the job is called: the `name` of its job file, or what it moves
    /// (`ks.table → ks2.table`, `dynamodb:Orders → alternator:Orders`, ...); at most 200
    /// characters, never a host or a secret. Jobs recorded before names existed are called by
    /// their kind and the start of their id.
    #[schema(example = "shop.orders → shop2.orders")]
    pub name: String,
    /// Where the job reads, in words: `ks.table`, `dynamodb:Table`, `alternator:Table`,
    /// `parquet:path`, `mysql:db.table`, `s3-export:s3://bucket/prefix`, the files of a node.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "shop.orders")]
    pub source: Option<String>,
    /// Where the job writes, in words (as `source`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "shop2.orders")]
    pub target: Option<String>,
    /// Rows the last run moved: written by a migration, read from the source by a
    /// validation. Absent for kinds that count no rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Bytes the last run moved (written by a migration, read by a validation, downloaded by
    /// a data-copy task over all its iterations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Seconds the last run took, from `startedAt` to `endedAt` (to now while it runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// Once the job has ended: `rows` divided by `durationSeconds`, its average rate over the
    /// run (`progress.rowsPerSecond` is the recent rate while it runs, and this same figure
    /// rounded once it has ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_rows_per_second: Option<f64>,
    /// Once the job has ended: `bytes` divided by `durationSeconds` (`progress.bytesPerSecond`
    /// is this figure rounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_bytes_per_second: Option<f64>,
    /// `QUEUED`, `RUNNING`, `SUCCEEDED`, `DIFFERENCES_FOUND` (a validation that found rows that
    /// differ), `FAILED`, `CANCELLED` or `INTERRUPTED`.
    #[schema(value_type = String, example = "RUNNING")]
    pub state: JobState,
    /// What the job is doing now.
    pub phase: Option<String>,
    /// Submission time.
    pub created_at: DateTime<Utc>,
    /// Last start time.
    pub started_at: Option<DateTime<Utc>>,
    /// End time.
    pub ended_at: Option<DateTime<Utc>>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Times started, resumes included.
    pub attempts: u32,
    /// Progress counters.
    pub progress: BTreeMap<String, u64>,
    /// Why it failed or what went wrong while stopping.
    pub error: Option<String>,
    /// The most recent transient error (retried), kept after recovery.
    pub last_error: Option<String>,
    /// Parameters as submitted, secrets redacted.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// What the job found: a validation's report (while it runs, the findings of the ranges
    /// compared so far).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    /// Where to poll this job.
    pub status_url: String,
}

impl From<JobRecord> for JobView {
    fn from(r: JobRecord) -> Self {
        let summary = crate::kinds::summary(&r);
        // Milliseconds are what the record's times hold.
        let millis = |x: f64| (x * 1000.0).round() / 1000.0;
        Self {
            status_url: status_url(&r.kind, &r.id),
            id: r.id,
            kind: r.kind,
            name: summary.name,
            source: summary.source,
            target: summary.target,
            rows: summary.rows,
            bytes: summary.bytes,
            duration_seconds: summary.duration.map(|d| millis(d.as_secs_f64())),
            average_rows_per_second: summary.average_rows_per_second,
            average_bytes_per_second: summary.average_bytes_per_second,
            state: r.state,
            phase: r.phase,
            created_at: r.created_at,
            started_at: r.started_at,
            ended_at: r.ended_at,
            updated_at: r.updated_at,
            attempts: r.attempts,
            progress: r.progress,
            error: r.error,
            last_error: r.last_error,
            spec: r.spec,
            result: r.result,
        }
    }
}

/// The `{id}` of a job route, resolved to a full job id: the whole id or a prefix of exactly
/// one (the console and `drover jobs` show ids shortened, and an operator types what they
/// see). An ambiguous prefix is a 400 that names the ids it starts; an unknown one a 404.
#[derive(Debug)]
pub struct JobId(pub String);

impl axum::extract::FromRequestParts<AppState> for JobId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        Ok(Self(state.jobs.resolve(&id)?))
    }
}

/// The `{id}` of a route under one kind's resource (`/migrations/{id}`,
/// `/validations/{id}/report`, ...), resolved as [`JobId`] is; an id that names no job is
/// answered "no validation with id …", what the route looks for, rather than "no job".
pub struct KindId<K> {
    /// The full id.
    pub id: String,
    kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: JobKind> axum::extract::FromRequestParts<AppState> for KindId<K> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        Ok(Self {
            id: state.jobs.resolve_as(&id, K::NOUN)?,
            kind: std::marker::PhantomData,
        })
    }
}

/// The URL of a job's status: under its kind's own resource when it has one.
pub fn status_url(kind: &str, id: &str) -> String {
    crate::kinds::status_url(kind, id)
}

/// The answer to a submission.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    /// The new job's id.
    pub job_id: String,
    /// Where to poll it.
    pub status_url: String,
}

impl From<JobRecord> for Accepted {
    fn from(r: JobRecord) -> Self {
        Self {
            status_url: status_url(&r.kind, &r.id),
            job_id: r.id,
        }
    }
}

/// A list of jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    /// Oldest first.
    pub jobs: Vec<JobView>,
    /// When more jobs pass the filters: the cursor to ask for the next page with
    /// (`?after=<next>`, same filters). Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Jobs in one answer of `GET /api/v1/jobs` unless `limit` says otherwise, and the most it may
/// say: the registry keeps 1,000 finished jobs by default, so one page usually holds all.
pub const LIST_LIMIT: usize = 1000;

/// Filters of `GET /api/v1/jobs`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListFilter {
    /// Only jobs of this kind.
    pub kind: Option<String>,
    /// Only jobs in this state.
    #[param(value_type = Option<JobState>, inline)]
    pub state: Option<String>,
    /// At most this many jobs, 1 to 1000. Default 1000.
    pub limit: Option<usize>,
    /// Only jobs after this one: the `next` of the previous page.
    pub after: Option<String>,
}

/// Lists jobs.
#[utoipa::path(
    get,
    path = "/api/v1/jobs",
    tag = "jobs",
    params(ListFilter),
    responses(
        (status = 200, body = JobList),
        (status = 400, description = "Unknown filter or state, or a limit out of 1 to 1000", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Query(filter): Query<ListFilter>,
) -> Result<Json<JobList>, ApiError> {
    let wanted = filter
        .state
        .as_deref()
        .map(str::parse::<JobState>)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("state: {e}")))?;
    let limit = filter.limit.unwrap_or(LIST_LIMIT);
    if !(1..=LIST_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit: must be between 1 and {LIST_LIMIT}, got {limit}"
        )));
    }
    let kind = filter.kind.as_deref();
    let (jobs, next) = state.jobs.after(
        |k, s| kind.is_none_or(|want| want == k) && wanted.is_none_or(|w| w == s),
        filter.after.as_deref(),
        limit,
    );
    Ok(Json(JobList {
        jobs: jobs.into_iter().map(JobView::from).collect(),
        next,
    }))
}

/// One job.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 200, body = JobView),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    JobId(id): JobId,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(state.jobs.get(&id)?.into()))
}

/// Asks a queued or running job to stop. The job checkpoints and ends `CANCELLED`; poll its
/// status to see when.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{id}/cancel",
    tag = "jobs",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 202, description = "Cancellation requested", body = JobView),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The job has already ended", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    JobId(id): JobId,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let record = state.jobs.cancel(&id)?;
    Ok((StatusCode::ACCEPTED, Json(record.into())))
}

/// Forgets a job that has ended: its record and its kept job file are deleted. Queued and
/// running jobs must be cancelled first.
#[utoipa::path(
    delete,
    path = "/api/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "An id prefix that starts more than one job id (the message names some)", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The job is queued or running", body = ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    JobId(id): JobId,
) -> Result<StatusCode, ApiError> {
    state.jobs.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The text of a submitted job file: YAML, and JSON is YAML too (with its surrogate pairs
/// written as YAML writes them, see [`crate::config::yaml::json_for_yaml`]).
fn job_text<'a>(
    headers: &HeaderMap,
    body: &'a [u8],
) -> Result<std::borrow::Cow<'a, str>, ApiError> {
    let format = super::body::format_of_body(headers, body)?;
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("job config: not UTF-8: {e}")))?;
    Ok(match format {
        super::body::Format::Json => crate::config::yaml::json_for_yaml(text),
        super::body::Format::Yaml => text.into(),
    })
}

// The handlers of a kind's own resource (`/api/v1/migrations`, ...), generic over the kind. Each
// route is a thin wrapper in its resource's module that carries the route's OpenAPI description.

/// Submits a job file of kind `K`.
pub(crate) async fn submit_file<K: FileJobKind>(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(StatusCode, Json<Accepted>), ApiError> {
    let text = job_text(headers, body)?;
    let record = submit_job_file::<K>(&state.jobs, &state.config.state_dir, &text).await?;
    Ok((StatusCode::ACCEPTED, Json(record.into())))
}

/// Every job of kind `K`, oldest first.
pub(crate) fn list_of<K: JobKind>(state: &AppState) -> Vec<JobView> {
    state
        .jobs
        .list_kind::<K>()
        .into_iter()
        .map(JobView::from)
        .collect()
}

/// One job of kind `K`.
pub(crate) fn get_of<K: JobKind>(state: &AppState, id: &str) -> Result<Json<JobView>, ApiError> {
    Ok(Json(state.jobs.get_kind::<K>(id)?.into()))
}

/// Asks a queued or running job of kind `K` to stop.
pub(crate) fn cancel_of<K: JobKind>(
    state: &AppState,
    id: &str,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    state.jobs.get_kind::<K>(id)?;
    Ok((StatusCode::ACCEPTED, Json(state.jobs.cancel(id)?.into())))
}

/// Resumes an `INTERRUPTED` job of kind `K`.
pub(crate) async fn resume_of<K: JobKind>(
    state: &AppState,
    id: &str,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let record = crate::jobs::kind::resume::<K>(&state.services(), id).await?;
    Ok((StatusCode::ACCEPTED, Json(record.into())))
}
