//! A destination facing a source that lies: a small HTTP server in the test answers the
//! source routes with crafted responses, and the real destination daemon must not trust them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use futures::StreamExt;
use serde_json::json;

use test_support::{Daemon, Home, ended};

use crate::live_migration::node_dirs;

const FILES: &str = "/api/v1/live-migration/files";
const COPY_TASKS: &str = "/api/v1/live-migration/data-copy-tasks";
const STATUS: &str = "/api/v1/live-migration/status";

/// The status a source answers while files may still be copied (a destination asks it before
/// every iteration).
async fn not_completed() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"state": "NOT_COMPLETED", "endTime": null}))
}

/// Listed at 130 bytes; served at 2 MiB.
const LONG: &str = "/api/v1/live-migration/files/data/0/ks/t-1/long-Data.db";
/// Listed at 130 bytes; served at 5.
const SHORT: &str = "/api/v1/live-migration/files/data/0/ks/t-1/short-Data.db";
/// Listed at 130 bytes; answered with a redirect to the real bytes.
const MOVED: &str = "/api/v1/live-migration/files/data/0/ks/t-1/moved-Data.db";
/// Listed at 130 bytes; answered 500 with a body that never ends.
const HUGE_ERROR: &str = "/api/v1/live-migration/files/data/0/ks/t-1/err-Data.db";

async fn hostile_source() -> String {
    let listing = || async {
        let file = |url: &str| json!({"fileUrl": url, "size": 130, "fileType": "FILE", "lastModifiedTime": 1_700_000_000_000u64});
        axum::Json(json!({"files": [file(LONG), file(SHORT), file(MOVED), file(HUGE_ERROR)]}))
    };
    let app = Router::new()
        .route(STATUS, get(not_completed))
        .route(FILES, get(listing))
        .route(LONG, get(|| async { vec![b'x'; 2 << 20] }))
        .route(SHORT, get(|| async { b"short".to_vec() }))
        .route(
            MOVED,
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/real")]).into_response() }),
        )
        .route("/real", get(|| async { vec![b'r'; 130] }))
        .route(
            HUGE_ERROR,
            get(|| async {
                // 8 KiB of error, then a body that never ends: only a destination that stops
                // reading an error body early gets past it.
                let first = futures::stream::once(async {
                    Ok::<_, std::io::Error>(axum::body::Bytes::from("E".repeat(8192)))
                });
                let body = axum::body::Body::from_stream(first.chain(futures::stream::pending()));
                (StatusCode::INTERNAL_SERVER_ERROR, body)
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test]
async fn a_destination_keeps_exactly_the_listed_bytes_and_follows_no_redirect() {
    let source = hostile_source().await;
    let home = Home::new();
    let dst = Daemon::start(
        &home,
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{source}\": \"destination:1\"\n",
            node_dirs(home.path())
        ),
    )
    .await;
    let (status, accepted) = dst
        .post_json(
            COPY_TASKS,
            &json!({"maxIterations": 1, "successThreshold": 1.0, "maxConcurrency": 4}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let url = accepted["statusUrl"].as_str().unwrap().to_string();
    let task = dst.wait_for(&url, Duration::from_secs(60), ended).await;
    assert_ne!(task["state"], "SUCCEEDED", "{task:#}");
    let text = format!("{task}");
    assert!(
        text.contains("more than the 130 bytes it listed"),
        "{task:#}\n{}",
        dst.logs()
    );

    let dir = home.path().join("data0/ks/t-1");
    // No final file was placed, and nothing on disk holds more than was listed.
    for name in [
        "long-Data.db",
        "short-Data.db",
        "moved-Data.db",
        "err-Data.db",
    ] {
        assert!(!dir.join(name).exists(), "{name} was placed");
    }
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let len = e.metadata().unwrap().len();
        assert!(len <= 130, "{:?} holds {len} bytes", e.path());
    }
    let logs = dst.logs();
    // The redirect is an error, not followed.
    assert!(logs.contains("302"), "{logs}");
    // The endless error body is cut to a bounded message in the log.
    let longest = logs
        .lines()
        .filter(|l| l.contains("err-Data.db"))
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(longest > 0, "{logs}");
    assert!(longest < 4096, "an error line of {longest} bytes");
    assert!(logs.contains(&"E".repeat(100)), "{logs}");
}

/// A source whose answers the test changes as it goes: what the listing says, and files whose
/// name tells how they are served (`ok-<size>-…`: exactly `size` bytes; `stall-…`: 10 bytes,
/// then nothing ever again).
#[derive(Clone, Default)]
struct Programmable {
    listing: Arc<Mutex<Listing>>,
    listings: Arc<AtomicUsize>,
    file_requests: Arc<AtomicUsize>,
    /// The source's live migration is declared COMPLETED.
    completed: Arc<std::sync::atomic::AtomicBool>,
    /// The listing announces a drover extension (`block-digests`), as a drover source's does.
    announces: Arc<std::sync::atomic::AtomicBool>,
    /// Serving a file declares the source's live migration COMPLETED (the source node was
    /// stopped while the destination copied).
    completes_on_file: Arc<std::sync::atomic::AtomicBool>,
    /// A destination directory looked at whenever a file is asked for: the longest file below
    /// it then is kept in `longest_seen` (what a destination holds between its attempts).
    watched: Arc<Mutex<Option<std::path::PathBuf>>>,
    longest_seen: Arc<std::sync::atomic::AtomicU64>,
    /// Digest requests answered (`hugedigest-` files get an answer of [`HUGE_DIGEST_ANSWER`]
    /// bytes).
    digest_requests: Arc<AtomicUsize>,
}

/// The digest answer of a `hugedigest-` file: as long as the probe of issue 42 sent.
const HUGE_DIGEST_ANSWER: usize = 200_000_000;

#[derive(Clone, Default)]
enum Listing {
    /// `{"files": …}` with these entries.
    #[default]
    Empty,
    Files(Vec<serde_json::Value>),
    /// A body that starts like a listing and never ends.
    Endless,
    /// No answer at all: not even the headers.
    Stall,
}

/// A listing entry of a file.
fn entry(name: &str, size: u64) -> serde_json::Value {
    json!({"fileUrl": format!("{FILES}/data/0/ks/t-1/{name}"), "size": size, "fileType": "FILE", "lastModifiedTime": 1_700_000_000_000u64})
}

impl Programmable {
    async fn start() -> (Self, String) {
        let source = Self::default();
        let (s1, s2) = (source.clone(), source.clone());
        let s0 = source.clone();
        let app = Router::new()
            .route(
                STATUS,
                get(move || {
                    let s = s0.clone();
                    async move {
                        if s.completed.load(Ordering::SeqCst) {
                            axum::Json(
                                json!({"state": "COMPLETED", "endTime": 1_700_000_000_000u64}),
                            )
                        } else {
                            not_completed().await
                        }
                    }
                }),
            )
            .route(
                FILES,
                get(move || {
                    let s = s1.clone();
                    async move {
                        s.listings.fetch_add(1, Ordering::SeqCst);
                        let listing = s.listing.lock().unwrap().clone();
                        let announced = s.announces.load(Ordering::SeqCst).then_some([(
                            drover::livemigration::batch::FEATURES_HEADER,
                            "block-digests",
                        )]);
                        let answer = match listing {
                            Listing::Empty => axum::Json(json!({"files": []})).into_response(),
                            Listing::Files(files) => {
                                axum::Json(json!({ "files": files })).into_response()
                            }
                            Listing::Endless => {
                                let start = futures::stream::once(async {
                                    Ok::<_, std::io::Error>(axum::body::Bytes::from(
                                        "{\"files\": [",
                                    ))
                                });
                                let padding = futures::stream::repeat_with(|| {
                                    Ok(axum::body::Bytes::from(" ".repeat(16 << 10)))
                                });
                                axum::body::Body::from_stream(start.chain(padding)).into_response()
                            }
                            Listing::Stall => futures::future::pending().await,
                        };
                        (announced, answer).into_response()
                    }
                }),
            )
            .route(
                // Below `t-1`, at any depth: a file is served by its last name.
                &format!("{FILES}/data/0/ks/t-1/{{*name}}"),
                get(move |Path(name): Path<String>, RawQuery(query): RawQuery| {
                    let s = s2.clone();
                    async move {
                        let name = name.rsplit('/').next().unwrap_or_default().to_string();
                        let digest = query.is_some_and(|q| q.contains("digestAlgorithm"));
                        if digest && name.contains("hugedigest-") {
                            s.digest_requests.fetch_add(1, Ordering::SeqCst);
                            // JSON that never names a digest, 16 KiB at a time.
                            let head = futures::stream::once(async {
                                Ok::<_, std::io::Error>(axum::body::Bytes::from("{\"junk\": \""))
                            });
                            let chunk = axum::body::Bytes::from("x".repeat(16 << 10));
                            let padding = futures::stream::repeat_with(move || Ok(chunk.clone()))
                                .take(HUGE_DIGEST_ANSWER / (16 << 10));
                            let tail =
                                futures::stream::once(async { Ok(axum::body::Bytes::from("\"}")) });
                            return axum::body::Body::from_stream(head.chain(padding).chain(tail))
                                .into_response();
                        }
                        s.file_requests.fetch_add(1, Ordering::SeqCst);
                        let watched = s.watched.lock().unwrap().clone();
                        if let Some(dir) = watched {
                            s.longest_seen
                                .fetch_max(longest_file(&dir), Ordering::SeqCst);
                        }
                        if s.completes_on_file.load(Ordering::SeqCst) {
                            s.completed.store(true, Ordering::SeqCst);
                        }
                        if name.starts_with("stall-") {
                            let first = futures::stream::once(async {
                                Ok::<_, std::io::Error>(axum::body::Bytes::from_static(
                                    b"0123456789",
                                ))
                            });
                            let body = axum::body::Body::from_stream(
                                first.chain(futures::stream::pending()),
                            );
                            return body.into_response();
                        }
                        let size: usize = name
                            .strip_prefix("ok-")
                            .and_then(|r| r.split('-').next())
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0);
                        vec![b'o'; size].into_response()
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (source, addr)
    }

    fn list(&self, listing: Listing) {
        *self.listing.lock().unwrap() = listing;
    }

    fn file_requests(&self) -> usize {
        self.file_requests.load(Ordering::SeqCst)
    }
}

/// A destination of `source`, with more `live_migration` keys (`  key: value\n` lines).
async fn destination_of(home: &Home, source: &str, extra: &str) -> Daemon {
    Daemon::start(home, &destination_config(home, source, extra)).await
}

fn destination_config(home: &Home, source: &str, extra: &str) -> String {
    format!(
        "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{source}\": \"destination:1\"\n{extra}",
        node_dirs(home.path())
    )
}

/// Starts a data-copy task; its status URL.
async fn start_task(dst: &Daemon, body: serde_json::Value) -> String {
    let (status, accepted) = dst.post_json(COPY_TASKS, &body).await;
    assert_eq!(status, 202, "{accepted}");
    accepted["statusUrl"].as_str().unwrap().to_string()
}

/// Runs a one-iteration task to its end.
async fn run_task(dst: &Daemon, extra: serde_json::Value) -> serde_json::Value {
    let mut body = json!({"maxIterations": 1, "successThreshold": 1.0, "maxConcurrency": 2});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let url = start_task(dst, body).await;
    dst.wait_for(&url, WAIT, ended).await
}

async fn cancel(dst: &Daemon, url: &str) {
    let res = dst.client().patch(dst.url(url)).send().await.unwrap();
    let (status, body) = test_support::json_of(res).await;
    assert_eq!(status, 200, "{body}");
}

/// Every file below `root`.
fn files_below(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                found.push(p);
            }
        }
    }
    found
}

/// The length of the longest file below `root` (0 when there is none).
fn longest_file(root: &std::path::Path) -> u64 {
    files_below(root)
        .iter()
        .filter_map(|p| p.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

/// The staging files below `root`.
fn staging_files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    files_below(root)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".drover-part"))
        .collect()
}

const WAIT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn a_source_that_stops_sending_fails_the_task_instead_of_holding_it() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    // One job slot: a task held by a silent source would keep every later one queued.
    let config = home.write_config_edited(
        &destination_config(&home, &addr, "  peer_read_timeout: 300ms\n"),
        &[("jobs:\n", "jobs:\n  max_running: 1\n")],
    );
    let dst = Daemon::start_with(&home, &config).await;

    // The listing never comes.
    source.list(Listing::Stall);
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.contains("nothing received for 300ms (live_migration.peer_read_timeout)"),
        "{error}"
    );

    // A file's bytes stop coming: each attempt times out, the retries are bounded, the task
    // ends, and its partial download is not left behind.
    source.list(Listing::Files(vec![entry("stall-Data.db", 130)]));
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert_eq!(task["status"][0]["downloadFailures"], 1, "{task:#}");
    assert!(
        dst.logs().contains("live_migration.peer_read_timeout"),
        "{}",
        dst.logs()
    );
    assert!(source.file_requests() >= 2, "retried");
    assert!(
        staging_files(home.path()).is_empty(),
        "{:?}",
        staging_files(home.path())
    );
    assert!(!home.path().join("data0/ks/t-1/stall-Data.db").exists());
}

#[tokio::test]
async fn a_cancel_is_prompt_while_the_source_stalls_and_survives_a_restart() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    // Only a cancel can end these tasks: the read timeout is far away.
    let extra = "  peer_read_timeout: 1h\n";
    let mut dst = destination_of(&home, &addr, extra).await;
    let body = json!({"maxIterations": 3, "successThreshold": 1.0, "maxConcurrency": 1});

    // While the listing hangs.
    source.list(Listing::Stall);
    let url = start_task(&dst, body.clone()).await;
    test_support::wait_until("the listing request", WAIT, || {
        source.listings.load(Ordering::SeqCst) > 0
    })
    .await;
    cancel(&dst, &url).await;
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");

    // While a download hangs: the task stops, and its staging file goes with it.
    source.list(Listing::Files(vec![entry("stall-Data.db", 130)]));
    let url = start_task(&dst, body.clone()).await;
    dst.wait_for(&url, WAIT, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() >= Some(10)
    })
    .await;
    assert_eq!(staging_files(home.path()).len(), 1);
    cancel(&dst, &url).await;
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    assert!(
        staging_files(home.path()).is_empty(),
        "{:?}",
        staging_files(home.path())
    );

    // Cancelled, and the daemon killed at once: the cancel answered is on disk, so the
    // restarted daemon does not resume the task.
    let url = start_task(&dst, body.clone()).await;
    dst.wait_for(&url, WAIT, |t| {
        t["status"][0]["bytesDownloaded"].as_u64() >= Some(10)
    })
    .await;
    cancel(&dst, &url).await;
    dst.kill9();
    // A staging file left by a crash is swept at start (no interrupted task needs it).
    let planted = home
        .path()
        .join("data0/ks/t-1/.planted-Data.db.5-1.drover-part");
    std::fs::write(&planted, b"part!").unwrap();
    let requests = source.file_requests();
    let dst = destination_of(&home, &addr, extra).await;
    let task = dst.wait_for(&url, WAIT, ended).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}\n{}", dst.logs());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, task) = dst.get(&url).await;
    assert_eq!(task["state"], "CANCELLED", "{task:#}");
    assert_eq!(source.file_requests(), requests, "the task was resumed");
    assert!(
        staging_files(home.path()).is_empty(),
        "{:?}",
        staging_files(home.path())
    );
}

/// The listed size is a bound held at the byte: a file served at exactly its listed size is
/// placed byte for byte, and one served a single byte longer is refused at that byte (not
/// written, not placed, not fetched again into a staging file that holds it), and the task
/// fails saying so.
#[tokio::test]
async fn a_file_one_byte_longer_than_listed_is_refused_and_one_of_exactly_its_size_placed() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    let data = home.path().join("data0");
    *source.watched.lock().unwrap() = Some(data.clone());
    // Both listed at 130 bytes; `ok-<n>-` files are served at n bytes.
    source.list(Listing::Files(vec![
        entry("ok-130-exact-Data.db", 130),
        entry("ok-131-over-Data.db", 130),
    ]));
    let task = run_task(&dst, json!({})).await;
    assert_ne!(task["state"], "SUCCEEDED", "{task:#}");
    let first = &task["status"][0];
    assert_eq!(first["filesDownloaded"], 1, "{task:#}");
    assert_eq!(first["downloadFailures"], 1, "{task:#}");
    let logs = dst.logs();
    assert!(
        logs.contains("ok-131-over-Data.db: the source sent more than the 130 bytes it listed"),
        "{task:#}\n{logs}"
    );

    let dir = data.join("ks/t-1");
    assert_eq!(
        std::fs::read(dir.join("ok-130-exact-Data.db")).unwrap(),
        vec![b'o'; 130],
        "the file of exactly the listed size is placed as sent"
    );
    assert!(
        !dir.join("ok-131-over-Data.db").exists(),
        "the file one byte over its listed size was placed"
    );
    // Not at the end, and not while the task ran (whenever the source was asked for a file).
    assert!(longest_file(&data) <= 130, "{} bytes", longest_file(&data));
    assert!(
        source.longest_seen.load(Ordering::SeqCst) <= 130,
        "the destination held {} bytes of a file listed at 130",
        source.longest_seen.load(Ordering::SeqCst)
    );
    assert!(staging_files(home.path()).is_empty());
}

#[tokio::test]
async fn listings_beyond_the_destinations_bounds_are_refused_before_any_download() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(
        &home,
        &addr,
        "  max_listed_files: 10\n  max_listing_bytes: 64 KiB\n",
    )
    .await;
    let failed_with = async |listing: Listing, expected: &str| {
        source.list(listing);
        let task = run_task(&dst, json!({})).await;
        assert_eq!(task["state"], "FAILED", "{task:#}");
        let error = task["error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{error}");
    };

    // A file larger than any disk: refused against the free space, nothing fetched.
    failed_with(
        Listing::Files(vec![
            entry("ok-7-Data.db", 7),
            entry("ok-1-Data.db", 1 << 50),
        ]),
        "live_migration.min_free_disk",
    )
    .await;
    // Sizes that add up past 2^64 (they would wrap to a small total).
    let half = u64::MAX / 2 + 1;
    failed_with(
        Listing::Files(vec![
            entry("ok-1-Data.db", half),
            entry("ok-2-Data.db", half),
        ]),
        "add up to more than 2^64 bytes",
    )
    .await;
    // More entries than max_listed_files.
    let many = (0..11)
        .map(|i| entry(&format!("ok-{i}-Data.db"), i))
        .collect();
    failed_with(Listing::Files(many), "live_migration.max_listed_files").await;
    // A listing body that never ends is read up to max_listing_bytes only.
    failed_with(Listing::Endless, "live_migration.max_listing_bytes").await;

    assert_eq!(source.file_requests(), 0);
    assert!(
        std::fs::read_dir(home.path().join("data0/ks/t-1"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
}

#[tokio::test]
async fn an_empty_listing_deletes_nothing_without_allow_mass_deletion() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dir = home.path().join("data0/ks/t-1");
    std::fs::create_dir_all(&dir).unwrap();
    let mine = ["nb-1-big-Data.db", "nb-2-big-Data.db", "nb-3-big-Data.db"];
    for name in mine {
        std::fs::write(dir.join(name), b"the destination's own bytes").unwrap();
    }
    let dst = destination_of(&home, &addr, "").await;

    source.list(Listing::Empty);
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.contains("would delete 3 of the 3 files")
            && error.contains("max_delete_share")
            && error.contains("allowMassDeletion"),
        "{error}"
    );
    for name in mine {
        assert!(dir.join(name).exists(), "{name} was deleted");
    }

    // Asked explicitly: the destination follows its source.
    let task = run_task(&dst, json!({"allowMassDeletion": true})).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert_eq!(task["allowMassDeletion"], true, "{task:#}");
    for name in mine {
        assert!(!dir.join(name).exists(), "{name} was kept");
    }
}

/// The modes a source lists are kept only within what Cassandra itself makes: files at most
/// 0644, directories at most 0755 (issue 42's probe listed `mode: 4095`, and the files became
/// 0777). Stricter modes are kept as listed.
#[tokio::test]
async fn downloaded_files_get_the_source_mode_within_0644_and_directories_within_0755() {
    use std::os::unix::fs::PermissionsExt;
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    let with_mode = |mut e: serde_json::Value, mode: u32| {
        e["mode"] = json!(mode);
        e
    };
    let dir = |path: &str, mode: u32| json!({"fileUrl": format!("{FILES}/data/0/{path}"), "size": 0, "fileType": "DIRECTORY", "lastModifiedTime": 1_700_000_000_000u64, "mode": mode});
    source.list(Listing::Files(vec![
        // The probe's: every bit, set-user-id, set-group-id and sticky included.
        with_mode(entry("ok-130-Data.db", 130), 4095),
        with_mode(entry("empty-Data.db", 0), 4095),
        with_mode(entry("ok-9-Data.db", 9), 0o4755),
        with_mode(entry("ok-11-Data.db", 11), 0o666),
        with_mode(entry("ok-12-Data.db", 12), 0o600),
        // Sidecar's listings carry no mode.
        entry("ok-7-Data.db", 7),
        dir("ks/t-2", 4095),
        dir("ks/t-3", 0o700),
    ]));
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    let mode = |rel: &str| {
        std::fs::symlink_metadata(home.path().join("data0/ks").join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("t-1/ok-130-Data.db"), 0o644);
    assert_eq!(mode("t-1/empty-Data.db"), 0o644);
    assert_eq!(mode("t-1/ok-9-Data.db"), 0o644);
    assert_eq!(mode("t-1/ok-11-Data.db"), 0o644);
    assert_eq!(mode("t-1/ok-12-Data.db"), 0o600);
    assert_eq!(mode("t-1/ok-7-Data.db"), 0o644);
    assert_eq!(mode("t-2"), 0o755);
    assert_eq!(mode("t-3"), 0o700);
}

/// A symbolic link inside the destination's own data directory (issue 42's probe: a
/// `data/ks/tbl/linked -> /outside` made the destination write `evil-Data.db` into
/// /outside) is never written through: not a file, an empty file nor a directory lands
/// where it points, the task fails naming the path and the link, and the other files are
/// copied.
#[tokio::test]
async fn a_link_inside_the_destinations_data_directory_is_never_written_through() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    let outside = home.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let table = home.path().join("data0/ks/t-1");
    std::fs::create_dir_all(&table).unwrap();
    std::os::unix::fs::symlink(&outside, table.join("linked")).unwrap();
    source.list(Listing::Files(vec![
        entry("linked/ok-130-evil-Data.db", 130),
        entry("linked/evil-empty-Data.db", 0),
        json!({"fileUrl": format!("{FILES}/data/0/ks/t-1/linked/sub"), "size": 0, "fileType": "DIRECTORY", "lastModifiedTime": 1_700_000_000_000u64}),
        entry("ok-7-Data.db", 7),
    ]));
    let task = run_task(&dst, json!({})).await;
    let left: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "written through the link: {left:?}\n{task:#}"
    );
    assert_eq!(task["state"], "FAILED", "{task:#}");
    let error = task["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{}", table.join("linked").display()))
            && error.contains("leads through a symbolic link"),
        "{error}"
    );
    assert_eq!(task["status"][0]["downloadFailures"], 3, "{task:#}");
    assert_eq!(
        std::fs::read(table.join("ok-7-Data.db")).unwrap(),
        b"ooooooo"
    );
    assert!(
        std::fs::symlink_metadata(table.join("linked"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link itself is left to the operator"
    );
}

/// A link planted at a download's staging name (by anyone who can write the data directory)
/// must not make the destination write the source's bytes, mode or times to where it points.
#[tokio::test]
async fn a_link_at_the_staging_name_is_never_written_through() {
    use std::os::unix::fs::PermissionsExt;
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    let outside = home.path().join("outside.txt");
    std::fs::write(&outside, b"not the source's").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = home.path().join("data0/ks/t-1");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(
        &outside,
        dir.join(".ok-130-Data.db.130-1700000000000.drover-part"),
    )
    .unwrap();
    let mut listed = entry("ok-130-Data.db", 130);
    listed["mode"] = json!(0o644);
    source.list(Listing::Files(vec![listed]));
    let task = run_task(&dst, json!({"maxIterations": 1})).await;
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        b"not the source's",
        "{task:#}"
    );
    let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{task:#}");
}

/// Entries without bytes are made here without asking the source (a Sidecar source answers 416
/// for an empty file): empty files with the source's time and mode, and directories; both
/// count as downloaded. The iteration that finds nothing left keeps the Sidecar's -1 for what
/// it did not download.
#[tokio::test]
async fn empty_files_and_directories_are_made_without_a_request() {
    use std::os::unix::fs::PermissionsExt;
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    let mut empty = entry("empty-Data.db", 0);
    empty["mode"] = json!(0o640);
    let dir = json!({"fileUrl": format!("{FILES}/data/0/ks/t-2/sub"), "size": 0, "fileType": "DIRECTORY", "lastModifiedTime": 1_700_000_000_000u64});
    source.list(Listing::Files(vec![empty, dir, entry("ok-5-Data.db", 5)]));
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    let first = &task["status"][0];
    for (counter, n) in [
        ("totalSize", 5),
        ("totalFiles", 3),
        ("bytesToDownload", 5),
        ("filesToDownload", 3),
        ("filesDownloaded", 3),
        ("downloadFailures", 0),
        ("bytesDownloaded", 5),
    ] {
        assert_eq!(first[counter], n, "{counter}: {task:#}");
    }
    let last = &task["status"][1];
    assert_eq!(last["state"], "SUCCESS", "{task:#}");
    assert_eq!(last["totalFiles"], 3, "{task:#}");
    assert_eq!(last["bytesToDownload"], -1, "{task:#}");
    assert_eq!(last["filesToDownload"], -1, "{task:#}");
    assert_eq!(
        source.file_requests(),
        1,
        "only the file with bytes is asked for"
    );
    let made = home.path().join("data0/ks/t-1/empty-Data.db");
    let meta = std::fs::metadata(&made).unwrap();
    assert_eq!(meta.len(), 0);
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!(
        drover::livemigration::files::modified_ms(&meta),
        1_700_000_000_000
    );
    assert!(home.path().join("data0/ks/t-2/sub").is_dir());
    assert!(staging_files(home.path()).is_empty());
}

/// `successThreshold` is a share of the source's bytes, as the Sidecar's: 100 of 103 bytes
/// here is above 0.9, though 3 of 4 files are missing. With `"thresholdBasis": "files"` it is
/// a share of files, and they are fetched.
#[tokio::test]
async fn the_success_threshold_counts_bytes_unless_asked_for_files() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    source.list(Listing::Files(vec![entry("ok-100-Data.db", 100)]));
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}\n{}", dst.logs());
    let mut listing = vec![entry("ok-100-Data.db", 100)];
    for name in ["ok-1-a-Data.db", "ok-1-b-Data.db", "ok-1-c-Data.db"] {
        listing.push(entry(name, 1));
    }
    source.list(Listing::Files(listing));
    let requests = source.file_requests();
    let task = run_task(&dst, json!({"successThreshold": 0.9})).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert_eq!(task["thresholdBasis"], "bytes", "{task:#}");
    let iterations = task["status"].as_array().unwrap();
    assert_eq!(iterations.len(), 1, "{task:#}");
    assert_eq!(iterations[0]["state"], "SUCCESS", "{task:#}");
    assert_eq!(iterations[0]["totalSize"], 103, "{task:#}");
    assert_eq!(iterations[0]["bytesToDownload"], -1, "{task:#}");
    assert_eq!(source.file_requests(), requests, "nothing was fetched");
    // Strictly above: 100/103 is not above 0.98, so the bytes are fetched.
    let task = run_task(&dst, json!({"successThreshold": 0.98, "maxIterations": 1})).await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert_eq!(task["status"][0]["filesToDownload"], 3, "{task:#}");
    assert_eq!(task["status"][0]["bytesToDownload"], 3, "{task:#}");

    // By files: 2 of 4 files here is below 0.6 (though 101 of 103 bytes are above it).
    for name in ["ok-1-a-Data.db", "ok-1-b-Data.db"] {
        std::fs::remove_file(home.path().join("data0/ks/t-1").join(name)).unwrap();
    }
    let task = run_task(
        &dst,
        json!({"successThreshold": 0.6, "thresholdBasis": "files"}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert_eq!(task["thresholdBasis"], "files", "{task:#}");
    assert_eq!(task["status"][0]["state"], "DOWNLOAD_COMPLETE", "{task:#}");
    assert_eq!(task["status"][0]["filesToDownload"], 2, "{task:#}");
    // And a request a Sidecar client might send, with fields drover does not know.
    let task = run_task(
        &dst,
        json!({"skipGossipCheck": true, "gossipFetchBatchSize": 5}),
    )
    .await;
    assert_eq!(task["state"], "SUCCEEDED", "{task:#}");
    assert!(
        dst.logs().contains("unknown request fields ignored")
            && dst.logs().contains("skipGossipCheck"),
        "{}",
        dst.logs()
    );
}

/// Each iteration asks the source's status first: a source declared COMPLETED serves no more
/// files, and the task fails with the Sidecar's message before listing anything.
#[tokio::test]
async fn a_task_fails_once_the_source_is_completed() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    source.list(Listing::Files(vec![entry("ok-5-Data.db", 5)]));
    source.completed.store(true, Ordering::SeqCst);
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert_eq!(
        task["error"], "Live migration has completed at source.",
        "{task:#}"
    );
    let iterations = task["status"].as_array().unwrap();
    assert_eq!(iterations.len(), 1, "{task:#}");
    assert_eq!(iterations[0]["state"], "FAILED", "{task:#}");
    assert_eq!(iterations[0]["totalFiles"], -1, "{task:#}");
    assert_eq!(source.listings.load(Ordering::SeqCst), 0, "listed");
    assert_eq!(source.file_requests(), 0);
}

/// A source known to be a drover (its first listing announced an extension) is listed in
/// the same round trip as its status is asked. Once its status says `COMPLETED` (its node
/// stopped during the first iteration's downloads), that listing is not used: the next
/// iteration fails, and nothing more is fetched.
#[tokio::test]
async fn a_drover_source_completed_between_iterations_is_not_copied_from_again() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    source.list(Listing::Files(vec![entry("ok-5-Data.db", 5)]));
    source.announces.store(true, Ordering::SeqCst);
    source.completes_on_file.store(true, Ordering::SeqCst);
    let task = run_task(&dst, json!({"maxIterations": 3})).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert_eq!(
        task["error"], "Live migration has completed at source.",
        "{task:#}"
    );
    let iterations = task["status"].as_array().unwrap();
    assert_eq!(iterations.len(), 2, "{task:#}");
    assert_eq!(iterations[0]["state"], "DOWNLOAD_COMPLETE", "{task:#}");
    assert_eq!(iterations[0]["filesDownloaded"], 1, "{task:#}");
    assert_eq!(iterations[1]["state"], "FAILED", "{task:#}");
    assert_eq!(iterations[1]["totalFiles"], -1, "{task:#}");
    // Listed at once with the status in the second iteration (a known drover), but the
    // listing was not acted on.
    assert_eq!(source.listings.load(Ordering::SeqCst), 2, "listed");
    assert_eq!(source.file_requests(), 1);
    let copied = home.path().join("data0/ks/t-1/ok-5-Data.db");
    assert_eq!(std::fs::read(&copied).unwrap(), b"ooooo");
}

/// A drover source (it announces batches) whose batch answers lie: a file listed at 130 bytes
/// sent at 131, a file whose bytes do not match the digest sent with them, and, on every later
/// request, one frame over and over (then a file no longer asked for). What arrived whole and
/// checked is placed; nothing else is, nothing on disk holds more than was listed, the
/// repeated frames are not piled up, and the task fails, saying why.
#[tokio::test]
async fn a_batch_that_lies_places_only_what_arrived_whole_and_checked() {
    use drover::livemigration::batch::{self, Frame};
    let names = ["a-Data.db", "b-Data.db", "c-Data.db", "d-Data.db"];
    let url = |n: &str| format!("{FILES}/data/0/ks/t-1/{n}");
    let file_frame = move |n: &str, bytes: &[u8], digest_of: &[u8]| {
        let mut h = drover::livemigration::digest::Algorithm::Xxh3.hasher();
        h.update(digest_of);
        let mut out = Vec::new();
        let frame = Frame::File {
            file_url: url(n),
            size: bytes.len() as u64,
            last_modified_time: 1_700_000_000_000,
            mode: 0o644,
            digest: h.finish(),
        };
        batch::encode(&frame, bytes, &mut out);
        out
    };
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let listing = move || async move {
        (
            [(batch::FEATURES_HEADER, batch::FEATURES)],
            axum::Json(json!({"files": names.iter().map(|n| entry(n, 130)).collect::<Vec<_>>()})),
        )
    };
    let answer = move || {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let mut body = Vec::new();
        if n == 0 {
            body.extend(file_frame("a-Data.db", &[b'a'; 130], &[b'a'; 130]));
            body.extend(file_frame("c-Data.db", &[b'c'; 131], &[b'c'; 131]));
            body.extend(file_frame("b-Data.db", &[b'b'; 130], b"something else"));
        } else {
            for _ in 0..10_000 {
                body.extend(file_frame("d-Data.db", &[b'd'; 130], &[b'd'; 130]));
            }
        }
        async move { body }
    };
    let app = Router::new()
        .route(STATUS, get(not_completed))
        .route(FILES, get(listing))
        .route(
            "/api/v1/live-migration/files-batch",
            axum::routing::post(answer),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let source = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let home = Home::new();
    let dst = destination_of(&home, &source, "").await;
    let task = run_task(&dst, json!({})).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    let dir = home.path().join("data0/ks/t-1");
    // Whole and checked: the first file of the first answer, and the first of the repeated
    // frames of the second.
    assert_eq!(
        std::fs::read(dir.join("a-Data.db")).unwrap(),
        vec![b'a'; 130]
    );
    assert_eq!(
        std::fs::read(dir.join("d-Data.db")).unwrap(),
        vec![b'd'; 130]
    );
    for n in ["b-Data.db", "c-Data.db"] {
        assert!(!dir.join(n).exists(), "{n} was placed");
    }
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let len = e.metadata().unwrap().len();
        assert!(len <= 130, "{:?} holds {len} bytes", e.path());
    }
    let logs = dst.logs();
    assert!(logs.contains("131 bytes now, 130 when listed"), "{logs}");
    assert!(logs.contains("differs from the source's"), "{logs}");
    assert!(logs.contains("twice"), "{logs}");
    assert!(logs.contains("which was not asked for"), "{logs}");
    assert!(requests.load(Ordering::SeqCst) > 1);
    assert!(staging_files(home.path()).is_empty());
}

/// Issue 42: a source answered a digest request with 200 MB, and the destination held it
/// (RSS 42 MB → 1.73 GB), stored it in the task's record, logged it in one line and echoed it
/// in every answer naming the task. It reads 4 KiB of such an answer and keeps none of it.
#[tokio::test]
async fn a_digest_answer_of_200_mb_is_not_held_stored_logged_or_echoed() {
    let (source, addr) = Programmable::start().await;
    let home = Home::new();
    let dst = destination_of(&home, &addr, "").await;
    source.list(Listing::Files(vec![entry(
        "ok-130-hugedigest-Data.db",
        130,
    )]));
    // A first pass places the file; the second, with verifyDigest, asks the digest of a file
    // that matches by size and time.
    let first = run_task(&dst, json!({})).await;
    assert_eq!(first["state"], "SUCCEEDED", "{first:#}");
    let task = run_task(&dst, json!({"verifyDigest": "xxh3"})).await;
    assert!(
        source.digest_requests.load(Ordering::SeqCst) >= 1,
        "the digest was never asked for: {task:#}"
    );
    let record = task.to_string();
    // The bound first, so that a failure does not print what it is about.
    assert!(
        record.len() < 16 << 10,
        "the task's record is {} bytes",
        record.len()
    );
    assert!(
        record.contains("an answer longer than 4096 bytes"),
        "the task says why: {task:#}"
    );
    let (status, jobs) = dst.get("/api/v1/jobs").await;
    assert_eq!(status, 200);
    let jobs = jobs.to_string();
    assert!(
        jobs.len() < 64 << 10,
        "GET /api/v1/jobs is {} bytes",
        jobs.len()
    );
    let logs = dst.logs();
    let longest = logs.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 8 << 10, "a log line of {longest} bytes");
    assert!(!logs.contains("xxxxxxxx"), "the answer is logged");
    // What it stores survives a restart: the records on disk hold none of it either.
    let stored: u64 = walk_sizes(home.path());
    assert!(
        stored < 1 << 20,
        "{stored} bytes stored under the daemon's home"
    );
    let peak = test_support::peak_rss_kib(dst.pid());
    assert!(peak < 150 * 1024, "peak RSS {peak} KiB");
}

/// The bytes of every file under `dir` (the node's 130-byte file among them).
fn walk_sizes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = e.metadata().unwrap();
        total += if meta.is_dir() {
            walk_sizes(&e.path())
        } else {
            meta.len()
        };
    }
    total
}
