use super::*;

const GOOD: &str = "\
source:
  type: cassandra
  host: 127.0.0.1
  port: 9042
  localDC: datacenter1
  credentials:
    username: reader
    password: s3cret-source
  keyspace: ks
  table: t
  consistencyLevel: LOCAL_QUORUM
  preserveTimestamps: true
  splitCount: 256
  connections: 8
  fetchSize: 1000
target:
  type: scylla
  host: 127.0.0.2
  port: 9042
  credentials:
    username: writer
    password: s3cret-target
  keyspace: ks
  table: t
  consistencyLevel: LOCAL_QUORUM
  connections: 16
  stripTrailingZerosForDecimals: false
renames:
  - from: a
    to: b
skipTokenRanges:
  - [-100, 0]
savepoints:
  path: /tmp/savepoints
  intervalSeconds: 300
";

fn err(text: &str) -> String {
    JobConfig::parse(text).unwrap_err().to_string()
}

#[test]
fn a_scylla_migrator_file_parses() {
    let job = JobConfig::parse(GOOD).unwrap();
    let SourceConfig::Cql(s) = &job.source else {
        panic!("a CQL source")
    };
    let TargetConfig::Cql(t) = &job.target else {
        panic!("a CQL target")
    };
    assert_eq!(s.endpoint.host, "127.0.0.1");
    assert_eq!(s.endpoint.local_dc.as_deref(), Some("datacenter1"));
    assert!(s.preserve_timestamps);
    assert_eq!(s.split_count, Some(256));
    assert_eq!(t.endpoint.port, 9042);
    assert_eq!(t.max_in_flight, 256);
    assert_eq!(job.target_name("a"), "b");
    assert_eq!(job.target_name("c"), "c");
    assert_eq!(job.skip_token_ranges, vec![(-100, 0)]);
}

#[test]
fn errors_name_key_and_line() {
    assert_eq!(
        err(&GOOD.replace("  fetchSize: 1000", "  fetchSize: lots")),
        "source.fetchSize: invalid type: string \"lots\", expected usize (line 15)"
    );
    let e = err(&GOOD.replace("  connections: 16", "  conections: 16"));
    assert!(e.starts_with("target: unknown field `conections`"), "{e}");
    assert!(e.ends_with("(line 26)"), "{e}");
    assert_eq!(
        err(&GOOD.replace(
            "consistencyLevel: LOCAL_QUORUM\n  preserve",
            "consistencyLevel: SOMETIMES\n  preserve"
        )),
        "source.consistencyLevel: unknown variant `SOMETIMES`, expected one of `ANY`, `ONE`, `TWO`, `THREE`, `QUORUM`, `ALL`, `LOCAL_QUORUM`, `EACH_QUORUM`, `LOCAL_ONE` (line 11)"
    );
    let e = err(&GOOD.replace("renames:", "renamez:"));
    assert!(e.starts_with("unknown field `renamez`"), "{e}");
    assert!(e.ends_with("(line 28)"), "{e}");
    assert_eq!(
        err(&GOOD.replace("  type: scylla", "  type: oracle")),
        "target.type: unknown type \"oracle\", expected cassandra, scylla, dynamodb, alternator or parquet (line 17)"
    );
    assert_eq!(
        err(&GOOD.replace("  type: scylla", "  type: mysql")),
        "target.type: \"mysql\" is not supported by this version of drover yet; supported: cassandra, scylla, dynamodb, dynamo, alternator, parquet (line 17)"
    );
    let e = err(&GOOD.replace(
        "  keyspace: ks\n  table: t\n  consistencyLevel: LOCAL_QUORUM\n  preserve",
        "  table: t\n  consistencyLevel: LOCAL_QUORUM\n  preserve",
    ));
    assert!(e.starts_with("source: missing field `keyspace`"), "{e}");
    assert_eq!(
        err(&GOOD.replace("  - [-100, 0]", "  - [5, 5]")),
        "skipTokenRanges: skipTokenRanges[0]: (5, 5] is empty; ranges are (start, end] with start < end (line 31)"
    );
    assert_eq!(
        err(&GOOD.replace("  splitCount: 256", "  splitCount: 0")),
        "source.splitCount: must be 1 to 1000000, not 0 (line 13)"
    );
}

/// Every count and size of the CQL sections is bounded, the message naming key and range.
#[test]
fn counts_and_sizes_are_bounded() {
    for (from, to, expected) in [
        (
            "  splitCount: 256",
            "  splitCount: 1000000000000",
            "source.splitCount: must be 1 to 1000000, not 1000000000000 (line 13)",
        ),
        (
            "  fetchSize: 1000",
            "  fetchSize: 100001",
            "source.fetchSize: must be 1 to 100000, not 100001",
        ),
        (
            "  splitCount: 256",
            "  splitCount: 256\n  maxConcurrentUnits: 5000",
            "source.maxConcurrentUnits: must be 1 to 1024, not 5000",
        ),
        (
            "  connections: 8\n",
            "  connections: 65\n",
            "source.connections: must be 1 to 64, not 65",
        ),
    ] {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "{from} not in the example");
        let e = err(&text);
        assert!(e.starts_with(expected), "{e}");
    }
    assert!(JobConfig::parse(&GOOD.replace("  splitCount: 256", "  splitCount: 1000000")).is_ok());
}

#[test]
fn a_savepoint_is_refused_with_an_explanation() {
    let e = err(&GOOD.replace("s3cret-source", "<redacted>"));
    assert!(e.contains("it is a savepoint"), "{e}");
    assert!(e.contains("autoResume"), "{e}");
    assert!(e.ends_with("(line 8)"), "{e}");
}

#[test]
fn secrets_are_redacted_and_never_printed() {
    let json = redacted_json(GOOD);
    let text = json.to_string();
    assert!(!text.contains("s3cret"), "{text}");
    assert_eq!(json["source"]["credentials"]["password"], REDACTED);
    assert_eq!(json["source"]["credentials"]["username"], "reader");
    // Token ranges are progress, not secrets.
    assert_eq!(json["skipTokenRanges"][0][0], -100);
    let job = JobConfig::parse(GOOD).unwrap();
    assert!(!format!("{job:?}").contains("s3cret"));
    for key in [
        "password",
        "trustStorePassword",
        "secretKey",
        "aws_secret_access_key",
        "sessionToken",
        "accessKey",
    ] {
        assert!(is_secret_key(key), "{key}");
    }
    for key in ["username", "skipTokenRanges", "keyspace", "host"] {
        assert!(!is_secret_key(key), "{key}");
    }
}

#[test]
fn every_job_example_in_config_dir_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("job") && name.ends_with(".yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            JobConfig::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            seen += 1;
        }
    }
    assert!(seen >= 1);
}

#[test]
fn validation_keys_parse_with_migrator_names_and_defaults() {
    let job = JobConfig::parse(GOOD).unwrap();
    assert_eq!(job.validation, ValidationConfig::default());
    assert_eq!(job.validation.ttl_tolerance_millis, 60_000);
    assert_eq!(job.validation.failures_to_fetch, 100);
    let text = format!(
        "{GOOD}validation:\n  compareTimestamps: true\n  ttlToleranceMillis: 1000\n  writetimeToleranceMillis: 2\n  failuresToFetch: 5\n  floatingPointTolerance: 0.001\n  timestampMsTolerance: 3\n  copyMissingRows: true\n"
    );
    let v = JobConfig::parse(&text).unwrap().validation;
    assert_eq!(v.compare_timestamps, Some(true));
    assert_eq!(v.ttl_tolerance_millis, 1000);
    assert_eq!(v.writetime_tolerance_millis, 2);
    assert_eq!(v.failures_to_fetch, 5);
    assert_eq!(v.floating_point_tolerance, 0.001);
    assert_eq!(v.timestamp_ms_tolerance, 3);
    assert!(v.copy_missing_rows);
    let e = err(&format!("{GOOD}validation:\n  copyMissingRow: true\n"));
    assert!(e.contains("copyMissingRow"), "{e}");
    assert!(e.contains("line 37"), "{e}");
    let e = err(&format!("{GOOD}validation:\n  ttlToleranceMillis: -5\n"));
    assert!(
        e.contains("ttlToleranceMillis") || e.contains("validation"),
        "{e}"
    );
}
