//! Parquet ↔ CQL against the real clusters, with files checked and written by independent
//! Parquet implementations (pyarrow and DuckDB, from `scripts/testenv`): an export and a load
//! back that keep every cell, writetime and TTL of a table with every CQL type; files written
//! by pyarrow loaded; a `kill -9` mid-load resumed with finished files skipped; ScyllaDB
//! Migrator's legacy mode; S3 on moto; and bad inputs refused before anything is written.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use test_support::cql::{
    assert_same, clusters, dst_addr, exec, fresh_keyspace, raw_rows, src_addr,
};
use test_support::{Daemon, Home, ended};

const WAIT: Duration = Duration::from_secs(180);

/// Runs a Python script with pyarrow and DuckDB; returns what it printed.
pub(crate) fn python(script: &str) -> String {
    let py = std::env::var("DROVER_TEST_PARQUET_PYTHON")
        .expect("DROVER_TEST_PARQUET_PYTHON (source target/testenv/env after scripts/testenv up)");
    let out = std::process::Command::new(py)
        .arg("-c")
        .arg(script)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "python failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn host_port(addr: &str) -> (String, String) {
    let (h, p) = addr.rsplit_once(':').unwrap();
    (h.to_string(), p.to_string())
}

/// A Parquet → CQL job file.
pub(crate) fn load_job(
    path: &str,
    ks: &str,
    table: &str,
    extra_source: &str,
    extra: &str,
) -> String {
    let (h, p) = host_port(&dst_addr());
    format!(
        "source:\n  type: parquet\n  path: {path}\n{extra_source}target:\n  type: scylla\n  host: {h}\n  port: {p}\n  keyspace: {ks}\n  table: {table}\n{extra}"
    )
}

/// A CQL → Parquet job file.
fn export_job(ks: &str, table: &str, path: &str, extra_source: &str, extra_target: &str) -> String {
    let (h, p) = host_port(&src_addr());
    format!(
        "source:\n  type: cassandra\n  host: {h}\n  port: {p}\n  keyspace: {ks}\n  table: {table}\n  splitCount: 8\n{extra_source}target:\n  type: parquet\n  path: {path}\n{extra_target}"
    )
}

const ALL_TYPES: &str = "CREATE TYPE $ks.addr (street text, no int);
    CREATE TABLE $ks.t (
      k uuid, c int, s text static,
      a ascii, bi bigint, bl blob, bo boolean, d date, de decimal, db double, du duration,
      f float, i inet, n int, si smallint, ti tinyint, tm time, ts timestamp, tu timeuuid,
      tx text, vi varint,
      li list<int>, se set<text>, ma map<text, int>, fl frozen<list<bigint>>,
      ud frozen<addr>, tp tuple<int, text>, ve vector<float, 3>,
      PRIMARY KEY (k, c))";

fn key(k: usize) -> String {
    format!("{k:08x}-0000-4000-8000-{k:012x}")
}

/// Every CQL type exported with preserveTimestamps and loaded back into another cluster:
/// identical cell by cell, writetimes and TTLs included (collection elements each with their
/// own); pyarrow and DuckDB read the files drover wrote.
#[tokio::test]
async fn every_cql_type_round_trips_through_parquet_with_writetimes_and_ttls() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_roundtrip";
    fresh_keyspace(&src, &dst, ks, ALL_TYPES).await;
    let rows = 40usize;
    for k in 0..rows {
        let ttl = if k % 3 == 0 { " AND TTL 86400" } else { "" };
        let de = if k % 2 == 0 {
            "-12.340".to_string()
        } else {
            format!("1{k}E+5")
        };
        let ts = if k == 0 {
            "-62135596800000".to_string()
        } else {
            (1_700_000_000_123i64 + k as i64).to_string()
        };
        let vi = if k == 1 {
            "123456789012345678901234567890".to_string()
        } else {
            k.to_string()
        };
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.t (k, c, s, a, bi, bl, bo, d, de, db, du, f, i, n, si, ti, tm, ts, tu, tx, vi, fl, ud, tp, ve) \
                 VALUES ({key}, {k}, 'static-{k}', 'ascii', {bi}, 0xcafe{k:02x}, {bo}, '2024-02-{day:02}', {de}, {k}.25, 1mo2d3ns, \
                 1.5, '10.0.0.{k}', {k}, -{k}, 7, '12:34:56.123456789', {ts}, now(), 'ünïcode {k}', {vi}, \
                 [1, 2, {k}], {{street: 'Main', no: {k}}}, ({k}, 'x'), [1.0, 2.5, -3.0]) \
                 USING TIMESTAMP {wt}{ttl}",
                key = key(k),
                bi = i64::MAX - k as i64,
                bo = k % 2 == 0,
                day = k % 28 + 1,
                wt = 1_600_000_000_000_000i64 + k as i64,
            ),
        )
        .await;
        if k % 2 == 0 {
            // Collection elements with writetimes (and a TTL) of their own.
            exec(
                &src,
                &format!(
                    "UPDATE {ks}.t USING TIMESTAMP {} AND TTL 50000 SET li = li + [9], se = se + {{'a', 'b'}}, ma = ma + {{'x': 1}} WHERE k = {} AND c = {k}",
                    1_650_000_000_000_000i64 + k as i64,
                    key(k)
                ),
            )
            .await;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let export = export_job(
        ks,
        "t",
        &out.display().to_string(),
        "  preserveTimestamps: true\n",
        "  compression: zstd\n",
    );
    let job = daemon.run_job("/api/v1/migrations", &export, WAIT).await;
    assert_eq!(job["progress"]["rowsWritten"], rows as u64, "{job}");
    // Independent readers see every row, and the writetime/TTL columns ScyllaDB Migrator names.
    let counted = python(&format!(
        "import pyarrow.parquet as pq, duckdb\n\
         t = pq.read_table('{d}')\n\
         names = set(t.column_names)\n\
         assert '__migrator_meta_tx_writetime' in names and '__migrator_meta_tx_ttl' in names, names\n\
         assert t.schema.field('ts').type.unit == 'ms', t.schema.field('ts').type\n\
         n = duckdb.sql(\"select count(*) from read_parquet('{d}/*.parquet')\").fetchone()[0]\n\
         print(t.num_rows, n)",
        d = out.display()
    ));
    assert_eq!(counted, format!("{rows} {rows}"));
    let files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("part-") && f.ends_with(".zstd.parquet")),
        "{files:?}"
    );

    let load = load_job(&out.display().to_string(), ks, "t", "", "");
    let job = daemon.run_job("/api/v1/migrations", &load, WAIT).await;
    assert_eq!(job["progress"]["rowsRead"], rows as u64, "{job}");
    let regular = [
        "a", "bi", "bl", "bo", "d", "de", "db", "du", "f", "i", "n", "si", "ti", "tm", "ts", "tu",
        "tx", "vi", "li", "se", "ma", "fl", "ud", "tp", "ve",
    ];
    let mut select = vec!["k".to_string(), "c".into(), "s".into()];
    select.extend(regular.iter().map(|c| c.to_string()));
    let mut ttl_columns = Vec::new();
    for c in ["s"].iter().chain(&regular).filter(|c| **c != "ve") {
        select.push(format!("writetime({c})"));
        ttl_columns.push(select.len());
        select.push(format!("ttl({c})"));
    }
    let select = select.join(", ");
    let compared = assert_same(
        &src,
        &format!("{ks}.t"),
        &dst,
        &format!("{ks}.t"),
        &select,
        &select,
        &ttl_columns,
    )
    .await;
    assert_eq!(compared, rows);
}

/// Files written by pyarrow — several row groups, dictionary-encoded strings, nested lists,
/// maps and structs, nulls, every primitive type — load into a CQL table; rows with a null key
/// are skipped and counted; a renamed column lands in its target column.
#[tokio::test]
async fn files_written_by_pyarrow_load_with_nested_types_and_null_keys() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_pyarrow";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TYPE $ks.pt (x int, y text);
         CREATE TABLE $ks.t (id bigint PRIMARY KEY, name text, score double, small smallint,
           flag boolean, day date, at timestamp, price decimal, raw blob, tags list<text>,
           attrs map<text, bigint>, point frozen<pt>, total varint, u uuid)",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    python(&format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq, datetime, decimal, uuid
for f in range(3):
    n = 5000
    ids = [None if (f == 2 and i % 1000 == 7) else f * n + i for i in range(n)]
    t = pa.table({{
        'id': pa.array(ids, pa.int64()),
        'label': pa.array(['name-%d' % (i % 10) for i in range(n)]).dictionary_encode(),
        'score': pa.array([i / 4 if i % 5 else None for i in range(n)], pa.float64()),
        'small': pa.array([i % 30000 for i in range(n)], pa.int16()),
        'flag': pa.array([i % 2 == 0 for i in range(n)]),
        'day': pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(n)]),
        'at': pa.array([datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=i) for i in range(n)], pa.timestamp('us', tz='UTC')),
        'price': pa.array([decimal.Decimal('%d.%02d' % (i, i % 100)) for i in range(n)], pa.decimal128(12, 2)),
        'raw': pa.array([bytes([i % 256]) * 3 for i in range(n)], pa.binary()),
        'tags': pa.array([['a', 'b%d' % i] if i % 3 else [] for i in range(n)], pa.list_(pa.string())),
        'attrs': pa.array([[('k', i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
        'point': pa.array([{{'x': i, 'y': None if i % 2 else 'p'}} for i in range(n)], pa.struct([('x', pa.int32()), ('y', pa.string())])),
        'total': pa.array([i * 1000000 for i in range(n)], pa.uint64()),
        'u': pa.array([str(uuid.UUID(int=i)) for i in range(n)]),
    }})
    pq.write_table(t, '{d}/part-%d.parquet' % f, row_group_size=1000, use_dictionary=True)
open('{d}/_SUCCESS', 'w').close()
"#
    ));
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = load_job(
        &d.to_string(),
        ks,
        "t",
        "  batchSize: 700\n",
        "renames:\n  - from: label\n    to: name\n",
    );
    let job = daemon.run_job("/api/v1/migrations", &job, WAIT).await;
    let p = &job["progress"];
    assert_eq!(p["rowsRead"], 15000, "{job}");
    assert_eq!(
        p["rowsDropped"], 5,
        "rows with a null id are left out and counted: {job}"
    );
    assert_eq!(p["unitsTotal"], 3, "{job}");
    let rows = raw_rows(&dst, &format!("{ks}.t"), "id").await;
    assert_eq!(rows.len(), 14995);
    let row = dst
        .query_unpaged(
            format!("SELECT name, score, small, flag, day, price, total, point, tags, attrs, at, u, raw FROM {ks}.t WHERE id = 5003"),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    type Row = (
        String,
        Option<f64>,
        i16,
        bool,
        scylla::value::CqlDate,
        scylla::value::CqlDecimal,
        scylla::value::CqlVarint,
        scylla::value::CqlValue,
        Option<Vec<String>>,
        std::collections::HashMap<String, i64>,
        scylla::value::CqlTimestamp,
        uuid::Uuid,
        Vec<u8>,
    );
    let r: Row = row.rows::<Row>().unwrap().next().unwrap().unwrap();
    assert_eq!(
        (r.0.as_str(), r.1, r.2, r.3),
        ("name-3", Some(0.75), 3, false)
    );
    assert_eq!(r.4.0, (1u32 << 31) + 18265, "2020-01-04");
    let (unscaled, scale) = r.5.as_signed_be_bytes_slice_and_exponent();
    assert_eq!((unscaled, scale), (&[0x01, 0x2f][..], 2), "3.03");
    assert_eq!(
        r.6.as_signed_bytes_be_slice(),
        &3_000_000i32.to_be_bytes()[1..]
    );
    assert_eq!(
        r.7,
        scylla::value::CqlValue::UserDefinedType {
            keyspace: ks.to_string(),
            name: "pt".into(),
            fields: vec![
                ("x".into(), Some(scylla::value::CqlValue::Int(3))),
                ("y".into(), None)
            ],
        }
    );
    // i = 3 had an empty list: CQL has no empty collection, it reads as null.
    assert_eq!(r.8, None);
    assert_eq!(r.9.get("k"), Some(&3));
    assert_eq!(
        r.10.0, 1_704_067_200_003,
        "microsecond timestamps that are whole milliseconds load exactly"
    );
    assert_eq!(r.11, uuid::Uuid::from_u128(3));
    assert_eq!(r.12, vec![3u8; 3]);
}

fn newest_savepoint(dir: &Path) -> Option<Value> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("savepoint_"))
        .collect();
    names.sort();
    let text = std::fs::read_to_string(dir.join(names.pop()?)).ok()?;
    yaml_serde::from_str(&text).ok()
}

/// `kill -9` in the middle of a multi-file load: the restarted daemon resumes the job by
/// itself and skips the files the last savepoint recorded; the table ends complete. Then
/// ScyllaDB Migrator's legacy mode (no file tracking) loads the same files into another table
/// with the same content, and records no file.
#[tokio::test]
async fn kill_9_mid_load_resumes_skipping_finished_files_and_legacy_mode_matches() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_resume";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p bigint, c int, v text, PRIMARY KEY (p, c));
         CREATE TABLE $ks.legacy (p bigint, c int, v text, PRIMARY KEY (p, c))",
    )
    .await;
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display();
    let files = 8;
    let per_file = 4000;
    python(&format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq
for f in range({files}):
    n = {per_file}
    pq.write_table(pa.table({{'p': pa.array([f * n + i // 10 for i in range(n)], pa.int64()),
        'c': pa.array([i % 10 for i in range(n)], pa.int32()),
        'v': ['file %d row %d' % (f, i) for i in range(n)]}}), '{d}/f%02d.parquet' % f, row_group_size=1000)
"#
    ));
    let sp = tempfile::tempdir().unwrap();
    let home = Home::new();
    let mut daemon = Daemon::start(&home, "").await;
    // One file at a time and a write rate limit: the load takes seconds, so the kill lands
    // in the middle.
    let job = load_job(
        &d.to_string(),
        ks,
        "t",
        "  maxConcurrentFiles: 1\n",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            sp.path().display()
        ),
    )
    .replace("  table: t\n", "  table: t\n  rowsPerSecond: 6000\n");
    let id = daemon.submit_job("/api/v1/migrations", &job).await;
    // The footers' row counts are exact: the total is known before the first file is done,
    // and the share shown is the rows written of it (issue 43).
    let early = daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["rowsWritten"].as_u64().unwrap_or(0) > 0 || ended(j)
        })
        .await;
    let written = early["progress"]["rowsWritten"].as_u64().unwrap();
    assert_eq!(
        early["progress"]["rowsTotalEstimate"].as_u64(),
        Some((files * per_file) as u64),
        "{early}"
    );
    assert_eq!(
        early["progress"]["progressPermille"].as_u64(),
        Some(written * 1000 / (files * per_file) as u64),
        "{early}"
    );
    let recorded = test_support::poll(WAIT, async || match newest_savepoint(sp.path()) {
        Some(doc)
            if doc["skipParquetFiles"]
                .as_array()
                .is_some_and(|a| a.len() >= 2) =>
        {
            Ok(doc)
        }
        other => Err(other),
    })
    .await
    .unwrap_or_else(|last| panic!("no savepoint recorded 2 files: {last:?}\n{}", daemon.logs()));
    daemon.kill9();
    let done = recorded["skipParquetFiles"].as_array().unwrap().len();
    assert!(done < files, "the kill came too late: {recorded}");
    for f in recorded["skipParquetFiles"].as_array().unwrap() {
        let f = f.as_str().unwrap();
        assert!(
            f.starts_with(&format!("file:{d}/f")),
            "recorded as Spark names local files: {f}"
        );
        assert!(
            recorded["parquetFileVersions"][f]
                .as_str()
                .unwrap()
                .starts_with("size="),
            "{recorded}"
        );
    }
    let daemon = Daemon::start(&home, "").await;
    let state = daemon
        .wait_job(&id, WAIT, |j| {
            j["state"] == "SUCCEEDED" || j["state"] == "FAILED"
        })
        .await;
    assert_eq!(state["state"], "SUCCEEDED", "{state}\n{}", daemon.logs());
    let skipped = state["progress"]["unitsSkipped"].as_u64().unwrap();
    assert!(
        skipped as usize >= done,
        "finished files are skipped: {state}"
    );
    // The resumed run's total is the rows of the files it read: the skipped ones are not in it.
    assert_eq!(
        state["progress"]["rowsTotalEstimate"].as_u64(),
        Some(((files - skipped as usize) * per_file) as u64),
        "{state}"
    );
    assert_eq!(
        state["progress"]["rowsTotalEstimate"], state["progress"]["rowsWritten"],
        "{state}"
    );
    assert_eq!(
        raw_rows(&dst, &format!("{ks}.t"), "p").await.len(),
        files * per_file
    );
    let last = newest_savepoint(sp.path()).unwrap();
    assert_eq!(
        last["skipParquetFiles"].as_array().unwrap().len(),
        files,
        "{last}"
    );

    // Legacy mode: nothing recorded, the same rows.
    let sp2 = tempfile::tempdir().unwrap();
    let legacy = load_job(
        &d.to_string(),
        ks,
        "legacy",
        "",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 300\n  enableParquetFileTracking: false\n",
            sp2.path().display()
        ),
    );
    daemon.run_job("/api/v1/migrations", &legacy, WAIT).await;
    let last = newest_savepoint(sp2.path()).unwrap();
    assert_eq!(
        last["skipParquetFiles"].as_array().map(Vec::len),
        Some(0),
        "{last}"
    );
    let again = daemon.run_job("/api/v1/migrations", &legacy, WAIT).await;
    assert_eq!(
        again["progress"]["unitsSkipped"], 0,
        "legacy mode reads every file again: {again}"
    );
    assert_same(
        &dst,
        &format!("{ks}.t"),
        &dst,
        &format!("{ks}.legacy"),
        "p, c, v",
        "p, c, v",
        &[],
    )
    .await;
}

/// A file changed after it was loaded is read again, with a warning, instead of skipped.
#[tokio::test]
async fn a_file_changed_since_it_was_loaded_is_read_again() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_changed";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p bigint PRIMARY KEY, v text)",
    )
    .await;
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display();
    let write = |n: usize, v: &str| {
        python(&format!(
            "import pyarrow as pa, pyarrow.parquet as pq\n\
             pq.write_table(pa.table({{'p': pa.array(range({n}), pa.int64()), 'v': ['{v}'] * {n}}}), '{d}/a.parquet')"
        ))
    };
    write(10, "old");
    let sp = tempfile::tempdir().unwrap();
    let job = load_job(
        &d.to_string(),
        ks,
        "t",
        "",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 300\n",
            sp.path().display()
        ),
    );
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    daemon.run_job("/api/v1/migrations", &job, WAIT).await;
    // Unchanged, the file is done: submitting the job again is refused (it would copy
    // nothing and succeed), naming the savepoint.
    let (status, same) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", job.clone())
        .await;
    assert_eq!(status, 409, "{same}");
    assert!(
        same["message"]
            .as_str()
            .is_some_and(|m| m.contains("records every unit of this migration as done")),
        "{same}"
    );
    std::thread::sleep(Duration::from_millis(20));
    write(20, "new");
    let changed = daemon.run_job("/api/v1/migrations", &job, WAIT).await;
    assert_eq!(changed["progress"]["unitsSkipped"], 0, "{changed}");
    assert_eq!(changed["progress"]["rowsWritten"], 20, "{changed}");
    assert!(
        daemon.logs().contains("changed since it was loaded"),
        "{}",
        daemon.logs()
    );
}

/// What cannot work is refused with 400 before anything is written, naming the file and
/// column: a missing path, a file that is not Parquet, a column that cannot convert, a
/// column the target lacks, an export over existing files (mode error), GCS.
#[tokio::test]
async fn bad_inputs_are_refused_naming_the_file_and_column() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_bad";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p bigint PRIMARY KEY, n int, v text)",
    )
    .await;
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let refused = async |yaml: &str| {
        let (status, body) = daemon
            .post_raw("/api/v1/migrations", "application/yaml", yaml.to_string())
            .await;
        assert_eq!(status, 400, "{yaml}\n{body}");
        body["message"].as_str().unwrap().to_string()
    };
    let m = refused(&load_job(&format!("{d}/nothing-here"), ks, "t", "", "")).await;
    assert!(
        m.contains("source.path") && m.contains("does not exist"),
        "{m}"
    );
    std::fs::write(format!("{d}/notes.parquet"), b"not parquet at all").unwrap();
    let m = refused(&load_job(&d, ks, "t", "", "")).await;
    assert!(
        m.contains("notes.parquet") && m.contains("not a readable Parquet file"),
        "{m}"
    );
    std::fs::remove_file(format!("{d}/notes.parquet")).unwrap();
    python(&format!(
        "import pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({{'p': pa.array([1], pa.int64()), 'n': ['seven']}}), '{d}/bad-type.parquet')"
    ));
    let m = refused(&load_job(&d, ks, "t", "", "")).await;
    assert!(
        m.contains("bad-type.parquet") && m.contains("\"n\"") && m.contains("CQL int"),
        "{m}"
    );
    std::fs::remove_file(format!("{d}/bad-type.parquet")).unwrap();
    python(&format!(
        "import pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({{'p': pa.array([1], pa.int64()), 'extra': [1]}}), '{d}/extra.parquet')"
    ));
    let m = refused(&load_job(&d, ks, "t", "", "")).await;
    assert!(
        m.contains("extra.parquet") && m.contains("\"extra\"") && m.contains("not a column"),
        "{m}"
    );
    let m = refused(&load_job("gs://bucket/x", ks, "t", "", "")).await;
    assert!(m.contains("GCS"), "{m}");
    // An export into a directory holding Parquet files: mode error (the default) refuses.
    let m = refused(&export_job(ks, "t", &d, "", "")).await;
    assert!(m.contains("target.path") && m.contains("mode"), "{m}");
    assert!(
        Path::new(&format!("{d}/extra.parquet")).exists(),
        "nothing was deleted"
    );
    let m = refused(&export_job(ks, "t", &d, "", "  compression: brotli\n")).await;
    assert!(m.contains("target.compression"), "{m}");
    let (status, _) = daemon.get("/api/v1/__health").await;
    assert_eq!(status, 200);
}

/// Export modes over an existing directory: ignore writes nothing, overwrite replaces what
/// was there; a finished export has no temporary file left.
#[tokio::test]
async fn export_modes_ignore_and_overwrite() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_modes";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p bigint PRIMARY KEY, v text)",
    )
    .await;
    for p in 0..100 {
        exec(
            &src,
            &format!("INSERT INTO {ks}.t (p, v) VALUES ({p}, 'v{p}')"),
        )
        .await;
    }
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    std::fs::write(format!("{d}/old.parquet"), b"someone else's").unwrap();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let ignore = daemon
        .run_job(
            "/api/v1/migrations",
            &export_job(ks, "t", &d, "", "  mode: ignore\n"),
            WAIT,
        )
        .await;
    assert_eq!(
        ignore["progress"]["rowsWritten"].as_u64().unwrap_or(0),
        0,
        "{ignore}"
    );
    daemon
        .run_job(
            "/api/v1/migrations",
            &export_job(ks, "t", &d, "", "  mode: overwrite\n  compression: none\n"),
            WAIT,
        )
        .await;
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.contains(&"old.parquet".to_string()), "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("part-") && !n.ends_with(".tmp")),
        "{names:?}"
    );
    let n = python(&format!(
        "import duckdb\nprint(duckdb.sql(\"select count(*), sum(p) from read_parquet('{d}/*.parquet')\").fetchone())"
    ));
    assert_eq!(n, "(100, 4950)");
}

/// S3 on moto: a table exported to an S3 prefix (multipart uploads) and loaded back from it;
/// a bucket that does not exist is refused naming it.
#[tokio::test]
async fn s3_export_and_load_on_moto() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_s3";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p bigint, c int, v text, PRIMARY KEY (p, c))",
    )
    .await;
    for p in 0..50 {
        exec(
            &src,
            &format!("INSERT INTO {ks}.t (p, c, v) VALUES ({p}, 1, 'v{p}') USING TTL 9000"),
        )
        .await;
    }
    let moto = std::env::var("DROVER_TEST_MOTO").expect("DROVER_TEST_MOTO");
    let bucket = "drover-it-parquet";
    let status = test_support::http_client()
        .put(format!("{moto}/{bucket}"))
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
    let (host, port) = moto.trim_start_matches("http://").rsplit_once(':').unwrap();
    let s3 = format!(
        "  credentials:\n    accessKey: test\n    secretKey: test\n  region: us-east-1\n  endpoint:\n    host: http://{host}\n    port: {port}\n"
    );
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let path = format!("s3a://{bucket}/export/t");
    daemon
        .run_job(
            "/api/v1/migrations",
            &export_job(
                ks,
                "t",
                &path,
                "  preserveTimestamps: true\n",
                &format!("  mode: overwrite\n{s3}"),
            ),
            WAIT,
        )
        .await;
    let load = load_job(&path, ks, "t", &s3, "");
    let job = daemon.run_job("/api/v1/migrations", &load, WAIT).await;
    assert_eq!(job["progress"]["rowsWritten"], 50, "{job}");
    let select = "p, c, v, writetime(v), ttl(v)";
    assert_same(
        &src,
        &format!("{ks}.t"),
        &dst,
        &format!("{ks}.t"),
        select,
        select,
        &[4],
    )
    .await;
    assert!(
        !daemon.logs().contains("secretKey: test"),
        "no secret in the logs"
    );
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            load_job("s3a://no-such-bucket-here/x", ks, "t", &s3, ""),
        )
        .await;
    assert!(
        status == 400 || status == 502 || status == 503,
        "{status} {body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("no-such-bucket-here"),
        "{body}"
    );
}

/// One unit of many pages (appends in flight together) makes one file holding every row, each
/// once.
#[tokio::test]
async fn a_unit_of_many_pages_lands_whole_in_one_file() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_pages";
    test_support::cql::rows_table(&src, &dst, ks, 20_000, 5_000, 50).await;
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job =
        export_job(ks, "t", &d, "  fetchSize: 300\n", "").replace("splitCount: 8", "splitCount: 1");
    let done = daemon.run_job("/api/v1/migrations", &job, WAIT).await;
    assert_eq!(done["progress"]["rowsWritten"], 20_000, "{done}");
    let n = python(&format!(
        "import duckdb\nprint(duckdb.sql(\"select count(*), count(distinct (p, c)) from read_parquet('{d}/*.parquet')\").fetchone())"
    ));
    assert_eq!(n, "(20000, 20000)");
}

/// A row with a value and no clustering value is a row with a null key, counted as dropped —
/// not taken for a partition of static cells only (which is what a CQL scan gives as a row
/// without clustering values, and then without regular values either). Before the MySQL
/// matrix found it, such a row vanished without being counted.
#[tokio::test]
async fn a_row_without_its_clustering_value_is_counted_as_dropped_not_lost() {
    let (src, dst) = clusters().await;
    let ks = "it_pq_null_ck";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p int, c int, v text, PRIMARY KEY (p, c))",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    python(&format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({{
    'p': pa.array([1, 1, 2], pa.int32()),
    'c': pa.array([1, None, 2], pa.int32()),
    'v': pa.array(['a', 'b', 'c']),
}}), '{d}/part-0.parquet')
"#
    ));
    let daemon = Daemon::fresh("").await;
    let job = load_job(&d.to_string(), ks, "t", "", "");
    let job = daemon.run_job("/api/v1/migrations", &job, WAIT).await;
    let p = &job["progress"];
    assert_eq!(p["rowsRead"], 3, "{job}");
    assert_eq!(p["rowsDropped"], 1, "the row without c is counted: {job}");
    let rows = raw_rows(&dst, &format!("{ks}.t"), "p, c").await;
    assert_eq!(rows.len(), 2, "{job}");
}
