//! Live migration of one node of a three-node ring at RF 3, as Cassandra Sidecar's guide
//! intends it, while a generator writes and reads at `QUORUM` the whole time.
//!
//! Node 3 of the source ring moves to testenv's spare host (127.0.0.14): passes while it
//! serves, the node drained and stopped, the final exact pass and a verification, then the
//! spare started on the copied files — the node's host id, tokens and data under a new
//! address. It then moves back to its own host with the node killed (SIGKILL) instead of
//! drained, which also leaves the ring as the other ring tests expect it.
//!
//! After each move: every node sees three nodes up and normal, the moved node has the old
//! one's host id and tokens, every row acknowledged before the stop is on the new host alone
//! (read at `ONE` pinned to it), no `QUORUM` read of an acknowledged write ever missed it,
//! every acknowledged write is readable at `QUORUM`, and a preview repair of the keyspace on
//! the moved node says what a repair would stream. Each move prints how long the node was
//! down (the figures in docs/live-migration.md come from these lines).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::Consistency;
use scylla::statement::unprepared::Statement;
use serde_json::{Value, json};
use test_support::cql::{exec, session};
use test_support::rings::{self, SRC, src_node};
use tokio_util::sync::CancellationToken;

use crate::live_migration::{assert_all_matched, verification_ended};
use crate::rings::nodetool;
use crate::sidecar_procedure::{PREFIX, Side, accepted, copy_ended, port_free_on_both};

const KS: &str = "moved";
/// Partitions of the generator's table (its rows: `c` in partition `c % PARTITIONS`).
const PARTITIONS: i32 = 128;
/// The generator's writers, each at most this many writes (and as many reads) a second.
const WRITERS: usize = 4;
const PER_WRITER_PER_SECOND: u64 = 60;
/// A write the old node acknowledged this long before it stopped is in its files: it must be
/// on the new host before any hint is delivered. (A later one may have reached only the other
/// two replicas, and reaches the moved node as a hint.)
const SETTLED: Duration = Duration::from_secs(5);

/// The testenv name and the address of a host of node 3.
#[derive(Clone, Copy)]
struct Host {
    name: &'static str,
    addr: &'static str,
}

const OWN: Host = Host {
    name: "cassandra-ringsrc-3",
    addr: "127.0.0.13",
};
const SPARE: Host = Host {
    name: "cassandra-ringsrc-4",
    addr: "127.0.0.14",
};

#[derive(Clone, Copy, Debug)]
enum Stop {
    /// `nodetool drain`, then SIGTERM: what the Sidecar's guide asks for.
    Drain,
    /// SIGKILL: a node that crashed, or an operator who could not drain it.
    Kill,
}

/// What one writer of the generator saw.
#[derive(Default)]
struct Seen {
    /// Rows whose write was acknowledged at QUORUM, with when.
    acked: Vec<(i32, Instant)>,
    write_errors: u64,
    reads: u64,
    read_errors: u64,
    /// Acknowledged rows a QUORUM read did not return (or returned with another value).
    missed: Vec<i32>,
}

fn value_of(c: i32) -> String {
    format!("value of row {c}")
}

/// Writers that insert new rows at QUORUM and read back an earlier acknowledged row at QUORUM
/// after each write, until stopped.
struct Generator {
    stop: CancellationToken,
    writers: Vec<tokio::task::JoinHandle<Seen>>,
}

impl Generator {
    async fn start(first: i32) -> Self {
        let s = Arc::new(session(SRC[0]).await);
        let mut insert = s
            .prepare(format!("INSERT INTO {KS}.t (p, c, v) VALUES (?, ?, ?)"))
            .await
            .unwrap();
        insert.set_consistency(Consistency::Quorum);
        let mut select = s
            .prepare(format!("SELECT v FROM {KS}.t WHERE p = ? AND c = ?"))
            .await
            .unwrap();
        select.set_consistency(Consistency::Quorum);
        let stop = CancellationToken::new();
        let writers = (0..WRITERS)
            .map(|w| {
                let (s, insert, select, stop) =
                    (s.clone(), insert.clone(), select.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut seen = Seen::default();
                    let mut tick =
                        tokio::time::interval(Duration::from_millis(1000 / PER_WRITER_PER_SECOND));
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                    for k in 0.. {
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tick.tick() => {}
                        }
                        let c = first + (w + k * WRITERS) as i32;
                        match s
                            .execute_unpaged(&insert, (c % PARTITIONS, c, value_of(c)))
                            .await
                        {
                            Ok(_) => seen.acked.push((c, Instant::now())),
                            Err(_) => seen.write_errors += 1,
                        }
                        if seen.acked.is_empty() {
                            continue;
                        }
                        let old = seen.acked[(k * 7919) % seen.acked.len()].0;
                        seen.reads += 1;
                        match s.execute_unpaged(&select, (old % PARTITIONS, old)).await {
                            Ok(r) => {
                                let v = r
                                    .into_rows_result()
                                    .ok()
                                    .and_then(|r| r.maybe_first_row::<(String,)>().ok().flatten());
                                if v != Some((value_of(old),)) {
                                    seen.missed.push(old);
                                }
                            }
                            Err(_) => seen.read_errors += 1,
                        }
                    }
                    seen
                })
            })
            .collect();
        Self { stop, writers }
    }

    async fn stop(self) -> Seen {
        self.stop.cancel();
        let mut all = Seen::default();
        for w in self.writers {
            let seen = w.await.unwrap();
            all.acked.extend(seen.acked);
            all.write_errors += seen.write_errors;
            all.reads += seen.reads;
            all.read_errors += seen.read_errors;
            all.missed.extend(seen.missed);
        }
        all.acked.sort_by_key(|(c, _)| *c);
        all
    }
}

/// The rows of the table as one node (`only`) or the cluster at `consistency` answers, read
/// partition by partition: row → value.
async fn rows(s: &Session, only: Option<&str>, consistency: Consistency) -> BTreeMap<i32, String> {
    let mut st = Statement::new(format!("SELECT c, v FROM {KS}.t WHERE p = ?"));
    st.set_consistency(consistency);
    st.set_page_size(10_000);
    if let Some(addr) = only {
        let at: SocketAddr = format!("{addr}:9042").parse().unwrap();
        st.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
            NodeIdentifier::NodeAddress(at),
            None,
        )));
    }
    let prepared = s.prepare(st).await.unwrap();
    let mut out = BTreeMap::new();
    for p in 0..PARTITIONS {
        use futures::TryStreamExt;
        let got: Vec<(i32, String)> = s
            .execute_iter(prepared.clone(), (p,))
            .await
            .unwrap_or_else(|e| panic!("partition {p} at {consistency:?} ({only:?}): {e}"))
            .rows_stream::<(i32, String)>()
            .unwrap()
            .try_collect()
            .await
            .unwrap_or_else(|e| panic!("partition {p} at {consistency:?} ({only:?}): {e}"));
        out.extend(got);
    }
    out
}

/// Rows of `acked` that `found` lacks or holds with another value.
fn missing(acked: &[(i32, Instant)], found: &BTreeMap<i32, String>) -> Vec<i32> {
    acked
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| found.get(c) != Some(&value_of(*c)))
        .collect()
}

/// A node's host id and tokens, as `nodetool info --tokens` of that node says.
fn identity(name: &str) -> (String, Vec<String>) {
    let text = nodetool(name, &["info", "--tokens"]);
    let field = |l: &str, key: &str| {
        l.split_once(':')
            .filter(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
    };
    let id = text
        .lines()
        .find_map(|l| field(l, "ID"))
        .unwrap_or_else(|| panic!("no ID in nodetool info of {name}:\n{text}"));
    let mut tokens: Vec<String> = text.lines().filter_map(|l| field(l, "Token")).collect();
    tokens.sort();
    assert!(
        !tokens.is_empty(),
        "no tokens in nodetool info of {name}:\n{text}"
    );
    (id, tokens)
}

/// Waits until no node of the source ring lists hints (`nodetool listpendinghints`): writes the
/// moved node missed while it was down have been delivered to it.
async fn hints_delivered(nodes: &[&str]) -> Duration {
    let started = Instant::now();
    loop {
        let pending: Vec<String> = nodes
            .iter()
            .map(|n| nodetool(n, &["listpendinghints"]))
            .filter(|t| !t.contains("does not have any pending hints"))
            .collect();
        if pending.is_empty() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "hints still pending after 180 s:\n{}",
            pending.join("\n")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What `nodetool repair --preview --full` of the keyspace on node `name` says would stream: its
/// summary line, and the bytes in it (0 when in sync).
fn repair_preview(name: &str) -> (String, u64) {
    let text = nodetool(name, &["repair", "--preview", "--full", KS]);
    if text.contains("Previewed data was in sync") {
        return ("previewed data was in sync".into(), 0);
    }
    let line = text
        .lines()
        .find(|l| l.contains("Total estimated streaming"))
        .unwrap_or_else(|| panic!("no summary in the preview repair:\n{text}"))
        .trim()
        .to_string();
    (line.clone(), bytes_in(&line))
}

/// The byte count of a preview summary (`…, 12.5 KiB bytes` or `…, 3 bytes`).
fn bytes_in(line: &str) -> u64 {
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let at = words
        .iter()
        .rposition(|w| *w == "bytes")
        .unwrap_or_else(|| panic!("no byte count in {line:?}"));
    // The unit stands apart (`12.5 KiB bytes`) or against the number (`324.531KiB bytes`,
    // as Cassandra 5.0 prints it), or there is none (`3 bytes`).
    let (number, unit) = match words[at - 1] {
        u @ ("KiB" | "MiB" | "GiB" | "B") => (words[at - 2], u),
        w => {
            let split = w.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(w.len());
            let unit = if split == w.len() { "B" } else { &w[split..] };
            (&w[..split], unit)
        }
    };
    let n: f64 = number
        .parse()
        .unwrap_or_else(|_| panic!("no byte count in {line:?}"));
    let scale = match unit {
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    (n * scale) as u64
}

fn last_state(task: &Value) -> &str {
    task["status"]
        .as_array()
        .and_then(|s| s.last())
        .and_then(|l| l["state"].as_str())
        .unwrap_or("")
}

/// One move of node 3 from host `from` (running) to host `to` (stopped, its files deleted)
/// by two daemons beside them, as the Sidecar's guide does it; returns when the moved node
/// is up and normal in every node's view, with when the old node stopped serving.
async fn move_node(run: &Path, from: Host, to: Host, stop: Stop) -> Instant {
    let before = identity(from.name);
    let _ = std::fs::remove_dir_all(run.join(to.name));
    let port = port_free_on_both(from.addr, to.addr);
    let map = format!("\n    {}: {}", from.addr, to.addr);
    let src = Side::start(run, from.name, from.addr, port, &map).await;
    let dst = Side::start(run, to.name, to.addr, port, &map).await;
    let copies = format!("{PREFIX}/data-copy-tasks");

    // Passes while the node serves, until 90 % of the files are alike (the commit log segment
    // being written never is).
    let passes = Instant::now();
    let body = json!({"maxIterations": 5, "successThreshold": 0.9, "maxConcurrency": 8,
                      "thresholdBasis": "files"});
    let (code, answer) = dst.post(&copies, Some(&body)).await;
    let (_, url) = accepted(code, &answer, "data-copy-tasks");
    let task = dst.poll(&url, copy_ended).await;
    let iterations = task["status"].as_array().unwrap();
    let bytes: i64 = iterations
        .iter()
        .map(|i| i["bytesDownloaded"].as_i64().unwrap_or(0))
        .sum();
    eprintln!(
        "move {} -> {}: {} passes while serving in {:.1?}, {} bytes, last {}",
        from.addr,
        to.addr,
        iterations.len(),
        passes.elapsed(),
        bytes,
        last_state(&task)
    );

    let down = Instant::now();
    match stop {
        Stop::Drain => {
            nodetool(from.name, &["drain"]);
            rings::testenv(&["node-stop", from.name]);
        }
        Stop::Kill => rings::testenv(&["node-kill", from.name]),
    }
    let stopped = down.elapsed();
    let last = Instant::now();
    let body = json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 8});
    let (code, answer) = dst.post(&copies, Some(&body)).await;
    let (_, url) = accepted(code, &answer, "data-copy-tasks");
    let task = dst.poll(&url, copy_ended).await;
    assert_eq!(
        last_state(&task),
        "SUCCESS",
        "the final pass: {task:#}\n{}",
        dst.d().logs()
    );
    let final_pass = last.elapsed();
    let verify = Instant::now();
    let (code, answer) = dst
        .post(
            &format!("{PREFIX}/files-verification-tasks"),
            Some(&json!({"maxConcurrency": 8, "digestAlgorithm": "MD5"})),
        )
        .await;
    let (_, url) = accepted(code, &answer, "files-verification-tasks");
    assert_all_matched(&dst.poll(&url, verification_ended).await);
    let verified = verify.elapsed();
    drop((src, dst));

    let start = Instant::now();
    rings::testenv(&["node-start", to.name]);
    eprintln!(
        "move {} -> {} ({stop:?}): node down {:.1?} = stop {:.1?} + final pass {:.1?} + verification {:.1?} + start until the ring sees it up {:.1?}",
        from.addr,
        to.addr,
        down.elapsed(),
        stopped,
        final_pass,
        verified,
        start.elapsed()
    );

    // The node is the same node under another address.
    assert_eq!(
        identity(to.name),
        before,
        "host id and tokens of the moved node"
    );
    for n in [src_node(1), src_node(2), to.name.to_string()] {
        let status = nodetool(&n, &["status", KS]);
        let up: Vec<&str> = status.lines().filter(|l| l.starts_with("UN ")).collect();
        assert_eq!(up.len(), 3, "{n} sees three nodes up:\n{status}");
        assert!(
            up.iter()
                .any(|l| l.contains(&format!(" {} ", to.addr)) && l.contains(&before.0)),
            "{n} sees {} up with host id {}:\n{status}",
            to.addr,
            before.0
        );
        assert!(
            !status.contains(&format!(" {} ", from.addr)),
            "{n} still lists {}:\n{status}",
            from.addr
        );
    }
    down
}

/// Checks one move: the generator's view, the new host's own rows, every acknowledged write
/// at QUORUM, and a preview repair once hints are delivered.
async fn check_move(to: Host, down: Instant, seen: &Seen, stop: Stop) {
    eprintln!(
        "generator: {} writes acknowledged, {} failed; {} reads, {} failed, {} missed an acknowledged write",
        seen.acked.len(),
        seen.write_errors,
        seen.reads,
        seen.read_errors,
        seen.missed.len()
    );
    assert!(
        seen.missed.is_empty(),
        "QUORUM reads missed acknowledged writes: {:?}",
        &seen.missed[..seen.missed.len().min(20)]
    );
    let settled: Vec<(i32, Instant)> = seen
        .acked
        .iter()
        .copied()
        .filter(|(_, at)| *at + SETTLED < down)
        .collect();
    assert!(
        settled.len() > 500,
        "too few writes before the stop: {}",
        settled.len()
    );
    let s = session(SRC[0]).await;
    let own = rows(&s, Some(to.addr), Consistency::One).await;
    let lost = missing(&settled, &own);
    assert!(
        lost.is_empty(),
        "{} of {} rows acknowledged before the stop are not on the moved node: {:?}",
        lost.len(),
        settled.len(),
        &lost[..lost.len().min(20)]
    );
    let all = rows(&s, None, Consistency::Quorum).await;
    let lost = missing(&seen.acked, &all);
    assert!(
        lost.is_empty(),
        "{} acknowledged writes are not readable at QUORUM: {:?}",
        lost.len(),
        &lost[..lost.len().min(20)]
    );
    let nodes = [src_node(1), src_node(2), to.name.to_string()];
    let waited = hints_delivered(&nodes.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let (summary, bytes) = repair_preview(to.name);
    let table = crate::rings::node_bytes(to.name, KS);
    eprintln!(
        "after hints ({waited:.1?}): preview repair on {}: {summary}; the table holds {table} bytes there",
        to.addr
    );
    // A write being applied while the trees are built differs briefly; the moved node's data
    // must not, once drained. After a kill, previews have found whole ranges out of sync
    // (106.8 and 324.5 KiB estimated for a ~110 KB table in two CI runs, in sync in others;
    // the cause is not established): measured, not asserted, and docs/live-migration.md asks
    // for a repair after a kill.
    if matches!(stop, Stop::Drain) {
        assert!(
            bytes * 20 <= table.max(1),
            "a repair would stream {bytes} bytes of a {table}-byte table: {summary}"
        );
    }
}

pub(crate) async fn a_ring_node_moves_to_a_new_host_and_back_while_the_cluster_serves_at_quorum() {
    rings::up();
    let run = PathBuf::from(
        std::env::var("DROVER_TESTENV_DIR")
            .expect("DROVER_TESTENV_DIR (source target/testenv/env)"),
    );
    let s = session(SRC[0]).await;
    exec(&s, &format!("DROP KEYSPACE IF EXISTS {KS}")).await;
    exec(
        &s,
        &format!(
            "CREATE KEYSPACE {KS} WITH replication = {{'class': 'NetworkTopologyStrategy', '{}': 3}}",
            rings::DC
        ),
    )
    .await;
    exec(
        &s,
        &format!("CREATE TABLE {KS}.t (p int, c int, v text, PRIMARY KEY (p, c))"),
    )
    .await;

    for (i, (from, to, stop)) in [(OWN, SPARE, Stop::Drain), (SPARE, OWN, Stop::Kill)]
        .into_iter()
        .enumerate()
    {
        let generator = Generator::start(i as i32 * 10_000_000).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let down = move_node(&run, from, to, stop).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let seen = generator.stop().await;
        check_move(to, down, &seen, stop).await;
    }
}

#[test]
fn preview_byte_counts_are_read_in_every_form() {
    let line = |b: &str| format!("Total estimated streaming: 5 ranges, 6 sstables, {b} bytes");
    assert_eq!(bytes_in(&line("324.531KiB")), 332_319);
    assert_eq!(bytes_in(&line("12.5 KiB")), 12_800);
    assert_eq!(bytes_in(&line("2MiB")), 2 << 20);
    assert_eq!(bytes_in(&line("3")), 3);
}
