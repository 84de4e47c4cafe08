use crate::savepoints::ranges::TokenRange;
use serde_json::json;

use super::*;

fn doc(table: &str, ranges: &[(i64, i64)]) -> serde_json::Value {
    let mut d = json!({
        "source": {"type": "cassandra", "host": "127.0.0.1", "keyspace": "ks", "table": table,
                   "credentials": {"username": "u", "password": "<redacted>"}, "splitCount": 8},
        "target": {"type": "scylla", "host": "127.0.0.2", "keyspace": "ks", "table": table},
        "renames": [],
    });
    let progress = Progress {
        token_ranges: RangeSet::from_ranges(
            ranges.iter().map(|(a, b)| TokenRange::new(*a, *b).unwrap()),
        ),
        ..Default::default()
    };
    progress.into_document(&mut d);
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
    let Lookup { found, warnings } = store.newest_usable(&identity(&launch)).unwrap();
    let (savepoint, progress) = found.expect("the oldest current savepoint of this migration");
    assert_eq!(
        progress.token_ranges.ranges(),
        &[TokenRange::new(0, 10).unwrap()]
    );
    assert!(savepoint.info.counter > 0);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains(&corrupt.name), "{warnings:?}");
    assert!(warnings[1].contains("another migration"), "{warnings:?}");

    // Another table: only the legacy... no: nothing of that identity but "other".
    let found = store
        .newest_usable(&identity(&doc("third", &[])))
        .unwrap()
        .found;
    assert!(found.is_none());
}

#[test]
fn progress_round_trips_through_a_document() {
    let mut p = Progress::default();
    p.token_ranges.insert(TokenRange::new(-10, 0).unwrap());
    p.token_ranges.insert(TokenRange::new(0, 7).unwrap());
    p.segments.insert(3);
    p.parquet_files.insert("s3://b/f.parquet".into());
    let mut stream = super::StreamPositions::start("arn:s", 42);
    stream.applied("shard-1", "400000000000000000000000000000000000001");
    stream.finished("shard-0");
    p.stream = Some(stream);
    let mut d = json!({});
    p.into_document(&mut d);
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
    assert_eq!(Progress::from_document(&d).unwrap(), p);
    let line = p.to_string();
    assert!(
        line.contains("stream: 1 shard applied to its end, positions [shard-1 after 4000"),
        "{line}"
    );
    assert!(Progress::from_document(&json!({"skipTokenRanges": [[5, 1]]})).is_err());
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
        progress.token_ranges.insert(unit(*i));
    }
    let mut d = json!({"source": {}, "target": {}});
    progress.into_document(&mut d);
    let text = super::render_document(&d);
    assert!(text.len() < 64 * 1024, "{} bytes", text.len());
    let back = Progress::from_document(&super::parse_document("x", &text).unwrap()).unwrap();
    assert_eq!(back.token_ranges.ranges(), progress.token_ranges.ranges());
    assert_eq!(
        back.token_ranges.ranges().len(),
        101,
        "100 gaps: 101 intervals"
    );
}

#[test]
fn a_bulk_load_id_survives_a_round_trip_and_the_first_one_recorded_wins() {
    let mut d = doc("t", &[(0, 10)]);
    let mut progress = Progress::from_document(&d).unwrap();
    assert_eq!(progress.bulk_run, None);
    assert!(
        d.get(BULK_RUN_KEY).is_none(),
        "absent unless a bulk load set it"
    );
    progress.bulk_run = Some("load-1".into());
    progress.into_document(&mut d);
    let read = Progress::from_document(&d).unwrap();
    assert_eq!(read.bulk_run.as_deref(), Some("load-1"));

    // A resumed run keeps the load it resumes; a later id never replaces it.
    let mut resumed = read.clone();
    resumed.merge(&Progress {
        bulk_run: Some("load-2".into()),
        ..Default::default()
    });
    assert_eq!(resumed.bulk_run.as_deref(), Some("load-1"));
    let mut fresh = Progress::default();
    fresh.merge(&read);
    assert_eq!(fresh.bulk_run.as_deref(), Some("load-1"));

    for bad in [json!(""), json!(7), json!("x".repeat(65))] {
        d[BULK_RUN_KEY] = bad;
        let e = Progress::from_document(&d).unwrap_err();
        assert!(e.contains("bulkWriteRun"), "{e}");
    }
}
