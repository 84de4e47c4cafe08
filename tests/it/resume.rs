//! Savepoints and resume, end to end against the real clusters.

use std::time::Duration;

use serde_json::Value;

use crate::cql::{assert_same, dst_addr, fresh_keyspace, rows_table, session, src_addr};
use crate::cql::{fill_many, job};
use crate::support::{Daemon, Home, drover_bin};

const WAIT: Duration = Duration::from_secs(180);
use crate::cql::ROWS_TABLE as TABLE;

fn with_savepoints(yaml: &str, dir: &std::path::Path, extra: &str) -> String {
    format!(
        "{yaml}savepoints:\n  path: {}\n  intervalSeconds: 1\n{extra}",
        dir.display()
    )
}

fn savepoint_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.retain(|n| n.starts_with("savepoint_"));
    names.sort();
    names
}

async fn count(s: &scylla::client::session::Session, table: &str) -> usize {
    crate::cql::raw_rows(s, table, "p").await.len()
}

async fn wait_state(daemon: &Daemon, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    daemon.wait_job(id, WAIT, pred).await
}

#[tokio::test]
async fn kill_9_mid_copy_then_restart_resumes_and_the_target_is_identical() {
    let (src, dst) = (session(&src_addr()).await, session(&dst_addr()).await);
    let ks = "it_resume_kill";
    let rows = 20_000;
    rows_table(&src, &dst, ks, rows, 100, 100).await;

    let home = Home::new();
    let sp_dir = home.path().join("savepoints");
    // Throttled so the copy takes ~10 s: long enough to be killed in the middle.
    let yaml = with_savepoints(
        &job(
            ks,
            "t",
            "  preserveTimestamps: true\n",
            "  rowsPerSecond: 2000\n",
            "",
        ),
        &sp_dir,
        "",
    );
    let mut daemon = Daemon::start(&home, "").await;
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap().to_string();
    let mid = wait_state(&daemon, &id, |j| {
        j["progress"]["unitsDone"].as_u64() >= Some(12)
    })
    .await;
    assert_eq!(mid["state"], "RUNNING", "{mid}");
    // Let a scheduled savepoint record the finished units, then die without warning.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    daemon.kill9();
    // Only the daemon's private copy of the job, kept for resumes, holds the credentials.
    use std::os::unix::fs::PermissionsExt;
    let kept = home.state_dir().join("jobs").join(format!("{id}.job.yaml"));
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let written = count(&dst, &format!("{ks}.t")).await;
    assert!(
        written < rows,
        "the target must be incomplete after the kill ({written} rows)"
    );
    assert!(!savepoint_files(&sp_dir).is_empty());

    // The restarted daemon resumes the job by itself, skipping the finished units.
    let daemon = Daemon::start(&home, "").await;
    let done = wait_state(&daemon, &id, |j| {
        j["state"] != "INTERRUPTED" && j["state"] != "RUNNING" && j["state"] != "QUEUED"
    })
    .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    assert_eq!(done["attempts"], 2, "{done}");
    let skipped = done["progress"]["unitsSkipped"].as_u64().unwrap();
    assert!(
        skipped >= 12,
        "finished units are skipped on resume: {done}"
    );
    assert!(
        daemon.logs().contains("resuming from the newest savepoint"),
        "{}",
        daemon.logs()
    );
    let (_, list) = daemon
        .get(&format!("/api/v1/migrations/{id}/savepoints"))
        .await;
    let newest = &list["savepoints"][0];
    assert_eq!(newest["ringFraction"], 1.0, "{list}");
    assert_eq!(newest["tokenRanges"], 1, "merged into one interval: {list}");

    assert!(
        !kept.exists(),
        "the kept job config is deleted once the job succeeded"
    );
    let table = format!("{ks}.t");
    let select = "p, c, v, writetime(v), n, writetime(n)";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        rows
    );
}

#[tokio::test]
async fn sigterm_writes_a_final_savepoint_and_the_next_start_resumes_from_it() {
    let (src, dst) = (session(&src_addr()).await, session(&dst_addr()).await);
    let ks = "it_resume_term";
    let rows = 10_000;
    rows_table(&src, &dst, ks, rows, 100, 100).await;

    let home = Home::new();
    let sp_dir = home.path().join("savepoints");
    // Savepoints on schedule only every hour: the one found must be the final one.
    let yaml = with_savepoints(
        &job(ks, "t", "", "  rowsPerSecond: 1500\n", ""),
        &sp_dir,
        "",
    )
    .replace("intervalSeconds: 1", "intervalSeconds: 3600");
    let config = home.write_config("");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("jobs:\n", "jobs:\n  resume_interrupted: false\n");
    std::fs::write(&config, text).unwrap();
    let mut daemon = Daemon::start_with(&home, &config).await;
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap().to_string();
    wait_state(&daemon, &id, |j| {
        j["progress"]["unitsDone"].as_u64() >= Some(5)
    })
    .await;
    daemon.signal("TERM");
    assert!(
        daemon.wait_exit(Duration::from_secs(20)).success(),
        "{}",
        daemon.logs()
    );
    let files = savepoint_files(&sp_dir);
    assert_eq!(files.len(), 1, "exactly the final savepoint: {files:?}");
    assert!(
        daemon
            .logs()
            .contains("created a savepoint due to the migration being stopped"),
        "{}",
        daemon.logs()
    );

    let daemon = Daemon::start_with(&home, &config).await;
    let (_, old) = daemon.get(&format!("/api/v1/migrations/{id}")).await;
    assert_eq!(
        old["state"], "INTERRUPTED",
        "not resumed when resume_interrupted is off: {old}"
    );
    // The same config submitted again continues from the final savepoint.
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            yaml.replace("  rowsPerSecond: 1500\n", ""),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let again = body["jobId"].as_str().unwrap().to_string();
    let done = wait_state(&daemon, &again, |j| {
        j["state"] == "SUCCEEDED" || j["state"] == "FAILED"
    })
    .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    assert!(
        done["progress"]["unitsSkipped"].as_u64() >= Some(5),
        "{done}"
    );
    assert!(
        done["progress"]["rowsWritten"].as_u64() < Some(rows as u64),
        "finished work is not redone: {done}"
    );
    let table = format!("{ks}.t");
    assert_eq!(
        assert_same(&src, &table, &dst, &table, "p, c, v, n", "p, c, v, n", &[]).await,
        rows
    );
}

async fn cli(yaml: &str) -> (Option<i32>, String) {
    let path = crate::cql::write_job(yaml);
    let out = tokio::process::Command::new(drover_bin())
        .args(["migrate", "--config"])
        .arg(&path)
        .env("RUST_LOG", "drover=info")
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn resume_falls_back_past_corrupt_and_foreign_savepoints_and_auto_resume_can_be_off() {
    let (src, dst) = (session(&src_addr()).await, session(&dst_addr()).await);
    let ks = "it_resume_files";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        &format!(
            "{TABLE}; CREATE TABLE $ks.other (p int, c int, v text, n bigint, PRIMARY KEY (p, c))"
        ),
    )
    .await;
    fill_many(&src, &format!("{ks}.t"), 3000, 100, 100).await;
    let home = Home::new();
    let sp_dir = home.path().join("savepoints");
    let yaml = with_savepoints(&job(ks, "t", "", "", ""), &sp_dir, "");

    let (code, stderr) = cli(&yaml).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("(0 skipped)"), "{stderr}");
    let complete = savepoint_files(&sp_dir).pop().unwrap();

    // Newer than the complete savepoint: a savepoint of another migration with nothing done,
    // and a corrupt file. Both are passed over, with a warning each.
    let foreign = with_savepoints(&job(ks, "other", "", "", ""), &sp_dir, "");
    let (code, stderr) = cli(&foreign).await;
    assert_eq!(code, Some(0), "{stderr}");
    let corrupt = "savepoint_9999999999998_0000009999.yaml";
    std::fs::write(sp_dir.join(corrupt), "source: [not closed").unwrap();

    let (code, stderr) = cli(&yaml).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("resuming from savepoint {complete}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(corrupt) && stderr.contains("trying an older savepoint"),
        "{stderr}"
    );
    assert!(stderr.contains("belongs to another migration"), "{stderr}");
    assert!(stderr.contains("34 units (34 skipped)"), "{stderr}");
    assert!(stderr.contains("complete: 0 rows"), "{stderr}");

    // autoResume: false copies everything again, and still writes savepoints.
    let before = savepoint_files(&sp_dir).len();
    let (code, stderr) = cli(&format!("{yaml}  autoResume: false\n")).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("complete: 3000 rows") && stderr.contains("(0 skipped)"),
        "{stderr}"
    );
    assert!(
        savepoint_files(&sp_dir).len() > before.min(9),
        "savepoints are still written"
    );
    // Retention: never more than `keep` files of the current format.
    let (code, stderr) = cli(&format!("{yaml}  keep: 2\n")).await;
    assert_eq!(code, Some(0), "{stderr}");
    let current: Vec<_> = savepoint_files(&sp_dir)
        .into_iter()
        .filter(|n| n.len() == "savepoint_0000000000000_0000000000.yaml".len())
        .collect();
    assert_eq!(current.len(), 2, "{current:?}");
}

#[tokio::test]
async fn no_secret_reaches_savepoints_logs_or_the_api() {
    let (src, dst) = (session(&src_addr()).await, session(&dst_addr()).await);
    let ks = "it_resume_secrets";
    rows_table(&src, &dst, ks, 500, 100, 100).await;
    let home = Home::new();
    let sp_dir = home.path().join("savepoints");
    let secret = "sup3r-s3cret-pw";
    // The test clusters accept any client; the credentials are still carried everywhere.
    let creds = format!("  credentials:\n    username: migrator\n    password: {secret}\n");
    let yaml = with_savepoints(&job(ks, "t", &creds, &creds, ""), &sp_dir, "");
    let daemon = Daemon::start(&home, "").await;
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml)
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap().to_string();
    wait_state(&daemon, &id, |j| j["state"] == "SUCCEEDED").await;

    let mut seen = String::new();
    for path in [
        "/api/v1/migrations",
        &format!("/api/v1/migrations/{id}"),
        &format!("/api/v1/migrations/{id}/savepoints"),
        "/api/v1/jobs",
        "/metrics",
    ] {
        let res = daemon.client().get(daemon.url(path)).send().await.unwrap();
        seen.push_str(&res.text().await.unwrap());
    }
    assert!(
        seen.contains("<redacted>"),
        "the redacted form is shown: {seen}"
    );
    for name in savepoint_files(&sp_dir) {
        let text = std::fs::read_to_string(sp_dir.join(&name)).unwrap();
        assert!(text.contains("password: <redacted>"), "{text}");
        seen.push_str(&text);
    }
    seen.push_str(&daemon.logs());
    for entry in std::fs::read_dir(home.state_dir().join("jobs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            seen.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    assert!(!seen.contains(secret), "a secret leaked");
    // The daemon's private copy of the job (kept for resumes) is gone once the job succeeded.
    let kept = home.state_dir().join("jobs").join(format!("{id}.job.yaml"));
    assert!(!kept.exists(), "the kept job config outlives its job");
}
