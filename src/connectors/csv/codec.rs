//! CQL values as text and JSON, in the forms DataStax Bulk Loader (DSBulk) writes (see
//! `docs/design/csv-json-formats.md`), and read back from those forms and from `cqlsh COPY`'s.
//!
//! Values are CQL's serialized bytes of one non-null cell; null is the caller's (a CSV field
//! left empty, a JSON `null`). Every value written reads back to the same bytes, with these
//! exceptions, all of which keep the value Cassandra sees: a NaN with a payload other than
//! Java's reads back as the canonical NaN; varints and decimals with redundant sign bytes,
//! durations with over-long vints and booleans other than 0 and 1 read back in their shortest
//! form; a tuple or UDT with fewer fields than its type reads back with the missing fields
//! written as nulls.
//!
//! Composite values (collections, tuples, UDTs, vectors) are JSON. In a CSV cell varints,
//! decimals and floats are exact JSON number literals, as DSBulk writes them; in a
//! [`serde_json::Value`] varints and decimals are strings, since serde_json (without
//! `arbitrary_precision`) keeps numbers as `i64`/`u64`/`f64` only.

use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType};
use serde_json::Value;

use crate::connectors::cql::codec;
use crate::connectors::cql::schema::type_name;

mod cqlsh;
mod read;
mod temporal;
mod value;
mod write;

pub use cqlsh::to_cqlsh_text;
pub use temporal::{Temporal, TemporalKeys};

#[cfg(test)]
mod tests;

use read::*;
use value::*;
use write::*;

/// How blobs are written (DSBulk's `codec.binary`); both forms are read whatever it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Binary {
    /// Base64 with padding (`AQI=`), DSBulk's default.
    #[default]
    Base64,
    /// `0x` and lowercase hex digits (`0x0102`), as cqlsh writes blobs.
    Hex,
}

/// How values are written beyond DSBulk's defaults, and read: blobs (`binary`) and the
/// date, time and timestamp forms (`timestamp`, `date`, `time`, `timeZone`, `unit`, `epoch`).
#[derive(Debug, Clone, Default)]
pub struct Forms {
    pub binary: Binary,
    pub temporal: Temporal,
}

/// How deep JSON read from input may nest: enough for any CQL type, and a bound on recursion.
const MAX_DEPTH: usize = 64;
const NANOS_PER_DAY: i64 = 86_400_000_000_000;
/// `date` is days since the epoch plus 2^31, so that it is unsigned.
const DATE_EPOCH: i64 = 1 << 31;

/// The text of one CSV cell in DSBulk's default form, except booleans (`true`/`false` rather
/// than `1`/`0`, which cqlsh would load as false) and zero durations (`0s` rather than empty,
/// which DSBulk reloads as null); blobs in the `binary` form, inside collections too.
pub fn to_text(t: &ColumnType<'_>, v: &[u8], forms: &Forms) -> Result<String, String> {
    match t {
        ColumnType::Native(n) => native_text(t, n, v, forms),
        // DSBulk writes and splits vectors with `, `.
        ColumnType::Vector { typ, dimensions } => {
            let items = codec::vector_items(v, typ, *dimensions).ok_or_else(|| bad(t, v))?;
            let mut s = String::from("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                render(&out(typ, item, forms)?, &mut s);
            }
            s.push(']');
            Ok(s)
        }
        _ => {
            let mut s = String::new();
            render(&out(t, v, forms)?, &mut s);
            Ok(s)
        }
    }
}

/// A value as a JSON value in DSBulk's JSON forms: numbers and booleans as JSON's, varints
/// and decimals as strings (see the module's comment), NaN and infinities as the strings
/// `NaN`, `Infinity`, `-Infinity`, collections, tuples and vectors as arrays, maps and UDTs as
/// objects, anything else as a string of its text form.
pub fn to_json(t: &ColumnType<'_>, v: &[u8], forms: &Forms) -> Result<Value, String> {
    Ok(json_value(out(t, v, forms)?))
}

/// The JSON text of a value, as a field of DSBulk's JSON files holds it: numbers (varints and
/// decimals with all their digits) and booleans as JSON's, NaN and infinities and every other
/// scalar as a JSON string of its text form, composites as in [`to_text`].
pub fn to_json_text(t: &ColumnType<'_>, v: &[u8], forms: &Forms) -> Result<String, String> {
    let mut s = String::new();
    render(&out(t, v, forms)?, &mut s);
    Ok(s)
}

/// Parses the text of a CSV cell into the serialized bytes of `t`: DSBulk's forms and cqlsh
/// COPY's (see `docs/design/csv-json-formats.md`). Text and ascii are taken as they are; other
/// types are trimmed of whitespace first. An empty string is an error for every type but
/// text, ascii and blob (null or empty is the caller's decision).
pub fn from_text(t: &ColumnType<'_>, s: &str, forms: &Forms) -> Result<Vec<u8>, String> {
    match t {
        ColumnType::Native(n) => native_from_text(n, s, forms),
        _ => {
            let trimmed = s.trim();
            if trimmed.is_empty() {
                return Err(format!("expected a {}, got an empty string", type_name(t)));
            }
            // DSBulk adds the brackets of a list when they are missing (`1,2`).
            let wrapped;
            let text = match t {
                ColumnType::Collection {
                    typ: CollectionType::List(_) | CollectionType::Set(_),
                    ..
                }
                | ColumnType::Vector { .. }
                    if !trimmed.starts_with(['[', '{', '(']) =>
                {
                    wrapped = format!("[{trimmed}]");
                    &wrapped
                }
                _ => trimmed,
            };
            let node = parse_node(text, 0)?;
            encode(t, &node, forms)?.ok_or_else(|| format!("expected a {}, got null", type_name(t)))
        }
    }
}

/// Parses a JSON value into the serialized bytes of `t`: the forms [`to_json`] writes, numbers
/// as JSON numbers or strings, and composite values also as strings of their CSV text.
pub fn from_json(t: &ColumnType<'_>, v: &Value, forms: &Forms) -> Result<Vec<u8>, String> {
    let node = node_of_json(v, 0)?;
    encode(t, &node, forms)?.ok_or_else(|| format!("expected a {}, got null", type_name(t)))
}

/// Parses the text of one JSON value (a field of a JSON file, as `serde_json::value::RawValue`
/// gives it) into the serialized bytes of `t`, as [`from_json`] but with numbers read from
/// their digits: serde_json (without `float_roundtrip`) may parse a double 1 ulp off, and
/// keeps no integer past 64 bits.
pub fn from_json_text(t: &ColumnType<'_>, s: &str, forms: &Forms) -> Result<Vec<u8>, String> {
    let node = parse_node(s.trim(), 0)?;
    encode(t, &node, forms)?.ok_or_else(|| format!("expected a {}, got null", type_name(t)))
}

/// A writetime (microseconds since the epoch) as DSBulk writes it: a UTC timestamp with its
/// microseconds, `1970-01-01T00:00:00.001111Z` (trailing zeros of the fraction cut).
/// In another timestamp form, the writetime written in it (see
/// [`Temporal::holds_microseconds`]).
pub fn writetime_text(micros: i64, forms: &Forms) -> Result<String, String> {
    if let Some(text) = forms.temporal.writetime_text(micros)? {
        return Ok(text);
    }
    let nanos = micros.rem_euclid(1_000_000) as u32 * 1_000;
    Ok(instant_text(micros.div_euclid(1_000_000), nanos))
}

/// Reads a writetime back: a timestamp in the forms [`from_text`] reads (a fraction of up to 9
/// digits, but none beyond microseconds; no epoch milliseconds), or a plain integer of
/// microseconds.
pub fn parse_writetime(s: &str, forms: &Forms) -> Result<i64, String> {
    if let Some(micros) = forms.temporal.parse_writetime(s)? {
        return Ok(micros);
    }
    let t = s.trim();
    let wanted = || {
        format!(
            "expected a writetime such as 1970-01-01T00:00:00.001111Z or 1111 (microseconds), got {}",
            echo(s)
        )
    };
    if is_plain_integer(t) {
        return t.parse().map_err(|_| wanted());
    }
    let ns = parse_instant_nanos(t).ok_or_else(wanted)?;
    if ns % 1_000 != 0 {
        return Err(format!(
            "{} has digits beyond microseconds, which a writetime cannot hold",
            echo(s)
        ));
    }
    i64::try_from(ns / 1_000).map_err(|_| format!("{} is out of range for a writetime", echo(s)))
}

// ---- errors ----

/// `s` quoted for an error message, cut at 64 characters.
fn echo(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

fn native_name(n: &NativeType) -> String {
    format!("{n:?}").to_lowercase()
}

fn expected(n: &NativeType, s: &str) -> String {
    let name = native_name(n);
    let article = if name.starts_with(['a', 'e', 'i', 'o']) {
        "an"
    } else {
        "a"
    };
    let example = match n {
        NativeType::Boolean => "true",
        NativeType::Blob => "AQI= or 0x0102",
        NativeType::Date => "2021-01-11",
        NativeType::Decimal => "12.340",
        NativeType::Float | NativeType::Double => "12.34",
        NativeType::Duration => "1mo2d34ns",
        NativeType::Inet => "192.168.0.1 or ::1",
        NativeType::Time => "11:01:01.5",
        NativeType::Timestamp => "2021-01-11T11:01:01Z",
        NativeType::Timeuuid => "a8098c1a-f86e-11da-bd1a-00112444be1e",
        NativeType::Uuid => "123e4567-e89b-42d3-a456-556642440000",
        _ => "-12",
    };
    format!(
        "expected {article} {name} such as {example}, got {}",
        echo(s)
    )
}

fn out_of_range(n: &NativeType, s: &str) -> String {
    format!("{} is out of range for a {}", echo(s), native_name(n))
}

fn bad(t: &ColumnType<'_>, v: &[u8]) -> String {
    format!(
        "{} bytes that are not a valid CQL {} value",
        v.len(),
        type_name(t)
    )
}

// ---- the calendar ----

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian, for any `i64` days that
/// a CQL date or timestamp holds (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
