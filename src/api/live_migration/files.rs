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
use crate::livemigration::batch::{self, BatchRequest};
use crate::livemigration::digest::Algorithm;
use crate::livemigration::files::Entry;
use crate::livemigration::range::Validator;
use crate::livemigration::serve::{self, FileBytes, ServedBytes};

/// One file or directory of the node.
#[derive(Debug, Serialize, Deserialize, ToSchema, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// Where to download it: `/api/v1/live-migration/files/{dirType}/{dirIndex}/{path}`.
    pub file_url: String,
    /// Bytes; -1 for a directory (as Sidecar lists them).
    pub size: i64,
    /// `FILE` or `DIRECTORY`.
    pub file_type: String,
    /// Last modification, milliseconds since the epoch.
    pub last_modified_time: u64,
    /// drover: the permission bits (`0o644` is 420), which a destination gives the file.
    /// Sidecar's listings have no such field; its clients ignore it.
    pub mode: u32,
}

impl FileInfo {
    /// How a listing shows `e`.
    pub fn of(e: &Entry) -> Self {
        Self {
            file_url: e.url(),
            size: if e.is_dir {
                -1
            } else {
                i64::try_from(e.size).unwrap_or(i64::MAX)
            },
            file_type: e.file_type().into(),
            last_modified_time: e.modified_ms,
            mode: e.mode,
        }
    }
}

/// The sum of the sizes of the files (not directories) of a listing.
pub fn total_size(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .filter(|e| !e.is_dir)
        .fold(0u64, |sum, e| sum.saturating_add(e.size))
}

/// The files of the node.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileList {
    /// Sum of the files' sizes (directories not counted).
    pub total_size: u64,
    /// Every file and directory, minus exclusions.
    pub files: Vec<FileInfo>,
}

/// Lists every file and directory of the node's configured directories (`data` with an index
/// per data directory, `commitlog`, `hints`, `saved_caches`, `cdc_raw`, `local_system_data`),
/// minus exclusions (snapshots and backups always). Directories have `size` -1 and are not
/// counted in `totalSize`. On a source or a destination (as Sidecar). At most
/// `live_migration.max_concurrent_listings` are built at once; the body is streamed.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files",
    tag = "live-migration",
    responses(
        (status = 200, body = FileList),
        (status = 404, description = "Neither source nor destination, or live migration off", body = ErrorBody),
        (status = 503, description = "Too many listings at once (`live_migration.max_concurrent_listings`); see Retry-After", body = ErrorBody),
    )
)]
pub async fn list(State(state): State<AppState>) -> Result<Response, ApiError> {
    let listing = match state.live.list_files().await {
        Ok(listing) => listing,
        Err(e) => return Ok(busy_or_error(e)),
    };
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        // A header, not a field: Sidecar's clients read the body, and must not meet an
        // unknown key there.
        .header(batch::FEATURES_HEADER, batch::FEATURES)
        .body(Body::from_stream(futures::stream::iter(ListingBody::new(
            listing,
        ))))
        .expect("valid response"))
}

/// A 503 for a full limit gets `Retry-After`; other errors are answered as they are.
fn busy_or_error(e: LiveMigrationError) -> Response {
    let busy = matches!(
        e,
        LiveMigrationError::TooManyFileRequests { .. } | LiveMigrationError::TooManyListings { .. }
    );
    let mut response = ApiError::from(e).into_response();
    if busy {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// The JSON of a [`FileList`], written as it is sent, a chunk at a time: the entries are held
/// once (the walk's), never as a second list of [`FileInfo`] nor as one whole document. The
/// bytes are those `serde_json` writes for the `FileList` itself.
struct ListingBody {
    total_size: Option<u64>,
    entries: std::vec::IntoIter<Entry>,
    first: bool,
    done: bool,
    /// The listing slot, given back once the last chunk is sent (or the client leaves).
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// About how many bytes each chunk of a listing holds.
const LISTING_CHUNK: usize = 64 * 1024;

impl ListingBody {
    fn new(listing: serve::Listing) -> Self {
        Self {
            total_size: Some(total_size(&listing.entries)),
            entries: listing.entries.into_iter(),
            first: true,
            done: false,
            _permit: listing.permit,
        }
    }
}

impl Iterator for ListingBody {
    type Item = Result<bytes::Bytes, std::convert::Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut buf = Vec::with_capacity(LISTING_CHUNK + 512);
        if let Some(total) = self.total_size.take() {
            buf.extend_from_slice(format!("{{\"totalSize\":{total},\"files\":[").as_bytes());
        }
        while buf.len() < LISTING_CHUNK {
            let Some(e) = self.entries.next() else {
                buf.extend_from_slice(b"]}");
                self.done = true;
                break;
            };
            if !std::mem::take(&mut self.first) {
                buf.push(b',');
            }
            serde_json::to_writer(&mut buf, &FileInfo::of(&e)).expect("a FileInfo serializes");
        }
        Some(Ok(bytes::Bytes::from(buf)))
    }
}

/// `?digestAlgorithm=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DigestQuery {
    /// `MD5` or `XXHash32` (Sidecar's), `sha256` or `xxh3` (drover's), in any case: answer
    /// the file's digest instead of its bytes.
    #[param(value_type = Option<crate::livemigration::digest::Algorithm>, inline)]
    pub digest_algorithm: Option<String>,
}

/// `?digestAlgorithm=` and drover's `?blockSize=` on a file.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FileQuery {
    /// `MD5` or `XXHash32` (Sidecar's), `sha256` or `xxh3` (drover's), in any case: answer
    /// the file's digest instead of its bytes.
    #[param(value_type = Option<crate::livemigration::digest::Algorithm>, inline)]
    pub digest_algorithm: Option<String>,
    /// drover (with `digestAlgorithm`): also the digest of each block of this many bytes (at
    /// least 65536, at most 65536 blocks), as a `BlockDigests` answer.
    #[serde(default)]
    pub block_size: Option<u64>,
}

/// A digest.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DigestResponse {
    /// As Sidecar writes it: MD5 in Base64 (padded), XXHash32 (seed 0) in lower-case hex
    /// without leading zeros; SHA-256 and XXH3 in lower-case hex.
    pub digest: String,
    /// The algorithm, as the request named it.
    pub digest_algorithm: String,
}

/// Streams one file of the node, or its digest with `?digestAlgorithm=`. A single `Range`
/// (`bytes=a-b`, `bytes=a-`, `bytes=-n`; an end past the file is clamped) gets 206, or 200
/// when it covers the whole file; an unsatisfiable one, several ranges or any other form get
/// 416. A directory is 400 ("Cannot transfer directory"). With
/// `If-Range` (the `ETag` or `Last-Modified` this route sent), the range is served only if
/// the file has not changed since; otherwise the whole file comes with 200. A symbolic link
/// anywhere in the path is refused (403). Source only; refused once the migration is
/// COMPLETED.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/files/{dirType}/{dirIndex}/{*path}",
    tag = "live-migration",
    params(
        ("dirType" = String, Path, description = "data, commitlog, hints, saved_caches, cdc_raw or local_system_data"),
        ("dirIndex" = usize, Path, description = "Index of the directory among those of its type"),
        ("path" = String, Path, description = "Path below the directory"),
        ("Range" = Option<String>, Header, description = "One byte range"),
        ("If-Range" = Option<String>, Header, description = "An `ETag` or `Last-Modified` value: the range only if the file is still that version, else the whole file"),
        FileQuery,
    ),
    responses(
        (status = 200, description = "The file; its digest (`DigestResponse`) with `digestAlgorithm`; its block digests (`BlockDigests`) with `blockSize` too", content_type = "application/octet-stream",
            headers(("ETag" = String, description = "The file's version: size and modification time"), ("Last-Modified" = String, description = "The file's modification time"))),
        (status = 206, description = "The range", content_type = "application/octet-stream",
            headers(("ETag" = String, description = "The file's version: size and modification time"), ("Last-Modified" = String, description = "The file's modification time"))),
        (status = 400, description = "Bad type, index or path (`..`, absolute), a directory, a bad `digestAlgorithm`, or the migration is COMPLETED", body = ErrorBody),
        (status = 403, description = "The path leads through a symbolic link or outside its directory", body = ErrorBody),
        (status = 404, description = "Missing or excluded", body = ErrorBody),
        (status = 416, description = "Range not satisfiable, or not one range of a served form", body = ErrorBody),
        (status = 503, description = "Too many file requests at once; see Retry-After", body = ErrorBody),
    )
)]
pub async fn file(
    State(state): State<AppState>,
    Path((dir_type, dir_index, path)): Path<(String, String, String)>,
    Query(query): Query<FileQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let served = match state.live.open_file(dir_type, dir_index, path).await {
        Ok(served) => served,
        Err(e) => return Ok(busy_or_error(e)),
    };
    // Checked once the file is found, as Sidecar does (a missing file is 404 whatever the
    // algorithm).
    if let Some(algorithm) = serve::digest_algorithm(query.digest_algorithm.as_deref())? {
        if let Some(block_size) = query.block_size {
            return Ok(Json(served.block_digests(algorithm, block_size).await?).into_response());
        }
        return Ok(Json(DigestResponse {
            digest: served.digest(algorithm).await?,
            // Echoed as sent: Sidecar's clients map it back case-insensitively.
            digest_algorithm: query.digest_algorithm.unwrap_or_default(),
        })
        .into_response());
    }
    send_file(served, &headers).await
}

/// The bytes of an open file a `Range` header (with `If-Range`) asks for, streamed with its
/// validators: 200 for the whole file, 206 for a range, 416 for a range it cannot serve. The
/// file's slot is held until the last byte is sent.
pub(crate) async fn send_file(
    served: serve::ServedFile,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let FileBytes {
        reader,
        start,
        count,
        len,
        whole,
        validator,
        permit,
    } = match served
        .read(text(header::RANGE), text(header::IF_RANGE))
        .await?
    {
        ServedBytes::Bytes(bytes) => bytes,
        ServedBytes::Unsatisfiable {
            len,
            validator,
            message,
        } => {
            let mut response =
                ApiError::new(StatusCode::RANGE_NOT_SATISFIABLE, message).into_response();
            let h = response.headers_mut();
            h.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{len}")).expect("ascii"),
            );
            insert_validator(h, &validator);
            return Ok(response);
        }
    };
    let status = if whole {
        StatusCode::OK
    } else {
        StatusCode::PARTIAL_CONTENT
    };
    let stream = crate::livemigration::serve::stream_file(reader, count);
    // The permit lives as long as the body is being sent.
    let body = Body::from_stream(futures::StreamExt::map(stream, move |chunk| {
        let _held = &permit;
        chunk
    }));
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, count)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &validator.etag)
        .header(header::LAST_MODIFIED, validator.last_modified());
    if status == StatusCode::PARTIAL_CONTENT {
        // The file's size after the slash, as RFC 9110 says (Sidecar writes the range's
        // length there; its own downloader does not read the header).
        response = response.header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", start + count - 1),
        );
    }
    Ok(response.body(body).expect("valid response"))
}

fn insert_validator(headers: &mut HeaderMap, validator: &Validator) {
    let value = |s: &str| HeaderValue::from_str(s).expect("validators are ASCII");
    headers.insert(header::ETAG, value(&validator.etag));
    headers.insert(header::LAST_MODIFIED, value(&validator.last_modified()));
}

/// drover's batch transfer: the files named, each as a frame (its size, modification time,
/// mode and digest, then its bytes), ending with an end frame (see the `batch` module of
/// `livemigration`). For a destination drover, not part of Cassandra Sidecar's API: a source
/// announces it in the `X-Drover-Features` header of its listing. A file that is missing,
/// refused or larger than 4 MiB gets a `skipped` frame. Source only; one file-request slot
/// for the whole batch; refused once the migration is COMPLETED.
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/files-batch",
    tag = "live-migration",
    request_body = BatchRequest,
    responses(
        (status = 200, description = "The frames", content_type = "application/x-drover-frames"),
        (status = 400, description = "More than 1024 files, a bad `digestAlgorithm`, or the migration is COMPLETED", body = ErrorBody),
        (status = 404, description = "Not a source, or live migration off", body = ErrorBody),
        (status = 503, description = "Too many file requests at once; see Retry-After", body = ErrorBody),
    )
)]
pub async fn files_batch(
    State(state): State<AppState>,
    crate::api::body::Payload(request): crate::api::body::Payload<BatchRequest>,
) -> Result<Response, ApiError> {
    let frames = match state.live.open_batch(request) {
        Ok(frames) => frames,
        Err(e) => return Ok(busy_or_error(e)),
    };
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/x-drover-frames")
        .body(Body::from_stream(frames))
        .expect("valid response"))
}

/// One digest over the node's file list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FilesDigest {
    /// The digest of the sorted `fileUrl size` lines of every file (written as file digests
    /// are).
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
    responses(
        (status = 200, body = FilesDigest),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 503, description = "Too many listings at once; see Retry-After", body = ErrorBody),
    )
)]
pub async fn files_digest(
    State(state): State<AppState>,
    Query(query): Query<DigestQuery>,
) -> Result<Response, ApiError> {
    let algorithm =
        serve::digest_algorithm(query.digest_algorithm.as_deref())?.unwrap_or(Algorithm::Sha256);
    let listing = match state.live.list_files().await {
        Ok(listing) => listing,
        Err(e) => return Ok(busy_or_error(e)),
    };
    let d = serve::list_digest(&listing.entries, algorithm);
    Ok(Json(FilesDigest {
        digest: d.digest,
        digest_algorithm: d.algorithm.name().into(),
        files: d.files,
        total_size: d.total_size,
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::livemigration::files::DirType;

    /// The streamed listing is byte for byte what serializing the whole `FileList` gives,
    /// whatever the number of entries (none, one, several chunks).
    #[tokio::test]
    async fn a_streamed_listing_is_the_serialized_file_list() {
        for n in [0usize, 1, 2, 3_000] {
            let entries: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    dir_type: if i % 3 == 0 {
                        DirType::Data
                    } else {
                        DirType::Hints
                    },
                    dir_index: i % 2,
                    path: format!("ks/t-{i}/nb-{i}-big-\"Data\".db"),
                    size: i as u64 * 7,
                    is_dir: i % 5 == 0,
                    modified_ms: 1_700_000_000_000 + i as u64,
                    mode: 0o600 + (i as u32 % 0o100),
                })
                .collect();
            let whole = serde_json::to_vec(&FileList {
                total_size: total_size(&entries),
                files: entries.iter().map(FileInfo::of).collect(),
            })
            .unwrap();
            let permit = std::sync::Arc::new(tokio::sync::Semaphore::new(1))
                .try_acquire_owned()
                .unwrap();
            let body = ListingBody::new(serve::Listing { entries, permit });
            let chunks: Vec<bytes::Bytes> = body.map(|c| c.unwrap()).collect();
            assert!(n < 3_000 || chunks.len() > 2, "{} chunks", chunks.len());
            assert_eq!(chunks.concat(), whole, "{n} entries");
        }
    }
}
