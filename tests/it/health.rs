use test_support::{Daemon, Home, cassandra_src};

#[tokio::test]
async fn daemon_health_is_ok() {
    let daemon = Daemon::fresh("").await;
    let (status, body) = daemon.get("/api/v1/__health").await;
    assert_eq!(status, 200);
    assert_eq!(body, serde_json::json!({"status": "OK"}));
}

#[tokio::test]
async fn native_health_follows_the_real_cassandra_node() {
    let daemon = Daemon::fresh(&format!(
        "cassandra:\n  native_address: {}\n",
        cassandra_src()
    ))
    .await;
    let (status, body) = daemon.get("/api/v1/cassandra/native/__health").await;
    assert_eq!(
        (status, &body),
        (200, &serde_json::json!({"status": "OK"})),
        "is the test Cassandra up (scripts/testenv up)? daemon log:\n{}",
        daemon.logs()
    );
    // The session is reused: a second check answers as well.
    assert_eq!(daemon.get("/api/v1/cassandra/native/__health").await.0, 200);
}

#[tokio::test]
async fn native_health_is_503_when_nothing_answers() {
    // Nothing listens on port 1 of the loopback: connections are refused at once.
    let daemon =
        Daemon::fresh("cassandra:\n  native_address: 127.0.0.1:1\n  health_check_timeout: 2s\n")
            .await;
    let (status, body) = daemon.get("/api/v1/cassandra/native/__health").await;
    assert_eq!(status, 503);
    assert_eq!(body, serde_json::json!({"status": "NOT_OK"}));
    // And the daemon itself is fine.
    assert_eq!(daemon.get("/api/v1/__health").await.0, 200);
}

#[tokio::test]
async fn native_health_is_503_when_the_node_does_not_speak_cql_in_time() {
    // A listener that accepts and never answers: the check must give up at its timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let daemon = Daemon::fresh(&format!(
        "cassandra:\n  native_address: {addr}\n  health_check_timeout: 1s\n"
    ))
    .await;
    let started = std::time::Instant::now();
    let (status, body) = daemon.get("/api/v1/cassandra/native/__health").await;
    assert_eq!((status, body["status"].as_str()), (503, Some("NOT_OK")));
    // It waits its 1 s, not the 5 s default nor the driver's own timeouts; the upper bound
    // leaves seconds of slack for a loaded machine and still fails at the default.
    let elapsed = started.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(900)
            && elapsed < std::time::Duration::from_millis(4000),
        "answered after {elapsed:?} for a 1 s health_check_timeout"
    );
    drop(silent);
}

#[tokio::test]
async fn a_request_slower_than_the_request_timeout_gets_408_as_json() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let home = Home::new();
    let config = home.write_config_edited(
        &format!("cassandra:\n  native_address: {addr}\n  health_check_timeout: 30s\n"),
        &[("server:\n", "server:\n  request_timeout: 1s\n")],
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let (status, body) = daemon.get("/api/v1/cassandra/native/__health").await;
    assert_eq!(status, 408);
    assert_eq!(body["status"], "Request Timeout");
    assert!(
        test_support::error_message(status, &body).contains("server.request_timeout"),
        "{body}"
    );
    assert_eq!(daemon.get("/api/v1/__health").await.0, 200);
    drop(silent);
}

#[tokio::test]
async fn the_node_can_be_described_by_its_own_cassandra_yaml() {
    let yaml = std::env::var("DROVER_TEST_CASSANDRA_SRC_YAML")
        .expect("DROVER_TEST_CASSANDRA_SRC_YAML is set by scripts/testenv up (run scripts/test)");
    let daemon = Daemon::fresh(&format!("cassandra:\n  cassandra_yaml: {yaml}\n")).await;
    // The native address comes from the node's rpc_address and native_transport_port.
    let (status, body) = daemon.get("/api/v1/cassandra/native/__health").await;
    assert_eq!(
        (status, &body),
        (200, &serde_json::json!({"status": "OK"})),
        "{}",
        daemon.logs()
    );
    let check = std::process::Command::new(test_support::drover_bin())
        .args(["check-config", "--config"])
        .arg(daemon.home().path().join("drover.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.contains("cassandra 127.0.0.1:9042"), "{stdout}");
}
