//! The web console in a real browser: Debian's Chromium driven by playwright-core
//! (tests/browser/console.mjs), against a daemon running real jobs on the test clusters. The
//! pages' screenshots are kept in target/console-screenshots (and copied to docs/screenshots
//! with DROVER_UPDATE_SCREENSHOTS=1).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use test_support::cql::{Fixture, exec, job};
use test_support::{Daemon, poll};

const AUTH: &str = "auth:
  tokens:
    - {id: rita, sha256: ba5005a40cf5212e4ac0190104cc127edab013294bb71279a975b27a80982d45, roles: [reader]}
    - {id: otto, sha256: 0850123315d21ab90f4f7236408a52ef6dbd6a02a6550e5c10dc73f4d993680e, roles: [reader, operator]}
";
const OPERATOR: &str = "operator-token";
const READER: &str = "reader-token";

async fn submit(daemon: &Daemon, resource: &str, yaml: String) -> String {
    let response = daemon
        .client()
        .post(daemon.url(resource))
        .bearer_auth(OPERATOR)
        .header("content-type", "application/yaml")
        .body(yaml)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    body["jobId"].as_str().unwrap().to_string()
}

async fn job_of(daemon: &Daemon, id: &str) -> Value {
    daemon
        .client()
        .get(daemon.url(&format!("/api/v1/jobs/{id}")))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn ended(daemon: &Daemon, id: &str) -> Value {
    let job = poll(Duration::from_secs(180), async || {
        let job = job_of(daemon, id).await;
        if job["state"] == "QUEUED" || job["state"] == "RUNNING" {
            Err(job)
        } else {
            Ok(job)
        }
    })
    .await;
    job.unwrap_or_else(|j| panic!("job {id} did not end: {j}"))
}

#[tokio::test]
async fn the_console_in_a_browser_follows_cancels_and_reports() {
    let Fixture { ks, dst, .. } = Fixture::rows("it_console", 3000, 100, 100).await;
    let daemon = Daemon::fresh(AUTH).await;

    // A complete copy, then damage in the target that the validation must find by key.
    let copy = submit(&daemon, "/api/v1/migrations", job(ks, "t", "", "", "")).await;
    assert_eq!(ended(&daemon, &copy).await["state"], "SUCCEEDED");
    let mut keys = Vec::new();
    for (p, c) in [(3, 5), (4, 6), (5, 7)] {
        exec(
            &dst,
            &format!("DELETE FROM {ks}.t WHERE p = {p} AND c = {c}"),
        )
        .await;
        keys.push(format!("p = {p} AND c = {c}"));
    }
    for (p, c) in [(6, 8), (7, 9)] {
        exec(
            &dst,
            &format!("UPDATE {ks}.t SET v = 'damaged' WHERE p = {p} AND c = {c}"),
        )
        .await;
        keys.push(format!("p = {p} AND c = {c}"));
    }
    let validation = submit(
        &daemon,
        "/api/v1/validations",
        job(ks, "t", "", "", "validation:\n  failuresToFetch: 100\n"),
    )
    .await;
    let validated = ended(&daemon, &validation).await;
    assert_eq!(validated["result"]["rowsWithDifferences"], 5, "{validated}");
    assert_eq!(validated["state"], "DIFFERENCES_FOUND", "{validated}");

    // A migration slow enough to watch: 150 rows/s, 20 s for the table.
    let running = submit(
        &daemon,
        "/api/v1/migrations",
        job(ks, "t", "", "  rowsPerSecond: 150\n", ""),
    )
    .await;
    poll(Duration::from_secs(60), async || {
        let job = job_of(&daemon, &running).await;
        if job["progress"]["rowsWritten"].as_u64() > Some(0) {
            Ok(())
        } else {
            Err(job)
        }
    })
    .await
    .expect("the slow migration starts");

    let screenshots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let params = json!({
        "url": daemon.url(""),
        "playwright": std::env::var("DROVER_TEST_PLAYWRIGHT").expect("DROVER_TEST_PLAYWRIGHT (source target/testenv/env)"),
        "chromium": std::env::var("DROVER_TEST_CHROMIUM").expect("DROVER_TEST_CHROMIUM"),
        "operatorToken": OPERATOR,
        "readerToken": READER,
        "running": running,
        "validation": validation,
        "differing": 5,
        "keys": keys,
        "screenshots": screenshots,
    });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/console.mjs");
    let out = tokio::time::timeout(
        Duration::from_secs(240),
        tokio::process::Command::new("node")
            .arg(&script)
            .env("CONSOLE_TEST", params.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser test ends within 4 minutes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{stderr}\n{}",
        daemon.logs()
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(summary["reportRows"].as_u64() >= Some(5), "{summary}");
    // The page's share, its "N of ~M rows" and the API's progressPermille (issue 43).
    assert!(summary["percent"].is_array(), "{summary}");
    eprintln!("console: {}", summary["percent"]);

    // The cancel from the page reached the job.
    let cancelled = ended(&daemon, &running).await;
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");
    assert!(
        cancelled["progress"]["rowsWritten"].as_u64() < Some(3000),
        "{cancelled}"
    );
    // The audit trail names who pressed the button.
    assert!(
        daemon.logs().contains("POST /ui/jobs/{id}/cancel"),
        "the cancel is audited"
    );

    keep_screenshots(summary["screenshots"].as_array().unwrap());
}

/// With `DROVER_UPDATE_SCREENSHOTS` set, copies the screenshots taken to docs/screenshots/,
/// where the docs show them.
fn keep_screenshots(shots: &[Value]) {
    if std::env::var_os("DROVER_UPDATE_SCREENSHOTS").is_some() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
        std::fs::create_dir_all(&docs).unwrap();
        for shot in shots {
            let from = PathBuf::from(shot.as_str().unwrap());
            std::fs::copy(&from, docs.join(from.file_name().unwrap())).unwrap();
        }
    }
}

/// Takes a screenshot of each `(route, name)` page of `daemon` (no `auth`) in a real browser
/// (tests/browser/screenshot.mjs), into target/console-screenshots/`name`.png, failing on a
/// page that does not answer 200 or whose script fails; kept as [`keep_screenshots`] says.
/// For the pages another test sets up (a live migration's), so that every page of the console
/// has a current picture in the docs.
pub async fn screenshots(daemon: &Daemon, pages: &[(&str, &str)]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let params = json!({
        "url": daemon.url(""),
        "playwright": std::env::var("DROVER_TEST_PLAYWRIGHT").expect("DROVER_TEST_PLAYWRIGHT (source target/testenv/env)"),
        "chromium": std::env::var("DROVER_TEST_CHROMIUM").expect("DROVER_TEST_CHROMIUM"),
        "pages": pages,
        "screenshots": dir,
    });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/screenshot.mjs");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(&script)
            .env("SCREENSHOT_TEST", params.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the screenshots are taken within 2 minutes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "screenshots failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shots: Vec<Value> = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(shots.len(), pages.len(), "{stdout}");
    keep_screenshots(&shots);
}

#[tokio::test]
async fn console_pages_refuse_what_they_must() {
    let daemon = Daemon::fresh(AUTH).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // Without a session: to the sign-in page, with the way back.
    let r = client
        .get(daemon.url("/ui/jobs?state=RUNNING"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"],
        "/ui/login?next=/ui/jobs%3Fstate%3DRUNNING"
    );
    // A wrong token is refused on the sign-in page itself.
    let r = client
        .post(daemon.url("/ui/login"))
        .form(&[("token", "wrong"), ("next", "/ui/jobs")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("not signed in"));
    // A right one: a session cookie, HttpOnly and SameSite=Strict, and back to where it was.
    let r = client
        .post(daemon.url("/ui/login"))
        .form(&[("token", OPERATOR), ("next", "https://evil.example/")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/ui/jobs", "no open redirect");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Path=/ui"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let page = client
        .get(daemon.url("/ui/jobs"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(page.text().await.unwrap().contains("Signed in as"));
    // The cookie opens the console only: the API wants its bearer token.
    let r = client
        .get(daemon.url("/api/v1/jobs"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // A form without the session's token, or posted from another site, is refused.
    let (status, accepted) = {
        let r = client
            .post(daemon.url("/api/v1/diagnostics/jobs"))
            .bearer_auth(OPERATOR)
            .json(&json!({"durationSeconds": 60}))
            .send()
            .await
            .unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(status, 202);
    let id = accepted["jobId"].as_str().unwrap();
    let r = client
        .post(daemon.url(&format!("/ui/jobs/{id}/cancel")))
        .header("cookie", &session)
        .form(&[("csrf", "forged")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = client
        .post(daemon.url(&format!("/ui/jobs/{id}/cancel")))
        .header("cookie", &session)
        .header("origin", "https://evil.example")
        .form(&[("csrf", "forged")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(job_of(&daemon, id).await["state"], "RUNNING");
    // The page's own token cancels it.
    let page = client
        .get(daemon.url(&format!("/ui/jobs/{id}")))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the page's form carries a token");
    let origin = daemon.url("");
    let r = client
        .post(daemon.url(&format!("/ui/jobs/{id}/cancel")))
        .header("cookie", &session)
        .header("origin", origin.trim_end_matches('/'))
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(ended(&daemon, id).await["state"], "CANCELLED");
    // Ten thousand jobs: a page is still one page.
    let r = client
        .get(daemon.url("/ui/jobs?page=99999"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The console can be turned off.
    let home = test_support::Home::new();
    let config = home.write_config_edited(
        "",
        &[(
            "  diagnostics: true\n",
            "  diagnostics: true\n  console:\n    enabled: false\n",
        )],
    );
    let off = Daemon::start_with(&home, &config).await;
    let (status, body) = off.get("/ui/jobs").await;
    assert_eq!(status, 404, "{body}");
}
