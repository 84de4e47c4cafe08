//! A merged partition of SSTable rows turned into the rows a CQL scan of the table returns:
//! every column's bytes as the native protocol carries them, then, when timestamps are kept,
//! each static and regular column's `WRITETIME` and `TTL` (lists of them, element by element,
//! for a non-frozen collection). Only what a read at `now` sees is kept: cells newer than the
//! deletions covering them, TTLs not expired.
//!
//! The reader is given the table with every variable-length type read as `blob`: such a cell
//! is stored as its length and the bytes the native protocol carries (a frozen collection, a
//! UDT, a tuple included), so it reaches the row unchanged, never decoded and encoded again.
//! Fixed-width types keep their type (their cells have no length), as do clustering columns,
//! whose type orders a partition's rows.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use cqlite_core::storage::sstable::reader::compaction_row::RowLiveness;
use cqlite_core::storage::write_engine::merge::{CellData, MergeEntry, RowData};
use cqlite_core::storage::write_engine::mutation::DecoratedKey;
use cqlite_core::types::Value;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use super::super::rows::RawRow;
use super::super::schema::{Column, TableSchema, quote, type_name};

/// Native types stored without a length in SSTables.
fn fixed(n: &NativeType) -> bool {
    use NativeType as N;
    matches!(
        n,
        N::Boolean
            | N::Int
            | N::BigInt
            | N::Timestamp
            | N::Double
            | N::Float
            | N::Uuid
            | N::Timeuuid
    )
}

/// Clustering types whose order the reader knows: bytes (text, ascii, blob) or fixed width.
fn orderable(t: &ColumnType<'_>) -> bool {
    use NativeType as N;
    matches!(
        t,
        ColumnType::Native(
            N::Int
                | N::BigInt
                | N::Text
                | N::Ascii
                | N::Blob
                | N::Timestamp
                | N::Boolean
                | N::Double
                | N::Float
        )
    )
}

/// Whether the reader reads a descending clustering column of type `t`: it misreads the
/// cells of a reversed boolean, float or double (as the fidelity matrix found: "need 63 bytes
/// for value, only 50 available").
fn reads_reversed(t: &ColumnType<'_>) -> bool {
    !matches!(
        t,
        ColumnType::Native(NativeType::Boolean | NativeType::Float | NativeType::Double)
    )
}

/// The type the reader is told for a value of type `t`.
fn read_as(t: &ColumnType<'_>) -> String {
    match t {
        ColumnType::Native(n) if fixed(n) => type_name(t),
        ColumnType::Collection { frozen: false, typ } => match typ {
            CollectionType::List(e) => format!("list<{}>", read_as(e)),
            CollectionType::Set(e) => format!("set<{}>", read_as(e)),
            CollectionType::Map(k, v) => format!("map<{}, {}>", read_as(k), read_as(v)),
            _ => "blob".into(),
        },
        _ => "blob".into(),
    }
}

/// What a column is in a row.
#[derive(Clone, Copy)]
enum Slot {
    /// The i-th static column.
    Static(usize),
    /// The i-th regular column.
    Regular(usize),
}

/// One live cell of a column: its value, writetime and seconds left to live.
#[derive(Clone)]
struct Live {
    value: Bytes,
    ts: i64,
    ttl: Option<i32>,
}

/// What a column holds in a row.
#[derive(Clone, Default)]
enum Held {
    #[default]
    Nothing,
    Simple(Live),
    /// Elements by cell path, in the order read (the collection's order).
    Elements(Vec<(Bytes, Live)>),
}

/// The table's columns, in the order of the CQL scan's rows.
pub struct Layout {
    /// Keyspace and table.
    pub table: (String, String),
    schema: TableSchema,
    /// Whether each clustering column is in descending order.
    descending: Vec<bool>,
    preserve: bool,
    slots: HashMap<String, Slot>,
    map_columns: Vec<bool>,
    set_columns: Vec<bool>,
}

impl Layout {
    /// The layout of `schema`'s rows; why the table cannot be read from SSTables.
    pub fn new(schema: TableSchema, descending: Vec<bool>, preserve: bool) -> Result<Self, String> {
        if schema.is_counter_table() {
            return Err("counter tables are not read from snapshots (a counter's cells are shards of its writers); read them with CQL".into());
        }
        for (c, desc) in schema.clustering_key.iter().zip(&descending) {
            if !orderable(&c.typ) {
                return Err(format!(
                    "clustering column {} is a {}, which the SSTable reader (cqlite-core 0.18) does not order; read this table with CQL",
                    c.name,
                    type_name(&c.typ)
                ));
            }
            if *desc && !reads_reversed(&c.typ) {
                return Err(format!(
                    "clustering column {} is a {} in descending order, which the SSTable reader (cqlite-core 0.18) misreads; read this table with CQL",
                    c.name,
                    type_name(&c.typ)
                ));
            }
        }
        if let Some((c, what)) = super::super::schema::sstable_unsupported(&schema) {
            return Err(format!(
                "column {} ({}): {what} are not read from snapshots; read this table with CQL",
                c.name,
                type_name(&c.typ)
            ));
        }
        let mut slots = HashMap::new();
        for (i, c) in schema.statics.iter().enumerate() {
            slots.insert(c.name.clone(), Slot::Static(i));
        }
        for (i, c) in schema.regular.iter().enumerate() {
            slots.insert(c.name.clone(), Slot::Regular(i));
        }
        let kind = |want: fn(&CollectionType<'_>) -> bool| {
            schema
                .statics
                .iter()
                .chain(&schema.regular)
                .map(|c| matches!(&c.typ, ColumnType::Collection { frozen: false, typ } if want(typ)))
                .collect::<Vec<_>>()
        };
        let map_columns = kind(|t| matches!(t, CollectionType::Map(..)));
        let set_columns = kind(|t| matches!(t, CollectionType::Set(..)));
        Ok(Self {
            table: (schema.keyspace.clone(), schema.table.clone()),
            schema,
            descending,
            preserve,
            slots,
            map_columns,
            set_columns,
        })
    }

    /// The `CREATE TABLE` the reader is given (see the module's doc).
    pub fn merge_create(&self) -> String {
        let s = &self.schema;
        let mut cols = Vec::new();
        for c in &s.partition_key {
            cols.push(format!("{} blob", quote(&c.name)));
        }
        for c in &s.clustering_key {
            let t = match &c.typ {
                ColumnType::Native(NativeType::Text | NativeType::Ascii) => "blob".to_string(),
                t => type_name(t),
            };
            cols.push(format!("{} {t}", quote(&c.name)));
        }
        for c in &s.statics {
            cols.push(format!("{} {} static", quote(&c.name), read_as(&c.typ)));
        }
        for c in &s.regular {
            cols.push(format!("{} {}", quote(&c.name), read_as(&c.typ)));
        }
        let pk = s
            .partition_key
            .iter()
            .map(Column::quoted)
            .collect::<Vec<_>>()
            .join(", ");
        let ck: Vec<String> = s.clustering_key.iter().map(Column::quoted).collect();
        let key = if ck.is_empty() {
            format!("(({pk}))")
        } else {
            format!("(({pk}), {})", ck.join(", "))
        };
        let mut create = format!(
            "CREATE TABLE {}.{} ({}, PRIMARY KEY {key})",
            quote(&s.keyspace),
            quote(&s.table),
            cols.join(", ")
        );
        let desc: Vec<String> = s
            .clustering_key
            .iter()
            .zip(&self.descending)
            .map(|(c, desc)| format!("{} {}", c.quoted(), if *desc { "DESC" } else { "ASC" }))
            .collect();
        if desc.iter().any(|d| d.ends_with("DESC")) {
            create.push_str(&format!(" WITH CLUSTERING ORDER BY ({})", desc.join(", ")));
        }
        create
    }

    /// The partition key's columns, from the key's bytes.
    fn key_cells(&self, key: &[u8]) -> Result<Vec<Option<Bytes>>, String> {
        let n = self.schema.partition_key.len();
        if n == 1 {
            return Ok(vec![Some(Bytes::copy_from_slice(key))]);
        }
        let mut cells = Vec::with_capacity(n);
        let mut rest = key;
        for _ in 0..n {
            let len = rest
                .get(..2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                .ok_or("a composite partition key shorter than its columns")?;
            let value = rest
                .get(2..2 + len)
                .ok_or("a truncated composite partition key")?;
            cells.push(Some(Bytes::copy_from_slice(value)));
            rest = rest.get(3 + len..).unwrap_or_default();
        }
        Ok(cells)
    }

    /// Appends the rows a CQL scan returns for one merged partition to `out`.
    pub fn partition_rows(
        &self,
        key: &DecoratedKey,
        entries: Vec<MergeEntry>,
        now_s: i64,
        out: &mut Vec<RawRow>,
    ) -> Result<(), String> {
        let s = &self.schema;
        let (ns, nr) = (s.statics.len(), s.regular.len());
        let pk = self.key_cells(&key.key)?;
        let partition_deleted = entries
            .iter()
            .filter_map(|e| e.partition_deletion.map(|(ts, _)| ts))
            .max();
        let mut statics: Vec<Held> = vec![Held::Nothing; ns];
        let mut rows: Vec<(Vec<Option<Bytes>>, Vec<Held>)> = Vec::new();
        for e in entries {
            let RowData::Live { cells } = e.row_data else {
                continue;
            };
            let floor = e.row_deletion.map(|(ts, _)| ts).max(partition_deleted);
            let complex: HashMap<&str, i64> = e
                .complex_deletions
                .iter()
                .map(|d| (d.column.as_str(), d.marked_for_delete_at))
                .collect();
            let is_static = e.clustering_key.is_none() && !s.clustering_key.is_empty();
            let mut held: Vec<Held> = vec![Held::Nothing; if is_static { ns } else { nr }];
            for c in cells {
                let Some(slot) = self.slots.get(&c.column) else {
                    // A column dropped from the table: CQL does not show it either.
                    continue;
                };
                let i = match (slot, is_static) {
                    (Slot::Static(i), true) | (Slot::Regular(i), false) => *i,
                    _ => continue,
                };
                let cell_floor = complex.get(c.column.as_str()).copied().max(floor);
                let Some(live) = live(&c, &e.row_liveness, cell_floor, now_s)? else {
                    continue;
                };
                if c.is_complex_element || c.cell_path.is_some() {
                    let path = Bytes::from(c.cell_path.clone().unwrap_or_default());
                    match &mut held[i] {
                        Held::Elements(v) => v.push((path, live)),
                        h => *h = Held::Elements(vec![(path, live)]),
                    }
                } else {
                    held[i] = Held::Simple(live);
                }
            }
            if is_static {
                // The static row, or a carrier of the partition's range tombstones (no cells).
                for (slot, h) in statics.iter_mut().zip(held) {
                    if !matches!(h, Held::Nothing) {
                        *slot = h;
                    }
                }
                continue;
            }
            let marker = e.row_liveness.has_marker
                && e.row_liveness
                    .marker_timestamp
                    .is_none_or(|ts| floor.is_none_or(|f| ts > f))
                && e.row_liveness.expires_at_seconds.is_none_or(|x| x > now_s);
            if !marker && held.iter().all(|h| matches!(h, Held::Nothing)) {
                continue;
            }
            let ck = match &e.clustering_key {
                Some(ck) => ck
                    .columns
                    .iter()
                    .map(|(_, v)| value_bytes(v).map(Some))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            };
            if ck.len() != s.clustering_key.len() {
                return Err(format!(
                    "a row with {} clustering values, the table has {} clustering columns",
                    ck.len(),
                    s.clustering_key.len()
                ));
            }
            rows.push((ck, held));
        }
        let any_static = statics.iter().any(|h| !matches!(h, Held::Nothing));
        if rows.is_empty() && any_static {
            // A partition of statics only is one row, its clustering columns null.
            rows.push((vec![None; s.clustering_key.len()], vec![Held::Nothing; nr]));
        }
        for (ck, regular) in rows {
            let mut cells = Vec::with_capacity(pk.len() + ck.len() + 3 * (ns + nr));
            cells.extend(pk.iter().cloned());
            cells.extend(ck);
            let all: Vec<&Held> = statics.iter().chain(&regular).collect();
            for (j, h) in all.iter().enumerate() {
                cells.push(self.value(j, h));
            }
            if self.preserve {
                for h in &all {
                    let (wt, ttl) = meta(h);
                    cells.push(wt);
                    cells.push(ttl);
                }
            }
            out.push(RawRow { cells });
        }
        Ok(())
    }

    /// The native protocol's bytes of the `j`-th static-or-regular column.
    fn value(&self, j: usize, h: &Held) -> Option<Bytes> {
        match h {
            Held::Nothing => None,
            Held::Simple(l) => Some(l.value.clone()),
            Held::Elements(items) => {
                let mut b = BytesMut::new();
                b.put_i32(items.len() as i32);
                for (path, l) in items {
                    if self.map_columns[j] {
                        put_item(&mut b, path);
                        put_item(&mut b, &l.value);
                    } else if self.set_columns[j] {
                        put_item(&mut b, path);
                    } else {
                        put_item(&mut b, &l.value);
                    }
                }
                Some(b.freeze())
            }
        }
    }
}

impl Layout {
    /// Shortens the TTLs of `rows`, read `seconds` ago, by that much: the engine counts a
    /// row's TTL from when it receives it, and the merged read runs ahead of it.
    pub fn age(&self, rows: &mut [RawRow], seconds: i64) {
        if !self.preserve || seconds <= 0 {
            return;
        }
        let s = &self.schema;
        let base =
            s.partition_key.len() + s.clustering_key.len() + s.statics.len() + s.regular.len();
        let shorten =
            |t: i32| -> i32 { i32::try_from((i64::from(t) - seconds).max(1)).unwrap_or(1) };
        for row in rows {
            for j in 0..s.statics.len() + s.regular.len() {
                let Some(Some(cell)) = row.cells.get_mut(base + 2 * j + 1) else {
                    continue;
                };
                if self.map_columns[j] || self.set_columns[j] || is_list(&self.column(j).typ) {
                    let Some(items) = super::super::codec::read_int_list(&Some(cell.clone()))
                    else {
                        continue;
                    };
                    let mut b = BytesMut::new();
                    b.put_i32(items.len() as i32);
                    for t in items {
                        match t.and_then(|t| i32::try_from(t).ok()) {
                            Some(t) => put_item(&mut b, &shorten(t).to_be_bytes()),
                            None => b.put_i32(-1),
                        }
                    }
                    *cell = b.freeze();
                } else if let Ok(t) = <[u8; 4]>::try_from(cell.as_ref()) {
                    *cell = Bytes::copy_from_slice(&shorten(i32::from_be_bytes(t)).to_be_bytes());
                }
            }
        }
    }

    fn column(&self, j: usize) -> &Column {
        let s = &self.schema;
        if j < s.statics.len() {
            &s.statics[j]
        } else {
            &s.regular[j - s.statics.len()]
        }
    }
}

fn is_list(t: &ColumnType<'_>) -> bool {
    matches!(
        t,
        ColumnType::Collection {
            frozen: false,
            typ: CollectionType::List(_)
        }
    )
}

fn put_item(b: &mut BytesMut, item: &[u8]) {
    b.put_i32(item.len() as i32);
    b.put_slice(item);
}

/// `WRITETIME` and `TTL` of what a column holds, as the native protocol carries them.
fn meta(h: &Held) -> (Option<Bytes>, Option<Bytes>) {
    match h {
        Held::Nothing => (None, None),
        Held::Simple(l) => (
            Some(Bytes::copy_from_slice(&l.ts.to_be_bytes())),
            l.ttl.map(|t| Bytes::copy_from_slice(&t.to_be_bytes())),
        ),
        Held::Elements(items) => {
            let mut wt = BytesMut::new();
            let mut ttl = BytesMut::new();
            wt.put_i32(items.len() as i32);
            ttl.put_i32(items.len() as i32);
            for (_, l) in items {
                put_item(&mut wt, &l.ts.to_be_bytes());
                match l.ttl {
                    Some(t) => put_item(&mut ttl, &t.to_be_bytes()),
                    None => ttl.put_i32(-1),
                }
            }
            (Some(wt.freeze()), Some(ttl.freeze()))
        }
    }
}

/// A cell as a read at `now_s` sees it: `None` when deleted, shadowed by a deletion at or
/// after its writetime (`floor`), or expired. The merger drops the cells its partition's
/// deletions shadow already (as a compaction does); `floor` is checked again so that a read
/// never depends on which deletions the merger applies.
fn live(
    c: &CellData,
    row: &RowLiveness,
    floor: Option<i64>,
    now_s: i64,
) -> Result<Option<Live>, String> {
    if c.is_deleted
        || matches!(c.value, Value::Tombstone(_))
        || floor.is_some_and(|f| c.timestamp <= f)
    {
        return Ok(None);
    }
    // cqlite-core 0.18 leaves out the TTL of a collection element that carries its row's
    // (Cassandra's `USE_ROW_TTL`: written by the same `INSERT ... USING TTL`), while it keeps
    // its timestamp: such an element, written with the row's liveness, expires with it.
    let expires = match (c.ttl, c.local_deletion_time) {
        (Some(_), Some(expires)) => Some(i64::from(expires)),
        (None, None)
            if c.is_complex_element
                && row.ttl_seconds.is_some()
                && row.marker_timestamp == Some(c.timestamp) =>
        {
            row.expires_at_seconds
        }
        _ => None,
    };
    let ttl = match expires {
        Some(expires) => {
            let left = expires - now_s;
            if left <= 0 {
                return Ok(None);
            }
            Some(i32::try_from(left).unwrap_or(i32::MAX))
        }
        _ => None,
    };
    let value = if c.has_empty_value {
        Bytes::new()
    } else {
        value_bytes(&c.value).map_err(|e| format!("column {}: {e}", c.column))?
    };
    Ok(Some(Live {
        value,
        ts: c.timestamp,
        ttl,
    }))
}

/// A value's bytes as the native protocol carries them.
fn value_bytes(v: &Value) -> Result<Bytes, String> {
    Ok(match v {
        Value::Blob(b) | Value::Text(b) | Value::Varint(b) | Value::Inet(b) => b.clone(),
        Value::Boolean(b) => Bytes::copy_from_slice(&[u8::from(*b)]),
        Value::Integer(i) => Bytes::copy_from_slice(&i.to_be_bytes()),
        Value::BigInt(i) | Value::Timestamp(i) | Value::Time(i) => {
            Bytes::copy_from_slice(&i.to_be_bytes())
        }
        Value::Float(f) => Bytes::copy_from_slice(&f.to_be_bytes()),
        Value::Float32(f) => Bytes::copy_from_slice(&f.to_be_bytes()),
        Value::Uuid(u) => Bytes::copy_from_slice(u),
        Value::SmallInt(i) => Bytes::copy_from_slice(&i.to_be_bytes()),
        Value::TinyInt(i) => Bytes::copy_from_slice(&i.to_be_bytes()),
        Value::Date(d) => Bytes::copy_from_slice(&(d.wrapping_sub(i32::MIN) as u32).to_be_bytes()),
        Value::Null => Bytes::new(),
        other => {
            return Err(format!(
                "a value the reader decoded as {other:?}, not as the bytes it holds"
            ));
        }
    })
}
