//! DynamoDB S3 exports on moto's S3 and DynamoDB: an export AWS wrote (ScyllaDB Migrator's
//! fixture) loaded with Migrator's own job files; a table exported by drover (Migrator's
//! export job files, to disk and to S3) and loaded back item for item; an export built here
//! by AWS's documented layout loaded across a `kill -9` without reading a finished file
//! again; corrupt, missing and mislabelled files refused by name.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use md5::{Digest, Md5};
use serde_json::Value;
use test_support::dynamodb::{
    Item, Server, count, drop_table, fresh_table, put_all, scan_all, table_name,
};
use test_support::{Daemon, Home, error_message, poll};

use crate::dynamodb_types::every_type;
use crate::resume::savepoint_files;

const MIGRATIONS: &str = "/api/v1/migrations";
const WAIT: Duration = Duration::from_secs(180);

fn ended(j: &Value) -> bool {
    ["SUCCEEDED", "FAILED", "CANCELLED"].contains(&j["state"].as_str().unwrap_or(""))
}

fn moto() -> String {
    Server::Moto.url()
}

/// `host` (with its scheme) and `port` of moto.
fn moto_host_port() -> (String, String) {
    let url = moto();
    let (h, p) = url.rsplit_once(':').unwrap();
    (h.to_string(), p.to_string())
}

/// A bucket of this test process's own (other checkouts' runs share moto).
async fn bucket(base: &str) -> String {
    let name = format!("{base}-p{}", std::process::id());
    let status = test_support::http_client()
        .put(format!("{}/{name}", moto()))
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
    name
}

/// A signed client of `bucket` (moto serves objects written with credentials only to
/// requests with them).
fn store(bucket: &str) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_endpoint(moto())
        .with_allow_http(true)
        .with_access_key_id("dummy")
        .with_secret_access_key("dummy")
        .build()
        .unwrap()
}

async fn put_object(bucket: &str, key: &str, body: Vec<u8>) {
    use object_store::ObjectStoreExt;
    store(bucket)
        .put(&object_store::path::Path::from(key), body.into())
        .await
        .unwrap_or_else(|e| panic!("PUT {key}: {e}"));
}

async fn get_object(bucket: &str, key: &str) -> Option<Vec<u8>> {
    use object_store::ObjectStoreExt;
    let got = store(bucket)
        .get(&object_store::path::Path::from(key))
        .await
        .ok()?;
    Some(got.bytes().await.unwrap().to_vec())
}

async fn delete_object(bucket: &str, key: &str) {
    use object_store::ObjectStoreExt;
    store(bucket)
        .delete(&object_store::path::Path::from(key))
        .await
        .unwrap();
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrator-dynamodb")
}

/// A Migrator job file with its addresses, bucket, tables and paths changed to this test's.
fn adapt(name: &str, swaps: &[(&str, &str)]) -> String {
    let (host, port) = moto_host_port();
    let mut text = std::fs::read_to_string(fixtures().join(name)).unwrap();
    for (from, to) in swaps {
        assert!(text.contains(from), "{name} has no {from:?}");
        text = text.replace(from, to);
    }
    for h in ["http://s3", "http://scylla", "http://dynamodb"] {
        text = text.replace(&format!("host: {h}\n"), &format!("host: {host}\n"));
    }
    for p in ["4566", "8000"] {
        text = text.replace(&format!("port: {p}\n"), &format!("port: {port}\n"));
    }
    text
}

fn gzip(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_string(&mut out)
        .unwrap();
    out
}

fn md5_b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Md5::digest(bytes))
}

/// The items of DynamoDB JSON lines, by `id`.
fn items_of(lines: &str) -> HashMap<String, Item> {
    lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let item = drover::connectors::s3export::format::parse_line(l).unwrap();
            let AttributeValue::S(id) = &item["id"] else {
                panic!("{l}")
            };
            (id.clone(), item)
        })
        .collect()
}

#[tokio::test]
async fn an_aws_export_loads_with_migrators_job_files() {
    let bucket = bucket("drover-it-aws-export").await;
    let prefix = "dynamodb-export/AWSDynamoDB/01715685260608-c488b4e1";
    let dir = fixtures().join("export");
    for f in [
        "manifest-summary.json",
        "manifest-files.json",
        "data/uimbi7eofu2b5kzkxe63gsvb6i.json.gz",
    ] {
        put_object(
            &bucket,
            &format!("{prefix}/{f}"),
            std::fs::read(dir.join(f)).unwrap(),
        )
        .await;
    }
    let want = items_of(&gunzip(
        &std::fs::read(dir.join("data/uimbi7eofu2b5kzkxe63gsvb6i.json.gz")).unwrap(),
    ));
    assert_eq!(want.len(), 3);
    // Migrator's files name the region "dummy" for the DynamoDB side.
    let c = Server::Moto.client_in("dummy");
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    for (file, billing) in [
        (
            "dynamodb-s3-export-to-alternator-basic.yaml",
            "PAY_PER_REQUEST",
        ),
        (
            "dynamodb-s3-export-to-alternator-basic-provisioned.yaml",
            "PROVISIONED",
        ),
        (
            "dynamodb-s3-export-to-alternator-no-savepoints.yaml",
            "PAY_PER_REQUEST",
        ),
    ] {
        let table = table_name("it_aws_export");
        drop_table(&c, &table).await;
        let sp = home.path().join("sp").join(file);
        let job = adapt(
            file,
            &[
                ("bucket: test-bucket", &format!("bucket: {bucket}")),
                ("table: BasicTest", &format!("table: {table}")),
                ("path: /app/savepoints", &format!("path: {}", sp.display())),
            ],
        );
        let done = daemon.run_job(MIGRATIONS, &job, WAIT).await;
        assert_eq!(done["progress"]["unitsDone"], 1, "{file}: {done:#}");
        assert_eq!(done["progress"]["rowsWritten"], 3, "{file}: {done:#}");
        assert_eq!(scan_all(&c, &table).await, want, "{file}");
        let described = c.describe_table().table_name(&table).send().await.unwrap();
        let mode = described
            .table
            .and_then(|t| t.billing_mode_summary)
            .and_then(|b| b.billing_mode)
            .map(|b| b.as_str().to_string())
            .unwrap_or_else(|| "PROVISIONED".into());
        assert_eq!(mode, billing, "{file}");
        // The data file is recorded done, under drover's own key.
        // The no-savepoints file names a folder below the others'.
        let sp = if file.contains("no-savepoints") {
            sp.join("s3-export-no-savepoints")
        } else {
            sp
        };
        let names = savepoint_files(&sp);
        let last = std::fs::read_to_string(sp.join(names.last().expect("a savepoint"))).unwrap();
        assert!(
            last.contains(&format!(
                "s3://{bucket}/{prefix}/data/uimbi7eofu2b5kzkxe63gsvb6i.json.gz"
            )) && last.contains("skipExportDataFiles"),
            "{last}"
        );
        assert!(
            !last.contains("accessKey: dummy") && !last.contains("secretKey: dummy"),
            "credentials leaked: {last}"
        );
        drop_table(&c, &table).await;
    }
}

#[tokio::test]
async fn a_table_exported_by_drover_loads_back_exactly_from_disk_and_from_s3() {
    // Migrator's files name the region "dummy" for the DynamoDB side.
    let c = Server::Moto.client_in("dummy");
    let (src, back, again) = (
        table_name("it_export_src"),
        table_name("it_export_back"),
        table_name("it_export_again"),
    );
    fresh_table(&c, &src, None).await;
    drop_table(&c, &back).await;
    drop_table(&c, &again).await;
    let items: Vec<Item> = (0..300)
        .map(|i| every_type(i, vec![("id", AttributeValue::S(format!("k{i}")))]))
        .collect();
    put_all(&c, &src, items).await;
    let source = scan_all(&c, &src).await;
    assert_eq!(source.len(), 300);
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;

    // Migrator's export job file, to a local directory.
    let local = home.path().join("s3export_basic_test");
    let job = adapt(
        "dynamodb-to-s3export-basic.yaml",
        &[
            ("table: S3ExportBasicTest", &format!("table: {src}")),
            ("scanSegments: 1", "scanSegments: 3"),
            (
                "path: /app/parquet/s3export_basic_test",
                &format!("path: {}", local.display()),
            ),
            (
                "path: /app/savepoints",
                &format!("path: {}", home.path().join("sp-local").display()),
            ),
        ],
    );
    let done = daemon.run_job(MIGRATIONS, &job, WAIT).await;
    assert_eq!(done["progress"]["rowsWritten"], 300, "{done:#}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(local.join("manifest-summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["itemCount"], 300, "{summary:#}");
    assert_eq!(summary["outputFormat"], "DYNAMODB_JSON");
    assert_eq!(summary["manifestFilesS3Key"], "manifest-files.json");
    assert_eq!(summary["tableKeySchema"][0]["AttributeName"], "id");
    let manifest = std::fs::read_to_string(local.join("manifest-files.json")).unwrap();
    let mut exported = HashMap::new();
    let mut files = 0;
    for line in manifest.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let key = entry["dataFileS3Key"].as_str().unwrap();
        assert!(
            key.starts_with("data/") && key.ends_with(".json.gz"),
            "{line}"
        );
        let bytes = std::fs::read(local.join(key)).unwrap();
        assert_eq!(entry["md5Checksum"], md5_b64(&bytes), "{line}");
        let these = items_of(&gunzip(&bytes));
        assert_eq!(entry["itemCount"], these.len(), "{line}");
        exported.extend(these);
        files += 1;
    }
    assert_eq!(files, 3, "{manifest}");
    assert_eq!(exported, source, "the export holds every item exactly");
    // Nothing but the export: no temporary file left.
    let data: Vec<_> = std::fs::read_dir(local.join("data")).unwrap().collect();
    assert_eq!(data.len(), 3);

    // The same job again: its savepoint records everything as done, so it is refused (issue
    // 43: never a silent 0-row success), naming the savepoint and how to start over; the
    // export is left as it was.
    let (status, body) = daemon
        .post_raw(MIGRATIONS, "application/yaml", job.clone())
        .await;
    assert_eq!(status, 409, "{body}");
    let m = error_message(409, &body);
    assert!(
        m.contains("already records every unit") && m.contains("savepoints.autoResume: false"),
        "{m}"
    );
    assert_eq!(
        std::fs::read_to_string(local.join("manifest-files.json")).unwrap(),
        manifest
    );
    // Another export (no savepoint) to the same place is refused, naming it: a finished
    // export is never written over.
    let (status, body) = daemon
        .post_raw(
            MIGRATIONS,
            "application/yaml",
            job.replace("sp-local", "sp-other"),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let m = error_message(400, &body);
    assert!(
        m.contains("target.path: ") && m.contains("already holds"),
        "{m}"
    );

    // The local export, uploaded under a prefix, loads with Migrator's own load job file
    // (keys relative to the summary).
    let bucket = bucket("drover-it-export").await;
    for entry in ["manifest-summary.json", "manifest-files.json"]
        .into_iter()
        .map(String::from)
        .chain(manifest.lines().map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["dataFileS3Key"]
                .as_str()
                .unwrap()
                .to_string()
        }))
    {
        put_object(
            &bucket,
            &format!("bench_s3export/{entry}"),
            std::fs::read(local.join(&entry)).unwrap(),
        )
        .await;
    }
    let load = adapt(
        "bench-e2e-s3export-to-alternator.yaml",
        &[
            ("bucket: bench-bucket", &format!("bucket: {bucket}")),
            ("table: bench_e2e_ddb_s3_restore", &format!("table: {back}")),
            (
                "path: /app/savepoints",
                &format!("path: {}", home.path().join("sp-load").display()),
            ),
        ],
    );
    let done = daemon.run_job(MIGRATIONS, &load, WAIT).await;
    assert_eq!(done["progress"]["unitsDone"], 3, "{done:#}");
    assert_eq!(scan_all(&c, &back).await, source);

    // drover's export straight to S3, and back.
    let (host, port) = moto_host_port();
    let s3 = format!(
        "  endpoint:\n    host: {host}\n    port: {port}\n  region: us-east-1\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n"
    );
    let to_s3 = job.replace(
        &format!("path: {}\n", local.display()),
        &format!("path: s3a://{bucket}/exports/t\n{s3}"),
    );
    let to_s3 = to_s3.replace("sp-local", "sp-s3");
    let done = daemon.run_job(MIGRATIONS, &to_s3, WAIT).await;
    assert_eq!(done["progress"]["rowsWritten"], 300, "{done:#}");
    let summary: Value = serde_json::from_slice(
        &get_object(&bucket, "exports/t/manifest-summary.json")
            .await
            .expect("summary"),
    )
    .unwrap();
    // Full keys in S3, as AWS writes them.
    assert_eq!(
        summary["manifestFilesS3Key"],
        "exports/t/manifest-files.json"
    );
    assert_eq!(summary["s3Bucket"], bucket.as_str());
    let load = load.replace(
        "manifestKey: bench_s3export/manifest-summary.json",
        "manifestKey: exports/t/manifest-summary.json",
    );
    let load = load
        .replace(&format!("table: {back}"), &format!("table: {again}"))
        .replace("sp-load", "sp-load-s3");
    daemon.run_job(MIGRATIONS, &load, WAIT).await;
    assert_eq!(scan_all(&c, &again).await, source);
    for t in [&src, &back, &again] {
        drop_table(&c, t).await;
    }
}

/// An export as AWS lays one out: `<prefix>/AWSDynamoDB/<id>/` with `_started`, full keys,
/// item counts and MD5 digests. Returns the manifest summary's key and the items.
async fn aws_layout_export(
    bucket: &str,
    prefix: &str,
    files: usize,
    per_file: usize,
) -> (String, HashMap<String, Item>) {
    aws_export_in(bucket, prefix, files, per_file, false).await
}

/// [`aws_layout_export`] in DynamoDB JSON, or in Amazon Ion (`ion`) with the same items.
async fn aws_export_in(
    bucket: &str,
    prefix: &str,
    files: usize,
    per_file: usize,
    ion: bool,
) -> (String, HashMap<String, Item>) {
    let dir = format!("{prefix}/AWSDynamoDB/01764000000000-abcdef12");
    put_object(bucket, &format!("{dir}/_started"), Vec::new()).await;
    let mut manifest = String::new();
    let mut all = String::new();
    for f in 0..files {
        let mut text = String::new();
        let mut ion_text = String::new();
        for i in 0..per_file {
            let n = f * per_file + i;
            ion_text.push_str(&format!(
                "$ion_1_0 {{Item:{{id:\"x{n}\",n:{n}.25,blob:{{{{AAEC/w==}}}},set:$dynamodb_SS::[\"a\",\"b{n}\"],m:{{l:[null,true]}}}}}}\n"
            ));
            text.push_str(&format!(
                "{{\"Item\":{{\"id\":{{\"S\":\"x{n}\"}},\"n\":{{\"N\":\"{n}.25\"}},\"blob\":{{\"B\":\"AAEC/w==\"}},\"set\":{{\"SS\":[\"a\",\"b{n}\"]}},\"m\":{{\"M\":{{\"l\":{{\"L\":[{{\"NULL\":true}},{{\"BOOL\":true}}]}}}}}}}}}}\n"
            ));
        }
        all.push_str(&text);
        let (bytes, extension) = if ion {
            (gzip(&ion_text), "ion.gz")
        } else {
            (gzip(&text), "json.gz")
        };
        let key = format!("{dir}/data/{}{f}.{extension}", "q3vbz7ewl4yrbdpxnkhm2a5sxe");
        manifest.push_str(&format!(
            "{{\"itemCount\":{per_file},\"md5Checksum\":\"{}\",\"etag\":\"0123456789abcdef0123456789abcdef-1\",\"dataFileS3Key\":\"{key}\"}}\n",
            md5_b64(&bytes)
        ));
        put_object(bucket, &key, bytes).await;
    }
    put_object(
        bucket,
        &format!("{dir}/manifest-files.json"),
        manifest.into_bytes(),
    )
    .await;
    let summary = format!(
        "{{\"version\":\"2020-06-30\",\"exportArn\":\"arn:aws:dynamodb:us-east-1:123456789012:table/T/export/01764000000000-abcdef12\",\"startTime\":\"2026-11-24T16:00:00.000Z\",\"endTime\":\"2026-11-24T16:05:00.000Z\",\"tableArn\":\"arn:aws:dynamodb:us-east-1:123456789012:table/T\",\"tableId\":\"0c7e9d4e-0000-4000-8000-000000000000\",\"exportTime\":\"2026-11-24T16:00:00.000Z\",\"s3Bucket\":\"{bucket}\",\"s3Prefix\":\"{prefix}\",\"s3SseAlgorithm\":\"AES256\",\"s3SseKmsKeyId\":null,\"manifestFilesS3Key\":\"{dir}/manifest-files.json\",\"billedSizeBytes\":1000,\"itemCount\":{},\"outputFormat\":\"{}\",\"exportType\":\"FULL_EXPORT\"}}",
        files * per_file,
        if ion { "ION" } else { "DYNAMODB_JSON" }
    );
    put_object(
        bucket,
        &format!("{dir}/manifest-summary.json"),
        summary.into_bytes(),
    )
    .await;
    (format!("{dir}/manifest-summary.json"), items_of(&all))
}

fn load_job(
    bucket: &str,
    manifest_key: &str,
    table: &str,
    sp: &Path,
    extra_source: &str,
    extra_target: &str,
) -> String {
    let (host, port) = moto_host_port();
    let endpoint = format!(
        "  region: us-east-1\n  endpoint:\n    host: {host}\n    port: {port}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n"
    );
    format!(
        "source:\n  type: dynamodb-s3-export\n  bucket: {bucket}\n  manifestKey: {manifest_key}\n  usePathStyleAccess: true\n  tableDescription:\n    attributeDefinitions:\n      - name: id\n        type: S\n    keySchema:\n      - name: id\n        type: HASH\n{endpoint}{extra_source}target:\n  type: dynamodb\n  table: {table}\n  streamChanges: false\n{endpoint}{extra_target}savepoints:\n  path: {}\n  intervalSeconds: 1\n",
        sp.display()
    )
}

#[tokio::test]
async fn an_aws_layout_export_resumes_after_kill_9_skipping_finished_files() {
    let c = Server::Moto.client();
    let table = table_name("it_export_resume");
    drop_table(&c, &table).await;
    let bucket = bucket("drover-it-export-resume").await;
    let (manifest_key, want) = aws_layout_export(&bucket, "exports", 5, 800).await;
    let mut daemon = Daemon::fresh("").await;
    let home = daemon.home().clone();
    let sp = home.path().join("savepoints");
    // One file at a time, 400 items a second: two seconds a file.
    let job = load_job(
        &bucket,
        &manifest_key,
        &table,
        &sp,
        "  filesAtOnce: 1\n",
        "  writeThroughput: 400\n",
    );
    let id = daemon.submit_job(MIGRATIONS, &job).await;
    let saved = poll(Duration::from_secs(120), async || {
        let Some(name) = savepoint_files(&sp).pop() else {
            return Err(0);
        };
        let text = std::fs::read_to_string(sp.join(name)).unwrap_or_default();
        let files = text.matches(".json.gz").count();
        if files >= 1 { Ok(text) } else { Err(files) }
    })
    .await
    .unwrap_or_else(|n| panic!("no savepoint recorded a file ({n}): {}", daemon.logs()));
    daemon.kill9();
    let recorded = saved.matches(".json.gz").count();
    assert!(recorded < 5, "the job ended before the kill: {saved}");
    let before = count(&c, &table).await;
    assert!(before < 4000, "{before} items before the kill");

    // The restarted daemon resumes the job by itself and reads no recorded file again.
    let daemon = Daemon::start(&home, "").await;
    let ended = daemon
        .wait_job(&id, WAIT, |j| ended(j) && j["attempts"] == 2)
        .await;
    assert_eq!(ended["state"], "SUCCEEDED", "{ended:#}\n{}", daemon.logs());
    let p = &ended["progress"];
    assert!(
        p["unitsSkipped"].as_u64() >= Some(recorded as u64),
        "{ended:#}"
    );
    assert_eq!(p["unitsDone"], 5, "{ended:#}");
    assert!(
        p["rowsRead"].as_u64() <= Some(4000 - 800 * recorded as u64),
        "finished files were read again: {ended:#}"
    );
    assert_eq!(scan_all(&c, &table).await, want);
    drop_table(&c, &table).await;
}

#[tokio::test]
async fn corrupt_missing_and_mislabelled_files_are_refused_by_name() {
    let c = Server::Moto.client();
    let table = table_name("it_export_bad");
    let bucket = bucket("drover-it-export-bad").await;
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let run = async |prefix: &str, sp: &str| -> (String, String) {
        drop_table(&c, &table).await;
        let (key, _) = aws_layout_export(&bucket, prefix, 2, 50).await;
        let job = load_job(&bucket, &key, &table, &home.path().join(sp), "", "");
        (key, job)
    };
    let fail = async |job: &str| -> String {
        let id = daemon.submit_job(MIGRATIONS, job).await;
        let ended = daemon.wait_job(&id, WAIT, ended).await;
        assert_eq!(ended["state"], "FAILED", "{ended:#}");
        ended["error"].as_str().unwrap().to_string()
    };
    let data_key = |summary: &str, f: usize| {
        summary.replace(
            "manifest-summary.json",
            &format!("data/q3vbz7ewl4yrbdpxnkhm2a5sxe{f}.json.gz"),
        )
    };

    // Another file's bytes under a listed name: the digest differs.
    let (key, job) = run("corrupt", "sp1").await;
    let other = gzip("{\"Item\":{\"id\":{\"S\":\"intruder\"}}}\n");
    put_object(&bucket, &data_key(&key, 1), other).await;
    let e = fail(&job).await;
    assert!(
        e.contains(&format!("s3://{bucket}/{}", data_key(&key, 1))) && e.contains("MD5"),
        "{e}"
    );

    // A truncated file: it does not decompress.
    let (key, job) = run("truncated", "sp2").await;
    let whole = get_object(&bucket, &data_key(&key, 0)).await.unwrap();
    put_object(
        &bucket,
        &data_key(&key, 0),
        whole[..whole.len() / 2].to_vec(),
    )
    .await;
    let e = fail(&job).await;
    assert!(e.contains(&data_key(&key, 0)), "{e}");

    // A listed file that is gone.
    let (key, job) = run("missing", "sp3").await;
    delete_object(&bucket, &data_key(&key, 1)).await;
    let e = fail(&job).await;
    assert!(
        e.contains(&data_key(&key, 1)) && e.contains("does not exist"),
        "{e}"
    );

    // A line that is not an item names its line.
    let (key, job) = run("badline", "sp4").await;
    let text = "{\"Item\":{\"id\":{\"S\":\"a\"}}}\n{\"Item\":{\"id\":{\"X\":\"b\"}}}\n";
    let bytes = gzip(text);
    put_object(&bucket, &data_key(&key, 0), bytes).await;
    let e = fail(&job).await;
    assert!(e.contains("line 2") && e.contains("\"X\""), "{e}");

    // No manifest, an unknown format, an incremental export: refused before anything runs.
    let (key, job) = run("formats", "sp5").await;
    let refused = async |job: String| -> String {
        let (status, body) = daemon.post_raw(MIGRATIONS, "application/yaml", job).await;
        assert_eq!(status, 400, "{body}");
        error_message(400, &body)
    };
    let e = refused(job.replace(&key, "nowhere/manifest-summary.json")).await;
    assert!(
        e.contains("source.manifestKey: ")
            && e.contains("nowhere/manifest-summary.json")
            && e.contains("does not exist"),
        "{e}"
    );
    let summary = String::from_utf8(get_object(&bucket, &key).await.unwrap()).unwrap();
    put_object(
        &bucket,
        &key,
        summary.replace("\"DYNAMODB_JSON\"", "\"CSV\"").into_bytes(),
    )
    .await;
    let e = refused(job.clone()).await;
    assert!(e.contains("\"CSV\"") && e.contains("ION"), "{e}");
    put_object(
        &bucket,
        &key,
        summary
            .replace("FULL_EXPORT", "INCREMENTAL_EXPORT")
            .into_bytes(),
    )
    .await;
    let e = refused(job.clone()).await;
    assert!(e.contains("INCREMENTAL_EXPORT"), "{e}");
    // Nothing was written by the refused jobs.
    drop_table(&c, &table).await;
}

#[tokio::test]
async fn an_ion_export_loads_the_same_items_as_its_dynamodb_json_twin() {
    let c = Server::Moto.client();
    let table = table_name("it_export_ion");
    drop_table(&c, &table).await;
    let bucket = bucket("drover-it-export-ion").await;
    let (key, want) = aws_export_in(&bucket, "ion", 3, 40, true).await;
    let home = Home::new();
    let daemon = Daemon::start(&home, "").await;
    let job = load_job(&bucket, &key, &table, &home.path().join("sp"), "", "");
    let done = daemon.run_job(MIGRATIONS, &job, WAIT).await;
    assert_eq!(done["progress"]["rowsWritten"], 120, "{done:#}");
    let got = scan_all(&c, &table).await;
    assert_eq!(got["x7"]["n"], AttributeValue::N("7.25".into()));
    assert_eq!(got, want);
    drop_table(&c, &table).await;
}

#[tokio::test]
async fn an_export_killed_mid_way_resumes_keeping_finished_files() {
    let c = Server::Moto.client();
    let src = table_name("it_export_kill");
    fresh_table(&c, &src, None).await;
    let items: Vec<Item> = (0..600)
        .map(|i| every_type(i, vec![("id", AttributeValue::S(format!("k{i}")))]))
        .collect();
    put_all(&c, &src, items).await;
    let source = scan_all(&c, &src).await;
    let mut daemon = Daemon::fresh("").await;
    let home = daemon.home().clone();
    let sp = home.path().join("savepoints");
    let out = home.path().join("export");
    // One segment at a time, reads paced at 20 capacity units a second: several seconds a
    // segment, so the kill comes long before the last one.
    let job = test_support::dynamodb::job(
        (Server::Moto, &src),
        (Server::Moto, "unused"),
        "  scanSegments: 4\n  maxMapTasks: 1\n  readThroughput: 20\n",
        "",
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            sp.display()
        ),
    );
    let target = job.find("target:").unwrap();
    let job = format!(
        "{}target:\n  type: dynamodb-s3-export\n  path: {}\n{}",
        &job[..target],
        out.display(),
        &job[job.find("savepoints:").unwrap()..]
    );
    let id = daemon.submit_job(MIGRATIONS, &job).await;
    poll(Duration::from_secs(120), async || {
        let Some(name) = savepoint_files(&sp).pop() else {
            return Err(());
        };
        let text = std::fs::read_to_string(sp.join(name)).unwrap_or_default();
        if text.contains("skipSegments:\n- ") {
            Ok(())
        } else {
            Err(())
        }
    })
    .await
    .unwrap_or_else(|()| panic!("no segment recorded: {}", daemon.logs()));
    daemon.kill9();
    assert!(
        !out.join("manifest-summary.json").exists(),
        "the manifests were written before every segment was"
    );
    // A temporary file of a file being written when the daemon died.
    std::fs::create_dir_all(out.join("data")).unwrap();
    std::fs::write(out.join("data/.0123.json.gz.999.tmp"), b"half").unwrap();

    let daemon = Daemon::start(&home, "").await;
    let done = daemon
        .wait_job(&id, WAIT, |j| ended(j) && j["attempts"] == 2)
        .await;
    assert_eq!(done["state"], "SUCCEEDED", "{done:#}\n{}", daemon.logs());
    assert!(
        done["progress"]["unitsSkipped"].as_u64() >= Some(1),
        "{done:#}"
    );
    let manifest = std::fs::read_to_string(out.join("manifest-files.json")).unwrap();
    let mut exported = HashMap::new();
    for line in manifest.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let bytes = std::fs::read(out.join(entry["dataFileS3Key"].as_str().unwrap())).unwrap();
        assert_eq!(entry["md5Checksum"], md5_b64(&bytes), "{line}");
        exported.extend(items_of(&gunzip(&bytes)));
    }
    assert_eq!(manifest.lines().count(), 4, "{manifest}");
    assert_eq!(exported, source);
    let names: Vec<String> = std::fs::read_dir(out.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    drop_table(&c, &src).await;
}
