//! Stream replication (`streamChanges: true`) on moto, the test server with DynamoDB Streams:
//! changes made during and after the snapshot all reach the target, in order per key; a
//! `kill -9` during the replication loses nothing and replays nothing the savepoint had
//! applied; `skipInitialSnapshotTransfer` applies changes only; a stream without new images is
//! refused before anything is written.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, StreamSpecification, StreamViewType};
use serde_json::Value;
use test_support::dynamodb::{
    Item, Server, count, drop_table, fresh_table, job, put_all, scan_all, table_name,
};
use test_support::{Daemon, error_message, poll};

use crate::resume::savepoint_files;

const MIGRATIONS: &str = "/api/v1/migrations";

fn item(id: &str, v: i64) -> Item {
    Item::from([
        ("id".to_string(), AttributeValue::S(id.to_string())),
        ("v".to_string(), AttributeValue::N(v.to_string())),
        (
            "payload".to_string(),
            AttributeValue::M(HashMap::from([(
                "n".to_string(),
                AttributeValue::N("12345678901234567890123456789012345678".into()),
            )])),
        ),
    ])
}

async fn put(c: &Client, table: &str, id: &str, v: i64) {
    c.put_item()
        .table_name(table)
        .set_item(Some(item(id, v)))
        .send()
        .await
        .expect("put");
}

async fn update(c: &Client, table: &str, id: &str, v: i64) {
    c.update_item()
        .table_name(table)
        .key("id", AttributeValue::S(id.into()))
        .update_expression("SET v = :v")
        .expression_attribute_values(":v", AttributeValue::N(v.to_string()))
        .send()
        .await
        .expect("update");
}

async fn delete(c: &Client, table: &str, id: &str) {
    c.delete_item()
        .table_name(table)
        .key("id", AttributeValue::S(id.into()))
        .send()
        .await
        .expect("delete");
}

fn streaming_job(src: &str, dst: &str, sp_dir: &std::path::Path, extra_target: &str) -> String {
    job(
        (Server::Moto, src),
        (Server::Moto, dst),
        "  scanSegments: 4\n",
        extra_target,
        &format!(
            "savepoints:\n  path: {}\n  intervalSeconds: 1\n",
            sp_dir.display()
        ),
    )
    .replace("streamChanges: false", "streamChanges: true")
}

/// Waits until the target holds exactly the source's items.
async fn converge(daemon: &Daemon, id: &str, c: &Client, src: &str, dst: &str) {
    let result = poll(Duration::from_secs(90), async || {
        let (a, b) = (scan_all(c, src).await, scan_all(c, dst).await);
        if a == b {
            Ok(())
        } else {
            Err((a.len(), b.len()))
        }
    })
    .await;
    if let Err((a, b)) = result {
        let (_, job) = daemon.get(&format!("{MIGRATIONS}/{id}")).await;
        panic!(
            "the target never matched the source ({a} vs {b} items): {job:#}\n{}",
            daemon.logs()
        );
    }
}

/// The shard and sequence number of the last record of `table`'s stream on moto.
async fn last_stream_record(table: &str) -> (String, String) {
    let c = Server::Moto.client();
    let arn = c
        .describe_table()
        .table_name(table)
        .send()
        .await
        .expect("describe table")
        .table
        .and_then(|t| t.latest_stream_arn)
        .expect("a stream");
    use aws_sdk_dynamodbstreams::config::{BehaviorVersion, Credentials, Region};
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(Server::Moto.url())
            .credentials_provider(Credentials::new("dummy", "dummy", None, None, "tests"))
            .build(),
    );
    let shards = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .expect("describe stream")
        .stream_description
        .and_then(|d| d.shards)
        .unwrap_or_default();
    let shard = shards
        .last()
        .and_then(|s| s.shard_id.clone())
        .expect("a shard");
    let mut iterator = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(&shard)
        .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
        .send()
        .await
        .expect("shard iterator")
        .shard_iterator;
    let mut last = None;
    while let Some(it) = iterator {
        let page = streams
            .get_records()
            .shard_iterator(it)
            .send()
            .await
            .expect("records");
        let records = page.records.unwrap_or_default();
        if records.is_empty() {
            break;
        }
        last = records
            .last()
            .and_then(|r| r.dynamodb.as_ref())
            .and_then(|d| d.sequence_number.clone());
        iterator = page.next_shard_iterator;
    }
    (shard, last.expect("records in the stream"))
}

fn newest_savepoint(dir: &std::path::Path) -> Value {
    let name = savepoint_files(dir).pop().expect("a savepoint");
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    serde_json::to_value(yaml_serde::from_str::<yaml_serde::Value>(&text).unwrap()).unwrap()
}

#[tokio::test]
async fn changes_during_and_after_the_snapshot_arrive_in_order_and_survive_kill_9() {
    let c = Server::Moto.client();
    let (src, dst) = (table_name("it_stream_src"), table_name("it_stream_dst"));
    fresh_table(&c, &src, None).await;
    drop_table(&c, &dst).await;
    put_all(
        &c,
        &src,
        (0..200).map(|i| item(&format!("i{i}"), i)).collect(),
    )
    .await;
    let mut daemon = Daemon::fresh("").await;
    let home = daemon.home().clone();
    let sp_dir = home.path().join("savepoints");
    let id = daemon
        .submit_job(MIGRATIONS, &streaming_job(&src, &dst, &sp_dir, ""))
        .await;

    // While the snapshot is read: updates, deletes and new items.
    for i in 0..30 {
        update(&c, &src, &format!("i{i}"), 1000 + i).await;
    }
    for i in 30..40 {
        delete(&c, &src, &format!("i{i}")).await;
    }
    for i in 200..220 {
        put(&c, &src, &format!("i{i}"), i).await;
    }
    let streaming = daemon
        .wait_job(&id, Duration::from_secs(60), |j| {
            j["phase"] == "streaming" || j["state"] != "RUNNING"
        })
        .await;
    assert_eq!(
        streaming["state"],
        "RUNNING",
        "{streaming}\n{}",
        daemon.logs()
    );
    assert_eq!(streaming["progress"]["unitsDone"], 4, "{streaming}");

    // After it: one key changed many times (only the last value may remain), a key put and
    // deleted, more deletes and new items.
    for k in 0..25 {
        update(&c, &src, "i50", k).await;
    }
    put(&c, &src, "short-lived", 1).await;
    delete(&c, &src, "short-lived").await;
    for i in 60..70 {
        delete(&c, &src, &format!("i{i}")).await;
    }
    for i in 300..310 {
        put(&c, &src, &format!("i{i}"), i).await;
    }
    converge(&daemon, &id, &c, &src, &dst).await;
    assert_eq!(
        scan_all(&c, &dst).await["i50"]["v"],
        AttributeValue::N("24".into())
    );
    // Every stream record is read once: 30 updates + 10 deletes + 20 puts + 25 updates + 2 +
    // 10 deletes + 10 puts (status is published every second: wait for it).
    let job = daemon
        .wait_job(&id, Duration::from_secs(30), |j| {
            j["progress"]["streamRecordsRead"].as_u64() >= Some(107)
        })
        .await;
    let p = &job["progress"];
    assert_eq!(p["streamRecordsRead"], 107, "{job:#}");
    assert!(p["streamItemsDeleted"].as_u64().unwrap() >= 20, "{job:#}");
    assert!(p.get("streamLagSeconds").is_some(), "{job:#}");

    // Let a savepoint record the position of the stream's last record, then die without
    // warning.
    let (shard, last) = last_stream_record(&src).await;
    poll(Duration::from_secs(60), async || {
        let newest = savepoint_files(&sp_dir).pop().unwrap_or_default();
        let saved = newest_savepoint(&sp_dir);
        if saved["streamPositions"]["shards"][&shard] == last.as_str() {
            Ok(())
        } else {
            Err((newest, saved["streamPositions"].clone()))
        }
    })
    .await
    .unwrap_or_else(|(name, positions)| {
        panic!("no savepoint records {shard} at {last}; newest: {name}: {positions}")
    });
    daemon.kill9();
    let saved = newest_savepoint(&sp_dir);
    let positions = &saved["streamPositions"];
    assert!(
        positions["stream"].as_str().unwrap().contains(&src),
        "{saved:#}"
    );
    assert_eq!(
        positions["shards"].as_object().unwrap().len(),
        1,
        "{saved:#}"
    );
    assert_eq!(saved["skipSegments"], serde_json::json!([0, 1, 2, 3]));

    // Changes while no drover runs.
    for i in 100..110 {
        update(&c, &src, &format!("i{i}"), 5000 + i).await;
    }
    delete(&c, &src, "i110").await;
    put(&c, &src, "while-down", 7).await;

    // The restarted daemon resumes the job by itself: no segment read again, and the stream
    // continued after the savepoint's position, not from its start.
    let daemon = Daemon::start(&home, "").await;
    let resumed = daemon
        .wait_job(&id, Duration::from_secs(60), |j| {
            j["phase"] == "streaming" && j["attempts"] == 2
        })
        .await;
    assert_eq!(resumed["progress"]["unitsSkipped"], 4, "{resumed:#}");
    assert_eq!(resumed["progress"]["rowsRead"], 0, "{resumed:#}");
    converge(&daemon, &id, &c, &src, &dst).await;
    daemon
        .wait_job(&id, Duration::from_secs(30), |j| {
            j["progress"]["streamRecordsRead"].as_u64() >= Some(12)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, job) = daemon.get(&format!("{MIGRATIONS}/{id}")).await;
    assert_eq!(
        job["progress"]["streamRecordsRead"], 12,
        "only the records after the savepoint are read again: {job:#}"
    );

    // Cut-over: cancel ends the job after a final savepoint with the positions.
    let (status, _) = daemon
        .post_json(&format!("{MIGRATIONS}/{id}/cancel"), &Value::Null)
        .await;
    assert_eq!(status, 202);
    let ended = daemon
        .wait_job(&id, Duration::from_secs(30), test_support::ended)
        .await;
    assert_eq!(ended["state"], "CANCELLED", "{ended:#}");
    let fin = newest_savepoint(&sp_dir);
    assert_ne!(
        fin["streamPositions"]["shards"], positions["shards"],
        "{fin:#}"
    );
    drop_table(&c, &src).await;
    drop_table(&c, &dst).await;
}

#[tokio::test]
async fn skip_initial_snapshot_transfer_applies_changes_only() {
    let c = Server::Moto.client();
    let (src, dst) = (
        table_name("it_stream_skip_src"),
        table_name("it_stream_skip_dst"),
    );
    fresh_table(&c, &src, None).await;
    drop_table(&c, &dst).await;
    put_all(
        &c,
        &src,
        (0..50).map(|i| item(&format!("old{i}"), i)).collect(),
    )
    .await;
    let daemon = Daemon::fresh("").await;
    let sp_dir = daemon.home().path().join("savepoints");
    let id = daemon
        .submit_job(
            MIGRATIONS,
            &streaming_job(&src, &dst, &sp_dir, "  skipInitialSnapshotTransfer: true\n"),
        )
        .await;
    daemon
        .wait_job(&id, Duration::from_secs(60), |j| j["phase"] == "streaming")
        .await;
    for i in 0..5 {
        put(&c, &src, &format!("new{i}"), i).await;
    }
    update(&c, &src, "old3", 333).await;
    let want: Vec<String> = vec!["new0", "new1", "new2", "new3", "new4", "old3"]
        .into_iter()
        .map(String::from)
        .collect();
    let got = poll(Duration::from_secs(60), async || {
        let mut keys: Vec<String> = scan_all(&c, &dst).await.into_keys().collect();
        keys.sort();
        if keys == want { Ok(()) } else { Err(keys) }
    })
    .await;
    assert!(
        got.is_ok(),
        "only changed items arrive: {got:?}\n{}",
        daemon.logs()
    );
    let (_, job) = daemon.get(&format!("{MIGRATIONS}/{id}")).await;
    assert_eq!(job["progress"]["rowsRead"], 0, "{job:#}");
    assert_eq!(
        scan_all(&c, &dst).await["old3"]["v"],
        AttributeValue::N("333".into())
    );
    daemon
        .post_json(&format!("{MIGRATIONS}/{id}/cancel"), &Value::Null)
        .await;
    drop_table(&c, &src).await;
    drop_table(&c, &dst).await;
}

#[tokio::test]
async fn a_stream_without_new_images_is_refused_before_anything_is_written() {
    let c = Server::Moto.client();
    let (src, dst) = (
        table_name("it_stream_keys_src"),
        table_name("it_stream_keys_dst"),
    );
    fresh_table(&c, &src, None).await;
    drop_table(&c, &dst).await;
    c.update_table()
        .table_name(&src)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::KeysOnly)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("enable a KEYS_ONLY stream");
    put(&c, &src, "a", 1).await;
    let daemon = Daemon::fresh("").await;
    let sp_dir = daemon.home().path().join("savepoints");
    let (status, body) = daemon
        .post_raw(
            MIGRATIONS,
            "application/yaml",
            streaming_job(&src, &dst, &sp_dir, "").into_bytes(),
        )
        .await;
    let message = error_message(status, &body);
    assert_eq!(status, 400, "{message}");
    assert!(
        message.contains("target.streamChanges") && message.contains("KEYS_ONLY"),
        "{message}"
    );
    // The target may have been created (it is checked first) but holds nothing.
    if c.describe_table().table_name(&dst).send().await.is_ok() {
        assert_eq!(count(&c, &dst).await, 0);
    }
    drop_table(&c, &src).await;
    drop_table(&c, &dst).await;
}

/// ScyllaDB Migrator's two streaming job files, unchanged but for addresses, tables and the
/// savepoints directory (their source names no endpoint: Migrator runs them against AWS; here
/// the source is moto): with the snapshot, an item put before the job and one put while it
/// streams both arrive; without it, only the second.
#[tokio::test]
async fn migrator_streaming_files_replicate_with_and_without_the_snapshot() {
    let (src_c, dst_c) = (Server::Moto.client(), Server::Dynalite.client());
    for (file, snapshot) in [
        ("dynamodb-to-alternator-streaming.yaml", true),
        ("dynamodb-to-alternator-streaming-skip-snapshot.yaml", false),
    ] {
        let table = table_name("mg_streamed");
        fresh_table(&src_c, &table, None).await;
        drop_table(&dst_c, &table).await;
        put(&src_c, &table, "before", 1).await;
        let daemon = Daemon::fresh("").await;
        let sp = daemon.home().path().join("savepoints");
        let (h, p) = Server::Moto.endpoint();
        let yaml = crate::dynamodb_migrator::adapt(
            file,
            (Server::Moto, &table),
            (Server::Dynalite, &table),
            &sp,
        )
        .replacen(
            "  region: us-east-1\n",
            &format!(
                "  region: us-east-1\n  endpoint:\n    host: {h}\n    port: {p}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n"
            ),
            1,
        );
        let id = daemon.submit_job(MIGRATIONS, &yaml).await;
        daemon
            .wait_job(&id, Duration::from_secs(60), |j| j["phase"] == "streaming")
            .await;
        put(&src_c, &table, "during", 2).await;
        let want: Vec<&str> = if snapshot {
            vec!["before", "during"]
        } else {
            vec!["during"]
        };
        let got = poll(Duration::from_secs(60), async || {
            let mut keys: Vec<String> = scan_all(&dst_c, &table).await.into_keys().collect();
            keys.sort();
            if keys == want { Ok(()) } else { Err(keys) }
        })
        .await;
        assert!(got.is_ok(), "{file}: {got:?}\n{}", daemon.logs());
        daemon
            .post_json(&format!("{MIGRATIONS}/{id}/cancel"), &Value::Null)
            .await;
        daemon
            .wait_job(&id, Duration::from_secs(30), |j| j["state"] == "CANCELLED")
            .await;
        drop_table(&src_c, &table).await;
        drop_table(&dst_c, &table).await;
    }
}
