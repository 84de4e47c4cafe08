//! The ranges a MySQL table is read in. Each range is a condition on one column; it names
//! the range in the savepoints, so a resumed run that plans the same ranges skips the ones
//! recorded there, and one that plans others (the job's partitioning changed) reads them all
//! again rather than skip rows.

use std::sync::Arc;

use super::config::{Bound, Partitioning, quote, unquote};
use super::schema::SourceTable;
use super::{MysqlError, MysqlSource};
use crate::connectors::seam::{Plan, Unit};
use crate::savepoints;

/// The condition of a range that is the whole table.
pub const WHOLE_TABLE: &str = "TRUE";
/// A range read at once, at most, by drover's own split of an integer key.
const ROWS_PER_RANGE: u64 = 100_000;
/// The most ranges drover's own split makes.
const MAX_OWN_RANGES: u64 = 1024;

/// One range of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeUnit {
    /// Its SQL condition (also its name in `skipMySqlRanges`).
    pub condition: Arc<str>,
}

impl std::fmt::Display for RangeUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "range {}", self.condition)
    }
}

impl Unit for RangeUnit {
    fn record(&self, done: &mut savepoints::Progress) {
        done.names_mut(&super::RANGES)
            .insert(self.condition.to_string());
    }

    fn key(&self) -> String {
        self.condition.to_string()
    }
}

/// How a column's values are counted when split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    Integer,
    /// Days since 1970.
    Days,
    /// Microseconds since 1970.
    Micros,
}

fn render(scale: Scale, v: i128) -> String {
    match scale {
        Scale::Integer => v.to_string(),
        Scale::Days => {
            let d = chrono::DateTime::from_timestamp((v as i64) * 86_400, 0)
                .expect("in range")
                .date_naive();
            format!("'{}'", d.format("%Y-%m-%d"))
        }
        Scale::Micros => {
            let t = chrono::DateTime::from_timestamp_micros(v as i64).expect("in range");
            format!("'{}'", t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f"))
        }
    }
}

/// Conditions splitting `column` at `cuts` (ascending): below the first cut (and NULL, when
/// `nulls`), between each pair, from the last on.
fn conditions(column: &str, scale: Scale, cuts: &[i128], nulls: bool) -> Vec<String> {
    if cuts.is_empty() {
        return vec![WHOLE_TABLE.to_string()];
    }
    let c = quote(column);
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let first = format!("{c} < {}", render(scale, cuts[0]));
    out.push(if nulls {
        format!("{first} OR {c} IS NULL")
    } else {
        first
    });
    for pair in cuts.windows(2) {
        out.push(format!(
            "{c} >= {} AND {c} < {}",
            render(scale, pair[0]),
            render(scale, pair[1])
        ));
    }
    out.push(format!(
        "{c} >= {}",
        render(scale, *cuts.last().expect("not empty"))
    ));
    out
}

/// Spark's JDBC split (`JDBCRelation.columnPartition`): `count` strides of
/// `upper/count - lower/count` from `lower`; fewer when the bounds are closer than `count`.
fn spark_cuts(lower: i128, upper: i128, count: u64) -> Vec<i128> {
    let requested = i128::from(count);
    let n = if upper - lower >= requested {
        requested
    } else {
        (upper - lower).max(1)
    };
    let stride = upper / n - lower / n;
    (1..n).map(|i| lower + i * stride).collect()
}

fn bound_value(
    key: &str,
    bound: &Bound,
    scale: Scale,
    column: &str,
    typ: &str,
) -> Result<i128, MysqlError> {
    let invalid = |expected: &str| MysqlError::Invalid {
        key: key.into(),
        message: format!(
            "{:?} does not fit the partition column {column:?} of type {typ}: expected {expected}",
            bound.0
        ),
    };
    match scale {
        Scale::Integer => bound
            .integer()
            .map(i128::from)
            .ok_or_else(|| invalid("an integer")),
        Scale::Days => match bound.instant() {
            Some((micros, false)) => Ok(i128::from(micros / 86_400_000_000)),
            _ => Err(invalid("a date such as 2024-01-01")),
        },
        Scale::Micros => bound
            .instant()
            .map(|(m, _)| i128::from(m))
            .ok_or_else(|| invalid("a date or timestamp such as 2024-01-01 00:00:00")),
    }
}

/// The ranges of `partitionColumn`, as ScyllaDB Migrator's Spark reader makes them.
pub fn partitioned(p: &Partitioning, table: &SourceTable) -> Result<Vec<String>, MysqlError> {
    let name = unquote(&p.column);
    let column = table.column(&name).ok_or_else(|| MysqlError::Invalid {
        key: "source.partitionColumn".into(),
        message: format!(
            "{name:?} is not a column of {}; its columns: {}",
            table.name,
            table
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })?;
    let scale = if column.is_integer() {
        Scale::Integer
    } else {
        match column.data_type.as_str() {
            "date" => Scale::Days,
            "datetime" | "timestamp" => Scale::Micros,
            other => {
                return Err(MysqlError::Invalid {
                    key: "source.partitionColumn".into(),
                    message: format!(
                        "{name:?} is of type {other}; a partition column must be an integer, DATE, DATETIME or TIMESTAMP column"
                    ),
                });
            }
        }
    };
    let lower = bound_value(
        "source.lowerBound",
        &p.lower,
        scale,
        &name,
        &column.column_type,
    )?;
    let upper = bound_value(
        "source.upperBound",
        &p.upper,
        scale,
        &name,
        &column.column_type,
    )?;
    Ok(conditions(
        &column.name,
        scale,
        &spark_cuts(lower, upper, p.count),
        true,
    ))
}

/// drover's own split when the job has no partition column: the key's first column, when it
/// is an integer, cut at multiples of a power of two (so that the same table planned again
/// after some writes mostly gives the same ranges); otherwise the whole table.
pub async fn by_key(
    conn: &mut mysql_async::Conn,
    src: &MysqlSource,
    table: &SourceTable,
    key: &[String],
) -> Result<Vec<String>, MysqlError> {
    use mysql_async::prelude::Queryable;
    let Some(first) = key.first().and_then(|k| table.column(k)) else {
        return Ok(vec![WHOLE_TABLE.to_string()]);
    };
    let wanted = table
        .estimated_rows
        .div_ceil(ROWS_PER_RANGE)
        .clamp(1, MAX_OWN_RANGES);
    let wanted = if table.estimated_rows >= 10_000 {
        wanted.max(src.ranges_at_once as u64)
    } else {
        wanted
    };
    if !first.is_integer() || wanted <= 1 {
        return Ok(vec![WHOLE_TABLE.to_string()]);
    }
    let c = quote(&first.name);
    let sql = format!(
        "SELECT CAST(MIN({c}) AS CHAR), CAST(MAX({c}) AS CHAR) FROM {}.{}",
        quote(&src.database),
        quote(&src.table)
    );
    let row: Option<(Option<String>, Option<String>)> = conn
        .query_first(sql)
        .await
        .map_err(|e| MysqlError::query(format!("reading the key bounds of {}", table.name), e))?;
    let Some((Some(min), Some(max))) = row else {
        return Ok(vec![WHOLE_TABLE.to_string()]);
    };
    let (Ok(min), Ok(max)) = (min.parse::<i128>(), max.parse::<i128>()) else {
        return Ok(vec![WHOLE_TABLE.to_string()]);
    };
    let width = max - min + 1;
    let stride = (width / i128::from(wanted)).max(1);
    let stride = 1i128 << (128 - (stride - 1).leading_zeros()).min(126);
    let start = min.div_euclid(stride) * stride + stride;
    let cuts: Vec<i128> = (0..)
        .map(|i| start + i * stride)
        .take_while(|cut| *cut <= max)
        .collect();
    Ok(conditions(&first.name, Scale::Integer, &cuts, false))
}

/// The ranges left to read.
pub fn plan(conditions: Vec<String>, done: &savepoints::Progress) -> Plan<RangeUnit> {
    let total = conditions.len() as u64;
    let unknown: Vec<&String> = done
        .names(&super::RANGES)
        .iter()
        .filter(|d| !conditions.contains(d))
        .collect();
    if !unknown.is_empty() {
        tracing::warn!(
            "{} range(s) recorded as done are not ranges of this run (the partitioning changed?), the first: {}; every row of this run's ranges is read",
            unknown.len(),
            unknown[0]
        );
    }
    let work: Vec<RangeUnit> = conditions
        .into_iter()
        .filter(|c| !done.names(&super::RANGES).contains(c))
        .map(|c| RangeUnit {
            condition: c.into(),
        })
        .collect();
    Plan {
        total,
        skipped: total - work.len() as u64,
        work,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spark_splits_numbers_dates_and_timestamps() {
        assert_eq!(
            conditions("id", Scale::Integer, &spark_cuts(0, 1000, 4), true),
            [
                "`id` < 250 OR `id` IS NULL",
                "`id` >= 250 AND `id` < 500",
                "`id` >= 500 AND `id` < 750",
                "`id` >= 750"
            ]
        );
        // Closer bounds than ranges: one range per value.
        assert_eq!(spark_cuts(0, 3, 10), [1, 2]);
        let lower = Bound("2024-01-01 00:00:00".into()).instant().unwrap().0;
        let upper = Bound("2024-02-01 00:00:00".into()).instant().unwrap().0;
        assert_eq!(
            conditions(
                "created_at",
                Scale::Micros,
                &spark_cuts(lower.into(), upper.into(), 2),
                true
            ),
            [
                "`created_at` < '2024-01-16 12:00:00.000000' OR `created_at` IS NULL",
                "`created_at` >= '2024-01-16 12:00:00.000000'"
            ]
        );
        assert_eq!(
            conditions("d", Scale::Days, &spark_cuts(19723, 19754, 2), true)[1],
            "`d` >= '2024-01-17'"
        );
        assert_eq!(
            conditions("id", Scale::Integer, &spark_cuts(0, 10, 1), true),
            [WHOLE_TABLE]
        );
    }

    #[test]
    fn recorded_ranges_are_skipped_and_others_read() {
        let mut done = savepoints::Progress::default();
        let ranges = done.names_mut(&super::super::RANGES);
        ranges.insert("`id` >= 250 AND `id` < 500".into());
        ranges.insert("`other` < 3".into());
        let p = plan(
            conditions("id", Scale::Integer, &spark_cuts(0, 1000, 4), true),
            &done,
        );
        assert_eq!((p.total, p.skipped, p.work.len()), (4, 1, 3));
        assert!(
            p.work
                .iter()
                .all(|u| &*u.condition != "`id` >= 250 AND `id` < 500")
        );
    }
}
