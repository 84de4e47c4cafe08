//! DSBulk's date, time and timestamp formats: `codec.timestamp`, `codec.date`, `codec.time`,
//! `codec.timeZone`, `codec.unit` and `codec.epoch`, flattened as the other keys are
//! (`timestamp`, `date`, `time`, `timeZone`, `unit`, `epoch`).
//!
//! A form is DSBulk's default (`CQL_TIMESTAMP`, `ISO_LOCAL_DATE`, `ISO_LOCAL_TIME`, written by
//! the rest of the codec as before), `UNITS_SINCE_EPOCH`, one of `java.time`'s ISO formatters,
//! or a `java.time` pattern (`yyyy-MM-dd HH:mm:ss.SSS`), which [`Pattern`] reads and writes
//! itself: no crate speaks Java's pattern letters. Time zones and their rules come from
//! `jiff` (the system's tz database).
//!
//! Every value an unload writes in a form other than the default is read back before it is
//! written, and a value that does not come back the same (a pattern without milliseconds, a
//! unit coarser than the value, an hour that daylight saving time repeats) fails the job
//! naming it: a form that drops part of a value is the operator's to fix, never a silent loss.

use jiff::Timestamp;
use jiff::civil;
use jiff::tz::TimeZone;

use super::read::{is_plain_integer, parse_date_prefix, parse_time_prefix, parse_zone};
use super::write::{date_text, time_text, year_text};
use super::{DATE_EPOCH, NANOS_PER_DAY, echo};

mod pattern;

use pattern::{Moment, Pattern};

const NANOS_PER_SEC: i128 = 1_000_000_000;

/// Which value a form reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Timestamp,
    Date,
    Time,
}

impl Kind {
    /// The job key of its form.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Timestamp => "timestamp",
            Kind::Date => "date",
            Kind::Time => "time",
        }
    }

    fn default_name(self) -> &'static str {
        match self {
            Kind::Timestamp => "CQL_TIMESTAMP",
            Kind::Date => "ISO_LOCAL_DATE",
            Kind::Time => "ISO_LOCAL_TIME",
        }
    }

    /// The named forms of this kind (besides its default and `UNITS_SINCE_EPOCH`).
    fn isos(self) -> &'static [(&'static str, Iso)] {
        match self {
            Kind::Timestamp => &[
                ("ISO_INSTANT", Iso::Instant),
                ("ISO_OFFSET_DATE_TIME", Iso::OffsetDateTime),
                ("ISO_ZONED_DATE_TIME", Iso::ZonedDateTime),
                ("ISO_DATE_TIME", Iso::ZonedDateTime),
                ("ISO_LOCAL_DATE_TIME", Iso::LocalDateTime),
            ],
            Kind::Date => &[("ISO_DATE", Iso::Date), ("BASIC_ISO_DATE", Iso::BasicDate)],
            Kind::Time => &[("ISO_TIME", Iso::Time)],
        }
    }
}

/// One of `java.time.format.DateTimeFormatter`'s ISO formatters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Iso {
    /// UTC with `Z`, the fraction in groups of three digits.
    Instant,
    /// In `timeZone`, with its offset (`Z` for zero).
    OffsetDateTime,
    /// As `OffsetDateTime`, then the zone's id in brackets unless it is an offset.
    ZonedDateTime,
    /// In `timeZone`, without an offset.
    LocalDateTime,
    /// `ISO_LOCAL_DATE` (a date has no offset to write).
    Date,
    /// `20240229`.
    BasicDate,
    /// `ISO_LOCAL_TIME`.
    Time,
}

#[derive(Debug, Clone, PartialEq)]
enum Form {
    /// DSBulk's default for the kind.
    Default,
    /// `UNITS_SINCE_EPOCH`: a number of `unit`s since `epoch`.
    Units,
    Iso(Iso),
    Pattern(Pattern),
}

/// `codec.unit`: `java.util.concurrent.TimeUnit`'s names.
const UNITS: [(&str, i128); 7] = [
    ("NANOSECONDS", 1),
    ("MICROSECONDS", 1_000),
    ("MILLISECONDS", 1_000_000),
    ("SECONDS", NANOS_PER_SEC),
    ("MINUTES", 60 * NANOS_PER_SEC),
    ("HOURS", 3_600 * NANOS_PER_SEC),
    ("DAYS", 86_400 * NANOS_PER_SEC),
];

/// The date, time and timestamp forms of one job section.
#[derive(Debug, Clone)]
pub struct Temporal {
    timestamp: Form,
    date: Form,
    time: Form,
    zone: TimeZone,
    /// `timeZone` as given (`UTC`, `Europe/Paris`, `+02:00`), for messages and zone ids.
    zone_name: String,
    /// Whether timestamps are written and read as the rest of the codec does (the default
    /// form in UTC, milliseconds since 1970): checked once here, not per value.
    plain_timestamps: bool,
    /// Whether `zone` is UTC (compared once).
    is_utc: bool,
    /// Nanoseconds in one `unit`.
    unit: i128,
    /// `epoch`, in nanoseconds since 1970.
    epoch: i128,
    /// `epoch`'s local date, which a time is put on to make it an instant.
    epoch_date: civil::Date,
}

impl Default for Temporal {
    fn default() -> Self {
        Self {
            timestamp: Form::Default,
            date: Form::Default,
            time: Form::Default,
            zone: TimeZone::UTC,
            zone_name: "UTC".into(),
            plain_timestamps: true,
            is_utc: true,
            unit: 1_000_000,
            epoch: 0,
            epoch_date: civil::date(1970, 1, 1),
        }
    }
}

/// The keys of a section, as given.
#[derive(Debug, Default, Clone, Copy)]
pub struct TemporalKeys<'a> {
    pub timestamp: Option<&'a str>,
    pub date: Option<&'a str>,
    pub time: Option<&'a str>,
    pub time_zone: Option<&'a str>,
    pub unit: Option<&'a str>,
    pub epoch: Option<&'a str>,
}

impl Temporal {
    /// Reads the keys; `Err((key, why))` names the key at fault.
    pub fn new(keys: TemporalKeys<'_>) -> Result<Self, (&'static str, String)> {
        let mut t = Temporal::default();
        if let Some(z) = keys.time_zone {
            let z = z.trim();
            t.zone = zone(z).map_err(|e| ("timeZone", e))?;
            t.zone_name = z.to_string();
        }
        if let Some(u) = keys.unit {
            let name = u.trim().to_ascii_uppercase();
            t.unit = UNITS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, ns)| *ns)
                .ok_or_else(|| {
                    (
                        "unit",
                        format!(
                            "must be one of {} (java.util.concurrent.TimeUnit's names, as DSBulk's codec.unit), not {}",
                            UNITS.map(|(n, _)| n).join(", "),
                            echo(u)
                        ),
                    )
                })?;
        }
        if let Some(e) = keys.epoch {
            let (ns, date) = epoch(e.trim()).map_err(|why| ("epoch", why))?;
            t.epoch = ns;
            t.epoch_date = date;
        }
        for (kind, given) in [
            (Kind::Timestamp, keys.timestamp),
            (Kind::Date, keys.date),
            (Kind::Time, keys.time),
        ] {
            if let Some(g) = given {
                let form = form(kind, g).map_err(|e| (kind.key(), e))?;
                match kind {
                    Kind::Timestamp => t.timestamp = form,
                    Kind::Date => t.date = form,
                    Kind::Time => t.time = form,
                }
            }
        }
        t.is_utc = t.zone == TimeZone::UTC;
        t.plain_timestamps = t.timestamp == Form::Default && t.utc() && t.default_units();
        Ok(t)
    }

    /// Whether every form is DSBulk's default in UTC with milliseconds since 1970: the rest of
    /// the codec then reads and writes as it always has.
    fn default_units(&self) -> bool {
        self.unit == 1_000_000 && self.epoch == 0
    }

    fn utc(&self) -> bool {
        self.is_utc
    }

    /// Whether a writetime (microseconds) written in the timestamp form reads back exactly,
    /// for every writetime: the default and ISO forms write every digit, units must be
    /// microseconds or finer, a pattern needs six or more fraction digits (or `n`).
    pub fn holds_microseconds(&self) -> bool {
        match &self.timestamp {
            Form::Default | Form::Iso(_) => true,
            Form::Units => self.unit <= 1_000 && self.epoch % 1_000 == 0,
            Form::Pattern(p) => p.fraction_digits() >= 6,
        }
    }

    // ---- writing ----

    /// A timestamp (milliseconds since 1970).
    pub fn timestamp_text(&self, ms: i64) -> Result<Option<String>, String> {
        if self.timestamp == Form::Default && self.utc() {
            return Ok(None);
        }
        self.instant_text(i128::from(ms) * 1_000_000, "timestamp")
            .map(Some)
    }

    /// A writetime (microseconds since 1970); `None` in the default form.
    pub fn writetime_text(&self, micros: i64) -> Result<Option<String>, String> {
        if self.timestamp == Form::Default && self.utc() {
            return Ok(None);
        }
        self.instant_text(i128::from(micros) * 1_000, "writetime")
            .map(Some)
    }

    fn instant_text(&self, ns: i128, what: &str) -> Result<String, String> {
        let text = match &self.timestamp {
            Form::Default | Form::Iso(Iso::OffsetDateTime) => iso_zoned(&self.at(ns)?, false),
            Form::Iso(Iso::ZonedDateTime) => iso_zoned(&self.at(ns)?, true),
            Form::Iso(Iso::LocalDateTime) => {
                let z = self.at(ns)?;
                format!("{}T{}", iso_date(z.date()), iso_time(z.time()))
            }
            Form::Iso(Iso::Instant) => {
                let z = Timestamp::from_nanosecond(ns)
                    .map_err(|_| self.unwritable(what, ns))?
                    .to_zoned(TimeZone::UTC);
                format!(
                    "{}T{:02}:{:02}:{:02}{}Z",
                    iso_date(z.date()),
                    z.hour(),
                    z.minute(),
                    z.second(),
                    grouped_fraction(z.subsec_nanosecond() as u32)
                )
            }
            Form::Iso(_) => unreachable!("date and time forms are not timestamp forms"),
            Form::Units => self.units_text(ns - self.epoch, what)?,
            Form::Pattern(p) => p.format(&(&self.at(ns)?).into()),
        };
        let back = self.parse_instant(&text).map_err(|e| {
            format!(
                "the {what} {} written as {} does not read back in the timestamp form {}: {e}",
                instant_echo(ns),
                echo(&text),
                self.describe(Kind::Timestamp),
            )
        })?;
        if back != ns {
            return Err(format!(
                "the {what} {} written as {} would read back as {}: the timestamp form {} drops part of it{}",
                instant_echo(ns),
                echo(&text),
                instant_echo(back),
                self.describe(Kind::Timestamp),
                self.advice(Kind::Timestamp),
            ));
        }
        Ok(text)
    }

    /// A date (days since 1970); `None` in the default form.
    pub fn date_text(&self, days: i64) -> Result<Option<String>, String> {
        let text = match &self.date {
            Form::Default | Form::Iso(Iso::Date) => return Ok(None),
            Form::Iso(Iso::BasicDate) => {
                let d = jiff_date(days).ok_or_else(|| self.unwritable_date(days))?;
                if d.year() < 0 {
                    return Err(self.unwritable_date(days));
                }
                format!("{:04}{:02}{:02}", d.year(), d.month(), d.day())
            }
            Form::Iso(_) => unreachable!("timestamp and time forms are not date forms"),
            Form::Units => {
                let start = jiff_date(days)
                    .and_then(|d| d.to_zoned(self.zone.clone()).ok())
                    .ok_or_else(|| self.unwritable_date(days))?;
                self.units_text(start.timestamp().as_nanosecond() - self.epoch, "date")?
            }
            Form::Pattern(p) => {
                let d = jiff_date(days).ok_or_else(|| self.unwritable_date(days))?;
                p.format(&Moment {
                    dt: d.to_datetime(civil::Time::MIN),
                    offset: 0,
                    zone_id: None,
                })
            }
        };
        let back = self.parse_date(&text)?;
        if back != days {
            return Err(format!(
                "the date {} written as {} would read back as {}: the date form {} drops part of it",
                date_text(days),
                echo(&text),
                date_text(back),
                self.describe(Kind::Date)
            ));
        }
        Ok(Some(text))
    }

    /// A time (nanoseconds since midnight); `None` in the default form.
    pub fn time_text(&self, nanos: i64) -> Result<Option<String>, String> {
        let time = || {
            civil::Time::MIN
                .checked_add(jiff::SignedDuration::from_nanos(nanos))
                .map_err(|_| format!("{nanos} ns is not a time of day"))
        };
        let text = match &self.time {
            Form::Default | Form::Iso(Iso::Time) => return Ok(None),
            Form::Iso(_) => unreachable!("timestamp and date forms are not time forms"),
            Form::Units => {
                let at = self
                    .epoch_date
                    .to_datetime(time()?)
                    .to_zoned(self.zone.clone())
                    .map_err(|e| e.to_string())?;
                self.units_text(at.timestamp().as_nanosecond() - self.epoch, "time")?
            }
            Form::Pattern(p) => {
                p.format(&Moment {
                dt: self.epoch_date.to_datetime(time()?),
                offset: 0,
                zone_id: None,
            })
            }
        };
        let back = self.parse_time(&text)?;
        if back != nanos {
            return Err(format!(
                "the time {} written as {} would read back as {}: the time form {} drops part of it{}",
                time_text(nanos),
                echo(&text),
                time_text(back),
                self.describe(Kind::Time),
                self.advice(Kind::Time)
            ));
        }
        Ok(Some(text))
    }

    fn units_text(&self, since_epoch: i128, what: &str) -> Result<String, String> {
        if since_epoch % self.unit != 0 {
            return Err(format!(
                "the {what} is not a whole number of {} since {}: UNITS_SINCE_EPOCH would drop part of it; choose a finer unit",
                self.unit_name(),
                instant_echo(self.epoch)
            ));
        }
        Ok((since_epoch / self.unit).to_string())
    }

    /// An instant in `timeZone`.
    fn at(&self, ns: i128) -> Result<jiff::Zoned, String> {
        Timestamp::from_nanosecond(ns)
            .map(|t| t.to_zoned(self.zone.clone()))
            .map_err(|_| self.unwritable("timestamp", ns))
    }

    fn unwritable(&self, what: &str, ns: i128) -> String {
        format!(
            "the {what} {} is outside the years -9999 to 9999, which only the default timestamp form in UTC writes (the form is {})",
            instant_echo(ns),
            self.describe(Kind::Timestamp)
        )
    }

    fn unwritable_date(&self, days: i64) -> String {
        format!(
            "the date {} is outside the years -9999 to 9999 (0 to 9999 for BASIC_ISO_DATE), which a date form other than the default ({}) can write",
            date_text(days),
            self.describe(Kind::Date)
        )
    }

    // ---- reading ----

    /// Milliseconds since 1970; `None` when the default reader applies.
    pub fn parse_timestamp(&self, s: &str) -> Result<Option<i64>, String> {
        self.parse_scaled(s, 1_000_000, "milliseconds", "a timestamp")
    }

    /// Microseconds since 1970; `None` when the default reader applies.
    pub fn parse_writetime(&self, s: &str) -> Result<Option<i64>, String> {
        self.parse_scaled(s, 1_000, "microseconds", "a writetime")
    }

    /// A timestamp in `ns_per` nanoseconds (`unit`, for messages) since 1970, as `what`
    /// holds it.
    fn parse_scaled(
        &self,
        s: &str,
        ns_per: i128,
        unit: &str,
        what: &str,
    ) -> Result<Option<i64>, String> {
        if self.plain_timestamps {
            return Ok(None);
        }
        let ns = self.parse_instant(s.trim())?;
        if ns % ns_per != 0 {
            return Err(format!(
                "{} has digits beyond {unit}, which {what} cannot hold",
                echo(s)
            ));
        }
        i64::try_from(ns / ns_per)
            .map(Some)
            .map_err(|_| format!("{} is out of range for {what}", echo(s)))
    }

    /// Nanoseconds since 1970 of a timestamp in the timestamp form; an integer is a number of
    /// `unit`s since `epoch` whatever the form, as DSBulk reads one.
    fn parse_instant(&self, t: &str) -> Result<i128, String> {
        let wanted = || {
            format!(
                "expected a timestamp in the form {}, got {}",
                self.describe(Kind::Timestamp),
                echo(t)
            )
        };
        let units = || -> Result<i128, String> {
            let n: i128 = t.parse().map_err(|_| wanted())?;
            n.checked_mul(self.unit)
                .and_then(|x| x.checked_add(self.epoch))
                .ok_or_else(|| format!("{} is out of range for a timestamp", echo(t)))
        };
        match &self.timestamp {
            Form::Units => units(),
            Form::Pattern(p) => match p.parse(t, self) {
                Ok(ns) => Ok(ns),
                Err(_) if is_plain_integer(t) => units(),
                Err(e) => Err(format!("{}: {e}", wanted())),
            },
            Form::Default | Form::Iso(_) => {
                if is_plain_integer(t) {
                    return units();
                }
                self.parse_iso(t).ok_or_else(wanted)
            }
        }
    }

    /// An ISO 8601 date and time (see `read::parse_instant_nanos`), then an optional zone id
    /// in brackets; without an offset, the local time of the bracketed zone or `timeZone`.
    fn parse_iso(&self, t: &str) -> Option<i128> {
        let (body, zone_id) = match t.strip_suffix(']').and_then(|r| r.rsplit_once('[')) {
            Some((body, id)) => (body, Some(zone(id).ok()?)),
            None => (t, None),
        };
        let (days, rest) = parse_date_prefix(body)?;
        let (tod, rest) = match rest.as_bytes().first() {
            Some(b'T' | b't' | b' ') => parse_time_prefix(&rest[1..])?,
            _ => (0, rest),
        };
        if rest.trim().is_empty() {
            let zone = zone_id.unwrap_or_else(|| self.zone.clone());
            let local = jiff_date(days)?.to_datetime(
                civil::Time::MIN
                    .checked_add(jiff::SignedDuration::from_nanos(tod))
                    .ok()?,
            );
            return Some(local.to_zoned(zone).ok()?.timestamp().as_nanosecond());
        }
        let offset = parse_zone(rest)?;
        Some((i128::from(days) * 86_400 - i128::from(offset)) * NANOS_PER_SEC + i128::from(tod))
    }

    /// Days since 1970.
    pub fn parse_date(&self, s: &str) -> Result<i64, String> {
        let t = s.trim();
        let wanted = || {
            format!(
                "expected a date in the form {}, got {}",
                self.describe(Kind::Date),
                echo(s)
            )
        };
        let days = match &self.date {
            Form::Default | Form::Iso(Iso::Date) => match parse_date_prefix(t) {
                Some((days, "")) => days,
                _ => return Err(wanted()),
            },
            Form::Iso(Iso::BasicDate) => {
                let b = t.as_bytes();
                if b.len() != 8 || !b.iter().all(u8::is_ascii_digit) {
                    return Err(wanted());
                }
                let iso = format!("{}-{}-{}", &t[..4], &t[4..6], &t[6..]);
                match parse_date_prefix(&iso) {
                    Some((days, "")) => days,
                    _ => return Err(wanted()),
                }
            }
            Form::Iso(_) => unreachable!("timestamp and time forms are not date forms"),
            Form::Units => {
                let ns = self.units_instant(t).ok_or_else(wanted)?;
                let z = self.at(ns).map_err(|_| wanted())?;
                days_of(z.date())
            }
            Form::Pattern(p) => {
                let fields = p.fields(t).map_err(|e| format!("{}: {e}", wanted()))?;
                days_of(fields.date().map_err(|e| format!("{}: {e}", wanted()))?)
            }
        };
        if u32::try_from(days + DATE_EPOCH).is_err() {
            return Err(format!("{} is out of range for a date", echo(s)));
        }
        Ok(days)
    }

    /// Nanoseconds since midnight.
    pub fn parse_time(&self, s: &str) -> Result<i64, String> {
        let t = s.trim();
        let wanted = || {
            format!(
                "expected a time in the form {}, got {}",
                self.describe(Kind::Time),
                echo(s)
            )
        };
        match &self.time {
            Form::Default | Form::Iso(Iso::Time) => match parse_time_prefix(t) {
                Some((ns, "")) => Ok(ns),
                _ => Err(wanted()),
            },
            Form::Iso(_) => unreachable!("timestamp and date forms are not time forms"),
            Form::Units => {
                let ns = self.units_instant(t).ok_or_else(wanted)?;
                let z = self.at(ns).map_err(|_| wanted())?;
                Ok(nanos_of(z.time()))
            }
            Form::Pattern(p) => {
                let fields = p.fields(t).map_err(|e| format!("{}: {e}", wanted()))?;
                Ok(nanos_of(fields.time().map_err(|e| format!("{}: {e}", wanted()))?))
            }
        }
    }

    fn units_instant(&self, t: &str) -> Option<i128> {
        if !is_plain_integer(t) {
            return None;
        }
        t.parse::<i128>()
            .ok()?
            .checked_mul(self.unit)?
            .checked_add(self.epoch)
    }

    /// Whether the default date and time readers apply (the rest of the codec's).
    pub fn default_date(&self) -> bool {
        matches!(self.date, Form::Default | Form::Iso(Iso::Date))
    }

    pub fn default_time(&self) -> bool {
        matches!(self.time, Form::Default | Form::Iso(Iso::Time))
    }

    // ---- messages ----

    fn describe(&self, kind: Kind) -> String {
        let form = match kind {
            Kind::Timestamp => &self.timestamp,
            Kind::Date => &self.date,
            Kind::Time => &self.time,
        };
        let name = match form {
            Form::Default => kind.default_name().to_string(),
            Form::Units => format!(
                "UNITS_SINCE_EPOCH ({} since {})",
                self.unit_name(),
                instant_echo(self.epoch)
            ),
            Form::Iso(iso) => kind
                .isos()
                .iter()
                .find(|(_, i)| i == iso)
                .map_or("ISO", |(n, _)| n)
                .to_string(),
            Form::Pattern(p) => format!("{:?}", p.text),
        };
        if kind == Kind::Timestamp && !self.utc() {
            format!("{name} in {}", self.zone_name)
        } else {
            name
        }
    }

    fn advice(&self, kind: Kind) -> &'static str {
        match (kind, self.zone.iana_name().is_some() && !self.utc()) {
            (Kind::Timestamp, true) => {
                " (a fraction of a second too short, or a local time that daylight saving time repeats, which only an offset such as XXX tells apart)"
            }
            _ => " (add fraction digits, such as .SSS, or choose a finer unit)",
        }
    }

    fn unit_name(&self) -> &'static str {
        UNITS
            .iter()
            .find(|(_, ns)| *ns == self.unit)
            .map_or("?", |(n, _)| n)
    }
}

/// `timeZone`: `UTC`, `Z`, `GMT`, an offset (`+02:00`, `UTC+2`), or a tz database id.
fn zone(z: &str) -> Result<TimeZone, String> {
    if matches!(z, "UTC" | "Z" | "GMT" | "UT") {
        return Ok(TimeZone::UTC);
    }
    let offset = z
        .strip_prefix("UTC")
        .or_else(|| z.strip_prefix("GMT"))
        .unwrap_or(z);
    if offset.starts_with(['+', '-']) {
        let secs = parse_zone(offset).or_else(|| {
            // `+2`, as java.time's ZoneId reads `UTC+2`.
            let (sign, h) = offset.split_at(1);
            let h: i64 = h.parse().ok().filter(|h| (0..=18).contains(h))?;
            Some(if sign == "-" { -h * 3600 } else { h * 3600 })
        });
        return secs
            .and_then(|s| jiff::tz::Offset::from_seconds(s as i32).ok())
            .map(TimeZone::fixed)
            .ok_or_else(|| format!("{} is not an offset such as +02:00", echo(z)));
    }
    TimeZone::get(z).map_err(|_| {
        format!(
            "{} is not a time zone: give UTC, an offset such as +02:00, or an id of the tz database such as Europe/Paris",
            echo(z)
        )
    })
}

/// `epoch`: an ISO zoned date and time, as DSBulk's `codec.epoch`.
fn epoch(e: &str) -> Result<(i128, civil::Date), String> {
    let wanted = || {
        format!(
            "expected an instant such as 1970-01-01T00:00:00Z or 2000-01-01T00:00:00+01:00[Europe/Paris], got {}",
            echo(e)
        )
    };
    let (body, z) = match e.strip_suffix(']').and_then(|r| r.rsplit_once('[')) {
        Some((body, id)) => (body, Some(zone(id)?)),
        None => (e, None),
    };
    let (days, rest) = parse_date_prefix(body).ok_or_else(wanted)?;
    let (tod, rest) = match rest.as_bytes().first() {
        Some(b'T' | b't') => parse_time_prefix(&rest[1..]).ok_or_else(wanted)?,
        _ => return Err(wanted()),
    };
    let date = jiff_date(days).ok_or_else(wanted)?;
    let ns = match (parse_zone(rest), z) {
        (Some(offset), _) if !rest.is_empty() => {
            (i128::from(days) * 86_400 - i128::from(offset)) * NANOS_PER_SEC + i128::from(tod)
        }
        (_, Some(z)) if rest.is_empty() => date
            .to_datetime(civil::Time::MIN + jiff::SignedDuration::from_nanos(tod))
            .to_zoned(z)
            .map_err(|_| wanted())?
            .timestamp()
            .as_nanosecond(),
        _ => return Err(wanted()),
    };
    Ok((ns, date))
}

/// A form of `kind` by name or pattern.
fn form(kind: Kind, given: &str) -> Result<Form, String> {
    let trimmed = given.trim();
    // Formatter names in any case; a pattern is taken as it is.
    let upper;
    let g = if trimmed.contains('_') && trimmed.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_') {
        upper = trimmed.to_ascii_uppercase();
        upper.as_str()
    } else {
        trimmed
    };
    if g.is_empty() {
        return Err(format!(
            "is empty; give {}, UNITS_SINCE_EPOCH, an ISO formatter or a java.time pattern",
            kind.default_name()
        ));
    }
    if g == kind.default_name() {
        return Ok(Form::Default);
    }
    if g == "UNITS_SINCE_EPOCH" {
        return Ok(Form::Units);
    }
    if let Some((_, iso)) = kind.isos().iter().find(|(n, _)| *n == g) {
        return Ok(Form::Iso(*iso));
    }
    if g.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') && g.contains('_') {
        let names: Vec<&str> = std::iter::once(kind.default_name())
            .chain(["UNITS_SINCE_EPOCH"])
            .chain(kind.isos().iter().map(|(n, _)| *n))
            .collect();
        return Err(format!(
            "{} is not a {} formatter drover knows: give one of {}, or a java.time pattern such as {}",
            echo(g),
            kind.key(),
            names.join(", "),
            match kind {
                Kind::Timestamp => "yyyy-MM-dd HH:mm:ss.SSSXXX",
                Kind::Date => "dd/MM/yyyy",
                Kind::Time => "HH:mm:ss.SSS",
            }
        ));
    }
    Pattern::new(kind, g).map(Form::Pattern)
}

// ---- small helpers ----

/// The civil date `days` after 1970-01-01, when jiff holds it (years -9999 to 9999).
fn jiff_date(days: i64) -> Option<civil::Date> {
    let (y, m, d) = super::civil_from_days(days);
    civil::Date::new(i16::try_from(y).ok()?, m as i8, d as i8).ok()
}

fn days_of(d: civil::Date) -> i64 {
    i64::from(
        d.since(civil::date(1970, 1, 1))
            .map(|s| s.get_days())
            .unwrap_or_default(),
    )
}

fn nanos_of(t: civil::Time) -> i64 {
    let ns = t.duration_since(civil::Time::MIN).as_nanos();
    i64::try_from(ns).unwrap_or_default().rem_euclid(NANOS_PER_DAY)
}

fn iso_date(d: civil::Date) -> String {
    format!("{}-{:02}-{:02}", year_text(i64::from(d.year())), d.month(), d.day())
}

fn iso_time(t: civil::Time) -> String {
    time_text(nanos_of(t))
}

/// `ISO_OFFSET_DATE_TIME` (`Z` for a zero offset), and with `zone_id` the zone's id in
/// brackets when it is not a fixed offset, as `ISO_ZONED_DATE_TIME`.
fn iso_zoned(z: &jiff::Zoned, zone_id: bool) -> String {
    let secs = z.offset().seconds();
    let offset = if secs == 0 {
        "Z".to_string()
    } else {
        offset_text(secs)
    };
    let mut s = format!("{}T{}{offset}", iso_date(z.date()), iso_time(z.time()));
    if zone_id && let Some(id) = z.time_zone().iana_name() {
        s.push('[');
        s.push_str(id);
        s.push(']');
    }
    s
}

/// `+02:00`, `-00:30`, `+05:45:10` (seconds only when there are some).
fn offset_text(secs: i32) -> String {
    let a = secs.abs();
    let mut o = format!(
        "{}{:02}:{:02}",
        if secs < 0 { '-' } else { '+' },
        a / 3600,
        a / 60 % 60
    );
    if a % 60 != 0 {
        o.push_str(&format!(":{:02}", a % 60));
    }
    o
}

/// `.120` rather than `.12`: `ISO_INSTANT` writes digits in groups of three.
fn grouped_fraction(nanos: u32) -> String {
    if nanos == 0 {
        String::new()
    } else if nanos.is_multiple_of(1_000_000) {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    }
}

/// An instant for a message, in UTC.
fn instant_echo(ns: i128) -> String {
    let secs = ns.div_euclid(NANOS_PER_SEC);
    let nanos = ns.rem_euclid(NANOS_PER_SEC) as u32;
    match i64::try_from(secs) {
        Ok(secs) => super::write::instant_text(secs, nanos),
        Err(_) => format!("{ns} ns since 1970"),
    }
}

#[cfg(test)]
mod tests;
