//! CQL's serialized values to Arrow arrays, for writing a table to Parquet.
//!
//! Every CQL type has one Arrow type that holds it exactly (see `docs/parquet.md`): integers,
//! floats, booleans, blobs, dates (days), times (nanoseconds) and timestamps (milliseconds,
//! UTC) natively; `decimal` and `varint` as their exact decimal text (a Parquet decimal has one
//! scale per column, a CQL decimal one per value); `uuid`, `timeuuid` and `inet` as text, as
//! Spark writes them; `duration` as a struct of months, days and nanoseconds; collections as
//! lists and maps, UDTs as structs by field name, tuples as structs `_1`, `_2`, …, vectors as
//! lists (of exactly their dimension).

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Float32Builder, Float64Builder, Int8Builder,
    Int16Builder, Int32Builder, Int64Builder, StringBuilder, Time64NanosecondBuilder,
    TimestampMillisecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, TimeUnit};
use num_bigint::BigInt;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use crate::connectors::cql::codec;
use crate::connectors::cql::schema::type_name;

/// The Arrow type a CQL type is written as.
pub fn arrow_type(t: &ColumnType<'_>) -> Result<DataType, String> {
    Ok(match t {
        ColumnType::Native(n) => match n {
            NativeType::Ascii
            | NativeType::Text
            | NativeType::Uuid
            | NativeType::Timeuuid
            | NativeType::Inet
            | NativeType::Varint
            | NativeType::Decimal => DataType::Utf8,
            NativeType::Boolean => DataType::Boolean,
            NativeType::Blob => DataType::Binary,
            NativeType::BigInt | NativeType::Counter => DataType::Int64,
            NativeType::Int => DataType::Int32,
            NativeType::SmallInt => DataType::Int16,
            NativeType::TinyInt => DataType::Int8,
            NativeType::Float => DataType::Float32,
            NativeType::Double => DataType::Float64,
            NativeType::Date => DataType::Date32,
            NativeType::Time => DataType::Time64(TimeUnit::Nanosecond),
            NativeType::Timestamp => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            NativeType::Duration => DataType::Struct(duration_fields()),
            other => {
                return Err(format!(
                    "the CQL type {other:?} has no Parquet form in drover"
                ));
            }
        },
        ColumnType::Collection { typ, .. } => match typ {
            CollectionType::List(e) | CollectionType::Set(e) => {
                DataType::List(Arc::new(Field::new("element", arrow_type(e)?, true)))
            }
            CollectionType::Map(k, v) => {
                DataType::Map(map_field(arrow_type(k)?, arrow_type(v)?), false)
            }
            _ => {
                return Err(format!(
                    "the CQL type {} has no Parquet form in drover",
                    type_name(t)
                ));
            }
        },
        // A list, not a fixed-size list: pyarrow (Arrow C++) cannot read a Parquet column of
        // fixed-size lists holding a null (apache/arrow#35692, "Expected all lists to be of
        // size=3 but index 1 had size=0"), even one it wrote itself. The loader checks the
        // length of each.
        ColumnType::Vector { typ, .. } => {
            DataType::List(Arc::new(Field::new("element", arrow_type(typ)?, true)))
        }
        ColumnType::UserDefinedType { definition, .. } => DataType::Struct(
            definition
                .field_types
                .iter()
                .map(|(n, t)| Ok(Field::new(n.as_ref(), arrow_type(t)?, true)))
                .collect::<Result<Vec<_>, String>>()?
                .into(),
        ),
        ColumnType::Tuple(items) => DataType::Struct(
            items
                .iter()
                .enumerate()
                .map(|(i, t)| Ok(Field::new(format!("_{}", i + 1), arrow_type(t)?, true)))
                .collect::<Result<Vec<_>, String>>()?
                .into(),
        ),
        other => {
            return Err(format!(
                "the CQL type {} has no Parquet form in drover",
                type_name(other)
            ));
        }
    })
}

fn duration_fields() -> Fields {
    vec![
        Field::new("months", DataType::Int32, false),
        Field::new("days", DataType::Int32, false),
        Field::new("nanoseconds", DataType::Int64, false),
    ]
    .into()
}

fn map_field(k: DataType, v: DataType) -> Arc<Field> {
    Arc::new(Field::new(
        "key_value",
        DataType::Struct(vec![Field::new("key", k, false), Field::new("value", v, true)].into()),
        false,
    ))
}

fn bad(t: &ColumnType<'_>) -> String {
    format!("a value that is not a valid CQL {}", type_name(t))
}

/// Cells are `None` for null. An empty value (zero bytes, which CQL keeps apart from null) of
/// a type other than text and blob has no Parquet form: it is refused (see [`empty`]) rather
/// than written as a null or a zero, which would change the data.
type Cell<'a> = Option<&'a [u8]>;

fn empty(t: &ColumnType<'_>) -> String {
    format!(
        "an empty {} value (zero bytes, which CQL keeps apart from null), which Parquet cannot hold; export this table with CQL or clear its empty values",
        type_name(t)
    )
}

fn nulls(cells: &[Cell<'_>]) -> Option<NullBuffer> {
    cells
        .iter()
        .any(Option::is_none)
        .then(|| NullBuffer::from(cells.iter().map(Option::is_some).collect::<Vec<_>>()))
}

/// The Arrow array of `cells`, all of CQL type `t`.
pub fn array(cells: &[Cell<'_>], t: &ColumnType<'_>) -> Result<ArrayRef, String> {
    macro_rules! fixed {
        ($builder:ty, $n:expr, $conv:expr) => {{
            let mut b = <$builder>::with_capacity(cells.len());
            for c in cells {
                match c {
                    Some(v) if v.len() == $n => b.append_value($conv(v)),
                    Some(v) if v.is_empty() => return Err(empty(t)),
                    None => b.append_null(),
                    Some(_) => return Err(bad(t)),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    let text = |f: &dyn Fn(&[u8]) -> Option<String>| -> Result<ArrayRef, String> {
        let mut b = StringBuilder::with_capacity(cells.len(), 16 * cells.len());
        for c in cells {
            match c {
                None => b.append_null(),
                Some(v)
                    if v.is_empty()
                        && !matches!(
                            t,
                            ColumnType::Native(NativeType::Ascii | NativeType::Text)
                        ) =>
                {
                    return Err(empty(t));
                }
                Some(v) => b.append_value(f(v).ok_or_else(|| bad(t))?),
            }
        }
        Ok(Arc::new(b.finish()))
    };
    Ok(match t {
        ColumnType::Native(n) => match n {
            NativeType::Ascii | NativeType::Text => {
                text(&|v| std::str::from_utf8(v).ok().map(str::to_string))?
            }
            NativeType::Uuid | NativeType::Timeuuid => text(&|v| {
                uuid::Uuid::from_slice(v)
                    .ok()
                    .map(|u| u.hyphenated().to_string())
            })?,
            NativeType::Inet => text(&|v| match v.len() {
                4 => Some(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?).to_string()),
                16 => Some(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?).to_string()),
                _ => None,
            })?,
            NativeType::Varint => text(&|v| Some(BigInt::from_signed_bytes_be(v).to_string()))?,
            NativeType::Decimal => text(&|v| {
                codec::decimal(v).map(|(scale, unscaled)| decimal_text(scale, &unscaled))
            })?,
            NativeType::Blob => {
                let mut b = BinaryBuilder::with_capacity(cells.len(), 0);
                for c in cells {
                    match c {
                        None => b.append_null(),
                        Some(v) => b.append_value(v),
                    }
                }
                Arc::new(b.finish())
            }
            NativeType::Boolean => fixed!(BooleanBuilder, 1, |v: &[u8]| v[0] != 0),
            NativeType::BigInt | NativeType::Counter => {
                fixed!(Int64Builder, 8, |v: &[u8]| i64::from_be_bytes(
                    v.try_into().unwrap()
                ))
            }
            NativeType::Int => {
                fixed!(Int32Builder, 4, |v: &[u8]| i32::from_be_bytes(
                    v.try_into().unwrap()
                ))
            }
            NativeType::SmallInt => {
                fixed!(Int16Builder, 2, |v: &[u8]| i16::from_be_bytes(
                    v.try_into().unwrap()
                ))
            }
            NativeType::TinyInt => fixed!(Int8Builder, 1, |v: &[u8]| v[0] as i8),
            NativeType::Float => {
                fixed!(Float32Builder, 4, |v: &[u8]| f32::from_be_bytes(
                    v.try_into().unwrap()
                ))
            }
            NativeType::Double => {
                fixed!(Float64Builder, 8, |v: &[u8]| f64::from_be_bytes(
                    v.try_into().unwrap()
                ))
            }
            NativeType::Date => fixed!(Date32Builder, 4, |v: &[u8]| {
                (i64::from(u32::from_be_bytes(v.try_into().unwrap())) - (1 << 31)) as i32
            }),
            NativeType::Time => fixed!(Time64NanosecondBuilder, 8, |v: &[u8]| i64::from_be_bytes(
                v.try_into().unwrap()
            )),
            NativeType::Timestamp => {
                let a = fixed!(TimestampMillisecondBuilder, 8, |v: &[u8]| {
                    i64::from_be_bytes(v.try_into().unwrap())
                });
                let a = a
                    .as_any()
                    .downcast_ref::<arrow_array::TimestampMillisecondArray>()
                    .expect("built above")
                    .clone()
                    .with_timezone("UTC");
                Arc::new(a)
            }
            NativeType::Duration => {
                let mut parts = [Vec::new(), Vec::new(), Vec::new()];
                for c in cells {
                    let d = match c {
                        None => [0, 0, 0],
                        Some(v) => codec::duration(v).ok_or_else(|| bad(t))?,
                    };
                    for (p, v) in parts.iter_mut().zip(d) {
                        p.push(v);
                    }
                }
                let [m, d, n] = parts;
                let to32 = |v: Vec<i64>| -> ArrayRef {
                    Arc::new(arrow_array::Int32Array::from(
                        v.into_iter().map(|x| x as i32).collect::<Vec<_>>(),
                    ))
                };
                Arc::new(StructArray::new(
                    duration_fields(),
                    vec![to32(m), to32(d), Arc::new(arrow_array::Int64Array::from(n))],
                    nulls(cells),
                ))
            }
            _ => {
                return Err(format!(
                    "the CQL type {} has no Parquet form in drover",
                    type_name(t)
                ));
            }
        },
        ColumnType::Collection { typ, .. } => {
            let per_entry = if matches!(typ, CollectionType::Map(..)) {
                2
            } else {
                1
            };
            let mut offsets = vec![0i32];
            let mut items: Vec<Cell<'_>> = Vec::new();
            for c in cells {
                if let Some(v) = c {
                    let parts = codec::collection_items(v, per_entry).ok_or_else(|| bad(t))?;
                    items.extend(parts);
                }
                offsets.push(i32::try_from(items.len() / per_entry).map_err(|_| bad(t))?);
            }
            let offsets = OffsetBuffer::new(offsets.into());
            match typ {
                CollectionType::List(e) | CollectionType::Set(e) => {
                    let values = array(&items, e)?;
                    let field = Arc::new(Field::new("element", values.data_type().clone(), true));
                    Arc::new(ListArray::new(field, offsets, values, nulls(cells)))
                }
                CollectionType::Map(k, v) => {
                    let keys: Vec<Cell<'_>> = items.iter().step_by(2).copied().collect();
                    let vals: Vec<Cell<'_>> = items.iter().skip(1).step_by(2).copied().collect();
                    let (ka, va) = (array(&keys, k)?, array(&vals, v)?);
                    let field = map_field(ka.data_type().clone(), va.data_type().clone());
                    let DataType::Struct(fields) = field.data_type().clone() else {
                        unreachable!("a map's entries are a struct")
                    };
                    let entries = StructArray::new(fields, vec![ka, va], None);
                    Arc::new(MapArray::new(field, offsets, entries, nulls(cells), false))
                }
                _ => {
                    return Err(format!(
                        "the CQL type {} has no Parquet form in drover",
                        type_name(t)
                    ));
                }
            }
        }
        ColumnType::Vector { typ, dimensions } => {
            let dims = usize::from(*dimensions);
            let mut items: Vec<Cell<'_>> = Vec::with_capacity(cells.len() * dims);
            let mut offsets = Vec::with_capacity(cells.len() + 1);
            offsets.push(0i32);
            for c in cells {
                if let Some(v) = c {
                    items.extend(
                        codec::vector_items(v, typ, *dimensions)
                            .ok_or_else(|| bad(t))?
                            .into_iter()
                            .map(Some),
                    );
                }
                offsets.push(i32::try_from(items.len()).map_err(|_| bad(t))?);
            }
            let values = array(&items, typ)?;
            let field = Arc::new(Field::new("element", values.data_type().clone(), true));
            Arc::new(ListArray::new(
                field,
                OffsetBuffer::new(offsets.into()),
                values,
                nulls(cells),
            ))
        }
        ColumnType::UserDefinedType { .. } | ColumnType::Tuple(_) => {
            let (names, types): (Vec<String>, Vec<&ColumnType<'_>>) = match t {
                ColumnType::UserDefinedType { definition, .. } => definition
                    .field_types
                    .iter()
                    .map(|(n, t)| (n.to_string(), t))
                    .unzip(),
                ColumnType::Tuple(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (format!("_{}", i + 1), t))
                    .unzip(),
                _ => unreachable!("matched above"),
            };
            let mut columns: Vec<Vec<Cell<'_>>> =
                vec![Vec::with_capacity(cells.len()); types.len()];
            for c in cells {
                let fields = match c {
                    Some(v) => codec::fields(v).ok_or_else(|| bad(t))?,
                    None => Vec::new(),
                };
                if fields.len() > types.len() {
                    return Err(bad(t));
                }
                for (i, col) in columns.iter_mut().enumerate() {
                    col.push(fields.get(i).copied().flatten());
                }
            }
            let arrays = columns
                .iter()
                .zip(&types)
                .map(|(c, t)| array(c, t))
                .collect::<Result<Vec<_>, _>>()?;
            let fields: Fields = names
                .iter()
                .zip(&arrays)
                .map(|(n, a)| Field::new(n, a.data_type().clone(), true))
                .collect::<Vec<_>>()
                .into();
            Arc::new(StructArray::new(fields, arrays, nulls(cells)))
        }
        other => {
            return Err(format!(
                "the CQL type {} has no Parquet form in drover",
                type_name(other)
            ));
        }
    })
}

/// A decimal as exact text: `-12.50` for (2, -1250), `0.005` for (3, 5), `7E+3` for (-3, 7).
pub fn decimal_text(scale: i32, unscaled: &BigInt) -> String {
    if scale <= 0 {
        return if scale == 0 {
            unscaled.to_string()
        } else {
            format!("{unscaled}E+{}", -i64::from(scale))
        };
    }
    let negative = unscaled.sign() == num_bigint::Sign::Minus;
    let digits = unscaled.magnitude().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale - digits.len() + 1))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if negative { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_keep_their_scale_as_text() {
        assert_eq!(decimal_text(2, &BigInt::from(-1250)), "-12.50");
        assert_eq!(decimal_text(3, &BigInt::from(5)), "0.005");
        assert_eq!(decimal_text(-3, &BigInt::from(7)), "7E+3");
        assert_eq!(decimal_text(0, &BigInt::from(-42)), "-42");
        assert_eq!(decimal_text(1, &BigInt::from(-5)), "-0.5");
    }

    #[test]
    fn every_value_survives_encode_then_decode() {
        use super::super::decode;
        let map = ColumnType::Collection {
            frozen: false,
            typ: CollectionType::Map(
                Box::new(ColumnType::Native(NativeType::Text)),
                Box::new(ColumnType::Native(NativeType::Decimal)),
            ),
        };
        let mut m = 2i32.to_be_bytes().to_vec();
        for (k, v) in [
            (
                b"a".to_vec(),
                codec::encode_decimal(2, &BigInt::from(150)).to_vec(),
            ),
            (
                b"b".to_vec(),
                codec::encode_decimal(-1, &BigInt::from(3)).to_vec(),
            ),
        ] {
            m.extend_from_slice(&(k.len() as i32).to_be_bytes());
            m.extend_from_slice(&k);
            m.extend_from_slice(&(v.len() as i32).to_be_bytes());
            m.extend_from_slice(&v);
        }
        let cells = vec![Some(m.as_slice()), None];
        let a = array(&cells, &map).unwrap();
        assert_eq!(a.data_type(), &arrow_type(&map).unwrap());
        let back = decode::column(&a, &map, decode::Options::default()).unwrap();
        assert_eq!(back[0].as_deref(), Some(m.as_slice()));
        assert_eq!(back[1], None);
    }
}
