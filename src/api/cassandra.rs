//! Cassandra Sidecar's cluster-metadata routes, the first calls a Sidecar client (Cassandra
//! Analytics' bulk writer and reader) makes before it uses the bulk routes: the node's
//! settings, its ring, a keyspace's token-range replicas and schema, and the time. Paths and
//! JSON field names are the Sidecar's (its client's response classes are named on each
//! type); the facts are [`crate::cassandra::metadata`]'s, read from the local node over CQL.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorBody};
use crate::cassandra::metadata::{self, MetadataError, RingNode};

impl From<MetadataError> for ApiError {
    fn from(err: MetadataError) -> Self {
        let status = match &err {
            MetadataError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            MetadataError::UnknownKeyspace(_) => StatusCode::NOT_FOUND,
            MetadataError::Invalid(_) => StatusCode::BAD_REQUEST,
            MetadataError::Unsupported(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, err.to_string())
    }
}

/// The keyspace of a path, as the Sidecar checks it: its characters (400), not a system
/// keyspace (403), folded to lower case unless quoted.
fn keyspace(raw: &str) -> Result<String, ApiError> {
    crate::cassandra::names::keyspace(raw).map_err(|e| {
        let status = match e {
            crate::cassandra::names::NameError::Forbidden(_) => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.to_string())
    })?;
    Ok(metadata::keyspace_name(raw)?)
}

/// Sidecar's `NodeSettings`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSettingsBody {
    /// The node's `release_version`.
    #[schema(example = "5.0.6")]
    pub release_version: String,
    /// The partitioner's class.
    #[schema(example = "org.apache.cassandra.dht.Murmur3Partitioner")]
    pub partitioner: String,
    /// The node's data center.
    pub datacenter: String,
    /// Its native transport address.
    pub rpc_address: String,
    /// Its native transport port.
    pub rpc_port: i32,
    /// Its tokens, in ring order.
    pub tokens: Vec<String>,
    /// `{"version": ...}`: the answering daemon's version (drover's, where the Sidecar puts
    /// its own).
    pub sidecar: BTreeMap<String, String>,
    /// The node's host id: not in Sidecar's class (its clients ignore unknown fields); drover
    /// adds it.
    pub host_id: String,
}

/// The local node's settings: release version, partitioner, data center, native address and
/// port, tokens.
#[utoipa::path(
    get,
    path = "/api/v1/cassandra/settings",
    tag = "cassandra",
    responses(
        (status = 200, body = NodeSettingsBody),
        (status = 503, description = "The node did not answer within cassandra.health_check_timeout", body = ErrorBody),
    )
)]
pub async fn settings(State(state): State<AppState>) -> Result<Json<NodeSettingsBody>, ApiError> {
    let s = state.node.settings().await?;
    Ok(Json(NodeSettingsBody {
        release_version: s.release_version,
        partitioner: s.partitioner,
        datacenter: s.datacenter,
        rpc_address: s.rpc_address.to_string(),
        rpc_port: s.rpc_port,
        tokens: s.tokens,
        sidecar: BTreeMap::from([("version".to_string(), env!("CARGO_PKG_VERSION").to_string())]),
        host_id: s.host_id.to_string(),
    }))
}

/// Sidecar's `SchemaResponse`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SchemaBody {
    /// The keyspace, as the node names it.
    pub keyspace: String,
    /// Its CREATE statements, separated by blank lines.
    pub schema: String,
}

/// A keyspace's CREATE statements: the keyspace (in the form the Sidecar's driver writes it),
/// then its types, tables, indexes and views as the node's `DESCRIBE KEYSPACE` writes them.
#[utoipa::path(
    get,
    path = "/api/v1/keyspaces/{keyspace}/schema",
    tag = "cassandra",
    params(("keyspace" = String, Path, description = "Keyspace, optionally in double quotes (case kept)")),
    responses(
        (status = 200, body = SchemaBody),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "A system keyspace", body = ErrorBody),
        (status = 404, description = "No such keyspace", body = ErrorBody),
        (status = 500, description = "A schema larger than 16 MiB", body = ErrorBody),
        (status = 503, description = "The node did not answer", body = ErrorBody),
    )
)]
pub async fn schema(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<SchemaBody>, ApiError> {
    let ks = keyspace(&raw)?;
    let schema = state.node.schema(&ks).await?;
    Ok(Json(SchemaBody {
        keyspace: ks,
        schema,
    }))
}

/// Sidecar's `TokenRangeReplicasResponse.ReplicaInfo`.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaInfo {
    /// Exclusive start token.
    pub start: String,
    /// Inclusive end token.
    pub end: String,
    /// Data center → replicas (`address:port`, the internode address and port).
    pub replicas_by_datacenter: BTreeMap<String, Vec<String>>,
}

/// Sidecar's `TokenRangeReplicasResponse.ReplicaMetadata`.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ReplicaMetadata {
    /// `Normal`, `Joining`, `Leaving`, `Moving`, `Replacing`.
    pub state: String,
    /// `Up`, `Down`, `?`.
    pub status: String,
    /// The replica's address (drover does not reverse-resolve it: a client reaching the
    /// replica's drover by this name reaches that one).
    pub fqdn: String,
    /// The internode address.
    pub address: String,
    /// The internode port.
    pub port: u16,
    /// The data center.
    pub datacenter: String,
}

/// Sidecar's `TokenRangeReplicasResponse`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenRangeReplicasBody {
    /// Where a write of each range goes (natural replicas: pending ranges are not visible over
    /// CQL).
    pub write_replicas: Vec<ReplicaInfo>,
    /// Where a read of each range goes.
    pub read_replicas: Vec<ReplicaInfo>,
    /// Every replica named above, by `address:port`.
    pub replica_metadata: BTreeMap<String, ReplicaMetadata>,
}

fn replica_metadata(node: &RingNode) -> ReplicaMetadata {
    ReplicaMetadata {
        state: node.state.name().to_string(),
        status: node.status.name().to_string(),
        fqdn: node.address.to_string(),
        address: node.address.to_string(),
        port: node.port,
        datacenter: node.datacenter.clone(),
    }
}

/// A keyspace's token ranges and their replicas in each data center.
#[utoipa::path(
    get,
    path = "/api/v1/keyspaces/{keyspace}/token-range-replicas",
    tag = "cassandra",
    params(("keyspace" = String, Path, description = "Keyspace, optionally in double quotes (case kept)")),
    responses(
        (status = 200, body = TokenRangeReplicasBody),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "A system keyspace", body = ErrorBody),
        (status = 404, description = "No such keyspace", body = ErrorBody),
        (status = 503, description = "The node did not answer", body = ErrorBody),
    )
)]
pub async fn token_range_replicas(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<TokenRangeReplicasBody>, ApiError> {
    let ks = keyspace(&raw)?;
    let placed = state.node.replicas(&ks).await?;
    let ranges: Vec<ReplicaInfo> = placed
        .ranges
        .into_iter()
        .map(|r| ReplicaInfo {
            start: r.start.to_string(),
            end: r.end.to_string(),
            replicas_by_datacenter: r.replicas,
        })
        .collect();
    let write = ranges
        .iter()
        .map(|r| ReplicaInfo {
            start: r.start.clone(),
            end: r.end.clone(),
            replicas_by_datacenter: r.replicas_by_datacenter.clone(),
        })
        .collect();
    Ok(Json(TokenRangeReplicasBody {
        write_replicas: write,
        read_replicas: ranges,
        replica_metadata: placed
            .nodes
            .iter()
            .map(|(endpoint, node)| (endpoint.clone(), replica_metadata(node)))
            .collect(),
    }))
}

/// Sidecar's `RingEntry`; a ring answer (`RingResponse`) is a list of them.
#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RingEntry {
    /// The node's data center.
    pub datacenter: String,
    /// Its internode address.
    pub address: String,
    /// Its internode port.
    pub port: u16,
    /// Its rack.
    pub rack: String,
    /// `Up`, `Down`, `?`.
    pub status: String,
    /// `Normal`, `Joining`, `Leaving`, `Moving`, `Replacing`.
    pub state: String,
    /// Its data, as nodetool writes it (`33.75 MiB`); `?` when unknown.
    pub load: String,
    /// Its effective ownership (`100.00%`); `?` when it means nothing.
    pub owns: String,
    /// The token.
    pub token: String,
    /// Its address (not reverse-resolved).
    pub fqdn: String,
    /// Its host id.
    pub host_id: String,
}

async fn ring_of(state: &AppState, ks: Option<&str>) -> Result<Json<Vec<RingEntry>>, ApiError> {
    let ring = state.node.ring(ks).await?;
    Ok(Json(
        ring.into_iter()
            .map(|t| RingEntry {
                datacenter: t.node.datacenter.clone(),
                address: t.node.address.to_string(),
                port: t.node.port,
                rack: t.node.rack.clone(),
                status: t.node.status.name().to_string(),
                state: t.node.state.name().to_string(),
                load: t
                    .node
                    .load
                    .map_or_else(|| "?".to_string(), metadata::load_text),
                owns: metadata::owns_text(t.owns),
                token: t.token,
                fqdn: t.node.address.to_string(),
                host_id: t.node.host_id.to_string(),
            })
            .collect(),
    ))
}

/// The ring: one entry per token, sorted by data center then token, ownership of the common
/// replication of the non-system keyspaces (`?` when they differ).
#[utoipa::path(
    get,
    path = "/api/v1/cassandra/ring",
    tag = "cassandra",
    responses(
        (status = 200, body = Vec<RingEntry>),
        (status = 503, description = "The node did not answer", body = ErrorBody),
    )
)]
pub async fn ring(State(state): State<AppState>) -> Result<Json<Vec<RingEntry>>, ApiError> {
    ring_of(&state, None).await
}

/// The ring with each node's effective ownership of a keyspace.
#[utoipa::path(
    get,
    path = "/api/v1/cassandra/ring/keyspaces/{keyspace}",
    tag = "cassandra",
    params(("keyspace" = String, Path, description = "Keyspace, optionally in double quotes (case kept)")),
    responses(
        (status = 200, body = Vec<RingEntry>),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "A system keyspace", body = ErrorBody),
        (status = 404, description = "No such keyspace", body = ErrorBody),
        (status = 503, description = "The node did not answer", body = ErrorBody),
    )
)]
pub async fn ring_keyspace(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<Vec<RingEntry>>, ApiError> {
    let ks = keyspace(&raw)?;
    ring_of(&state, Some(&ks)).await
}

/// Sidecar's `TimeSkewResponse`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeSkewBody {
    /// This host's time, milliseconds since the epoch.
    pub current_time: i64,
    /// The skew a client may have from it (`cassandra.allowable_time_skew`).
    pub allowable_skew_in_minutes: i32,
}

/// This host's clock, for a client to check its own against (a bulk writer's timestamps).
#[utoipa::path(
    get,
    path = "/api/v1/time-skew",
    tag = "cassandra",
    responses((status = 200, body = TimeSkewBody))
)]
pub async fn time_skew(State(state): State<AppState>) -> Json<TimeSkewBody> {
    let minutes = state.config.cassandra.allowable_time_skew().as_secs() / 60;
    Json(TimeSkewBody {
        current_time: chrono::Utc::now().timestamp_millis(),
        allowable_skew_in_minutes: i32::try_from(minutes).unwrap_or(i32::MAX),
    })
}
