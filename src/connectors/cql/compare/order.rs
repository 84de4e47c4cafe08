//! Cassandra's order of serialized values, type by type: the validator merges two scans
//! without buffering them, so it must order clustering values exactly as Cassandra returns
//! them.

use std::cmp::Ordering;

use num_bigint::BigInt;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use crate::connectors::cql::codec;

fn java_float_cmp(a: f64, b: f64) -> Ordering {
    // Java's Float.compare/Double.compare: every NaN equal and above everything, -0.0 < 0.0.
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.total_cmp(&b),
    }
}

fn compare_decimals(a: &[u8], b: &[u8]) -> Ordering {
    let (Some((sa, ua)), Some((sb, ub))) = (codec::decimal(a), codec::decimal(b)) else {
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
            | NativeType::Time => match (codec::integer(a), codec::integer(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            },
            NativeType::Boolean => (a[0] != 0).cmp(&(b[0] != 0)),
            NativeType::Float | NativeType::Double => {
                match (codec::float(n, a), codec::float(n, b)) {
                    (Some(x), Some(y)) => java_float_cmp(x, y),
                    _ => a.cmp(b),
                }
            }
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
            match (
                codec::collection_items(a, per),
                codec::collection_items(b, per),
            ) {
                (Some(x), Some(y)) => compare_items(&x, &y, |i| types[i % per]),
                _ => a.cmp(b),
            }
        }
        ColumnType::Tuple(types) => match (codec::fields(a), codec::fields(b)) {
            (Some(x), Some(y)) => compare_items(&x, &y, |i| &types[i.min(types.len() - 1)]),
            _ => a.cmp(b),
        },
        ColumnType::UserDefinedType { definition, .. } => {
            match (codec::fields(a), codec::fields(b)) {
                (Some(x), Some(y)) if !definition.field_types.is_empty() => {
                    let n = definition.field_types.len();
                    compare_items(&x, &y, |i| &definition.field_types[i.min(n - 1)].1)
                }
                _ => a.cmp(b),
            }
        }
        ColumnType::Vector { typ, dimensions } => {
            match (
                codec::vector_items(a, typ, *dimensions),
                codec::vector_items(b, typ, *dimensions),
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
}
