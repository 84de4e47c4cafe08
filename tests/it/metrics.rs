//! `/metrics` as Prometheus and its tools read it: `promtool check metrics` finds nothing to
//! say about an idle daemon nor one with jobs of several kinds and states; ended jobs stay
//! visible (`drover_job_info`) as long as their record; work is counted in per-kind `_total`
//! counters that survive the job; `process_*` and `drover_build_info` are there.

use std::time::Duration;

use serde_json::json;
use test_support::Daemon;
use test_support::cql::{Fixture, job};

const WAIT: Duration = Duration::from_secs(120);

/// Every kind of job the daemon runs, as `drover_jobs` names them.
const KINDS: [&str; 5] = [
    "migration",
    "validation",
    "data-copy-task",
    "files-verification-task",
    "diagnostic",
];

/// `promtool check metrics` on `text`: whether it passed, and what it printed.
fn promtool_check(text: &str) -> (bool, String) {
    use std::io::Write;
    let promtool = std::env::var("DROVER_TEST_PROMTOOL").expect(
        "DROVER_TEST_PROMTOOL is not set: source target/testenv/env (scripts/testenv up installs promtool)",
    );
    let mut child = std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run promtool at {promtool}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Scrapes `/metrics` as `curl` does (no Accept header) and checks it with promtool: exit 0
/// and not a word.
async fn scrape_and_check(daemon: &Daemon) -> String {
    let res = daemon
        .client()
        .get(daemon.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = res.text().await.unwrap();
    let (ok, report) = promtool_check(&text);
    assert!(
        ok && report.is_empty(),
        "promtool check metrics: {report}\n{text}"
    );
    text
}

/// The value of the sample written exactly `series` (name and labels), if there is one.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

fn value(metrics: &str, series: &str) -> f64 {
    sample(metrics, series).unwrap_or_else(|| panic!("no {series} on /metrics:\n{metrics}"))
}

#[tokio::test]
async fn promtool_passes_an_idle_daemon_and_one_with_jobs_and_ended_jobs_stay() {
    let daemon = Daemon::fresh("").await;

    // No job yet: every kind is there in every state, at 0, so a dashboard finds the daemon.
    let idle = scrape_and_check(&daemon).await;
    let states: Vec<&str> = idle
        .lines()
        .filter_map(|l| l.strip_prefix("drover_jobs{kind=\"diagnostic\",state=\""))
        .map(|l| l.split('"').next().unwrap())
        .collect();
    assert!(states.len() >= 6, "{states:?}\n{idle}");
    for kind in KINDS {
        for state in &states {
            assert_eq!(
                value(
                    &idle,
                    &format!("drover_jobs{{kind=\"{kind}\",state=\"{state}\"}}")
                ),
                0.0
            );
        }
        for family in [
            "drover_job_rows_read_total",
            "drover_job_rows_written_total",
            "drover_job_bytes_read_total",
            "drover_job_bytes_written_total",
            "drover_job_retries_total",
            "drover_job_errors_total",
        ] {
            assert_eq!(value(&idle, &format!("{family}{{kind=\"{kind}\"}}")), 0.0);
        }
    }
    assert_eq!(
        value(
            &idle,
            &format!(
                "drover_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    assert!(
        value(&idle, "process_resident_memory_bytes") > 1e6,
        "{idle}"
    );
    assert!(value(&idle, "process_open_fds") >= 3.0, "{idle}");
    assert!(value(&idle, "process_max_fds") >= value(&idle, "process_open_fds"));
    assert!(value(&idle, "process_cpu_seconds_total") > 0.0, "{idle}");
    assert!(value(&idle, "process_threads") >= 1.0, "{idle}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value(&idle, "process_start_time_seconds");
    assert!(now - started > 0.0 && now - started < 120.0, "{started}");
    assert!(!idle.contains("drover_job_info{"), "{idle}");

    // Diagnostic jobs that end SUCCEEDED, FAILED and CANCELLED, and one still running.
    let submit = async |body: serde_json::Value| {
        let (status, accepted) = daemon.post_json("/api/v1/diagnostics/jobs", &body).await;
        assert_eq!(status, 202, "{accepted}");
        accepted["jobId"].as_str().unwrap().to_string()
    };
    let succeeded = submit(json!({"durationSeconds": 1})).await;
    let failed = submit(json!({"durationSeconds": 1, "failWith": "disk on fire"})).await;
    let cancelled = submit(json!({"durationSeconds": 600})).await;
    let running = submit(json!({"durationSeconds": 600})).await;
    daemon
        .wait_job(&cancelled, WAIT, |j| j["state"] == "RUNNING")
        .await;
    daemon
        .post_json(&format!("/api/v1/jobs/{cancelled}/cancel"), &json!({}))
        .await;
    for (id, state) in [
        (&succeeded, "SUCCEEDED"),
        (&failed, "FAILED"),
        (&cancelled, "CANCELLED"),
        (&running, "RUNNING"),
    ] {
        daemon.wait_job(id, WAIT, |j| j["state"] == state).await;
    }
    let busy = scrape_and_check(&daemon).await;
    for (id, state) in [
        (&succeeded, "SUCCEEDED"),
        (&failed, "FAILED"),
        (&cancelled, "CANCELLED"),
        (&running, "RUNNING"),
    ] {
        assert_eq!(
            value(
                &busy,
                &format!(
                    "drover_job_info{{job_id=\"{id}\",kind=\"diagnostic\",state=\"{state}\"}}"
                )
            ),
            1.0
        );
    }
    for (state, n) in [("SUCCEEDED", 1.0), ("FAILED", 1.0), ("CANCELLED", 1.0)] {
        let series = format!("drover_jobs_ended_total{{kind=\"diagnostic\",state=\"{state}\"}}");
        assert_eq!(value(&busy, &series), n, "{series}");
    }
    assert_eq!(
        value(&busy, "drover_job_errors_total{kind=\"diagnostic\"}"),
        1.0
    );
    // Only the running job has live progress series; rates are not among them.
    assert!(busy.contains(&format!("drover_job_progress{{job_id=\"{running}\"")));
    assert!(!busy.contains(&format!("drover_job_progress{{job_id=\"{succeeded}\"")));
    assert!(!busy.contains("counter=\"rowsPerSecond\""), "{busy}");

    // Deleting the failed job's record takes its info series away; the count of failures
    // stays (a counter never goes down).
    let res = daemon
        .client()
        .delete(daemon.url(&format!("/api/v1/jobs/{failed}")))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let after = scrape_and_check(&daemon).await;
    assert!(!after.contains(&format!("job_id=\"{failed}\"")), "{after}");
    assert_eq!(
        value(
            &after,
            "drover_jobs_ended_total{kind=\"diagnostic\",state=\"FAILED\"}"
        ),
        1.0
    );

    // Prometheus asks for OpenMetrics and gets it.
    let res = daemon
        .client()
        .get(daemon.url("/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let om = res.text().await.unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# TYPE drover_job info\n"), "{om}");
    assert!(om.contains("# TYPE drover_http_requests counter\n"), "{om}");
    daemon
        .post_json(&format!("/api/v1/jobs/{running}/cancel"), &json!({}))
        .await;
}

/// Only `jobs.keep_finished` bounds the job series: with a count of 2, three ended jobs
/// leave two `drover_job_info` series.
#[tokio::test]
async fn job_info_series_are_bounded_by_keep_finished() {
    let home = test_support::Home::new();
    let config = home.write_config_edited(
        "",
        &[("jobs:\n", "jobs:\n  keep_finished:\n    count: 2\n")],
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, accepted) = daemon
            .post_json("/api/v1/diagnostics/jobs", &json!({"durationSeconds": 1}))
            .await;
        assert_eq!(status, 202, "{accepted}");
        let id = accepted["jobId"].as_str().unwrap().to_string();
        daemon
            .wait_job(&id, WAIT, |j| j["state"] == "SUCCEEDED")
            .await;
        ids.push(id);
    }
    // The third job's record is pruned just after it shows SUCCEEDED: wait for the answer,
    // then hold the count there.
    let deadline = std::time::Instant::now() + WAIT;
    let text = loop {
        let text = scrape_and_check(&daemon).await;
        let info = text
            .lines()
            .filter(|l| l.starts_with("drover_job_info{"))
            .count();
        assert!(info <= 3, "{text}");
        if info == 2 || std::time::Instant::now() > deadline {
            assert_eq!(info, 2, "{text}");
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!text.contains(&format!("job_id=\"{}\"", ids[0])), "{text}");
    assert_eq!(
        value(
            &text,
            "drover_jobs_ended_total{kind=\"diagnostic\",state=\"SUCCEEDED\"}"
        ),
        3.0
    );
}

/// A migration's rows and bytes reach the per-kind counters, equal to its own counters, and
/// stay there after it ended, when its live progress series are gone.
#[tokio::test]
async fn a_migration_counts_its_rows_and_bytes_into_the_kind_totals() {
    let Fixture { ks, daemon, .. } = Fixture::rows("it_metrics_totals", 5000, 1000, 1000).await;
    let done = daemon
        .run_job("/api/v1/migrations", &job(ks, "t", "", "", ""), WAIT)
        .await;
    let id = done["id"].as_str().unwrap();
    assert_eq!(done["progress"]["rowsWritten"], 5000, "{done}");
    let text = scrape_and_check(&daemon).await;
    for (family, counter) in [
        ("drover_job_rows_read_total", "rowsRead"),
        ("drover_job_rows_written_total", "rowsWritten"),
        ("drover_job_bytes_read_total", "bytesRead"),
        ("drover_job_bytes_written_total", "bytesWritten"),
    ] {
        let expected = done["progress"][counter].as_u64().unwrap() as f64;
        assert!(expected > 0.0, "{counter}: {done}");
        assert_eq!(
            value(&text, &format!("{family}{{kind=\"migration\"}}")),
            expected,
            "{family}"
        );
    }
    assert_eq!(
        value(
            &text,
            &format!("drover_job_info{{job_id=\"{id}\",kind=\"migration\",state=\"SUCCEEDED\"}}")
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            "drover_jobs_ended_total{kind=\"migration\",state=\"SUCCEEDED\"}"
        ),
        1.0
    );
    assert!(!text.contains("drover_job_progress{"), "{text}");
}
