//! Fault injection against the real clusters. A test binary of its own: cargo runs test
//! binaries one after the other, so freezing a database here never disturbs the other tests.

mod dynamodb;

use std::process::Command;
use std::time::{Duration, Instant};

use test_support::cql::{Fixture, assert_same, dst_addr, job};
use test_support::listener_pid;

/// Freezes a process (SIGSTOP) until dropped (SIGCONT), even if the test fails.
struct Frozen(u32);

impl Frozen {
    fn new(pid: u32) -> Self {
        assert!(
            Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

#[tokio::test]
async fn a_target_that_stops_answering_for_30_s_delays_the_job_but_loses_nothing() {
    let rows = 20_000;
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("it_fault_outage", rows, 100, 100).await;
    let yaml = job(
        ks,
        "t",
        "  preserveTimestamps: true\n",
        "  rowsPerSecond: 1500\n",
        "",
    );
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    daemon
        .wait_job(&id, Duration::from_secs(120), |j| {
            j["progress"]["rowsWritten"].as_u64() >= Some(3000)
        })
        .await;

    let pid = listener_pid(&dst_addr());
    let frozen = Frozen::new(pid);
    let started = Instant::now();
    let mut saw_waiting = None;
    while started.elapsed() < Duration::from_secs(30) {
        let (_, j) = daemon.get(&format!("/api/v1/migrations/{id}")).await;
        assert_eq!(
            j["state"], "RUNNING",
            "the job keeps running through the outage: {j}"
        );
        if j["phase"]
            .as_str()
            .is_some_and(|p| p.starts_with("waiting: writing to the target"))
        {
            saw_waiting = Some(j);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(frozen);
    let waiting = saw_waiting.expect("the status showed the job waiting for the target");
    assert!(
        waiting["progress"]["retries"].as_u64() > Some(0),
        "{waiting}"
    );

    let done = daemon
        .wait_job(&id, Duration::from_secs(300), test_support::ended)
        .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    assert!(
        done["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("writing to the target")),
        "{done}"
    );
    assert_eq!(done["phase"], "done");
    let table = format!("{ks}.t");
    let select = "p, c, v, writetime(v), n, writetime(n)";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        rows
    );
}
