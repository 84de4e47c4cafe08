//! ScyllaDB Migrator's own Parquet job files (`tests/data/migrator-parquet/`): every one is
//! read by drover's parser as it is (its GCS savepoints included), and the
//! scenarios run the way Migrator's tests run them, with only addresses and paths changed:
//! its CQL → Parquet → CQL timestamp round trip, a single file, parallel files, and the
//! legacy/new mode comparison (the same table content either way).
//!
//! Not run here: `bench-e2e-*` (benchmarks: `bench/`), the resume files (the `kill -9` resume
//! of `parquet.rs` covers them), `parquet-to-scylla-gcs-savepoints` (GCS savepoints run in
//! `savepoint_places.rs`, against the GCS emulator).

use std::path::{Path, PathBuf};
use std::time::Duration;

use drover::connectors::cql::{CqlSource, CqlTarget};
use drover::connectors::parquet::{ParquetSource, ParquetTarget};
use drover::engine::config::JobConfig;
use test_support::cql::{clusters, dst_addr, exec, fresh_keyspace, raw_rows, src_addr};
use test_support::{Daemon, Home};

use super::parquet::python;

const WAIT: Duration = Duration::from_secs(180);

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrator-parquet")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_migrator_parquet_job_file_is_accepted_gcs_savepoints_included() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 20, "{names:?}");
    for name in &names {
        let job = JobConfig::parse(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        if name == "parquet-to-scylla-gcs-savepoints.yaml" {
            let place = job.savepoints.as_ref().unwrap().location.as_ref().unwrap();
            assert_eq!(
                place.describe(),
                "gs://migrator-savepoints/parquet-gcs-savepoints"
            );
        }
        let (parquet, cql) = (
            (job.source.get::<ParquetSource>().is_some()) as u8
                + (job.target.get::<ParquetTarget>().is_some()) as u8,
            (job.source.get::<CqlSource>().is_some()) as u8
                + (job.target.get::<CqlTarget>().is_some()) as u8,
        );
        assert_eq!((parquet, cql), (1, 1), "{name}: not a Parquet job");
    }
}

/// A Migrator job file with the test clusters' addresses, keyspace `ks`, and `/app/…` paths
/// under `root`.
fn remap(name: &str, ks: &str, root: &Path) -> String {
    let (sh, _) = src_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let (dh, _) = dst_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    fixture(name)
        .replace("host: cassandra", &format!("host: {sh}"))
        .replace("host: scylla", &format!("host: {dh}"))
        .replace("keyspace: test", &format!("keyspace: {ks}"))
        .replace("/app/", &format!("{}/", root.display()))
}

/// Migrator's `CqlToParquetToScyllaTimestampRoundTripTest` with its own two job files: a row
/// with TTL and writetime, and one with a writetime only, keep both through Parquet.
#[tokio::test]
async fn migrator_timestamp_round_trip_files() {
    let (src, dst) = clusters().await;
    let ks = "it_pqm_ts";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.timestamptest (id text PRIMARY KEY, foo text, bar int)",
    )
    .await;
    exec(&src, &format!("INSERT INTO {ks}.timestamptest (id, foo, bar) VALUES ('row1', 'hello', 42) USING TTL 86400 AND TIMESTAMP 1000000000000")).await;
    exec(&src, &format!("INSERT INTO {ks}.timestamptest (id, foo, bar) VALUES ('row2', 'world', 99) USING TIMESTAMP 1000000000000")).await;
    let root = tempfile::tempdir().unwrap();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    daemon
        .run_job(
            "/api/v1/migrations",
            &remap("cassandra-to-parquet-timestamps.yaml", ks, root.path()),
            WAIT,
        )
        .await;
    daemon
        .run_job(
            "/api/v1/migrations",
            &remap("parquet-to-scylla-timestamps.yaml", ks, root.path()),
            WAIT,
        )
        .await;
    let rows = dst
        .query_unpaged(
            format!("SELECT id, foo, bar, TTL(foo), WRITETIME(foo) FROM {ks}.timestamptest"),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let mut rows: Vec<(String, String, i32, Option<i32>, i64)> =
        rows.rows().unwrap().map(Result::unwrap).collect();
    rows.sort();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].1.as_str(), rows[0].2, rows[0].4),
        ("hello", 42, 1_000_000_000_000)
    );
    let ttl = rows[0].3.unwrap();
    assert!(ttl > 86400 - 300 && ttl <= 86400, "{ttl}");
    assert_eq!(
        (rows[1].1.as_str(), rows[1].2, rows[1].3, rows[1].4),
        ("world", 99, None, 1_000_000_000_000)
    );
}

/// `parquet-to-scylla-basic` (one file), `parquet-to-scylla-parallel` (several), and the
/// legacy/new mode comparison: the same files give the same table either way.
#[tokio::test]
async fn migrator_basic_parallel_and_mode_comparison_files() {
    let (src, dst) = clusters().await;
    let ks = "it_pqm_basic";
    let ddl = "CREATE TABLE $ks.basictest (id text PRIMARY KEY, foo text, bar int);
               CREATE TABLE $ks.paralleltest (id text PRIMARY KEY, foo text, bar int);
               CREATE TABLE $ks.comparison (id text PRIMARY KEY, foo text, bar int)";
    fresh_keyspace(&src, &dst, ks, ddl).await;
    let root = tempfile::tempdir().unwrap();
    let r = root.path().display();
    python(&format!(
        r#"
import os, pyarrow as pa, pyarrow.parquet as pq
p = '{r}/parquet'
for d in ['parallel', 'comparison-data']:
    os.makedirs(p + '/' + d, exist_ok=True)
def t(prefix, n):
    return pa.table({{'id': ['%s-%d' % (prefix, i) for i in range(n)], 'foo': ['foo%d' % i for i in range(n)], 'bar': pa.array(range(n), pa.int32())}})
pq.write_table(t('basic', 3), p + '/basic.parquet')
for f in range(4):
    pq.write_table(t('par%d' % f, 250), p + '/parallel/part-%d.parquet' % f)
    pq.write_table(t('cmp%d' % f, 100), p + '/comparison-data/part-%d.parquet' % f)
"#
    ));
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    for name in [
        "parquet-to-scylla-basic.yaml",
        "parquet-to-scylla-parallel.yaml",
    ] {
        daemon
            .run_job("/api/v1/migrations", &remap(name, ks, root.path()), WAIT)
            .await;
    }
    assert_eq!(
        raw_rows(&dst, &format!("{ks}.basictest"), "id").await.len(),
        3
    );
    assert_eq!(
        raw_rows(&dst, &format!("{ks}.paralleltest"), "id")
            .await
            .len(),
        1000
    );
    let mut contents = Vec::new();
    for name in [
        "parquet-to-scylla-legacy-comparison.yaml",
        "parquet-to-scylla-newmode-comparison.yaml",
    ] {
        exec(&dst, &format!("TRUNCATE {ks}.comparison")).await;
        daemon
            .run_job("/api/v1/migrations", &remap(name, ks, root.path()), WAIT)
            .await;
        let mut rows: Vec<_> = raw_rows(&dst, &format!("{ks}.comparison"), "id, foo, bar")
            .await
            .into_iter()
            .map(|r| r.cells)
            .collect();
        rows.sort();
        contents.push(rows);
    }
    assert_eq!(contents[0].len(), 400);
    assert_eq!(
        contents[0], contents[1],
        "legacy and new mode load the same rows"
    );
}
