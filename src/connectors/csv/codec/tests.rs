use std::borrow::Cow;
use std::sync::Arc;

use num_bigint::BigInt;
use proptest::prelude::*;
use scylla::cluster::metadata::UserDefinedType;
use serde_json::json;

use super::*;

/// The default forms with blobs in `binary`.
fn blob_forms(binary: Binary) -> Forms {
    Forms {
        binary,
        ..Forms::default()
    }
}

/// [`super::to_text`] in the default forms.
fn to_text(t: &ColumnType<'_>, v: &[u8]) -> Result<String, String> {
    super::to_text(t, v, &Forms::default())
}

/// [`super::to_json`] in the default forms.
fn to_json(t: &ColumnType<'_>, v: &[u8]) -> Result<Value, String> {
    super::to_json(t, v, &Forms::default())
}

fn from_text(t: &ColumnType<'_>, s: &str) -> Result<Vec<u8>, String> {
    super::from_text(t, s, &Forms::default())
}

fn from_json(t: &ColumnType<'_>, v: &Value) -> Result<Vec<u8>, String> {
    super::from_json(t, v, &Forms::default())
}

fn from_json_text(t: &ColumnType<'_>, s: &str) -> Result<Vec<u8>, String> {
    super::from_json_text(t, s, &Forms::default())
}

fn writetime_text(micros: i64) -> String {
    super::writetime_text(micros, &Forms::default()).unwrap()
}

fn parse_writetime(s: &str) -> Result<i64, String> {
    super::parse_writetime(s, &Forms::default())
}

fn binaries() -> impl Strategy<Value = Binary> {
    prop_oneof![Just(Binary::Base64), Just(Binary::Hex)]
}

fn nat(n: NativeType) -> ColumnType<'static> {
    ColumnType::Native(n)
}

fn list(e: ColumnType<'static>) -> ColumnType<'static> {
    ColumnType::Collection {
        frozen: true,
        typ: CollectionType::List(Box::new(e)),
    }
}

fn set(e: ColumnType<'static>) -> ColumnType<'static> {
    ColumnType::Collection {
        frozen: true,
        typ: CollectionType::Set(Box::new(e)),
    }
}

fn map(k: ColumnType<'static>, v: ColumnType<'static>) -> ColumnType<'static> {
    ColumnType::Collection {
        frozen: true,
        typ: CollectionType::Map(Box::new(k), Box::new(v)),
    }
}

fn vector(t: ColumnType<'static>, dimensions: u16) -> ColumnType<'static> {
    ColumnType::Vector {
        typ: Box::new(t),
        dimensions,
    }
}

fn udt(fields: Vec<(&str, ColumnType<'static>)>) -> ColumnType<'static> {
    ColumnType::UserDefinedType {
        frozen: true,
        definition: Arc::new(UserDefinedType {
            name: "t".into(),
            keyspace: "ks".into(),
            field_types: fields
                .into_iter()
                .map(|(n, t)| (Cow::Owned(n.to_string()), t))
                .collect(),
        }),
    }
}

fn items(items: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for i in items {
        match i {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

fn coll(count: usize, parts: &[Option<&[u8]>]) -> Vec<u8> {
    [(count as i32).to_be_bytes().to_vec(), items(parts)].concat()
}

fn ms(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn text(t: &ColumnType<'_>, v: &[u8]) -> String {
    to_text(t, v).unwrap()
}

fn read(t: &ColumnType<'_>, s: &str) -> Vec<u8> {
    from_text(t, s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn date(days_since_epoch: i64) -> Vec<u8> {
    ((days_since_epoch + DATE_EPOCH) as u32)
        .to_be_bytes()
        .to_vec()
}

#[test]
fn timestamps_are_written_in_utc_with_z_and_at_most_milliseconds() {
    let ts = nat(NativeType::Timestamp);
    assert_eq!(text(&ts, &ms(1_610_362_861_000)), "2021-01-11T11:01:01Z");
    assert_eq!(text(&ts, &ms(120)), "1970-01-01T00:00:00.12Z");
    assert_eq!(text(&ts, &ms(-1)), "1969-12-31T23:59:59.999Z");
    assert_eq!(text(&ts, &ms(i64::MAX)), "+292278994-08-17T07:12:55.807Z");
    assert_eq!(text(&ts, &ms(i64::MIN)), "-292275055-05-16T16:47:04.192Z");
    assert_eq!(read(&ts, "+292278994-08-17T07:12:55.807Z"), ms(i64::MAX));
    assert_eq!(read(&ts, "-292275055-05-16T16:47:04.192Z"), ms(i64::MIN));
}

#[test]
fn timestamps_are_read_in_dsbulk_and_cqlsh_forms() {
    let ts = nat(NativeType::Timestamp);
    let v = ms(1_610_362_861_000);
    for s in [
        "2021-01-11T11:01:01Z",
        "2021-01-11 11:01:01",
        "2021-01-11T11:01:01.000000000Z",
        "2021-01-11T12:01:01+01:00",
        "2021-01-11T12:01:01+0100",
        "2021-01-11T10:01:01-01",
        "2021-01-11 11:01:01+0000",
        "1610362861000",
        " 2021-01-11T11:01:01 UTC ",
    ] {
        assert_eq!(read(&ts, s), v, "{s}");
    }
    assert_eq!(read(&ts, "2021-01-11T11:01"), ms(1_610_362_860_000));
    assert_eq!(read(&ts, "2021-01-11"), ms(1_610_323_200_000));
    assert_eq!(
        read(&ts, "2020-01-01 00:00:00.123+0000"),
        ms(1_577_836_800_123)
    );
}

#[test]
fn a_timestamp_with_digits_beyond_milliseconds_is_refused() {
    let ts = nat(NativeType::Timestamp);
    assert_eq!(
        from_text(&ts, "2021-01-11T11:01:01.0001Z").unwrap_err(),
        "\"2021-01-11T11:01:01.0001Z\" has digits beyond milliseconds, which a timestamp cannot hold"
    );
    assert_eq!(
        from_text(&ts, "x").unwrap_err(),
        "expected a timestamp such as 2021-01-11T11:01:01Z, got \"x\""
    );
    assert!(from_text(&ts, "2021-02-30").is_err());
    assert!(from_text(&ts, "2021-01-11T24:00:00Z").is_err());
}

#[test]
fn dates_are_iso_with_extended_years_across_the_whole_cql_range() {
    let d = nat(NativeType::Date);
    assert_eq!(text(&d, &date(18_638)), "2021-01-11");
    assert_eq!(text(&d, &date(0)), "1970-01-01");
    assert_eq!(text(&d, &0u32.to_be_bytes()), "-5877641-06-23");
    assert_eq!(text(&d, &u32::MAX.to_be_bytes()), "+5881580-07-11");
    assert_eq!(text(&d, &date(-719_528)), "0000-01-01");
    assert_eq!(text(&d, &date(-719_529)), "-0001-12-31");
    assert_eq!(text(&d, &date(2_932_897)), "+10000-01-01");
    for s in [
        "2021-01-11",
        "-5877641-06-23",
        "+5881580-07-11",
        "-0001-12-31",
    ] {
        assert_eq!(text(&d, &read(&d, s)), s);
    }
    assert_eq!(
        from_text(&d, "+5881580-07-12").unwrap_err(),
        "\"+5881580-07-12\" is out of range for a date"
    );
    assert!(from_text(&d, "2021-1-11").is_err());
}

#[test]
fn times_keep_their_seconds_and_cut_trailing_zeros() {
    let t = nat(NativeType::Time);
    let ns = |h: i64, m: i64, s: i64, n: i64| ((h * 60 + m) * 60 + s) * 1_000_000_000 + n;
    assert_eq!(text(&t, &ms(ns(1, 2, 3, 0))), "01:02:03");
    assert_eq!(text(&t, &ms(ns(1, 2, 3, 500_000_000))), "01:02:03.5");
    assert_eq!(
        text(&t, &ms(ns(23, 59, 59, 999_999_999))),
        "23:59:59.999999999"
    );
    assert_eq!(
        read(&t, "12:34:56.123000000"),
        ms(ns(12, 34, 56, 123_000_000))
    );
    assert_eq!(read(&t, "12:34"), ms(ns(12, 34, 0, 0)));
    assert!(to_text(&t, &ms(NANOS_PER_DAY)).is_err());
    assert!(from_text(&t, "12:34:56.1234567891").is_err());
}

#[test]
fn durations_use_cql_units_and_zero_is_zero_seconds() {
    let d = nat(NativeType::Duration);
    let dur = |m, d, n| codec::encode_duration(m, d, n);
    assert_eq!(text(&d, &dur(1, 2, 34)), "1mo2d34ns");
    let all = 3_600_000_000_000 * 4 + 60_000_000_000 * 5 + 6_000_000_000 + 7_008_009;
    assert_eq!(text(&d, &dur(14, 3, all)), "1y2mo3d4h5m6s7ms8us9ns");
    assert_eq!(text(&d, &dur(-14, -3, -all)), "-1y2mo3d4h5m6s7ms8us9ns");
    assert_eq!(text(&d, &dur(0, 0, 0)), "0s");
    assert_eq!(read(&d, "0s"), dur(0, 0, 0));
    assert_eq!(read(&d, "1Y2MO3D4H5M6S7MS8µs9NS"), dur(14, 3, all));
    assert_eq!(read(&d, "2w"), dur(0, 14, 0));
    assert_eq!(read(&d, "P1Y2M3DT4H5M6S"), dur(14, 3, all - 7_008_009));
    assert_eq!(read(&d, "-P2W"), dur(0, -14, 0));
    assert_eq!(
        read(&d, "P0001-02-03T04:05:06"),
        dur(14, 3, all - 7_008_009)
    );
    for v in [i64::MIN, i64::MAX] {
        let b = dur(v, v, v);
        assert_eq!(read(&d, &text(&d, &b)), b);
    }
    assert!(
        to_text(&d, &dur(1, -1, 0))
            .unwrap_err()
            .contains("whose signs differ")
    );
    assert!(from_text(&d, "1d1d").is_err(), "a unit given twice");
    assert!(from_text(&d, "").is_err());
}

#[test]
fn decimals_keep_their_scale() {
    let d = nat(NativeType::Decimal);
    let dec =
        |scale: i32, unscaled: i64| codec::encode_decimal(scale, &BigInt::from(unscaled)).to_vec();
    assert_eq!(text(&d, &dec(3, 12_340)), "12.340");
    assert_eq!(text(&d, &dec(-3, 7)), "7E+3");
    assert_eq!(text(&d, &dec(20, 1)), "1E-20");
    assert_eq!(text(&d, &dec(i32::MIN, -5)), "-5E+2147483648");
    assert_eq!(read(&d, "12.340"), dec(3, 12_340));
    assert_eq!(read(&d, "1E+3"), dec(-3, 1));
    assert_eq!(read(&d, "1,234.50"), dec(2, 123_450));
    for (scale, unscaled) in [(3, 12_340), (-3, 7), (20, 1), (i32::MIN, -5), (i32::MAX, 1)] {
        let t = text(&d, &dec(scale, unscaled));
        assert_eq!(read(&d, &t), dec(scale, unscaled), "{t}");
        if scale != i32::MIN {
            // What the rest of drover reads decimals with agrees.
            assert_eq!(
                codec::parse_decimal(&t),
                Some((scale, BigInt::from(unscaled)))
            );
        }
    }
}

#[test]
fn floats_are_written_as_java_writes_them() {
    let d = nat(NativeType::Double);
    let f = nat(NativeType::Float);
    let double = |x: f64| x.to_be_bytes().to_vec();
    let float = |x: f32| x.to_be_bytes().to_vec();
    for (x, s) in [
        (1.0, "1.0"),
        (1e10, "1.0E10"),
        (1.5e-7, "1.5E-7"),
        (12.34, "12.34"),
        (0.001, "0.001"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (-0.0, "-0.0"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "Infinity"),
        (f64::NEG_INFINITY, "-Infinity"),
    ] {
        assert_eq!(text(&d, &double(x)), s);
        assert_eq!(read(&d, s), double(x), "{s}");
    }
    assert_eq!(text(&f, &float(0.1)), "0.1");
    assert_eq!(text(&f, &float(3.4028235e38)), "3.4028235E38");
    assert_eq!(read(&f, "0.1"), float(0.1));
    assert_eq!(read(&f, "1e+10"), float(1e10), "cqlsh's %g");
    assert!(from_text(&d, "1e999").unwrap_err().contains("out of range"));
    // A NaN's payload has no text: it reads back as Java's NaN.
    let payload = f64::from_bits(0x7ff8_0000_0000_0001);
    assert_eq!(read(&d, &text(&d, &double(payload))), double(f64::NAN));
}

#[test]
fn booleans_are_written_true_false_and_read_in_every_dsbulk_and_cqlsh_word() {
    let b = nat(NativeType::Boolean);
    assert_eq!(text(&b, &[1]), "true");
    assert_eq!(text(&b, &[0]), "false");
    for s in ["true", "True", "1", "y", "YES", "t"] {
        assert_eq!(read(&b, s), vec![1], "{s}");
    }
    for s in ["false", "False", "0", "n", "No", "F"] {
        assert_eq!(read(&b, s), vec![0], "{s}");
    }
    assert_eq!(
        from_text(&b, "maybe").unwrap_err(),
        "expected a boolean such as true, got \"maybe\""
    );
}

#[test]
fn integers_are_digits_read_also_as_exact_decimals() {
    let int = nat(NativeType::Int);
    let tiny = nat(NativeType::TinyInt);
    assert_eq!(text(&int, &(-12i32).to_be_bytes()), "-12");
    assert_eq!(read(&int, "1,234"), 1234i32.to_be_bytes());
    assert_eq!(read(&int, "12.0"), 12i32.to_be_bytes());
    assert_eq!(read(&int, "1E3"), 1000i32.to_be_bytes());
    assert_eq!(read(&int, " +7 "), 7i32.to_be_bytes());
    assert!(from_text(&int, "12.5").is_err());
    assert_eq!(read(&tiny, "-128"), vec![0x80]);
    assert_eq!(
        from_text(&tiny, "128").unwrap_err(),
        "\"128\" is out of range for a tinyint"
    );
    assert_eq!(
        from_text(&int, "").unwrap_err(),
        "expected an int such as -12, got \"\""
    );
    let varint = nat(NativeType::Varint);
    let big = "-123456789012345678901234567890";
    assert_eq!(text(&varint, &read(&varint, big)), big);
    assert_eq!(read(&varint, "0"), vec![0]);
}

#[test]
fn uuids_inets_and_blobs_have_their_usual_text() {
    let u = nat(NativeType::Uuid);
    let id = uuid::Uuid::parse_str("123E4567-E89B-42D3-A456-556642440000").unwrap();
    assert_eq!(
        text(&u, id.as_bytes()),
        "123e4567-e89b-42d3-a456-556642440000"
    );
    assert_eq!(
        read(&u, "123E4567-E89B-42D3-A456-556642440000"),
        id.as_bytes()
    );
    let tu = nat(NativeType::Timeuuid);
    assert!(
        from_text(&tu, "123e4567-e89b-42d3-a456-556642440000")
            .unwrap_err()
            .contains("version 1")
    );
    assert!(from_text(&tu, "a8098c1a-f86e-11da-bd1a-00112444be1e").is_ok());

    let inet = nat(NativeType::Inet);
    assert_eq!(text(&inet, &[192, 168, 0, 1]), "192.168.0.1");
    let mut one = [0u8; 16];
    one[15] = 1;
    assert_eq!(text(&inet, &one), "::1");
    assert_eq!(read(&inet, "0:0:0:0:0:0:0:1"), one, "DSBulk's IPv6");
    assert_eq!(read(&inet, "/10.0.0.1"), vec![10, 0, 0, 1]);
    assert_eq!(read(&inet, "[::1]"), one);

    let blob = nat(NativeType::Blob);
    assert_eq!(text(&blob, &[1, 2]), "AQI=");
    assert_eq!(read(&blob, "AQI="), vec![1, 2]);
    assert_eq!(read(&blob, "AQI"), vec![1, 2]);
    assert_eq!(read(&blob, "0x0102ff"), vec![1, 2, 255]);
    assert_eq!(read(&blob, ""), Vec::<u8>::new());
    assert_eq!(text(&blob, &[]), "");
    assert!(from_text(&blob, "0x012").is_err());
    // Base64 that starts like hex is written as hex, which every reader tries first.
    let b = read(&blob, "0x12");
    assert_eq!(b, vec![0x12]);
    assert_eq!(
        text(&blob, &[0xd1, 0x7d, 0x76, 0, 0, 0]),
        "0xd17d76000000",
        "not 0X12AAAA"
    );
    assert_eq!(
        read(&blob, "0XA="),
        vec![0xd1, 0x70],
        "base64 when it is not hex"
    );
}

#[test]
fn text_is_as_it_is_and_ascii_must_be_ascii() {
    assert_eq!(read(&nat(NativeType::Text), " a,\"b\" "), b" a,\"b\" ");
    assert_eq!(read(&nat(NativeType::Text), ""), b"");
    assert_eq!(
        from_text(&nat(NativeType::Ascii), "é").unwrap_err(),
        "expected ASCII text, got \"é\""
    );
    assert!(
        to_text(&nat(NativeType::Text), &[0xff])
            .unwrap_err()
            .contains("not UTF-8")
    );
}

#[test]
fn collections_tuples_and_udts_are_compact_json() {
    let int = nat(NativeType::Int);
    let txt = nat(NativeType::Text);
    let one = 1i32.to_be_bytes();
    let two = 2i32.to_be_bytes();
    let twelve = 12i32.to_be_bytes();
    let l = list(int.clone());
    let v = coll(2, &[Some(&one), Some(&two)]);
    assert_eq!(text(&l, &v), "[1,2]");
    assert_eq!(read(&l, "[1,2]"), v);
    assert_eq!(read(&l, "1,2"), v, "brackets added as DSBulk does");
    let s = set(txt.clone());
    assert_eq!(
        text(&s, &coll(2, &[Some(b"a"), Some(b"b")])),
        r#"["a","b"]"#
    );
    let m = map(txt.clone(), int.clone());
    let v = coll(1, &[Some(b"k"), Some(&one)]);
    assert_eq!(text(&m, &v), r#"{"k":1}"#);
    assert_eq!(read(&m, r#"{"k":1}"#), v);
    let m = map(int.clone(), txt.clone());
    assert_eq!(
        text(&m, &coll(1, &[Some(&one), Some(b"x")])),
        r#"{"1":"x"}"#
    );
    let tup = ColumnType::Tuple(vec![int.clone(), txt.clone()]);
    let v = items(&[Some(&twelve), Some(b"ab")]);
    assert_eq!(text(&tup, &v), r#"[12,"ab"]"#);
    assert_eq!(read(&tup, r#"[12,"ab"]"#), v);
    let u = udt(vec![("f1", int.clone()), ("f2", txt.clone())]);
    assert_eq!(text(&u, &v), r#"{"f1":12,"f2":"ab"}"#);
    assert_eq!(read(&u, r#"{"f1":12,"f2":"ab"}"#), v);
    assert_eq!(read(&u, r#"[12,"ab"]"#), v, "an array in field order");
    assert_eq!(
        read(&u, r#"{"F2":"ab","f1":12}"#),
        v,
        "names in any order and case"
    );
    // A null element, and a UDT with fewer fields than its type: the missing ones are null.
    assert_eq!(text(&l, &coll(2, &[Some(&one), None])), "[1,null]");
    let short = items(&[Some(&twelve)]);
    assert_eq!(text(&u, &short), r#"{"f1":12,"f2":null}"#);
    assert_eq!(read(&u, &text(&u, &short)), items(&[Some(&twelve), None]));
    assert_eq!(read(&u, r#"{"f1":12}"#), items(&[Some(&twelve), None]));
    assert_eq!(
        from_text(&u, r#"{"f3":1}"#).unwrap_err(),
        "the type frozen<ks.t> has no field \"f3\""
    );
    // Text with JSON's special characters survives.
    let tricky = "a\"b\\c\nd\u{1}é";
    let v = coll(1, &[Some(tricky.as_bytes())]);
    assert_eq!(read(&s, &text(&s, &v)), v);
}

#[test]
fn vectors_are_written_with_a_space_after_each_comma() {
    let vf = vector(nat(NativeType::Float), 2);
    let v = [1.0f32.to_be_bytes(), 2.5f32.to_be_bytes()].concat();
    assert_eq!(text(&vf, &v), "[1.0, 2.5]");
    assert_eq!(read(&vf, "[1.0, 2.5]"), v);
    assert_eq!(read(&vf, "[1,2.5]"), v);
    assert_eq!(
        from_text(&vf, "[1.0]").unwrap_err(),
        "expected a vector<float, 2> of 2 items, got 1"
    );
    assert!(
        from_text(&vf, "[1.0, null]")
            .unwrap_err()
            .contains("null item")
    );
}

#[test]
fn hex_writes_blobs_as_0x_and_lowercase_digits_everywhere() {
    let hex = |t: &ColumnType<'_>, v: &[u8]| super::to_text(t, v, &blob_forms(Binary::Hex)).unwrap();
    let blob = nat(NativeType::Blob);
    assert_eq!(hex(&blob, &[1, 0xab, 0xff]), "0x01abff");
    assert_eq!(hex(&blob, &[]), "0x");
    assert_eq!(read(&blob, "0x"), Vec::<u8>::new());
    // Base64 that would start with `0x` is hex in both forms.
    assert_eq!(hex(&blob, &[0xd1, 0x7d, 0x76]), "0xd17d76");
    let blobs = list(blob.clone());
    let v = coll(2, &[Some(&[0xca, 0xfe]), None]);
    assert_eq!(hex(&blobs, &v), "[\"0xcafe\",null]");
    assert_eq!(to_text(&blobs, &v).unwrap(), "[\"yv4=\",null]");
    let m = map(blob.clone(), blob.clone());
    let v = coll(1, &[Some(&[1]), Some(&[2])]);
    assert_eq!(hex(&m, &v), "{\"0x01\":\"0x02\"}");
    let u = udt(vec![("b", blob.clone()), ("n", nat(NativeType::Int))]);
    let v = items(&[Some(&[0x0a]), Some(&7i32.to_be_bytes())]);
    assert_eq!(hex(&u, &v), "{\"b\":\"0x0a\",\"n\":7}");
    assert_eq!(
        super::to_json_text(&u, &v, &blob_forms(Binary::Hex)).unwrap(),
        "{\"b\":\"0x0a\",\"n\":7}"
    );
    assert_eq!(
        super::to_json(&blob, &[0xab], &blob_forms(Binary::Hex)).unwrap(),
        json!("0xab")
    );
    for (t, v) in [(&blobs, coll(2, &[Some(&[0xca, 0xfe]), None])), (&u, v)] {
        assert_eq!(from_text(t, &hex(t, &v)).unwrap(), v);
    }
}

#[test]
fn json_values_carry_numbers_exactly_and_everything_else_as_strings() {
    let dec = nat(NativeType::Decimal);
    let d = codec::encode_decimal(3, &BigInt::from(12_340)).to_vec();
    assert_eq!(to_json(&dec, &d).unwrap(), json!("12.340"));
    assert_eq!(from_json(&dec, &json!("12.340")).unwrap(), d);
    assert_eq!(
        from_json(&dec, &json!(12.5)).unwrap(),
        codec::encode_decimal(1, &BigInt::from(125)).to_vec()
    );
    let l = list(nat(NativeType::Double));
    let v = coll(
        2,
        &[Some(&1.5f64.to_be_bytes()), Some(&f64::NAN.to_be_bytes())],
    );
    assert_eq!(to_json(&l, &v).unwrap(), json!([1.5, "NaN"]));
    assert_eq!(from_json(&l, &json!([1.5, "NaN"])).unwrap(), v);
    let f = nat(NativeType::Float);
    assert_eq!(
        to_json(&f, &0.1f32.to_be_bytes()).unwrap().to_string(),
        "0.1"
    );
    let ts = nat(NativeType::Timestamp);
    assert_eq!(to_json(&ts, &ms(0)).unwrap(), json!("1970-01-01T00:00:00Z"));
    assert_eq!(
        from_json(&ts, &json!(0)).unwrap(),
        ms(0),
        "epoch milliseconds"
    );
    let b = nat(NativeType::Boolean);
    assert_eq!(to_json(&b, &[1]).unwrap(), json!(true));
    assert_eq!(from_json(&b, &json!(false)).unwrap(), vec![0]);
    // In a CSV cell a decimal is a JSON number, exact, as DSBulk writes it.
    let ld = list(dec.clone());
    let v = coll(1, &[Some(&d)]);
    assert_eq!(text(&ld, &v), "[12.340]");
    assert_eq!(to_json(&ld, &v).unwrap(), json!(["12.340"]));
    // A composite value given as a string of its text.
    let m = map(nat(NativeType::Text), nat(NativeType::Int));
    assert_eq!(
        from_json(&m, &json!("{\"k\":1}")).unwrap(),
        coll(1, &[Some(b"k"), Some(&1i32.to_be_bytes())])
    );
    assert!(
        from_json(&m, &json!("\"{}\"")).is_err(),
        "a string in a string is not unwrapped"
    );
    assert_eq!(
        from_json(&m, &json!(null)).unwrap_err(),
        "expected a frozen<map<text, int>>, got null"
    );
}

#[test]
fn cqlsh_forms_are_read() {
    let int = nat(NativeType::Int);
    let txt = nat(NativeType::Text);
    let one = 1i32.to_be_bytes();
    let two = 2i32.to_be_bytes();
    assert_eq!(
        read(&set(int.clone()), "{1, 2}"),
        coll(2, &[Some(&one), Some(&two)])
    );
    assert_eq!(
        read(&list(int.clone()), "[1, 2]"),
        coll(2, &[Some(&one), Some(&two)])
    );
    let tup = ColumnType::Tuple(vec![int.clone(), txt.clone()]);
    assert_eq!(read(&tup, "(1, 'x')"), items(&[Some(&one), Some(b"x")]));
    assert_eq!(read(&tup, "(None, 'it''s')"), items(&[None, Some(b"it's")]));
    let m = map(txt.clone(), int.clone());
    assert_eq!(
        read(&m, "{'a': 1, 'b': 2}"),
        coll(2, &[Some(b"a"), Some(&one), Some(b"b"), Some(&two)])
    );
    assert_eq!(
        read(&map(int.clone(), txt.clone()), "{1: 'x'}"),
        coll(1, &[Some(&one), Some(b"x")])
    );
    let u = udt(vec![("a", int.clone()), ("b", txt.clone())]);
    assert_eq!(read(&u, "{a: 1, b: 'x'}"), items(&[Some(&one), Some(b"x")]));
    assert_eq!(read(&u, "{a: , b: 'x'}"), items(&[None, Some(b"x")]));
    assert_eq!(read(&u, "{a:1,b:'x'}"), items(&[Some(&one), Some(b"x")]));
    let blobs = list(nat(NativeType::Blob));
    assert_eq!(read(&blobs, "[0x0102ff]"), coll(1, &[Some(&[1, 2, 255])]));
    let times = set(nat(NativeType::Time));
    assert_eq!(read(&times, "{12:34:56, 01:02:03.5}").len(), 4 + 2 * 12);
    let tss = list(nat(NativeType::Timestamp));
    assert_eq!(
        read(&tss, "['2020-01-01 00:00:00.123000+0000']"),
        coll(1, &[Some(&ms(1_577_836_800_123))])
    );
    let bools = list(nat(NativeType::Boolean));
    assert_eq!(
        read(&bools, "[True, False]"),
        coll(2, &[Some(&[1]), Some(&[0])])
    );
    assert_eq!(read(&set(int.clone()), "{}"), coll(0, &[]));
}

#[test]
fn errors_are_short_and_say_what_was_expected() {
    let int = nat(NativeType::Int);
    assert_eq!(
        to_text(&int, &[]).unwrap_err(),
        "an empty int value (not null), which CSV cannot carry"
    );
    assert_eq!(
        to_text(&int, &[1, 2]).unwrap_err(),
        "2 bytes that are not a valid CQL int value"
    );
    let long = "x".repeat(100);
    let e = from_text(&nat(NativeType::Uuid), &long).unwrap_err();
    assert!(e.ends_with(&format!("got \"{}\"…", "x".repeat(64))), "{e}");
    let l = list(int.clone());
    assert_eq!(
        from_text(&l, "[1, \"a\"]").unwrap_err(),
        "item 2 of a frozen<list<int>>: expected an int such as -12, got \"a\""
    );
    assert!(
        from_text(&l, "[1, 2")
            .unwrap_err()
            .starts_with("expected `,` or `]`")
    );
    assert!(
        from_text(&l, "[1] x")
            .unwrap_err()
            .starts_with("unexpected text after the value")
    );
    assert_eq!(
        from_text(&int, "[1]").unwrap_err(),
        "expected an int such as -12, got \"[1]\""
    );
}

#[test]
fn deeply_nested_input_is_refused_not_recursed_into() {
    let mut t = nat(NativeType::Int);
    for _ in 0..3 {
        t = list(t);
    }
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(
        from_text(&t, &deep)
            .unwrap_err()
            .contains("nested more than 64")
    );
    let deep_set = "{".repeat(100_000);
    assert!(
        from_text(&t, &deep_set)
            .unwrap_err()
            .contains("nested more than 64")
    );
}

#[test]
fn writetimes_are_timestamps_with_their_microseconds() {
    assert_eq!(writetime_text(1111), "1970-01-01T00:00:00.001111Z");
    assert_eq!(writetime_text(0), "1970-01-01T00:00:00Z");
    assert_eq!(writetime_text(-1), "1969-12-31T23:59:59.999999Z");
    assert_eq!(
        writetime_text(1_610_362_861_500_000),
        "2021-01-11T11:01:01.5Z"
    );
    for v in [0, 1111, -1, i64::MAX, i64::MIN, 1_610_362_861_123_456] {
        assert_eq!(parse_writetime(&writetime_text(v)), Ok(v), "{v}");
    }
    assert_eq!(parse_writetime("1111"), Ok(1111));
    assert_eq!(parse_writetime("1970-01-01T00:00:00.001111000Z"), Ok(1111));
    assert_eq!(parse_writetime("1970-01-01 00:00:00.001+0000"), Ok(1000));
    assert_eq!(
        parse_writetime("1970-01-01T00:00:00.0011111Z").unwrap_err(),
        "\"1970-01-01T00:00:00.0011111Z\" has digits beyond microseconds, which a writetime cannot hold"
    );
    assert!(
        parse_writetime("soon")
            .unwrap_err()
            .starts_with("expected a writetime")
    );
}

// ---- properties ----

fn natives() -> Vec<NativeType> {
    use NativeType as N;
    vec![
        N::Ascii,
        N::Boolean,
        N::Blob,
        N::Counter,
        N::Date,
        N::Decimal,
        N::Double,
        N::Duration,
        N::Float,
        N::Int,
        N::BigInt,
        N::Text,
        N::Timestamp,
        N::Inet,
        N::SmallInt,
        N::TinyInt,
        N::Time,
        N::Timeuuid,
        N::Uuid,
        N::Varint,
    ]
}

fn types() -> BoxedStrategy<ColumnType<'static>> {
    let leaf = prop::sample::select(natives()).prop_map(ColumnType::Native);
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(list),
            inner.clone().prop_map(set),
            (inner.clone(), inner.clone()).prop_map(|(k, v)| map(k, v)),
            prop::collection::vec(inner.clone(), 1..4).prop_map(ColumnType::Tuple),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|ts| {
                let names = ["f1", "Mixed Case", "quote\"d", "f4"];
                udt(names.iter().copied().zip(ts).collect())
            }),
            (inner, 1u16..4).prop_map(|(t, d)| vector(t, d)),
        ]
    })
    .boxed()
}

fn varint_bytes() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..20)
        .prop_map(|b| BigInt::from_signed_bytes_be(&b).to_signed_bytes_be())
        .boxed()
}

fn native_value(n: &NativeType) -> BoxedStrategy<Vec<u8>> {
    use NativeType as N;
    let be = |v: &[u8]| v.to_vec();
    match n {
        N::Ascii => "[\\x00-\\x7f]{0,8}".prop_map(String::into_bytes).boxed(),
        N::Text => any::<String>().prop_map(String::into_bytes).boxed(),
        N::Blob => prop::collection::vec(any::<u8>(), 0..12).boxed(),
        N::Boolean => prop_oneof![Just(vec![0]), Just(vec![1])].boxed(),
        N::Counter | N::BigInt => any::<i64>().prop_map(move |v| be(&v.to_be_bytes())).boxed(),
        N::Int => any::<i32>().prop_map(move |v| be(&v.to_be_bytes())).boxed(),
        N::SmallInt => any::<i16>().prop_map(move |v| be(&v.to_be_bytes())).boxed(),
        N::TinyInt => any::<i8>().prop_map(move |v| be(&v.to_be_bytes())).boxed(),
        N::Date => prop_oneof![
            any::<u32>(),
            (1u32 << 31) - 800_000..(1u32 << 31) + 3_000_000
        ]
        .prop_map(move |v| be(&v.to_be_bytes()))
        .boxed(),
        N::Decimal => (prop_oneof![any::<i32>(), -12i32..12], varint_bytes())
            .prop_map(|(scale, u)| {
                codec::encode_decimal(scale, &BigInt::from_signed_bytes_be(&u)).to_vec()
            })
            .boxed(),
        N::Double => prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            any::<f64>(),
            -1e6..1e6f64,
        ]
        .prop_map(|x| {
            let x = if x.is_nan() { f64::NAN } else { x };
            x.to_be_bytes().to_vec()
        })
        .boxed(),
        N::Float => prop_oneof![
            any::<u32>().prop_map(f32::from_bits),
            any::<f32>(),
            -1e6..1e6f32,
        ]
        .prop_map(|x| {
            let x = if x.is_nan() { f32::NAN } else { x };
            x.to_be_bytes().to_vec()
        })
        .boxed(),
        N::Duration => (
            any::<bool>(),
            prop_oneof![0..=i64::MAX, 0..40i64],
            prop_oneof![0..=i64::MAX, 0..40i64],
            prop_oneof![0..=i64::MAX, 0..100_000_000_000i64],
        )
            .prop_map(|(neg, m, d, n)| {
                let s = if neg { -1 } else { 1 };
                codec::encode_duration(s * m, s * d, s * n)
            })
            .boxed(),
        N::Inet => prop_oneof![
            prop::collection::vec(any::<u8>(), 4),
            prop::collection::vec(any::<u8>(), 16),
            Just([vec![0; 10], vec![0xff; 2], vec![1, 2, 3, 4]].concat()),
        ]
        .boxed(),
        N::Time => (0..NANOS_PER_DAY)
            .prop_map(move |v| be(&v.to_be_bytes()))
            .boxed(),
        N::Timestamp => prop_oneof![any::<i64>(), -100_000_000_000_000i64..100_000_000_000_000]
            .prop_map(move |v| be(&v.to_be_bytes()))
            .boxed(),
        N::Uuid => any::<[u8; 16]>().prop_map(|b| b.to_vec()).boxed(),
        N::Timeuuid => any::<[u8; 16]>()
            .prop_map(|mut b| {
                b[6] = (b[6] & 0x0f) | 0x10;
                b[8] = (b[8] & 0x3f) | 0x80;
                b.to_vec()
            })
            .boxed(),
        N::Varint => varint_bytes(),
        _ => Just(Vec::new()).boxed(),
    }
}

fn values(t: &ColumnType<'static>) -> BoxedStrategy<Vec<u8>> {
    let maybe = |t: &ColumnType<'static>| prop::option::weighted(0.85, values(t)).boxed();
    match t {
        ColumnType::Native(n) => native_value(n),
        ColumnType::Collection { typ, .. } => match typ {
            CollectionType::List(e) | CollectionType::Set(e) => {
                prop::collection::vec(maybe(e), 0..4)
                    .prop_map(|v| {
                        let refs: Vec<Option<&[u8]>> = v.iter().map(|i| i.as_deref()).collect();
                        coll(refs.len(), &refs)
                    })
                    .boxed()
            }
            CollectionType::Map(k, v) => prop::collection::vec((values(k), maybe(v)), 0..4)
                .prop_map(|pairs| {
                    let mut seen = std::collections::HashSet::new();
                    let pairs: Vec<_> = pairs
                        .into_iter()
                        .filter(|(k, _)| seen.insert(k.clone()))
                        .collect();
                    let refs: Vec<Option<&[u8]>> = pairs
                        .iter()
                        .flat_map(|(k, v)| [Some(k.as_slice()), v.as_deref()])
                        .collect();
                    coll(pairs.len(), &refs)
                })
                .boxed(),
            _ => unreachable!("only lists, sets and maps are generated"),
        },
        ColumnType::Tuple(ts) => composite(ts.iter().map(maybe).collect()),
        ColumnType::UserDefinedType { definition, .. } => composite(
            definition
                .field_types
                .iter()
                .map(|(_, t)| maybe(t))
                .collect(),
        ),
        ColumnType::Vector { typ, dimensions } => {
            let typ = (**typ).clone();
            prop::collection::vec(values(&typ), usize::from(*dimensions))
                .prop_map(move |v| {
                    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
                    codec::join_vector(&typ, &refs)
                })
                .boxed()
        }
        _ => unreachable!("no other type is generated"),
    }
}

fn composite(fields: Vec<BoxedStrategy<Option<Vec<u8>>>>) -> BoxedStrategy<Vec<u8>> {
    fields
        .prop_map(|v| {
            let refs: Vec<Option<&[u8]>> = v.iter().map(|i| i.as_deref()).collect();
            items(&refs)
        })
        .boxed()
}

fn typed_values() -> impl Strategy<Value = (ColumnType<'static>, Vec<u8>)> {
    types().prop_flat_map(|t| {
        let v = values(&t);
        (Just(t), v)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_value_reads_back_from_its_text_byte_for_byte((t, v) in typed_values(), binary in binaries()) {
        let s = super::to_text(&t, &v, &blob_forms(binary)).map_err(|e| TestCaseError::fail(format!("{}: {e}", type_name(&t))))?;
        let back = from_text(&t, &s).map_err(|e| TestCaseError::fail(format!("{}: {s:?}: {e}", type_name(&t))))?;
        prop_assert_eq!(back, v, "{}: {}", type_name(&t), s);
    }

    #[test]
    fn every_value_reads_back_from_its_json_byte_for_byte((t, v) in typed_values(), binary in binaries()) {
        let j = super::to_json(&t, &v, &blob_forms(binary)).map_err(|e| TestCaseError::fail(format!("{}: {e}", type_name(&t))))?;
        let back = from_json(&t, &j).map_err(|e| TestCaseError::fail(format!("{}: {j}: {e}", type_name(&t))))?;
        prop_assert_eq!(&back, &v, "{}: {}", type_name(&t), j);
        // And from JSON's text, as a JSON file holds it.
        let back = from_json_text(&t, &j.to_string())
            .map_err(|e| TestCaseError::fail(format!("{}: {j}: {e}", type_name(&t))))?;
        prop_assert_eq!(back, v, "{}: {}", type_name(&t), j);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn no_bytes_make_the_writer_panic(t in types(), v in prop::collection::vec(any::<u8>(), 0..48)) {
        let _ = to_text(&t, &v);
        let _ = to_json(&t, &v);
    }

    #[test]
    fn no_text_makes_the_reader_panic(
        t in types(),
        s in prop_oneof![any::<String>(), "[\\[\\]{}(),:'\"\\\\ 0-9a-fxPTZE.+-]{0,40}"],
    ) {
        let _ = from_text(&t, &s);
        let _ = from_json(&t, &Value::String(s.clone()));
        let _ = parse_writetime(&s);
    }
}

/// `style: cqlsh`: the forms cqlsh COPY FROM reads back — timestamps as milliseconds, dates
/// past the years it takes as days, `True`/`False`, hex blobs, CQL literals for collections with
/// text single-quoted and `'` doubled, nothing between items, a null UDT field left out, and
/// a tuple with a null field refused (COPY FROM has no form for it).
#[test]
fn cqlsh_forms_are_those_copy_from_reads() {
    use super::to_cqlsh_text as cq;
    let ts = nat(NativeType::Timestamp);
    assert_eq!(cq(&ts, &ms(1_610_362_861_123)).unwrap(), "1610362861123");
    assert_eq!(cq(&ts, &ms(-62_135_596_800_001)).unwrap(), "-62135596800001");
    assert_eq!(cq(&nat(NativeType::Boolean), &[1]).unwrap(), "True");
    assert_eq!(cq(&nat(NativeType::Boolean), &[0]).unwrap(), "False");
    assert_eq!(cq(&nat(NativeType::Blob), &[1, 0xab]).unwrap(), "0x01ab");
    assert_eq!(cq(&nat(NativeType::Date), &date(0)).unwrap(), "1970-01-01");
    assert_eq!(cq(&nat(NativeType::Date), &date(3_000_000)).unwrap(), "3000000");
    let l = list(nat(NativeType::Text));
    let v = coll(2, &[Some(b"it's"), Some(b"a,b")]);
    assert_eq!(cq(&l, &v).unwrap(), "['it''s','a,b']");
    let m = map(nat(NativeType::Int), nat(NativeType::Timestamp));
    let v = coll(1, &[Some(&7i32.to_be_bytes()), Some(&ms(0))]);
    assert_eq!(cq(&m, &v).unwrap(), "{7:0}");
    let u = udt(vec![("a", nat(NativeType::Int)), ("b", set(nat(NativeType::Boolean)))]);
    let v = items(&[None, Some(&coll(1, &[Some(&[1])]))]);
    assert_eq!(cq(&u, &v).unwrap(), "{b:{True}}");
    let tp = ColumnType::Tuple(vec![nat(NativeType::Text), nat(NativeType::Int)]);
    assert_eq!(cq(&tp, &items(&[Some(b"a"), Some(&[0, 0, 0, 1])])).unwrap(), "('a',1)");
    let e = cq(&tp, &items(&[None, Some(&[0, 0, 0, 1])])).unwrap_err();
    assert!(e.contains("null field") && e.contains("COPY FROM"), "{e}");
}
