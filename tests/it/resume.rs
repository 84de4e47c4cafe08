//! Savepoints and resume, end to end against the real clusters.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use scylla::client::session::Session;
use serde_json::Value;

use test_support::cql::{
    self, Fixture, assert_same, clusters, fill_many, fresh_keyspace, job, rows_table, src_addr,
};
use test_support::{Daemon, Home, drover_bin, listener_pid, wait_until};

const WAIT: Duration = Duration::from_secs(180);
use test_support::cql::ROWS_TABLE as TABLE;

fn with_savepoints(yaml: &str, dir: &std::path::Path, extra: &str) -> String {
    format!(
        "{yaml}savepoints:\n  path: {}\n  intervalSeconds: 1\n{extra}",
        dir.display()
    )
}

pub(crate) fn savepoint_files(dir: &std::path::Path) -> Vec<String> {
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
    cql::raw_rows(s, table, "p").await.len()
}

async fn wait_state(daemon: &Daemon, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    daemon.wait_job(id, WAIT, pred).await
}

/// The token ranges `(start, end]` that a savepoint file records as complete, read from the
/// file itself (ScyllaDB Migrator's typed tokens: `{type: long, value: …}`; a pair ending at
/// the minimum token ends at the end of the ring).
pub(crate) fn claimed_ranges(path: &Path) -> Vec<(i64, i64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value = yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let pairs = doc["skipTokenRanges"]
        .as_array()
        .unwrap_or_else(|| panic!("no skipTokenRanges list: {doc}"));
    let token = |v: &Value| {
        assert_eq!(v["type"], "long", "a typed token: {v}");
        v["value"].as_i64().unwrap_or_else(|| panic!("{v}"))
    };
    let set = drover::savepoints::ranges::RangeSet::from_ranges(pairs.iter().map(|p| {
        let (a, b) = (token(&p[0]), token(&p[1]));
        drover::savepoints::ranges::TokenRange::new(a, if b == i64::MIN { i64::MAX } else { b })
            .unwrap_or_else(|| panic!("an empty range in {doc}"))
    }));
    // Merged: what the savepoint covers, whatever the unit boundaries.
    set.ranges().iter().map(|r| (r.start, r.end)).collect()
}

/// What the newest savepoint in `dir` records as complete.
pub(crate) fn newest_claim(dir: &Path) -> Vec<(i64, i64)> {
    let newest = savepoint_files(dir).pop().expect("a savepoint was written");
    claimed_ranges(&dir.join(newest))
}

pub(crate) fn in_ranges(token: i64, ranges: &[(i64, i64)]) -> bool {
    ranges.iter().any(|&(a, b)| token > a && token <= b)
}

/// Keys `(p, c)` of the rows of `table` (a [`TABLE`]) whose partition token lies in `ranges`,
/// read with the same `token(p)` bounds as a unit's scan.
pub(crate) async fn keys_in(
    s: &Session,
    table: &str,
    ranges: &[(i64, i64)],
) -> BTreeSet<(i32, i32)> {
    let mut keys = BTreeSet::new();
    for &(a, b) in ranges {
        let cql = format!("SELECT p, c FROM {table} WHERE token(p) > ? AND token(p) <= ?");
        keys.extend(scan::<(i32, i32)>(s, &cql, (a, b)).await);
    }
    keys
}

/// Panics unless the target holds every source row of the ranges a savepoint claims complete
/// (a savepoint never claims data that is not in the target). Returns those source keys.
pub(crate) async fn assert_claim_holds(
    src: &Session,
    dst: &Session,
    table: &str,
    claimed: &[(i64, i64)],
) -> BTreeSet<(i32, i32)> {
    let in_source = keys_in(src, table, claimed).await;
    let in_target = keys_in(dst, table, claimed).await;
    let missing: Vec<_> = in_source.difference(&in_target).collect();
    assert!(
        missing.is_empty(),
        "the savepoint claims {claimed:?} complete, but {} of its {} source rows are not in the \
         target, e.g. {:?}",
        missing.len(),
        in_source.len(),
        &missing[..missing.len().min(5)]
    );
    in_source
}

/// Every row of `table` as (token, p, c, writetime of v).
pub(crate) async fn writetimes(s: &Session, table: &str) -> Vec<(i64, i32, i32, i64)> {
    let cql = format!("SELECT token(p), p, c, writetime(v) FROM {table}");
    scan(s, &cql, ()).await
}

/// Every row a query returns. A failed read is tried again a few times: a test node busy
/// with other tests' writes may fail one.
pub(crate) async fn scan<T>(
    s: &Session,
    cql: &str,
    values: impl scylla::serialize::row::SerializeRow + Clone,
) -> Vec<T>
where
    T: 'static + for<'f, 'm> scylla::deserialize::row::DeserializeRow<'f, 'm>,
{
    use futures::TryStreamExt;
    let mut attempt = 0;
    loop {
        let mut st = scylla::statement::unprepared::Statement::new(cql);
        st.set_page_size(5000);
        let rows = match s.query_iter(st, values.clone()).await {
            Ok(pager) => pager
                .rows_stream::<T>()
                .expect("row type")
                .try_collect()
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match rows {
            Ok(rows) => return rows,
            Err(e) if attempt < 4 => {
                eprintln!("retrying `{cql}`: {e}");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("`{cql}` failed: {e}"),
        }
    }
}

/// Microseconds since the epoch: the clock Cassandra stamps writes with (same machine).
pub(crate) fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Panics when a row of `claimed` (complete before `since`) was written again at or after
/// `since` (the target's clock; the job must not preserve timestamps), or when more than
/// `at_most` rows were written since. Returns the number of rows written since.
pub(crate) async fn assert_not_rewritten(
    dst: &Session,
    table: &str,
    claimed: &[(i64, i64)],
    since: i64,
    at_most: usize,
) -> usize {
    let rows = writetimes(dst, table).await;
    let rewritten: Vec<_> = rows
        .iter()
        .filter(|r| r.3 >= since && in_ranges(r.0, claimed))
        .collect();
    assert!(
        rewritten.is_empty(),
        "{} rows of ranges recorded complete were copied again, e.g. {:?}",
        rewritten.len(),
        &rewritten[..rewritten.len().min(5)]
    );
    let since_count = rows.iter().filter(|r| r.3 >= since).count();
    assert!(
        since_count <= at_most,
        "{since_count} rows were written after the restart, more than the {at_most} left to copy"
    );
    since_count
}

/// Aborts every TCP connection of process `pid` to `peer` (`ss -K`), as a network failure
/// would, without disturbing anyone else's connections. Returns how many it broke.
fn break_connections(pid: u32, peer: &str) -> usize {
    let out = std::process::Command::new("ss")
        .args(["-tnpH", "state", "established", "dst", peer])
        .output()
        .expect("ss");
    let mut broken = 0;
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("pid={pid},")))
    {
        let local = line
            .split_whitespace()
            .find(|t| t.contains(':') && !t.starts_with("users:"))
            .expect("local address");
        let status = std::process::Command::new("ss")
            .args(["-K", "-tn", "src", local, "dst", peer])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("ss -K");
        assert!(status.success(), "ss -K failed");
        broken += 1;
    }
    broken
}

/// A daemon config that leaves interrupted jobs alone at start.
fn config_without_auto_resume(home: &Home) -> PathBuf {
    home.write_config_edited("", &[("jobs:\n", "jobs:\n  resume_interrupted: false\n")])
}

/// Sets the replication factor of keyspace `ks` on a single-node cluster: at 3, requests at
/// (LOCAL_)QUORUM fail as unavailable (2 replicas needed, 1 alive) until it is set back to 1.
pub(crate) async fn set_replication(s: &Session, ks: &str, rf: u32) {
    cql::exec(
        s,
        &format!(
            "ALTER KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
        ),
    )
    .await;
}

#[tokio::test]
async fn kill_9_mid_copy_then_restart_resumes_and_the_target_is_identical() {
    let rows = 20_000;
    let Fixture {
        src,
        dst,
        ks,
        mut daemon,
    } = Fixture::rows("it_resume_kill", rows, 100, 100).await;
    let home = daemon.home().clone();
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
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
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
    let table = format!("{ks}.t");
    let claimed = newest_claim(&sp_dir);
    let finished = assert_claim_holds(&src, &dst, &table, &claimed).await;
    assert!(
        !finished.is_empty(),
        "the savepoint records the finished units: {claimed:?}"
    );
    // A row added now to a finished partition of the source reaches the target only if a
    // finished range is read again: the resumed attempt must not (copying it again would
    // leave the target unchanged otherwise, writetimes included).
    let partitions: BTreeSet<i32> = finished.iter().map(|&(p, _)| p).collect();
    for p in &partitions {
        cql::exec(
            &src,
            &format!("INSERT INTO {table} (p, c, v, n) VALUES ({p}, -1, 'after the savepoint', 0)"),
        )
        .await;
    }

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
    let rewritten = keys_in(&dst, &table, &claimed).await;
    let late: Vec<_> = rewritten.iter().filter(|&&(_, c)| c == -1).collect();
    assert!(
        late.is_empty(),
        "ranges recorded complete were copied again: {} rows added after the savepoint reached the target",
        late.len()
    );
    let written = done["progress"]["rowsWritten"].as_u64().unwrap() as usize;
    assert!(
        written <= rows - finished.len(),
        "the resumed attempt wrote {written} rows; only {} were left to copy: {done}",
        rows - finished.len()
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
    for p in &partitions {
        cql::exec(
            &src,
            &format!("DELETE FROM {table} WHERE p = {p} AND c = -1"),
        )
        .await;
    }
    let select = "p, c, v, writetime(v), n, writetime(n)";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        rows
    );
}

#[tokio::test]
async fn sigterm_writes_a_final_savepoint_and_the_next_start_resumes_from_it() {
    let (src, dst) = clusters().await;
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
    let config = config_without_auto_resume(&home);
    let mut daemon = Daemon::start_with(&home, &config).await;
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
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
    let table = format!("{ks}.t");
    let claimed = newest_claim(&sp_dir);
    let finished = assert_claim_holds(&src, &dst, &table, &claimed).await;
    assert!(!finished.is_empty(), "{claimed:?}");
    // Without preserveTimestamps every write carries the target's clock: rows written from
    // now on are told apart from the first attempt's.
    let restart = now_micros();

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
    let left = rows - finished.len();
    assert!(
        done["progress"]["rowsWritten"].as_u64() <= Some(left as u64),
        "finished work is not redone ({left} rows were left): {done}"
    );
    assert_not_rewritten(&dst, &table, &claimed, restart, left).await;
    assert_eq!(
        assert_same(&src, &table, &dst, &table, "p, c, v, n", "p, c, v, n", &[]).await,
        rows
    );
}

async fn cli(yaml: &str) -> (Option<i32>, String) {
    let path = cql::write_job(yaml);
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
    let (src, dst) = clusters().await;
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

    // The lookup passes both over and finds the complete savepoint, which covers every
    // unit: the run is refused (as the daemon answers 409), naming the savepoint it found.
    let (code, stderr) = cli(&yaml).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "savepoint {complete} in {} already records every unit of this migration as done",
            sp_dir.display()
        )) && stderr.contains("savepoints.autoResume: false"),
        "{stderr}"
    );
    assert!(
        stderr.contains(corrupt) && stderr.contains("trying an older savepoint"),
        "{stderr}"
    );
    assert!(stderr.contains("belongs to another migration"), "{stderr}");
    assert!(!stderr.contains("migration complete"), "{stderr}");

    // autoResume: false copies everything again, and still writes savepoints.
    let before = savepoint_files(&sp_dir);
    let (code, stderr) = cli(&format!("{yaml}  autoResume: false\n")).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("complete: 3000 rows") && stderr.contains("(0 skipped)"),
        "{stderr}"
    );
    // Retention keeps the count at 10: only new names prove new files.
    let new: Vec<_> = savepoint_files(&sp_dir)
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    let last = new.last().expect("savepoints are still written");
    assert_eq!(
        claimed_ranges(&sp_dir.join(last)),
        [(i64::MIN, i64::MAX)],
        "the final savepoint records the whole ring"
    );
    // Retention: never more than `keep` files of the current format (a fresh load again: the
    // savepoint of the last one covers everything, so a resume would be refused).
    let (code, stderr) = cli(&format!("{yaml}  autoResume: false\n  keep: 2\n")).await;
    assert_eq!(code, Some(0), "{stderr}");
    let current: Vec<_> = savepoint_files(&sp_dir)
        .into_iter()
        .filter(|n| n.len() == "savepoint_0000000000000_0000000000.yaml".len())
        .collect();
    assert_eq!(current.len(), 2, "{current:?}");
}

#[tokio::test]
async fn no_secret_reaches_savepoints_logs_or_the_api() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("it_resume_secrets", 500, 100, 100).await;
    let home = daemon.home().clone();
    let sp_dir = home.path().join("savepoints");
    let secret = "sup3r-s3cret-pw";
    let (passphrase, private_key) = ("s3cret-passphrase", "s3cret-private-key");
    // The test clusters accept any client; the credentials are still carried everywhere.
    let creds = format!("  credentials:\n    username: migrator\n    password: {secret}\n");
    // Keys of another connector, which a CQL job accepts and ignores (an operator's file for
    // ScyllaDB Migrator may carry them): redacted by their names like every secret.
    // They must not cost the job its own skipTokenRanges either.
    let foreign = format!(
        "skipSegments:\n  sshTunnel:\n    passphrase: {passphrase}\n    privateKey: {private_key}\nskipTokenRanges:\n  - [{}, 0]\n",
        i64::MIN
    );
    let yaml = with_savepoints(&job(ks, "t", &creds, &creds, &foreign), &sp_dir, "");
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    wait_state(&daemon, &id, |j| j["state"] == "SUCCEEDED").await;

    let mut seen = String::new();
    for path in [
        "/api/v1/migrations",
        &format!("/api/v1/migrations/{id}"),
        &format!("/api/v1/migrations/{id}/savepoints"),
        "/api/v1/jobs",
        "/metrics",
    ] {
        seen.push_str(&daemon.get_text(path).await);
    }
    assert!(
        seen.contains("<redacted>"),
        "the redacted form is shown: {seen}"
    );
    let table = format!("{ks}.t");
    let skipped = [(i64::MIN, 0)];
    assert!(!keys_in(&src, &table, &skipped).await.is_empty());
    assert!(
        keys_in(&dst, &table, &skipped).await.is_empty(),
        "the job's skipTokenRanges were copied"
    );
    let (_, record) = daemon.get(&format!("/api/v1/migrations/{id}")).await;
    let tunnel = &record["spec"]["skipSegments"]["sshTunnel"];
    assert_eq!(tunnel["passphrase"], "<redacted>", "{record}");
    assert_eq!(tunnel["privateKey"], "<redacted>", "{record}");
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
    for secret in [secret, passphrase, private_key] {
        assert!(!seen.contains(secret), "a secret leaked: {secret}");
    }
    // The daemon's private copy of the job (kept for resumes) is gone once the job succeeded.
    let kept = home.state_dir().join("jobs").join(format!("{id}.job.yaml"));
    assert!(!kept.exists(), "the kept job config outlives its job");
}

/// Waits until at least `n` savepoint files not in `seen` exist.
async fn wait_new_savepoints(dir: &Path, seen: &[String], n: usize) {
    wait_until(
        &format!("{n} new savepoints in {}", dir.display()),
        Duration::from_secs(30),
        || {
            savepoint_files(dir)
                .iter()
                .filter(|f| !seen.contains(f))
                .count()
                >= n
        },
    )
    .await;
}

#[tokio::test]
async fn savepoints_taken_while_writes_fail_claim_only_written_rows_and_post_resume_finishes_the_job()
 {
    let (src, dst) = clusters().await;
    let ks = "rs_claims";
    let rows = 6000;
    rows_table(&src, &dst, ks, rows, 100, 100).await;
    let table = format!("{ks}.t");
    let home = Home::new();
    let sp_dir = home.path().join("savepoints");
    let yaml = with_savepoints(
        &job(ks, "t", "", "  rowsPerSecond: 1000\n", ""),
        &sp_dir,
        "",
    );
    let config = config_without_auto_resume(&home);
    let mut daemon = Daemon::start_with(&home, &config).await;
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    wait_state(&daemon, &id, |j| {
        j["progress"]["unitsDone"].as_u64() >= Some(3)
    })
    .await;

    // From now on every write fails (unavailable) and is retried, while the source is still
    // read: units are scanned to their end with their writes pending. Savepoints taken now
    // must not record them.
    set_replication(&dst, ks, 3).await;
    let waiting = wait_state(&daemon, &id, |j| {
        j["state"] != "RUNNING"
            || j["phase"]
                .as_str()
                .is_some_and(|p| p.starts_with("waiting: writing to the target"))
    })
    .await;
    assert_eq!(waiting["state"], "RUNNING", "{waiting}");
    assert!(
        waiting["progress"]["retries"].as_u64() > Some(0),
        "{waiting}"
    );
    let seen = savepoint_files(&sp_dir);
    wait_new_savepoints(&sp_dir, &seen, 2).await;
    daemon.kill9();
    set_replication(&dst, ks, 1).await;
    let claimed = newest_claim(&sp_dir);
    let finished = assert_claim_holds(&src, &dst, &table, &claimed).await;
    assert!(!finished.is_empty(), "{claimed:?}");

    // Not resumed at start (resume_interrupted: false): resumed by its own route.
    let daemon = Daemon::start_with(&home, &config).await;
    let (_, job_) = daemon.get(&format!("/api/v1/migrations/{id}")).await;
    assert_eq!(job_["state"], "INTERRUPTED", "{job_}");
    let (status, body) = daemon
        .post_json("/api/v1/migrations/no-such-job/resume", &Value::Null)
        .await;
    assert_eq!(status, 404, "{body}");
    let restart = now_micros();
    let (status, body) = daemon
        .post_json(&format!("/api/v1/migrations/{id}/resume"), &Value::Null)
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["id"], id.as_str(), "resumed under its own id: {body}");
    assert!(
        body["state"] == "QUEUED" || body["state"] == "RUNNING",
        "{body}"
    );
    let done = wait_state(&daemon, &id, |j| {
        !["QUEUED", "RUNNING"].contains(&j["state"].as_str().unwrap())
    })
    .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    assert_eq!(done["attempts"], 2, "{done}");
    let (status, body) = daemon
        .post_json(&format!("/api/v1/migrations/{id}/resume"), &Value::Null)
        .await;
    assert_eq!(status, 409, "a SUCCEEDED job is not resumed: {body}");
    let left = rows - finished.len();
    assert!(
        done["progress"]["rowsWritten"].as_u64() <= Some(left as u64),
        "{left} rows were left: {done}"
    );
    assert_not_rewritten(&dst, &table, &claimed, restart, left).await;
    assert_eq!(
        assert_same(&src, &table, &dst, &table, "p, c, v, n", "p, c, v, n", &[]).await,
        rows
    );
    let kept = home.state_dir().join("jobs").join(format!("{id}.job.yaml"));
    assert!(!kept.exists(), "the kept job config outlives its job");
}

#[tokio::test]
async fn source_reads_that_fail_for_a_while_or_lose_their_connection_are_retried() {
    let rows = 4000;
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("rs_source_retry", rows, 100, 100).await;
    let table = format!("{ks}.t");
    // About 6 s of copying after the first second's burst, in small pages: the source is
    // read until the end, not ahead of the writes.
    let yaml = job(
        ks,
        "t",
        "  fetchSize: 20\n  maxConcurrentUnits: 4\n",
        "  rowsPerSecond: 600\n",
        "",
    );
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    wait_state(&daemon, &id, |j| {
        j["progress"]["rowsWritten"].as_u64() >= Some(800)
    })
    .await;

    // Its connections to the source break, again and again for 1.5 s: the reads in flight
    // fail and are tried again.
    let pid = listener_pid(&daemon.addr.to_string());
    let mut broken = 0;
    let breaking = std::time::Instant::now();
    while breaking.elapsed() < Duration::from_millis(1500) {
        broken += break_connections(pid, &src_addr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(broken > 0, "no connection to the source was broken");
    let (_, j) = daemon.get(&format!("/api/v1/migrations/{id}")).await;
    assert_eq!(
        j["state"], "RUNNING",
        "the job survives broken connections: {j}"
    );

    // Reads at LOCAL_QUORUM now fail as unavailable, for about 3 s.
    set_replication(&src, ks, 3).await;
    let waiting = wait_state(&daemon, &id, |j| {
        j["state"] != "RUNNING"
            || j["phase"]
                .as_str()
                .is_some_and(|p| p.starts_with("waiting: reading from the source"))
    })
    .await;
    assert_eq!(waiting["state"], "RUNNING", "{waiting}");
    let outage = std::time::Instant::now();
    while outage.elapsed() < Duration::from_secs(3) {
        let (_, j) = daemon.get(&format!("/api/v1/migrations/{id}")).await;
        assert_eq!(j["state"], "RUNNING", "the job waits for the source: {j}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    set_replication(&src, ks, 1).await;
    assert!(
        waiting["progress"]["retries"].as_u64() > Some(0),
        "{waiting}"
    );
    let done = wait_state(&daemon, &id, test_support::ended).await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    assert!(
        done["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("reading from the source")),
        "{done}"
    );
    assert_eq!(
        assert_same(&src, &table, &dst, &table, "p, c, v, n", "p, c, v, n", &[]).await,
        rows
    );
}

#[tokio::test]
async fn after_a_cancel_or_a_failure_savepoints_stay_and_the_kept_job_config_goes_with_the_job() {
    let Fixture {
        src,
        dst,
        ks,
        mut daemon,
    } = Fixture::rows("rs_ended", 6000, 100, 100).await;
    let table = format!("{ks}.t");
    let home = daemon.home().clone();
    let sp_dir = home.path().join("savepoints");
    // Savepoints on schedule only every hour: those found are the final ones.
    let yaml = with_savepoints(&job(ks, "t", "", "  rowsPerSecond: 800\n", ""), &sp_dir, "")
        .replace("intervalSeconds: 1", "intervalSeconds: 3600");
    let kept = |id: &str| home.state_dir().join("jobs").join(format!("{id}.job.yaml"));

    let cancelled = daemon.submit_job("/api/v1/migrations", &yaml).await;
    wait_state(&daemon, &cancelled, |j| {
        j["progress"]["unitsDone"].as_u64() >= Some(3)
    })
    .await;
    let (status, body) = daemon
        .post_json(
            &format!("/api/v1/migrations/{cancelled}/cancel"),
            &Value::Null,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let end = wait_state(&daemon, &cancelled, test_support::ended).await;
    assert_eq!(end["state"], "CANCELLED", "{end}");
    let files = savepoint_files(&sp_dir);
    assert_eq!(
        files.len(),
        1,
        "the final savepoint of the cancel: {files:?}"
    );
    assert!(
        daemon
            .logs()
            .contains("created a savepoint due to the migration being stopped"),
        "{}",
        daemon.logs()
    );
    let at_cancel = claimed_ranges(&sp_dir.join(&files[0]));
    assert!(
        !assert_claim_holds(&src, &dst, &table, &at_cancel)
            .await
            .is_empty()
    );

    // The same job again continues from there, and fails for good half way: a column of the
    // target is dropped, so every write is refused.
    let failed = daemon.submit_job("/api/v1/migrations", &yaml).await;
    let started = wait_state(&daemon, &failed, |j| {
        j["progress"]["rowsWritten"].as_u64() >= Some(1000)
    })
    .await;
    assert!(
        started["progress"]["unitsSkipped"].as_u64() >= Some(3),
        "{started}"
    );
    assert!(
        kept(&failed).exists(),
        "kept while the job runs: {started}\n{:?}",
        std::fs::read_dir(home.state_dir().join("jobs"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    cql::exec(&dst, &format!("ALTER TABLE {table} DROP n")).await;
    let end = wait_state(&daemon, &failed, test_support::ended).await;
    // Cassandra fails reads of rows written with the dropped column until it is back.
    cql::exec(&dst, &format!("ALTER TABLE {table} ADD n bigint")).await;
    assert_eq!(end["state"], "FAILED", "{end}");
    assert!(
        end["error"].as_str().is_some_and(|e| e.contains("target")),
        "{end}"
    );
    assert!(
        !kept(&failed).exists(),
        "a failed job cannot be resumed: its config (with credentials) is deleted at once"
    );
    assert!(
        daemon
            .logs()
            .contains("created a savepoint due to the migration failing"),
        "{}",
        daemon.logs()
    );
    let files = savepoint_files(&sp_dir);
    assert_eq!(files.len(), 2, "{files:?}");
    let at_failure = claimed_ranges(&sp_dir.join(&files[1]));
    for &(a, b) in &at_cancel {
        assert!(
            at_failure.iter().any(|&(x, y)| x <= a && b <= y),
            "the failed run's savepoint keeps what was done before: {at_cancel:?} vs {at_failure:?}"
        );
    }
    assert_claim_holds(&src, &dst, &table, &at_failure).await;

    // The cancelled job can still be resumed (issue 43): its config outlives a restart, and
    // goes with its record; the savepoints stay.
    daemon.signal("TERM");
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
    let daemon = Daemon::start(&home, "").await;
    assert!(
        kept(&cancelled).exists(),
        "a cancelled job's config is kept for its resume"
    );
    assert_eq!(savepoint_files(&sp_dir), files);
    let (_, list) = daemon.get("/api/v1/migrations").await;
    let states: Vec<_> = list["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["CANCELLED", "FAILED"], "{list}");
    let (status, body) = daemon
        .client()
        .delete(daemon.url(&format!("/api/v1/jobs/{cancelled}")))
        .send()
        .await
        .map(|r| (r.status().as_u16(), r))
        .unwrap();
    assert_eq!(status, 204, "{body:?}");
    assert!(
        !kept(&cancelled).exists(),
        "a deleted job's config is deleted with it"
    );
}

/// A unit whose writes failed for good is not recorded as done, even when its whole range was
/// read: the savepoint written at the failure claims only ranges whose rows are all in the
/// target, and running the job again from it copies exactly the rest. The rows of the lower
/// half of the ring are copied first (and skipped by the job); the target's writes then fail
/// as unavailable (retried) while one unit at a time reads its range to the end, and fail
/// for good once the column they write is dropped.
#[tokio::test]
async fn a_unit_whose_writes_failed_for_good_is_not_claimed_and_a_rerun_copies_the_rest() {
    // 100 partitions of 10 rows: a unit's rows come in one page, its writes in a few batches.
    let rows = 1000;
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("rs_failed_unit", rows, 10, 10).await;
    let table = format!("{ks}.t");
    let sp_dir = daemon.home().path().join("savepoints");
    let (min, max) = (i64::MIN, i64::MAX);
    let lower = job(
        ks,
        "t",
        "",
        "",
        &format!("skipTokenRanges:\n  - [0, {max}]\n"),
    );
    let id = daemon.submit_job("/api/v1/migrations", &lower).await;
    let done = wait_state(&daemon, &id, test_support::ended).await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}");

    set_replication(&dst, ks, 3).await;
    let upper = with_savepoints(
        &job(
            ks,
            "t",
            "  maxConcurrentUnits: 1\n",
            "",
            &format!("skipTokenRanges:\n  - [{min}, 0]\n"),
        ),
        &sp_dir,
        "",
    );
    let failed = daemon.submit_job("/api/v1/migrations", &upper).await;
    // A unit with rows read (one page: read whole) and its writes being retried.
    let waiting = wait_state(&daemon, &failed, |j| {
        test_support::ended(j)
            || (j["progress"]["rowsRead"].as_u64() > Some(0)
                && j["phase"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("waiting: writing to the target")))
    })
    .await;
    assert_eq!(waiting["state"], "RUNNING", "{waiting}");
    assert_eq!(waiting["progress"]["rowsWritten"], 0, "{waiting}");
    // Every write is refused from now on: the pending ones fail for good at their next try.
    cql::exec(&dst, &format!("ALTER TABLE {table} DROP n")).await;
    let end = wait_state(&daemon, &failed, test_support::ended).await;
    cql::exec(&dst, &format!("ALTER TABLE {table} ADD n bigint")).await;
    set_replication(&dst, ks, 1).await;
    assert_eq!(end["state"], "FAILED", "{end}");
    assert!(
        end["error"].as_str().is_some_and(|e| e.contains("target")),
        "{end}"
    );
    assert!(
        daemon
            .logs()
            .contains("created a savepoint due to the migration failing"),
        "{}",
        daemon.logs()
    );
    let claimed = newest_claim(&sp_dir);
    assert!(
        claimed.iter().any(|&(a, b)| a == min && b >= 0),
        "the job's skipped ranges are kept: {claimed:?}"
    );
    let finished = assert_claim_holds(&src, &dst, &table, &claimed).await;
    assert!(!finished.is_empty() && finished.len() < rows, "{claimed:?}");

    // The same job again resumes from that savepoint and copies exactly what it left.
    let restart = now_micros();
    let again = daemon.submit_job("/api/v1/migrations", &upper).await;
    let done = wait_state(&daemon, &again, test_support::ended).await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    let left = rows - finished.len();
    assert_eq!(
        done["progress"]["rowsWritten"].as_u64(),
        Some(left as u64),
        "{done}"
    );
    assert_not_rewritten(&dst, &table, &claimed, restart, left).await;
    // The values of `n` written before it was dropped are gone with it.
    assert_eq!(
        assert_same(&src, &table, &dst, &table, "p, c, v", "p, c, v", &[]).await,
        rows
    );
}

/// One run at a time writes a savepoint directory: a second run of the job, in the same
/// daemon or in another one, is refused with 409 while the first runs, and runs once it ended.
#[tokio::test]
async fn a_second_run_is_refused_while_the_first_holds_the_savepoints_directory() {
    let Fixture { ks, daemon, .. } = Fixture::rows("it_resume_lock", 2_000, 0, 10).await;
    let sp_dir = daemon.home().path().join("savepoints");
    let yaml = with_savepoints(&job(ks, "t", "", "  rowsPerSecond: 100\n", ""), &sp_dir, "");
    let first = daemon.submit_job("/api/v1/migrations", &yaml).await;
    let other = Daemon::fresh("").await;
    for d in [&daemon, &other] {
        let (status, body) = d
            .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
            .await;
        assert_eq!(status, 409, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("in use by another run")
                && message.contains(&format!(
                    "process {}",
                    listener_pid(&daemon.addr.to_string())
                )),
            "{message}"
        );
    }
    let (status, body) = daemon
        .post_json(&format!("/api/v1/migrations/{first}/cancel"), &Value::Null)
        .await;
    assert!(status < 300, "{body}");
    daemon
        .wait_job(&first, WAIT, |j| j["state"] == "CANCELLED")
        .await;
    // Ended: the directory is free again, for the other daemon too.
    let again = other.submit_job("/api/v1/migrations", &yaml).await;
    other
        .post_json(&format!("/api/v1/migrations/{again}/cancel"), &Value::Null)
        .await;
}
