//! The source's routes: the file list, one file (or its digest), and the digest of the list.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorBody};
use crate::livemigration::LiveMigrationError;
use crate::livemigration::digest::Algorithm;
use crate::livemigration::serve::{self, FileBytes, ServedBytes};

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
    /// drover: the permission bits (`0o644` is 420), which a destination gives the file.
    /// Sidecar's listings have no such field; its clients ignore it.
    pub mode: u32,
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
    let entries = state.live.list_files().await?;
    Ok(Json(FileList {
        total_size: entries.iter().map(|e| e.size).sum(),
        files: entries
            .iter()
            .map(|e| FileInfo {
                file_url: e.url(),
                size: e.size,
                file_type: e.file_type().into(),
                last_modified_time: e.modified_ms,
                mode: e.mode,
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
    #[param(value_type = Option<crate::livemigration::digest::Algorithm>, inline)]
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
    let algorithm = serve::digest_algorithm(query.digest_algorithm.as_deref())?;
    let served = match state.live.open_file(dir_type, dir_index, path).await {
        Ok(served) => served,
        Err(e @ LiveMigrationError::TooManyFileRequests { .. }) => {
            let mut response = ApiError::from(e).into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(response);
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(algorithm) = algorithm {
        return Ok(Json(DigestResponse {
            digest: served.digest(algorithm).await?,
            digest_algorithm: algorithm.name().into(),
        })
        .into_response());
    }
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    let FileBytes {
        reader,
        start,
        count,
        len,
        whole,
        permit,
    } = match served.read(range).await? {
        ServedBytes::Bytes(bytes) => bytes,
        ServedBytes::Unsatisfiable { len } => {
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
    let status = if whole {
        StatusCode::OK
    } else {
        StatusCode::PARTIAL_CONTENT
    };
    let stream = tokio_util::io::ReaderStream::with_capacity(reader, 256 * 1024);
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
    let algorithm =
        serve::digest_algorithm(query.digest_algorithm.as_deref())?.unwrap_or(Algorithm::Sha256);
    let entries = state.live.list_files().await?;
    let d = serve::list_digest(&entries, algorithm);
    Ok(Json(FilesDigest {
        digest: d.digest,
        digest_algorithm: d.algorithm.name().into(),
        files: d.files,
        total_size: d.total_size,
    }))
}
