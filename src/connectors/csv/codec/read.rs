//! Native CQL values from their text.

use super::*;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use num_bigint::{BigInt, Sign};

pub(super) fn native_from_text(n: &NativeType, s: &str, forms: &Forms) -> Result<Vec<u8>, String> {
    match n {
        NativeType::Text => return Ok(s.as_bytes().to_vec()),
        NativeType::Ascii => {
            return if s.is_ascii() {
                Ok(s.as_bytes().to_vec())
            } else {
                Err(format!("expected ASCII text, got {}", echo(s)))
            };
        }
        _ => {}
    }
    let t = s.trim();
    let wanted = || expected(n, s);
    if t.is_empty() && !matches!(n, NativeType::Blob) {
        return Err(wanted());
    }
    Ok(match n {
        NativeType::Blob => {
            let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"));
            if let Some(bytes) = hex.and_then(parse_hex) {
                bytes
            } else {
                const BASE64: GeneralPurpose = GeneralPurpose::new(
                    &base64::alphabet::STANDARD,
                    GeneralPurposeConfig::new()
                        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
                );
                BASE64.decode(t).map_err(|_| wanted())?
            }
        }
        NativeType::Boolean => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "y" | "yes" | "t" => vec![1],
            "false" | "0" | "n" | "no" | "f" => vec![0],
            _ => return Err(wanted()),
        },
        NativeType::TinyInt
        | NativeType::SmallInt
        | NativeType::Int
        | NativeType::BigInt
        | NativeType::Counter => {
            let i = parse_integer(t).ok_or_else(wanted)?;
            let i = i64::try_from(&i).map_err(|_| out_of_range(n, s))?;
            let bytes = i.to_be_bytes();
            let width = int_width(n);
            // In range when the dropped high bytes are only the sign's extension.
            if codec::integer(&bytes[8 - width..]) != Some(i) {
                return Err(out_of_range(n, s));
            }
            bytes[8 - width..].to_vec()
        }
        NativeType::Varint => parse_integer(t).ok_or_else(wanted)?.to_signed_bytes_be(),
        NativeType::Decimal => {
            let (scale, unscaled) = parse_decimal_text(&ungroup(t)).ok_or_else(wanted)?;
            codec::encode_decimal(scale, &unscaled).to_vec()
        }
        NativeType::Float => {
            let x: f32 = ungroup(t).parse().map_err(|_| wanted())?;
            if x.is_infinite() && !t.to_ascii_lowercase().contains("inf") {
                return Err(out_of_range(n, s));
            }
            x.to_be_bytes().to_vec()
        }
        NativeType::Double => {
            let x: f64 = ungroup(t).parse().map_err(|_| wanted())?;
            if x.is_infinite() && !t.to_ascii_lowercase().contains("inf") {
                return Err(out_of_range(n, s));
            }
            x.to_be_bytes().to_vec()
        }
        NativeType::Uuid | NativeType::Timeuuid => {
            let u = uuid::Uuid::try_parse(t).map_err(|_| wanted())?;
            if matches!(n, NativeType::Timeuuid) && u.get_version_num() != 1 {
                return Err(format!(
                    "{} is not a time-based (version 1) UUID, as a timeuuid needs",
                    echo(s)
                ));
            }
            u.as_bytes().to_vec()
        }
        NativeType::Inet => {
            // Java's `InetAddress.toString` starts with `/`; URLs bracket IPv6.
            let a = t.strip_prefix('/').unwrap_or(t);
            let a = a
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(a);
            match a.parse::<std::net::IpAddr>().map_err(|_| wanted())? {
                std::net::IpAddr::V4(a) => a.octets().to_vec(),
                std::net::IpAddr::V6(a) => a.octets().to_vec(),
            }
        }
        NativeType::Date => {
            let days = if forms.temporal.default_date() {
                match parse_date_prefix(t) {
                    Some((days, "")) => days,
                    _ => return Err(wanted()),
                }
            } else {
                forms.temporal.parse_date(t)?
            };
            u32::try_from(days + DATE_EPOCH)
                .map_err(|_| out_of_range(n, s))?
                .to_be_bytes()
                .to_vec()
        }
        NativeType::Time if !forms.temporal.default_time() => {
            forms.temporal.parse_time(t)?.to_be_bytes().to_vec()
        }
        NativeType::Time => match parse_time_prefix(t) {
            Some((ns, "")) => ns.to_be_bytes().to_vec(),
            _ => return Err(wanted()),
        },
        NativeType::Timestamp => match forms.temporal.parse_timestamp(t)? {
            Some(ms) => ms,
            None => parse_timestamp(t).map_err(|e| e.unwrap_or_else(wanted))?,
        }
        .to_be_bytes()
        .to_vec(),
        NativeType::Duration => {
            let [months, days, nanos] = parse_duration(t).ok_or_else(wanted)?;
            codec::encode_duration(months, days, nanos)
        }
        _ => return Err(format!("the CQL type {} has no text form", native_name(n))),
    })
}

/// Milliseconds since the epoch of a timestamp's text: `yyyy-MM-dd[(T| )HH:mm[:ss[.f{1,9}]]]`
/// then `Z`, `+HH:MM`, `+HHMM`, `+HH`, `UTC` or nothing (UTC), or a plain integer of
/// milliseconds. `Err(None)` when it is none of those, `Err(Some(why))` when it is one but
/// cannot be a timestamp.
pub(super) fn parse_timestamp(t: &str) -> Result<i64, Option<String>> {
    if is_plain_integer(t) {
        return t
            .parse()
            .map_err(|_| Some(out_of_range(&NativeType::Timestamp, t)));
    }
    let ns = parse_instant_nanos(t).ok_or(None)?;
    if ns % 1_000_000 != 0 {
        return Err(Some(format!(
            "{} has digits beyond milliseconds, which a timestamp cannot hold",
            echo(t)
        )));
    }
    i64::try_from(ns / 1_000_000).map_err(|_| Some(out_of_range(&NativeType::Timestamp, t)))
}

pub(super) fn is_plain_integer(t: &str) -> bool {
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn parse_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.as_bytes()
        .chunks(2)
        .map(|p| {
            let digit = |c: u8| (c as char).to_digit(16);
            Some((digit(p[0])? * 16 + digit(p[1])?) as u8)
        })
        .collect()
}

/// `1,234,567.5` without its group separators (DSBulk's `#,###.##`); any other text as it is.
pub(super) fn ungroup(t: &str) -> std::borrow::Cow<'_, str> {
    if !t.contains(',') {
        return t.into();
    }
    let (sign, body) = match t.strip_prefix(['-', '+']) {
        Some(b) => (&t[..1], b),
        None => ("", t),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let groups: Vec<&str> = int.split(',').collect();
    let ok = (1..=3).contains(&groups[0].len())
        && groups[1..].iter().all(|g| g.len() == 3)
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        return t.into();
    }
    let dot = if body.contains('.') { "." } else { "" };
    format!("{sign}{}{dot}{frac}", groups.concat()).into()
}

/// An integer's text, also as an exact decimal (`12.0`, `1E3`, `1,234`).
pub(super) fn parse_integer(t: &str) -> Option<BigInt> {
    let t = ungroup(t);
    if is_plain_integer(&t) {
        return t.parse().ok();
    }
    let (scale, unscaled) = parse_decimal_text(&t)?;
    if unscaled.sign() == Sign::NoSign {
        return Some(unscaled);
    }
    if scale <= 0 {
        // No CQL integer but a varint is past 10^19; the bound keeps `1E999999999` cheap.
        let e = u32::try_from(-i64::from(scale))
            .ok()
            .filter(|e| *e <= 1000)?;
        return Some(unscaled * BigInt::from(10u32).pow(e));
    }
    // 10^scale > |unscaled| when scale exceeds its bits: a fraction.
    if u64::try_from(scale).ok()? > unscaled.bits() {
        return None;
    }
    let p = BigInt::from(10u32).pow(scale as u32);
    let (q, r) = (&unscaled / &p, &unscaled % &p);
    (r.sign() == Sign::NoSign).then_some(q)
}

/// `-12.340`, `1E+3`, `5e-2`, `1E-2147483647` into (scale, unscaled). As
/// `cql::codec::parse_decimal`, but the exponent may be any `i64` that leaves the scale an
/// `i32` (the scale -2^31 is written `1E+2147483648`), and the digits are checked.
pub(super) fn parse_decimal_text(t: &str) -> Option<(i32, BigInt)> {
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i64>().ok()?),
        None => (t, 0),
    };
    let (negative, body) = match mantissa.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = format!("{int}{frac}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: BigInt = digits.parse().ok()?;
    let scale = i32::try_from(i64::try_from(frac.len()).ok()?.checked_sub(exp)?).ok()?;
    Some((scale, if negative { -magnitude } else { magnitude }))
}

pub(super) fn two_digits(s: &str) -> Option<(u32, &str)> {
    match s.as_bytes() {
        [a, b, ..] if a.is_ascii_digit() && b.is_ascii_digit() => {
            Some((u32::from(a - b'0') * 10 + u32::from(b - b'0'), &s[2..]))
        }
        _ => None,
    }
}

/// Days since the epoch of `[+-]yyyy-MM-dd` (4 to 10 digits of year) at the head of `s`.
pub(super) fn parse_date_prefix(s: &str) -> Option<(i64, &str)> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let len = body.bytes().take_while(u8::is_ascii_digit).count();
    if !(4..=10).contains(&len) {
        return None;
    }
    let year: i64 = body[..len].parse().ok()?;
    let year = if negative { -year } else { year };
    let (month, rest) = two_digits(body[len..].strip_prefix('-')?)?;
    let (day, rest) = two_digits(rest.strip_prefix('-')?)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some((days_from_civil(year, month, day), rest))
}

/// Nanoseconds of the day of `HH:mm[:ss[.f{1,9}]]` at the head of `s`.
pub(super) fn parse_time_prefix(s: &str) -> Option<(i64, &str)> {
    let (h, rest) = two_digits(s)?;
    let (m, mut rest) = two_digits(rest.strip_prefix(':')?)?;
    let (mut sec, mut nanos) = (0, 0);
    if let Some(r) = rest.strip_prefix(':') {
        (sec, rest) = two_digits(r)?;
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            if !(1..=9).contains(&n) {
                return None;
            }
            nanos = r[..n].parse::<u32>().ok()? * 10u32.pow(9 - n as u32);
            rest = &r[n..];
        }
    }
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    let secs = i64::from(h * 3600 + m * 60 + sec);
    Some((secs * 1_000_000_000 + i64::from(nanos), rest))
}

/// Seconds east of UTC of `Z`, `UTC`, `+HH:MM`, `+HHMM`, `+HH`; nothing is UTC.
pub(super) fn parse_zone(s: &str) -> Option<i64> {
    let z = s.trim_start();
    if z.is_empty() || z.eq_ignore_ascii_case("z") || z == "UTC" || z == "GMT" {
        return Some(0);
    }
    let (sign, r) = match z.strip_prefix('+') {
        Some(r) => (1, r),
        None => (-1, z.strip_prefix('-')?),
    };
    let (hh, r) = two_digits(r)?;
    let r = r.strip_prefix(':').unwrap_or(r);
    let (mm, r) = if r.is_empty() { (0, r) } else { two_digits(r)? };
    (r.is_empty() && hh <= 18 && mm <= 59).then_some(sign * i64::from(hh * 3600 + mm * 60))
}

/// Nanoseconds since the epoch of a date, time and zone (see [`parse_timestamp`]).
pub(super) fn parse_instant_nanos(s: &str) -> Option<i128> {
    let (days, rest) = parse_date_prefix(s)?;
    let (tod, rest) = match rest.as_bytes().first() {
        Some(b'T' | b't' | b' ') => parse_time_prefix(&rest[1..])?,
        _ => (0, rest),
    };
    let offset = parse_zone(rest)?;
    Some((i128::from(days) * 86_400 - i128::from(offset)) * 1_000_000_000 + i128::from(tod))
}

/// Months, days and nanoseconds of `1y2mo3d4h5m6s7ms8us9ns` (units once each, any case, `µs`
/// too), ISO 8601's `P1Y2M3DT4H5M6S` and `P2W`, or `P0001-02-03T04:05:06`; `-` before any.
pub(super) fn parse_duration(s: &str) -> Option<[i64; 3]> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let parts = match body.strip_prefix(['P', 'p']) {
        Some(iso) if iso.contains(['-', ':']) => iso_alternative_duration(iso)?,
        Some(iso) => iso_duration(iso)?,
        None => unit_duration(body)?,
    };
    let mut out = [0i64; 3];
    for (o, p) in out.iter_mut().zip(parts) {
        *o = i64::try_from(if negative { -p } else { p }).ok()?;
    }
    Some(out)
}

/// `(number, unit)` pairs: `12mo` → (12, "mo").
pub(super) fn number_units(s: &str) -> Option<Vec<(i128, &str)>> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let k = rest.bytes().take_while(u8::is_ascii_digit).count();
        if !(1..=20).contains(&k) {
            return None;
        }
        let v: i128 = rest[..k].parse().ok()?;
        rest = &rest[k..];
        let u = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        out.push((v, &rest[..u]));
        rest = &rest[u..];
    }
    Some(out)
}

pub(super) const NS_PER_HOUR: i128 = 3_600_000_000_000;

pub(super) fn unit_duration(s: &str) -> Option<[i128; 3]> {
    let pairs = number_units(s)?;
    if pairs.is_empty() {
        return None;
    }
    let mut seen = 0u16;
    let mut out = [0i128; 3];
    for (v, unit) in pairs {
        let (bit, part, scale) = match unit.to_lowercase().as_str() {
            "y" => (0, 0, 12),
            "mo" => (1, 0, 1),
            "w" => (2, 1, 7),
            "d" => (3, 1, 1),
            "h" => (4, 2, NS_PER_HOUR),
            "m" => (5, 2, 60_000_000_000),
            "s" => (6, 2, 1_000_000_000),
            "ms" => (7, 2, 1_000_000),
            "us" | "µs" => (8, 2, 1000),
            "ns" => (9, 2, 1),
            _ => return None,
        };
        if seen & (1 << bit) != 0 {
            return None;
        }
        seen |= 1 << bit;
        out[part] += v * scale;
    }
    Some(out)
}

pub(super) fn iso_duration(s: &str) -> Option<[i128; 3]> {
    let (date, time) = match s.split_once(['T', 't']) {
        Some((d, t)) if !t.is_empty() => (d, t),
        Some(_) => return None,
        None => (s, ""),
    };
    let mut out = [0i128; 3];
    let mut any = false;
    for (text, in_time) in [(date, false), (time, true)] {
        for (v, unit) in number_units(text)? {
            any = true;
            let (part, scale) = match (unit.to_ascii_uppercase().as_str(), in_time) {
                ("Y", false) => (0, 12),
                ("M", false) => (0, 1),
                ("W", false) => (1, 7),
                ("D", false) => (1, 1),
                ("H", true) => (2, NS_PER_HOUR),
                ("M", true) => (2, 60_000_000_000),
                ("S", true) => (2, 1_000_000_000),
                _ => return None,
            };
            out[part] += v * scale;
        }
    }
    any.then_some(out)
}

/// `0001-02-03T04:05:06` (after the `P`).
pub(super) fn iso_alternative_duration(s: &str) -> Option<[i128; 3]> {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i128> {
        let t = s.get(range)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    Some([y * 12 + mo, d, ((h * 60 + mi) * 60 + sec) * 1_000_000_000])
}
