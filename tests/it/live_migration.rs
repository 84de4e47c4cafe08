//! Live instance migration between two daemons on loopback, each with its own directories:
//! listing, serving (Range, digests, path safety, limits), status, the request filter, and
//! data-copy and verification tasks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use test_support::{Daemon, Home, ended, wait_until};

const WAIT: Duration = Duration::from_secs(120);

/// The `cassandra` section of a node whose directories live under `root`.
pub(crate) fn node_dirs(root: &Path) -> String {
    format!(
        "cassandra:\n  native_address: 127.0.0.1:1\n  data_file_directories: [{0}/data0, {0}/data1]\n  commitlog_directory: {0}/commitlog\n  hints_directory: {0}/hints\n  saved_caches_directory: {0}/saved_caches\n",
        root.display()
    )
}

pub(crate) fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Deterministic bytes that differ from file to file.
pub(crate) fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The hex digest of `text` by a coreutils tool (`sha256sum`, `md5sum`): an implementation
/// other than drover's.
fn coreutils_digest(tool: &str, text: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(tool)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{tool} failed");
    String::from_utf8(out.stdout).unwrap()[..]
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

/// The Base64 of the bytes that `hex` spells, by coreutils (`basenc`, `base64`).
fn coreutils_base64_of_hex(hex: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "basenc --base16 -d | base64"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(hex.to_ascii_uppercase().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "basenc | base64 failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A source daemon on a fixed port (so that it can be restarted at the same address).
pub(crate) struct SourceNode {
    home: Home,
    pub(crate) addr: String,
    config: PathBuf,
}

impl SourceNode {
    pub(crate) fn new(extra: &str) -> Self {
        let home = Home::new();
        let addr = format!("127.0.0.1:{}", free_port());
        let config = home.write_config_at(
            &addr,
            &format!(
                "{}live_migration:\n  enabled: true\n  migration_map:\n    \"{addr}\": \"destination:1\"\n  files_to_exclude: [\"glob:${{HINTS_DIR}}/*.hprof\"]\n{extra}",
                node_dirs(home.path())
            ),
        );
        Self { home, addr, config }
    }

    pub(crate) fn root(&self) -> &Path {
        self.home.path()
    }

    pub(crate) async fn start(&self) -> Daemon {
        Daemon::start_with(&self.home, &self.config).await
    }
}

pub(crate) async fn destination(home: &Home, source: &str, extra: &str) -> Daemon {
    Daemon::start_with(home, &destination_config(home, source, extra)).await
}

/// The config file of [`destination`].
fn destination_config(home: &Home, source: &str, extra: &str) -> std::path::PathBuf {
    home.write_config(&format!(
        "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{source}\": \"destination:1\"\n{extra}",
        node_dirs(home.path())
    ))
}

/// A node's files: tables in two data directories, a snapshot, a commit log, hints.
pub(crate) fn fill_source(root: &Path) -> Vec<(String, Vec<u8>)> {
    let files = vec![
        ("data0/ks/t-1/nb-1-big-Data.db", content(1, 3_000_000)),
        ("data0/ks/t-1/nb-1-big-Index.db", content(2, 40_000)),
        (
            "data0/ks/t-1/nb-1-big-TOC.txt",
            b"Data.db\nIndex.db\n".to_vec(),
        ),
        ("data0/ks/t-1/empty.db", vec![]),
        ("data1/ks/t-2/nb-5-big-Data.db", content(3, 500_000)),
        ("commitlog/CommitLog-7-1.log", content(4, 200_000)),
        ("hints/node-1.hints", content(5, 1_000)),
    ];
    for (p, c) in &files {
        write(&root.join(p), c);
    }
    write(
        &root.join("data0/ks/t-1/snapshots/s1/nb-1-big-Data.db"),
        b"snap",
    );
    write(&root.join("hints/heap.hprof"), b"dump");
    std::fs::create_dir_all(root.join("saved_caches")).unwrap();
    files.into_iter().map(|(p, c)| (p.to_string(), c)).collect()
}

pub(crate) fn url_of(rel: &str) -> String {
    let (dir, rest) = rel.split_once('/').unwrap();
    let (t, i) = match dir {
        "data0" => ("data", 0),
        "data1" => ("data", 1),
        other => (other, 0),
    };
    format!("/api/v1/live-migration/files/{t}/{i}/{rest}")
}

async fn get_bytes(
    d: &Daemon,
    path: &str,
    range: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut req = d.client().get(d.url(path));
    if let Some(r) = range {
        req = req.header("Range", r);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, headers, res.bytes().await.unwrap().to_vec())
}

async fn put_json(d: &Daemon, path: &str, body: &Value) -> (u16, Value) {
    let res = d.client().put(d.url(path)).json(body).send().await.unwrap();
    test_support::json_of(res).await
}

async fn patch(d: &Daemon, path: &str) -> (u16, Value) {
    let res = d.client().patch(d.url(path)).send().await.unwrap();
    test_support::json_of(res).await
}

/// GET `path` byte for byte (no normalization of `..`), on a connection of its own.
fn raw_get(d: &Daemon, path: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        d.addr
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A verification report that found every file identical.
pub(crate) fn assert_all_matched(report: &Value) {
    assert_eq!(report["state"], "COMPLETED", "{report:#}");
    for k in [
        "filesNotFoundAtSource",
        "filesNotFoundAtDestination",
        "metadataMismatches",
        "digestMismatches",
        "digestVerificationFailures",
    ] {
        assert_eq!(report[k], 0, "{k}: {report:#}");
    }
}

#[tokio::test]
async fn a_source_lists_and_serves_its_files_safely() {
    let src = SourceNode::new("  max_concurrent_file_requests: 1\n");
    let mut files = fill_source(src.root());
    // Larger than what the socket buffers of an unread response can hold.
    let large = (
        "data1/ks/t-3/nb-9-big-Data.db".to_string(),
        content(6, 48_000_000),
    );
    write(&src.root().join(&large.0), &large.1);
    files.push(large.clone());
    std::os::unix::fs::symlink("/etc/hostname", src.root().join("data0/ks/escape")).unwrap();
    let daemon = src.start().await;

    let (status, list) = daemon.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 200, "{list}");
    // Asked for gzip, the listing comes compressed and reads the same; file bytes never do.
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let res = raw
        .get(daemon.url("/api/v1/live-migration/files"))
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-encoding"], "gzip");
    let gz = res.bytes().await.unwrap();
    let mut json = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut json).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), list);
    assert!(gz.len() * 3 < json.len(), "{} of {}", gz.len(), json.len());
    let res = raw
        .get(daemon.url(&url_of(&large.0)))
        .header("Accept-Encoding", "gzip")
        .header("Range", "bytes=0-99")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 206);
    assert!(res.headers().get("content-encoding").is_none());
    assert_eq!(&res.bytes().await.unwrap()[..], &large.1[..100]);
    let listed: Vec<&str> = list["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["fileType"] == "FILE")
        .map(|f| f["fileUrl"].as_str().unwrap())
        .collect();
    let mut expected: Vec<String> = files.iter().map(|(p, _)| url_of(p)).collect();
    expected.sort();
    let mut got: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(
        got, expected,
        "snapshots, excluded files and links are not listed"
    );
    let total: u64 = files.iter().map(|(_, c)| c.len() as u64).sum();
    assert_eq!(list["totalSize"], total);
    assert!(
        list["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["fileType"] == "DIRECTORY"
                && f["fileUrl"] == "/api/v1/live-migration/files/data/0/ks/t-1")
    );
    // Sidecar lists directories with size -1 (and leaves them out of totalSize).
    for f in list["files"].as_array().unwrap() {
        if f["fileType"] == "DIRECTORY" {
            assert_eq!(f["size"], -1, "{f}");
        }
    }

    // Whole files and ranges.
    let (path, data) = (&url_of(&files[0].0), &files[0].1);
    let (status, headers, body) = get_bytes(&daemon, path, None).await;
    assert_eq!(status, 200);
    assert_eq!(&body, data);
    assert_eq!(headers["accept-ranges"], "bytes");
    let len = data.len();
    for (range, start, end) in [
        ("bytes=0-9", 0, 9),
        ("bytes=100-", 100, len - 1),
        ("bytes=-10", len - 10, len - 1),
        ("bytes=5-99999999", 5, len - 1),
    ] {
        let (status, headers, body) = get_bytes(&daemon, path, Some(range)).await;
        assert_eq!(status, 206, "{range}");
        assert_eq!(body, data[start..=end], "{range}");
        assert_eq!(
            headers["content-range"],
            format!("bytes {start}-{end}/{len}")
        );
    }
    let (status, headers, body) = get_bytes(&daemon, path, Some(&format!("bytes={len}-"))).await;
    assert_eq!(status, 416);
    assert_eq!(headers["content-range"], format!("bytes */{len}"));
    let err: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(err["code"], 416);
    // A range that covers the whole file is the whole file, as Sidecar sends it: 200, no
    // Content-Range.
    for range in ["bytes=0-", "bytes=0-99999999", &format!("bytes=-{len}")] {
        let (status, headers, body) = get_bytes(&daemon, path, Some(range)).await;
        assert_eq!(status, 200, "{range}");
        assert!(headers.get("content-range").is_none(), "{range}");
        assert!(&body == data, "{range}");
    }
    // Several ranges, or any other form, are refused (416) with Sidecar's message.
    for range in ["bytes=0-1,5-6", "bytes=9-1", "items=0-1", "bytes=x-"] {
        let (status, _, body) = get_bytes(&daemon, path, Some(range)).await;
        let err: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((status, err["code"].clone()), (416, json!(416)), "{range}");
        assert_eq!(
            err["message"],
            format!(
                "Invalid range header: {range}. Supported Range formats are bytes=<start>-<end>, bytes=<start>-, bytes=-<suffix-length>"
            )
        );
    }

    // Digests, against values computed by other implementations (coreutils' sha256sum and
    // md5sum, Python's xxhash) of the same 3,000,000 bytes of `content(1, ..)`; MD5 as
    // Sidecar writes it, in Base64 (md5sum's 20d1b8ad7fe4e237492988eb810eaab8 through
    // `basenc --base16 -d | base64`). The algorithm is echoed as asked.
    for (asked, expected) in [
        (
            "sha256",
            "045c65b687d34d504271bbe898dff4241e16fc3da4ac41103ee0240207d55177",
        ),
        ("xxh3", "74129eb53779671e"),
        ("md5", "ING4rX/k4jdJKYjrgQ6quA=="),
        ("MD5", "ING4rX/k4jdJKYjrgQ6quA=="),
        ("XXHash32", "584229fa"),
    ] {
        let (status, d) = daemon.get(&format!("{path}?digestAlgorithm={asked}")).await;
        assert_eq!(status, 200, "{asked}: {d}");
        assert_eq!(d["digest"], expected, "{asked}: {d}");
        assert_eq!(d["digestAlgorithm"], asked, "{asked}: {d}");
    }
    for (asked, message) in [
        (
            "crc",
            "Unsupported digest algorithm crc; accepted (any case): MD5, XXHash32, sha256, xxh3",
        ),
        ("", "Digest algorithm name cannot be null or empty"),
    ] {
        let (status, d) = daemon.get(&format!("{path}?digestAlgorithm={asked}")).await;
        assert_eq!((status, d["code"].clone()), (400, json!(400)), "{d}");
        assert_eq!(d["message"], message, "{d}");
    }

    // Paths that leave their directory, or name nothing.
    for (p, code) in [
        ("/api/v1/live-migration/files/data/0/%2e%2e/x", 400),
        (
            "/api/v1/live-migration/files/data/0/ks/%2e%2e/%2e%2e/data1/ks/t-2/nb-5-big-Data.db",
            400,
        ),
        ("/api/v1/live-migration/files/data/0/%2Fetc%2Fpasswd", 400),
        ("/api/v1/live-migration/files/tmp/0/x", 400),
        ("/api/v1/live-migration/files/data/7/x", 400),
        ("/api/v1/live-migration/files/data/zero/x", 400),
        ("/api/v1/live-migration/files/data/0/ks/escape", 403),
        // A directory: Sidecar's 400.
        ("/api/v1/live-migration/files/data/0/ks/t-1", 400),
        ("/api/v1/live-migration/files/data/0/ks/t-1/missing.db", 404),
        (
            "/api/v1/live-migration/files/data/0/ks/t-1/snapshots/s1/nb-1-big-Data.db",
            404,
        ),
        ("/api/v1/live-migration/files/hints/0/heap.hprof", 404),
    ] {
        let (status, body) = raw_get(&daemon, p);
        assert_eq!(status, code, "{p}: {body}");
        assert_eq!(body["code"], code, "{p}: {body}");
    }

    // One file request at a time here: a second one while a download is open gets 503.
    let big = url_of(&files.last().unwrap().0);
    let open = daemon.client().get(daemon.url(&big)).send().await.unwrap();
    assert_eq!(open.status(), 200);
    let (status, headers, _) = get_bytes(&daemon, &big, None).await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    drop(open);

    // The list digest, and destination routes answering 404 on a source.
    // It is the documented digest of the sorted "url size" lines, computed here by coreutils.
    let mut lines: Vec<String> = files
        .iter()
        .map(|(p, c)| format!("{} {}\n", url_of(p), c.len()))
        .collect();
    lines.sort();
    for (asked, tool) in [("", "sha256sum"), ("?digestAlgorithm=md5", "md5sum")] {
        let (status, digest) = daemon
            .get(&format!("/api/v1/live-migration/files-digest{asked}"))
            .await;
        assert_eq!(status, 200, "{digest}");
        let mut expected = coreutils_digest(tool, &lines.concat());
        if tool == "md5sum" {
            // MD5 digests are Base64, as Sidecar writes them.
            expected = coreutils_base64_of_hex(&expected);
        }
        assert_eq!(digest["digest"], expected, "{digest}");
        assert_eq!(digest["digestAlgorithm"], tool.trim_end_matches("sum"));
        assert_eq!(digest["files"], files.len());
        assert_eq!(digest["totalSize"], total);
    }
    let (status, body) = daemon.get("/api/v1/live-migration/data-copy-tasks").await;
    assert_eq!(status, 404, "{body}");

    // Status: a second POST is refused, and a COMPLETED source serves no file (400, as
    // Sidecar answers).
    let (_, s) = daemon.get("/api/v1/live-migration/status").await;
    assert_eq!(s, json!({"state": "NOT_COMPLETED", "endTime": null}));
    let before = chrono::Utc::now().timestamp_millis();
    let (status, s) = daemon
        .post_json("/api/v1/live-migration/status", &Value::Null)
        .await;
    assert_eq!(
        (status, s["state"].clone()),
        (200, json!("COMPLETED")),
        "{s}"
    );
    // Epoch milliseconds, a number.
    let end_time = s["endTime"].as_i64().unwrap();
    assert!((before..before + 60_000).contains(&end_time), "{s}");
    let (status, e) = daemon
        .post_json("/api/v1/live-migration/status", &Value::Null)
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        e["message"], "Live migration marked as COMPLETED earlier.",
        "{e}"
    );
    let (status, _, _) = get_bytes(&daemon, &big, None).await;
    assert_eq!(status, 400);
    let (status, _) = daemon.get(&format!("{path}?digestAlgorithm=md5")).await;
    assert_eq!(status, 400);
    // The status is cleared only once the node has left migration_map: 403 while it is in.
    let delete_status = |d: &Daemon| {
        let req = d.client().delete(d.url("/api/v1/live-migration/status"));
        async move { test_support::json_of(req.send().await.unwrap()).await }
    };
    let (status, e) = delete_status(&daemon).await;
    assert_eq!(status, 403, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("live_migration.migration_map"),
        "{e}"
    );
    let (_, s) = daemon.get("/api/v1/live-migration/status").await;
    assert_eq!(s, json!({"state": "COMPLETED", "endTime": end_time}));

    // Switched off at runtime: every route hides; the choice survives a restart.
    let (status, view) = put_json(
        &daemon,
        "/api/v1/admin/live-migration",
        &json!({"enabled": false}),
    )
    .await;
    assert_eq!(
        (status, view["role"].clone()),
        (200, json!("source")),
        "{view}"
    );
    let (status, body) = daemon.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 404, "{body}");
    drop(daemon);
    let daemon = src.start().await;
    let (status, _) = daemon.get("/api/v1/live-migration/status").await;
    assert_eq!(status, 404);
    let (_, view) = daemon.get("/api/v1/admin/live-migration").await;
    assert_eq!(view["enabled"], false);
    assert_eq!(view["setBy"], "admin");
    // Off and still in the map: DELETE hides too.
    assert_eq!(delete_status(&daemon).await.0, 404);
    drop(daemon);

    // The node leaves the map (Sidecar's last phase): GET /status is 404, as Sidecar's code
    // answers; DELETE clears the COMPLETED status (whatever the switch says: it is the
    // cleanup step), once.
    std::fs::write(
        &src.config,
        std::fs::read_to_string(&src.config)
            .unwrap()
            .replace(&format!("\"{}\"", src.addr), "\"10.255.255.1:1\""),
    )
    .unwrap();
    let daemon = src.start().await;
    let (_, view) = daemon.get("/api/v1/admin/live-migration").await;
    assert_eq!(view["role"], "none", "{view}");
    let (status, _) = daemon.get("/api/v1/live-migration/status").await;
    assert_eq!(status, 404);
    let (status, ok) = delete_status(&daemon).await;
    assert_eq!((status, ok), (200, json!({"status": "OK"})));
    let (status, e) = delete_status(&daemon).await;
    assert_eq!(status, 400, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("Live Migration status is not set as completed"),
        "{e}"
    );
}

/// Where data-copy tasks are started.
const COPY_TASKS: &str = "/api/v1/live-migration/data-copy-tasks";

/// Where verification tasks are started.
const VERIFY_TASKS: &str = "/api/v1/live-migration/files-verification-tasks";

/// Starts a task on `dst` by POSTing `body` to `tasks`, which must accept it; returns the
/// task's status URL and id.
async fn start_task(dst: &Daemon, tasks: &str, body: &Value) -> (String, String) {
    let (status, accepted) = dst.post_json(tasks, body).await;
    assert_eq!(status, 202, "{accepted}");
    let field = |name: &str| accepted[name].as_str().unwrap().to_string();
    (field("statusUrl"), field("taskId"))
}

/// Starts a data-copy task on `dst`; returns its status URL and id.
pub(crate) async fn start_copy(dst: &Daemon, body: &Value) -> (String, String) {
    start_task(dst, COPY_TASKS, body).await
}

/// Runs a data-copy task on `dst` until it ends, however it ends.
pub(crate) async fn copy_to_end(dst: &Daemon, body: Value) -> Value {
    let (url, _) = start_copy(dst, &body).await;
    dst.wait_for(&url, WAIT, ended).await
}

/// Starts a verification task (SHA-256, 4 files at once: both fields are required) on
/// `dst`; returns its status URL and id.
async fn start_verify(dst: &Daemon) -> (String, String) {
    start_task(
        dst,
        VERIFY_TASKS,
        &json!({"maxConcurrency": 4, "digestAlgorithm": "sha256"}),
    )
    .await
}

/// Asserts that the JSON object `text` names the Sidecar's fields of a verification task
/// first, in the Sidecar's order (a parsed `Value` keeps no order).
fn assert_sidecar_verification_order(text: &str) {
    let at = |k: &str| {
        text.find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k}: {text}"))
    };
    let order = [
        "id",
        "digestAlgorithm",
        "state",
        "source",
        "port",
        "filesNotFoundAtSource",
        "filesNotFoundAtDestination",
        "metadataMatched",
        "metadataMismatches",
        "digestMismatches",
        "digestVerificationFailures",
        "filesMatched",
        "taskId",
    ];
    assert_eq!(at("id"), 1, "{text}");
    for pair in order.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{pair:?}: {text}");
    }
}

/// Whether a verification task has ended (Sidecar's states).
pub(crate) fn verification_ended(task: &Value) -> bool {
    !["NOT_STARTED", "IN_PROGRESS"].contains(&task["state"].as_str().unwrap_or(""))
}

/// Runs a verification task on `dst` until it ends; returns its id and its report.
async fn verify_to_end(dst: &Daemon) -> (String, Value) {
    let (url, id) = start_verify(dst).await;
    (id, dst.wait_for(&url, WAIT, verification_ended).await)
}

/// The fields of a verification task a Sidecar client reads, in the Sidecar's order, with
/// their JSON types.
fn assert_sidecar_verification_shape(task: &Value) {
    let sidecar = [
        "id",
        "digestAlgorithm",
        "state",
        "source",
        "port",
        "filesNotFoundAtSource",
        "filesNotFoundAtDestination",
        "metadataMatched",
        "metadataMismatches",
        "digestMismatches",
        "digestVerificationFailures",
        "filesMatched",
    ];
    for k in sidecar {
        assert!(task.get(k).is_some(), "{k}: {task:#}");
    }
    assert!(
        task["id"].is_string() && task["source"].is_string(),
        "{task:#}"
    );
    assert!(task["digestAlgorithm"].is_string(), "{task:#}");
    for k in &sidecar[4..] {
        assert!(task[k].is_u64(), "{k}: {task:#}");
    }
    assert!(
        [
            "NOT_STARTED",
            "IN_PROGRESS",
            "COMPLETED",
            "FAILED",
            "CANCELLED"
        ]
        .contains(&task["state"].as_str().unwrap()),
        "{task:#}"
    );
}

pub(crate) fn same_tree(src: &Path, dst: &Path, files: &[(String, Vec<u8>)]) {
    for (p, c) in files {
        let got = std::fs::read(dst.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(got == *c, "{p}: content differs");
        let (a, b) = (
            std::fs::metadata(src.join(p)).unwrap().modified().unwrap(),
            std::fs::metadata(dst.join(p)).unwrap().modified().unwrap(),
        );
        let ms =
            |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(ms(a), ms(b), "{p}: mtime");
    }
}

pub(crate) fn staging_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".drover-part") {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test]
async fn a_destination_pulls_every_file_in_iterations_and_verifies_them() {
    let src = SourceNode::new("");
    let mut files = fill_source(src.root());
    use std::os::unix::fs::PermissionsExt;
    let private = "hints/node-1.hints";
    std::fs::set_permissions(
        src.root().join(private),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let source = src.start().await;
    let home = Home::new();
    let dst = destination(&home, &src.addr, "").await;

    // Bad requests.
    for (body, code) in [
        (
            json!({"maxIterations": 0, "successThreshold": 0.9, "maxConcurrency": 2}),
            400,
        ),
        (
            json!({"maxIterations": 2, "successThreshold": 1.5, "maxConcurrency": 2}),
            400,
        ),
        (
            json!({"maxIterations": 2, "successThreshold": 0.9, "maxConcurrency": 2, "verifyDigest": "md5"}),
            400,
        ),
        (json!({"maxIterations": 2, "successThreshold": 0.9}), 400),
    ] {
        let (status, err) = dst.post_json(COPY_TASKS, &body).await;
        assert_eq!(status, code, "{body}: {err}");
        assert_eq!(err["code"], code);
    }
    // A destination lists its files (as Sidecar's does), but serves none of them.
    let (status, list) = dst.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 200, "{list}");
    let (status, _) = dst
        .get("/api/v1/live-migration/files/data/0/ks/t-1/nb-1-big-Data.db")
        .await;
    assert_eq!(status, 404);

    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 3, "successThreshold": 0.9, "maxConcurrency": 3, "verifyDigest": "sha256"}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(task["maxIterations"], 3);
    assert_eq!(task["source"], "127.0.0.1");
    let iterations = task["status"].as_array().unwrap();
    assert_eq!(iterations[0]["state"], "DOWNLOAD_COMPLETE", "{task:#}");
    // The files and the source's directories (ks and the table of each data directory),
    // all counted as the Sidecar counts them.
    let dirs = 4;
    assert_eq!(iterations[0]["totalFiles"], files.len() + dirs, "{task:#}");
    let bytes: usize = files.iter().map(|(_, c)| c.len()).sum();
    assert_eq!(iterations[0]["totalSize"], bytes, "{task:#}");
    assert_eq!(iterations[0]["bytesToDownload"], bytes, "{task:#}");
    assert_eq!(iterations[0]["filesToDownload"], files.len() + dirs);
    assert_eq!(iterations[0]["filesDownloaded"], files.len() + dirs);
    assert_eq!(iterations.last().unwrap()["state"], "SUCCESS");
    // The Sidecar's order of fields, its counters unknown (-1) when nothing was downloaded.
    let last = iterations.last().unwrap();
    assert_eq!(last["bytesToDownload"], -1, "{task:#}");
    assert_eq!(last["filesToDownload"], -1, "{task:#}");
    // (Read as text: a parsed JSON value does not keep the order.)
    let text = dst
        .get_text(&format!(
            "{COPY_TASKS}/{}",
            task["taskId"].as_str().unwrap()
        ))
        .await;
    let in_order = |keys: &[&str], from: usize| {
        let mut at = from;
        for k in keys {
            let found = text[at..]
                .find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} not after {at} in {text}"));
            at += found;
        }
    };
    in_order(
        &[
            "taskId",
            "source",
            "port",
            "maxIterations",
            "successThreshold",
            "maxConcurrency",
            "status",
            "state",
        ],
        0,
    );
    in_order(
        &[
            "iteration",
            "state",
            "totalSize",
            "totalFiles",
            "bytesToDownload",
            "filesToDownload",
            "filesDownloaded",
            "downloadFailures",
            "bytesDownloaded",
        ],
        text.find("\"status\":").unwrap(),
    );
    // A cancel of a finished task answers it as it is (the Sidecar's 200).
    let (status, same) = patch(
        &dst,
        &format!("{COPY_TASKS}/{}", task["taskId"].as_str().unwrap()),
    )
    .await;
    assert_eq!(status, 200, "{same}");
    assert_eq!(same["state"], "SUCCEEDED", "{same:#}");
    assert_eq!(same["status"], task["status"], "{same:#}");
    // The list: the current task only, as a bare array; every one with ?all=true.
    let (status, list) = dst.get(COPY_TASKS).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list[0]["taskId"], task["taskId"], "{list:#}");
    same_tree(src.root(), home.path(), &files);
    // File modes come with the files (the source lists them).
    let mode = |p: std::path::PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(home.path().join(private)), 0o600);
    assert_eq!(
        mode(home.path().join(&files[0].0)),
        mode(src.root().join(&files[0].0))
    );
    assert!(!home.path().join("data0/ks/t-1/snapshots").exists());
    assert!(home.path().join("saved_caches").is_dir());

    // The source changes: a file compacted away, a new one, one rewritten with another size.
    std::fs::remove_file(src.root().join(&files[1].0)).unwrap();
    files.remove(1);
    write(
        &src.root().join("data0/ks/t-1/nb-2-big-Data.db"),
        &content(9, 70_000),
    );
    files.push(("data0/ks/t-1/nb-2-big-Data.db".into(), content(9, 70_000)));
    write(&src.root().join(&files[4].0), &content(10, 250_000));
    files[4].1 = content(10, 250_000);
    // One only touched: same size and content, another modification time.
    set_mtime(&src.root().join(&files[5].0), 1_600_000_000_123);
    // Also a stray local file the source never had, and a stray directory (a table dropped
    // at the source): the Sidecar deletes both.
    write(&home.path().join("data1/ks/t-2/stray.db"), b"stray");
    std::fs::create_dir_all(home.path().join("data1/ks/t-old/sub")).unwrap();
    // The lists of files now differ, and so do their digests.
    let (_, theirs) = source.get("/api/v1/live-migration/files-digest").await;
    let (status, mine) = dst.get("/api/v1/live-migration/files-digest").await;
    assert_eq!(status, 200, "{mine}");
    assert_ne!(mine["digest"], theirs["digest"], "{mine} vs {theirs}");
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert_eq!(
        task["status"][0]["filesToDownload"], 3,
        "the new, the resized and the touched file: {task:#}"
    );
    same_tree(src.root(), home.path(), &files);
    assert!(!home.path().join("data0/ks/t-1/nb-1-big-Index.db").exists());
    // Both sides' file lists in one request each.
    let (_, theirs) = source.get("/api/v1/live-migration/files-digest").await;
    let (status, mine) = dst.get("/api/v1/live-migration/files-digest").await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine["digest"], theirs["digest"], "{mine} vs {theirs}");
    assert!(!home.path().join("data1/ks/t-2/stray.db").exists());
    assert!(!home.path().join("data1/ks/t-old").exists());

    // Same size, same modification time, other content (a commit log written through a memory
    // map): size and time cannot see it; the final pass's verifyDigest must.
    let rewritten = src.root().join(&files[3].0);
    let when = std::fs::metadata(&rewritten).unwrap().modified().unwrap();
    std::fs::write(&rewritten, content(11, files[3].1.len())).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&rewritten)
        .unwrap()
        .set_modified(when)
        .unwrap();
    let copy = |body: Value| {
        let dst = &dst;
        async move {
            let task = copy_to_end(dst, body).await;
            assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
            task
        }
    };
    let task =
        copy(json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2})).await;
    assert_eq!(task["status"][0]["state"], "SUCCESS", "{task:#}");
    assert_eq!(task["status"][0]["filesToDownload"], -1, "{task:#}");
    assert!(std::fs::read(home.path().join(&files[3].0)).unwrap() == files[3].1);
    let task = copy(json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2, "verifyDigest": "xxh3"})).await;
    assert_eq!(task["status"][0]["filesToDownload"], 1, "{task:#}");
    assert_eq!(task["status"][0]["filesDownloaded"], 1, "{task:#}");
    assert_eq!(task["status"].as_array().unwrap().len(), 2, "{task:#}");
    files[3].1 = content(11, files[3].1.len());
    same_tree(src.root(), home.path(), &files);
    // The same for a commit-log segment: the final sync (1.0) compares the segments written
    // through a memory map by content even without verifyDigest, since a Sidecar client
    // never asks for it; a pass below 1.0 does not (the node still writes them).
    let segment = files
        .iter()
        .position(|(p, _)| p.starts_with("commitlog/"))
        .expect("a commit-log segment");
    let rewritten = src.root().join(&files[segment].0);
    let when = std::fs::metadata(&rewritten).unwrap().modified().unwrap();
    let next = content(12, files[segment].1.len());
    std::fs::write(&rewritten, &next).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&rewritten)
        .unwrap()
        .set_modified(when)
        .unwrap();
    let task =
        copy(json!({"maxIterations": 2, "successThreshold": 0.99, "maxConcurrency": 2})).await;
    assert_eq!(task["status"][0]["filesToDownload"], -1, "{task:#}");
    let task =
        copy(json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2})).await;
    assert_eq!(task["status"][0]["filesToDownload"], 1, "{task:#}");
    files[segment].1 = next;
    same_tree(src.root(), home.path(), &files);

    // Verification (Sidecar's algorithm): everything matches, files and directories by type,
    // size and time, then every file by digest.
    let mut verifications = Vec::new();
    let (id, report) = verify_to_end(&dst).await;
    verifications.push(id.clone());
    // The Sidecar keeps one task of either kind: the latest is a verification, so the list
    // of data-copy tasks is empty; drover still shows every one with ?all=true.
    let (status, list) = dst.get(COPY_TASKS).await;
    assert_eq!((status, list.clone()), (200, json!([])), "{list:#}");
    let (status, all) = dst.get(&format!("{COPY_TASKS}?all=true")).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all.as_array().unwrap().len(), 6, "{all:#}");
    assert_eq!(all[5]["taskId"], task["taskId"], "{all:#}");
    assert_all_matched(&report);
    assert_sidecar_verification_shape(&report);
    assert_eq!(report["id"], id.as_str(), "{report:#}");
    assert_eq!(report["taskId"], id.as_str(), "{report:#}");
    let text = dst
        .client()
        .get(dst.url(&format!("{VERIFY_TASKS}/{id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_sidecar_verification_order(&text);
    assert_eq!(report["source"], "127.0.0.1", "{report:#}");
    assert_eq!(report["digestAlgorithm"], "sha256", "{report:#}");
    assert!(report["error"].is_null(), "{report:#}");
    // Files only are matched by digest; directories count among the matched metadata.
    assert_eq!(report["filesMatched"], files.len(), "{report:#}");
    let all = report["metadataMatched"].as_u64().unwrap();
    assert!(all > files.len() as u64, "{report:#}");
    // The Sidecar's own algorithm names, case-insensitive, and echoed as sent.
    for algorithm in ["MD5", "XXHash32"] {
        let (url, _) = start_task(
            &dst,
            VERIFY_TASKS,
            &json!({"maxConcurrency": 2, "digestAlgorithm": algorithm}),
        )
        .await;
        let report = dst.wait_for(&url, WAIT, verification_ended).await;
        assert_all_matched(&report);
        assert_eq!(report["digestAlgorithm"], algorithm, "{report:#}");
        assert_eq!(report["filesMatched"], files.len(), "{report:#}");
        verifications.push(report["id"].as_str().unwrap().to_string());
    }

    // A byte flipped in place, its size and time kept: the lists agree, one digest differs.
    let victim = home.path().join(&files[0].0);
    let when = std::fs::metadata(&victim).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[1234] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&victim)
        .unwrap()
        .set_modified(when)
        .unwrap();
    let (id, report) = verify_to_end(&dst).await;
    verifications.push(id);
    assert_eq!(report["state"], "FAILED", "{report:#}");
    assert_eq!(
        report["error"], "File digests did not match between source and destination",
        "{report:#}"
    );
    for (counter, n) in [
        ("filesNotFoundAtSource", 0),
        ("filesNotFoundAtDestination", 0),
        ("metadataMismatches", 0),
        ("metadataMatched", all),
        ("digestMismatches", 1),
        ("digestVerificationFailures", 0),
        ("filesMatched", files.len() as u64 - 1),
    ] {
        assert_eq!(report[counter], n, "{counter}: {report:#}");
    }
    let differences = report["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 1, "{report:#}");
    assert!(
        differences[0]
            .as_str()
            .unwrap()
            .contains("data/0/ks/t-1/nb-1-big-Data.db: digest"),
        "{report:#}"
    );

    // A file missing, a file of another size, one only touched, a stray file: the lists
    // differ, and the task fails before any digest is computed.
    std::fs::remove_file(home.path().join(&files[6].0)).unwrap();
    let mut longer = files[4].1.clone();
    longer.push(0);
    std::fs::write(home.path().join(&files[4].0), longer).unwrap();
    let touched = home.path().join(&files[1].0);
    let ms = std::fs::metadata(&touched)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    set_mtime(&touched, ms + 1);
    write(&home.path().join("data1/ks/t-2/lm_stray.db"), b"stray");
    let (id, report) = verify_to_end(&dst).await;
    verifications.push(id);
    assert_eq!(report["state"], "FAILED", "{report:#}");
    assert_eq!(
        report["error"], "Files list did not match between source and destination",
        "{report:#}"
    );
    for (counter, n) in [
        ("filesNotFoundAtSource", 1),
        ("filesNotFoundAtDestination", 1),
        ("metadataMismatches", 2),
        ("metadataMatched", all - 3),
        ("digestMismatches", 0),
        ("digestVerificationFailures", 0),
        ("filesMatched", 0),
    ] {
        assert_eq!(report[counter], n, "{counter}: {report:#}");
    }
    let differences: Vec<&str> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(differences.len(), 4, "{report:#}");
    for (file, what) in [
        ("data/1/ks/t-2/lm_stray.db", "not at the source"),
        ("data/0/ks/t-1/nb-2-big-Data.db", "not at the destination"),
        (
            "commitlog/0/CommitLog-7-1.log",
            "FILE of 250000 bytes modified at",
        ),
        (
            "data/0/ks/t-1/nb-1-big-TOC.txt",
            &format!("modified at {} ms here", ms + 1),
        ),
    ] {
        assert!(
            differences
                .iter()
                .any(|d| d.contains(file) && d.contains(what)),
            "{file}: {what}: {report:#}"
        );
    }
    // Many differences: all counted, the first 100 listed.
    for i in 0..150 {
        write(&home.path().join(format!("data0/ks/lm_many/f{i}.db")), b"x");
    }
    let (id, report) = verify_to_end(&dst).await;
    verifications.push(id.clone());
    // 150 files, their directory, and the stray file from before.
    assert_eq!(report["filesNotFoundAtSource"], 152, "{report:#}");
    assert_eq!(
        report["differences"].as_array().unwrap().len(),
        100,
        "{report:#}"
    );

    // The list is the current task only, as a bare array (Sidecar's); `?all=true` lists
    // every verification, oldest first.
    let (status, list) = dst.get(VERIFY_TASKS).await;
    assert_eq!(status, 200, "{list}");
    let current = list.as_array().unwrap_or_else(|| panic!("{list}"));
    assert_eq!(current.len(), 1, "{list:#}");
    assert_eq!(current[0]["id"], id.as_str(), "{list:#}");
    assert_sidecar_verification_shape(&current[0]);
    let (status, list) = dst.get(&format!("{VERIFY_TASKS}?all=true")).await;
    assert_eq!(status, 200, "{list}");
    let tasks = list.as_array().unwrap_or_else(|| panic!("{list}"));
    let ids: Vec<&str> = tasks.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, verifications, "{list:#}");
    let states: Vec<&str> = tasks.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(
        states,
        [
            "COMPLETED",
            "COMPLETED",
            "COMPLETED",
            "FAILED",
            "FAILED",
            "FAILED"
        ],
        "{list:#}"
    );
    assert_eq!(tasks[3]["digestMismatches"], 1, "{list:#}");
    assert_eq!(tasks[5]["filesNotFoundAtSource"], 152, "{list:#}");
    // Cancelling a task that has ended answers it as it is (Sidecar's 200).
    for (i, state) in [(0, "COMPLETED"), (3, "FAILED")] {
        let (status, task) = patch(&dst, &format!("{VERIFY_TASKS}/{}", ids[i])).await;
        assert_eq!(status, 200, "{task}");
        assert_eq!(task["state"], state, "{task:#}");
    }

    // A source that stops answering (frozen): tasks waiting on it still end when cancelled.
    source.signal("STOP");
    let (url, id) = start_verify(&dst).await;
    // A task is NOT_STARTED until its worker picks it up; on a loaded machine that can take a
    // moment.
    let running = dst
        .wait_for(&url, Duration::from_secs(10), |t| {
            t["state"] != "NOT_STARTED"
        })
        .await;
    assert_eq!(running["state"], "IN_PROGRESS", "{running:#}");
    // Live counters: nothing counted before both lists are in.
    assert_eq!(running["metadataMatched"], 0, "{running:#}");
    let (_, list) = dst.get(VERIFY_TASKS).await;
    assert_eq!(list[0]["id"], id.as_str(), "{list:#}");
    assert_eq!(list[0]["state"], "IN_PROGRESS", "{list:#}");
    // Time to reach the listing request, which gets no answer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, cancelled) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled:#}");
    let report = dst
        .wait_for(&url, Duration::from_secs(10), verification_ended)
        .await;
    assert_eq!(report["state"], "CANCELLED", "{report:#}");
    let (url, _) = start_copy(
        &dst,
        &json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, cancelled) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{cancelled}");
    // The answer shows the iteration cancelled at once, as the Sidecar's does.
    assert_eq!(
        cancelled["status"][0]["state"], "CANCELLED",
        "{cancelled:#}"
    );
    let task = dst.wait_for(&url, Duration::from_secs(10), ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    assert_eq!(task["status"][0]["state"], "CANCELLED", "{task:#}");
    let (_, list) = dst.get(COPY_TASKS).await;
    assert_eq!(list[0]["taskId"], task["taskId"], "{list:#}");
    source.signal("CONT");
    drop(source);
}

/// Sets a file's modification time, in milliseconds since the epoch.
pub(crate) fn set_mtime(path: &Path, ms: u64) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_millis(ms))
        .unwrap();
}

#[tokio::test]
async fn downloads_survive_a_cancel_and_a_source_killed_mid_file() {
    let src = SourceNode::new("");
    let big = content(42, 12_000_000);
    write(&src.root().join("data0/ks/t-1/nb-1-big-Data.db"), &big);
    write(
        &src.root().join("commitlog/CommitLog-7-1.log"),
        &content(43, 1000),
    );
    let mut source = src.start().await;
    let home = Home::new();
    let dst = destination(&home, &src.addr, "").await;
    let target = home.path().join("data0/ks/t-1/nb-1-big-Data.db");
    // 2 MB/s: the big file takes ~6 s.
    let slow = json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2, "maxBytesPerSecond": 2_000_000, "verifyDigest": "xxh3"});
    let (url, _) = start_copy(&dst, &slow).await;
    dst.wait_for(&url, WAIT, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() > Some(3_000_000)
    })
    .await;
    // One task at a time.
    let (status, err) = dst.post_json(COPY_TASKS, &slow).await;
    assert_eq!(status, 409, "{err}");
    // Cancelled: the download stops, nothing is left at the final path, and the staging
    // file goes with the task.
    let (status, task) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{task}");
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    assert!(!target.exists(), "no partial file at the final path");
    let parts = staging_files(home.path());
    assert!(parts.is_empty(), "{parts:?}");

    // A new task starts over; the source is killed in the middle and comes back: the
    // download continues its staging file, and the file arrives whole.
    let (url, _) = start_copy(&dst, &slow).await;
    dst.wait_for(&url, WAIT, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() > Some(4_000_000)
    })
    .await;
    source.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!target.exists(), "no partial file at the final path");
    let _source = src.start().await;
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(std::fs::read(&target).unwrap(), big);
    // Bytes were fetched about once: what was buffered but not written when the source died
    // is fetched again (at most the 1 MiB write buffer), not the 4 MB already on disk.
    let fetched = task["status"][0]["bytesDownloaded"].as_u64().unwrap();
    assert!(
        fetched < big.len() as u64 + 3_000_000,
        "the download started over after the source came back: {fetched}"
    );
    assert!(staging_files(home.path()).is_empty());

    // The destination refuses to copy while its own Cassandra answers.
    let busy = Home::new();
    let guarded = Daemon::start(
        &busy,
        &format!(
            "cassandra:\n  native_address: {}\n  data_file_directories: [{}/data0]\nlive_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{}\": \"destination:1\"\n",
            test_support::cassandra_src(),
            busy.path().display(),
            src.addr
        ),
    )
    .await;
    let (status, err) = guarded.post_json(COPY_TASKS, &slow).await;
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("answers"),
        "{err}"
    );
    drop(guarded);

    // Nor while something answers on the node's JMX port, when cassandra.jmx_address is set
    // (the Sidecar checks JMX or native): the Sidecar's message, and where it answers.
    let jmx = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let jmx_address = jmx.local_addr().unwrap().to_string();
    let busy = Home::new();
    let guarded = Daemon::start(
        &busy,
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{}\": \"destination:1\"\n",
            node_dirs(busy.path()).replace(
                "native_address: 127.0.0.1:1\n",
                &format!("native_address: 127.0.0.1:1\n  jmx_address: {jmx_address}\n")
            ),
            src.addr
        ),
    )
    .await;
    let (status, err) = guarded.post_json(COPY_TASKS, &slow).await;
    assert_eq!(status, 400, "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.starts_with("Cannot start data copy: Cassandra is currently running on this instance (JMX or native connectivity established). Data copy cannot proceed while Cassandra is active.")
            && message.contains(&jmx_address),
        "{err}"
    );
    drop(jmx);
    let (status, accepted) = guarded.post_json(COPY_TASKS, &slow).await;
    assert_eq!(status, 202, "{accepted}");
}

#[tokio::test]
async fn a_destination_killed_mid_task_resumes_it_when_restarted() {
    let src = SourceNode::new("");
    let big = content(77, 10_000_000);
    write(&src.root().join("data1/ks/t-9/nb-3-big-Data.db"), &big);
    let _source = src.start().await;
    let home = Home::new();
    let mut dst = destination(&home, &src.addr, "").await;
    let (url, id) = start_copy(
        &dst,
        &json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 1, "maxBytesPerSecond": 2_000_000}),
    )
    .await;
    dst.wait_for(&url, WAIT, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() > Some(2_000_000)
    })
    .await;
    dst.kill9();
    let target = home.path().join("data1/ks/t-9/nb-3-big-Data.db");
    assert!(!target.exists(), "no partial file at the final path");
    let parts = staging_files(home.path());
    assert_eq!(parts.len(), 1, "{parts:?}");
    let kept = std::fs::metadata(&parts[0]).unwrap().len();
    // Restarted while its own Cassandra answers (started on the copy too early): the task is
    // not resumed, and nothing is written into the node's directories.
    let guarded = Daemon::start(
        &home,
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{}\": \"destination:1\"\n",
            node_dirs(home.path()).replace("127.0.0.1:1", &test_support::cassandra_src()),
            src.addr
        ),
    )
    .await;
    // Either way the daemon logs its decision ("... resumed" or "... not resumed: ...").
    wait_until("the decision on the interrupted task", WAIT, || {
        guarded.logs().contains("resumed")
    })
    .await;
    assert!(
        guarded
            .logs()
            .contains("not resumed: the local Cassandra node answers"),
        "{}",
        guarded.logs()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, task) = guarded.get(&url).await;
    assert_eq!(task["state"], "INTERRUPTED", "{task:#}");
    assert_eq!(std::fs::metadata(&parts[0]).unwrap().len(), kept);
    assert!(!target.exists());
    drop(guarded);
    let dst = destination(&home, &src.addr, "").await;
    // INTERRUPTED until the restarted daemon has resumed it.
    let task = dst
        .wait_for(&url, WAIT, |t| ended(t) && t["state"] != "INTERRUPTED")
        .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    let (_, job) = dst.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(job["attempts"], 2, "{job:#}");
    // Named after its source (issue 43), across the restart, with the bytes it downloaded.
    assert_eq!(
        job["name"],
        format!("data copy from http://{}", src.addr),
        "{job:#}"
    );
    assert_eq!(job["target"], "this node's data directories", "{job:#}");
    assert!(job["bytes"].as_u64() > Some(0), "{job:#}");
    assert_eq!(std::fs::read(&target).unwrap(), big);
    let fetched = task["status"][0]["bytesDownloaded"].as_u64().unwrap();
    assert!(
        fetched < big.len() as u64,
        "the resumed task continued the partial download: {fetched}"
    );
    assert!(staging_files(home.path()).is_empty());
}

/// The value of `drover_job_progress` for one counter of one job, if /metrics shows it.
async fn progress_metric(d: &Daemon, job: &str, counter: &str) -> Option<u64> {
    let text = d.get_text("/metrics").await;
    let labels = format!(
        "drover_job_progress{{job_id=\"{job}\",kind=\"data-copy-task\",counter=\"{counter}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(labels.as_str()))
        .map(|v| v.trim().parse().unwrap())
}

/// `maxBytesPerSecond` for all downloads of a task together, its progress on /metrics, a file
/// compacted away mid-task, and downloads whose bytes do not have the source's digest.
#[tokio::test]
async fn lm_downloads_are_paced_checked_and_tolerate_vanished_files() {
    let src = SourceNode::new("");
    let big = [
        ("data0/ks/t-1/nb-1-big-Data.db", content(21, 3_000_000)),
        ("data1/ks/t-2/nb-1-big-Data.db", content(22, 3_000_000)),
    ];
    for (p, c) in &big {
        write(&src.root().join(p), c);
    }
    let doomed = "data0/ks/t-1/nb-2-big-Data.db";
    write(&src.root().join(doomed), &content(23, 10_000));
    let source = src.start().await;
    let home = Home::new();
    let dst = destination(&home, &src.addr, "").await;

    const RATE: f64 = 1_000_000.0;
    let (url, id) = start_copy(
        &dst,
        &json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2, "maxBytesPerSecond": RATE as u64}),
    )
    .await;
    // Listed, then compacted away before its turn (the two large files go first).
    dst.wait_for(&url, WAIT, |t| t["status"][0]["state"] == "DOWNLOADING")
        .await;
    std::fs::remove_file(src.root().join(doomed)).unwrap();
    // Three files and four directories (ks and a table in each data directory).
    assert_eq!(progress_metric(&dst, &id, "filesToDownload").await, Some(7));
    // The rate, from the bytes counter on /metrics: it moves once a second, so each change is
    // a (time, bytes) sample; the first second's burst is left out.
    let mut samples: Vec<(std::time::Instant, u64)> = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while let Some(bytes) = progress_metric(&dst, &id, "bytesDownloaded").await {
        let iteration = progress_metric(&dst, &id, "iteration").await;
        if iteration != Some(0) || std::time::Instant::now() > deadline {
            break;
        }
        if bytes > 0 && samples.last().is_none_or(|(_, b)| *b != bytes) {
            samples.push((std::time::Instant::now(), bytes));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first tick may fall in the burst that governor allows at the start. (Too few
    // samples: the download went faster than the limit allows.)
    assert!(samples.len() >= 3, "too few samples: {samples:?}");
    let ((t0, b0), (t1, b1)) = (samples[1], samples[samples.len() - 1]);
    let rate = (b1 - b0) as f64 / (t1 - t0).as_secs_f64();
    assert!(
        (0.75 * RATE..=1.25 * RATE).contains(&rate),
        "{rate} bytes/s over {:?} ({samples:?})",
        t1 - t0
    );
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(task["maxBytesPerSecond"], RATE as u64);
    // The vanished file failed once, without retries, and the next pass forgot it.
    let first = &task["status"][0];
    assert_eq!(first["filesToDownload"], 7, "{task:#}");
    assert_eq!(first["filesDownloaded"], 6, "{task:#}");
    assert_eq!(first["downloadFailures"], 1, "{task:#}");
    assert_eq!(first["bytesDownloaded"], 6_000_000, "{task:#}");
    assert_eq!(task["status"][1]["state"], "SUCCESS", "{task:#}");
    assert_eq!(task["status"][1]["filesToDownload"], -1, "{task:#}");
    assert_eq!(task["status"].as_array().unwrap().len(), 2, "{task:#}");
    // Small, it was asked for in a batch (the source answered it skipped), once.
    let asked = source.get_text("/metrics").await;
    assert!(
        asked.contains(r#"drover_http_requests_total{method="POST",route="/api/v1/live-migration/files-batch",status="200"} 1"#),
        "{asked}"
    );
    assert!(!home.path().join(doomed).exists());
    assert!(staging_files(home.path()).is_empty());
    let kept: Vec<(String, Vec<u8>)> = big
        .iter()
        .map(|(p, c)| (p.to_string(), c.clone()))
        .collect();
    same_tree(src.root(), home.path(), &kept);
    // Progress of ended tasks leaves /metrics.
    assert_eq!(progress_metric(&dst, &id, "bytesDownloaded").await, None);

    // Staging files of interrupted striped downloads (larger than a batch carries), whose
    // bytes are not all the source's: one wrong throughout, one whose first block is right
    // and the rest wrong. Each block is compared with the source's block digests: only the
    // right one is kept, the rest fetched again, and nothing wrong is renamed into place.
    let fresh = [
        ("data0/ks/t-3/nb-1-big-Data.db", content(24, 1_500_000)),
        ("data1/ks/t-4/nb-1-big-Data.db", content(25, 2_200_000)),
    ];
    for (i, (p, c)) in fresh.iter().enumerate() {
        write(&src.root().join(p), c);
        let listed = listed_as(&src.root().join(p));
        let staging = drover::livemigration::copy::striped::blocks_staging_path(
            &home.path().join(p),
            &listed,
        );
        let mut bogus = content(90 + i as u64, c.len());
        if i == 1 {
            bogus[..1 << 20].copy_from_slice(&c[..1 << 20]);
        }
        write(&staging, &bogus);
    }
    assert_eq!(staging_files(home.path()).len(), 2);
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2, "verifyDigest": "sha256"}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(task["status"][0]["filesToDownload"], 2, "{task:#}");
    assert_eq!(task["status"][0]["filesDownloaded"], 2, "{task:#}");
    assert_eq!(
        task["status"][0]["bytesDownloaded"],
        json!(1_500_000 + 2_200_000 - (1 << 20)),
        "{task:#}"
    );
    // Nothing wrong was renamed into place: the next pass found nothing to fetch again.
    assert_eq!(task["status"].as_array().unwrap().len(), 2, "{task:#}");
    assert_eq!(task["status"][1]["filesToDownload"], -1, "{task:#}");
    let kept: Vec<(String, Vec<u8>)> = fresh
        .iter()
        .map(|(p, c)| (p.to_string(), c.clone()))
        .collect();
    same_tree(src.root(), home.path(), &kept);
    assert!(staging_files(home.path()).is_empty());
}

/// A source file as the source lists it (what names its staging files).
fn listed_as(path: &Path) -> drover::livemigration::copy::RemoteFile {
    let meta = std::fs::metadata(path).unwrap();
    drover::livemigration::copy::RemoteFile {
        mode: None,
        file_url: String::new(),
        size: meta.len(),
        file_type: "FILE".into(),
        last_modified_time: drover::livemigration::files::modified_ms(&meta),
    }
}

/// Tasks that cannot finish end FAILED and say why: a source that keeps refusing downloads
/// (the threshold is still not met after `maxIterations`), and a destination with fewer data
/// directories than its source.
#[tokio::test]
async fn lm_tasks_that_cannot_finish_fail_and_say_why() {
    let src = SourceNode::new("  max_concurrent_file_requests: 1\n");
    // Larger than what the socket buffers of an unread response can hold: a download of it
    // held open keeps the source's only file-request slot.
    let held = "data0/ks/t-1/nb-9-big-Data.db";
    write(&src.root().join(held), &content(31, 48_000_000));
    write(
        &src.root().join("data1/ks/t-2/nb-1-big-Data.db"),
        &content(32, 1000),
    );
    let source = src.start().await;

    // Fewer data directories here than at the source: the missing index is named, at once.
    let narrow = Home::new();
    let dst = Daemon::start(
        &narrow,
        &format!(
            "cassandra:\n  native_address: 127.0.0.1:1\n  data_file_directories: [{0}/data0]\n  commitlog_directory: {0}/commitlog\nlive_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{1}\": \"destination:1\"\n",
            narrow.path().display(),
            src.addr
        ),
    )
    .await;
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("data directory number 1"), "{task:#}");
    assert_eq!(task["status"].as_array().unwrap().len(), 1, "{task:#}");
    assert!(
        !narrow.path().join("data0/ks").exists(),
        "nothing was copied"
    );
    drop(dst);

    // Every download refused (503) until retries run out: after maxIterations downloading
    // iterations the last pass finds the threshold unmet.
    let open = source
        .client()
        .get(source.url(&url_of(held)))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), 200);
    let home = Home::new();
    let dst = destination(&home, &src.addr, "").await;
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 1, "successThreshold": 0.5, "maxConcurrency": 2}),
    )
    .await;
    assert_eq!(task["state"], "FAILED", "{task:#}\n{}", dst.logs());
    let iterations = task["status"].as_array().unwrap();
    assert_eq!(iterations.len(), 2, "{task:#}");
    assert_eq!(iterations[0]["state"], "DOWNLOAD_COMPLETE", "{task:#}");
    assert_eq!(iterations[0]["downloadFailures"], 2, "{task:#}");
    assert_eq!(iterations[1]["state"], "FAILED", "{task:#}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.contains("not met in 1 iterations") && error.contains("2 of 2 files"),
        "{task:#}"
    );
    drop(open);
}

/// Submissions that arrive together admit exactly one data-copy task: the check for an active
/// task and the submission happen under one lock. (They once raced: a task is only listed once
/// its record is stored, so two requests could both find none and both start copying into the
/// same directories.)
#[tokio::test]
async fn concurrent_data_copy_submissions_admit_one_task() {
    // A source that accepts connections and never answers: the admitted task stays RUNNING.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let source = silent.local_addr().unwrap().to_string();
    let home = Home::new();
    let dst = destination(&home, &source, "").await;
    let body = json!({"maxIterations": 1, "successThreshold": 0.9, "maxConcurrency": 1});
    let answers = futures::future::join_all(
        (0..8).map(|_| dst.post_json("/api/v1/live-migration/data-copy-tasks", &body)),
    )
    .await;
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 202)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(accepted.len(), 1, "{answers:#?}");
    assert!(
        answers
            .iter()
            .all(|(status, _)| [202, 409].contains(status)),
        "{answers:#?}"
    );
    let url = accepted[0]["statusUrl"].as_str().unwrap();
    let (status, task) = patch(&dst, url).await;
    assert_eq!(status, 200, "{task}");
    let task = dst.wait_for(url, WAIT, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    drop(silent);
}

/// A node runs one live-migration task of either kind at a time (Sidecar's one task slot): a
/// verification while a copy runs, or a copy while a verification runs, is 409, also when
/// they arrive together. Requests are checked as the Sidecar checks them: both verification
/// fields required, `maxConcurrency` within `max_concurrent_file_requests`, the Sidecar's
/// algorithm names, unknown fields ignored; and once the node's migration is COMPLETED, no
/// task of either kind is accepted.
#[tokio::test]
async fn lm_one_task_of_either_kind_at_a_time_and_none_once_completed() {
    // A source that accepts connections and never answers: admitted tasks stay running.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let source = silent.local_addr().unwrap().to_string();
    let home = Home::new();
    let extra = "  max_concurrent_file_requests: 8\n  peer_read_timeout: 10m\n";
    let mut dst = destination(&home, &source, extra).await;
    let copy = json!({"maxIterations": 1, "successThreshold": 0.9, "maxConcurrency": 1});
    let verify = json!({"maxConcurrency": 2, "digestAlgorithm": "XXHash32"});
    let refused = |answer: &(u16, Value), status: u16, text: &str| {
        let (code, body) = answer;
        assert_eq!(*code, status, "{body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(text), "{text:?} not in {body}");
    };

    // Requests the Sidecar refuses.
    for (body, text) in [
        (json!({}), "maxConcurrency"),
        (json!({"digestAlgorithm": "MD5"}), "maxConcurrency"),
        (
            json!({"maxConcurrency": 0, "digestAlgorithm": "MD5"}),
            "maxConcurrency must be >= 1",
        ),
        (
            json!({"maxConcurrency": 2}),
            "digestAlgorithm cannot be null or empty",
        ),
        (
            json!({"maxConcurrency": 2, "digestAlgorithm": ""}),
            "digestAlgorithm cannot be null or empty",
        ),
        (
            json!({"maxConcurrency": 9, "digestAlgorithm": "MD5"}),
            "max concurrency can not be more than 8",
        ),
        (
            json!({"maxConcurrency": 2, "digestAlgorithm": "crc32"}),
            "Unsupported digest algorithm crc32; accepted (any case): MD5, XXHash32, sha256, xxh3",
        ),
    ] {
        refused(&dst.post_json(VERIFY_TASKS, &body).await, 400, text);
    }
    for n in [9, 300] {
        let mut wide = copy.clone();
        wide["maxConcurrency"] = json!(n);
        refused(
            &dst.post_json(COPY_TASKS, &wide).await,
            400,
            "max concurrency can not be more than 8",
        );
    }

    // Submissions of both kinds at once: one is admitted.
    let answers = futures::future::join_all((0..8).map(|i| {
        let (tasks, body) = if i % 2 == 0 {
            (COPY_TASKS, &copy)
        } else {
            (VERIFY_TASKS, &verify)
        };
        dst.post_json(tasks, body)
    }))
    .await;
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 202)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(accepted.len(), 1, "{answers:#?}");
    assert!(
        answers
            .iter()
            .all(|(status, _)| [202, 409].contains(status)),
        "{answers:#?}"
    );
    let url = accepted[0]["statusUrl"].as_str().unwrap().to_string();
    let (status, _) = patch(&dst, &url).await;
    assert_eq!(status, 200);
    dst.wait_for(&url, WAIT, |t| ended(t) && verification_ended(t))
        .await;

    // A verification runs (an unknown field is ignored, and logged): no copy, no other
    // verification.
    let mut sidecar = verify.clone();
    sidecar["lm_unknown_field"] = json!(true);
    let (url, id) = start_task(&dst, VERIFY_TASKS, &sidecar).await;
    let running = dst
        .wait_for(&url, WAIT, |t| t["state"] != "NOT_STARTED")
        .await;
    assert_eq!(running["state"], "IN_PROGRESS", "{running:#}");
    assert_eq!(running["digestAlgorithm"], "XXHash32", "{running:#}");
    assert!(dst.logs().contains("lm_unknown_field"), "{}", dst.logs());
    let answer = dst.post_json(COPY_TASKS, &copy).await;
    refused(
        &answer,
        409,
        "Another task is already under progress. Cannot accept new task.",
    );
    refused(&answer, 409, &id);
    refused(
        &dst.post_json(VERIFY_TASKS, &verify).await,
        409,
        "Another files digest verification is in progress",
    );
    let (status, cancelled) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled:#}");

    // A copy runs: no verification; the verification list holds no task (the current task
    // is a copy).
    let (url, id) = start_task(&dst, COPY_TASKS, &copy).await;
    let answer = dst.post_json(VERIFY_TASKS, &verify).await;
    refused(
        &answer,
        409,
        "Another files digest verification is in progress",
    );
    refused(&answer, 409, &format!("data-copy task {id}"));
    let (status, list) = dst.get(VERIFY_TASKS).await;
    assert_eq!((status, &list), (200, &json!([])), "{list}");
    let (status, _) = patch(&dst, &url).await;
    assert_eq!(status, 200);
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");

    // A verification running when the daemon is killed shows FAILED after the restart (it is
    // not resumed), and takes no slot.
    let (url, id) = start_task(&dst, VERIFY_TASKS, &verify).await;
    dst.wait_for(&url, WAIT, |t| t["state"] == "IN_PROGRESS")
        .await;
    dst.kill9();
    let dst = destination(&home, &source, extra).await;
    let (status, task) = dst.get(&url).await;
    assert_eq!(status, 200, "{task}");
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert!(
        task["error"]
            .as_str()
            .is_some_and(|e| e.contains("verifications are not resumed")),
        "{task:#}"
    );
    let (_, list) = dst.get(VERIFY_TASKS).await;
    assert_eq!(list[0]["id"], id.as_str(), "{list:#}");
    let (url, _) = start_task(&dst, VERIFY_TASKS, &verify).await;
    let (status, _) = patch(&dst, &url).await;
    assert_eq!(status, 200);

    // This node's migration declared COMPLETED: no task of either kind.
    let (status, done) = dst
        .post_json("/api/v1/live-migration/status", &json!({}))
        .await;
    assert_eq!(status, 200, "{done}");
    refused(&dst.post_json(COPY_TASKS, &copy).await, 400, "COMPLETED");
    refused(
        &dst.post_json(VERIFY_TASKS, &verify).await,
        400,
        "COMPLETED",
    );
    drop(silent);
}

/// A source that lists `listing` and never answers any other request (a digest, a file):
/// each connection is held until the destination closes it.
fn source_that_lists_only(listing: Value) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let body = listing.to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                if head.starts_with("GET /api/v1/live-migration/files HTTP/1.1") {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
                // Held (or kept alive) until the destination closes it.
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// A verification's counters change while it runs (the Sidecar's are read live): once both
/// lists are in and agree, they show while the digests are still awaited.
#[tokio::test]
async fn lm_verification_counters_are_live_while_it_runs() {
    let home = Home::new();
    let mut files = Vec::new();
    for (i, path) in [
        "data0/ks/t-1/nb-1-big-Data.db",
        "data0/ks/t-1/nb-1-big-TOC.txt",
    ]
    .into_iter()
    .enumerate()
    {
        let full = home.path().join(path);
        write(&full, &content(i as u64, 1000 + i));
        let ms = std::fs::metadata(&full)
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        files.push(json!({"fileUrl": url_of(path), "size": 1000 + i, "fileType": "FILE", "lastModifiedTime": ms}));
    }
    for dir in ["ks", "ks/t-1"] {
        files.push(json!({"fileUrl": format!("/api/v1/live-migration/files/data/0/{dir}"), "size": 0, "fileType": "DIRECTORY", "lastModifiedTime": 0}));
    }
    let source = source_that_lists_only(json!({"totalSize": 2001, "files": files}));
    let dst = destination(&home, &source, "").await;
    let (url, _) = start_task(
        &dst,
        VERIFY_TASKS,
        &json!({"maxConcurrency": 1, "digestAlgorithm": "MD5"}),
    )
    .await;
    let task = dst
        .wait_for(&url, WAIT, |t| {
            t["metadataMatched"] == 4 || verification_ended(t)
        })
        .await;
    assert_eq!(task["state"], "IN_PROGRESS", "{task:#}");
    assert_eq!(task["metadataMatched"], 4, "{task:#}");
    assert_eq!(task["filesMatched"], 0, "{task:#}");
    let (status, task) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{task}");
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    assert_eq!(task["metadataMatched"], 4, "{task:#}");
}

/// A source with `auth` serves its files only to a destination that sends a token with the
/// `peer` role, which the destination reads from `live_migration.peer_token_file` and never logs.
#[tokio::test]
async fn a_destination_sends_its_peer_token_to_a_source_with_auth() {
    use sha2::Digest;
    let token = "peer-token-4f1c9a0e7b2d";
    let hash = hex_of(&sha2::Sha256::digest(token.as_bytes()));
    let src = SourceNode::new(&format!(
        "auth:\n  tokens:\n    - id: destination\n      sha256: {hash}\n      roles: [peer]\n"
    ));
    let files = fill_source(src.root());
    let source = src.start().await;
    let (status, _) = source.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 401, "the source's files need credentials");

    // Without the token: the source refuses, and the task says so.
    let home = Home::new();
    let dst = destination(&home, &src.addr, "").await;
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert!(task["error"].as_str().unwrap().contains("401"), "{task:#}");
    drop(dst);

    let home = Home::new();
    let token_file = home.path().join("peer-token");
    write(&token_file, format!("{token}\n").as_bytes());
    let dst = destination(
        &home,
        &src.addr,
        &format!("  peer_token_file: {}\n", token_file.display()),
    )
    .await;
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    same_tree(src.root(), home.path(), &files);
    assert!(!dst.logs().contains(token), "the token reached the log");
    drop(dst);

    // The same token from the environment, for deployments that hand secrets over that way.
    let home = Home::new();
    let config = destination_config(&home, &src.addr, "");
    let dst = Daemon::start_with_env(&home, &config, &[("DROVER_PEER_TOKEN", token)]).await;
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    same_tree(src.root(), home.path(), &files);
    assert!(!dst.logs().contains(token), "the token reached the log");
    assert!(!source.logs().contains(token), "the token reached the log");
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
