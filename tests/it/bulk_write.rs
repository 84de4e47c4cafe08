//! `target.bulkWrite: sstable` against the real clusters: a table of every type the path takes
//! (statics, collections element by element, mixed writetimes and TTLs, a wide partition) is
//! copied as SSTables, uploaded to a daemon beside the target node and imported there through
//! the node's JMX; the result is the source cell by cell (values, writetimes, TTLs), the
//! same as the CQL path's copy, and the validator comparing timestamps finds nothing. Tables
//! the path cannot write exactly are refused before anything is read.

use std::time::Duration;

use test_support::cql::{Fixture, assert_same, exec, job, job_to};
use test_support::{Daemon, Home};

pub(crate) const WAIT: Duration = Duration::from_secs(300);

pub(crate) const COLUMNS: &str = "k int, name text, c int, c2 text, s text static, a ascii, b bigint, bl blob, \
    bo boolean, d date, de decimal, db double, du duration, f float, i inet, it int, si smallint, \
    tx text, tm time, ts timestamp, tu timeuuid, ti tinyint, u uuid, vi varint, fl frozen<list<int>>, \
    tp tuple<int, text>, l list<int>, st set<text>, m map<text, int>, \
    PRIMARY KEY ((k, name), c, c2)";
pub(crate) const ORDER: &str = "WITH CLUSTERING ORDER BY (c DESC, c2 ASC)";

/// Regular and static columns, each selected with its writetime and TTL.
const CELLS: &[&str] = &[
    "s", "a", "b", "bl", "bo", "d", "de", "db", "du", "f", "i", "it", "si", "tx", "tm", "ts", "tu",
    "ti", "u", "vi", "fl", "tp", "l", "st", "m",
];

/// `SELECT` list: the key, then each cell with its writetime and TTL; and the indexes of
/// the TTLs among them.
pub(crate) fn select() -> (String, Vec<usize>) {
    let mut cols = vec!["k".to_string(), "name".into(), "c".into(), "c2".into()];
    let mut ttls = Vec::new();
    for c in CELLS {
        cols.push((*c).to_string());
        cols.push(format!("WRITETIME({c})"));
        ttls.push(cols.len());
        cols.push(format!("TTL({c})"));
    }
    (cols.join(", "), ttls)
}

pub(crate) fn sidecar_config() -> String {
    format!(
        "cassandra:\n  jmx_address: 127.0.0.1:7299\nsstable_uploads:\n  enabled: true\n  nodetool: {}\n  min_free_space_percent: 1\n",
        std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)")
    )
}

pub(crate) fn bulk(d: &Daemon) -> String {
    format!(
        "  bulkWrite: sstable\n  bulkSidecars:\n    127.0.0.2: {}\n",
        d.addr
    )
}

/// Rows of every shape: whole rows with a TTL, cells written later at other writetimes and
/// TTLs, collections grown element by element, a key-only row, a partition of statics only,
/// nulls, and a wide partition.
pub(crate) async fn fill(src: &scylla::client::session::Session, t: &str) {
    for k in 0..30 {
        let name = format!("n{k}");
        exec(src, &format!("INSERT INTO {t} (k, name, s) VALUES ({k}, '{name}', 'static {k}') USING TIMESTAMP {}", 500 + k)).await;
        for c in 0..8 {
            let ttl = if c % 3 == 0 { " AND TTL 86400" } else { "" };
            exec(
                src,
                &format!(
                    "INSERT INTO {t} (k, name, c, c2, a, b, bl, bo, d, de, db, du, f, i, it, si, tx, tm, ts, tu, ti, u, vi, fl, tp, l, st, m) \
                     VALUES ({k}, '{name}', {c}, 'x{c}', 'ascii', {big}, 0xcafe{c:02x}, {bo}, '2024-0{m}-1{c}', 1.50{c}, -{c}.25, 1mo2d3h, 0.5, '10.0.0.{c}', {neg}, {small}, 'text ünï {c}', '12:34:56.78{c}', '2024-01-02 03:04:05.{c}00+0000', now(), {tiny}, uuid(), {vi}, [1, {c}, 1], ({c}, 'tup'), [{c}, 2, 3], {{'a', 'b{c}'}}, {{'k1': {c}, 'k2': -1}}) \
                     USING TIMESTAMP {ts}{ttl}",
                    big = i64::MAX - c,
                    bo = c % 2 == 0,
                    m = 1 + c % 9,
                    neg = -(c as i32) * 1000,
                    small = -(c as i32) * 100,
                    tiny = -(c as i32),
                    vi = "9".repeat(30) + &c.to_string(),
                    ts = 1_000_000 + k * 100 + c as i32,
                ),
            )
            .await;
            if c % 2 == 1 {
                // Later writes: one cell at another writetime and TTL, list appends, a map
                // element, a set element.
                exec(src, &format!("UPDATE {t} USING TIMESTAMP {} AND TTL 3600 SET tx = 'later' WHERE k = {k} AND name = '{name}' AND c = {c} AND c2 = 'x{c}'", 2_000_000 + k)).await;
                exec(src, &format!("UPDATE {t} USING TIMESTAMP {} SET l = l + [9, 9], m['k3'] = 3, st = st + {{'z'}} WHERE k = {k} AND name = '{name}' AND c = {c} AND c2 = 'x{c}'", 3_000_000 + k)).await;
                exec(src, &format!("UPDATE {t} USING TIMESTAMP {} AND TTL 7200 SET l = l + [7] WHERE k = {k} AND name = '{name}' AND c = {c} AND c2 = 'x{c}'", 3_500_000 + k)).await;
            }
        }
        // A row with its key only, and a row with nulls.
        exec(src, &format!("INSERT INTO {t} (k, name, c, c2) VALUES ({k}, '{name}', 100, 'key only') USING TIMESTAMP 4000000")).await;
        exec(src, &format!("INSERT INTO {t} (k, name, c, c2, b) VALUES ({k}, '{name}', 101, 'nulls', 1) USING TIMESTAMP 4000001")).await;
    }
    // A partition holding statics only.
    exec(
        src,
        &format!(
            "INSERT INTO {t} (k, name, s) VALUES (99, 'statics only', 'alone') USING TIMESTAMP 777"
        ),
    )
    .await;
    // A wide partition: 100000 rows, batched per partition.
    let insert = src
        .prepare(format!("INSERT INTO {t} (k, name, c, c2, tx, b) VALUES (1000, 'wide', ?, ?, ?, ?) USING TIMESTAMP ?"))
        .await
        .unwrap();
    for chunk in (0..100_000i32).collect::<Vec<_>>().chunks(200) {
        let mut batch =
            scylla::statement::batch::Batch::new(scylla::statement::batch::BatchType::Unlogged);
        let mut values = Vec::new();
        for c in chunk {
            batch.append_statement(insert.clone());
            values.push((
                *c,
                format!("w{}", c % 7),
                format!("wide row {c}"),
                i64::from(*c) * 3,
                5_000_000i64 + i64::from(*c),
            ));
        }
        src.batch(&batch, values).await.unwrap();
    }
}

#[tokio::test]
async fn sstables_copy_every_type_exactly_like_cql_writes() {
    let Fixture { src, dst, ks, .. } = Fixture::new(
        "bulk_types",
        &format!(
            "CREATE TABLE $ks.t ({COLUMNS}) {ORDER}; CREATE TABLE $ks.t_cql ({COLUMNS}) {ORDER}"
        ),
    )
    .await;
    fill(&src, &format!("{ks}.t")).await;
    let d = Daemon::fresh(&sidecar_config()).await;

    let report = d
        .run_job(
            "/api/v1/migrations",
            &job(ks, "t", "  preserveTimestamps: true\n", &bulk(&d), ""),
            WAIT,
        )
        .await;
    let progress = &report["progress"];
    let rows = 30 * 10 + 1 + 100_000;
    assert_eq!(progress["rowsWritten"], rows, "{report}");
    d.run_job(
        "/api/v1/migrations",
        &job_to(ks, "t", "t_cql", "  preserveTimestamps: true\n", "", ""),
        WAIT,
    )
    .await;

    let (select, ttls) = select();
    let t = format!("{ks}.t");
    let n = assert_same(&src, &t, &dst, &t, &select, &select, &ttls).await;
    assert_eq!(n, rows as usize, "rows compared against the source");
    // The two paths' copies: the same cells, writetimes and TTLs.
    assert_same(
        &dst,
        &t,
        &dst,
        &format!("{ks}.t_cql"),
        &select,
        &select,
        &ttls,
    )
    .await;

    // Nothing left staged on the target side.
    let staging = d.home().state_dir().join("sstable-uploads");
    let staged: Vec<_> = std::fs::read_dir(&staging)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "imported.log")
        .collect();
    assert!(staged.is_empty(), "{staged:?}");

    // The validator, comparing writetimes and TTLs, finds nothing.
    let validation = format!(
        "{}validation:\n  compareTimestamps: true\n  ttlToleranceMillis: 5000\n",
        job(ks, "t", "  preserveTimestamps: true\n", "", "")
    );
    let report = d.run_job("/api/v1/validations", &validation, WAIT).await;
    assert_eq!(report["result"]["rowsWithDifferences"], 0, "{report}");
    assert_eq!(report["result"]["rowsMatched"], rows, "{report}");
}

#[tokio::test]
async fn tables_the_sstable_path_cannot_write_exactly_are_refused_with_the_key() {
    let Fixture { ks, .. } = Fixture::new(
        "bulk_refused",
        "CREATE TABLE $ks.counted (k int PRIMARY KEY, n counter); \
         CREATE TABLE $ks.timed (k int, at timeuuid, v text, PRIMARY KEY (k, at)); \
         CREATE TABLE $ks.plain (k int PRIMARY KEY, v text)",
    )
    .await;
    let d = Daemon::fresh(&sidecar_config()).await;
    for (table, expected) in [
        ("counted", "counter tables cannot be bulk-loaded"),
        ("timed", "clustering column at is a timeuuid"),
    ] {
        let (status, body) = d
            .post_raw(
                "/api/v1/migrations",
                "application/yaml",
                job(ks, table, "", &bulk(&d), ""),
            )
            .await;
        assert_eq!(status, 400, "{table}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("target.bulkWrite"), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    // And a source that is not CQL.
    let parquet = format!(
        "source:\n  type: parquet\n  path: /nonexistent\ntarget:\n  type: cassandra\n  host: 127.0.0.2\n  port: 9042\n  keyspace: {ks}\n  table: plain\n  bulkWrite: sstable\n"
    );
    let (status, body) = d
        .post_raw("/api/v1/migrations", "application/yaml", parquet)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("target.bulkWrite: sstable needs a cassandra/scylla source"),
        "{body}"
    );
}

pub(crate) async fn count(s: &scylla::client::session::Session, table: &str) -> usize {
    let (n,): (i64,) = s
        .query_unpaged(format!("SELECT COUNT(*) FROM {table}"), ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    n as usize
}

/// The target's `t` holds every row of the source's, cell for cell with writetimes.
async fn every_row_arrived(
    src: &scylla::client::session::Session,
    dst: &scylla::client::session::Session,
    ks: &str,
    rows: usize,
    logs: &str,
) {
    let table = format!("{ks}.t");
    assert_eq!(count(dst, &table).await, rows, "{logs}");
    let select = "p, c, v, writetime(v), n, writetime(n)";
    assert_eq!(
        assert_same(src, &table, dst, &table, select, select, &[]).await,
        rows
    );
}

#[tokio::test]
async fn a_runner_killed_mid_job_resumes_and_no_unit_is_lost_or_imported_twice() {
    let rows = 30_000;
    let Fixture { src, dst, ks, .. } = Fixture::rows("bulk_kill", rows, 100, 100).await;
    let sidecar = Daemon::fresh(&sidecar_config()).await;
    let home = Home::new();
    let mut runner = Daemon::start(&home, "").await;
    let sp_dir = home.path().join("savepoints");
    // Throttled so the copy takes ~10 s: long enough to be killed while units upload and
    // import.
    let yaml = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        job(
            ks,
            "t",
            "  preserveTimestamps: true\n  maxConcurrentUnits: 4\n",
            &format!("{}  rowsPerSecond: 3000\n", bulk(&sidecar)),
            ""
        ),
        sp_dir.display()
    );
    let id = runner.submit_job("/api/v1/migrations", &yaml).await;
    let mid = runner
        .wait_job(&id, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() >= Some(12)
        })
        .await;
    assert_eq!(mid["state"], "RUNNING", "{mid}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    runner.kill9();
    let table = format!("{ks}.t");
    assert!(
        count(&dst, &table).await < rows,
        "the copy must be incomplete after the kill"
    );

    // The restarted runner resumes by itself from its newest savepoint.
    let runner = Daemon::start(&home, "").await;
    let done = runner
        .wait_job(&id, WAIT, |j| {
            j["state"] != "INTERRUPTED" && j["state"] != "RUNNING" && j["state"] != "QUEUED"
        })
        .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", runner.logs());
    assert!(
        done["progress"]["unitsSkipped"].as_u64() >= Some(12),
        "{done}"
    );

    // Every row, once: counts, cells and writetimes.
    every_row_arrived(&src, &dst, ks, rows, "").await;
    // Each unit's SSTables were imported once: the target's log of imports holds each
    // upload id once, one per unit that holds rows. How many units there are, and whether
    // each holds a row, depends on the node's (random) tokens: the units are the pairs of
    // the last savepoint, and the source says which of them hold rows.
    let (units, with_rows) = units_with_rows(&src, &table, &sp_dir).await;
    assert_eq!(
        Some(units),
        done["progress"]["unitsTotal"].as_u64(),
        "{done}"
    );
    let log = std::fs::read_to_string(
        sidecar
            .home()
            .state_dir()
            .join("sstable-uploads/imported.log"),
    )
    .unwrap();
    let ids: Vec<&str> = log.lines().map(|l| l.split('\t').nth(1).unwrap()).collect();
    let distinct: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        ids.len(),
        distinct.len(),
        "an upload imported twice:\n{log}"
    );
    assert_eq!(ids.len(), with_rows, "{log}");
}

/// How many units the newest savepoint in `dir` records (the unit that crosses the end of
/// the ring is two pairs, `(a, MIN)` and `(MIN, b)`), and how many of them hold a row of
/// `table` in the source, counted there by `token(p)`.
async fn units_with_rows(
    src: &scylla::client::session::Session,
    table: &str,
    dir: &std::path::Path,
) -> (u64, usize) {
    let newest = crate::resume::savepoint_files(dir)
        .pop()
        .expect("a savepoint was written");
    let text = std::fs::read_to_string(dir.join(newest)).unwrap();
    let doc: serde_json::Value = yaml_serde::from_str(&text).unwrap();
    let pairs: std::collections::BTreeSet<(i64, i64)> = doc["skipTokenRanges"]
        .as_array()
        .unwrap_or_else(|| panic!("no skipTokenRanges: {text}"))
        .iter()
        .map(|p| {
            (
                p[0]["value"].as_i64().unwrap(),
                p[1]["value"].as_i64().unwrap(),
            )
        })
        .collect();
    let (mut units, mut with_rows) = (0, 0);
    let (mut wrap, mut wrap_rows) = (false, false);
    for (a, b) in pairs {
        let upper = if b == i64::MIN {
            String::new()
        } else {
            format!(" AND token(p) <= {b}")
        };
        let (n,): (i64,) = src
            .query_unpaged(
                format!("SELECT COUNT(*) FROM {table} WHERE token(p) > {a}{upper}"),
                (),
            )
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .single_row()
            .unwrap();
        if a == i64::MIN || b == i64::MIN {
            wrap = true;
            wrap_rows |= n > 0;
        } else {
            units += 1;
            with_rows += usize::from(n > 0);
        }
    }
    (units + u64::from(wrap), with_rows + usize::from(wrap_rows))
}

/// The drover beside the target node killed with `kill -9` while units upload and import, and
/// started again on the same address: the job ends, or is resumed, with every row once.
#[tokio::test]
async fn the_target_drover_killed_mid_import_loses_no_unit() {
    let rows = 30_000;
    let Fixture { src, dst, ks, .. } = Fixture::rows("bulk_kill_sidecar", rows, 100, 100).await;
    let sidecar_home = Home::new();
    let mut sidecar = Daemon::start(&sidecar_home, &sidecar_config()).await;
    let addr = sidecar.addr.to_string();
    let runner = Daemon::fresh("").await;
    let sp_dir = runner.home().path().join("savepoints");
    let yaml = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        job(
            ks,
            "t",
            "  preserveTimestamps: true\n  maxConcurrentUnits: 4\n",
            &format!("{}  rowsPerSecond: 3000\n", bulk(&sidecar)),
            ""
        ),
        sp_dir.display()
    );
    let id = runner.submit_job("/api/v1/migrations", &yaml).await;
    runner
        .wait_job(&id, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() >= Some(8)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    sidecar.kill9();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let config = sidecar_home.write_config_at(&addr, &sidecar_config());
    let sidecar = Daemon::start_with(&sidecar_home, &config).await;
    let ended = |j: &serde_json::Value| j["state"] != "RUNNING" && j["state"] != "QUEUED";
    let mut done = runner.wait_job(&id, WAIT, ended).await;
    if done["state"] == "FAILED" {
        // A unit whose target drover went away fails the job, naming it; the job, submitted
        // again, resumes from its savepoint.
        let error = done["error"].as_str().unwrap_or_default();
        assert!(error.contains("127.0.0.2"), "{done}");
        let again = runner.submit_job("/api/v1/migrations", &yaml).await;
        done = runner.wait_job(&again, WAIT, ended).await;
    }
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", runner.logs());
    // The restarted drover took over: units were imported through it.
    assert!(
        sidecar.logs().contains("SSTables imported"),
        "{}",
        sidecar.logs()
    );
    every_row_arrived(&src, &dst, ks, rows, &sidecar.logs()).await;
}

/// The imports of each unit, as the target drover logged them: how many with the node's
/// extended verify, how many without.
fn imports_by_verify(logs: &str) -> (usize, usize) {
    let imports: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("SSTables imported"))
        .collect();
    let with = |v: &str| {
        imports
            .iter()
            .filter(|l| {
                l.contains(&format!("extended_verify={v}"))
                    || l.contains(&format!("\"extended_verify\":{v}"))
            })
            .count()
    };
    (with("true"), with("false"))
}

/// `bulkSkipExtendedVerify: true` imports without the node's extended verify (which the
/// node paces by its compaction throughput) and copies every cell all the same; without it,
/// every import has the extended verify.
#[tokio::test]
async fn a_load_without_extended_verify_asks_for_it_and_copies_every_cell() {
    let rows = 3_000;
    let Fixture { src, dst, ks, .. } = Fixture::rows("bulk_no_ext", rows, 10, 100).await;
    let sidecar = Daemon::fresh(&sidecar_config()).await;
    let runner = Daemon::fresh("").await;
    let table = format!("{ks}.t");

    let default = job(ks, "t", "  preserveTimestamps: true\n", &bulk(&sidecar), "");
    let report = runner.run_job("/api/v1/migrations", &default, WAIT).await;
    assert_eq!(report["state"], "SUCCEEDED", "{report}");
    let (extended, plain) = imports_by_verify(&sidecar.logs());
    assert!(extended > 0 && plain == 0, "{}", sidecar.logs());
    // The runner says what paces those imports: the target node's compaction throughput.
    let hint = "compaction_throughput=64MiB/s";
    assert_eq!(runner.logs().matches(hint).count(), 1, "{}", runner.logs());

    exec(&dst, &format!("TRUNCATE {table}")).await;
    let skip = job(
        ks,
        "t",
        "  preserveTimestamps: true\n",
        &format!("{}  bulkSkipExtendedVerify: true\n", bulk(&sidecar)),
        "",
    );
    let report = runner.run_job("/api/v1/migrations", &skip, WAIT).await;
    assert_eq!(report["state"], "SUCCEEDED", "{report}");
    let (extended_after, plain) = imports_by_verify(&sidecar.logs());
    assert_eq!(extended_after, extended, "{}", sidecar.logs());
    assert!(plain > 0, "{}", sidecar.logs());
    assert_eq!(
        runner.logs().matches(hint).count(),
        1,
        "only with the extended verify"
    );
    every_row_arrived(&src, &dst, ks, rows, &sidecar.logs()).await;
}

/// Loading a table again (the target truncated in between) is a new load: its units are
/// imported again, not taken for the previous load's (whose uploads the target drover still
/// remembers). A run resuming a savepoint stays in its load (the test above).
#[tokio::test]
async fn a_table_loaded_again_after_a_truncate_gets_every_row_again() {
    let rows = 3_000;
    let Fixture { dst, ks, .. } = Fixture::rows("bulk_again", rows, 10, 100).await;
    let sidecar = Daemon::fresh(&sidecar_config()).await;
    let table = format!("{ks}.t");
    let home = Home::new();
    let sp_dir = home.path().join("savepoints");
    let with_savepoints = format!(
        "{}savepoints:\n  path: {}\n  intervalSeconds: 300\n",
        job(ks, "t", "  preserveTimestamps: true\n", &bulk(&sidecar), ""),
        sp_dir.display()
    );
    let runner = Daemon::start(&home, "").await;
    let plain = job(ks, "t", "  preserveTimestamps: true\n", &bulk(&sidecar), "");
    for (round, yaml) in [&plain, &plain, &with_savepoints].into_iter().enumerate() {
        exec(&dst, &format!("TRUNCATE {table}")).await;
        let report = runner.run_job("/api/v1/migrations", yaml, WAIT).await;
        assert_eq!(report["state"], "SUCCEEDED", "round {round}: {report}");
        assert_eq!(count(&dst, &table).await, rows, "round {round}: {report}");
    }
    // The savepoint names the load, from the first one on; a fresh directory is a new load.
    let names: Vec<_> = std::fs::read_dir(&sp_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("savepoint_")
        })
        .collect();
    assert_eq!(
        names.len(),
        2,
        "one at the start of the load, one at its end"
    );
    for path in names {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains("bulkWriteRun: "), "{text}");
    }
    std::fs::remove_dir_all(&sp_dir).unwrap();
    exec(&dst, &format!("TRUNCATE {table}")).await;
    runner
        .run_job("/api/v1/migrations", &with_savepoints, WAIT)
        .await;
    assert_eq!(count(&dst, &table).await, rows);
}

#[tokio::test]
async fn an_import_the_node_refuses_fails_the_job_with_its_message() {
    let Fixture { src, ks, .. } = Fixture::new(
        "bulk_no_jmx",
        "CREATE TABLE $ks.t (k int PRIMARY KEY, v text)",
    )
    .await;
    for k in 0..50 {
        exec(
            &src,
            &format!("INSERT INTO {ks}.t (k, v) VALUES ({k}, 'v')"),
        )
        .await;
    }
    // A sidecar that cannot reach the node's JMX, with either importer.
    for (importer, says) in [
        ("jmx", "through JMX at 127.0.0.1:1"),
        ("nodetool", "nodetool"),
    ] {
        let d = Daemon::fresh(&format!(
            "{}  importer: {importer}\n",
            sidecar_config().replace("127.0.0.1:7299", "127.0.0.1:1")
        ))
        .await;
        let id = d
            .submit_job("/api/v1/migrations", &job(ks, "t", "", &bulk(&d), ""))
            .await;
        let done = d
            .wait_job(&id, WAIT, |j| {
                j["state"] != "RUNNING" && j["state"] != "QUEUED"
            })
            .await;
        assert_eq!(done["state"], "FAILED", "{importer}: {done}");
        let error = done["error"].as_str().unwrap();
        assert!(
            error.contains("node 127.0.0.2 refused the import"),
            "{importer}: {error}"
        );
        assert!(error.contains(says), "{importer}: {error}");
        assert!(error.contains("Connection refused"), "{importer}: {error}");
    }
}

/// Two daemons share a bulk load (`coordination: target-table`): units are leased through the
/// target as with CQL writes, each daemon loads a share of them through the target's drover,
/// and the target holds every row, cell for cell.
#[tokio::test]
async fn two_daemons_share_a_bulk_load_through_leases_on_the_target() {
    let rows = 20_000;
    let Fixture {
        src,
        dst,
        ks,
        daemon: first,
    } = Fixture::rows("bulk_coord", rows, 100, 100).await;
    let sidecar = Daemon::fresh(&sidecar_config()).await;
    let second = Daemon::fresh("").await;
    let yaml = format!(
        "{}coordination:\n  type: target-table\n  leaseSeconds: 10\n",
        job(
            ks,
            "t",
            "  preserveTimestamps: true\n  maxConcurrentUnits: 2\n",
            &format!("{}  rowsPerSecond: 4000\n", bulk(&sidecar)),
            ""
        )
    );
    let ids = [
        first.submit_job("/api/v1/migrations", &yaml).await,
        second.submit_job("/api/v1/migrations", &yaml).await,
    ];
    let ended = |j: &serde_json::Value| j["state"] != "RUNNING" && j["state"] != "QUEUED";
    let mut written = 0;
    for (d, id) in [(&first, &ids[0]), (&second, &ids[1])] {
        let done = d.wait_job(id, WAIT, ended).await;
        assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", d.logs());
        let p = &done["progress"];
        assert_eq!(p["unitsDone"], p["unitsTotal"], "{done}");
        let mine = p["rowsWritten"].as_u64().unwrap();
        assert!(
            mine > 0 && mine < rows as u64,
            "each daemon loaded a share: {done}"
        );
        written += mine;
    }
    assert_eq!(written, rows as u64, "no unit loaded by both");
    every_row_arrived(&src, &dst, ks, rows, &sidecar.logs()).await;
}

/// A partition of exactly as many rows as a piece holds, alone in its unit: its one piece
/// ends the unit's only SSTable before the unit ends, with no row after it; that SSTable is
/// uploaded and imported all the same.
#[tokio::test]
async fn a_partition_ending_exactly_at_a_piece_is_loaded() {
    let rows = 25_000;
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("bulk_piece_end", rows, rows, 1).await;
    let sidecar = Daemon::fresh(&sidecar_config()).await;
    let report = daemon
        .run_job(
            "/api/v1/migrations",
            &job(ks, "t", "  preserveTimestamps: true\n", &bulk(&sidecar), ""),
            WAIT,
        )
        .await;
    assert_eq!(report["state"], "SUCCEEDED", "{report}");
    every_row_arrived(&src, &dst, ks, rows, &sidecar.logs()).await;
}
