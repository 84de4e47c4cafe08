//! CQL values to text and JSON.

use super::*;

use std::fmt::Write as _;

use base64::Engine as _;
use num_bigint::BigInt;

use crate::connectors::parquet::encode::decimal_text as plain_decimal_text;

/// A value on its way to JSON text or a [`Value`].
pub(super) enum Out {
    Null,
    Bool(bool),
    Int(i64),
    F32(f32),
    F64(f64),
    /// An exact decimal literal (varint, decimal).
    Big(String),
    Str(String),
    Arr(Vec<Out>),
    Obj(Vec<(String, Out)>),
}

pub(super) fn out(t: &ColumnType<'_>, v: &[u8], forms: &Forms) -> Result<Out, String> {
    let fixed = |n: usize| {
        if v.len() == n {
            Ok(())
        } else if v.is_empty() {
            Err(empty(t))
        } else {
            Err(bad(t, v))
        }
    };
    Ok(match t {
        ColumnType::Native(n) => match n {
            NativeType::Boolean => {
                fixed(1)?;
                Out::Bool(v[0] != 0)
            }
            NativeType::TinyInt
            | NativeType::SmallInt
            | NativeType::Int
            | NativeType::BigInt
            | NativeType::Counter => {
                fixed(int_width(n))?;
                Out::Int(codec::integer(v).ok_or_else(|| bad(t, v))?)
            }
            NativeType::Float => {
                fixed(4)?;
                Out::F32(f32::from_be_bytes(v.try_into().map_err(|_| bad(t, v))?))
            }
            NativeType::Double => {
                fixed(8)?;
                Out::F64(f64::from_be_bytes(v.try_into().map_err(|_| bad(t, v))?))
            }
            NativeType::Varint | NativeType::Decimal => Out::Big(native_text(t, n, v, forms)?),
            _ => Out::Str(native_text(t, n, v, forms)?),
        },
        ColumnType::Collection { typ, .. } => {
            if v.is_empty() {
                return Err(empty(t));
            }
            // A negative count would read as an empty collection.
            if v.len() < 4 || v[0] & 0x80 != 0 {
                return Err(bad(t, v));
            }
            match typ {
                CollectionType::List(e) | CollectionType::Set(e) => Out::Arr(
                    codec::collection_items(v, 1)
                        .ok_or_else(|| bad(t, v))?
                        .into_iter()
                        .map(|item| item.map_or(Ok(Out::Null), |b| out(e, b, forms)))
                        .collect::<Result<_, _>>()?,
                ),
                CollectionType::Map(k, e) => {
                    let items = codec::collection_items(v, 2).ok_or_else(|| bad(t, v))?;
                    let mut entries = Vec::with_capacity(items.len() / 2);
                    let mut seen = std::collections::HashSet::new();
                    for pair in items.chunks(2) {
                        let key = pair[0].ok_or_else(|| {
                            format!(
                                "a {} value with a null key, which JSON cannot carry",
                                type_name(t)
                            )
                        })?;
                        let key = to_text(k, key, forms)?;
                        if !seen.insert(key.clone()) {
                            return Err(format!(
                                "a {} value with two keys written {}, which a JSON object cannot carry",
                                type_name(t),
                                echo(&key)
                            ));
                        }
                        let value = pair[1].map_or(Ok(Out::Null), |b| out(e, b, forms))?;
                        entries.push((key, value));
                    }
                    Out::Obj(entries)
                }
                _ => return Err(format!("the CQL type {} has no text form", type_name(t))),
            }
        }
        ColumnType::Vector { typ, dimensions } => Out::Arr(
            codec::vector_items(v, typ, *dimensions)
                .ok_or_else(|| if v.is_empty() { empty(t) } else { bad(t, v) })?
                .into_iter()
                .map(|b| out(typ, b, forms))
                .collect::<Result<_, _>>()?,
        ),
        ColumnType::Tuple(types) => {
            let fields = composite_fields(t, v, types.len())?;
            Out::Arr(
                types
                    .iter()
                    .enumerate()
                    .map(|(i, ft)| {
                        fields
                            .get(i)
                            .copied()
                            .flatten()
                            .map_or(Ok(Out::Null), |b| out(ft, b, forms))
                    })
                    .collect::<Result<_, _>>()?,
            )
        }
        ColumnType::UserDefinedType { definition, .. } => {
            let types = &definition.field_types;
            let fields = composite_fields(t, v, types.len())?;
            Out::Obj(
                types
                    .iter()
                    .enumerate()
                    .map(|(i, (name, ft))| {
                        let value = fields
                            .get(i)
                            .copied()
                            .flatten()
                            .map_or(Ok(Out::Null), |b| out(ft, b, forms))?;
                        Ok((name.to_string(), value))
                    })
                    .collect::<Result<_, String>>()?,
            )
        }
        _ => return Err(format!("the CQL type {} has no text form", type_name(t))),
    })
}

pub(super) fn composite_fields<'a>(
    t: &ColumnType<'_>,
    v: &'a [u8],
    arity: usize,
) -> Result<Vec<Option<&'a [u8]>>, String> {
    let fields = codec::fields(v).ok_or_else(|| bad(t, v))?;
    if fields.len() > arity {
        return Err(bad(t, v));
    }
    Ok(fields)
}

pub(super) fn empty(t: &ColumnType<'_>) -> String {
    format!(
        "an empty {} value (not null), which CSV cannot carry",
        type_name(t)
    )
}

pub(super) fn int_width(n: &NativeType) -> usize {
    match n {
        NativeType::TinyInt => 1,
        NativeType::SmallInt => 2,
        NativeType::Int => 4,
        _ => 8,
    }
}

/// The text of a native value, in the form of a CSV cell; blobs in the `binary` form.
pub(super) fn native_text(
    t: &ColumnType<'_>,
    n: &NativeType,
    v: &[u8],
    forms: &Forms,
) -> Result<String, String> {
    let text_like = matches!(n, NativeType::Ascii | NativeType::Text | NativeType::Blob);
    if v.is_empty() && !text_like {
        return Err(empty(t));
    }
    let sized = |len: usize| -> Result<&[u8], String> {
        if v.len() == len {
            Ok(v)
        } else {
            Err(bad(t, v))
        }
    };
    Ok(match n {
        NativeType::Ascii | NativeType::Text => std::str::from_utf8(v)
            .map_err(|_| format!("{} value that is not UTF-8", bad(t, v)))?
            .to_string(),
        NativeType::Blob => {
            let hex = || {
                let mut hex = String::with_capacity(2 + 2 * v.len());
                hex.push_str("0x");
                for b in v {
                    let _ = write!(hex, "{b:02x}");
                }
                hex
            };
            match forms.binary {
                Binary::Hex => hex(),
                Binary::Base64 => {
                    let b64 = base64::engine::general_purpose::STANDARD.encode(v);
                    // Readers (DSBulk too) try `0x` hex first: such base64 is written as hex
                    // instead.
                    if b64.starts_with("0x") || b64.starts_with("0X") {
                        hex()
                    } else {
                        b64
                    }
                }
            }
        }
        NativeType::Boolean => if sized(1)?[0] != 0 { "true" } else { "false" }.to_string(),
        NativeType::TinyInt
        | NativeType::SmallInt
        | NativeType::Int
        | NativeType::BigInt
        | NativeType::Counter => codec::integer(sized(int_width(n))?)
            .ok_or_else(|| bad(t, v))?
            .to_string(),
        NativeType::Varint => BigInt::from_signed_bytes_be(v).to_string(),
        NativeType::Decimal => {
            if v.len() < 5 {
                return Err(bad(t, v));
            }
            let (scale, unscaled) = codec::decimal(v).ok_or_else(|| bad(t, v))?;
            decimal_text(scale, &unscaled)
        }
        NativeType::Float => {
            let x = f32::from_be_bytes(sized(4)?.try_into().map_err(|_| bad(t, v))?);
            float_text(f64::from(x), &format!("{:e}", x.abs()))
        }
        NativeType::Double => {
            let x = f64::from_be_bytes(sized(8)?.try_into().map_err(|_| bad(t, v))?);
            float_text(x, &format!("{:e}", x.abs()))
        }
        NativeType::Uuid | NativeType::Timeuuid => uuid::Uuid::from_slice(sized(16)?)
            .map_err(|_| bad(t, v))?
            .hyphenated()
            .to_string(),
        NativeType::Inet => match v.len() {
            4 => {
                std::net::Ipv4Addr::from(<[u8; 4]>::try_from(v).map_err(|_| bad(t, v))?).to_string()
            }
            16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(v).map_err(|_| bad(t, v))?)
                .to_string(),
            _ => return Err(bad(t, v)),
        },
        NativeType::Date => {
            let raw = u32::from_be_bytes(sized(4)?.try_into().map_err(|_| bad(t, v))?);
            let days = i64::from(raw) - DATE_EPOCH;
            match forms.temporal.date_text(days)? {
                Some(text) => text,
                None => date_text(days),
            }
        }
        NativeType::Time => {
            let ns = i64::from_be_bytes(sized(8)?.try_into().map_err(|_| bad(t, v))?);
            if !(0..NANOS_PER_DAY).contains(&ns) {
                return Err(bad(t, v));
            }
            match forms.temporal.time_text(ns)? {
                Some(text) => text,
                None => time_text(ns),
            }
        }
        NativeType::Timestamp => {
            let ms = i64::from_be_bytes(sized(8)?.try_into().map_err(|_| bad(t, v))?);
            if let Some(text) = forms.temporal.timestamp_text(ms)? {
                return Ok(text);
            }
            instant_text(ms.div_euclid(1000), ms.rem_euclid(1000) as u32 * 1_000_000)
        }
        NativeType::Duration => {
            // Three vints and nothing after them.
            let mut used = 0;
            for _ in 0..3 {
                let (_, n) = codec::read_unsigned_vint(&v[used..]).ok_or_else(|| bad(t, v))?;
                used += n;
            }
            if used != v.len() {
                return Err(bad(t, v));
            }
            let [months, days, nanos] = codec::duration(v).ok_or_else(|| bad(t, v))?;
            duration_text(months, days, nanos)?
        }
        _ => return Err(format!("the CQL type {} has no text form", type_name(t))),
    })
}

/// A decimal as exact text: `12.340`, `7E+3`; `1E-20` rather than twenty zeros (so that no
/// scale, up to 2^31 - 1, makes a long text).
pub(super) fn decimal_text(scale: i32, unscaled: &BigInt) -> String {
    let digits = unscaled.magnitude().to_string().len();
    if scale > 0 && scale as usize > digits + 6 {
        return format!("{unscaled}E-{scale}");
    }
    plain_decimal_text(scale, unscaled)
}

/// A float or double as Java's `toString` writes it (`1.0`, `0.001`, `1.0E7`, `1.5E-7`), from
/// the shortest digits that read back to the same value (`sci`: Rust's `{:e}` of its absolute
/// value).
pub(super) fn float_text(x: f64, sci: &str) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut s = String::new();
    if x.is_sign_negative() {
        s.push('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                s.push_str(&digits);
                s.push_str(&"0".repeat(int_len - digits.len()));
                s.push_str(".0");
            } else {
                s.push_str(&digits[..int_len]);
                s.push('.');
                s.push_str(&digits[int_len..]);
            }
        } else {
            s.push_str("0.");
            s.push_str(&"0".repeat((-exp - 1) as usize));
            s.push_str(&digits);
        }
    } else {
        s.push_str(&digits[..1]);
        s.push('.');
        s.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        let _ = write!(s, "E{exp}");
    }
    s
}

/// `.5`, `.000001` (trailing zeros cut), or nothing for zero.
pub(super) fn fraction(nanos: u32) -> String {
    if nanos == 0 {
        return String::new();
    }
    let s = format!(".{nanos:09}");
    s.trim_end_matches('0').to_string()
}

/// A time of day (nanoseconds since midnight), `01:02:03.5`: seconds always, the fraction's
/// trailing zeros cut.
pub(super) fn time_text(ns: i64) -> String {
    let secs = ns / 1_000_000_000;
    format!(
        "{:02}:{:02}:{:02}{}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        fraction((ns % 1_000_000_000) as u32)
    )
}

/// A year as ISO 8601 writes it: four digits, a `+` past 9999, a `-` before year 0.
pub(super) fn year_text(y: i64) -> String {
    if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y > 9999 {
        format!("+{y}")
    } else {
        format!("-{:04}", y.unsigned_abs())
    }
}

pub(super) fn date_text(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{}-{m:02}-{d:02}", year_text(y))
}

/// A UTC instant with `Z`.
pub(super) fn instant_text(secs: i64, nanos: u32) -> String {
    let sod = secs.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}{}Z",
        date_text(secs.div_euclid(86_400)),
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        fraction(nanos)
    )
}

/// `1y2mo3d4h5m6s7ms8us9ns`, `-` when negative, `0s` for zero.
pub(super) fn duration_text(months: i64, days: i64, nanos: i64) -> Result<String, String> {
    let all = [months, days, nanos];
    let negative = all.iter().any(|p| *p < 0);
    if negative && all.iter().any(|p| *p > 0) {
        return Err(format!(
            "a duration of {months} months, {days} days and {nanos} ns, whose signs differ, which no duration text can carry"
        ));
    }
    if all == [0, 0, 0] {
        return Ok("0s".into());
    }
    let (m, d, n) = (
        months.unsigned_abs(),
        days.unsigned_abs(),
        nanos.unsigned_abs(),
    );
    let mut s = String::from(if negative { "-" } else { "" });
    for (v, unit) in [
        (m / 12, "y"),
        (m % 12, "mo"),
        (d, "d"),
        (n / 3_600_000_000_000, "h"),
        (n / 60_000_000_000 % 60, "m"),
        (n / 1_000_000_000 % 60, "s"),
        (n / 1_000_000 % 1000, "ms"),
        (n / 1000 % 1000, "us"),
        (n % 1000, "ns"),
    ] {
        if v != 0 {
            let _ = write!(s, "{v}{unit}");
        }
    }
    Ok(s)
}

/// JSON text of `o`, compact.
pub(super) fn render(o: &Out, s: &mut String) {
    match o {
        Out::Null => s.push_str("null"),
        Out::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        Out::Int(i) => {
            let _ = write!(s, "{i}");
        }
        Out::F32(x) => render_float(f64::from(*x), &format!("{:e}", x.abs()), s),
        Out::F64(x) => render_float(*x, &format!("{:e}", x.abs()), s),
        Out::Big(b) => s.push_str(b),
        Out::Str(t) => push_json_string(t, s),
        Out::Arr(items) => {
            s.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                render(item, s);
            }
            s.push(']');
        }
        Out::Obj(entries) => {
            s.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                push_json_string(k, s);
                s.push(':');
                render(v, s);
            }
            s.push('}');
        }
    }
}

/// Java's digits are a JSON number; NaN and the infinities are not, so they are strings.
pub(super) fn render_float(x: f64, sci: &str, s: &mut String) {
    let text = float_text(x, sci);
    if x.is_finite() {
        s.push_str(&text);
    } else {
        push_json_string(&text, s);
    }
}

pub(super) fn push_json_string(t: &str, s: &mut String) {
    s.push('"');
    for c in t.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

pub(super) fn json_value(o: Out) -> Value {
    match o {
        Out::Null => Value::Null,
        Out::Bool(b) => Value::Bool(b),
        Out::Int(i) => Value::from(i),
        Out::F32(x) if x.is_finite() => f32_number(x),
        Out::F64(x) if x.is_finite() => {
            serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
        }
        Out::F32(x) => Value::String(float_text(f64::from(x), "")),
        Out::F64(x) => Value::String(float_text(x, "")),
        Out::Big(t) | Out::Str(t) => Value::String(t),
        Out::Arr(items) => Value::Array(items.into_iter().map(json_value).collect()),
        Out::Obj(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k, json_value(v)))
                .collect(),
        ),
    }
}

/// A JSON number (an `f64`) whose text reads back as `x`: the `f64` of `x`'s shortest digits
/// (`0.1`, not `0.10000000149011612`) when its text does, else `x`'s exact `f64`, whose text
/// always does.
pub(super) fn f32_number(x: f32) -> Value {
    let shortest = format!("{x:e}").parse::<f64>().ok();
    if let Some(n) = shortest.and_then(serde_json::Number::from_f64)
        && n.to_string().parse::<f32>().map(f32::to_bits) == Ok(x.to_bits())
    {
        return Value::Number(n);
    }
    serde_json::Number::from_f64(f64::from(x)).map_or(Value::Null, Value::Number)
}
