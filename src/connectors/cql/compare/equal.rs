//! Equality of serialized values within the validation tolerances.

use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use crate::connectors::cql::codec;

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

/// Whether a target value equals a source value of type `t` within `tol`. Tolerances apply
/// wherever the type occurs, inside collections, tuples and UDTs too. A target UDT may have
/// extra trailing fields (the schema check allows it); they must be null.
pub fn equal(t: &ColumnType<'_>, src: &[u8], dst: &[u8], tol: &Tolerance) -> bool {
    if src == dst {
        return true;
    }
    match t {
        ColumnType::Native(n) => match n {
            NativeType::Float | NativeType::Double => {
                match (codec::float(n, src), codec::float(n, dst)) {
                    (Some(x), Some(y)) => {
                        (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol.floating_point
                    }
                    _ => false,
                }
            }
            NativeType::Timestamp => match (codec::integer(src), codec::integer(dst)) {
                (Some(x), Some(y)) => x.abs_diff(y) <= tol.timestamp_ms.max(0) as u64,
                _ => false,
            },
            NativeType::Decimal if tol.strip_decimals => {
                codec::strip_trailing_zeros(&bytes::Bytes::copy_from_slice(src)).as_ref() == dst
            }
            _ => false,
        },
        ColumnType::Collection { typ, .. } => {
            let (per, types): (usize, Vec<&ColumnType<'_>>) = match typ {
                CollectionType::List(e) | CollectionType::Set(e) => (1, vec![e]),
                CollectionType::Map(k, v) => (2, vec![k, v]),
                _ => return false,
            };
            match (
                codec::collection_items(src, per),
                codec::collection_items(dst, per),
            ) {
                (Some(x), Some(y)) => {
                    x.len() == y.len() && items_equal(&x, &y, |i| types[i % per], tol)
                }
                _ => false,
            }
        }
        ColumnType::Tuple(types) => match (codec::fields(src), codec::fields(dst)) {
            (Some(x), Some(y)) if !types.is_empty() => {
                x.len() == y.len() && items_equal(&x, &y, |i| &types[i.min(types.len() - 1)], tol)
            }
            _ => false,
        },
        ColumnType::UserDefinedType { definition, .. } => {
            match (codec::fields(src), codec::fields(dst)) {
                (Some(x), Some(y)) if !definition.field_types.is_empty() => {
                    let last = definition.field_types.len() - 1;
                    x.len() == y.len()
                        && items_equal(&x, &y, |i| &definition.field_types[i.min(last)].1, tol)
                }
                _ => false,
            }
        }
        ColumnType::Vector { typ, dimensions } => {
            match (
                codec::vector_items(src, typ, *dimensions),
                codec::vector_items(dst, typ, *dimensions),
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

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use num_bigint::BigInt;

    use super::super::order::compare;
    use super::super::render::render;
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
}
