//! `drover jobs`, `drover job --follow`, `drover submit`, ...: the CLI as a client of a real
//! running daemon, through the real binary.

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use test_support::cql::{Fixture, job};
use test_support::{Daemon, drover_bin};

/// Runs `drover ARGS` against `daemon` (through DROVER_SERVER, as an operator would set it).
async fn drover(daemon: &Daemon, args: &[&str]) -> Output {
    tokio::process::Command::new(drover_bin())
        .args(args)
        .env("DROVER_SERVER", daemon.url(""))
        .env_remove("DROVER_TOKEN")
        .env_remove("DROVER_TOKEN_FILE")
        .output()
        .await
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn diagnostic(daemon: &Daemon, body: Value) -> String {
    let (status, accepted) = daemon.post_json("/api/v1/diagnostics/jobs", &body).await;
    assert_eq!(status, 202, "{accepted}");
    accepted["jobId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn follow_exits_with_the_outcome_of_the_job() {
    let daemon = Daemon::fresh("").await;

    let ok = diagnostic(&daemon, json!({"durationSeconds": 2})).await;
    let out = drover(&daemon, &["job", &ok, "--follow"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("succeeded"), "{}", stderr(&out));

    let failing = diagnostic(
        &daemon,
        json!({"durationSeconds": 1, "failWith": "disk on fire"}),
    )
    .await;
    let out = drover(&daemon, &["job", &failing, "--follow", "-o", "json"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("disk on fire"), "{}", stderr(&out));
    let printed: Value = serde_json::from_str(&stdout(&out)).expect("-o json prints JSON");
    assert_eq!(printed["state"], "FAILED");

    // Cancelled while followed: the follower sees the cancel, from another client.
    let long = diagnostic(&daemon, json!({"durationSeconds": 300})).await;
    let follower = {
        let url = daemon.url("");
        let id = long.clone();
        tokio::spawn(async move {
            tokio::process::Command::new(drover_bin())
                .args(["job", &id, "--follow"])
                .env("DROVER_SERVER", url)
                .output()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let out = drover(&daemon, &["cancel", &long]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let followed = tokio::time::timeout(Duration::from_secs(30), follower)
        .await
        .expect("the follower ends with the job")
        .unwrap();
    assert_eq!(followed.status.code(), Some(3), "{}", stderr(&followed));
    assert!(
        stderr(&followed).contains("cancelled"),
        "{}",
        stderr(&followed)
    );

    // An ended job followed returns at once with its outcome.
    let out = drover(&daemon, &["job", &failing, "--follow"]).await;
    assert_eq!(out.status.code(), Some(1));

    // delete, then the job is gone: one clear line with the API's message, exit 2.
    let out = drover(&daemon, &["delete", &failing]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = drover(&daemon, &["job", &failing]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("404 Not Found") && err.contains(&format!("no job with id \"{failing}\"")),
        "{err}"
    );
    // Deleting a running job is refused with the API's reason.
    let running = diagnostic(&daemon, json!({"durationSeconds": 300})).await;
    let out = drover(&daemon, &["delete", &running]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("409"), "{}", stderr(&out));
    drover(&daemon, &["cancel", &running]).await;
}

#[tokio::test]
async fn listings_parse_in_every_format() {
    let daemon = Daemon::fresh("").await;
    let a = diagnostic(&daemon, json!({"durationSeconds": 1})).await;
    let b = diagnostic(&daemon, json!({"durationSeconds": 1, "failWith": "x"})).await;
    daemon
        .wait_job(&a, Duration::from_secs(30), |j| {
            j["state"] != "RUNNING" && j["state"] != "QUEUED"
        })
        .await;
    daemon
        .wait_job(&b, Duration::from_secs(30), |j| {
            j["state"] != "RUNNING" && j["state"] != "QUEUED"
        })
        .await;

    let out = drover(&daemon, &["jobs", "-o", "json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str()]);

    let out = drover(&daemon, &["jobs", "--state", "FAILED", "-o", "yaml"]).await;
    let list: Value = yaml_serde::from_str(&stdout(&out)).unwrap();
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(list["jobs"][0]["id"], b.as_str());

    let out = drover(&daemon, &["jobs", "-o", "wide"]).await;
    let text = stdout(&out);
    let header = text.lines().next().unwrap();
    for column in ["ID", "KIND", "STATE", "PROGRESS", "PHASE", "ERROR"] {
        assert!(header.contains(column), "{text}");
    }
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.contains(&a) && text.contains("SUCCEEDED") && text.contains("FAILED"),
        "{text}"
    );

    let out = drover(&daemon, &["job", &a, "-o", "yaml"]).await;
    let job: Value = yaml_serde::from_str(&stdout(&out)).unwrap();
    assert_eq!(job["state"], "SUCCEEDED");

    // A bad state is the API's 400, on one line.
    let out = drover(&daemon, &["jobs", "--state", "SLEEPING"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("400 Bad Request"), "{}", stderr(&out));
}

#[tokio::test]
async fn credentials_come_from_the_environment_or_a_file() {
    let daemon = Daemon::fresh(
        "auth:\n  tokens:\n    - {id: r, sha256: ba5005a40cf5212e4ac0190104cc127edab013294bb71279a975b27a80982d45, roles: [reader]}\n",
    )
    .await;
    let out = drover(&daemon, &["jobs"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("401 Unauthorized"),
        "{}",
        stderr(&out)
    );

    let file = daemon.home().path().join("token");
    std::fs::write(&file, "reader-token\n").unwrap();
    let out = drover(&daemon, &["jobs", "--token-file", file.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = tokio::process::Command::new(drover_bin())
        .args(["jobs", "-o", "json"])
        .env("DROVER_SERVER", daemon.url(""))
        .env("DROVER_TOKEN", "reader-token")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A reader may look, not act.
    let out = tokio::process::Command::new(drover_bin())
        .args(["cancel", "some-id"])
        .env("DROVER_SERVER", daemon.url(""))
        .env("DROVER_TOKEN", "reader-token")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("403 Forbidden") && stderr(&out).contains("operator"),
        "{}",
        stderr(&out)
    );
    // The daemon not there: one line that names it.
    let out = tokio::process::Command::new(drover_bin())
        .args(["jobs", "--server", "http://127.0.0.1:1"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("http://127.0.0.1:1"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn submit_follows_a_real_migration_to_its_end() {
    let Fixture { ks, daemon, .. } = Fixture::rows("it_cli_submit", 2000, 200, 100).await;
    let file = daemon.home().path().join("job.yaml");
    std::fs::write(&file, job(ks, "t", "", "", "")).unwrap();
    let out = drover(
        &daemon,
        &["submit", file.to_str().unwrap(), "--follow", "-o", "json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let done: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(done["state"], "SUCCEEDED");
    assert_eq!(done["progress"]["rowsWritten"], 2000, "{done}");

    // A job file the daemon refuses: its message, the file named, exit 2.
    std::fs::write(&file, "source:\n  type: nonsense\n").unwrap();
    let out = drover(&daemon, &["submit", file.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("job.yaml") && err.contains("400"), "{err}");
}

#[tokio::test]
async fn completions_and_the_manual_page_generate() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(drover_bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in ["submit", "live-migration", "--follow"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bash = std::process::Command::new(drover_bin())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    // bash itself reads it.
    let check = std::process::Command::new("bash")
        .args(["-n", "-c", &String::from_utf8(bash.stdout).unwrap()])
        .status()
        .unwrap();
    assert!(check.success());
    let man = std::process::Command::new(drover_bin())
        .arg("man")
        .output()
        .unwrap();
    let text = String::from_utf8(man.stdout).unwrap();
    assert!(text.contains(".TH drover 1"), "{text}");
    assert!(
        text.contains("submit") && text.contains("completions"),
        "{text}"
    );
}
