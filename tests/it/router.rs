//! What the API answers, shape and status, where no daemon process is needed: the router of
//! a daemon, built in this process as `drover serve` builds it, called through
//! `tower::ServiceExt::oneshot`. Behaviour (jobs running, signals, files) is tested against the
//! real binary in the other modules.

use serde_json::json;

use crate::live_migration::node_dirs;
use test_support::{App, Home, error_message};

#[tokio::test]
async fn every_bad_request_gets_the_json_error_shape_and_the_api_keeps_serving() {
    let app = App::new("").await;

    // Unknown route.
    let (status, body) = app.get("/api/v1/nope").await;
    assert_eq!(status, 404);
    assert_eq!(body["status"], "Not Found");
    assert!(error_message(status, &body).contains("/api/v1/nope"));

    // Known route, wrong method.
    let (status, body) = app.post_json("/api/v1/__health", &json!({})).await;
    assert_eq!(status, 405);
    assert_eq!(body["status"], "Method Not Allowed");
    assert!(error_message(status, &body).contains("POST is not allowed on /api/v1/__health"));

    // Malformed JSON, wrong type, unknown field: the field is named.
    let (status, body) = app
        .post_raw(
            "/api/v1/diagnostics/jobs",
            "application/json",
            "{\"durationSeconds\": ",
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        error_message(status, &body).contains("EOF while parsing"),
        "{body}"
    );
    let (status, body) = app
        .post_json(
            "/api/v1/diagnostics/jobs",
            &json!({"durationSeconds": "ten"}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        error_message(status, &body),
        "body: durationSeconds: invalid type: string \"ten\", expected u64 (line 1)"
    );
    let (status, body) = app
        .post_json(
            "/api/v1/diagnostics/jobs",
            &json!({"durationSeconds": 1, "speed": 3}),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        error_message(status, &body).starts_with("body: unknown field `speed`"),
        "{body}"
    );
    let (status, body) = app
        .post_json("/api/v1/diagnostics/jobs", &json!({"durationSeconds": 0}))
        .await;
    assert_eq!(status, 400);
    assert!(
        error_message(status, &body).contains("durationSeconds: must be between 1 and"),
        "{body}"
    );

    // Malformed YAML: field and line.
    let (status, body) = app
        .post_raw(
            "/api/v1/diagnostics/jobs",
            "application/yaml",
            "# a job\ndurationSeconds: [1, 2]\n",
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        error_message(status, &body),
        "body: durationSeconds: invalid type: sequence, expected u64 (line 2)"
    );
    let (status, body) = app
        .post_raw(
            "/api/v1/diagnostics/jobs",
            "application/yaml",
            "durationSeconds: 1\n  bad: indent\n",
        )
        .await;
    assert_eq!(status, 400);
    assert!(error_message(status, &body).starts_with("body: "), "{body}");

    // Unsupported media type.
    let (status, body) = app
        .post_raw("/api/v1/diagnostics/jobs", "text/csv", "a,b")
        .await;
    assert_eq!(status, 415);
    assert!(error_message(status, &body).contains("text/csv"));

    // Bad query string.
    let (status, body) = app.get("/api/v1/jobs?state=DONE").await;
    assert_eq!(status, 400);
    assert!(error_message(status, &body).contains("unknown job state \"DONE\""));
    let (status, body) = app.get("/api/v1/jobs?colour=red").await;
    assert_eq!(status, 400);
    error_message(status, &body);

    // Unknown job.
    let (status, body) = app.get("/api/v1/jobs/does-not-exist").await;
    assert_eq!(status, 404);
    assert!(error_message(status, &body).contains("does-not-exist"));

    assert_eq!(app.get("/api/v1/__health").await.0, 200);
}

#[tokio::test]
async fn oversized_bodies_get_413_as_json() {
    let home = Home::new();
    // A small limit, so the test needs no large upload.
    let config = home.write_config_edited(
        "",
        &[("server:\n", "server:\n  request_body_limit: 1KiB\n")],
    );
    let app = App::with_config(&home, &config).await;

    let big = format!(
        "{{\"durationSeconds\": 1, \"failWith\": \"{}\"}}",
        "x".repeat(4096)
    );
    let (status, body) = app
        .post_raw("/api/v1/diagnostics/jobs", "application/json", big)
        .await;
    assert_eq!(status, 413);
    assert_eq!(body["status"], "Payload Too Large");
    error_message(status, &body);
    assert_eq!(app.get("/api/v1/__health").await.0, 200);
}

#[tokio::test]
async fn live_migration_is_off_unless_asked_for() {
    let home = Home::new();
    let app = App::with_config(&home, &home.write_config(&node_dirs(home.path()))).await;
    for p in [
        "/api/v1/live-migration/files",
        "/api/v1/live-migration/status",
        "/api/v1/live-migration/data-copy-tasks",
    ] {
        let (status, body) = app.get(p).await;
        assert_eq!(status, 404, "{p}: {body}");
        assert_eq!(body["status"], "Not Found");
    }
    // Switched on, a node that is not in the map still serves nothing.
    let (status, view) = app
        .put_json("/api/v1/admin/live-migration", &json!({"enabled": true}))
        .await;
    assert_eq!((status, view["role"].clone()), (200, json!("none")));
    let (status, _) = app.get("/api/v1/live-migration/files").await;
    assert_eq!(status, 404);
    let (status, body) = app
        .put_json("/api/v1/admin/live-migration", &json!({"on": 1}))
        .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn diagnostics_are_off_unless_enabled() {
    let home = Home::new();
    let config = home.write_config_edited("", &[("diagnostics: true", "diagnostics: false")]);
    let app = App::with_config(&home, &config).await;
    let (status, body) = app
        .post_json("/api/v1/diagnostics/jobs", &json!({"durationSeconds": 1}))
        .await;
    assert_eq!(status, 404);
    assert!(error_message(status, &body).contains("server.diagnostics"));
}
