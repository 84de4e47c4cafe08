//! The generic merge of `validate::merge`, fed rows of a CQL table.

use std::sync::Arc;

use bytes::Bytes;
use scylla::cluster::metadata::{ColumnType, NativeType};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::connectors::seam::limits::Limits;
use crate::engine::EngineError;
use crate::validate::merge::{Cursor, Feed, Merge};
use crate::validate::progress::Progress;
use crate::validate::report::Report;

// Merging two streams, without Cassandra. Cassandra always returns a range's rows in its
// own order, and drover orders every clustering type as it does, so a stream out of order
// (and a source row with a null partition key, which Cassandra refuses to store) cannot be
// produced through the real services: the merge is fed streams of its own here.

fn int(v: i32) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}

/// `(p int, c int, v int, PRIMARY KEY (p, c))`, `c` DESC when `desc`.
fn spec(desc: bool) -> CqlComparator {
    let col = |name: &str| Column {
        name: name.into(),
        typ: ColumnType::Native(NativeType::Int),
    };
    CqlComparator {
        source: TableSchema {
            keyspace: "ks".into(),
            table: "t".into(),
            partition_key: vec![col("p")],
            clustering_key: vec![col("c")],
            statics: vec![],
            regular: vec![col("v")],
        },
        target_names: vec!["p".into(), "c".into(), "v".into()],
        np: 1,
        nc: 1,
        ns: 0,
        nr: 1,
        token_at: 3,
        clustering_desc: vec![desc],
        tolerance: Tolerance::default(),
        compare_timestamps: false,
        ttl_tolerance_ms: 0,
        writetime_tolerance_us: 0,
        fixed_ttl: None,
        fixed_timestamp: None,
    }
}

/// A row `(p, c, v)` of a partition whose token is `token`.
fn row(token: i64, p: Option<i32>, c: i32, v: i32) -> RawRow {
    RawRow {
        cells: vec![
            p.and_then(int),
            int(c),
            int(v),
            Some(Bytes::copy_from_slice(&token.to_be_bytes())),
        ],
    }
}

/// One side's scan: these pages, then the end of the range.
fn stream(side: &'static str, pages: Vec<Vec<RawRow>>) -> Cursor<RawRow> {
    let (tx, rx) = mpsc::channel(pages.len() + 1);
    for page in pages {
        tx.try_send(Feed::Rows(page, std::time::Instant::now()))
            .unwrap();
    }
    tx.try_send(Feed::End).unwrap();
    Cursor::new(side, rx)
}

async fn merge(
    desc: bool,
    source: Vec<Vec<RawRow>>,
    target: Vec<Vec<RawRow>>,
) -> Result<Report, EngineError> {
    let comparator = spec(desc);
    let progress = Arc::new(Progress::default());
    let limits = Limits::new(None, None);
    let cancel = CancellationToken::new();
    let merge = Merge {
        comparator: &comparator,
        repair: None,
        progress: &progress,
        limits: &limits,
        cancel: &cancel,
        max_examples: 10,
    };
    let mut report = Report::default();
    merge
        .run(
            stream("source", source),
            stream("target", target),
            &mut report,
        )
        .await?;
    Ok(report)
}

fn failure(result: Result<Report, EngineError>) -> String {
    match result {
        Err(EngineError::Failed(message)) => message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn rows_out_of_order_fail_the_merge_with_both_keys() {
    // In order, the streams merge: a missing row, a different row, an extra row.
    let asc = vec![row(5, Some(1), 1, 0), row(5, Some(1), 2, 0)];
    let report = merge(
        false,
        vec![vec![row(-7, Some(9), 1, 0)], asc.clone()],
        vec![
            vec![row(5, Some(1), 1, 0), row(5, Some(1), 2, 1)],
            vec![row(8, Some(2), 1, 0)],
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        (report.source_rows, report.target_rows, report.rows_matched),
        (3, 3, 1)
    );
    let d = report.differences;
    assert_eq!(
        (d.missing_rows, d.extra_rows, d.different_values),
        (1, 1, 1)
    );

    // A source row of the same partition with a lower clustering value, in the next page.
    let message = failure(
        merge(
            false,
            vec![
                vec![row(5, Some(1), 1, 0), row(5, Some(1), 3, 0)],
                vec![row(5, Some(1), 2, 0)],
            ],
            vec![vec![
                row(5, Some(1), 1, 0),
                row(5, Some(1), 2, 0),
                row(5, Some(1), 3, 0),
            ]],
        )
        .await,
    );
    assert!(
        message.starts_with("source rows arrived out of the order drover expects"),
        "{message}"
    );
    assert!(
        message.contains("(p = 1 AND c = 3 then p = 1 AND c = 2)"),
        "{message}"
    );

    // A target row of a lower token after a higher one.
    let message = failure(
        merge(
            false,
            vec![vec![row(3, Some(4), 1, 0), row(9, Some(2), 1, 0)]],
            vec![vec![row(9, Some(2), 1, 0), row(3, Some(4), 1, 0)]],
        )
        .await,
    );
    assert!(
        message.starts_with("target rows arrived out of"),
        "{message}"
    );
    assert!(
        message.contains("(p = 2 AND c = 1 then p = 4 AND c = 1)"),
        "{message}"
    );

    // A row equal to the one before it is out of order too (a key seen twice).
    let message = failure(
        merge(
            false,
            vec![vec![row(5, Some(1), 1, 0), row(5, Some(1), 1, 0)]],
            vec![],
        )
        .await,
    );
    assert!(
        message.contains("(p = 1 AND c = 1 then p = 1 AND c = 1)"),
        "{message}"
    );

    // DESC: descending rows merge, ascending ones are out of order.
    let desc: Vec<RawRow> = asc.iter().rev().cloned().collect();
    let report = merge(true, vec![desc.clone()], vec![desc]).await.unwrap();
    assert_eq!(report.rows_matched, 2);
    let message = failure(merge(true, vec![asc.clone()], vec![asc]).await);
    assert!(
        message.contains("(p = 1 AND c = 1 then p = 1 AND c = 2)"),
        "{message}"
    );
}

#[tokio::test]
async fn source_rows_with_a_null_partition_key_are_skipped_not_compared() {
    let report = merge(
        false,
        vec![vec![
            row(-3, None, 1, 0),
            row(5, Some(1), 1, 0),
            row(6, None, 2, 0),
        ]],
        vec![vec![row(5, Some(1), 1, 0)]],
    )
    .await
    .unwrap();
    assert_eq!(report.rows_skipped, 2);
    assert_eq!(
        (report.source_rows, report.target_rows, report.rows_compared),
        (1, 1, 1)
    );
    assert_eq!(report.rows_matched, 1);
    assert!(report.is_clean(), "{report:?}");
    assert!(report.examples.is_empty());
}
