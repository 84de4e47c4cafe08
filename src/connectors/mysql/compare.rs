//! Validating a MySQL → CQL copy: the table's ranges are read as the copy reads them (the same
//! conversion into CQL cells), and each page's keys are looked up in the target by primary
//! key; then, unless the job has a `where` filter, the target is read by token ranges and each
//! page's keys are looked up in MySQL, to find rows only the target has. With a filter, rows
//! the filter leaves out of the source may be in the target for reasons of their own: the
//! second pass is skipped, as ScyllaDB Migrator's MySQL validator ignores such rows, and the
//! log says so.
//!
//! Cells are compared as the CQL validator compares them (`floatingPointTolerance`,
//! `timestampMsTolerance`, `stripTrailingZerosForDecimals`); writetimes and TTLs do not apply
//! (MySQL has none).

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use mysql_async::prelude::Queryable;
use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::statement::prepared::PreparedStatement;

use super::config::quote;
use super::convert::Conv;
use super::scan::{KeySource, MysqlScan, Prepared, Reader};
use super::units::RangeUnit;
use super::{MysqlError, MysqlSource};
use crate::connectors::cql::CqlTarget;
use crate::connectors::cql::compare::Tolerance;
use crate::connectors::cql::compare::equal::equal;
use crate::connectors::cql::compare::render::render;
use crate::connectors::cql::rows::{Bound, BoundRow, RawRow};
use crate::connectors::cql::scan::{RangeCursor, RangeScan};
use crate::connectors::cql::schema::{Column, quote as cql_quote};
use crate::connectors::cql::transfer::CopySink;
use crate::connectors::cql::units::TokenUnit;
use crate::connectors::seam::SeamError;
use crate::connectors::seam::compare::{ColumnDifference, ColumnDifferenceKind};
use crate::connectors::seam::compare::{Lookup, LookupSides, Side};
use crate::connectors::seam::compare::{Repair, SinkRepair};
use crate::connectors::seam::{Pacing, Page, Plan, RequestError, Retry, Scan, Unit};
use crate::jobfile::{Rename, ValidationConfig};
use crate::savepoints;

/// Keys looked up per request batch.
const BATCH_KEYS: usize = 100;

/// A failed read or lookup on either side.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// MySQL's.
    #[error(transparent)]
    Mysql(#[from] MysqlError),
    /// The target's.
    #[error("target: {0}")]
    Cql(#[from] ExecutionError),
    /// The target's answer could not be read.
    #[error("target: {0}")]
    Answer(String),
}

impl RequestError for CompareError {
    fn retry(&self) -> Retry {
        match self {
            Self::Mysql(e) => e.retry(),
            Self::Cql(e) => e.retry(),
            Self::Answer(_) => Retry::Never,
        }
    }
}

/// A unit of either side.
#[derive(Debug, Clone)]
pub enum EitherUnit {
    /// A range of the MySQL table.
    Range(RangeUnit),
    /// A token range of the target.
    Token(TokenUnit),
}

impl std::fmt::Display for EitherUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Range(u) => u.fmt(f),
            Self::Token(u) => u.fmt(f),
        }
    }
}

impl Unit for EitherUnit {
    fn record(&self, done: &mut savepoints::Progress) {
        match self {
            Self::Range(u) => u.record(done),
            Self::Token(u) => u.record(done),
        }
    }

    fn key(&self) -> String {
        match self {
            Self::Range(u) => u.key(),
            Self::Token(u) => u.key(),
        }
    }
}

/// Where a page of either side starts.
#[derive(Clone)]
pub enum EitherCursor {
    /// MySQL: the page's number in its range.
    Range(u64),
    /// The target's paging.
    Token(RangeCursor),
}

/// One side of the validation (one of each per validation: their sizes do not matter).
#[allow(clippy::large_enum_variant)]
pub enum EitherScan {
    /// The MySQL table, as the copy reads it.
    Mysql(MysqlScan),
    /// The target table's columns in the same order; `None`: its pass is skipped.
    Cql(Option<RangeScan>),
}

impl Scan for EitherScan {
    type Unit = EitherUnit;
    type Row = RawRow;
    type Cursor = EitherCursor;
    type Error = CompareError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<EitherUnit> {
        match self {
            Self::Mysql(s) => {
                let p = s.plan(done);
                Plan {
                    total: p.total,
                    skipped: p.skipped,
                    work: p.work.into_iter().map(EitherUnit::Range).collect(),
                }
            }
            Self::Cql(Some(s)) => {
                let p = s.plan(done);
                Plan {
                    total: p.total,
                    skipped: p.skipped,
                    work: p.work.into_iter().map(EitherUnit::Token).collect(),
                }
            }
            Self::Cql(None) => Plan {
                total: 0,
                skipped: 0,
                work: Vec::new(),
            },
        }
    }

    fn start(&self, unit: &EitherUnit) -> EitherCursor {
        match (self, unit) {
            (Self::Mysql(s), EitherUnit::Range(u)) => EitherCursor::Range(s.start(u)),
            (Self::Cql(Some(s)), EitherUnit::Token(u)) => EitherCursor::Token(s.start(u)),
            _ => unreachable!("units come from the scan's own plan"),
        }
    }

    async fn page(
        &self,
        unit: &EitherUnit,
        cursor: &EitherCursor,
    ) -> Result<Page<RawRow, EitherCursor>, CompareError> {
        match (self, unit, cursor) {
            (Self::Mysql(s), EitherUnit::Range(u), EitherCursor::Range(c)) => {
                let p = s.page(u, c).await?;
                Ok(Page {
                    rows: p.rows,
                    next: p.next.map(EitherCursor::Range),
                    measured: p.measured,
                })
            }
            (Self::Cql(Some(s)), EitherUnit::Token(u), EitherCursor::Token(c)) => {
                let p = s.page(u, c).await?;
                Ok(Page {
                    rows: p.rows,
                    next: p.next.map(EitherCursor::Token),
                    measured: p.measured,
                })
            }
            _ => unreachable!("cursors come from the scan's own units"),
        }
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }
}

/// Keys, fetches and compares rows of both sides; rows are in the slot order of the copy.
pub struct MysqlLookup {
    /// The source's connection pool, `SELECT`, and row conversion.
    reader: Arc<Reader>,
    session: Arc<Session>,
    /// `SELECT <target columns> FROM <table> WHERE <key> = ? AND ...`.
    by_key: PreparedStatement,
    key_len: usize,
    keys: Vec<KeySource>,
    /// Source name, target name, target type, per slot.
    columns: Vec<(String, Column)>,
    tolerance: Tolerance,
}

impl MysqlLookup {
    async fn fetch_target(&self, keys: &[Vec<Option<Bytes>>]) -> Result<Vec<RawRow>, CompareError> {
        let found: Vec<Result<Option<RawRow>, CompareError>> = futures::stream::iter(keys.to_vec())
            .map(|key| {
                let (session, by_key) = (self.session.clone(), self.by_key.clone());
                async move {
                    let values = BoundRow(
                        key.iter()
                            .map(|c| c.clone().map_or(Bound::Unset, Bound::Value))
                            .collect(),
                    );
                    let result = session.execute_unpaged(&by_key, values).await?;
                    let rows = result
                        .into_rows_result()
                        .map_err(|e| CompareError::Answer(e.to_string()))?;
                    let mut rows = rows
                        .rows::<RawRow>()
                        .map_err(|e| CompareError::Answer(e.to_string()))?;
                    rows.next()
                        .transpose()
                        .map_err(|e| CompareError::Answer(e.to_string()))
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        let mut out = Vec::new();
        for f in found {
            if let Some(row) = f? {
                out.push(row);
            }
        }
        Ok(out)
    }

    async fn fetch_source(&self, keys: &[Vec<Option<Bytes>>]) -> Result<Vec<RawRow>, CompareError> {
        let mut params = Vec::new();
        let mut tuples = Vec::new();
        for key in keys {
            let mut marks = Vec::new();
            for (cell, column) in key.iter().zip(&self.keys) {
                let Some(value) = cell.as_ref().and_then(|c| reverse(column, c)) else {
                    // A key MySQL cannot hold is not in MySQL.
                    marks.clear();
                    break;
                };
                params.push(value);
                marks.push("?");
            }
            if !marks.is_empty() {
                tuples.push(format!("({})", marks.join(", ")));
            }
        }
        if tuples.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = self.keys.iter().map(|k| quote(&k.name)).collect();
        let sql = format!(
            "{}({}) IN ({})",
            self.reader.select,
            names.join(", "),
            tuples.join(", ")
        );
        let mut conn = super::connect(&self.reader.pool, &self.reader.src).await?;
        let rows: Vec<mysql_async::Row> = conn
            .exec(sql.as_str(), mysql_async::Params::Positional(params))
            .await
            .map_err(|e| MysqlError::query("looking rows up by key", e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(
                self.reader
                    .convert_row(row, "lookup")
                    .map_err(CompareError::Mysql)?,
            );
        }
        Ok(out)
    }
}

/// A target key cell as the MySQL value it was copied from; `None` when there is none.
fn reverse(column: &KeySource, cell: &[u8]) -> Option<mysql_async::Value> {
    use mysql_async::Value;
    use scylla::cluster::metadata::NativeType as N;
    let int = |b: &[u8]| crate::connectors::cql::codec::integer(b);
    Some(match &column.conv {
        Conv::Integer(N::Varint) => {
            let n = num_bigint::BigInt::from_signed_bytes_be(cell);
            Value::Bytes(n.to_string().into_bytes())
        }
        Conv::Integer(N::Decimal) | Conv::Decimal { .. } => {
            let text = match &column.conv {
                Conv::Decimal { varint: true } => {
                    num_bigint::BigInt::from_signed_bytes_be(cell).to_string()
                }
                _ => {
                    let (scale, unscaled) = crate::connectors::cql::codec::decimal(cell)?;
                    decimal_text(scale, &unscaled)
                }
            };
            Value::Bytes(text.into_bytes())
        }
        Conv::Integer(_) | Conv::Boolean => Value::Int(int(cell)?),
        Conv::Float => Value::Float(f32::from_be_bytes(cell.try_into().ok()?)),
        Conv::Double => Value::Double(f64::from_be_bytes(cell.try_into().ok()?)),
        Conv::Text { .. } | Conv::Blob => Value::Bytes(cell.to_vec()),
        Conv::Uuid { .. } if column.binary => Value::Bytes(cell.to_vec()),
        Conv::Uuid { .. } => Value::Bytes(
            uuid::Uuid::from_slice(cell)
                .ok()?
                .hyphenated()
                .to_string()
                .into_bytes(),
        ),
        Conv::Inet => {
            let ip: std::net::IpAddr = match cell.len() {
                4 => <[u8; 4]>::try_from(cell).ok()?.into(),
                16 => <[u8; 16]>::try_from(cell).ok()?.into(),
                _ => return None,
            };
            Value::Bytes(ip.to_string().into_bytes())
        }
        Conv::Timestamp => {
            let ms = i64::from_be_bytes(cell.try_into().ok()?);
            let t = chrono::DateTime::from_timestamp_millis(ms)?.naive_utc();
            date_value(t)
        }
        Conv::Date => {
            let days = i64::from(u32::from_be_bytes(cell.try_into().ok()?)) - (1i64 << 31);
            let t = chrono::DateTime::from_timestamp(days * 86_400, 0)?.naive_utc();
            date_value(t)
        }
        Conv::Time => {
            let nanos = i64::from_be_bytes(cell.try_into().ok()?);
            let us = nanos / 1000;
            let s = us / 1_000_000;
            Value::Time(
                false,
                0,
                (s / 3600) as u8,
                ((s / 60) % 60) as u8,
                (s % 60) as u8,
                (us % 1_000_000) as u32,
            )
        }
        Conv::TextSet => return None,
    })
}

fn date_value(t: chrono::NaiveDateTime) -> mysql_async::Value {
    use chrono::{Datelike, Timelike};
    mysql_async::Value::Date(
        u16::try_from(t.year()).unwrap_or(0),
        t.month() as u8,
        t.day() as u8,
        t.hour() as u8,
        t.minute() as u8,
        t.second() as u8,
        t.nanosecond() / 1000,
    )
}

/// `unscaled × 10^-scale` as decimal text (`-12.3400`).
fn decimal_text(scale: i32, unscaled: &num_bigint::BigInt) -> String {
    let negative = unscaled.sign() == num_bigint::Sign::Minus;
    let digits = unscaled.magnitude().to_string();
    let body = if scale <= 0 {
        format!("{digits}{}", "0".repeat(scale.unsigned_abs() as usize))
    } else {
        let scale = scale as usize;
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        format!("{int}.{frac}")
    };
    if negative { format!("-{body}") } else { body }
}

impl Lookup for MysqlLookup {
    type Row = RawRow;
    type Key = Vec<Option<Bytes>>;
    type Error = CompareError;

    fn key(&self, _side: Side, row: &RawRow) -> Self::Key {
        row.cells[..self.key_len].to_vec()
    }

    fn batch(&self) -> usize {
        BATCH_KEYS
    }

    async fn fetch(
        &self,
        side: Side,
        keys: &[Self::Key],
        _whole: bool,
    ) -> Result<Vec<RawRow>, CompareError> {
        match side {
            Side::Source => self.fetch_source(keys).await,
            Side::Target => self.fetch_target(keys).await,
        }
    }

    fn left_out(&self, _side: Side, _row: &RawRow) -> bool {
        false
    }

    fn differences(&self, source: &RawRow, target: &RawRow) -> Vec<ColumnDifference> {
        let mut out = Vec::new();
        for ((s, t), (name, column)) in source.cells.iter().zip(&target.cells).zip(&self.columns) {
            let kind = match (s, t) {
                (None, None) => continue,
                (Some(_), None) => ColumnDifferenceKind::MissingOnTarget,
                (None, Some(_)) => ColumnDifferenceKind::ExtraOnTarget,
                (Some(a), Some(b)) if equal(&column.typ, a, b, &self.tolerance) => continue,
                (Some(_), Some(_)) => ColumnDifferenceKind::Value,
            };
            out.push(ColumnDifference {
                column: name.clone(),
                target_column: (*name != column.name).then(|| column.name.clone()),
                difference: kind,
                source: render(&column.typ, s.as_deref()),
                target: render(&column.typ, t.as_deref()),
            });
        }
        out
    }

    fn render_key(&self, key: &Self::Key) -> String {
        key.iter()
            .zip(&self.columns)
            .map(|(v, (_, c))| format!("{} = {}", cql_quote(&c.name), render(&c.typ, v.as_deref())))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    fn size(&self, row: &RawRow) -> usize {
        row.size()
    }
}

/// Connects to both sides, checks the pair as a copy would, and prepares both passes and,
/// with `copyMissingRows`, the writer of missing rows. Nothing is written.
pub(crate) async fn prepare(
    src: &MysqlSource,
    dst: &CqlTarget,
    renames: &[Rename],
    v: &ValidationConfig,
) -> Result<LookupSides<MysqlLookup, EitherScan>, SeamError> {
    if v.compare_timestamps == Some(true) {
        tracing::warn!(
            key = "validation.compareTimestamps",
            "ignored for a MySQL validation: MySQL rows have no writetimes or TTLs"
        );
    }
    if v.hash_columns.is_some() {
        tracing::info!(
            key = "validation.hashColumns",
            "every column is compared by value; hashColumns (ScyllaDB Migrator's way to move less data through Spark) is not needed"
        );
    }
    if v.copy_differing_rows {
        tracing::warn!(
            key = "validation.copyDifferingRows",
            "ignored for a MySQL validation: only missing rows are written (copyMissingRows)"
        );
    }
    let Prepared {
        scan,
        session,
        described,
        target,
        mapping,
        keys,
        plan,
    } = super::scan::prepare(src, dst, renames).await?;
    let session = Arc::new(session);
    let columns: Vec<(String, Column)> = described
        .all()
        .map(|c| {
            let to = &mapping[&c.name];
            let t = target.all().find(|t| t.name == *to).expect("mapped");
            (c.name.clone(), t.clone())
        })
        .collect();
    let key_len = target.partition_key.len() + target.clustering_key.len();
    let select_cols: Vec<String> = columns.iter().map(|(_, c)| c.quoted()).collect();
    let key_cond: Vec<String> = columns[..key_len]
        .iter()
        .map(|(_, c)| format!("{} = ?", c.quoted()))
        .collect();
    let consistency = dst.endpoint.consistency_level.into();
    let prepare = |cql: String| {
        let session = session.clone();
        async move {
            let mut st = session.prepare(cql.as_str()).await.map_err(|e| {
                crate::connectors::cql::CqlError::Request {
                    side: "target".into(),
                    message: format!("cannot prepare `{cql}`: {e}"),
                }
            })?;
            st.set_consistency(consistency);
            st.set_is_idempotent(true);
            Ok::<_, SeamError>(st)
        }
    };
    let by_key = prepare(format!(
        "SELECT {} FROM {} WHERE {}",
        select_cols.join(", "),
        target.qualified(),
        key_cond.join(" AND ")
    ))
    .await?;
    let reverse_pass = if src.where_clause.is_some() {
        tracing::info!(
            "source.where is set: rows of the target outside the filter are not looked for (ScyllaDB Migrator's MySQL validator ignores them too); only the source's rows are compared"
        );
        None
    } else {
        let pk: Vec<String> = target.partition_key.iter().map(Column::quoted).collect();
        let pk = pk.join(", ");
        let mut st = prepare(format!(
            "SELECT {} FROM {} WHERE token({pk}) > ? AND token({pk}) <= ?",
            select_cols.join(", "),
            target.qualified()
        ))
        .await?;
        st.set_page_size(i32::try_from(src.fetch_size).unwrap_or(i32::MAX));
        Some(RangeScan::new(
            session.clone(),
            target.clone(),
            st,
            crate::connectors::cql::transfer::DEFAULT_SPLIT_COUNT,
            dst.endpoint.local_dc.clone(),
        ))
    };
    let lookup = MysqlLookup {
        reader: scan.reader(),
        session: session.clone(),
        by_key,
        key_len,
        keys,
        columns,
        tolerance: Tolerance {
            floating_point: v.floating_point_tolerance,
            timestamp_ms: i64::try_from(v.timestamp_ms_tolerance).unwrap_or(i64::MAX),
            strip_decimals: dst.strip_trailing_zeros_for_decimals,
        },
    };
    let repair = v.copy_missing_rows.then(|| {
        Box::new(SinkRepair(CopySink::new(session.clone(), Arc::new(plan))))
            as Box<dyn Repair<RawRow>>
    });
    Ok(LookupSides {
        source: EitherScan::Mysql(scan),
        target: EitherScan::Cql(reverse_pass),
        lookup,
        repair,
        pacing: Pacing {
            units_finishing: 0,
            units_at_once: src.ranges_at_once,
            requests_in_flight: 16,
            rows_per_second: None,
            bytes_per_second: None,
        },
    })
}
