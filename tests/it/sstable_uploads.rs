//! Cassandra Sidecar's SSTable upload and import routes against the real target node: SSTables
//! the source node flushed itself are uploaded, component by component with their digests, to
//! a daemon beside the target node and imported there by its `nodetool import`; every cell,
//! writetime and TTL arrives. And what the routes refuse: bad digests, path tricks, unknown and
//! already imported uploads, an import the node refuses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use test_support::Daemon;
use test_support::cql::{clusters, exec, fresh_keyspace};

fn nodetool() -> String {
    std::env::var("DROVER_TEST_NODETOOL")
        .expect("DROVER_TEST_NODETOOL (run scripts/testenv up and source its env file)")
}

fn src_data_dir() -> PathBuf {
    PathBuf::from(std::env::var("DROVER_TEST_CASSANDRA_SRC_DIR").expect("scripts/testenv env"))
        .join("data")
}

/// Flushes `ks.table` on the source node and returns its SSTable components, `Data.db` last
/// (as Sidecar clients send them).
async fn flushed_components(
    src: &scylla::client::session::Session,
    ks: &str,
    table: &str,
) -> Vec<PathBuf> {
    let out = std::process::Command::new(nodetool())
        .args(["-h", "127.0.0.1", "-p", "7199", "flush", "--", ks, table])
        .output()
        .expect("run nodetool");
    assert!(out.status.success(), "nodetool flush: {out:?}");
    // The directory of this table's id: a dropped table of the same name leaves its own.
    let (id,): (uuid::Uuid,) = src
        .query_unpaged(
            "SELECT id FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
            (ks, table),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    let table_dir = src_data_dir()
        .join(ks)
        .join(format!("{table}-{}", id.simple()));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&table_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    assert!(
        files
            .iter()
            .any(|p| p.to_string_lossy().ends_with("-Data.db")),
        "no SSTable in {}: {files:?}",
        table_dir.display()
    );
    files.sort_by_key(|p| p.to_string_lossy().ends_with("-Data.db"));
    files
}

async fn uploads_daemon(extra: &str) -> Daemon {
    Daemon::fresh(&format!(
        "cassandra:\n  jmx_address: 127.0.0.1:7299\nsstable_uploads:\n  enabled: true\n  nodetool: {}\n  min_free_space_percent: 1\n{extra}",
        nodetool()
    ))
    .await
}

fn component_url(d: &Daemon, id: &str, ks: &str, table: &str, file: &Path) -> String {
    d.url(&format!(
        "/api/v1/uploads/{id}/keyspaces/{ks}/tables/{table}/components/{}",
        file.file_name().unwrap().to_string_lossy()
    ))
}

/// `PUT url` with `body` and `headers`.
async fn put(
    d: &Daemon,
    url: String,
    body: impl Into<reqwest::Body>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = d.client().put(url).body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Uploads every component with its xxHash32 (seed 0), as Cassandra Analytics does.
async fn upload_all(d: &Daemon, id: &str, ks: &str, table: &str, files: &[PathBuf]) {
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        let digest = format!("{:x}", xxhash_rust::xxh32::xxh32(&bytes, 0));
        let len = bytes.len() as u64;
        let r = put(
            d,
            component_url(d, id, ks, table, file),
            bytes,
            &[
                ("cassandra-content-xxhash32", &digest),
                ("cassandra-content-xxhash32-seed", "0"),
            ],
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK, "{file:?}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["uploadId"], id);
        assert_eq!(body["uploadSizeBytes"], len);
    }
}

/// Asks for the import until it is no longer pending: its last status and body.
async fn import(d: &Daemon, id: &str, ks: &str, table: &str) -> (StatusCode, Value) {
    let url = d.url(&format!(
        "/api/v1/uploads/{id}/keyspaces/{ks}/tables/{table}/import"
    ));
    for _ in 0..600 {
        let r = d.client().put(&url).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        if status != StatusCode::ACCEPTED {
            return (status, body);
        }
        assert_eq!(body["success"], false, "202 while the import runs");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the import of {id} was still pending after 2 minutes");
}

type Row = (
    i32,
    i32,
    Option<String>,
    Option<String>,
    Option<std::collections::BTreeMap<String, i32>>,
    Option<Vec<i64>>,
    Option<i64>,
    Option<i64>,
    Option<i32>,
);

/// Every row of `<ks>.t` with its writetimes and TTL, in key order.
async fn read(s: &scylla::client::session::Session, ks: &str) -> Vec<Row> {
    let q = format!(
        "SELECT p, c, s, v, m, WRITETIME(m), WRITETIME(v), WRITETIME(s), TTL(v) FROM {ks}.t"
    );
    let mut rows: Vec<Row> = s
        .query_unpaged(q, ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows::<Row>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort_by_key(|r| (r.0, r.1));
    rows
}

const ID: &str = "0190c0de-7d3e-7cbe-8a7c-0000000000a1";

#[tokio::test]
async fn sstables_uploaded_and_imported_keep_every_cell_writetime_and_ttl() {
    uploaded_and_imported("jmx", "upl_ok").await;
}

/// The same through `nodetool import` (`sstable_uploads.importer: nodetool`).
#[tokio::test]
async fn sstables_imported_by_nodetool_keep_every_cell_writetime_and_ttl() {
    uploaded_and_imported("nodetool", "upl_nt").await;
}

async fn uploaded_and_imported(importer: &str, ks: &str) {
    let (src, dst) = clusters().await;
    let ddl = "CREATE TABLE $ks.t (p int, c int, s text static, v text, m map<text,int>, PRIMARY KEY (p, c))";
    fresh_keyspace(&src, &dst, ks, ddl).await;
    for p in 0..20 {
        exec(
            &src,
            &format!("INSERT INTO {ks}.t (p, s) VALUES ({p}, 's{p}') USING TIMESTAMP 1000"),
        )
        .await;
        for c in 0..50 {
            exec(
                &src,
                &format!(
                    "INSERT INTO {ks}.t (p, c, v, m) VALUES ({p}, {c}, 'v{p}-{c}', {{'a': {c}}}) USING TIMESTAMP {} AND TTL {}",
                    2000 + p * 100 + c,
                    if c % 5 == 0 { 86400 } else { 0 }
                ),
            )
            .await;
        }
    }
    let files = flushed_components(&src, ks, "t").await;
    let d = uploads_daemon(&format!("  importer: {importer}\n")).await;
    upload_all(&d, ID, ks, "t", &files).await;
    let (status, body) = import(&d, ID, ks, "t").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        serde_json::json!({"success": true, "uploadId": ID, "keyspace": ks, "tableName": "t"})
    );

    let (want, got) = (read(&src, ks).await, read(&dst, ks).await);
    assert_eq!(want.len(), 1000);
    assert_eq!(got.len(), want.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(
            (&w.0, &w.1, &w.2, &w.3, &w.4, &w.5, &w.6, &w.7),
            (&g.0, &g.1, &g.2, &g.3, &g.4, &g.5, &g.6, &g.7)
        );
        // The same expiry: the TTL left differs only by the seconds between the two reads.
        match (w.8, g.8) {
            (None, None) => {}
            (Some(a), Some(b)) => assert!((a - b).abs() <= 5, "{w:?} {g:?}"),
            other => panic!("TTL {other:?} for {w:?}"),
        }
    }

    // The upload is gone from the staging directory, and remembered.
    let staging = d.home().state_dir().join("sstable-uploads");
    assert!(!staging.join(ID).exists());
    let (status, body) = import(&d, ID, ks, "t").await;
    assert_eq!(
        (status, &body["success"]),
        (StatusCode::OK, &Value::Bool(true))
    );
    let r = put(&d, component_url(&d, ID, ks, "t", &files[0]), "x", &[]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    // Nothing was imported twice: still one copy of each row's cells.
    let count: (i64,) = dst
        .query_unpaged(format!("SELECT COUNT(*) FROM {ks}.t"), ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(count.0, 1000);
}

async fn error_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], status, "{body}");
    assert!(
        body["status"].is_string() && body["message"].is_string(),
        "{body}"
    );
    (status, body)
}

#[tokio::test]
async fn uploads_refuse_bad_digests_path_tricks_unknown_ids_and_refused_imports() {
    let (src, dst) = clusters().await;
    fresh_keyspace(
        &src,
        &dst,
        "upl_bad",
        "CREATE TABLE $ks.t (p int PRIMARY KEY, v text)",
    )
    .await;
    for p in 0..10 {
        exec(
            &src,
            &format!("INSERT INTO upl_bad.t (p, v) VALUES ({p}, 'v{p}')"),
        )
        .await;
    }
    let files = flushed_components(&src, "upl_bad", "t").await;
    let data = files.last().unwrap();
    let d = uploads_daemon("").await;
    let id = "0190c0de-7d3e-7cbe-8a7c-0000000000b2";

    // A digest that does not match: 455, and nothing left behind.
    let bytes = std::fs::read(data).unwrap();
    let r = put(
        &d,
        component_url(&d, id, "upl_bad", "t", data),
        bytes.clone(),
        &[("cassandra-content-xxhash32", "1234abcd")],
    )
    .await;
    let (status, body) = error_of(r).await;
    assert_eq!(status, 455);
    assert_eq!(body["status"], "Checksum Mismatch");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("expected_digest=1234abcd")
    );
    let r = put(
        &d,
        component_url(&d, id, "upl_bad", "t", data),
        bytes.clone(),
        &[("content-md5", "AAAAAAAAAAAAAAAAAAAAAA==")],
    )
    .await;
    assert_eq!(error_of(r).await.0, 455);
    let table_dir = d
        .home()
        .state_dir()
        .join("sstable-uploads")
        .join(id)
        .join("upl_bad/t");
    let left: Vec<_> = std::fs::read_dir(&table_dir)
        .map(|rd| rd.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    // Path tricks and bad names: refused before a byte is written.
    for (path, want) in [
        (format!("/api/v1/uploads/{id}/keyspaces/upl_bad/tables/t/components/..%2F..%2Fx-Data.db"), 400),
        (format!("/api/v1/uploads/{id}/keyspaces/..%2F..%2F/tables/t/components/nb-1-big-Data.db"), 400),
        (format!("/api/v1/uploads/{id}/keyspaces/system/tables/local/components/nb-1-big-Data.db"), 403),
        ("/api/v1/uploads/..%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc/keyspaces/upl_bad/tables/t/components/nb-1-big-Data.db".to_string(), 400),
        (format!("/api/v1/uploads/{id}/keyspaces/upl_bad/tables/t/components/nb-1-big-Data.sh"), 400),
    ] {
        let r = put(&d, d.url(&path), "x", &[]).await;
        assert_eq!(error_of(r).await.0, want, "{path}");
    }
    let staged: Vec<_> = std::fs::read_dir(d.home().state_dir().join("sstable-uploads"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "imported.log")
        .collect();
    assert!(staged.iter().all(|n| n == id), "{staged:?}");

    // Unknown uploads: 404 on import and delete; bad query values: 400.
    let unknown = "0190c0de-7d3e-7cbe-8a7c-0000000000ff";
    let r = d
        .client()
        .put(d.url(&format!(
            "/api/v1/uploads/{unknown}/keyspaces/upl_bad/tables/t/import"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 404);
    let r = d
        .client()
        .delete(d.url(&format!("/api/v1/uploads/{unknown}")))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 404);
    let r = d
        .client()
        .put(d.url(&format!(
            "/api/v1/uploads/{id}/keyspaces/upl_bad/tables/t/import?verifySSTables=maybe"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 400);

    // An import the node refuses: a Data.db damaged in the middle (uploaded with the digest of
    // the damaged bytes, so only the node's own checks can find it) fails with its message.
    let mut damaged = bytes.clone();
    let mid = damaged.len() / 2;
    for b in &mut damaged[mid..(mid + 16).min(bytes.len())] {
        *b ^= 0x5a;
    }
    for file in &files[..files.len() - 1] {
        let r = put(
            &d,
            component_url(&d, id, "upl_bad", "t", file),
            std::fs::read(file).unwrap(),
            &[],
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = put(
        &d,
        component_url(&d, id, "upl_bad", "t", data),
        damaged,
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let (status, body) = import(&d, id, "upl_bad", "t").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("Failed to import upl_bad.t"), "{message}");
    assert!(
        message.to_lowercase().contains("failed to import"),
        "{message}"
    );
    let count: (i64,) = dst
        .query_unpaged("SELECT COUNT(*) FROM upl_bad.t", ())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(count.0, 0, "nothing of a refused import is in the table");

    // The refused upload can be deleted; then it is gone.
    let r = d
        .client()
        .delete(d.url(&format!("/api/v1/uploads/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        !d.home()
            .state_dir()
            .join("sstable-uploads")
            .join(id)
            .exists()
    );

    // A node whose routes are off shows none of them.
    let off = Daemon::fresh("").await;
    let r = off
        .client()
        .put(component_url(&off, id, "upl_bad", "t", data))
        .body("x")
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(r).await;
    assert_eq!(status, 404);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("sstable_uploads.enabled")
    );
}
