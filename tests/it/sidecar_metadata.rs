//! Cassandra Sidecar's cluster-metadata routes against the real source node: every answer is
//! read as the Sidecar's client reads it (a struct per response class, its field names and
//! types) and checked against what a second reader (the DataStax Python driver,
//! `tests/fidelity/node_reader.py`) says of the node: its tokens, host id, partitioner,
//! release, data center, the replicas of each range, the keyspace's tables, types and indexes.
//! And concurrent snapshot requests of one snapshot share one `nodetool snapshot`, counted by
//! a wrapper around nodetool.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use test_support::Daemon;
use test_support::cql::{exec, session, src_addr};

use crate::fidelity::{host_port, read_with};

/// Mirrors `org.apache.cassandra.sidecar.common.response.NodeSettings`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSettings {
    release_version: String,
    partitioner: String,
    datacenter: String,
    rpc_address: IpAddr,
    rpc_port: i32,
    tokens: BTreeSet<String>,
    sidecar: BTreeMap<String, String>,
}

/// Mirrors `org.apache.cassandra.sidecar.common.response.SchemaResponse`.
#[derive(Debug, Deserialize)]
struct SchemaResponse {
    keyspace: String,
    schema: String,
}

/// Mirrors `org.apache.cassandra.sidecar.common.response.data.RingEntry` (a `RingResponse`
/// is a list of them).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RingEntry {
    datacenter: String,
    address: String,
    port: i32,
    rack: String,
    status: String,
    state: String,
    load: String,
    owns: String,
    token: String,
    fqdn: String,
    host_id: String,
}

/// Mirrors `TokenRangeReplicasResponse.ReplicaInfo` (on the wire `replicasByDatacenter`, as
/// the Sidecar's server writes it and its client test reads it).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct ReplicaInfo {
    start: String,
    end: String,
    replicas_by_datacenter: BTreeMap<String, Vec<String>>,
}

/// Mirrors `TokenRangeReplicasResponse.ReplicaMetadata`.
#[derive(Debug, Deserialize)]
struct ReplicaMetadata {
    state: String,
    status: String,
    fqdn: String,
    address: String,
    port: i32,
    datacenter: String,
}

/// Mirrors `org.apache.cassandra.sidecar.common.response.TokenRangeReplicasResponse`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenRangeReplicasResponse {
    write_replicas: Vec<ReplicaInfo>,
    read_replicas: Vec<ReplicaInfo>,
    replica_metadata: BTreeMap<String, ReplicaMetadata>,
}

/// Mirrors `org.apache.cassandra.sidecar.common.response.TimeSkewResponse`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimeSkewResponse {
    current_time: i64,
    allowable_skew_in_minutes: i32,
}

/// Mirrors `org.apache.cassandra.sidecar.common.response.HealthResponse`.
#[derive(Debug, Deserialize)]
struct HealthResponse {
    status: String,
}

async fn get_as<T: serde::de::DeserializeOwned>(d: &Daemon, path: &str) -> T {
    let (status, body) = d.get(path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_value(body.clone())
        .unwrap_or_else(|e| panic!("GET {path} is not the Sidecar's shape: {e}: {body}"))
}

/// Cassandra Analytics' `CqlUtils.extractReplicationFactor`: the map after `WITH REPLICATION
/// = ` of the keyspace's statement, single quotes allowed.
fn analytics_replication(schema: &str, ks: &str) -> BTreeMap<String, String> {
    let cleaned = schema.replace('\n', "");
    let at = cleaned
        .find(&format!("CREATE KEYSPACE {ks} "))
        .expect("the keyspace statement");
    let statement = &cleaned[at..at + cleaned[at..].find(';').expect("its end")];
    let open = statement
        .find("WITH REPLICATION = {")
        .expect("WITH REPLICATION = { as Analytics looks for it")
        + "WITH REPLICATION = ".len();
    let close = open + statement[open..].find('}').expect("the map's end");
    serde_json::from_str(&statement[open..=close].replace('\'', "\"")).expect("the map")
}

/// Cassandra Analytics' `CqlUtils.extractTableSchema` finds the table's statement.
fn analytics_table<'a>(schema: &'a str, ks: &str, table: &str) -> &'a str {
    let at = schema
        .find(&format!("CREATE TABLE {ks}.{table} ("))
        .expect("the table statement");
    &schema[at..at + schema[at..].find(';').expect("its end")]
}

#[tokio::test]
async fn the_metadata_routes_answer_as_the_sidecar_from_the_node() {
    let ks = format!("sidecar_meta_p{}", std::process::id());
    let s = session(&src_addr()).await;
    exec(&s, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
    exec(&s, &format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}}")).await;
    exec(
        &s,
        &format!("CREATE TYPE {ks}.address (street text, \"Zip\" int)"),
    )
    .await;
    exec(&s, &format!("CREATE TABLE {ks}.orders (id int, at timestamp, home frozen<address>, note text, PRIMARY KEY (id, at)) WITH CLUSTERING ORDER BY (at DESC) AND default_time_to_live = 600")).await;
    exec(
        &s,
        &format!("CREATE INDEX orders_note ON {ks}.orders (note)"),
    )
    .await;
    let d = Daemon::fresh(&format!(
        "cassandra:\n  native_address: {}\n  allowable_time_skew: 2h\n",
        src_addr()
    ))
    .await;
    let addr = src_addr();
    let (host, port) = host_port(&addr);
    let node = read_with("node_reader.py", &[host, port, &ks]).await;
    let local = &node["local"];

    let health: HealthResponse = get_as(&d, "/api/v1/cassandra/__health").await;
    assert_eq!(health.status, "OK");

    let settings: NodeSettings = get_as(&d, "/api/v1/cassandra/settings").await;
    assert_eq!(settings.partitioner, local["partitioner"]);
    assert_eq!(settings.release_version, local["release_version"]);
    assert_eq!(settings.datacenter, local["dc"]);
    assert_eq!(settings.rpc_address.to_string(), local["rpc_address"]);
    assert_eq!(Value::from(settings.rpc_port), local["rpc_port"]);
    let tokens: BTreeSet<String> = serde_json::from_value(local["tokens"].clone()).unwrap();
    assert_eq!(settings.tokens, tokens);
    assert!(settings.sidecar.contains_key("version"));
    let (_, raw) = d.get("/api/v1/cassandra/settings").await;
    assert_eq!(raw["hostId"], local["host_id"]);

    // The ring: one entry per token, sorted by data center then token, as `nodetool ring`.
    for path in [
        "/api/v1/cassandra/ring".to_string(),
        format!("/api/v1/cassandra/ring/keyspaces/{ks}"),
    ] {
        let ring: Vec<RingEntry> = get_as(&d, &path).await;
        let driver_ring = node["ring"].as_array().unwrap();
        assert_eq!(ring.len(), driver_ring.len(), "{path}");
        for (entry, theirs) in ring.iter().zip(driver_ring) {
            assert_eq!(entry.token, theirs["token"], "{path}");
            assert_eq!(entry.host_id, theirs["host_id"], "{path}");
            assert_eq!(entry.address, theirs["address"], "{path}");
            assert_eq!(Value::from(entry.port), theirs["port"], "{path}");
            assert_eq!(entry.datacenter, theirs["dc"], "{path}");
            assert_eq!(entry.rack, theirs["rack"], "{path}");
            assert_eq!(entry.fqdn, entry.address);
            assert_eq!(
                (entry.status.as_str(), entry.state.as_str()),
                ("Up", "Normal")
            );
            assert!(
                entry.load.ends_with("iB") || entry.load.ends_with("bytes"),
                "{}",
                entry.load
            );
        }
        // One node holding every range of an RF 1 keyspace owns all of it.
        if path.contains("/keyspaces/") {
            assert!(ring.iter().all(|e| e.owns == "100.00%"), "{ring:?}");
        }
    }

    // Token ranges: contiguous from the lowest to the highest token, the wrapping range split
    // at the ends as the Sidecar splits it, each range's replicas the driver's.
    let replicas: TokenRangeReplicasResponse =
        get_as(&d, &format!("/api/v1/keyspaces/{ks}/token-range-replicas")).await;
    assert_eq!(replicas.write_replicas, replicas.read_replicas);
    let ranges = &replicas.read_replicas;
    assert_eq!(ranges.len(), tokens.len() + 1);
    assert_eq!(ranges[0].start, i64::MIN.to_string());
    assert_eq!(ranges.last().unwrap().end, i64::MAX.to_string());
    for pair in ranges.windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
    }
    let by_host: BTreeMap<String, String> = node["ring"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["host_id"].as_str().unwrap().to_string(),
                format!("{}:{}", r["address"].as_str().unwrap(), r["port"]),
            )
        })
        .collect();
    let first = tokens
        .iter()
        .min_by_key(|t| t.parse::<i64>().unwrap())
        .unwrap();
    for range in ranges {
        // The range ending at a token is placed by that token; the one above the highest
        // token wraps to the lowest.
        let owner = if range.end == i64::MAX.to_string() {
            first
        } else {
            &range.end
        };
        let theirs: Vec<String> = node["replicas"][owner]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| by_host[h.as_str().unwrap()].clone())
            .collect();
        assert_eq!(
            range.replicas_by_datacenter,
            BTreeMap::from([(local["dc"].as_str().unwrap().to_string(), theirs)]),
            "{range:?}"
        );
    }
    let endpoint = format!(
        "{}:{}",
        local["broadcast_address"].as_str().unwrap(),
        local["broadcast_port"]
    );
    let meta = &replicas.replica_metadata[&endpoint];
    assert_eq!(
        (
            meta.state.as_str(),
            meta.status.as_str(),
            meta.datacenter.as_str()
        ),
        ("Normal", "Up", local["dc"].as_str().unwrap())
    );
    assert_eq!(meta.address, local["broadcast_address"]);
    assert_eq!(meta.fqdn, meta.address);
    assert_eq!(Value::from(meta.port), local["broadcast_port"]);
    assert_eq!(replicas.replica_metadata.len(), 1);

    // The schema: what Cassandra Analytics extracts from it is the keyspace's.
    let schema: SchemaResponse = get_as(&d, &format!("/api/v1/keyspaces/{ks}/schema")).await;
    assert_eq!(schema.keyspace, ks);
    let theirs = &node["keyspace"];
    let replication = analytics_replication(&schema.schema, &ks);
    assert_eq!(
        replication,
        BTreeMap::from([
            (
                "class".to_string(),
                "org.apache.cassandra.locator.NetworkTopologyStrategy".to_string()
            ),
            ("datacenter1".to_string(), "1".to_string()),
        ]),
        "{}",
        theirs["replication"]
    );
    assert!(schema.schema.contains("AND DURABLE_WRITES = true;"));
    let table = analytics_table(&schema.schema, &ks, "orders");
    for part in [
        "id int",
        "at timestamp",
        "home frozen<address>",
        "PRIMARY KEY (id, at)",
        "CLUSTERING ORDER BY (at DESC)",
        "default_time_to_live = 600",
    ] {
        assert!(table.contains(part), "{part} not in {table}");
    }
    for t in theirs["tables"].as_array().unwrap() {
        assert!(
            schema
                .schema
                .contains(&format!("CREATE TABLE {ks}.{} (", t.as_str().unwrap()))
        );
    }
    for t in theirs["types"].as_array().unwrap() {
        assert!(
            schema
                .schema
                .contains(&format!("CREATE TYPE {ks}.{} (", t.as_str().unwrap()))
        );
    }
    assert!(schema.schema.contains("\"Zip\" int"));
    for i in theirs["indexes"].as_array().unwrap() {
        assert!(
            schema.schema.contains(&format!(
                "CREATE INDEX {} ON {ks}.orders",
                i.as_str().unwrap()
            )),
            "{i} in {}",
            schema.schema
        );
    }
    // Quoted, the name keeps its case; unquoted, it is folded as CQL folds it.
    let upper: SchemaResponse = get_as(
        &d,
        &format!("/api/v1/keyspaces/{}/schema", ks.to_uppercase()),
    )
    .await;
    assert_eq!(upper.keyspace, ks);

    let before = chrono::Utc::now().timestamp_millis();
    let skew: TimeSkewResponse = get_as(&d, "/api/v1/time-skew").await;
    let after = chrono::Utc::now().timestamp_millis();
    assert!((before..=after).contains(&skew.current_time), "{skew:?}");
    assert_eq!(skew.allowable_skew_in_minutes, 120);

    // An unknown keyspace: the Sidecar's 404; a system keyspace: 403.
    for path in [
        "/api/v1/keyspaces/no_such_ks/schema",
        "/api/v1/keyspaces/no_such_ks/token-range-replicas",
        "/api/v1/cassandra/ring/keyspaces/no_such_ks",
    ] {
        let (status, body) = d.get(path).await;
        assert_eq!(
            (status, body),
            (
                404,
                json!({"status": "Not Found", "code": 404, "message": "Keyspace 'no_such_ks' does not exist."})
            ),
            "{path}"
        );
    }
    let (status, body) = d.get("/api/v1/keyspaces/system_schema/schema").await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = d.get("/api/v1/keyspaces/a%2Fb/schema").await;
    assert_eq!(status, 400, "{body}");
    exec(&s, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
}

/// With no node behind it, every metadata route answers 503 in the error shape, and health
/// answers NOT_OK, within the health check timeout.
#[tokio::test]
async fn a_node_that_does_not_answer_is_503() {
    // Nothing listens on port 1.
    let d =
        Daemon::fresh("cassandra:\n  native_address: 127.0.0.1:1\n  health_check_timeout: 2s\n")
            .await;
    let (status, body) = d.get("/api/v1/cassandra/__health").await;
    assert_eq!((status, body), (503, json!({"status": "NOT_OK"})));
    for path in [
        "/api/v1/cassandra/settings",
        "/api/v1/cassandra/ring",
        "/api/v1/keyspaces/shop/schema",
        "/api/v1/keyspaces/shop/token-range-replicas",
    ] {
        let started = std::time::Instant::now();
        let (status, body) = d.get(path).await;
        assert_eq!(status, 503, "{path}: {body}");
        assert_eq!(body["status"], "Service Unavailable");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("Cassandra service is unavailable"),
            "{body}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{path}");
    }
    // The clock needs no node.
    let skew: TimeSkewResponse = get_as(&d, "/api/v1/time-skew").await;
    assert_eq!(skew.allowable_skew_in_minutes, 60);
}

/// Sixteen concurrent `PUT`s of one snapshot (what Cassandra Analytics' reader sends) run one
/// `nodetool snapshot`, and every caller gets its 200; a later `PUT` is a new request.
#[tokio::test]
async fn concurrent_requests_for_one_snapshot_run_one_nodetool() {
    let ks = format!("sidecar_snap_p{}", std::process::id());
    let s = session(&src_addr()).await;
    exec(&s, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
    exec(&s, &format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")).await;
    exec(
        &s,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
    )
    .await;
    exec(&s, &format!("INSERT INTO {ks}.t (k, v) VALUES (1, 'one')")).await;
    let nodetool =
        std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)");
    let data = std::path::PathBuf::from(
        std::env::var("DROVER_TEST_CASSANDRA_SRC_DIR").expect("scripts/testenv env"),
    )
    .join("data");
    // A nodetool that writes one line per run before it runs the real one.
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let counting = dir.path().join("nodetool");
    std::fs::write(
        &counting,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\nexec {} \"$@\"\n",
            runs.display(),
            nodetool
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&counting, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = Daemon::fresh(&format!(
        "cassandra:\n  jmx_address: 127.0.0.1:7199\n  data_file_directories: [{}]\nsstable_snapshots:\n  enabled: true\n  nodetool: {}\n",
        data.display(),
        counting.display()
    ))
    .await;
    let url = d.url(&format!(
        "/api/v1/keyspaces/{ks}/tables/t/snapshots/shared-1"
    ));
    let puts = (0..16).map(|_| {
        let (client, url) = (d.client().clone(), url.clone());
        async move {
            let res = client.put(url).send().await.expect("PUT");
            test_support::json_of(res).await
        }
    });
    let answers = futures::future::join_all(puts).await;
    for (status, body) in &answers {
        assert_eq!((*status, body), (200, &json!({"result": "Success"})));
    }
    let count = |runs: &std::path::Path| {
        std::fs::read_to_string(runs)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("snapshot -t shared-1"))
            .count()
    };
    assert_eq!(
        count(&runs),
        1,
        "nodetool runs: {}",
        std::fs::read_to_string(&runs).unwrap_or_default()
    );
    // The node holds the snapshot once.
    let listed = std::process::Command::new(&nodetool)
        .args(["-h", "127.0.0.1", "-p", "7199", "listsnapshots"])
        .output()
        .expect("nodetool listsnapshots");
    let listed = String::from_utf8_lossy(&listed.stdout);
    let lines = listed
        .lines()
        .filter(|l| l.starts_with("shared-1 ") && l.contains(&ks))
        .count();
    assert_eq!(lines, 1, "{listed}");
    // Not coalesced with a finished run: the snapshot exists, and nodetool says so.
    let res = d.client().put(url.clone()).send().await.expect("PUT");
    assert_eq!(res.status().as_u16(), 409);
    assert_eq!(count(&runs), 2);
    let res = d.client().delete(url).send().await.expect("DELETE");
    assert_eq!(res.status().as_u16(), 200);
    exec(&s, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
}
