//! `source.bulkRead: snapshot` against the real clusters: the drover beside the source node
//! snapshots the table, the job downloads its SSTables and reads them merged. The table of
//! every type the path takes, spread over several SSTables with overwrites, row, cell, range,
//! partition and collection deletions and an expired TTL between them, arrives as a CQL read
//! sees it: cell by cell (values, writetimes, TTLs) against the source, through CQL writes and
//! through `bulkWrite: sstable`, and the validator comparing timestamps finds nothing.

use std::path::PathBuf;

use test_support::Daemon;
use test_support::cql::{Fixture, assert_same, exec, job, job_to};

use crate::bulk_write::{COLUMNS, ORDER, WAIT, bulk, count, fill, select, sidecar_config};

fn nodetool() -> String {
    std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)")
}

fn src_data_dir() -> PathBuf {
    PathBuf::from(std::env::var("DROVER_TEST_CASSANDRA_SRC_DIR").expect("scripts/testenv env"))
        .join("data")
}

/// A daemon beside the source node, serving its snapshots.
async fn source_sidecar() -> Daemon {
    Daemon::fresh(&format!(
        "cassandra:\n  jmx_address: 127.0.0.1:7199\n  data_file_directories: [{}]\nsstable_snapshots:\n  enabled: true\n  nodetool: {}\n",
        src_data_dir().display(),
        nodetool()
    ))
    .await
}

fn bulk_read(d: &Daemon) -> String {
    format!(
        "  preserveTimestamps: true\n  bulkRead: snapshot\n  bulkSidecars:\n    127.0.0.1: {}\n",
        d.addr
    )
}

fn flush(ks: &str) {
    let out = std::process::Command::new(nodetool())
        .args(["-h", "127.0.0.1", "-p", "7199", "flush", "--", ks, "t"])
        .output()
        .expect("run nodetool");
    assert!(out.status.success(), "nodetool flush: {out:?}");
}

/// Later writes and deletions, each kind in a partition of its own, flushed to an SSTable of
/// their own: the reader must reconcile them with the rows they cover.
async fn change(src: &scylla::client::session::Session, t: &str) {
    let at = "USING TIMESTAMP 9000000";
    let row = |k: i32, c: i32| format!("k = {k} AND name = 'n{k}' AND c = {c} AND c2 = 'x{c}'");
    for cql in [
        format!("DELETE FROM {t} {at} WHERE {}", row(1, 1)),
        format!("DELETE tx FROM {t} {at} WHERE {}", row(2, 2)),
        format!("DELETE FROM {t} {at} WHERE k = 3 AND name = 'n3' AND c >= 2 AND c <= 4"),
        format!("DELETE FROM {t} {at} WHERE k = 4 AND name = 'n4'"),
        format!(
            "UPDATE {t} {at} SET m = m - {{'k1'}}, st = st - {{'a'}} WHERE {}",
            row(5, 1)
        ),
        format!(
            "UPDATE {t} {at} SET l = [42], m = {{'only': 1}} WHERE {}",
            row(6, 1)
        ),
        format!("UPDATE {t} {at} SET a = 'newer' WHERE {}", row(7, 2)),
        // Older than the cell it meets: loses.
        format!(
            "UPDATE {t} USING TIMESTAMP 1 SET a = 'older' WHERE {}",
            row(8, 2)
        ),
        format!("UPDATE {t} {at} SET s = 'static later' WHERE k = 10 AND name = 'n10'"),
        format!(
            "INSERT INTO {t} (k, name, c, c2, tx) VALUES (9, 'n9', 500, 'expires', 'gone') USING TTL 1"
        ),
        format!(
            "UPDATE {t} USING TTL 1 SET tx = 'gone too' WHERE {}",
            row(11, 2)
        ),
    ] {
        exec(src, &cql).await;
    }
    // The TTLs of 1 s expire before the snapshot is read.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_snapshot_read_copies_what_cql_reads_through_both_write_paths() {
    let Fixture { src, dst, ks, .. } = Fixture::new(
        "bulk_read",
        &format!(
            "CREATE TABLE $ks.t ({COLUMNS}) {ORDER}; CREATE TABLE $ks.t_sst ({COLUMNS}) {ORDER}"
        ),
    )
    .await;
    let t = format!("{ks}.t");
    fill(&src, &t).await;
    flush(ks);
    change(&src, &t).await;
    flush(ks);
    let rows = count(&src, &t).await;
    let reader = source_sidecar().await;

    // Read from the snapshot, written with CQL.
    let report = reader
        .run_job(
            "/api/v1/migrations",
            &job(ks, "t", &bulk_read(&reader), "", ""),
            WAIT,
        )
        .await;
    assert_eq!(report["progress"]["rowsWritten"], rows, "{report}");
    assert!(
        reader.logs().contains("snapshot taken") && reader.logs().contains("snapshot cleared"),
        "{}",
        reader.logs()
    );
    let (select, ttls) = select();
    let n = assert_same(&src, &t, &dst, &t, &select, &select, &ttls).await;
    assert_eq!(n, rows, "rows compared against the source");

    // Read from the snapshot, written as SSTables imported by the target node.
    let writer = Daemon::fresh(&sidecar_config()).await;
    reader
        .run_job(
            "/api/v1/migrations",
            &job_to(ks, "t", "t_sst", &bulk_read(&reader), &bulk(&writer), ""),
            WAIT,
        )
        .await;
    let n = assert_same(
        &src,
        &t,
        &dst,
        &format!("{ks}.t_sst"),
        &select,
        &select,
        &ttls,
    )
    .await;
    assert_eq!(n, rows, "rows compared against the source");

    // The validator, comparing writetimes and TTLs, finds nothing.
    let validation = format!(
        "{}validation:\n  compareTimestamps: true\n  ttlToleranceMillis: 5000\n",
        job(ks, "t", "  preserveTimestamps: true\n", "", "")
    );
    let report = reader
        .run_job("/api/v1/validations", &validation, WAIT)
        .await;
    assert_eq!(report["result"]["rowsWithDifferences"], 0, "{report}");
    assert_eq!(report["result"]["rowsMatched"], rows, "{report}");

    // No snapshot of drover's is left on the node.
    let table_dirs = std::fs::read_dir(src_data_dir().join(ks)).unwrap();
    for dir in table_dirs.flatten() {
        let snapshots = dir.path().join("snapshots");
        let left: Vec<_> = std::fs::read_dir(&snapshots)
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{}: {left:?}", snapshots.display());
    }
}

#[tokio::test]
async fn a_snapshot_read_is_refused_where_it_cannot_be_exact() {
    let Fixture { ks, .. } = Fixture::new(
        "bulk_read_refused",
        "CREATE TABLE $ks.counted (k int PRIMARY KEY, n counter); \
         CREATE TABLE $ks.timed (k int, at timeuuid, v text, PRIMARY KEY (k, at)); \
         CREATE TABLE $ks.reversed (k int, at int, d double, v text, PRIMARY KEY (k, at, d)) \
           WITH CLUSTERING ORDER BY (at DESC, d DESC); \
         CREATE TABLE $ks.plain (k int PRIMARY KEY, v text)",
    )
    .await;
    let reader = source_sidecar().await;
    for (table, extra, key, expected) in [
        (
            "counted",
            "",
            "source.bulkRead",
            "counter tables are not read from snapshots",
        ),
        (
            "timed",
            "",
            "source.bulkRead",
            "clustering column at is a timeuuid",
        ),
        (
            // The reader misreads a reversed double (an int DESC, as `at`, it reads).
            "reversed",
            "",
            "source.bulkRead",
            "clustering column d is a double in descending order",
        ),
        (
            "plain",
            "  where: v = 'x'\n",
            "source.where",
            "cannot be applied to SSTables",
        ),
        (
            "plain",
            "  bulkReadConsistency: LOCAL_QUORUM\n",
            "source.bulkReadConsistency",
            "`ONE`, `QUORUM`, `ALL`",
        ),
    ] {
        let (status, body) = reader
            .post_raw(
                "/api/v1/migrations",
                "application/yaml",
                job(ks, table, &format!("{}{extra}", bulk_read(&reader)), "", ""),
            )
            .await;
        assert_eq!(status, 400, "{table}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(key), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    // The replicas of a snapshot read mean nothing to a CQL read.
    let (status, body) = reader
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            job(ks, "plain", "  bulkReadConsistency: ALL\n", "", ""),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("source.bulkReadConsistency")
            && message.contains("applies to a snapshot read only"),
        "{message}"
    );
    // A daemon that serves no snapshots: the job fails with its answer, nothing is written.
    let off = Daemon::fresh("").await;
    let source = format!(
        "  bulkRead: snapshot\n  bulkSidecars:\n    127.0.0.1: {}\n",
        off.addr
    );
    let (status, body) = reader
        .post_raw(
            "/api/v1/migrations",
            "application/yaml",
            job(ks, "plain", &source, "", ""),
        )
        .await;
    // Checked when the job is submitted: the source side's answer, as a bad gateway.
    assert_eq!(status, 502, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("snapshots are not enabled"), "{message}");

    // The routes: bad names are 400, unknown snapshots 404, system keyspaces 403.
    for (method, path, status) in [
        (
            "GET",
            format!("/api/v1/keyspaces/{ks}/tables/plain/snapshots/none"),
            404,
        ),
        (
            "GET",
            format!("/api/v1/keyspaces/{ks}/tables/plain/snapshots/..%2Fx"),
            400,
        ),
        (
            "GET",
            "/api/v1/keyspaces/system/tables/local/snapshots/s".to_string(),
            403,
        ),
        (
            "GET",
            format!(
                "/api/v1/keyspaces/{ks}/tables/plain/snapshots/none/components/..%2F..%2Fx-Data.db"
            ),
            400,
        ),
        (
            "DELETE",
            format!("/api/v1/keyspaces/{ks}/tables/plain/snapshots/none"),
            404,
        ),
        (
            "PUT",
            format!("/api/v1/keyspaces/{ks}/tables/plain/snapshots/s?ttl=forever"),
            400,
        ),
        (
            "PUT",
            format!("/api/v1/keyspaces/{ks}/tables/nosuch/snapshots/s"),
            404,
        ),
    ] {
        let r = reader
            .client()
            .request(method.parse().unwrap(), reader.url(&path))
            .send()
            .await
            .unwrap();
        let got = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(got, status, "{method} {path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["code"], status, "{body}");
    }
    // Off, they are not there at all.
    let (status, _) = off
        .get(&format!("/api/v1/keyspaces/{ks}/tables/plain/snapshots/s"))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_snapshot_read_skips_the_ranges_done_and_copies_the_rest() {
    let Fixture { src, dst, ks, .. } = Fixture::rows("bulk_read_skip", 6000, 100, 100).await;
    let reader = source_sidecar().await;
    // A range recorded done, cutting through units (as a savepoint resumed from would).
    let (a, b) = (
        -3_000_000_000_000_000_000_i64,
        1_234_567_890_123_456_789_i64,
    );
    let job_file = job(
        ks,
        "t",
        &bulk_read(&reader),
        "",
        &format!("skipTokenRanges:\n  - [{a}, {b}]\n"),
    );
    let report = reader.run_job("/api/v1/migrations", &job_file, WAIT).await;
    let t = format!("{ks}.t");
    let skipped = count_in(
        &src,
        format!("SELECT COUNT(*) FROM {t} WHERE token(p) > {a} AND token(p) <= {b}"),
    )
    .await;
    let all = count(&src, &t).await;
    assert!(skipped > 0 && skipped < all, "{skipped} of {all}");
    assert_eq!(count(&dst, &t).await, all - skipped, "{report}");
    assert_eq!(report["progress"]["rowsWritten"], all - skipped, "{report}");
    let copied_in_skipped = count_in(
        &dst,
        format!("SELECT COUNT(*) FROM {t} WHERE token(p) > {a} AND token(p) <= {b}"),
    )
    .await;
    assert_eq!(
        copied_in_skipped, 0,
        "nothing of the range done is copied again"
    );
}

async fn count_in(s: &scylla::client::session::Session, cql: String) -> usize {
    let (n,): (i64,) = s
        .query_unpaged(cql, ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    n as usize
}

/// Sends `method path` to `d`; the status and the body's bytes.
async fn raw(d: &Daemon, method: &str, path: &str) -> (u16, Vec<u8>) {
    let r = d
        .client()
        .request(method.parse().unwrap(), d.url(path))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// Issue 42: a table directory that is a symbolic link to elsewhere made the snapshot routes
/// list and serve a file from outside the data directory (the live-migration routes answer
/// 403 for the same link). Listing, reading and clearing through it are refused with 403, the
/// outside file's bytes are never sent, and nothing it points to is removed.
#[tokio::test]
async fn a_symlinked_table_directory_is_refused_by_the_snapshot_routes() {
    let home = test_support::Home::new();
    let data = home.path().join("data0");
    let outside = home.path().join("outside");
    let secret = b"the outside file's bytes";
    std::fs::create_dir_all(outside.join("snapshots/s1")).unwrap();
    std::fs::write(outside.join("snapshots/s1/nb-1-big-Data.db"), secret).unwrap();
    std::fs::create_dir_all(data.join("ks")).unwrap();
    std::os::unix::fs::symlink(
        &outside,
        data.join("ks/linked-0123456789abcdef0123456789abcdef"),
    )
    .unwrap();
    let d = Daemon::start(
        &home,
        &format!(
            "cassandra:\n  data_file_directories: [{}]\nsstable_snapshots:\n  enabled: true\n",
            data.display()
        ),
    )
    .await;
    let base = "/api/v1/keyspaces/ks/tables/linked/snapshots/s1";
    for (method, path) in [
        ("GET", base.to_string()),
        ("GET", format!("{base}/components/nb-1-big-Data.db")),
        (
            "GET",
            format!("{base}/components/nb-1-big-Data.db?dataDirectoryIndex=0"),
        ),
        ("DELETE", base.to_string()),
    ] {
        let (status, body) = raw(&d, method, &path).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, 403, "{method} {path}: {text}");
        assert!(
            !body.windows(secret.len()).any(|w| w == secret),
            "{method} {path} sent the outside file: {text}"
        );
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], 403, "{text}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("is or leads through a symbolic link"),
            "{text}"
        );
    }
    assert_eq!(
        std::fs::read(outside.join("snapshots/s1/nb-1-big-Data.db")).unwrap(),
        secret
    );
}

/// Issue 42: a snapshot `DELETE` for one table cleared the tag across the whole keyspace
/// (`nodetool clearsnapshot -t` takes keyspaces). As the Sidecar's route, it clears that
/// table's snapshot only: the other table's snapshot of the same name survives, listed and
/// on disk.
#[tokio::test]
async fn deleting_one_tables_snapshot_leaves_another_tables_of_the_same_name() {
    let Fixture { src, ks, .. } = Fixture::new(
        "snapshot_clear_one",
        "CREATE TABLE $ks.a (k int PRIMARY KEY, v text); \
         CREATE TABLE $ks.b (k int PRIMARY KEY, v text)",
    )
    .await;
    for t in ["a", "b"] {
        exec(
            &src,
            &format!("INSERT INTO {ks}.{t} (k, v) VALUES (1, 'x')"),
        )
        .await;
    }
    let reader = source_sidecar().await;
    let tag = "drover-clear-one";
    let route = |t: &str| format!("/api/v1/keyspaces/{ks}/tables/{t}/snapshots/{tag}");
    for t in ["a", "b"] {
        let (status, body) = raw(&reader, "PUT", &route(t)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    let (status, listed) = reader.get(&route("b")).await;
    assert_eq!(status, 200, "{listed}");
    let files_of_b = listed["snapshotFilesInfo"].as_array().unwrap().len();
    assert!(files_of_b > 0, "{listed}");

    let (status, body) = raw(&reader, "DELETE", &route("a")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));

    let (status, body) = reader.get(&route("a")).await;
    assert_eq!(status, 404, "{body}");
    let (status, listed) = reader.get(&route("b")).await;
    assert_eq!(status, 200, "b's snapshot was cleared too: {listed}");
    assert_eq!(
        listed["snapshotFilesInfo"].as_array().unwrap().len(),
        files_of_b,
        "{listed}"
    );
    let snapshot_dirs = |t: &str| {
        std::fs::read_dir(src_data_dir().join(ks))
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{t}-"))
            })
            .filter(|e| e.path().join("snapshots").join(tag).is_dir())
            .count()
    };
    assert_eq!(snapshot_dirs("a"), 0);
    assert_eq!(snapshot_dirs("b"), 1);
    let (status, body) = raw(&reader, "DELETE", &route("b")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(snapshot_dirs("b"), 0);
}
