//! Copying one token range of a CQL table to another: the statements, and the translation of
//! each source row into target writes that keep every cell's writetime and TTL when asked.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use scylla::client::session::Session;
use scylla::cluster::metadata::{CollectionType, ColumnType};
use scylla::statement::prepared::PreparedStatement;

use super::CqlError;
use super::codec::{
    join_collection, read_i32, read_i64, read_int_list, split_collection, strip_trailing_zeros,
};
use super::config::{CqlSource, CqlTarget};
use super::multicell::{ListCheck, ListGuard, ListRead, udt_fields};
use super::rows::{Bound, BoundRow, RawRow};
use super::schema::{Column, TableSchema, quote};

/// How a row is turned into writes: the prepared statements of a job and the layout of the
/// scanned rows.
#[derive(Clone)]
pub struct CopyPlan {
    /// Source table.
    pub source: TableSchema,
    /// Target table.
    pub target: TableSchema,
    select: Option<PreparedStatement>,
    /// `INSERT` of primary key + regular columns (all of them; unset where not written).
    row_insert: Option<PreparedStatement>,
    /// `UPDATE ... USING TIMESTAMP ? AND TTL ? SET <regular columns> WHERE <key>`: the cells
    /// of a row written at another writetime than its oldest, which leave the row marker the
    /// oldest's (as the source's `INSERT` left it).
    row_update: Option<PreparedStatement>,
    /// `INSERT` of partition key + static columns.
    static_insert: Option<PreparedStatement>,
    /// Multi-cell columns written element by element (regular).
    regular_cells: MultiCell,
    /// Multi-cell columns written element by element (static).
    static_cells: MultiCell,
    /// `SELECT <first key column> FROM target WHERE <key>`: a row with no regular cell is
    /// written only when the target lacks it, so that its marker keeps the first copy's time.
    row_exists: Option<PreparedStatement>,
    /// `UPDATE ... SET c = c + ?` for each counter column, by regular index.
    counter_updates: BTreeMap<usize, PreparedStatement>,
    /// `SELECT <counters> FROM target WHERE <key>`: counters are written as the difference
    /// between the source value and what the target holds.
    counter_read: Option<PreparedStatement>,
    target_consistency: scylla::statement::Consistency,
    preserve: bool,
    strip_decimals: bool,
    fixed_ttl: Option<i32>,
    fixed_timestamp: Option<i64>,
    drop_null_keys: bool,
    decimal_regular: Vec<bool>,
    decimal_static: Vec<bool>,
}

/// The element-by-element writes of the multi-cell columns of one part of a row (its
/// regular or its static columns), by the column's index in that part.
#[derive(Clone, Default)]
struct MultiCell {
    /// `UPDATE ... SET c = c + ?` for each non-frozen collection.
    appends: BTreeMap<usize, PreparedStatement>,
    /// `UPDATE ... SET c.f = ?` for each field of each non-frozen UDT, in field order.
    fields: BTreeMap<usize, Vec<PreparedStatement>>,
    /// The read of the part's non-frozen lists before they are written.
    lists: Option<ListRead>,
}

impl MultiCell {
    /// Prepares the element-by-element writes of the multi-cell columns among `cols`, whose
    /// rows are addressed by the condition `where_key` (`limit` for a partition's statics).
    async fn prepare(
        session: &Session,
        target: &TableSchema,
        cols: &[Column],
        (where_key, limit): (String, &str),
        renamed: &(dyn Fn(&Column) -> String + Sync),
        tc: scylla::statement::Consistency,
    ) -> Result<Self, CqlError> {
        let mut part = MultiCell::default();
        let mut lists = Vec::new();
        for (i, c) in cols.iter().enumerate() {
            let name = quote(&renamed(c));
            let update = |set: String| {
                format!(
                    "UPDATE {} USING TIMESTAMP ? AND TTL ? SET {set} WHERE {where_key}",
                    target.qualified()
                )
            };
            match &c.typ {
                ColumnType::Collection { frozen: false, typ } => {
                    let cql = update(format!("{name} = {name} + ?"));
                    part.appends
                        .insert(i, prepare_write(session, &cql, tc, true).await?);
                    if matches!(typ, CollectionType::List(_)) {
                        lists.push((i, name));
                    }
                }
                ColumnType::UserDefinedType {
                    frozen: false,
                    definition,
                } => {
                    let mut fields = Vec::with_capacity(definition.field_types.len());
                    for (field, _) in &definition.field_types {
                        let cql = update(format!("{name}.{} = ?", quote(field)));
                        fields.push(prepare_write(session, &cql, tc, true).await?);
                    }
                    part.fields.insert(i, fields);
                }
                _ => {}
            }
        }
        if !lists.is_empty() {
            let select = lists
                .iter()
                .map(|(_, n)| format!("{n}, WRITETIME({n})"))
                .collect::<Vec<_>>()
                .join(", ");
            let cql = format!(
                "SELECT {select} FROM {} WHERE {where_key}{limit}",
                target.qualified()
            );
            part.lists = Some(ListRead {
                statement: prepare_write(session, &cql, tc, true).await?,
                position: lists
                    .iter()
                    .enumerate()
                    .map(|(j, (i, _))| (*i, j))
                    .collect(),
            });
        }
        Ok(part)
    }
}

/// What one statement writes.
pub struct Write {
    /// The statement.
    pub statement: PreparedStatement,
    /// Its values.
    pub values: BoundRow,
    /// Counter updates must never be repeated once they may have been applied.
    pub idempotent: bool,
    /// Index of the TTL value among `values`, when the statement sets a TTL read from the
    /// source: it is shortened by the time between the read and the write.
    pub ttl_slot: Option<usize>,
    /// For a counter row: (index among the counters read, `UPDATE ... c = c + ?`, source
    /// value) of each non-null counter. `statement` then reads the target's counters.
    pub counters: Option<Vec<(usize, PreparedStatement, i64)>>,
    /// Lists (or a row's existence) checked on the target first: see [`multicell`].
    pub guard: Option<ListGuard>,
}

impl Write {
    /// Executes the write on `session`; its source row's TTLs count from `read_at`.
    ///
    /// A counter row reads the target's counters first and adds only the difference: writing
    /// it again (a retry, a resumed unit, a re-run) leaves the target at the source's values
    /// instead of adding them twice.
    pub async fn execute(
        &self,
        session: &Session,
        read_at: std::time::Instant,
    ) -> Result<(), scylla::errors::ExecutionError> {
        let Some(counters) = &self.counters else {
            return match self.values_now(session, read_at).await? {
                Some(values) => session
                    .execute_unpaged(&self.statement, values)
                    .await
                    .map(|_| ()),
                // Expired while waiting (the source no longer has it either), or already
                // on the target.
                None => Ok(()),
            };
        };
        let current = session
            .execute_unpaged(&self.statement, &self.values)
            .await?;
        let row: Option<RawRow> = current
            .into_rows_result()
            .ok()
            .and_then(|r| r.maybe_first_row::<RawRow>().ok().flatten());
        for (i, update, source_value) in counters {
            let present = row.as_ref().and_then(|r| read_i64(&r.cells[*i]));
            let delta = source_value.wrapping_sub(present.unwrap_or(0));
            // A counter of 0 still exists in the source: `c = c + 0` creates it.
            if delta != 0 || present.is_none() {
                let mut values = vec![Bound::BigInt(delta)];
                values.extend(self.values.0.iter().cloned());
                session.execute_unpaged(update, BoundRow(values)).await?;
            }
        }
        Ok(())
    }

    /// The values to send now, after the guard, if any, has left out what the target already
    /// holds; `None` when nothing is left to write. TTLs are aged (see
    /// [`aged`](Self::aged)) after the guard's read, which can take seconds when
    /// target nodes are failing: aged before it, the write would carry TTLs that long.
    pub async fn values_now(
        &self,
        session: &Session,
        read_at: std::time::Instant,
    ) -> Result<Option<BoundRow>, scylla::errors::ExecutionError> {
        Ok(self
            .guarded(session)
            .await?
            .and_then(|values| self.aged(values, read_at.elapsed())))
    }

    /// The values left after the guard, if any (`None` when the target already holds them
    /// all), TTLs not yet aged.
    async fn guarded(
        &self,
        session: &Session,
    ) -> Result<Option<BoundRow>, scylla::errors::ExecutionError> {
        match &self.guard {
            None => Ok(Some(self.values.clone())),
            Some(guard) => guard.apply(session, &self.values).await,
        }
    }

    /// `values` to send `elapsed` after the source row's TTLs were counted: a source TTL is
    /// shortened by that time, so the cell expires when it would have in the source, even
    /// when the write waited behind others or was retried during an outage. `None` when the
    /// cell has expired meanwhile (nothing is left to write).
    fn aged(&self, mut values: BoundRow, elapsed: std::time::Duration) -> Option<BoundRow> {
        let Some(slot) = self.ttl_slot else {
            return Some(values);
        };
        if let Some(Bound::Int(ttl)) = values.0.get_mut(slot)
            && *ttl > 0
        {
            let left = i64::from(*ttl) - elapsed.as_secs() as i64;
            if left <= 0 {
                return None;
            }
            *ttl = left as i32;
        }
        Some(values)
    }
}

/// Sends writes of one partition as one unlogged batch (applied by the target as a single
/// mutation), the TTLs of `writes[i]` counting from `read_at[i]`; statements whose cells
/// expired while waiting are left out.
pub async fn execute_batch(
    writes: &[Write],
    session: &Session,
    consistency: scylla::statement::Consistency,
    read_at: &[std::time::Instant],
) -> Result<(), scylla::errors::ExecutionError> {
    let mut batch =
        scylla::statement::batch::Batch::new(scylla::statement::batch::BatchType::Unlogged);
    batch.set_consistency(consistency);
    batch.set_is_idempotent(writes.iter().all(|w| w.idempotent));
    if writes.iter().any(|w| w.ttl_slot.is_some()) {
        batch.set_retry_policy(Some(super::retry::no_driver_retry()));
    }
    // The guards' reads (lists already on the target) go out together.
    let guarded = futures::future::try_join_all(writes.iter().map(|w| w.guarded(session))).await?;
    // Every statement's TTLs are aged once all the guards have answered, just before the batch
    // goes out: aged before a guard's read (seconds when target nodes fail), the batch's
    // other cells would outlive their source by that read's time (3-7 s seen).
    let mut values = Vec::with_capacity(writes.len());
    for ((w, v), read_at) in writes.iter().zip(guarded).zip(read_at) {
        if let Some(v) = v.and_then(|v| w.aged(v, read_at.elapsed())) {
            batch.append_statement(w.statement.clone());
            values.push(v);
        }
    }
    if values.is_empty() {
        return Ok(());
    }
    session.batch(&batch, values).await.map(|_| ())
}

/// Per-row outcome counters.
#[derive(Debug, Default, Clone, Copy)]
pub struct RowStats {
    /// Rows skipped because a primary key column was null.
    pub dropped: u64,
}

fn column_list(cols: &[&Column], renamed: &dyn Fn(&Column) -> String) -> String {
    cols.iter()
        .map(|c| quote(&renamed(c)))
        .collect::<Vec<_>>()
        .join(", ")
}

impl CopyPlan {
    /// Prepares every statement of a CQL → CQL job on both sessions.
    pub async fn prepare(
        source_session: &Session,
        target_session: &Session,
        source_cfg: &CqlSource,
        target_cfg: &CqlTarget,
        source: TableSchema,
        target: TableSchema,
        mapping: &std::collections::HashMap<String, String>,
    ) -> Result<Self, CqlError> {
        let preserve = source_cfg.preserve_timestamps && !source.is_counter_table();
        let select = prepare_select(source_session, source_cfg, &source, preserve).await?;
        let mut plan = Self::prepare_writes(
            target_session,
            target_cfg,
            source,
            target,
            mapping,
            preserve,
        )
        .await?;
        plan.select = Some(select);
        Ok(plan)
    }

    /// Prepares the target's statements for rows laid out as a scan of `source` gives them
    /// (primary key, statics, regular columns, then a writetime and TTL per static and regular
    /// column when `preserve`), whatever reads them: a CQL table, or Parquet files whose
    /// columns are described as a table.
    pub async fn prepare_writes(
        target_session: &Session,
        target_cfg: &CqlTarget,
        source: TableSchema,
        target: TableSchema,
        mapping: &std::collections::HashMap<String, String>,
        preserve: bool,
    ) -> Result<Self, CqlError> {
        let counter = source.is_counter_table();
        let preserve = preserve && !counter;
        let renamed = |c: &Column| mapping[&c.name].clone();
        let tc = target_cfg.endpoint.consistency_level.into();
        let key_cols: Vec<&Column> = source
            .partition_key
            .iter()
            .chain(&source.clustering_key)
            .collect();
        let pk_cols: Vec<&Column> = source.partition_key.iter().collect();
        // As in ScyllaDB Migrator, writetimes and TTLs read from the source win over the fixed
        // ones: `writeWritetimestampInuS` then only serves `repairWritetimeStrategy: config`.
        let (fixed_ttl, fixed_timestamp) = if preserve {
            if target_cfg.write_ttl_in_s.is_some()
                || target_cfg.write_writetimestamp_in_us.is_some()
            {
                tracing::warn!(
                    "target.writeTTLInS and target.writeWritetimestampInuS do not apply to cells copied \
                     with their own writetimes and TTLs (source.preserveTimestamps, or Parquet files \
                     carrying them), as in ScyllaDB Migrator; they are ignored for the copy"
                );
            }
            (None, None)
        } else {
            (
                target_cfg.write_ttl_in_s,
                target_cfg.write_writetimestamp_in_us,
            )
        };
        let using = if preserve
            || target_cfg.write_ttl_in_s.is_some()
            || target_cfg.write_writetimestamp_in_us.is_some()
        {
            " USING TIMESTAMP ? AND TTL ?"
        } else {
            ""
        };
        let where_key = |cols: &[&Column]| {
            cols.iter()
                .map(|c| format!("{} = ?", quote(&renamed(c))))
                .collect::<Vec<_>>()
                .join(" AND ")
        };

        let mut row_insert = None;
        let mut row_update = None;
        let mut row_exists = None;
        let mut static_insert = None;
        let mut regular_cells = MultiCell::default();
        let mut static_cells = MultiCell::default();
        let mut counter_updates = BTreeMap::new();
        let mut counter_read = None;
        if counter {
            let cql = format!(
                "SELECT {} FROM {} WHERE {}",
                column_list(&source.regular.iter().collect::<Vec<_>>(), &renamed),
                target.qualified(),
                where_key(&key_cols)
            );
            counter_read = Some(prepare_write(target_session, &cql, tc, true).await?);
            for (i, c) in source.regular.iter().enumerate() {
                let name = quote(&renamed(c));
                let cql = format!(
                    "UPDATE {} SET {name} = {name} + ? WHERE {}",
                    target.qualified(),
                    where_key(&key_cols)
                );
                counter_updates.insert(i, prepare_write(target_session, &cql, tc, false).await?);
            }
        } else {
            let insert = |cols: Vec<&Column>| {
                format!(
                    "INSERT INTO {} ({}) VALUES ({}){using}",
                    target.qualified(),
                    column_list(&cols, &renamed),
                    vec!["?"; cols.len()].join(", ")
                )
            };
            let row_cols = key_cols.iter().copied().chain(&source.regular).collect();
            row_insert = Some(prepare_write(target_session, &insert(row_cols), tc, true).await?);
            if !source.statics.is_empty() {
                let static_cols = pk_cols.iter().copied().chain(&source.statics).collect();
                static_insert =
                    Some(prepare_write(target_session, &insert(static_cols), tc, true).await?);
            }
            if preserve {
                if !source.regular.is_empty() {
                    let cql = format!(
                        "UPDATE {} USING TIMESTAMP ? AND TTL ? SET {} WHERE {}",
                        target.qualified(),
                        source
                            .regular
                            .iter()
                            .map(|c| format!("{} = ?", quote(&renamed(c))))
                            .collect::<Vec<_>>()
                            .join(", "),
                        where_key(&key_cols)
                    );
                    row_update = Some(prepare_write(target_session, &cql, tc, true).await?);
                }
                let first_key = key_cols.first().map(|c| quote(&renamed(c)));
                let cql = format!(
                    "SELECT {} FROM {} WHERE {}",
                    first_key.unwrap_or_default(),
                    target.qualified(),
                    where_key(&key_cols)
                );
                row_exists = Some(prepare_write(target_session, &cql, tc, true).await?);
                regular_cells = MultiCell::prepare(
                    target_session,
                    &target,
                    &source.regular,
                    (where_key(&key_cols), ""),
                    &renamed,
                    tc,
                )
                .await?;
                static_cells = MultiCell::prepare(
                    target_session,
                    &target,
                    &source.statics,
                    (where_key(&pk_cols), " LIMIT 1"),
                    &renamed,
                    tc,
                )
                .await?;
            }
        }
        let is_decimal = |c: &Column| {
            matches!(
                c.typ,
                ColumnType::Native(scylla::cluster::metadata::NativeType::Decimal)
            )
        };
        Ok(Self {
            decimal_regular: source.regular.iter().map(is_decimal).collect(),
            decimal_static: source.statics.iter().map(is_decimal).collect(),
            source,
            target,
            select: None,
            row_insert,
            row_update,
            static_insert,
            regular_cells,
            static_cells,
            row_exists,
            counter_updates,
            counter_read,
            target_consistency: tc,
            preserve,
            strip_decimals: target_cfg.strip_trailing_zeros_for_decimals,
            fixed_ttl,
            fixed_timestamp,
            drop_null_keys: target_cfg.drop_null_primary_keys,
        })
    }

    /// The same plan writing every cell at `micros` (keeping TTLs), as
    /// `repairWritetimeStrategy: coordinator` or `config` writes rows the target lacks.
    /// Without preserved writetimes the statements take no timestamp and this changes nothing.
    pub fn at_timestamp(&self, micros: i64) -> Self {
        let mut plan = self.clone();
        if plan.preserve {
            plan.fixed_timestamp = Some(micros);
        }
        plan
    }

    /// Consistency of target writes.
    pub fn target_consistency(&self) -> scylla::statement::Consistency {
        self.target_consistency
    }

    /// Whether rows with a null primary key column are skipped (else they fail the job).
    pub fn drops_null_keys(&self) -> bool {
        self.drop_null_keys
    }

    /// The scan statement (bind `(start, end)` as bigints) of a CQL → CQL plan.
    pub fn select(&self) -> &PreparedStatement {
        self.select
            .as_ref()
            .expect("a CQL → CQL plan prepares its select")
    }

    /// The writes that reproduce `row` on the target. `write_statics` is false when the row's
    /// partition has already had its static cells written (every row of a partition carries
    /// them).
    pub fn writes(
        &self,
        row: &RawRow,
        write_statics: bool,
        stats: &mut RowStats,
        out: &mut Vec<Write>,
    ) {
        let np = self.source.partition_key.len();
        let nc = self.source.clustering_key.len();
        let ns = self.source.statics.len();
        let nr = self.source.regular.len();
        let cells = &row.cells;
        if cells[..np].iter().any(Option::is_none) {
            stats.dropped += 1;
            return;
        }
        let pk: Vec<Bound> = cells[..np]
            .iter()
            .map(|c| Bound::Value(c.clone().expect("checked")))
            .collect();
        // A CQL scan gives a partition of static cells only as a row whose clustering columns
        // are all null, and so are its regular cells. Any other null in the clustering key
        // (a Parquet or MySQL row with a regular value and no clustering value) is a null key.
        let ck_null = nc > 0
            && cells[np..np + nc].iter().all(Option::is_none)
            && cells[np + nc + ns..np + nc + ns + nr]
                .iter()
                .all(Option::is_none);
        if nc > 0 && !ck_null && cells[np..np + nc].iter().any(Option::is_none) {
            stats.dropped += 1;
            return;
        }
        let key: Vec<Bound> = cells[..np + nc]
            .iter()
            .map(|c| c.clone().map_or(Bound::Unset, Bound::Value))
            .collect();
        let statics = &cells[np + nc..np + nc + ns];
        let regular = &cells[np + nc + ns..np + nc + ns + nr];
        let meta = &cells[np + nc + ns + nr..];

        if let Some(read) = &self.counter_read {
            let updates: Vec<_> = self
                .counter_updates
                .iter()
                .filter_map(|(i, st)| {
                    regular[*i]
                        .as_ref()
                        .and_then(|v| read_i64(&Some(v.clone())))
                        .map(|v| (*i, st.clone(), v))
                })
                .collect();
            if !updates.is_empty() {
                out.push(Write {
                    statement: read.clone(),
                    values: BoundRow(key.clone()),
                    idempotent: true,
                    ttl_slot: None,
                    counters: Some(updates),
                    guard: None,
                });
            }
            return;
        }

        if write_statics && let Some(st) = &self.static_insert {
            let part = Part {
                insert: st,
                update: None,
                key: &pk,
                values: statics,
                columns: &self.source.statics,
                decimal: &self.decimal_static,
                meta_offset: 0,
                cells: &self.static_cells,
                is_row: false,
            };
            self.grouped(part, meta, out);
        }
        if ck_null {
            // A partition holding only static data: there is no row to write.
            return;
        }
        let part = Part {
            insert: self
                .row_insert
                .as_ref()
                .expect("non-counter tables have a row insert"),
            update: self.row_update.as_ref(),
            key: &key,
            values: regular,
            columns: &self.source.regular,
            decimal: &self.decimal_regular,
            meta_offset: ns,
            cells: &self.regular_cells,
            is_row: true,
        };
        self.grouped(part, meta, out);
    }

    /// Writes one part of a row (its regular or its static cells), one statement per
    /// distinct (writetime, TTL) when timestamps are preserved.
    fn grouped(&self, part: Part<'_>, meta: &[Option<Bytes>], out: &mut Vec<Write>) {
        let Part {
            insert,
            update,
            key,
            values,
            columns,
            decimal,
            meta_offset,
            cells,
            is_row,
        } = part;
        let value = |i: usize, v: &Bytes| {
            if self.strip_decimals && decimal[i] {
                strip_trailing_zeros(v)
            } else {
                v.clone()
            }
        };
        let guard = |checks: Vec<ListCheck>| {
            (!checks.is_empty()).then(|| ListGuard {
                read: cells
                    .lists
                    .as_ref()
                    .expect("lists are checked only with their read")
                    .statement
                    .clone(),
                key: BoundRow(key.to_vec()),
                checks,
                drop_if_present: false,
            })
        };
        // `INSERT (key…, cells…) USING TIMESTAMP ? AND TTL ?`: writes the row marker too.
        let insert_with = |cells: Vec<Bound>, ts: Option<i64>, ttl: i32, checks| {
            let mut all = key.to_vec();
            all.extend(cells);
            if self.preserve || self.fixed_ttl.is_some() || self.fixed_timestamp.is_some() {
                all.push(ts.map_or(Bound::Unset, Bound::BigInt));
                all.push(Bound::Int(ttl));
            }
            let ttl_slot =
                (self.preserve && self.fixed_ttl.is_none()).then(|| all.len().saturating_sub(1));
            Write {
                statement: insert.clone(),
                values: BoundRow(all),
                idempotent: true,
                ttl_slot,
                counters: None,
                guard: guard(checks),
            }
        };
        // `UPDATE … USING TIMESTAMP ? AND TTL ? SET <statement's cells> WHERE <key>`.
        let update_with = |statement: &PreparedStatement, set: Vec<Bound>, wt: i64, ttl: i32| {
            let mut all = vec![
                Bound::BigInt(self.fixed_timestamp.unwrap_or(wt)),
                Bound::Int(self.fixed_ttl.unwrap_or(ttl)),
            ];
            all.extend(set);
            all.extend(key.iter().cloned());
            Write {
                statement: statement.clone(),
                values: BoundRow(all),
                idempotent: true,
                ttl_slot: self.fixed_ttl.is_none().then_some(1),
                counters: None,
                guard: None,
            }
        };
        if !self.preserve {
            if !is_row && values.iter().all(Option::is_none) {
                return;
            }
            let cells: Vec<Bound> = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_ref()
                        .map_or(Bound::Unset, |v| Bound::Value(value(i, v)))
                })
                .collect();
            // A row with nothing but its key is written too: it exists in the source.
            out.push(insert_with(
                cells,
                self.fixed_timestamp,
                self.fixed_ttl.unwrap_or(0),
                Vec::new(),
            ));
            return;
        }
        // (writetime, TTL) -> the cells of that group and the lists among them (column index,
        // elements); no writetime: the target's clock.
        type Group = (Vec<Bound>, Vec<(usize, Vec<(Bytes, i64)>)>);
        let mut groups: BTreeMap<(Option<i64>, i32), Group> = BTreeMap::new();
        let mut any = false;
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            any = true;
            let wt_cell = &meta[2 * (meta_offset + i)];
            let ttl_cell = &meta[2 * (meta_offset + i) + 1];
            let is_list = cells
                .lists
                .as_ref()
                .is_some_and(|l| l.position.contains_key(&i));
            let mut single = |wt: Option<i64>, ttl: i32| {
                let wt = self.fixed_timestamp.or(wt);
                let ttl = self.fixed_ttl.unwrap_or(ttl);
                let group = groups
                    .entry((wt, ttl))
                    .or_insert_with(|| (vec![Bound::Unset; values.len()], Vec::new()));
                group.0[i] = Bound::Value(value(i, v));
                if is_list && let Some(wt) = wt {
                    let elements = split_collection(v, false).unwrap_or_default();
                    group
                        .1
                        .push((i, elements.into_iter().map(|e| (e, wt)).collect()));
                }
            };
            if wt_cell.is_none() {
                // A source that does not know this cell's writetime (a Parquet file without
                // it): written at the target's time, with the TTL if one is known.
                single(None, read_i32(ttl_cell).unwrap_or(0));
                continue;
            }
            if let Some(wt) = read_i64(wt_cell) {
                single(Some(wt), read_i32(ttl_cell).unwrap_or(0));
                continue;
            }
            // A multi-cell column: one writetime (and TTL) per element or field.
            let wts = read_int_list(wt_cell).unwrap_or_default();
            let ttls = read_int_list(ttl_cell).unwrap_or_default();
            let pairs: Vec<(i64, i32)> = wts
                .iter()
                .enumerate()
                .map(|(e, wt)| {
                    (
                        wt.unwrap_or(0),
                        ttls.get(e).copied().flatten().unwrap_or(0) as i32,
                    )
                })
                .collect();
            let distinct: std::collections::BTreeSet<_> = pairs.iter().copied().collect();
            if distinct.len() <= 1 {
                let (wt, ttl) = pairs.first().copied().unwrap_or((0, 0));
                single(Some(wt), ttl);
                continue;
            }
            if let Some(fields) = cells.fields.get(&i)
                && let Some(parts) = udt_fields(v, &wts, &ttls)
            {
                // Each field at its own writetime and TTL; no tombstone for the whole value
                // is written that could hide a field of another writetime.
                for (field, bytes, wt, ttl) in parts {
                    if let Some(st) = fields.get(field) {
                        out.push(update_with(st, vec![Bound::Value(bytes)], wt, ttl));
                    }
                }
                continue;
            }
            let is_map = matches!(
                columns.get(i).map(|c| &c.typ),
                Some(ColumnType::Collection {
                    typ: CollectionType::Map(..),
                    ..
                })
            );
            let (Some(append), Some(elements)) = (
                cells.appends.get(&i),
                split_collection(v, is_map).filter(|e| e.len() == pairs.len()),
            ) else {
                // Cells that do not line up with the value (never seen): the value whole,
                // at its newest writetime.
                let wt = pairs.iter().map(|p| p.0).max().unwrap_or(0);
                single(Some(wt), 0);
                continue;
            };
            // Elements grouped by (writetime, TTL), each group appended: no collection
            // tombstone is written that could hide an element of another group. A list's
            // elements are ordered by when they are appended, so a list is appended run by
            // run of consecutive elements (in one batch, in order); a set's or map's
            // elements are ordered by their value, so each group is one append.
            let list_column = cells
                .lists
                .as_ref()
                .and_then(|l| l.position.get(&i).copied());
            let mut runs: Vec<((i64, i32), Vec<Bytes>)> = Vec::new();
            if list_column.is_some() {
                for (e, p) in elements.into_iter().zip(&pairs) {
                    match runs.last_mut() {
                        Some((last, run)) if last == p => run.push(e),
                        _ => runs.push((*p, vec![e])),
                    }
                }
            } else {
                let mut by_pair: BTreeMap<(i64, i32), Vec<Bytes>> = BTreeMap::new();
                for (e, p) in elements.into_iter().zip(&pairs) {
                    by_pair.entry(*p).or_default().push(e);
                }
                runs.extend(by_pair);
            }
            for ((wt, ttl), elems) in runs {
                let mut write =
                    update_with(append, vec![Bound::Value(join_collection(&elems))], wt, ttl);
                if let Some(column) = list_column {
                    let wt = self.fixed_timestamp.unwrap_or(wt);
                    write.guard = guard(vec![ListCheck {
                        slot: 2,
                        column,
                        elements: elems.into_iter().map(|e| (e, wt)).collect(),
                        alone: true,
                    }]);
                }
                out.push(write);
            }
        }
        if !any && is_row {
            // The row has no regular cell: its key alone, so the row exists. Its marker's
            // writetime cannot be read, so it is the target's time of the first copy: a copy
            // made again leaves a row already there alone. `writeWritetimestampInuS` and
            // `writeTTLInS` still apply, as without preserveTimestamps.
            let mut write = insert_with(
                vec![Bound::Unset; values.len()],
                self.fixed_timestamp,
                self.fixed_ttl.unwrap_or(0),
                Vec::new(),
            );
            if self.fixed_timestamp.is_none()
                && let Some(read) = &self.row_exists
            {
                write.guard = Some(ListGuard {
                    read: read.clone(),
                    key: BoundRow(key.to_vec()),
                    checks: Vec::new(),
                    drop_if_present: true,
                });
            }
            out.push(write);
            return;
        }
        let position = |i: usize| {
            cells
                .lists
                .as_ref()
                .and_then(|l| l.position.get(&i).copied())
                .expect("a list column has a read position")
        };
        // The oldest group writes the row marker (an INSERT, as the source's row was most
        // likely created with its oldest cells); newer groups are UPDATEs, which write none.
        for (n, ((wt, ttl), (group, lists))) in groups.into_iter().enumerate() {
            match (n, update, wt) {
                (0, _, _) | (_, None, _) | (_, _, None) => {
                    let checks = lists
                        .into_iter()
                        .map(|(i, elements)| ListCheck {
                            slot: key.len() + i,
                            column: position(i),
                            elements,
                            alone: false,
                        })
                        .collect();
                    out.push(insert_with(group, wt, ttl, checks));
                }
                (_, Some(update), Some(wt)) => {
                    let mut write = update_with(update, group, wt, ttl);
                    let checks: Vec<ListCheck> = lists
                        .into_iter()
                        .map(|(i, elements)| ListCheck {
                            slot: 2 + i,
                            column: position(i),
                            elements,
                            alone: false,
                        })
                        .collect();
                    write.guard = guard(checks);
                    out.push(write);
                }
            }
        }
    }
}

/// One part of a row as [`CopyPlan::grouped`] writes it.
struct Part<'a> {
    /// `INSERT (key…, cells…)`.
    insert: &'a PreparedStatement,
    /// `UPDATE … SET <cells…>` (regular cells only).
    update: Option<&'a PreparedStatement>,
    /// Values of the key (partition key for statics).
    key: &'a [Bound],
    /// The part's cells.
    values: &'a [Option<Bytes>],
    /// The part's columns.
    columns: &'a [Column],
    /// Which of them are decimals.
    decimal: &'a [bool],
    /// Index (in columns) of the part's first column among the writetime/TTL pairs.
    meta_offset: usize,
    /// Element-by-element writes.
    cells: &'a MultiCell,
    /// The regular part: a row with no cell is still written (its key).
    is_row: bool,
}

/// `SELECT <every column> [, WRITETIME(c), TTL(c) per static and regular column] FROM source
/// WHERE token(pk) > ? AND token(pk) <= ? [AND <where> ALLOW FILTERING]`, prepared on the
/// source with the job's page size and consistency: the rows a copy reads.
pub async fn prepare_select(
    session: &Session,
    source_cfg: &CqlSource,
    source: &TableSchema,
    preserve: bool,
) -> Result<PreparedStatement, CqlError> {
    let mut select_cols: Vec<String> = source.all().map(Column::quoted).collect();
    if preserve {
        for c in source.statics.iter().chain(&source.regular) {
            select_cols.push(format!("WRITETIME({})", c.quoted()));
            select_cols.push(format!("TTL({})", c.quoted()));
        }
    }
    let pk = source
        .partition_key
        .iter()
        .map(Column::quoted)
        .collect::<Vec<_>>()
        .join(", ");
    let mut select = format!(
        "SELECT {} FROM {} WHERE token({pk}) > ? AND token({pk}) <= ?",
        select_cols.join(", "),
        source.qualified()
    );
    if let Some(w) = &source_cfg.where_clause {
        select.push_str(&format!(" AND {w} ALLOW FILTERING"));
    }
    let mut select = prepare(session, "source", &select).await?;
    select.set_page_size(i32::try_from(source_cfg.fetch_size).unwrap_or(i32::MAX));
    select.set_consistency(source_cfg.endpoint.consistency_level.into());
    select.set_is_idempotent(true);
    Ok(select)
}

/// Prepares a target statement (a write, or the counter read before one) with the job's
/// consistency.
async fn prepare_write(
    session: &Session,
    cql: &str,
    consistency: scylla::statement::Consistency,
    idempotent: bool,
) -> Result<PreparedStatement, CqlError> {
    let mut st = prepare(session, "target", cql).await?;
    st.set_consistency(consistency);
    st.set_is_idempotent(idempotent);
    if cql.contains("TTL ?") {
        st.set_retry_policy(Some(super::retry::no_driver_retry()));
    }
    Ok(st)
}

async fn prepare(session: &Session, side: &str, cql: &str) -> Result<PreparedStatement, CqlError> {
    session.prepare(cql).await.map_err(|e| CqlError::Request {
        side: side.to_string(),
        message: format!("cannot prepare `{cql}`: {e}"),
    })
}

/// Shared handle to a plan.
pub type SharedPlan = Arc<CopyPlan>;
