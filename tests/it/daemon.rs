//! The daemon's own lifecycle: signals, the shutdown timeout, and its log level.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::{Daemon, Home, drover_bin, poll, wait_until};

/// A config whose node health check hangs for `hang` (a listener that never answers), so a
/// health request stays open that long: an open request the shutdown has to wait for.
fn hanging_health(
    home: &Home,
    silent: &std::net::TcpListener,
    shutdown: &str,
    hang: &str,
) -> std::path::PathBuf {
    let addr = silent.local_addr().unwrap();
    home.write_config_edited(
        &format!("cassandra:\n  native_address: {addr}\n  health_check_timeout: {hang}\n"),
        &[(
            "shutdown_timeout: 10s",
            &format!("shutdown_timeout: {shutdown}\n  request_timeout: 10m"),
        )],
    )
}

/// Sends a request that will hang, and returns once the daemon is working on it: its health
/// probe has connected to the silent listener (the accepted connection is returned, to be kept
/// open and never answered).
async fn open_request(
    daemon: &Daemon,
    silent: &std::net::TcpListener,
) -> (tokio::task::JoinHandle<()>, std::net::TcpStream) {
    let client = daemon.client().clone();
    let url = daemon.url("/api/v1/cassandra/native/__health");
    let request = tokio::spawn(async move {
        let _ = client.get(url).send().await;
    });
    silent.set_nonblocking(true).unwrap();
    let probe = poll(Duration::from_secs(30), async || match silent.accept() {
        Ok((probe, _)) => Ok(probe),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(()),
        Err(e) => panic!("accept: {e}"),
    })
    .await
    .unwrap_or_else(|()| panic!("request not received:\n{}", daemon.logs()));
    (request, probe)
}

#[tokio::test]
async fn sigterm_refuses_new_connections_and_gives_up_on_open_requests_at_the_shutdown_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let home = Home::new();
    let config = hanging_health(&home, &silent, "3s", "5m");
    let mut daemon = Daemon::start_with(&home, &config).await;
    let _request = open_request(&daemon, &silent).await;

    daemon.signal("TERM");
    let signalled = Instant::now();
    // The listener closes at once, while the open request keeps the process alive.
    let refused = loop {
        match TcpStream::connect_timeout(&daemon.addr, Duration::from_secs(1)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                break signalled.elapsed();
            }
            _ => {}
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(3),
            "new connections still accepted after SIGTERM:\n{}",
            daemon.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The request would hang for 5 minutes: the daemon stops waiting for it after 3 s.
    let status = daemon.wait_exit(Duration::from_secs(60));
    let exited = signalled.elapsed();
    assert!(status.success(), "exit status {status}:\n{}", daemon.logs());
    assert!(
        exited >= Duration::from_millis(2900),
        "exited {exited:?} after SIGTERM without waiting for the open request:\n{}",
        daemon.logs()
    );
    assert!(
        refused < exited,
        "refused after {refused:?}, exited after {exited:?}"
    );
    let logs = daemon.logs();
    assert!(
        logs.contains("open requests did not finish within the shutdown timeout"),
        "{logs}"
    );
    assert!(logs.contains("drover stopped"), "{logs}");
}

#[tokio::test]
async fn a_second_signal_exits_at_once() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let home = Home::new();
    // Without the second signal the daemon would wait 10 minutes for the open request.
    let config = hanging_health(&home, &silent, "10m", "20m");
    let mut daemon = Daemon::start_with(&home, &config).await;
    let _request = open_request(&daemon, &silent).await;

    daemon.signal("TERM");
    wait_until("the first signal", Duration::from_secs(30), || {
        daemon.logs().contains("signal received")
    })
    .await;
    daemon.signal("INT");
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{}", daemon.logs());
    assert!(
        daemon.logs().contains("second signal: exiting now"),
        "{}",
        daemon.logs()
    );
}

/// Starts `drover serve` with exactly the environment given (no RUST_LOG unless given), waits
/// until it listens, stops it, and returns what it logged.
fn logs_of_a_run(home: &Home, config: &Path, env: &[(&str, &str)]) -> String {
    let addr_file = home.state_dir().join("listen-addr");
    let _ = std::fs::remove_file(&addr_file);
    let log = home.path().join("level.log");
    let mut cmd = Command::new(drover_bin());
    cmd.args(["serve", "--config"])
        .arg(config)
        .env_remove("RUST_LOG")
        .env_remove("DROVER_LOG_LEVEL")
        .env_remove("DROVER_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !addr_file.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "exited with {status}: {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        assert!(Instant::now() < deadline, "did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    // One request, so the access log (info) has something to say.
    let addr = std::fs::read_to_string(&addr_file).unwrap();
    let mut stream = TcpStream::connect(addr.trim()).unwrap();
    use std::io::{Read, Write};
    stream
        .write_all(b"GET /api/v1/__health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn drover_log_level_overrides_the_config_and_rust_log_overrides_both() {
    let home = Home::new();
    let config = home.write_config("logging:\n  level: info\n");
    let info = logs_of_a_run(&home, &config, &[]);
    assert!(info.contains("drover listening"), "{info}");
    assert!(info.contains("access"), "{info}");

    let warn = logs_of_a_run(&home, &config, &[("DROVER_LOG_LEVEL", "warn")]);
    assert!(
        !warn.contains("drover listening"),
        "DROVER_LOG_LEVEL=warn still logs info:\n{warn}"
    );
    assert!(!warn.contains("access"), "{warn}");

    let debug = logs_of_a_run(
        &home,
        &config,
        &[("DROVER_LOG_LEVEL", "warn"), ("RUST_LOG", "info")],
    );
    assert!(
        debug.contains("drover listening"),
        "RUST_LOG must win over DROVER_LOG_LEVEL:\n{debug}"
    );
}
