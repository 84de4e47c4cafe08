//! Hostile job files: system keyspaces, out-of-range settings, and refusals that must leave
//! no trace. Each is the regression test of a case measured against an earlier drover: a copy
//! of `system.local` rewrote a target node's identity, and a refused job had already created
//! (and swept) its savepoints directory.

use test_support::{App, cql, error_message};

const CQL_EXAMPLE: &str = include_str!("../../config/job-cql.yaml");
const DYNAMO_EXAMPLE: &str = include_str!("../../config/job-dynamodb.yaml");

/// The CQL example with `source` and `target` pointed at `source_ks.source_table` and
/// `target_ks.target_table` of the test clusters, and no savepoints or credentials (the test
/// clusters have authentication off).
fn cql_job(source: (&str, &str), target: (&str, &str), extra_source: &str) -> String {
    let (sh, sp) = cql::src_addr().rsplit_once(':').map(split).unwrap();
    let (dh, dp) = cql::dst_addr().rsplit_once(':').map(split).unwrap();
    format!(
        "source:\n  type: cassandra\n  host: {sh}\n  port: {sp}\n  keyspace: {}\n  table: {}\n{extra_source}target:\n  type: cassandra\n  host: {dh}\n  port: {dp}\n  keyspace: {}\n  table: {}\n",
        source.0, source.1, target.0, target.1
    )
}

fn split((h, p): (&str, &str)) -> (String, String) {
    (h.to_string(), p.to_string())
}

async fn refused(app: &App, resource: &str, job: &str) -> String {
    let (status, body) = app
        .post_raw(resource, "application/yaml", job.to_string())
        .await;
    assert_eq!(status, 400, "{job}\n{body}");
    error_message(status, &body)
}

#[tokio::test]
async fn system_local_is_never_copied_between_clusters() {
    let app = App::new("").await;
    for resource in ["/api/v1/migrations", "/api/v1/validations"] {
        // The case that rewrote a node: system.local onto system.local. The source flag does
        // not open the target.
        for extra in ["", "  allowSystemKeyspace: true\n"] {
            let job = cql_job(("system", "local"), ("system", "local"), extra);
            let message = refused(&app, resource, &job).await;
            let expected = if extra.is_empty() {
                "source.keyspace: system is a system keyspace"
            } else {
                "target.keyspace: system is a system keyspace"
            };
            assert!(message.contains(expected), "{message}");
        }
        // Every spelling of a system keyspace as a target, whatever the source.
        for target in [
            "system",
            "SYSTEM",
            "System_Schema",
            "\"system\"",
            "\"System_Auth\"",
            "system_distributed",
            "system_traces",
            "system_views",
            "system_virtual_schema",
            "system_distributed_everywhere",
            "system_replicated_keys",
            "system_auth_v2",
        ] {
            let job = cql_job(("shop", "orders"), (target, "local"), "");
            let message = refused(&app, resource, &job).await;
            assert!(
                message.contains("target.keyspace:")
                    && message.contains("is a system keyspace")
                    && message.contains("never writes"),
                "{target}: {message}"
            );
        }
        // As a source, refused unless the job says so, and the message names the flag.
        for source in ["system_schema", "\"SYSTEM_AUTH\"", "System_Traces"] {
            let job = cql_job((source, "t"), ("shop", "orders"), "");
            let message = refused(&app, resource, &job).await;
            assert!(
                message.contains("source.keyspace:")
                    && message.contains("source.allowSystemKeyspace: true"),
                "{source}: {message}"
            );
        }
    }
}

#[tokio::test]
async fn the_source_flag_lets_a_validation_read_a_system_table() {
    // With the flag the source check passes, and what stops this job is the target the test
    // clusters do not have: nothing was refused for the system keyspace.
    let app = App::new("").await;
    let job = cql_job(
        ("system", "local"),
        ("drover_no_such_keyspace", "local"),
        "  allowSystemKeyspace: true\n",
    );
    let (status, body) = app
        .post_raw("/api/v1/validations", "application/yaml", job)
        .await;
    let message = error_message(status, &body);
    assert_eq!(status, 400, "{message}");
    assert!(!message.contains("system keyspace"), "{message}");
    assert!(message.contains("drover_no_such_keyspace"), "{message}");
}

/// `(edit of the example, expected message)`: each edit is a `(from, to)` replacement.
fn cql_bounds() -> Vec<((&'static str, String), &'static str)> {
    let r = |from: &'static str, to: &str| (from, to.to_string());
    vec![
        (
            r(
                "  maxInFlight: 256\n",
                "  maxInFlight: 256\n  rowsPerSecond: 0\n",
            ),
            "target.rowsPerSecond: must be 1 to 10000000, not 0",
        ),
        (
            r(
                "  maxInFlight: 256\n",
                "  maxInFlight: 256\n  rowsPerSecond: 99999999999\n",
            ),
            "target.rowsPerSecond: must be 1 to 10000000, not 99999999999",
        ),
        (
            r(
                "  maxInFlight: 256\n",
                "  maxInFlight: 256\n  bytesPerSecond: 18446744073709551615\n",
            ),
            "target.bytesPerSecond: must be 1 to 4294967295, not 18446744073709551615",
        ),
        (
            r(
                "  failuresToFetch: 100 ",
                "  failuresToFetch: 1000000000000 ",
            ),
            "validation.failuresToFetch: must be 0 to 100000, not 1000000000000",
        ),
        (
            r(
                "  ttlToleranceMillis: 60000 ",
                "  ttlToleranceMillis: 18446744073709551615 ",
            ),
            "validation.ttlToleranceMillis: must be 0 to 3153600000000, not 18446744073709551615",
        ),
        (
            r(
                "  writetimeToleranceMillis: 0 ",
                "  writetimeToleranceMillis: 9999999999999999 ",
            ),
            "validation.writetimeToleranceMillis: must be 0 to 3153600000000",
        ),
        (
            r(
                "  timestampMsTolerance: 0 ",
                "  timestampMsTolerance: 9999999999999999 ",
            ),
            "validation.timestampMsTolerance: must be 0 to 3153600000000",
        ),
        (
            r(
                "  intervalSeconds: 300 ",
                "  intervalSeconds: 18446744073709551615 ",
            ),
            "savepoints.intervalSeconds: must be 1 to 604800, not 18446744073709551615",
        ),
        (
            r("  intervalSeconds: 300 ", "  intervalSeconds: 0 "),
            "savepoints.intervalSeconds: must be 1 to 604800, not 0",
        ),
        (
            r("  keep: 10 ", "  keep: 100000000000 "),
            "savepoints.keep: must be 1 to 10000, not 100000000000",
        ),
        (
            r("  splitCount: 256", "  splitCount: 0"),
            "source.splitCount: must be 1 to 1000000, not 0",
        ),
        (
            r("  fetchSize: 1000 ", "  fetchSize: 100000000 "),
            "source.fetchSize: must be 1 to 100000, not 100000000",
        ),
    ]
}

fn dynamo_bounds() -> Vec<((&'static str, String), &'static str)> {
    let r = |from: &'static str, to: &str| (from, to.to_string());
    vec![
        (
            r("  scanSegments: 16", "  scanSegments: 1000000000000"),
            "source.scanSegments: must be 1 to 1000000, not 1000000000000",
        ),
        (
            r("  scanSegments: 16", "  scanSegments: 0"),
            "source.scanSegments: must be 1 to 1000000, not 0",
        ),
        (
            r("  maxMapTasks: 8", "  maxMapTasks: 4294967296"),
            "source.maxMapTasks: must be 1 to 1024, not 4294967296",
        ),
        (
            r("  readThroughput: 100", "  readThroughput: 99999999999"),
            "source.readThroughput: must be 1 to 4000000, not 99999999999",
        ),
        (
            r(
                "  throughputReadPercent: 0.5",
                "  throughputReadPercent: 1e300",
            ),
            "source.throughputReadPercent: must be between 0.1 and 1.5",
        ),
        (
            r(
                "  throughputReadPercent: 0.5",
                "  throughputReadPercent: .nan",
            ),
            "source.throughputReadPercent: must be between 0.1 and 1.5",
        ),
        (
            r("  writeThroughput: 500", "  writeThroughput: 4000001"),
            "target.writeThroughput: must be 1 to 4000000, not 4000001",
        ),
        (
            r(
                "  throughputWritePercent: 1.0",
                "  throughputWritePercent: 2",
            ),
            "target.throughputWritePercent: must be between 0.1 and 1.5",
        ),
        (
            r("  maxMapTasks: 1\n", "  maxMapTasks: 100000\n"),
            "target.maxMapTasks: must be 1 to 1024, not 100000",
        ),
        (
            r("  failuresToFetch: 100 ", "  failuresToFetch: 100001 "),
            "validation.failuresToFetch: must be 0 to 100000, not 100001",
        ),
        (
            r("  intervalSeconds: 300 ", "  intervalSeconds: 604801 "),
            "savepoints.intervalSeconds: must be 1 to 604800, not 604801",
        ),
    ]
}

#[tokio::test]
async fn every_count_size_and_rate_is_bounded_with_its_key_and_range() {
    let app = App::new("").await;
    for (example, cases) in [
        (CQL_EXAMPLE, cql_bounds()),
        (DYNAMO_EXAMPLE, dynamo_bounds()),
    ] {
        for ((from, to), expected) in cases {
            assert!(example.contains(from), "{from:?} is not in the example");
            let job = example.replacen(from, &to, 1);
            for resource in ["/api/v1/migrations", "/api/v1/validations"] {
                let message = refused(&app, resource, &job).await;
                assert!(message.contains(expected), "{to:?}: {message}");
            }
        }
    }
    // The examples themselves are within every bound: only what reaches the clusters fails.
    for example in [CQL_EXAMPLE, DYNAMO_EXAMPLE] {
        drover::engine::config::JobConfig::parse(example).expect("the example parses");
    }
    let (status, _) = app.get("/api/v1/__health").await;
    assert_eq!(status, 200);
}

/// The CQL example against the test clusters (`reachable`) or a port nothing listens on, with
/// its savepoints in `dir`.
fn job_with_savepoints(dir: &std::path::Path, reachable: bool, extra_source: &str) -> String {
    let mut job = if reachable {
        cql_job(
            ("drover_no_such_keyspace", "t"),
            ("drover_no_such_keyspace", "t"),
            extra_source,
        )
    } else {
        format!(
            "source:\n  type: cassandra\n  host: 127.0.0.1\n  port: 1\n  keyspace: ks\n  table: t\n{extra_source}target:\n  type: cassandra\n  host: 127.0.0.1\n  port: 1\n  keyspace: ks\n  table: t\n"
        )
    };
    job.push_str(&format!(
        "savepoints:\n  path: {}\n  intervalSeconds: 60\n",
        dir.display()
    ));
    job
}

#[tokio::test]
async fn a_refused_job_creates_no_savepoints_directory_and_sweeps_nothing() {
    let app = App::new("").await;
    let home = app.home().path().to_path_buf();
    // (extra source lines, reachable clusters, expected status): a bad value (400), a
    // keyspace the clusters do not have (400, after connecting), clusters nobody listens on
    // (502).
    let cases = [
        ("  splitCount: 1000000000000\n", true, 400),
        ("", true, 400),
        ("", false, 502),
    ];
    for (i, (extra, reachable, want)) in cases.into_iter().enumerate() {
        for resource in ["/api/v1/migrations", "/api/v1/validations"] {
            let kind = resource.rsplit('/').next().unwrap();
            // A directory that does not exist stays so.
            let missing = home.join(format!("sp-missing-{kind}-{i}"));
            let (status, body) = app
                .post_raw(
                    resource,
                    "application/yaml",
                    job_with_savepoints(&missing, reachable, extra),
                )
                .await;
            assert_eq!(status, want, "{body}");
            assert!(!missing.exists(), "{resource} case {i} created {missing:?}");

            // An existing one keeps its files, temporary ones included (a running job of the
            // same directory may be writing one).
            let existing = home.join(format!("sp-existing-{kind}-{i}"));
            std::fs::create_dir_all(existing.join("validation")).unwrap();
            let planted = [
                existing.join(".x.tmp"),
                existing.join(".savepoint_1700000000000_0000000001.yaml.42.tmp"),
                existing.join("validation").join(".x.tmp"),
            ];
            for p in &planted {
                std::fs::write(p, b"half").unwrap();
            }
            let (status, body) = app
                .post_raw(
                    resource,
                    "application/yaml",
                    job_with_savepoints(&existing, reachable, extra),
                )
                .await;
            assert_eq!(status, want, "{body}");
            for p in &planted {
                assert!(p.exists(), "{resource} case {i} deleted {p:?}");
            }
        }
    }
}
