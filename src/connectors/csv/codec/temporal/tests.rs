use proptest::prelude::*;
use scylla::cluster::metadata::{ColumnType, NativeType};

use super::super::{Forms, from_text, to_text, writetime_text};
use super::*;

fn forms(keys: TemporalKeys<'_>) -> Forms {
    Forms {
        temporal: Temporal::new(keys).unwrap_or_else(|(k, e)| panic!("{k}: {e}")),
        ..Forms::default()
    }
}

fn refused(keys: TemporalKeys<'_>) -> (&'static str, String) {
    Temporal::new(keys).expect_err("refused")
}

const TS: ColumnType<'static> = ColumnType::Native(NativeType::Timestamp);
const DATE: ColumnType<'static> = ColumnType::Native(NativeType::Date);
const TIME: ColumnType<'static> = ColumnType::Native(NativeType::Time);

fn ms(iso: &str) -> i64 {
    iso.parse::<Timestamp>().unwrap().as_millisecond()
}

fn days(iso: &str) -> i64 {
    days_of(iso.parse::<civil::Date>().unwrap())
}

fn ts_text(f: &Forms, iso: &str) -> Result<String, String> {
    to_text(&TS, &ms(iso).to_be_bytes(), f)
}

fn ts_read(f: &Forms, s: &str) -> Result<String, String> {
    let b = from_text(&TS, s, f)?;
    let ms = i64::from_be_bytes(b.try_into().unwrap());
    Ok(Timestamp::from_millisecond(ms).unwrap().to_string())
}

fn date_bytes(iso: &str) -> Vec<u8> {
    ((days(iso) + DATE_EPOCH) as u32).to_be_bytes().to_vec()
}

fn time_bytes(h: i64, m: i64, s: i64, ns: i64) -> Vec<u8> {
    (((h * 60 + m) * 60 + s) * 1_000_000_000 + ns)
        .to_be_bytes()
        .to_vec()
}

/// DSBulk's own end-to-end test of patterns (`temporal.csv`, `temporal_roundtrip`), in
/// English: a date pattern with names, a time without separators, ISO_ZONED_DATE_TIME in a
/// zone with daylight saving time.
#[test]
fn dsbulks_pattern_roundtrip_reads_and_writes_what_its_test_expects() {
    let f = forms(TemporalKeys {
        timestamp: Some("ISO_ZONED_DATE_TIME"),
        date: Some("cccc, d MMMM uuuu"),
        time: Some("HHmmssSSS"),
        time_zone: Some("Europe/Paris"),
        unit: Some("SECONDS"),
        ..Default::default()
    });
    let date = date_bytes("2018-03-09");
    assert_eq!(to_text(&DATE, &date, &f).unwrap(), "Friday, 9 March 2018");
    assert_eq!(from_text(&DATE, "Friday, 9 March 2018", &f).unwrap(), date);
    let time = time_bytes(17, 12, 32, 584_000_000);
    assert_eq!(to_text(&TIME, &time, &f).unwrap(), "171232584");
    assert_eq!(from_text(&TIME, "171232584", &f).unwrap(), time);
    assert_eq!(
        ts_text(&f, "2018-03-09T16:12:32Z").unwrap(),
        "2018-03-09T17:12:32+01:00[Europe/Paris]"
    );
    assert_eq!(
        ts_read(&f, "2018-03-09T17:12:32.000+01:00[Europe/Paris]").unwrap(),
        "2018-03-09T16:12:32Z"
    );
}

/// DSBulk's `temporal_roundtrip_numeric` (`temporal-numeric.csv`): minutes since 2000 in
/// Paris, across the day daylight saving time starts.
#[test]
fn units_since_epoch_read_and_write_what_dsbulks_numeric_test_expects() {
    let f = forms(TemporalKeys {
        timestamp: Some("UNITS_SINCE_EPOCH"),
        date: Some("UNITS_SINCE_EPOCH"),
        time: Some("UNITS_SINCE_EPOCH"),
        time_zone: Some("Europe/Paris"),
        unit: Some("MINUTES"),
        epoch: Some("2000-01-01T00:00:00+01:00[Europe/Paris]"),
    });
    assert_eq!(from_text(&DATE, "11520", &f).unwrap(), date_bytes("2000-01-09"));
    assert_eq!(from_text(&TIME, "123", &f).unwrap(), time_bytes(2, 3, 0, 0));
    assert_eq!(ts_read(&f, "123456").unwrap(), "2000-03-26T16:36:00Z");
    assert_eq!(to_text(&DATE, &date_bytes("2000-01-09"), &f).unwrap(), "11520");
    assert_eq!(to_text(&TIME, &time_bytes(2, 3, 0, 0), &f).unwrap(), "123");
    assert_eq!(ts_text(&f, "2000-03-26T16:36:00Z").unwrap(), "123456");
    // A second is not a whole number of minutes: refused, not rounded.
    let e = ts_text(&f, "2000-03-26T16:36:01Z").unwrap_err();
    assert!(e.contains("not a whole number of MINUTES"), "{e}");
    let e = to_text(&TIME, &time_bytes(2, 3, 1, 0), &f).unwrap_err();
    assert!(e.contains("MINUTES"), "{e}");
}

#[test]
fn a_pattern_that_drops_part_of_a_value_fails_naming_it_and_one_that_holds_it_writes() {
    let f = forms(TemporalKeys {
        timestamp: Some("yyyy-MM-dd HH:mm:ss"),
        ..Default::default()
    });
    assert_eq!(
        ts_text(&f, "2021-01-11T11:01:01Z").unwrap(),
        "2021-01-11 11:01:01"
    );
    let e = ts_text(&f, "2021-01-11T11:01:01.001Z").unwrap_err();
    assert!(
        e.contains("2021-01-11T11:01:01.001Z") && e.contains("\"yyyy-MM-dd HH:mm:ss\""),
        "{e}"
    );
    let f = forms(TemporalKeys {
        timestamp: Some("yyyy-MM-dd HH:mm:ss.SSS"),
        ..Default::default()
    });
    assert_eq!(
        ts_text(&f, "2021-01-11T11:01:01.001Z").unwrap(),
        "2021-01-11 11:01:01.001"
    );
    assert_eq!(
        ts_read(&f, "2021-01-11 11:01:01.001").unwrap(),
        "2021-01-11T11:01:01.001Z"
    );
    // A writetime has microseconds: .SSS holds none, .SSSSSS all of them.
    assert!(!f.temporal.holds_microseconds());
    let e = writetime_text(1_000_001, &f).unwrap_err();
    assert!(e.contains("writetime"), "{e}");
    let f = forms(TemporalKeys {
        timestamp: Some("yyyy-MM-dd HH:mm:ss.SSSSSS"),
        ..Default::default()
    });
    assert!(f.temporal.holds_microseconds());
    assert_eq!(
        writetime_text(1_000_001, &f).unwrap(),
        "1970-01-01 00:00:01.000001"
    );
    assert_eq!(
        super::super::parse_writetime("1970-01-01 00:00:01.000001", &f).unwrap(),
        1_000_001
    );
}

#[test]
fn a_two_digit_year_is_2000_to_2099_at_both_ends_and_refused_past_them() {
    let f = forms(TemporalKeys {
        date: Some("dd/MM/yy"),
        ..Default::default()
    });
    for (iso, text) in [("2000-01-01", "01/01/00"), ("2099-12-31", "31/12/99")] {
        assert_eq!(to_text(&DATE, &date_bytes(iso), &f).unwrap(), text);
        assert_eq!(from_text(&DATE, text, &f).unwrap(), date_bytes(iso));
    }
    for iso in ["1999-12-31", "2100-01-01"] {
        let e = to_text(&DATE, &date_bytes(iso), &f).unwrap_err();
        assert!(e.contains(iso) && e.contains("drops part of it"), "{e}");
    }
}

#[test]
fn a_local_time_that_daylight_saving_time_repeats_is_refused_and_an_offset_tells_it_apart() {
    let keys = TemporalKeys {
        timestamp: Some("yyyy-MM-dd HH:mm"),
        time_zone: Some("Europe/Paris"),
        ..Default::default()
    };
    let f = forms(keys);
    // 02:30 happens twice on 2021-10-31 in Paris: first at +02:00, then at +01:00.
    assert_eq!(
        ts_text(&f, "2021-10-31T00:30:00Z").unwrap(),
        "2021-10-31 02:30"
    );
    let e = ts_text(&f, "2021-10-31T01:30:00Z").unwrap_err();
    assert!(e.contains("daylight saving"), "{e}");
    let f = forms(TemporalKeys {
        timestamp: Some("yyyy-MM-dd HH:mmXXX"),
        ..keys
    });
    assert_eq!(
        ts_text(&f, "2021-10-31T01:30:00Z").unwrap(),
        "2021-10-31 02:30+01:00"
    );
    assert_eq!(
        ts_read(&f, "2021-10-31 02:30+01:00").unwrap(),
        "2021-10-31T01:30:00Z"
    );
}

#[test]
fn the_default_form_in_another_zone_writes_offsets_and_reads_local_times_there() {
    let f = forms(TemporalKeys {
        time_zone: Some("Europe/Paris"),
        ..Default::default()
    });
    assert_eq!(
        ts_text(&f, "2021-06-01T10:00:00.12Z").unwrap(),
        "2021-06-01T12:00:00.12+02:00"
    );
    assert_eq!(ts_read(&f, "2021-06-01 12:00").unwrap(), "2021-06-01T10:00:00Z");
    assert_eq!(ts_read(&f, "2021-06-01T12:00Z").unwrap(), "2021-06-01T12:00:00Z");
    assert_eq!(ts_read(&f, "1000").unwrap(), "1970-01-01T00:00:01Z");
    // Dates and times are local values: the zone does not touch them.
    assert_eq!(
        to_text(&DATE, &date_bytes("2021-06-01"), &f).unwrap(),
        "2021-06-01"
    );
}

#[test]
fn iso_formatters_write_as_java_time_does() {
    let at = |name: &str, zone: &str| {
        let f = forms(TemporalKeys {
            timestamp: Some(name),
            time_zone: Some(zone),
            ..Default::default()
        });
        let text = ts_text(&f, "2021-06-01T10:00:00.12Z").unwrap();
        assert_eq!(ts_read(&f, &text).unwrap(), "2021-06-01T10:00:00.12Z");
        text
    };
    assert_eq!(at("ISO_INSTANT", "Europe/Paris"), "2021-06-01T10:00:00.120Z");
    assert_eq!(
        at("ISO_OFFSET_DATE_TIME", "Europe/Paris"),
        "2021-06-01T12:00:00.12+02:00"
    );
    assert_eq!(
        at("iso_zoned_date_time", "UTC"),
        "2021-06-01T10:00:00.12Z[UTC]"
    );
    assert_eq!(
        at("ISO_DATE_TIME", "+05:45"),
        "2021-06-01T15:45:00.12+05:45"
    );
    assert_eq!(
        at("ISO_LOCAL_DATE_TIME", "America/New_York"),
        "2021-06-01T06:00:00.12"
    );
    let f = forms(TemporalKeys {
        date: Some("BASIC_ISO_DATE"),
        ..Default::default()
    });
    assert_eq!(
        to_text(&DATE, &date_bytes("2024-02-29"), &f).unwrap(),
        "20240229"
    );
    assert_eq!(from_text(&DATE, "20240229", &f).unwrap(), date_bytes("2024-02-29"));
}

#[test]
fn pattern_letters_read_and_write_as_java_time_does() {
    let f = forms(TemporalKeys {
        timestamp: Some("EEE, d MMM yyyy hh:mm:ss.SSS a '(UTC)'['!']"),
        date: Some("yyyyMMdd"),
        time: Some("h:mm a"),
        ..Default::default()
    });
    assert_eq!(
        ts_text(&f, "2024-07-15T00:05:09.007Z").unwrap(),
        "Mon, 15 Jul 2024 12:05:09.007 AM (UTC)!"
    );
    assert_eq!(
        ts_read(&f, "mon, 15 jul 2024 12:05:09.007 pm (UTC)").unwrap(),
        "2024-07-15T12:05:09.007Z"
    );
    assert_eq!(
        to_text(&DATE, &date_bytes("0987-06-05"), &f).unwrap(),
        "09870605"
    );
    // The last day jiff holds (its timestamps stop a day short of it).
    assert_eq!(
        to_text(&DATE, &date_bytes("9999-12-31"), &f).unwrap(),
        "99991231"
    );
    let e = to_text(&DATE, &((2_932_897 + DATE_EPOCH) as u32).to_be_bytes(), &f).unwrap_err();
    assert!(e.contains("+10000-01-01") && e.contains("outside the years"), "{e}");
    assert_eq!(from_text(&DATE, "09870605", &f).unwrap(), date_bytes("0987-06-05"));
    assert_eq!(to_text(&TIME, &time_bytes(13, 4, 0, 0), &f).unwrap(), "1:04 PM");
    assert_eq!(from_text(&TIME, "12:59 AM", &f).unwrap(), time_bytes(0, 59, 0, 0));
    // Without a date, a timestamp is on the epoch's day.
    let f = forms(TemporalKeys {
        timestamp: Some("HH:mm"),
        epoch: Some("2000-01-01T00:00:00Z"),
        ..Default::default()
    });
    assert_eq!(ts_read(&f, "10:30").unwrap(), "2000-01-01T10:30:00Z");
    // An integer is units since the epoch whatever the form, as DSBulk reads one.
    assert_eq!(ts_read(&f, "1000").unwrap(), "2000-01-01T00:00:01Z");
    let e = from_text(&TS, "10h30", &f).unwrap_err();
    assert!(e.contains("\"HH:mm\"") && e.contains("10h30"), "{e}");
}

#[test]
fn bad_forms_are_refused_naming_the_key_and_what_is_wrong() {
    let cases: [(TemporalKeys<'_>, &str, &str); 10] = [
        (TemporalKeys { timestamp: Some("ISO_WEEK_DATE"), ..Default::default() }, "timestamp", "ISO_INSTANT"),
        (TemporalKeys { date: Some("CQL_TIMESTAMP"), ..Default::default() }, "date", "ISO_LOCAL_DATE"),
        (TemporalKeys { timestamp: Some("yyyy-MM-dd'T"), ..Default::default() }, "timestamp", "does not close"),
        (TemporalKeys { timestamp: Some("yyyy-MM-ddTHH"), ..Default::default() }, "timestamp", "the letter T"),
        (TemporalKeys { date: Some("yyyy-MM-dd HH"), ..Default::default() }, "date", "only date letters"),
        (TemporalKeys { time: Some("mm:ss"), ..Default::default() }, "time", "without an hour"),
        (TemporalKeys { timestamp: Some("yyyy-MM HH:mm"), ..Default::default() }, "timestamp", "part of a date"),
        (TemporalKeys { time_zone: Some("Mars/Olympus"), ..Default::default() }, "timeZone", "tz database"),
        (TemporalKeys { unit: Some("WEEKS"), ..Default::default() }, "unit", "MILLISECONDS"),
        (TemporalKeys { epoch: Some("2000-01-01"), ..Default::default() }, "epoch", "1970-01-01T00:00:00Z"),
    ];
    for (keys, key, says) in cases {
        let (k, e) = refused(keys);
        assert_eq!(k, key, "{e}");
        assert!(e.contains(says), "{key}: {e}");
    }
}

#[test]
fn zones_are_utc_offsets_or_tz_database_ids() {
    for (z, offset_at_noon_june) in [
        ("UTC", 0),
        ("Z", 0),
        ("+02:00", 7200),
        ("UTC+2", 7200),
        ("GMT-05:30", -19800),
        ("Asia/Kathmandu", 20700),
    ] {
        let tz = zone(z).unwrap();
        let t: Timestamp = "2021-06-01T12:00:00Z".parse().unwrap();
        assert_eq!(tz.to_offset(t).seconds(), offset_at_noon_june, "{z}");
    }
}

fn zones() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("UTC"),
        Just("Europe/Paris"),
        Just("America/New_York"),
        Just("Australia/Lord_Howe"),
        Just("+05:45"),
    ]
}

proptest! {
    /// Every timestamp from 1912 (before it, zones were on local mean time, offsets with
    /// seconds, which XXX and xx do not write: such a value fails the job) to the end of year
    /// 9999, written in a pattern with an offset or a zone id, in any zone, reads back to the
    /// same millisecond.
    #[test]
    fn a_pattern_with_an_offset_writes_every_timestamp_exactly(
        ms in -1_830_297_600_000i64..=253_402_300_799_999,
        z in zones(),
        pattern in prop_oneof![
            Just("uuuu-MM-dd'T'HH:mm:ss.SSSXXX"),
            Just("yyyyMMddHHmmssSSSxx"),
            Just("d MMMM yyyy HH:mm:ss.SSS VV"),
            Just("ISO_ZONED_DATE_TIME"),
            Just("ISO_INSTANT"),
        ],
    ) {
        let f = forms(TemporalKeys { timestamp: Some(pattern), time_zone: Some(z), ..Default::default() });
        let v = ms.to_be_bytes();
        let text = to_text(&TS, &v, &f).map_err(TestCaseError::fail)?;
        prop_assert_eq!(from_text(&TS, &text, &f).map_err(TestCaseError::fail)?, v.to_vec(), "{}", text);
    }

    /// Every date jiff holds reads back from a pattern's text, and from its number of
    /// seconds since the epoch to its start in any zone (local mean times included).
    #[test]
    fn every_date_reads_back_from_a_pattern_and_from_units(
        days in -4_371_587i64..=2_932_896,
        z in zones(),
    ) {
        let v = ((days + DATE_EPOCH) as u32).to_be_bytes();
        for keys in [
            TemporalKeys { date: Some("uuuu-DDD"), ..Default::default() },
            TemporalKeys { date: Some("UNITS_SINCE_EPOCH"), unit: Some("SECONDS"), time_zone: Some(z), ..Default::default() },
        ] {
            let f = forms(keys);
            let text = to_text(&DATE, &v, &f).map_err(TestCaseError::fail)?;
            prop_assert_eq!(from_text(&DATE, &text, &f).map_err(TestCaseError::fail)?, v.to_vec(), "{}", text);
        }
    }
}

#[test]
fn a_pattern_is_read_up_to_its_bounds_and_refused_past_them() {
    use super::pattern::{MAX_OPTIONAL_DEPTH, MAX_PATTERN_CHARS};
    let keys = |p: &str| -> Result<Temporal, (&'static str, String)> {
        Temporal::new(TemporalKeys {
            timestamp: Some(p),
            ..Default::default()
        })
    };
    let long = format!("yyyy-MM-dd{}", "'x'".repeat((MAX_PATTERN_CHARS - 10) / 3));
    let at = format!("{long}{}", "-".repeat(MAX_PATTERN_CHARS - long.chars().count()));
    assert!(keys(&at).is_ok());
    let (_, e) = keys(&format!("{at}-")).unwrap_err();
    assert!(e.contains("257 characters"), "{e}");
    let nest = |depth: usize| format!("HH{}{}", "[:mm".repeat(depth), "]".repeat(depth));
    assert!(keys(&nest(MAX_OPTIONAL_DEPTH)).is_ok());
    let (_, e) = keys(&nest(MAX_OPTIONAL_DEPTH + 1)).unwrap_err();
    assert!(e.contains("deeper than 4"), "{e}");
    // What a job file could hold: refused, not a stack overflow.
    assert!(keys(&"[".repeat(100_000)).is_err());
}
