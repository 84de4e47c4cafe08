//! Live instance migration between two daemons on loopback, each with its own directories:
//! listing, serving (Range, digests, path safety, limits), status, the request filter, and
//! data-copy and verification tasks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use test_support::cql;
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
struct SourceNode {
    home: Home,
    addr: String,
    config: PathBuf,
}

impl SourceNode {
    fn new(extra: &str) -> Self {
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

    fn root(&self) -> &Path {
        self.home.path()
    }

    async fn start(&self) -> Daemon {
        Daemon::start_with(&self.home, &self.config).await
    }
}

async fn destination(home: &Home, source: &str, extra: &str) -> Daemon {
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
fn assert_all_matched(report: &Value) {
    assert_eq!(report["state"], "SUCCEEDED", "{report:#}");
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
    files.push(large);
    std::os::unix::fs::symlink("/etc/hostname", src.root().join("data0/ks/escape")).unwrap();
    let daemon = src.start().await;

    let (status, list) = daemon.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 200, "{list}");
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
        ("crc", "Unsupported digest algorithm crc"),
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
async fn start_copy(dst: &Daemon, body: &Value) -> (String, String) {
    start_task(dst, COPY_TASKS, body).await
}

/// Runs a data-copy task on `dst` until it ends, however it ends.
pub(crate) async fn copy_to_end(dst: &Daemon, body: Value) -> Value {
    let (url, _) = start_copy(dst, &body).await;
    dst.wait_for(&url, WAIT, ended).await
}

/// Starts a verification task (SHA-256) on `dst`; returns its status URL and id.
async fn start_verify(dst: &Daemon) -> (String, String) {
    start_task(dst, VERIFY_TASKS, &json!({"digestAlgorithm": "sha256"})).await
}

/// Runs a verification task on `dst` until it ends; returns its id and its report.
async fn verify_to_end(dst: &Daemon) -> (String, Value) {
    let (url, id) = start_verify(dst).await;
    (id, dst.wait_for(&url, WAIT, ended).await)
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

fn staging_files(root: &Path) -> Vec<PathBuf> {
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
    assert_eq!(iterations[0]["filesToDownload"], files.len());
    assert_eq!(iterations[0]["filesDownloaded"], files.len());
    assert_eq!(iterations.last().unwrap()["state"], "SUCCESS");
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
    // Also a stray local file the source never had.
    write(&home.path().join("data1/ks/t-2/stray.db"), b"stray");
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
    assert_eq!(task["status"][0]["filesToDownload"], 0, "{task:#}");
    assert!(std::fs::read(home.path().join(&files[3].0)).unwrap() == files[3].1);
    let task = copy(json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2, "verifyDigest": "xxh3"})).await;
    assert_eq!(task["status"][0]["filesToDownload"], 1, "{task:#}");
    assert_eq!(task["status"][0]["filesDownloaded"], 1, "{task:#}");
    assert_eq!(task["status"].as_array().unwrap().len(), 2, "{task:#}");
    files[3].1 = content(11, files[3].1.len());
    same_tree(src.root(), home.path(), &files);

    // Verification: everything matches; then every kind of difference is found and counted.
    let mut verifications = Vec::new();
    let (id, report) = verify_to_end(&dst).await;
    verifications.push(id);
    assert_eq!(report["state"], "SUCCEEDED", "{report:#}");
    let all = report["filesMatched"].as_u64().unwrap();
    assert!(all > files.len() as u64, "{report:#}");
    assert_eq!(report["metadataMatched"], all, "{report:#}");
    assert_all_matched(&report);
    // A byte flipped in place, a file missing, a file of another size, a stray file.
    let victim = home.path().join(&files[0].0);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[1234] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    std::fs::remove_file(home.path().join(&files[6].0)).unwrap();
    let mut longer = files[4].1.clone();
    longer.push(0);
    std::fs::write(home.path().join(&files[4].0), longer).unwrap();
    write(&home.path().join("data1/ks/t-2/lm_stray.db"), b"stray");
    let (id, report) = verify_to_end(&dst).await;
    verifications.push(id);
    assert_eq!(report["state"], "SUCCEEDED", "{report:#}");
    for (counter, n) in [
        ("filesNotFoundAtSource", 1),
        ("filesNotFoundAtDestination", 1),
        ("metadataMismatches", 1),
        ("digestMismatches", 1),
        ("digestVerificationFailures", 0),
        ("metadataMatched", all - 2),
        ("filesMatched", all - 3),
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
            "250000 bytes at the source, FILE of 250001",
        ),
        ("data/0/ks/t-1/nb-1-big-Data.db", "digest"),
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
    verifications.push(id);
    // 150 files, their directory, and the stray file from before.
    assert_eq!(report["filesNotFoundAtSource"], 152, "{report:#}");
    assert_eq!(
        report["differences"].as_array().unwrap().len(),
        100,
        "{report:#}"
    );

    // Listed oldest first, with what each found; an ended task cannot be cancelled.
    let (status, list) = dst.get(VERIFY_TASKS).await;
    assert_eq!(status, 200, "{list}");
    let tasks = list["tasks"].as_array().unwrap();
    let ids: Vec<&str> = tasks
        .iter()
        .map(|t| t["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, verifications, "{list:#}");
    assert!(tasks.iter().all(|t| t["state"] == "SUCCEEDED"), "{list:#}");
    assert_eq!(tasks[0]["digestMismatches"], 0, "{list:#}");
    assert_eq!(tasks[1]["digestMismatches"], 1, "{list:#}");
    assert_eq!(tasks[2]["filesNotFoundAtSource"], 152, "{list:#}");
    let (status, err) = patch(
        &dst,
        &format!("/api/v1/live-migration/files-verification-tasks/{}", ids[0]),
    )
    .await;
    assert_eq!(status, 409, "{err}");

    // A source that stops answering (frozen): tasks waiting on it still end when cancelled.
    source.signal("STOP");
    let (url, _) = start_verify(&dst).await;
    // A task is QUEUED until its worker picks it up; on a loaded machine that can take a moment.
    let running = dst
        .wait_for(&url, Duration::from_secs(10), |t| t["state"] != "QUEUED")
        .await;
    assert_eq!(running["state"], "RUNNING", "{running:#}");
    let (_, list) = dst.get(VERIFY_TASKS).await;
    assert_eq!(list["tasks"][3]["state"], "RUNNING", "{list:#}");
    // Time to reach the listing request, which gets no answer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, cancelled) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{cancelled}");
    let report = dst.wait_for(&url, Duration::from_secs(10), ended).await;
    assert_eq!(report["state"], "CANCELLED", "{report:#}");
    let (url, _) = start_copy(
        &dst,
        &json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, cancelled) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{cancelled}");
    let task = dst.wait_for(&url, Duration::from_secs(10), ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    source.signal("CONT");
    drop(source);
}

/// Sets a file's modification time, in milliseconds since the epoch.
fn set_mtime(path: &Path, ms: u64) {
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
fn testenv_node(run: &Path, name: &str, address: &str) -> String {
    let dir = run.join(name);
    format!(
        "cassandra:\n  native_address: {address}:9042\n  data_file_directories: [{0}/data]\n  commitlog_directory: {0}/commitlog\n  hints_directory: {0}/hints\n  saved_caches_directory: {0}/saved_caches\n  cdc_raw_directory: {0}/cdc_raw\n",
        dir.display()
    )
}

/// The whole procedure on real Cassandra nodes: copy passes while the source node takes
/// writes, the source stopped, a final exact pass, a digest verification, then a node started
/// on the copied files under another address serves every row written before the stop.
#[tokio::test]
async fn a_cassandra_node_moves_to_a_new_address_with_every_row() {
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
    let insert = node
        .prepare("INSERT INTO lm.t (p, c, v) VALUES (?, ?, ?)")
        .await
        .unwrap();
    // What the table holds, by key: the test compares every value read back on the new node.
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..3000 {
        node.execute_unpaged(&insert, (i % 100, i, format!("row {i}")))
            .await
            .unwrap();
        expected.insert((i % 100, i), format!("row {i}"));
    }

    let src = Home::new();
    let src_addr = format!("127.0.0.1:{}", free_port());
    let config = src.write_config_at(
        &src_addr,
        &format!(
            "{}live_migration:\n  enabled: true\n  migration_map:\n    \"{src_addr}\": \"destination:1\"\n",
            testenv_node(&run, "cassandra-lmsrc", "127.0.0.3")
        ),
    );
    let _source = Daemon::start_with(&src, &config).await;
    let home = Home::new();
    let dst = Daemon::start(
        &home,
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{src_addr}\": \"destination:1\"\n",
            testenv_node(&run, "cassandra-lmdst", "127.0.0.4")
        ),
    )
    .await;

    // Passes while the source keeps taking writes.
    let writer = {
        let (node, insert) = (node.clone(), insert.clone());
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let mut expected = expected;
        let task = tokio::spawn(async move {
            // New rows, and new values for old ones (same count, other content).
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
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 5, "successThreshold": 0.9, "maxConcurrency": 4}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    writer.0.cancel();
    let expected = writer.1.await.unwrap();

    // The source node stops; the final pass must leave nothing different.
    drop(node);
    testenv(&["node-stop", "cassandra-lmsrc"]);
    let task = copy_to_end(
        &dst,
        json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 4, "verifyDigest": "xxh3"}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    let (_, report) = verify_to_end(&dst).await;
    assert_eq!(report["state"], "SUCCEEDED", "{report:#}");
    assert_all_matched(&report);
    assert!(report["filesMatched"].as_u64().unwrap() > 20, "{report:#}");

    // A node on the copied files, under a new address, has every row.
    testenv(&["node-start", "cassandra-lmdst"]);
    let moved = cql::session("127.0.0.4:9042").await;
    let rows = {
        use futures::TryStreamExt;
        let mut st = scylla::statement::unprepared::Statement::new("SELECT p, c, v FROM lm.t");
        st.set_page_size(5000);
        let rows: Vec<(i32, i32, String)> = moved
            .query_iter(st, ())
            .await
            .expect("scan")
            .rows_stream::<(i32, i32, String)>()
            .expect("rows")
            .try_collect()
            .await
            .expect("rows");
        rows.into_iter()
            .map(|(p, c, v)| ((p, c), v))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
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
    drop(moved);
    testenv(&["node-stop", "cassandra-lmdst"]);
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
        "drover_job_progress{{job=\"{job}\",kind=\"data-copy-task\",counter=\"{counter}\"}} "
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
    assert_eq!(progress_metric(&dst, &id, "filesToDownload").await, Some(3));
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
    assert_eq!(first["filesToDownload"], 3, "{task:#}");
    assert_eq!(first["filesDownloaded"], 2, "{task:#}");
    assert_eq!(first["downloadFailures"], 1, "{task:#}");
    assert_eq!(first["bytesDownloaded"], 6_000_000, "{task:#}");
    assert_eq!(task["status"][1]["state"], "SUCCESS", "{task:#}");
    assert_eq!(task["status"][1]["filesToDownload"], 0, "{task:#}");
    assert_eq!(task["status"].as_array().unwrap().len(), 2, "{task:#}");
    let asked = source.get_text("/metrics").await;
    assert!(
        asked.contains(r#"drover_http_requests_total{method="GET",route="/api/v1/live-migration/files/{dirType}/{dirIndex}/{*path}",status="404"} 1"#),
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

    // Staging files whose bytes are not the source's (a complete one, and a partial one that
    // a resumed download would continue): each download is checked against the source's
    // digest, rejected, and fetched again whole.
    let fresh = [
        ("data0/ks/t-3/nb-1-big-Data.db", content(24, 500_000)),
        ("data1/ks/t-4/nb-1-big-Data.db", content(25, 400_000)),
    ];
    for (i, (p, c)) in fresh.iter().enumerate() {
        write(&src.root().join(p), c);
        let listed = listed_as(&src.root().join(p));
        let staging = drover::livemigration::copy::staging_path(&home.path().join(p), &listed);
        let bogus = content(90 + i as u64, if i == 0 { c.len() } else { 100_000 });
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
    // Nothing wrong was renamed into place: the next pass found nothing to fetch again.
    assert_eq!(task["status"].as_array().unwrap().len(), 2, "{task:#}");
    assert_eq!(task["status"][1]["filesToDownload"], 0, "{task:#}");
    let rejected = dst.logs().matches("differs from the source's").count();
    assert_eq!(rejected, 2, "{}", dst.logs());
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
