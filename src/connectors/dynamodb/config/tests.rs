use crate::engine::config::JobConfig;

/// A DynamoDB to Alternator job with `source` and `target` lines added.
fn job(source: &str, target: &str) -> String {
    format!(
        "source:\n  type: dynamodb\n  table: src\n  region: us-east-1\n{source}target:\n  type: alternator\n  table: dst\n  endpoint:\n    host: http://10.0.0.1\n    port: 8000\n  streamChanges: false\n{target}savepoints:\n  path: /tmp/sp\n  intervalSeconds: 300\n"
    )
}

fn refused(text: &str) -> (String, Option<usize>) {
    let e = JobConfig::parse(text).expect_err(text);
    (e.message, e.line)
}

#[test]
fn the_plain_job_is_accepted() {
    JobConfig::parse(&job("", "")).unwrap();
}

#[test]
fn migrators_refusals_are_refused_with_key_and_line() {
    let cases: &[(&str, &str, &str, usize)] = &[
        (
            "  throughputReadPercent: 1.6\n",
            "",
            "source.throughputReadPercent: must be between 0.1 and 1.5",
            5,
        ),
        (
            "  throughputReadPercent: 0.05\n",
            "",
            "source.throughputReadPercent",
            5,
        ),
        (
            "",
            "  throughputWritePercent: 0\n",
            "target.throughputWritePercent",
            12,
        ),
        (
            "  scanSegments: 0\n",
            "",
            "source.scanSegments: must be 1 to 1000000, not 0",
            5,
        ),
        ("  maxMapTasks: 0\n", "", "source.maxMapTasks", 5),
        ("  readThroughput: 0\n", "", "source.readThroughput", 5),
        ("", "  writeThroughput: 0\n", "target.writeThroughput", 12),
        (
            "  removeConsumedCapacity: true\n",
            "",
            "source.removeConsumedCapacity: is a setting of type alternator only",
            5,
        ),
        (
            "  datacenter: dc1\n",
            "",
            "source.datacenter: is a setting of type alternator only",
            5,
        ),
        (
            "  alternator:\n    datacenter: dc1\n",
            "",
            "source.alternator: a nested alternator block",
            5,
        ),
        (
            "  scanSegmnts: 3\n",
            "",
            "source.scanSegmnts: unknown key",
            5,
        ),
        (
            "",
            "  rack: r1\n",
            "target.rack: is set without datacenter",
            12,
        ),
        (
            "",
            "  maxConnections: 0\n",
            "target.maxConnections: must be positive",
            12,
        ),
        (
            "",
            "  connectionTimeoutMs: -1\n",
            "target.connectionTimeoutMs: must not be negative",
            12,
        ),
        ("", "  billingMode: FREE\n", "target.billingMode", 12),
        (
            "",
            "  credentials:\n    accessKey: a\n    secretKey: b\n    assumeRole:\n      arn: arn:aws:iam::1:role/r\n",
            "target.credentials.assumeRole: is not supported with type alternator",
            15,
        ),
    ];
    for (source, target, says, line) in cases {
        let (message, at) = refused(&job(source, target));
        assert!(message.starts_with(says), "{source}{target}: {message}");
        assert_eq!(at, Some(*line), "{source}{target}: {message}");
    }
}

#[test]
fn endpoints_follow_migrators_rules() {
    let with_host = |host: &str| {
        job(
            &format!("  endpoint:\n    host: {host}\n    port: 8000\n"),
            "",
        )
    };
    for good in [
        "localhost",
        "http://localhost",
        "https://dynamodb.eu-west-1.amazonaws.com",
        "10.0.0.1",
        "::1",
        "http://[::1]",
        "dynamo_local",
    ] {
        JobConfig::parse(&with_host(good)).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for bad in [
        "http://host/path",
        "user@host",
        "host:8000",
        "http://host:8000",
        "-host",
        "\"\"",
    ] {
        let (message, line) = refused(&with_host(bad));
        assert!(
            message.starts_with("source.endpoint.host: "),
            "{bad}: {message}"
        );
        assert_eq!(line, Some(6), "{bad}");
    }
    // Alternator needs the scheme.
    let text = job("", "").replace("host: http://10.0.0.1", "host: 10.0.0.1");
    let (message, _) = refused(&text);
    assert!(message.starts_with("target.endpoint.host: "), "{message}");
    assert!(message.contains("http://10.0.0.1"), "{message}");
    // Without an endpoint at all.
    let text = job("", "").replace(
        "  endpoint:\n    host: http://10.0.0.1\n    port: 8000\n",
        "",
    );
    let (message, line) = refused(&text);
    assert!(
        message.starts_with("target: endpoint is required with type alternator"),
        "{message}"
    );
    assert_eq!(line, Some(5));
}

#[test]
fn urls_of_endpoints() {
    use super::Endpoint;
    let url = |host: &str| {
        Endpoint {
            host: host.into(),
            port: 8000,
        }
        .url()
    };
    assert_eq!(url("localhost"), "http://localhost:8000");
    assert_eq!(url("https://a.b/"), "https://a.b:8000");
    assert_eq!(url("::1"), "http://[::1]:8000");
    assert_eq!(url("http://[::1]"), "http://[::1]:8000");
}

#[test]
fn pairs_and_segments_as_migrator_reads_them() {
    // An Alternator source has no stream.
    let text = job("", "").replace(
        "source:\n  type: dynamodb\n",
        "source:\n  type: alternator\n  endpoint:\n    host: http://10.0.0.2\n    port: 8000\n",
    );
    JobConfig::parse(&text).unwrap();
    let (message, _) = refused(&text.replace("streamChanges: false", "streamChanges: true"));
    assert!(message.starts_with("target.streamChanges: "), "{message}");
    // skipSegments needs scanSegments and segments that exist.
    let (message, _) = refused(&format!("{}skipSegments: [1]\n", job("", "")));
    assert!(
        message.starts_with("skipSegments: needs source.scanSegments"),
        "{message}"
    );
    let (message, _) = refused(&format!(
        "{}skipSegments: [3]\n",
        job("  scanSegments: 3\n", "")
    ));
    assert!(message.contains("segment 3 does not exist"), "{message}");
    // skipInitialSnapshotTransfer without streamChanges: ignored (Migrator's documented
    // behaviour), so the snapshot is copied.
    let config = JobConfig::parse(&job("", "  skipInitialSnapshotTransfer: true\n")).unwrap();
    let t = config.target.get::<super::DynamoTarget>().unwrap();
    assert!(!t.skip_initial_snapshot_transfer);
    // A target's maxMapTasks (in Migrator's own test files) is accepted.
    JobConfig::parse(&job("", "  maxMapTasks: 1\n")).unwrap();
    // An S3 export target takes a path, not a table.
    let (message, _) = refused(&job("", "").replace(
        "target:\n  type: alternator\n",
        "target:\n  type: dynamodb-s3-export\n",
    ));
    assert!(
        message.starts_with("target: unknown field")
            || message.starts_with("target: missing field `path`"),
        "{message}"
    );
}

#[test]
fn the_example_job_file_shows_every_key() {
    let text = include_str!("../../../../config/job-dynamodb.yaml");
    JobConfig::parse(text).unwrap();
    for key in super::SOURCE_KEYS
        .iter()
        .chain(super::TARGET_KEYS)
        .chain(super::ALTERNATOR_KEYS)
    {
        assert!(
            text.contains(&format!("{key}:")),
            "config/job-dynamodb.yaml does not show {key}"
        );
    }
}
