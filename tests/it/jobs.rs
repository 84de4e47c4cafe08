use std::time::Duration;

use serde_json::{Value, json};

use test_support::{Daemon, Home, error_message};

const WAIT: Duration = Duration::from_secs(20);

async fn submit(daemon: &Daemon, body: Value) -> String {
    let (status, accepted) = daemon.post_json("/api/v1/diagnostics/jobs", &body).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["jobId"].as_str().unwrap().to_string();
    assert_eq!(accepted["statusUrl"], format!("/api/v1/jobs/{id}"));
    id
}

fn state(job: &Value) -> &str {
    job["state"].as_str().unwrap()
}

#[tokio::test]
async fn jobs_run_report_progress_and_end_in_the_right_state() {
    let daemon = Daemon::fresh("").await;

    let ok = submit(&daemon, json!({"durationSeconds": 1})).await;
    let failing = submit(
        &daemon,
        json!({"durationSeconds": 1, "failWith": "synthetic failure"}),
    )
    .await;
    let long = submit(&daemon, json!({"durationSeconds": 600})).await;

    let done = daemon
        .wait_job(&ok, WAIT, |j| state(j) == "SUCCEEDED")
        .await;
    assert_eq!(done["progress"]["secondsElapsed"], 1);
    assert_eq!(done["kind"], "diagnostic");
    assert_eq!(done["attempts"], 1);
    assert!(done["startedAt"].is_string() && done["endedAt"].is_string());
    assert_eq!(done["spec"]["durationSeconds"], 1);

    let failed = daemon
        .wait_job(&failing, WAIT, |j| state(j) == "FAILED")
        .await;
    assert_eq!(failed["error"], "synthetic failure");

    let running = daemon
        .wait_job(&long, WAIT, |j| {
            state(j) == "RUNNING" && j["progress"]["secondsElapsed"].as_u64() >= Some(1)
        })
        .await;
    assert_eq!(running["phase"], "waiting");
    let (status, body) = daemon
        .post_json(&format!("/api/v1/jobs/{long}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 202, "{body}");
    daemon
        .wait_job(&long, WAIT, |j| state(j) == "CANCELLED")
        .await;
    // Cancelling twice is a conflict, not a silent success.
    let (status, body) = daemon
        .post_json(&format!("/api/v1/jobs/{long}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 409);
    assert!(error_message(status, &body).contains("CANCELLED"));

    let (_, list) = daemon.get("/api/v1/jobs").await;
    let ids: Vec<_> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [ok.as_str(), failing.as_str(), long.as_str()],
        "oldest first"
    );
    let (_, failed_only) = daemon
        .get("/api/v1/jobs?state=FAILED&kind=diagnostic")
        .await;
    assert_eq!(failed_only["jobs"].as_array().unwrap().len(), 1);

    let metrics = daemon.get_text("/metrics").await;
    assert!(
        metrics.contains(r#"drover_jobs{kind="diagnostic",state="CANCELLED"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"drover_jobs{kind="diagnostic",state="RUNNING"} 0"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn kill_9_keeps_the_job_list_and_marks_running_jobs_interrupted() {
    let home = Home::new();
    let mut daemon = Daemon::start(&home, "").await;
    let finished = submit(&daemon, json!({"durationSeconds": 1})).await;
    daemon
        .wait_job(&finished, WAIT, |j| state(j) == "SUCCEEDED")
        .await;
    let running = submit(&daemon, json!({"durationSeconds": 600})).await;
    daemon
        .wait_job(&running, WAIT, |j| {
            j["progress"]["secondsElapsed"].as_u64() >= Some(2)
        })
        .await;
    // Let the progress flush (200 ms in tests) reach the disk.
    tokio::time::sleep(Duration::from_millis(500)).await;
    daemon.kill9();

    let daemon = Daemon::start(&home, "").await;
    let (_, list) = daemon.get("/api/v1/jobs").await;
    let jobs = list["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{list}");
    let (_, job) = daemon.get(&format!("/api/v1/jobs/{finished}")).await;
    assert_eq!(state(&job), "SUCCEEDED");
    let (_, job) = daemon.get(&format!("/api/v1/jobs/{running}")).await;
    assert_eq!(state(&job), "INTERRUPTED", "{job}");
    assert!(
        job["progress"]["secondsElapsed"].as_u64() >= Some(2),
        "progress survives: {job}"
    );
    // An interrupted job is not running, so it cannot be cancelled.
    let (status, _) = daemon
        .post_json(&format!("/api/v1/jobs/{running}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn sigterm_stops_jobs_and_exits_within_the_shutdown_timeout() {
    let home = Home::new();
    let mut daemon = Daemon::start(&home, "").await;
    let running = submit(&daemon, json!({"durationSeconds": 600})).await;
    daemon
        .wait_job(&running, WAIT, |j| state(j) == "RUNNING")
        .await;

    daemon.signal("TERM");
    // shutdown_timeout is 10 s; the margin covers fsyncs of the job records that stall for
    // seconds while other tests load the shared disk.
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "exit status {status}:\n{}", daemon.logs());
    assert!(
        daemon.logs().contains("drover stopped"),
        "{}",
        daemon.logs()
    );
    // The job stopped when told to; the shutdown timeout (tests/it/daemon.rs) was not needed.
    assert!(
        !daemon.logs().contains("at the shutdown timeout"),
        "{}",
        daemon.logs()
    );
    assert!(
        !home.state_dir().join("listen-addr").exists(),
        "the address file is removed"
    );

    let daemon = Daemon::start(&home, "").await;
    let (_, job) = daemon.get(&format!("/api/v1/jobs/{running}")).await;
    assert_eq!(state(&job), "INTERRUPTED", "{job}");
    assert!(
        job["error"].is_null(),
        "a clean stop is not an error: {job}"
    );
}

#[tokio::test]
async fn a_second_daemon_cannot_share_the_state_dir() {
    let home = Home::new();
    let _first = Daemon::start(&home, "").await;
    let config = home.path().join("drover.yaml");
    let out = std::process::Command::new(test_support::drover_bin())
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is in use by another drover process"),
        "{stderr}"
    );
}
