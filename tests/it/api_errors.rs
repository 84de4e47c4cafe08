use serde_json::json;

use crate::support::{Daemon, Home, error_message};

#[tokio::test]
async fn every_bad_request_gets_the_json_error_shape_and_the_daemon_keeps_serving() {
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;

    // Unknown route.
    let (status, body) = daemon.get("/api/v1/nope").await;
    assert_eq!(status, 404);
    assert_eq!(body["status"], "Not Found");
    assert!(error_message(status, &body).contains("/api/v1/nope"));

    // Known route, wrong method.
    let (status, body) = daemon.post_json("/api/v1/__health", &json!({})).await;
    assert_eq!(status, 405);
    assert_eq!(body["status"], "Method Not Allowed");
    assert!(error_message(status, &body).contains("POST is not allowed on /api/v1/__health"));

    // Malformed JSON, wrong type, unknown field: the field is named.
    let (status, body) = daemon
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
    let (status, body) = daemon
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
    let (status, body) = daemon
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
    let (status, body) = daemon
        .post_json("/api/v1/diagnostics/jobs", &json!({"durationSeconds": 0}))
        .await;
    assert_eq!(status, 400);
    assert!(
        error_message(status, &body).contains("durationSeconds: must be between 1 and"),
        "{body}"
    );

    // Malformed YAML: field and line.
    let (status, body) = daemon
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
    let (status, body) = daemon
        .post_raw(
            "/api/v1/diagnostics/jobs",
            "application/yaml",
            "durationSeconds: 1\n  bad: indent\n",
        )
        .await;
    assert_eq!(status, 400);
    assert!(error_message(status, &body).starts_with("body: "), "{body}");

    // Unsupported media type.
    let (status, body) = daemon
        .post_raw("/api/v1/diagnostics/jobs", "text/csv", "a,b")
        .await;
    assert_eq!(status, 415);
    assert!(error_message(status, &body).contains("text/csv"));

    // Bad query string.
    let (status, body) = daemon.get("/api/v1/jobs?state=DONE").await;
    assert_eq!(status, 400);
    assert!(error_message(status, &body).contains("unknown job state \"DONE\""));
    let (status, body) = daemon.get("/api/v1/jobs?colour=red").await;
    assert_eq!(status, 400);
    error_message(status, &body);

    // Unknown job.
    let (status, body) = daemon.get("/api/v1/jobs/does-not-exist").await;
    assert_eq!(status, 404);
    assert!(error_message(status, &body).contains("does-not-exist"));

    assert_eq!(daemon.get("/api/v1/__health").await.0, 200);
}

#[tokio::test]
async fn oversized_bodies_get_413_as_json() {
    let home = Home::new();
    // A small limit, so the test needs no large upload.
    let config = home.write_config("");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("server:\n", "server:\n  request_body_limit: 1KiB\n");
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start_with(&home, &config).await;

    let big = format!(
        "{{\"durationSeconds\": 1, \"failWith\": \"{}\"}}",
        "x".repeat(4096)
    );
    let (status, body) = daemon
        .post_raw("/api/v1/diagnostics/jobs", "application/json", big)
        .await;
    assert_eq!(status, 413);
    assert_eq!(body["status"], "Payload Too Large");
    error_message(status, &body);
    assert_eq!(daemon.get("/api/v1/__health").await.0, 200);
}

#[tokio::test]
async fn responses_carry_a_request_id_and_requests_are_counted() {
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let res = daemon
        .client()
        .get(daemon.url("/api/v1/__health"))
        .send()
        .await
        .unwrap();
    let id = res
        .headers()
        .get("x-request-id")
        .expect("request id")
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    // A client's own id is kept.
    let res = daemon
        .client()
        .get(daemon.url("/api/v1/__health"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "trace-me-42");
    daemon.get("/api/v1/jobs/abc").await;

    let res = daemon
        .client()
        .get(daemon.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = res.text().await.unwrap();
    assert!(
        text.contains(
            r#"drover_http_requests_total{method="GET",route="/api/v1/__health",status="200"} 2"#
        ),
        "{text}"
    );
    // Ids never become label values: the template is recorded.
    assert!(
        text.contains(
            r#"drover_http_requests_total{method="GET",route="/api/v1/jobs/{id}",status="404"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains("drover_http_request_duration_seconds_bucket"),
        "{text}"
    );
    // The access log names the request id.
    assert!(daemon.logs().contains("trace-me-42"), "{}", daemon.logs());
}
