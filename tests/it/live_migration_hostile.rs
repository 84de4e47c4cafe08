//! A destination facing a source that lies: a small HTTP server in the test answers the
//! source routes with crafted responses, and the real destination daemon must not trust them.

use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use futures::StreamExt;
use serde_json::json;

use test_support::{Daemon, Home, ended};

use crate::live_migration::node_dirs;

const FILES: &str = "/api/v1/live-migration/files";
const COPY_TASKS: &str = "/api/v1/live-migration/data-copy-tasks";

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
