//! The validator against the real clusters: a clean copy validates clean, every kind of damage
//! is reported with its key, `copyMissingRows` repairs, tolerances hold at their edges, and an
//! interrupted validation resumes.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::migrations::{EVERY_TYPE, fill_every_type};
use test_support::cql::{self, Fixture, exec, job, write_job};
use test_support::{Daemon, drover_bin};

const WAIT: Duration = Duration::from_secs(180);

/// Submits `yaml` to `resource` and waits for the job to succeed; returns the final job.
async fn run(daemon: &Daemon, resource: &str, yaml: &str) -> Value {
    daemon.run_job(resource, yaml, WAIT).await
}

fn validate_cli(yaml: &str) -> (Option<i32>, String, String) {
    let path = write_job(yaml);
    let out = Command::new(drover_bin())
        .args(["validate", "--config", path.to_str().unwrap()])
        .output()
        .expect("run drover validate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn examples<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["examples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// The differing columns of the `differentRow` example whose key contains `key`, as
/// (column, difference) pairs.
fn differing(report: &Value, key: &str) -> Vec<(String, String)> {
    let e = examples(report, "differentRow")
        .into_iter()
        .find(|e| e["key"].as_str().unwrap().contains(key))
        .unwrap_or_else(|| panic!("no differentRow example for {key}: {report:#}"));
    let mut cols: Vec<(String, String)> = e["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["column"].as_str().unwrap().to_string(),
                c["difference"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    cols.sort();
    cols
}

/// The numbers of a rendered WRITETIME or TTL list (`[86390, 97]`).
fn meta_list(rendered: &Value) -> Vec<i64> {
    rendered
        .as_str()
        .unwrap()
        .trim_matches(|c| c == '[' || c == ']')
        .split(", ")
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{rendered}")))
        .collect()
}

/// The column difference of `column` and kind `difference` in the example of `key`.
fn column_difference<'a>(
    report: &'a Value,
    key: &str,
    column: &str,
    difference: &str,
) -> &'a Value {
    examples(report, "differentRow")
        .into_iter()
        .filter(|e| e["key"].as_str().unwrap().contains(key))
        .flat_map(|e| e["columns"].as_array().unwrap())
        .find(|c| c["column"] == column && c["difference"] == difference)
        .unwrap_or_else(|| panic!("no {difference} difference of {column} in {key}: {report:#}"))
}

#[tokio::test]
async fn every_kind_of_damage_is_reported_with_its_key() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new("it_validate_damage", EVERY_TYPE).await;
    fill_every_type(&src, ks).await;
    let t = format!("{ks}.everything");
    let k1 = "11111111-1111-1111-1111-111111111111";
    let k2 = "22222222-2222-2222-2222-222222222222";
    let c = "e0d1c000-0000-1000-8000-000000000001";
    // More rows in k1's partition, whose c1 is DESC: timeuuids whose time order is not their
    // byte order (10000000-0000-1… < e0d1c000-0000-1… < 00000000-0001-1…), one of the same time
    // as `c` and several c2 (ASC) under one c1, so the validator merges them in its DESC order.
    let (early, late, same_time) = (
        "10000000-0000-1000-8000-000000000000",
        "00000000-0001-1000-8000-000000000000",
        "e0d1c000-0000-1000-8000-000000000002",
    );
    for (n, (c1, c2)) in [(early, "d1"), (late, "d2"), (same_time, "d3"), (late, "d4")]
        .into_iter()
        .enumerate()
    {
        exec(
            &src,
            &format!("INSERT INTO {t} (k, c1, c2, n) VALUES ({k1}, {c1}, '{c2}', {n}) USING TIMESTAMP 9000"),
        )
        .await;
    }
    // Writetimes within 1 ms, so that the TTL damage below (written 1 µs later, since an equal
    // writetime would not replace the cell) shows as a TTL difference only.
    let yaml = job(
        ks,
        "everything",
        "  preserveTimestamps: true\n",
        "",
        "validation:\n  compareTimestamps: true\n  writetimeToleranceMillis: 1\n  ttlToleranceMillis: 60000\n  failuresToFetch: 10\n",
    );
    run(&daemon, "/api/v1/migrations", &yaml).await;

    // A clean copy: nothing to report, exit 0.
    let (code, stdout, stderr) = validate_cli(&yaml);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("no differences: 9 rows compared"),
        "{stdout}"
    );
    let clean = run(&daemon, "/api/v1/validations", &yaml).await;
    assert_eq!(clean["result"]["rowsWithDifferences"], 0, "{clean}");
    assert_eq!(clean["result"]["rowsMatched"], 9, "{clean}");
    assert_eq!(clean["phase"], "done: no differences in 9 rows", "{clean}");

    let key = |k: &str, c1: &str, c2: &str| format!("k = {k} AND c1 = {c1} AND c2 = '{c2}'");
    let row1 = key(k1, c, "row-1");
    let row2 = key(k2, c, "row-2");
    // Delete a row between the DESC ones, add two (one between them), change a collection
    // element and a UDT field, rewrite a cell with another writetime, shorten a TTL, delete a
    // cell; in row-2, give one set element another writetime and one map element another TTL
    // (the second element of each, values unchanged). The element and the field of row-1 are
    // written at the source's writetime: at equal writetimes Cassandra keeps the cell that
    // expires later or the greater value, so the new values (99 > 1, 'Zed' > 'Main') are the
    // ones the target keeps.
    for cql in [
        format!("DELETE FROM {t} WHERE {}", key(k1, same_time, "d3")),
        format!("INSERT INTO {t} (k, c1, c2, n) VALUES ({k1}, {c}, 'extra', 1)"),
        format!(
            "INSERT INTO {t} (k, c1, c2, n) VALUES ({k1}, 20000000-0000-1000-8000-000000000000, 'extra', 1)"
        ),
        format!("UPDATE {t} USING TIMESTAMP 1000 AND TTL 86400 SET m['a'] = 99 WHERE {row1}"),
        format!("UPDATE {t} USING TIMESTAMP 1000 AND TTL 86400 SET u.street = 'Zed' WHERE {row1}"),
        format!("UPDATE {t} USING TIMESTAMP 999999 SET n = 7 WHERE {row1}"),
        format!("UPDATE {t} USING TIMESTAMP 4001 AND TTL 100 SET b = 1 WHERE {row1}"),
        format!("DELETE n FROM {t} WHERE {}", key(k1, early, "d1")),
        format!(
            "UPDATE {t} USING TIMESTAMP 999999 AND TTL 86400 SET se = se + {{'y'}} WHERE {row2}"
        ),
        format!("UPDATE {t} USING TIMESTAMP 1001 AND TTL 100 SET m['b'] = 2 WHERE {row2}"),
        format!(
            "UPDATE {t} USING TIMESTAMP 6000 SET fl = [1, 3] WHERE {}",
            key(k2, c, "key-only")
        ),
    ] {
        exec(&dst, &cql).await;
    }

    let job = run(&daemon, "/api/v1/validations", &yaml).await;
    let report = &job["result"];
    assert_eq!(job["phase"], "done: 7 of 11 rows differ", "{job:#}");
    assert_eq!(report["sourceRows"], 9, "{report:#}");
    assert_eq!(report["targetRows"], 10, "{report:#}");
    assert_eq!(report["rowsMatched"], 4, "{report:#}");
    // Each kind counted once per row that has it.
    assert_eq!(
        report["differences"],
        serde_json::json!({
            "missingRows": 1, "extraRows": 2, "differentValues": 1, "missingValues": 1,
            "extraValues": 1, "differentWritetimes": 2, "differentTtls": 2,
        }),
        "{report:#}"
    );
    let keys = |kind: &str| -> Vec<String> {
        examples(report, kind)
            .iter()
            .map(|e| e["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        keys("missingRow"),
        vec![key(k1, same_time, "d3")],
        "{report:#}"
    );
    // In the order of the scan: c1 DESC.
    assert_eq!(
        keys("extraRow"),
        vec![
            key(k1, c, "extra"),
            key(k1, "20000000-0000-1000-8000-000000000000", "extra")
        ],
        "{report:#}"
    );
    assert_eq!(
        differing(report, "'row-1'"),
        vec![
            ("b".to_string(), "ttl".to_string()),
            ("m".to_string(), "value".to_string()),
            ("n".to_string(), "writetime".to_string()),
            ("u".to_string(), "value".to_string()),
        ],
        "{report:#}"
    );
    assert_eq!(
        differing(report, "'row-2'"),
        vec![
            ("m".to_string(), "ttl".to_string()),
            ("se".to_string(), "writetime".to_string()),
        ],
        "{report:#}"
    );
    assert_eq!(
        differing(report, "'d1'"),
        vec![("n".to_string(), "missingOnTarget".to_string())]
    );
    assert_eq!(
        differing(report, "'key-only'"),
        vec![("fl".to_string(), "extraOnTarget".to_string())]
    );
    let m = column_difference(report, "'row-1'", "m", "value");
    assert_eq!(m["source"], "{'a': 1, 'b': 2, 'c': 3}", "{m}");
    assert_eq!(m["target"], "{'a': 99, 'b': 2, 'c': 3}", "{m}");
    let n = column_difference(report, "'d1'", "n", "missingOnTarget");
    assert_eq!(
        (&n["source"], &n["target"]),
        (&Value::from("0"), &Value::from("null"))
    );
    // Per element: one writetime of the set, one TTL of the map.
    let se = column_difference(report, "'row-2'", "se", "writetime");
    assert_eq!(
        (&se["source"], &se["target"]),
        (&Value::from("[1000, 1000]"), &Value::from("[1000, 999999]")),
        "{se}"
    );
    let ttls = column_difference(report, "'row-2'", "m", "ttl");
    let (source, target) = (meta_list(&ttls["source"]), meta_list(&ttls["target"]));
    assert!(
        source.len() == 2 && source.iter().all(|t| *t > 80_000),
        "{ttls}"
    );
    assert!(
        target.len() == 2 && target[0] > 80_000 && target[1] <= 100,
        "{ttls}"
    );

    // The same report from the CLI, exit 5 (DIFFERENCES_FOUND); as JSON with --json.
    let (code, stdout, _) = validate_cli(&yaml);
    assert_eq!(code, Some(5), "{stdout}");
    assert!(
        stdout.starts_with("DIFFERENCES FOUND: 11 rows compared"),
        "{stdout}"
    );
    assert!(
        stdout.contains("missing rows (not in the target): 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("- extra row: {}", key(k1, c, "extra"))),
        "{stdout}"
    );
    let path = write_job(&yaml);
    let out = Command::new(drover_bin())
        .args(["validate", "--json", "--config", path.to_str().unwrap()])
        .output()
        .expect("run drover validate --json");
    assert_eq!(out.status.code(), Some(5));
    let json: Value = serde_json::from_slice(&out.stdout).expect("--json prints the report");
    assert_eq!(json["differences"], report["differences"]);
    assert_eq!(json["rowsCompared"], 11);
    // The report endpoint serves the report alone.
    let (status, alone) = daemon
        .get(&format!(
            "/api/v1/validations/{}/report",
            job["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(&alone, report);
}

#[tokio::test]
async fn copy_missing_rows_repairs_missing_and_differing_rows_and_deletes_nothing() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::rows("it_validate_repair", 20_000, 5_000, 50).await;
    let base = job(ks, "t", "  preserveTimestamps: true\n", "", "");
    run(&daemon, "/api/v1/migrations", &base).await;
    // Writes to the source after the copy: new rows, and changed values (newer writetimes).
    for i in 0..30 {
        exec(
            &src,
            &format!("INSERT INTO {ks}.t (p, c, v, n) VALUES (9000, {i}, 'new', {i})"),
        )
        .await;
    }
    for c in [0, 777, 4999] {
        exec(
            &src,
            &format!("UPDATE {ks}.t SET v = 'changed' WHERE p = 0 AND c = {c}"),
        )
        .await;
    }
    // Rows and values only the target has: a re-copy must leave them alone. A row with no `n`
    // in the source and one in the target (`v` alike, with its writetime), and a row only in
    // the target.
    exec(
        &src,
        &format!("INSERT INTO {ks}.t (p, c, v) VALUES (9001, 0, 'no n') USING TIMESTAMP 5000"),
    )
    .await;
    exec(
        &dst,
        &format!(
            "INSERT INTO {ks}.t (p, c, v, n) VALUES (9001, 0, 'no n', 99) USING TIMESTAMP 5000"
        ),
    )
    .await;
    exec(
        &dst,
        &format!("INSERT INTO {ks}.t (p, c, v, n) VALUES (9100, 0, 'only in the target', 0)"),
    )
    .await;
    // Five examples are reported; every differing row is counted and copied.
    let repair = format!(
        "{base}validation:\n  copyMissingRows: true\n  copyDifferingRows: true\n  failuresToFetch: 5\n"
    );
    let first = run(&daemon, "/api/v1/validations", &repair).await;
    let report = &first["result"];
    assert_eq!(report["differences"]["missingRows"], 30, "{report:#}");
    assert_eq!(report["differences"]["differentValues"], 3, "{report:#}");
    assert_eq!(report["differences"]["extraValues"], 1, "{report:#}");
    assert_eq!(report["differences"]["extraRows"], 1, "{report:#}");
    // A cell whose value differs is reported for its value, not its writetime as well.
    assert_eq!(
        report["differences"]["differentWritetimes"], 0,
        "{report:#}"
    );
    assert_eq!(report["rowsWithDifferences"], 35, "{report:#}");
    assert_eq!(
        report["examples"].as_array().unwrap().len(),
        5,
        "{report:#}"
    );
    // Missing and differing rows are written again, the extra row is not.
    assert_eq!(report["rowsCopied"], 34, "{report:#}");
    assert_eq!(first["progress"]["rowsCopied"], 34, "{first:#}");

    // The target now holds the source's rows, and still its own row and value.
    let second = run(&daemon, "/api/v1/validations", &base).await;
    let report = &second["result"];
    assert_eq!(report["rowsMatched"], 20_030, "{second:#}");
    assert_eq!(report["rowsWithDifferences"], 2, "{second:#}");
    assert_eq!(report["differences"]["extraRows"], 1, "{report:#}");
    assert_eq!(report["differences"]["extraValues"], 1, "{report:#}");
    assert_eq!(examples(report, "extraRow")[0]["key"], "p = 9100 AND c = 0");
    assert_eq!(
        differing(report, "p = 9001 AND c = 0"),
        vec![("n".into(), "extraOnTarget".into())]
    );
    let extra = column_difference(report, "p = 9001", "n", "extraOnTarget");
    assert_eq!(
        (&extra["source"], &extra["target"]),
        (&Value::from("null"), &Value::from("99"))
    );
}

#[tokio::test]
async fn partitions_reduced_to_their_static_cells_are_compared_and_skip_token_ranges_ignored() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new(
        "it_validate_statics",
        "CREATE TABLE $ks.t (p int, c int, s int static, v int, PRIMARY KEY (p, c))",
    )
    .await;
    for cql in [
        "INSERT INTO $ks.t (p, c, s, v) VALUES (1, 1, 10, 1)",
        "INSERT INTO $ks.t (p, c, v) VALUES (1, 2, 2)",
        "INSERT INTO $ks.t (p, s) VALUES (2, 20)",
    ] {
        exec(&src, &cql.replace("$ks", ks)).await;
    }
    let yaml = job(ks, "t", "", "", "");
    let migrated = run(&daemon, "/api/v1/migrations", &yaml).await;
    // Partition 1 keeps only its static cell in the target; partition 2 gains a row there,
    // and its static cell changes.
    exec(
        &dst,
        &format!("DELETE FROM {ks}.t WHERE p = 1 AND c IN (1, 2)"),
    )
    .await;
    exec(
        &dst,
        &format!("INSERT INTO {ks}.t (p, c, s, v) VALUES (2, 5, 21, 5)"),
    )
    .await;
    // The job file's skipTokenRanges (here: the whole ring) say what a migration copied; the
    // validator compares the whole ring all the same: every unit the migration planned.
    let skipping =
        format!("{yaml}skipTokenRanges:\n  - [-9223372036854775808, 9223372036854775807]\n");
    let done = run(&daemon, "/api/v1/validations", &skipping).await;
    assert_eq!(done["progress"]["unitsSkipped"], 0, "{done:#}");
    assert_eq!(
        done["progress"]["unitsTotal"], migrated["progress"]["unitsTotal"],
        "{done:#}"
    );
    assert_eq!(
        done["progress"]["unitsDone"], done["progress"]["unitsTotal"],
        "{done:#}"
    );
    assert_eq!(done["result"]["sourceRows"], 3, "{done:#}");
    let report = &done["result"];
    let d = &report["differences"];
    assert_eq!(d["missingRows"], 2, "{report:#}");
    assert_eq!(d["extraRows"], 1, "{report:#}");
    assert_eq!(d["differentValues"], 1, "{report:#}");
    assert_eq!(report["rowsWithDifferences"], 4, "{report:#}");
    assert_eq!(
        differing(report, "p = 2"),
        vec![("s".into(), "value".into())]
    );
    let missing: Vec<&str> = examples(report, "missingRow")
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert!(
        missing.contains(&"p = 1 AND c = 1") && missing.contains(&"p = 1 AND c = 2"),
        "{report:#}"
    );
    assert_eq!(examples(report, "extraRow")[0]["key"], "p = 2 AND c = 5");
}

#[tokio::test]
async fn tolerances_hold_at_their_edges_and_filters_and_renames_apply_to_the_target() {
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new("it_validate_tolerance", "").await;
    exec(
        &src,
        &format!(
            "CREATE TABLE {ks}.m (id int PRIMARY KEY, kind text, d double, f float, ts timestamp)"
        ),
    )
    .await;
    exec(&dst, &format!("CREATE TABLE {ks}.m (id int PRIMARY KEY, category text, d double, f float, ts timestamp)")).await;
    for id in 0..6 {
        let kind = if id < 5 { "keep" } else { "skip" };
        exec(
            &src,
            &format!(
                "INSERT INTO {ks}.m (id, kind, d, f, ts) VALUES ({id}, '{kind}', 1.0, 2.0, 1000)"
            ),
        )
        .await;
    }
    let yaml = job(
        ks,
        "m",
        "  where: kind = 'keep'\n",
        "",
        "renames:\n  - from: kind\n    to: category\nvalidation:\n  floatingPointTolerance: 0.25\n  timestampMsTolerance: 5\n",
    );
    run(&daemon, "/api/v1/migrations", &yaml).await;
    // At the edges: 1.25 (equal within 0.25), 2.25 for the float (equal), a timestamp 5 ms off
    // (equal); then just beyond each.
    exec(
        &dst,
        &format!("UPDATE {ks}.m SET d = 1.25, f = 2.25, ts = 1005 WHERE id = 0"),
    )
    .await;
    exec(
        &dst,
        &format!("UPDATE {ks}.m SET d = 1.2500001 WHERE id = 1"),
    )
    .await;
    exec(
        &dst,
        &format!("UPDATE {ks}.m SET f = 2.2600002 WHERE id = 2"),
    )
    .await;
    exec(&dst, &format!("UPDATE {ks}.m SET ts = 994 WHERE id = 3")).await;
    // Rows outside the source's filter are not extra; rows inside it are.
    exec(
        &dst,
        &format!("INSERT INTO {ks}.m (id, category, d) VALUES (100, 'other', 1.0)"),
    )
    .await;
    exec(
        &dst,
        &format!("INSERT INTO {ks}.m (id, category, d) VALUES (101, 'keep', 1.0)"),
    )
    .await;
    let done = run(&daemon, "/api/v1/validations", &yaml).await;
    let report = &done["result"];
    assert_eq!(report["sourceRows"], 5, "{report:#}");
    assert_eq!(report["differences"]["differentValues"], 3, "{report:#}");
    assert_eq!(report["differences"]["extraRows"], 1, "{report:#}");
    assert_eq!(examples(report, "extraRow")[0]["key"], "id = 101");
    assert_eq!(
        differing(report, "id = 1"),
        vec![("d".into(), "value".into())]
    );
    assert_eq!(
        differing(report, "id = 2"),
        vec![("f".into(), "value".into())]
    );
    assert_eq!(
        differing(report, "id = 3"),
        vec![("ts".into(), "value".into())]
    );
    assert!(
        examples(report, "differentRow")
            .iter()
            .all(|e| e["key"] != "id = 0"),
        "{report:#}"
    );

    // Writetime and TTL tolerances at their edges, whole cells and set elements. Writetimes
    // are exact (µs, 5 ms = 5000 µs). TTLs are read in whole seconds and count down between
    // the writes and between the two scans (up to 2 s apart in all), so their edge is tested
    // 2 s either side of the 10 s tolerance: 8 s off is equal, 13 s off is not.
    exec(
        &src,
        &format!("CREATE TABLE {ks}.w (id int PRIMARY KEY, v int, s set<int>)"),
    )
    .await;
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.w (id int PRIMARY KEY, v int, s set<int>)"),
    )
    .await;
    let (source_wt, source_ttl) = (1_000_000, 1000);
    // (id, target writetime, target TTL) of `v`. The source writes it at 1 s, with a TTL of
    // 1000 s for ids 4 to 6 and 8 (so id 7 has a TTL in the target only, id 8 in the source
    // only).
    let cells: &[(i32, i64, Option<i32>)] = &[
        (0, source_wt + 5000, None),
        (1, source_wt - 5000, None),
        (2, source_wt + 5001, None),
        (3, source_wt - 5001, None),
        (4, source_wt, Some(source_ttl - 8)),
        (5, source_wt, Some(source_ttl - 13)),
        (6, source_wt, Some(source_ttl + 8)),
        (7, source_wt, Some(source_ttl)),
        (8, source_wt, None),
    ];
    for &(id, wt, ttl) in cells {
        let source_using = match id {
            4..=6 | 8 => format!("TIMESTAMP {source_wt} AND TTL {source_ttl}"),
            _ => format!("TIMESTAMP {source_wt}"),
        };
        let target_using = match ttl {
            Some(ttl) => format!("TIMESTAMP {wt} AND TTL {ttl}"),
            None => format!("TIMESTAMP {wt}"),
        };
        // Each row written to both sides at once: their TTLs start counting together.
        exec(
            &src,
            &format!("INSERT INTO {ks}.w (id, v) VALUES ({id}, {id}) USING {source_using}"),
        )
        .await;
        exec(
            &dst,
            &format!("INSERT INTO {ks}.w (id, v) VALUES ({id}, {id}) USING {target_using}"),
        )
        .await;
    }
    // Sets {1, 2}: the second element 5 ms off (equal) or 5.001 ms off, or 13 s shorter-lived.
    for (id, using, two) in [
        (
            9,
            format!("TIMESTAMP {source_wt}"),
            format!("TIMESTAMP {}", source_wt + 5000),
        ),
        (
            10,
            format!("TIMESTAMP {source_wt}"),
            format!("TIMESTAMP {}", source_wt - 5001),
        ),
        (
            11,
            format!("TIMESTAMP {source_wt} AND TTL {source_ttl}"),
            format!("TIMESTAMP {source_wt} AND TTL {}", source_ttl - 13),
        ),
    ] {
        exec(
            &src,
            &format!("UPDATE {ks}.w USING {using} SET s = s + {{1, 2}} WHERE id = {id}"),
        )
        .await;
        exec(
            &dst,
            &format!("UPDATE {ks}.w USING {using} SET s = s + {{1}} WHERE id = {id}"),
        )
        .await;
        exec(
            &dst,
            &format!("UPDATE {ks}.w USING {two} SET s = s + {{2}} WHERE id = {id}"),
        )
        .await;
    }
    let timed = job(
        ks,
        "w",
        "",
        "",
        "validation:\n  compareTimestamps: true\n  writetimeToleranceMillis: 5\n  ttlToleranceMillis: 10000\n",
    );
    let done = run(&daemon, "/api/v1/validations", &timed).await;
    let report = &done["result"];
    assert_eq!(report["rowsCompared"], 12, "{report:#}");
    assert_eq!(
        report["differences"]["differentWritetimes"], 3,
        "{report:#}"
    );
    assert_eq!(report["differences"]["differentTtls"], 4, "{report:#}");
    assert_eq!(report["rowsWithDifferences"], 7, "{report:#}");
    for (id, column, difference) in [
        (2, "v", "writetime"),
        (3, "v", "writetime"),
        (5, "v", "ttl"),
        (7, "v", "ttl"),
        (8, "v", "ttl"),
        (10, "s", "writetime"),
        (11, "s", "ttl"),
    ] {
        let e = examples(report, "differentRow")
            .into_iter()
            .find(|e| e["key"] == format!("id = {id}"))
            .unwrap_or_else(|| panic!("id = {id} not reported: {report:#}"));
        assert_eq!(
            differing(report, &format!("id = {id}")),
            vec![(column.to_string(), difference.to_string())],
            "{e:#}"
        );
    }
    let wt = column_difference(report, "id = 3", "v", "writetime");
    assert_eq!(
        (&wt["source"], &wt["target"]),
        (&Value::from("1000000"), &Value::from("994999"))
    );
    let wt = column_difference(report, "id = 10", "s", "writetime");
    assert_eq!(
        (&wt["source"], &wt["target"]),
        (
            &Value::from("[1000000, 1000000]"),
            &Value::from("[1000000, 994999]")
        )
    );
    let ttl = column_difference(report, "id = 7", "v", "ttl");
    assert_eq!(ttl["source"], "null", "{ttl}");
}

#[tokio::test]
async fn an_interrupted_validation_resumes_and_reports_the_whole_table() {
    let Fixture {
        dst, ks, daemon, ..
    } = Fixture::rows("it_validate_resume", 20_000, 2_000, 20).await;
    let home = daemon.home().clone();
    let base = job(ks, "t", "", "", "");
    run(&daemon, "/api/v1/migrations", &base).await;
    for p in [3, 400, 800] {
        exec(&dst, &format!("DELETE FROM {ks}.t WHERE p = {p}")).await;
    }
    let sp = home.path().join("savepoints");
    // Slow enough (rows per second) to be stopped half way.
    let slow = job(
        ks,
        "t",
        "  maxConcurrentUnits: 2\n",
        "  rowsPerSecond: 1500\n",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            sp.display()
        ),
    );
    let (status, body) = daemon
        .post_raw("/api/v1/validations", "application/yaml", slow.clone())
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap().to_string();
    // Stopped once a few units are complete (and saved with their findings).
    daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() >= Some(3)
        })
        .await;
    let (status, _) = daemon
        .post_json(&format!("/api/v1/validations/{id}/cancel"), &Value::Null)
        .await;
    assert_eq!(status, 202);
    let stopped = daemon
        .wait_job(&id, WAIT, |j| j["state"] == "CANCELLED")
        .await;
    let partial = stopped["result"]["sourceRows"].as_u64().unwrap();
    assert!(partial > 0 && partial < 20_000, "{stopped:#}");
    assert!(
        std::fs::read_dir(sp.join("validation")).unwrap().count() > 0,
        "no validation savepoint"
    );
    // The migration's own savepoint directory holds no validation progress.
    assert!(
        std::fs::read_dir(&sp)
            .unwrap()
            .all(|e| e.unwrap().file_type().unwrap().is_dir()),
        "validation savepoints outside validation/"
    );

    // The same job with other `validation` settings is another validation: it does not resume
    // from those savepoints but compares everything, and it leaves them to the first one, which
    // resumes below. It keeps 7 examples of the 60 missing rows, and counts them all.
    let other = job(
        ks,
        "t",
        "",
        "",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 60\nvalidation:\n  failuresToFetch: 7\n",
            sp.display()
        ),
    );
    let fresh = run(&daemon, "/api/v1/validations", &other).await;
    assert_eq!(fresh["progress"]["unitsSkipped"], 0, "{fresh:#}");
    let report = &fresh["result"];
    assert_eq!(report["sourceRows"], 20_000, "{report:#}");
    assert_eq!(report["differences"]["missingRows"], 60, "{report:#}");
    assert_eq!(report["rowsWithDifferences"], 60, "{report:#}");
    assert_eq!(examples(report, "missingRow").len(), 7, "{report:#}");
    assert_eq!(
        report["examples"].as_array().unwrap().len(),
        7,
        "{report:#}"
    );
    // Its savepoint (the only one it wrote, at its end: the newest) holds as many.
    let newest = std::fs::read_dir(sp.join("validation"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .max()
        .unwrap();
    let saved: Value = yaml_serde::from_str(&std::fs::read_to_string(&newest).unwrap()).unwrap();
    assert_eq!(saved["validationComplete"], true, "{saved:#}");
    // It holds the rows' key and column values: readable by the daemon's user only (it was
    // written 0644). Every savepoint of the directory, the cancelled run's too.
    for entry in std::fs::read_dir(sp.join("validation")).unwrap() {
        use std::os::unix::fs::PermissionsExt;
        let path = entry.unwrap().path();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}: mode {mode:o}", path.display());
    }
    assert_eq!(saved["validationReport"], *report, "{saved:#}");
    let logs = daemon.logs();
    assert!(!logs.contains("resuming the validation"), "{logs}");
    assert!(
        logs.contains("made with other validation settings; ignored"),
        "{logs}"
    );

    // Started again, it continues from the cancelled run's savepoint; killed (-9) half way,
    // the restarted daemon resumes it by itself.
    let mut daemon = daemon;
    let (status, body) = daemon
        .post_raw("/api/v1/validations", "application/yaml", slow.clone())
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["jobId"].as_str().unwrap().to_string();
    let mid = daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() > j["progress"]["unitsSkipped"].as_u64()
        })
        .await;
    assert!(
        mid["progress"]["unitsSkipped"].as_u64().unwrap() > 0,
        "{mid:#}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    daemon.kill9();
    let daemon = Daemon::start(&home, "").await;
    let done = daemon
        .wait_job(&id, WAIT, |j| {
            !["INTERRUPTED", "RUNNING", "QUEUED"].contains(&j["state"].as_str().unwrap())
        })
        .await;
    assert_eq!(
        done["state"],
        "DIFFERENCES_FOUND",
        "{done:#}\n{}",
        daemon.logs()
    );
    assert_eq!(done["attempts"], 2, "{done:#}");
    assert!(
        daemon.logs().contains("resuming the validation"),
        "{}",
        daemon.logs()
    );
    let report = &done["result"];
    // Rows of the three runs, each counted once.
    assert_eq!(report["sourceRows"], 20_000, "{report:#}");
    assert_eq!(report["differences"]["missingRows"], 60, "{report:#}");
    assert_eq!(report["rowsMatched"], 19_940, "{report:#}");
    // A finished validation is not resumed: the next one compares everything again.
    let fast = job(
        ks,
        "t",
        "",
        "",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            sp.display()
        ),
    );
    let again = run(&daemon, "/api/v1/validations", &fast).await;
    assert_eq!(again["progress"]["unitsSkipped"], 0, "{again:#}");
    assert_eq!(again["result"]["sourceRows"], 20_000, "{again:#}");
}

/// Clustering values of each type, in an order that is not Cassandra's: the validator must
/// sort them exactly as Cassandra does to merge two scans.
const ORDERED_TYPES: &[(&str, &[&str])] = &[
    ("int", &["5", "-1", "2147483647", "-2147483648", "0"]),
    (
        "bigint",
        &["5", "-1", "9223372036854775807", "-9223372036854775808"],
    ),
    ("smallint", &["5", "-1", "-32768", "32767"]),
    ("tinyint", &["5", "-1", "-128", "127"]),
    (
        "varint",
        &[
            "5",
            "-1",
            "123456789012345678901234567890",
            "-99999999999999999999",
            "0",
            "255",
            "256",
            "-256",
        ],
    ),
    (
        "decimal",
        &["1.5", "-1.5", "0.001", "100", "-0.0001", "99.99", "1E+10"],
    ),
    (
        "double",
        &[
            "1.5",
            "-1.5",
            "0.0",
            "-0.0",
            "1e300",
            "-1e-300",
            "NaN",
            "-Infinity",
            "Infinity",
        ],
    ),
    ("float", &["1.5", "-1.5", "0.0", "3.4e38", "-3.4e38", "NaN"]),
    ("text", &["'b'", "'a'", "'ä'", "''", "'ab'", "'Z'"]),
    ("blob", &["0x00", "0xff", "0x0100", "0x", "0x7f80"]),
    ("boolean", &["true", "false"]),
    (
        "timestamp",
        &["0", "-1000", "1700000000000", "-62135596800000"],
    ),
    (
        "date",
        &[
            "'1970-01-01'",
            "'1969-12-31'",
            "'2024-02-29'",
            "'1900-01-01'",
        ],
    ),
    (
        "time",
        &["'00:00:00'", "'23:59:59.999999999'", "'12:00:00'"],
    ),
    (
        "inet",
        &[
            "'10.0.0.1'",
            "'::1'",
            "'192.168.0.1'",
            "'2001:db8::1'",
            "'9.255.255.255'",
        ],
    ),
    (
        "uuid",
        &[
            "00000000-0000-4000-8000-000000000000",
            "ffffffff-ffff-4fff-bfff-ffffffffffff",
            "e0d1c000-0000-1000-8000-000000000001",
            "e0d1c000-0000-1000-0000-000000000001",
            "10000000-0000-1000-8000-000000000000",
            "80000000-0000-0000-0000-000000000000",
        ],
    ),
    (
        "timeuuid",
        &[
            "e0d1c000-0000-1000-8000-000000000001",
            "e0d1c000-0000-1000-0000-000000000001",
            "10000000-0000-1000-8000-000000000000",
            "00000000-0001-1000-8000-000000000000",
            "ffffffff-0000-1000-7f00-000000000000",
            "ffffffff-0000-1000-8000-000000000000",
        ],
    ),
    (
        "frozen<list<int>>",
        &["[1, 2]", "[1]", "[-1, 5]", "[]", "[1, 2, 3]"],
    ),
    ("frozen<set<text>>", &["{'b'}", "{'a', 'c'}", "{}", "{'a'}"]),
    (
        "frozen<map<int, text>>",
        &["{1: 'b'}", "{1: 'a'}", "{-1: 'z'}", "{1: 'a', 2: 'b'}"],
    ),
    (
        "frozen<tuple<int, text>>",
        &["(1, 'b')", "(1, 'a')", "(-1, 'z')", "(0, '')"],
    ),
];

/// Tables `o_asc` and `o_desc` (every clustering column DESC) with a clustering column `c{i}`
/// per type of [`ORDERED_TYPES`]. Partition `p = i` holds a row per value of type `i`, its
/// other columns at their type's first value, so each partition is ordered by one type.
#[tokio::test]
async fn clustering_values_are_ordered_as_cassandra_orders_them_and_validated_in_that_order() {
    use drover::connectors::cql::compare::order::compare;
    let n = ORDERED_TYPES.len();
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let columns = names.join(", ");
    let defs: Vec<String> = ORDERED_TYPES
        .iter()
        .enumerate()
        .map(|(i, (typ, _))| format!("c{i} {typ}"))
        .collect();
    let desc: Vec<String> = names.iter().map(|c| format!("{c} DESC")).collect();
    let create = |table: &str| {
        format!(
            "CREATE TABLE $ks.{table} (p int, {}, PRIMARY KEY (p, {columns}))",
            defs.join(", ")
        )
    };
    let Fixture {
        src,
        dst,
        ks,
        daemon,
    } = Fixture::new(
        "it_validate_order",
        &format!(
            "{}; {} WITH CLUSTERING ORDER BY ({})",
            create("o_asc"),
            create("o_desc"),
            desc.join(", ")
        ),
    )
    .await;
    let row_values = |i: usize, v: &str| -> String {
        (0..n)
            .map(|j| if j == i { v } else { ORDERED_TYPES[j].1[0] })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let total: usize = ORDERED_TYPES.iter().map(|(_, values)| values.len()).sum();
    for table in ["o_asc", "o_desc"] {
        for (i, (_, values)) in ORDERED_TYPES.iter().enumerate() {
            for v in *values {
                let insert = format!(
                    "INSERT INTO {ks}.{table} (p, {columns}) VALUES ({i}, {})",
                    row_values(i, v)
                );
                exec(&src, &insert).await;
                exec(&dst, &insert).await;
            }
        }
    }
    src.refresh_metadata().await.unwrap();
    let state = src.get_cluster_state();
    let keyspace = state.get_keyspace(ks).unwrap();

    // drover's comparator agrees with the order in which Cassandra returns each partition.
    for (table, expected) in [
        ("o_asc", std::cmp::Ordering::Less),
        ("o_desc", std::cmp::Ordering::Greater),
    ] {
        let types = &keyspace.tables[table].columns;
        let rows = cql::raw_rows(&src, &format!("{ks}.{table}"), &format!("p, {columns}")).await;
        assert_eq!(rows.len(), total, "{table}: a value collapsed");
        for pair in rows.windows(2) {
            if pair[0].cells[0] != pair[1].cells[0] {
                continue;
            }
            let p = drover::connectors::cql::codec::read_i32(&pair[0].cells[0]).unwrap() as usize;
            let (typ, _) = ORDERED_TYPES[p];
            let (a, b) = (
                pair[0].cells[1 + p].as_deref().unwrap(),
                pair[1].cells[1 + p].as_deref().unwrap(),
            );
            assert_eq!(
                compare(&types[&names[p]].typ, a, b),
                expected,
                "{typ} ({table}): {a:02x?} then {b:02x?}"
            );
        }
    }

    // The validator merges both tables in that order: a clean copy validates clean, and with
    // one row of each partition deleted from the target and one added, exactly those rows
    // are reported (a row out of the order it expects would fail the validation instead).
    for table in ["o_asc", "o_desc"] {
        let clean = run(&daemon, "/api/v1/validations", &job(ks, table, "", "", "")).await;
        assert_eq!(clean["result"]["rowsMatched"], total, "{table}: {clean:#}");
        assert_eq!(
            clean["result"]["rowsWithDifferences"], 0,
            "{table}: {clean:#}"
        );
        for (i, (_, values)) in ORDERED_TYPES.iter().enumerate() {
            let condition = (0..n)
                .map(|j| {
                    let v = if j == i {
                        values[1]
                    } else {
                        ORDERED_TYPES[j].1[0]
                    };
                    format!("c{j} = {v}")
                })
                .collect::<Vec<_>>()
                .join(" AND ");
            exec(
                &dst,
                &format!("DELETE FROM {ks}.{table} WHERE p = {i} AND {condition}"),
            )
            .await;
        }
        exec(
            &dst,
            &format!(
                "INSERT INTO {ks}.{table} (p, {columns}) VALUES (0, {})",
                row_values(0, "7")
            ),
        )
        .await;
        let done = run(&daemon, "/api/v1/validations", &job(ks, table, "", "", "")).await;
        let report = &done["result"];
        assert_eq!(report["sourceRows"], total, "{table}: {report:#}");
        assert_eq!(report["targetRows"], total - n + 1, "{table}: {report:#}");
        assert_eq!(report["rowsMatched"], total - n, "{table}: {report:#}");
        assert_eq!(report["rowsWithDifferences"], n + 1, "{table}: {report:#}");
        assert_eq!(
            report["differences"]["missingRows"], n,
            "{table}: {report:#}"
        );
        assert_eq!(report["differences"]["extraRows"], 1, "{table}: {report:#}");
        let mut partitions: Vec<usize> = examples(report, "missingRow")
            .iter()
            .map(|e| {
                let key = e["key"].as_str().unwrap();
                key.strip_prefix("p = ")
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        partitions.sort();
        assert_eq!(
            partitions,
            (0..n).collect::<Vec<_>>(),
            "{table}: {report:#}"
        );
        let extra = examples(report, "extraRow");
        assert!(
            extra[0]["key"]
                .as_str()
                .unwrap()
                .starts_with("p = 0 AND c0 = 7 AND"),
            "{table}: {report:#}"
        );
    }
}

#[tokio::test]
async fn bad_validation_requests_get_json_errors() {
    let daemon = Daemon::fresh("").await;
    let post = |yaml: String| {
        let daemon = &daemon;
        async move {
            daemon
                .post_raw("/api/v1/validations", "application/yaml", yaml)
                .await
        }
    };
    let base = job("ks", "t", "", "", "");
    // An unknown validation key, with its line.
    let (status, body) = post(format!("{base}validation:\n  compareTimestamp: true\n")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], 400);
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("compareTimestamp"), "{message}");
    assert!(message.contains("line 15"), "{message}");
    let (status, body) = post(format!("{base}validation:\n  floatingPointTolerance: -1\n")).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("validation.floatingPointTolerance"),
        "{body}"
    );
    // A table that does not exist: refused before anything runs.
    let (status, body) = post(job("no_such_keyspace", "t", "", "", "")).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("source.keyspace"),
        "{body}"
    );
    // The CLI: exit 2 when the validation cannot run, with the reason.
    let (code, stdout, stderr) = validate_cli(&format!("{base}validation:\n  bogus: 1\n"));
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("bogus"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    // Unknown ids.
    let (status, body) = daemon.get("/api/v1/validations/nope").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["status"], "Not Found");
    let (status, _) = daemon.get("/api/v1/validations/nope/report").await;
    assert_eq!(status, 404);
    let (status, body) = daemon
        .post_json("/api/v1/validations/nope/cancel", &Value::Null)
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = daemon.get("/api/v1/validations").await;
    assert_eq!(status, 200);
    assert_eq!(body["validations"], serde_json::json!([]));
}
