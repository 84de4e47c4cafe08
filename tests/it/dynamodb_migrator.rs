//! ScyllaDB Migrator's own DynamoDB job files (`tests/data/migrator-dynamodb/`): every one is
//! read by drover's parser as it is, and the scenarios that make sense on the test servers are
//! run with `drover migrate` and checked the way Migrator's tests check them.
//!
//! Scenarios not run here: `dynamodb-to-alternator-streaming*` (streaming has its own tests),
//! `dynamodb-s3-export-*`, `dynamodb-to-s3export-*`, `bench-e2e-*-s3export` (S3 exports: run
//! in `s3export.rs`), `dynamodb-to-alternator-copy-missing-rows`
//! (validation has its own tests), `bench-e2e-dynamodb-to-alternator` (a benchmark).

use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, GlobalSecondaryIndex, KeyType, LocalSecondaryIndex, Projection,
    ProjectionType, ProvisionedThroughput, ScalarAttributeType, TimeToLiveSpecification,
};
use drover::connectors::dynamodb::{DynamoSource, DynamoTarget};
use drover::connectors::s3export::{ExportSource, ExportTarget};
use drover::engine::config::JobConfig;
use test_support::drover_bin;
use test_support::dynamodb::{
    Item, Server, attr, count, drop_table, key, put_all, scan_all, table_name, wait_active,
};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrator-dynamodb")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The fixtures of DynamoDB S3 exports, each with the side that is an export.
const EXPORTS: &[(&str, &str)] = &[
    ("bench-e2e-dynamodb-to-s3export.yaml", "target"),
    ("bench-e2e-s3export-to-alternator.yaml", "source"),
    (
        "dynamodb-s3-export-to-alternator-basic-provisioned.yaml",
        "source",
    ),
    ("dynamodb-s3-export-to-alternator-basic.yaml", "source"),
    (
        "dynamodb-s3-export-to-alternator-no-savepoints.yaml",
        "source",
    ),
    ("dynamodb-to-s3export-basic.yaml", "target"),
    ("dynamodb-to-s3export-savepoints.yaml", "target"),
    ("built-migrate-from-dynamodb-s3-export.yaml", "source"),
    ("built-configuration-s3-export.yaml", "source"),
];

#[test]
fn every_migrator_job_file_is_accepted_unchanged() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    names.sort();
    // 27 copied, 12 built from commented examples and documentation (see the README).
    assert_eq!(names.len(), 39, "{names:?}");
    for name in &names {
        let job = JobConfig::parse(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let export = EXPORTS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, side)| *side);
        let read_as = (
            job.source.get::<DynamoSource>().is_some(),
            job.source.get::<ExportSource>().is_some(),
            job.target.get::<DynamoTarget>().is_some(),
            job.target.get::<ExportTarget>().is_some(),
        );
        match (read_as, export) {
            ((true, false, true, false), None)
            | ((false, true, true, false), Some("source"))
            | ((true, false, false, true), Some("target")) => {}
            _ => panic!(
                "{name}: read as {} to {}",
                job.source.kind(),
                job.target.kind()
            ),
        }
    }
}

#[test]
fn migrator_job_files_mean_what_migrator_reads_in_them() {
    let dynamo = |name: &str| {
        let job = JobConfig::parse(&fixture(name)).unwrap();
        (
            job.source.get::<DynamoSource>().unwrap().clone(),
            job.target.get::<DynamoTarget>().unwrap().clone(),
            job.skip
                .numbers(&drover::connectors::dynamodb::SEGMENTS)
                .iter()
                .copied()
                .collect::<Vec<u32>>(),
            job.renames,
        )
    };
    let (s, t, skip, _) = dynamo("dynamodb-to-alternator-part1.yaml");
    assert_eq!((s.scan_segments, skip), (Some(3), vec![1, 2]));
    assert!(!s.connection.alternator && !s.connection.remove_consumed_capacity);
    assert!(t.connection.alternator && t.connection.remove_consumed_capacity);
    assert_eq!(
        t.billing_mode,
        Some(drover::connectors::dynamodb::config::BillingMode::PayPerRequest)
    );
    assert_eq!(
        t.connection.endpoint.as_ref().unwrap().url(),
        "http://scylla:8000"
    );
    let (_, t, skip, _) = dynamo("dynamodb-to-alternator-part2-provisioned.yaml");
    assert_eq!(skip, vec![0]);
    assert_eq!(
        t.billing_mode,
        Some(drover::connectors::dynamodb::config::BillingMode::Provisioned)
    );
    let (s, _, _, renames) = dynamo("dynamodb-to-alternator-renames.yaml");
    assert_eq!(s.max_map_tasks, Some(1));
    assert_eq!(
        (renames[0].from.as_str(), renames[0].to.as_str()),
        ("foo", "quux")
    );
    let (s, _, _, _) = dynamo("dynamodb-to-alternator-issue-103.yaml");
    assert_eq!((s.scan_segments, s.max_map_tasks), (Some(10), Some(2)));
    let (s, t, _, _) = dynamo("dynamodb-to-alternator-streaming-skip-snapshot.yaml");
    assert!(s.connection.endpoint.is_none() && t.stream_changes);
    assert!(t.skip_initial_snapshot_transfer);
    let (s, _, _, _) = dynamo("ansible-config.dynamodb.yml");
    assert_eq!((s.scan_segments, s.max_map_tasks), (Some(700), Some(700)));
    let (s, t, _, _) = dynamo("built-config.yaml.example-alternator-to-alternator.yaml");
    assert_eq!(
        s.connection.alternator_settings.keys_set().len(),
        12,
        "every Alternator setting is read"
    );
    assert_eq!(
        t.connection.endpoint.as_ref().unwrap().url(),
        "https://scylla-target:8043"
    );
    let (s, _, _, _) = dynamo("built-configuration-aws-authentication.yaml");
    let role = s.connection.credentials.unwrap().assume_role.unwrap();
    assert_eq!(role.session_name.as_deref(), Some("migration"));
}

// ---- the scenarios, run with `drover migrate` ----

/// `name`'s fixture with its servers replaced by the test servers (source on `src`, target on
/// `dst`), its tables by `src_table` and `dst_table` (the first `table:` is the source's) and
/// its savepoints directory by `savepoints`: nothing else changes.
pub(crate) fn adapt(
    name: &str,
    (src, src_table): (Server, &str),
    (dst, dst_table): (Server, &str),
    savepoints: &Path,
) -> String {
    let text = fixture(name);
    let endpoint = |s: Server| {
        let (h, p) = s.endpoint();
        format!("host: {h}\n    port: {p}")
    };
    let mut out = text
        .replace("host: http://dynamodb\n    port: 8000", &endpoint(src))
        .replace("host: http://scylla\n    port: 8000", &endpoint(dst))
        .replace("host: http://scylla\n    port: 8001", &endpoint(dst))
        .replace(
            "path: /app/savepoints",
            &format!("path: {}", savepoints.display()),
        );
    let first = out.find("\n  table: ").expect("source table") + 1;
    let end = first + out[first..].find('\n').unwrap();
    out.replace_range(first..end, &format!("  table: {src_table}"));
    let second = first + out[first..].find("\n  table: ").expect("target table") + 1;
    let end = second + out[second..].find('\n').unwrap();
    out.replace_range(second..end, &format!("  table: {dst_table}"));
    assert!(
        !out.contains("http://dynamodb") && !out.contains("http://scylla"),
        "{out}"
    );
    out
}

/// The `region` of a fixture's `side` (`source` or `target`). Migrator's tests run against
/// DynamoDB Local and Alternator, which ignore it; moto keeps each region's tables apart (and
/// is started with `MOTO_ALLOW_NONEXISTENT_REGION` for names such as `dummy`), and so does
/// dynalite, so a test
/// makes its tables in the region the file names, leaving the file unchanged.
fn region_of(name: &str, side: &str) -> String {
    let doc: yaml_serde::Value = yaml_serde::from_str(&fixture(name)).expect("fixture parses");
    doc.get(side)
        .and_then(|s| s.get("region"))
        .and_then(|r| r.as_str())
        .unwrap_or("us-east-1")
        .to_string()
}

/// A client of `server` in the region the fixture `name` gives its `side`.
fn client_for(server: Server, name: &str, side: &str) -> Client {
    server.client_in(&region_of(name, side))
}

/// `drover migrate --config` of `yaml`: exit code and stderr.
pub async fn migrate(yaml: &str) -> (Option<i32>, String) {
    let path = test_support::cql::write_job(yaml);
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(drover_bin())
            .args(["migrate", "--config"])
            .arg(&path)
            .env_remove("DROVER_LISTEN")
            .env_remove("DROVER_STATE_DIR")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("drover migrate ends")
    .expect("run drover");
    let _ = std::fs::remove_file(&path);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn migrate_ok(yaml: &str) -> String {
    let (code, stderr) = migrate(yaml).await;
    assert_eq!(code, Some(0), "{stderr}\n{yaml}");
    stderr
}

/// A source table as Migrator's tests create it: hash key `id` (S), 25/25 provisioned.
async fn migrator_table(c: &Client, table: &str) {
    drop_table(c, table).await;
    c.create_table()
        .table_name(table)
        .key_schema(key("id", KeyType::Hash))
        .attribute_definitions(attr("id", ScalarAttributeType::S))
        .provisioned_throughput(throughput(25))
        .send()
        .await
        .expect("create source table");
    wait_active(c, table).await;
}

fn throughput(units: i64) -> ProvisionedThroughput {
    ProvisionedThroughput::builder()
        .read_capacity_units(units)
        .write_capacity_units(units)
        .build()
        .unwrap()
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn item(pairs: &[(&str, AttributeValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

async fn get(c: &Client, table: &str, id: &str) -> Option<Item> {
    c.get_item()
        .table_name(table)
        .key("id", s(id))
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
}

/// The target's billing mode, as described.
async fn billing(c: &Client, table: &str) -> BillingMode {
    c.describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap()
        .billing_mode_summary
        .and_then(|b| b.billing_mode)
        .unwrap_or(BillingMode::Provisioned)
}

/// Checks what Migrator's `checkSchemaWasMigrated` checks: key schema, attribute definitions,
/// and the secondary indexes' names, keys and projections.
async fn assert_schema_migrated(src: &Client, src_table: &str, dst: &Client, dst_table: &str) {
    let a = src
        .describe_table()
        .table_name(src_table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let b = dst
        .describe_table()
        .table_name(dst_table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    assert_eq!(a.key_schema, b.key_schema);
    let defs = |t: &aws_sdk_dynamodb::types::TableDescription| {
        let mut d: Vec<_> = t
            .attribute_definitions()
            .iter()
            .map(|a| (a.attribute_name().to_string(), a.attribute_type().clone()))
            .collect();
        d.sort_by(|x, y| x.0.cmp(&y.0));
        d
    };
    assert_eq!(defs(&a), defs(&b));
    let lsis = |t: &aws_sdk_dynamodb::types::TableDescription| {
        t.local_secondary_indexes()
            .iter()
            .map(|i| {
                (
                    i.index_name.clone(),
                    i.key_schema.clone(),
                    i.projection
                        .as_ref()
                        .and_then(|p| p.projection_type.clone()),
                )
            })
            .collect::<Vec<_>>()
    };
    let gsis = |t: &aws_sdk_dynamodb::types::TableDescription| {
        t.global_secondary_indexes()
            .iter()
            .map(|i| {
                (
                    i.index_name.clone(),
                    i.key_schema.clone(),
                    i.projection
                        .as_ref()
                        .and_then(|p| p.projection_type.clone()),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(lsis(&a), lsis(&b));
    assert_eq!(gsis(&a), gsis(&b));
}

/// BasicMigrationTest (both billing modes), and the tutorial's job file: one item copied, the
/// schema created from the source's, with the billing mode the file asks for.
#[tokio::test]
async fn basic_migration_files_copy_the_item_and_create_the_schema() {
    for (file, want) in [
        (
            "dynamodb-to-alternator-basic.yaml",
            BillingMode::PayPerRequest,
        ),
        (
            "dynamodb-to-alternator-basic-provisioned.yaml",
            BillingMode::Provisioned,
        ),
        // Its target asks for no billing mode: the source's (provisioned).
        ("tutorial-spark-data-config.yaml", BillingMode::Provisioned),
    ] {
        let table = table_name("mg_basic");
        // A savepoints directory per job: the files of one scenario describe the same
        // migration, and a later one would resume from an earlier one's savepoint.
        let sp = tempfile::tempdir().unwrap();
        let src = client_for(Server::Moto, file, "source");
        let dst = client_for(Server::Dynalite, file, "target");
        migrator_table(&src, &table).await;
        drop_table(&dst, &table).await;
        let data = item(&[("id", s("12345")), ("foo", s("bar"))]);
        put_all(&src, &table, vec![data.clone()]).await;
        migrate_ok(&adapt(
            file,
            (Server::Moto, &table),
            (Server::Dynalite, &table),
            sp.path(),
        ))
        .await;
        assert_schema_migrated(&src, &table, &dst, &table).await;
        assert_eq!(billing(&dst, &table).await, want, "{file}");
        assert_eq!(get(&dst, &table, "12345").await, Some(data), "{file}");
        drop_table(&src, &table).await;
        drop_table(&dst, &table).await;
    }
}

/// RenamedItemsTest: `foo` becomes `quux`, other attributes as they were.
#[tokio::test]
async fn renames_files_rename_the_attribute() {
    for file in [
        "dynamodb-to-alternator-renames.yaml",
        "dynamodb-to-alternator-renames-provisioned.yaml",
    ] {
        // A savepoints directory per job: the files of one scenario describe the same
        // migration, and a later one would resume from an earlier one's savepoint.
        let sp = tempfile::tempdir().unwrap();
        let src = client_for(Server::Moto, file, "source");
        let dst = client_for(Server::Dynalite, file, "target");
        let table = table_name("mg_renames");
        migrator_table(&src, &table).await;
        drop_table(&dst, &table).await;
        put_all(
            &src,
            &table,
            vec![
                item(&[("id", s("12345")), ("foo", s("bar"))]),
                item(&[
                    ("id", s("67890")),
                    ("foo", s("baz")),
                    ("baz", AttributeValue::Bool(false)),
                ]),
            ],
        )
        .await;
        migrate_ok(&adapt(
            file,
            (Server::Moto, &table),
            (Server::Dynalite, &table),
            sp.path(),
        ))
        .await;
        assert_eq!(
            get(&dst, &table, "12345").await,
            Some(item(&[("id", s("12345")), ("quux", s("bar"))])),
            "{file}"
        );
        assert_eq!(
            get(&dst, &table, "67890").await,
            Some(item(&[
                ("id", s("67890")),
                ("quux", s("baz")),
                ("baz", AttributeValue::Bool(false)),
            ])),
            "{file}"
        );
        drop_table(&src, &table).await;
        drop_table(&dst, &table).await;
    }
}

/// Issue103Test: items of different shapes (a map among them), 10 segments, 2 at once.
#[tokio::test]
async fn issue_103_files_copy_items_of_any_shape() {
    for file in [
        "dynamodb-to-alternator-issue-103.yaml",
        "dynamodb-to-alternator-issue-103-provisioned.yaml",
    ] {
        // A savepoints directory per job: the files of one scenario describe the same
        // migration, and a later one would resume from an earlier one's savepoint.
        let sp = tempfile::tempdir().unwrap();
        let src = client_for(Server::Moto, file, "source");
        let dst = client_for(Server::Dynalite, file, "target");
        let table = table_name("mg_issue103");
        migrator_table(&src, &table).await;
        drop_table(&dst, &table).await;
        let one = item(&[("id", s("4")), ("AlbumTitle", s("aaaaa")), ("Awards", n(4))]);
        let two = item(&[
            ("id", s("999")),
            (
                "asdfg",
                AttributeValue::M(item(&[("fffff", s("asdfasdfs"))])),
            ),
        ]);
        put_all(&src, &table, vec![one.clone(), two.clone()]).await;
        migrate_ok(&adapt(
            file,
            (Server::Moto, &table),
            (Server::Dynalite, &table),
            sp.path(),
        ))
        .await;
        assert_eq!(get(&dst, &table, "4").await, Some(one), "{file}");
        assert_eq!(get(&dst, &table, "999").await, Some(two), "{file}");
        drop_table(&src, &table).await;
        drop_table(&dst, &table).await;
    }
}

/// SkippedSegmentsTest: part 1 (`skipSegments: [1, 2]` of 3) copies about a third of 300
/// items into a target it creates; part 2 (`skipSegments: [0]`) the rest.
#[tokio::test]
async fn part1_and_part2_files_copy_complementary_segments() {
    for (part1, part2) in [
        (
            "dynamodb-to-alternator-part1.yaml",
            "dynamodb-to-alternator-part2.yaml",
        ),
        (
            "dynamodb-to-alternator-part1-provisioned.yaml",
            "dynamodb-to-alternator-part2-provisioned.yaml",
        ),
    ] {
        let src = client_for(Server::Moto, part1, "source");
        let dst = client_for(Server::Dynalite, part1, "target");
        assert_eq!(region_of(part2, "source"), region_of(part1, "source"));
        let table = table_name("mg_segments");
        migrator_table(&src, &table).await;
        drop_table(&dst, &table).await;
        let items: Vec<Item> = (0..300)
            .map(|i| {
                item(&[
                    (
                        "id",
                        s(&format!("{:08x}-{i}", i * 2_654_435_761_u64 % 0xffff_ffff)),
                    ),
                    ("foo", s(&format!("foo{i}"))),
                    ("bar", s(&format!("bar{i}"))),
                    ("baz", s(&format!("baz{i}"))),
                ])
            })
            .collect();
        put_all(&src, &table, items).await;
        // Two jobs of one migration, as Migrator runs them (it resumes only from a savepoint
        // named in the job file): each keeps its savepoints apart.
        let (sp1, sp2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let adapted =
            |f, sp: &Path| adapt(f, (Server::Moto, &table), (Server::Dynalite, &table), sp);
        migrate_ok(&adapted(part1, sp1.path())).await;
        let first = count(&dst, &table).await;
        assert!(first > 50 && first < 150, "{part1}: {first} items copied");
        migrate_ok(&adapted(part2, sp2.path())).await;
        assert_eq!(scan_all(&dst, &table).await, scan_all(&src, &table).await);
        drop_table(&src, &table).await;
        drop_table(&dst, &table).await;
    }
}

/// SkippedItemsTest: the item whose TTL (`foo`) passed a day ago is not copied, the other is;
/// the created target expires items by the same attribute.
#[tokio::test]
async fn ttl_files_skip_expired_items_and_keep_the_ttl_setting() {
    for file in [
        "dynamodb-to-alternator-ttl.yaml",
        "dynamodb-to-alternator-ttl-provisioned.yaml",
    ] {
        // Both tables on moto, in the one region both sides of the file name.
        let sp = tempfile::tempdir().unwrap();
        let c = client_for(Server::Moto, file, "source");
        assert_eq!(region_of(file, "target"), region_of(file, "source"));
        let (src_table, dst_table) = (table_name("mg_ttl_src"), table_name("mg_ttl_dst"));
        migrator_table(&c, &src_table).await;
        drop_table(&c, &dst_table).await;
        let now = chrono::Utc::now().timestamp();
        let live = item(&[("id", s("12345")), ("foo", n(now + 86_400))]);
        let expired = item(&[("id", s("67890")), ("foo", n(now - 86_400))]);
        put_all(&c, &src_table, vec![live.clone(), expired]).await;
        c.update_time_to_live()
            .table_name(&src_table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name("foo")
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect("enable TTL");
        assert!(get(&c, &src_table, "67890").await.is_some());
        migrate_ok(&adapt(
            file,
            (Server::Moto, &src_table),
            (Server::Moto, &dst_table),
            sp.path(),
        ))
        .await;
        assert_eq!(get(&c, &dst_table, "12345").await, Some(live), "{file}");
        assert_eq!(get(&c, &dst_table, "67890").await, None, "{file}");
        let ttl = c
            .describe_time_to_live()
            .table_name(&dst_table)
            .send()
            .await
            .unwrap()
            .time_to_live_description
            .unwrap();
        assert_eq!(ttl.attribute_name.as_deref(), Some("foo"), "{file}");
        drop_table(&c, &src_table).await;
        drop_table(&c, &dst_table).await;
    }
}

/// SecondaryIndexesTest: the local and global indexes of the source are created on the target.
#[tokio::test]
async fn secondary_indexes_files_create_the_indexes() {
    for (file, dst, want) in [
        (
            "dynamodb-to-alternator-secondary-indexes.yaml",
            Server::Dynalite,
            BillingMode::PayPerRequest,
        ),
        (
            "dynamodb-to-alternator-secondary-indexes-provisioned.yaml",
            Server::Moto,
            BillingMode::Provisioned,
        ),
    ] {
        // A savepoints directory per job: the files of one scenario describe the same
        // migration, and a later one would resume from an earlier one's savepoint.
        let sp = tempfile::tempdir().unwrap();
        let src = client_for(Server::Moto, file, "source");
        let dst_client = client_for(dst, file, "target");
        let (src_table, dst_table) = (table_name("mg_indexes_src"), table_name("mg_indexes_dst"));
        indexed_table(&src, &src_table).await;
        drop_table(&dst_client, &dst_table).await;
        migrate_ok(&adapt(
            file,
            (Server::Moto, &src_table),
            (dst, &dst_table),
            sp.path(),
        ))
        .await;
        assert_schema_migrated(&src, &src_table, &dst_client, &dst_table).await;
        assert_eq!(billing(&dst_client, &dst_table).await, want, "{file}");
        drop_table(&src, &src_table).await;
        drop_table(&dst_client, &dst_table).await;
    }
}

/// The table of Migrator's SecondaryIndexesTest: key (id S, z N), a local index on (id, y), a
/// global one on (x, z) with 1/1 units, both projecting everything; 25/25 provisioned.
pub async fn indexed_table(c: &Client, table: &str) {
    drop_table(c, table).await;
    let all = || {
        Projection::builder()
            .projection_type(ProjectionType::All)
            .build()
    };
    c.create_table()
        .table_name(table)
        .key_schema(key("id", KeyType::Hash))
        .key_schema(key("z", KeyType::Range))
        .attribute_definitions(attr("id", ScalarAttributeType::S))
        .attribute_definitions(attr("x", ScalarAttributeType::N))
        .attribute_definitions(attr("y", ScalarAttributeType::N))
        .attribute_definitions(attr("z", ScalarAttributeType::N))
        .provisioned_throughput(throughput(25))
        .local_secondary_indexes(
            LocalSecondaryIndex::builder()
                .index_name("local")
                .key_schema(key("id", KeyType::Hash))
                .key_schema(key("y", KeyType::Range))
                .projection(all())
                .build()
                .unwrap(),
        )
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("global")
                .provisioned_throughput(throughput(1))
                .key_schema(key("x", KeyType::Hash))
                .key_schema(key("z", KeyType::Range))
                .projection(all())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("create indexed table");
    wait_active(c, table).await;
}
