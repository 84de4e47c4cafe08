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
    // The sides' own keys are the CQL connector's to test (`cql::config`).
    assert_eq!(
        (job.source.kind(), job.target.kind()),
        ("cassandra/scylla", "cassandra/scylla")
    );
    assert!(job.source.unshareable().is_none());
    assert_eq!(job.target.own_tables_keyspace().as_deref(), Some("ks"));
    assert_eq!(job.target_name("a"), "b");
    assert_eq!(job.target_name("c"), "c");
    assert_eq!(skipped_ranges(&job), vec![(-100, 0)]);
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
    let expected =
        "cassandra, scylla, dynamodb, dynamo, alternator, parquet, dynamodb-s3-export, csv, json";
    assert_eq!(
        err(&GOOD.replace("  type: scylla", "  type: oracle")),
        format!("target.type: unknown type \"oracle\", expected {expected} (line 17)")
    );
    assert_eq!(
        err(&GOOD.replace("  type: scylla", "  type: mysql")),
        format!("target.type: \"mysql\" is a source type only; expected {expected} (line 17)")
    );
    let e = err(&GOOD.replace("  type: cassandra", "  type: dynamodb-s3-export"));
    assert!(e.starts_with("source: unknown field `host`"), "{e}");
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

/// ScyllaDB Migrator reads `null` as "not given" for every optional key; so does drover.
#[test]
fn null_is_absent_wherever_migrator_accepts_it() {
    let text = GOOD
        .replace(
            "renames:\n  - from: a\n    to: b\n",
            "renames: null\nskipSegments: null\nskipParquetFiles: null\nvalidation: null\n",
        )
        .replace(
            "  localDC: datacenter1\n",
            "  localDC: null\n  where: null\n  sslOptions: null\n",
        )
        .replace(
            "  stripTrailingZerosForDecimals: false\n",
            "  stripTrailingZerosForDecimals: false\n  writeTTLInS: null\n  writeWritetimestampInuS: null\n  dropNullPrimaryKeys: null\n",
        )
        .replace(
            "  intervalSeconds: 300\n",
            "  intervalSeconds: 300\n  target: null\n  enableParquetFileTracking: null\n",
        );
    let job = JobConfig::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(job.renames.is_empty());
    let with_nulls = format!(
        "{}validation:\n  copyMissingRows: null\n  hashColumns: null\n  repairWritetimeStrategy: null\n",
        GOOD
    );
    let job = JobConfig::parse(&with_nulls).unwrap();
    assert!(!job.validation.copy_missing_rows);
    assert_eq!(
        job.validation.repair_writetime_strategy,
        jobfile::RepairWritetimeStrategy::Source
    );
}

/// The token ranges a job file says are done, as `(start, end)` pairs.
fn skipped_ranges(job: &JobConfig) -> Vec<(i64, i64)> {
    job.skip
        .ranges(&crate::savepoints::TOKEN_RANGES)
        .ranges()
        .iter()
        .map(|r| (r.start, r.end))
        .collect()
}

#[test]
fn skip_token_ranges_in_migrators_typed_form_are_read() {
    let job = JobConfig::parse(&GOOD.replace(
        "  - [-100, 0]\n",
        "- - type: long\n    value: -9223372036854775808\n  - type: long\n    value: -4611686018427387904\n\
         - - type: long\n    value: 7\n  - type: long\n    value: -9223372036854775808\n",
    ))
    .unwrap();
    assert_eq!(
        skipped_ranges(&job),
        vec![(i64::MIN, -4611686018427387904), (7, i64::MAX)]
    );
    let e = err(&GOOD.replace(
        "  - [-100, 0]\n",
        "  - - {type: bigint, value: 1}\n    - {type: bigint, value: 2}\n",
    ));
    assert!(
        e.starts_with("skipTokenRanges: skipTokenRanges[0]: start: a RandomPartitioner token"),
        "{e}"
    );
}

#[test]
fn savepoints_target_is_read_as_migrator_reads_it() {
    use crate::savepoints::Location;
    let target =
        |body: &str| GOOD.replace("  path: /tmp/savepoints\n", &format!("  target:\n{body}"));
    let place = |text: &str| {
        JobConfig::parse(text)
            .unwrap()
            .savepoints
            .unwrap()
            .location
            .unwrap()
    };
    let job = JobConfig::parse(&target("    type: filesystem\n    path: /tmp/sp-dir\n")).unwrap();
    assert_eq!(
        job.savepoints.unwrap().path.unwrap(),
        std::path::PathBuf::from("/tmp/sp-dir")
    );
    assert_eq!(
        place(&target(
            "    type: s3\n    bucket: ' b '\n    prefix: /a/b/\n    region: eu-west-1\n    credentials:\n      accessKey: k\n      secretKey: s\n"
        ))
        .describe(),
        "s3://b/a/b"
    );
    assert_eq!(
        place(&target(
            "    type: google-gcs\n    bucket: b\n    projectId: p\n    endpoint:\n      host: 127.0.0.1\n      port: 9023\n"
        ))
        .describe(),
        "gs://b/"
    );
    assert_eq!(
        place(&GOOD.replace("/tmp/savepoints", "s3a://bucket/sp/x")).describe(),
        "s3://bucket/sp/x"
    );
    // Only this backend defaults its interval (to 300 s), as in Migrator's documentation.
    let table = JobConfig::parse(
        &target("    type: target-table\n").replace("  intervalSeconds: 300\n", ""),
    )
    .unwrap();
    let sp = table.savepoints.unwrap();
    assert_eq!(sp.interval_seconds, Some(300));
    let Some(Location::Table(t)) = sp.location else {
        panic!("a table")
    };
    assert_eq!(t.table, "scylla_migrator_savepoints");
    assert_eq!(t.job_id, None);
    for (body, says) in [
        (
            "    type: s3\n    bucket: ''\n",
            "savepoints.target.bucket: must not be empty",
        ),
        (
            "    type: s3\n    bucket: b\n    credentials:\n      accessKey: k\n      secretKey: s\n      assumeRole:\n        arn: x\n",
            "savepoints.target.credentials.assumeRole: assuming a role",
        ),
        (
            "    type: s3\n    bucket: b\n    colour: red\n",
            "savepoints.target: unknown field `colour`",
        ),
        (
            "    type: gcs\n    bucket: b\n    credentials:\n      serviceAccountJsonKeyfile: /nonexistent/key.json\n",
            "savepoints.target.credentials.serviceAccountJsonKeyfile: /nonexistent/key.json: No such file",
        ),
        (
            "    type: target-table\n    keyspace: 'my-ks'\n",
            "savepoints.target.keyspace: \"my-ks\": only ASCII letters, digits and underscores",
        ),
        (
            "    type: target-table\n    table: '\"a b\"'\n",
            "savepoints.target.table: \"\\\"a b\\\"\": only ASCII letters",
        ),
        (
            "    type: target-table\n    jobId: ' '\n",
            "savepoints.target.jobId: must not be empty",
        ),
        (
            "    type: hadoop\n",
            "savepoints.target: type hadoop is not a savepoints target",
        ),
        (
            "    type: filesystem\n    path: s3a://b/k\n",
            "savepoints.target: type filesystem takes a local directory, not s3a://",
        ),
        ("    type: ftp\n", "savepoints.target: unknown type \"ftp\""),
    ] {
        let e = err(&target(body));
        assert!(e.starts_with(says), "{e}");
    }
    let e = err(&GOOD.replace("/tmp/savepoints", "hdfs://nn/sp"));
    assert!(
        e.starts_with("savepoints.path: savepoints in a Hadoop file system (hdfs://…)"),
        "{e}"
    );
    for local in ["file:/tmp/sp", "file:///tmp/sp"] {
        let job = JobConfig::parse(&GOOD.replace("/tmp/savepoints", local)).unwrap();
        assert_eq!(
            job.savepoints.unwrap().path.unwrap(),
            std::path::PathBuf::from("/tmp/sp")
        );
    }
    let both = GOOD.replace(
        "  path: /tmp/savepoints\n",
        "  path: /tmp/savepoints\n  target:\n    type: filesystem\n    path: /tmp/x\n",
    );
    assert!(
        err(&both)
            .starts_with("savepoints.target: give savepoints.path or savepoints.target, not both"),
        "{}",
        err(&both)
    );
}

#[test]
fn target_table_names_follow_cql_rules_with_the_seed_restrictions() {
    let name = |v: &str| super::table_name("", "k", v);
    assert_eq!(name("MyKs").unwrap(), "myks");
    assert_eq!(name("\"MyKs\"").unwrap(), "MyKs");
    assert_eq!(name(" snake_case_9 ").unwrap(), "snake_case_9");
    for bad in [
        "\"my ks\"",
        "my-ks",
        "ks.t",
        "\"\"",
        "",
        "é",
        &"a".repeat(49),
    ] {
        assert!(name(bad).is_err(), "{bad:?} is refused");
    }
    // An omitted keyspace inherits target.keyspace as the target resolves it.
    let text = GOOD.replace(
        "  path: /tmp/savepoints\n",
        "  target:\n    type: target-table\n",
    );
    let at = text.rfind("keyspace: ks").expect("the target's keyspace");
    let text = format!("{}keyspace: '\"Dst_KS\"'{}", &text[..at], &text[at + 12..]);
    let job = JobConfig::parse(&text).unwrap();
    let Some(crate::savepoints::Location::Table(t)) = job.savepoints.unwrap().location else {
        panic!("a table")
    };
    assert_eq!(t.keyspace, "Dst_KS");
}

#[test]
fn validation_keys_of_migrator_are_read_with_its_values_and_checks() {
    let with = |body: &str| format!("{GOOD}validation:\n{body}");
    let job = JobConfig::parse(&with(
        "  copyMissingRows: true\n  repairWritetimeStrategy: Coordinator\n  numericTypePolicy: detectwiden\n  hashColumns: [a, b]\n",
    ))
    .unwrap();
    let v = &job.validation;
    assert_eq!(
        v.repair_writetime_strategy,
        jobfile::RepairWritetimeStrategy::Coordinator
    );
    assert_eq!(
        v.numeric_type_policy,
        jobfile::NumericTypePolicy::DetectWiden
    );
    assert_eq!(
        v.hash_columns.as_deref(),
        Some(&["a".to_string(), "b".to_string()][..])
    );
    for (body, says) in [
        (
            "  repairWritetimeStrategy: newest\n",
            "validation.repairWritetimeStrategy: invalid repairWritetimeStrategy \"newest\", expected source, coordinator or config",
        ),
        (
            "  numericTypePolicy: loose\n",
            "validation.numericTypePolicy: invalid numericTypePolicy \"loose\", expected Lenient, DetectWiden or StrictType",
        ),
        (
            "  hashColumns: [a, ' ']\n",
            "validation.hashColumns: hashColumns[1] is blank",
        ),
        (
            "  hashColumns: [Col, col]\n",
            "validation.hashColumns: hashColumns[1]: column \"col\" is listed twice",
        ),
    ] {
        let e = err(&with(body));
        assert!(e.starts_with(says), "{e}");
    }
}

#[test]
fn astra_bundles_are_refused_by_name() {
    let e = err(&GOOD.replace(
        "  host: 127.0.0.1\n  port: 9042\n  localDC: datacenter1\n",
        "  cloud:\n    secureBundlePath: /opt/bundle.zip\n",
    ));
    assert!(
        e.starts_with(
            "source.cloud: Astra secure connect bundles (cloud.secureBundlePath) are not supported"
        ),
        "{e}"
    );
}

/// A job is named after what it moves, from names only: keyspaces and tables, a bucket and
/// prefix without the credentials or signature a URL may carry, DynamoDB tables, MySQL
/// databases; a given `name` wins. Every example job file gets a name.
#[test]
fn names_are_derived_from_names_only() {
    let id = JobConfig::parse(GOOD).unwrap().identity();
    assert_eq!(id.name.as_deref(), Some("ks.t → ks.t"));
    assert!(!format!("{id:?}").contains("s3cret") && !format!("{id:?}").contains("127.0.0"));
    let named = JobConfig::parse(&format!("name: nightly copy\n{GOOD}")).unwrap();
    assert_eq!(named.identity().name.as_deref(), Some("nightly copy"));
    assert_eq!(named.identity().source.as_deref(), Some("ks.t"));

    let target = &GOOD[GOOD.find("target:").unwrap()..GOOD.find("renames:").unwrap()];
    let parquet = format!(
        "source:\n  type: parquet\n  path: s3a://AKIAKEY:s3cret-key@bucket/exports/orders?X-Amz-Signature=s3cret-sig\n{target}"
    );
    let id = JobConfig::parse(&parquet).unwrap().identity();
    assert_eq!(
        id.name.as_deref(),
        Some("parquet:s3a://bucket/exports/orders → ks.t"),
        "{parquet}"
    );
    assert!(!format!("{id:?}").contains("s3cret"), "{id:?}");

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        if file.starts_with("job") && file.ends_with(".yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let id = JobConfig::parse(&text).unwrap().identity();
            let name = id.name.unwrap();
            assert!(
                !name.is_empty() && name.chars().count() <= 200,
                "{file}: {name}"
            );
            assert!(id.source.is_some() && id.target.is_some(), "{file}: {name}");
            eprintln!("{file}: {name}");
        }
    }
}

#[test]
fn progress_keys_of_other_sources_are_accepted_and_ignored_and_unknown_keys_refused() {
    // ScyllaDB Migrator writes `skipSegments: []` and `skipParquetFiles: []` into every
    // savepoint; drover's savepoints may hold a bulk load's id or stream positions. A CQL job
    // reads only its token ranges from them.
    let job = JobConfig::parse(&format!(
        "{GOOD}skipSegments: [1, 2]\nskipParquetFiles: [file:/a.parquet]\nskipMySqlRanges: []\n"
    ))
    .unwrap();
    assert_eq!(skipped_ranges(&job), vec![(-100, 0)]);
    let keys: Vec<&str> = job.skip.entries().map(|(k, _)| k.name).collect();
    assert_eq!(keys, ["skipTokenRanges"]);
    // A key that is neither a job key nor any connector's progress key, with its line.
    let e = err(&format!("{GOOD}skipSegmentz: []\n"));
    assert!(
        e.starts_with("unknown field `skipSegmentz`, expected one of `name`"),
        "{e}"
    );
    assert!(
        e.contains("`skipSegments`") && e.contains("`skipMySqlRanges`"),
        "{e}"
    );
    assert!(e.ends_with("(line 36)"), "{e}");
    // Checked before the sections: a misspelt key is named even when a section is missing.
    let e = err(&GOOD.replace("target:", "taget:"));
    assert!(e.starts_with("unknown field `taget`"), "{e}");
    // A run's own records are a savepoint's, not a job file's: a savepoint without secrets
    // submitted as a job would lose its stream positions or file versions.
    for record in [
        "bulkWriteRun: run-1",
        "streamPositions: {stream: s, since: 1}",
        "parquetFileVersions: {}",
    ] {
        let e = err(&format!("{GOOD}{record}\n"));
        let key = record.split(':').next().unwrap();
        assert!(
            e.starts_with(&format!(
                "`{key}` is a run's own record, which only savepoints hold"
            )),
            "{e}"
        );
        assert!(e.ends_with("(line 36)"), "{e}");
    }
    let e = err(&format!("{GOOD}7: x\n"));
    assert!(e.starts_with("unknown field `7`"), "{e}");
}
