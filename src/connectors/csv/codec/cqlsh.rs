//! CQL values in the forms `cqlsh COPY FROM` reads back exactly (`style: cqlsh` on an
//! unload): cqlsh's own `COPY TO` forms, without its losses (all digits of floats, every
//! microsecond cqlsh's timestamp format holds, no doubled backslashes).
//!
//! What `COPY FROM` (cqlsh 6, `copyutil.py`) needs, and why each form is what it is:
//! - a timestamp as milliseconds since the epoch, which it reads as a number, exactly. Its
//!   own text form (`%Y-%m-%d %H:%M:%S.%f%z`) goes through a float (`timestamp() * 1000`,
//!   then truncated): 1,887 of 300,000 random timestamps of years 1 to 9999 came back a
//!   millisecond early when tried; and an ISO `…T…Z` text matches only the date part of its
//!   fallback pattern, loading as midnight. Dates outside years 1 to 9999 as days since the
//!   epoch (what `COPY TO` writes for them), the others as `2024-02-29`;
//! - booleans `True`/`False` (its default `BOOLSTYLE`), blobs `0x…`;
//! - collections, tuples and UDTs in CQL literal forms (`[1,2]`, `{'a':1}`, `(1,'x')`,
//!   `{f:1}`): it splits them on `,` and `:` outside single quotes and brackets, so text-like
//!   elements are single-quoted with `'` doubled, and nothing is put between items (a space
//!   would be part of the next item); a null field of a UDT is left out, which it reads as
//!   null. A tuple with a null field fails: COPY FROM has no form for one.

use super::*;

/// cqlsh's blobs are `0x` hex; its dates, times and timestamps are written here.
static HEX: std::sync::LazyLock<Forms> = std::sync::LazyLock::new(|| Forms {
    binary: Binary::Hex,
    temporal: Temporal::default(),
});

/// A value's text in the forms `cqlsh COPY FROM` reads back to the same value.
pub fn to_cqlsh_text(t: &ColumnType<'_>, v: &[u8]) -> Result<String, String> {
    let mut s = String::new();
    write(t, v, false, &mut s)?;
    Ok(s)
}

fn write(t: &ColumnType<'_>, v: &[u8], nested: bool, s: &mut String) -> Result<(), String> {
    match t {
        ColumnType::Native(n) => native(t, n, v, nested, s),
        ColumnType::Collection { typ, .. } => {
            if v.is_empty() {
                return Err(empty(t));
            }
            match typ {
                CollectionType::List(e) | CollectionType::Set(e) => {
                    let items = codec::collection_items(v, 1).ok_or_else(|| bad(t, v))?;
                    let (open, close) = if matches!(typ, CollectionType::Set(_)) {
                        ('{', '}')
                    } else {
                        ('[', ']')
                    };
                    s.push(open);
                    for (i, item) in items.into_iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        let item = item.ok_or_else(|| null_element(t))?;
                        write(e, item, true, s)?;
                    }
                    s.push(close);
                    Ok(())
                }
                CollectionType::Map(k, e) => {
                    let items = codec::collection_items(v, 2).ok_or_else(|| bad(t, v))?;
                    s.push('{');
                    for (i, pair) in items.chunks(2).enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        write(k, pair[0].ok_or_else(|| null_element(t))?, true, s)?;
                        s.push(':');
                        write(e, pair[1].ok_or_else(|| null_element(t))?, true, s)?;
                    }
                    s.push('}');
                    Ok(())
                }
                _ => Err(format!("the CQL type {} has no text form", type_name(t))),
            }
        }
        ColumnType::Vector { typ, dimensions } => {
            let items = codec::vector_items(v, typ, *dimensions)
                .ok_or_else(|| if v.is_empty() { empty(t) } else { bad(t, v) })?;
            s.push('[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                write(typ, item, true, s)?;
            }
            s.push(']');
            Ok(())
        }
        ColumnType::Tuple(types) => {
            let fields = composite_fields(t, v, types.len())?;
            s.push('(');
            for (i, ft) in types.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                let b = fields.get(i).copied().flatten().ok_or_else(|| {
                    format!(
                        "a {} value with a null field, which cqlsh COPY FROM cannot read back (it reads an empty field of a tuple as an empty string, or refuses it); unload in DSBulk's style",
                        type_name(t)
                    )
                })?;
                write(ft, b, true, s)?;
            }
            s.push(')');
            Ok(())
        }
        ColumnType::UserDefinedType { definition, .. } => {
            let types = &definition.field_types;
            let fields = composite_fields(t, v, types.len())?;
            s.push('{');
            let mut first = true;
            for (i, (name, ft)) in types.iter().enumerate() {
                // A null field is left out, which COPY FROM reads as null (`name:` with
                // nothing after it fails its split).
                let Some(b) = fields.get(i).copied().flatten() else {
                    continue;
                };
                if !first {
                    s.push(',');
                }
                first = false;
                s.push_str(name);
                s.push(':');
                write(ft, b, true, s)?;
            }
            s.push('}');
            Ok(())
        }
        _ => Err(format!("the CQL type {} has no text form", type_name(t))),
    }
}

fn native(
    t: &ColumnType<'_>,
    n: &NativeType,
    v: &[u8],
    nested: bool,
    s: &mut String,
) -> Result<(), String> {
    let text = match n {
        NativeType::Boolean => {
            if v.len() != 1 {
                return Err(if v.is_empty() { empty(t) } else { bad(t, v) });
            }
            (if v[0] != 0 { "True" } else { "False" }).to_owned()
        }
        NativeType::Timestamp => {
            let ms = i64::from_be_bytes(v.try_into().map_err(|_| bad(t, v))?);
            // No quotes: a number, as COPY FROM reads it.
            s.push_str(&ms.to_string());
            return Ok(());
        }
        NativeType::Date => {
            let days = i64::from(u32::from_be_bytes(v.try_into().map_err(|_| bad(t, v))?))
                - DATE_EPOCH;
            if !(1..=9999).contains(&civil_year(days)) {
                // Days since the epoch, which the driver's `Date` takes as a number.
                s.push_str(&days.to_string());
                return Ok(());
            }
            date_text(days)
        }
        _ => native_text(t, n, v, &HEX)?,
    };
    let quoted = nested
        && matches!(
            n,
            NativeType::Ascii
                | NativeType::Text
                | NativeType::Inet
                | NativeType::Date
                | NativeType::Time
        );
    if quoted {
        s.push('\'');
        s.push_str(&text.replace('\'', "''"));
        s.push('\'');
    } else {
        s.push_str(&text);
    }
    Ok(())
}

fn civil_year(days: i64) -> i64 {
    civil_from_days(days).0
}

fn null_element(t: &ColumnType<'_>) -> String {
    format!("a {} value with a null element", type_name(t))
}
