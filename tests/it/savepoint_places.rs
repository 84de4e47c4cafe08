//! Savepoints kept elsewhere than a local directory: an S3 bucket (moto), a GCS bucket (the
//! GCS emulator of `scripts/testenv`) and a table of the target database, each written,
//! listed, kept to its number, resumed from after `kill -9`, with unusable entries skipped and
//! one run at a time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scylla::client::session::Session;
use serde_json::Value;

use test_support::cql::{self, Fixture, assert_same, job};
use test_support::{Daemon, drover_bin};

const WAIT: Duration = Duration::from_secs(180);

fn moto() -> String {
    std::env::var("DROVER_TEST_MOTO").expect("DROVER_TEST_MOTO (source target/testenv/env)")
}

fn gcs() -> String {
    std::env::var("DROVER_TEST_GCS").expect("DROVER_TEST_GCS (source target/testenv/env)")
}

fn host_port(url: &str) -> (String, String) {
    let authority = url.trim_start_matches("http://");
    let (h, p) = authority.rsplit_once(':').unwrap();
    (h.to_string(), p.to_string())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A savepoint name newer than any written so far.
fn future_name(offset_ms: u64, counter: u64) -> String {
    format!(
        "savepoint_{:013}_{counter:010}.yaml",
        now_ms() + 60_000 + offset_ms
    )
}

async fn cli(yaml: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let path = cql::write_job(yaml);
    let out = tokio::process::Command::new(drover_bin())
        .args(["migrate", "--config"])
        .arg(&path)
        .env("RUST_LOG", "drover=info")
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---- S3 (moto) ------------------------------------------------------------------------------

async fn s3_bucket(name: &str) {
    let r = reqwest::Client::new()
        .put(format!("{}/{name}", moto()))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

/// The keys under `prefix/` of a bucket of moto.
async fn s3_keys(bucket: &str, prefix: &str) -> Vec<String> {
    let body = reqwest::Client::new()
        .get(format!("{}/{bucket}?list-type=2&prefix={prefix}/", moto()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut keys: Vec<String> = body
        .split("<Key>")
        .skip(1)
        .filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string()))
        .collect();
    keys.sort();
    keys
}

/// An object's text, read with credentials (moto serves objects written with them only so).
async fn s3_get(bucket: &str, key: &str) -> String {
    use object_store::ObjectStoreExt;
    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_endpoint(moto())
        .with_allow_http(true)
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()
        .unwrap();
    let got = store
        .get(&object_store::path::Path::from(key))
        .await
        .unwrap();
    String::from_utf8(got.bytes().await.unwrap().to_vec()).unwrap()
}

async fn s3_put(bucket: &str, key: &str, body: &str) {
    let r = reqwest::Client::new()
        .put(format!("{}/{bucket}/{key}", moto()))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

fn s3_target(bucket: &str, prefix: &str, extra: &str) -> String {
    let (host, port) = host_port(&moto());
    format!(
        "savepoints:\n  intervalSeconds: 1\n  keep: 3\n  target:\n    type: s3\n    bucket: {bucket}\n    prefix: {prefix}\n    region: us-east-1\n    endpoint:\n      host: http://{host}\n      port: {port}\n    credentials:\n      accessKey: drover-test-access\n      secretKey: drover-test-secret-s3\n{extra}"
    )
}

/// Savepoints in an S3 bucket: written whole under the file names, kept to `keep`, listed by
/// the API; a second run is refused while the first holds the folder's lease object; after
/// `kill -9` the restarted daemon resumes past a corrupt newer object, and the lease object is
/// gone once the job ends.
#[tokio::test]
async fn s3_savepoints_resume_after_kill_9_and_admit_one_run_at_a_time() {
    let rows = 20_000;
    let Fixture {
        src,
        dst,
        ks,
        mut daemon,
    } = Fixture::rows("it_sp_s3", rows, 100, 100).await;
    let bucket = format!("drover-it-s3-{}", std::process::id());
    s3_bucket(&bucket).await;
    let prefix = "jobs/kill";
    let yaml = format!(
        "{}{}",
        job(ks, "t", "", "  rowsPerSecond: 800\n", ""),
        s3_target(&bucket, prefix, "")
    );
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() >= Some(12)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(
        status,
        409,
        "{body}\nfirst: {}\n{}",
        daemon.get(&format!("/api/v1/migrations/{id}")).await.1,
        daemon.logs()
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("s3://{bucket}/{prefix}"))
            && message.contains("in use by another run"),
        "{message}"
    );
    let (status, list) = daemon
        .get(&format!("/api/v1/migrations/{id}/savepoints"))
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["path"], format!("s3://{bucket}/{prefix}"), "{list}");
    assert!(!list["savepoints"].as_array().unwrap().is_empty(), "{list}");

    let before_kill = daemon.get(&format!("/api/v1/migrations/{id}")).await.1;
    daemon.kill9();
    let keys = s3_keys(&bucket, prefix).await;
    let savepoints: Vec<_> = keys.iter().filter(|k| k.contains("savepoint_")).collect();
    // A savepoint is written before the oldest beyond `keep` is deleted (never fewer than
    // `keep` whole ones), so a kill between the two leaves one more.
    assert!(
        (1..=4).contains(&savepoints.len()),
        "kept to 3 (4 when killed between a write and its pruning): {keys:?}"
    );
    assert!(
        keys.contains(&format!("{prefix}/.drover-writer.lock")),
        "the killed run's lease is still there: {keys:?}\n{before_kill}"
    );
    // Written whole: every savepoint object parses and records progress.
    let newest = savepoints.last().unwrap();
    let text = s3_get(&bucket, newest).await;
    let doc: Value = yaml_serde::from_str(&text).unwrap();
    assert!(
        !doc["skipTokenRanges"].as_array().unwrap().is_empty(),
        "{text}"
    );
    assert!(
        !text.contains("drover-test-secret-s3") && !text.contains("drover-test-access"),
        "secrets are redacted in savepoints: {text}"
    );
    let corrupt = future_name(0, 1);
    s3_put(
        &bucket,
        &format!("{prefix}/{corrupt}"),
        "source: [not closed",
    )
    .await;

    // The lease of a process gone from this host is taken over at once.
    let home = daemon.home().clone();
    let daemon = Daemon::start(&home, "").await;
    let done = daemon
        .wait_job(&id, WAIT, |j| {
            !matches!(
                j["state"].as_str(),
                Some("INTERRUPTED" | "RUNNING" | "QUEUED")
            )
        })
        .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    assert_eq!(done["attempts"], 2, "{done}");
    assert!(
        done["progress"]["unitsSkipped"].as_u64() >= Some(12),
        "{done}"
    );
    let logs = daemon.logs();
    assert!(
        logs.contains(&corrupt) && logs.contains("trying an older savepoint"),
        "{logs}"
    );
    assert!(
        logs.contains("resuming from the newest savepoint"),
        "{logs}"
    );
    let keys = s3_keys(&bucket, prefix).await;
    assert!(
        !keys.iter().any(|k| k.ends_with(".drover-writer.lock")),
        "the lease is released at the end: {keys:?}"
    );
    assert!(
        keys.iter().filter(|k| k.contains("savepoint_")).count() <= 3,
        "{keys:?}"
    );
    let select = "p, c, v, n";
    assert_eq!(
        assert_same(
            &src,
            &format!("{ks}.t"),
            &dst,
            &format!("{ks}.t"),
            select,
            select,
            &[]
        )
        .await,
        rows
    );
}

// ---- GCS (emulator) -------------------------------------------------------------------------

async fn gcs_bucket(name: &str) {
    let r = reqwest::Client::new()
        .post(format!("{}/storage/v1/b?project=drover", gcs()))
        .json(&serde_json::json!({ "name": name }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

async fn gcs_names(bucket: &str, prefix: &str) -> Vec<String> {
    let list: Value = reqwest::Client::new()
        .get(format!("{}/storage/v1/b/{bucket}/o", gcs()))
        .query(&[("prefix", format!("{prefix}/"))])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

async fn gcs_put(bucket: &str, name: &str, body: &str) {
    let r = reqwest::Client::new()
        .post(format!("{}/upload/storage/v1/b/{bucket}/o", gcs()))
        .query(&[("uploadType", "media"), ("name", name)])
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

/// Savepoints in a GCS bucket, with ScyllaDB Migrator's `type: gcs` keys and with a `gs://`
/// path: written, kept to `keep`, resumed from past a corrupt newer object; validation
/// savepoints go to their own folder.
#[tokio::test]
async fn gcs_savepoints_are_kept_to_their_number_and_resumed_past_corrupt_ones() {
    let Fixture { ks, .. } = Fixture::rows("it_sp_gcs", 3_000, 100, 100).await;
    let bucket = format!("drover-it-gcs-{}", std::process::id());
    gcs_bucket(&bucket).await;
    let (host, port) = host_port(&gcs());
    // A key file as emulators take them (object_store's convention): no OAuth, a base URL.
    let keyfile = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        keyfile.path(),
        format!(r#"{{"disable_oauth": true, "gcs_base_url": "{}"}}"#, gcs()),
    )
    .unwrap();
    let yaml = format!(
        "{}savepoints:\n  intervalSeconds: 1\n  keep: 2\n  target:\n    type: gcs\n    bucket: {bucket}\n    prefix: /jobs/a/\n    projectId: drover-test\n    credentials:\n      serviceAccountJsonKeyfile: {}\n",
        job(ks, "t", "", "", ""),
        keyfile.path().display()
    );
    let (code, stderr) = cli(&yaml, &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let names = gcs_names(&bucket, "jobs/a").await;
    let savepoints: Vec<_> = names.iter().filter(|n| n.contains("/savepoint_")).collect();
    assert!((1..=2).contains(&savepoints.len()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.ends_with(".drover-writer.lock")),
        "{names:?}"
    );
    let newest = savepoints
        .last()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();

    let corrupt = future_name(0, 1);
    gcs_put(&bucket, &format!("jobs/a/{corrupt}"), "source: [not closed").await;
    // The lookup passes the corrupt object over and finds the first run's newest savepoint,
    // which covers every unit: the run is refused (exit 2), naming that savepoint.
    let (code, stderr) = cli(&yaml, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "savepoint {newest} in gs://{bucket}/jobs/a already records every unit"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&corrupt) && stderr.contains("trying an older savepoint"),
        "{stderr}"
    );
    assert!(!stderr.contains("migration complete"), "{stderr}");
    // A fresh load (autoResume: false) still writes savepoints: two runs, at least one
    // savepoint each (and the corrupt one), and the newest 2 are kept.
    let (code, stderr) = cli(&format!("{yaml}  autoResume: false\n"), &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("complete: 3000 rows"), "{stderr}");
    let names = gcs_names(&bucket, "jobs/a").await;
    assert_eq!(
        names.iter().filter(|n| n.contains("/savepoint_")).count(),
        2,
        "kept to 2: {names:?}"
    );

    // Migrator's legacy path form, with Google's emulator convention for the address.
    let path_yaml = format!(
        "{}savepoints:\n  intervalSeconds: 1\n  path: gs://{bucket}/jobs/b\n",
        job(ks, "t", "", "", "")
    );
    let (code, stderr) = cli(
        &path_yaml,
        &[("STORAGE_EMULATOR_HOST", &format!("{host}:{port}"))],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        gcs_names(&bucket, "jobs/b")
            .await
            .iter()
            .any(|n| n.contains("/savepoint_")),
        "{stderr}"
    );

    // The validator's savepoints: a folder of their own.
    let validate = tokio::process::Command::new(drover_bin())
        .args(["validate", "--config"])
        .arg(cql::write_job(&yaml))
        .env("RUST_LOG", "drover=info")
        .output()
        .await
        .unwrap();
    assert_eq!(
        validate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );
    assert!(
        gcs_names(&bucket, "jobs/a/validation")
            .await
            .iter()
            .any(|n| n.contains("validation/savepoint_")),
        "validation savepoints in jobs/a/validation/"
    );
}

// ---- Target table ---------------------------------------------------------------------------

type Row = (String, i64, i64, Option<String>, Option<i64>);
type RawSavepointRow = (
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<i64>,
);

async fn savepoint_rows(dst: &Session, table: &str) -> Vec<Row> {
    let result = dst
        .query_unpaged(
            format!("SELECT job_id, created_at, counter, config_yaml, lease_epoch FROM {table}"),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let mut rows: Vec<RawSavepointRow> = result.rows().unwrap().collect::<Result<_, _>>().unwrap();
    rows.retain(|r| r.1.is_some());
    rows.into_iter()
        .map(|(j, c, n, y, e)| (j, c.unwrap(), n.unwrap(), y, e))
        .collect()
}

async fn lease_owner(dst: &Session, table: &str, job_id: &str) -> Option<String> {
    let result = dst
        .query_unpaged(
            format!("SELECT lease_owner FROM {table} WHERE job_id = ? LIMIT 1"),
            (job_id,),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    result
        .maybe_first_row::<(Option<String>,)>()
        .unwrap()
        .and_then(|r| r.0)
}

/// Savepoints in the target database, as ScyllaDB Migrator's documentation describes them: the
/// default table in `target.keyspace`, one row per version under a job id derived from the
/// job's identity, resumed from newest to oldest across pages of unusable rows; another
/// migration (or an explicit `jobId` with another identity) does not resume from them; each
/// row carries the epoch of the lease it was written under, and the lease is released.
#[tokio::test]
async fn target_table_savepoints_resume_across_pages_and_keep_to_their_migration() {
    let Fixture { src, dst, ks, .. } = Fixture::rows("it_sp_table", 3_000, 100, 100).await;
    cql::exec(
        &dst,
        &format!("CREATE TABLE {ks}.other (p int, c int, v text, n bigint, PRIMARY KEY (p, c))"),
    )
    .await;
    let table = format!("{ks}.scylla_migrator_savepoints");
    let yaml = format!(
        "{}savepoints:\n  keep: 3\n  target:\n    type: target-table\n",
        job(ks, "t", "", "", "")
    );
    let (code, stderr) = cli(&yaml, &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let rows = savepoint_rows(&dst, &table).await;
    assert_eq!(
        rows.len(),
        1,
        "intervalSeconds defaults to 300: one final savepoint"
    );
    let (job_id, _, _, yaml_text, epoch) = rows[0].clone();
    assert!(job_id.starts_with("job-"), "{job_id}");
    assert_eq!(epoch, Some(1));
    let doc: Value = yaml_serde::from_str(yaml_text.as_deref().unwrap()).unwrap();
    assert_eq!(doc["source"]["table"], "t");
    assert!(
        !doc["skipTokenRanges"].as_array().unwrap().is_empty(),
        "{doc}"
    );
    assert_eq!(lease_owner(&dst, &table, &job_id).await, None, "released");

    // 25 unusable rows newer than the good one: more than two pages of lookup.
    for i in 0..25i64 {
        dst.query_unpaged(
            format!(
                "INSERT INTO {table} (job_id, created_at, counter, config_yaml, lease_epoch) VALUES (?, ?, ?, ?, 1)"
            ),
            (
                job_id.as_str(),
                (now_ms() + 60_000) as i64 + i,
                1000 + i,
                "source: [not closed",
            ),
        )
        .await
        .unwrap();
    }
    // The lookup passes the 25 over and finds the good row, which covers every unit: the run
    // is refused (exit 2), naming that row's savepoint, and takes no lease.
    let (code, stderr) = cli(&yaml, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    let (_, created_at, counter, _, _) = &rows[0];
    let good = format!("savepoint_{created_at:013}_{counter:010}.yaml");
    assert!(
        stderr.contains(&format!(
            "savepoint {good} in table {table} (job {job_id}) already records every unit"
        )),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("trying an older savepoint").count(),
        25,
        "{stderr}"
    );
    assert!(!stderr.contains("migration complete"), "{stderr}");
    assert!(
        savepoint_rows(&dst, &table)
            .await
            .iter()
            .all(|r| r.4 == Some(1)),
        "a refused run writes nothing"
    );
    // A fresh load writes its savepoints under the next lease.
    let (code, stderr) = cli(&format!("{yaml}  autoResume: false\n"), &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("complete: 3000 rows"), "{stderr}");
    let rows = savepoint_rows(&dst, &table).await;
    assert!(
        rows.iter().any(|r| r.4 == Some(2)),
        "the second run wrote under epoch 2: {rows:?}"
    );
    assert!(rows.len() <= 3 + 1, "kept to 3 (and ties): {}", rows.len());

    // Another migration: another derived job id, nothing resumed.
    let other = format!(
        "{}savepoints:\n  target:\n    type: target-table\n",
        cql::job_to(ks, "t", "other", "", "", "")
    );
    let (code, stderr) = cli(&other, &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("resuming from savepoint"), "{stderr}");
    // An explicit jobId naming the first job's rows does not bypass the identity check.
    let explicit = format!("{other}    jobId: {job_id}\n");
    let (code, stderr) = cli(&explicit, &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stderr.contains("resuming from savepoint")
            && stderr.contains("belongs to another migration"),
        "{stderr}"
    );
    assert!(stderr.contains("complete: 3000 rows"), "{stderr}");
    drop(src);
}

/// The rules around the metadata table: explicit names are checked (and resolved as CQL
/// does), the metadata keyspace must exist, LOCAL_QUORUM is never downgraded (a replication
/// factor of 2 on a one-node cluster stops the start), and a `where` filter is stored only as
/// a keyed digest.
#[tokio::test]
async fn target_table_names_quorum_and_filters_follow_the_seed() {
    let Fixture { dst, ks, .. } = Fixture::rows("it_sp_rules", 500, 0, 10).await;
    let base = job(ks, "t", "", "", "");
    let with =
        |target: &str| format!("{base}savepoints:\n  target:\n    type: target-table\n{target}");

    let (code, stderr) = cli(&with("    keyspace: 'my-ks'\n"), &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("savepoints.target.keyspace")
            && stderr.contains("only ASCII letters, digits and underscores"),
        "{stderr}"
    );
    let (code, stderr) = cli(&with("    keyspace: '\"NoSuchKs\"'\n"), &[]).await;
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("keyspace \"NoSuchKs\" does not exist"),
        "quoted names keep their case: {stderr}"
    );

    let meta = format!("{ks}_rf2");
    cql::exec(&dst, &format!("DROP KEYSPACE IF EXISTS {meta}")).await;
    cql::exec(
        &dst,
        &format!("CREATE KEYSPACE {meta} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 2}}"),
    )
    .await;
    let (code, stderr) = cli(
        &with(&format!(
            "    keyspace: {}\n    table: Meta_Table\n",
            meta.to_uppercase()
        )),
        &[],
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("LOCAL_QUORUM"), "{stderr}");
    assert!(
        stderr.contains(&format!("table {meta}.meta_table")),
        "unquoted names are lower-cased: {stderr}"
    );
    cql::exec(&dst, &format!("DROP KEYSPACE {meta}")).await;

    let filtered = format!(
        "{}savepoints:\n  target:\n    type: target-table\n",
        job(ks, "t", "  where: \"v = 'secret-filter-value'\"\n", "", "")
    );
    let (code, stderr) = cli(&filtered, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("jobs.savepoint_filter_key_file"),
        "{stderr}"
    );
    let key = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key.path(), "0123456789abcdef0123456789abcdef").unwrap();
    let key_env = key.path().display().to_string();
    let (code, stderr) = cli(
        &filtered,
        &[("DROVER_SAVEPOINT_FILTER_KEY_FILE", key_env.as_str())],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    let rows = savepoint_rows(&dst, &format!("{ks}.scylla_migrator_savepoints")).await;
    let stored = rows[0].3.clone().unwrap();
    assert!(
        stored.contains("hmac-sha256:") && !stored.contains("secret-filter-value"),
        "{stored}"
    );
    // Same key, same digest: the next run finds that savepoint, which covers every unit,
    // and is refused naming it.
    let (_, created_at, counter, _, _) = &rows[0];
    let (code, stderr) = cli(
        &filtered,
        &[("DROVER_SAVEPOINT_FILTER_KEY_FILE", key_env.as_str())],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "savepoint savepoint_{created_at:013}_{counter:010}.yaml in table {ks}.scylla_migrator_savepoints"
        )) && stderr.contains("already records every unit"),
        "{stderr}"
    );
}

/// One run at a time per job id: a second run is refused with 409 while the first holds the
/// lease row; after `kill -9` the restarted daemon takes the lease of the dead process over at
/// once and resumes; the target ends identical.
#[tokio::test]
async fn target_table_lease_refuses_a_second_run_and_is_taken_over_after_kill_9() {
    let rows = 20_000;
    let Fixture {
        src,
        dst,
        ks,
        mut daemon,
    } = Fixture::rows("it_sp_lease", rows, 100, 100).await;
    let yaml = format!(
        "{}savepoints:\n  intervalSeconds: 1\n  target:\n    type: target-table\n    table: drover_savepoints\n    jobId: lease-test\n",
        job(ks, "t", "", "  rowsPerSecond: 800\n", "")
    );
    let id = daemon.submit_job("/api/v1/migrations", &yaml).await;
    daemon
        .wait_job(&id, WAIT, |j| {
            j["progress"]["unitsDone"].as_u64() >= Some(12)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, body) = daemon
        .post_raw("/api/v1/migrations", "application/yaml", yaml.clone())
        .await;
    assert_eq!(
        status,
        409,
        "{body}\nfirst: {}\n{}",
        daemon.get(&format!("/api/v1/migrations/{id}")).await.1,
        daemon.logs()
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("in use by another run"),
        "{body}"
    );
    daemon.kill9();
    let table = format!("{ks}.drover_savepoints");
    assert!(lease_owner(&dst, &table, "lease-test").await.is_some());

    let home = daemon.home().clone();
    let daemon = Daemon::start(&home, "").await;
    let done = daemon
        .wait_job(&id, WAIT, |j| {
            !matches!(
                j["state"].as_str(),
                Some("INTERRUPTED" | "RUNNING" | "QUEUED")
            )
        })
        .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done}\n{}", daemon.logs());
    assert!(
        done["progress"]["unitsSkipped"].as_u64() >= Some(12),
        "{done}"
    );
    let epochs: Vec<_> = savepoint_rows(&dst, &table)
        .await
        .into_iter()
        .filter_map(|r| r.4)
        .collect();
    assert!(epochs.contains(&2), "{epochs:?}");
    assert_eq!(lease_owner(&dst, &table, "lease-test").await, None);
    let select = "p, c, v, n";
    assert_eq!(
        assert_same(
            &src,
            &format!("{ks}.t"),
            &dst,
            &format!("{ks}.t"),
            select,
            select,
            &[]
        )
        .await,
        rows
    );
}
