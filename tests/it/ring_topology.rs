//! Topology changes of the target ring while a copy runs: never a silent gap.
//!
//! A fourth node (testenv's `cassandra-ringdst-4`, 127.0.0.24, its own tokens and rack)
//! bootstraps into the target ring during an SSTable load. SSTables are built for the ring as
//! it was and imported on its replicas, so a unit imported after the new node streamed its
//! ranges would be missing from it; the load must fail at once, naming the node, and the same
//! job submitted again once the node is up must build its SSTables for the four-node ring and
//! leave every row on every replica of its partition, the new node included.
//!
//! Then the node is decommissioned during a CQL copy, which goes on: coordinators write to a
//! range's pending replicas while it moves, and drover's units are token ranges of the whole
//! ring, not of its nodes. The copy is exact, and every replica holds its rows.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::Consistency;
use scylla::statement::unprepared::Statement;
use test_support::cql::{exec, session};
use test_support::rings::{self, DST, dst_node};
use test_support::{Daemon, ended};

use crate::fidelity::micros_now;
use crate::rings::{
    PER_PARTITION, WAIT, assert_exact, bulk_job, bulk_rings, job, nodetool, phase, sidecar, written,
};

const JOINING: &str = "cassandra-ringdst-4";
const JOINING_ADDR: &str = "127.0.0.24";

/// Each replica of each partition of `ks.t` (the driver's token map of the target ring) read
/// alone at `ONE`: the partitions where one holds fewer rows than the source wrote, with the
/// replica.
async fn rows_missing_on_a_replica(s: &Session, ks: &str, rows: usize) -> Vec<String> {
    use futures::TryStreamExt;
    s.refresh_metadata().await.unwrap();
    let state = s.get_cluster_state();
    let mut out = Vec::new();
    for p in 0..rows.div_ceil(PER_PARTITION) {
        let expect = PER_PARTITION.min(rows - p * PER_PARTITION);
        let token = state.compute_token(ks, "t", &(p as i32,)).unwrap();
        for (node, _) in state.get_token_endpoints(ks, "t", token) {
            let mut st = Statement::new(format!("SELECT c FROM {ks}.t WHERE p = {p}"));
            st.set_consistency(Consistency::One);
            st.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                NodeIdentifier::Node(node.clone()),
                None,
            )));
            let got: Vec<(i32,)> = s
                .query_iter(st, ())
                .await
                .unwrap()
                .rows_stream::<(i32,)>()
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            if got.len() != expect {
                out.push(format!(
                    "partition {p}: {} of {expect} rows on {}",
                    got.len(),
                    node.address
                ));
            }
        }
    }
    out
}

/// Runs `testenv args` on a thread of its own, so that a copy can go on meanwhile.
fn testenv_aside(args: &'static [&'static str]) -> tokio::task::JoinHandle<Duration> {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        rings::testenv(args);
        started.elapsed()
    })
}

pub(crate) async fn a_node_joining_the_target_fails_an_sstable_load_at_once_and_one_leaving_does_not_stop_a_cql_copy()
 {
    const ROWS: usize = 6_000;
    rings::up();
    let run = PathBuf::from(
        std::env::var("DROVER_TESTENV_DIR")
            .expect("DROVER_TESTENV_DIR (source target/testenv/env)"),
    );
    // A node that joins has no data of its own.
    rings::testenv(&["node-stop", JOINING]);
    let _ = std::fs::remove_dir_all(run.join(JOINING));
    let ks = "ring_topology";
    let (sources, targets) = bulk_rings(ks, ROWS).await;
    let d = Daemon::fresh("").await;
    let started = micros_now();
    let home = test_support::Home::new();
    let savepoints = home.path().join("savepoints");
    // Slow enough for the node to join in the middle of the first run; the second run, once
    // it has joined, at full speed.
    let yaml = |joined: Option<&Daemon>| {
        // bulkSidecars ends the target section: the joined node's daemon is one more entry.
        let extra = joined.map_or(String::new(), |j| {
            format!("    {JOINING_ADDR}: {}\n", j.addr)
        });
        format!(
            "{}{extra}savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            bulk_job(
                ks,
                if joined.is_some() { 100_000 } else { 100 },
                &sources,
                &targets
            ),
            savepoints.display()
        )
    };

    // The SSTable load, and a node joining the target ring while it runs.
    let id = d.submit_job("/api/v1/migrations", &yaml(None)).await;
    let url = format!("/api/v1/migrations/{id}");
    let before = d
        .wait_for(&url, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64().unwrap_or(0) >= 3 || ended(j)
        })
        .await;
    assert_eq!(before["state"], "RUNNING", "{before}");
    let joining = testenv_aside(&["node-start", JOINING]);
    let failed = d.wait_for(&url, WAIT, ended).await;
    eprintln!(
        "joining: the load ended {} at {} rows, {} units done: {}",
        failed["state"],
        written(&failed),
        failed["progress"]["unitsDone"],
        failed["error"]
    );
    assert_eq!(
        failed["state"], "FAILED",
        "the load finished before the node joined (slow the load down): {failed}"
    );
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(JOINING_ADDR)
            && (error.contains("is joining the ring") || error.contains("joined the ring"))
            && error.contains("Submit the job again once every node is up and normal"),
        "{failed}"
    );
    let joined_in = joining.await.unwrap();
    eprintln!("joining: {JOINING_ADDR} up and normal in every node's view after {joined_in:.1?}");

    // Once the node has joined, the same job goes on from its savepoint with SSTables built
    // for the four-node ring.
    let beside = sidecar(JOINING).await;
    let again = d
        .submit_job("/api/v1/migrations", &yaml(Some(&beside)))
        .await;
    let url = format!("/api/v1/migrations/{again}");
    let done = d.wait_for(&url, WAIT, ended).await;
    eprintln!("joined: the same job again: {}", done["progress"]);
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
    assert!(
        done["progress"]["unitsSkipped"].as_u64().unwrap_or(0) > 0,
        "nothing was resumed: {done}"
    );
    assert!(
        beside.logs().contains("SSTables imported"),
        "the joined node's daemon imported nothing:\n{}",
        beside.logs()
    );
    let dst = session(DST[0]).await;
    let missing = rows_missing_on_a_replica(&dst, ks, ROWS).await;
    assert!(
        missing.is_empty(),
        "replicas lack rows after the load:\n{}",
        missing.join("\n")
    );
    assert_exact(ks, ROWS, started, false).await;

    // A CQL copy of the same table, and the fourth node decommissioned while it runs.
    exec(&dst, &format!("TRUNCATE {ks}.t")).await;
    let started = micros_now();
    let copy = d.submit_job("/api/v1/migrations", &job(ks, 100)).await;
    let url = format!("/api/v1/migrations/{copy}");
    let before = d
        .wait_for(&url, WAIT, |j| written(j) >= 1_000 || ended(j))
        .await;
    assert_eq!(before["state"], "RUNNING", "{before}");
    let leaving = tokio::task::spawn_blocking(|| {
        let started = Instant::now();
        nodetool(JOINING, &["decommission"]);
        started.elapsed()
    });
    let done = d.wait_for(&url, WAIT, ended).await;
    let left_in = leaving.await.unwrap();
    eprintln!(
        "leaving: decommissioned in {left_in:.1?}; the copy: {} ({}), {}",
        done["state"],
        phase(&done),
        done["progress"]
    );
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
    assert!(
        written(&done) >= ROWS as u64,
        "the copy wrote {} of {ROWS} rows: {done}",
        written(&done)
    );
    rings::testenv(&["node-stop", JOINING]);
    let _ = std::fs::remove_dir_all(run.join(JOINING));
    let dst = session(DST[0]).await;
    let status = nodetool(&dst_node(1), &["status", ks]);
    assert!(
        !status.contains(JOINING_ADDR),
        "the decommissioned node is still listed:\n{status}"
    );
    let missing = rows_missing_on_a_replica(&dst, ks, ROWS).await;
    assert!(
        missing.is_empty(),
        "replicas lack rows after the copy:\n{}",
        missing.join("\n")
    );
    assert_exact(ks, ROWS, started, false).await;
}
