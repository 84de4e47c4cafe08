use crate::savepoints::ranges::{RangeSet, TokenRange};
use serde_json::json;

use super::*;

use keys::*;

fn doc(table: &str, ranges: &[(i64, i64)]) -> serde_json::Value {
    let mut d = json!({
        "source": {"type": "cassandra", "host": "127.0.0.1", "keyspace": "ks", "table": table,
                   "credentials": {"username": "u", "password": "<redacted>"}, "splitCount": 8},
        "target": {"type": "scylla", "host": "127.0.0.2", "keyspace": "ks", "table": table},
        "renames": [],
    });
    let mut progress = Progress::default();
    progress.insert(
        &TOKEN_RANGES,
        Done::Ranges(RangeSet::from_ranges(
            ranges.iter().map(|(a, b)| TokenRange::new(*a, *b).unwrap()),
        )),
    );
    progress.into_document(&mut d, KEYS);
    d
}

#[test]
fn names_sort_chronologically_and_parse() {
    assert_eq!(
        parse_name("savepoint_1723363580123_0000000042.yaml"),
        Some((1723363580123, 42))
    );
    assert_eq!(
        parse_name("savepoint_1723363580.yaml"),
        Some((1723363580000, 0))
    );
    assert_eq!(parse_name("savepoint_12_3.yaml"), None);
    assert_eq!(parse_name("savepoint_.yaml"), None);
    assert_eq!(
        parse_name(".savepoint_1723363580123_0000000042.yaml.1.tmp"),
        None
    );
}

#[test]
fn names_strictly_increase_and_retention_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    // A name from the future: the clock "stepped back" relative to it.
    std::fs::write(
        dir.path().join("savepoint_9999999999999_0000000007.yaml"),
        "{}",
    )
    .unwrap();
    let store = FileStore::open(dir.path(), 3).unwrap();
    let mut names = Vec::new();
    for i in 0..5 {
        names.push(store.write(&doc("t", &[(i, i + 1)])).unwrap().name);
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "names increase alphabetically");
    assert!(
        names[0].as_str() > "savepoint_9999999999999_0000000007.yaml",
        "{}",
        names[0]
    );
    let listed: Vec<_> = store.list().unwrap().into_iter().map(|i| i.name).collect();
    assert_eq!(
        listed,
        names[2..].iter().rev().cloned().collect::<Vec<_>>(),
        "newest 3 kept, newest first"
    );
    // A new store on the same directory continues the sequence.
    let again = FileStore::open(dir.path(), 3).unwrap();
    assert!(again.write(&doc("t", &[])).unwrap().name > names[4]);
}

#[test]
fn resume_skips_corrupt_and_foreign_savepoints() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path(), 10).unwrap();
    store.write(&doc("t", &[(0, 10)])).unwrap();
    store.write(&doc("other", &[(0, 100)])).unwrap();
    let corrupt = store.write(&doc("t", &[(0, 50)])).unwrap();
    std::fs::write(dir.path().join(&corrupt.name), "source: [unclosed").unwrap();
    // Legacy files are read too (and are older here).
    std::fs::write(
        dir.path().join("savepoint_1000.yaml"),
        yaml_serde::to_string(&doc("t", &[(-5, 0)])).unwrap(),
    )
    .unwrap();

    let mut launch = doc("t", &[]);
    // Credentials and tuning keys are not part of the identity.
    launch["source"]["credentials"]["password"] = json!("real-secret");
    launch["source"]["splitCount"] = json!(512);
    let Lookup { found, warnings } = store.newest_usable(&identity(&launch), KEYS).unwrap();
    let (savepoint, progress) = found.expect("the oldest current savepoint of this migration");
    assert_eq!(
        progress.ranges(&TOKEN_RANGES).ranges(),
        &[TokenRange::new(0, 10).unwrap()]
    );
    assert!(savepoint.info.counter > 0);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains(&corrupt.name), "{warnings:?}");
    assert!(warnings[1].contains("another migration"), "{warnings:?}");

    // Another table: only the legacy... no: nothing of that identity but "other".
    let found = store
        .newest_usable(&identity(&doc("third", &[])), KEYS)
        .unwrap()
        .found;
    assert!(found.is_none());
}

#[test]
fn progress_round_trips_through_a_document() {
    let mut p = Progress::default();
    p.ranges_mut(&TOKEN_RANGES)
        .insert(TokenRange::new(-10, 0).unwrap());
    p.ranges_mut(&TOKEN_RANGES)
        .insert(TokenRange::new(0, 7).unwrap());
    p.numbers_mut(&NUMBERS).insert(3);
    p.names_mut(&FILES).insert("s3://b/f.parquet".into());
    let mut stream = super::StreamPositions::start("arn:s", 42);
    stream.applied("shard-1", "400000000000000000000000000000000000001");
    stream.finished("shard-0");
    p.set_stream(&STREAM, stream);
    let mut d = json!({"skipMySqlRanges": ["stale"]});
    p.into_document(&mut d, KEYS);
    // Migrator's keys are written even when empty; drover's are removed when empty.
    assert_eq!(d["skipSegments"], json!([3]));
    assert!(d.get("skipMySqlRanges").is_none(), "{d}");
    assert!(d.get("bulkWriteRun").is_none(), "{d}");
    let mut empty = json!({});
    Progress::default().into_document(&mut empty, KEYS);
    assert_eq!(
        empty,
        json!({"skipTokenRanges": [], "skipSegments": [], "skipParquetFiles": []})
    );
    // Each range as recorded, in ScyllaDB Migrator's typed encoding.
    assert_eq!(
        d["skipTokenRanges"],
        json!([
            [{"type": "long", "value": -10}, {"type": "long", "value": 0}],
            [{"type": "long", "value": 0}, {"type": "long", "value": 7}]
        ])
    );
    assert_eq!(
        d["streamPositions"],
        json!({"stream": "arn:s", "since": 42, "shards": {"shard-1": "400000000000000000000000000000000000001"}, "finishedShards": ["shard-0"]})
    );
    assert_eq!(Progress::from_document(&d, KEYS).unwrap(), p);
    let line = p.to_string();
    assert!(
        line.contains("stream: 1 shard applied to its end, positions [shard-1 after 4000"),
        "{line}"
    );
    let e = Progress::from_document(&json!({"skipTokenRanges": [[5, 1]]}), KEYS).unwrap_err();
    assert!(e.starts_with("skipTokenRanges: "), "{e}");
    let e = Progress::from_document(&json!({"skipSegments": ["a"]}), KEYS).unwrap_err();
    assert!(
        e.starts_with("skipSegments: expected a list of segments (numbers)"),
        "{e}"
    );
    // Keys the list does not name are not read.
    assert!(
        Progress::from_document(&json!({"skipSegments": ["a"]}), &[&TOKEN_RANGES])
            .unwrap()
            .is_empty()
    );
}

/// 100k completed units, finished in any order: the savepoint stays a few kilobytes (merged
/// intervals past `MAX_PAIRS`), whatever backend stores it.
#[test]
fn a_hundred_thousand_units_keep_a_savepoint_small() {
    let n: i64 = 100_000;
    let width = (u64::MAX / n as u64) as i64;
    let unit = |i: i64| {
        let start = (i64::MIN as i128 + i as i128 * width as i128) as i64;
        let end = if i == n - 1 { i64::MAX } else { start + width };
        TokenRange::new(start, end).unwrap()
    };
    // A scrambled order, as units finish `maxConcurrentUnits` at a time.
    let mut order: Vec<i64> = (0..n).collect();
    for i in 0..order.len() {
        let j = (i * 7919 + 13) % order.len();
        order.swap(i, j);
    }
    let mut progress = Progress::default();
    for (k, i) in order.iter().enumerate() {
        if k % 1000 == 999 {
            // Every thousandth unit is still running when the savepoint is taken.
            continue;
        }
        progress.ranges_mut(&TOKEN_RANGES).insert(unit(*i));
    }
    let mut d = json!({"source": {}, "target": {}});
    progress.into_document(&mut d, KEYS);
    let text = super::render_document(&d);
    assert!(text.len() < 64 * 1024, "{} bytes", text.len());
    let back = Progress::from_document(&super::parse_document("x", &text).unwrap(), KEYS).unwrap();
    assert_eq!(
        back.ranges(&TOKEN_RANGES).ranges(),
        progress.ranges(&TOKEN_RANGES).ranges()
    );
    assert_eq!(
        back.ranges(&TOKEN_RANGES).ranges().len(),
        101,
        "100 gaps: 101 intervals"
    );
}

#[test]
fn a_bulk_load_id_survives_a_round_trip_and_the_first_one_recorded_wins() {
    let mut d = doc("t", &[(0, 10)]);
    let mut progress = Progress::from_document(&d, KEYS).unwrap();
    assert_eq!(progress.id(&RUN), None);
    assert!(
        d.get(RUN.name).is_none(),
        "absent unless a bulk load set it"
    );
    let before = progress.clone();
    assert_eq!(
        progress.id_or_insert_with(&RUN, || "load-1".into()),
        "load-1"
    );
    assert!(progress.has_new_id_since(&before));
    assert!(!progress.has_new_id_since(&progress.clone()));
    assert!(!progress.is_empty(), "the token ranges are work");
    progress.into_document(&mut d, KEYS);
    let read = Progress::from_document(&d, KEYS).unwrap();
    assert_eq!(read.id(&RUN), Some("load-1"));

    // A resumed run keeps the load it resumes; a later id never replaces it.
    let mut resumed = read.clone();
    let mut later = Progress::default();
    later.insert(&RUN, Done::Id("load-2".into()));
    assert!(later.is_empty(), "an id is not work of its own");
    resumed.merge(&later);
    assert_eq!(resumed.id(&RUN), Some("load-1"));
    let mut fresh = Progress::default();
    fresh.merge(&read);
    assert_eq!(fresh.id(&RUN), Some("load-1"));

    for bad in [json!(""), json!(7), json!("x".repeat(65))] {
        d[RUN.name] = bad;
        let e = Progress::from_document(&d, KEYS).unwrap_err();
        assert!(e.contains("bulkWriteRun"), "{e}");
    }
    // 64 characters is the longest id.
    d[RUN.name] = json!("x".repeat(64));
    assert_eq!(
        Progress::from_document(&d, KEYS).unwrap().id(&RUN),
        Some("x".repeat(64).as_str())
    );
}

#[test]
#[should_panic(expected = "savepoint key skipSegments is declared Numbers, used as names")]
fn a_key_used_with_another_shape_is_a_bug_that_says_so() {
    Progress::default().names(&NUMBERS);
}

/// Keys of each shape, as connectors declare theirs (this layer names no connector).
pub(super) mod keys {
    use crate::savepoints::{Key, Shape, TOKEN_RANGES};

    pub static NUMBERS: Key = Key {
        name: "skipSegments",
        shape: Shape::Numbers,
        label: "segments",
        always: true,
    };
    pub static FILES: Key = Key {
        name: "skipParquetFiles",
        shape: Shape::Names { listed: true },
        label: "Parquet files",
        always: true,
    };
    pub static CONDITIONS: Key = Key {
        name: "skipMySqlRanges",
        shape: Shape::Names { listed: false },
        label: "MySQL ranges",
        always: false,
    };
    pub static STREAM: Key = Key {
        name: "streamPositions",
        shape: Shape::Stream,
        label: "stream",
        always: false,
    };
    pub static RUN: Key = Key {
        name: "bulkWriteRun",
        shape: Shape::Id,
        label: "bulk load",
        always: false,
    };
    pub static KEYS: &[&Key] = &[&TOKEN_RANGES, &NUMBERS, &FILES, &CONDITIONS, &STREAM, &RUN];
}
