//! `java.time.format.DateTimeFormatter` patterns, read and written here: no crate speaks
//! Java's pattern letters.

use jiff::civil;
use jiff::tz::TimeZone;

use super::{Kind, Temporal, offset_text, zone};
use crate::connectors::csv::codec::echo;


/// What a pattern writes: a local date and time, its offset and its zone's id. A date or a
/// time is put on midnight or on the epoch's day, at offset zero without an id (their
/// patterns have no zone letters); jiff's `Timestamp`, which keeps a day of margin for any
/// offset, would not hold 9999-12-31.
pub(super) struct Moment<'a> {
    pub dt: civil::DateTime,
    pub offset: i32,
    pub zone_id: Option<&'a str>,
}

impl<'a> From<&'a jiff::Zoned> for Moment<'a> {
    fn from(z: &'a jiff::Zoned) -> Self {
        Moment {
            dt: z.datetime(),
            offset: z.offset().seconds(),
            zone_id: z.time_zone().iana_name(),
        }
    }
}

/// A `java.time.format.DateTimeFormatter` pattern (English names, as DSBulk's default locale
/// `en_US`): the letters `u y M L d D E e c a H k K h m s S n V X x Z`, `'quoted'` text, other
/// characters as themselves, and `[optional]` sections (read when they match, always
/// written).
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub(super) text: String,
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Lit(String),
    Field(char, usize),
    Optional(Vec<Node>),
}

/// The longest pattern read, in characters (java.time's own are under 40).
pub(super) const MAX_PATTERN_CHARS: usize = 256;
/// How deep optional sections nest (`[.SSS[SSS]]` is two).
pub(super) const MAX_OPTIONAL_DEPTH: usize = 4;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

impl Pattern {
    pub(super) fn new(kind: Kind, text: &str) -> Result<Self, String> {
        // Reading, writing and checking walk optional sections by recursion: a bound on their
        // depth (and on the text, echoed in messages) keeps a job file from exhausting the
        // daemon's stack.
        if text.chars().count() > MAX_PATTERN_CHARS {
            return Err(format!(
                "the pattern is {} characters long; at most {MAX_PATTERN_CHARS} are read",
                text.chars().count()
            ));
        }
        let mut stack: Vec<Vec<Node>> = vec![Vec::new()];
        let mut chars = text.chars().peekable();
        let push_lit = |stack: &mut Vec<Vec<Node>>, s: &str| {
            let top = stack.last_mut().expect("the stack is never empty");
            match top.last_mut() {
                Some(Node::Lit(l)) => l.push_str(s),
                _ => top.push(Node::Lit(s.to_string())),
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    let mut lit = String::new();
                    loop {
                        match chars.next() {
                            Some('\'') if chars.peek() == Some(&'\'') => {
                                chars.next();
                                lit.push('\'');
                            }
                            Some('\'') => break,
                            Some(ch) => lit.push(ch),
                            None => {
                                return Err(format!(
                                    "the pattern {text:?} opens a quote it does not close"
                                ));
                            }
                        }
                    }
                    // `''` alone is a quote.
                    push_lit(&mut stack, if lit.is_empty() { "'" } else { &lit });
                }
                '[' if stack.len() > MAX_OPTIONAL_DEPTH => {
                    return Err(format!(
                        "the pattern {text:?} nests optional sections deeper than {MAX_OPTIONAL_DEPTH}"
                    ));
                }
                '[' => stack.push(Vec::new()),
                ']' => {
                    if stack.len() == 1 {
                        return Err(format!(
                            "the pattern {text:?} closes an optional section ] it did not open"
                        ));
                    }
                    let section = stack.pop().expect("checked above");
                    stack
                        .last_mut()
                        .expect("the stack is never empty")
                        .push(Node::Optional(section));
                }
                '{' | '}' | '#' => {
                    return Err(format!(
                        "the pattern {text:?} holds {c}, which java.time reserves; quote it ('{c}')"
                    ));
                }
                c if c.is_ascii_alphabetic() => {
                    let mut n = 1;
                    while chars.peek() == Some(&c) {
                        chars.next();
                        n += 1;
                    }
                    check_letter(c, n).map_err(|e| format!("the pattern {text:?}: {e}"))?;
                    stack
                        .last_mut()
                        .expect("the stack is never empty")
                        .push(Node::Field(c, n));
                }
                c => push_lit(&mut stack, c.encode_utf8(&mut [0; 4])),
            }
        }
        if stack.len() != 1 {
            return Err(format!(
                "the pattern {text:?} opens an optional section [ it does not close"
            ));
        }
        let p = Pattern {
            text: text.to_string(),
            nodes: stack.pop().expect("one level left"),
        };
        p.check(kind).map_err(|e| format!("the pattern {text:?} {e}"))?;
        Ok(p)
    }

    /// Which letters the pattern holds, optional ones too.
    fn letters(&self) -> Vec<char> {
        fn walk(nodes: &[Node], out: &mut Vec<char>) {
            for n in nodes {
                match n {
                    Node::Field(c, _) => out.push(*c),
                    Node::Optional(inner) => walk(inner, out),
                    Node::Lit(_) => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.nodes, &mut out);
        out
    }

    pub(super) fn fraction_digits(&self) -> usize {
        fn walk(nodes: &[Node]) -> usize {
            nodes
                .iter()
                .map(|n| match n {
                    Node::Field('S', k) => *k,
                    Node::Field('n', _) => 9,
                    Node::Optional(inner) => walk(inner),
                    _ => 0,
                })
                .max()
                .unwrap_or(0)
        }
        walk(&self.nodes)
    }

    /// What the pattern must (not) hold to be a form of `kind`.
    fn check(&self, kind: Kind) -> Result<(), String> {
        let l = self.letters();
        let has = |cs: &str| l.iter().any(|c| cs.contains(*c));
        let date = has("uyMLdD");
        let time = has("HkKhmsSna");
        let zone = has("VXxZ");
        let hour = has("HkKh");
        match kind {
            Kind::Date if time || zone => {
                return Err(
                    "is a date form and may hold only date letters (y u M L d D E e c)".into(),
                );
            }
            Kind::Time if date || zone || has("Eec") => {
                return Err("is a time form and may hold only time letters (H k K h m s S n a)".into());
            }
            Kind::Time if !hour => return Err("is a time form without an hour (H)".into()),
            Kind::Date if !date => return Err("is a date form without a year, month and day".into()),
            _ => {}
        }
        if date && !(has("uy") && (has("D") || (has("ML") && has("d")))) {
            return Err(
                "names part of a date: give a year (yyyy), month (MM) and day (dd), or a year and a day of the year (DDD)"
                    .into(),
            );
        }
        if time && !hour {
            return Err("has minutes or seconds but no hour (HH)".into());
        }
        if has("hK") && !has("a") {
            return Err("has a 12-hour clock (h, K) without AM/PM (a)".into());
        }
        Ok(())
    }

    /// Writes a zoned date and time (the date and time of a date or time form are put on
    /// a day or midnight, in UTC, and have no zone letters).
    pub(super) fn format(&self, z: &Moment<'_>) -> String {
        let mut s = String::new();
        format_nodes(&self.nodes, z, &mut s);
        s
    }

    /// Reads the pattern's fields from the whole of `t`.
    pub(super) fn fields(&self, t: &str) -> Result<Fields, String> {
        let mut f = Fields::default();
        let rest = parse_nodes(&self.nodes, t, &mut f)?;
        if !rest.is_empty() {
            return Err(format!(
                "text {} is left after the pattern {:?}",
                echo(rest),
                self.text
            ));
        }
        Ok(f)
    }

    /// Nanoseconds since 1970 of a timestamp in the pattern: a missing date is `epoch`'s, a
    /// missing zone `timeZone`.
    pub(super) fn parse(&self, t: &str, temporal: &Temporal) -> Result<i128, String> {
        let f = self.fields(t)?;
        let date = if f.year.is_some() {
            f.date()?
        } else {
            temporal.epoch_date
        };
        let local = date.to_datetime(f.time()?);
        let ts = if let Some(offset) = f.offset {
            let o = jiff::tz::Offset::from_seconds(offset).map_err(|e| e.to_string())?;
            o.to_timestamp(local).map_err(|e| e.to_string())?
        } else {
            let zone = f.zone.clone().unwrap_or_else(|| temporal.zone.clone());
            local.to_zoned(zone).map_err(|e| e.to_string())?.timestamp()
        };
        Ok(ts.as_nanosecond())
    }
}

fn check_letter(c: char, n: usize) -> Result<(), String> {
    let ok = match c {
        'u' | 'y' => n <= 9,
        'M' | 'L' => n <= 4,
        'd' | 'H' | 'k' | 'K' | 'h' | 'm' | 's' => n <= 2,
        'D' => n <= 3,
        'E' => n <= 4,
        'e' | 'c' => (3..=4).contains(&n),
        'a' => n == 1,
        'S' => n <= 9,
        'n' => n <= 9,
        'V' => n == 2,
        'X' | 'x' => n <= 3,
        'Z' => n <= 3 || n == 5,
        _ => {
            return Err(format!(
                "the letter {c} is not one drover reads (u y M L d D E e c a H k K h m s S n VV X x Z); quote text such as 'T'"
            ));
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{} is not a width drover reads for {c}", c.to_string().repeat(n)))
    }
}

fn format_nodes(nodes: &[Node], z: &Moment<'_>, s: &mut String) {
    use std::fmt::Write as _;
    for node in nodes {
        match node {
            Node::Lit(l) => s.push_str(l),
            Node::Optional(inner) => format_nodes(inner, z, s),
            Node::Field(c, n) => {
                let n = *n;
                let num = |s: &mut String, v: i64, width: usize| {
                    let _ = write!(s, "{v:0width$}");
                };
                match c {
                    'u' | 'y' if n == 2 => num(s, i64::from(z.dt.year()).rem_euclid(100), 2),
                    'u' | 'y' => {
                        let y = i64::from(z.dt.year());
                        if n >= 4 && y > 9999 {
                            let _ = write!(s, "+{y}");
                        } else if y < 0 {
                            let _ = write!(s, "-{:0n$}", -y);
                        } else {
                            num(s, y, n);
                        }
                    }
                    'M' | 'L' => match n {
                        1 | 2 => num(s, i64::from(z.dt.month()), n),
                        3 => s.push_str(&MONTHS[z.dt.month() as usize - 1][..3]),
                        _ => s.push_str(MONTHS[z.dt.month() as usize - 1]),
                    },
                    'd' => num(s, i64::from(z.dt.day()), n),
                    'D' => num(s, i64::from(z.dt.day_of_year()), n),
                    'E' | 'e' | 'c' => {
                        let name = WEEKDAYS[z.dt.weekday().to_monday_zero_offset() as usize];
                        s.push_str(if n >= 4 { name } else { &name[..3] });
                    }
                    'a' => s.push_str(if z.dt.hour() < 12 { "AM" } else { "PM" }),
                    'H' => num(s, i64::from(z.dt.hour()), n),
                    'k' => num(s, if z.dt.hour() == 0 { 24 } else { i64::from(z.dt.hour()) }, n),
                    'K' => num(s, i64::from(z.dt.hour() % 12), n),
                    'h' => num(
                        s,
                        if z.dt.hour() % 12 == 0 { 12 } else { i64::from(z.dt.hour() % 12) },
                        n,
                    ),
                    'm' => num(s, i64::from(z.dt.minute()), n),
                    's' => num(s, i64::from(z.dt.second()), n),
                    'S' => {
                        let digits = format!("{:09}", z.dt.subsec_nanosecond());
                        s.push_str(&digits[..n]);
                    }
                    'n' => num(s, i64::from(z.dt.subsec_nanosecond()), n),
                    'V' => match z.zone_id {
                        Some(id) => s.push_str(id),
                        None => s.push_str(&offset_text(z.offset)),
                    },
                    'X' | 'x' | 'Z' => {
                        let secs = z.offset;
                        if secs == 0 && (*c == 'X' || (*c == 'Z' && n == 5)) {
                            s.push('Z');
                        } else {
                            let (h, m) = (secs.abs() / 3600, secs.abs() / 60 % 60);
                            s.push(if secs < 0 { '-' } else { '+' });
                            let _ = write!(s, "{h:02}");
                            match (c, n) {
                                ('X' | 'x', 1) if m == 0 => {}
                                ('X' | 'x', 3) | ('Z', 5) => {
                                    let _ = write!(s, ":{m:02}");
                                }
                                _ => {
                                    let _ = write!(s, "{m:02}");
                                }
                            }
                        }
                    }
                    _ => unreachable!("letters are checked when the pattern is read"),
                }
            }
        }
    }
}

/// The fields a pattern read.
#[derive(Debug, Default, Clone)]
pub(super) struct Fields {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<u32>,
    hour: Option<u32>,
    /// An hour of a 12-hour clock (0–11, from `h` or `K`).
    half_hour: Option<u32>,
    pm: Option<bool>,
    minute: u32,
    second: u32,
    nanos: u32,
    offset: Option<i32>,
    zone: Option<TimeZone>,
}

impl Fields {
    pub(super) fn date(&self) -> Result<civil::Date, String> {
        let y = self.year.ok_or("no year")?;
        let y = i16::try_from(y).map_err(|_| format!("the year {y} is out of range"))?;
        if let Some(doy) = self.day_of_year {
            return civil::Date::new(y, 1, 1)
                .and_then(|d| d.with().day_of_year(doy as i16).build())
                .map_err(|e| e.to_string());
        }
        let (m, d) = (self.month.ok_or("no month")?, self.day.ok_or("no day")?);
        civil::Date::new(y, m as i8, d as i8).map_err(|e| e.to_string())
    }

    pub(super) fn time(&self) -> Result<civil::Time, String> {
        let hour = match (self.hour, self.half_hour, self.pm) {
            (Some(h), _, _) => h,
            (None, Some(h), Some(pm)) => h + if pm { 12 } else { 0 },
            (None, Some(_), None) => return Err("a 12-hour clock without AM or PM".into()),
            (None, None, _) => 0,
        };
        civil::Time::new(
            hour as i8,
            self.minute as i8,
            self.second as i8,
            self.nanos as i32,
        )
        .map_err(|e| e.to_string())
    }
}

/// Parses `nodes` from the start of `t`; the text left.
fn parse_nodes<'t>(nodes: &[Node], mut t: &'t str, f: &mut Fields) -> Result<&'t str, String> {
    for (i, node) in nodes.iter().enumerate() {
        match node {
            Node::Lit(l) => {
                t = t
                    .strip_prefix(l.as_str())
                    .ok_or_else(|| format!("expected {l:?} at {}", echo(t)))?;
            }
            Node::Optional(inner) => {
                let mut tried = f.clone();
                if let Ok(rest) = parse_nodes(inner, t, &mut tried) {
                    *f = tried;
                    t = rest;
                }
            }
            Node::Field(c, n) => {
                // A field followed at once by a number takes its width exactly (yyyyMMdd).
                let adjacent = matches!(
                    nodes.get(i + 1),
                    Some(Node::Field(next, _)) if "uyMLdDHkKhmsSn".contains(*next)
                );
                t = parse_field(*c, *n, adjacent, t, f)?;
            }
        }
    }
    Ok(t)
}

fn parse_field<'t>(
    c: char,
    n: usize,
    adjacent: bool,
    t: &'t str,
    f: &mut Fields,
) -> Result<&'t str, String> {
    let digits = |t: &'t str, min: usize, max: usize| -> Result<(u32, &'t str), String> {
        let k = t.bytes().take(max).take_while(u8::is_ascii_digit).count();
        if k < min {
            return Err(format!("expected {min} or more digits at {}", echo(t)));
        }
        Ok((t[..k].parse().map_err(|_| format!("too many digits at {}", echo(t)))?, &t[k..]))
    };
    // `n` digits when the width is given (two or more letters), else one or two.
    let fixed = |t: &'t str, max: usize| {
        if n >= 2 {
            digits(t, n, n)
        } else {
            digits(t, 1, max)
        }
    };
    let name = |t: &'t str, names: &[&str]| -> Option<(u32, &'t str)> {
        // Full names first: `May` is both.
        for full in [true, false] {
            for (i, nm) in names.iter().enumerate() {
                let nm = if full { nm } else { &nm[..3] };
                if t.len() >= nm.len()
                    && t.is_char_boundary(nm.len())
                    && t[..nm.len()].eq_ignore_ascii_case(nm)
                {
                    return Some((i as u32 + 1, &t[nm.len()..]));
                }
            }
        }
        None
    };
    Ok(match c {
        'u' | 'y' if n == 2 => {
            let (v, rest) = digits(t, 2, 2)?;
            f.year = Some(2000 + i64::from(v));
            rest
        }
        'u' | 'y' => {
            let (negative, body) = match t.strip_prefix('-') {
                Some(b) if n >= 4 => (true, b),
                _ => (false, if n >= 4 { t.strip_prefix('+').unwrap_or(t) } else { t }),
            };
            let (v, rest) = if adjacent {
                digits(body, n, n)?
            } else {
                digits(body, n.min(4), 9)?
            };
            f.year = Some(if negative { -i64::from(v) } else { i64::from(v) });
            rest
        }
        'M' | 'L' if n >= 3 => {
            let (m, rest) = name(t, &MONTHS).ok_or_else(|| format!("expected a month name at {}", echo(t)))?;
            f.month = Some(m);
            rest
        }
        'M' | 'L' => {
            let (v, rest) = fixed(t, 2)?;
            f.month = Some(v);
            rest
        }
        'd' => {
            let (v, rest) = fixed(t, 2)?;
            f.day = Some(v);
            rest
        }
        'D' => {
            let (v, rest) = if n >= 2 { digits(t, n, 3)? } else { digits(t, 1, 3)? };
            f.day_of_year = Some(v);
            rest
        }
        // A weekday is read and not checked against the date (java.time's lenient reading).
        'E' | 'e' | 'c' => {
            name(t, &WEEKDAYS)
                .ok_or_else(|| format!("expected a day of the week at {}", echo(t)))?
                .1
        }
        'a' => {
            let upper = t.get(..2).map(str::to_ascii_uppercase);
            f.pm = Some(match upper.as_deref() {
                Some("AM") => false,
                Some("PM") => true,
                _ => return Err(format!("expected AM or PM at {}", echo(t))),
            });
            &t[2..]
        }
        'H' | 'k' => {
            let (v, rest) = fixed(t, 2)?;
            f.hour = Some(if c == 'k' && v == 24 { 0 } else { v });
            rest
        }
        'K' | 'h' => {
            let (v, rest) = fixed(t, 2)?;
            f.half_hour = Some(if c == 'h' && v == 12 { 0 } else { v });
            rest
        }
        'm' => {
            let (v, rest) = fixed(t, 2)?;
            f.minute = v;
            rest
        }
        's' => {
            let (v, rest) = fixed(t, 2)?;
            f.second = v;
            rest
        }
        'S' => {
            let (v, rest) = digits(t, n, n)?;
            f.nanos = v * 10u32.pow(9 - n as u32);
            rest
        }
        'n' => {
            let (v, rest) = digits(t, n, 9)?;
            f.nanos = v;
            rest
        }
        'V' => {
            let k = t
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || "/_+-:".contains(ch)))
                .unwrap_or(t.len());
            f.zone = Some(zone(&t[..k])?);
            &t[k..]
        }
        'X' | 'x' | 'Z' => {
            if let Some(rest) = t.strip_prefix('Z') {
                f.offset = Some(0);
                return Ok(rest);
            }
            let sign = match t.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return Err(format!("expected an offset such as +02:00 or Z at {}", echo(t))),
            };
            let (h, rest) = digits(&t[1..], 2, 2)?;
            let after = rest.strip_prefix(':').unwrap_or(rest);
            let (m, rest) = match digits(after, 2, 2) {
                Ok(r) => r,
                Err(_) => (0, rest),
            };
            f.offset = Some(sign * (h as i32 * 3600 + m as i32 * 60));
            rest
        }
        _ => unreachable!("letters are checked when the pattern is read"),
    })
}

