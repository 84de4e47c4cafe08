//! Switching between ScyllaDB Migrator and drover in the middle of a CQL migration: Migrator's
//! own CQL job files (`tests/data/migrator-cql/`) parse unchanged, a savepoint in Migrator's
//! format (typed tokens, its defaults spelled out, its type names) resumes in drover, drover's
//! savepoints are written in that format with the very token-range pairs Migrator's reader
//! generates, and `validation.repairWritetimeStrategy` brings back (or not) a row deleted on
//! the target after the copy.
//!
//! ScyllaDB Migrator itself (Spark 4 with its assembly) is not run here: the savepoint below
//! is written in the shape its encoder writes (`MigratorConfig.scala`, `SourceSettings.scala`,
//! `TargetSettings.scala` at commit 87e9511), and the ranges of Migrator's reader are the
//! Spark Cassandra Connector's splits, checked against worked examples in
//! `savepoints::ranges`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use drover::engine::config::JobConfig;
use drover::savepoints::ranges::{TokenRange, plan_units};
use serde_json::Value;
use test_support::cql::{Fixture, exec, job, raw_rows};

const WAIT: Duration = Duration::from_secs(120);

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrator-cql")
}

#[test]
fn every_migrator_cql_job_file_is_accepted_unchanged() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".example"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 9, "{names:?}");
    for name in &names {
        let text = std::fs::read_to_string(fixtures_dir().join(name)).unwrap();
        let job = JobConfig::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        match name.as_str() {
            "cassandra-to-scylla-renames.yaml" => {
                assert_eq!(job.renames.len(), 1, "{name}");
                assert_eq!(job.target_name("bar"), "quux");
            }
            "cassandra-to-scylla-copy-missing-rows-fixed-target-write-settings.yaml" => {
                assert!(job.validation.copy_missing_rows, "{name}");
                assert!(!job.validation.copy_differing_rows, "{name}");
                assert_eq!(job.validation.writetime_tolerance_millis, 1000);
            }
            _ => {}
        }
    }
}

/// The node tokens of the source cluster (one node).
async fn ring(s: &scylla::client::session::Session) -> Vec<i64> {
    let rows = raw_rows(s, "system.local", "tokens").await;
    let set = rows[0].cells[0].clone().expect("tokens");
    drover::connectors::cql::codec::split_collection(&set, false)
        .unwrap()
        .iter()
        .map(|t| String::from_utf8_lossy(&t[4..]).parse::<i64>().unwrap())
        .collect()
}

/// A pair as the connector writes it: a range to the end of the ring ends at the minimum.
fn pair(r: &TokenRange) -> (i64, i64) {
    (r.start, if r.end == i64::MAX { i64::MIN } else { r.end })
}

fn typed(t: i64) -> String {
    format!("type: long\n    value: {t}")
}

/// The savepoint ScyllaDB Migrator writes for `job` (circe-yaml, two-space indent), with
/// `pairs` done.
fn migrator_savepoint(ks: &str, dir: &Path, pairs: &[(i64, i64)]) -> String {
    let (sh, sp) = test_support::cql::src_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let (dh, dp) = test_support::cql::dst_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let ranges: String = pairs
        .iter()
        .map(|(a, b)| format!("- - {}\n  - {}\n", typed(*a), typed(*b)))
        .collect();
    format!(
        "source:\n  keyspace: {ks}\n  table: t\n  splitCount: 8\n  fetchSize: 1000\n  preserveTimestamps: false\n  \
         consistencyLevel: LOCAL_QUORUM\n  host: {sh}\n  port: {sp}\n  type: cassandra\n\
         target:\n  keyspace: {ks}\n  table: t\n  stripTrailingZerosForDecimals: false\n  consistencyLevel: LOCAL_QUORUM\n  \
         host: {dh}\n  port: {dp}\n  type: scylla\n\
         renames: null\n\
         savepoints:\n  intervalSeconds: 1\n  path: {}\n  enableParquetFileTracking: true\n\
         skipTokenRanges:\n{ranges}\
         skipSegments: null\nskipParquetFiles: null\nvalidation: null\n",
        dir.display()
    )
}

fn newest_savepoint(dir: &Path) -> Value {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("savepoint_") && n.ends_with(".yaml"))
        .collect();
    names.sort();
    let text = std::fs::read_to_string(dir.join(names.last().expect("a savepoint"))).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

#[tokio::test]
async fn savepoints_resume_across_scylla_migrator_and_drover_both_ways() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("mig_cql_sp", 4_000, 0, 10).await;
    let tokens = ring(&src).await;
    let units = plan_units(&tokens, 8);
    assert!(units.len() >= 8, "{units:?}");
    // Migrator finished every other of its ranges before it was stopped.
    let done: Vec<TokenRange> = units.iter().step_by(2).flatten().copied().collect();
    let done_pairs: Vec<(i64, i64)> = done.iter().map(pair).collect();
    let dir = daemon.home().path().join("savepoints");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("savepoint_1764672000000_0000000007.yaml"),
        migrator_savepoint(ks, &dir, &done_pairs),
    )
    .unwrap();

    // The operator's job file, resubmitted to drover: it resumes from Migrator's savepoint.
    let yaml = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 1\nrenames: null\n",
        job(ks, "t", "", "", "").replace("splitCount: 32", "splitCount: 8"),
        dir.display()
    );
    let finished = daemon.run_job("/api/v1/migrations", &yaml, WAIT).await;
    let in_done = |token: i64| done.iter().any(|r| r.start < token && token <= r.end);
    let source: Vec<(i64, i32, i32)> = raw_rows(&src, &format!("{ks}.t"), "token(p), p, c")
        .await
        .iter()
        .map(|r| {
            let t = drover::connectors::cql::codec::read_i64(&r.cells[0]).unwrap();
            let p = drover::connectors::cql::codec::read_i32(&r.cells[1]).unwrap();
            let c = drover::connectors::cql::codec::read_i32(&r.cells[2]).unwrap();
            (t, p, c)
        })
        .collect();
    let skipped = source.iter().filter(|(t, _, _)| in_done(*t)).count();
    assert!(skipped > 0 && skipped < source.len(), "{skipped}");
    let copied: BTreeSet<(i32, i32)> = raw_rows(&dst, &format!("{ks}.t"), "p, c")
        .await
        .iter()
        .map(|r| {
            (
                drover::connectors::cql::codec::read_i32(&r.cells[0]).unwrap(),
                drover::connectors::cql::codec::read_i32(&r.cells[1]).unwrap(),
            )
        })
        .collect();
    // Exactly the rows of the ranges Migrator had not finished: the others were skipped.
    let expected: BTreeSet<(i32, i32)> = source
        .iter()
        .filter(|(t, _, _)| !in_done(*t))
        .map(|(_, p, c)| (*p, *c))
        .collect();
    assert_eq!(copied, expected);
    assert_eq!(
        finished["progress"]["rowsRead"].as_u64(),
        Some((source.len() - skipped) as u64),
        "{finished}"
    );

    // drover's last savepoint, in Migrator's encoding, lists every range pair Migrator's
    // reader makes of this ring with splitCount 8: Migrator resuming from it skips them all.
    let saved = newest_savepoint(&dir);
    let entries = saved["skipTokenRanges"].as_array().expect("a list");
    let mut written = BTreeSet::new();
    for e in entries {
        let ends = e.as_array().expect("a pair");
        assert_eq!(ends.len(), 2, "{e}");
        for end in ends {
            assert_eq!(end["type"], "long", "{e}");
        }
        written.insert((
            ends[0]["value"].as_i64().unwrap(),
            ends[1]["value"].as_i64().unwrap(),
        ));
    }
    let all: BTreeSet<(i64, i64)> = units.iter().flatten().map(pair).collect();
    assert_eq!(written, all, "the savepoint's pairs are the connector's");
    // The document is a job file Migrator reads: its keys, its shapes.
    assert_eq!(saved["source"]["splitCount"], 8);
    assert!(saved["renames"].is_null() || saved["renames"].as_array().is_some());
}

#[tokio::test]
async fn repair_writetime_strategy_decides_whether_a_row_deleted_on_the_target_comes_back() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new(
        "mig_cql_repair",
        "CREATE TABLE $ks.t (k int PRIMARY KEY, v text)",
    )
    .await;
    for k in 0..4 {
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.t (k, v) VALUES ({k}, 'v{k}') USING TIMESTAMP {}",
                1000 + k
            ),
        )
        .await;
    }
    let copy = job(ks, "t", "  preserveTimestamps: true\n", "", "");
    daemon.run_job("/api/v1/migrations", &copy, WAIT).await;
    // Deleted on the target after the copy (a tombstone of now, newer than the source's).
    for k in [1, 2, 3] {
        exec(&dst, &format!("DELETE FROM {ks}.t WHERE k = {k}")).await;
    }
    let deleted_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let validate = |extra_target: &str, strategy: &str| {
        format!(
            "{}validation:\n  copyMissingRows: true\n  compareTimestamps: false\n{strategy}",
            job(ks, "t", "  preserveTimestamps: true\n", extra_target, "")
        )
    };
    let missing = |report: &Value| report["result"]["differences"]["missingRows"].as_u64();
    let present = async |k: i32| -> Option<i64> {
        raw_rows(&dst, &format!("{ks}.t WHERE k = {k}"), "writetime(v)")
            .await
            .first()
            .and_then(|r| drover::connectors::cql::codec::read_i64(&r.cells[0]))
    };

    // source (the default): written back with the source's writetime, under the tombstone.
    let report = daemon
        .run_job("/api/v1/validations", &validate("", ""), WAIT)
        .await;
    assert_eq!(missing(&report), Some(3), "{report}");
    assert_eq!(report["result"]["rowsCopied"], 3, "{report}");
    assert_eq!(
        present(1).await,
        None,
        "the tombstone hides the source writetime"
    );

    // coordinator: one time taken when the validation starts, newer than the deletions made
    // before it, but not than a deletion stamped later still (row 2's, an hour ahead).
    let later = deleted_at + 3_600_000_000;
    exec(
        &dst,
        &format!("DELETE FROM {ks}.t USING TIMESTAMP {later} WHERE k = 2"),
    )
    .await;
    let report = daemon
        .run_job(
            "/api/v1/validations",
            &validate("", "  repairWritetimeStrategy: Coordinator\n"),
            WAIT,
        )
        .await;
    assert_eq!(missing(&report), Some(3), "{report}");
    let back = present(1).await.expect("row 1 is back");
    assert!(back > deleted_at, "{back} not after {deleted_at}");
    assert_eq!(
        present(3).await,
        Some(back),
        "one repair time for every row"
    );
    assert_eq!(present(2).await, None, "a newer deletion stays");

    // config: target.writeWritetimestampInuS, newer than that deletion too.
    let fixed = later + 1;
    let report = daemon
        .run_job(
            "/api/v1/validations",
            &validate(
                &format!("  writeWritetimestampInuS: {fixed}\n"),
                "  repairWritetimeStrategy: CONFIG\n",
            ),
            WAIT,
        )
        .await;
    assert_eq!(missing(&report), Some(1), "{report}");
    assert_eq!(present(2).await, Some(fixed));
    // Rows that were not missing are not written: their writetimes stay.
    assert_eq!(present(1).await, Some(back));
    assert_eq!(present(0).await, Some(1000));
    let report = daemon
        .run_job("/api/v1/validations", &validate("", ""), WAIT)
        .await;
    assert_eq!(missing(&report), Some(0), "{report}");

    // config without target.writeWritetimestampInuS: refused before anything runs.
    let (status, body) = daemon
        .post_raw(
            "/api/v1/validations",
            "application/yaml",
            validate("", "  repairWritetimeStrategy: config\n"),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("validation.repairWritetimeStrategy")
            && message.contains("writeWritetimestampInuS"),
        "{message}"
    );
}

fn real(name: &str) -> String {
    std::fs::read_to_string(fixtures_dir().join("real").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn real_ranges(name: &str) -> BTreeSet<(i64, i64)> {
    real(name)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (a, b) = l.split_once(',').unwrap();
            (a.trim().parse().unwrap(), b.trim().parse().unwrap())
        })
        .collect()
}

/// The token ranges ScyllaDB Migrator's reader generated on a real run (its Spark connector's
/// splits of the test cluster's 16-vnode ring) are the pairs drover plans, for splitCount 8
/// and 64: drover's savepoints name the ranges Migrator looks for.
#[test]
fn drover_splits_the_ring_into_the_pairs_migrators_reader_made() {
    let tokens: Vec<i64> = real("source-node-tokens.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 16);
    for (split, file) in [(8, "ranges-split8.txt"), (64, "ranges-split64.txt")] {
        let planned: BTreeSet<(i64, i64)> = plan_units(&tokens, split)
            .iter()
            .flatten()
            .map(pair)
            .collect();
        assert_eq!(planned, real_ranges(file), "splitCount {split}");
    }
}

/// Savepoints written by ScyllaDB Migrator belong to the job file they were written for, read
/// as the ranges they list, and are written back by drover with the same pairs.
#[test]
fn migrators_own_savepoints_are_read_and_written_back_pair_for_pair() {
    use drover::savepoints::{Progress, identity};
    let job: Value = yaml_serde::from_str(&real("config-split8.yaml")).unwrap();
    for name in [
        "partial-savepoint-8ranges.yaml",
        "final-savepoint-split8.yaml",
    ] {
        let doc: Value = yaml_serde::from_str(&real(name)).unwrap();
        assert_eq!(identity(&doc), identity(&job), "{name} is of the job");
        let progress = Progress::from_document(&doc, drover::connectors::progress_keys())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut written = serde_json::json!({});
        progress.into_document(&mut written, drover::connectors::progress_keys());
        let set = |v: &Value| -> BTreeSet<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|p| p.to_string())
                .collect()
        };
        assert_eq!(
            set(&written["skipTokenRanges"]),
            set(&doc["skipTokenRanges"]),
            "{name}"
        );
    }
    let partial: Value = yaml_serde::from_str(&real("partial-savepoint-8ranges.yaml")).unwrap();
    let done = Progress::from_document(&partial, drover::connectors::progress_keys()).unwrap();
    let tokens: Vec<i64> = real("source-node-tokens.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap())
        .collect();
    // Resumed by drover with the job's splitCount, exactly the 8 recorded units are skipped.
    let plan = drover::connectors::cql::units::plan(
        &tokens,
        8,
        done.ranges(&drover::savepoints::TOKEN_RANGES),
    );
    assert_eq!((plan.total, plan.skipped), (16, 8));
}
