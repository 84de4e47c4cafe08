//! SSTable uploads against what a security probe did to them: concurrent uploads that together
//! cross the free-space floor (they once filled the disk), uploads slower than
//! `server.request_timeout` (they could never succeed, and left their temporary file), clients
//! that stall or go away mid-body, and uploads into system keyspaces. The real binary, on a
//! small file system each test mounts itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use test_support::{Daemon, Home, error_message, json_of};
use tokio::io::AsyncWriteExt;

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped, however the test
/// ends (declare it before the daemon that uses it, so it is dropped after).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount a tmpfs (the test runs as root): {out:?}"
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a daemon still holding a file in it must not keep it mounted.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// The free share of the file system of `dir`, percent.
fn free_percent(dir: &Path) -> f64 {
    let s = rustix::fs::statvfs(dir).unwrap();
    s.f_bavail as f64 * 100.0 / s.f_blocks as f64
}

/// Samples the free share of `dir` every millisecond until dropped; the lowest seen.
struct Sampler {
    stop: Arc<AtomicBool>,
    lowest: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(dir: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let lowest = Arc::new(AtomicU64::new(f64::to_bits(100.0)));
        let (dir, s, l) = (dir.to_path_buf(), stop.clone(), lowest.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let now = free_percent(&dir);
                if now < f64::from_bits(l.load(Ordering::Relaxed)) {
                    l.store(now.to_bits(), Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self {
            stop,
            lowest,
            thread: Some(thread),
        }
    }

    fn lowest(&mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        f64::from_bits(self.lowest.load(Ordering::Relaxed))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn id(n: u32) -> String {
    format!("0190c0de-7d3e-7cbe-8a7c-{n:012}")
}

fn component_path(id: &str, component: &str) -> String {
    format!("/api/v1/uploads/{id}/keyspaces/ks/tables/t/components/{component}")
}

const MIB: usize = 1 << 20;

/// A body of `chunks` chunks of `chunk` bytes, `pause` before each: what a slow client sends.
fn paced(chunks: usize, chunk: usize, pause: Duration) -> reqwest::Body {
    let stream = futures::stream::iter(0..chunks).then(move |i| async move {
        tokio::time::sleep(pause).await;
        Ok::<_, std::io::Error>(Bytes::from(vec![(i % 251) as u8; chunk]))
    });
    reqwest::Body::wrap_stream(stream)
}

use futures::StreamExt as _;

/// PUTs `body` to `path`, with its `Content-Length` when `length` is given (chunked without):
/// the status and JSON body, or the transport error.
async fn put(
    d: &Daemon,
    path: &str,
    length: Option<usize>,
    body: reqwest::Body,
) -> Result<(u16, Value), String> {
    let mut request = d.client().put(d.url(path)).body(body);
    if let Some(len) = length {
        request = request.header("content-length", len);
    }
    match request.send().await {
        Ok(r) => Ok(json_of(r).await),
        Err(e) => Err(format!("{e:?}")),
    }
}

/// Four concurrent uploads of 17 MiB to a 64 MiB file system with a 10 % floor (57.6 MiB
/// usable): three fit, the fourth is refused with 507 before it writes a byte, and the free
/// space never goes below 10 % (checked only at the start, four concurrent uploads of 60 MB
/// filled a disk to 100 %). An upload of unknown length (chunked) is refused where it would
/// cross the floor, and leaves nothing; then a 6 MiB upload still fits, so nothing refused
/// kept its reservation.
#[tokio::test]
async fn concurrent_uploads_never_take_the_staging_disk_below_its_floor() {
    let disk = Tmpfs::mount("64m");
    let staging = disk.path().join("staging");
    let d = Daemon::fresh(&format!(
        "sstable_uploads:\n  enabled: true\n  staging_dir: {}\n  min_free_space_percent: 10\n",
        staging.display()
    ))
    .await;
    assert!(free_percent(disk.path()) > 99.0);
    let mut sampler = Sampler::start(disk.path());

    // Each body waits 300 ms before its first byte: the refusal, answered from the headers,
    // reaches the client before it has sent anything (an answer sent while the client is
    // still sending may be lost to the connection's reset).
    let size = 17 * MIB;
    let results = futures::future::join_all((0..4).map(|n| {
        let path = component_path(&id(n), "nb-1-big-Data.db");
        let d = &d;
        async move {
            let body = futures::stream::once(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, std::io::Error>(Bytes::from(vec![7u8; size]))
            });
            put(d, &path, Some(size), reqwest::Body::wrap_stream(body)).await
        }
    }))
    .await;
    let mut ok = 0;
    let mut refused = Vec::new();
    for (n, r) in results.iter().enumerate() {
        match r {
            Ok((200, body)) => {
                assert_eq!(body["uploadSizeBytes"], size as u64, "{body}");
                ok += 1;
            }
            Ok((507, body)) => {
                let message = error_message(507, body);
                for part in [
                    "Insufficient space available for upload: nb-1-big-Data.db needs 17.0 MiB more",
                    "are free in",
                    "reserved by uploads in progress",
                    "sstable_uploads.min_free_space_percent keeps 10 % (6.4 MiB) free",
                ] {
                    assert!(message.contains(part), "{part:?} in {message}");
                }
                refused.push(n);
            }
            // Under load the 507 may still come while the body is being sent, and be lost
            // to the connection's reset: the access log says what was answered.
            Err(e)
                if d.logs().lines().any(|l| {
                    l.contains("access") && l.contains("507") && l.contains(&id(n as u32))
                }) =>
            {
                eprintln!("upload {n}: refused with 507, seen in the access log ({e})");
                refused.push(n);
            }
            other => panic!("upload {n}: {other:?}\n{}", d.logs()),
        }
    }
    assert_eq!((ok, refused.len()), (3, 1), "{results:?}");
    // The refused upload wrote nothing: not even its directory.
    assert!(!staging.join(id(refused[0] as u32)).exists());

    // Of unknown length: refused once the next chunk would cross the floor.
    let path = component_path(&id(10), "nb-1-big-Data.db");
    let chunked = put(&d, &path, None, paced(17, MIB, Duration::from_millis(50))).await;
    match &chunked {
        Ok((507, body)) => {
            let message = error_message(507, body);
            assert!(message.contains("min_free_space_percent"), "{message}");
        }
        // The refusal can be lost to the connection's reset while the client still sends;
        // the access log has it then.
        Err(_) => assert!(
            d.logs()
                .lines()
                .any(|l| l.contains("access") && l.contains("507")),
            "{chunked:?}\n{}",
            d.logs()
        ),
        other => panic!("chunked upload: {other:?}"),
    }
    let lowest = sampler.lowest();
    eprintln!(
        "lowest free share {lowest:.2} %; the chunked upload: {:?}",
        chunked.as_ref().map(|r| r.0)
    );
    assert!(
        lowest >= 10.0,
        "free space fell to {lowest:.2} % under a 10 % floor"
    );
    assert_eq!(
        test_support::temporary_files(&staging),
        Vec::<PathBuf>::new()
    );

    // What was refused holds nothing: 6 MiB still fit above the floor.
    let size = 6 * MIB;
    let r = put(
        &d,
        &component_path(&id(11), "nb-1-big-Data.db"),
        Some(size),
        vec![1u8; size].into(),
    )
    .await
    .unwrap();
    assert_eq!(r.0, 200, "{r:?}");
    assert!(free_percent(disk.path()) >= 10.0);
    drop(d);
}

async fn slow_daemon(home: &Home, staging: &Path) -> Daemon {
    let config = home.write_config_edited(
        &format!(
            "sstable_uploads:\n  enabled: true\n  staging_dir: {}\n  min_free_space_percent: 1\n  idle_timeout: 3s\n",
            staging.display()
        ),
        &[("  shutdown_timeout: 10s\n", "  shutdown_timeout: 10s\n  request_timeout: 2s\n")],
    );
    Daemon::start_with(home, &config).await
}

/// Waits up to 10 s for `check` to hold.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A 15 MB component sent in 30 chunks with 200 ms pauses (6 s in all, three times a
/// `server.request_timeout` of 2 s, each pause well inside a `sstable_uploads.idle_timeout`
/// of 3 s) lands whole; the same stalling 5 s after its first MB gets 408 naming
/// `idle_timeout`, and its `.tmp` is gone; a client that disconnects mid-body leaves no
/// `.tmp`. (Before, a 15 MB component at 200 KB/s got 408 after `request_timeout` and left
/// a 12 MB `.tmp` in staging.)
#[tokio::test]
async fn a_slow_upload_succeeds_and_a_stalled_or_abandoned_one_leaves_nothing() {
    let disk = Tmpfs::mount("64m");
    let staging = disk.path().join("staging");
    let home = Home::new();
    let d = slow_daemon(&home, &staging).await;

    let started = Instant::now();
    let r = put(
        &d,
        &component_path(&id(1), "nb-1-big-Data.db"),
        Some(15_000_000),
        paced(30, 500_000, Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let took = started.elapsed();
    assert_eq!(r.0, 200, "{r:?}");
    assert_eq!(r.1["uploadSizeBytes"], 15_000_000);
    assert!(took > Duration::from_secs(5), "{took:?}");
    assert_eq!(
        std::fs::metadata(staging.join(id(1)).join("ks/t/nb-1-big-Data.db"))
            .unwrap()
            .len(),
        15_000_000
    );

    // Other routes still answer within request_timeout (and are cut by it): the exemption is
    // the component upload's alone.
    let (status, _) = d.get("/api/v1/__health").await;
    assert_eq!(status, 200);

    // 1 MB, then silence longer than idle_timeout.
    let stalled =
        futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![1u8; 1_000_000]))]).chain(
            futures::stream::once(async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(Bytes::from(vec![1u8; 14_000_000]))
            }),
        );
    let started = Instant::now();
    let r = put(
        &d,
        &component_path(&id(2), "nb-1-big-Data.db"),
        Some(15_000_000),
        reqwest::Body::wrap_stream(stalled),
    )
    .await
    .unwrap();
    let took = started.elapsed();
    let message = error_message(r.0, &r.1);
    assert_eq!(r.0, 408, "{message}");
    assert!(
        message.contains(
            "no byte of nb-1-big-Data.db arrived for 3s (sstable_uploads.idle_timeout) after 1000000 bytes"
        ),
        "{message}"
    );
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(5),
        "{took:?}"
    );
    eventually("the stalled upload's .tmp is removed", || {
        test_support::temporary_files(&staging).is_empty()
    })
    .await;

    // A client gone mid-body: 2 MB of 15 MB, then the connection closed.
    let mut socket = tokio::net::TcpStream::connect(d.addr).await.unwrap();
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 15000000\r\n\r\n",
        component_path(&id(3), "nb-1-big-Data.db")
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&vec![2u8; 2_000_000]).await.unwrap();
    socket.flush().await.unwrap();
    eventually("the upload's .tmp appears", || {
        !test_support::temporary_files(&staging).is_empty()
    })
    .await;
    drop(socket);
    eventually("the abandoned upload's .tmp is removed", || {
        test_support::temporary_files(&staging).is_empty()
    })
    .await;
    assert!(!staging.join(id(3)).join("ks/t/nb-1-big-Data.db").exists());
    drop(d);
}

/// An upload to any system keyspace is refused with 403 naming it, whatever its case or
/// quoting, and nothing is staged (`system_cluster_metadata` was once accepted).
#[tokio::test]
async fn uploads_to_system_keyspaces_are_refused() {
    let d = Daemon::fresh("sstable_uploads:\n  enabled: true\n  min_free_space_percent: 0\n").await;
    let mut keyspaces: Vec<String> = [
        "system",
        "system_schema",
        "system_auth",
        "system_distributed",
        "system_traces",
        "system_views",
        "system_virtual_schema",
        "system_cluster_metadata",
        "sidecar_internal",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    keyspaces.extend(
        drover::cassandra::SYSTEM_KEYSPACES
            .iter()
            .map(|s| s.to_string()),
    );
    keyspaces.push("System_Cluster_Metadata".into());
    keyspaces.push("\"system_cluster_metadata\"".into());
    for ks in &keyspaces {
        let path = format!(
            "/api/v1/uploads/{}/keyspaces/{ks}/tables/t/components/nb-1-big-Data.db",
            id(1)
        );
        let r = d.client().put(d.url(&path)).body("x").send().await.unwrap();
        let (status, body) = json_of(r).await;
        let message = error_message(status, &body);
        assert_eq!(status, 403, "{ks}: {message}");
        assert!(
            message.contains(&format!("Forbidden keyspace: {}", ks.trim_matches('"'))),
            "{ks}: {message}"
        );
    }
    let staging = d.home().state_dir().join("sstable-uploads");
    assert!(!staging.join(id(1)).exists());
}
