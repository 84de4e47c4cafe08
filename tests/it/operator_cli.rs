//! What an operator meets first with the CLI and the console (issue 43): output piped into a
//! reader that stops early, the shortened ids the console shows, a finished job submitted
//! again, a cancelled job resumed, and the daemon's bare address.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use test_support::cql::{Fixture, exec, job};
use test_support::{Daemon, drover_bin, ended};

const WAIT: Duration = Duration::from_secs(120);

async fn diagnostic(daemon: &Daemon, seconds: u64) -> String {
    let (status, accepted) = daemon
        .post_json(
            "/api/v1/diagnostics/jobs",
            &json!({"durationSeconds": seconds}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    accepted["jobId"].as_str().unwrap().to_string()
}

/// `drover ARGS` against `daemon`: exit code, stdout, stderr.
async fn drover(daemon: &Daemon, args: &[&str]) -> (Option<i32>, String, String) {
    daemon.cli(args).await
}

/// Runs `drover ARGS` with its stdout a pipe whose reading end is closed at once (as
/// `| true` does, or `| head` once it has its lines): exit code and stderr.
fn into_closed_pipe(server: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(drover_bin())
        .args(args)
        .env("DROVER_SERVER", server)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `drover jobs -o yaml | true`, `drover job ID | head`, ... exited 101 with "failed printing
/// to stdout: Broken pipe" (10 runs of 10). Now every printing command ends as a Unix tool
/// does: 141 (128 + SIGPIPE) or 0 when it had written everything already, with no panic.
#[tokio::test]
async fn a_closed_pipe_ends_every_printing_command_quietly() {
    let daemon = Daemon::fresh("").await;
    // Enough jobs that `jobs -o yaml` is several times a pipe's 64 KiB buffer.
    let mut ids = Vec::new();
    for _ in 0..600 {
        ids.push(diagnostic(&daemon, 1).await);
    }
    let (code, listing, stderr) = drover(&daemon, &["jobs", "-o", "yaml"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        listing.len() > 3 * 65536,
        "{} bytes: not enough to fill the pipe",
        listing.len()
    );
    let server = daemon.url("");
    let id = ids[0].as_str();
    let commands: [&[&str]; 10] = [
        &["jobs", "-o", "yaml"],
        &["jobs", "-o", "json"],
        &["jobs"],
        &["jobs", "-o", "wide"],
        &["job", id],
        &["job", id, "-o", "yaml"],
        &["validations", "list"],
        &["openapi"],
        &["completions", "bash"],
        &["man"],
    ];
    for args in commands {
        for _ in 0..5 {
            let (code, stderr) = into_closed_pipe(&server, args);
            assert!(
                code == Some(141) || code == Some(0),
                "drover {args:?} into a closed pipe exited {code:?}: {stderr}"
            );
            assert!(
                !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
                "drover {args:?}: {stderr}"
            );
        }
    }
    // The large listings cannot have finished before the pipe closed.
    let (code, _) = into_closed_pipe(&server, &["jobs", "-o", "yaml"]);
    assert_eq!(code, Some(141));
}

/// The console shows ids shortened to 13 characters; the CLI answered 404 to them. Any
/// prefix of exactly one id now names the job in the API, the CLI and the console's URL; a
/// prefix of several is refused naming (at most 10 of) them; an unknown one is a 404.
#[tokio::test]
async fn a_unique_id_prefix_names_a_job_in_the_cli_the_api_and_the_console() {
    let daemon = Daemon::fresh("").await;
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(diagnostic(&daemon, 300).await);
    }
    let id = ids[5].clone();
    // The shortest prefix of `id` that starts no other id, and at least the console's 13.
    let unique = (13..id.len())
        .map(|n| &id[..n])
        .find(|p| ids.iter().filter(|i| i.starts_with(p)).count() == 1)
        .unwrap()
        .to_string();

    let (code, out, err) = drover(&daemon, &["job", &unique, "-o", "json"]).await;
    assert_eq!(code, Some(0), "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["id"], id.as_str());
    let (status, body) = daemon.get(&format!("/api/v1/migrations/{unique}")).await;
    assert_eq!(status, 404, "a diagnostic is not a migration: {body}");
    let (status, body) = daemon.get(&format!("/api/v1/jobs/{unique}")).await;
    assert_eq!((status, body["id"].as_str()), (200, Some(id.as_str())));

    // Every id starts with the same time-based digits: "0" starts all 12.
    let (status, body) = daemon.get("/api/v1/jobs/0").await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("job id prefix \"0\" is ambiguous: it starts 12 job ids"),
        "{message}"
    );
    let named = ids.iter().filter(|i| message.contains(i.as_str())).count();
    assert_eq!(named, 10, "at most 10 ids are named: {message}");
    assert!(message.ends_with(", …); give more of the id"), "{message}");
    let (code, _, err) = drover(&daemon, &["cancel", "0"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("ambiguous") && err.contains(&ids[0]), "{err}");
    let (status, body) = daemon.get("/api/v1/jobs/ffff").await;
    assert_eq!(status, 404, "{body}");
    // Under one kind's resource, an unknown id is "no <kind>", what was asked for (it was
    // "no job"), in the API and in the CLI's one line, exit 2.
    let (code, out, err) = drover(&daemon, &["validations", "report", "ffff"]).await;
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("404 Not Found: no validation with id \"ffff\""),
        "{err}"
    );
    let (code, _, err) = drover(&daemon, &["validations", "report", &unique]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("no validation with id \"{id}\"")),
        "a diagnostic is not a validation: {err}"
    );
    for (path, noun) in [
        ("/api/v1/migrations/ffff", "migration"),
        ("/api/v1/migrations/ffff/savepoints", "migration"),
        ("/api/v1/validations/ffff", "validation"),
        ("/api/v1/validations/ffff/report", "validation"),
    ] {
        let (status, body) = daemon.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(
            body["message"],
            format!("no {noun} with id \"ffff\""),
            "{path}"
        );
    }

    // cancel, follow, resume-refusal and delete by the prefix.
    let (code, out, err) = drover(&daemon, &["cancel", &unique]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("cancel requested"), "{out}");
    let cancelled = daemon
        .wait_job(&id, WAIT, |j| j["state"] == "CANCELLED")
        .await;
    assert_eq!(cancelled["state"], "CANCELLED");
    let (code, _, err) = drover(&daemon, &["job", &unique, "--follow"]).await;
    assert_eq!(code, Some(3), "a cancelled job followed by prefix: {err}");
    let (code, _, err) = drover(&daemon, &["delete", &unique]).await;
    assert_eq!(code, Some(0), "{err}");
    let (status, _) = daemon.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(status, 404);

    // The console's URL: a prefix redirects to the job's own page.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let other = &ids[7];
    let response = browser
        .get(daemon.url(&format!("/ui/jobs/{}?page=1", &other[..13])))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(
        response.headers()["location"],
        format!("/ui/jobs/{other}?page=1").as_str()
    );
    let response = browser.get(daemon.url("/ui/jobs/0")).send().await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("ambiguous"));

    // The bare address is the console's front door, not a JSON 404.
    let response = browser.get(daemon.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/ui/jobs");
    for id in &ids {
        daemon
            .post_json(&format!("/api/v1/jobs/{id}/cancel"), &Value::Null)
            .await;
    }
}

async fn count(fixture: &Fixture) -> i64 {
    let (n,): (i64,) = fixture
        .dst
        .query_unpaged(format!("SELECT count(*) FROM {}.t", fixture.ks), ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    n
}

/// A cancelled migration was a dead end (`resume` → 409 "needs INTERRUPTED", the console
/// offering only Delete); a finished one submitted again copied nothing and succeeded, so a
/// truncated target stayed empty under a green result. Now: `drover resume` of the cancelled
/// job (by its prefix) continues it from its savepoint to every row; the same file submitted
/// again is refused with 409 naming the savepoint and `autoResume: false`; with that key, the
/// truncated target gets every row again.
#[tokio::test]
async fn a_cancelled_migration_resumes_and_a_finished_one_is_not_silently_rerun() {
    const ROWS: i64 = 3000;
    let fixture = Fixture::rows("it_opcli_rerun", ROWS as usize, 100, 100).await;
    let daemon = &fixture.daemon;
    let sp = tempfile::tempdir().unwrap();
    let savepoints = format!(
        "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        sp.path().display()
    );
    let yaml = job(fixture.ks, "t", "", "  rowsPerSecond: 600\n", &savepoints);
    let file = test_support::cql::write_job(&yaml);
    let file = file.to_str().unwrap();

    let (code, out, err) = drover(daemon, &["submit", file]).await;
    assert_eq!(code, Some(0), "{err}");
    let id = out.trim().to_string();
    let some = daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["rowsWritten"].as_u64() >= Some(600)
                && j["progress"]["unitsDone"].as_u64() >= Some(2)
        })
        .await;
    assert_eq!(some["state"], "RUNNING", "{some}");
    let (code, _, err) = drover(daemon, &["cancel", &id[..13]]).await;
    assert_eq!(code, Some(0), "{err}");
    let cancelled = daemon.wait_job(&id, WAIT, ended).await;
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");
    let written = cancelled["progress"]["rowsWritten"].as_u64().unwrap();
    assert!((600..ROWS as u64).contains(&written), "{cancelled}");

    // The console offers Resume for it.
    let page = daemon.get_text(&format!("/ui/jobs/{id}")).await;
    assert!(page.contains("Resume job"), "{page}");

    let (code, out, err) = drover(daemon, &["resume", &id[..13]]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("job {} resumed", &id[..13])), "{out}");
    let resumed = daemon.wait_job(&id, WAIT, ended).await;
    assert_eq!(
        resumed["state"],
        "SUCCEEDED",
        "{resumed}\n{}",
        daemon.logs()
    );
    assert_eq!(resumed["attempts"], 2, "{resumed}");
    assert!(
        resumed["progress"]["unitsSkipped"].as_u64() >= Some(2),
        "the resume skipped what the cancelled run had done: {resumed}"
    );
    assert_eq!(count(&fixture).await, ROWS);

    // Submitted again: refused, with the savepoint and the way to start over.
    exec(&fixture.dst, &format!("TRUNCATE {}.t", fixture.ks)).await;
    let (code, _, err) = drover(daemon, &["submit", file]).await;
    assert_eq!(code, Some(2), "{err}");
    let newest = crate::resume::savepoint_files(sp.path()).pop().unwrap();
    assert!(
        err.contains("409")
            && err.contains(&format!("savepoint {newest}"))
            && err.contains("records every unit of this migration as done")
            && err.contains("savepoints.autoResume: false"),
        "{err}"
    );
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(status, 409, "{body}");
    // The foreground command refuses it the same way (it warned and copied nothing, exit 0):
    // the daemon's message, exit 2 of the one table.
    let (code, _, err) = drover(daemon, &["migrate", "--config", file]).await;
    assert_eq!(code, Some(2), "{err}");
    let message = test_support::error_message(409, &body);
    let message = message.strip_prefix("job config: ").unwrap_or(&message);
    assert!(
        err.contains(&format!("drover: {file}: {message}")),
        "the daemon's message, {message:?}: {err}"
    );
    assert!(!err.contains("migration complete"), "{err}");
    assert_eq!(count(&fixture).await, 0, "nothing was copied");

    // Starting over, as the refusal says.
    let fresh = format!("{yaml}  autoResume: false\n").replace("  rowsPerSecond: 600\n", "");
    let again = daemon.run_job("/api/v1/migrations", &fresh, WAIT).await;
    assert_eq!(again["progress"]["rowsWritten"], ROWS, "{again}");
    assert_eq!(count(&fixture).await, ROWS);
}

/// Error messages showed URLs as the wire carries them (`%2F`, `%3A`, `%2D` for the dashes
/// of an id the CLI had escaped): now as a human reads them, still without credentials or
/// query, and bounded.
#[tokio::test]
async fn error_messages_show_urls_as_a_human_reads_them() {
    let daemon = Daemon::fresh("").await;
    let (code, _, stderr) = drover(&daemon, &["job", "no/such:job-1"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("drover: GET /api/v1/jobs/no/such:job-1: 404 Not Found: "),
        "{stderr}"
    );
    assert!(!stderr.contains('%'), "{stderr}");
    let (code, _, stderr) = drover(&daemon, &["job", "019ae1c4-77b2", "--follow"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("GET /api/v1/jobs/019ae1c4-77b2/events?…: 404"),
        "{stderr}"
    );
    // The API's own messages name the path asked, decoded.
    let (status, body) = daemon.get("/api/v1/no%3Asuch%2Froute?token=s3cret").await;
    assert_eq!(
        test_support::error_message(status, &body),
        "no route for /api/v1/no:such/route"
    );
    // A daemon that cannot be reached: its address without the credentials given in it.
    let out = tokio::process::Command::new(drover_bin())
        .args(["jobs", "--server", "http://operator:s3cret@127.0.0.1:1"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("drover: http://127.0.0.1:1: "),
        "{stderr}"
    );
    assert!(
        stderr.contains("http://127.0.0.1:1/api/v1/jobs"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}
