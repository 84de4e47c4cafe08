use test_support::Daemon;

#[tokio::test]
async fn responses_carry_a_request_id_and_requests_are_counted() {
    let daemon = Daemon::fresh("").await;
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
        .header("accept", "application/openmetrics-text")
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
