//! Every attribute type copied DynamoDB → DynamoDB arrives exactly as it left, on moto and on
//! dynalite: after a `drover migrate` (from one dynalite to another; between two tables of the
//! test environment's moto), both tables are read whole and compared item by item, attribute
//! value by attribute value.
//!
//! What the servers accept, checked when these tests were written (both moto 5.2.5 and dynalite
//! 4.0.0): numbers up to DynamoDB's range, ±9.9999999999999999999999999999999999999E+125 and
//! ±1E-130 — `99999999999999999999999999999999999999E+100` (10^138) is refused by both as a
//! "Number overflow", so the largest number here is the largest DynamoDB stores; neither
//! enforces the 32-level nesting limit (both take 33), so items nest 32 levels, what DynamoDB
//! accepts; both take empty strings and binaries in non-key attributes and items of 390 KB.
//! dynalite rewrites numbers in its canonical form (`1E+125` is read back as 1 and 125 zeros),
//! the same on both sides of the copy, so the source as read is what the target must hold.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, BillingMode, KeyType, ScalarAttributeType};
use test_support::dynamodb::{
    Item, OwnDynalite, Server, assert_same_items, attr, drop_table, job_between, key, put_all,
    scan_by_key, table_name, wait_active,
};

use crate::dynamodb_migrator::migrate;

/// Numbers at DynamoDB's limits: 38 significant digits, the largest and smallest magnitudes,
/// negative ones. Numerically distinct, so any few of them make a valid number set.
const NUMBERS: &[&str] = &[
    "-1.2345678901234567890123456789012345678E-120",
    "9.9999999999999999999999999999999999999E+125",
    "-9.9999999999999999999999999999999999999E+125",
    "99999999999999999999999999999999999999E+87",
    "1E-130",
    "-1E-130",
    "12345678901234567890123456789012345678",
    "-0.12345678901234567890123456789012345678",
    "0.00000000000000000000000000000000000001",
    "0",
    "-17",
    "3.25",
];

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: impl Into<String>) -> AttributeValue {
    AttributeValue::N(v.into())
}

pub(crate) fn b(v: impl Into<Vec<u8>>) -> AttributeValue {
    AttributeValue::B(Blob::new(v))
}

pub(crate) fn m(pairs: Vec<(&str, AttributeValue)>) -> AttributeValue {
    AttributeValue::M(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn number(i: usize) -> &'static str {
    NUMBERS[i % NUMBERS.len()]
}

/// Bytes that are not UTF-8 (a lone continuation byte, an overlong start, 0xff) and hold 0x00,
/// distinct for each `i`.
fn bytes(i: usize) -> Vec<u8> {
    let mut v = vec![0x00, 0xff, 0xfe, 0x80, 0xc3, 0x28, 0x00];
    v.extend_from_slice(&(i as u32).to_be_bytes());
    v
}

/// `depth` maps and lists, alternately, around a string.
fn nested(depth: usize) -> AttributeValue {
    (0..depth).fold(s("the bottom"), |inner, level| {
        if level % 2 == 0 {
            m(vec![("level", n(level.to_string())), ("in", inner)])
        } else {
            AttributeValue::L(vec![inner, AttributeValue::Null(true)])
        }
    })
}

/// The DynamoDB nesting limit.
const DEEPEST: usize = 32;

/// `len` bytes of a fixed pseudo-random sequence, every byte value among them.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The key attributes `key` and, around them, every attribute type, varied by `i`. Small
/// (under 1 KB); every twentieth one also nests 32 levels deep.
pub(crate) fn every_type(i: usize, key: Vec<(&str, AttributeValue)>) -> Item {
    let mut item: Item = key.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let fields = vec![
        ("s", s(format!("text {i} — ünïcödé ✓ 日本語 🔑"))),
        ("n", n(number(i))),
        ("b", b(bytes(i))),
        ("t", AttributeValue::Bool(i.is_multiple_of(2))),
        ("f", AttributeValue::Bool(i % 2 == 1)),
        ("z", AttributeValue::Null(true)),
        ("es", s("")),
        ("eb", b(Vec::new())),
        (
            "m",
            m(vec![
                ("n", n(number(i + 1))),
                ("es", s("")),
                ("eb", b(Vec::new())),
                ("b", b(bytes(i + 1))),
                ("empty map", m(vec![])),
                ("empty list", AttributeValue::L(vec![])),
                (
                    "ss",
                    AttributeValue::Ss(vec!["x".into(), format!("y{i}"), "ü".into()]),
                ),
                ("ключ", s("значение")),
            ]),
        ),
        (
            "l",
            AttributeValue::L(vec![
                n(number(i + 2)),
                s(""),
                b(Vec::new()),
                b(bytes(i + 2)),
                AttributeValue::Bool(true),
                AttributeValue::Null(true),
                m(vec![("k", s("v"))]),
                AttributeValue::L(vec![s("inner"), n("1")]),
                AttributeValue::Ns(vec![number(i + 3).into(), number(i + 4).into()]),
                AttributeValue::Bs(vec![Blob::new(vec![0u8]), Blob::new(bytes(i))]),
            ]),
        ),
        (
            "ss",
            AttributeValue::Ss(vec![format!("a{i}"), "b".into(), "ü ✓".into(), "🔑".into()]),
        ),
        (
            "ns",
            AttributeValue::Ns(vec![
                number(i).into(),
                number(i + 5).into(),
                number(i + 7).into(),
                format!("{i}.5"),
            ]),
        ),
        (
            "bs",
            AttributeValue::Bs(vec![
                Blob::new(bytes(i)),
                Blob::new(vec![0u8]),
                Blob::new(vec![0xff, 0x00, (i % 256) as u8, 0xfe, 0xfe]),
            ]),
        ),
        ("ключ 🔑", s("a unicode attribute name")),
        ("ε.ü ß", m(vec![("∂ ∫", n(number(i + 8)))])),
    ];
    item.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
    if i.is_multiple_of(20) {
        item.insert("deep".into(), nested(DEEPEST));
    }
    item
}

/// The key attributes `key` and one attribute of each type, small (about 100 bytes): the
/// bulk of the big table, where one item in ten is an [`every_type`] one. Each value costs CPU
/// in every process of the test (the SDK's JSON in debug builds, dynalite's validation), so
/// these hold few.
fn each_type(i: usize, key: Vec<(&str, AttributeValue)>) -> Item {
    let mut item: Item = key.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let fields = vec![
        ("s", s(format!("t{i} ü"))),
        ("n", n(number(i))),
        ("b", b(bytes(i))),
        ("t", AttributeValue::Bool(i.is_multiple_of(2))),
        ("z", AttributeValue::Null(true)),
        ("m", m(vec![("k", n(number(i + 1)))])),
        ("l", AttributeValue::L(vec![s("")])),
        ("ss", AttributeValue::Ss(vec![format!("a{i} 🔑")])),
        ("ns", AttributeValue::Ns(vec![number(i + 3).into()])),
        ("bs", AttributeValue::Bs(vec![Blob::new(bytes(i))])),
    ];
    item.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
    item
}

/// Items near DynamoDB's 400 KB limit: a string, a binary and a list of numbers of about
/// 390 KB each, with every type beside them.
fn large(i: usize, key: Vec<(&str, AttributeValue)>) -> Item {
    let mut item = every_type(i, key);
    match i % 3 {
        0 => {
            let unit = "ünïcödé ✓ 日本語 🔑 ";
            item.insert("big".into(), s(unit.repeat(390_000 / unit.len())));
        }
        1 => {
            item.insert("big".into(), b(noise(390_000, i as u64)));
        }
        _ => {
            // 21 bytes each as moto counts them (the characters; DynamoDB counts 13).
            let numbers = (0..18_500)
                .map(|k| n(format!("{k}.{}", "7".repeat(16))))
                .collect();
            item.insert("big".into(), AttributeValue::L(numbers));
        }
    }
    item
}

/// Creates `table` fresh (dropped first) with the `hash` key and, when set, the `range` key.
async fn keyed_table(
    c: &Client,
    table: &str,
    hash: (&str, ScalarAttributeType),
    range: Option<(&str, ScalarAttributeType)>,
) {
    drop_table(c, table).await;
    let mut req = c
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(hash.0, KeyType::Hash))
        .attribute_definitions(attr(hash.0, hash.1));
    if let Some((name, kind)) = range {
        req = req
            .key_schema(key(name, KeyType::Range))
            .attribute_definitions(attr(name, kind));
    }
    req.send().await.expect("create table");
    wait_active(c, table).await;
}

/// One table of the round trip: its key and its items.
struct Case {
    name: &'static str,
    hash: (&'static str, ScalarAttributeType),
    range: Option<(&'static str, ScalarAttributeType)>,
    items: Vec<Item>,
}

/// The tables copied: `bulk` items under a unicode string hash key and a number range key of
/// extreme values (one in ten with every type in many forms, the others with one of each,
/// three of about 390 KB), and a few hundred items with every type in many forms under a
/// binary hash key with a number range key, and under a number hash key with a binary range
/// key.
fn cases(bulk: usize) -> Vec<Case> {
    use ScalarAttributeType::{B, N, S};
    let string_number = (0..bulk)
        .map(|i| {
            let key = vec![
                ("pk", s(format!("{i:06} ключ 🔑 日本"))),
                ("sk", n(number(i))),
            ];
            if i % (bulk / 3).max(1) == 1 {
                large(i, key)
            } else if i.is_multiple_of(10) {
                every_type(i, key)
            } else {
                each_type(i, key)
            }
        })
        .collect();
    // Four items per hash key, each with another number.
    let binary_number = (0..300)
        .map(|i| every_type(i, vec![("h", b(bytes(i / 4))), ("r", n(number(i)))]))
        .collect();
    let number_binary = (0..300)
        .map(|i| {
            every_type(
                i,
                vec![
                    ("hn", n(number(i / 4))),
                    ("r", b(noise(1 + i % 40, i as u64))),
                ],
            )
        })
        .collect();
    vec![
        Case {
            name: "sn",
            hash: ("pk", S),
            range: Some(("sk", N)),
            items: string_number,
        },
        Case {
            name: "bn",
            hash: ("h", B),
            range: Some(("r", N)),
            items: binary_number,
        },
        Case {
            name: "nb",
            hash: ("hn", N),
            range: Some(("r", B)),
            items: number_binary,
        },
    ]
}

/// A DynamoDB-API server of the round trip.
struct Side<'a> {
    name: &'a str,
    url: &'a str,
    client: Client,
}

/// Copies each case's table from `src` to a missing table on `dst` with `drover migrate` and
/// compares both tables whole. `binary_hash`: whether the servers can scan a table with a
/// binary hash key.
async fn round_trip(src: Side<'_>, dst: Side<'_>, bulk: usize, binary_hash: bool) {
    let what = format!("{} → {}", src.name, dst.name);
    for case in cases(bulk) {
        if !binary_hash && case.hash.1 == ScalarAttributeType::B {
            continue;
        }
        let started = std::time::Instant::now();
        let src_table = table_name(&format!("ty_{}_{}_src", src.name, case.name));
        let dst_table = table_name(&format!("ty_{}_{}_dst", dst.name, case.name));
        keyed_table(
            &src.client,
            &src_table,
            case.hash.clone(),
            case.range.clone(),
        )
        .await;
        drop_table(&dst.client, &dst_table).await;
        let count = case.items.len();
        put_all(&src.client, &src_table, case.items).await;
        let loaded = started.elapsed();
        let yaml = job_between(
            (src.url, &src_table),
            (dst.url, &dst_table),
            "  scanSegments: 8\n",
            "",
            "",
        );
        let (code, stderr) = migrate(&yaml).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!("migration complete: {count} rows")),
            "{stderr}"
        );
        let copied = started.elapsed();
        let (a, b) = tokio::join!(
            scan_by_key(&src.client, &src_table, 8),
            scan_by_key(&dst.client, &dst_table, 8)
        );
        assert_eq!(
            a.len(),
            count,
            "{src_table}: the source holds what was loaded"
        );
        assert_same_items(
            &format!("{what} {} ({src_table} → {dst_table})", case.name),
            &a,
            &b,
        );
        eprintln!(
            "{what} {}: {count} items loaded in {loaded:?}, copied in {:?}, compared in {:?}",
            case.name,
            copied - loaded,
            started.elapsed() - copied
        );
        drop_table(&src.client, &src_table).await;
        drop_table(&dst.client, &dst_table).await;
    }
}

/// 100 000 items of every type on dynalite (the issue's count), plus binary and number keys.
/// From a dynalite of the test's own to another: two processes share the work of the copy
/// (each dynalite uses one core), and the shared dynalite's other users are not slowed down
/// by 200 000 items.
#[tokio::test]
async fn every_attribute_type_round_trips_exactly_on_dynalite() {
    let (a, b) = tokio::join!(OwnDynalite::start(), OwnDynalite::start());
    round_trip(
        Side {
            name: "dynalite",
            url: a.url(),
            client: a.client(),
        },
        Side {
            name: "dynalite2",
            url: b.url(),
            client: b.client(),
        },
        100_000,
        true,
    )
    .await;
}

/// The same on moto, between two tables of the test environment's moto, with 1 500 items in
/// the big table instead of 100 000: moto's Scan costs about 3 ms of CPU per item returned (and
/// each page re-reads the table), so the three whole scans of this test (drover's and both
/// sides' comparison) take seconds per thousand items. moto 5.2.5 cannot scan a table whose
/// hash key is binary (every Scan answers HTTP 500: `is_within_segment` calls `.encode` on the
/// key's bytes), so that table is copied on dynalite only.
#[tokio::test]
async fn every_attribute_type_round_trips_exactly_on_moto() {
    let url = Server::Moto.url();
    let side = |name| Side {
        name,
        url: &url,
        client: Server::Moto.client(),
    };
    round_trip(side("moto"), side("moto"), 1_500, false).await;
}
