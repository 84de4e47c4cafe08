//! The comparison: both tables are scanned by the same token-range units, the two streams of
//! rows merged in Cassandra's order (token, partition key, clustering key), so each row is
//! held only while it is compared, whatever the size of the table or of a partition.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use scylla::client::session::Session;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::prepared::PreparedStatement;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::report::{ColumnDifference, ColumnDifferenceKind, Example, ExampleKind, Report};
use super::value::{self, Tolerance};
use crate::connectors::cql::copy::{CopyPlan, RowStats, Write};
use crate::connectors::cql::rows::{Bound, BoundRow, RawRow, read_i32, read_i64, read_int_list};
use crate::connectors::cql::schema::{Column, TableSchema, quote};
use crate::connectors::cql::{self, CqlError};
use crate::jobs::running::Sample;
use crate::migrate::EngineError;
use crate::migrate::config::{JobConfig, SourceConfig, TargetConfig};
use crate::migrate::engine::{self, Counters as ScanProgress};
use crate::migrate::limits::Limits;
use crate::migrate::retry;
use crate::savepoints::ranges::{RangeSet, TokenRange, plan_units};

/// Live counters of a running validation.
#[derive(Debug, Default)]
pub struct Progress {
    /// Units, source rows (`rowsRead`), bytes, retries and the waiting reason.
    pub scan: ScanProgress,
    /// Rows read from the target.
    pub target_rows: AtomicU64,
    /// Rows found different so far.
    pub rows_with_differences: AtomicU64,
    /// Rows copied again so far.
    pub rows_copied: AtomicU64,
}

impl Progress {
    /// Sets the row counters to a report's: a resumed run counts on from the rows its savepoint
    /// covers, and a finished one shows exactly its report's figures.
    pub fn count_from(&self, report: &Report) {
        let set = |a: &AtomicU64, v: u64| a.store(v, AtomicOrdering::Relaxed);
        set(&self.scan.rows_read, report.source_rows);
        set(&self.target_rows, report.target_rows);
        set(&self.rows_with_differences, report.rows_with_differences);
        set(&self.rows_copied, report.rows_copied);
    }

    /// The counters now, as job status and progress lines show them.
    pub fn sample(&self) -> Sample {
        let g = |a: &AtomicU64| a.load(AtomicOrdering::Relaxed);
        let s = &self.scan;
        let (source_rows, bytes_read) = (g(&s.rows_read), g(&s.bytes_read));
        let (total, done, skipped) = (g(&s.units_total), g(&s.units_done), g(&s.units_skipped));
        let differences = g(&self.rows_with_differences);
        Sample {
            counters: vec![
                ("unitsTotal", total),
                ("unitsDone", done),
                ("unitsSkipped", skipped),
                ("sourceRows", source_rows),
                ("targetRows", g(&self.target_rows)),
                ("bytesRead", bytes_read),
                ("rowsWithDifferences", differences),
                ("rowsCopied", g(&self.rows_copied)),
                ("retries", s.retries.count()),
            ],
            rows: source_rows,
            bytes: bytes_read,
            units: (total, done, skipped),
            differences: Some(differences),
            waiting: s.waiting(),
        }
    }
}

/// What is complete: ranges validated and what they held. Changed under one lock so a
/// savepoint never records a range without its findings.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// Token ranges compared completely.
    pub done: RangeSet,
    /// Findings of those ranges.
    pub report: Report,
}

/// How one side is scanned and how its rows are laid out: primary key, statics, regular
/// columns, then (with timestamps) WRITETIME and TTL of each static and regular column, then
/// the partition token.
struct Side {
    session: Arc<Session>,
    table: TableSchema,
    select: PreparedStatement,
    local_dc: Option<String>,
}

struct Spec {
    source: TableSchema,
    /// Target name of each source column, in `source.all()` order.
    target_names: Vec<String>,
    np: usize,
    nc: usize,
    ns: usize,
    nr: usize,
    token_at: usize,
    clustering_desc: Vec<bool>,
    tolerance: Tolerance,
    compare_timestamps: bool,
    ttl_tolerance_ms: u64,
    writetime_tolerance_us: u64,
    fixed_ttl: Option<i32>,
    fixed_timestamp: Option<i64>,
    max_examples: usize,
}

/// A checked, connected, planned validation, ready to run.
pub struct Validation {
    source: Side,
    target: Side,
    spec: Arc<Spec>,
    repair: Option<Repair>,
    units: Vec<TokenRange>,
    max_units: usize,
    limits: Arc<Limits>,
}

/// Selected expressions of one side, and the statement.
fn select_list(schema_cols: &[(&Column, String)], timestamps: &[String], pk: &[String]) -> String {
    let mut cols: Vec<String> = schema_cols.iter().map(|(_, n)| quote(n)).collect();
    for name in timestamps {
        cols.push(format!("WRITETIME({})", quote(name)));
        cols.push(format!("TTL({})", quote(name)));
    }
    cols.push(format!(
        "token({})",
        pk.iter().map(|p| quote(p)).collect::<Vec<_>>().join(", ")
    ));
    cols.join(", ")
}

/// Rewrites the column names of a source `where` condition into the target's (after
/// `renames`): identifiers outside string literals that name a renamed source column.
pub fn rename_where(clause: &str, renamed: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(clause.len());
    let chars: Vec<char> = clause.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A string literal, '' inside is a quote.
            let start = i;
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            out.extend(&chars[start..i]);
        } else if c == '"' {
            let start = i;
            i += 1;
            let mut name = String::new();
            while i < chars.len() {
                if chars[i] == '"' {
                    if chars.get(i + 1) == Some(&'"') {
                        name.push('"');
                        i += 2;
                        continue;
                    }
                    break;
                }
                name.push(chars[i]);
                i += 1;
            }
            i = (i + 1).min(chars.len());
            match renamed(&name) {
                Some(to) => out.push_str(&quote(&to)),
                None => out.extend(&chars[start..i]),
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // Unquoted identifiers are case-insensitive.
            match renamed(&word.to_lowercase()) {
                Some(to) => out.push_str(&quote(&to)),
                None => out.push_str(&word),
            }
        } else if c.is_ascii_digit() {
            // Numbers, UUIDs and blobs never name a column.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
                out.push(chars[i]);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

async fn prepare_scan(
    session: &Session,
    side: &str,
    cql: &str,
    consistency: scylla::statement::Consistency,
    fetch_size: usize,
) -> Result<PreparedStatement, CqlError> {
    let mut st = session.prepare(cql).await.map_err(|e| CqlError::Request {
        side: side.to_string(),
        message: format!("cannot prepare `{cql}`: {e}"),
    })?;
    st.set_page_size(i32::try_from(fetch_size).unwrap_or(i32::MAX));
    st.set_consistency(consistency);
    st.set_is_idempotent(true);
    Ok(st)
}

/// Which clustering columns are `DESC`, from `system_schema.columns`.
async fn clustering_order(
    session: &Session,
    side: &str,
    schema: &TableSchema,
) -> Result<Vec<bool>, CqlError> {
    let result = session
        .query_unpaged(
            "SELECT column_name, clustering_order FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (&schema.keyspace, &schema.table),
        )
        .await
        .map_err(|e| CqlError::Request {
            side: side.to_string(),
            message: format!("cannot read the clustering order: {e}"),
        })?;
    let rows: Vec<(String, String)> = result
        .into_rows_result()
        .map_err(|e| CqlError::Request {
            side: side.to_string(),
            message: format!("cannot read the clustering order: {e}"),
        })?
        .rows::<(String, String)>()
        .map_err(|e| CqlError::Request {
            side: side.to_string(),
            message: format!("cannot read the clustering order: {e}"),
        })?
        .filter_map(Result::ok)
        .collect();
    Ok(schema
        .clustering_key
        .iter()
        .map(|c| {
            rows.iter()
                .any(|(name, order)| name == &c.name && order.eq_ignore_ascii_case("desc"))
        })
        .collect())
}

impl Validation {
    /// Connects to both sides, checks the schemas as a migration would, and plans units.
    /// Nothing is written.
    pub async fn prepare(config: &JobConfig) -> Result<Self, EngineError> {
        let SourceConfig::Cql(src) = &config.source;
        let TargetConfig::Cql(dst) = &config.target;
        let v = &config.validation;
        let cql::Pair {
            source,
            target,
            source_schema,
            target_schema,
            mapping,
        } = cql::open_pair(src, dst, &config.renames).await?;
        let (src_desc, dst_desc) = tokio::try_join!(
            clustering_order(&source, "source", &source_schema),
            clustering_order(&target, "target", &target_schema)
        )?;
        if src_desc != dst_desc {
            return Err(CqlError::Invalid {
                key: "target.table".into(),
                message: "the clustering order (ASC/DESC) of the target differs from the source's; rows cannot be compared in order".into(),
            }
            .into());
        }
        let counter = source_schema.is_counter_table();
        let compare_timestamps =
            v.compare_timestamps.unwrap_or(src.preserve_timestamps) && !counter;
        let copy_meta = v.copy_missing_rows && src.preserve_timestamps && !counter;
        let meta = compare_timestamps || copy_meta;

        let cols: Vec<(&Column, String)> =
            source_schema.all().map(|c| (c, c.name.clone())).collect();
        let target_cols: Vec<(&Column, String)> = source_schema
            .all()
            .map(|c| (c, mapping[&c.name].clone()))
            .collect();
        let timestamped: Vec<&Column> = if meta {
            source_schema
                .statics
                .iter()
                .chain(&source_schema.regular)
                .collect()
        } else {
            vec![]
        };
        let src_ts: Vec<String> = timestamped.iter().map(|c| c.name.clone()).collect();
        let dst_ts: Vec<String> = timestamped
            .iter()
            .map(|c| mapping[&c.name].clone())
            .collect();
        let src_pk: Vec<String> = source_schema
            .partition_key
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let dst_pk: Vec<String> = src_pk.iter().map(|n| mapping[n].clone()).collect();
        let range = |pk: &[String]| {
            let pk = pk.iter().map(|p| quote(p)).collect::<Vec<_>>().join(", ");
            format!("token({pk}) > ? AND token({pk}) <= ?")
        };
        let mut src_cql = format!(
            "SELECT {} FROM {} WHERE {}",
            select_list(&cols, &src_ts, &src_pk),
            source_schema.qualified(),
            range(&src_pk)
        );
        let mut dst_cql = format!(
            "SELECT {} FROM {} WHERE {}",
            select_list(&target_cols, &dst_ts, &dst_pk),
            target_schema.qualified(),
            range(&dst_pk)
        );
        if let Some(w) = &src.where_clause {
            src_cql.push_str(&format!(" AND {w} ALLOW FILTERING"));
            let renamed = |name: &str| {
                source_schema
                    .all()
                    .find(|c| c.name == name)
                    .map(|c| mapping[&c.name].clone())
                    .filter(|to| to != name)
            };
            dst_cql.push_str(&format!(
                " AND {} ALLOW FILTERING",
                rename_where(w, &renamed)
            ));
        }
        let src_select = prepare_scan(
            &source,
            "source",
            &src_cql,
            src.endpoint.consistency_level.into(),
            src.fetch_size,
        )
        .await?;
        let dst_select = prepare_scan(
            &target,
            "target",
            &dst_cql,
            dst.endpoint.consistency_level.into(),
            src.fetch_size,
        )
        .await?;
        let copy = if v.copy_missing_rows {
            Some(Arc::new(
                CopyPlan::prepare(
                    &source,
                    &target,
                    src,
                    dst,
                    source_schema.clone(),
                    target_schema.clone(),
                    &mapping,
                )
                .await?,
            ))
        } else {
            None
        };

        let tokens: Vec<i64> = source
            .get_cluster_state()
            .replica_locator()
            .ring()
            .iter()
            .map(|(t, _)| t.value())
            .collect();
        let units = plan_units(&tokens, src.split_count.unwrap_or(256).max(1));
        let np = source_schema.partition_key.len();
        let nc = source_schema.clustering_key.len();
        let ns = source_schema.statics.len();
        let nr = source_schema.regular.len();
        let spec = Spec {
            target_names: target_cols.iter().map(|(_, n)| n.clone()).collect(),
            np,
            nc,
            ns,
            nr,
            token_at: np + nc + ns + nr + 2 * timestamped.len(),
            clustering_desc: src_desc,
            tolerance: Tolerance {
                floating_point: v.floating_point_tolerance,
                timestamp_ms: i64::try_from(v.timestamp_ms_tolerance).unwrap_or(i64::MAX),
                strip_decimals: dst.strip_trailing_zeros_for_decimals,
            },
            compare_timestamps,
            ttl_tolerance_ms: v.ttl_tolerance_millis,
            writetime_tolerance_us: v.writetime_tolerance_millis.saturating_mul(1000),
            fixed_ttl: dst.write_ttl_in_s,
            fixed_timestamp: dst.write_writetimestamp_in_us,
            max_examples: v.failures_to_fetch,
            source: source_schema,
        };
        let target = Arc::new(target);
        let spec = Arc::new(spec);
        Ok(Self {
            source: Side {
                session: Arc::new(source),
                table: spec.source.clone(),
                select: src_select,
                local_dc: src.endpoint.local_dc.clone(),
            },
            target: Side {
                session: target.clone(),
                table: target_schema,
                select: dst_select,
                local_dc: dst.endpoint.local_dc.clone(),
            },
            spec,
            repair: copy.map(|plan| Repair {
                plan,
                session: target,
            }),
            units,
            max_units: src.max_concurrent_units.unwrap_or(16),
            limits: Arc::new(Limits::new(dst.rows_per_second, dst.bytes_per_second)),
        })
    }

    /// Units in the plan.
    pub fn units(&self) -> &[TokenRange] {
        &self.units
    }

    /// Compares every unit not already in `state.done`; findings and completed ranges are
    /// added to `state` unit by unit, whether the run succeeds, fails or is stopped.
    pub async fn run(
        self,
        progress: Arc<Progress>,
        state: Arc<Mutex<State>>,
        cancel: CancellationToken,
    ) -> Result<(), EngineError> {
        let skip = {
            let state = state.lock().unwrap_or_else(|p| p.into_inner());
            progress.count_from(&state.report);
            state.done.clone()
        };
        let scan = &progress.scan;
        scan.units_total
            .store(self.units.len() as u64, AtomicOrdering::Relaxed);
        let mut work = Vec::new();
        for unit in &self.units {
            let missing = skip.missing(*unit);
            if missing.is_empty() {
                scan.units_skipped.fetch_add(1, AtomicOrdering::Relaxed);
                scan.units_done.fetch_add(1, AtomicOrdering::Relaxed);
            } else {
                work.push(missing);
            }
        }
        let failed = cancel.child_token();
        let shared = Arc::new(Shared {
            source: self.source,
            target: self.target,
            state,
            merge: Merge {
                spec: self.spec,
                repair: self.repair,
                progress: progress.clone(),
                limits: self.limits,
                cancel: failed.clone(),
            },
        });
        engine::drive_units(
            work,
            self.max_units,
            (&cancel, &failed),
            (
                |e: &EngineError| matches!(e, EngineError::Stopped),
                || EngineError::Stopped,
            ),
            |pieces| {
                let s = shared.clone();
                async move { s.unit(pieces).await }
            },
        )
        .await
    }
}

struct Shared {
    source: Side,
    target: Side,
    state: Arc<Mutex<State>>,
    merge: Merge,
}

/// The merge of one range's two scans, given as streams of pages: it needs no session but the
/// repair's, so the unit tests below feed it streams of their own.
struct Merge {
    spec: Arc<Spec>,
    repair: Option<Repair>,
    progress: Arc<Progress>,
    limits: Arc<Limits>,
    cancel: CancellationToken,
}

/// `copyMissingRows`: how rows are written to the target again.
struct Repair {
    plan: Arc<CopyPlan>,
    session: Arc<Session>,
}

/// What a scan task sends: pages of rows, then the end, or why it stopped.
enum Page {
    Rows(Vec<RawRow>),
    End,
    Failed(EngineError),
}

/// One side's rows of a range, page by page, with the order checked as they come.
struct Cursor {
    pages: mpsc::Receiver<Page>,
    rows: VecDeque<RawRow>,
    finished: bool,
    last: Option<RawRow>,
    side: &'static str,
    /// When the page being merged was received: a row copied again has its TTL shortened by
    /// the time since, as a migration does.
    read_at: std::time::Instant,
}

impl Cursor {
    fn new(side: &'static str, pages: mpsc::Receiver<Page>) -> Self {
        Self {
            pages,
            rows: VecDeque::new(),
            finished: false,
            last: None,
            side,
            read_at: std::time::Instant::now(),
        }
    }

    async fn peek(&mut self) -> Result<Option<&RawRow>, EngineError> {
        while self.rows.is_empty() && !self.finished {
            match self.pages.recv().await {
                Some(Page::Rows(rows)) => {
                    self.read_at = std::time::Instant::now();
                    self.rows.extend(rows);
                }
                Some(Page::End) => self.finished = true,
                Some(Page::Failed(e)) => return Err(e),
                // A scan that stops without saying so must not pass for the end of the range.
                None => {
                    return Err(EngineError::Failed(format!(
                        "the {} scan stopped before the end of its range",
                        self.side
                    )));
                }
            }
        }
        Ok(self.rows.front())
    }

    fn pop(&mut self, spec: &Spec) -> Result<RawRow, EngineError> {
        let row = self.rows.pop_front().expect("peeked");
        if let Some(last) = &self.last
            && spec.order(last, &row) != Ordering::Less
        {
            // Merging relies on drover ordering rows exactly as Cassandra does; if it does not,
            // stop rather than report rows that are not different.
            return Err(EngineError::Failed(format!(
                "{} rows arrived out of the order drover expects ({} then {}); the validator cannot compare this table's clustering types, please report it",
                self.side,
                spec.key_condition(last),
                spec.key_condition(&row)
            )));
        }
        self.last = Some(row.clone());
        Ok(row)
    }
}

impl Spec {
    fn token(&self, row: &RawRow) -> i64 {
        read_i64(&row.cells[self.token_at]).unwrap_or(i64::MIN)
    }

    /// Cassandra's order of rows: token, then partition key bytes (a token collision), then
    /// clustering columns by type (a missing clustering key, a static-only partition, first).
    fn order(&self, a: &RawRow, b: &RawRow) -> Ordering {
        let by_token = self.token(a).cmp(&self.token(b));
        if by_token.is_ne() {
            return by_token;
        }
        let pk = |r: &RawRow| -> Vec<u8> {
            if self.np == 1 {
                return r.cells[0].as_deref().unwrap_or_default().to_vec();
            }
            // The composite form Cassandra compares: [u16 length][bytes][0] per component.
            let mut out = Vec::new();
            for c in &r.cells[..self.np] {
                let v = c.as_deref().unwrap_or_default();
                out.extend_from_slice(&(v.len() as u16).to_be_bytes());
                out.extend_from_slice(v);
                out.push(0);
            }
            out
        };
        if a.cells[..self.np] != b.cells[..self.np] {
            let by_key = pk(a).cmp(&pk(b));
            if by_key.is_ne() {
                return by_key;
            }
        }
        for i in 0..self.nc {
            let col = &self.source.clustering_key[i];
            let o = match (&a.cells[self.np + i], &b.cells[self.np + i]) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(x), Some(y)) => {
                    let o = value::compare(&col.typ, x, y);
                    if self.clustering_desc[i] {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Whether `a` and `b` are of the same partition and exactly one of them holds only the
    /// partition's static cells (no clustering key) while the other is a row.
    fn lone_statics(&self, a: &RawRow, b: &RawRow) -> bool {
        let static_only = |r: &RawRow| {
            self.nc > 0
                && r.cells[self.np..self.np + self.nc]
                    .iter()
                    .all(Option::is_none)
        };
        static_only(a) != static_only(b)
            && self.token(a) == self.token(b)
            && a.cells[..self.np] == b.cells[..self.np]
    }

    fn key_columns(&self) -> impl Iterator<Item = &Column> {
        self.source
            .partition_key
            .iter()
            .chain(&self.source.clustering_key)
    }

    /// The primary key as a CQL condition on the source table.
    fn key_condition(&self, row: &RawRow) -> String {
        self.key_columns()
            .enumerate()
            .filter_map(|(i, c)| {
                row.cells[i].as_deref().map(|v| {
                    format!(
                        "{} = {}",
                        quote_if_needed(&c.name),
                        value::render(&c.typ, Some(v))
                    )
                })
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The cells of two rows with the same key that differ: static cells when `statics` (the
    /// first row of each partition), regular cells when `regular`.
    fn differences(
        &self,
        s: &RawRow,
        d: &RawRow,
        statics: bool,
        regular: bool,
    ) -> Vec<ColumnDifference> {
        let mut out = Vec::new();
        let first = self.np + self.nc;
        let value_cols = self.source.statics.iter().chain(&self.source.regular);
        for (j, col) in value_cols.enumerate() {
            if (j < self.ns && !statics) || (j >= self.ns && !regular) {
                continue;
            }
            let at = first + j;
            let target_name = &self.target_names[at];
            let diff = |kind, source: String, target: String| ColumnDifference {
                column: col.name.clone(),
                target_column: (target_name != &col.name).then(|| target_name.clone()),
                difference: kind,
                source,
                target,
            };
            let (sv, dv) = (&s.cells[at], &d.cells[at]);
            let kind = match (sv, dv) {
                (None, None) => None,
                (Some(_), None) => Some(ColumnDifferenceKind::MissingOnTarget),
                (None, Some(_)) => Some(ColumnDifferenceKind::ExtraOnTarget),
                (Some(a), Some(b)) => (!value::equal(&col.typ, a, b, &self.tolerance))
                    .then_some(ColumnDifferenceKind::Value),
            };
            if let Some(kind) = kind {
                out.push(diff(
                    kind,
                    value::render(&col.typ, sv.as_deref()),
                    value::render(&col.typ, dv.as_deref()),
                ));
                continue;
            }
            if !self.compare_timestamps || sv.is_none() {
                continue;
            }
            let m = self.np + self.nc + self.ns + self.nr + 2 * j;
            let (swt, dwt) = (&s.cells[m], &d.cells[m]);
            if !self.writetimes_match(col, swt, dwt) {
                out.push(diff(
                    ColumnDifferenceKind::Writetime,
                    render_meta(swt),
                    render_meta(dwt),
                ));
            }
            let (sttl, dttl) = (&s.cells[m + 1], &d.cells[m + 1]);
            if !self.ttls_match(col, sttl, dttl) {
                out.push(diff(
                    ColumnDifferenceKind::Ttl,
                    render_meta(sttl),
                    render_meta(dttl),
                ));
            }
        }
        out
    }

    /// Whether the writetimes of a cell (one per element of a multi-cell column) are within
    /// the tolerance of the source's (or of `writeWritetimestampInuS`).
    fn writetimes_match(&self, col: &Column, s: &Option<Bytes>, d: &Option<Bytes>) -> bool {
        let tol = self.writetime_tolerance_us;
        let (a, b) = (meta_numbers(col, s), meta_numbers(col, d));
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| match (self.fixed_timestamp.or(*x), y) {
                    (Some(x), Some(y)) => x.abs_diff(*y) <= tol,
                    (None, None) => true,
                    _ => false,
                })
    }

    /// Whether the TTLs of a cell are within the tolerance of the source's. TTLs are read in
    /// seconds, the tolerance is in ms. With `writeTTLInS` the target's TTL counts down from
    /// that value since the copy: it must be set and at most that value (0 meaning none).
    fn ttls_match(&self, col: &Column, s: &Option<Bytes>, d: &Option<Bytes>) -> bool {
        let tol = self.ttl_tolerance_ms;
        let (a, b) = (meta_numbers(col, s), meta_numbers(col, d));
        a.len() == b.len()
            && a.iter().zip(&b).all(|(x, y)| match (self.fixed_ttl, x, y) {
                (Some(0), _, y) => y.is_none(),
                (Some(t), _, Some(y)) => *y > 0 && *y <= i64::from(t),
                (Some(_), _, None) => false,
                (None, Some(x), Some(y)) => x.abs_diff(*y).saturating_mul(1000) <= tol,
                (None, None, None) => true,
                (None, _, _) => false,
            })
    }
}

/// The numbers of a WRITETIME or TTL cell: one per element for a multi-cell column (Cassandra
/// 5.0 returns a list), else one (`None` for no TTL).
fn meta_numbers(col: &Column, c: &Option<Bytes>) -> Vec<Option<i64>> {
    if col.is_multi_cell() {
        return read_int_list(c).unwrap_or_default();
    }
    vec![read_i64(c).or_else(|| read_i32(c).map(i64::from))]
}

/// A column name as CQL needs it in a condition: bare when it reads the same unquoted.
fn quote_if_needed(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain { name.to_string() } else { quote(name) }
}

/// A WRITETIME or TTL cell: a number, a list for a multi-cell column, `null` for none.
fn render_meta(c: &Option<Bytes>) -> String {
    if let Some(v) = read_i64(c) {
        return v.to_string();
    }
    if let Some(v) = read_i32(c) {
        return v.to_string();
    }
    match read_int_list(c) {
        Some(list) => format!(
            "[{}]",
            list.iter()
                .map(|x| x.map_or("null".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "null".to_string(),
    }
}

impl Shared {
    /// Compares the missing pieces of one unit, then records them and their findings.
    async fn unit(&self, pieces: Vec<TokenRange>) -> Result<(), EngineError> {
        let mut report = Report::default();
        for piece in &pieces {
            self.piece(*piece, &mut report).await?;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for p in &pieces {
            state.done.insert(*p);
        }
        state.report.merge(&report, self.merge.spec.max_examples);
        self.merge
            .progress
            .scan
            .units_done
            .fetch_add(1, AtomicOrdering::Relaxed);
        Ok(())
    }

    fn scan(&self, side: &'static str, piece: TokenRange) -> Cursor {
        // One page waits while one is merged: reads overlap the comparison, memory stays at two
        // pages per side and range.
        let (tx, rx) = mpsc::channel(1);
        let s = if side == "source" {
            &self.source
        } else {
            &self.target
        };
        let (progress, cancel) = (self.merge.progress.clone(), self.merge.cancel.clone());
        let session = s.session.clone();
        let mut statement = s.select.clone();
        if let Some(node) = cql::replica_for(&session, &s.table, piece.end, s.local_dc.as_deref()) {
            statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                NodeIdentifier::Node(node),
                None,
            )));
        }
        tokio::spawn(async move {
            let mut paging = PagingState::start();
            loop {
                let page = retry::retry(
                    &progress.scan.retries,
                    &cancel,
                    if side == "source" {
                        "reading from the source"
                    } else {
                        "reading from the target"
                    },
                    true,
                    || {
                        session.execute_single_page(
                            &statement,
                            BoundRow(vec![Bound::BigInt(piece.start), Bound::BigInt(piece.end)]),
                            paging.clone(),
                        )
                    },
                )
                .await;
                let (result, next) = match page {
                    Ok(p) => p,
                    Err(_) if cancel.is_cancelled() => {
                        let _ = tx.send(Page::Failed(EngineError::Stopped)).await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx
                            .send(Page::Failed(EngineError::Failed(format!(
                                "{side}: reading {piece}: {e}"
                            ))))
                            .await;
                        return;
                    }
                };
                let rows = result
                    .into_rows_result()
                    .map_err(|e| e.to_string())
                    .and_then(|r| {
                        r.rows::<RawRow>()
                            .map_err(|e| e.to_string())?
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| e.to_string())
                    });
                let page = match rows {
                    Ok(rows) => Page::Rows(rows),
                    Err(e) => {
                        Page::Failed(EngineError::Failed(format!("{side}: reading {piece}: {e}")))
                    }
                };
                let failed = matches!(page, Page::Failed(_));
                if tx.send(page).await.is_err() || failed {
                    return;
                }
                match next {
                    PagingStateResponse::HasMorePages { state } => paging = state,
                    PagingStateResponse::NoMorePages => {
                        let _ = tx.send(Page::End).await;
                        return;
                    }
                }
            }
        });
        Cursor::new(side, rx)
    }

    /// Merges the rows of one range from both sides.
    async fn piece(&self, piece: TokenRange, report: &mut Report) -> Result<(), EngineError> {
        let src = self.scan("source", piece);
        let dst = self.scan("target", piece);
        self.merge.run(src, dst, report).await
    }
}

impl Merge {
    /// Merges two scans of one range, adding what they hold to `report`.
    async fn run(
        &self,
        mut src: Cursor,
        mut dst: Cursor,
        report: &mut Report,
    ) -> Result<(), EngineError> {
        let spec = &*self.spec;
        let mut partition: Option<Vec<Option<Bytes>>> = None;
        let scan = &self.progress.scan;
        loop {
            if self.cancel.is_cancelled() {
                return Err(EngineError::Stopped);
            }
            let (order, lone_statics) = match (src.peek().await?, dst.peek().await?) {
                (None, None) => break,
                (Some(_), None) => (Ordering::Less, false),
                (None, Some(_)) => (Ordering::Greater, false),
                (Some(a), Some(b)) => (spec.order(a, b), spec.lone_statics(a, b)),
            };
            let mut bytes = 0;
            if lone_statics {
                // One side has only the static cells of a partition, the other has rows too:
                // the static cells are compared, the rows are missing or extra.
                let source_static = order == Ordering::Less;
                let (lone, cursor) = if source_static {
                    (src.pop(spec)?, &mut dst)
                } else {
                    (dst.pop(spec)?, &mut src)
                };
                let other = cursor.peek().await?.expect("peeked").clone();
                let (s, d) = if source_static {
                    (&lone, &other)
                } else {
                    (&other, &lone)
                };
                bytes += lone.size();
                if source_static {
                    report.source_rows += 1;
                    scan.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
                } else {
                    report.target_rows += 1;
                    self.progress
                        .target_rows
                        .fetch_add(1, AtomicOrdering::Relaxed);
                }
                partition = Some(lone.cells[..spec.np].to_vec());
                let columns = spec.differences(s, d, true, false);
                if columns.is_empty() {
                    report.rows_compared += 1;
                    report.rows_matched += 1;
                } else {
                    report.differences.count_row(&columns);
                    self.found(report, ExampleKind::DifferentRow, &lone, columns);
                }
            } else {
                match order {
                    Ordering::Less => {
                        let row = src.pop(spec)?;
                        bytes += row.size();
                        if row.cells[..spec.np].iter().any(Option::is_none) {
                            report.rows_skipped += 1;
                            continue;
                        }
                        report.source_rows += 1;
                        scan.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
                        self.found(report, ExampleKind::MissingRow, &row, vec![]);
                        report.differences.missing_rows += 1;
                        self.repair(&row, src.read_at, report).await?;
                    }
                    Ordering::Greater => {
                        let row = dst.pop(spec)?;
                        bytes += row.size();
                        report.target_rows += 1;
                        self.progress
                            .target_rows
                            .fetch_add(1, AtomicOrdering::Relaxed);
                        report.differences.extra_rows += 1;
                        self.found(report, ExampleKind::ExtraRow, &row, vec![]);
                    }
                    Ordering::Equal => {
                        let s = src.pop(spec)?;
                        let d = dst.pop(spec)?;
                        bytes += s.size() + d.size();
                        report.source_rows += 1;
                        report.target_rows += 1;
                        scan.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
                        self.progress
                            .target_rows
                            .fetch_add(1, AtomicOrdering::Relaxed);
                        let new_partition = partition.as_deref() != Some(&s.cells[..spec.np]);
                        if new_partition {
                            partition = Some(s.cells[..spec.np].to_vec());
                        }
                        let columns = spec.differences(&s, &d, new_partition, true);
                        if columns.is_empty() {
                            report.rows_compared += 1;
                            report.rows_matched += 1;
                        } else {
                            report.differences.count_row(&columns);
                            self.found(report, ExampleKind::DifferentRow, &s, columns);
                            self.repair(&s, src.read_at, report).await?;
                        }
                    }
                }
            }
            scan.bytes_read
                .fetch_add(bytes as u64, AtomicOrdering::Relaxed);
            if !self.limits.wait(1, bytes as u64, &self.cancel).await {
                return Err(EngineError::Stopped);
            }
        }
        Ok(())
    }

    /// Counts a differing row and keeps it as an example while there is room.
    fn found(
        &self,
        report: &mut Report,
        kind: ExampleKind,
        row: &RawRow,
        columns: Vec<ColumnDifference>,
    ) {
        report.rows_compared += 1;
        report.rows_with_differences += 1;
        self.progress
            .rows_with_differences
            .fetch_add(1, AtomicOrdering::Relaxed);
        // Examples beyond the limit of the whole job are cut when units are merged; a unit
        // never needs more than the limit.
        if report.examples.len() < self.spec.max_examples {
            report.examples.push(Example {
                kind,
                key: self.spec.key_condition(row),
                token: self.spec.token(row),
                columns,
            });
        }
    }

    /// With `copyMissingRows`, writes a source row to the target again.
    async fn repair(
        &self,
        row: &RawRow,
        read_at: std::time::Instant,
        report: &mut Report,
    ) -> Result<(), EngineError> {
        let Some(Repair { plan, session }) = &self.repair else {
            return Ok(());
        };
        let mut writes: Vec<Write> = Vec::new();
        plan.writes(row, true, &mut RowStats::default(), &mut writes);
        for w in &writes {
            retry::retry(
                &self.progress.scan.retries,
                &self.cancel,
                "copying a row to the target",
                w.idempotent,
                || w.execute(session, read_at.elapsed()),
            )
            .await
            .map_err(|e| {
                if self.cancel.is_cancelled() {
                    EngineError::Stopped
                } else {
                    EngineError::Failed(format!("target: copying a row: {e}"))
                }
            })?;
        }
        report.rows_copied += 1;
        self.progress
            .rows_copied
            .fetch_add(1, AtomicOrdering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use scylla::cluster::metadata::{ColumnType, NativeType};

    // Merging two streams, without Cassandra. Cassandra always returns a range's rows in its
    // own order, and drover orders every clustering type as it does, so a stream out of order
    // (and a source row with a null partition key, which Cassandra refuses to store) cannot be
    // produced through the real services: the merge is fed streams of its own here.

    fn int(v: i32) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(&v.to_be_bytes()))
    }

    /// `(p int, c int, v int, PRIMARY KEY (p, c))`, `c` DESC when `desc`.
    fn spec(desc: bool) -> Spec {
        let col = |name: &str| Column {
            name: name.into(),
            typ: ColumnType::Native(NativeType::Int),
        };
        Spec {
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
            max_examples: 10,
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
    fn stream(side: &'static str, pages: Vec<Vec<RawRow>>) -> Cursor {
        let (tx, rx) = mpsc::channel(pages.len() + 1);
        for page in pages {
            tx.try_send(Page::Rows(page)).unwrap();
        }
        tx.try_send(Page::End).unwrap();
        Cursor::new(side, rx)
    }

    async fn merge(
        desc: bool,
        source: Vec<Vec<RawRow>>,
        target: Vec<Vec<RawRow>>,
    ) -> Result<Report, EngineError> {
        let merge = Merge {
            spec: Arc::new(spec(desc)),
            repair: None,
            progress: Arc::new(Progress::default()),
            limits: Arc::new(Limits::new(None, None)),
            cancel: CancellationToken::new(),
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

    #[test]
    fn where_conditions_follow_renames() {
        let renamed = |n: &str| match n {
            "v" => Some("value".to_string()),
            "Weird" => Some("w2".to_string()),
            _ => None,
        };
        assert_eq!(
            rename_where("v > 3 AND name = 'v' AND \"Weird\" = 1", &renamed),
            "\"value\" > 3 AND name = 'v' AND \"w2\" = 1"
        );
        assert_eq!(
            rename_where("V IN (1, 2) and x = 'it''s v'", &renamed),
            "\"value\" IN (1, 2) and x = 'it''s v'"
        );
        assert_eq!(
            rename_where("id = 123e4567-e89b-12d3-a456-426614174000", &renamed),
            "id = 123e4567-e89b-12d3-a456-426614174000"
        );
    }

    #[test]
    fn plain_names_stay_bare() {
        assert_eq!(quote_if_needed("id"), "id");
        assert_eq!(quote_if_needed("Id"), "\"Id\"");
        assert_eq!(quote_if_needed("a b"), "\"a b\"");
    }
}
