//! Rows of a scan turned into the mutations `cqlite-core` writes as SSTable rows: every cell
//! with its value as the source sent its bytes, its writetime and its TTL (a collection element
//! by element), and the checks that refuse, before anything is read, the tables this path
//! cannot write exactly.

use std::collections::HashMap;

use bytes::Bytes;
use cqlite_core::storage::write_engine::mutation::{
    CellOperation, ClusteringKey, DecoratedKey, Mutation, PartitionKey, TableId,
};
use cqlite_core::types::Value;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use super::super::codec::{
    collection_items, read_i32, read_i64, read_int_list, strip_trailing_zeros,
};
use super::super::schema::{Column, TableSchema, type_name};

/// Why a table or a row cannot take the SSTable path.
pub type Refusal = String;

/// Native types whose cells have a fixed width in SSTables (no length before the value); the
/// writer knows them by the `Value` variant, so their bytes are decoded into one.
fn fixed(t: &NativeType, b: &[u8]) -> Option<Value> {
    use NativeType as N;
    Some(match t {
        N::Boolean => Value::Boolean(*b.first()? != 0),
        N::Int => Value::Integer(i32::from_be_bytes(b.try_into().ok()?)),
        N::BigInt => Value::BigInt(i64::from_be_bytes(b.try_into().ok()?)),
        N::Timestamp => Value::Timestamp(i64::from_be_bytes(b.try_into().ok()?)),
        N::Double => Value::Float(f64::from_be_bytes(b.try_into().ok()?)),
        N::Float => Value::Float32(f32::from_be_bytes(b.try_into().ok()?)),
        N::Uuid | N::Timeuuid => Value::Uuid(b.try_into().ok()?),
        _ => return None,
    })
}

fn is_fixed(t: &ColumnType<'_>) -> bool {
    use NativeType as N;
    matches!(
        t,
        ColumnType::Native(
            N::Boolean
                | N::Int
                | N::BigInt
                | N::Timestamp
                | N::Double
                | N::Float
                | N::Uuid
                | N::Timeuuid
        )
    )
}

/// A cell's value for the writer: fixed-width types decoded, every other type as the bytes the
/// source sent (written with their length, as Cassandra stores them).
fn value(t: &ColumnType<'_>, b: &Bytes) -> Result<Value, Refusal> {
    if let ColumnType::Native(n) = t
        && is_fixed(t)
    {
        return fixed(n, b).ok_or_else(|| {
            format!(
                "holds a {} value of {} bytes (an empty value, say), which SSTables written by this path cannot carry",
                type_name(t),
                b.len()
            )
        });
    }
    Ok(Value::Blob(b.clone()))
}

/// A clustering value, in the variant the writer's comparator for the column's type expects.
fn clustering_value(t: &ColumnType<'_>, b: &Bytes) -> Result<Value, Refusal> {
    use NativeType as N;
    Ok(match t {
        ColumnType::Native(N::Text | N::Ascii) => Value::Text(b.clone()),
        ColumnType::Native(N::Blob) => Value::Blob(b.clone()),
        ColumnType::Native(N::Date) => {
            let stored = u32::from_be_bytes(b.as_ref().try_into().map_err(|_| "a bad date")?);
            Value::Date((stored as i32).wrapping_add(i32::MIN))
        }
        _ => value(t, b)?,
    })
}

/// Clustering types the writer (cqlite-core 0.18, which sorts a partition's rows itself and
/// writes their clustering values) orders and writes right; the others are written out of
/// order (uuid and timeuuid compared as bytes, no order for varint or decimal) or refused by
/// it (inet, time), or written without their length (smallint, tinyint).
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
                | N::Date
                | N::Timestamp
                | N::Boolean
                | N::Double
                | N::Float
        )
    )
}

/// The table as the writer needs it, and the layout of the scanned rows.
pub struct RowPlan {
    /// Target keyspace and table.
    pub table: TableId,
    /// The writer's schema (from the target's `CREATE TABLE`).
    pub schema: cqlite_core::schema::TableSchema,
    source: TableSchema,
    /// Target name of each source column.
    names: HashMap<String, String>,
    preserve: bool,
    fixed_ttl: Option<i32>,
    fixed_timestamp: Option<i64>,
    strip_decimals: bool,
    drop_null_keys: bool,
}

/// What one row became.
// One at a time, moved into the partition at once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Converted {
    /// Left out (a null in its primary key, with `dropNullPrimaryKeys`).
    Dropped,
    /// Its partition's key, the partition's static row (when the row carries statics) and the
    /// row itself (none for a partition holding only statics).
    Row {
        key: DecoratedKey,
        statics: Option<Mutation>,
        row: Option<Mutation>,
    },
}

impl RowPlan {
    /// Checks that `source`'s rows can be written to `target` as SSTables; `create` is the
    /// target's `CREATE TABLE` statement.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: TableSchema,
        target: &TableSchema,
        create: &str,
        names: HashMap<String, String>,
        preserve: bool,
        (fixed_ttl, fixed_timestamp): (Option<i32>, Option<i64>),
        strip_decimals: bool,
        drop_null_keys: bool,
    ) -> Result<Self, Refusal> {
        if source.is_counter_table() {
            return Err(
                "counter tables cannot be bulk-loaded safely (a counter's SSTable cells are shards of its writers, not values); copy them with CQL writes"
                    .into(),
            );
        }
        for c in &source.clustering_key {
            if !orderable(&c.typ) {
                return Err(format!(
                    "clustering column {} is a {}: the SSTable writer (cqlite-core 0.18) orders such values wrongly; copy this table with CQL writes",
                    c.name,
                    type_name(&c.typ)
                ));
            }
        }
        if let Some((c, what)) = super::super::schema::sstable_unsupported(&source) {
            return Err(format!(
                "column {} ({}): {what} are written wrongly by the SSTable writer (cqlite-core 0.18); copy this table with CQL writes",
                c.name,
                type_name(&c.typ)
            ));
        }
        let schema = cqlite_core::schema::parse_cql_schema(create).map_err(|e| {
            format!("the SSTable writer cannot read the target's schema ({create}): {e}")
        })?;
        Ok(Self {
            table: TableId::new(target.keyspace.clone(), target.table.clone()),
            schema,
            source,
            names,
            preserve,
            fixed_ttl,
            fixed_timestamp,
            strip_decimals,
            drop_null_keys,
        })
    }

    fn name(&self, c: &Column) -> String {
        self.names
            .get(&c.name)
            .cloned()
            .unwrap_or_else(|| c.name.clone())
    }

    /// The partition key's bytes as Cassandra hashes and stores them.
    fn key_bytes(&self, cells: &[Option<Bytes>]) -> Vec<u8> {
        if let [one] = cells {
            return one.as_ref().map(|b| b.to_vec()).unwrap_or_default();
        }
        let mut key = Vec::new();
        for c in cells {
            let b = c.as_deref().unwrap_or_default();
            key.extend_from_slice(&(b.len() as u16).to_be_bytes());
            key.extend_from_slice(b);
            key.push(0);
        }
        key
    }

    /// Whether a row has a null in its primary key (a partition of statics only has all its
    /// clustering columns null, and is a row).
    fn null_in_key(&self, cells: &[Option<Bytes>]) -> bool {
        let (np, nc, ns, nr) = (
            self.source.partition_key.len(),
            self.source.clustering_key.len(),
            self.source.statics.len(),
            self.source.regular.len(),
        );
        let ck = &cells[np..np + nc];
        // A partition of static cells only has no clustering values and no regular cells
        // either; a row with a regular cell and no clustering value has a null key.
        let ck_null = nc > 0
            && ck.iter().all(Option::is_none)
            && cells[np + nc + ns..np + nc + ns + nr]
                .iter()
                .all(Option::is_none);
        cells[..np].iter().any(Option::is_none) || (!ck_null && ck.iter().any(Option::is_none))
    }

    /// Whether a row is left out by `dropNullPrimaryKeys`.
    pub fn drops(&self, cells: &[Option<Bytes>]) -> bool {
        self.drop_null_keys && self.null_in_key(cells)
    }

    /// Turns one row into mutations. `now_s` is when it was read (seconds since the epoch):
    /// a TTL read then expires `ttl` seconds after it, as it does in the source.
    /// `open` is the partition being gathered: a row of it carries statics already written.
    pub fn convert(
        &self,
        cells: &[Option<Bytes>],
        now_s: i64,
        unit_micros: i64,
        open: Option<&DecoratedKey>,
    ) -> Result<Converted, Refusal> {
        let s = &self.source;
        let (np, nc, ns, nr) = (
            s.partition_key.len(),
            s.clustering_key.len(),
            s.statics.len(),
            s.regular.len(),
        );
        let pk = &cells[..np];
        let ck = &cells[np..np + nc];
        let ck_null = nc > 0 && ck.iter().all(Option::is_none);
        if self.null_in_key(cells) {
            return if self.drop_null_keys {
                Ok(Converted::Dropped)
            } else {
                Err("has a null in its primary key (set target.dropNullPrimaryKeys to skip such rows)".into())
            };
        }
        let key_bytes = self.key_bytes(pk);
        if key_bytes.len() > usize::from(u16::MAX) {
            return Err("has a partition key longer than 65535 bytes".into());
        }
        let key = DecoratedKey::from_key_bytes(key_bytes).map_err(|e| e.to_string())?;
        let partition = PartitionKey::new(
            s.partition_key
                .iter()
                .zip(pk)
                .map(|(c, b)| (self.name(c), Value::Blob(b.clone().unwrap_or_default())))
                .collect(),
        );
        let meta = &cells[np + nc + ns + nr..];
        let statics = if ns > 0 && open != Some(&key) {
            self.part(
                &partition,
                None,
                &s.statics,
                &cells[np + nc..np + nc + ns],
                meta,
                0,
                (now_s, unit_micros),
            )?
        } else {
            None
        };
        let row = if ck_null {
            None
        } else {
            let clustering = if nc == 0 {
                None
            } else {
                Some(ClusteringKey::new(
                    s.clustering_key
                        .iter()
                        .zip(ck)
                        .map(|(c, b)| {
                            clustering_value(&c.typ, b.as_ref().expect("checked above"))
                                .map(|v| (self.name(c), v))
                        })
                        .collect::<Result<_, _>>()?,
                ))
            };
            let row = self.part(
                &partition,
                clustering.clone(),
                &s.regular,
                &cells[np + nc + ns..np + nc + ns + nr],
                meta,
                ns,
                (now_s, unit_micros),
            )?;
            // A row with nothing but its key exists in the source: its marker alone.
            Some(row.unwrap_or_else(|| {
                Mutation::new(
                    self.table.clone(),
                    partition.clone(),
                    clustering,
                    Vec::new(),
                    self.fixed_timestamp.unwrap_or(unit_micros),
                    None,
                )
            }))
        };
        Ok(Converted::Row { key, statics, row })
    }

    /// The mutation of one part of a row (its statics, or its regular cells); `None` when
    /// none of its cells has a value.
    #[allow(clippy::too_many_arguments)]
    fn part(
        &self,
        partition: &PartitionKey,
        clustering: Option<ClusteringKey>,
        columns: &[Column],
        values: &[Option<Bytes>],
        meta: &[Option<Bytes>],
        meta_offset: usize,
        (now_s, unit_micros): (i64, i64),
    ) -> Result<Option<Mutation>, Refusal> {
        let mut ops = Vec::new();
        let mut writetimes = HashMap::new();
        let mut newest = None::<i64>;
        let mut oldest: Option<(i64, Option<i32>)> = None;
        let mut every_cell_expires = true;
        let expiry = |ttl: i32| -> Result<i32, Refusal> {
            i32::try_from(now_s + i64::from(ttl))
                .map_err(|_| format!("has a TTL of {ttl}s that expires after 2038"))
        };
        for (i, (c, v)) in columns.iter().zip(values).enumerate() {
            let Some(v) = v else { continue };
            let name = self.name(c);
            let (wt, ttl) = if self.preserve {
                (
                    &meta[2 * (meta_offset + i)],
                    &meta[2 * (meta_offset + i) + 1],
                )
            } else {
                (&None, &None)
            };
            let v = if self.strip_decimals
                && matches!(c.typ, ColumnType::Native(NativeType::Decimal))
            {
                strip_trailing_zeros(v)
            } else {
                v.clone()
            };
            if let ColumnType::Collection { frozen: false, typ } = &c.typ {
                let (is_map, element) = match typ {
                    CollectionType::Map(_, v) => (true, v.as_ref()),
                    CollectionType::List(e) | CollectionType::Set(e) => (false, e.as_ref()),
                    _ => return Err(format!("column {}: an unknown collection type", c.name)),
                };
                let items: Vec<Bytes> = collection_items(&v, if is_map { 2 } else { 1 })
                    .and_then(|items| {
                        items
                            .into_iter()
                            .map(|item| item.map(|item| v.slice_ref(item)))
                            .collect()
                    })
                    .ok_or_else(|| format!("column {}: a malformed collection", c.name))?;
                let n = if is_map { items.len() / 2 } else { items.len() };
                let wts = if self.preserve {
                    read_int_list(wt)
                } else {
                    None
                };
                let ttls = if self.preserve {
                    read_int_list(ttl)
                } else {
                    None
                };
                // One base for the whole list, so its elements' paths follow their positions.
                let list_base = wts
                    .as_ref()
                    .and_then(|w| w.iter().flatten().min().copied())
                    .unwrap_or(unit_micros);
                for j in 0..n {
                    let ts = wts
                        .as_ref()
                        .and_then(|w| w.get(j).copied().flatten())
                        .or(self.fixed_timestamp)
                        .unwrap_or(unit_micros);
                    let ttl = ttls
                        .as_ref()
                        .and_then(|t| t.get(j).copied().flatten())
                        .and_then(|t| i32::try_from(t).ok())
                        .or(self.fixed_ttl)
                        .filter(|t| *t > 0);
                    every_cell_expires &= ttl.is_some();
                    newest = newest.max(Some(ts));
                    if oldest.is_none_or(|(o, _)| ts < o) {
                        oldest = Some((ts, ttl));
                    }
                    let (path, value) = match typ {
                        CollectionType::Map(..) => (
                            items[2 * j].to_vec(),
                            Some(value(element, &items[2 * j + 1])?),
                        ),
                        CollectionType::Set(_) => (items[j].to_vec(), None),
                        _ => (list_path(list_base, j), Some(value(element, &items[j])?)),
                    };
                    ops.push(CellOperation::WriteComplexElement {
                        column: name.clone(),
                        cell_path: path,
                        value,
                        timestamp_micros: ts,
                        ttl_seconds: ttl.map(|t| t as u32),
                        local_deletion_time: ttl.map(expiry).transpose()?,
                        is_deleted: false,
                    });
                }
                continue;
            }
            let ts = read_i64(wt).or(self.fixed_timestamp).unwrap_or(unit_micros);
            let ttl = read_i32(ttl).or(self.fixed_ttl).filter(|t| *t > 0);
            every_cell_expires &= ttl.is_some();
            newest = newest.max(Some(ts));
            if oldest.is_none_or(|(o, _)| ts < o) {
                oldest = Some((ts, ttl));
            }
            let value = value(&c.typ, &v).map_err(|e| format!("column {}: {e}", c.name))?;
            writetimes.insert(name.clone(), ts);
            ops.push(match ttl {
                Some(ttl) => CellOperation::WriteWithTtl {
                    column: name,
                    value,
                    ttl_seconds: ttl as u32,
                    local_deletion_time: Some(expiry(ttl)?),
                },
                None => CellOperation::Write {
                    column: name,
                    value,
                },
            });
        }
        let Some(newest) = newest else {
            return Ok(None);
        };
        if let Some((ts, _)) = oldest
            && ts < 0
        {
            return Err(format!(
                "has a writetime before 1970 ({ts}), which this path does not write"
            ));
        }
        let mut m = Mutation::new(
            self.table.clone(),
            partition.clone(),
            clustering,
            ops,
            newest,
            // A row whose every cell expires disappears with them in the source (its marker
            // had a TTL too): so does the copy's.
            oldest
                .and_then(|(_, ttl)| ttl)
                .filter(|_| every_cell_expires)
                .map(|t| t as u32),
        );
        m.cell_write_timestamps = Some(writetimes);
        Ok(Some(m))
    }
}

/// A list element's cell path: a version-1 time UUID, increasing with the element's position,
/// so the elements keep their order.
fn list_path(ts_micros: i64, position: usize) -> Vec<u8> {
    const UUID_EPOCH_OFFSET: u64 = 0x01B2_1DD2_1381_4000;
    let t = (ts_micros.max(0) as u64)
        .wrapping_mul(10)
        .wrapping_add(UUID_EPOCH_OFFSET)
        .wrapping_add(position as u64);
    let mut u = Vec::with_capacity(16);
    u.extend_from_slice(&((t & 0xFFFF_FFFF) as u32).to_be_bytes());
    u.extend_from_slice(&(((t >> 32) & 0xFFFF) as u16).to_be_bytes());
    u.extend_from_slice(&((((t >> 48) & 0x0FFF) as u16) | 0x1000).to_be_bytes());
    // Clock sequence and node: fixed, with the multicast bit set (not a real MAC address).
    u.extend_from_slice(&[0x80, 0x00, 0x01, 0xd5, 0x0c, 0x3a, 0x00, 0x01]);
    u
}
