//! Every problem of a target table in one answer, each with the CQL that fixes it (issue 43):
//! a target with three problems is refused once, naming all three; the statements of the
//! answer, run by a second client (the test's own driver session), make the next submission
//! succeed and the copy exact. A MySQL load answers the same way.

use std::time::Duration;

use test_support::cql::{Fixture, assert_same, exec, job, job_to, raw_rows};
use test_support::error_message;

const WAIT: Duration = Duration::from_secs(180);

/// The statements of a refusal: each problem's `fix: ALTER ...;`, and the indented `DROP` and
/// `CREATE` of a table to recreate.
fn statements(message: &str) -> (Vec<String>, Vec<String>) {
    let alters = message
        .lines()
        .filter_map(|l| {
            l.split_once("; fix: ALTER TABLE ")
                .map(|(_, s)| format!("ALTER TABLE {s}"))
        })
        .collect();
    let recreate = message
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("DROP TABLE ") || l.starts_with("CREATE TABLE "))
        .map(str::to_string)
        .collect();
    (alters, recreate)
}

#[tokio::test]
async fn every_schema_problem_in_one_answer_with_the_cql_that_fixes_it() {
    let Fixture {
        ks,
        src,
        dst,
        daemon,
    } = Fixture::new("it_schema_problems", "").await;
    exec(
        &src,
        &format!(
            "CREATE TABLE {ks}.t (p int, c int, s text static, v text, w bigint, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC)"
        ),
    )
    .await;
    for p in 0..20 {
        exec(
            &src,
            &format!("INSERT INTO {ks}.t (p, s) VALUES ({p}, 'static {p}')"),
        )
        .await;
        for c in 0..10 {
            exec(
                &src,
                &format!(
                    "INSERT INTO {ks}.t (p, c, v, w) VALUES ({p}, {c}, 'v{p}.{c}', {})",
                    p * 100 + c
                ),
            )
            .await;
        }
    }
    // Three problems: a static column missing, a regular column of another type, a regular
    // column missing.
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.t (p int, c int, v int, PRIMARY KEY (p, c))"),
    )
    .await;
    // Two problems an ALTER fixes: both missing columns.
    exec(
        &dst,
        &format!(
            "CREATE TABLE {ks}.u (p int, c int, v text, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC)"
        ),
    )
    .await;

    // Writetimes kept, so that the copy can be compared cell by cell with theirs.
    let preserve = "  preserveTimestamps: true\n";
    let yaml = job(ks, "t", preserve, "", "");
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    for part in [
        format!("the target table \"{ks}\".\"t\" cannot take the rows of the source table \"{ks}\".\"t\": 3 problems"),
        format!("1. the target table has no column \"s\", a static column of type text in the source; fix: ALTER TABLE \"{ks}\".\"t\" ADD \"s\" text STATIC;"),
        "2. column \"v\" has type text in the source but int in the target; fix: recreate the table (below)".to_string(),
        format!("3. the target table has no column \"w\", a regular column of type bigint in the source; fix: ALTER TABLE \"{ks}\".\"t\" ADD \"w\" bigint;"),
        format!("DROP TABLE \"{ks}\".\"t\";"),
        format!("CREATE TABLE \"{ks}\".\"t\" (\"p\" int, \"c\" int, \"s\" text STATIC, \"v\" text, \"w\" bigint, PRIMARY KEY ((\"p\"), \"c\")) WITH CLUSTERING ORDER BY (\"c\" DESC);"),
    ] {
        assert!(message.contains(&part), "missing {part:?} in:\n{message}");
    }
    // A type cannot change in place: the table is recreated with the statements given.
    let (alters, recreate) = statements(&message);
    assert_eq!(alters.len(), 2, "{message}");
    assert_eq!(recreate.len(), 2, "{message}");
    for statement in &recreate {
        exec(&dst, statement.trim_end_matches(';')).await;
    }
    daemon.run_job("/api/v1/migrations", &yaml, WAIT).await;
    let columns = "p, c, s, v, w, writetime(v), writetime(w)";
    let n = assert_same(
        &src,
        &format!("{ks}.t"),
        &dst,
        &format!("{ks}.t"),
        columns,
        columns,
        &[],
    )
    .await;
    assert_eq!(n, 200);
    // The clustering order of the source was kept.
    let order = raw_rows(
        &dst,
        &format!(
            "system_schema.columns WHERE keyspace_name = '{ks}' AND table_name = 't' AND column_name = 'c'"
        ),
        "clustering_order",
    )
    .await;
    assert_eq!(order.len(), 1);
    assert_eq!(order[0].cells[0].as_deref(), Some(&b"desc"[..]));

    // Only missing regular and static columns: the ALTER statements of the answer suffice.
    let yaml = job_to(ks, "t", "u", preserve, "", "");
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    assert!(message.contains(": 2 problems"), "{message}");
    let (alters, recreate) = statements(&message);
    assert_eq!(alters.len(), 2, "{message}");
    assert!(recreate.is_empty(), "nothing to recreate: {message}");
    for statement in &alters {
        exec(&dst, statement.trim_end_matches(';')).await;
    }
    daemon.run_job("/api/v1/migrations", &yaml, WAIT).await;
    assert_eq!(
        assert_same(
            &src,
            &format!("{ks}.t"),
            &dst,
            &format!("{ks}.u"),
            columns,
            columns,
            &[]
        )
        .await,
        200
    );
}

/// The rows of a table loaded from the MySQL table of the test: id, name, qty and price (as
/// CQL text: the decimal with its scale), in id order.
async fn loaded(
    dst: &scylla::client::session::Session,
    table: &str,
) -> Vec<(i32, String, i64, String)> {
    let rows = dst
        .query_unpaged(
            format!("SELECT id, name, qty, CAST(price AS text) FROM {table}"),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let mut rows: Vec<(i32, String, i64, String)> = rows
        .rows::<(i32, String, i64, String)>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    rows
}

/// A MySQL source: every problem of the target in one answer too, a missing column with the
/// `ALTER TABLE ... ADD` of the CQL type it converts to, a table to recreate or a missing one
/// with the `CREATE TABLE` of the types a load writes; those statements make the load work.
#[tokio::test]
async fn a_mysql_load_names_every_problem_with_the_cql_that_fixes_it() {
    use mysql_async::prelude::Queryable;
    let Fixture {
        ks, dst, daemon, ..
    } = Fixture::new("it_schema_problems_my", "").await;
    let (mut my, db) = crate::mysql::fresh_db("it_schema_problems").await;
    my.query_drop(
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), qty INT UNSIGNED, price DECIMAL(10,2))",
    )
    .await
    .unwrap();
    my.query_drop("INSERT INTO t VALUES (1, 'one', 4000000000, 1.50), (2, 'two', 7, 2.25)")
        .await
        .unwrap();
    // Three problems: two columns missing, one of a type that does not take the values.
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.t (id int PRIMARY KEY, price double)"),
    )
    .await;
    let job = |table: &str| {
        format!(
            "{}{}",
            crate::mysql::source(&db, "t", ""),
            crate::mysql::target(ks, table, "")
        )
    };
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", job("t"))
        .await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    for part in [
        format!("the target table \"{ks}\".\"t\" cannot take the rows of the MySQL table"),
        ": 3 problems".to_string(),
        format!("fix: ALTER TABLE \"{ks}\".\"t\" ADD \"name\" text;"),
        format!("fix: ALTER TABLE \"{ks}\".\"t\" ADD \"qty\" bigint;"),
        "decimal(10,2) cannot be written exactly to a CQL double; fix: recreate the table (below)"
            .to_string(),
        // The type cannot change in place: the table to recreate, every MySQL column in the
        // CQL type a load writes it as, keyed as the target is.
        format!("DROP TABLE \"{ks}\".\"t\";"),
        format!(
            "CREATE TABLE \"{ks}\".\"t\" (\"id\" int, \"name\" text, \"qty\" bigint, \"price\" decimal, PRIMARY KEY ((\"id\")));"
        ),
    ] {
        assert!(message.contains(&part), "missing {part:?} in:\n{message}");
    }
    // Those statements, run by the test's own session, make the load work and exact.
    let (_, recreate) = statements(&message);
    assert_eq!(recreate.len(), 2, "{message}");
    for statement in &recreate {
        exec(&dst, statement.trim_end_matches(';')).await;
    }
    daemon.run_job("/api/v1/migrations", &job("t"), WAIT).await;
    assert_eq!(
        loaded(&dst, &format!("{ks}.t")).await,
        vec![
            (1, "one".into(), 4_000_000_000, "1.50".into()),
            (2, "two".into(), 7, "2.25".into())
        ]
    );

    // A target table that does not exist: refused with the statement that creates it, keyed
    // by the MySQL table's primary key.
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", job("v"))
        .await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    let create = format!(
        "CREATE TABLE \"{ks}\".\"v\" (\"id\" int, \"name\" text, \"qty\" bigint, \"price\" decimal, PRIMARY KEY ((\"id\")));"
    );
    assert!(
        message.contains(&format!(
            "table {ks}.v does not exist on the target cluster"
        )) && message.contains(&format!("to create it:\n  {create}")),
        "{message}"
    );
    let (_, recreate) = statements(&message);
    assert_eq!(recreate, vec![create.clone()], "{message}");
    exec(&dst, create.trim_end_matches(';')).await;
    daemon.run_job("/api/v1/migrations", &job("v"), WAIT).await;
    assert_eq!(
        loaded(&dst, &format!("{ks}.v")).await,
        loaded(&dst, &format!("{ks}.t")).await
    );
    // Into a table whose only problems are the missing columns, the statements suffice.
    exec(
        &dst,
        &format!("CREATE TABLE {ks}.u (id int PRIMARY KEY, price decimal)"),
    )
    .await;
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", job("u"))
        .await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    let (alters, recreate) = statements(&message);
    assert_eq!((alters.len(), recreate.len()), (2, 0), "{message}");
    for statement in &alters {
        exec(&dst, statement.trim_end_matches(';')).await;
    }
    daemon.run_job("/api/v1/migrations", &job("u"), WAIT).await;
    let rows = dst
        .query_unpaged(format!("SELECT id, name, qty FROM {ks}.u"), ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let mut rows: Vec<(i32, String, i64)> = rows
        .rows::<(i32, String, i64)>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        vec![(1, "one".into(), 4_000_000_000), (2, "two".into(), 7)]
    );
}

/// Parquet files: a type the target cannot take needs the table recreated, and the answer
/// gives the `CREATE TABLE` of the files' columns in the types a load writes (from the
/// footers), keyed and ordered as the target is; run by the test's session, it makes the load
/// work.
#[tokio::test]
async fn a_parquet_load_gives_the_table_to_recreate() {
    let Fixture {
        ks, dst, daemon, ..
    } = Fixture::new("it_schema_problems_pq", "").await;
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    crate::parquet::python(&format!(
        "import pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({{'p': pa.array([1, 1, 2], pa.int64()), 'c': pa.array([1, 2, 1], pa.int32()), \
         'v': ['a', 'b', 'c'], 'w': pa.array([0.5, 1.5, 2.5], pa.float64())}}), '{d}/a.parquet')"
    ));
    // Two problems: "v" of another type (recreate), "w" missing (an ALTER would do).
    exec(
        &dst,
        &format!(
            "CREATE TABLE {ks}.t (p bigint, c int, v int, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC)"
        ),
    )
    .await;
    let yaml = crate::parquet::load_job(&d, ks, "t", "", "");
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(status, 400, "{body}");
    let message = error_message(status, &body);
    for part in [
        format!(
            "the target table \"{ks}\".\"t\" cannot take the rows of the Parquet files: 2 problems"
        ),
        "fix: recreate the table (below)".to_string(),
        format!("fix: ALTER TABLE \"{ks}\".\"t\" ADD \"w\" double;"),
        format!("DROP TABLE \"{ks}\".\"t\";"),
        format!(
            "CREATE TABLE \"{ks}\".\"t\" (\"p\" bigint, \"c\" int, \"v\" text, \"w\" double, PRIMARY KEY ((\"p\"), \"c\")) WITH CLUSTERING ORDER BY (\"c\" DESC);"
        ),
    ] {
        assert!(message.contains(&part), "missing {part:?} in:\n{message}");
    }
    let (_, recreate) = statements(&message);
    assert_eq!(recreate.len(), 2, "{message}");
    for statement in &recreate {
        exec(&dst, statement.trim_end_matches(';')).await;
    }
    daemon.run_job("/api/v1/migrations", &yaml, WAIT).await;
    let rows = dst
        .query_unpaged(format!("SELECT p, c, v, w FROM {ks}.t"), ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let mut rows: Vec<(i64, i32, String, f64)> = rows
        .rows::<(i64, i32, String, f64)>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort_by_key(|a| (a.0, a.1));
    assert_eq!(
        rows,
        vec![
            (1, 1, "a".into(), 0.5),
            (1, 2, "b".into(), 1.5),
            (2, 1, "c".into(), 2.5)
        ]
    );
}
