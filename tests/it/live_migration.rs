//! Live instance migration between two daemons on loopback, each with its own directories:
//! listing, serving (Range, digests, path safety, limits), status, the request filter, and
//! data-copy and verification tasks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Daemon, Home};

const WAIT: Duration = Duration::from_secs(120);

/// The `cassandra` section of a node whose directories live under `root`.
fn node_dirs(root: &Path) -> String {
    format!(
        "cassandra:\n  native_address: 127.0.0.1:1\n  data_file_directories: [{0}/data0, {0}/data1]\n  commitlog_directory: {0}/commitlog\n  hints_directory: {0}/hints\n  saved_caches_directory: {0}/saved_caches\n",
        root.display()
    )
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Deterministic bytes that differ from file to file.
fn content(seed: u64, len: usize) -> Vec<u8> {
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

fn free_port() -> u16 {
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
    Daemon::start(
        home,
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{source}\": \"destination:1\"\n{extra}",
            node_dirs(home.path())
        ),
    )
    .await
}

/// A node's files: tables in two data directories, a snapshot, a commit log, hints.
fn fill_source(root: &Path) -> Vec<(String, Vec<u8>)> {
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

fn url_of(rel: &str) -> String {
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
    crate::support::json_of(res).await
}

async fn patch(d: &Daemon, path: &str) -> (u16, Value) {
    let res = d.client().patch(d.url(path)).send().await.unwrap();
    crate::support::json_of(res).await
}

async fn wait_task(d: &Daemon, url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (status, task) = d.get(url).await;
        assert_eq!(status, 200, "{task}");
        if done(&task) {
            return task;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task too slow: {task:#}\n{}",
            d.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

fn ended(task: &Value) -> bool {
    !["QUEUED", "RUNNING"].contains(&task["state"].as_str().unwrap_or(""))
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

    // Digests.
    let (status, d) = daemon.get(&format!("{path}?digestAlgorithm=sha256")).await;
    assert_eq!(status, 200, "{d}");
    let mut h = drover::livemigration::digest::Algorithm::Sha256.hasher();
    h.update(data);
    assert_eq!(d["digest"], h.finish());
    assert_eq!(d["digestAlgorithm"], "sha256");
    for a in ["xxh3", "md5", "XXHash32"] {
        let (status, d) = daemon.get(&format!("{path}?digestAlgorithm={a}")).await;
        assert_eq!(status, 200, "{a}: {d}");
    }
    let (status, d) = daemon.get(&format!("{path}?digestAlgorithm=crc")).await;
    assert_eq!((status, d["code"].clone()), (400, json!(400)));

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
    let (status, digest) = daemon.get("/api/v1/live-migration/files-digest").await;
    assert_eq!(status, 200, "{digest}");
    assert_eq!(digest["files"], files.len());
    let (status, body) = daemon.get("/api/v1/live-migration/data-copy-tasks").await;
    assert_eq!(status, 404, "{body}");

    // Status: a second POST is refused, and a COMPLETED source serves no file.
    let (_, s) = daemon.get("/api/v1/live-migration/status").await;
    assert_eq!(s["state"], "NOT_COMPLETED");
    let (status, s) = daemon
        .post_json("/api/v1/live-migration/status", &Value::Null)
        .await;
    assert_eq!(
        (status, s["state"].clone()),
        (200, json!("COMPLETED")),
        "{s}"
    );
    assert!(s["endTime"].is_string());
    let (status, _) = daemon
        .post_json("/api/v1/live-migration/status", &Value::Null)
        .await;
    assert_eq!(status, 400);
    let (status, _, _) = get_bytes(&daemon, &big, None).await;
    assert_eq!(status, 409);
    let res = daemon
        .client()
        .delete(daemon.url("/api/v1/live-migration/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

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
}

#[tokio::test]
async fn live_migration_is_off_unless_asked_for() {
    let home = Home::new();
    let daemon = Daemon::start(&home, &node_dirs(home.path())).await;
    for p in [
        "/api/v1/live-migration/files",
        "/api/v1/live-migration/status",
        "/api/v1/live-migration/data-copy-tasks",
    ] {
        let (status, body) = daemon.get(p).await;
        assert_eq!(status, 404, "{p}: {body}");
        assert_eq!(body["status"], "Not Found");
    }
    // Switched on, a node that is not in the map still serves nothing.
    let (status, view) = put_json(
        &daemon,
        "/api/v1/admin/live-migration",
        &json!({"enabled": true}),
    )
    .await;
    assert_eq!((status, view["role"].clone()), (200, json!("none")));
    let (status, _) = daemon.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 404);
    let (status, body) = put_json(&daemon, "/api/v1/admin/live-migration", &json!({"on": 1})).await;
    assert_eq!(status, 400, "{body}");
}

fn same_tree(src: &Path, dst: &Path, files: &[(String, Vec<u8>)]) {
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
        let (status, err) = dst
            .post_json("/api/v1/live-migration/data-copy-tasks", &body)
            .await;
        assert_eq!(status, code, "{body}: {err}");
        assert_eq!(err["code"], code);
    }
    // Source routes answer 404 on a destination.
    let (status, _) = dst.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 404);

    let (status, accepted) = dst
        .post_json(
            "/api/v1/live-migration/data-copy-tasks",
            &json!({"maxIterations": 3, "successThreshold": 0.9, "maxConcurrency": 3, "verifyDigest": "sha256"}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let url = accepted["statusUrl"].as_str().unwrap().to_string();
    let task = wait_task(&dst, &url, ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(task["maxIterations"], 3);
    assert_eq!(task["source"], "127.0.0.1");
    let iterations = task["status"].as_array().unwrap();
    assert_eq!(iterations[0]["state"], "DOWNLOAD_COMPLETE", "{task:#}");
    assert_eq!(iterations[0]["filesToDownload"], files.len());
    assert_eq!(iterations[0]["filesDownloaded"], files.len());
    assert_eq!(iterations.last().unwrap()["state"], "SUCCESS");
    same_tree(src.root(), home.path(), &files);
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
    // Also a stray local file the source never had.
    write(&home.path().join("data1/ks/t-2/stray.db"), b"stray");
    let (_, accepted) = dst
        .post_json(
            "/api/v1/live-migration/data-copy-tasks",
            &json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2}),
        )
        .await;
    let task = wait_task(&dst, accepted["statusUrl"].as_str().unwrap(), ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert_eq!(task["status"][0]["filesToDownload"], 2, "{task:#}");
    same_tree(src.root(), home.path(), &files);
    assert!(!home.path().join("data0/ks/t-1/nb-1-big-Index.db").exists());
    // Both sides' file lists in one request each.
    let (_, theirs) = source.get("/api/v1/live-migration/files-digest").await;
    let (status, mine) = dst.get("/api/v1/live-migration/files-digest").await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine["digest"], theirs["digest"], "{mine} vs {theirs}");
    assert!(!home.path().join("data1/ks/t-2/stray.db").exists());

    // Verification: everything matches; then a byte flipped in place is found.
    let verify = |d: &Daemon| {
        let d = d
            .client()
            .post(d.url("/api/v1/live-migration/files-verification-tasks"));
        async move {
            let res = d
                .json(&json!({"digestAlgorithm": "sha256"}))
                .send()
                .await
                .unwrap();
            crate::support::json_of(res).await
        }
    };
    let (status, accepted) = verify(&dst).await;
    assert_eq!(status, 202, "{accepted}");
    let report = wait_task(&dst, accepted["statusUrl"].as_str().unwrap(), ended).await;
    assert_eq!(report["state"], "SUCCEEDED", "{report:#}");
    assert!(
        report["filesMatched"].as_u64().unwrap() > files.len() as u64,
        "{report:#}"
    );
    assert_all_matched(&report);
    let victim = home.path().join(&files[0].0);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[1234] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    let (_, accepted) = verify(&dst).await;
    let report = wait_task(&dst, accepted["statusUrl"].as_str().unwrap(), ended).await;
    assert_eq!(report["digestMismatches"], 1, "{report:#}");
    assert!(
        report["differences"][0]
            .as_str()
            .unwrap()
            .contains("nb-1-big-Data.db"),
        "{report:#}"
    );
    drop(source);
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
    let (status, accepted) = dst
        .post_json("/api/v1/live-migration/data-copy-tasks", &slow)
        .await;
    assert_eq!(status, 202, "{accepted}");
    let url = accepted["statusUrl"].as_str().unwrap().to_string();
    wait_task(&dst, &url, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() > Some(3_000_000)
    })
    .await;
    // One task at a time.
    let (status, err) = dst
        .post_json("/api/v1/live-migration/data-copy-tasks", &slow)
        .await;
    assert_eq!(status, 409, "{err}");
    // Cancelled: the download stops, nothing is left at the final path, the staging file stays.
    let (status, task) = patch(&dst, &url).await;
    assert_eq!(status, 200, "{task}");
    let task = wait_task(&dst, &url, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    assert!(!target.exists(), "no partial file at the final path");
    let parts = staging_files(home.path());
    assert_eq!(parts.len(), 1, "{parts:?}");
    let kept = std::fs::metadata(&parts[0]).unwrap().len();
    assert!(kept > 0 && kept < big.len() as u64);

    // A new task continues the staging file; the source is killed in the middle and comes
    // back: the download resumes again, and the file arrives whole.
    let (_, accepted) = dst
        .post_json("/api/v1/live-migration/data-copy-tasks", &slow)
        .await;
    let url = accepted["statusUrl"].as_str().unwrap().to_string();
    wait_task(&dst, &url, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() > Some(1_000_000)
    })
    .await;
    source.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!target.exists(), "no partial file at the final path");
    let _source = src.start().await;
    let task = wait_task(&dst, &url, ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    assert_eq!(std::fs::read(&target).unwrap(), big);
    // Bytes were fetched once: the cancelled task's and this one's add up to the file (plus
    // at most what was in flight when the source died).
    let fetched = task["status"][0]["bytesDownloaded"].as_u64().unwrap();
    assert!(
        fetched + kept <= big.len() as u64 + 1000 + 4_000_000,
        "{fetched} + {kept}"
    );
    assert!(
        fetched < big.len() as u64,
        "the resumed task did not start over: {fetched}"
    );
    assert!(staging_files(home.path()).is_empty());

    // The destination refuses to copy while its own Cassandra answers.
    let busy = Home::new();
    let guarded = Daemon::start(
        &busy,
        &format!(
            "cassandra:\n  native_address: {}\n  data_file_directories: [{}/data0]\nlive_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{}\": \"destination:1\"\n",
            crate::support::cassandra_src(),
            busy.path().display(),
            src.addr
        ),
    )
    .await;
    let (status, err) = guarded
        .post_json("/api/v1/live-migration/data-copy-tasks", &slow)
        .await;
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
    let node = std::sync::Arc::new(crate::cql::session("127.0.0.3:9042").await);
    crate::cql::exec(&node, "CREATE KEYSPACE lm WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    crate::cql::exec(
        &node,
        "CREATE TABLE lm.t (p int, c int, v text, PRIMARY KEY (p, c))",
    )
    .await;
    let insert = node
        .prepare("INSERT INTO lm.t (p, c, v) VALUES (?, ?, ?)")
        .await
        .unwrap();
    let mut written = 0i32;
    for i in 0..3000 {
        node.execute_unpaged(&insert, (i % 100, i, format!("row {i}")))
            .await
            .unwrap();
        written += 1;
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
        let task = tokio::spawn(async move {
            let mut i = written;
            while !stopped.is_cancelled() {
                node.execute_unpaged(&insert, (i % 100, i, format!("row {i}")))
                    .await
                    .unwrap();
                i += 1;
            }
            i
        });
        (stop, task)
    };
    let (status, accepted) = dst
        .post_json(
            "/api/v1/live-migration/data-copy-tasks",
            &json!({"maxIterations": 5, "successThreshold": 0.9, "maxConcurrency": 4}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let task = wait_task(&dst, accepted["statusUrl"].as_str().unwrap(), ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    writer.0.cancel();
    written = writer.1.await.unwrap();

    // The source node stops; the final pass must leave nothing different.
    drop(node);
    testenv(&["node-stop", "cassandra-lmsrc"]);
    let (status, accepted) = dst
        .post_json(
            "/api/v1/live-migration/data-copy-tasks",
            &json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 4, "verifyDigest": "xxh3"}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let task = wait_task(&dst, accepted["statusUrl"].as_str().unwrap(), ended).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    let (_, accepted) = dst
        .post_json(
            "/api/v1/live-migration/files-verification-tasks",
            &json!({"digestAlgorithm": "sha256"}),
        )
        .await;
    let report = wait_task(&dst, accepted["statusUrl"].as_str().unwrap(), ended).await;
    assert_eq!(report["state"], "SUCCEEDED", "{report:#}");
    assert_all_matched(&report);
    assert!(report["filesMatched"].as_u64().unwrap() > 20, "{report:#}");

    // A node on the copied files, under a new address, has every row.
    testenv(&["node-start", "cassandra-lmdst"]);
    let moved = crate::cql::session("127.0.0.4:9042").await;
    let rows = crate::cql::raw_rows(&moved, "lm.t", "p, c, v").await;
    assert_eq!(
        rows.len(),
        written as usize,
        "rows written before the stop: {written}"
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
    let (status, accepted) = dst
        .post_json(
            "/api/v1/live-migration/data-copy-tasks",
            &json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 1, "maxBytesPerSecond": 2_000_000}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let url = accepted["statusUrl"].as_str().unwrap().to_string();
    let id = accepted["taskId"].as_str().unwrap().to_string();
    wait_task(&dst, &url, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() > Some(2_000_000)
    })
    .await;
    dst.kill9();
    let target = home.path().join("data1/ks/t-9/nb-3-big-Data.db");
    assert!(!target.exists(), "no partial file at the final path");
    let dst = destination(&home, &src.addr, "").await;
    // INTERRUPTED until the restarted daemon has resumed it.
    let task = wait_task(&dst, &url, |t| ended(t) && t["state"] != "INTERRUPTED").await;
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
