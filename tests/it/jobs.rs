use std::time::Duration;

use serde_json::{Value, json};

use test_support::{Daemon, Home, error_message, json_of};

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

/// DELETE, returning status and JSON body (`Value::String("")` when there is none).
async fn delete(daemon: &Daemon, path: &str) -> (u16, Value) {
    let res = daemon
        .client()
        .delete(daemon.url(path))
        .send()
        .await
        .expect("DELETE");
    json_of(res).await
}

/// A daemon config with `jobs.keep_finished` set to `keep` (a YAML flow mapping).
fn config_keeping(home: &Home, keep: &str) -> std::path::PathBuf {
    let config = home.write_config("");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("jobs:\n", &format!("jobs:\n  keep_finished: {keep}\n"));
    std::fs::write(&config, text).unwrap();
    config
}

fn record_file(home: &Home, id: &str) -> std::path::PathBuf {
    home.state_dir().join("jobs").join(format!("{id}.json"))
}

/// A kept job file, as migrations and validations leave for their resumes.
fn kept_file(home: &Home, id: &str) -> std::path::PathBuf {
    let path = home.state_dir().join("jobs").join(format!("{id}.job.yaml"));
    std::fs::write(&path, "source: {}\n").unwrap();
    path
}

async fn job_ids(daemon: &Daemon) -> Vec<String> {
    let (_, list) = daemon.get("/api/v1/jobs").await;
    list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

/// Polls until job `id` is unknown to the daemon, or panics after `WAIT`.
async fn wait_gone(daemon: &Daemon, id: &str) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (status, body) = daemon.get(&format!("/api/v1/jobs/{id}")).await;
        if status == 404 {
            return body;
        }
        assert_eq!(status, 200, "{body}");
        assert!(
            std::time::Instant::now() < deadline,
            "job {id} was never dropped: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn delete_forgets_an_ended_job_with_its_files_and_refuses_an_active_one() {
    let home = Home::new();
    let mut daemon = Daemon::start(&home, "").await;
    let done = submit(&daemon, json!({"durationSeconds": 1})).await;
    daemon
        .wait_job(&done, WAIT, |j| state(j) == "SUCCEEDED")
        .await;
    let running = submit(&daemon, json!({"durationSeconds": 600})).await;
    daemon
        .wait_job(&running, WAIT, |j| state(j) == "RUNNING")
        .await;
    let kept = kept_file(&home, &done);
    assert!(record_file(&home, &done).exists());

    // Queued or running: a conflict, in the error shape, and the job goes on.
    let (status, body) = delete(&daemon, &format!("/api/v1/jobs/{running}")).await;
    assert_eq!(status, 409, "{body}");
    assert!(error_message(status, &body).contains("RUNNING"), "{body}");
    let (status, job) = daemon.get(&format!("/api/v1/jobs/{running}")).await;
    assert_eq!((status, state(&job)), (200, "RUNNING"));

    let (status, body) = delete(&daemon, "/api/v1/jobs/no-such-job").await;
    assert_eq!(status, 404, "{body}");
    assert!(error_message(status, &body).contains("no-such-job"));

    let (status, body) = delete(&daemon, &format!("/api/v1/jobs/{done}")).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = daemon.get(&format!("/api/v1/jobs/{done}")).await;
    assert_eq!(status, 404, "{body}");
    error_message(status, &body);
    assert_eq!(job_ids(&daemon).await, [running.as_str()]);
    assert!(!record_file(&home, &done).exists(), "the record is deleted");
    assert!(!kept.exists(), "the kept job file is deleted");
    let (status, _) = delete(&daemon, &format!("/api/v1/jobs/{done}")).await;
    assert_eq!(status, 404, "deleted once");

    // Once ended (cancelled), it can go too.
    let (status, _) = daemon
        .post_json(&format!("/api/v1/jobs/{running}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 202);
    daemon
        .wait_job(&running, WAIT, |j| state(j) == "CANCELLED")
        .await;
    let (status, body) = delete(&daemon, &format!("/api/v1/jobs/{running}")).await;
    assert_eq!(status, 204, "{body}");

    // Deleted jobs do not come back with a restart.
    daemon.kill9();
    let daemon = Daemon::start(&home, "").await;
    assert!(job_ids(&daemon).await.is_empty());
}

#[tokio::test]
async fn finished_jobs_beyond_keep_finished_count_are_dropped_with_their_files() {
    let home = Home::new();
    let config = config_keeping(&home, "{count: 2, age: null}");
    let mut daemon = Daemon::start_with(&home, &config).await;
    // Active jobs are not finished ones: never dropped.
    let running = submit(&daemon, json!({"durationSeconds": 600})).await;
    let mut finished = Vec::new();
    for _ in 0..2 {
        let id = submit(&daemon, json!({"durationSeconds": 1})).await;
        daemon
            .wait_job(&id, WAIT, |j| state(j) == "SUCCEEDED")
            .await;
        finished.push(id);
    }
    let kept = kept_file(&home, &finished[0]);
    // A failed job counts as finished too; its end drops the oldest finished job.
    let failed = submit(
        &daemon,
        json!({"durationSeconds": 1, "failWith": "synthetic failure"}),
    )
    .await;
    let body = wait_gone(&daemon, &finished[0]).await;
    error_message(404, &body);
    assert!(!record_file(&home, &finished[0]).exists());
    assert!(!kept.exists(), "the kept job file goes with the job");
    let (_, job) = daemon.get(&format!("/api/v1/jobs/{failed}")).await;
    assert_eq!(state(&job), "FAILED", "{job}");
    assert_eq!(
        job_ids(&daemon).await,
        [running.clone(), finished[1].clone(), failed.clone()]
    );

    // An INTERRUPTED job waits to be resumed: not dropped either, across a restart.
    daemon
        .wait_job(&running, WAIT, |j| state(j) == "RUNNING")
        .await;
    daemon.kill9();
    let daemon = Daemon::start_with(&home, &config).await;
    let (_, job) = daemon.get(&format!("/api/v1/jobs/{running}")).await;
    assert_eq!(state(&job), "INTERRUPTED", "{job}");
    assert_eq!(
        job_ids(&daemon).await,
        [running, finished[1].clone(), failed]
    );
}

#[tokio::test]
async fn finished_jobs_older_than_keep_finished_age_are_dropped() {
    let home = Home::new();
    let config = config_keeping(&home, "{count: null, age: 3s}");
    let daemon = Daemon::start_with(&home, &config).await;
    let done = submit(&daemon, json!({"durationSeconds": 1})).await;
    let running = submit(&daemon, json!({"durationSeconds": 600})).await;
    daemon
        .wait_job(&done, WAIT, |j| state(j) == "SUCCEEDED")
        .await;
    let kept = kept_file(&home, &done);
    // Nothing else happens in the daemon: the job ages out on its own.
    wait_gone(&daemon, &done).await;
    assert!(!record_file(&home, &done).exists());
    assert!(!kept.exists());
    assert_eq!(job_ids(&daemon).await, [running]);
}

#[tokio::test]
async fn keep_finished_is_validated_at_start() {
    let home = Home::new();
    let config = config_keeping(&home, "{count: 0}");
    let out = std::process::Command::new(test_support::drover_bin())
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("jobs.keep_finished.count: must be at least 1"),
        "{stderr}"
    );
}

/// Issue 42, finding 9: a 10 MB `failWith` was stored whole and made `GET /api/v1/jobs`
/// 40 MB. It is now refused beyond 1024 bytes (accepted at 1024), and the list comes in pages
/// of at most `limit` jobs (1 to 1000, default 1000) with a `next` cursor, which the CLI
/// follows.
#[tokio::test]
async fn fail_with_is_bounded_and_the_job_list_comes_in_pages() {
    let daemon = Daemon::fresh("").await;

    let (status, body) = daemon
        .post_json(
            "/api/v1/diagnostics/jobs",
            &json!({"durationSeconds": 1, "failWith": "x".repeat(1025)}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        error_message(status, &body),
        "body: failWith: at most 1024 bytes, got 1025"
    );
    let (status, body) = daemon
        .post_json(
            "/api/v1/diagnostics/jobs",
            &json!({"durationSeconds": 1, "failWith": "x".repeat(10 << 20)}),
        )
        .await;
    assert_eq!(status, 400, "{}", error_message(status, &body));
    let most = submit(
        &daemon,
        json!({"durationSeconds": 1, "failWith": "y".repeat(1024)}),
    )
    .await;
    daemon.wait_job(&most, WAIT, |j| state(j) == "FAILED").await;
    let mut ids = vec![most];
    for _ in 0..4 {
        ids.push(submit(&daemon, json!({"durationSeconds": 600})).await);
    }

    // Pages of two, oldest first, each naming the next; the last names none.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &after {
            Some(a) => format!("/api/v1/jobs?limit=2&after={a}"),
            None => "/api/v1/jobs?limit=2".to_string(),
        };
        let (status, page) = daemon.get(&path).await;
        assert_eq!(status, 200, "{page}");
        let jobs = page["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 2, "{page}");
        seen.extend(jobs.iter().map(|j| j["id"].as_str().unwrap().to_string()));
        pages += 1;
        match page.get("next").and_then(Value::as_str) {
            Some(next) => after = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ids, "every job once, in order");
    assert_eq!(pages, 3);
    // The filters apply before the page is cut.
    let (_, page) = daemon
        .get("/api/v1/jobs?limit=1&state=RUNNING&kind=diagnostic")
        .await;
    assert_eq!(page["jobs"].as_array().unwrap().len(), 1, "{page}");
    assert_ne!(page["jobs"][0]["id"], ids[0], "{page}");
    assert!(page["next"].is_string(), "{page}");
    // The bound at the bound and past it.
    let (status, page) = daemon.get("/api/v1/jobs?limit=1000").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.get("next").is_none(), "{page}");
    for limit in ["0", "1001"] {
        let (status, body) = daemon.get(&format!("/api/v1/jobs?limit={limit}")).await;
        assert_eq!(
            error_message(status, &body),
            format!("limit: must be between 1 and 1000, got {limit}")
        );
    }
    // The whole list of five jobs, the longest failWith included, is small.
    let (_, list) = daemon.get("/api/v1/jobs").await;
    assert!(
        list.to_string().len() < 16 * 1024,
        "{} bytes",
        list.to_string().len()
    );

    // The CLI follows the cursor (one page here; the loop is the same for many).
    let out = std::process::Command::new(test_support::drover_bin())
        .args(["jobs", "-o", "json"])
        .env("DROVER_SERVER", daemon.url(""))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for id in &ids {
        assert!(stdout.contains(id.as_str()), "{id}: {stdout}");
    }
    for id in &ids[1..] {
        let (status, _) = daemon
            .post_json(&format!("/api/v1/jobs/{id}/cancel"), &json!({}))
            .await;
        assert_eq!(status, 202);
    }
}
