use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use scylla::client::session::Session;

use crate::resume::{
    assert_claim_holds, assert_not_rewritten, claimed_ranges, in_ranges, keys_in, newest_claim,
    now_micros, savepoint_files, scan,
};
use test_support::cql::{self, clusters, dst_addr, job, rows_table};
use test_support::{drover_bin, wait_until};

fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(drover_bin());
    cmd.args(args)
        .env_remove("DROVER_LISTEN")
        .env_remove("DROVER_STATE_DIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run drover");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_explains_every_command() {
    let (code, stdout, _) = run(&["--help"], &[]);
    assert_eq!(code, Some(0));
    for command in ["serve", "check-config", "openapi"] {
        assert!(stdout.contains(command), "{stdout}");
    }
    let (code, stdout, _) = run(&["serve", "--help"], &[]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("--config") && stdout.contains("DROVER_LISTEN"),
        "{stdout}"
    );
}

#[test]
fn a_bad_config_stops_startup_with_key_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "state_dir: /tmp/x\nserver:\n  listen: 127.0.0.1:99999\n",
    )
    .unwrap();
    let (code, _, stderr) = run(&["serve", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("server.listen: invalid socket address \"127.0.0.1:99999\"")
            && stderr.contains("(line 3)"),
        "{stderr}"
    );

    std::fs::write(&path, "server:\n  listen: 127.0.0.1:0\nstorage: x\n").unwrap();
    let (code, _, stderr) = run(&["serve", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("unknown field `storage`") && stderr.contains("(line 3)"),
        "{stderr}"
    );

    let (code, _, stderr) = run(&["serve", "--config", "/nonexistent/drover.yaml"], &[]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("/nonexistent/drover.yaml: cannot read config"),
        "{stderr}"
    );

    let (code, _, stderr) = run(&["serve"], &[("DROVER_LISTEN", "localhost")]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("environment variable DROVER_LISTEN: invalid socket address \"localhost\""),
        "{stderr}"
    );
}

#[test]
fn check_config_accepts_every_example() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    // check-config reads the TLS files a config names, as serve does: the examples' files
    // under /etc/drover/tls/ are made for the test, the example otherwise as it is.
    let tls = tempfile::tempdir().unwrap();
    let ca = crate::tls::Ca::new("example CA");
    for leaf in ["server", "peer"] {
        crate::tls::write_leaf(tls.path(), leaf, &ca.issue(leaf, &["127.0.0.1"]));
    }
    for name in ["clients-ca", "servers-ca"] {
        crate::tls::write_ca(tls.path(), name, &ca);
    }
    // Relative paths of the examples (config/examples/...) are read beside the config file.
    std::os::unix::fs::symlink(dir.join("examples"), tls.path().join("examples")).unwrap();
    for name in ["drover.yaml", "drover.full.yaml"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let path = tls.path().join(name);
        std::fs::write(
            &path,
            text.replace("/etc/drover/tls/", &format!("{}/", tls.path().display())),
        )
        .unwrap();
        let (code, stdout, stderr) =
            run(&["check-config", "--config", path.to_str().unwrap()], &[]);
        assert_eq!(code, Some(0), "{name}: {stderr}");
        assert!(stdout.starts_with("config OK"), "{stdout}");
    }
    // As it is, the full example names TLS files this machine does not have: refused, naming
    // the key and the file (it said `config OK`).
    let (code, _, stderr) = run(
        &[
            "check-config",
            "--config",
            dir.join("drover.full.yaml").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("server.tls.cert: cannot read /etc/drover/tls/server.crt"),
        "{stderr}"
    );
    let (code, stdout, _) = run(&["check-config"], &[("DROVER_LISTEN", "127.0.0.1:1234")]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("listen 127.0.0.1:1234"), "{stdout}");
}

/// `drover <command> --config <yaml>` in the background, its output collected at exit.
fn spawn_job(command: &str, yaml: &str) -> tokio::process::Child {
    let path = cql::write_job(yaml);
    tokio::process::Command::new(drover_bin())
        .args([command, "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn drover")
}

async fn finish(child: tokio::process::Child) -> (Option<i32>, String) {
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("drover exits")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn run_job(command: &str, yaml: &str) -> (Option<i32>, String) {
    finish(spawn_job(command, yaml)).await
}

fn interrupt(child: &tokio::process::Child) {
    let pid = child.id().expect("running").to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// How long a CLI run may take to reach a savepoint.
const SAVEPOINT_WAIT: Duration = Duration::from_secs(30);

/// Number of tokens in `ranges`.
fn width(ranges: &[(i64, i64)]) -> i128 {
    ranges
        .iter()
        .map(|&(x, y)| i128::from(y) - i128::from(x))
        .sum()
}

/// Every row of `table` as (token, p, c, v, n).
async fn all_rows(s: &Session, table: &str) -> BTreeSet<(i64, i32, i32, String, i64)> {
    let cql = format!("SELECT token(p), p, c, v, n FROM {table}");
    scan(s, &cql, ()).await.into_iter().collect()
}

#[tokio::test]
async fn migrate_exits_2_on_a_bad_job_130_on_sigint_1_when_the_job_fails_and_resumes_with_another_split_count()
 {
    let (src, dst) = clusters().await;
    let ks = "rs_cli";
    let rows = 8000;
    rows_table(&src, &dst, ks, rows, 100, 100).await;
    let table = format!("{ks}.t");
    let home = tempfile::tempdir().unwrap();
    let sp_dir = home.path().join("savepoints");
    // A range the operator says is done, cutting through units: never copied.
    let (a, b) = (
        -3_000_000_000_000_000_000_i64,
        1_234_567_890_123_456_789_i64,
    );
    let yaml = |target_extra: &str, extra: &str| {
        job(
            ks,
            "t",
            "",
            target_extra,
            &format!(
                "skipTokenRanges:\n  - [{a}, {b}]\nsavepoints:\n  path: {}\n  intervalSeconds: 1\n{extra}",
                sp_dir.display()
            ),
        )
    };

    // Refused before anything is written: 2 for the job file or the schemas, 1 for a database
    // that cannot be reached.
    let (code, stderr) = run_job("migrate", &yaml("", "").replace("splitCount", "splitCont")).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("splitCont"), "{stderr}");
    let (code, stderr) = run_job(
        "migrate",
        &yaml("", "").replace("table: t\n", "table: nope\n"),
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("nope"), "{stderr}");
    let (host, port) = dst_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let unreachable = yaml("", "").replace(
        &format!("host: {host}\n  port: {port}\n"),
        &format!("host: {host}\n  port: 1\n"),
    );
    assert!(unreachable.contains("port: 1\n"), "{unreachable}");
    let (code, stderr) = run_job("migrate", &unreachable).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        all_rows(&dst, &table).await.is_empty(),
        "nothing is written"
    );

    // Ctrl-C half way: 130, after a final savepoint.
    let child = spawn_job("migrate", &yaml("  rowsPerSecond: 1500\n", ""));
    wait_until(
        "a savepoint recording a copied unit",
        SAVEPOINT_WAIT,
        || {
            let files = savepoint_files(&sp_dir);
            files
                .last()
                .is_some_and(|f| width(&claimed_ranges(&sp_dir.join(f))) > width(&[(a, b)]))
        },
    )
    .await;
    interrupt(&child);
    let (code, stderr) = finish(child).await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("migration stopped"), "{stderr}");
    let claimed = newest_claim(&sp_dir);
    assert!(
        claimed.iter().any(|&(x, y)| x <= a && b <= y),
        "the operator's range is part of the progress: {claimed:?}"
    );
    let user = [(a, b)];
    assert!(!keys_in(&src, &table, &user).await.is_empty());
    assert!(
        keys_in(&dst, &table, &user).await.is_empty(),
        "the operator's range was copied"
    );
    let copied: Vec<(i64, i64)> = claimed
        .iter()
        .flat_map(|&(x, y)| [(x, y.min(a)), (x.max(b), y)])
        .filter(|(x, y)| x < y)
        .collect();
    assert_claim_holds(&src, &dst, &table, &copied).await;
    let done = keys_in(&src, &table, &claimed).await.len();

    // Run again with another split: units no longer match the recorded ranges, and still
    // nothing recorded is copied again.
    let restart = now_micros();
    let (code, stderr) = run_job(
        "migrate",
        &yaml("", "").replace("splitCount: 32", "splitCount: 7"),
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("resuming from savepoint"), "{stderr}");
    assert_not_rewritten(&dst, &table, &claimed, restart, rows - done).await;
    let expected: BTreeSet<_> = all_rows(&src, &table)
        .await
        .into_iter()
        .filter(|r| !in_ranges(r.0, &user))
        .collect();
    assert_eq!(
        all_rows(&dst, &table).await,
        expected,
        "every row but the operator's range"
    );

    // A validation stopped by Ctrl-C exits 130 too.
    let validation = spawn_job("validate", &yaml("  rowsPerSecond: 1000\n", ""));
    wait_until("a validation savepoint", SAVEPOINT_WAIT, || {
        !savepoint_files(&sp_dir.join("validation")).is_empty()
    })
    .await;
    interrupt(&validation);
    let (code, stderr) = finish(validation).await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("validation stopped"), "{stderr}");

    // A job that fails half way (the target table dropped: every write refused) exits 1.
    cql::exec(&dst, &format!("TRUNCATE {table}")).await;
    let before = savepoint_files(&sp_dir);
    let child = spawn_job(
        "migrate",
        &yaml("  rowsPerSecond: 1000\n", "  autoResume: false\n"),
    );
    wait_until("a savepoint", SAVEPOINT_WAIT, || {
        savepoint_files(&sp_dir) != before
    })
    .await;
    cql::exec(&dst, &format!("DROP TABLE {table}")).await;
    let (code, stderr) = finish(child).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("migration failed"), "{stderr}");
}
