use std::time::Duration;

use serde_json::Value;

use test_support::cql::{
    self, Fixture, assert_same, clusters, dst_addr, exec, fresh_keyspace, job, job_to, write_job,
};
use test_support::{Daemon, drover_bin, error_message};

const WAIT: Duration = Duration::from_secs(120);

async fn submit(daemon: &Daemon, yaml: &str) -> (u16, Value) {
    daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.to_string())
        .await
}

async fn run_to_success(daemon: &Daemon, yaml: &str) -> Value {
    run_to_success_within(daemon, yaml, WAIT).await
}

async fn run_to_success_within(daemon: &Daemon, yaml: &str, wait: Duration) -> Value {
    daemon.run_job("/api/v1/migrations", yaml, wait).await
}

pub const EVERY_TYPE: &str = "
CREATE TYPE $ks.addr (street text, num int, tags frozen<set<text>>);
CREATE TABLE $ks.everything (
  k uuid, c1 timeuuid, c2 text,
  st int static,
  a ascii, b bigint, bl blob, bo boolean, d date, de decimal, db double, du duration, f float,
  i inet, n int, si smallint, t text, tm time, ts timestamp, ti tinyint, vi varint, tu timeuuid,
  l list<int>, se set<text>, m map<text, int>,
  fl frozen<list<int>>, fs frozen<set<int>>, fm frozen<map<int, text>>,
  nested map<text, frozen<list<frozen<map<int, text>>>>>,
  u addr, fu frozen<addr>, tup tuple<int, text, frozen<list<int>>>, vec vector<float, 3>,
  PRIMARY KEY ((k), c1, c2)
) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)";

pub const VALUE_COLUMNS: &str = "a, b, bl, bo, d, de, db, du, f, i, n, si, t, tm, ts, ti, vi, tu, l, se, m, fl, fs, fm, nested, u, fu, tup, vec";

pub async fn fill_every_type(src: &scylla::client::session::Session, ks: &str) {
    let t = format!("{ks}.everything");
    let k1 = "11111111-1111-1111-1111-111111111111";
    let k2 = "22222222-2222-2222-2222-222222222222";
    let c = "e0d1c000-0000-1000-8000-000000000001";
    let full = |k: &str, c2: &str| {
        format!(
            "INSERT INTO {t} (k, c1, c2, a, b, bl, bo, d, de, db, du, f, i, n, si, t, tm, ts, ti, vi, tu, l, se, m, fl, fs, fm, nested, u, fu, tup, vec) VALUES \
        ({k}, {c}, '{c2}', 'ascii', -9223372036854775808, 0x00ff10, true, '-5877641-06-23', 1.500, 1.7976931348623157E308, 1mo2d3h4m5s6ms7us8ns, -0.0, \
        '2001:db8::ff00:42:8329', -2147483648, -32768, 'ünïcödé ✓', '23:59:59.999999999', 8640000000000123, -128, \
        123456789012345678901234567890123456789, e0d1c000-0000-1000-8000-000000000002, \
        [3, 1, 2, 1], {{'x', 'y'}}, {{'a': 1, 'b': 2}}, [1, 2], {{5, 6}}, {{1: 'one'}}, \
        {{'n': [{{1: 'a'}}, {{2: 'b'}}]}}, {{street: 'Main', num: 1, tags: {{'t1'}}}}, {{street: 'Frozen', num: 2, tags: {{}}}}, \
        (1, 'tuple', [9]), [1.5, -2.25, 3e-7]) USING TIMESTAMP 1000 AND TTL 86400"
        )
    };
    exec(src, &full(k1, "row-1")).await;
    exec(src, &full(k2, "row-2")).await;
    // Cells of one row with different writetimes and TTLs, including collection elements
    // added later and a cell without TTL.
    exec(src, &format!("UPDATE {t} USING TIMESTAMP 2000 SET n = 7, t = '' WHERE k = {k1} AND c1 = {c} AND c2 = 'row-1'")).await;
    exec(src, &format!("UPDATE {t} USING TIMESTAMP 3000 AND TTL 5000 SET se = se + {{'z'}}, m = m + {{'c': 3}}, l = l + [42] WHERE k = {k1} AND c1 = {c} AND c2 = 'row-1'")).await;
    exec(src, &format!("UPDATE {t} USING TIMESTAMP 4000 AND TTL 777 SET b = 1 WHERE k = {k1} AND c1 = {c} AND c2 = 'row-1'")).await;
    // Nulls stay nulls (no tombstone needed), empty strings stay empty.
    exec(src, &format!("INSERT INTO {t} (k, c1, c2, t, a) VALUES ({k1}, {c}, 'sparse', '', null) USING TIMESTAMP 5000")).await;
    // A row that has only its key.
    exec(
        src,
        &format!("INSERT INTO {t} (k, c1, c2) VALUES ({k2}, {c}, 'key-only') USING TIMESTAMP 6000"),
    )
    .await;
    // Static cells, and a partition holding only static data.
    exec(
        src,
        &format!("UPDATE {t} USING TIMESTAMP 7000 AND TTL 3600 SET st = 1 WHERE k = {k1}"),
    )
    .await;
    exec(src, &format!("INSERT INTO {t} (k, st) VALUES (33333333-3333-3333-3333-333333333333, 3) USING TIMESTAMP 8000")).await;
}

pub fn meta_select(columns: &str) -> (String, Vec<usize>) {
    // For every column: the value, its writetime and its TTL.
    let cols: Vec<&str> = columns.split(", ").collect();
    let mut select = vec![
        "k".to_string(),
        "c1".to_string(),
        "c2".to_string(),
        "st".to_string(),
        "writetime(st)".to_string(),
        "ttl(st)".to_string(),
    ];
    let mut ttl = vec![5];
    for c in cols {
        select.push(c.to_string());
        select.push(format!("writetime({c})"));
        select.push(format!("ttl({c})"));
        ttl.push(select.len() - 1);
    }
    (select.join(", "), ttl)
}

#[tokio::test]
async fn every_cql_type_is_copied_exactly_with_writetimes_and_ttls() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new("it_every_type", EVERY_TYPE).await;
    fill_every_type(&src, ks).await;
    let done = run_to_success(
        &daemon,
        &job(ks, "everything", "  preserveTimestamps: true\n", "", ""),
    )
    .await;
    // Two full rows, a sparse row, a key-only row, a static-only partition.
    assert_eq!(done["progress"]["rowsRead"], 5, "{done}");
    assert_eq!(done["progress"]["rowsWritten"], 5, "{done}");
    assert_eq!(
        done["progress"]["unitsDone"], done["progress"]["unitsTotal"],
        "{done}"
    );

    let (select, ttl) = meta_select(VALUE_COLUMNS);
    let table = format!("{ks}.everything");
    let rows = assert_same(&src, &table, &dst, &table, &select, &select, &ttl).await;
    assert_eq!(rows, 5);
    // The job record holds no secret and says where it came from.
    assert_eq!(done["spec"]["source"]["keyspace"], ks);
}

#[tokio::test]
async fn without_preserve_timestamps_values_are_exact_and_cells_are_not_tombstoned() {
    let (src, dst) = clusters().await;
    let ks = "it_plain_copy";
    fresh_keyspace(&src, &dst, ks, EVERY_TYPE).await;
    fill_every_type(&src, ks).await;
    // Cassandra's own writetimes are milliseconds times 1000: the target-only cell written next
    // may land in the same millisecond, below a microsecond reading of the clock.
    let copy_started_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        * 1000;
    // A target cell that the source row does not have must survive: nulls are not written.
    exec(&dst, &format!("INSERT INTO {ks}.everything (k, c1, c2, a) VALUES (11111111-1111-1111-1111-111111111111, e0d1c000-0000-1000-8000-000000000001, 'sparse', 'kept')")).await;

    let out = tokio::process::Command::new(drover_bin())
        .args(["migrate", "--config"])
        .arg(write_job(&job(ks, "everything", "", "", "")))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("migration complete: 5 rows"), "{stderr}");
    let table = format!("{ks}.everything");
    let values = format!("k, c1, c2, st, {}", VALUE_COLUMNS.replace("a, b,", "b,"));
    assert_same(&src, &table, &dst, &table, &values, &values, &[]).await;
    let kept = cql::raw_rows(&dst, &table, "a").await;
    assert!(
        kept.iter()
            .any(|r| r.cells[0].as_deref() == Some(b"kept".as_slice())),
        "the null source cell overwrote the target"
    );
    // The target's clock and no TTL: not one of the source's writetimes (1000 to 8000 µs) or
    // TTLs, whether of a plain cell, a static one, a collection element or a UDT field.
    let multi = ["l", "se", "m", "nested", "u"];
    let columns: Vec<(&str, bool)> = std::iter::once("st")
        .chain(VALUE_COLUMNS.split(", "))
        .map(|c| (c, multi.contains(&c)))
        .collect();
    let cells =
        crate::copy_semantics::assert_written_now(&dst, &table, &columns, copy_started_us).await;
    assert!(cells > 60, "only {cells} cells checked");
}

#[tokio::test]
async fn counters_renames_and_where_filters() {
    let Fixture {
        src, dst, ks, daemon,
    } = Fixture::new(
        "it_counters_renames",
        "CREATE TABLE $ks.hits (page text, day int, views counter, clicks counter, PRIMARY KEY (page, day))",
    )
    .await;
    exec(
        &src,
        &format!("CREATE TABLE {ks}.people (id int PRIMARY KEY, name text, age int)"),
    )
    .await;
    exec(
        &dst,
        &format!(
            "CREATE TABLE {ks}.people (id int PRIMARY KEY, full_name text, age int, extra text)"
        ),
    )
    .await;
    for i in 0..200 {
        exec(&src, &format!("UPDATE {ks}.hits SET views = views + {}, clicks = clicks + {} WHERE page = 'p{}' AND day = {}", i * 3, i, i % 7, i)).await;
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.people (id, name, age) VALUES ({i}, 'name-{i}', {})",
                i % 90
            ),
        )
        .await;
    }
    exec(
        &src,
        &format!("UPDATE {ks}.hits SET views = views + 5 WHERE page = 'only-views' AND day = 0"),
    )
    .await;

    // Counters are written as differences to what the target holds: running the same job
    // again (as a resume after a crash would, for a partly copied unit) changes nothing.
    for _ in 0..2 {
        let done = run_to_success(&daemon, &job(ks, "hits", "", "", "")).await;
        assert_eq!(done["progress"]["rowsWritten"], 201);
        assert_same(
            &src,
            &format!("{ks}.hits"),
            &dst,
            &format!("{ks}.hits"),
            "page, day, views, clicks",
            "page, day, views, clicks",
            &[],
        )
        .await;
    }

    let renamed = job(
        ks,
        "people",
        "  where: age >= 30\n",
        "",
        "renames:\n  - from: name\n    to: full_name\n",
    );
    let done = run_to_success(&daemon, &renamed).await;
    let expected = (0..200).filter(|i| i % 90 >= 30).count();
    assert_eq!(done["progress"]["rowsWritten"], expected as u64, "{done}");
    let rows = cql::raw_rows(&dst, &format!("{ks}.people"), "id, full_name, age, extra").await;
    assert_eq!(rows.len(), expected);
    for row in rows {
        let id = i32::from_be_bytes(row.cells[0].as_deref().unwrap().try_into().unwrap());
        assert_eq!(
            row.cells[1].as_deref(),
            Some(format!("name-{id}").as_bytes())
        );
        assert_eq!(
            row.cells[2].as_deref(),
            Some((id % 90).to_be_bytes().as_slice()),
            "row {id}: age"
        );
        assert!(row.cells[3].is_none());
    }
}

#[tokio::test]
async fn bad_jobs_are_refused_before_anything_is_written() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new("it_bad_jobs", "").await;
    exec(
        &src,
        &format!("CREATE TABLE {ks}.t (k int, c int, v text, n int, PRIMARY KEY (k, c))"),
    )
    .await;
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.t (k int, c int, v text, n bigint, PRIMARY KEY (k, c))"),
    )
    .await;
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.missing_col (k int, c int, v text, PRIMARY KEY (k, c))"),
    )
    .await;
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.other_key (k int, c int, v text, n int, PRIMARY KEY (k, v))"),
    )
    .await;
    exec(
        &src,
        &format!("INSERT INTO {ks}.t (k, c, v, n) VALUES (1, 1, 'x', 1)"),
    )
    .await;

    let with_target_table = |t: &str| job_to(ks, "t", t, "", "", "");
    let cases = [
        (
            job("no_such_ks", "t", "", "", ""),
            "job config: source.keyspace: keyspace \"no_such_ks\" does not exist on the source cluster",
        ),
        (
            job(ks, "nope", "", "", ""),
            &format!(
                "job config: source.table: table {ks}.nope does not exist on the source cluster"
            ) as &str,
        ),
        // Every problem of a target table at once, each with its fix (tests/it/schema_problems.rs).
        (
            with_target_table("t"),
            &format!(
                "job config: target.table: the target table \"{ks}\".\"t\" cannot take the rows of the source table \"{ks}\".\"t\": 1 problem\n  1. column \"n\" has type int in the source but bigint in the target; fix: recreate the table (below)"
            ),
        ),
        (
            with_target_table("missing_col"),
            &format!(
                "job config: target.table: the target table \"{ks}\".\"missing_col\" cannot take the rows of the source table \"{ks}\".\"t\": 1 problem\n  1. the target table has no column \"n\", a regular column of type int in the source; fix: ALTER TABLE \"{ks}\".\"missing_col\" ADD \"n\" int;"
            ),
        ),
        (
            with_target_table("other_key"),
            &format!(
                "job config: target.table: the target table \"{ks}\".\"other_key\" cannot take the rows of the source table \"{ks}\".\"t\": 3 problems\n  1. column \"c\" is a clustering key column in the source but a regular column in the target"
            ),
        ),
        (
            job(ks, "t", "", "", "renames:\n  - from: w\n    to: x\n"),
            &format!(
                "job config: renames: column \"w\" does not exist in the source table \"{ks}\".\"t\""
            ),
        ),
        (
            job(ks, "t", "  fetchSize: -1\n", "", ""),
            "job config: source.fetchSize: invalid value: integer `-1`, expected usize (line 8)",
        ),
        (
            job(ks, "t", "", "  writeTTLInS: 630720001\n", ""),
            "job config: target.writeTTLInS: must be at most 630720000",
        ),
        (
            job(ks, "t", "", "  colour: red\n", ""),
            "job config: target: unknown field `colour`",
        ),
        (
            job(ks, "t", "  localDC: mars\n", "", ""),
            "job config: source.localDC: no node of the source cluster is in data center \"mars\" (known: datacenter1)",
        ),
    ];
    for (yaml, expected) in cases {
        let (status, body) = submit(&daemon, &yaml).await;
        assert_eq!(status, 400, "{yaml}\n{body}");
        let message = error_message(status, &body);
        assert!(
            message.starts_with(expected),
            "expected {expected:?}\n     got {message:?}"
        );
    }
    // An unreachable cluster is not the client's syntax error: 502, and the job file is not
    // blamed for it. (127.0.0.3 served as "nothing listens there" until the live-migration
    // tests' nodes came to live on it: a port just closed is.)
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (dst_host, dst_port) = dst_addr()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let unreachable = job(ks, "t", "", "", "").replace(
        &format!("host: {dst_host}\n  port: {dst_port}"),
        &format!("host: 127.0.0.1\n  port: {}", closed.port()),
    );
    assert!(
        unreachable.contains(&closed.port().to_string()),
        "{unreachable}"
    );
    let (status, body) = submit(&daemon, &unreachable).await;
    assert_eq!(status, 502, "{body}");
    let message = error_message(status, &body);
    assert!(
        message.starts_with("cannot start the job: target: cannot connect to"),
        "{body}"
    );

    // Nothing was written and no job was created.
    assert!(
        cql::raw_rows(&dst, &format!("{ks}.t"), "k")
            .await
            .is_empty()
    );
    let (_, list) = daemon.get("/api/v1/migrations").await;
    assert_eq!(list["migrations"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_million_rows_with_a_wide_partition() {
    let rows = 1_000_000;
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("it_million", rows, 100_000, 1000).await;
    // Debug builds on a shared 2-core machine copy a few thousand rows per second.
    let done = run_to_success_within(
        &daemon,
        &job(ks, "t", "  fetchSize: 2000\n", "", ""),
        Duration::from_secs(900),
    )
    .await;
    assert_eq!(done["progress"]["rowsWritten"], rows as u64, "{done}");
    let table = format!("{ks}.t");
    let compared = assert_same(&src, &table, &dst, &table, "p, c, v, n", "p, c, v, n", &[]).await;
    assert_eq!(compared, rows);
}

#[tokio::test]
async fn cancel_stops_a_running_migration_promptly() {
    let Fixture { ks, daemon, .. } = Fixture::rows("it_cancel", 5000, 1000, 1000).await;
    // 200 rows/s: 25 s for the table, unless cancelled.
    let (status, body) = submit(&daemon, &job(ks, "t", "", "  rowsPerSecond: 200\n", "")).await;
    assert_eq!(status, 202, "{body}");
    let url = body["statusUrl"].as_str().unwrap().to_string();
    let running = daemon
        .wait_job(body["jobId"].as_str().unwrap(), WAIT, |j| {
            j["progress"]["rowsWritten"].as_u64() >= Some(200)
        })
        .await;
    assert_eq!(running["state"], "RUNNING");
    assert!(
        running["progress"]["rowsPerSecond"].as_u64().is_some(),
        "{running}"
    );
    let metrics = daemon.get_text("/metrics").await;
    assert!(
        metrics.contains("drover_job_progress{") && metrics.contains("counter=\"rowsWritten\""),
        "{metrics}"
    );

    let asked = std::time::Instant::now();
    let (status, _) = daemon
        .post_json(&format!("{url}/cancel"), &serde_json::json!({}))
        .await;
    assert_eq!(status, 202);
    let ended = daemon
        .wait_job(body["jobId"].as_str().unwrap(), WAIT, |j| {
            j["state"] != "RUNNING"
        })
        .await;
    assert_eq!(ended["state"], "CANCELLED", "{ended}");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "cancel took {:?}",
        asked.elapsed()
    );
    let written = ended["progress"]["rowsWritten"].as_u64().unwrap();
    assert!(written < 5000, "{ended}");
    assert!(
        ended["progress"]["unitsDone"].as_u64() < ended["progress"]["unitsTotal"].as_u64(),
        "{ended}"
    );
}

#[tokio::test]
async fn tls_to_both_clusters_verifies_the_server_certificate() {
    let ca = std::env::var("DROVER_TEST_TLS_CA")
        .expect("DROVER_TEST_TLS_CA is set by scripts/testenv up (run scripts/test)");
    let Fixture { ks, daemon, .. } = Fixture::rows("it_tls", 1000, 100, 100).await;
    // Migrator's key (trustStorePath) on one side, drover's (caCertPath) on the other.
    let tls =
        |key: &str, path: &str| format!("  sslOptions:\n    enabled: true\n    {key}: {path}\n");
    let done = run_to_success(
        &daemon,
        &job(
            ks,
            "t",
            &tls("trustStorePath", &ca),
            &tls("caCertPath", &ca),
            "",
        ),
    )
    .await;
    assert_eq!(done["progress"]["rowsWritten"], 1000, "{done}");

    // A CA that did not sign the nodes' certificate: the connection is refused, nothing runs.
    let other = daemon.home().path().join("other-ca");
    std::fs::create_dir_all(&other).unwrap();
    let keytool = |args: &[&str]| {
        let out = std::process::Command::new("keytool")
            .args(args)
            .current_dir(&other)
            .output()
            .expect("keytool (JDK)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    keytool(&[
        "-genkeypair",
        "-alias",
        "ca",
        "-keyalg",
        "RSA",
        "-dname",
        "CN=stranger",
        "-ext",
        "bc:c",
        "-keystore",
        "ca.p12",
        "-storetype",
        "PKCS12",
        "-storepass",
        "secret",
    ]);
    keytool(&[
        "-exportcert",
        "-rfc",
        "-alias",
        "ca",
        "-keystore",
        "ca.p12",
        "-storepass",
        "secret",
        "-file",
        "ca.pem",
    ]);
    let stranger = other.join("ca.pem");
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            job(
                ks,
                "t",
                &tls("caCertPath", stranger.to_str().unwrap()),
                "",
                "",
            ),
        )
        .await;
    assert_eq!(status, 502, "{body}");
    assert!(
        error_message(status, &body).contains("source: cannot connect"),
        "{body}"
    );
    // A file that is not PEM is a config error.
    let (status, body) = daemon
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            job(
                ks,
                "t",
                "",
                &tls("caCertPath", other.join("ca.p12").to_str().unwrap()),
                "",
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        error_message(status, &body).contains("target.sslOptions.caCertPath"),
        "{body}"
    );
}
