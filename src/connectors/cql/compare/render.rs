//! Serialized values rendered as CQL literals, for reports.

use num_bigint::BigInt;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use crate::connectors::cql::codec;

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
            let Some(items) = codec::collection_items(v, per) else {
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
            let Some(items) = codec::fields(v).filter(|_| !types.is_empty()) else {
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
            let Some(items) = codec::fields(v) else {
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
        ColumnType::Vector { typ, dimensions } => match codec::vector_items(v, typ, *dimensions) {
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
        | NativeType::Counter => match codec::integer(v) {
            Some(x) => {
                let _ = write!(out, "{x}");
            }
            None => hex(v, out),
        },
        NativeType::Boolean => out.push_str(if v[0] != 0 { "true" } else { "false" }),
        NativeType::Float | NativeType::Double => match codec::float(n, v) {
            Some(x) if *n == NativeType::Float => {
                let _ = write!(out, "{}", x as f32);
            }
            Some(x) => {
                let _ = write!(out, "{x}");
            }
            None => hex(v, out),
        },
        NativeType::Timestamp => match codec::integer(v) {
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
        NativeType::Time => match codec::integer(v) {
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
        NativeType::Decimal => match codec::decimal(v) {
            Some((scale, unscaled)) => {
                let _ = write!(out, "{}", decimal_string(scale, &unscaled));
            }
            None => hex(v, out),
        },
        NativeType::Duration => match codec::duration(v) {
            Some([months, days, ns]) => {
                let _ = write!(out, "{months}mo{days}d{ns}ns");
            }
            None => hex(v, out),
        },
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
