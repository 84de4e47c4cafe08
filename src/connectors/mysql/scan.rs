//! MySQL → CQL: the table's ranges as units, each one `SELECT` streamed from the server by a
//! task of its own into a bounded channel of pages (the server sends rows as drover reads
//! them; at most a few pages of a range are held), converted to CQL cells and written by the
//! CQL connector's writer.

use std::collections::HashMap;
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use scylla::client::session::Session;
use tokio::sync::mpsc;

use super::config::quote;
use super::convert::{self, Conv};
use super::schema::{self, SourceTable};
use super::units::{self, RangeUnit};
use super::{MysqlError, MysqlSource, connect};
use crate::connectors::cql::copy::CopyPlan;
use crate::connectors::cql::rows::RawRow;
use crate::connectors::cql::schema::{self as cql_schema, Column, Mismatch, Problem, TableSchema};
use crate::connectors::cql::transfer::CopySink;
use crate::connectors::cql::{self, CqlTarget};
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Page, Plan, Scan};
use crate::connectors::streamed::Streams;
use crate::jobfile::Rename;
use crate::savepoints;

/// One slot of the rows handed to the CQL writer: a source column and its conversion.
#[derive(Debug, Clone)]
struct Slot {
    /// Index of the column in the SELECT.
    index: usize,
    /// The source column's name.
    name: String,
    conv: Conv,
}

type Sent = crate::connectors::streamed::Sent<RawRow, MysqlError>;

/// The shared, read-only part of a scan, given to each range's task.
pub(crate) struct Reader {
    pub(crate) src: MysqlSource,
    pub(crate) pool: mysql_async::Pool,
    /// `SELECT <columns> FROM <table> WHERE `: a range's condition completes it.
    pub(crate) select: String,
    slots: Vec<Slot>,
    /// SELECT indexes of the key columns, for messages.
    key: Vec<(usize, String)>,
    /// How many of a row's first cells are the target's partition key, and its whole
    /// primary key.
    partition_cells: usize,
    key_cells: usize,
    /// `target.dropNullPrimaryKeys`: a row with a NULL in a key cell goes on to the writer,
    /// which skips it.
    drop_null_keys: bool,
    options: convert::Options,
    /// The one connection of `consistentSnapshot`, in its transaction.
    snapshot: Option<Arc<tokio::sync::Mutex<Option<mysql_async::Conn>>>>,
}

/// A MySQL table read range by range.
pub struct MysqlScan {
    reader: Arc<Reader>,
    conditions: Vec<String>,
    open: Streams<RawRow, MysqlError>,
}

impl MysqlScan {
    /// The reading part, shared with lookups by key.
    pub(crate) fn reader(&self) -> Arc<Reader> {
        self.reader.clone()
    }
}

impl Reader {
    fn condition(&self, range: &str) -> String {
        match &self.src.where_clause {
            Some(w) => format!("{}({w}) AND ({range})", self.select),
            None => format!("{}{range}", self.select),
        }
    }

    /// The row's key as `name=value` pairs, for messages.
    fn render_key(&self, values: &[mysql_async::Value]) -> String {
        self.key
            .iter()
            .zip(values)
            .map(|((_, name), v)| format!("{name}={}", crate::answer::cap(&v.as_sql(true))))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A row read from MySQL as the cells of the CQL writer's row.
    pub(crate) fn convert_row(
        &self,
        row: mysql_async::Row,
        range: &str,
    ) -> Result<RawRow, MysqlError> {
        let mut values = row.unwrap();
        // The key's values (a few small ones), kept to name the row if a value is refused;
        // rendered only then.
        let key: Vec<mysql_async::Value> =
            self.key.iter().map(|(i, _)| values[*i].clone()).collect();
        let mut cells = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            let v = std::mem::replace(&mut values[slot.index], mysql_async::Value::NULL);
            match convert::convert(&slot.conv, v, self.options) {
                Ok(cell) => cells.push(cell),
                Err(message) => {
                    return Err(MysqlError::Value {
                        range: range.to_string(),
                        message: format!(
                            "column {:?} of the row with key ({}): {message}",
                            slot.name,
                            self.render_key(&key)
                        ),
                    });
                }
            }
        }
        if let Some((i, why)) = unwritable_key(
            &cells[..self.key_cells],
            self.partition_cells,
            self.drop_null_keys,
        ) {
            return Err(MysqlError::Value {
                range: range.to_string(),
                message: format!(
                    "column {:?} of the row with key ({}): {why}",
                    self.slots[i].name,
                    self.render_key(&key)
                ),
            });
        }
        Ok(RawRow { cells })
    }

    /// Streams one range into `tx`, page by page.
    async fn stream(self: Arc<Self>, range: String, tx: mpsc::Sender<Sent>) {
        let fail = |e: MysqlError| async { drop(tx.send(Err(e)).await) };
        let sql = self.condition(&range);
        let mut guard = match &self.snapshot {
            Some(s) => Some(s.clone().lock_owned().await),
            None => None,
        };
        let mut own = None;
        let conn: &mut mysql_async::Conn = match guard.as_mut() {
            Some(g) => match g.as_mut() {
                Some(c) => c,
                None => {
                    return fail(MysqlError::Query {
                        what: format!("range {range}"),
                        message: "the connection of the consistent snapshot was lost; run the job again: finished ranges are skipped, the others are read in a new snapshot".into(),
                        retry: crate::connectors::seam::Retry::Never,
                    })
                    .await;
                }
            },
            None => match connect(&self.pool, &self.src).await {
                Ok(c) => own.insert(c),
                Err(e) => return fail(e).await,
            },
        };
        let what = || format!("reading range {range}");
        let mut result = match conn.exec_iter(sql.as_str(), ()).await {
            Ok(r) => r,
            Err(e) => {
                if let Some(g) = guard.as_mut() {
                    // A failed statement may have broken the transaction: nothing reads on.
                    g.take();
                }
                return fail(MysqlError::query(what(), e)).await;
            }
        };
        let fetch = self.src.fetch_size;
        let mut held: Option<Vec<RawRow>> = None;
        let mut page = Vec::with_capacity(fetch.min(4096));
        loop {
            let row = match result.next().await {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(e) => return fail(MysqlError::query(what(), e)).await,
            };
            let cells = match self.convert_row(row, &range) {
                Ok(row) => row,
                Err(e) => return fail(e).await,
            };
            page.push(cells);
            if page.len() >= fetch {
                let full = std::mem::replace(&mut page, Vec::with_capacity(fetch.min(4096)));
                if let Some(previous) = held.replace(full)
                    && tx.send(Ok((previous, false, None))).await.is_err()
                {
                    return;
                }
            }
        }
        match held {
            Some(previous) if page.is_empty() => drop(tx.send(Ok((previous, true, None))).await),
            Some(previous) => {
                if tx.send(Ok((previous, false, None))).await.is_ok() {
                    drop(tx.send(Ok((page, true, None))).await);
                }
            }
            None => drop(tx.send(Ok((page, true, None))).await),
        }
    }
}

impl Scan for MysqlScan {
    type Unit = RangeUnit;
    type Row = RawRow;
    type Cursor = u64;
    type Error = MysqlError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<RangeUnit> {
        units::plan(self.conditions.clone(), done)
    }

    fn start(&self, _: &RangeUnit) -> u64 {
        0
    }

    async fn page(&self, unit: &RangeUnit, cursor: &u64) -> Result<Page<RawRow, u64>, MysqlError> {
        let key = unit.condition.to_string();
        let reader = self.reader.clone();
        self.open
            .page(
                &key,
                *cursor,
                |tx| reader.stream(key.clone(), tx),
                || MysqlError::Query {
                    what: format!("reading range {key}"),
                    message: "the reading task ended without a result".into(),
                    retry: crate::connectors::seam::Retry::Safe,
                },
            )
            .await
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }

    /// `information_schema.TABLES`' `TABLE_ROWS` and `DATA_LENGTH`, spread evenly over the
    /// ranges (drover's own split makes ranges of equal key width). InnoDB's row count is
    /// itself an estimate, often off by tens of percent; a `where` filter is not in it: the
    /// copy corrects it by the ranges it finishes.
    async fn expect(&self, work: &[RangeUnit]) -> Vec<Option<crate::connectors::seam::Expected>> {
        let r = &self.reader;
        let ask = async {
            let mut conn = r.pool.get_conn().await.ok()?;
            let got: Option<(Option<u64>, Option<u64>)> = conn
                .exec_first(
                    "SELECT TABLE_ROWS, DATA_LENGTH FROM information_schema.TABLES \
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                    (&r.src.database, &r.src.table),
                )
                .await
                .ok()?;
            got
        };
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), ask)
            .await
            .ok()
            .flatten();
        let Some((Some(rows), bytes)) = got.filter(|(rows, _)| rows.unwrap_or(0) > 0) else {
            return vec![None; work.len()];
        };
        crate::connectors::seam::Expected::evenly(
            work.len(),
            rows as f64,
            bytes.unwrap_or(0) as f64,
            self.conditions.len().max(1) as f64,
        )
    }
}

/// What a copy and a validation of a MySQL table both start from.
pub(crate) struct Prepared {
    /// The table's ranges, read as the copy reads them.
    pub scan: MysqlScan,
    /// The target's session.
    pub session: Session,
    /// The target's columns the source has, named as in the source, in the rows' order.
    pub described: TableSchema,
    /// The target table.
    pub target: TableSchema,
    /// Source column → target column.
    pub mapping: HashMap<String, String>,
    /// The target's primary key columns, as the source columns they come from (the first
    /// cells of a row).
    pub keys: Vec<KeySource>,
    /// The target's writes.
    pub plan: CopyPlan,
}

/// The source column of a cell of the target's primary key.
#[derive(Debug, Clone)]
pub(crate) struct KeySource {
    /// Its name.
    pub name: String,
    /// Its conversion.
    pub conv: Conv,
    /// Whether it holds bytes rather than characters.
    pub binary: bool,
}

/// Connects to both sides, matches the table's columns to the target's (after `renames`),
/// plans the ranges and prepares the writes. Nothing is written.
pub async fn open_load(
    src: &MysqlSource,
    dst: &CqlTarget,
    renames: &[Rename],
) -> Result<(MysqlScan, CopySink, Pacing), SeamError> {
    let Prepared {
        scan,
        session,
        plan,
        ..
    } = prepare(src, dst, renames).await?;
    let sink = CopySink::new(Arc::new(session), Arc::new(plan));
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once: src.ranges_at_once,
        requests_in_flight: dst.max_in_flight,
        rows_per_second: dst.rows_per_second,
        bytes_per_second: dst.bytes_per_second,
    };
    Ok((scan, sink, pacing))
}

/// [`open_load`]'s work before the writer: both sides checked, the ranges planned.
pub(crate) async fn prepare(
    src: &MysqlSource,
    dst: &CqlTarget,
    renames: &[Rename],
) -> Result<Prepared, SeamError> {
    let pool = mysql_async::Pool::new(super::options(src)?);
    let mut conn = connect(&pool, src).await?;
    let table = schema::load(&mut conn, src).await?;
    let session = cql::connect("target", &dst.endpoint).await?;
    cql::check_local_dc(&session, "target", dst.endpoint.local_dc.as_deref())?;
    let target = match cql_schema::load(
        &session,
        "target",
        &dst.endpoint.keyspace,
        &dst.endpoint.table,
    )
    .await
    {
        // A target table to create: the statement that takes the rows, when the MySQL table
        // tells its key.
        Err(cql::CqlError::Invalid { key, message }) if key == "target.table" => {
            let qualified = format!(
                "{}.{}",
                cql_schema::quote(&cql_schema::resolve_name(&dst.endpoint.keyspace)),
                cql_schema::quote(&cql_schema::resolve_name(&dst.endpoint.table))
            );
            let message = match create_for(&qualified, &table, renames, src, None, None) {
                Some(create) => format!("{message}; to create it:\n  {create}"),
                None => message,
            };
            return Err(cql::CqlError::Invalid { key, message }.into());
        }
        other => other?,
    };
    let (described, mapping, slots) = match match_columns(&table, &target, renames) {
        Err(MysqlError::Mismatch(mut mismatch)) if mismatch.needs_recreate() => {
            // The statement keeps the target's keys and clustering order (which the driver's
            // metadata does not hold) when the MySQL table has their columns.
            let descending = cql_schema::clustering_order(&session, "target", &target).await;
            mismatch.create = create_for(
                &target.qualified(),
                &table,
                renames,
                src,
                Some(&target),
                descending.as_deref().ok(),
            );
            return Err(MysqlError::Mismatch(mismatch).into());
        }
        other => other?,
    };
    let key: Vec<String> = match &src.primary_key {
        Some(k) => {
            for c in k {
                if table.column(c).is_none() {
                    return Err(MysqlError::Invalid {
                        key: "source.primaryKey".into(),
                        message: format!("{c:?} is not a column of {}", table.name),
                    }
                    .into());
                }
            }
            k.clone()
        }
        None => table.primary_key.clone(),
    };
    let conditions = match &src.partitioning {
        Some(p) => units::partitioned(p, &table)?,
        None => units::by_key(&mut conn, src, &table, &key).await?,
    };
    let selected: Vec<String> = table.columns.iter().map(|c| quote(&c.name)).collect();
    let select = format!(
        "SELECT {} FROM {}.{} WHERE ",
        selected.join(", "),
        quote(&src.database),
        quote(&src.table)
    );
    // Checked now, on the server: a `where` that does not parse fails the job before anything
    // is written.
    let probe = match &src.where_clause {
        Some(w) => format!("{select}({w}) AND FALSE"),
        None => format!("{select}FALSE"),
    };
    conn.exec_drop(probe.as_str(), ())
        .await
        .map_err(|e| match e {
            mysql_async::Error::Server(s) => SeamError::from(MysqlError::Invalid {
                key: "source.where".into(),
                message: format!("the server refused the query: {}", s.message),
            }),
            e => MysqlError::query("checking the query", e).into(),
        })?;
    let snapshot = if src.consistent_snapshot {
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .await
            .map_err(|e| MysqlError::query("starting the snapshot", e))?;
        conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            .await
            .map_err(|e| MysqlError::query("starting the snapshot", e))?;
        tracing::info!(
            "consistentSnapshot: every range is read in one transaction, one range at a time"
        );
        Some(Arc::new(tokio::sync::Mutex::new(Some(conn))))
    } else {
        tracing::info!(
            "{} range(s) of {} read on separate connections: each range is a consistent read of its own, the table as a whole is not one snapshot (set source.consistentSnapshot for one)",
            conditions.len(),
            table.name
        );
        drop(conn);
        None
    };
    let key_indexes = key
        .iter()
        .filter_map(|k| {
            table
                .columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(k))
                .map(|i| (i, table.columns[i].name.clone()))
        })
        .collect();
    let key_len = target.partition_key.len() + target.clustering_key.len();
    let keys = slots[..key_len]
        .iter()
        .map(|slot| KeySource {
            name: slot.name.clone(),
            conv: slot.conv.clone(),
            binary: table.columns[slot.index].is_binary(),
        })
        .collect();
    let plan = CopyPlan::prepare_writes(
        &session,
        dst,
        described.clone(),
        target.clone(),
        &mapping,
        false,
    )
    .await?;
    let scan = MysqlScan {
        reader: Arc::new(Reader {
            src: src.clone(),
            pool,
            select,
            slots,
            key: key_indexes,
            partition_cells: target.partition_key.len(),
            key_cells: key_len,
            drop_null_keys: dst.drop_null_primary_keys,
            options: convert::Options {
                zero_dates: src.zero_dates,
                truncate_timestamps: src.truncate_timestamps,
            },
            snapshot,
        }),
        conditions,
        open: Streams::default(),
    };
    Ok(Prepared {
        scan,
        session,
        described,
        target,
        mapping,
        keys,
        plan,
    })
}

/// Why the target cannot hold a row whose primary key cells are `key` (its `partition`
/// first), naming the cell: a NULL anywhere (unless `drop_nulls`: the writer skips the row),
/// or an empty single-column partition key, which Cassandra refuses ("Key may not be
/// empty"). The CQL writer takes a row whose clustering cells are all null for a partition
/// of static cells only, as a CQL source sends them, and writes no row: MySQL has no such
/// partitions, so such a row would be lost without a word.
fn unwritable_key(
    key: &[Option<bytes::Bytes>],
    partition: usize,
    drop_nulls: bool,
) -> Option<(usize, &'static str)> {
    if let Some(i) = key.iter().position(Option::is_none)
        && !drop_nulls
    {
        return Some((
            i,
            "NULL, which a primary key column of the target cannot hold; set target.dropNullPrimaryKeys: true to skip such rows",
        ));
    }
    match key {
        [Some(only), ..] if partition == 1 && only.is_empty() => Some((
            0,
            "an empty value, which Cassandra refuses as a whole partition key",
        )),
        _ => None,
    }
}

/// `CREATE TABLE` for the target `qualified` (`"ks"."t"`) that takes the rows of `table`: its
/// columns (after renames) in the CQL types a load writes them as ([`convert::suggested_type`]);
/// keyed as `target` is (with its clustering order, `descending`) when it exists and the
/// MySQL table has its key columns, else by the MySQL table's key (`source.primaryKey`, or
/// its primary key) as the partition key, which keeps its rows apart as MySQL does. `None`
/// when a column has no such type (it must be left out of the source first) or no key is
/// known.
fn create_for(
    qualified: &str,
    table: &SourceTable,
    renames: &[Rename],
    src: &MysqlSource,
    target: Option<&TableSchema>,
    descending: Option<&[bool]>,
) -> Option<String> {
    let to = |name: &str| -> String {
        renames
            .iter()
            .find(|r| r.from.eq_ignore_ascii_case(name))
            .map_or(name, |r| r.to.as_str())
            .to_string()
    };
    let columns: Vec<(String, scylla::cluster::metadata::ColumnType<'static>)> = table
        .columns
        .iter()
        .map(|c| Some((to(&c.name), convert::suggested_cql(c)?)))
        .collect::<Option<_>>()?;
    if let Some(target) = target {
        let names = |cols: &[Column]| cols.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let keyed = cql_schema::create_for(
            qualified,
            &columns,
            (
                &names(&target.partition_key),
                &names(&target.clustering_key),
                &names(&target.statics),
            ),
            descending,
        );
        if keyed.is_some() {
            return keyed;
        }
    }
    let key: Vec<String> = src
        .primary_key
        .as_ref()
        .unwrap_or(&table.primary_key)
        .iter()
        .filter_map(|k| table.column(k))
        .map(|c| to(&c.name))
        .collect();
    cql_schema::create_for(qualified, &columns, (&key, &[], &[]), None)
}

/// The described table, the column mapping and the slots.
type Matched = (TableSchema, HashMap<String, String>, Vec<Slot>);

/// The source table described as a table of the target's columns named as in the source;
/// source column → target column; and the slots of the rows, in the described table's order.
fn match_columns(
    table: &SourceTable,
    target: &TableSchema,
    renames: &[Rename],
) -> Result<Matched, MysqlError> {
    // Every problem is collected, so that one submission names them all.
    let mut problems = Vec::new();
    let mut mapping = HashMap::new();
    for r in renames {
        if table.column(&r.from).is_none() {
            tracing::warn!(
                "renames: {} has no column {:?}; the rename does nothing",
                table.name,
                r.from
            );
        }
    }
    for c in &table.columns {
        let to = renames
            .iter()
            .find(|r| r.from.eq_ignore_ascii_case(&c.name))
            .map_or(c.name.as_str(), |r| r.to.as_str());
        let Some(col) = target.all().find(|t| t.name == to) else {
            let fix = convert::suggested_type(c).map(|typ| {
                format!(
                    "ALTER TABLE {} ADD {} {typ};",
                    target.qualified(),
                    cql_schema::quote(to)
                )
            });
            problems.push(Problem {
                message: format!(
                    "column {:?} of {} ({}) is not a column of the target table{}",
                    c.name,
                    table.name,
                    c.column_type,
                    if to == c.name {
                        String::new()
                    } else {
                        format!(" (renamed to {to:?})")
                    }
                ),
                fix: Some(fix.unwrap_or_else(|| {
                    "no CQL type takes it exactly: leave it out of the source (a view without it)"
                        .into()
                })),
            });
            continue;
        };
        if let Some((other, _)) = mapping
            .iter()
            .find(|(_, v): &(&String, &String)| **v == col.name)
        {
            problems.push(Problem {
                message: format!(
                    "columns {other:?} and {:?} would both be written to the target column {:?}",
                    c.name, col.name
                ),
                fix: Some("rename one of them to another column (renames)".into()),
            });
            continue;
        }
        if let Err(e) = convert::plan(c, &col.typ) {
            problems.push(Problem {
                message: format!(
                    "column {:?} of {} → {:?}: {e}",
                    c.name, table.name, col.name
                ),
                fix: None,
            });
        }
        mapping.insert(c.name.clone(), col.name.clone());
    }
    for k in target.partition_key.iter().chain(&target.clustering_key) {
        if !mapping.values().any(|v| *v == k.name) {
            problems.push(Problem {
                message: format!(
                    "{} has no column for the target's primary key column {:?}",
                    table.name, k.name
                ),
                fix: None,
            });
        }
    }
    if !problems.is_empty() {
        return Err(MysqlError::Mismatch(Box::new(Mismatch {
            target: target.qualified(),
            source: format!("the MySQL table {}", table.name),
            problems,
            create: None,
        })));
    }
    let invalid = |message: String| MysqlError::Invalid {
        key: "source.table".into(),
        message,
    };
    let from_target: HashMap<&str, &str> = mapping
        .iter()
        .map(|(s, t)| (t.as_str(), s.as_str()))
        .collect();
    let mut slots = Vec::new();
    let mut describe = |cols: &[Column]| -> Result<Vec<Column>, MysqlError> {
        let mut out = Vec::new();
        for t in cols {
            let Some(source_name) = from_target.get(t.name.as_str()) else {
                continue;
            };
            let index = table
                .columns
                .iter()
                .position(|c| c.name == *source_name)
                .expect("mapped from the table");
            let conv = convert::plan(&table.columns[index], &t.typ).map_err(|e| {
                invalid(format!(
                    "column {source_name:?} of {} → {:?}: {e}",
                    table.name, t.name
                ))
            })?;
            slots.push(Slot {
                index,
                name: (*source_name).to_string(),
                conv,
            });
            out.push(Column {
                name: (*source_name).to_string(),
                typ: t.typ.clone(),
            });
        }
        Ok(out)
    };
    let described = TableSchema {
        keyspace: target.keyspace.clone(),
        table: target.table.clone(),
        partition_key: describe(&target.partition_key)?,
        clustering_key: describe(&target.clustering_key)?,
        statics: describe(&target.statics)?,
        regular: describe(&target.regular)?,
    };
    Ok((described, mapping, slots))
}

#[cfg(test)]
mod tests {
    use super::unwritable_key;
    use bytes::Bytes;

    #[test]
    fn null_and_empty_keys_are_named_before_anything_is_written() {
        let v = |s: &'static str| Some(Bytes::from_static(s.as_bytes()));
        // A NULL clustering cell, which the writer would take for a partition of statics.
        assert_eq!(
            unwritable_key(&[v("a"), None], 1, false).map(|r| r.0),
            Some(1)
        );
        assert_eq!(
            unwritable_key(&[None, v("b")], 2, false).map(|r| r.0),
            Some(0)
        );
        // dropNullPrimaryKeys: the row goes on to the writer, which skips it.
        assert_eq!(unwritable_key(&[v("a"), None], 1, true), None);
        // An empty partition key alone is refused by Cassandra; a component of a composite
        // one, or a clustering cell, may be empty.
        assert_eq!(
            unwritable_key(&[v(""), v("x")], 1, false).map(|r| r.0),
            Some(0)
        );
        assert_eq!(unwritable_key(&[v(""), v("x")], 2, false), None);
        assert_eq!(unwritable_key(&[v("x"), v("")], 1, false), None);
        assert_eq!(unwritable_key(&[v("x")], 1, false), None);
    }
}
