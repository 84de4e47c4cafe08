//! Rows as raw cell bytes. drover copies the serialized bytes of each cell as the source sent
//! them: no conversion, so no value can change on the way (a `decimal`'s scale, a `timestamp`
//! outside the range a date library supports, an empty value that is not null), and no
//! allocation per cell beyond a reference into the received frame. Cells are read, where
//! they must be, through [`super::codec`].

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
