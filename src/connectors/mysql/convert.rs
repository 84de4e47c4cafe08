//! MySQL values to CQL cells, exactly. The pair of types is checked once, before anything is
//! written ([`plan`]); each value is then converted by its column's [`Conv`], and a value
//! that has no exact CQL form (an unsigned BIGINT beyond `bigint`, a `TIME` past 24 hours,
//! microseconds in a `timestamp`, a zero date with `zeroDateTimeBehavior: EXCEPTION`) is an
//! error naming what it is.

use bytes::Bytes;
use chrono::{NaiveDate, NaiveDateTime};
use mysql_async::Value;
use num_bigint::BigInt;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};

use super::config::ZeroDates;
use super::schema::SourceColumn;
use crate::connectors::cql::codec::{encode_decimal, parse_decimal};
use crate::connectors::cql::schema::type_name;

/// How one column's values become cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conv {
    /// A whole number (also BIT bytes and YEAR) into an integer type, range checked.
    Integer(NativeType),
    /// 0 or 1 into a `boolean`.
    Boolean,
    /// A DECIMAL's digits into a `decimal` (scale kept) or, scale 0, a `varint`.
    Decimal { varint: bool },
    /// FLOAT into `float`.
    Float,
    /// FLOAT or DOUBLE into `double` (a FLOAT widens exactly).
    Double,
    /// Characters into `text`, or `ascii` (checked).
    Text { ascii: bool },
    /// Bytes as they are.
    Blob,
    /// DATE, DATETIME or TIMESTAMP into `timestamp` (milliseconds since 1970, UTC).
    Timestamp,
    /// DATE into `date`.
    Date,
    /// TIME into `time`.
    Time,
    /// 16 bytes, or the 36-character text form, into `uuid` (or a version 1 `timeuuid`).
    Uuid { time: bool },
    /// An address's text form into `inet`.
    Inet,
    /// A SET's comma-separated members into a `set<text>`.
    TextSet,
}

/// Per-job choices of the conversions.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// What zero dates become.
    pub zero_dates: ZeroDates,
    /// Whether sub-millisecond digits of a `timestamp` are cut instead of refused.
    pub truncate_timestamps: bool,
}

/// The CQL type to add a column of for `column` (`ALTER TABLE ... ADD`): one that [`plan`]
/// converts it to exactly, or `None` where no CQL type takes it (spatial types, ...).
pub fn suggested_type(column: &SourceColumn) -> Option<String> {
    suggested_cql(column).map(|typ| type_name(&typ))
}

/// [`suggested_type`] as a type (for a `CREATE TABLE`).
pub fn suggested_cql(column: &SourceColumn) -> Option<ColumnType<'static>> {
    use NativeType as N;
    let d = column.data_type.as_str();
    let unsigned = column.unsigned();
    let native = match d {
        _ if column.is_flag() => N::Boolean,
        "tinyint" if unsigned => N::SmallInt,
        "tinyint" => N::TinyInt,
        "smallint" if unsigned => N::Int,
        "smallint" => N::SmallInt,
        "mediumint" => N::Int,
        "int" | "integer" if unsigned => N::BigInt,
        "int" | "integer" => N::Int,
        "bigint" if unsigned => N::Varint,
        "bigint" => N::BigInt,
        "bit" => N::Blob,
        "year" => N::SmallInt,
        "decimal" | "numeric" => N::Decimal,
        "float" => N::Float,
        "double" | "real" => N::Double,
        "date" => N::Date,
        "datetime" | "timestamp" => N::Timestamp,
        "time" => N::Time,
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "enum" | "set"
        | "json" => N::Text,
        _ if column.is_binary() => N::Blob,
        _ => return None,
    };
    let typ = ColumnType::Native(native);
    // Only what a load takes: a suggestion that would be refused is none.
    plan(column, &typ).ok().map(|_| typ)
}

/// The conversion of `column` into the CQL type `target`, or why there is none.
pub fn plan(column: &SourceColumn, target: &ColumnType<'_>) -> Result<Conv, String> {
    use NativeType as N;
    let refuse = || {
        format!(
            "the MySQL type {} cannot be written exactly to a CQL {}",
            column.column_type,
            type_name(target)
        )
    };
    let native = match target {
        ColumnType::Native(n) => n.clone(),
        ColumnType::Collection {
            typ: CollectionType::Set(element),
            ..
        } if column.data_type == "set"
            && matches!(**element, ColumnType::Native(N::Text | N::Ascii)) =>
        {
            return Ok(Conv::TextSet);
        }
        _ => return Err(refuse()),
    };
    let d = column.data_type.as_str();
    let text_like = matches!(
        d,
        "char"
            | "varchar"
            | "tinytext"
            | "text"
            | "mediumtext"
            | "longtext"
            | "enum"
            | "set"
            | "json"
    );
    let integer_target = matches!(
        native,
        N::TinyInt | N::SmallInt | N::Int | N::BigInt | N::Varint
    );
    let conv = match d {
        _ if column.is_integer() => match native {
            N::Boolean if column.is_flag() => Conv::Boolean,
            _ if integer_target => Conv::Integer(native),
            N::Decimal => Conv::Integer(N::Decimal),
            _ => return Err(refuse()),
        },
        "bit" => match native {
            N::Boolean if column.is_flag() => Conv::Boolean,
            N::Blob => Conv::Blob,
            _ if integer_target => Conv::Integer(native),
            _ => return Err(refuse()),
        },
        "year" => match native {
            N::SmallInt | N::Int | N::BigInt | N::Varint => Conv::Integer(native),
            _ => return Err(refuse()),
        },
        "decimal" | "numeric" => match native {
            N::Decimal => Conv::Decimal { varint: false },
            N::Varint if column.scale == Some(0) => Conv::Decimal { varint: true },
            _ => return Err(refuse()),
        },
        "float" => match native {
            N::Float => Conv::Float,
            N::Double => Conv::Double,
            _ => return Err(refuse()),
        },
        "double" | "real" => match native {
            N::Double => Conv::Double,
            _ => return Err(refuse()),
        },
        "date" => match native {
            N::Date => Conv::Date,
            N::Timestamp => Conv::Timestamp,
            _ => return Err(refuse()),
        },
        "datetime" | "timestamp" => match native {
            N::Timestamp => Conv::Timestamp,
            _ => return Err(refuse()),
        },
        "time" => match native {
            N::Time => Conv::Time,
            _ => return Err(refuse()),
        },
        _ if text_like => match native {
            N::Text => Conv::Text { ascii: false },
            N::Ascii => Conv::Text { ascii: true },
            N::Blob => Conv::Blob,
            N::Uuid if matches!(d, "char" | "varchar") => Conv::Uuid { time: false },
            N::Timeuuid if matches!(d, "char" | "varchar") => Conv::Uuid { time: true },
            N::Inet if matches!(d, "char" | "varchar") => Conv::Inet,
            _ => return Err(refuse()),
        },
        _ if column.is_binary() => match native {
            N::Blob => Conv::Blob,
            N::Uuid if column.column_type == "binary(16)" => Conv::Uuid { time: false },
            N::Timeuuid if column.column_type == "binary(16)" => Conv::Uuid { time: true },
            _ => return Err(refuse()),
        },
        _ => return Err(refuse()),
    };
    Ok(conv)
}

/// Converts one value; `None` is a null cell.
pub fn convert(conv: &Conv, value: Value, options: Options) -> Result<Option<Bytes>, String> {
    use NativeType as N;
    if matches!(value, Value::NULL) {
        return Ok(None);
    }
    let unexpected = |v: &Value| format!("unexpected value {v:?} from the server for this column");
    let out: Vec<u8> = match conv {
        Conv::Integer(target) => {
            let n: i128 = match &value {
                Value::Int(i) => i128::from(*i),
                Value::UInt(u) => i128::from(*u),
                // BIT(n): big-endian bytes.
                Value::Bytes(b) if b.len() <= 8 => b
                    .iter()
                    .fold(0i128, |acc, byte| (acc << 8) | i128::from(*byte)),
                v => return Err(unexpected(v)),
            };
            let too_big = || format!("the value {n} does not fit a CQL {target:?}");
            match target {
                N::TinyInt => i8::try_from(n)
                    .map_err(|_| too_big())?
                    .to_be_bytes()
                    .to_vec(),
                N::SmallInt => i16::try_from(n)
                    .map_err(|_| too_big())?
                    .to_be_bytes()
                    .to_vec(),
                N::Int => i32::try_from(n)
                    .map_err(|_| too_big())?
                    .to_be_bytes()
                    .to_vec(),
                N::BigInt => i64::try_from(n)
                    .map_err(|_| too_big())?
                    .to_be_bytes()
                    .to_vec(),
                N::Varint => BigInt::from(n).to_signed_bytes_be(),
                N::Decimal => encode_decimal(0, &BigInt::from(n)).to_vec(),
                _ => unreachable!("integer targets only"),
            }
        }
        Conv::Boolean => {
            let n = match &value {
                Value::Int(i) => i128::from(*i),
                Value::UInt(u) => i128::from(*u),
                Value::Bytes(b) if b.len() == 1 => i128::from(b[0]),
                v => return Err(unexpected(v)),
            };
            match n {
                0 => vec![0],
                1 => vec![1],
                _ => return Err(format!("the value {n} is not a boolean (0 or 1)")),
            }
        }
        Conv::Decimal { varint } => {
            let Value::Bytes(b) = &value else {
                return Err(unexpected(&value));
            };
            let text = std::str::from_utf8(b).map_err(|_| unexpected(&value))?;
            let (scale, unscaled) =
                parse_decimal(text).ok_or_else(|| format!("{text:?} is not a decimal"))?;
            if *varint {
                unscaled.to_signed_bytes_be()
            } else {
                encode_decimal(scale, &unscaled).to_vec()
            }
        }
        Conv::Float => match value {
            Value::Float(f) => f.to_be_bytes().to_vec(),
            v => return Err(unexpected(&v)),
        },
        Conv::Double => match value {
            Value::Float(f) => f64::from(f).to_be_bytes().to_vec(),
            Value::Double(f) => f.to_be_bytes().to_vec(),
            v => return Err(unexpected(&v)),
        },
        Conv::Text { ascii } => {
            let Value::Bytes(b) = value else {
                return Err(unexpected(&value));
            };
            if *ascii {
                if !b.is_ascii() {
                    return Err("the text is not ASCII, and the target column is ascii".into());
                }
            } else if std::str::from_utf8(&b).is_err() {
                return Err("the text is not valid UTF-8".into());
            }
            b
        }
        Conv::Blob => match value {
            Value::Bytes(b) => b,
            v => return Err(unexpected(&v)),
        },
        Conv::Timestamp => {
            let Some(at) = date_time(&value, options)? else {
                return Ok(None);
            };
            let micros = at.and_utc().timestamp_micros();
            if micros % 1000 != 0 && !options.truncate_timestamps {
                return Err(format!(
                    "{at} has microseconds, which a CQL timestamp (milliseconds) cannot hold; set source.truncateTimestamps: true to cut them"
                ));
            }
            micros.div_euclid(1000).to_be_bytes().to_vec()
        }
        Conv::Date => {
            let Some(at) = date_time(&value, options)? else {
                return Ok(None);
            };
            let days = at
                .date()
                .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid"))
                .num_days();
            let encoded = u32::try_from(days + (1i64 << 31)).expect("MySQL dates fit");
            encoded.to_be_bytes().to_vec()
        }
        Conv::Time => match value {
            Value::Time(negative, days, h, m, s, us) => {
                if negative || days > 0 {
                    return Err(format!(
                        "the TIME value {}{}{h:02}:{m:02}:{s:02} is outside a day, which a CQL time cannot hold",
                        if negative { "-" } else { "" },
                        if days > 0 {
                            format!("{days} days ")
                        } else {
                            String::new()
                        }
                    ));
                }
                let nanos = ((i64::from(h) * 60 + i64::from(m)) * 60 + i64::from(s))
                    * 1_000_000_000
                    + i64::from(us) * 1000;
                nanos.to_be_bytes().to_vec()
            }
            v => return Err(unexpected(&v)),
        },
        Conv::Uuid { time } => {
            let Value::Bytes(b) = value else {
                return Err(unexpected(&value));
            };
            let id = if b.len() == 16 {
                uuid::Uuid::from_slice(&b).expect("16 bytes")
            } else {
                let text = String::from_utf8_lossy(&b);
                uuid::Uuid::parse_str(text.trim())
                    .map_err(|e| format!("{text:?} is not a UUID: {e}"))?
            };
            if *time && id.get_version_num() != 1 {
                return Err(format!(
                    "{id} is not a version 1 (time-based) UUID, which a timeuuid must be"
                ));
            }
            id.as_bytes().to_vec()
        }
        Conv::Inet => {
            let Value::Bytes(b) = value else {
                return Err(unexpected(&value));
            };
            let text = String::from_utf8_lossy(&b);
            match text.trim().parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(a)) => a.octets().to_vec(),
                Ok(std::net::IpAddr::V6(a)) => a.octets().to_vec(),
                Err(_) => return Err(format!("{text:?} is not an IP address")),
            }
        }
        Conv::TextSet => {
            let Value::Bytes(b) = value else {
                return Err(unexpected(&value));
            };
            let text = std::str::from_utf8(&b)
                .map_err(|_| "the SET value is not valid UTF-8".to_string())?;
            if text.is_empty() {
                // The empty SET: CQL has no empty collection, only none.
                return Ok(None);
            }
            let mut members: Vec<&str> = text.split(',').collect();
            // CQL sets are ordered by their bytes: the target sorts them anyway, but the same
            // cell then reads back byte for byte.
            members.sort_unstable();
            let mut out = (members.len() as i32).to_be_bytes().to_vec();
            for m in members {
                out.extend_from_slice(&(m.len() as i32).to_be_bytes());
                out.extend_from_slice(m.as_bytes());
            }
            out
        }
    };
    Ok(Some(Bytes::from(out)))
}

/// A DATE, DATETIME or TIMESTAMP value; `None` for a zero date made null.
fn date_time(value: &Value, options: Options) -> Result<Option<NaiveDateTime>, String> {
    let Value::Date(y, mo, d, h, mi, s, us) = *value else {
        return Err(format!(
            "unexpected value {value:?} from the server for this column"
        ));
    };
    if y == 0 || mo == 0 || d == 0 {
        return match options.zero_dates {
            ZeroDates::Exception => Err(format!(
                "the zero date {y:04}-{mo:02}-{d:02} has no CQL form; set source.zeroDateTimeBehavior to CONVERT_TO_NULL or ROUND to write it as null or 0001-01-01"
            )),
            ZeroDates::ConvertToNull => Ok(None),
            ZeroDates::Round => Ok(Some(
                NaiveDate::from_ymd_opt(1, 1, 1)
                    .expect("valid")
                    .and_hms_opt(0, 0, 0)
                    .expect("valid"),
            )),
        };
    }
    NaiveDate::from_ymd_opt(i32::from(y), u32::from(mo), u32::from(d))
        .and_then(|date| date.and_hms_micro_opt(u32::from(h), u32::from(mi), u32::from(s), us))
        .map(Some)
        .ok_or_else(|| {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06} is not a valid date")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(data_type: &str, column_type: &str) -> SourceColumn {
        SourceColumn {
            name: "c".into(),
            data_type: data_type.into(),
            column_type: column_type.into(),
            scale: None,
            fractional_digits: None,
            generated: false,
        }
    }

    const OPTS: Options = Options {
        zero_dates: ZeroDates::Exception,
        truncate_timestamps: false,
    };

    fn n(t: NativeType) -> ColumnType<'static> {
        ColumnType::Native(t)
    }

    #[test]
    fn unsigned_bigint_fits_varint_and_is_refused_by_bigint_when_too_big() {
        let c = col("bigint", "bigint(20) unsigned");
        let big = Value::UInt(u64::MAX);
        let v = plan(&c, &n(NativeType::Varint)).unwrap();
        assert_eq!(
            convert(&v, big.clone(), OPTS).unwrap().unwrap().as_ref(),
            BigInt::from(u64::MAX).to_signed_bytes_be()
        );
        let b = plan(&c, &n(NativeType::BigInt)).unwrap();
        let e = convert(&b, big, OPTS).unwrap_err();
        assert!(e.contains("18446744073709551615"), "{e}");
        assert_eq!(
            convert(&b, Value::UInt(7), OPTS).unwrap().unwrap().as_ref(),
            7i64.to_be_bytes()
        );
    }

    #[test]
    fn decimals_keep_their_scale() {
        let mut c = col("decimal", "decimal(10,4)");
        c.scale = Some(4);
        let d = plan(&c, &n(NativeType::Decimal)).unwrap();
        let cell = convert(&d, Value::Bytes(b"-12.3400".to_vec()), OPTS)
            .unwrap()
            .unwrap();
        assert_eq!(
            cell.as_ref(),
            encode_decimal(4, &BigInt::from(-123400)).as_ref()
        );
        assert!(plan(&c, &n(NativeType::Varint)).is_err());
        assert!(plan(&c, &n(NativeType::Double)).is_err(), "lossy");
    }

    #[test]
    fn zero_dates_follow_the_behavior() {
        let c = col("datetime", "datetime");
        let t = plan(&c, &n(NativeType::Timestamp)).unwrap();
        let zero = Value::Date(0, 0, 0, 0, 0, 0, 0);
        assert!(
            convert(&t, zero.clone(), OPTS)
                .unwrap_err()
                .contains("zero date")
        );
        let null = Options {
            zero_dates: ZeroDates::ConvertToNull,
            ..OPTS
        };
        assert_eq!(convert(&t, zero.clone(), null).unwrap(), None);
        let round = Options {
            zero_dates: ZeroDates::Round,
            ..OPTS
        };
        let cell = convert(&t, zero, round).unwrap().unwrap();
        assert_eq!(
            i64::from_be_bytes(cell.as_ref().try_into().unwrap()),
            -62135596800000
        );
    }

    #[test]
    fn microseconds_are_refused_unless_truncated() {
        let c = col("datetime", "datetime(6)");
        let t = plan(&c, &n(NativeType::Timestamp)).unwrap();
        let v = Value::Date(2024, 1, 2, 3, 4, 5, 123_456);
        assert!(
            convert(&t, v.clone(), OPTS)
                .unwrap_err()
                .contains("microseconds")
        );
        let cut = Options {
            truncate_timestamps: true,
            ..OPTS
        };
        let cell = convert(&t, v, cut).unwrap().unwrap();
        assert_eq!(
            i64::from_be_bytes(cell.as_ref().try_into().unwrap()),
            1_704_164_645_123
        );
    }

    #[test]
    fn times_beyond_a_day_and_impossible_pairs_are_refused() {
        let c = col("time", "time");
        let t = plan(&c, &n(NativeType::Time)).unwrap();
        assert!(convert(&t, Value::Time(false, 1, 1, 0, 0, 0), OPTS).is_err());
        assert!(convert(&t, Value::Time(true, 0, 1, 0, 0, 0), OPTS).is_err());
        let ok = convert(&t, Value::Time(false, 0, 23, 59, 59, 999_999), OPTS)
            .unwrap()
            .unwrap();
        assert_eq!(
            i64::from_be_bytes(ok.as_ref().try_into().unwrap()),
            86_399_999_999_000
        );
        let e = plan(&col("varbinary", "varbinary(10)"), &n(NativeType::Text)).unwrap_err();
        assert!(e.contains("varbinary(10)") && e.contains("text"), "{e}");
        assert!(plan(&col("double", "double"), &n(NativeType::Float)).is_err());
        assert!(plan(&col("int", "int(11)"), &n(NativeType::Boolean)).is_err());
    }

    #[test]
    fn sets_bits_and_uuids() {
        let s = plan(
            &col("set", "set('a','b','c')"),
            &ColumnType::Collection {
                frozen: false,
                typ: CollectionType::Set(Box::new(n(NativeType::Text))),
            },
        )
        .unwrap();
        let cell = convert(&s, Value::Bytes(b"c,a".to_vec()), OPTS)
            .unwrap()
            .unwrap();
        assert_eq!(cell.as_ref(), b"\0\0\0\x02\0\0\0\x01a\0\0\0\x01c");
        assert_eq!(convert(&s, Value::Bytes(Vec::new()), OPTS).unwrap(), None);
        let bit = plan(&col("bit", "bit(12)"), &n(NativeType::Int)).unwrap();
        let cell = convert(&bit, Value::Bytes(vec![0x0f, 0xff]), OPTS)
            .unwrap()
            .unwrap();
        assert_eq!(cell.as_ref(), 4095i32.to_be_bytes());
        let u = plan(&col("char", "char(36)"), &n(NativeType::Timeuuid)).unwrap();
        assert!(
            convert(
                &u,
                Value::Bytes(b"0b2fae6c-3f7c-4b4e-9a4f-7f1f1f1f1f1f".to_vec()),
                OPTS
            )
            .is_err()
        );
    }
}
