//! What the local node says of itself, its ring and its schema, read over CQL: the answers of
//! Cassandra Sidecar's cluster-metadata routes (node settings, ring, token-range replicas,
//! schema) without HTTP. The Sidecar reads most of these over JMX (`StorageService`,
//! `EndpointSnitchInfo`); drover reads the same facts from the node's own tables
//! (`system.local`, `system.peers_v2`, `system_views.gossip_info`, `system_schema`, the
//! node's `DESCRIBE`) and places replicas with the driver's replica locator, so that no JVM
//! is started per request. Where a fact is not visible over CQL (pending ranges, the failure
//! detector's verdict on a peer) the answer says what it is built from; see
//! `docs/sidecar-compatibility.md`.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use scylla::client::session::Session;
use scylla::cluster::metadata::Strategy;
use scylla::routing::Token;
use uuid::Uuid;

use super::{LocalNode, NodeError};

/// The most bytes of CREATE statements one schema answer holds: a keyspace with more is
/// refused rather than answered in an unbounded document.
pub const MAX_SCHEMA_BYTES: usize = 16 << 20;

/// Why a metadata answer could not be given. Each message is a complete sentence.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The node did not answer (down, refusing, or too slow).
    #[error("Cassandra service is unavailable: {0}")]
    Unavailable(String),
    /// No such keyspace.
    #[error("Keyspace '{0}' does not exist.")]
    UnknownKeyspace(String),
    /// A malformed name.
    #[error("{0}")]
    Invalid(String),
    /// What drover cannot answer (a partitioner other than Murmur3, a schema too large).
    #[error("{0}")]
    Unsupported(String),
}

impl From<NodeError> for MetadataError {
    fn from(e: NodeError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

fn query_failed(e: impl std::fmt::Display) -> MetadataError {
    MetadataError::Unavailable(format!("the node did not answer a metadata query: {e}"))
}

/// The node's settings: Sidecar's `NodeSettings`, from `system.local`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `release_version`.
    pub release_version: String,
    /// The partitioner's class name.
    pub partitioner: String,
    /// The node's data center.
    pub datacenter: String,
    /// Its native transport address.
    pub rpc_address: IpAddr,
    /// Its native transport port.
    pub rpc_port: i32,
    /// Its tokens, in the ring's order.
    pub tokens: Vec<String>,
    /// Its host id.
    pub host_id: Uuid,
}

/// A node's gossip status, as the Sidecar names it (`Up`, `Down`; `?` when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Answering.
    Up,
    /// Announced its shutdown.
    Down,
    /// The local node has no gossip state for it.
    Unknown,
}

impl Status {
    /// The Sidecar's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Up => "Up",
            Self::Down => "Down",
            Self::Unknown => "?",
        }
    }
}

/// A node's ring state, as the Sidecar names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// In the ring.
    Normal,
    /// Bootstrapping.
    Joining,
    /// Bootstrapping in place of another node.
    Replacing,
    /// Decommissioning.
    Leaving,
    /// Moving its token.
    Moving,
}

impl State {
    /// The Sidecar's spelling (`NodeInfo.NodeState`'s display name).
    pub fn name(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Joining => "Joining",
            Self::Replacing => "Replacing",
            Self::Leaving => "Leaving",
            Self::Moving => "Moving",
        }
    }

    /// The state of a gossip `STATUS` value (`NORMAL,<token>`, `BOOT,...`, `LEAVING,...`).
    fn of_gossip(status: &str) -> Self {
        match status.split(',').next().unwrap_or("") {
            "BOOT" => Self::Joining,
            "BOOT_REPLACE" => Self::Replacing,
            "LEAVING" => Self::Leaving,
            "MOVING" => Self::Moving,
            _ => Self::Normal,
        }
    }
}

/// One node of the ring as the local node sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RingNode {
    /// Its host id.
    pub host_id: Uuid,
    /// Its internode (broadcast) address: the address the Sidecar names replicas by.
    pub address: IpAddr,
    /// Its internode (storage) port.
    pub port: u16,
    /// Its data center.
    pub datacenter: String,
    /// Its rack.
    pub rack: String,
    /// Its tokens.
    pub tokens: Vec<String>,
    /// Up or down.
    pub status: Status,
    /// Its ring state.
    pub state: State,
    /// Bytes of live data it reports through gossip.
    pub load: Option<f64>,
}

impl RingNode {
    /// `address:port` as the Sidecar keys replicas (`[v6]:port` for IPv6).
    pub fn endpoint(&self) -> String {
        std::net::SocketAddr::new(self.address, self.port).to_string()
    }
}

/// One token of the ring with its node and the node's effective ownership.
#[derive(Debug, Clone, PartialEq)]
pub struct RingToken {
    /// The token.
    pub token: String,
    /// Its node.
    pub node: Arc<RingNode>,
    /// The node's effective ownership (0..=1), when it means something.
    pub owns: Option<f64>,
}

/// One token range `(start, end]` and its replicas by data center.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeReplicas {
    /// Exclusive start.
    pub start: i64,
    /// Inclusive end.
    pub end: i64,
    /// Data center → replica endpoints (`address:port`), in placement order.
    pub replicas: BTreeMap<String, Vec<String>>,
}

/// The token ranges of a keyspace and the nodes replicating them.
#[derive(Debug, Clone)]
pub struct Replicas {
    /// Every range, sorted by start.
    pub ranges: Vec<RangeReplicas>,
    /// Every replica named in `ranges`, by endpoint.
    pub nodes: BTreeMap<String, Arc<RingNode>>,
}

/// The lowest and highest Murmur3 tokens.
const MIN_TOKEN: i64 = i64::MIN;
const MAX_TOKEN: i64 = i64::MAX;

/// A keyspace name as the Sidecar takes it: double quotes keep its case, otherwise it is
/// folded to lower case as CQL does.
pub fn keyspace_name(raw: &str) -> Result<String, MetadataError> {
    static UNQUOTED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$").expect("a valid pattern")
    });
    static QUOTED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"^"[a-zA-Z0-9_]{1,48}"$"#).expect("a valid pattern")
    });
    if QUOTED.is_match(raw) {
        Ok(raw[1..raw.len() - 1].to_string())
    } else if UNQUOTED.is_match(raw) {
        Ok(raw.to_ascii_lowercase())
    } else {
        Err(MetadataError::Invalid(format!(
            "Invalid characters in keyspace: {}",
            crate::answer::cap(raw)
        )))
    }
}

/// `name` in double quotes when CQL needs them (upper case, a leading digit, other
/// characters), as the driver's `quoteIfNecessary` writes it.
fn quote_if_necessary(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A keyspace's replication as the driver's replica locator takes it.
fn strategy(replication: &HashMap<String, String>) -> Strategy {
    let class = replication.get("class").map(String::as_str).unwrap_or("");
    let short = class.rsplit('.').next().unwrap_or(class);
    let number = |v: &String| v.split('/').next().and_then(|n| n.trim().parse().ok());
    match short {
        "SimpleStrategy" => Strategy::SimpleStrategy {
            replication_factor: replication
                .get("replication_factor")
                .and_then(number)
                .unwrap_or(1),
        },
        "NetworkTopologyStrategy" => Strategy::NetworkTopologyStrategy {
            datacenter_repfactors: replication
                .iter()
                .filter(|(k, _)| k.as_str() != "class" && k.as_str() != "replication_factor")
                .filter_map(|(k, v)| Some((k.clone(), number(v)?)))
                .collect(),
        },
        "LocalStrategy" => Strategy::LocalStrategy,
        _ => Strategy::Other {
            name: class.to_string(),
            data: replication.clone(),
        },
    }
}

/// The Sidecar's load figure: Cassandra's `FileUtils.stringifyFileSize` (`#.##` of the
/// largest binary unit, `bytes` below 1 KiB).
pub fn load_text(bytes: f64) -> String {
    const UNITS: [(f64, &str); 4] = [
        (1024.0 * 1024.0 * 1024.0 * 1024.0, "TiB"),
        (1024.0 * 1024.0 * 1024.0, "GiB"),
        (1024.0 * 1024.0, "MiB"),
        (1024.0, "KiB"),
    ];
    let (value, unit) = UNITS
        .iter()
        .find(|(size, _)| bytes >= *size)
        .map_or((bytes, "bytes"), |(size, unit)| (bytes / size, unit));
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// The Sidecar's ownership figure (`##0.00%`).
pub fn owns_text(owns: Option<f64>) -> String {
    owns.map_or_else(|| "?".to_string(), |o| format!("{:.2}%", o * 100.0))
}

/// The fraction of the Murmur3 ring in `(start, end]`.
fn width(start: i64, end: i64) -> f64 {
    let w = (end as i128 - start as i128).rem_euclid(1i128 << 64);
    let w = if w == 0 { 1i128 << 64 } else { w };
    w as f64 / (1u128 << 64) as f64
}

impl LocalNode {
    /// Runs `f` with the session, within the health check timeout; a failure drops the
    /// session so the next request reconnects.
    async fn read<T, F>(&self, f: F) -> Result<T, MetadataError>
    where
        F: AsyncFnOnce(&Session) -> Result<T, MetadataError>,
    {
        let timeout = self.config.health_check_timeout();
        let session = self.session().await?;
        match tokio::time::timeout(timeout, f(&session)).await {
            Ok(Err(e @ MetadataError::Unavailable(_))) => {
                self.forget().await;
                Err(e)
            }
            Ok(result) => result,
            Err(_) => {
                self.forget().await;
                Err(MetadataError::Unavailable(format!(
                    "{} did not answer within {} (cassandra.health_check_timeout)",
                    self.address(),
                    humantime::format_duration(timeout)
                )))
            }
        }
    }

    /// The node's settings, from `system.local`.
    pub async fn settings(&self) -> Result<Settings, MetadataError> {
        self.read(async |s| {
            type Row = (
                Option<String>,
                Option<String>,
                Option<String>,
                Option<IpAddr>,
                Option<i32>,
                Option<Vec<String>>,
                Option<Uuid>,
            );
            let rows = s
                .query_unpaged(
                    "SELECT release_version, partitioner, data_center, rpc_address, rpc_port, tokens, host_id FROM system.local",
                    (),
                )
                .await
                .map_err(query_failed)?
                .into_rows_result()
                .map_err(query_failed)?;
            let (release, partitioner, dc, rpc, port, tokens, host_id) = rows
                .maybe_first_row::<Row>()
                .map_err(query_failed)?
                .ok_or_else(|| query_failed("system.local has no row"))?;
            let mut tokens = tokens.unwrap_or_default();
            sort_tokens(&mut tokens);
            Ok(Settings {
                release_version: release.unwrap_or_default(),
                partitioner: partitioner.unwrap_or_default(),
                datacenter: dc.unwrap_or_default(),
                rpc_address: rpc.unwrap_or(IpAddr::from([127, 0, 0, 1])),
                rpc_port: port.unwrap_or(9042),
                tokens,
                host_id: host_id.unwrap_or_default(),
            })
        })
        .await
    }

    /// Every node of the ring, the local node first: `system.local`, `system.peers_v2`, and
    /// the local node's gossip state of each (`system_views.gossip_info`).
    pub async fn ring_nodes(&self) -> Result<Vec<Arc<RingNode>>, MetadataError> {
        self.read(async |s| ring_nodes(s).await).await
    }

    /// The ring's tokens with their nodes, sorted by data center then token, and each node's
    /// effective ownership of `keyspace` (of the common replication of the non-system
    /// keyspaces when none is given, unknown when they differ), as `nodetool ring` shows it.
    pub async fn ring(&self, keyspace: Option<&str>) -> Result<Vec<RingToken>, MetadataError> {
        self.read(async |s| {
            let nodes = ring_nodes(s).await?;
            let replication = match keyspace {
                Some(ks) => Some(replication_of(s, ks).await?),
                None => common_replication(s).await?,
            };
            let owns = match replication {
                Some(r) => Some(ownership(s, &nodes, &strategy(&r)).await?),
                None => None,
            };
            let mut out = Vec::new();
            for node in &nodes {
                for token in &node.tokens {
                    out.push(RingToken {
                        token: token.clone(),
                        node: node.clone(),
                        owns: owns
                            .as_ref()
                            .map(|o| o.get(&node.host_id).copied().unwrap_or(0.0)),
                    });
                }
            }
            out.sort_by(|a, b| {
                (&a.node.datacenter, token_value(&a.token))
                    .cmp(&(&b.node.datacenter, token_value(&b.token)))
            });
            Ok(out)
        })
        .await
    }

    /// The token ranges of `keyspace` and their replicas, by data center.
    pub async fn replicas(&self, keyspace: &str) -> Result<Replicas, MetadataError> {
        self.read(async |s| {
            let nodes = ring_nodes(s).await?;
            let replication = replication_of(s, keyspace).await?;
            replicas(s, &nodes, &strategy(&replication)).await
        })
        .await
    }

    /// The CREATE statements of `keyspace`: the keyspace in the form the Sidecar's driver
    /// writes it (`WITH REPLICATION = { 'class' : '...', 'dc': 'n' } AND DURABLE_WRITES =
    /// true;`, which Cassandra Analytics parses), then its types, functions, tables, indexes
    /// and views as the node's own `DESCRIBE KEYSPACE` writes them.
    pub async fn schema(&self, keyspace: &str) -> Result<String, MetadataError> {
        self.read(async |s| {
            let (replication, durable) = keyspace_row(s, keyspace).await?;
            let mut out = keyspace_statement(keyspace, &replication, durable);
            out.push('\n');
            let describe = format!("DESCRIBE KEYSPACE {}", quote_if_necessary(keyspace));
            let mut pager = s
                .query_iter(describe, ())
                .await
                .map_err(query_failed)?
                .rows_stream::<(String, String, String, String)>()
                .map_err(query_failed)?;
            use futures::StreamExt;
            while let Some(row) = pager.next().await {
                let (_, kind, _, statement) = row.map_err(query_failed)?;
                if kind == "keyspace" {
                    continue;
                }
                out.push('\n');
                out.push_str(&statement);
                out.push('\n');
                if out.len() > MAX_SCHEMA_BYTES {
                    return Err(MetadataError::Unsupported(format!(
                        "the schema of keyspace {keyspace} is larger than {MAX_SCHEMA_BYTES} bytes"
                    )));
                }
            }
            Ok(out)
        })
        .await
    }
}

/// Tokens in ring order (numerically; a token that is not a number last).
fn sort_tokens(tokens: &mut [String]) {
    tokens.sort_by_key(|t| token_value(t));
}

fn token_value(t: &str) -> (bool, i128) {
    match t.parse::<i128>() {
        Ok(v) => (false, v),
        Err(_) => (true, 0),
    }
}

async fn ring_nodes(s: &Session) -> Result<Vec<Arc<RingNode>>, MetadataError> {
    type Local = (
        Option<Uuid>,
        Option<IpAddr>,
        Option<i32>,
        Option<String>,
        Option<String>,
        Option<Vec<String>>,
    );
    let local = s
        .query_unpaged(
            "SELECT host_id, broadcast_address, broadcast_port, data_center, rack, tokens FROM system.local",
            (),
        )
        .await
        .map_err(query_failed)?
        .into_rows_result()
        .map_err(query_failed)?;
    let mut rows: Vec<(Local, bool)> = local
        .rows::<Local>()
        .map_err(query_failed)?
        .map(|r| r.map(|r| (r, true)))
        .collect::<Result<_, _>>()
        .map_err(query_failed)?;
    let peers = s
        .query_unpaged(
            "SELECT host_id, peer, peer_port, data_center, rack, tokens FROM system.peers_v2",
            (),
        )
        .await
        .map_err(query_failed)?
        .into_rows_result()
        .map_err(query_failed)?;
    for r in peers.rows::<Local>().map_err(query_failed)? {
        rows.push((r.map_err(query_failed)?, false));
    }
    // The local node's gossip view of each endpoint: its status and load.
    let gossip = s
        .query_unpaged(
            "SELECT address, port, status, load FROM system_views.gossip_info",
            (),
        )
        .await
        .map_err(query_failed)?
        .into_rows_result()
        .map_err(query_failed)?;
    let mut gossiped: HashMap<(IpAddr, i32), (Option<String>, Option<String>)> = HashMap::new();
    for r in gossip
        .rows::<(Option<IpAddr>, Option<i32>, Option<String>, Option<String>)>()
        .map_err(query_failed)?
    {
        let (address, port, status, load) = r.map_err(query_failed)?;
        if let (Some(a), Some(p)) = (address, port) {
            gossiped.insert((a, p), (status, load));
        }
    }
    let mut nodes = Vec::new();
    for ((host_id, address, port, dc, rack, tokens), local) in rows {
        let (Some(host_id), Some(address)) = (host_id, address) else {
            continue;
        };
        let port = port.unwrap_or(7000);
        let (status, load) = gossiped
            .get(&(address, port))
            .cloned()
            .unwrap_or((None, None));
        let gossip_status = status.as_deref().unwrap_or("");
        let liveness = if local {
            // It answered this query.
            Status::Up
        } else if status.is_none() {
            Status::Unknown
        } else if gossip_status.starts_with("shutdown") || gossip_status.starts_with("LEFT") {
            Status::Down
        } else {
            Status::Up
        };
        let mut tokens = tokens.unwrap_or_default();
        sort_tokens(&mut tokens);
        nodes.push(Arc::new(RingNode {
            host_id,
            address,
            port: u16::try_from(port).unwrap_or(7000),
            datacenter: dc.unwrap_or_default(),
            rack: rack.unwrap_or_default(),
            tokens,
            status: liveness,
            state: State::of_gossip(gossip_status),
            load: load.and_then(|l| l.parse().ok()),
        }));
    }
    if nodes.is_empty() {
        return Err(query_failed("system.local has no host id"));
    }
    Ok(nodes)
}

/// A keyspace's `replication` and `durable_writes`; 404 when there is no such keyspace.
async fn keyspace_row(
    s: &Session,
    keyspace: &str,
) -> Result<(HashMap<String, String>, bool), MetadataError> {
    let rows = s
        .query_unpaged(
            "SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = ?",
            (keyspace,),
        )
        .await
        .map_err(query_failed)?
        .into_rows_result()
        .map_err(query_failed)?;
    let row = rows
        .maybe_first_row::<(Option<HashMap<String, String>>, Option<bool>)>()
        .map_err(query_failed)?
        .ok_or_else(|| MetadataError::UnknownKeyspace(keyspace.to_string()))?;
    Ok((row.0.unwrap_or_default(), row.1.unwrap_or(true)))
}

async fn replication_of(
    s: &Session,
    keyspace: &str,
) -> Result<HashMap<String, String>, MetadataError> {
    Ok(keyspace_row(s, keyspace).await?.0)
}

/// The replication every non-system keyspace shares, `None` when they differ (Cassandra's
/// `effectiveOwnership(null)` refuses then, and the Sidecar shows `?`); with no non-system
/// keyspace, one replica per range (the raw ownership of tokens).
async fn common_replication(s: &Session) -> Result<Option<HashMap<String, String>>, MetadataError> {
    let rows = s
        .query_unpaged(
            "SELECT keyspace_name, replication FROM system_schema.keyspaces",
            (),
        )
        .await
        .map_err(query_failed)?
        .into_rows_result()
        .map_err(query_failed)?;
    let mut common: Option<HashMap<String, String>> = None;
    for r in rows
        .rows::<(String, Option<HashMap<String, String>>)>()
        .map_err(query_failed)?
    {
        let (name, replication) = r.map_err(query_failed)?;
        let lower = name.to_ascii_lowercase();
        if crate::cassandra::SYSTEM_KEYSPACES.contains(&lower.as_str()) {
            continue;
        }
        let replication = replication.unwrap_or_default();
        match &common {
            None => common = Some(replication),
            Some(c) if *c == replication => {}
            Some(_) => return Ok(None),
        }
    }
    Ok(Some(common.unwrap_or_else(|| {
        HashMap::from([
            ("class".to_string(), "SimpleStrategy".to_string()),
            ("replication_factor".to_string(), "1".to_string()),
        ])
    })))
}

/// The ranges of the ring and the replicas of each under `strategy`, placed by the driver's
/// replica locator on the ring it read from the local node (refreshed first, so a node
/// added or moved since the last refresh is seen).
async fn replicas(
    s: &Session,
    nodes: &[Arc<RingNode>],
    strategy: &Strategy,
) -> Result<Replicas, MetadataError> {
    s.refresh_metadata().await.map_err(query_failed)?;
    let state = s.get_cluster_state();
    let locator = state.replica_locator();
    let by_host: HashMap<Uuid, Arc<RingNode>> =
        nodes.iter().map(|n| (n.host_id, n.clone())).collect();
    let tokens: Vec<i64> = locator.ring().iter().map(|(t, _)| t.value()).collect();
    if tokens.is_empty() {
        return Err(query_failed("the driver sees no token ring"));
    }
    let table = scylla::frame::response::result::TableSpec::borrowed("", "");
    let mut ranges = Vec::new();
    let mut used = BTreeMap::new();
    let mut place = |start: i64, end: i64, owner: i64| -> Result<(), MetadataError> {
        let mut replicas: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (node, _) in locator.replicas_for_token(Token::new(owner), strategy, None, &table) {
            let known = by_host.get(&node.host_id).ok_or_else(|| {
                MetadataError::Unavailable(format!(
                    "the ring changed while it was read (node {} is not in system.peers_v2); retry",
                    node.host_id
                ))
            })?;
            let endpoint = known.endpoint();
            let list = replicas.entry(known.datacenter.clone()).or_default();
            if !list.contains(&endpoint) {
                list.push(endpoint.clone());
            }
            used.insert(endpoint, known.clone());
        }
        ranges.push(RangeReplicas {
            start,
            end,
            replicas,
        });
        Ok(())
    };
    let (first, last) = (tokens[0], tokens[tokens.len() - 1]);
    // The wrapping range (last, first] is two ranges, as the Sidecar splits it: (last, max]
    // and (min, first].
    if last != MAX_TOKEN {
        place(last, MAX_TOKEN, first)?;
    }
    if first != MIN_TOKEN {
        place(MIN_TOKEN, first, first)?;
    }
    for pair in tokens.windows(2) {
        if pair[0] != pair[1] {
            place(pair[0], pair[1], pair[1])?;
        }
    }
    ranges.sort_by_key(|r| (r.start, r.end));
    Ok(Replicas {
        ranges,
        nodes: used,
    })
}

/// Each node's effective ownership under `strategy`: the share of the ring it replicates.
async fn ownership(
    s: &Session,
    nodes: &[Arc<RingNode>],
    strategy: &Strategy,
) -> Result<HashMap<Uuid, f64>, MetadataError> {
    let placed = replicas(s, nodes, strategy).await?;
    let by_endpoint: HashMap<String, Uuid> =
        nodes.iter().map(|n| (n.endpoint(), n.host_id)).collect();
    let mut owns: HashMap<Uuid, f64> = HashMap::new();
    for range in &placed.ranges {
        let w = width(range.start, range.end);
        for endpoint in range.replicas.values().flatten() {
            if let Some(id) = by_endpoint.get(endpoint) {
                *owns.entry(*id).or_default() += w;
            }
        }
    }
    Ok(owns)
}

/// `CREATE KEYSPACE` in the form of the Java driver 3's `KeyspaceMetadata.asCQLQuery`, which
/// the Sidecar answers and Cassandra Analytics' `CqlUtils` parses (its pattern is
/// `WITH REPLICATION = {...}`, in capitals); the class first, the other options in name order.
pub fn keyspace_statement(
    keyspace: &str,
    replication: &HashMap<String, String>,
    durable: bool,
) -> String {
    let class = replication.get("class").map(String::as_str).unwrap_or("");
    let mut options: Vec<_> = replication.iter().filter(|(k, _)| *k != "class").collect();
    options.sort();
    let mut out = format!(
        "CREATE KEYSPACE {} WITH REPLICATION = {{ 'class' : '{class}'",
        quote_if_necessary(keyspace)
    );
    for (k, v) in options {
        out.push_str(&format!(", '{k}': '{v}'"));
    }
    out.push_str(&format!(" }} AND DURABLE_WRITES = {durable};"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyspace_statement_is_the_drivers() {
        let r = HashMap::from([
            (
                "class".to_string(),
                "org.apache.cassandra.locator.NetworkTopologyStrategy".to_string(),
            ),
            ("dc2".to_string(), "3".to_string()),
            ("dc1".to_string(), "3".to_string()),
        ]);
        assert_eq!(
            keyspace_statement("Shop", &r, true),
            "CREATE KEYSPACE \"Shop\" WITH REPLICATION = { 'class' : 'org.apache.cassandra.locator.NetworkTopologyStrategy', 'dc1': '3', 'dc2': '3' } AND DURABLE_WRITES = true;"
        );
    }

    #[test]
    fn figures_are_written_as_nodetool_writes_them() {
        assert_eq!(load_text(35_387_051.0), "33.75 MiB");
        assert_eq!(load_text(1024.0), "1 KiB");
        assert_eq!(load_text(512.0), "512 bytes");
        assert_eq!(owns_text(Some(1.0)), "100.00%");
        assert_eq!(owns_text(Some(1.0 / 3.0)), "33.33%");
        assert_eq!(owns_text(None), "?");
    }

    #[test]
    fn ranges_have_their_share_of_the_ring() {
        assert_eq!(
            width(MIN_TOKEN, MAX_TOKEN),
            1.0 - 1.0 / (1u128 << 64) as f64
        );
        assert_eq!(width(5, 5), 1.0);
        assert!((width(0, MAX_TOKEN) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn keyspace_names_fold_unless_quoted() {
        assert_eq!(keyspace_name("Shop").unwrap(), "shop");
        assert_eq!(keyspace_name("\"Shop\"").unwrap(), "Shop");
        assert!(keyspace_name("a/b").is_err());
        assert!(keyspace_name("\"\"").is_err());
        assert_eq!(quote_if_necessary("shop_1"), "shop_1");
        assert_eq!(quote_if_necessary("Shop"), "\"Shop\"");
    }

    #[test]
    fn gossip_states() {
        assert_eq!(State::of_gossip("NORMAL,-1"), State::Normal);
        assert_eq!(State::of_gossip("BOOT_REPLACE,127.0.0.3"), State::Replacing);
        assert_eq!(State::of_gossip("LEAVING,5"), State::Leaving);
    }
}
