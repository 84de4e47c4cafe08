//! What a CQL table holds, from `system.size_estimates`: each node's estimate of the
//! partitions in its primary token ranges and their mean size, kept by Cassandra from its
//! SSTables' statistics (recomputed every `size_recorder_interval`, 5 minutes by default, or
//! by `nodetool refreshsizeestimates`; rows still in memtables are not in it).
//!
//! The estimates count partitions, not rows: the copy counts the partitions it reads too
//! ([`partitions_begun`]) and learns the rows per partition from its first page (see
//! `engine::estimate`).

use std::collections::HashMap;
use std::time::Duration;

use scylla::client::session::Session;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::unprepared::Statement;

use super::rows::RawRow;
use super::schema::TableSchema;
use super::units::TokenUnit;
use crate::connectors::seam::Expected;

/// How long asking every node may take: the copy starts without an estimate after it.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// One token range of a node's estimate: `(start, end]`, partitions, mean partition bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeEstimate {
    start: i64,
    end: i64,
    partitions: f64,
    mean_bytes: f64,
}

/// What each unit of `work` holds, by the estimates of every node that answered; every
/// `None` when none has any (a table never flushed, or estimates not computed yet).
pub async fn expected(
    session: &Session,
    table: &TableSchema,
    work: &[TokenUnit],
) -> Vec<Option<Expected>> {
    let ranges = match tokio::time::timeout(ASK_TIMEOUT, size_estimates(session, table)).await {
        Ok(ranges) => ranges,
        Err(_) => {
            tracing::info!(
                "system.size_estimates did not answer within {} s: the copy's total is learnt from its first units",
                ASK_TIMEOUT.as_secs()
            );
            Vec::new()
        }
    };
    let expected = apportion(&ranges, work);
    let partitions: f64 = expected.iter().flatten().map(|e| e.count).sum();
    if ranges.is_empty() {
        tracing::info!(
            "system.size_estimates has nothing on {}: the copy's total is learnt from its first units",
            table.qualified()
        );
    } else {
        tracing::info!(
            "system.size_estimates: about {partitions:.0} partitions to copy in {} ({} ranges)",
            table.qualified(),
            ranges.len()
        );
    }
    expected
}

/// Every node's `system.size_estimates` rows for `table` (a node's own table: asked of each
/// node in turn); nodes that fail to answer are left out.
async fn size_estimates(session: &Session, table: &TableSchema) -> Vec<RangeEstimate> {
    let mut seen = HashMap::new();
    let state = session.get_cluster_state();
    for node in state.get_nodes_info() {
        let mut statement = Statement::new(
            "SELECT range_start, range_end, partitions_count, mean_partition_size \
             FROM system.size_estimates WHERE keyspace_name = ? AND table_name = ?",
        );
        statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
            NodeIdentifier::Node(node.clone()),
            None,
        )));
        let rows = match session
            .query_unpaged(statement, (&table.keyspace, &table.table))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_rows_result().map_err(|e| e.to_string()))
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::debug!("system.size_estimates of {}: {e}", node.address);
                continue;
            }
        };
        let Ok(iter) = rows.rows::<(String, String, i64, i64)>() else {
            continue;
        };
        for (start, end, partitions, mean) in iter.flatten() {
            let (Ok(start), Ok(end)) = (start.parse::<i64>(), end.parse::<i64>()) else {
                continue;
            };
            seen.insert(
                (start, end),
                RangeEstimate {
                    start,
                    end,
                    partitions: partitions.max(0) as f64,
                    mean_bytes: mean.max(0) as f64,
                },
            );
        }
    }
    seen.into_values().collect()
}

/// Spreads the ranges' estimates over the units by the share of each range a unit covers
/// (partitions are spread evenly over a range's tokens by the partitioner). Parts of the ring
/// no range covers (a node that did not answer) get the covered parts' mean density.
fn apportion(ranges: &[RangeEstimate], work: &[TokenUnit]) -> Vec<Option<Expected>> {
    // `(start, end]` as i128, a range that wraps around the ring split in two.
    let mut flat: Vec<(i128, i128, f64, f64)> = Vec::new();
    for r in ranges {
        let (s, e) = (i128::from(r.start), i128::from(r.end));
        let pieces = if s < e {
            vec![(s, e)]
        } else {
            vec![(s, i128::from(i64::MAX)), (i128::from(i64::MIN), e)]
        };
        let width: i128 = pieces.iter().map(|(a, b)| b - a).sum();
        if width <= 0 {
            continue;
        }
        for (a, b) in pieces {
            let share = (b - a) as f64 / width as f64;
            flat.push((a, b, r.partitions * share, r.mean_bytes));
        }
    }
    if flat.is_empty() {
        return vec![None; work.len()];
    }
    let covered: f64 = flat.iter().map(|(a, b, _, _)| (b - a) as f64).sum();
    let all: f64 = flat.iter().map(|(_, _, p, _)| p).sum();
    let density = all / covered.max(1.0);
    let mean_bytes = if all > 0.0 {
        flat.iter().map(|(_, _, p, m)| p * m).sum::<f64>() / all
    } else {
        0.0
    };
    work.iter()
        .map(|unit| {
            let (mut count, mut bytes) = (0.0, 0.0);
            for piece in &unit.pieces {
                let (s, e) = (i128::from(piece.start), i128::from(piece.end));
                let mut seen = 0i128;
                for &(a, b, p, m) in &flat {
                    let overlap = (e.min(b) - s.max(a)).max(0);
                    if overlap > 0 {
                        let part = p * overlap as f64 / (b - a) as f64;
                        count += part;
                        bytes += part * m;
                        seen += overlap;
                    }
                }
                let uncovered = ((e - s) - seen).max(0) as f64;
                count += uncovered * density;
                bytes += uncovered * density * mean_bytes;
            }
            Some(Expected {
                count,
                bytes,
                exact: false,
            })
        })
        .collect()
}

/// Partitions begun in a page whose rows start with the `key_columns` partition key columns
/// (rows of a partition are consecutive): the measure `system.size_estimates` counts. A
/// partition split over two pages counts in both, one extra per page.
pub fn partitions_begun(rows: &[RawRow], key_columns: usize) -> u64 {
    let mut last: Option<&[Option<bytes::Bytes>]> = None;
    let mut n = 0;
    for row in rows {
        let key = &row.cells[..key_columns.min(row.cells.len())];
        if last != Some(key) {
            n += 1;
            last = Some(key);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::savepoints::ranges::TokenRange;

    fn unit(start: i64, end: i64) -> TokenUnit {
        TokenUnit {
            pieces: vec![TokenRange::new(start, end).unwrap()],
        }
    }

    #[test]
    fn ranges_spread_over_units_by_the_tokens_they_share() {
        let ranges = [
            RangeEstimate {
                start: 0,
                end: 1000,
                partitions: 100.0,
                mean_bytes: 10.0,
            },
            // Wraps around the ring: (i64::MAX - 999, i64::MAX] and (i64::MIN, i64::MIN + 1000].
            RangeEstimate {
                start: i64::MAX - 1000,
                end: i64::MIN + 1000,
                partitions: 400.0,
                mean_bytes: 20.0,
            },
        ];
        let got = apportion(&ranges, &[unit(500, 1000), unit(i64::MIN, i64::MIN + 500)]);
        let got: Vec<(f64, f64)> = got
            .iter()
            .map(|e| e.map(|e| (e.count, e.bytes)).unwrap())
            .collect();
        assert!((got[0].0 - 50.0).abs() < 1e-6, "{got:?}");
        assert!((got[0].1 - 500.0).abs() < 1e-6, "{got:?}");
        // 500 of the wrapping range's 2,000 tokens, about.
        assert!((got[1].0 - 100.0).abs() < 0.1, "{got:?}");
        assert!((got[1].1 - 2000.0).abs() < 2.0, "{got:?}");
    }

    #[test]
    fn parts_no_node_covers_get_the_mean_density() {
        let ranges = [RangeEstimate {
            start: 0,
            end: 1000,
            partitions: 100.0,
            mean_bytes: 10.0,
        }];
        let got = apportion(&ranges, &[unit(1000, 3000)]);
        assert!((got[0].unwrap().count - 200.0).abs() < 1e-6);
        assert_eq!(apportion(&[], &[unit(0, 1)]), vec![None]);
    }

    #[test]
    fn partitions_begun_in_a_page() {
        let row = |k: &'static [u8], c: &'static [u8]| RawRow {
            cells: vec![
                Some(bytes::Bytes::from_static(k)),
                Some(bytes::Bytes::from_static(c)),
            ],
        };
        let rows = [
            row(b"a", b"1"),
            row(b"a", b"2"),
            row(b"b", b"1"),
            row(b"c", b"1"),
            row(b"c", b"2"),
        ];
        assert_eq!(partitions_begun(&rows, 1), 3);
        assert_eq!(partitions_begun(&rows, 2), 5);
        assert_eq!(partitions_begun(&[], 1), 0);
    }
}
