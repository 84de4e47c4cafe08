//! Cassandra Sidecar's SSTable upload, import and cleanup routes, for a bulk writer (drover's
//! `target.bulkWrite: sstable`, or a Sidecar client such as Cassandra Analytics). Paths,
//! digest headers, query parameters and answers follow the Sidecar's; the work is
//! [`crate::uploads`]'.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorBody};
use crate::uploads::{Expected, ImportOptions, ImportStatus, UploadError};

/// The prefix of every route here.
pub const PREFIX: &str = "/api/v1/uploads/";

/// Sidecar's status for a body whose digest is not the one announced.
pub const CHECKSUM_MISMATCH: u16 = 455;

impl From<UploadError> for ApiError {
    fn from(err: UploadError) -> Self {
        let status = match &err {
            UploadError::Disabled | UploadError::NotFound(_) => StatusCode::NOT_FOUND,
            UploadError::Invalid(_) | UploadError::Body { .. } => StatusCode::BAD_REQUEST,
            UploadError::Forbidden(_) => StatusCode::FORBIDDEN,
            UploadError::Idle { .. } => StatusCode::REQUEST_TIMEOUT,
            UploadError::AlreadyImported { .. } => StatusCode::CONFLICT,
            UploadError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            UploadError::NoSpace { .. } => StatusCode::INSUFFICIENT_STORAGE,
            UploadError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            UploadError::DigestMismatch { .. } => {
                StatusCode::from_u16(CHECKSUM_MISMATCH).expect("a valid status code")
            }
            UploadError::ImportFailed(_) | UploadError::Io { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        ApiError::new(status, err.to_string())
    }
}

/// Whether `request` sends a component's bytes: the one route whose body may take longer than
/// `server.request_timeout` (it is bounded by `sstable_uploads.idle_timeout` instead).
pub fn is_component_upload<B>(request: &axum::http::Request<B>) -> bool {
    request.method() == axum::http::Method::PUT
        && request.uri().path().starts_with(PREFIX)
        && request.uri().path().contains("/components/")
}

/// The on-demand filter: every upload route answers 404 until `sstable_uploads.enabled`,
/// before authentication, so a node that takes no uploads shows none.
pub async fn filter(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.uri().path().starts_with(PREFIX) && !state.uploads.enabled() {
        return if state.config.auth.is_enabled() {
            super::error::not_found(request.uri().clone())
                .await
                .into_response()
        } else {
            ApiError::from(UploadError::Disabled).into_response()
        };
    }
    next.run(request).await
}

/// Sidecar's `SSTableUploadResponse`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadResponse {
    /// The upload id.
    pub upload_id: String,
    /// Bytes of the component as stored.
    pub upload_size_bytes: u64,
    /// Time spent receiving it, in milliseconds.
    pub service_time_millis: u64,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::bad_request(format!("header {name}: not visible ASCII")))
        })
        .transpose()
}

/// Receives one SSTable component of an upload: the body is the file's bytes, written to a
/// temporary name and renamed when complete. A digest announced in
/// `cassandra-content-xxhash32` (lowercase hex, seed in `cassandra-content-xxhash32-seed`,
/// hex, default 0) or `content-md5` (base64) is checked on the way: a mismatch is answered
/// 455 and nothing is kept. Bounded by `sstable_uploads` (uploads at once, staged uploads,
/// free space, component size, and `idle_timeout` between bytes of the body, instead of
/// `server.request_timeout`, so that a slow upload that keeps sending succeeds). The
/// `Content-Length` is reserved on the staging file system before a byte is read: an upload
/// that would take it below `min_free_space_percent` is refused with 507 before it writes.
#[utoipa::path(
    put,
    path = "/api/v1/uploads/{uploadId}/keyspaces/{keyspace}/tables/{table}/components/{component}",
    tag = "uploads",
    params(
        ("uploadId" = String, Path, description = "36 to 110 hex digits, '-' and ':' (a UUID, say)"),
        ("keyspace" = String, Path, description = "Keyspace, optionally in double quotes"),
        ("table" = String, Path, description = "Table, optionally in double quotes"),
        ("component" = String, Path, description = "The component's file name, e.g. `nb-1-big-Data.db`"),
        ("cassandra-content-xxhash32" = Option<String>, Header, description = "xxHash32 of the body, lowercase hex"),
        ("cassandra-content-xxhash32-seed" = Option<String>, Header, description = "Its seed, hex (default 0)"),
        ("content-md5" = Option<String>, Header, description = "MD5 of the body, base64"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The component's bytes"),
    responses(
        (status = 200, body = UploadResponse),
        (status = 400, description = "A bad name, header or body", body = ErrorBody),
        (status = 403, description = "A system keyspace", body = ErrorBody),
        (status = 404, description = "Uploads are off (`sstable_uploads.enabled`)", body = ErrorBody),
        (status = 408, description = "The body sent nothing for `sstable_uploads.idle_timeout`", body = ErrorBody),
        (status = 409, description = "This upload id was imported already", body = ErrorBody),
        (status = 413, description = "Longer than `sstable_uploads.max_component_size`", body = ErrorBody),
        (status = 429, description = "Too many uploads at once, or staged", body = ErrorBody),
        (status = 455, description = "Checksum Mismatch: the body's digest is not the one announced", body = ErrorBody),
        (status = 500, body = ErrorBody),
        (status = 507, description = "The upload would take the staging file system below `sstable_uploads.min_free_space_percent` (counting the uploads in flight)", body = ErrorBody),
    )
)]
pub async fn upload(
    State(state): State<AppState>,
    Path((upload_id, keyspace, table, component)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<UploadResponse>, ApiError> {
    let expected = Expected::from_headers(
        header(&headers, "cassandra-content-xxhash32")?,
        header(&headers, "cassandra-content-xxhash32-seed")?,
        header(&headers, "content-md5")?,
    )?;
    // hyper ends the body with an error if it is shorter than this, and never reads beyond it.
    let declared = header(&headers, "content-length")?
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "header content-length: {:?} is not a number",
                    crate::answer::cap(v)
                ))
            })
        })
        .transpose()?;
    let done = state
        .uploads
        .upload(
            (&upload_id, &keyspace, &table, &component),
            expected,
            declared,
            body.into_data_stream(),
        )
        .await?;
    Ok(Json(UploadResponse {
        upload_id: done.upload_id,
        upload_size_bytes: done.size,
        service_time_millis: u64::try_from(done.elapsed.as_millis()).unwrap_or(u64::MAX),
    }))
}

/// Sidecar's import options; each defaults as in the Sidecar.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// Reset the SSTables' level (default true).
    #[param(value_type = Option<bool>)]
    pub reset_level: Option<String>,
    /// Clear their repaired state (default true).
    #[param(value_type = Option<bool>)]
    pub clear_repaired: Option<String>,
    /// Verify them first (default true).
    #[serde(rename = "verifySSTables")]
    #[param(value_type = Option<bool>, rename = "verifySSTables")]
    pub verify_sstables: Option<String>,
    /// Check that their tokens belong to this node (default true).
    #[param(value_type = Option<bool>)]
    pub verify_tokens: Option<String>,
    /// Invalidate cached rows of their keys (default true).
    #[param(value_type = Option<bool>)]
    pub invalidate_caches: Option<String>,
    /// Verify every partition and row (default true).
    #[param(value_type = Option<bool>)]
    pub extended_verify: Option<String>,
    /// Copy the files instead of moving them (default false).
    #[param(value_type = Option<bool>)]
    pub copy_data: Option<String>,
}

impl ImportQuery {
    fn options(&self) -> Result<ImportOptions, ApiError> {
        let d = ImportOptions::default();
        let flag = |name: &str, v: &Option<String>, default: bool| match v.as_deref() {
            None => Ok(default),
            Some(s) if s.eq_ignore_ascii_case("true") => Ok(true),
            Some(s) if s.eq_ignore_ascii_case("false") => Ok(false),
            Some(s) => Err(ApiError::bad_request(format!(
                "{name}: {:?} is not true or false",
                crate::answer::cap(s)
            ))),
        };
        Ok(ImportOptions {
            reset_level: flag("resetLevel", &self.reset_level, d.reset_level)?,
            clear_repaired: flag("clearRepaired", &self.clear_repaired, d.clear_repaired)?,
            verify_sstables: flag("verifySSTables", &self.verify_sstables, d.verify_sstables)?,
            verify_tokens: flag("verifyTokens", &self.verify_tokens, d.verify_tokens)?,
            invalidate_caches: flag(
                "invalidateCaches",
                &self.invalidate_caches,
                d.invalidate_caches,
            )?,
            extended_verify: flag("extendedVerify", &self.extended_verify, d.extended_verify)?,
            copy_data: flag("copyData", &self.copy_data, d.copy_data)?,
        })
    }
}

/// Sidecar's `SSTableImportResponse`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportResponse {
    /// True once imported; false while the import runs (202).
    pub success: bool,
    /// The upload id.
    pub upload_id: String,
    /// The keyspace.
    pub keyspace: String,
    /// The table.
    pub table_name: String,
}

/// Imports one table of an upload into the local node with `nodetool import` (its checks on
/// unless the query turns them off). The first request starts the import and answers 202;
/// asking again answers 202 while it runs, then 200 once imported (the upload's files are
/// gone then, and the id is remembered for `sstable_uploads.imported_expiry`: asking again
/// answers 200, uploading to it 409), or 500 with the node's message once, after which a new
/// request tries again.
#[utoipa::path(
    put,
    path = "/api/v1/uploads/{uploadId}/keyspaces/{keyspace}/tables/{table}/import",
    tag = "uploads",
    params(
        ("uploadId" = String, Path, description = "The upload id"),
        ("keyspace" = String, Path, description = "Keyspace"),
        ("table" = String, Path, description = "Table"),
        ImportQuery,
    ),
    responses(
        (status = 200, description = "Imported", body = ImportResponse),
        (status = 202, description = "The import runs: ask again", body = ImportResponse),
        (status = 400, body = ErrorBody),
        (status = 403, description = "A system keyspace", body = ErrorBody),
        (status = 404, description = "No such upload of that table, or uploads are off", body = ErrorBody),
        (status = 429, description = "Too many imports waiting", body = ErrorBody),
        (status = 500, description = "The node refused the import (its message), or nodetool failed", body = ErrorBody),
    )
)]
pub async fn import(
    State(state): State<AppState>,
    Path((upload_id, keyspace, table)): Path<(String, String, String)>,
    Query(query): Query<ImportQuery>,
) -> Result<Response, ApiError> {
    let options = query.options()?;
    let status = state
        .uploads
        .import((&upload_id, &keyspace, &table), options)?;
    let answer = |success| ImportResponse {
        success,
        upload_id: upload_id.clone(),
        keyspace: keyspace.trim_matches('"').to_string(),
        table_name: table.trim_matches('"').to_string(),
    };
    match status {
        ImportStatus::Pending => Ok((StatusCode::ACCEPTED, Json(answer(false))).into_response()),
        ImportStatus::Done => Ok(Json(answer(true)).into_response()),
        ImportStatus::Failed(message) => Err(UploadError::ImportFailed(message).into()),
    }
}

/// Deletes an upload and everything staged under it.
#[utoipa::path(
    delete,
    path = "/api/v1/uploads/{uploadId}",
    tag = "uploads",
    params(("uploadId" = String, Path, description = "The upload id")),
    responses(
        (status = 200, body = crate::api::live_migration::status::OkBody),
        (status = 400, body = ErrorBody),
        (status = 404, description = "No such upload, or uploads are off", body = ErrorBody),
        (status = 429, description = "It is being imported", body = ErrorBody),
        (status = 500, body = ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    Path(upload_id): Path<String>,
) -> Result<Json<crate::api::live_migration::status::OkBody>, ApiError> {
    state.uploads.delete(&upload_id).await?;
    Ok(Json(crate::api::live_migration::status::OkBody {
        status: "OK".into(),
    }))
}
