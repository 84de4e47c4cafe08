//! Limits of the API held at their bound: the bound itself is taken, one more (byte, file,
//! upload) is refused in the error shape, naming the limit and its value, and what is
//! recorded (staged files, frames) is read back.

use axum::body::Body;
use axum::http::{Method, Request};
use drover::livemigration::batch::{self, Frame, FrameReader, SkipReason};
use serde_json::{Value, json};
use test_support::{App, Home, error_message};

use crate::live_migration::{node_dirs, write};

/// `server.request_body_limit` of 1 KiB: a body of exactly 1024 bytes is taken, 1025 get 413
/// naming the setting and the bound.
#[tokio::test]
async fn a_body_of_request_body_limit_is_taken_and_one_byte_more_gets_413() {
    let home = Home::new();
    let config = home.write_config_edited(
        "",
        &[("server:\n", "server:\n  request_body_limit: 1KiB\n")],
    );
    let app = App::with_config(&home, &config).await;
    let body = |len: usize| {
        let bare = json!({"durationSeconds": 1, "failWith": ""}).to_string();
        json!({"durationSeconds": 1, "failWith": "x".repeat(len - bare.len())}).to_string()
    };
    assert_eq!(body(1024).len(), 1024);

    let (status, job) = app
        .post_raw("/api/v1/diagnostics/jobs", "application/json", body(1024))
        .await;
    assert_eq!(status, 202, "{job}");
    let (status, record) = app
        .get(&format!("/api/v1/jobs/{}", job["jobId"].as_str().unwrap()))
        .await;
    assert_eq!(status, 200, "{record}");

    let (status, answer) = app
        .post_raw("/api/v1/diagnostics/jobs", "application/json", body(1025))
        .await;
    assert_eq!(status, 413, "{answer}");
    assert_eq!(answer["status"], "Payload Too Large");
    let message = error_message(status, &answer);
    assert!(
        message.contains("server.request_body_limit (1024 bytes)"),
        "{message}"
    );
    // Job files are taken as text by their own handlers; their refusal said only "Failed to
    // buffer the request body: length limit exceeded".
    for route in ["/api/v1/migrations", "/api/v1/validations"] {
        let job = format!("# {}\nsource: {{}}\n", "x".repeat(1025));
        let (status, answer) = app.post_raw(route, "application/yaml", job).await;
        assert_eq!(status, 413, "{route}: {answer}");
        let message = error_message(status, &answer);
        assert!(
            message.contains("server.request_body_limit (1024 bytes)"),
            "{route}: {message}"
        );
    }
}

fn uploads_app_config(home: &Home) -> std::path::PathBuf {
    // The request body limit is below the component size: a component streams to its file
    // and is bounded by its own setting only.
    home.write_config_edited(
        "sstable_uploads:\n  enabled: true\n  min_free_space_percent: 0\n  max_component_size: 2KiB\n  max_staged_uploads: 2\n",
        &[("server:\n", "server:\n  request_body_limit: 1KiB\n")],
    )
}

const UPLOAD: &str = "0190c0de-7d3e-7cbe-8a7c-0000000000";

async fn put_component(app: &App, id: u32, component: &str, len: usize) -> (u16, Value) {
    app.send(
        Request::builder()
            .method(Method::PUT)
            .uri(format!(
                "/api/v1/uploads/{UPLOAD}{id:02}/keyspaces/ks/tables/t/components/{component}"
            ))
            .body(Body::from(vec![b'c'; len]))
            .unwrap(),
    )
    .await
}

/// Files below an upload's table directory.
fn staged(home: &Home, id: u32) -> Vec<(String, u64)> {
    let dir = home
        .state_dir()
        .join(format!("sstable-uploads/{UPLOAD}{id:02}/ks/t"));
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `sstable_uploads.max_component_size` of 2 KiB: a component of exactly 2048 bytes is
/// staged whole (though longer than `request_body_limit`), one of 2049 gets 413 naming the
/// setting and the bound and leaves nothing; `max_staged_uploads` of 2: the second upload is
/// taken, a third gets 429 naming the setting.
#[tokio::test]
async fn uploads_take_components_and_uploads_up_to_their_bounds() {
    let home = Home::new();
    let app = App::with_config(&home, &uploads_app_config(&home)).await;

    let (status, body) = put_component(&app, 0, "nb-1-big-Data.db", 2048).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["uploadSizeBytes"], 2048, "{body}");
    let (status, body) = put_component(&app, 0, "nb-1-big-Index.db", 2049).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(
        error_message(status, &body),
        "component nb-1-big-Index.db is longer than sstable_uploads.max_component_size (2048 bytes)"
    );
    assert_eq!(staged(&home, 0), [("nb-1-big-Data.db".to_string(), 2048)]);

    let (status, body) = put_component(&app, 1, "nb-1-big-Data.db", 1).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = put_component(&app, 2, "nb-1-big-Data.db", 1).await;
    assert_eq!(status, 429, "{body}");
    let message = error_message(status, &body);
    assert!(
        message.starts_with("2 uploads are staged already (sstable_uploads.max_staged_uploads)"),
        "{message}"
    );
    assert!(staged(&home, 2).is_empty());
}

/// A source's batches: a file of exactly the 4 MiB a batch carries is sent in it, one byte
/// longer is skipped as too large (the destination fetches it alone); a request naming 1024
/// files is answered, 1025 get 400 naming the bound.
#[tokio::test]
async fn a_batch_carries_files_and_names_up_to_its_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let max = batch::MAX_BATCH_FILE_BYTES as usize;
    write(
        &dir.path().join("data0/ks/t-1/nb-1-big-Data.db"),
        &vec![b'a'; max],
    );
    write(
        &dir.path().join("data0/ks/t-1/nb-2-big-Data.db"),
        &vec![b'b'; max + 1],
    );
    let app = App::new(&format!(
        "{}live_migration:\n  enabled: true\n  advertise: \"source:1\"\n  migration_map:\n    \"source:1\": \"destination:1\"\n",
        node_dirs(dir.path())
    ))
    .await;
    let url = |n: u32| format!("/api/v1/live-migration/files/data/0/ks/t-1/nb-{n}-big-Data.db");
    let post = |files: Vec<String>| {
        Request::builder()
            .method(Method::POST)
            .uri("/api/v1/live-migration/files-batch")
            .header("content-type", "application/json")
            .body(Body::from(json!({ "files": files }).to_string()))
            .unwrap()
    };

    let response = app.response(post(vec![url(1), url(2)])).await;
    assert_eq!(response.status(), 200);
    let mut frames = FrameReader::new(response.into_body().into_data_stream());
    let mut got = Vec::new();
    while let Some(frame) = frames.next().await.unwrap() {
        got.push(frame);
    }
    match &got[..] {
        [
            (Frame::File { size, .. }, content),
            (Frame::Skipped { reason, .. }, _),
            (Frame::End { files: 1 }, _),
        ] => {
            assert_eq!(*size as usize, max);
            assert_eq!(&content[..], &vec![b'a'; max][..]);
            assert_eq!(*reason, SkipReason::TooLarge);
        }
        other => panic!("{:?}", other.iter().map(|f| &f.0).collect::<Vec<_>>()),
    }

    let names = |n: u32| (0..n).map(|i| url(100 + i)).collect::<Vec<_>>();
    let response = app.response(post(names(1024))).await;
    assert_eq!(response.status(), 200);
    let mut frames = FrameReader::new(response.into_body().into_data_stream());
    let mut skipped = 0;
    while let Some((frame, _)) = frames.next().await.unwrap() {
        if matches!(frame, Frame::Skipped { .. }) {
            skipped += 1;
        }
    }
    assert_eq!(skipped, 1024, "every file named is answered for");
    let (status, body) = app.send(post(names(1025))).await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    assert!(
        message.contains("files: 1025 files named, at most 1024 per batch"),
        "{message}"
    );
}

/// A client's `x-request-id` of 128 visible characters is kept (and echoed); one of 129 is
/// replaced by the daemon's own, so a client never chooses more than 128 bytes of every log
/// line.
#[tokio::test]
async fn a_request_id_of_128_bytes_is_kept_and_one_of_129_replaced() {
    let app = App::new("").await;
    for (len, kept) in [(128, true), (129, false)] {
        let id = "r".repeat(len);
        let response = app
            .response(
                Request::get("/api/v1/__health")
                    .header("x-request-id", &id)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        let echoed = response.headers()["x-request-id"].to_str().unwrap();
        assert_eq!(echoed == id, kept, "{len}: {echoed}");
        assert!(echoed.len() <= 128, "{len}: {echoed}");
    }
}
