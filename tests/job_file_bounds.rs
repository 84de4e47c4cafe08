//! Property tests of job parsing: whatever the body — a shipped example cut and spliced, any
//! value at any known key, nested aliases — `JobConfig::parse` answers `Ok` or a short `Err`,
//! never panics, never builds an alias expansion past its bound, and what it accepts is
//! within every bound the engine relies on.
//!
//! A test crate of its own: it draws on every connector's bounds and the engine's job file, so
//! it sits above the layers of `src/` (tests/layers.rs).

use drover::engine::config::{JobConfig, JobConfigError};
use proptest::prelude::*;
use serde_json::{Value, json};

use drover::config::yaml::MAX_NODES;
use drover::connectors::cql::config::{
    MAX_BYTES_PER_SECOND, MAX_CONCURRENCY, MAX_CONNECTIONS, MAX_FETCH_SIZE, MAX_IN_FLIGHT,
    MAX_ROWS_PER_SECOND, MAX_SPLIT_COUNT, is_system_keyspace,
};
use drover::connectors::dynamodb::config::{MAX_MAP_TASKS, MAX_SCAN_SEGMENTS, MAX_THROUGHPUT};
use drover::jobfile;

const EXAMPLES: [&str; 9] = [
    include_str!("../config/job-cql.yaml"),
    include_str!("../config/job-dynamodb.yaml"),
    include_str!("../config/job-parquet.yaml"),
    include_str!("../config/job-export-parquet.yaml"),
    include_str!("../config/job-mysql.yaml"),
    include_str!("../config/job-s3export-load.yaml"),
    include_str!("../config/job-s3export-write.yaml"),
    include_str!("../config/job-csv-load.yaml"),
    include_str!("../config/job-csv-unload.yaml"),
];

/// Text an editor (or an attacker) might splice into a job file: YAML's own punctuation,
/// aliases, tags, huge and odd numbers, system keyspace names.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~\n\t]{0,24}",
        prop::sample::select(vec![
            ": ",
            "- ",
            "&a ",
            "*a",
            "<<: *a",
            "!!binary ",
            "|\n",
            ">\n",
            "{",
            "}",
            "[",
            "]",
            "\"",
            "'",
            "#",
            "\n  ",
            "\n    ",
            "~",
            "null",
            ".nan",
            "-.inf",
            "1e308",
            "18446744073709551616",
            "-9223372036854775809",
            "0x7fffffffffffffff",
            "system",
            "\"SYSTEM\"",
            "\u{feff}",
            "\u{0}",
            "é",
        ])
        .prop_map(str::to_string),
    ]
}

/// An example with up to four splices: `(position, bytes removed, text inserted)`.
fn mutated_example() -> impl Strategy<Value = String> {
    (
        0..EXAMPLES.len(),
        prop::collection::vec((any::<prop::sample::Index>(), 0usize..40, fragment()), 1..5),
    )
        .prop_map(|(which, edits)| {
            let mut text = EXAMPLES[which].to_string();
            for (at, cut, insert) in edits {
                let mut start = at.index(text.len() + 1);
                while !text.is_char_boundary(start) {
                    start -= 1;
                }
                let mut end = (start + cut).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                text.replace_range(start..end, &insert);
            }
            text
        })
}

/// Any scalar a YAML value may hold, with the edges of every numeric type.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![
            0u64,
            1,
            255,
            256,
            65_535,
            65_536,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            1_000_000_000_000,
            u64::MAX,
        ])
        .prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[ -~]{0,12}".prop_map(Value::from),
        prop::sample::select(vec!["system", "System_Auth", "\"system_schema\"", "shop"])
            .prop_map(Value::from),
        Just(Value::Null),
        Just(json!([])),
        Just(json!({})),
    ]
}

/// Keys of each section that take a value.
const SIDE_KEYS: &[&str] = &[
    "type",
    "host",
    "port",
    "keyspace",
    "table",
    "splitCount",
    "fetchSize",
    "connections",
    "maxConcurrentUnits",
    "maxInFlight",
    "rowsPerSecond",
    "bytesPerSecond",
    "writeTTLInS",
    "allowSystemKeyspace",
    "scanSegments",
    "maxMapTasks",
    "readThroughput",
    "writeThroughput",
    "throughputReadPercent",
    "throughputWritePercent",
    "region",
    "streamChanges",
    "credentials",
];
const SAVEPOINT_KEYS: &[&str] = &["path", "intervalSeconds", "keep", "autoResume"];
const VALIDATION_KEYS: &[&str] = &[
    "failuresToFetch",
    "ttlToleranceMillis",
    "writetimeToleranceMillis",
    "timestampMsTolerance",
    "floatingPointTolerance",
    "compareTimestamps",
];

fn base(dynamo: bool) -> Value {
    let side = |t: &str| {
        if dynamo {
            json!({"type": "dynamodb", "table": t, "region": "eu-west-1"})
        } else {
            json!({"type": "cassandra", "host": "127.0.0.1", "keyspace": "shop", "table": t})
        }
    };
    json!({
        "source": side("a"),
        "target": side("b"),
        "savepoints": {"path": "/nonexistent/sp", "intervalSeconds": 300},
        "validation": {},
    })
}

/// A valid job with up to six keys set to any scalar.
fn edited_job() -> impl Strategy<Value = String> {
    let edit = (
        prop::sample::select(vec!["source", "target", "savepoints", "validation"]),
        any::<prop::sample::Index>(),
        scalar(),
    );
    (any::<bool>(), prop::collection::vec(edit, 1..7)).prop_map(|(dynamo, edits)| {
        let mut doc = base(dynamo);
        for (section, key, value) in edits {
            let keys = match section {
                "savepoints" => SAVEPOINT_KEYS,
                "validation" => VALIDATION_KEYS,
                _ => SIDE_KEYS,
            };
            doc[section][keys[key.index(keys.len())]] = value;
        }
        yaml_serde::to_string(&doc).expect("JSON values serialize as YAML")
    })
}

/// Nested aliases: `levels` lists, each naming the one before `fanout` times, the first of
/// `width` scalars. Returns the text and the nodes it expands to.
fn alias_tree() -> impl Strategy<Value = (String, u64)> {
    (1u32..7, 1u64..16, 1u64..300).prop_map(|(levels, fanout, width)| {
        let mut text = format!("source: &a0 [{}]\n", vec!["x"; width as usize].join(", "));
        let mut nodes = 1 + width;
        let mut level_nodes = 1 + width;
        for level in 1..levels {
            let prev = format!("*a{}", level - 1);
            text.push_str(&format!(
                "l{level}: &a{level} [{}]\n",
                vec![prev.as_str(); fanout as usize].join(", ")
            ));
            level_nodes = level_nodes.saturating_mul(fanout).saturating_add(1);
            nodes = nodes.saturating_add(level_nodes);
        }
        text.push_str("target: {type: cassandra, host: h, keyspace: k, table: t}\n");
        (text, nodes)
    })
}

/// What every accepted job holds: each bound the engine sizes plans, pools and timers by.
fn check_accepted(job: &JobConfig) -> Result<(), TestCaseError> {
    let within = |v: Option<u64>, max: u64| v.is_none_or(|v| (1..=max).contains(&v));
    let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
    if let Some(s) = job.source.get::<drover::connectors::cql::CqlSource>() {
        prop_assert!(within(s.split_count.map(n), MAX_SPLIT_COUNT));
        prop_assert!(within(Some(n(s.fetch_size)), MAX_FETCH_SIZE));
        prop_assert!(within(s.max_concurrent_units.map(n), MAX_CONCURRENCY));
        prop_assert!(within(s.endpoint.connections.map(n), MAX_CONNECTIONS));
        prop_assert!(s.allow_system_keyspace || !is_system_keyspace(&s.endpoint.keyspace));
    }
    if let Some(s) = job
        .source
        .get::<drover::connectors::dynamodb::DynamoSource>()
    {
        prop_assert!(within(
            s.scan_segments.map(u64::from),
            u64::from(MAX_SCAN_SEGMENTS)
        ));
        prop_assert!(within(
            s.max_map_tasks.map(u64::from),
            u64::from(MAX_MAP_TASKS)
        ));
        prop_assert!(within(
            s.read_throughput.map(u64::from),
            u64::from(MAX_THROUGHPUT)
        ));
    }
    if let Some(s) = job
        .source
        .get::<drover::connectors::parquet::ParquetSource>()
    {
        use drover::connectors::parquet::config::{MAX_BATCH_SIZE, MAX_FILES_AT_ONCE};
        prop_assert!(within(Some(n(s.batch_size)), MAX_BATCH_SIZE));
        prop_assert!(within(Some(n(s.max_concurrent_files)), MAX_FILES_AT_ONCE));
    }
    if let Some(s) = job.source.get::<drover::connectors::mysql::MysqlSource>() {
        use drover::connectors::mysql::config::{MAX_FETCH_SIZE, MAX_PARTITIONS};
        prop_assert!(within(Some(n(s.fetch_size)), MAX_FETCH_SIZE));
        prop_assert!(within(
            s.partitioning.as_ref().map(|p| p.count),
            MAX_PARTITIONS
        ));
        prop_assert!(within(Some(n(s.ranges_at_once)), 256));
    }
    if let Some(s) = job
        .source
        .get::<drover::connectors::s3export::ExportSource>()
    {
        use drover::connectors::s3export::config::MAX_FILES_AT_ONCE;
        prop_assert!(within(Some(n(s.files_at_once)), MAX_FILES_AT_ONCE));
    }
    if let Some(s) = job.source.get::<drover::connectors::csv::CsvSource>() {
        use drover::connectors::csv::config::{
            MAX_BATCH_SIZE, MAX_FILES_AT_ONCE, MAX_MAX_CHARS, MAX_MAX_COLUMNS,
        };
        prop_assert!(within(Some(n(s.batch_size)), MAX_BATCH_SIZE));
        prop_assert!(within(Some(n(s.max_concurrent_files)), MAX_FILES_AT_ONCE));
        prop_assert!(within(Some(n(s.limits.max_chars_per_field)), MAX_MAX_CHARS));
        prop_assert!(within(Some(n(s.limits.max_fields)), MAX_MAX_COLUMNS));
    }
    if let Some(t) = job.target.get::<drover::connectors::cql::CqlTarget>() {
        prop_assert!(!is_system_keyspace(&t.endpoint.keyspace));
        prop_assert!(within(Some(n(t.max_in_flight)), MAX_IN_FLIGHT));
        prop_assert!(within(
            t.rows_per_second.map(u64::from),
            MAX_ROWS_PER_SECOND
        ));
        prop_assert!(within(t.bytes_per_second, MAX_BYTES_PER_SECOND));
    }
    if let Some(t) = job
        .target
        .get::<drover::connectors::dynamodb::DynamoTarget>()
    {
        prop_assert!(within(
            t.write_throughput.map(u64::from),
            u64::from(MAX_THROUGHPUT)
        ));
    }
    if let Some(sp) = &job.savepoints {
        prop_assert!(within(sp.interval_seconds, jobfile::MAX_INTERVAL_SECONDS));
        prop_assert!(within(Some(n(sp.keep)), jobfile::MAX_KEEP));
    }
    let v = &job.validation;
    prop_assert!(n(v.failures_to_fetch) <= jobfile::MAX_FAILURES_TO_FETCH);
    for t in [
        v.ttl_tolerance_millis,
        v.writetime_tolerance_millis,
        v.timestamp_ms_tolerance,
    ] {
        prop_assert!(t <= jobfile::MAX_TOLERANCE_MILLIS);
    }
    prop_assert!(v.floating_point_tolerance.is_finite() && v.floating_point_tolerance >= 0.0);
    Ok(())
}

/// An error is short: it names a key and what was wrong, and echoes little of the input.
fn check_refused(e: &JobConfigError) -> Result<(), TestCaseError> {
    prop_assert!(!e.message.is_empty());
    prop_assert!(e.message.len() < 4096, "a {} byte message", e.message.len());
    Ok(())
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match JobConfig::parse(text) {
        Ok(job) => check_accepted(&job),
        Err(e) => check_refused(&e),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_mutated_example_parses_or_is_refused_clearly(text in mutated_example()) {
        check(&text)?;
    }

    #[test]
    fn any_value_at_any_key_is_checked(text in edited_job()) {
        check(&text)?;
    }

}

proptest! {
    // Each case walks up to MAX_NODES nodes: fewer cases keep the suite quick in debug builds.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn aliases_never_expand_past_the_bound((text, nodes) in alias_tree()) {
        let parsed = JobConfig::parse(&text);
        if nodes > MAX_NODES as u64 * 2 {
            // drover's bound, or the YAML parser's own limit on replayed aliases, whichever
            // comes first: both stop before any value is built.
            let e = parsed.as_ref().expect_err("a document past the bound");
            prop_assert!(
                e.message.contains("aliases are expanded")
                    || e.message.contains("repetition limit exceeded"),
                "{}",
                e.message
            );
        }
        match parsed {
            Ok(job) => check_accepted(&job)?,
            Err(e) => {
                check_refused(&e)?;
                // Below the bound the document is read, and refused for what it says.
                if nodes < MAX_NODES as u64 / 2 {
                    prop_assert!(!e.message.contains("aliases are expanded"), "{}", e.message);
                }
            }
        }
    }
}
