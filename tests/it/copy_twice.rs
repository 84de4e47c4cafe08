//! A unit copied twice (a retry, a resume, a re-run) leaves the target exactly as one copy
//! does: for every column kind, with writetimes and TTLs kept, compared cell by cell with the
//! source and between the two copies, and by the validator.

use std::time::Duration;

use drover::connectors::cql::codec::{read_i32, read_int_list};
use drover::connectors::cql::rows::RawRow;
use serde_json::Value;

use test_support::cql::{Fixture, exec, job, raw_rows};

const WAIT: Duration = Duration::from_secs(120);

const DDL: &str = "CREATE TYPE $ks.addr (street text, num int, zip text);\
    CREATE TABLE $ks.t (k int, c int, \
      sl list<text> static, ss set<int> static, su addr static, \
      l list<int>, s set<text>, m map<int, text>, u addr, fl frozen<list<int>>, v text, \
      PRIMARY KEY (k, c));\
    CREATE TABLE $ks.n (k int, c int, hits counter, misses counter, PRIMARY KEY (k, c))";

/// Non-key columns of `t`, each with its writetime and TTL: what two copies must agree on.
const CELLS: [&str; 10] = ["sl", "ss", "su", "l", "s", "m", "u", "fl", "v", "c"];

fn select() -> String {
    let mut cols = vec!["k".to_string()];
    for c in CELLS.iter().take(9) {
        cols.push(format!("{c}, writetime({c})"));
    }
    cols.push("c".into());
    cols.join(", ")
}

fn ttl_select() -> String {
    CELLS
        .iter()
        .take(9)
        .map(|c| format!("ttl({c})"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn snapshot(s: &scylla::client::session::Session, ks: &str) -> (Vec<RawRow>, Vec<RawRow>) {
    (
        raw_rows(s, &format!("{ks}.t"), &select()).await,
        raw_rows(s, &format!("{ks}.t"), &ttl_select()).await,
    )
}

/// TTLs as seconds left, per cell or element.
fn ttls(row: &RawRow) -> Vec<Vec<Option<i64>>> {
    row.cells
        .iter()
        .map(|c| read_int_list(c).unwrap_or_else(|| vec![read_i32(c).map(i64::from)]))
        .collect()
}

fn assert_ttls_close(a: &[RawRow], b: &[RawRow], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: row counts");
    for (n, (x, y)) in a.iter().zip(b).enumerate() {
        for (i, (p, q)) in ttls(x).iter().zip(ttls(y)).enumerate() {
            assert_eq!(p.len(), q.len(), "{what}: row {n} TTL column {i} shapes");
            for (p, q) in p.iter().zip(&q) {
                match (p, q) {
                    // CQL reads TTLs in whole seconds, counting down between the reads.
                    (Some(p), Some(q)) => {
                        assert!(
                            (p - q).abs() <= 3,
                            "{what}: row {n} TTL column {i}: {p} vs {q}"
                        )
                    }
                    _ => assert_eq!(p, q, "{what}: row {n} TTL column {i}"),
                }
            }
        }
    }
}

fn cells(rows: &[RawRow]) -> Vec<Vec<Option<bytes::Bytes>>> {
    rows.iter().map(|r| r.cells.clone()).collect()
}

fn counter(job: &Value, key: &str) -> u64 {
    job["progress"][key].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn a_table_copied_twice_is_identical_to_one_copy_cell_by_cell() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new("copy_twice", DDL).await;
    let t = format!("{ks}.t");
    let writes = [
        // A row written at once, then added to at other writetimes and TTLs: list elements
        // (two equal ones), set and map elements, UDT fields each with its own writetime.
        format!(
            "INSERT INTO {t} (k, c, l, s, m, u, fl, v) VALUES (1, 1, [1, 2, 2], {{'a'}}, {{1: 'x'}}, \
             {{street: 'main', num: 1}}, [7, 7], 'one') USING TIMESTAMP 1000 AND TTL 86400"
        ),
        format!("UPDATE {t} USING TIMESTAMP 2000 SET l = l + [3, 2] WHERE k = 1 AND c = 1"),
        format!(
            "UPDATE {t} USING TIMESTAMP 2500 AND TTL 40000 SET l = [9] + l WHERE k = 1 AND c = 1"
        ),
        format!(
            "UPDATE {t} USING TIMESTAMP 3000 SET s = s + {{'b'}}, m[2] = 'y' WHERE k = 1 AND c = 1"
        ),
        format!(
            "UPDATE {t} USING TIMESTAMP 3500 AND TTL 50000 SET u.num = 2, u.zip = '75001' WHERE k = 1 AND c = 1"
        ),
        format!("UPDATE {t} USING TIMESTAMP 4000 SET v = 'one again' WHERE k = 1 AND c = 1"),
        // Statics at several writetimes, a static list among them.
        format!(
            "UPDATE {t} USING TIMESTAMP 1500 SET sl = ['p', 'q'], ss = {{1}}, su = {{street: 's', num: 5}} WHERE k = 1"
        ),
        format!(
            "UPDATE {t} USING TIMESTAMP 1600 AND TTL 60000 SET sl = sl + ['r', 'p'], ss = ss + {{2}}, su.zip = 'z' WHERE k = 1"
        ),
        // A list written once with one writetime (INSERT: one value, one tombstone).
        format!(
            "INSERT INTO {t} (k, c, l, v) VALUES (1, 2, [5, 5, 6], 'two') USING TIMESTAMP 1200"
        ),
        // A row of nothing but its key, and one with only null cells written by INSERT.
        format!("INSERT INTO {t} (k, c) VALUES (2, 1) USING TIMESTAMP 1300"),
        format!("INSERT INTO {t} (k, c, v) VALUES (2, 2, null) USING TIMESTAMP 1300"),
        // A partition of static data only.
        format!("UPDATE {t} USING TIMESTAMP 1400 SET sl = ['only'], ss = ss + {{9}} WHERE k = 3"),
        // Counters.
        format!("UPDATE {ks}.n SET hits = hits + 5, misses = misses - 2 WHERE k = 1 AND c = 1"),
        format!("UPDATE {ks}.n SET hits = hits + 0 WHERE k = 1 AND c = 2"),
    ];
    for w in &writes {
        exec(&src, w).await;
    }
    let copy = |table: &str| job(ks, table, "  preserveTimestamps: true\n", "", "");

    let first = daemon.run_job("/api/v1/migrations", &copy("t"), WAIT).await;
    assert_eq!(counter(&first, "rowsWritten"), 5, "{first}");
    let (once, once_ttls) = snapshot(&dst, ks).await;
    let (source, source_ttls) = snapshot(&src, ks).await;
    // One copy is the source, cell by cell: values and writetimes exactly, every list element
    // once and in order, UDT fields with their own writetimes.
    assert_eq!(
        cells(&once),
        cells(&source),
        "one copy differs from the source"
    );
    assert_ttls_close(&once_ttls, &source_ttls, "one copy vs source");

    // The same units copied again (a re-run: every unit a second time).
    daemon.run_job("/api/v1/migrations", &copy("t"), WAIT).await;
    let (twice, twice_ttls) = snapshot(&dst, ks).await;
    assert_eq!(
        cells(&twice),
        cells(&once),
        "a second copy changed the target"
    );
    assert_ttls_close(&twice_ttls, &once_ttls, "two copies vs one");
    let lists = raw_rows(&dst, &format!("{ks}.t"), "k, c, l, sl").await;
    let count = |c: &Option<bytes::Bytes>| {
        c.as_ref()
            .map_or(0, |b| i32::from_be_bytes(b[..4].try_into().unwrap()))
    };
    let lengths: Vec<(i32, i32)> = lists
        .iter()
        .map(|r| (count(&r.cells[2]), count(&r.cells[3])))
        .collect();
    assert_eq!(
        lengths,
        vec![(6, 4), (3, 4), (0, 0), (0, 0), (0, 1)],
        "list lengths after two copies (row lists, static lists)"
    );

    // Counters copied twice hold the source's values, not twice them.
    for _ in 0..2 {
        daemon.run_job("/api/v1/migrations", &copy("n"), WAIT).await;
    }
    let n = format!("{ks}.n");
    assert_eq!(
        cells(&raw_rows(&dst, &n, "k, c, hits, misses").await),
        cells(&raw_rows(&src, &n, "k, c, hits, misses").await)
    );

    // The validator, comparing writetimes and TTLs too, finds nothing.
    let validation = format!(
        "{}validation:\n  compareTimestamps: true\n  ttlToleranceMillis: 5000\n",
        copy("t")
    );
    let report = daemon
        .run_job("/api/v1/validations", &validation, WAIT)
        .await;
    let result = &report["result"];
    assert_eq!(result["rowsMatched"], 5, "{report}");
    assert_eq!(result["rowsWithDifferences"], 0, "{report}");
}
