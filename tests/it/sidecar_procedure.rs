//! Apache Cassandra Sidecar's own live-migration procedure (its `docs/src/live-migration.adoc`,
//! phases 1 to 6), driven the way a Sidecar script drives it: plain HTTP calls with the
//! Sidecar's request bodies, and on every answer the Sidecar's expectations — fields, JSON
//! types, states and codes — against two drover daemons beside real Cassandra nodes. The node
//! then starts on the copied files under its new address and serves every row.
//!
//! The same procedure runs a second time with drover's extensions on the same steps (digests
//! while downloading, a bandwidth limit, the files threshold, SHA-256 verification, task
//! history, `/files-digest`): they must not change a Sidecar client's view of anything.
//!
//! Both runs use testenv's extra nodes `cassandra-lmsrc` (127.0.0.3) and `cassandra-lmdst`
//! (127.0.0.4), so they run one after the other in one test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use test_support::cql;
use test_support::{Daemon, Home};

const WAIT: Duration = Duration::from_secs(180);
pub(crate) const PREFIX: &str = "/api/v1/live-migration";

/// Who drives the procedure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// Exactly what a Sidecar client sends.
    Sidecar,
    /// The same steps with drover's extensions in the requests.
    Extended,
}

#[tokio::test]
async fn the_sidecar_procedure_moves_a_node_as_a_sidecar_client_expects() {
    procedure(Flavor::Sidecar).await;
    procedure(Flavor::Extended).await;
}

fn testenv(args: &[&str]) {
    let script = std::env::var("DROVER_TESTENV_SCRIPT")
        .expect("DROVER_TESTENV_SCRIPT (source target/testenv/env after scripts/testenv up)");
    let out = std::process::Command::new(script)
        .args(args)
        .output()
        .expect("run scripts/testenv");
    assert!(
        out.status.success(),
        "scripts/testenv {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `cassandra` section of a testenv extra node: its address and directories.
pub(crate) fn testenv_node(run: &Path, name: &str, address: &str) -> String {
    let dir = run.join(name);
    format!(
        "cassandra:\n  native_address: {address}:9042\n  data_file_directories: [{0}/data]\n  commitlog_directory: {0}/commitlog\n  hints_directory: {0}/hints\n  saved_caches_directory: {0}/saved_caches\n  cdc_raw_directory: {0}/cdc_raw\n",
        dir.display()
    )
}

/// A port free on both loopback addresses: the Sidecar reaches its peer on its own port, so
/// both daemons listen on the same one, each on its node's address.
pub(crate) fn port_free_on_both(a: &str, b: &str) -> u16 {
    for _ in 0..50 {
        let first = std::net::TcpListener::bind((a, 0)).unwrap();
        let port = first.local_addr().unwrap().port();
        if std::net::TcpListener::bind((b, port)).is_ok() {
            return port;
        }
    }
    panic!("no port free on both {a} and {b}");
}

/// The `live_migration` section of the Sidecar's guide, unchanged but for the host names.
fn sidecar_section(map: &str) -> String {
    format!(
        "live_migration:\n  migration_map:{map}\n  files_to_exclude: [ ]\n  dirs_to_exclude:\n    - glob:${{DATA_FILE_DIR}}/*/*/snapshots\n  max_concurrent_file_requests: 20\n"
    )
}

const MAP: &str = "\n    127.0.0.3: 127.0.0.4";
/// Phase 6: the entry removed, as the guide shows it.
const NO_MAP: &str = " { }";

/// One side of the migration: its drover daemon (restarted in phase 6 with another config).
pub(crate) struct Side {
    home: Home,
    listen: String,
    node: String,
    daemon: Option<Daemon>,
}

impl Side {
    pub(crate) async fn start(run: &Path, node: &str, address: &str, port: u16, map: &str) -> Self {
        let mut side = Self {
            home: Home::new(),
            listen: format!("{address}:{port}"),
            node: testenv_node(run, node, address),
            daemon: None,
        };
        side.restart(map).await;
        side
    }

    async fn restart(&mut self, map: &str) {
        self.daemon = None;
        let config = self.home.write_config_at(
            &self.listen,
            &format!("{}{}", self.node, sidecar_section(map)),
        );
        self.daemon = Some(Daemon::start_with(&self.home, &config).await);
    }

    pub(crate) fn d(&self) -> &Daemon {
        self.daemon.as_ref().expect("started")
    }

    /// What a curl call to `path` on this host answers: status and JSON (Null when none).
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let d = self.d();
        let mut req = d.client().request(method, d.url(path));
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, body).await
    }

    async fn patch(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::PATCH, path, None).await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::DELETE, path, None).await
    }

    /// Polls a task's status URL until `done` holds.
    pub(crate) async fn poll(&self, url: &str, done: impl Fn(&Value) -> bool) -> Value {
        self.d().wait_for(url, WAIT, done).await
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An integer of JSON (the Sidecar's `long`/`int`), not a float nor a string.
fn int(v: &Value, key: &str) -> i64 {
    assert!(
        v[key].is_i64() || v[key].is_u64(),
        "{key} is not an integer: {v:#}"
    );
    v[key].as_i64().unwrap()
}

fn string<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string: {v:#}"))
}

/// The Sidecar's `{taskId, statusUrl}` of a 202.
pub(crate) fn accepted(status: u16, body: &Value, route: &str) -> (String, String) {
    assert_eq!(status, 202, "{body:#}");
    let id = string(body, "taskId").to_string();
    let url = string(body, "statusUrl").to_string();
    assert_eq!(url, format!("{PREFIX}/{route}/{id}"), "{body:#}");
    (id, url)
}

const ITERATION_STATES: [&str; 8] = [
    "STARTING",
    "CLEANING",
    "PREPARING",
    "DOWNLOADING",
    "DOWNLOAD_COMPLETE",
    "SUCCESS",
    "FAILED",
    "CANCELLED",
];

/// The last iteration's state, once it is one a Sidecar client stops polling at.
pub(crate) fn copy_ended(task: &Value) -> bool {
    task["status"]
        .as_array()
        .and_then(|s| s.last())
        .is_some_and(|last| {
            ["SUCCESS", "FAILED", "CANCELLED"].contains(&last["state"].as_str().unwrap_or(""))
        })
}

/// A `LiveMigrationDataCopyResponse` as the Sidecar's client reads it.
fn check_copy_task(task: &Value, id: &str, port: u16, request: &Value) {
    assert_eq!(string(task, "taskId"), id, "{task:#}");
    assert_eq!(string(task, "source"), "127.0.0.3", "{task:#}");
    assert_eq!(int(task, "port"), i64::from(port), "{task:#}");
    assert_eq!(task["maxIterations"], request["maxIterations"], "{task:#}");
    assert_eq!(
        task["maxConcurrency"], request["maxConcurrency"],
        "{task:#}"
    );
    assert_eq!(
        task["successThreshold"].as_f64(),
        request["successThreshold"].as_f64(),
        "{task:#}"
    );
    let status = task["status"].as_array().expect("status is an array");
    assert!(!status.is_empty(), "{task:#}");
    let max = request["maxIterations"].as_u64().unwrap() as usize;
    assert!(
        status.len() <= max + 1,
        "at most maxIterations + 1 entries: {task:#}"
    );
    for (i, s) in status.iter().enumerate() {
        assert_eq!(int(s, "iteration"), i as i64, "{task:#}");
        assert!(ITERATION_STATES.contains(&string(s, "state")), "{s:#}");
        for key in [
            "totalSize",
            "totalFiles",
            "bytesToDownload",
            "filesToDownload",
            "filesDownloaded",
            "downloadFailures",
            "bytesDownloaded",
        ] {
            assert!(int(s, key) >= -1, "{key}: {s:#}");
        }
        if i + 1 < status.len() {
            // Only the last iteration may end the task.
            assert!(
                ["DOWNLOAD_COMPLETE", "FAILED"].contains(&string(s, "state")),
                "iteration {i} of a task that went on: {task:#}"
            );
        }
    }
}

/// `{state, endTime}`: `endTime` epoch milliseconds, or null before completion.
fn check_status(v: &Value, completed: bool) -> Option<i64> {
    if completed {
        assert_eq!(v["state"], "COMPLETED", "{v:#}");
        Some(int(v, "endTime"))
    } else {
        assert_eq!(v["state"], "NOT_COMPLETED", "{v:#}");
        assert!(v.get("endTime").is_some_and(Value::is_null), "{v:#}");
        None
    }
}

/// `InstanceFilesListResponse`: directories with size -1, `totalSize` the files' bytes.
fn check_listing(v: &Value) -> Vec<Value> {
    let files = v["files"].as_array().expect("files is an array").clone();
    assert!(!files.is_empty(), "{v:#}");
    let mut total = 0;
    for f in &files {
        assert!(
            string(f, "fileUrl").starts_with(&format!("{PREFIX}/files/")),
            "{f:#}"
        );
        assert!(int(f, "lastModifiedTime") > 0, "{f:#}");
        match string(f, "fileType") {
            "DIRECTORY" => assert_eq!(int(f, "size"), -1, "{f:#}"),
            "FILE" => total += int(f, "size"),
            other => panic!("fileType {other}"),
        }
        assert!(!string(f, "fileUrl").contains("/snapshots"), "{f:#}");
    }
    assert_eq!(
        int(v, "totalSize"),
        total,
        "totalSize counts the files' bytes"
    );
    files
}

/// The MD5 of a file as the Sidecar sends it (Base64), computed by Python's `hashlib`: an
/// implementation other than drover's.
fn md5_base64(path: &Path) -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import base64,hashlib,sys; print(base64.b64encode(hashlib.md5(open(sys.argv[1],'rb').read()).digest()).decode())",
        ])
        .arg(path)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Every row of `lm.t` on the node at `addr`.
async fn rows_of(addr: &str) -> BTreeMap<(i32, i32), String> {
    use futures::TryStreamExt;
    let session = cql::session(addr).await;
    let mut st = scylla::statement::unprepared::Statement::new("SELECT p, c, v FROM lm.t");
    st.set_page_size(5000);
    let rows: Vec<(i32, i32, String)> = session
        .query_iter(st, ())
        .await
        .expect("scan")
        .rows_stream::<(i32, i32, String)>()
        .expect("rows")
        .try_collect()
        .await
        .expect("rows");
    rows.into_iter().map(|(p, c, v)| ((p, c), v)).collect()
}

async fn procedure(flavor: Flavor) {
    let extended = flavor == Flavor::Extended;
    let run = PathBuf::from(
        std::env::var("DROVER_TESTENV_DIR")
            .expect("DROVER_TESTENV_DIR (source target/testenv/env)"),
    );
    for node in ["cassandra-lmsrc", "cassandra-lmdst"] {
        testenv(&["node-stop", node]);
        let _ = std::fs::remove_dir_all(run.join(node));
    }
    testenv(&["node-start", "cassandra-lmsrc"]);
    let node = std::sync::Arc::new(cql::session("127.0.0.3:9042").await);
    cql::exec(&node, "CREATE KEYSPACE lm WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    cql::exec(
        &node,
        "CREATE TABLE lm.t (p int, c int, v text, PRIMARY KEY (p, c))",
    )
    .await;
    // The fidelity matrix's hostile tables ride along once: the moved node must serve each of
    // them exactly as the source did (docs/fidelity.md, live migration).
    let hostile = match flavor {
        Flavor::Sidecar => {
            Some(crate::fidelity::NodeTables::write(&node, "127.0.0.3:9042", 7399, "lmfid").await)
        }
        Flavor::Extended => None,
    };
    let insert = node
        .prepare("INSERT INTO lm.t (p, c, v) VALUES (?, ?, ?)")
        .await
        .unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..3000 {
        node.execute_unpaged(&insert, (i % 100, i, format!("row {i}")))
            .await
            .unwrap();
        expected.insert((i % 100, i), format!("row {i}"));
    }

    let port = port_free_on_both("127.0.0.3", "127.0.0.4");
    let mut src = Side::start(&run, "cassandra-lmsrc", "127.0.0.3", port, MAP).await;
    let mut dst = Side::start(&run, "cassandra-lmdst", "127.0.0.4", port, MAP).await;
    let copies = format!("{PREFIX}/data-copy-tasks");
    let verifications = format!("{PREFIX}/files-verification-tasks");
    let status = format!("{PREFIX}/status");

    // Before anything: both NOT_COMPLETED, no tasks, the source's files listed as the
    // Sidecar lists them, and the destination may list its own (empty) directories too.
    for side in [&src, &dst] {
        let (code, body) = side.get(&status).await;
        assert_eq!(code, 200, "{body:#}");
        check_status(&body, false);
    }
    for list in [&copies, &verifications] {
        let (code, body) = dst.get(list).await;
        assert_eq!((code, body.clone()), (200, json!([])), "{list}");
    }
    let (code, listing) = src.get(&format!("{PREFIX}/files")).await;
    assert_eq!(code, 200, "{listing:#}");
    let files = check_listing(&listing);
    let (code, body) = dst.get(&format!("{PREFIX}/files")).await;
    assert_eq!(code, 200, "a destination lists its files: {body:#}");
    // Digests as the Sidecar sends them: MD5 in Base64, the algorithm echoed as sent. A table
    // of the system keyspace that is not written to once the node is up is a file that keeps
    // still for the comparison.
    let still = files
        .iter()
        .map(|f| string(f, "fileUrl").to_string())
        .find(|u| u.contains("/system_schema/keyspaces-") && u.ends_with("-Data.db"))
        .expect("a system_schema.keyspaces SSTable");
    let on_disk = run
        .join("cassandra-lmsrc/data")
        .join(still.split_once("/files/data/0/").unwrap().1);
    let (code, digest) = src.get(&format!("{still}?digestAlgorithm=MD5")).await;
    assert_eq!(code, 200, "{digest:#}");
    assert_eq!(digest["digestAlgorithm"], "MD5", "{digest:#}");
    assert_eq!(
        string(&digest, "digest"),
        md5_base64(&on_disk),
        "{digest:#}"
    );
    let (code, digest) = src.get(&format!("{still}?digestAlgorithm=xxhash32")).await;
    assert_eq!(code, 200, "{digest:#}");
    assert_eq!(digest["digestAlgorithm"], "xxhash32", "{digest:#}");
    let hex = string(&digest, "digest");
    assert!(
        (1..=8).contains(&hex.len())
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            && (hex == "0" || !hex.starts_with('0')),
        "XXHash32 as Long.toHexString: {hex}"
    );
    // A file is served only by a source; a directory is not a file.
    let (code, _) = dst.get(&still).await;
    assert_eq!(code, 404, "a destination serves no file");
    let dir = files
        .iter()
        .find(|f| f["fileType"] == "DIRECTORY")
        .expect("a directory");
    let (code, body) = src.get(string(dir, "fileUrl")).await;
    assert_eq!(code, 400, "a directory: {body:#}");

    // The guards at submission: maxConcurrency above max_concurrent_file_requests.
    let (code, body) = dst
        .post(
            &copies,
            Some(&json!({"maxIterations": 3, "successThreshold": 0.95, "maxConcurrency": 21})),
        )
        .await;
    assert_eq!(code, 400, "{body:#}");

    // Phase 1: the initial copy while the source node runs and takes writes.
    let writer = {
        let (node, insert) = (node.clone(), insert.clone());
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let mut expected = expected;
        let task = tokio::spawn(async move {
            let mut i = 3000;
            while !stopped.is_cancelled() {
                let (key, v) = if i % 2 == 0 {
                    ((i % 100, i), format!("row {i}"))
                } else {
                    let old = (i / 2) % 3000;
                    ((old % 100, old), format!("row {old}, rewritten at {i}"))
                };
                node.execute_unpaged(&insert, (key.0, key.1, v.clone()))
                    .await
                    .unwrap();
                expected.insert(key, v);
                i += 1;
            }
            expected
        });
        (stop, task)
    };
    let initial = if extended {
        // drover: the share of files, not bytes (a running node's commit-log segments keep
        // the share of bytes low), digests checked while downloading, a bandwidth limit.
        json!({"maxIterations": 5, "successThreshold": 0.9, "maxConcurrency": 4,
               "thresholdBasis": "files", "verifyDigest": "xxh3", "maxBytesPerSecond": 1_000_000_000u64})
    } else {
        json!({"maxIterations": 3, "successThreshold": 0.95, "maxConcurrency": 10})
    };
    let (code, body) = dst.post(&copies, Some(&initial)).await;
    let (id, url) = accepted(code, &body, "data-copy-tasks");
    // One task at a time, whatever its kind.
    let (code, body) = dst
        .post(
            &verifications,
            Some(&json!({"maxConcurrency": 10, "digestAlgorithm": "MD5"})),
        )
        .await;
    assert!(
        code == 409 || code == 202,
        "a verification while a copy runs: {body:#}"
    );
    let raced = code == 202;
    let task = dst.poll(&url, copy_ended).await;
    if raced {
        // The copy had ended before the second POST (a fast machine): let the verification
        // end too, so that the slot is free for phase 2.
        let (_, vurl) = accepted(code, &body, "files-verification-tasks");
        dst.poll(&vurl, |v| {
            v["state"] != "IN_PROGRESS" && v["state"] != "NOT_STARTED"
        })
        .await;
    }
    check_copy_task(&task, &id, port, &initial);
    let iterations = task["status"].as_array().unwrap();
    let last = iterations.last().unwrap();
    if extended {
        assert_eq!(last["state"], "SUCCESS", "{task:#}\n{}", dst.d().logs());
    } else if last["state"] == "FAILED" {
        // The guide: "If successThreshold is not met after maxIterations, the last entry will
        // be in FAILED. [...] proceed to Phase 2". Then every pass was made.
        assert_eq!(iterations.len(), 4, "{task:#}");
    } else {
        assert_eq!(last["state"], "SUCCESS", "{task:#}");
    }
    assert!(
        int(&iterations[0], "bytesDownloaded") > 0 && int(&iterations[0], "totalFiles") > 0,
        "the first pass downloads: {task:#}"
    );
    let (code, list) = dst.get(&copies).await;
    assert_eq!(code, 200);
    if !raced {
        let list = list.as_array().expect("a bare array");
        assert_eq!(list.len(), 1, "{list:#?}");
        assert_eq!(list[0]["taskId"], id.as_str());
    }
    // Cancelling a task that has ended answers it as it is.
    let (code, cancelled) = dst.patch(&url).await;
    assert_eq!(code, 200, "{cancelled:#}");
    assert_eq!(cancelled["status"], task["status"], "{cancelled:#}");
    writer.0.cancel();
    let expected = writer.1.await.unwrap();

    // Phase 2: the source node stops; the final sync leaves nothing different.
    drop(node);
    testenv(&["node-stop", "cassandra-lmsrc"]);
    let last_pass = if extended {
        json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 10, "verifyDigest": "xxh3"})
    } else {
        json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 10})
    };
    let (code, body) = dst.post(&copies, Some(&last_pass)).await;
    let (id, url) = accepted(code, &body, "data-copy-tasks");
    let task = dst.poll(&url, copy_ended).await;
    check_copy_task(&task, &id, port, &last_pass);
    let last = task["status"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["state"], "SUCCESS", "{task:#}\n{}", dst.d().logs());
    // A pass with nothing left to download: the Sidecar's -1 for what it never computed.
    assert_eq!(
        (int(&last, "bytesToDownload"), int(&last, "filesToDownload")),
        (-1, -1),
        "{task:#}"
    );
    assert!(
        int(&last, "totalFiles") > 0 && int(&last, "totalSize") > 0,
        "{last:#}"
    );
    if extended {
        let (code, all) = dst.get(&format!("{copies}?all=true")).await;
        assert_eq!(code, 200);
        assert_eq!(all.as_array().map(Vec::len), Some(2), "{all:#}");
        let digest = format!("{PREFIX}/files-digest");
        let (a, b) = (src.get(&digest).await, dst.get(&digest).await);
        assert_eq!((a.0, b.0), (200, 200));
        assert_eq!(a.1["digest"], b.1["digest"], "{a:?} {b:?}");
    }

    // Phase 3: verification. Both fields are required.
    let (code, body) = dst
        .post(&verifications, Some(&json!({"digestAlgorithm": "MD5"})))
        .await;
    assert_eq!(code, 400, "maxConcurrency is required: {body:#}");
    let algorithm = if extended { "sha256" } else { "MD5" };
    let (code, body) = dst
        .post(
            &verifications,
            Some(&json!({"maxConcurrency": 10, "digestAlgorithm": algorithm})),
        )
        .await;
    let (vid, vurl) = accepted(code, &body, "files-verification-tasks");
    let report = dst
        .poll(&vurl, |v| {
            ["COMPLETED", "FAILED", "CANCELLED"].contains(&v["state"].as_str().unwrap_or(""))
        })
        .await;
    assert_eq!(string(&report, "id"), vid, "{report:#}");
    assert_eq!(
        report["state"],
        "COMPLETED",
        "{report:#}\n{}",
        dst.d().logs()
    );
    assert_eq!(report["digestAlgorithm"], algorithm, "{report:#}");
    assert_eq!(string(&report, "source"), "127.0.0.3");
    assert_eq!(int(&report, "port"), i64::from(port));
    for key in [
        "filesNotFoundAtSource",
        "filesNotFoundAtDestination",
        "metadataMismatches",
        "digestMismatches",
        "digestVerificationFailures",
    ] {
        assert_eq!(int(&report, key), 0, "{key}: {report:#}");
    }
    // Directories count in metadataMatched only.
    let (matched, files_matched) = (
        int(&report, "metadataMatched"),
        int(&report, "filesMatched"),
    );
    assert!(files_matched > 20 && matched > files_matched, "{report:#}");

    // Phase 4: both hosts marked COMPLETED, each on its own.
    for side in [&src, &dst] {
        let before = now_ms();
        let (code, body) = side.post(&status, None).await;
        assert_eq!(code, 200, "{body:#}");
        let end = check_status(&body, true).unwrap();
        assert!((before..=now_ms()).contains(&end), "endTime {end}");
        let (code, again) = side.get(&status).await;
        assert_eq!(code, 200);
        assert_eq!(check_status(&again, true), Some(end));
        let (code, body) = side.post(&status, None).await;
        assert_eq!(code, 400, "completion is one-shot: {body:#}");
        let (code, body) = side.delete(&status).await;
        assert_eq!(code, 403, "DELETE /status while in migration_map: {body:#}");
    }
    let (code, body) = dst
        .post(
            &copies,
            Some(&json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 10})),
        )
        .await;
    assert_eq!(code, 400, "a copy onto a COMPLETED destination: {body:#}");
    let (code, body) = dst
        .post(
            &verifications,
            Some(&json!({"maxConcurrency": 10, "digestAlgorithm": "MD5"})),
        )
        .await;
    assert_eq!(
        code, 400,
        "a verification on a COMPLETED destination: {body:#}"
    );
    let (code, body) = src.get(&still).await;
    assert_eq!(code, 400, "a COMPLETED source serves no file: {body:#}");

    // Phase 5: the destination node starts on the copied files, under its new address, with
    // every row written before the source stopped.
    testenv(&["node-start", "cassandra-lmdst"]);
    let rows = rows_of("127.0.0.4:9042").await;
    assert_eq!(rows.len(), expected.len(), "rows written before the stop");
    let wrong: Vec<_> = expected
        .iter()
        .filter(|(k, v)| rows.get(k) != Some(v))
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "rows with other values on the new node: {wrong:?}"
    );
    assert!(
        expected.values().any(|v| v.contains("rewritten")),
        "old rows were rewritten during the passes"
    );
    if let Some(hostile) = &hostile {
        hostile.hold_moved("127.0.0.4:9042").await;
    }

    // Phase 6: the entry leaves migration_map on both hosts (a restart), the API is off, and
    // DELETE /status clears the completion record.
    for side in [&mut src, &mut dst] {
        side.restart(NO_MAP).await;
    }
    let (code, _) = dst.get(&copies).await;
    assert_eq!(code, 404, "data-copy-tasks once out of the map");
    for side in [&src, &dst] {
        // The Sidecar's code gates GET /status on the map (its guide says reads stay open).
        let (code, _) = side.get(&status).await;
        assert_eq!(code, 404, "GET /status once out of the map");
        let (code, body) = side.delete(&status).await;
        assert_eq!(
            (code, body.clone()),
            (200, json!({"status": "OK"})),
            "{body:#}"
        );
        let (code, body) = side.delete(&status).await;
        assert_eq!(code, 400, "nothing left to clear: {body:#}");
    }
    drop((src, dst));
    testenv(&["node-stop", "cassandra-lmdst"]);
}
