//! `drover jobs`, `drover job --follow`, `drover submit`, ...: the CLI as a client of a real
//! running daemon, through the real binary.

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use test_support::cql::{Fixture, dst_addr, exec, job, write_job};
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
    // drover(1) refers to drover-<command>(1) pages: each one it names can be printed, down
    // to the commands of commands, under the name it is referred to by.
    let mut pages = vec![(text, Vec::<String>::new())];
    let mut printed = 0;
    while let Some((text, words)) = pages.pop() {
        let roff = |words: &[String]| {
            std::iter::once("drover".to_string())
                .chain(words.iter().cloned())
                .collect::<Vec<_>>()
                .join("-")
                .replace('-', "\\-")
        };
        let prefix = format!("{}\\-", roff(&words));
        // The SUBCOMMANDS section: one reference per line.
        let referred: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix)?.strip_suffix("(1)"))
            .map(|w| w.replace("\\-", "-"))
            .collect();
        for sub in referred {
            let mut args = words.clone();
            args.push(sub);
            let out = std::process::Command::new(drover_bin())
                .arg("man")
                .args(&args)
                .output()
                .unwrap();
            assert!(out.status.success(), "drover man {args:?}");
            let page = String::from_utf8(out.stdout).unwrap();
            let title = format!(".TH drover-{} 1", args.join("-"));
            assert!(
                page.contains(&title),
                "drover man {args:?}: no {title}\n{page}"
            );
            assert!(
                page.contains(&format!("{} \\-", roff(&args))),
                "drover man {args:?}: {page}"
            );
            printed += 1;
            pages.push((page, args));
        }
    }
    // 17 commands, 2 of validations, 3 of live-migration, 1 of auth.
    assert!(printed >= 20, "only {printed} pages referred to");
    let out = std::process::Command::new(drover_bin())
        .args(["man", "no-such-command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no manual page drover-no-such-command"),
        "{out:?}"
    );
}

/// The ids and states of a `-o json` listing.
fn listed(out: &Output) -> Vec<(String, String)> {
    let list: Value = serde_json::from_str(&stdout(out)).expect("-o json prints JSON");
    list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap().to_string(),
                j["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A validation that finds differences ends DIFFERENCES_FOUND (not a green SUCCEEDED): listed
/// by that state, counted by `drover_jobs`, and every command that reports the finding exits
/// with the same code, 5 (it was 1 for `validate`, 5 for `--follow` and `validations report`);
/// a clean one is SUCCEEDED and exits 0 everywhere.
#[tokio::test]
async fn differences_have_their_own_state_and_one_exit_code_in_every_command() {
    let Fixture {
        ks, dst, daemon, ..
    } = Fixture::rows("it_cli_outcomes", 2000, 200, 100).await;
    let yaml = job(ks, "t", "", "", "");
    daemon
        .run_job("/api/v1/migrations", &yaml, Duration::from_secs(180))
        .await;
    let file = write_job(&yaml);
    let file = file.to_str().unwrap();

    let help = drover(&daemon, &["--help"]).await;
    assert_eq!(help.status.code(), Some(0));
    for line in [
        "Exit codes (the same for every command):",
        "  1    the job FAILED",
        "  5    a validation found rows that differ (DIFFERENCES_FOUND)",
        "  130  stopped by Ctrl-C or SIGTERM",
    ] {
        assert!(
            stdout(&help).contains(line),
            "{line:?} not in\n{}",
            stdout(&help)
        );
    }

    // Clean: 0 from every command, SUCCEEDED.
    let out = drover(&daemon, &["validate", "--config", file]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = drover(
        &daemon,
        &[
            "submit",
            file,
            "--kind",
            "validation",
            "--follow",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let clean: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(clean["state"], "SUCCEEDED", "{clean}");
    assert_eq!(clean["result"]["rowsCompared"], 2000, "{clean}");
    let clean = clean["id"].as_str().unwrap().to_string();
    let out = drover(&daemon, &["job", &clean, "--follow"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = drover(&daemon, &["validations", "report", &clean]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Two rows deleted from the target and one changed: 3 of 2,000 rows differ.
    for cql in [
        format!("DELETE FROM {ks}.t WHERE p = 0 AND c = 7"),
        format!("DELETE FROM {ks}.t WHERE p = 3 AND c = 5"),
        format!("UPDATE {ks}.t SET v = 'damaged' WHERE p = 4 AND c = 6"),
    ] {
        exec(&dst, &cql).await;
    }
    let out = drover(&daemon, &["validate", "--config", file]).await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("DIFFERENCES FOUND: 2000 rows compared"),
        "{}",
        stdout(&out)
    );
    let out = drover(
        &daemon,
        &[
            "submit",
            file,
            "--kind",
            "validation",
            "--follow",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("differences_found") && stderr(&out).contains("3 rows differ"),
        "{}",
        stderr(&out)
    );
    let found: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(found["state"], "DIFFERENCES_FOUND", "{found}");
    assert_eq!(found["result"]["rowsWithDifferences"], 3, "{found}");
    assert_eq!(found["phase"], "done: 3 of 2000 rows differ", "{found}");
    assert_eq!(found["error"], Value::Null, "{found}");
    let found = found["id"].as_str().unwrap().to_string();
    let out = drover(&daemon, &["job", &found, "--follow"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let out = drover(&daemon, &["validations", "report", &found]).await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("missing rows (not in the target): 2"),
        "{}",
        stdout(&out)
    );
    // The report is served as for a clean validation.
    let (status, report) = daemon
        .get(&format!("/api/v1/validations/{found}/report"))
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["rowsWithDifferences"], 3, "{report}");

    // Listings exit 0 (they report the listing) and show the state; the filter finds it alone.
    let out = drover(
        &daemon,
        &["jobs", "--state", "DIFFERENCES_FOUND", "-o", "json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        listed(&out),
        [(found.clone(), "DIFFERENCES_FOUND".to_string())]
    );
    let out = drover(&daemon, &["validations", "list", "-o", "json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        listed(&out),
        [
            (clean.clone(), "SUCCEEDED".to_string()),
            (found.clone(), "DIFFERENCES_FOUND".to_string())
        ]
    );
    let out = drover(&daemon, &["jobs"]).await;
    assert!(
        stdout(&out)
            .lines()
            .any(|l| l.contains("DIFFERENCES_FOUND")),
        "{}",
        stdout(&out)
    );
    let (status, list) = daemon.get("/api/v1/jobs?state=differences_found").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1, "{list}");
    let metrics = daemon.get_text("/metrics").await;
    for line in [
        r#"drover_jobs{kind="validation",state="DIFFERENCES_FOUND"} 1"#,
        r#"drover_jobs{kind="validation",state="SUCCEEDED"} 1"#,
        r#"drover_jobs{kind="migration",state="DIFFERENCES_FOUND"} 0"#,
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    // An unknown state names the ones there are.
    let (status, refused) = daemon.get("/api/v1/jobs?state=DIFFERENT").await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("DIFFERENCES_FOUND"),
        "{refused}"
    );
    // Ended like any finished job: it can be deleted.
    let out = drover(&daemon, &["delete", &found]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A validation that cannot reach its target fails: 1, as `migrate` (it was 2, the code of
    // an invalid file); an invalid file stays 2.
    let addr = dst_addr();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let unreachable = yaml.replace(
        &format!("host: {host}\n  port: {port}\n"),
        &format!("host: {host}\n  port: 1\n"),
    );
    assert!(unreachable.contains("port: 1\n"), "{unreachable}");
    let path = write_job(&unreachable);
    let out = drover(&daemon, &["validate", "--config", path.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let path = write_job(&yaml.replace("splitCount", "splitCont"));
    let out = drover(&daemon, &["validate", "--config", path.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
