//! Cassandra Sidecar's snapshot routes, for a bulk reader (drover's `source.bulkRead:
//! snapshot`, or a Sidecar client such as Cassandra Analytics' bulk reader): take a snapshot
//! of a table, list its files, download one, clear it. Paths, parameters and answers follow
//! the Sidecar's; the work is [`crate::snapshots`]'.

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorBody};
use crate::snapshots::SnapshotError;

impl From<SnapshotError> for ApiError {
    fn from(err: SnapshotError) -> Self {
        let status = match &err {
            SnapshotError::Disabled | SnapshotError::NotFound(_) => StatusCode::NOT_FOUND,
            SnapshotError::Invalid(_) => StatusCode::BAD_REQUEST,
            SnapshotError::Forbidden(_) => StatusCode::FORBIDDEN,
            SnapshotError::Exists(_) => StatusCode::CONFLICT,
            SnapshotError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            SnapshotError::Failed(_) | SnapshotError::Io { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        ApiError::new(status, err.to_string())
    }
}

/// Whether a path is one of the snapshot routes.
fn is_snapshot_route(path: &str) -> bool {
    path.starts_with("/api/v1/keyspaces/") && path.contains("/snapshots/")
}

/// The on-demand filter: every snapshot route answers 404 until `sstable_snapshots.enabled`,
/// before authentication, so a node that serves no snapshots shows none.
pub async fn filter(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if is_snapshot_route(request.uri().path()) && !state.snapshots.enabled() {
        return if state.config.auth.is_enabled() {
            super::error::not_found(request.uri().clone())
                .await
                .into_response()
        } else {
            ApiError::from(SnapshotError::Disabled).into_response()
        };
    }
    next.run(request).await
}

/// The query of a snapshot's creation.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CreateQuery {
    /// Cassandra removes the snapshot after this long (`30m`, `2h`, `1d`).
    pub ttl: Option<String>,
}

/// Sidecar's answer to a snapshot's creation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateResponse {
    /// `Success`.
    pub result: String,
}

/// Takes a snapshot of a table (`nodetool snapshot -t {snapshot} -kt {keyspace}.{table}`,
/// through the node's JMX).
#[utoipa::path(
    put,
    path = "/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots/{snapshot}",
    tag = "snapshots",
    params(
        ("keyspace" = String, Path, description = "Keyspace, optionally in double quotes"),
        ("table" = String, Path, description = "Table, optionally in double quotes"),
        ("snapshot" = String, Path, description = "Letters, digits, '_', '-' and '.' (not first), at most 128"),
        CreateQuery,
    ),
    responses(
        (status = 200, body = CreateResponse),
        (status = 400, description = "A bad name or ttl", body = ErrorBody),
        (status = 403, description = "A system keyspace", body = ErrorBody),
        (status = 404, description = "Snapshots are off (`sstable_snapshots.enabled`), or no such table", body = ErrorBody),
        (status = 409, description = "A snapshot of that name exists", body = ErrorBody),
        (status = 500, description = "nodetool failed", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Path((keyspace, table, snapshot)): Path<(String, String, String)>,
    Query(query): Query<CreateQuery>,
) -> Result<Json<CreateResponse>, ApiError> {
    state
        .snapshots
        .create(&keyspace, &table, &snapshot, query.ttl.as_deref())
        .await?;
    Ok(Json(CreateResponse {
        result: "Success".into(),
    }))
}

/// One file of a snapshot, as Sidecar's `ListSnapshotFilesResponse.FileInfo`.
#[derive(Debug, Serialize, Deserialize, ToSchema, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotFileInfo {
    /// Bytes.
    pub size: u64,
    /// The host the listing was asked of.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The file's data directory (`dataDirectoryIndex` of its download).
    pub data_dir_index: usize,
    /// The snapshot.
    pub snapshot_name: String,
    /// The keyspace (Sidecar's spelling).
    #[serde(rename = "keySpaceName")]
    pub keyspace_name: String,
    /// The table.
    pub table_name: String,
    /// The component's file name.
    pub file_name: String,
}

/// Sidecar's `ListSnapshotFilesResponse`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListResponse {
    /// Every file of the snapshot.
    pub snapshot_files_info: Vec<SnapshotFileInfo>,
}

/// Lists the files of a snapshot, in every data directory of the node.
#[utoipa::path(
    get,
    path = "/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots/{snapshot}",
    tag = "snapshots",
    params(
        ("keyspace" = String, Path, description = "Keyspace, optionally in double quotes"),
        ("table" = String, Path, description = "Table, optionally in double quotes"),
        ("snapshot" = String, Path, description = "The snapshot"),
    ),
    responses(
        (status = 200, body = ListResponse),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "A system keyspace, or a keyspace, table or snapshot directory that is a symbolic link", body = ErrorBody),
        (status = 404, description = "Snapshots are off, or no such snapshot", body = ErrorBody),
        (status = 500, description = "More files than `sstable_snapshots.max_listed_files`, or unreadable", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Path((keyspace, table, snapshot)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<ListResponse>, ApiError> {
    let files = state.snapshots.list(&keyspace, &table, &snapshot).await?;
    let (host, port) = host_of(&headers);
    let unquote = |s: &str| s.trim_matches('"').to_string();
    Ok(Json(ListResponse {
        snapshot_files_info: files
            .into_iter()
            .map(|f| SnapshotFileInfo {
                size: f.size,
                host: host.clone(),
                port,
                data_dir_index: f.data_dir_index,
                snapshot_name: snapshot.clone(),
                keyspace_name: unquote(&keyspace),
                table_name: unquote(&table),
                file_name: f.file_name,
            })
            .collect(),
    }))
}

/// The host and port a client reached this daemon at (its `Host` header).
fn host_of(headers: &HeaderMap) -> (String, u16) {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match host.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') => (h.to_string(), p.parse().unwrap_or(80)),
        _ => (host.to_string(), 80),
    }
}

/// Clears the snapshot of this table only, as the Sidecar does: its `snapshots/{snapshot}`
/// directory is removed in every data directory, without following links (`nodetool
/// clearsnapshot` would clear the name in every table of the keyspace).
#[utoipa::path(
    delete,
    path = "/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots/{snapshot}",
    tag = "snapshots",
    params(
        ("keyspace" = String, Path, description = "Keyspace, optionally in double quotes"),
        ("table" = String, Path, description = "Table, optionally in double quotes"),
        ("snapshot" = String, Path, description = "The snapshot"),
    ),
    responses(
        (status = 200, description = "Cleared"),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "A system keyspace, or a keyspace, table or snapshot directory that is a symbolic link", body = ErrorBody),
        (status = 404, description = "Snapshots are off, or no such snapshot", body = ErrorBody),
        (status = 500, description = "The snapshot's directory could not be removed", body = ErrorBody),
    )
)]
pub async fn clear(
    State(state): State<AppState>,
    Path((keyspace, table, snapshot)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    state.snapshots.clear(&keyspace, &table, &snapshot).await?;
    Ok(StatusCode::OK)
}

/// The query of a component's download.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ComponentQuery {
    /// The data directory holding it (`dataDirIndex` of the listing); the first holding the
    /// file when not given.
    pub data_directory_index: Option<usize>,
}

/// Downloads one file of a snapshot; one `Range` (`bytes=a-b`, `bytes=a-`, `bytes=-n`) is
/// served as 206.
#[utoipa::path(
    get,
    path = "/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots/{snapshot}/components/{component}",
    tag = "snapshots",
    params(
        ("keyspace" = String, Path, description = "Keyspace, optionally in double quotes"),
        ("table" = String, Path, description = "Table, optionally in double quotes"),
        ("snapshot" = String, Path, description = "The snapshot"),
        ("component" = String, Path, description = "The file name, e.g. `nb-1-big-Data.db`"),
        ComponentQuery,
    ),
    responses(
        (status = 200, description = "The whole file", content_type = "application/octet-stream"),
        (status = 206, description = "The range", content_type = "application/octet-stream"),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "A system keyspace, or a keyspace, table or snapshot directory that is a symbolic link", body = ErrorBody),
        (status = 404, description = "Snapshots are off, or no such snapshot or file", body = ErrorBody),
        (status = 416, description = "Range not satisfiable", body = ErrorBody),
        (status = 429, description = "More downloads than `sstable_snapshots.concurrent_downloads`; see Retry-After", body = ErrorBody),
    )
)]
pub async fn component(
    State(state): State<AppState>,
    Path((keyspace, table, snapshot, component)): Path<(String, String, String, String)>,
    Query(query): Query<ComponentQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let opened = match state
        .snapshots
        .open(
            (&keyspace, &table, &snapshot),
            &component,
            query.data_directory_index,
        )
        .await
    {
        Ok(opened) => opened,
        Err(e @ SnapshotError::Busy(_)) => {
            let mut response = ApiError::from(e).into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(response);
        }
        Err(e) => return Err(e.into()),
    };
    let served = crate::livemigration::serve::ServedFile {
        file: opened.file,
        permit: opened.permit,
    };
    super::live_migration::files::send_file(served, &headers).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_routes_are_told_apart_from_others() {
        assert!(is_snapshot_route(
            "/api/v1/keyspaces/ks/tables/t/snapshots/s"
        ));
        assert!(is_snapshot_route(
            "/api/v1/keyspaces/ks/tables/t/snapshots/s/components/nb-1-big-Data.db"
        ));
        assert!(!is_snapshot_route(
            "/api/v1/uploads/x/keyspaces/ks/tables/t/import"
        ));
    }

    #[test]
    fn a_listing_has_the_fields_of_sidecars_list_snapshot_files_response() {
        let listing = ListResponse {
            snapshot_files_info: vec![SnapshotFileInfo {
                size: 15,
                host: "node1".into(),
                port: 9043,
                data_dir_index: 1,
                snapshot_name: "s1".into(),
                keyspace_name: "shop".into(),
                table_name: "orders".into(),
                file_name: "nb-1-big-Data.db".into(),
            }],
        };
        assert_eq!(
            serde_json::to_value(&listing).unwrap(),
            serde_json::json!({"snapshotFilesInfo": [{
                "size": 15, "host": "node1", "port": 9043, "dataDirIndex": 1,
                "snapshotName": "s1", "keySpaceName": "shop", "tableName": "orders",
                "fileName": "nb-1-big-Data.db"
            }]})
        );
    }

    #[test]
    fn the_host_is_the_one_the_client_reached() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:9043"));
        assert_eq!(host_of(&h), ("127.0.0.1".to_string(), 9043));
        h.insert(header::HOST, HeaderValue::from_static("node1"));
        assert_eq!(host_of(&h), ("node1".to_string(), 80));
    }
}
