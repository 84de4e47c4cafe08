//! Connection limits: a slow client cannot hold the daemon.

use std::time::{Duration, Instant};

use test_support::{Daemon, Home};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// 200 connections that send half a request and then stall: the health route still answers
/// at once on a fresh connection, and the stalled ones are closed after `header_read_timeout`.
#[tokio::test]
async fn slow_loris_connections_do_not_hold_the_daemon() {
    let home = Home::new();
    let config = home.write_config_edited(
        "",
        &[(
            "shutdown_timeout: 10s",
            "shutdown_timeout: 10s\n  header_read_timeout: 1s",
        )],
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let addr = daemon
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let addr = addr.split('/').next().unwrap().to_string();

    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(b"GET /api/v1/__health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(tcp);
    }

    let started = Instant::now();
    let (status, _) = daemon.get("/api/v1/__health").await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "health took {:?} beside 200 slow connections",
        started.elapsed()
    );

    // Each stalled connection is closed by the daemon (EOF or reset), within the timeout and
    // some slack, without the client doing anything more.
    for tcp in &mut slow {
        let mut buf = [0u8; 512];
        let read = tokio::time::timeout(Duration::from_secs(4), tcp.read(&mut buf)).await;
        match read {
            Ok(Ok(_)) | Ok(Err(_)) => {}
            Err(_) => panic!("a connection that never sent its headers is still open"),
        }
    }
}
