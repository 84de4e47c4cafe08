//! Rows as raw cell bytes. drover copies the serialized bytes of each cell as the source sent
//! them: no conversion, so no value can change on the way (a `decimal`'s scale, a `timestamp`
//! outside the range a date library supports, an empty value that is not null), and no
//! allocation per cell beyond a reference into the received frame.

use bytes::Bytes;
use scylla::deserialize::row::{ColumnIterator, DeserializeRow};
use scylla::deserialize::{DeserializationError, TypeCheckError};
use scylla::frame::response::result::ColumnSpec;
use scylla::serialize::SerializationError;
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;

/// One row of a scan: each selected column's bytes, `None` for null.
#[derive(Debug, Clone)]
pub struct RawRow {
    /// Cells in select order.
    pub cells: Vec<Option<Bytes>>,
}

impl RawRow {
    /// Bytes held by the row's cells.
    pub fn size(&self) -> usize {
        self.cells
            .iter()
            .map(|c| c.as_ref().map_or(0, Bytes::len))
            .sum()
    }
}

impl<'frame, 'metadata> DeserializeRow<'frame, 'metadata> for RawRow {
    fn type_check(_: &[ColumnSpec<'_>]) -> Result<(), TypeCheckError> {
        // Any column types: bytes are not interpreted.
        Ok(())
    }

    fn deserialize(row: ColumnIterator<'frame, 'metadata>) -> Result<Self, DeserializationError> {
        let mut cells = Vec::with_capacity(row.size_hint().0);
        for column in row {
            cells.push(column?.slice.map(|s| s.to_bytes()));
        }
        Ok(RawRow { cells })
    }
}

/// A value bound to a statement.
#[derive(Debug, Clone)]
pub enum Bound {
    /// Leave the column alone (no tombstone): the protocol's "unset".
    Unset,
    /// Serialized bytes.
    Value(Bytes),
    /// A bigint (writetime).
    BigInt(i64),
    /// An int (TTL).
    Int(i32),
}

/// The values of one statement execution.
#[derive(Debug, Clone, Default)]
pub struct BoundRow(pub Vec<Bound>);

impl BoundRow {
    /// Bytes of the values.
    pub fn size(&self) -> usize {
        self.0
            .iter()
            .map(|b| match b {
                Bound::Value(v) => v.len(),
                Bound::BigInt(_) => 8,
                Bound::Int(_) => 4,
                Bound::Unset => 0,
            })
            .sum()
    }
}

impl SerializeRow for BoundRow {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter<'_>,
    ) -> Result<(), SerializationError> {
        if ctx.columns().len() != self.0.len() {
            return Err(SerializationError::new(std::io::Error::other(format!(
                "statement has {} markers, {} values bound",
                ctx.columns().len(),
                self.0.len()
            ))));
        }
        for value in &self.0 {
            let cell = writer.make_cell_writer();
            match value {
                Bound::Unset => {
                    cell.set_unset();
                }
                Bound::Value(bytes) => {
                    cell.set_value(bytes).map_err(SerializationError::new)?;
                }
                Bound::BigInt(v) => {
                    cell.set_value(&v.to_be_bytes())
                        .map_err(SerializationError::new)?;
                }
                Bound::Int(v) => {
                    cell.set_value(&v.to_be_bytes())
                        .map_err(SerializationError::new)?;
                }
            }
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Reads a big-endian bigint cell.
pub fn read_i64(cell: &Option<Bytes>) -> Option<i64> {
    let b = cell.as_ref()?;
    Some(i64::from_be_bytes(b.as_ref().try_into().ok()?))
}

/// Reads a big-endian int cell.
pub fn read_i32(cell: &Option<Bytes>) -> Option<i32> {
    let b = cell.as_ref()?;
    Some(i32::from_be_bytes(b.as_ref().try_into().ok()?))
}

/// Reads a `list<bigint>` or `list<int>` cell (what Cassandra 5.0 returns for the WRITETIME or
/// TTL of a non-frozen collection or UDT: one entry per element, nulls for no TTL).
pub fn read_int_list(cell: &Option<Bytes>) -> Option<Vec<Option<i64>>> {
    let b = cell.as_ref()?;
    let mut rest = b.as_ref();
    let n = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    rest = &rest[4..];
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        let len = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        rest = &rest[4..];
        if len < 0 {
            out.push(None);
            continue;
        }
        let len = len as usize;
        let item = rest.get(..len)?;
        rest = &rest[len..];
        out.push(match len {
            8 => Some(i64::from_be_bytes(item.try_into().ok()?)),
            4 => Some(i64::from(i32::from_be_bytes(item.try_into().ok()?))),
            _ => return None,
        });
    }
    Some(out)
}

/// Splits a serialized collection (`list`/`set`: `[n][len][item]...`, `map`: `[n]([len][k][len][v])...`)
/// into its serialized elements (for a map, each element is a key and value pair).
pub fn split_collection(bytes: &Bytes, is_map: bool) -> Option<Vec<Bytes>> {
    let mut pos = 0usize;
    let take_i32 = |pos: &mut usize| -> Option<i32> {
        let v = i32::from_be_bytes(bytes.get(*pos..*pos + 4)?.try_into().ok()?);
        *pos += 4;
        Some(v)
    };
    let n = take_i32(&mut pos)?;
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        let start = pos;
        for _ in 0..(if is_map { 2 } else { 1 }) {
            let len = take_i32(&mut pos)?;
            if len > 0 {
                pos += len as usize;
            }
            if pos > bytes.len() {
                return None;
            }
        }
        out.push(bytes.slice(start..pos));
    }
    Some(out)
}

/// Joins serialized elements back into a collection value.
pub fn join_collection(elements: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(4 + elements.iter().map(Bytes::len).sum::<usize>());
    out.extend_from_slice(&(elements.len() as i32).to_be_bytes());
    for e in elements {
        out.extend_from_slice(e);
    }
    Bytes::from(out)
}

/// Rewrites a serialized `decimal` (`[scale: i32][unscaled: varint]`) without trailing zeros
/// (`1.500` → `1.5`, `100` stays `100`), as ScyllaDB Migrator's `stripTrailingZerosForDecimals`.
pub fn strip_trailing_zeros(bytes: &Bytes) -> Bytes {
    use num_bigint::BigInt;
    if bytes.len() < 5 {
        return bytes.clone();
    }
    let mut scale = i32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
    let mut unscaled = BigInt::from_signed_bytes_be(&bytes[4..]);
    let ten = BigInt::from(10);
    let zero = BigInt::from(0);
    if unscaled == zero {
        return encode_decimal(0, &zero);
    }
    while scale > 0 && (&unscaled % &ten) == zero {
        unscaled /= &ten;
        scale -= 1;
    }
    encode_decimal(scale, &unscaled)
}

fn encode_decimal(scale: i32, unscaled: &num_bigint::BigInt) -> Bytes {
    let mut out = scale.to_be_bytes().to_vec();
    out.extend_from_slice(&unscaled.to_signed_bytes_be());
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&[u8]]) -> Bytes {
        let mut v = (items.len() as i32).to_be_bytes().to_vec();
        for i in items {
            v.extend_from_slice(&(i.len() as i32).to_be_bytes());
            v.extend_from_slice(i);
        }
        Bytes::from(v)
    }

    #[test]
    fn collections_split_and_join_back() {
        let l = list(&[b"a", b"", b"ccc"]);
        let parts = split_collection(&l, false).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(join_collection(&parts), l);
        let m = list(&[b"k1", b"v1", b"k2", b"v2"]);
        let mut fixed = m.to_vec();
        fixed[..4].copy_from_slice(&2i32.to_be_bytes());
        let m = Bytes::from(fixed);
        let parts = split_collection(&m, true).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(join_collection(&parts), m);
        assert!(split_collection(&Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 9]), false).is_none());
    }

    #[test]
    fn int_lists_read_with_nulls() {
        let mut v = 3i32.to_be_bytes().to_vec();
        v.extend_from_slice(&8i32.to_be_bytes());
        v.extend_from_slice(&77i64.to_be_bytes());
        v.extend_from_slice(&(-1i32).to_be_bytes());
        v.extend_from_slice(&4i32.to_be_bytes());
        v.extend_from_slice(&5i32.to_be_bytes());
        assert_eq!(
            read_int_list(&Some(Bytes::from(v))),
            Some(vec![Some(77), None, Some(5)])
        );
    }

    #[test]
    fn decimals_lose_trailing_zeros_only() {
        let dec =
            |scale: i32, unscaled: i64| encode_decimal(scale, &num_bigint::BigInt::from(unscaled));
        assert_eq!(strip_trailing_zeros(&dec(3, 1500)), dec(1, 15));
        assert_eq!(strip_trailing_zeros(&dec(0, 100)), dec(0, 100));
        assert_eq!(strip_trailing_zeros(&dec(2, -1200)), dec(0, -12));
        assert_eq!(strip_trailing_zeros(&dec(5, 0)), dec(0, 0));
        assert_eq!(strip_trailing_zeros(&dec(-2, 10)), dec(-2, 10));
    }
}
