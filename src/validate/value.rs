//! Serialized CQL values, read by their type: Cassandra's clustering order (to merge two scans
//! without buffering them), equality within the validation tolerances, and rendering as CQL
//! literals for reports.
//!
//! Values stay the bytes the driver received; nothing is decoded unless two values differ or
//! must be ordered.

use std::cmp::Ordering;

use num_bigint::BigInt;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use crate::connectors::cql::rows::strip_trailing_zeros;

/// How far apart two values may be and still count as equal.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tolerance {
    /// Largest absolute difference between two `float` or `double` values.
    pub floating_point: f64,
    /// Largest difference between two `timestamp` values, in milliseconds.
    pub timestamp_ms: i64,
    /// The target was written with `stripTrailingZerosForDecimals`: a `decimal` equals the
    /// source's without trailing zeros.
    pub strip_decimals: bool,
}

/// Reads a `[len: i32][bytes]` item at `pos`; `None` inside for a null item.
fn item<'a>(b: &'a [u8], pos: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = i32::from_be_bytes(b.get(*pos..*pos + 4)?.try_into().ok()?);
    *pos += 4;
    if len < 0 {
        return Some(None);
    }
    let v = b.get(*pos..*pos + len as usize)?;
    *pos += len as usize;
    Some(Some(v))
}

/// The items of a collection (`[n: i32]` then items; a map has two items per entry).
fn collection_items(b: &[u8], per_entry: usize) -> Option<Vec<Option<&[u8]>>> {
    let n = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    let mut pos = 4;
    let count = n.max(0) as usize * per_entry;
    // The count comes from the bytes: each item takes at least 4 of them.
    let mut out = Vec::with_capacity(count.min(b.len() / 4));
    for _ in 0..count {
        out.push(item(b, &mut pos)?);
    }
    (pos == b.len()).then_some(out)
}

/// The fields of a tuple or UDT: items until the bytes end, trailing nulls left out (a value
/// may have fewer fields than its type, the missing ones being null, as Cassandra reads them).
fn fields(b: &[u8]) -> Option<Vec<Option<&[u8]>>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < b.len() {
        out.push(item(b, &mut pos)?);
    }
    while out.last() == Some(&None) {
        out.pop();
    }
    Some(out)
}

/// Byte length of a vector element whose type has a fixed size, as Cassandra serializes
/// vectors (fixed-size elements without length prefixes).
fn fixed_size(t: &ColumnType<'_>) -> Option<usize> {
    match t {
        ColumnType::Native(n) => match n {
            NativeType::Boolean => Some(1),
            NativeType::Int | NativeType::Float | NativeType::Date => Some(4),
            NativeType::BigInt
            | NativeType::Double
            | NativeType::Timestamp
            | NativeType::Time
            | NativeType::Counter => Some(8),
            NativeType::Uuid | NativeType::Timeuuid => Some(16),
            _ => None,
        },
        _ => None,
    }
}

/// The elements of a vector of fixed-size elements.
fn vector_items<'a>(b: &'a [u8], t: &ColumnType<'_>, dims: u16) -> Option<Vec<&'a [u8]>> {
    let size = fixed_size(t)?;
    (b.len() == size * dims as usize).then(|| b.chunks(size).collect())
}

fn be_i64(b: &[u8]) -> Option<i64> {
    Some(match b.len() {
        8 => i64::from_be_bytes(b.try_into().ok()?),
        4 => i64::from(i32::from_be_bytes(b.try_into().ok()?)),
        2 => i64::from(i16::from_be_bytes(b.try_into().ok()?)),
        1 => i64::from(b[0] as i8),
        _ => return None,
    })
}

fn java_float_cmp(a: f64, b: f64) -> Ordering {
    // Java's Float.compare/Double.compare: every NaN equal and above everything, -0.0 < 0.0.
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.total_cmp(&b),
    }
}

fn float_of(t: &NativeType, b: &[u8]) -> Option<f64> {
    match (t, b.len()) {
        (NativeType::Float, 4) => Some(f64::from(f32::from_be_bytes(b.try_into().ok()?))),
        (NativeType::Double, 8) => Some(f64::from_be_bytes(b.try_into().ok()?)),
        _ => None,
    }
}

fn decimal_of(b: &[u8]) -> Option<(i32, BigInt)> {
    let scale = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    Some((scale, BigInt::from_signed_bytes_be(&b[4..])))
}

fn compare_decimals(a: &[u8], b: &[u8]) -> Ordering {
    let (Some((sa, ua)), Some((sb, ub))) = (decimal_of(a), decimal_of(b)) else {
        return a.cmp(b);
    };
    // BigDecimal.compareTo: by value, whatever the scales. Bring both to the larger scale
    // (a difference beyond a few thousand digits only happens in contrived values).
    let diff = (i64::from(sa) - i64::from(sb)).clamp(-4096, 4096);
    let ten = BigInt::from(10);
    if diff >= 0 {
        ua.cmp(&(ub * ten.pow(diff as u32)))
    } else {
        (ua * ten.pow((-diff) as u32)).cmp(&ub)
    }
}

fn time_uuid_msb(b: &[u8]) -> i64 {
    let msb = i64::from_be_bytes(b[..8].try_into().expect("16 bytes"));
    // time_hi (with the version) first, then time_mid, then time_low: timestamp order.
    (msb << 48) | ((msb << 16) & 0xFFFF_0000_0000) | ((msb as u64) >> 32) as i64
}

fn compare_uuids(a: &[u8], b: &[u8], time_only: bool) -> Ordering {
    if a.len() != 16 || b.len() != 16 {
        return a.len().cmp(&b.len()).then_with(|| a.cmp(b));
    }
    let lsb = |x: &[u8]| u64::from_be_bytes(x[8..].try_into().expect("16 bytes"));
    if time_only {
        // timeuuid: by timestamp, then the rest as signed bytes.
        let signed = |x: &[u8]| (lsb(x) ^ 0x0080_8080_8080_8080) as i64;
        return time_uuid_msb(a)
            .cmp(&time_uuid_msb(b))
            .then_with(|| signed(a).cmp(&signed(b)));
    }
    let msb = |x: &[u8]| u64::from_be_bytes(x[..8].try_into().expect("16 bytes"));
    let version = |x: &[u8]| (msb(x) >> 12) & 0xf;
    version(a)
        .cmp(&version(b))
        .then_with(|| {
            if version(a) == 1 {
                time_uuid_msb(a).cmp(&time_uuid_msb(b))
            } else {
                msb(a).cmp(&msb(b))
            }
        })
        .then_with(|| lsb(a).cmp(&lsb(b)))
}

/// Compares two non-null values of type `t` in Cassandra's order for clustering columns
/// (ascending; a `DESC` column reverses it). Empty values come first, as in Cassandra.
pub fn compare(t: &ColumnType<'_>, a: &[u8], b: &[u8]) -> Ordering {
    if a.is_empty() || b.is_empty() {
        // Empty (not null) values sort before every other.
        return (!a.is_empty()).cmp(&!b.is_empty());
    }
    match t {
        ColumnType::Native(n) => match n {
            NativeType::Int
            | NativeType::BigInt
            | NativeType::SmallInt
            | NativeType::TinyInt
            | NativeType::Counter
            | NativeType::Timestamp
            | NativeType::Time => match (be_i64(a), be_i64(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            },
            NativeType::Boolean => (a[0] != 0).cmp(&(b[0] != 0)),
            NativeType::Float | NativeType::Double => match (float_of(n, a), float_of(n, b)) {
                (Some(x), Some(y)) => java_float_cmp(x, y),
                _ => a.cmp(b),
            },
            NativeType::Varint => {
                BigInt::from_signed_bytes_be(a).cmp(&BigInt::from_signed_bytes_be(b))
            }
            NativeType::Decimal => compare_decimals(a, b),
            NativeType::Uuid => compare_uuids(a, b, false),
            NativeType::Timeuuid => compare_uuids(a, b, true),
            // Text, ascii, blob, inet, date (unsigned, offset by 2^31), duration: unsigned
            // bytes.
            _ => a.cmp(b),
        },
        ColumnType::Collection { typ, .. } => {
            let (per, types): (usize, Vec<&ColumnType<'_>>) = match typ {
                CollectionType::List(e) | CollectionType::Set(e) => (1, vec![e]),
                CollectionType::Map(k, v) => (2, vec![k, v]),
                _ => return a.cmp(b),
            };
            match (collection_items(a, per), collection_items(b, per)) {
                (Some(x), Some(y)) => compare_items(&x, &y, |i| types[i % per]),
                _ => a.cmp(b),
            }
        }
        ColumnType::Tuple(types) => match (fields(a), fields(b)) {
            (Some(x), Some(y)) => compare_items(&x, &y, |i| &types[i.min(types.len() - 1)]),
            _ => a.cmp(b),
        },
        ColumnType::UserDefinedType { definition, .. } => match (fields(a), fields(b)) {
            (Some(x), Some(y)) if !definition.field_types.is_empty() => {
                let n = definition.field_types.len();
                compare_items(&x, &y, |i| &definition.field_types[i.min(n - 1)].1)
            }
            _ => a.cmp(b),
        },
        ColumnType::Vector { typ, dimensions } => {
            match (
                vector_items(a, typ, *dimensions),
                vector_items(b, typ, *dimensions),
            ) {
                (Some(x), Some(y)) => x
                    .iter()
                    .zip(&y)
                    .map(|(p, q)| compare(typ, p, q))
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal),
                _ => a.cmp(b),
            }
        }
        _ => a.cmp(b),
    }
}

/// Element-wise comparison (nulls first), then the shorter first.
fn compare_items<'t>(
    a: &[Option<&[u8]>],
    b: &[Option<&[u8]>],
    typ: impl Fn(usize) -> &'t ColumnType<'t>,
) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let o = match (x, y) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => compare(typ(i), x, y),
        };
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Whether a target value equals a source value of type `t` within `tol`. Tolerances apply
/// wherever the type occurs, inside collections, tuples and UDTs too. A target UDT may have
/// extra trailing fields (the schema check allows it); they must be null.
pub fn equal(t: &ColumnType<'_>, src: &[u8], dst: &[u8], tol: &Tolerance) -> bool {
    if src == dst {
        return true;
    }
    match t {
        ColumnType::Native(n) => match n {
            NativeType::Float | NativeType::Double => match (float_of(n, src), float_of(n, dst)) {
                (Some(x), Some(y)) => {
                    (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol.floating_point
                }
                _ => false,
            },
            NativeType::Timestamp => match (be_i64(src), be_i64(dst)) {
                (Some(x), Some(y)) => x.abs_diff(y) <= tol.timestamp_ms.max(0) as u64,
                _ => false,
            },
            NativeType::Decimal if tol.strip_decimals => {
                strip_trailing_zeros(&bytes::Bytes::copy_from_slice(src)).as_ref() == dst
            }
            _ => false,
        },
        ColumnType::Collection { typ, .. } => {
            let (per, types): (usize, Vec<&ColumnType<'_>>) = match typ {
                CollectionType::List(e) | CollectionType::Set(e) => (1, vec![e]),
                CollectionType::Map(k, v) => (2, vec![k, v]),
                _ => return false,
            };
            match (collection_items(src, per), collection_items(dst, per)) {
                (Some(x), Some(y)) => {
                    x.len() == y.len() && items_equal(&x, &y, |i| types[i % per], tol)
                }
                _ => false,
            }
        }
        ColumnType::Tuple(types) => match (fields(src), fields(dst)) {
            (Some(x), Some(y)) if !types.is_empty() => {
                x.len() == y.len() && items_equal(&x, &y, |i| &types[i.min(types.len() - 1)], tol)
            }
            _ => false,
        },
        ColumnType::UserDefinedType { definition, .. } => match (fields(src), fields(dst)) {
            (Some(x), Some(y)) if !definition.field_types.is_empty() => {
                let last = definition.field_types.len() - 1;
                x.len() == y.len()
                    && items_equal(&x, &y, |i| &definition.field_types[i.min(last)].1, tol)
            }
            _ => false,
        },
        ColumnType::Vector { typ, dimensions } => {
            match (
                vector_items(src, typ, *dimensions),
                vector_items(dst, typ, *dimensions),
            ) {
                (Some(x), Some(y)) => x.iter().zip(&y).all(|(p, q)| equal(typ, p, q, tol)),
                _ => false,
            }
        }
        _ => false,
    }
}

fn items_equal<'t>(
    a: &[Option<&[u8]>],
    b: &[Option<&[u8]>],
    typ: impl Fn(usize) -> &'t ColumnType<'t>,
    tol: &Tolerance,
) -> bool {
    a.iter().zip(b).enumerate().all(|(i, (x, y))| match (x, y) {
        (None, None) => true,
        (Some(x), Some(y)) => equal(typ(i), x, y, tol),
        _ => false,
    })
}

/// Longest rendering of one value in a report; longer ones are cut with their size noted.
pub const MAX_RENDERED: usize = 256;

/// A value as a CQL literal, for reports (cut at [`MAX_RENDERED`] characters).
pub fn render(t: &ColumnType<'_>, v: Option<&[u8]>) -> String {
    let Some(v) = v else {
        return "null".to_string();
    };
    let mut s = String::new();
    literal(t, v, &mut s);
    if s.len() > MAX_RENDERED {
        let mut cut = MAX_RENDERED;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(&format!("… ({} bytes)", v.len()));
    }
    s
}

fn hex(v: &[u8], out: &mut String) {
    out.push_str("0x");
    for b in v.iter().take(MAX_RENDERED) {
        out.push_str(&format!("{b:02x}"));
    }
}

fn uuid(v: &[u8], out: &mut String) {
    match uuid::Uuid::from_slice(v) {
        Ok(u) => out.push_str(&u.hyphenated().to_string()),
        Err(_) => hex(v, out),
    }
}

/// Reads an unsigned vint (Cassandra's variable-length integer).
fn read_vint(v: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *v.get(*pos)?;
    let extra = first.leading_ones() as usize;
    let mut value = if extra >= 8 {
        0
    } else {
        u64::from(first & (0xff >> extra))
    };
    for i in 0..extra {
        value = (value << 8) | u64::from(*v.get(*pos + 1 + i)?);
    }
    *pos += 1 + extra;
    Some(value)
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn literal(t: &ColumnType<'_>, v: &[u8], out: &mut String) {
    if v.is_empty() && !matches!(t, ColumnType::Native(NativeType::Text | NativeType::Ascii)) {
        out.push_str("<empty>");
        return;
    }
    match t {
        ColumnType::Native(n) => native(n, v, out),
        ColumnType::Collection { typ, .. } => {
            let (per, types, open, close): (usize, Vec<&ColumnType<'_>>, char, char) = match typ {
                CollectionType::List(e) => (1, vec![e], '[', ']'),
                CollectionType::Set(e) => (1, vec![e], '{', '}'),
                CollectionType::Map(k, val) => (2, vec![k, val], '{', '}'),
                _ => return hex(v, out),
            };
            let Some(items) = collection_items(v, per) else {
                return hex(v, out);
            };
            out.push(open);
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if per == 2 && i % 2 == 1 { ": " } else { ", " });
                }
                match it {
                    Some(x) => literal(types[i % per], x, out),
                    None => out.push_str("null"),
                }
                if out.len() > MAX_RENDERED {
                    break;
                }
            }
            out.push(close);
        }
        ColumnType::Tuple(types) => {
            let Some(items) = fields(v).filter(|_| !types.is_empty()) else {
                return hex(v, out);
            };
            out.push('(');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match it {
                    Some(x) => literal(&types[i.min(types.len() - 1)], x, out),
                    None => out.push_str("null"),
                }
            }
            out.push(')');
        }
        ColumnType::UserDefinedType { definition, .. } => {
            let Some(items) = fields(v) else {
                return hex(v, out);
            };
            out.push('{');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match definition.field_types.get(i) {
                    Some((name, typ)) => {
                        out.push_str(name);
                        out.push_str(": ");
                        match it {
                            Some(x) => literal(typ, x, out),
                            None => out.push_str("null"),
                        }
                    }
                    None => out.push('?'),
                }
            }
            out.push('}');
        }
        ColumnType::Vector { typ, dimensions } => match vector_items(v, typ, *dimensions) {
            Some(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    literal(typ, x, out);
                    if out.len() > MAX_RENDERED {
                        break;
                    }
                }
                out.push(']');
            }
            None => hex(v, out),
        },
        _ => hex(v, out),
    }
}

fn native(n: &NativeType, v: &[u8], out: &mut String) {
    use std::fmt::Write;
    match n {
        NativeType::Text | NativeType::Ascii => match std::str::from_utf8(v) {
            Ok(s) => {
                out.push('\'');
                let cut: String = s.chars().take(MAX_RENDERED).collect();
                out.push_str(&cut.replace('\'', "''"));
                out.push('\'');
            }
            Err(_) => hex(v, out),
        },
        NativeType::Int
        | NativeType::BigInt
        | NativeType::SmallInt
        | NativeType::TinyInt
        | NativeType::Counter => match be_i64(v) {
            Some(x) => {
                let _ = write!(out, "{x}");
            }
            None => hex(v, out),
        },
        NativeType::Boolean => out.push_str(if v[0] != 0 { "true" } else { "false" }),
        NativeType::Float | NativeType::Double => match float_of(n, v) {
            Some(x) if *n == NativeType::Float => {
                let _ = write!(out, "{}", x as f32);
            }
            Some(x) => {
                let _ = write!(out, "{x}");
            }
            None => hex(v, out),
        },
        NativeType::Timestamp => match be_i64(v) {
            Some(ms) => match chrono::DateTime::from_timestamp_millis(ms) {
                Some(t) => {
                    let _ = write!(out, "'{}'", t.format("%Y-%m-%dT%H:%M:%S%.3fZ"));
                }
                None => {
                    let _ = write!(out, "{ms}");
                }
            },
            None => hex(v, out),
        },
        NativeType::Date => match v.try_into().map(u32::from_be_bytes) {
            Ok(d) => {
                let days = i64::from(d) - (1i64 << 31);
                match chrono::NaiveDate::from_ymd_opt(1970, 1, 1)
                    .and_then(|e| e.checked_add_signed(chrono::TimeDelta::try_days(days)?))
                {
                    Some(date) => {
                        let _ = write!(out, "'{date}'");
                    }
                    None => {
                        let _ = write!(out, "{d}");
                    }
                }
            }
            Err(_) => hex(v, out),
        },
        NativeType::Time => match be_i64(v) {
            Some(ns) => {
                let secs = ns / 1_000_000_000;
                let _ = write!(
                    out,
                    "'{:02}:{:02}:{:02}.{:09}'",
                    secs / 3600,
                    secs / 60 % 60,
                    secs % 60,
                    ns % 1_000_000_000
                );
            }
            None => hex(v, out),
        },
        NativeType::Uuid | NativeType::Timeuuid => uuid(v, out),
        NativeType::Inet => match v.len() {
            4 => {
                let a: [u8; 4] = v.try_into().expect("4 bytes");
                let _ = write!(out, "'{}'", std::net::Ipv4Addr::from(a));
            }
            16 => {
                let a: [u8; 16] = v.try_into().expect("16 bytes");
                let _ = write!(out, "'{}'", std::net::Ipv6Addr::from(a));
            }
            _ => hex(v, out),
        },
        NativeType::Varint => {
            let _ = write!(out, "{}", BigInt::from_signed_bytes_be(v));
        }
        NativeType::Decimal => match decimal_of(v) {
            Some((scale, unscaled)) => {
                let _ = write!(out, "{}", decimal_string(scale, &unscaled));
            }
            None => hex(v, out),
        },
        NativeType::Duration => {
            let mut pos = 0;
            let parts: Option<Vec<i64>> =
                (0..3).map(|_| read_vint(v, &mut pos).map(zigzag)).collect();
            match parts {
                Some(p) => {
                    let _ = write!(out, "{}mo{}d{}ns", p[0], p[1], p[2]);
                }
                None => hex(v, out),
            }
        }
        _ => hex(v, out),
    }
}

fn decimal_string(scale: i32, unscaled: &BigInt) -> String {
    let digits = unscaled.magnitude().to_string();
    let sign = if unscaled.sign() == num_bigint::Sign::Minus {
        "-"
    } else {
        ""
    };
    if scale <= 0 {
        return if scale == 0 {
            format!("{sign}{digits}")
        } else {
            format!("{sign}{digits}E+{}", -i64::from(scale))
        };
    }
    let scale = scale as usize;
    if scale > 64 {
        return format!("{sign}{digits}E-{scale}");
    }
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale - digits.len() + 1))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native_t(n: NativeType) -> ColumnType<'static> {
        ColumnType::Native(n)
    }

    fn dec(scale: i32, unscaled: i64) -> Vec<u8> {
        let mut v = scale.to_be_bytes().to_vec();
        v.extend(BigInt::from(unscaled).to_signed_bytes_be());
        v
    }

    #[test]
    fn integers_and_floats_order_by_value() {
        let int = native_t(NativeType::Int);
        assert_eq!(
            compare(&int, &(-5i32).to_be_bytes(), &3i32.to_be_bytes()),
            Ordering::Less
        );
        let dbl = native_t(NativeType::Double);
        let d = |x: f64| x.to_be_bytes();
        assert_eq!(compare(&dbl, &d(-0.0), &d(0.0)), Ordering::Less);
        assert_eq!(compare(&dbl, &d(f64::NAN), &d(1e300)), Ordering::Greater);
        assert_eq!(compare(&dbl, &d(-2.5), &d(-1.0)), Ordering::Less);
        assert_eq!(compare(&int, &[], &1i32.to_be_bytes()), Ordering::Less);
        assert_eq!(compare(&int, &[], &[]), Ordering::Equal);
    }

    #[test]
    fn decimals_and_varints_order_by_value() {
        let t = native_t(NativeType::Decimal);
        assert_eq!(compare(&t, &dec(1, 15), &dec(3, 1500)), Ordering::Equal);
        assert_eq!(compare(&t, &dec(2, 150), &dec(0, 2)), Ordering::Less);
        assert_eq!(compare(&t, &dec(0, -3), &dec(5, 1)), Ordering::Less);
        let v = native_t(NativeType::Varint);
        let big = |x: i64| BigInt::from(x).to_signed_bytes_be();
        assert_eq!(compare(&v, &big(-300), &big(2)), Ordering::Less);
        assert_eq!(compare(&v, &big(70000), &big(255)), Ordering::Greater);
    }

    #[test]
    fn tolerances_hold_at_their_edges() {
        let dbl = native_t(NativeType::Double);
        let tol = Tolerance {
            floating_point: 0.5,
            timestamp_ms: 10,
            strip_decimals: false,
        };
        let d = |x: f64| x.to_be_bytes();
        assert!(equal(&dbl, &d(1.0), &d(1.5), &tol));
        assert!(!equal(&dbl, &d(1.0), &d(1.5000001), &tol));
        let ts = native_t(NativeType::Timestamp);
        let t = |x: i64| x.to_be_bytes();
        assert!(equal(&ts, &t(1000), &t(1010), &tol));
        assert!(!equal(&ts, &t(1000), &t(1011), &tol));
        assert!(!equal(&ts, &t(1000), &t(1001), &Tolerance::default()));
        let list = ColumnType::Collection {
            frozen: false,
            typ: CollectionType::List(Box::new(dbl.clone())),
        };
        let l = |xs: &[f64]| {
            let mut v = (xs.len() as i32).to_be_bytes().to_vec();
            for x in xs {
                v.extend(8i32.to_be_bytes());
                v.extend(x.to_be_bytes());
            }
            v
        };
        assert!(equal(&list, &l(&[1.0, 2.0]), &l(&[1.25, 2.0]), &tol));
        assert!(!equal(&list, &l(&[1.0, 2.0]), &l(&[1.0]), &tol));
        let dect = native_t(NativeType::Decimal);
        let strip = Tolerance {
            strip_decimals: true,
            ..Default::default()
        };
        assert!(equal(&dect, &dec(3, 1500), &dec(1, 15), &strip));
        assert!(!equal(
            &dect,
            &dec(3, 1500),
            &dec(1, 15),
            &Tolerance::default()
        ));
    }

    #[test]
    fn trailing_null_fields_do_not_count() {
        let tuple = ColumnType::Tuple(vec![native_t(NativeType::Int), native_t(NativeType::Text)]);
        let mut one = 4i32.to_be_bytes().to_vec();
        one.extend(7i32.to_be_bytes());
        let mut padded = one.clone();
        padded.extend((-1i32).to_be_bytes());
        assert_eq!(compare(&tuple, &one, &padded), Ordering::Equal);
        assert!(equal(&tuple, &one, &padded, &Tolerance::default()));
        // A count far larger than the bytes is refused, not allocated.
        let list = ColumnType::Collection {
            frozen: true,
            typ: CollectionType::List(Box::new(native_t(NativeType::Int))),
        };
        assert_eq!(render(&list, Some(&i32::MAX.to_be_bytes())), "0x7fffffff");
    }

    #[test]
    fn literals_read_like_cql() {
        assert_eq!(
            render(&native_t(NativeType::Text), Some(b"it's")),
            "'it''s'"
        );
        assert_eq!(
            render(&native_t(NativeType::Decimal), Some(&dec(3, -1500))),
            "-1.500"
        );
        assert_eq!(
            render(&native_t(NativeType::Decimal), Some(&dec(4, 15))),
            "0.0015"
        );
        assert_eq!(render(&native_t(NativeType::Int), None), "null");
        assert_eq!(
            render(&native_t(NativeType::Timestamp), Some(&0i64.to_be_bytes())),
            "'1970-01-01T00:00:00.000Z'"
        );
        assert_eq!(
            render(
                &native_t(NativeType::Date),
                Some(&(1u32 << 31).to_be_bytes())
            ),
            "'1970-01-01'"
        );
        let long = vec![b'a'; 1000];
        assert!(render(&native_t(NativeType::Blob), Some(&long)).ends_with("(1000 bytes)"));
        // 1 month, 2 days, 3 ns as zigzag vints.
        assert_eq!(
            render(&native_t(NativeType::Duration), Some(&[2, 4, 6])),
            "1mo2d3ns"
        );
    }
}
