//! Migrations between three-node clusters at replication factor 3 (`scripts/testenv ring-up`:
//! two rings of three nodes, one rack per node), with nodes stopped in the middle of a copy.
//!
//! A table of many types (every native type, collections, a tuple, frozen and non-frozen UDTs,
//! a vector, a static column, nulls, a writetime and a TTL of its own for each cell, and
//! elements appended later with another writetime) is copied CQL → CQL at `LOCAL_QUORUM`,
//! and both tables are then read by the fidelity matrix's second reader (the DataStax Python
//! driver, `tests/fidelity/cql_reader.py`) at `ALL`, so that a replica missing a write cannot
//! hide it: values, writetimes and TTLs must be the source's.
//!
//! A third test counts, from each node's own metrics, that every scan, read and write went to
//! a replica of its range.
//!
//! The bulk tests put a daemon beside every node: the snapshot read at `ALL` (every node
//! read) and at `ONE` (one node read, never one that other nodes hold hints for), and the
//! SSTable load on every target replica, with a replica's daemon killed in the middle.
//!
//! Two more modules run on the rings: `ring_topology` (a node joining the target during an
//! SSTable load, leaving it during a CQL copy) and `ring_move` (live migration of a node while
//! the ring serves).
//!
//! The scenarios share the rings and stop their nodes, so they run one after another, in one
//! test ([`scenarios`], run by `a_three_node_rings` in main.rs), each its own task so that one
//! failing does not hide the others. A scenario that fails runs a second time from rings made
//! whole again (within a time budget; not the move of a node), because six JVMs on two cores
//! beside the rest of the suite have stalled for minutes; both attempts' panics are reported.
//! `DROVER_TEST_RINGS_ONLY=<part of a name>` runs only the scenarios whose name contains it.

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::Value;
use test_support::cql::{exec, session};
use test_support::rings::{self, DC, DST, SRC, dst_node, src_node};
use test_support::{Daemon, ended};

use crate::fidelity::{Expect, compare, micros_now};

/// A copy, with its waits for nodes, ends well within this.
pub(crate) const WAIT: Duration = Duration::from_secs(900);

const DDL: &str = "CREATE TYPE $ks.pt (a int, b text);
CREATE TABLE $ks.t (p int, c int, st text STATIC, t text, b blob, bi bigint, d decimal, vi varint,
  f float, db double, ts timestamp, dt date, tm time, u uuid, tu timeuuid, ip inet, bo boolean,
  du duration, si smallint, ti tinyint, l list<int>, s set<text>, m map<text, int>,
  fl frozen<list<text>>, tup tuple<int, text>, ud frozen<pt>, un pt, v vector<float, 3>,
  PRIMARY KEY ((p), c)) WITH CLUSTERING ORDER BY (c DESC)";

/// The columns of [`DDL`] the SSTable path refuses (a non-frozen UDT, a vector): its tests'
/// table leaves them out.
const BULK_LEFT_OUT: &str = " un pt, v vector<float, 3>,";

/// Rows per partition.
pub(crate) const PER_PARTITION: usize = 4;

/// Makes keyspace `ks` (NetworkTopologyStrategy, RF 3 in the rings' data center) with the
/// table on both rings, dropping what an earlier run left.
async fn keyspace(
    src: &scylla::client::session::Session,
    dst: &scylla::client::session::Session,
    ks: &str,
) {
    keyspace_at(src, dst, ks, 3, false).await;
}

/// [`keyspace`] at replication factor `rf`, the table without the columns of
/// [`BULK_LEFT_OUT`] when `bulk`.
pub(crate) async fn keyspace_at(
    src: &scylla::client::session::Session,
    dst: &scylla::client::session::Session,
    ks: &str,
    rf: usize,
    bulk: bool,
) {
    // Without compaction the bulk tests can compare what each replica holds by its bytes: the
    // SSTables drover writes are uncompressed and the node's compaction compresses them.
    let ddl = if bulk {
        DDL.replace(BULK_LEFT_OUT, "")
            + " AND compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}"
    } else {
        DDL.to_string()
    };
    for s in [src, dst] {
        exec(s, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
        exec(
            s,
            &format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', '{DC}': {rf}}}"),
        )
        .await;
        for stmt in ddl.split(';') {
            exec(s, &stmt.replace("$ks", ks)).await;
        }
    }
}

/// The statements that write row `i` (partition `i / PER_PARTITION`): an `INSERT` of its own
/// writetime and TTL (none for every third row; most columns null for every seventh), the
/// partition's static cell with its first row, and for every fourth row an `UPDATE` with a
/// newer writetime and another TTL that appends to its list and sets a field of its UDT.
fn row_statements(ks: &str, i: usize, bulk: bool) -> Vec<String> {
    let (p, c) = (i / PER_PARTITION, i % PER_PARTITION);
    let wt = 1_700_000_000_000_000 + i as i64 * 1000;
    let ttl = if i.is_multiple_of(3) {
        0
    } else {
        30 * 86_400 + i
    };
    let mut out = Vec::new();
    if i.is_multiple_of(7) {
        out.push(format!(
            "INSERT INTO {ks}.t (p, c, t, l) VALUES ({p}, {c}, 'sparse {i}', [{i}]) USING TIMESTAMP {wt} AND TTL {ttl}"
        ));
    } else {
        let f = if i.is_multiple_of(11) {
            "NaN".to_string()
        } else {
            format!("{i}.5")
        };
        let db = match i % 13 {
            0 => "-0.0".to_string(),
            1 => "Infinity".to_string(),
            _ => format!("{i}e-3"),
        };
        let ip = if i.is_multiple_of(2) {
            format!("'10.{}.{}.{}'", (i >> 16) & 255, (i >> 8) & 255, i & 255)
        } else {
            format!("'2001:db8::{i:x}'")
        };
        out.push(format!(
            "INSERT INTO {ks}.t (p, c, t, b, bi, d, vi, f, db, ts, dt, tm, u, tu, ip, bo, du, si, ti, l, s, m, fl, tup, ud{un_v}) \
             VALUES ({p}, {c}, 'row {i} ''q'' é', 0x{i:08x}ff, {bi}, {i}.{d:02}0, 123456789012345678901234567890{i:05}, {f}, {db}, {ts}, \
             '{y}-{mo:02}-{day:02}', '{h:02}:{mi:02}:{se:02}.{ns:09}', {i:08x}-1234-4abc-8def-{u2:012x}, {i:08x}-29bb-11e5-b345-feff819cdc9f, \
             {ip}, {bo}, {dd}d{dh}h{dm}m{ds}s{dms}ms{dus}us{dns}ns, {si}, {ti}, [{i}, {i1}, -{i}], {{'a', 'b{i}'}}, {{'k{i}': {i}, 'z': -1}}, \
             ['x', '{i}'], ({i}, 'tup'), {{a: {i}, b: 'ud'}}{un_v_values}) \
             USING TIMESTAMP {wt} AND TTL {ttl}",
            bi = i as i64 * 1_000_003 - (1 << 40),
            d = i % 97,
            ts = 1_600_000_000_000_i64 + i as i64 * 1001,
            y = 1970 + i % 100,
            mo = 1 + i % 12,
            day = 1 + i % 28,
            h = i % 24,
            mi = i % 60,
            se = (i / 7) % 60,
            ns = i * 13 % 1_000_000_000,
            u2 = i * 7,
            bo = i.is_multiple_of(2),
            dd = i % 30,
            dh = i % 24,
            dm = i % 60,
            ds = i % 59,
            dms = i % 1000,
            dus = i % 999,
            dns = i % 998,
            si = (i % 32768) as i32 - 16384,
            ti = (i % 256) as i32 - 128,
            i1 = i + 1,
            un_v = if bulk { "" } else { ", un, v" },
            un_v_values = if bulk {
                String::new()
            } else {
                format!(", {{a: -{i}, b: 'un'}}, [1.5, -2.25, {i}.0]")
            },
        ));
        if i % 4 == 1 {
            out.push(format!(
                "UPDATE {ks}.t USING TIMESTAMP {} AND TTL {} SET t = 'updated {i}', l = l + [99],{} m['new'] = 1 WHERE p = {p} AND c = {c}",
                wt + 7,
                40 * 86_400 + i,
                if bulk { "" } else { " un.a = 5," }
            ));
        }
    }
    if c == 0 {
        out.push(format!(
            "UPDATE {ks}.t USING TIMESTAMP {wt} SET st = 'static {p}' WHERE p = {p}"
        ));
    }
    out
}

/// Writes `rows` rows into `ks.t` of the ring behind `src`, one unlogged batch per partition
/// (without the columns of [`BULK_LEFT_OUT`] when `bulk`).
pub(crate) async fn fill(
    src: &scylla::client::session::Session,
    ks: &str,
    rows: usize,
    bulk: bool,
) {
    fill_at(
        src,
        ks,
        0..rows,
        bulk,
        scylla::statement::Consistency::LocalQuorum,
    )
    .await;
}

/// [`fill`] of rows `rows` (which starts at a partition's first row) at `consistency`.
async fn fill_at(
    src: &scylla::client::session::Session,
    ks: &str,
    rows: std::ops::Range<usize>,
    bulk: bool,
    consistency: scylla::statement::Consistency,
) {
    let end = rows.end;
    futures::stream::iter(rows.step_by(PER_PARTITION))
        .for_each_concurrent(8, |first| async move {
            let mut batch =
                scylla::statement::batch::Batch::new(scylla::statement::batch::BatchType::Unlogged);
            batch.set_consistency(consistency);
            let mut n = 0;
            for i in first..(first + PER_PARTITION).min(end) {
                for stmt in row_statements(ks, i, bulk) {
                    batch.append_statement(scylla::statement::unprepared::Statement::new(stmt));
                    n += 1;
                }
            }
            let values = vec![(); n];
            // A write to a busy ring may time out: it is rewritten whole, with the same
            // writetimes.
            for attempt in 0.. {
                match src.batch(&batch, &values).await {
                    Ok(_) => break,
                    Err(e) if attempt < 20 => {
                        eprintln!("rewriting partition of row {first}: {e}");
                        tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                    }
                    Err(e) => panic!("partition of row {first}: {e}"),
                }
            }
        })
        .await;
}

/// A CQL → CQL copy of `ks.t` between the rings at `LOCAL_QUORUM` in their data center, with
/// writetimes and TTLs, at most `rows_per_second` (so that a node can be stopped mid-copy).
pub(crate) fn job(ks: &str, rows_per_second: usize) -> String {
    let (sh, sp) = SRC[0].rsplit_once(':').unwrap();
    let (dh, dp) = DST[0].rsplit_once(':').unwrap();
    format!(
        "source:\n  type: cassandra\n  host: {sh}\n  port: {sp}\n  localDC: {DC}\n  keyspace: {ks}\n  table: t\n  consistencyLevel: LOCAL_QUORUM\n  splitCount: 32\n  preserveTimestamps: true\n\
         target:\n  type: scylla\n  host: {dh}\n  port: {dp}\n  localDC: {DC}\n  keyspace: {ks}\n  table: t\n  consistencyLevel: LOCAL_QUORUM\n  rowsPerSecond: {rows_per_second}\n"
    )
}

pub(crate) fn phase(job: &Value) -> &str {
    job["phase"].as_str().unwrap_or_default()
}

pub(crate) fn written(job: &Value) -> u64 {
    job["progress"]["rowsWritten"].as_u64().unwrap_or(0)
}

/// A known defect, left out of the comparison and reported, nothing else: a list append
/// whose outcome drover could not know (its coordinator stopped mid-request) may be applied
/// after drover's retry, whose guard read did not see it yet, appended the elements again.
/// The target's list then holds the source's elements, in order, and after them a repeat of
/// some of them (with their own writetimes and TTLs). Such a list is cut back to the source's
/// length here, so that its elements are still compared; any other difference fails.
fn repeated_list_appends(s: &Value, d: &mut Value) -> Vec<String> {
    let source: std::collections::HashMap<String, &Value> = s["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (r["key"].to_string(), &r["cells"]))
        .collect();
    let mut found = Vec::new();
    for row in d["rows"].as_array_mut().into_iter().flatten() {
        let key = row["key"].to_string();
        let Some(cells) = source.get(&key) else {
            continue;
        };
        for (column, cell) in row["cells"].as_object_mut().into_iter().flatten() {
            let (Some(want), Some(got)) = (cells[column]["v"].as_array(), cell["v"].as_array())
            else {
                continue;
            };
            let n = want.len();
            let repeat =
                got.len() > n && got[..n] == want[..] && got[n..].iter().all(|e| want.contains(e));
            if !repeat {
                continue;
            }
            found.push(format!("{column} of row {key}: {got:?} for {want:?}"));
            let len = got.len();
            for part in ["v", "wt", "ttl"] {
                if let Some(list) = cell[part].as_array_mut()
                    && list.len() == len
                {
                    list.truncate(n);
                }
            }
        }
    }
    found
}

/// How late a TTL may end after nodes were stopped mid-copy (see [`assert_exact`]).
const LATE_TTL_S: i64 = 60;

/// Both tables read at ALL by the second reader: every row, value, writetime and TTL of the
/// source is in the target. With `nodes_stopped`, a known limitation is reported, not failed:
/// TTLs that end up to [`LATE_TTL_S`] after the source's. A write whose coordinator stopped
/// mid-request has an unknown outcome; drover writes it again (its TTL aged anew), but the
/// first one may still be applied, seconds later, and Cassandra counts a TTL from when the
/// coordinator handles the write and keeps, of two cells with the same writetime, the one
/// that expires last (32 rows 13 s late in one run).
pub(crate) async fn assert_exact(ks: &str, rows: usize, started: i64, nodes_stopped: bool) {
    let read = |addr: &'static str| async move {
        let (host, port) = crate::fidelity::host_port(addr);
        crate::fidelity::read_with("cql_reader.py", &[host, port, ks, "t", "ALL"]).await
    };
    let (s, d) = tokio::join!(read(SRC[0]), read(DST[0]));
    assert_eq!(
        s["rows"].as_array().map(Vec::len),
        Some(rows),
        "source rows"
    );
    let mut d = d;
    for repeated in repeated_list_appends(&s, &mut d) {
        eprintln!("KNOWN DEFECT (docs/cql-migrations.md, lists under node failures): {repeated}");
    }
    // TTLs within the fidelity matrix's 5 s. (Rows of a partition that spanned two pages,
    // read seconds apart while a node was stopped, once had their TTLs aged from the later
    // page's read, and guarded writes from before the guard's read: 6 to 16 s too long.)
    let wrong = |expect| -> Vec<String> {
        let mut out: Vec<_> = compare(&s, &d, expect, started)
            .iter()
            .filter_map(|(col, v)| v.as_ref().err().map(|e| format!("{col}: {e}")))
            .collect();
        out.sort();
        out
    };
    let exact = wrong(Expect::Preserve);
    if nodes_stopped && !exact.is_empty() {
        let late = wrong(Expect::PreserveTtlLate { late: LATE_TTL_S });
        assert!(
            late.is_empty(),
            "the copy differs from the source:\n{}",
            late.join("\n")
        );
        eprintln!(
            "KNOWN LIMITATION (docs/cql-migrations.md, TTLs of writes of unknown outcome): TTLs ending up to {LATE_TTL_S} s late:\n{}",
            exact.join("\n")
        );
        return;
    }
    assert!(
        exact.is_empty(),
        "the copy differs from the source:\n{}",
        exact.join("\n")
    );
}

pub(crate) async fn a_copy_at_local_quorum_goes_on_with_a_node_of_each_ring_stopped() {
    const ROWS: usize = 12_000;
    rings::up();
    let (src, dst) = (session(SRC[0]).await, session(DST[0]).await);
    let ks = "ring_one_down";
    keyspace(&src, &dst, ks).await;
    fill(&src, ks, ROWS, false).await;
    let d = Daemon::fresh("").await;
    let started = micros_now();
    let id = d.submit_job("/api/v1/migrations", &job(ks, 200)).await;
    let url = format!("/api/v1/migrations/{id}");
    let before = d
        .wait_for(&url, WAIT, |j| written(j) as usize >= ROWS / 20 || ended(j))
        .await;
    assert_eq!(
        before["state"], "RUNNING",
        "the copy ended before a node could be stopped: {before}"
    );
    let t = std::time::Instant::now();
    rings::stop(&[src_node(2), dst_node(3)]);
    let (_, during) = d.get(&url).await;
    eprintln!(
        "stopped {} and {} in {:?}, at {} of {ROWS} rows written; now {} written, phase {}",
        src_node(2),
        dst_node(3),
        t.elapsed(),
        written(&before),
        written(&during),
        during["phase"]
    );
    assert!(
        during["state"] == "RUNNING" && (written(&during) as usize) < ROWS,
        "the nodes were stopped only after the copy: {during}"
    );
    let job = d.wait_for(&url, WAIT, ended).await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}\n{}", d.logs());
    eprintln!("job: {}", job["progress"]);
    rings::up();
    assert_exact(ks, ROWS, started, true).await;
}

pub(crate) async fn with_two_target_nodes_stopped_a_copy_waits_and_goes_on_when_they_are_back() {
    const ROWS: usize = 6_000;
    rings::up();
    let (src, dst) = (session(SRC[0]).await, session(DST[0]).await);
    let ks = "ring_two_down";
    keyspace(&src, &dst, ks).await;
    fill(&src, ks, ROWS, false).await;
    let d = Daemon::fresh("").await;
    let started = micros_now();
    // 60 rows/s: 100 s of copying, so that the two nodes are stopped well before its end even
    // when stopping them takes long on a loaded machine (17-43 s seen, more under load).
    let id = d.submit_job("/api/v1/migrations", &job(ks, 60)).await;
    let url = format!("/api/v1/migrations/{id}");
    let before = d
        .wait_for(&url, WAIT, |j| written(j) as usize >= ROWS / 20 || ended(j))
        .await;
    assert_eq!(
        before["state"], "RUNNING",
        "the copy ended before nodes could be stopped: {before}"
    );
    rings::stop(&[dst_node(2), dst_node(3)]);
    // While the driver still tries the stopped nodes, a write fails on their broken
    // connections; once it knows they are down, the live replica refuses it as unavailable,
    // and that is what the phase must say.
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let waiting = d
        .wait_for(&url, Duration::from_secs(300), |j| {
            seen.lock().unwrap().insert(phase(j).to_string());
            phase(j).starts_with(
                "waiting: writing to the target: not enough replicas up for LOCAL_QUORUM (2 needed, 1 up)",
            ) || ended(j)
        })
        .await;
    eprintln!("phases seen: {:#?}", seen.lock().unwrap());
    assert_eq!(waiting["state"], "RUNNING", "{waiting}\n{}", d.logs());
    // The wait is bounded: a job allowed 15 s of retries fails (and says why) while the nodes
    // stay down. It copies the same rows with the same writetimes, so whatever it wrote is
    // what the first job writes too.
    let short = d
        .submit_job(
            "/api/v1/migrations",
            &format!("{}retryForSeconds: 15\n", job(ks, 500)),
        )
        .await;
    let t = std::time::Instant::now();
    let failed = d
        .wait_for(
            &format!("/api/v1/migrations/{short}"),
            Duration::from_secs(180),
            ended,
        )
        .await;
    eprintln!(
        "retryForSeconds: 15 ended after {:?}: {}",
        t.elapsed(),
        failed["error"]
    );
    assert_eq!(failed["state"], "FAILED", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("target: "),
        "{failed}"
    );
    let (_, still) = d.get(&url).await;
    assert_eq!(still["state"], "RUNNING", "{still}");
    rings::up();
    let job = d.wait_for(&url, WAIT, ended).await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}\n{}", d.logs());
    eprintln!("job: {}", job["progress"]);
    assert_exact(ks, ROWS, started, true).await;
}

/// Each node's own count of what it coordinated and executed for `ks.t` (see
/// `tests/fidelity/node_requests.py`), by address.
async fn node_requests(ks: &str, nodes: &[&str]) -> Value {
    let mut args = vec![ks, "t"];
    args.extend_from_slice(nodes);
    crate::fidelity::read_with("node_requests.py", &args).await
}

/// Nodes of `counts` where requests of `kind` were coordinated but executed on another node
/// (at replication factor 1 the two counts of a routed request are the same node's), and
/// the total executed.
fn misrouted(counts: &Value, kind: &str) -> (Vec<String>, u64) {
    let mut wrong = Vec::new();
    let mut total = 0;
    for (node, c) in counts.as_object().into_iter().flatten() {
        let coordinated = c[format!("coordinator_{kind}")].as_u64().unwrap_or(0);
        let local = c[format!("local_{kind}")].as_u64().unwrap_or(0);
        total += local;
        if coordinated != local {
            wrong.push(format!(
                "{node}: coordinated {coordinated}, executed {local}"
            ));
        }
    }
    (wrong, total)
}

pub(crate) async fn every_read_and_write_goes_to_a_replica_of_its_range() {
    // At replication factor 1 a range has one replica: a scan, read or write sent to any other
    // node is coordinated there and executed on the replica, which the nodes' own metrics
    // show. (At RF 3 on three nodes every node is a replica of everything.)
    const ROWS: usize = 3_000;
    rings::up();
    let (src, dst) = (session(SRC[0]).await, session(DST[0]).await);
    let ks = "ring_routing";
    keyspace_at(&src, &dst, ks, 1, false).await;
    fill(&src, ks, ROWS, false).await;
    let before = (node_requests(ks, &SRC).await, node_requests(ks, &DST).await);
    let d = Daemon::fresh("").await;
    let yaml = job(ks, 100_000);
    let copy = d.run_job("/api/v1/migrations", &yaml, WAIT).await;
    eprintln!("copy: {}", copy["progress"]);
    let validation = d.run_job("/api/v1/validations", &yaml, WAIT).await;
    assert_eq!(
        validation["result"]["rowsWithDifferences"], 0,
        "{validation}"
    );
    let after = (node_requests(ks, &SRC).await, node_requests(ks, &DST).await);
    eprintln!("source nodes: {}\ntarget nodes: {}", after.0, after.1);
    // The fill wrote through unprepared statements, which the driver cannot route, so only
    // the source's scans are counted there; the target saw nothing but drover.
    let since = |after: &Value, before: &Value| {
        let mut out = after.clone();
        for (node, c) in out.as_object_mut().into_iter().flatten() {
            for (k, v) in c.as_object_mut().into_iter().flatten() {
                let was = before[node.as_str()][k.as_str()].as_u64().unwrap_or(0);
                *v = Value::from(v.as_u64().unwrap_or(0) - was);
            }
        }
        out
    };
    let (src_counts, dst_counts) = (since(&after.0, &before.0), since(&after.1, &before.1));
    let mut problems = Vec::new();
    for (side, counts, kinds) in [
        ("source", &src_counts, &["scan"][..]),
        ("target", &dst_counts, &["scan", "read", "write"][..]),
    ] {
        for kind in kinds {
            let (wrong, total) = misrouted(counts, kind);
            if !wrong.is_empty() {
                problems.push(format!(
                    "{side} {kind}s sent to a node that is not the replica: {wrong:?}"
                ));
            }
            // Every node holds ranges, and every one was scanned (the copy, then the
            // validation) and written.
            if *kind != "read" {
                for (node, c) in counts.as_object().into_iter().flatten() {
                    if c[format!("local_{kind}")].as_u64().unwrap_or(0) == 0 {
                        problems.push(format!("{side} {kind}s: none on {node} ({total} in all)"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A daemon beside ring node `name` serving snapshots of its SSTables (the source side of
/// `bulkRead: snapshot`) and taking SSTable uploads (the target side of `bulkWrite: sstable`).
pub(crate) async fn sidecar(name: &str) -> Daemon {
    let home = test_support::Home::new();
    Daemon::start_with(&home, &sidecar_config(&home, name, "127.0.0.1:0")).await
}

/// What `nodetool args` says of ring node `name`; it must succeed.
pub(crate) fn nodetool(name: &str, args: &[&str]) -> String {
    let nodetool =
        std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)");
    let jmx = rings::jmx(name);
    let (host, port) = jmx.rsplit_once(':').unwrap();
    let out = std::process::Command::new(nodetool)
        .args(["-h", host, "-p", port])
        .args(args)
        .output()
        .expect("run nodetool");
    assert!(
        out.status.success(),
        "nodetool {args:?} of {name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The bytes of `ks.t`'s live SSTables on node `name`, as `nodetool tablestats` says.
pub(crate) fn node_bytes(name: &str, ks: &str) -> u64 {
    let text = nodetool(name, &["tablestats", "--", &format!("{ks}.t")]);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Space used (live):"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no live space from nodetool tablestats:\n{text}"))
}

/// `bulkSidecars:` of one side: each node's CQL host and the daemon beside it.
pub(crate) fn sidecars(nodes: &[&str], daemons: &[Daemon]) -> String {
    let mut out = "  bulkSidecars:\n".to_string();
    for (node, d) in nodes.iter().zip(daemons) {
        let host = node.rsplit_once(':').unwrap().0;
        out.push_str(&format!("    {host}: {}\n", d.addr));
    }
    out
}

/// The config of a daemon beside ring node `name` ([`sidecar`]) listening on `listen`.
fn sidecar_config(home: &test_support::Home, name: &str, listen: &str) -> std::path::PathBuf {
    let nodetool =
        std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)");
    home.write_config_at(
        listen,
        &format!(
            "cassandra:\n  jmx_address: {}\n  data_file_directories: [{}]\nsstable_snapshots:\n  enabled: true\n  nodetool: {nodetool}\nsstable_uploads:\n  enabled: true\n  nodetool: {nodetool}\n  min_free_space_percent: 1\n",
            rings::jmx(name),
            rings::data_dir(name).display(),
        ),
    )
}

/// How many snapshots the daemon beside each source node took.
fn snapshots_taken(sources: &[Daemon]) -> Vec<usize> {
    sources
        .iter()
        .map(|d| d.logs().matches("snapshot taken").count())
        .collect()
}

/// A bulk copy of `ks.t` between the rings through the daemons beside their nodes.
pub(crate) fn bulk_job(
    ks: &str,
    rows_per_second: usize,
    sources: &[Daemon],
    targets: &[Daemon],
) -> String {
    let copy = job(ks, rows_per_second);
    let (source, target) = copy.split_once("target:\n").unwrap();
    format!(
        "{source}  bulkRead: snapshot\n{}target:\n{target}  bulkWrite: sstable\n{}",
        sidecars(&SRC, sources),
        sidecars(&DST, targets),
    )
}

/// Each target node's bytes of `ks.t`, which must be the same on the three (RF 3 on three
/// nodes puts every partition on each) and more than nothing. Each node compacts the table
/// first: a unit loaded again after a failure is imported twice by a replica that had it, and
/// its copies merge only then.
fn assert_every_replica_holds_the_table(ks: &str) -> Vec<u64> {
    for n in 1..=3 {
        nodetool(&dst_node(n), &["compact", "--", ks, "t"]);
    }
    let held: Vec<u64> = (1..=3).map(|n| node_bytes(&dst_node(n), ks)).collect();
    let most = *held.iter().max().unwrap();
    assert!(
        most > 0 && held.iter().all(|&b| b * 10 >= most * 9),
        "the replicas hold different amounts of the table: {held:?} bytes"
    );
    held
}

/// Keyspace `ks` at RF 3 with the bulk tests' table on both rings, `rows` rows in the source,
/// and a daemon beside every node: the source ring's, then the target ring's.
pub(crate) async fn bulk_rings(ks: &str, rows: usize) -> (Vec<Daemon>, Vec<Daemon>) {
    let (src, dst) = (session(SRC[0]).await, session(DST[0]).await);
    keyspace_at(&src, &dst, ks, 3, true).await;
    fill(&src, ks, rows, true).await;
    let mut sources = Vec::new();
    let mut targets = Vec::new();
    for n in 1..=3 {
        sources.push(sidecar(&src_node(n)).await);
        targets.push(sidecar(&dst_node(n)).await);
    }
    (sources, targets)
}

pub(crate) async fn at_rf_3_a_bulk_load_whose_replica_daemon_died_resumes_without_loss() {
    // The daemon beside one target node is killed in the middle of a load. Uploads to it are
    // retried for `retryForSeconds` (20 here), then the job fails naming the node. The same
    // job, submitted again while the daemon is still away, resumes: the units recorded
    // complete are skipped, the others wait for the daemon, which comes back on its address
    // after a few seconds, and are loaded again whole (a replica that had them already answers
    // that they were imported); every replica ends with the whole table.
    const ROWS: usize = 6_000;
    rings::up();
    let ks = "ring_bulk_down";
    let (sources, mut targets) = bulk_rings(ks, ROWS).await;
    // The third target daemon on an address it can come back to.
    let home = test_support::Home::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    targets[2] = Daemon::start_with(&home, &sidecar_config(&home, &dst_node(3), &listen)).await;
    let d = Daemon::fresh("").await;
    let started = micros_now();
    let savepoints = home.path().join("savepoints");
    let yaml = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 1\nretryForSeconds: 20\n",
        bulk_job(ks, 300, &sources, &targets),
        savepoints.display()
    );
    let id = d.submit_job("/api/v1/migrations", &yaml).await;
    let url = format!("/api/v1/migrations/{id}");
    // Some units loaded on every replica (and so recorded), others not yet.
    let before = d
        .wait_for(&url, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64().unwrap_or(0) >= 6 || ended(j)
        })
        .await;
    assert_eq!(before["state"], "RUNNING", "{before}");
    targets[2].kill9();
    let failed = d.wait_for(&url, WAIT, ended).await;
    eprintln!(
        "killed at {} rows written, {} units done; the job ended {} at {} rows: {}",
        written(&before),
        before["progress"]["unitsDone"],
        failed["state"],
        written(&failed),
        failed["error"]
    );
    assert_eq!(failed["state"], "FAILED", "{failed}");
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("127.0.0.23") && error.contains("unreachable"),
        "{failed}"
    );
    let waits = || {
        d.logs()
            .matches("bulk write: waiting for the drover beside the node")
            .count()
    };
    let waited_before = waits();
    assert!(
        waited_before > 0,
        "the failed run did not wait:\n{}",
        d.logs()
    );
    let again = d.submit_job("/api/v1/migrations", &yaml).await;
    let url = format!("/api/v1/migrations/{again}");
    // The first unit to finish waits for the daemon, and the job says so in its phase. (A
    // busy drover beside another node may be waited for too, and named first.)
    let waiting = d
        .wait_for(&url, WAIT, |j| {
            ended(j) || (phase(j).starts_with("waiting: ") && phase(j).contains("127.0.0.23"))
        })
        .await;
    assert_eq!(waiting["state"], "RUNNING", "{waiting}\n{}", d.logs());
    assert!(phase(&waiting).contains("unreachable or busy"), "{waiting}");
    assert!(waits() > waited_before, "{}", d.logs());
    targets[2] = Daemon::start_with(&home, &sidecar_config(&home, &dst_node(3), &listen)).await;
    let done = d.wait_for(&url, WAIT, ended).await;
    eprintln!("resumed: {}", done["progress"]);
    // The units recorded complete before the failure are skipped; the rest are loaded again.
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
    assert!(
        done["progress"]["unitsSkipped"].as_u64().unwrap_or(0) > 0,
        "nothing was resumed: {done}"
    );
    eprintln!(
        "target bytes per node: {:?}",
        assert_every_replica_holds_the_table(ks)
    );
    assert_exact(ks, ROWS, started, false).await;
}

pub(crate) async fn at_rf_3_the_bulk_paths_read_snapshots_and_load_sstables_on_every_replica() {
    // At bulkReadConsistency ALL the snapshot read takes every replica's SSTables of each
    // range and merges them; the SSTable writer places each partition on the target ring's
    // three replicas and hands each replica's SSTables to the daemon beside it, which imports
    // them into its node. Both tables are then read at ALL by the second reader, and
    // validated at ALL.
    const ROWS: usize = 6_000;
    rings::up();
    let ks = "ring_bulk";
    let (sources, targets) = bulk_rings(ks, ROWS).await;
    let d = Daemon::fresh("").await;
    let started = micros_now();
    let yaml = bulk_job(ks, 1_000_000, &sources, &targets).replace(
        "  bulkRead: snapshot\n",
        "  bulkRead: snapshot\n  bulkReadConsistency: ALL\n",
    );
    let done = d.run_job("/api/v1/migrations", &yaml, WAIT).await;
    eprintln!("bulk copy: {}", done["progress"]);
    assert_eq!(done["progress"]["rowsWritten"], ROWS, "{done}");
    assert_eq!(snapshots_taken(&sources), [1, 1, 1], "{}", d.logs());
    // Each replica took SSTables of its own: its daemon imported them, and the node holds as
    // many bytes of the table as the others, as RF 3 on three nodes puts every partition on
    // each. (A read at ALL below merges the replicas, so it would not see one left out.
    // The nodes' partition estimate is 0 for these SSTables: the writer leaves out the
    // cardinality sketch it is made from.)
    let held = assert_every_replica_holds_the_table(ks);
    for (n, t) in (1..=3).zip(&targets) {
        let imports = t.logs().matches("SSTables imported").count();
        eprintln!(
            "{}: {imports} imports, {} bytes live",
            dst_node(n),
            held[n - 1]
        );
        assert!(
            imports > 0,
            "{} imported nothing:\n{}",
            dst_node(n),
            t.logs()
        );
    }
    assert_exact(ks, ROWS, started, false).await;
    let at_all = job(ks, 1_000_000).replace("LOCAL_QUORUM", "ALL");
    let validation = d.run_job("/api/v1/validations", &at_all, WAIT).await;
    assert_eq!(
        validation["result"]["rowsWithDifferences"], 0,
        "{validation}"
    );
    assert_eq!(validation["result"]["rowsMatched"], ROWS, "{validation}");
}

pub(crate) async fn at_rf_3_the_snapshot_read_takes_one_replica_and_never_one_that_lacks_writes() {
    // At the default bulkReadConsistency (ONE) each range is read from one replica: at RF 3 on
    // three nodes, one node's snapshot. A replica other nodes hold hints for may lack writes
    // and is not read alone. Here hints are made to stay: their delivery paused on the third
    // node, the first two stopped, rows written at ONE (so only the third has them; over
    // 1 MiB of hints for each, so that some are in closed files, which is what a node lists),
    // the two started again. The read must take the third node only (the first, in address
    // order, would be taken if the hints were not looked at), and the copy must hold the rows.
    const ROWS: usize = 2_000;
    const LATE: usize = 8_000;
    rings::up();
    let ks = "ring_bulk_one";
    let (sources, targets) = bulk_rings(ks, ROWS).await;
    let third = src_node(3);
    nodetool(&third, &["pausehandoff"]);
    // Delivery resumed however the test ends, so that the next tests find the ring as usual.
    struct Resume(String);
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = std::panic::catch_unwind(|| nodetool(&self.0, &["resumehandoff"]));
        }
    }
    let resume = Resume(third.clone());
    rings::stop(&[src_node(1), src_node(2)]);
    let only = session(SRC[2]).await;
    fill_at(
        &only,
        ks,
        ROWS..ROWS + LATE,
        true,
        scylla::statement::Consistency::One,
    )
    .await;
    let listed = |held: &str| {
        ["127.0.0.11:", "127.0.0.12:"]
            .iter()
            .all(|n| held.contains(n))
    };
    let mut held = String::new();
    for _ in 0..60 {
        held = nodetool(&third, &["listpendinghints"]);
        if listed(&held) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("hints held by {third}:\n{held}");
    assert!(listed(&held), "no hints listed for both nodes:\n{held}");
    rings::up();
    // A node started in the last 30 s is passed over too (its hints may not be listed yet):
    // past that, only the listed hints keep the read off the first two.
    tokio::time::sleep(Duration::from_secs(31)).await;
    let d = Daemon::fresh("").await;
    let started = micros_now();
    let done = d
        .run_job(
            "/api/v1/migrations",
            &bulk_job(ks, 1_000_000, &sources, &targets),
            WAIT,
        )
        .await;
    drop(resume);
    eprintln!("bulk copy: {}", done["progress"]);
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
    assert_eq!(snapshots_taken(&sources), [0, 0, 1], "{}", d.logs());
    assert!(
        d.logs().contains("holds hints for it"),
        "the log does not say why the first two were passed over:\n{}",
        d.logs()
    );
    assert_eq!(done["progress"]["rowsWritten"], ROWS + LATE, "{done}");
    assert_exact(ks, ROWS + LATE, started, false).await;
}

pub(crate) async fn at_rf_3_a_snapshot_read_with_a_source_node_down_reads_every_replica_that_answers()
 {
    // Source node 2 is stopped (its daemon stays up). It cannot say whether it holds hints for
    // the other two, so no replica can be read alone: every range is read from the nodes that
    // answer, merged (1 and 3), and the copy is exact once node 2 is back.
    const ROWS: usize = 3_000;
    rings::up();
    let ks = "ring_bulk_node_down";
    let (sources, targets) = bulk_rings(ks, ROWS).await;
    rings::stop(&[src_node(2)]);
    let d = Daemon::fresh("").await;
    let started = micros_now();
    let done = d
        .run_job(
            "/api/v1/migrations",
            &bulk_job(ks, 1_000_000, &sources, &targets),
            WAIT,
        )
        .await;
    eprintln!("bulk copy with source node 2 down: {}", done["progress"]);
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
    assert_eq!(snapshots_taken(&sources), [1, 0, 1], "{}", d.logs());
    assert!(
        d.logs().contains(
            "ranges whose replicas may each lack writes are read from every replica that answers"
        ),
        "the log does not say why two replicas were merged:\n{}",
        d.logs()
    );
    assert_eq!(done["progress"]["rowsWritten"], ROWS, "{done}");
    rings::up();
    assert_exact(ks, ROWS, started, false).await;
}

/// The start of a scenario's panic message: the final assertion repeats it, so that a run
/// whose log keeps only its end still says why each scenario failed.
fn panic_head(payload: &(dyn std::any::Any + Send)) -> String {
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic without a message)");
    let mut head: String = message.chars().take(600).collect();
    if head.len() < message.len() {
        head.push_str(" …");
    }
    head
}

/// The machine's load average and available memory, for a failure's report: a stall of the
/// rings is told apart from a defect by them.
fn machine_load() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let available = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        .unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "load average {}, MemAvailable {available} kB",
        load.join(" ")
    )
}

/// A failed scenario runs a second time only while the rings have run less than this (the whole
/// suite must stay within CI's limit even when every scenario fails).
const SECOND_ATTEMPT_BUDGET: Duration = Duration::from_secs(25 * 60);

/// A scenario on the rings, by name.
type Scenario = (
    &'static str,
    fn() -> futures::future::LocalBoxFuture<'static, ()>,
);

/// Every scenario on the rings, one after another; the moves of a node come last (a move that
/// fails half-way leaves node 3 on the spare host, where the others do not look for it).
pub(crate) async fn scenarios() {
    let all: [Scenario; 9] = [
        (
            "a_copy_at_local_quorum_goes_on_with_a_node_of_each_ring_stopped",
            || Box::pin(a_copy_at_local_quorum_goes_on_with_a_node_of_each_ring_stopped()),
        ),
        (
            "with_two_target_nodes_stopped_a_copy_waits_and_goes_on_when_they_are_back",
            || {
                Box::pin(
                    with_two_target_nodes_stopped_a_copy_waits_and_goes_on_when_they_are_back(),
                )
            },
        ),
        (
            "every_read_and_write_goes_to_a_replica_of_its_range",
            || Box::pin(every_read_and_write_goes_to_a_replica_of_its_range()),
        ),
        (
            "at_rf_3_a_bulk_load_whose_replica_daemon_died_resumes_without_loss",
            || Box::pin(at_rf_3_a_bulk_load_whose_replica_daemon_died_resumes_without_loss()),
        ),
        (
            "at_rf_3_the_bulk_paths_read_snapshots_and_load_sstables_on_every_replica",
            || Box::pin(at_rf_3_the_bulk_paths_read_snapshots_and_load_sstables_on_every_replica()),
        ),
        (
            "at_rf_3_the_snapshot_read_takes_one_replica_and_never_one_that_lacks_writes",
            || {
                Box::pin(
                    at_rf_3_the_snapshot_read_takes_one_replica_and_never_one_that_lacks_writes(),
                )
            },
        ),
        (
            "at_rf_3_a_snapshot_read_with_a_source_node_down_reads_every_replica_that_answers",
            || {
                Box::pin(at_rf_3_a_snapshot_read_with_a_source_node_down_reads_every_replica_that_answers())
            },
        ),
        (
            "ring_topology::a_node_joining_the_target_fails_an_sstable_load_at_once_and_one_leaving_does_not_stop_a_cql_copy",
            || {
                Box::pin(crate::ring_topology::a_node_joining_the_target_fails_an_sstable_load_at_once_and_one_leaving_does_not_stop_a_cql_copy())
            },
        ),
        (
            "ring_move::a_ring_node_moves_to_a_new_host_and_back_while_the_cluster_serves_at_quorum",
            || {
                Box::pin(crate::ring_move::a_ring_node_moves_to_a_new_host_and_back_while_the_cluster_serves_at_quorum())
            },
        ),
    ];
    let only = std::env::var("DROVER_TEST_RINGS_ONLY").unwrap_or_default();
    let rings_started = std::time::Instant::now();
    let mut failed = Vec::new();
    for (name, scenario) in all.into_iter().filter(|(name, _)| name.contains(&only)) {
        let (mut heads, mut passed) = (Vec::new(), false);
        for attempt in 1..=2 {
            eprintln!("rings: {name} (attempt {attempt}) ...");
            let started = std::time::Instant::now();
            // A panic ends the attempt, not the scenarios after it (the hook has printed it).
            match std::panic::AssertUnwindSafe(scenario())
                .catch_unwind()
                .await
            {
                Ok(()) => {
                    eprintln!("rings: {name} ok ({:.0?})", started.elapsed());
                    passed = true;
                    break;
                }
                Err(payload) => {
                    eprintln!("rings: {name} FAILED ({:.0?})", started.elapsed());
                    heads.push(format!(
                        "{} [after {:.0?}; {}]",
                        panic_head(payload.as_ref()),
                        started.elapsed(),
                        machine_load()
                    ));
                }
            }
            // Six JVMs on two cores shared with the rest of the suite have stalled for minutes
            // at a time: a scenario that failed runs once more, from the rings made whole again,
            // while the budget allows. A defect fails both attempts; a stall rarely strikes twice.
            // (Not a move of node 3: one that failed half-way leaves node 3 on the spare host.)
            if attempt == 2
                || rings_started.elapsed() > SECOND_ATTEMPT_BUDGET
                || name.starts_with("ring_move")
            {
                break;
            }
            if std::panic::catch_unwind(rings::up).is_err() {
                break;
            }
        }
        if !passed {
            failed.push(format!("{name}: {}", heads.join("\n  then: ")));
        } else if let Some(first) = heads.first() {
            eprintln!("rings: {name} passed on its second attempt; the first failed: {first}");
        }
    }
    assert!(
        failed.is_empty(),
        "ring scenarios failed (their whole panics are above):\n{}",
        failed.join("\n")
    );
}
