//! Arrow values (as read from Parquet) to CQL's serialized values, for a target column's type.
//!
//! Conversions are exact or refused: an integer that does not fit, a sub-millisecond timestamp
//! (unless `truncateTimestamps`), a float for a decimal, a null inside a collection. The same
//! function checks a file's schema before anything is written: it runs on an empty array of
//! each column's Arrow type, so an impossible pair of types is refused without reading a row.
//! Arrays are converted column by column, each level of a nested type with one downcast.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, IntervalUnit, TimeUnit};
use bytes::Bytes;
use num_bigint::BigInt;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use crate::connectors::cql::codec::{encode_decimal, encode_duration, parse_decimal};
use crate::connectors::cql::schema::type_name;

/// How strict the conversion is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Cut sub-millisecond timestamp digits instead of refusing them.
    pub truncate_timestamps: bool,
    /// Keep a null list element as a null item instead of refusing it. Only for the
    /// per-element writetime and TTL lists of `__migrator_meta_*` columns: Cassandra answers
    /// `TTL(c)` of a collection with a null for each element that has no TTL, so an export
    /// holds such nulls, and they mean "no TTL", not a value a collection would have to hold.
    pub null_elements: bool,
}

type Cells = Vec<Option<Vec<u8>>>;

/// Whether values of Arrow type `arrow` can be written to a CQL column of type `cql`.
pub fn check(arrow: &DataType, cql: &ColumnType<'_>) -> Result<(), String> {
    let empty = arrow_array::new_empty_array(arrow);
    values(empty.as_ref(), cql, Options::default()).map(|_| ())
}

/// [`column`], with a panic of the Arrow library on a malformed file turned into an error:
/// one bad file must fail its job, not the daemon.
pub fn column_guarded(
    array: &ArrayRef,
    cql: &ColumnType<'_>,
    options: Options,
) -> Result<Vec<Option<Bytes>>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| column(array, cql, options)))
        .unwrap_or_else(|_| Err("the Arrow reader failed on this column's data".into()))
}

/// The serialized CQL value of each row of `array` (`None` for a null).
pub fn column(
    array: &ArrayRef,
    cql: &ColumnType<'_>,
    options: Options,
) -> Result<Vec<Option<Bytes>>, String> {
    Ok(values(array.as_ref(), cql, options)?
        .into_iter()
        .map(|v| v.map(Bytes::from))
        .collect())
}

fn refuse(arrow: &DataType, cql: &ColumnType<'_>) -> String {
    format!(
        "a Parquet/Arrow {arrow} value cannot be written to a CQL {} column",
        type_name(cql)
    )
}

fn per_row<T>(
    array: &dyn Array,
    mut f: impl FnMut(usize) -> Result<T, String>,
) -> Result<Vec<Option<T>>, String> {
    (0..array.len())
        .map(|i| {
            if array.is_null(i) {
                Ok(None)
            } else {
                f(i).map(Some)
            }
        })
        .collect()
}

/// Integer values of any Arrow integer array, widened; `None` for other types.
fn integers(array: &dyn Array) -> Option<Vec<Option<i128>>> {
    macro_rules! ints {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .iter()
                .map(|v| v.map(i128::from))
                .collect()
        };
    }
    Some(match array.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        _ => return None,
    })
}

/// Text values of any Arrow string array; `None` for other types.
fn strings(array: &dyn Array) -> Option<Vec<Option<&str>>> {
    Some(match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
        DataType::Utf8View => array.as_string_view().iter().collect(),
        _ => return None,
    })
}

/// Byte values of any Arrow binary array; `None` for other types.
fn binaries(array: &dyn Array) -> Option<Vec<Option<&[u8]>>> {
    Some(match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().iter().collect(),
        DataType::LargeBinary => array.as_binary::<i64>().iter().collect(),
        DataType::BinaryView => array.as_binary_view().iter().collect(),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().iter().collect(),
        _ => return None,
    })
}

fn fit(v: i128, cql: &NativeType, arrow: &DataType) -> Result<Vec<u8>, String> {
    let out_of_range = || format!("the Parquet/Arrow {arrow} value {v} does not fit a CQL {cql:?}");
    Ok(match cql {
        NativeType::TinyInt => i8::try_from(v)
            .map_err(|_| out_of_range())?
            .to_be_bytes()
            .to_vec(),
        NativeType::SmallInt => i16::try_from(v)
            .map_err(|_| out_of_range())?
            .to_be_bytes()
            .to_vec(),
        NativeType::Int => i32::try_from(v)
            .map_err(|_| out_of_range())?
            .to_be_bytes()
            .to_vec(),
        NativeType::BigInt | NativeType::Counter => i64::try_from(v)
            .map_err(|_| out_of_range())?
            .to_be_bytes()
            .to_vec(),
        NativeType::Varint => BigInt::from(v).to_signed_bytes_be(),
        NativeType::Decimal => encode_decimal(0, &BigInt::from(v)).to_vec(),
        _ => unreachable!("integer targets only"),
    })
}

/// Milliseconds of a timestamp of `unit`, exactly or (with `truncate`) cut.
fn millis(v: i64, unit: &TimeUnit, truncate: bool) -> Result<i64, String> {
    let per_ms: i64 = match unit {
        TimeUnit::Second => {
            return v
                .checked_mul(1000)
                .ok_or_else(|| format!("the timestamp {v} s is out of CQL's range"));
        }
        TimeUnit::Millisecond => return Ok(v),
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1_000_000,
    };
    if v % per_ms != 0 && !truncate {
        return Err(format!(
            "the timestamp {v} ({unit:?}s since the epoch) has digits below the millisecond, which a CQL timestamp cannot hold; set source.truncateTimestamps: true to cut them"
        ));
    }
    Ok(v.div_euclid(per_ms))
}

fn native(
    array: &dyn Array,
    cql: &NativeType,
    typ: &ColumnType<'_>,
    options: Options,
) -> Result<Cells, String> {
    let arrow = array.data_type();
    let no = || refuse(arrow, typ);
    match cql {
        NativeType::Boolean => match arrow {
            DataType::Boolean => Ok(array
                .as_boolean()
                .iter()
                .map(|v| v.map(|b| vec![u8::from(b)]))
                .collect()),
            _ => Err(no()),
        },
        NativeType::TinyInt
        | NativeType::SmallInt
        | NativeType::Int
        | NativeType::BigInt
        | NativeType::Counter => {
            let ints = integers(array).ok_or_else(no)?;
            ints.into_iter()
                .map(|v| v.map(|v| fit(v, cql, arrow)).transpose())
                .collect()
        }
        NativeType::Varint | NativeType::Decimal => {
            if let Some(ints) = integers(array) {
                return ints
                    .into_iter()
                    .map(|v| v.map(|v| fit(v, cql, arrow)).transpose())
                    .collect();
            }
            let (scale, unscaled): (i32, Vec<Option<BigInt>>) = match arrow {
                DataType::Decimal32(_, s) => (
                    i32::from(*s),
                    array
                        .as_primitive::<Decimal32Type>()
                        .iter()
                        .map(|v| v.map(BigInt::from))
                        .collect(),
                ),
                DataType::Decimal64(_, s) => (
                    i32::from(*s),
                    array
                        .as_primitive::<Decimal64Type>()
                        .iter()
                        .map(|v| v.map(BigInt::from))
                        .collect(),
                ),
                DataType::Decimal128(_, s) => (
                    i32::from(*s),
                    array
                        .as_primitive::<Decimal128Type>()
                        .iter()
                        .map(|v| v.map(BigInt::from))
                        .collect(),
                ),
                DataType::Decimal256(_, s) => (
                    i32::from(*s),
                    array
                        .as_primitive::<Decimal256Type>()
                        .iter()
                        .map(|v| v.map(|v| BigInt::from_signed_bytes_le(&v.to_le_bytes())))
                        .collect(),
                ),
                _ => {
                    let texts = strings(array).ok_or_else(no)?;
                    return texts
                        .into_iter()
                        .map(|t| {
                            t.map(|t| {
                                let (scale, unscaled) = parse_decimal(t).ok_or_else(|| {
                                    format!("{t:?} is not a number a CQL {cql:?} can hold")
                                })?;
                                if matches!(cql, NativeType::Varint) {
                                    if scale != 0 {
                                        return Err(format!("{t:?} is not an integer"));
                                    }
                                    Ok(unscaled.to_signed_bytes_be())
                                } else {
                                    Ok(encode_decimal(scale, &unscaled).to_vec())
                                }
                            })
                            .transpose()
                        })
                        .collect();
                }
            };
            if matches!(cql, NativeType::Varint) && scale != 0 {
                return Err(format!(
                    "a Parquet/Arrow {arrow} (scale {scale}) cannot be written to a CQL varint column without losing its fraction"
                ));
            }
            Ok(unscaled
                .into_iter()
                .map(|u| {
                    u.map(|u| match cql {
                        NativeType::Varint => u.to_signed_bytes_be(),
                        _ => encode_decimal(scale, &u).to_vec(),
                    })
                })
                .collect())
        }
        NativeType::Float => match arrow {
            DataType::Float32 => Ok(array
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(|v| v.to_be_bytes().to_vec()))
                .collect()),
            DataType::Float16 => Ok(array
                .as_primitive::<Float16Type>()
                .iter()
                .map(|v| v.map(|v| v.to_f32().to_be_bytes().to_vec()))
                .collect()),
            _ => Err(no()),
        },
        NativeType::Double => match arrow {
            DataType::Float64 => Ok(array
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.map(|v| v.to_be_bytes().to_vec()))
                .collect()),
            DataType::Float32 => Ok(array
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(|v| f64::from(v).to_be_bytes().to_vec()))
                .collect()),
            DataType::Float16 => Ok(array
                .as_primitive::<Float16Type>()
                .iter()
                .map(|v| v.map(|v| v.to_f64().to_be_bytes().to_vec()))
                .collect()),
            _ => Err(no()),
        },
        NativeType::Text | NativeType::Ascii => {
            let texts = strings(array).ok_or_else(no)?;
            texts
                .into_iter()
                .map(|t| {
                    t.map(|t| {
                        if matches!(cql, NativeType::Ascii) && !t.is_ascii() {
                            return Err(format!("{t:?} is not ASCII, as a CQL ascii column needs"));
                        }
                        Ok(t.as_bytes().to_vec())
                    })
                    .transpose()
                })
                .collect()
        }
        NativeType::Blob => {
            let bins = binaries(array).ok_or_else(no)?;
            Ok(bins.into_iter().map(|b| b.map(<[u8]>::to_vec)).collect())
        }
        NativeType::Uuid | NativeType::Timeuuid => {
            let check = |u: uuid::Uuid| {
                if matches!(cql, NativeType::Timeuuid) && u.get_version_num() != 1 {
                    return Err(format!(
                        "{u} is not a time-based (version 1) UUID, as a CQL timeuuid column needs"
                    ));
                }
                Ok(u.as_bytes().to_vec())
            };
            if let Some(texts) = strings(array) {
                return texts
                    .into_iter()
                    .map(|t| {
                        t.map(|t| {
                            uuid::Uuid::parse_str(t.trim())
                                .map_err(|_| format!("{t:?} is not a UUID"))
                                .and_then(check)
                        })
                        .transpose()
                    })
                    .collect();
            }
            match arrow {
                DataType::FixedSizeBinary(16) => array
                    .as_fixed_size_binary()
                    .iter()
                    .map(|b| {
                        b.map(|b| check(uuid::Uuid::from_slice(b).expect("16 bytes")))
                            .transpose()
                    })
                    .collect(),
                _ => Err(no()),
            }
        }
        NativeType::Inet => {
            if let Some(texts) = strings(array) {
                return texts
                    .into_iter()
                    .map(|t| {
                        t.map(|t| match t.trim().parse::<std::net::IpAddr>() {
                            Ok(std::net::IpAddr::V4(a)) => Ok(a.octets().to_vec()),
                            Ok(std::net::IpAddr::V6(a)) => Ok(a.octets().to_vec()),
                            Err(_) => Err(format!("{t:?} is not an IP address")),
                        })
                        .transpose()
                    })
                    .collect();
            }
            let bins = binaries(array).ok_or_else(no)?;
            bins.into_iter()
                .map(|b| {
                    b.map(|b| match b.len() {
                        4 | 16 => Ok(b.to_vec()),
                        n => Err(format!("{n} bytes are not an IPv4 or IPv6 address")),
                    })
                    .transpose()
                })
                .collect()
        }
        NativeType::Date => {
            let days: Vec<Option<i64>> = match arrow {
                DataType::Date32 => array
                    .as_primitive::<Date32Type>()
                    .iter()
                    .map(|v| v.map(i64::from))
                    .collect(),
                DataType::Date64 => array
                    .as_primitive::<Date64Type>()
                    .iter()
                    .map(|v| {
                        v.map(|ms| {
                            if ms % 86_400_000 != 0 {
                                Err(format!("the Date64 value {ms} ms is not a whole day"))
                            } else {
                                Ok(ms / 86_400_000)
                            }
                        })
                        .transpose()
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(no()),
            };
            Ok(days
                .into_iter()
                .map(|d| d.map(|d| ((d + (1 << 31)) as u32).to_be_bytes().to_vec()))
                .collect())
        }
        NativeType::Time => {
            let nanos: Vec<Option<i64>> = match arrow {
                DataType::Time32(TimeUnit::Second) => array
                    .as_primitive::<Time32SecondType>()
                    .iter()
                    .map(|v| v.map(|v| i64::from(v) * 1_000_000_000))
                    .collect(),
                DataType::Time32(TimeUnit::Millisecond) => array
                    .as_primitive::<Time32MillisecondType>()
                    .iter()
                    .map(|v| v.map(|v| i64::from(v) * 1_000_000))
                    .collect(),
                DataType::Time64(TimeUnit::Microsecond) => array
                    .as_primitive::<Time64MicrosecondType>()
                    .iter()
                    .map(|v| v.map(|v| v * 1_000))
                    .collect(),
                DataType::Time64(TimeUnit::Nanosecond) => array
                    .as_primitive::<Time64NanosecondType>()
                    .iter()
                    .collect(),
                _ => return Err(no()),
            };
            nanos
                .into_iter()
                .map(|n| {
                    n.map(|n| {
                        if (0..86_400_000_000_000).contains(&n) {
                            Ok(n.to_be_bytes().to_vec())
                        } else {
                            Err(format!("{n} ns is not a time of day"))
                        }
                    })
                    .transpose()
                })
                .collect()
        }
        NativeType::Timestamp => {
            let ms: Vec<Option<i64>> = match arrow {
                DataType::Timestamp(unit, _) => {
                    let raw: Vec<Option<i64>> = match unit {
                        TimeUnit::Second => {
                            array.as_primitive::<TimestampSecondType>().iter().collect()
                        }
                        TimeUnit::Millisecond => array
                            .as_primitive::<TimestampMillisecondType>()
                            .iter()
                            .collect(),
                        TimeUnit::Microsecond => array
                            .as_primitive::<TimestampMicrosecondType>()
                            .iter()
                            .collect(),
                        TimeUnit::Nanosecond => array
                            .as_primitive::<TimestampNanosecondType>()
                            .iter()
                            .collect(),
                    };
                    raw.into_iter()
                        .map(|v| {
                            v.map(|v| millis(v, unit, options.truncate_timestamps))
                                .transpose()
                        })
                        .collect::<Result<_, _>>()?
                }
                // ScyllaDB Migrator writes CQL timestamps as epoch milliseconds when Spark's
                // own type could not hold them.
                DataType::Int64 => array.as_primitive::<Int64Type>().iter().collect(),
                DataType::Date32 => array
                    .as_primitive::<Date32Type>()
                    .iter()
                    .map(|v| v.map(|d| i64::from(d) * 86_400_000))
                    .collect(),
                _ => return Err(no()),
            };
            Ok(ms
                .into_iter()
                .map(|m| m.map(|m| m.to_be_bytes().to_vec()))
                .collect())
        }
        NativeType::Duration => match arrow {
            DataType::Interval(IntervalUnit::MonthDayNano) => Ok(array
                .as_primitive::<IntervalMonthDayNanoType>()
                .iter()
                .map(|v| {
                    v.map(|v| {
                        encode_duration(i64::from(v.months), i64::from(v.days), v.nanoseconds)
                    })
                })
                .collect()),
            DataType::Struct(fields) => {
                let s = array.as_struct();
                let part = |name: &str| -> Result<Vec<Option<i128>>, String> {
                    let i = fields
                        .iter()
                        .position(|f| f.name() == name)
                        .ok_or_else(no)?;
                    integers(s.column(i).as_ref()).ok_or_else(no)
                };
                let (m, d, n) = (part("months")?, part("days")?, part("nanoseconds")?);
                per_row(array, |i| {
                    let get = |v: &Vec<Option<i128>>| {
                        v[i].and_then(|x| i64::try_from(x).ok()).ok_or_else(|| {
                            "a duration with a null or out-of-range part".to_string()
                        })
                    };
                    Ok(encode_duration(get(&m)?, get(&d)?, get(&n)?))
                })
            }
            _ => Err(no()),
        },
        _ => Err(no()),
    }
}

/// `[n: i32]` then each item as `[len: i32][bytes]`.
fn join<'a>(items: impl ExactSizeIterator<Item = &'a [u8]>, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(count as i32).to_be_bytes());
    for item in items {
        out.extend_from_slice(&(item.len() as i32).to_be_bytes());
        out.extend_from_slice(item);
    }
    out
}

/// [`join`] of items that may be null (the protocol's length -1).
fn join_nullable(items: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(items.len() as i32).to_be_bytes());
    for item in items {
        match item {
            Some(v) => {
                out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    out
}

/// Offsets of each row's elements in a list-like array, and the array of elements.
fn list_parts(array: &dyn Array) -> Option<(Vec<(usize, usize)>, ArrayRef)> {
    let range = |o: &[i64], i: usize| (o[i] as usize, o[i + 1] as usize);
    match array.data_type() {
        DataType::List(_) => {
            let l = array.as_list::<i32>();
            let o: Vec<i64> = l.value_offsets().iter().map(|&x| i64::from(x)).collect();
            Some((
                (0..l.len()).map(|i| range(&o, i)).collect(),
                l.values().clone(),
            ))
        }
        DataType::LargeList(_) => {
            let l = array.as_list::<i64>();
            let o = l.value_offsets();
            Some((
                (0..l.len()).map(|i| range(o, i)).collect(),
                l.values().clone(),
            ))
        }
        DataType::FixedSizeList(_, n) => {
            let l = array.as_fixed_size_list();
            let n = *n as usize;
            Some((
                (0..l.len())
                    .map(|i| {
                        let start = l.value_offset_at(i);
                        (start, start + n)
                    })
                    .collect(),
                l.values().clone(),
            ))
        }
        _ => None,
    }
}

fn element<'a>(v: &'a Option<Vec<u8>>, what: &str) -> Result<&'a [u8], String> {
    v.as_deref()
        .ok_or_else(|| format!("a null {what}, which a CQL collection cannot hold"))
}

fn values(array: &dyn Array, cql: &ColumnType<'_>, options: Options) -> Result<Cells, String> {
    if let Some(dict) = array.as_any_dictionary_opt() {
        let values = values(dict.values().as_ref(), cql, options)?;
        if values.is_empty() {
            // No value to point to: every key is null (and `normalized_keys` would panic).
            return Ok(vec![None; array.len()]);
        }
        let keys = dict.normalized_keys();
        return per_row(array, |i| {
            Ok(values.get(keys[i]).cloned().flatten().unwrap_or_default())
        });
    }
    if matches!(array.data_type(), DataType::Null) {
        return Ok(vec![None; array.len()]);
    }
    let arrow = array.data_type();
    match cql {
        ColumnType::Native(n) => native(array, n, cql, options),
        ColumnType::Collection { typ, .. } => match typ {
            CollectionType::List(elem) | CollectionType::Set(elem) => {
                let (ranges, child) = list_parts(array).ok_or_else(|| refuse(arrow, cql))?;
                let items = values(child.as_ref(), elem, options)?;
                if options.null_elements {
                    return per_row(array, |i| {
                        let (a, b) = ranges[i];
                        Ok(join_nullable(&items[a..b]))
                    });
                }
                per_row(array, |i| {
                    let (a, b) = ranges[i];
                    let parts = items[a..b]
                        .iter()
                        .map(|v| element(v, "element"))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(join(parts.into_iter(), b - a))
                })
            }
            CollectionType::Map(k, v) => {
                let (ranges, entries) = match arrow {
                    DataType::Map(..) => {
                        let m = array.as_map();
                        let o = m.value_offsets();
                        (
                            (0..m.len())
                                .map(|i| (o[i] as usize, o[i + 1] as usize))
                                .collect::<Vec<_>>(),
                            std::sync::Arc::new(m.entries().clone()) as ArrayRef,
                        )
                    }
                    _ => list_parts(array).ok_or_else(|| refuse(arrow, cql))?,
                };
                let entries = entries.as_struct_opt().ok_or_else(|| refuse(arrow, cql))?;
                if entries.num_columns() != 2 {
                    return Err(refuse(arrow, cql));
                }
                let keys = values(entries.column(0).as_ref(), k, options)?;
                let vals = values(entries.column(1).as_ref(), v, options)?;
                per_row(array, |i| {
                    let (a, b) = ranges[i];
                    let mut parts = Vec::with_capacity(2 * (b - a));
                    for e in a..b {
                        parts.push(element(&keys[e], "map key")?);
                        parts.push(element(&vals[e], "map value")?);
                    }
                    // Counted in entries; the items are keys and values alternately.
                    Ok(join(parts.into_iter(), b - a))
                })
            }
            _ => Err(refuse(arrow, cql)),
        },
        ColumnType::Vector { typ, dimensions } => {
            let (ranges, child) = list_parts(array).ok_or_else(|| refuse(arrow, cql))?;
            let items = values(child.as_ref(), typ, options)?;
            per_row(array, |i| {
                let (a, b) = ranges[i];
                if b - a != usize::from(*dimensions) {
                    return Err(format!(
                        "a list of {} elements cannot be a CQL vector of {dimensions}",
                        b - a
                    ));
                }
                let parts = items[a..b]
                    .iter()
                    .map(|v| element(v, "vector element"))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(crate::connectors::cql::codec::join_vector(typ, &parts))
            })
        }
        ColumnType::UserDefinedType { definition, .. } => {
            let s = array.as_struct_opt().ok_or_else(|| refuse(arrow, cql))?;
            let names: Vec<&str> = definition
                .field_types
                .iter()
                .map(|(n, _)| n.as_ref())
                .collect();
            for f in s.fields() {
                if !names.contains(&f.name().as_str()) {
                    return Err(format!(
                        "the Parquet struct field {:?} is not a field of the CQL type {}",
                        f.name(),
                        type_name(cql)
                    ));
                }
            }
            let mut fields = Vec::with_capacity(names.len());
            for (name, t) in &definition.field_types {
                fields.push(match s.column_by_name(name) {
                    Some(c) => Some(values(c.as_ref(), t, options)?),
                    None => None,
                });
            }
            per_row(array, |i| Ok(fields_bytes(&fields, i)))
        }
        ColumnType::Tuple(types) => {
            let s = array.as_struct_opt().ok_or_else(|| refuse(arrow, cql))?;
            if s.num_columns() > types.len() {
                return Err(format!(
                    "a Parquet struct of {} fields cannot be a CQL {}",
                    s.num_columns(),
                    type_name(cql)
                ));
            }
            let mut fields = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                fields.push(match s.columns().get(i) {
                    Some(c) => Some(values(c.as_ref(), t, options)?),
                    None => None,
                });
            }
            per_row(array, |i| Ok(fields_bytes(&fields, i)))
        }
        _ => Err(refuse(arrow, cql)),
    }
}

fn fields_bytes(fields: &[Option<Cells>], row: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        match f.as_ref().and_then(|cells| cells[row].as_ref()) {
            Some(v) => {
                out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, ListArray, StringArray, TimestampMicrosecondArray};

    use super::*;

    fn bigint() -> ColumnType<'static> {
        ColumnType::Native(NativeType::BigInt)
    }

    #[test]
    fn durations_match_cassandras_encoding() {
        let d = encode_duration(1, 2, 3_000_000_000);
        assert_eq!(
            crate::connectors::cql::codec::duration(&d),
            Some([1, 2, 3_000_000_000])
        );
        let d = encode_duration(-5, i64::from(i32::MIN), i64::MAX);
        assert_eq!(
            crate::connectors::cql::codec::duration(&d),
            Some([-5, i64::from(i32::MIN), i64::MAX])
        );
        assert_eq!(encode_duration(0, 0, 0), vec![0, 0, 0]);
    }

    #[test]
    fn integers_that_do_not_fit_are_refused() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(1 << 40)]));
        let int = ColumnType::Native(NativeType::Int);
        let err = column(&a, &int, Options::default()).unwrap_err();
        assert!(err.contains("1099511627776"), "{err}");
        let ok = column(&a, &bigint(), Options::default()).unwrap();
        assert_eq!(ok[0].as_deref(), Some(&1i64.to_be_bytes()[..]));
        assert_eq!(ok[1], None);
    }

    #[test]
    fn sub_millisecond_timestamps_are_refused_unless_truncated() {
        let a: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1_000_500i64]));
        let ts = ColumnType::Native(NativeType::Timestamp);
        assert!(
            column(&a, &ts, Options::default())
                .unwrap_err()
                .contains("truncateTimestamps")
        );
        let cut = column(
            &a,
            &ts,
            Options {
                truncate_timestamps: true,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(cut[0].as_deref(), Some(&1000i64.to_be_bytes()[..]));
    }

    #[test]
    fn impossible_types_are_refused_before_reading() {
        let text = ColumnType::Native(NativeType::Text);
        assert!(check(&DataType::Int64, &text).is_err());
        assert!(check(&DataType::Utf8, &text).is_ok());
        let list = ColumnType::Collection {
            frozen: false,
            typ: CollectionType::List(Box::new(bigint())),
        };
        let arrow_list = DataType::List(Arc::new(arrow_schema::Field::new(
            "item",
            DataType::Utf8,
            true,
        )));
        assert!(check(&arrow_list, &list).is_err());
    }

    #[test]
    fn lists_serialize_as_cql_collections() {
        let a: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![]),
        ]));
        let list = ColumnType::Collection {
            frozen: false,
            typ: CollectionType::List(Box::new(bigint())),
        };
        let out = column(&a, &list, Options::default()).unwrap();
        let items =
            crate::connectors::cql::codec::collection_items(out[0].as_ref().unwrap(), 1).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(out[1], None);
        assert_eq!(out[2].as_deref(), Some(&0i32.to_be_bytes()[..]));
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["12.50", "-1E+3", "x"]));
        let dec = ColumnType::Native(NativeType::Decimal);
        assert!(column(&texts, &dec, Options::default()).is_err());
        let first: ArrayRef = Arc::new(StringArray::from(vec!["12.50", "-1E+3"]));
        let out = column(&first, &dec, Options::default()).unwrap();
        assert_eq!(
            crate::connectors::cql::codec::decimal(out[0].as_ref().unwrap()),
            Some((2, BigInt::from(1250)))
        );
        assert_eq!(
            crate::connectors::cql::codec::decimal(out[1].as_ref().unwrap()),
            Some((-3, BigInt::from(-1)))
        );
    }
}
