//! DynamoDB targets: created from the source's description (indexes, billing, TTL), refused
//! when their key differs, written no faster than `writeThroughput`; and bad job files refused
//! through the API and the CLI before anything is written.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, BillingMode, TimeToLiveSpecification};
use serde_json::Value;
use test_support::dynamodb::{
    Item, Server, count, drop_table, fresh_table, job, put_all, table_name,
};
use test_support::{Daemon, error_message};

use crate::dynamodb_migrator::{indexed_table, migrate};

const MIGRATIONS: &str = "/api/v1/migrations";

async fn exists(c: &Client, table: &str) -> bool {
    c.describe_table().table_name(table).send().await.is_ok()
}

/// Items of the indexed table (key id, z; indexes on y and x, z): `live` with a TTL a day
/// ahead or none, `expired` with one a day ago.
fn indexed_items(live: usize, expired: usize) -> Vec<Item> {
    let now = chrono::Utc::now().timestamp();
    (0..live + expired)
        .map(|i| {
            let mut it: Item = [
                ("id", AttributeValue::S(format!("k{i}"))),
                ("z", AttributeValue::N(i.to_string())),
                ("y", AttributeValue::N((i * 7).to_string())),
                ("x", AttributeValue::N((i % 5).to_string())),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let exp = if i < expired {
                Some(now - 86_400)
            } else if i % 2 == 0 {
                Some(now + 86_400)
            } else {
                None
            };
            if let Some(e) = exp {
                it.insert("exp".into(), AttributeValue::N(e.to_string()));
            }
            it
        })
        .collect()
}

/// A missing target is created from the source's description on moto (provisioned as the
/// source, TTL on the same attribute) and on dynalite (on demand as `billingMode` asks; dynalite
/// has no TTL), with its local and global indexes; items whose TTL passed are not copied and
/// are counted as `itemsExpired`.
#[tokio::test]
async fn a_missing_target_is_created_with_indexes_billing_and_ttl_and_expired_items_are_counted() {
    let daemon = Daemon::fresh("").await;
    let src = Server::Moto.client();
    let src_table = table_name("tb_create_src");
    indexed_table(&src, &src_table).await;
    src.update_time_to_live()
        .table_name(&src_table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("exp")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("enable TTL");
    let (live, expired) = (30, 10);
    put_all(&src, &src_table, indexed_items(live, expired)).await;

    for (dst, billing_mode) in [
        (Server::Moto, None),
        (Server::Dynalite, Some("PAY_PER_REQUEST")),
    ] {
        let c = dst.client();
        let dst_table = table_name(&format!("tb_create_dst_{}", dst.name()));
        drop_table(&c, &dst_table).await;
        let extra_target = billing_mode
            .map(|b| format!("  billingMode: {b}\n"))
            .unwrap_or_default();
        let yaml = job(
            (Server::Moto, &src_table),
            (dst, &dst_table),
            "  scanSegments: 4\n",
            &extra_target,
            "",
        );
        let done = daemon
            .run_job(MIGRATIONS, &yaml, Duration::from_secs(120))
            .await;
        assert_eq!(done["progress"]["itemsExpired"], expired, "{done}");
        assert_eq!(done["progress"]["rowsWritten"], live, "{done}");
        assert_eq!(count(&c, &dst_table).await, live);

        let t = c
            .describe_table()
            .table_name(&dst_table)
            .send()
            .await
            .unwrap()
            .table
            .unwrap();
        let lsi = &t.local_secondary_indexes()[0];
        assert_eq!(lsi.index_name(), Some("local"));
        assert_eq!(lsi.key_schema()[1].attribute_name(), "y");
        let gsi = &t.global_secondary_indexes()[0];
        assert_eq!(gsi.index_name(), Some("global"));
        assert_eq!(gsi.key_schema()[0].attribute_name(), "x");
        assert_eq!(
            gsi.projection()
                .and_then(|p| p.projection_type())
                .map(|p| p.as_str()),
            Some("ALL")
        );
        let mode = t
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .cloned()
            .unwrap_or(BillingMode::Provisioned);
        match billing_mode {
            None => {
                assert_eq!(mode, BillingMode::Provisioned);
                let p = t.provisioned_throughput().unwrap();
                assert_eq!(p.read_capacity_units(), Some(25));
                assert_eq!(
                    gsi.provisioned_throughput()
                        .and_then(|p| p.write_capacity_units()),
                    Some(1)
                );
                let ttl = c
                    .describe_time_to_live()
                    .table_name(&dst_table)
                    .send()
                    .await
                    .unwrap()
                    .time_to_live_description
                    .unwrap();
                assert_eq!(ttl.attribute_name(), Some("exp"));
            }
            Some(_) => assert_eq!(mode, BillingMode::PayPerRequest),
        }
        drop_table(&c, &dst_table).await;
    }
    drop_table(&src, &src_table).await;
}

/// A target whose key differs from the source's is refused before any item is written: 400
/// from the API, exit 2 from the CLI, naming the table and both keys.
#[tokio::test]
async fn a_target_with_another_key_is_refused_before_anything_is_written() {
    let c = Server::Moto.client();
    let (src_table, dst_table) = (table_name("tb_key_src"), table_name("tb_key_dst"));
    fresh_table(&c, &src_table, None).await;
    fresh_table(&c, &dst_table, Some("sk")).await;
    let items: Vec<Item> = (0..20)
        .map(|i| {
            [("id".to_string(), AttributeValue::S(format!("k{i}")))]
                .into_iter()
                .collect()
        })
        .collect();
    put_all(&c, &src_table, items).await;
    let yaml = job(
        (Server::Moto, &src_table),
        (Server::Moto, &dst_table),
        "",
        "",
        "",
    );

    let daemon = Daemon::fresh("").await;
    let (status, body) = daemon
        .post_raw(MIGRATIONS, "application/yaml", yaml.clone())
        .await;
    let message = error_message(status, &body);
    assert_eq!(status, 400, "{body}");
    assert!(
        message.contains(&dst_table) && message.contains("sk (RANGE N)") && message.contains("key"),
        "{message}"
    );
    let (code, stderr) = migrate(&yaml).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&dst_table), "{stderr}");
    assert_eq!(count(&c, &dst_table).await, 0, "nothing written");
    drop_table(&c, &src_table).await;
    drop_table(&c, &dst_table).await;
}

/// `target.writeThroughput: 50` with items of about 1 KB: 200 items take at least 4 s less
/// the limiter's first second of burst.
#[tokio::test]
async fn a_low_write_throughput_caps_the_write_rate() {
    let (src, dst) = (Server::Moto.client(), Server::Dynalite.client());
    let (src_table, dst_table) = (table_name("tb_rate_src"), table_name("tb_rate_dst"));
    fresh_table(&src, &src_table, None).await;
    drop_table(&dst, &dst_table).await;
    let (items, rate) = (200_usize, 50_usize);
    let payload = "x".repeat(1000);
    put_all(
        &src,
        &src_table,
        (0..items)
            .map(|i| {
                [
                    ("id".to_string(), AttributeValue::S(format!("k{i:04}"))),
                    ("v".to_string(), AttributeValue::S(payload.clone())),
                ]
                .into_iter()
                .collect()
            })
            .collect(),
    )
    .await;
    let yaml = job(
        (Server::Moto, &src_table),
        (Server::Dynalite, &dst_table),
        "",
        &format!("  writeThroughput: {rate}\n"),
        "",
    );
    let started = Instant::now();
    let (code, stderr) = migrate(&yaml).await;
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(count(&dst, &dst_table).await, items);
    let floor = Duration::from_secs_f64(items as f64 / rate as f64 - 1.0);
    assert!(took >= floor, "{items} items at {rate}/s took {took:?}");
    eprintln!("{items} items at writeThroughput {rate}: {took:?}");
    drop_table(&src, &src_table).await;
    drop_table(&dst, &dst_table).await;
}

/// One bad job file: what the API answers and the CLI exits with, and the words the message
/// must hold.
struct Bad {
    what: &'static str,
    yaml: String,
    status: u16,
    exit: i32,
    says: Vec<String>,
}

/// Bad job files are refused through the API and the CLI with a message naming the key, table
/// or endpoint: 400 (exit 2) for what the job file must fix, 502 (exit 1) for a server that
/// cannot be reached; the target is never created.
///
/// Bad credentials are not among them: neither moto nor dynalite checks credentials, so no test
/// server can refuse them (a refusal is classified as the server's, 502, in `retry.rs`).
#[tokio::test]
async fn bad_job_files_are_refused_naming_the_key_table_or_endpoint() {
    let c = Server::Moto.client();
    let (src_table, dst_table) = (table_name("tb_bad_src"), table_name("tb_bad_dst"));
    fresh_table(&c, &src_table, None).await;
    drop_table(&c, &dst_table).await;
    let good = job(
        (Server::Moto, &src_table),
        (Server::Moto, &dst_table),
        "",
        "",
        "",
    );
    let missing = table_name("tb_bad_missing");
    let source_part = &good[..good.find("target:").unwrap()];
    let cases = vec![
        Bad {
            what: "dynamodb to cassandra",
            yaml: format!(
                "{source_part}target:\n  type: scylla\n  host: 127.0.0.1\n  port: 9042\n  keyspace: ks\n  table: t\n  consistencyLevel: LOCAL_QUORUM\n  connections: 1\n  stripTrailingZerosForDecimals: false\n"
            ),
            status: 400,
            exit: 2,
            says: vec!["target.type".into(), "dynamodb".into()],
        },
        Bad {
            what: "missing source table",
            yaml: good.replacen(
                &format!("table: {src_table}"),
                &format!("table: {missing}"),
                1,
            ),
            status: 400,
            exit: 2,
            says: vec![missing.clone(), "does not exist".into()],
        },
        Bad {
            what: "nothing listening at the endpoint",
            yaml: good.replacen(
                &format!("port: {}", Server::Moto.endpoint().1),
                "port: 1",
                1,
            ),
            status: 502,
            exit: 1,
            says: vec!["127.0.0.1:1".into(), src_table.clone()],
        },
        Bad {
            what: "unknown key",
            yaml: good.replacen(
                "  region: us-east-1\n",
                "  region: us-east-1\n  scanSegmnts: 4\n",
                1,
            ),
            status: 400,
            exit: 2,
            says: vec!["source.scanSegmnts".into(), "(line 5)".into()],
        },
        Bad {
            what: "throughputReadPercent out of range",
            yaml: good.replacen(
                "  region: us-east-1\n",
                "  region: us-east-1\n  throughputReadPercent: 2.0\n",
                1,
            ),
            status: 400,
            exit: 2,
            says: vec!["source.throughputReadPercent".into(), "0.1 and 1.5".into()],
        },
        Bad {
            what: "skipSegments out of range",
            yaml: format!("{good}skipSegments: [7]\n").replacen(
                "  region: us-east-1\n",
                "  region: us-east-1\n  scanSegments: 4\n",
                1,
            ),
            status: 400,
            exit: 2,
            says: vec!["skipSegments".into(), "segment 7".into()],
        },
        Bad {
            what: "alternator without endpoint",
            yaml: format!(
                "{source_part}target:\n  type: alternator\n  table: {dst_table}\n  streamChanges: false\n"
            ),
            status: 400,
            exit: 2,
            says: vec![
                "target".into(),
                "endpoint is required with type alternator".into(),
            ],
        },
        Bad {
            what: "empty table",
            yaml: good.replacen(&format!("table: {dst_table}"), "table: \" \"", 1),
            status: 400,
            exit: 2,
            says: vec!["target.table".into(), "must not be empty".into()],
        },
    ];
    let daemon = Daemon::fresh("").await;
    for case in cases {
        let (status, body): (u16, Value) = daemon
            .post_raw(MIGRATIONS, "application/yaml", case.yaml.clone())
            .await;
        let message = error_message(status, &body);
        assert_eq!(status, case.status, "{}: {body}\n{}", case.what, case.yaml);
        for word in &case.says {
            assert!(
                message.contains(word.as_str()),
                "{}: {message:?} lacks {word:?}",
                case.what
            );
        }
        let (code, stderr) = migrate(&case.yaml).await;
        assert_eq!(code, Some(case.exit), "{}: {stderr}", case.what);
        for word in &case.says {
            assert!(
                stderr.contains(word.as_str()),
                "{}: {stderr:?} lacks {word:?}",
                case.what
            );
        }
        assert!(
            !exists(&c, &dst_table).await,
            "{}: target created",
            case.what
        );
        assert!(!exists(&c, &missing).await, "{}", case.what);
    }
    drop_table(&c, &src_table).await;
}
