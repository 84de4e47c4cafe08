//! CSV ↔ CQL against the real clusters, with files checked by readers that share no code with
//! drover: Python's `csv` module and DuckDB read what drover unloads, and cqlsh's `COPY TO`
//! writes files drover loads. A table of every type the format carries, with hostile text,
//! edge values, writetimes and TTLs, is unloaded and loaded back into another cluster and
//! compared there cell by cell through the driver; bad files are refused naming the file, the
//! line and the column.

use std::time::Duration;

use test_support::cql::{
    assert_same, assert_same_aged, clusters, dst_addr, exec, fresh_keyspace, src_addr,
};
use test_support::{Daemon, Home};

use crate::parquet::python;

const WAIT: Duration = Duration::from_secs(180);

fn host_port(addr: &str) -> (String, String) {
    let (h, p) = addr.rsplit_once(':').unwrap();
    (h.to_string(), p.to_string())
}

/// A CQL → CSV job file.
fn unload_job(ks: &str, table: &str, path: &str, extra_source: &str, extra_target: &str) -> String {
    unload_as("csv", ks, table, path, extra_source, extra_target)
}

/// A CQL → CSV or JSON (`format`) job file.
fn unload_as(
    format: &str,
    ks: &str,
    table: &str,
    path: &str,
    extra_source: &str,
    extra_target: &str,
) -> String {
    let (h, p) = host_port(&src_addr());
    format!(
        "source:\n  type: cassandra\n  host: {h}\n  port: {p}\n  keyspace: {ks}\n  table: {table}\n  splitCount: 8\n{extra_source}target:\n  type: {format}\n  path: {path}\n{extra_target}"
    )
}

/// A CSV → CQL job file.
fn load_job(path: &str, ks: &str, table: &str, extra_source: &str) -> String {
    load_as("csv", path, ks, table, extra_source)
}

/// A CSV or JSON (`format`) → CQL job file.
fn load_as(format: &str, path: &str, ks: &str, table: &str, extra_source: &str) -> String {
    let (h, p) = host_port(&dst_addr());
    format!(
        "source:\n  type: {format}\n  path: {path}\n{extra_source}target:\n  type: scylla\n  host: {h}\n  port: {p}\n  keyspace: {ks}\n  table: {table}\n"
    )
}

/// Every type a CSV cell holds exactly, frozen collections, tuples and UDTs included (their
/// elements share the cell's writetime); the non-frozen ones are in `m`.
const TABLES: &str = "CREATE TYPE $ks.addr (street text, no int, tags frozen<set<text>>);
    CREATE TABLE $ks.t (
      k uuid, c int, s text static,
      a ascii, bi bigint, bl blob, bo boolean, d date, de decimal, db double, du duration,
      f float, i inet, n int, si smallint, ti tinyint, tm time, ts timestamp, tu timeuuid,
      tx text, vi varint,
      fl frozen<list<bigint>>, fs frozen<set<text>>, fm frozen<map<text, double>>,
      ud frozen<addr>, tp tuple<int, text, blob>, ve vector<float, 3>,
      PRIMARY KEY (k, c));
    CREATE TABLE $ks.m (k int PRIMARY KEY, li list<int>, se set<text>, ma map<int, text>, ud addr);
    CREATE TABLE $ks.st (k int, c1 text, c2 int, s int static, v int, PRIMARY KEY (k, c1, c2))";

fn key(k: usize) -> String {
    format!("{k:08x}-0000-4000-8000-{k:012x}")
}

/// Text that a CSV writer must quote and escape, and a reader must give back unchanged.
const HOSTILE: [&str; 8] = [
    "",
    "plain",
    "a,b",
    "say \"hi\"",
    "back\\slash \\\" mixed",
    "two\nlines\r\nand CR",
    "\"starts with a quote",
    " spaced ü 中文 😀 ",
];

/// The source rows of `t`: edge values of every type, a row of nulls, statics, writetimes
/// and TTLs of their own per cell.
async fn fill(src: &scylla::client::session::Session, ks: &str, rows: usize) {
    for k in 0..rows {
        let text = HOSTILE[k % HOSTILE.len()].replace('\'', "''");
        let ttl = if k % 3 == 0 { 86_400 } else { 0 };
        let de = [
            "-12.340",
            "1E+5",
            "0.000000001",
            "123456789012345678901234567890.5",
        ][k % 4];
        let db = [
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "-0.0",
            "1.0E308",
            "5e-324",
            "0.1",
        ][k % 7];
        let db = if db.starts_with('\'') {
            format!("(double){}", db.trim_matches('\''))
        } else {
            db.to_string()
        };
        let f = ["1.5", "-0.0", "3.4028235E38", "1.0E-45"][k % 4];
        let ts = [
            "-62135596800000".to_string(),
            "253402300799999".to_string(),
            (1_700_000_000_123i64 + k as i64).to_string(),
            "0".to_string(),
        ][k % 4]
            .clone();
        let d = [
            "'1970-01-01'",
            "'9999-12-31'",
            "'0001-01-01'",
            "'2024-02-29'",
        ][k % 4];
        let du = ["1mo2d3ns", "-1y2mo3d4h5m6s7ms8us9ns", "0s", "P1W"][k % 4];
        let tm = [
            "'00:00:00'",
            "'23:59:59.999999999'",
            "'12:34:56.5'",
            "'01:02:03.000001'",
        ][k % 4];
        let i = [
            "'10.0.0.1'",
            "'::1'",
            "'2001:db8::8a2e:370:7334'",
            "'255.255.255.255'",
        ][k % 4];
        let bl = ["0x", "0xcafe", "0x00ff00", "0x2c0a22"][k % 4];
        let vi = [
            "0",
            "-1",
            "123456789012345678901234567890",
            "-98765432109876543210",
        ][k % 4];
        let ttl_clause = if ttl > 0 {
            format!(" AND TTL {ttl}")
        } else {
            String::new()
        };
        exec(
            src,
            &format!(
                "INSERT INTO {ks}.t (k, c, s, a, bi, bl, bo, d, de, db, du, f, i, n, si, ti, tm, ts, tu, tx, vi, fl, fs, fm, ud, tp, ve) \
                 VALUES ({key}, {k}, 'static {k}', 'ascii ,\"', {bi}, {bl}, {bo}, {d}, {de}, {db}, {du}, {f}, {i}, {n}, {si}, {ti}, {tm}, {ts}, now(), '{text}', {vi}, \
                 [1, -2, {big}], {{'', 'a,b', 'q\"'}}, {{'x': 1.5, 'y': -0.0}}, {{street: '{text}', no: {k}, tags: {{'t1', ''}}}}, ({k}, '{text}', 0x01), [1.0, -2.5, 3.25]) \
                 USING TIMESTAMP {wt}{ttl_clause}",
                key = key(k),
                bi = [i64::MAX, i64::MIN, 0, -1][k % 4],
                bo = k % 2 == 0,
                n = [i32::MAX, i32::MIN, 0, 7][k % 4],
                si = [i16::MAX, i16::MIN, 0, 7][k % 4],
                ti = [i8::MAX, i8::MIN, 0, 7][k % 4],
                big = i64::MAX - k as i64,
                wt = 1_600_000_000_000_000i64 + k as i64 * 1_001,
            ),
        )
        .await;
        if k % 5 == 1 {
            // A cell written later, with a writetime and TTL of its own.
            exec(
                src,
                &format!(
                    "UPDATE {ks}.t USING TIMESTAMP {} AND TTL 50000 SET n = 42 WHERE k = {} AND c = {k}",
                    1_650_000_000_000_123i64 + k as i64,
                    key(k)
                ),
            )
            .await;
        }
    }
    // A row of nulls but its key.
    exec(
        src,
        &format!("INSERT INTO {ks}.t (k, c) VALUES ({}, 0)", key(rows)),
    )
    .await;
}

/// The columns of `t` to compare: the key, every value, and with `timed` every writetime and
/// TTL; the indexes of the TTLs.
fn t_select(timed: bool) -> (String, Vec<usize>) {
    let regular = [
        "s", "a", "bi", "bl", "bo", "d", "de", "db", "du", "f", "i", "n", "si", "ti", "tm", "ts",
        "tu", "tx", "vi", "fl", "fs", "fm", "ud", "tp", "ve",
    ];
    let mut select = vec!["k".to_string(), "c".into()];
    select.extend(regular.iter().map(|c| c.to_string()));
    let mut ttls = Vec::new();
    if timed {
        for c in regular.iter().filter(|c| **c != "ve") {
            select.push(format!("writetime({c})"));
            ttls.push(select.len());
            select.push(format!("ttl({c})"));
        }
    }
    (select.join(", "), ttls)
}

/// Every type unloaded with preserveTimestamps in DSBulk's forms — read back by Python's csv
/// module and DuckDB, which find every row, the `writetime(col)`/`ttl(col)` columns and the
/// hostile text unchanged — and loaded into the other cluster: identical cell by cell,
/// writetimes and TTLs included. Non-frozen collections and UDTs go without timestamps, and
/// are refused with them, naming the column.
/// Submits the migration `yaml` and waits for it to end: it must have FAILED. Its record and
/// its error.
async fn failed(daemon: &Daemon, yaml: &str) -> (serde_json::Value, String) {
    let id = daemon.submit_job("/api/v1/migrations", yaml).await;
    let ended = daemon
        .wait_job(&id, WAIT, |j| {
            j["state"] != "RUNNING" && j["state"] != "QUEUED"
        })
        .await;
    assert_eq!(ended["state"], "FAILED", "{ended}");
    let error = ended["error"].as_str().unwrap_or_default().to_owned();
    (ended, error)
}

#[tokio::test]
async fn every_type_unloads_in_dsbulks_forms_and_loads_back_cell_for_cell() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_roundtrip";
    fresh_keyspace(&src, &dst, ks, TABLES).await;
    let rows = 40usize;
    fill(&src, ks, rows).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("unload");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    // TTLs loaded from files count from the load: they age by the time to it.
    let unloaded = std::time::Instant::now();
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_job(
                ks,
                "t",
                &out.display().to_string(),
                "  preserveTimestamps: true\n",
                "",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsWritten"], rows as u64 + 1, "{job}");
    let files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !files.is_empty()
            && files
                .iter()
                .all(|f| f.starts_with("part-") && f.ends_with(".csv")),
        "{files:?}"
    );
    // Independent readers: Python's csv module (DSBulk's escaping: `\"` inside quotes) and
    // DuckDB count the rows, see the header and every hostile text as written.
    let checked = python(&format!(
        "import csv, glob, duckdb\n\
         rows = []\n\
         for p in sorted(glob.glob('{d}/*.csv')):\n\
         \x20   with open(p, newline='', encoding='utf-8') as f:\n\
         \x20       r = list(csv.reader(f, escapechar='\\\\', doublequote=False, strict=True))\n\
         \x20   header = r[0]\n\
         \x20   assert header[:4] == ['k', 'c', 's', 'writetime(s)'], header\n\
         \x20   assert 'ttl(tx)' in header and 'writetime(ve)' in header, header\n\
         \x20   rows += [dict(zip(header, x)) for x in r[1:]]\n\
         texts = sorted(set(x['tx'] for x in rows))\n\
         n = duckdb.sql(\"select count(*) from read_csv('{d}/*.csv', header=true, escape='\\\\', quote='\\\"', all_varchar=true)\").fetchone()[0]\n\
         import json; print(json.dumps([len(rows), n, texts]))",
        d = out.display()
    ));
    // The null row's text is an empty field, as the empty string's is `""`: Python reads
    // both as ''.
    let mut texts: Vec<&str> = HOSTILE.to_vec();
    texts.sort();
    let checked: serde_json::Value = serde_json::from_str(&checked).unwrap();
    assert_eq!(checked, serde_json::json!([rows + 1, rows + 1, texts]));

    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&out.display().to_string(), ks, "t", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsRead"], rows as u64 + 1, "{job}");
    let (select, ttls) = t_select(true);
    let table = format!("{ks}.t");
    let compared = assert_same_aged(
        &src,
        (&table, &dst, &table),
        (&select, &select),
        &ttls,
        unloaded.elapsed(),
    )
    .await;
    assert_eq!(compared, rows + 1);

    // Non-frozen collections and UDTs: refused with timestamps, naming the column; copied
    // exactly without.
    for k in 0..10 {
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.m (k, li, se, ma, ud) VALUES ({k}, [{k}, 1, {k}], {{'a', '{}'}}, {{1: 'x,y', 2: '\"'}}, {{street: 's{k}', no: {k}}})",
                HOSTILE[k % HOSTILE.len()].replace('\'', "''")
            ),
        )
        .await;
    }
    let m_out = dir.path().join("m");
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            unload_job(
                ks,
                "m",
                &m_out.display().to_string(),
                "  preserveTimestamps: true\n",
                "",
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("source.preserveTimestamps") && message.contains("\"li\""),
        "{message}"
    );
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_job(ks, "m", &m_out.display().to_string(), "", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["rowsWritten"], 10, "{job}");
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&m_out.display().to_string(), ks, "m", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let m = format!("{ks}.m");
    let select = "k, li, se, ma, ud";
    assert_eq!(
        assert_same(&src, &m, &dst, &m, select, select, &[]).await,
        10
    );

    // Partitions of statics only, beside rows whose text clustering value is empty: each
    // comes back as it was, writetimes included.
    for cql in [
        "INSERT INTO $ks.st (k, s) VALUES (1, 10) USING TIMESTAMP 1001",
        "INSERT INTO $ks.st (k, c1, c2, v) VALUES (2, '', 0, 5) USING TIMESTAMP 1002",
        "INSERT INTO $ks.st (k, c1, c2) VALUES (3, '', 1) USING TIMESTAMP 1003",
        "INSERT INTO $ks.st (k, s, c1, c2, v) VALUES (4, 40, 'a', 2, 6) USING TIMESTAMP 1004",
    ] {
        exec(&src, &cql.replace("$ks", ks)).await;
    }
    let st_out = dir.path().join("st");
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_job(
                ks,
                "st",
                &st_out.display().to_string(),
                "  preserveTimestamps: true\n",
                "",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["rowsWritten"], 4, "{job}");
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&st_out.display().to_string(), ks, "st", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let st = format!("{ks}.st");
    let select = "k, c1, c2, s, v, writetime(s), writetime(v)";
    assert_eq!(
        assert_same(&src, &st, &dst, &st, select, select, &[]).await,
        4
    );
}

/// A file cqlsh's `COPY TO` wrote (with a header) loads into the other cluster exactly, for
/// the types cqlsh writes without loss.
#[tokio::test]
async fn files_cqlsh_copy_wrote_load_exactly() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_cqlsh";
    let ddl = "CREATE TABLE $ks.t (k int, c text, n bigint, b boolean, u uuid, d date, de decimal,
        bl blob, ts timestamp, i inet, li list<int>, ma map<text, int>, se set<int>,
        PRIMARY KEY (k, c))";
    fresh_keyspace(&src, &dst, ks, ddl).await;
    let rows = 30;
    for k in 0..rows {
        let c = HOSTILE[k % HOSTILE.len()]
            .replace('\\', "/")
            .replace(['\n', '\r'], " ")
            .replace('\'', "''");
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.t (k, c, n, b, u, d, de, bl, ts, i, li, ma, se) VALUES \
                 ({k}, '{c}', {n}, {b}, {u}, '2024-01-{day:02}', {de}, 0xcafe{k:02x}, {ts}, '10.1.2.{k}', [{k}, 2], {{'a b': {k}}}, {{3, {k}}})",
                n = i64::MAX - k as i64,
                b = k % 2 == 0,
                u = key(k),
                day = k % 28 + 1,
                de = ["-12.340", "0.5", "100"][k % 3],
                ts = 1_700_000_000_123i64 + k as i64 * 1000,
            ),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cqlsh.csv");
    let (h, p) = host_port(&src_addr());
    let cqlsh = std::env::var("DROVER_TEST_CQLSH")
        .expect("DROVER_TEST_CQLSH (source target/testenv/env after scripts/testenv up)");
    let out = std::process::Command::new(&cqlsh)
        .args([&h, &p, "-e"])
        .arg(format!(
            "COPY {ks}.t (k, c, n, b, u, d, de, bl, ts, i, li, ma, se) TO '{}' WITH HEADER = true",
            file.display()
        ))
        .output()
        .expect("cqlsh runs");
    assert!(out.status.success(), "cqlsh: {out:?}");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&file.display().to_string(), ks, "t", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsRead"], rows as u64, "{job}");
    let table = format!("{ks}.t");
    let select = "k, c, n, b, u, d, de, bl, ts, i, li, ma, se";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        rows
    );
}

/// Bad files are refused before anything is written, every problem of the header at once
/// with the CQL that fixes it; a bad value fails the job naming the file, the line and the
/// column; the daemon keeps serving.
#[tokio::test]
async fn bad_files_are_refused_naming_the_file_line_and_column() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_bad";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (p bigint, c int, n int, v text, PRIMARY KEY (p, c))",
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
    let m = refused(&load_job(&format!("{d}/nothing-here"), ks, "t", "")).await;
    assert!(
        m.contains("source.path") && m.contains("does not exist"),
        "{m}"
    );
    // A header naming a column the target lacks, and missing a key column: both at once.
    std::fs::write(format!("{d}/a.csv"), "p,extra,v\n1,2,x\n").unwrap();
    let m = refused(&load_job(&d, ks, "t", "")).await;
    assert!(
        m.contains("a.csv")
            && m.contains("\"extra\" is not a column")
            && m.contains("ALTER TABLE")
            && m.contains("primary key column \"c\""),
        "{m}"
    );
    std::fs::write(format!("{d}/a.csv"), "p,c,p\n").unwrap();
    let m = refused(&load_job(&d, ks, "t", "")).await;
    assert!(m.contains("a.csv") && m.contains("\"p\" twice"), "{m}");
    std::fs::write(format!("{d}/a.csv"), "").unwrap();
    let m = refused(&load_job(&d, ks, "t", "")).await;
    assert!(m.contains("a.csv") && m.contains("empty"), "{m}");
    let m = refused(&load_job(&d, ks, "t", "  delimiter: ''\n")).await;
    assert!(m.contains("source.delimiter"), "{m}");

    // Values: a bad int on line 4 fails the job naming it; rows before it may be written.
    std::fs::write(
        format!("{d}/a.csv"),
        "p,c,n,v\n1,1,10,\"a\"\n2,2,,\n3,3,seven,x\n",
    )
    .unwrap();
    let (ended, error) = failed(&daemon, &load_job(&d, ks, "t", "")).await;
    assert!(
        error.contains("a.csv") && error.contains("line 4") && error.contains("\"n\""),
        "{ended}"
    );
    // A quoted field never closed.
    std::fs::write(format!("{d}/a.csv"), "p,c,n,v\n1,1,10,\"open\n2,2,2,x\n").unwrap();
    let (ended, error) = failed(&daemon, &load_job(&d, ks, "t", "")).await;
    assert!(
        error.contains("a.csv") && error.contains("line 2"),
        "{ended}"
    );

    // An unload into a directory holding CSV files: mode error (the default) refuses.
    let m = refused(&unload_job(ks, "t", &d, "", "")).await;
    assert!(m.contains("target.path") && m.contains("mode"), "{m}");
    assert!(std::path::Path::new(&format!("{d}/a.csv")).exists());
    let (status, _) = daemon.get("/api/v1/__health").await;
    assert_eq!(status, 200);
}

/// Rows of the CSV files in `dir`, read by Python's csv module: `(k, c)` of each, in file
/// order, and the file count.
fn rows_in(dir: &std::path::Path) -> (Vec<(i64, i64)>, usize) {
    let out = python(&format!(
        "import csv, glob, json\n\
         keys = []\n\
         files = sorted(glob.glob('{d}/*.csv'))\n\
         for p in files:\n\
         \x20   with open(p, newline='', encoding='utf-8') as f:\n\
         \x20       r = list(csv.reader(f, escapechar='\\\\', doublequote=False, strict=True))\n\
         \x20   keys += [[int(x[0]), int(x[1])] for x in r[1:]]\n\
         print(json.dumps([keys, len(files)]))",
        d = dir.display()
    ));
    let (keys, files): (Vec<(i64, i64)>, usize) = serde_json::from_str(&out).unwrap();
    (keys, files)
}

/// An unload resumed from a savepoint that records only some of its units keeps the files of
/// the recorded units untouched, deletes a temporary file and the file of an unrecorded unit
/// (here planted with a row that is not the source's), and writes those units again: every
/// source row is in the files once, and nothing else is.
#[tokio::test]
async fn a_resumed_unload_keeps_recorded_files_and_replaces_the_rest() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_resume";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (k bigint, c int, v text, PRIMARY KEY (k, c))",
    )
    .await;
    let rows = 400i64;
    for k in 0..rows {
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.t (k, c, v) VALUES ({k}, {}, 'v{k}')",
                k % 3
            ),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let saved = dir.path().join("savepoints");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = unload_job(
        ks,
        "t",
        &out.display().to_string(),
        "",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            saved.display()
        ),
    );
    let first = daemon.run_job("/api/v1/migrations", &job, WAIT).await;
    assert_eq!(first["state"], "SUCCEEDED", "{first}");
    let (keys, files) = rows_in(&out);
    assert_eq!(keys.len(), rows as usize);
    let units = first["progress"]["unitsTotal"].as_u64().unwrap() as usize;
    assert!(
        files >= 3 && files <= units,
        "{files} files of {units} units"
    );

    // The newest savepoint, less the pairs of the units of two files.
    let newest = crate::resume::savepoint_files(&saved).pop().unwrap();
    let text = std::fs::read_to_string(saved.join(&newest)).unwrap();
    let mut doc: serde_json::Value = yaml_serde::from_str(&text).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let ranges_of = |name: &str| -> Vec<(i64, i64)> {
        let rest = name
            .rsplit_once(".csv")
            .unwrap()
            .0
            .splitn(3, '-')
            .nth(2)
            .unwrap();
        rest.split('+')
            .map(|p| {
                let (a, b) = p.split_once('_').unwrap();
                let b: i64 = b.parse().unwrap();
                // Savepoints write the end of the ring as the minimum token.
                (a.parse().unwrap(), if b == i64::MAX { i64::MIN } else { b })
            })
            .collect()
    };
    let dropped: Vec<&String> = vec![&names[0], &names[names.len() - 1]];
    let forgotten: Vec<(i64, i64)> = dropped.iter().flat_map(|n| ranges_of(n)).collect();
    let pairs = doc["skipTokenRanges"].as_array_mut().unwrap();
    let before = pairs.len();
    pairs.retain(|p| {
        let pair = (
            p[0]["value"].as_i64().unwrap(),
            p[1]["value"].as_i64().unwrap(),
        );
        !forgotten.contains(&pair)
    });
    assert_eq!(
        pairs.len(),
        before - forgotten.len(),
        "{forgotten:?} in {text}"
    );
    // A stale file of a forgotten unit (a row the source does not have), a temporary file, and
    // the times of the files that must stay.
    std::fs::write(out.join(dropped[0]), "k,c,v\n999999,0,stale\n").unwrap();
    // And one a run of another split would have named: half of a forgotten unit's range.
    let (a, b) = ranges_of(dropped[1])[0];
    let b = if b == i64::MIN { i64::MAX } else { b };
    let half = out.join(format!(
        "part-{}-{a}_{}.csv",
        names[0].split('-').nth(1).unwrap(),
        ((i128::from(a) + i128::from(b)) / 2) as i64
    ));
    std::fs::write(&half, "k,c,v\n999998,0,stale\n").unwrap();
    let tag = names[0].split('-').nth(1).unwrap();
    let temp = out.join(format!(".part-{tag}-1_2.csv.123.tmp"));
    std::fs::write(&temp, "k,c,v\n").unwrap();
    let kept: Vec<(String, std::time::SystemTime)> = names
        .iter()
        .filter(|n| !dropped.contains(n))
        .map(|n| {
            let t = std::fs::metadata(out.join(n)).unwrap().modified().unwrap();
            (n.clone(), t)
        })
        .collect();

    // The job's own skip list, not the newest savepoint (which records every unit).
    doc["savepoints"]["autoResume"] = serde_json::Value::Bool(false);
    let resumed = yaml_serde::to_string(&doc).unwrap();
    let again = daemon.run_job("/api/v1/migrations", &resumed, WAIT).await;
    assert_eq!(again["state"], "SUCCEEDED", "{again}");
    assert_eq!(
        again["progress"]["unitsSkipped"].as_u64(),
        Some(units as u64 - 2),
        "{again}"
    );
    assert!(!temp.exists(), "the temporary file was deleted");
    assert!(
        !half.exists(),
        "the file of an unrecorded range was deleted"
    );
    for (name, t) in &kept {
        let now = std::fs::metadata(out.join(name))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(now, *t, "{name} was rewritten");
    }
    let (mut keys, _) = rows_in(&out);
    keys.sort();
    let mut want: Vec<(i64, i64)> = (0..rows).map(|k| (k, k % 3)).collect();
    want.sort();
    assert_eq!(keys, want, "every row once, nothing else");
}

/// CSV files in S3 (moto): unloaded there and loaded back, writetimes and TTLs kept; no
/// secret in the logs.
#[tokio::test]
async fn s3_unload_and_load_on_moto() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_s3";
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
            &format!(
                "INSERT INTO {ks}.t (p, c, v) VALUES ({p}, 1, 'v,{p}') USING TIMESTAMP {} AND TTL 9000",
                1_000_000 + p
            ),
        )
        .await;
    }
    let moto = std::env::var("DROVER_TEST_MOTO").expect("DROVER_TEST_MOTO");
    let bucket = "drover-it-csv";
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
    let path = format!("s3a://{bucket}/unload/t");
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_job(
                ks,
                "t",
                &path,
                "  preserveTimestamps: true\n",
                &format!("  mode: overwrite\n{s3}"),
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let job = daemon
        .run_job("/api/v1/migrations", &load_job(&path, ks, "t", &s3), WAIT)
        .await;
    assert_eq!(job["progress"]["rowsWritten"], 50, "{job}");
    let select = "p, c, v, writetime(v), ttl(v)";
    let table = format!("{ks}.t");
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[4]).await,
        50
    );
    assert!(
        !daemon.logs().contains("secretKey: test"),
        "no secret in the logs"
    );
}

/// What a load does with the files it is given, compared through the driver with the same
/// rows written to the source by CQL: files whose headers differ in order and in columns (a
/// missing column is left alone, not overwritten with null), `""` and unquoted empty fields, a
/// partition of statics only, an empty clustering value, renames, DSBulk's plain-number
/// writetime and `ttl` of 0, a record with a field too few; then a resumed load that skips
/// the finished file and reads again the one changed since.
#[tokio::test]
async fn a_load_places_every_field_as_its_header_says_and_resumes_by_file() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_load";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (k int, c text, s int static, v int, w text, PRIMARY KEY (k, c))",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    std::fs::create_dir_all(&one).unwrap();
    std::fs::write(
        one.join("a.csv"),
        "k,c,s,v,w\n1,x,,10,\"\"\n5,,7,,\n6,,8,3,\n",
    )
    .unwrap();
    std::fs::write(one.join("b.csv"), "w,k,c\nhello,2,y\n").unwrap();
    for cql in [
        "INSERT INTO $ks.t (k, c, v, w) VALUES (1, 'x', 10, '')",
        "INSERT INTO $ks.t (k, s) VALUES (5, 7)",
        "INSERT INTO $ks.t (k, c, s, v) VALUES (6, '', 8, 3)",
        "INSERT INTO $ks.t (k, c, v, w) VALUES (2, 'y', 99, 'hello')",
    ] {
        exec(&src, &cql.replace("$ks", ks)).await;
    }
    // b.csv has no `v`: the target's 99 must stay.
    exec(
        &dst,
        &format!("INSERT INTO {ks}.t (k, c, v) VALUES (2, 'y', 99)"),
    )
    .await;
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&one.display().to_string(), ks, "t", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let table = format!("{ks}.t");
    let select = "k, c, s, v, w";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        4,
        "rows (1,x), (2,y), (6,'') and the statics of 5"
    );

    // Renames, a plain-number writetime and a TTL of 0 (none).
    let two = dir.path().join("two");
    std::fs::create_dir_all(&two).unwrap();
    std::fs::write(
        two.join("c.csv"),
        "k,c,vv,writetime(vv),ttl(vv)\n7,a,1,1500000000000001,0\n",
    )
    .unwrap();
    let renamed = format!(
        "{}renames:\n  - from: vv\n    to: v\n",
        load_job(&two.display().to_string(), ks, "t", "")
    );
    let job = daemon.run_job("/api/v1/migrations", &renamed, WAIT).await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let (v, wt, ttl): (Option<i32>, Option<i64>, Option<i32>) = dst
        .query_unpaged(
            format!("SELECT v, writetime(v), ttl(v) FROM {ks}.t WHERE k = 7 AND c = 'a'"),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!((v, wt, ttl), (Some(1), Some(1_500_000_000_000_001), None));

    // A record with a field too few fails the job, naming the file and line.
    std::fs::write(two.join("c.csv"), "k,c,vv\n8,b,1\n9,c\n").unwrap();
    let (ended, error) = failed(&daemon, &renamed).await;
    assert!(
        error.contains("c.csv") && error.contains("line 3: 2 field(s), but the header has 3"),
        "{ended}"
    );

    // Resuming: a finished file is skipped, one changed since is read again.
    let three = dir.path().join("three");
    std::fs::create_dir_all(&three).unwrap();
    std::fs::write(three.join("d.csv"), "k,c,v\n20,a,1\n").unwrap();
    std::fs::write(three.join("e.csv"), "k,c,v\n21,a,1\n").unwrap();
    let saved = dir.path().join("saved");
    let resumable = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        load_job(&three.display().to_string(), ks, "t", ""),
        saved.display()
    );
    let first = daemon.run_job("/api/v1/migrations", &resumable, WAIT).await;
    assert_eq!(first["progress"]["rowsWritten"], 2, "{first}");
    let newest = crate::resume::savepoint_files(&saved).pop().unwrap();
    let text = std::fs::read_to_string(saved.join(newest)).unwrap();
    assert!(
        text.contains("skipCsvFiles") && text.contains("d.csv") && text.contains("csvFileVersions"),
        "{text}"
    );
    // e.csv changes (another size); d.csv does not.
    std::fs::write(three.join("e.csv"), "k,c,v\n21,a,1\n22,a,2\n").unwrap();
    exec(&dst, &format!("DELETE FROM {ks}.t WHERE k = 20")).await;
    let again = daemon.run_job("/api/v1/migrations", &resumable, WAIT).await;
    assert_eq!(again["state"], "SUCCEEDED", "{again}");
    assert_eq!(again["progress"]["unitsSkipped"], 1, "{again}");
    assert_eq!(again["progress"]["rowsWritten"], 2, "{again}");
    let count = |k: i32| {
        let dst = &dst;
        async move {
            dst.query_unpaged(format!("SELECT c FROM {ks}.t WHERE k = {k}"), ())
                .await
                .unwrap()
                .into_rows_result()
                .unwrap()
                .rows_num()
        }
    };
    assert_eq!(count(20).await, 0, "d.csv was skipped");
    assert_eq!(count(22).await, 1, "e.csv was read again");
}

/// Every type unloaded to DSBulk's JSON (one object per line, every field named, null as
/// `null`) with writetimes and TTLs — read back by Python's json module, which finds every row
/// and the hostile text unchanged — and loaded into the other cluster: identical cell by cell.
/// A JSON file of objects with keys in any order and some keys left out loads too; a key the
/// table lacks fails the job naming the file, line and key.
#[tokio::test]
async fn every_type_round_trips_through_dsbulks_json() {
    let (src, dst) = clusters().await;
    let ks = "it_json_roundtrip";
    fresh_keyspace(&src, &dst, ks, TABLES).await;
    let rows = 24usize;
    fill(&src, ks, rows).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("unload");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    // TTLs loaded from files count from the load: they age by the time to it.
    let unloaded = std::time::Instant::now();
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_as(
                "json",
                ks,
                "t",
                &out.display().to_string(),
                "  preserveTimestamps: true\n",
                "",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let checked = python(&format!(
        "import glob, json\n\
         rows = []\n\
         for p in sorted(glob.glob('{d}/*.json')):\n\
         \x20   with open(p, encoding='utf-8') as f:\n\
         \x20       rows += [json.loads(l) for l in f if l.strip()]\n\
         assert all('writetime(tx)' in r and 'ttl(tx)' in r for r in rows)\n\
         texts = sorted(set(r['tx'] or '' for r in rows))\n\
         print(json.dumps([len(rows), texts]))",
        d = out.display()
    ));
    let mut texts: Vec<&str> = HOSTILE.to_vec();
    texts.sort();
    let checked: serde_json::Value = serde_json::from_str(&checked).unwrap();
    assert_eq!(checked, serde_json::json!([rows + 1, texts]));
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_as("json", &out.display().to_string(), ks, "t", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsRead"], rows as u64 + 1, "{job}");
    let (select, ttls) = t_select(true);
    let table = format!("{ks}.t");
    assert_eq!(
        assert_same_aged(
            &src,
            (&table, &dst, &table),
            (&select, &select),
            &ttls,
            unloaded.elapsed(),
        )
        .await,
        rows + 1
    );

    // Hand-written objects: keys in any order, some left out, a null.
    let hand = dir.path().join("hand");
    std::fs::create_dir_all(&hand).unwrap();
    std::fs::write(
        hand.join("a.json"),
        "{\"k\":1,\"li\":[1,2],\"ma\":{\"3\":\"x\"}}\n\n{\"se\":[\"b\",\"a\"],\"k\":2,\"li\":null}\n",
    )
    .unwrap();
    exec(
        &src,
        &format!("INSERT INTO {ks}.m (k, li, ma) VALUES (1, [1, 2], {{3: 'x'}})"),
    )
    .await;
    exec(
        &src,
        &format!("INSERT INTO {ks}.m (k, se) VALUES (2, {{'a', 'b'}})"),
    )
    .await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_as("json", &hand.display().to_string(), ks, "m", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let m = format!("{ks}.m");
    let select = "k, li, se, ma, ud";
    assert_eq!(
        assert_same(&src, &m, &dst, &m, select, select, &[]).await,
        2
    );
    std::fs::write(
        hand.join("a.json"),
        "{\"k\":1,\"li\":[1,2]}\n{\"k\":3,\"nope\":1}\n",
    )
    .unwrap();
    let (ended, error) = failed(
        &daemon,
        &load_as("json", &hand.display().to_string(), ks, "m", ""),
    )
    .await;
    assert!(
        error.contains("a.json") && error.contains("line 2") && error.contains("\"nope\""),
        "{ended}"
    );
}

/// DSBulk's `SINGLE_DOCUMENT` JSON (`documentMode`): every type unloaded with writetimes and
/// TTLs as one array per file in DSBulk's layout (`[`, objects separated by `,` and a line
/// end, `]`) — parsed whole by Python's json module, which finds every row and the hostile
/// text unchanged — and loaded back into the other cluster without the key (a file starting
/// with `[` is read as an array): identical cell by cell. An array Python wrote pretty-printed
/// (objects over several lines) and an empty array load too; the key set to the other layout
/// is refused naming it, and a key the table lacks fails the job naming the file, the object's
/// line and the key.
#[tokio::test]
async fn json_as_one_array_unloads_in_dsbulks_layout_and_loads_back() {
    let (src, dst) = clusters().await;
    let ks = "it_json_array";
    fresh_keyspace(&src, &dst, ks, TABLES).await;
    let rows = 16usize;
    fill(&src, ks, rows).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("unload");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    // TTLs loaded from files count from the load: they age by the time to it.
    let unloaded = std::time::Instant::now();
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_as(
                "json",
                ks,
                "t",
                &out.display().to_string(),
                "  preserveTimestamps: true\n",
                "  documentMode: single_document\n",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let checked = python(&format!(
        "import glob, json\n\
         rows = []\n\
         files = sorted(glob.glob('{d}/*.json'))\n\
         for p in files:\n\
         \x20   text = open(p, encoding='utf-8').read()\n\
         \x20   doc = json.loads(text)\n\
         \x20   assert isinstance(doc, list) and doc and all(isinstance(o, dict) for o in doc), p\n\
         \x20   assert text.startswith('[\\n{{') and text.endswith('}}\\n]\\n'), text[:40]\n\
         \x20   lines = text.split('\\n')\n\
         \x20   assert len(lines) == len(doc) + 3, (len(lines), len(doc))\n\
         \x20   assert all(l.endswith('}},') for l in lines[1:len(doc)]), p\n\
         \x20   rows += doc\n\
         assert all('writetime(tx)' in r and 'ttl(tx)' in r for r in rows)\n\
         texts = sorted(set(r['tx'] or '' for r in rows))\n\
         print(json.dumps([len(files) > 1, len(rows), texts]))",
        d = out.display()
    ));
    let mut texts: Vec<&str> = HOSTILE.to_vec();
    texts.sort();
    let checked: serde_json::Value = serde_json::from_str(&checked).unwrap();
    assert_eq!(checked, serde_json::json!([true, rows + 1, texts]));
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_as("json", &out.display().to_string(), ks, "t", ""),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsRead"], rows as u64 + 1, "{job}");
    let (select, ttls) = t_select(true);
    let table = format!("{ks}.t");
    assert_eq!(
        assert_same_aged(
            &src,
            (&table, &dst, &table),
            (&select, &select),
            &ttls,
            unloaded.elapsed(),
        )
        .await,
        rows + 1
    );

    // Pretty-printed by Python (objects over several lines), beside an empty array.
    let hand = dir.path().join("hand");
    std::fs::create_dir_all(&hand).unwrap();
    python(&format!(
        "import json\n\
         docs = [{{'k': 1, 'li': [1, 2], 'ma': {{'3': 'x, ]}}'}}}}, {{'se': ['b', 'a'], 'k': 2, 'li': None}}]\n\
         json.dump(docs, open('{d}/a.json', 'w'), indent=2)\n\
         open('{d}/b.json', 'w').write(' [\\n ]\\n')",
        d = hand.display()
    ));
    exec(
        &src,
        &format!("INSERT INTO {ks}.m (k, li, ma) VALUES (1, [1, 2], {{3: 'x, ]}}'}})"),
    )
    .await;
    exec(
        &src,
        &format!("INSERT INTO {ks}.m (k, se) VALUES (2, {{'a', 'b'}})"),
    )
    .await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_as(
                "json",
                &hand.display().to_string(),
                ks,
                "m",
                "  documentMode: SINGLE_DOCUMENT\n",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsRead"], 2, "{job}");
    let m = format!("{ks}.m");
    let select = "k, li, se, ma, ud";
    assert_eq!(
        assert_same(&src, &m, &dst, &m, select, select, &[]).await,
        2
    );

    // The other layout named: refused before anything is written.
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            load_as(
                "json",
                &hand.display().to_string(),
                ks,
                "m",
                "  documentMode: MULTI_DOCUMENT\n",
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("source.documentMode") && message.contains("a.json"),
        "{message}"
    );
    // A key the table lacks, in the object that begins on line 3.
    std::fs::write(
        hand.join("a.json"),
        "[{\"k\": 1, \"li\": [1, 2]},\n\n  {\"k\": 3,\n   \"nope\": 1}\n]\n",
    )
    .unwrap();
    let (ended, error) = failed(
        &daemon,
        &load_as("json", &hand.display().to_string(), ks, "m", ""),
    )
    .await;
    assert!(
        error.contains("a.json") && error.contains("line 3") && error.contains("\"nope\""),
        "{ended}"
    );
}

/// `nullValue`: an unload writes it for each null field — writetimes and TTLs of nulls
/// included — and quotes a text equal to it, so that the load (with the same `nullValue`)
/// gives back null for the one and the text for the other, in a regular and in a clustering
/// column, writetimes and TTLs kept. A file written by hand with another `nullValue` loads
/// with its unquoted marks as nulls (left unset) and its quoted one as text. A `nullValue`
/// holding the delimiter is refused, naming the key.
#[tokio::test]
async fn null_value_marks_nulls_and_a_text_equal_to_it_loads_back_as_text() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_null_value";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TABLE $ks.t (k int, c text, v text, n int, PRIMARY KEY (k, c))",
    )
    .await;
    for cql in [
        "INSERT INTO $ks.t (k, c, v, n) VALUES (1, 'a', 'NULL', 5) USING TIMESTAMP 1001",
        "INSERT INTO $ks.t (k, c) VALUES (2, 'b') USING TIMESTAMP 1002",
        "INSERT INTO $ks.t (k, c, v, n) VALUES (3, 'c', '', 7) USING TIMESTAMP 1003",
        "INSERT INTO $ks.t (k, c, v) VALUES (4, 'NULL', 'x') USING TIMESTAMP 1004",
        "INSERT INTO $ks.t (k, c, v, n) VALUES (5, 'e', 'NULLx', 1) USING TIMESTAMP 1005 AND TTL 90000",
    ] {
        exec(&src, &cql.replace("$ks", ks)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("unload");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_job(
                ks,
                "t",
                &out.display().to_string(),
                "  preserveTimestamps: true\n",
                "  nullValue: 'NULL'\n",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(job["progress"]["rowsWritten"], 5, "{job}");
    let mut lines: Vec<String> = Vec::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        lines.extend(text.lines().skip(1).map(str::to_string));
    }
    lines.sort();
    assert_eq!(lines.len(), 5, "{lines:?}");
    // Columns: k, c, then n and v (Cassandra orders regular columns by name), each followed
    // by its writetime and TTL.
    assert_eq!(
        lines[0],
        "1,a,5,1970-01-01T00:00:00.001001Z,NULL,\"NULL\",1970-01-01T00:00:00.001001Z,NULL",
        "{lines:?}"
    );
    assert_eq!(lines[1], "2,b,NULL,NULL,NULL,NULL,NULL,NULL", "{lines:?}");
    assert!(lines[2].starts_with("3,c,7,1970"), "{lines:?}");
    assert!(lines[2].contains(",NULL,\"\",1970"), "{lines:?}");
    assert!(
        lines[3].starts_with("4,\"NULL\",NULL,NULL,NULL,x,1970"),
        "{lines:?}"
    );
    assert!(lines[4].starts_with("5,e,1,1970"), "{lines:?}");
    assert!(lines[4].contains(",NULLx,1970"), "{lines:?}");

    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&out.display().to_string(), ks, "t", "  nullValue: 'NULL'\n"),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let table = format!("{ks}.t");
    let select = "k, c, v, n, writetime(v), writetime(n), ttl(v), ttl(n)";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[6, 7]).await,
        5
    );

    // A hand-written file: `N/A` unquoted is null (left unset: the target's 99 stays), quoted
    // it is the text.
    let hand = dir.path().join("hand");
    std::fs::create_dir_all(&hand).unwrap();
    std::fs::write(
        hand.join("a.csv"),
        "k,c,v,n\n6,f,N/A,N/A\n7,g,\"N/A\",3\n8,h,,N/A\n",
    )
    .unwrap();
    for cql in [
        "INSERT INTO $ks.t (k, c, n) VALUES (6, 'f', 99)",
        "INSERT INTO $ks.t (k, c, v, n) VALUES (7, 'g', 'N/A', 3)",
        "INSERT INTO $ks.t (k, c) VALUES (8, 'h')",
    ] {
        exec(&src, &cql.replace("$ks", ks)).await;
    }
    exec(
        &dst,
        &format!("INSERT INTO {ks}.t (k, c, n) VALUES (6, 'f', 99)"),
    )
    .await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&hand.display().to_string(), ks, "t", "  nullValue: N/A\n"),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let select = "k, c, v, n";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        8
    );

    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            unload_job(
                ks,
                "t",
                &dir.path().join("bad").display().to_string(),
                "",
                "  nullValue: 'a,b'\n",
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("target.nullValue") && message.contains("delimiter"),
        "{message}"
    );
}

/// `binary: HEX` (DSBulk's `codec.binary`): blobs are unloaded as `0x` and lowercase hex —
/// inside collections and UDTs too, as JSON strings — in CSV and in JSON, as Python's csv and
/// json modules read them, and load back cell for cell (a load reads both forms).
#[tokio::test]
async fn blobs_unload_as_hex_with_binary_hex_and_load_back() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_binary";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TYPE $ks.u (b blob, n int);
         CREATE TABLE $ks.t (k int PRIMARY KEY, b blob, lb frozen<list<blob>>,
           mb frozen<map<blob, blob>>, ub frozen<u>)",
    )
    .await;
    // Blobs (empty; one whose base64 would start with `0X`; upper-case-looking digits) and
    // what their hex text is.
    let blobs = [
        ("0x", "0x"),
        ("0xd17d76", "0xd17d76"),
        ("0xCAFE00ff", "0xcafe00ff"),
    ];
    for (k, (b, _)) in blobs.iter().enumerate() {
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.t (k, b, lb, mb, ub) VALUES ({k}, {b}, [{b}, 0x0a], {{{b}: 0xff}}, {{b: {b}, n: {k}}})"
            ),
        )
        .await;
    }
    let want: Vec<serde_json::Value> = blobs
        .iter()
        .enumerate()
        .map(|(k, (_, hex))| {
            serde_json::json!([k, hex, [hex, "0x0a"], { *hex: "0xff" }, { "b": hex, "n": k }])
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    for format in ["csv", "json"] {
        let out = dir.path().join(format);
        let job = daemon
            .run_job(
                "/api/v1/migrations",
                &unload_as(
                    format,
                    ks,
                    "t",
                    &out.display().to_string(),
                    "",
                    "  binary: hex\n",
                ),
                WAIT,
            )
            .await;
        assert_eq!(job["state"], "SUCCEEDED", "{job}");
        let read = if format == "csv" {
            "r = list(csv.reader(f, escapechar='\\\\', doublequote=False, strict=True))\n\
             \x20       rows += [[int(x[0]), x[1], json.loads(x[2]), json.loads(x[3]), json.loads(x[4])] for x in r[1:]]"
        } else {
            "objs = [json.loads(l) for l in f if l.strip()]\n\
             \x20       rows += [[o['k'], o['b'], o['lb'], o['mb'], o['ub']] for o in objs]"
        };
        let got = python(&format!(
            "import csv, glob, json\n\
             rows = []\n\
             for p in sorted(glob.glob('{d}/*.{format}')):\n\
             \x20   with open(p, newline='', encoding='utf-8') as f:\n\
             \x20       {read}\n\
             print(json.dumps(sorted(rows)))",
            d = out.display()
        ));
        let got: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(got, serde_json::Value::Array(want.clone()), "{format}");
        exec(&dst, &format!("TRUNCATE {ks}.t")).await;
        let job = daemon
            .run_job(
                "/api/v1/migrations",
                &load_as(format, &out.display().to_string(), ks, "t", ""),
                WAIT,
            )
            .await;
        assert_eq!(job["state"], "SUCCEEDED", "{job}");
        let table = format!("{ks}.t");
        let select = "k, b, lb, mb, ub";
        assert_eq!(
            assert_same(&src, &table, &dst, &table, select, select, &[]).await,
            blobs.len(),
            "{format}"
        );
    }
}

/// `style: cqlsh`: what drover unloads, `cqlsh COPY FROM` loads exactly — edge values of the
/// types cqlsh reads (doubles and floats at their ends and NaN, decimals and varints past 64
/// bits, timestamps and dates beyond the years Python holds, blobs, every quoting hazard in
/// text, collections, a tuple and a UDT with null fields), compared cell for cell through CQL
/// between the source and the table COPY FROM filled.
#[tokio::test]
async fn cqlsh_copy_from_loads_a_cqlsh_style_unload_exactly() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_cqlsh_style";
    let ddl = "CREATE TYPE $ks.pt (x int, label text);
        CREATE TABLE $ks.t (k int, c text, a ascii, bi bigint, bl blob, bo boolean, d date,
          de decimal, db double, f float, i inet, si smallint, ti tinyint, tm time,
          ts timestamp, tu timeuuid, vi varint, li list<text>, se set<boolean>,
          ma map<int, timestamp>, tp frozen<tuple<text, int>>, ud frozen<pt>,
          PRIMARY KEY (k, c))";
    fresh_keyspace(&src, &dst, ks, ddl).await;
    let texts = [
        "plain",
        "a,b",
        "say \"hi\"",
        "back\\slash \\\" mixed",
        // No line end: COPY FROM cuts its input into lines before it parses them, and waited
        // until its 90-second timeout on a quoted field holding one.
        "it's",
        " spaced ü 中文 😀 ",
        "{'not': [a, collection]}",
    ];
    let rows = 24usize;
    for k in 0..rows {
        let t = texts[k % texts.len()].replace('\'', "''");
        let db = [
            "(double)NaN",
            "-0.0",
            "1.0E308",
            "5e-324",
            "0.1",
            "(double)-Infinity",
        ][k % 6];
        let f = ["1.5", "-0.0", "3.4028235E38", "1.0E-45"][k % 4];
        let de = [
            "-12.340",
            "1E+5",
            "0.000000001",
            "123456789012345678901234567890.5",
        ][k % 4];
        let vi = [
            "0",
            "-98765432109876543210",
            "123456789012345678901234567890",
        ][k % 3];
        let ts = [
            "-62135596800001",
            "253402300800000",
            "1700000000123",
            "70262315826648",
        ][k % 4];
        // Not a date past year 9999: COPY FROM has no reader for them (it hands the days
        // cqlsh's COPY TO writes to a date parser).
        let d = [
            "'1970-01-01'",
            "'9999-12-31'",
            "'2024-02-29'",
            "'0001-01-01'",
        ][k % 4];
        let tm = ["'00:00:00'", "'23:59:59.999999999'", "'01:02:03.000001'"][k % 3];
        let i = ["'10.0.0.1'", "'2001:db8::8a2e:370:7334'"][k % 2];
        let bl = ["0x", "0xcafe", "0x2c0a22", "0x5c27"][k % 4];
        if k % 8 == 7 {
            exec(
                &src,
                &format!("INSERT INTO {ks}.t (k, c) VALUES ({k}, '{t}')"),
            )
            .await;
            continue;
        }
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.t (k, c, a, bi, bl, bo, d, de, db, f, i, si, ti, tm, ts, tu, vi,
                   li, se, ma, tp, ud) VALUES ({k}, '{t}', 'x''y', {bi}, {bl}, {bo}, {d}, {de},
                   {db}, {f}, {i}, -32768, 127, {tm}, {ts}, now(), {vi}, ['{t}', 'b'],
                   {{true, false}}, {{1: {ts}, 2: 0}}, ('{t}', {k}), {{x: {ux}, label: '{t}'}})",
                bi = i64::MIN + k as i64,
                bo = k % 2 == 0,
                ux = if k % 2 == 0 {
                    "null".to_string()
                } else {
                    k.to_string()
                },
            ),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            // One file: COPY FROM given several (a glob) loaded every row but waited for
            // acknowledgements until its 90-second timeout and exited 1.
            &unload_job(ks, "t", &d, "", "  style: cqlsh\n")
                .replace("splitCount: 8", "splitCount: 1"),
            WAIT,
        )
        .await;
    assert_eq!(job["progress"]["rowsRead"], rows as u64, "{job}");
    let (h, p) = host_port(&dst_addr());
    let cqlsh = std::env::var("DROVER_TEST_CQLSH")
        .expect("DROVER_TEST_CQLSH (source target/testenv/env after scripts/testenv up)");
    // COPY FROM takes fields by position, not by the header's names: its column list is the
    // header line.
    let first = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "csv"))
        .expect("a file");
    let columns = std::fs::read_to_string(&first)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .replace(',', ", ");
    assert!(columns.starts_with("k, c, "), "{columns}");
    let out = std::process::Command::new(&cqlsh)
        .args([&h, &p, "-e"])
        .arg(format!(
            "COPY {ks}.t ({columns}) FROM '{d}/*.csv' WITH HEADER = true AND MAXATTEMPTS = 1"
        ))
        .output()
        .expect("cqlsh runs");
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cqlsh: {said}");
    assert!(
        said.contains(&format!("{rows} rows imported")),
        "cqlsh: {said}"
    );
    let table = format!("{ks}.t");
    assert_eq!(
        assert_same(&src, &table, &dst, &table, &columns, &columns, &[]).await,
        rows
    );
    // The unload refuses what COPY FROM cannot read back: writetimes and TTLs.
    let yaml = unload_job(
        ks,
        "t",
        &format!("{d}/x"),
        "  preserveTimestamps: true\n",
        "  style: cqlsh\n",
    );
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml)
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("source.preserveTimestamps: cannot be used with target.style: cqlsh"),
        "{body}"
    );
}

/// DSBulk's date, time and timestamp forms (`timestamp`, `date`, `time`, `timeZone`, `unit`,
/// `epoch`): an unload in java.time patterns in Paris, read by Python's `csv` and `json` (the
/// texts as java.time writes them, inside a list and a UDT too, the writetime with its
/// microseconds), loads back cell for cell, writetimes included; DSBulk's own test files
/// (`temporal.csv`, `temporal-numeric.csv`, with its names in English) load to the values its
/// tests expect; a pattern that would drop milliseconds fails the unload naming the value,
/// and one that cannot hold a writetime's microseconds is refused at once.
#[tokio::test]
async fn dsbulks_date_time_and_timestamp_forms_unload_and_load_back_exactly() {
    let (src, dst) = clusters().await;
    let ks = "it_csv_temporal";
    fresh_keyspace(
        &src,
        &dst,
        ks,
        "CREATE TYPE $ks.u (t timestamp, d date);
         CREATE TABLE $ks.t (k int PRIMARY KEY, d date, tm time, ts timestamp,
           lts frozen<list<timestamp>>, ud frozen<u>, v int);
         CREATE TABLE $ks.temporals (key int PRIMARY KEY, vdate date, vtime time, vtimestamp timestamp)",
    )
    .await;
    exec(
        &src,
        &format!(
            "INSERT INTO {ks}.t (k, d, tm, ts, lts, ud, v) VALUES (0, '2018-03-09', '17:12:32.584',
               '2018-03-09 16:12:32.584Z', ['1969-12-31 23:59:59.999Z'],
               {{t: '2021-10-31 00:30:00Z', d: '0001-01-01'}}, 1) USING TIMESTAMP 1234567890123456"
        ),
    )
    .await;
    exec(
        &src,
        &format!(
            "INSERT INTO {ks}.t (k, d, tm, ts, lts) VALUES (1, '9999-12-31', '00:00:00', '2021-06-01 10:00:00Z', [])"
        ),
    )
    .await;
    let forms = "  timestamp: 'yyyy-MM-dd HH:mm:ss.SSSSSSXXX'\n  date: dd/MM/yyyy\n  time: HH:mm:ss.SSSSSSSSS\n  timeZone: Europe/Paris\n";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_job(
                ks,
                "t",
                &format!("{d}/t"),
                "  preserveTimestamps: true\n",
                forms,
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let got = python(&format!(
        "import csv, glob, json\n\
         rows = []\n\
         for p in sorted(glob.glob('{d}/t/*.csv')):\n\
         \x20   with open(p, newline='', encoding='utf-8') as f:\n\
         \x20       r = list(csv.reader(f, escapechar='\\\\', doublequote=False, strict=True))\n\
         \x20       h = r[0]\n\
         \x20       for x in r[1:]:\n\
         \x20           o = dict(zip(h, x))\n\
         \x20           rows.append([int(o['k']), o['d'], o['tm'], o['ts'], json.loads(o['lts']) if o['lts'] else None,\n\
         \x20                        json.loads(o['ud']) if o['ud'] else None, o['v'], o['writetime(v)']])\n\
         print(json.dumps(sorted(rows)))"
    ));
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(
        got,
        serde_json::json!([
            [0, "09/03/2018", "17:12:32.584000000", "2018-03-09 17:12:32.584000+01:00",
             ["1970-01-01 00:59:59.999000+01:00"],
             {"t": "2021-10-31 02:30:00.000000+02:00", "d": "01/01/0001"},
             "1", "2009-02-14 00:31:30.123456+01:00"],
            [1, "31/12/9999", "00:00:00.000000000", "2021-06-01 12:00:00.000000+02:00",
             [], null, "", ""]
        ])
    );
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(&format!("{d}/t"), ks, "t", forms),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let table = format!("{ks}.t");
    let select = "k, d, tm, ts, lts, ud, v, writetime(v)";
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        2
    );

    // JSON files carry the same forms, as strings.
    exec(&dst, &format!("TRUNCATE {ks}.t")).await;
    let out = format!("{d}/json");
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &unload_as("json", ks, "t", &out, "  preserveTimestamps: true\n", forms),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    let texts = python(&format!(
        "import glob, json\n\
         print(sorted(json.loads(l)['ts'] for p in glob.glob('{out}/*.json') for l in open(p) if l.strip()))"
    ));
    assert_eq!(
        texts.trim(),
        "['2018-03-09 17:12:32.584000+01:00', '2021-06-01 12:00:00.000000+02:00']"
    );
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_as("json", &out, ks, "t", forms),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    assert_eq!(
        assert_same(&src, &table, &dst, &table, select, select, &[]).await,
        2
    );

    // DSBulk's test files, as its end-to-end tests load them.
    std::fs::create_dir_all(format!("{d}/named")).unwrap();
    std::fs::write(
        format!("{d}/named/temporal.csv"),
        "key,vdate                  ,vtime    ,vtimestamp\n0  ,\"Friday, 9 March 2018\",171232584,2018-03-09T17:12:32.000+01:00[Europe/Paris]\n"
            .replace("vdate                  ", "vdate")
            .replace("vtime    ", "vtime"),
    )
    .unwrap();
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(
                &format!("{d}/named"),
                ks,
                "temporals",
                "  timeZone: Europe/Paris\n  date: cccc, d MMMM uuuu\n  time: HHmmssSSS\n  timestamp: ISO_ZONED_DATE_TIME\n  unit: SECONDS\n",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    async fn row(dst: &scylla::client::session::Session, ks: &str, key: i32) -> (i64, i64, i64) {
        let r = dst
            .query_unpaged(
                format!(
                    "SELECT toUnixTimestamp(vdate), vtime, toUnixTimestamp(vtimestamp) FROM {ks}.temporals WHERE key = {key}"
                ),
                (),
            )
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        let (d, t, ts): (i64, scylla::value::CqlTime, i64) = r.single_row().unwrap();
        (d, t.0, ts)
    }
    // 2018-03-09 (midnight UTC, in ms); 17:12:32.584; 16:12:32 UTC.
    assert_eq!(
        row(&dst, ks, 0).await,
        (1_520_553_600_000, 61_952_584_000_000, 1_520_611_952_000)
    );
    std::fs::create_dir_all(format!("{d}/numeric")).unwrap();
    std::fs::write(
        format!("{d}/numeric/temporal-numeric.csv"),
        "key,vdate,vtime,vtimestamp\n1  ,11520,123  ,123456\n",
    )
    .unwrap();
    let job = daemon
        .run_job(
            "/api/v1/migrations",
            &load_job(
                &format!("{d}/numeric"),
                ks,
                "temporals",
                "  timeZone: Europe/Paris\n  date: UNITS_SINCE_EPOCH\n  time: UNITS_SINCE_EPOCH\n  timestamp: UNITS_SINCE_EPOCH\n  unit: MINUTES\n  epoch: 2000-01-01T00:00:00+01:00[Europe/Paris]\n",
            ),
            WAIT,
        )
        .await;
    assert_eq!(job["state"], "SUCCEEDED", "{job}");
    // 11520 minutes = 2000-01-09; 123 minutes = 02:03; 123456 minutes after 2000 in Paris =
    // 2000-03-26 18:36+02:00 (daylight saving time began that day) = 16:36 UTC.
    assert_eq!(
        row(&dst, ks, 1).await,
        (947_376_000_000, 7_380_000_000_000, 954_088_560_000)
    );

    // A pattern without milliseconds: the unload fails naming the value it would drop.
    let (_, error) = failed(
        &daemon,
        &unload_job(
            ks,
            "t",
            &format!("{d}/coarse"),
            "",
            "  timestamp: yyyy-MM-dd HH:mm:ss\n",
        ),
    )
    .await;
    assert!(
        error.contains("drops part of it") && error.contains("\"yyyy-MM-dd HH:mm:ss\""),
        "{error}"
    );
    assert!(
        error.contains("2018-03-09T16:12:32.584Z") || error.contains("1969-12-31T23:59:59.999Z"),
        "{error}"
    );
    // Writetimes need microseconds: refused before anything is read.
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            unload_job(
                ks,
                "t",
                &format!("{d}/x"),
                "  preserveTimestamps: true\n",
                "  timestamp: yyyy-MM-dd HH:mm:ss.SSS\n",
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("target.timestamp: cannot write a writetime"),
        "{body}"
    );
}
