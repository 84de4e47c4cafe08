//! What a CQL migration writes, cell by cell: fixed writetimes and TTLs, decimals without
//! trailing zeros, UDTs that differ between the clusters, TTLs that keep counting while a write
//! waits, the write rate limit, and errors that cannot go away.

use std::time::{Duration, Instant};

use bytes::Bytes;
use drover::connectors::cql::codec::{read_i32, read_i64, read_int_list};
use drover::connectors::cql::rows::RawRow;
use serde_json::Value;

use test_support::Daemon;
use test_support::cql::{self, Fixture, clusters, exec, job, job_to, raw_rows};

const WAIT: Duration = Duration::from_secs(120);

/// The writetimes (or TTLs) of one cell: one for a single-cell column, one per element for a
/// non-frozen collection or UDT (`multi`).
fn times(cell: &Option<Bytes>, multi: bool) -> Vec<Option<i64>> {
    if multi {
        return read_int_list(cell).unwrap_or_default();
    }
    vec![read_i64(cell).or_else(|| read_i32(cell).map(i64::from))]
}

/// A CQL `decimal` as the protocol carries it: scale, then the unscaled value in the fewest
/// two's complement bytes.
fn decimal(scale: i32, unscaled: i64) -> Vec<u8> {
    let mut bytes = unscaled.to_be_bytes().to_vec();
    while bytes.len() > 1
        && ((bytes[0] == 0 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xff && bytes[1] & 0x80 != 0))
    {
        bytes.remove(0);
    }
    let mut out = scale.to_be_bytes().to_vec();
    out.extend(bytes);
    out
}

fn int(cell: &Option<Bytes>) -> i32 {
    read_i32(cell).expect("an int cell")
}

/// The same job file with `target_ks` as the target's keyspace.
fn job_into(
    ks: &str,
    target_ks: &str,
    table: &str,
    extra_source: &str,
    extra_target: &str,
) -> String {
    let yaml = job(ks, table, extra_source, extra_target, "");
    let (head, tail) = yaml.split_once("target:\n").unwrap();
    format!(
        "{head}target:\n{}",
        tail.replace(
            &format!("keyspace: {ks}\n"),
            &format!("keyspace: {target_ks}\n")
        )
    )
}

async fn submit(daemon: &Daemon, yaml: &str) -> String {
    daemon.submit_job("/api/v1/migrations", yaml).await
}

fn progress(job: &Value, key: &str) -> u64 {
    job["progress"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no progress.{key}: {job}"))
}

const FIXED_TS: i64 = 1_700_000_000_000_000;
const FIXED_TTL: i64 = 3600;

/// `writeTTLInS` and `writeWritetimestampInuS` set every cell's TTL and writetime without
/// `preserveTimestamps` (static cells and key-only rows included), and give way to the
/// source's with it, as in ScyllaDB Migrator; `stripTrailingZerosForDecimals` rewrites regular and static decimals;
/// `dropNullPrimaryKeys` does not take a partition holding only static data (whose clustering
/// columns read as null) for a row with a null key: it is copied.
#[tokio::test]
async fn fixed_writetimes_and_ttls_stripped_decimals_and_static_partitions() {
    let ddl = |t: &str| {
        format!(
            "CREATE TABLE $ks.{t} (k int, c int, st decimal static, de decimal, v text, s set<int>, \
             PRIMARY KEY (k, c))"
        )
    };
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new(
        "cp_fixed",
        &format!(
            "{};{};{};{}",
            ddl("t"),
            ddl("kept"),
            ddl("plain"),
            ddl("short")
        ),
    )
    .await;
    let t = format!("{ks}.t");
    for cql in [
        format!(
            "INSERT INTO {t} (k, c, de, v) VALUES (1, 1, 1.500, 'one') USING TIMESTAMP 1000 AND TTL 86400"
        ),
        // Set elements with different writetimes and TTLs: appended group by group.
        format!(
            "UPDATE {t} USING TIMESTAMP 2000 AND TTL 5000 SET s = s + {{1}} WHERE k = 1 AND c = 1"
        ),
        format!("UPDATE {t} USING TIMESTAMP 3000 SET s = s + {{2}} WHERE k = 1 AND c = 1"),
        format!("UPDATE {t} USING TIMESTAMP 4000 AND TTL 7000 SET st = 2.50 WHERE k = 1"),
        format!("INSERT INTO {t} (k, c, de, v) VALUES (2, 1, -12.00, 'two') USING TIMESTAMP 5000"),
        format!("INSERT INTO {t} (k, c, de) VALUES (2, 2, 0.000) USING TIMESTAMP 5000"),
        format!("INSERT INTO {t} (k, c, de) VALUES (2, 3, 100) USING TIMESTAMP 5000"),
        format!("INSERT INTO {t} (k, c, de) VALUES (2, 4, 1E+3) USING TIMESTAMP 5000"),
        // A partition holding only static data.
        format!("INSERT INTO {t} (k, st) VALUES (3, 7.0) USING TIMESTAMP 6000"),
        // A row that has only its key.
        format!("INSERT INTO {t} (k, c) VALUES (4, 1) USING TIMESTAMP 6500"),
    ] {
        exec(&src, &cql).await;
    }

    let fixed = format!(
        "  writeTTLInS: {FIXED_TTL}\n  writeWritetimestampInuS: {FIXED_TS}\n  stripTrailingZerosForDecimals: true\n  dropNullPrimaryKeys: true\n"
    );
    for (target, preserve) in [("kept", "  preserveTimestamps: true\n"), ("plain", "")] {
        let done = daemon
            .run_job(
                "/api/v1/migrations",
                &job_to(ks, "t", target, preserve, &fixed, ""),
                WAIT,
            )
            .await;
        assert_eq!(progress(&done, "rowsRead"), 7, "{done}");
        assert_eq!(progress(&done, "rowsDropped"), 0, "{done}");

        let rows = raw_rows(
            &dst,
            &format!("{ks}.{target}"),
            "k, c, st, de, v, s, writetime(st), ttl(st), writetime(de), ttl(de), \
             writetime(v), ttl(v), writetime(s), ttl(s)",
        )
        .await;
        let key = |r: &RawRow| {
            (
                int(&r.cells[0]),
                r.cells[1].as_ref().map(|_| int(&r.cells[1])),
            )
        };
        let mut keys: Vec<_> = rows.iter().map(key).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                (1, Some(1)),
                (2, Some(1)),
                (2, Some(2)),
                (2, Some(3)),
                (2, Some(4)),
                (3, None),
                (4, Some(1))
            ],
            "{target}: rows of the target"
        );
        if target == "kept" {
            // With preserveTimestamps the source's writetimes and TTLs win over the fixed
            // ones, as in ScyllaDB Migrator: every cell is the source's.
            let select = "k, c, writetime(st), writetime(de), writetime(v), writetime(s)";
            let kept = raw_rows(&dst, &format!("{ks}.kept"), select).await;
            let source = raw_rows(&src, &t, select).await;
            assert_eq!(
                kept.iter().map(|r| r.cells.clone()).collect::<Vec<_>>(),
                source.iter().map(|r| r.cells.clone()).collect::<Vec<_>>(),
                "kept: writetimes"
            );
            let ttls = raw_rows(&dst, &format!("{ks}.kept WHERE k = 2 AND c = 1"), "ttl(v)").await;
            assert_eq!(ttls[0].cells[0], None, "kept: a cell without TTL got one");
        }
        for r in rows.iter().filter(|_| target == "plain") {
            let at = format!("{target}: row {:?}", key(r));
            for (value, multi) in [(2, false), (3, false), (4, false), (5, true)] {
                if r.cells[value].is_none() {
                    continue;
                }
                let (wt, ttl) = (
                    times(&r.cells[6 + 2 * (value - 2)], multi),
                    times(&r.cells[7 + 2 * (value - 2)], multi),
                );
                assert!(!wt.is_empty(), "{at}: no writetime for column {value}");
                for w in wt {
                    assert_eq!(w, Some(FIXED_TS), "{at}: writetime of column {value}");
                }
                for t in ttl {
                    let t = t.unwrap_or_else(|| panic!("{at}: column {value} has no TTL"));
                    assert!(
                        (FIXED_TTL - 60..=FIXED_TTL).contains(&t),
                        "{at}: TTL {t} of column {value}"
                    );
                }
            }
        }
        let cell = |k: i32, c: Option<i32>, i: usize| {
            rows.iter().find(|r| key(r) == (k, c)).unwrap().cells[i]
                .as_deref()
                .map(<[u8]>::to_vec)
        };
        // Decimals: the value stays, the trailing zeros of the fraction go; an integer keeps
        // its zeros (100 is not written 1E+2), as does a negative scale.
        assert_eq!(cell(1, Some(1), 3), Some(decimal(1, 15)), "{target}: 1.500");
        assert_eq!(
            cell(1, Some(1), 2),
            Some(decimal(1, 25)),
            "{target}: static 2.50"
        );
        assert_eq!(
            cell(2, Some(1), 3),
            Some(decimal(0, -12)),
            "{target}: -12.00"
        );
        assert_eq!(cell(2, Some(2), 3), Some(decimal(0, 0)), "{target}: 0.000");
        assert_eq!(cell(2, Some(3), 3), Some(decimal(0, 100)), "{target}: 100");
        assert_eq!(cell(2, Some(4), 3), Some(decimal(-3, 1)), "{target}: 1E+3");
        assert_eq!(
            cell(3, None, 2),
            Some(decimal(0, 7)),
            "{target}: static 7.0"
        );
        // Other values are untouched.
        assert_eq!(cell(1, Some(1), 4), Some(b"one".to_vec()));
        let set = cql::raw_rows(&src, &t, "s").await[0].cells[0].clone();
        assert_eq!(cell(1, Some(1), 5), set.as_deref().map(<[u8]>::to_vec));
        if target == "kept" {
            continue;
        }
        // The key-only row has no cell whose writetime could be read; its row marker must
        // carry the fixed writetime too: a deletion just newer than it removes the row (a
        // marker written with the target's clock would outlive it).
        exec(
            &dst,
            &format!(
                "DELETE FROM {ks}.{target} USING TIMESTAMP {} WHERE k = 4 AND c = 1",
                FIXED_TS + 1
            ),
        )
        .await;
        let left = raw_rows(&dst, &format!("{ks}.{target} WHERE k = 4"), "c").await;
        assert!(
            left.is_empty(),
            "{target}: the key-only row was not written with writeWritetimestampInuS"
        );
    }

    // Every row, the key-only one and the static-only partition included, ends with a short
    // fixed TTL: nothing written outlives it.
    daemon
        .run_job(
            "/api/v1/migrations",
            &job_to(ks, "t", "short", "", "  writeTTLInS: 1\n", ""),
            WAIT,
        )
        .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let left = raw_rows(&dst, &format!("{ks}.short"), "k, c").await;
    assert!(left.is_empty(), "rows outlived writeTTLInS: {left:?}");
}

/// Without `preserveTimestamps` every cell is written with the target's clock and no TTL:
/// none of the source's writetimes or TTLs reach the target, whatever the column's kind.
pub async fn assert_written_now(
    dst: &scylla::client::session::Session,
    table: &str,
    columns: &[(&str, bool)],
    since_us: i64,
) -> usize {
    let select: Vec<String> = columns
        .iter()
        .flat_map(|(c, _)| {
            [
                c.to_string(),
                format!("writetime({c})"),
                format!("ttl({c})"),
            ]
        })
        .collect();
    let rows = raw_rows(dst, table, &select.join(", ")).await;
    let mut cells = 0;
    for (n, r) in rows.iter().enumerate() {
        for (i, (c, multi)) in columns.iter().enumerate() {
            if r.cells[3 * i].is_none() {
                continue;
            }
            cells += 1;
            let wt = times(&r.cells[3 * i + 1], *multi);
            assert!(!wt.is_empty(), "row {n}: {c} has no writetime");
            for w in wt {
                let w = w.unwrap_or_else(|| panic!("row {n}: {c} has no writetime"));
                assert!(
                    w >= since_us,
                    "row {n}: {c} kept the source's writetime {w} (copy started at {since_us})"
                );
            }
            for ttl in times(&r.cells[3 * i + 2], *multi) {
                assert_eq!(ttl, None, "row {n}: {c} was written with a TTL");
            }
        }
    }
    cells
}

/// A write that waits (here behind `rowsPerSecond`) after its row was read writes each TTL
/// shortened by the wait, so the target's cells expire with the source's; a cell that expired
/// meanwhile is not written at all, whether a regular cell, a static cell, a set element
/// appended on its own, or every cell of a row.
#[tokio::test]
async fn ttls_keep_counting_while_writes_wait_and_expired_cells_are_not_written() {
    let Fixture {
        src, dst, ks, daemon,
    } = Fixture::new(
        "cp_wait",
        "CREATE TABLE $ks.t (k int, c int, st int static, a text, b text, s set<int>, PRIMARY KEY (k, c))",
    )
    .await;

    // One partition, read as one page, then written at one row per second: row c is sent about
    // c s after the page was read (batches of two rows: a batch holds about 4 KiB).
    let t = format!("{ks}.t");
    let long = 600;
    let short = 5;
    let big = "b".repeat(2000);
    for c in 0..9 {
        exec(
            &src,
            &format!(
                "UPDATE {t} USING TTL {long} SET a = 'a{c}', s = s + {{1}} WHERE k = 1 AND c = {c}"
            ),
        )
        .await;
    }
    exec(
        &src,
        &format!("UPDATE {t} USING TTL {short} SET st = 1 WHERE k = 1"),
    )
    .await;
    // Every row has cells that expire before they can be written; the last row only those.
    for c in 0..10 {
        exec(&src, &format!("UPDATE {t} USING TTL {short} SET b = '{big}', s = s + {{2}} WHERE k = 1 AND c = {c}")).await;
    }
    let done = daemon
        .run_job(
            "/api/v1/migrations",
            &job(
                ks,
                "t",
                "  preserveTimestamps: true\n  fetchSize: 100\n",
                "  rowsPerSecond: 1\n",
                "",
            ),
            WAIT,
        )
        .await;
    // The short-lived cells were still there when the rows were read (their bytes were), so
    // what follows is about the wait, not about the source.
    assert_eq!(progress(&done, "rowsRead"), 10, "{done}");
    assert!(
        progress(&done, "bytesRead") > 10 * big.len() as u64,
        "{done}"
    );

    let select = "c, st, a, b, s, ttl(a), ttl(s)";
    let target = raw_rows(&dst, &t, select).await;
    let source = raw_rows(&src, &t, select).await;
    let clusterings: Vec<i32> = target.iter().map(|r| int(&r.cells[0])).collect();
    assert_eq!(
        clusterings,
        (0..9).collect::<Vec<_>>(),
        "the row whose every cell expired while waiting was written"
    );
    let one: Vec<u8> = [
        &1i32.to_be_bytes()[..],
        &4i32.to_be_bytes(),
        &1i32.to_be_bytes(),
    ]
    .concat();
    for (r, s) in target.iter().zip(&source) {
        let c = int(&r.cells[0]);
        assert_eq!(
            r.cells[1], None,
            "row {c}: the expired static cell was written"
        );
        assert_eq!(
            r.cells[2].as_deref(),
            Some(format!("a{c}").as_bytes()),
            "row {c}"
        );
        assert_eq!(r.cells[3], None, "row {c}: an expired cell was written");
        assert_eq!(
            r.cells[4].as_deref(),
            Some(one.as_slice()),
            "row {c}: the set holds an expired element"
        );
        // The target's TTLs end when the source's do: shortened by the wait (up to 9 s). TTLs
        // are read in whole seconds, on both sides, and the wait is counted in whole seconds.
        assert_eq!(int(&s.cells[0]), c);
        let (ta, sa) = (times(&r.cells[5], false)[0], times(&s.cells[5], false)[0]);
        let (ts, ss) = (times(&r.cells[6], true)[0], times(&s.cells[6], true)[0]);
        for (what, t, s) in [("a", ta, sa), ("s", ts, ss)] {
            let (t, s) = (t.expect("target TTL"), s.expect("source TTL"));
            assert!(
                (t - s).abs() <= 3,
                "row {c}: TTL of {what} is {t} in the target, {s} in the source"
            );
        }
    }
}

/// `bytesPerSecond` caps the write rate: measured over a window of a running copy, both by the
/// job's own counter and by the rows that reached the target, the rate is the limit's.
#[tokio::test]
async fn bytes_per_second_caps_the_write_rate() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new("cp_rate", "CREATE TABLE $ks.t (k int PRIMARY KEY, v text)").await;
    // One row per partition, each row 4 + 1000 bytes.
    let row_bytes = 1004u64;
    let rows = 2000;
    let insert = src
        .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
        .await
        .unwrap();
    let value = "v".repeat(1000);
    for chunk in (0..rows).collect::<Vec<i32>>().chunks(100) {
        futures::future::try_join_all(
            chunk
                .iter()
                .map(|k| src.execute_unpaged(&insert, (*k, value.as_str()))),
        )
        .await
        .unwrap();
    }

    // 25 rows a second: the table would take 80 s.
    let limit = 25 * row_bytes;
    let id = submit(
        &daemon,
        &job(ks, "t", "", &format!("  bytesPerSecond: {limit}\n"), ""),
    )
    .await;
    // Past the first second's burst.
    daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["rowsWritten"].as_u64() >= Some(50)
        })
        .await;
    let count = || async {
        let rows = raw_rows(&dst, &format!("{ks}.t"), "count(*)").await;
        read_i64(&rows[0].cells[0]).unwrap() as u64
    };
    let sample = || async {
        let (_, j) = daemon.get(&format!("/api/v1/jobs/{id}")).await;
        (
            Instant::now(),
            progress(&j, "bytesWritten"),
            count().await,
            j,
        )
    };
    let (t1, bytes1, rows1, _) = sample().await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (t2, bytes2, rows2, job2) = sample().await;
    assert_eq!(job2["state"], "RUNNING", "{job2}");
    let secs = (t2 - t1).as_secs_f64();
    let counted = (bytes2 - bytes1) as f64 / secs;
    let landed = ((rows2 - rows1) * row_bytes) as f64 / secs;
    for (what, rate) in [("bytesWritten", counted), ("target rows", landed)] {
        assert!(
            (0.7 * limit as f64..=1.3 * limit as f64).contains(&rate),
            "{what}: {rate:.0} B/s with a limit of {limit} B/s"
        );
    }

    let (status, _) = daemon
        .post_json(
            &format!("/api/v1/migrations/{id}/cancel"),
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 202);
    let ended = daemon.wait_job(&id, WAIT, test_support::ended).await;
    assert_eq!(ended["state"], "CANCELLED", "{ended}");
}

/// A target whose UDTs live in another keyspace and have an extra trailing field holds the
/// source's values: the job is accepted, values and writetimes arrive, the extra field is null.
#[tokio::test]
async fn udts_in_another_keyspace_with_extra_target_fields() {
    let (src, dst) = clusters().await;
    let (ks, target_ks) = ("cp_udt_src", "cp_udt_dst");
    let table = "(k int PRIMARY KEY, u addr, fu frozen<addr>, lu list<frozen<addr>>, m map<int, frozen<addr>>)";
    cql::empty_keyspace(&src, ks).await;
    exec(
        &src,
        &format!("CREATE TYPE {ks}.addr (street text, num int)"),
    )
    .await;
    exec(&src, &format!("CREATE TABLE {ks}.t {table}")).await;
    cql::empty_keyspace(&dst, target_ks).await;
    exec(
        &dst,
        &format!("CREATE TYPE {target_ks}.addr (street text, num int, zip text)"),
    )
    .await;
    exec(&dst, &format!("CREATE TABLE {target_ks}.t {table}")).await;
    for k in 0..3 {
        exec(&src, &format!(
            "INSERT INTO {ks}.t (k, u, fu, lu, m) VALUES ({k}, {{street: 'u{k}', num: {k}}}, {{street: 'f{k}', num: null}}, \
             [{{street: 'l{k}', num: 1}}, {{street: 'l{k}', num: 2}}], {{{k}: {{street: 'm{k}', num: 3}}}}) USING TIMESTAMP {}",
            1000 + k
        ))
        .await;
    }

    let daemon = Daemon::fresh("").await;
    let done = daemon
        .run_job(
            "/api/v1/migrations",
            &job_into(ks, target_ks, "t", "  preserveTimestamps: true\n", ""),
            WAIT,
        )
        .await;
    assert_eq!(progress(&done, "rowsWritten"), 3, "{done}");

    let fields =
        "k, u.street, u.num, fu.street, fu.num, writetime(fu), lu, writetime(lu), m, writetime(m)";
    let compared = cql::assert_same(
        &src,
        &format!("{ks}.t"),
        &dst,
        &format!("{target_ks}.t"),
        fields,
        fields,
        &[],
    )
    .await;
    assert_eq!(compared, 3);
    for r in raw_rows(&dst, &format!("{target_ks}.t"), "u.zip, fu.zip").await {
        assert_eq!(r.cells, [None, None]);
    }
    // The non-frozen UDT keeps the source's writetime on every field it has.
    for r in raw_rows(&dst, &format!("{target_ks}.t"), "k, writetime(u)").await {
        let k = i64::from(int(&r.cells[0]));
        let wt = times(&r.cells[1], true);
        assert!(
            wt.iter().take(2).all(|w| *w == Some(1000 + k)),
            "row {k}: {wt:?}"
        );
    }
}

/// A target write that can never succeed (the target table was dropped during the copy)
/// fails the job at once with the database's reason, instead of being retried for minutes.
#[tokio::test]
async fn a_write_that_can_never_succeed_fails_the_job_at_once() {
    let Fixture {
        dst, ks, daemon, ..
    } = Fixture::rows("cp_permanent", 3000, 1, 1).await;
    // 100 rows a second: 30 s for the table.
    let id = submit(&daemon, &job(ks, "t", "", "  rowsPerSecond: 100\n", "")).await;
    daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["rowsWritten"].as_u64() >= Some(100)
        })
        .await;
    exec(&dst, &format!("DROP TABLE {ks}.t")).await;
    let dropped = Instant::now();
    let ended = daemon
        .wait_job(&id, Duration::from_secs(60), test_support::ended)
        .await;
    assert_eq!(ended["state"], "FAILED", "{ended}");
    // Retries of a transient error would last ten minutes.
    assert!(
        dropped.elapsed() < Duration::from_secs(20),
        "failing took {:?}: {ended}",
        dropped.elapsed()
    );
    let error = ended["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("target: ") && error.to_lowercase().contains("table"),
        "{ended}"
    );
    assert!(progress(&ended, "rowsWritten") < 3000, "{ended}");
}
