//! The DynamoDB part of the fidelity matrix (docs/fidelity.md): hostile tables of every
//! attribute type, every path of drover's that takes a DynamoDB table or an S3 export of one,
//! and a second reader that shares no code with drover's.
//!
//! The tables live on a dynalite of the test's own (DynamoDB's validation, and no other test's
//! load): every attribute type (S with U+10FFFF and the empty string, N at DynamoDB's limits
//! and in non-canonical forms, B that is not UTF-8 and empty, BOOL, NULL, the three sets at
//! their extremes, lists and maps nested, empty and mixed, maps 32 levels deep, attribute
//! names of every kind), every key type as hash key and hash + range, items near 400 KB, and
//! 3,000 items, so that several scan segments, export files and load units are used.
//!
//! Each path copies each table: DynamoDB → DynamoDB; an S3 export in AWS's layout, written
//! here from the source table by boto3 (as AWS writes one), loaded into DynamoDB; drover's own
//! export, read file by file by the reader; and drover's export to S3 loaded back. Then
//! `tests/fidelity/dynamodb_reader.py` dumps the source and the result (boto3 for tables, the
//! standard library's gzip and json for export files) in a canonical form in which numbers
//! compare as decimals, as DynamoDB compares them. A path that cannot take a table must refuse
//! it before it writes; a refusal is a verdict, not a gap. The matrix (attribute kind × path →
//! exact / refused / WRONG) is printed, must equal the one in docs/fidelity.md
//! (`DROVER_BLESS=1` rewrites it there), and the test fails on any WRONG.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, BillingMode, KeyType, ScalarAttributeType};
use futures::StreamExt;
use serde_json::Value;
use test_support::Daemon;
use test_support::dynamodb::{Item, OwnDynalite, Server, attr, job_between, key, put_all};

use crate::dynamodb_types::{b, m, n, s};
use crate::fidelity::{Verdict, hold_matrix, run};

const MIGRATIONS: &str = "/api/v1/migrations";

/// A row of the matrix and the attributes of a table that hold it; none: the whole table
/// (its set of items and every attribute).
struct Kind {
    label: &'static str,
    attrs: Vec<String>,
}

fn kind(label: &'static str, attrs: &[&str]) -> Kind {
    Kind {
        label,
        attrs: attrs.iter().map(|a| (*a).to_string()).collect(),
    }
}

/// One source table: its key (hash first), the kinds it holds and its items.
struct Table {
    name: &'static str,
    key: Vec<(&'static str, ScalarAttributeType)>,
    kinds: Vec<Kind>,
    items: Vec<Item>,
}

/// The paths, by tag.
struct PathSpec {
    label: &'static str,
    tag: &'static str,
}

const PATHS: &[PathSpec] = &[
    PathSpec {
        label: "DynamoDB → DynamoDB",
        tag: "ddb",
    },
    PathSpec {
        label: "S3 export (AWS's layout) → DynamoDB",
        tag: "awsload",
    },
    PathSpec {
        label: "DynamoDB → S3 export, read by Python",
        tag: "export",
    },
    PathSpec {
        label: "DynamoDB → S3 export → DynamoDB",
        tag: "exportload",
    },
];

fn l(values: Vec<AttributeValue>) -> AttributeValue {
    AttributeValue::L(values)
}

/// Numbers at DynamoDB's limits (38 significant digits, the largest and smallest magnitudes)
/// and in forms a server may rewrite (trailing zeros, an exponent, -0). Numerically distinct.
const NUMBERS: &[&str] = &[
    "12345678901234567890123456789012345678",
    "-1.2345678901234567890123456789012345678E-120",
    "9.9999999999999999999999999999999999999E+125",
    "-9.9999999999999999999999999999999999999E+125",
    "1E-130",
    "-1E-130",
    "0.00000000000000000000000000000000000001",
    "-0",
    "1.500",
    "1E+2",
    "-17",
    "0.000120",
];

/// Bytes that are not UTF-8 (a lone continuation byte, an overlong start, 0xff), with 0x00,
/// distinct for each `i`.
fn bytes(i: usize) -> Vec<u8> {
    let mut v = vec![0x00, 0xff, 0xfe, 0x80, 0xc0, 0xaf, 0xed, 0xa0, 0x80];
    v.extend_from_slice(&(i as u32).to_be_bytes());
    v
}

/// `depth` maps and lists, alternately, around a number.
fn nested(depth: usize) -> AttributeValue {
    (0..depth).fold(n("-0.5"), |inner, level| {
        if level % 2 == 0 {
            m(vec![("level", n(level.to_string())), ("in", inner)])
        } else {
            l(vec![inner, AttributeValue::Null(true)])
        }
    })
}

/// The DynamoDB nesting limit (AWS documents 32 levels; neither test server enforces it).
const DEEPEST: usize = 32;

/// A long attribute name, and names a path could mistake for a path or a placeholder.
fn odd_names() -> Vec<String> {
    vec![
        "ключ 🔑 \u{10FFFF}".into(),
        "a.b[0]".into(),
        "#name :value".into(),
        "\u{0}\t\n\"\\".into(),
        "n".repeat(255),
    ]
}

/// The table of every attribute type, `count` items under a string hash key `id`.
fn attribute_table(count: usize) -> Table {
    let items = (0..count)
        .map(|i| {
            let num = |k: usize| NUMBERS[(i + k) % NUMBERS.len()];
            let mut item: Item = [
                ("id", s(format!("item {i:03}"))),
                ("s", s(format!("text {i} — ünïcödé ✓ 日本語 🔑"))),
                ("s_max", s("\u{10FFFF}\u{FFFD}\u{FEFF}")),
                ("s_empty", s("")),
                ("s_ctrl", s("\u{0}\u{1}\t\r\n\"\\\u{7f}")),
                ("n", n(num(0))),
                ("n_38", n(NUMBERS[0])),
                ("n_max", n(NUMBERS[2])),
                ("n_min", n(NUMBERS[3])),
                ("n_tiny", n(NUMBERS[4])),
                ("n_ntiny", n(NUMBERS[5])),
                ("n_negzero", n("-0")),
                ("n_trailing", n("1.500")),
                ("n_exp", n("1E+2")),
                ("b", b(bytes(i))),
                ("b_empty", b(Vec::new())),
                ("t", AttributeValue::Bool(true)),
                ("f", AttributeValue::Bool(false)),
                ("z", AttributeValue::Null(true)),
                (
                    "ss",
                    AttributeValue::Ss(vec![
                        format!("a{i}"),
                        "\u{10FFFF}".into(),
                        " ".into(),
                        "ü ✓ 🔑".into(),
                        "\u{0}".into(),
                    ]),
                ),
                (
                    "ns",
                    AttributeValue::Ns(
                        [0, 1, 2, 3, 4, 5, 6, 11]
                            .iter()
                            .map(|k| NUMBERS[*k].to_string())
                            .chain([format!("{i}.50")])
                            .collect(),
                    ),
                ),
                (
                    "bs",
                    AttributeValue::Bs(vec![
                        Blob::new(bytes(i)),
                        Blob::new(vec![0u8]),
                        Blob::new(vec![0xff]),
                        Blob::new(vec![0xc3, 0x28, (i % 256) as u8]),
                    ]),
                ),
                (
                    "l",
                    l(vec![
                        n(num(1)),
                        s(""),
                        b(Vec::new()),
                        b(bytes(i + 1)),
                        AttributeValue::Bool(true),
                        AttributeValue::Null(true),
                        m(vec![("k", s("v"))]),
                        l(vec![s("inner"), n("-0"), l(vec![])]),
                        AttributeValue::Ss(vec!["x".into(), "\u{10FFFF}".into()]),
                        AttributeValue::Ns(vec![num(2).into(), num(3).into()]),
                        AttributeValue::Bs(vec![Blob::new(vec![0u8]), Blob::new(bytes(i))]),
                    ]),
                ),
                ("l_empty", l(vec![])),
                (
                    "l_nested",
                    (0..8).fold(l(vec![n(num(4))]), |inner, _| l(vec![inner, l(vec![])])),
                ),
                (
                    "m",
                    m(vec![
                        ("n", n(num(5))),
                        ("", s("an empty key")),
                        ("es", s("")),
                        ("eb", b(Vec::new())),
                        ("b", b(bytes(i + 2))),
                        ("empty map", m(vec![])),
                        ("empty list", l(vec![])),
                        ("ss", AttributeValue::Ss(vec!["x".into(), format!("y{i}")])),
                        ("ключ 🔑", s("значение")),
                        ("a.b", AttributeValue::Bool(false)),
                    ]),
                ),
                ("m_empty", m(vec![])),
                ("m_deep", nested(DEEPEST)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            for (k, name) in odd_names().into_iter().enumerate() {
                item.insert(name, n(num(k)));
            }
            item
        })
        .collect();
    let names: Vec<String> = odd_names();
    Table {
        name: "attrs",
        key: vec![("id", ScalarAttributeType::S)],
        kinds: vec![
            kind(
                "S: unicode, U+10FFFF, control characters, empty (non-key)",
                &["s", "s_max", "s_empty", "s_ctrl"],
            ),
            kind(
                "N: 38 digits, ±9.9…9E+125, ±1E-130, -0, trailing zeros, exponents",
                &[
                    "n",
                    "n_38",
                    "n_max",
                    "n_min",
                    "n_tiny",
                    "n_ntiny",
                    "n_negzero",
                    "n_trailing",
                    "n_exp",
                ],
            ),
            kind("B: not UTF-8, empty (non-key)", &["b", "b_empty"]),
            kind("BOOL", &["t", "f"]),
            kind("NULL", &["z"]),
            kind("SS: unicode, U+10FFFF, NUL", &["ss"]),
            kind("NS: DynamoDB's extremes", &["ns"]),
            kind("BS: not UTF-8", &["bs"]),
            kind(
                "L: nested, empty, of every type",
                &["l", "l_empty", "l_nested"],
            ),
            kind(
                "M: nested 32 levels, empty, odd keys",
                &["m", "m_empty", "m_deep"],
            ),
            Kind {
                label: "attribute names: unicode, punctuation, control characters, 255 bytes",
                attrs: names,
            },
        ],
        items,
    }
}

/// The tables of every key type: a hash key of each, and hash + range keys of each pair.
fn key_tables() -> Vec<Table> {
    use ScalarAttributeType::{B, N, S};
    let strings: Vec<String> = vec![
        "\u{10FFFF}".into(),
        "a".into(),
        " ".into(),
        "ü".into(),
        "🔑 ключ".into(),
        "\u{0}".into(),
    ];
    let numbers: Vec<String> = NUMBERS.iter().map(|n| (*n).to_string()).collect();
    let binaries: Vec<Vec<u8>> = vec![vec![0], vec![0xff], bytes(1), bytes(2), vec![0xc3, 0x28]];
    // The last value of a string or binary key is as long as DynamoDB allows: 2,048 bytes for
    // a hash key, 1,024 for a range key.
    let value = |t: &ScalarAttributeType, i: usize, hash: bool| {
        let longest = if hash { 2048 } else { 1024 };
        match t {
            S if i % (strings.len() + 1) == strings.len() => s("x".repeat(longest)),
            S => s(strings[i % (strings.len() + 1)].clone()),
            N => n(numbers[i % numbers.len()].clone()),
            _ if i % (binaries.len() + 1) == binaries.len() => b(vec![0xa5; longest]),
            _ => b(binaries[i % (binaries.len() + 1)].clone()),
        }
    };
    let count = |t: &ScalarAttributeType| match t {
        S => strings.len() + 1,
        N => numbers.len(),
        _ => binaries.len() + 1,
    };
    let mut out = Vec::new();
    for (name, t, label) in [
        ("hash_s", S, "key: S hash key"),
        ("hash_n", N, "key: N hash key (-0, 1.500, 1E+2, extremes)"),
        ("hash_b", B, "key: B hash key, not UTF-8"),
    ] {
        let items = (0..count(&t))
            .map(|i| {
                [
                    ("k".to_string(), value(&t, i, true)),
                    ("v".to_string(), s(format!("value {i}"))),
                    ("w".to_string(), n(NUMBERS[i % NUMBERS.len()])),
                ]
                .into_iter()
                .collect()
            })
            .collect();
        out.push(Table {
            name,
            key: vec![("k", t)],
            kinds: vec![kind(label, &[])],
            items,
        });
    }
    // Each hash key value with every range key value.
    for (name, h, r) in [("key_sn", S, N), ("key_nb", N, B), ("key_bs", B, S)] {
        let mut items = Vec::new();
        for i in 0..count(&h) {
            for j in 0..count(&r) {
                items.push(
                    [
                        ("h".to_string(), value(&h, i, true)),
                        ("r".to_string(), value(&r, j, false)),
                        ("v".to_string(), s(format!("{i}/{j}"))),
                    ]
                    .into_iter()
                    .collect(),
                );
            }
        }
        out.push(Table {
            name,
            key: vec![("h", h.clone()), ("r", r.clone())],
            kinds: vec![kind("key: hash + range (S+N, N+B, B+S)", &[])],
            items,
        });
    }
    out
}

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

/// Items of about 400 KB (DynamoDB's limit is 409,600 bytes, names and values counted): one
/// string, one binary, one list of numbers, one map of many attributes, one string set.
fn large_table() -> Table {
    let unit = "ünïcödé ✓ 日本語 🔑 ";
    let items = (0..5)
        .map(|i| {
            let big = match i {
                0 => s(unit.repeat(398_000 / unit.len())),
                1 => b(noise(398_000, 7)),
                // 21 characters each: moto counts characters, and so does this limit here.
                2 => l((0..18_500)
                    .map(|k| n(format!("{k}.{}", "7".repeat(16))))
                    .collect()),
                3 => AttributeValue::M(
                    (0..3_900)
                        .map(|k| (format!("k{k:05}"), s(format!("{k:0>90}"))))
                        .collect(),
                ),
                _ => AttributeValue::Ss((0..3_900).map(|k| format!("{k:0>100}")).collect()),
            };
            [
                ("id".to_string(), s(format!("large {i}"))),
                ("big".to_string(), big),
                ("n".to_string(), n(NUMBERS[i])),
            ]
            .into_iter()
            .collect()
        })
        .collect();
    Table {
        name: "large",
        key: vec![("id", ScalarAttributeType::S)],
        kinds: vec![kind("items near 400 KB (S, B, L, M, SS)", &[])],
        items,
    }
}

/// Items enough for several scan segments, export data files and load units.
const MANY: usize = 3_000;

fn many_table() -> Table {
    let items = (0..MANY)
        .map(|i| {
            [
                ("id".to_string(), s(format!("{i:05} 🔑"))),
                ("n".to_string(), n(NUMBERS[i % NUMBERS.len()])),
                ("b".to_string(), b(bytes(i))),
                ("t".to_string(), AttributeValue::Bool(i % 2 == 0)),
                (
                    "m".to_string(),
                    m(vec![(
                        "l",
                        l(vec![s(i.to_string()), AttributeValue::Null(true)]),
                    )]),
                ),
            ]
            .into_iter()
            .collect()
        })
        .collect();
    Table {
        name: "many",
        key: vec![("id", ScalarAttributeType::S)],
        kinds: vec![kind(
            "3,000 items: 8 scan segments, several export files and load units",
            &[],
        )],
        items,
    }
}

fn tables() -> Vec<Table> {
    let mut out = vec![attribute_table(40)];
    out.extend(key_tables());
    out.push(large_table());
    out.push(many_table());
    out
}

/// Creates `name` with `key` (hash first), on demand.
async fn create(c: &Client, name: &str, key_schema: &[(&str, ScalarAttributeType)]) {
    let mut req = c
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest);
    for (i, (a, t)) in key_schema.iter().enumerate() {
        let kind = if i == 0 {
            KeyType::Hash
        } else {
            KeyType::Range
        };
        req = req
            .key_schema(key(a, kind))
            .attribute_definitions(attr(a, t.clone()));
    }
    req.send().await.expect("create table");
    test_support::dynamodb::wait_active(c, name).await;
}

/// Items in `table`, 0 when there is no such table.
async fn items_in(c: &Client, table: &str) -> usize {
    match c.describe_table().table_name(table).send().await {
        Ok(_) => test_support::dynamodb::count(c, table).await,
        Err(_) => 0,
    }
}

/// What `tests/fidelity/dynamodb_reader.py` writes, run with `args`, through boto3's Python
/// (moto's venv: `DROVER_TEST_BOTO3_PYTHON`, or where `scripts/testenv` puts it).
async fn reader(args: &[&str]) -> Value {
    let python = std::env::var_os("DROVER_TEST_BOTO3_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("DROVER_TESTENV_CACHE")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| {
                    std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                        .join(".cache/drover-testenv")
                });
            cache.join("moto-venv/bin/python")
        });
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fidelity/dynamodb_reader.py"
    );
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run {} (scripts/testenv up): {e}", python.display()));
    assert!(
        out.status.success(),
        "dynamodb_reader.py {:?}: {}",
        args.iter().map(|a| cut(a, 80)).collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

fn cut(text: &str, at: usize) -> String {
    match text.char_indices().nth(at) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

fn key_names(t: &Table) -> String {
    t.key.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(",")
}

/// Each attribute's verdict (and `ROWS`'s: the items' set, and what the reader found wrong
/// with an export's files): `Err` says what differs.
type Attrs = HashMap<String, Result<(), String>>;

const ROWS: &str = "*items";

/// The verdict of every attribute, comparing two dumps, and the number texts that differ
/// where the numbers do not (a rewrite, not a change).
fn compare(src: &Value, dst: &Value) -> (Attrs, Vec<String>) {
    let items = |d: &Value| d["items"].as_array().cloned().unwrap_or_default();
    let (sitems, ditems) = (items(src), items(dst));
    let key = |i: &Value| i["key"].as_str().unwrap_or_default().to_string();
    let skeys: Vec<String> = sitems.iter().map(key).collect();
    let dkeys: Vec<String> = ditems.iter().map(key).collect();
    let mut out = HashMap::new();
    let problems: Vec<String> = dst["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p.as_str().unwrap_or_default().to_string())
        .collect();
    let rows = if !problems.is_empty() {
        Err(format!("the files: {}", problems.join("; ")))
    } else if skeys == dkeys {
        Ok(())
    } else {
        let (sset, dset): (BTreeSet<&String>, BTreeSet<&String>) =
            (skeys.iter().collect(), dkeys.iter().collect());
        let missing: Vec<String> = sset.difference(&dset).take(3).map(|k| cut(k, 80)).collect();
        let extra: Vec<String> = dset.difference(&sset).take(3).map(|k| cut(k, 80)).collect();
        Err(format!(
            "{} items in the source, {} in the result; missing {missing:?}, extra {extra:?}",
            skeys.len(),
            dkeys.len()
        ))
    };
    out.insert(ROWS.to_string(), rows);
    let by_key: HashMap<String, &Value> = ditems.iter().map(|i| (key(i), i)).collect();
    let mut notes = Vec::new();
    for item in &sitems {
        let Some(target) = by_key.get(&key(item)) else {
            continue;
        };
        let names: BTreeSet<&String> = item["attrs"]
            .as_object()
            .into_iter()
            .chain(target["attrs"].as_object())
            .flat_map(|o| o.keys())
            .collect();
        for name in names {
            let entry = out.entry(name.clone()).or_insert(Ok(()));
            let (a, b) = (&item["attrs"][name], &target["attrs"][name]);
            if entry.is_ok() && a != b {
                *entry = Err(format!(
                    "item {}, attribute {:?}: source {} | result {}",
                    cut(&key(item), 60),
                    cut(name, 40),
                    cut(&a.to_string(), 200),
                    cut(&b.to_string(), 200)
                ));
            }
            let (ta, tb) = (&item["numbers"][name], &target["numbers"][name]);
            if a == b && ta != tb && notes.len() < 3 {
                notes.push(format!(
                    "{}: {} → {}",
                    cut(name, 40),
                    cut(&ta.to_string(), 100),
                    cut(&tb.to_string(), 100)
                ));
            }
        }
    }
    (out, notes)
}

/// Where the test's services are, and the daemon that runs the jobs.
struct Env {
    daemon: Daemon,
    dynalite: OwnDynalite,
    client: Client,
    bucket: String,
    spool: tempfile::TempDir,
}

impl Env {
    fn moto_host_port(&self) -> (String, String) {
        let url = Server::Moto.url();
        let (h, p) = url.rsplit_once(':').unwrap();
        (h.to_string(), p.to_string())
    }

    /// `region`, `endpoint` and `credentials` of moto's S3, indented as a section's keys.
    fn s3_access(&self) -> String {
        let (host, port) = self.moto_host_port();
        format!(
            "  region: us-east-1\n  endpoint:\n    host: {host}\n    port: {port}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n"
        )
    }

    /// A job reading `table` of the dynalite, its target section left to the caller.
    fn dynamodb_source(&self, table: &str) -> String {
        let job = job_between(
            (self.dynalite.url(), table),
            (self.dynalite.url(), "unused"),
            "  scanSegments: 8\n",
            "",
            "",
        );
        job[..job.find("target:").unwrap()].to_string()
    }

    /// A job loading the export whose summary is `manifest_key` in the bucket into `target`.
    fn load(&self, t: &Table, manifest_key: &str, target: &str) -> String {
        let mut definitions = String::new();
        let mut schema = String::new();
        for (i, (a, kind)) in t.key.iter().enumerate() {
            definitions.push_str(&format!(
                "      - name: {a}\n        type: {}\n",
                kind.as_str()
            ));
            let role = if i == 0 { "HASH" } else { "RANGE" };
            schema.push_str(&format!("      - name: {a}\n        type: {role}\n"));
        }
        let (dh, dp) = self.dynalite.url().rsplit_once(':').unwrap();
        format!(
            "source:\n  type: dynamodb-s3-export\n  bucket: {}\n  manifestKey: {manifest_key}\n  usePathStyleAccess: true\n  tableDescription:\n    attributeDefinitions:\n{definitions}    keySchema:\n{schema}{}target:\n  type: dynamodb\n  table: {target}\n  region: us-east-1\n  endpoint:\n    host: {dh}\n    port: {dp}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n  streamChanges: false\n",
            self.bucket,
            self.s3_access()
        )
    }
}

/// A path's outcome on one table: its attributes' verdicts and the number texts rewritten,
/// or why it took none.
type Outcome = Result<(Attrs, Vec<String>), Verdict>;

/// Runs `path` for `table`: the verdict of each of its attributes, or why it was refused.
async fn one(path: &PathSpec, t: &Table, source: &Value, env: &Env) -> Outcome {
    let target = format!("{}_{}", t.name, path.tag);
    let keys = key_names(t);
    let result = match path.tag {
        "ddb" => {
            let yaml = job_between(
                (env.dynalite.url(), t.name),
                (env.dynalite.url(), &target),
                "  scanSegments: 8\n",
                "",
                "",
            );
            run(&env.daemon, MIGRATIONS, &yaml).await
        }
        "awsload" => {
            let (host, port) = env.moto_host_port();
            let written = reader(&[
                "write-export",
                env.dynalite.url(),
                t.name,
                &format!("{host}:{port}"),
                &env.bucket,
                &format!("aws/{}", t.name),
                "1000",
            ])
            .await;
            let manifest = written["manifestKey"].as_str().unwrap();
            run(&env.daemon, MIGRATIONS, &env.load(t, manifest, &target)).await
        }
        "export" => {
            let dir = env.spool.path().join(&target);
            let yaml = format!(
                "{}target:\n  type: dynamodb-s3-export\n  path: {}\n",
                env.dynamodb_source(t.name),
                dir.display()
            );
            return match run(&env.daemon, MIGRATIONS, &yaml).await {
                Ok(()) => {
                    let read = reader(&["export", &dir.to_string_lossy(), &keys]).await;
                    if t.items.len() == MANY {
                        // A data file per scan segment: the many items are in several.
                        assert_eq!(read["files"], 8, "{}: the export's files", t.name);
                    }
                    Ok(compare(source, &read))
                }
                Err(e) => Err(Verdict::Refused(e)),
            };
        }
        "exportload" => {
            let prefix = format!("drover/{}", t.name);
            let yaml = format!(
                "{}target:\n  type: dynamodb-s3-export\n  path: s3a://{}/{prefix}\n{}",
                env.dynamodb_source(t.name),
                env.bucket,
                env.s3_access()
            );
            match run(&env.daemon, MIGRATIONS, &yaml).await {
                Ok(()) => {
                    let manifest = format!("{prefix}/manifest-summary.json");
                    run(&env.daemon, MIGRATIONS, &env.load(t, &manifest, &target))
                        .await
                        .map_err(|e| format!("the load: {e}"))
                }
                Err(e) => Err(format!("the export: {e}")),
            }
        }
        other => unreachable!("path {other}"),
    };
    if let Err(e) = result {
        // A refusal is drover's, before it writes: a write the target server turned down is
        // a wrong copy even when nothing landed.
        let written = items_in(&env.client, &target).await;
        return Err(if written == 0 && !e.contains("BatchWriteItem") {
            Verdict::Refused(e)
        } else {
            Verdict::Wrong(format!("failed after writing {written} items: {e}"))
        });
    }
    let read = reader(&["table", env.dynalite.url(), &target, &keys]).await;
    Ok(compare(source, &read))
}

/// The number texts in `v`, as the test wrote them.
fn written_texts(v: &AttributeValue, out: &mut Vec<String>) {
    match v {
        AttributeValue::N(x) => out.push(x.clone()),
        AttributeValue::Ns(xs) => out.extend(xs.iter().cloned()),
        AttributeValue::L(vs) => vs.iter().for_each(|v| written_texts(v, out)),
        AttributeValue::M(vs) => vs.values().for_each(|v| written_texts(v, out)),
        _ => {}
    }
}

/// How the server gives back the numbers the test wrote into `t` (a table keyed by a string
/// `id`) where it gives them back in another form: written text → text read. Only attributes
/// holding one number are paired.
fn server_rewrites(t: &Table, source: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let read: HashMap<String, &Value> = source["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| Some((i["attrs"]["id"]["S"].as_str()?.to_string(), i)))
        .collect();
    for item in &t.items {
        let Some(AttributeValue::S(id)) = item.get("id") else {
            continue;
        };
        let Some(r) = read.get(id) else { continue };
        for (name, v) in item {
            let mut texts = Vec::new();
            written_texts(v, &mut texts);
            texts.sort();
            let got: Vec<String> = r["numbers"][name]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect();
            // Pairs only where one number was written and one read.
            if let ([w], [g]) = (texts.as_slice(), got.as_slice())
                && w != g
            {
                out.insert(w.clone(), g.clone());
            }
        }
    }
    out
}

#[tokio::test]
async fn every_dynamodb_path_copies_every_attribute_type_exactly_or_refuses_it() {
    let started = Instant::now();
    let dynalite = OwnDynalite::start().await;
    let client = dynalite.client();
    let tables = tables();
    for t in &tables {
        create(&client, t.name, &t.key).await;
        put_all(&client, t.name, t.items.clone()).await;
    }
    let bucket = format!("drover-it-fidelity-p{}", std::process::id());
    let status = test_support::http_client()
        .put(format!("{}/{bucket}", Server::Moto.url()))
        .send()
        .await
        .unwrap()
        .status();
    assert!(
        status.is_success() || status == 409,
        "create bucket: {status}"
    );
    let env = Env {
        daemon: Daemon::fresh("").await,
        client,
        bucket,
        spool: tempfile::tempdir().unwrap(),
        dynalite,
    };
    let sources: Vec<Value> =
        futures::future::join_all(tables.iter().map(|t| async {
            reader(&["table", env.dynalite.url(), t.name, &key_names(t)]).await
        }))
        .await;
    for (t, source) in tables.iter().zip(&sources) {
        assert_eq!(
            source["items"].as_array().map(Vec::len),
            Some(t.items.len()),
            "{}: the source holds what was written",
            t.name
        );
    }
    let rewrites = server_rewrites(&tables[0], &sources[0]);
    let filled = started.elapsed();

    // DROVER_FIDELITY_PATHS=ddb,export runs only those paths (by tag), and leaves the page
    // alone.
    let only: Option<Vec<String>> = std::env::var("DROVER_FIDELITY_PATHS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let paths: Vec<&PathSpec> = PATHS
        .iter()
        .filter(|p| only.as_ref().is_none_or(|o| o.iter().any(|t| t == p.tag)))
        .collect();
    let work: Vec<(usize, usize)> = (0..paths.len())
        .flat_map(|p| (0..tables.len()).map(move |t| (p, t)))
        .collect();
    // Two at a time: the machine has two cores, and dynalite uses one.
    let results: HashMap<(usize, usize), Outcome> = futures::stream::iter(work)
        .map(|(p, t)| {
            let (paths, tables, sources, env) = (&paths, &tables, &sources, &env);
            async move { ((p, t), one(paths[p], &tables[t], &sources[t], env).await) }
        })
        .buffer_unordered(2)
        .collect()
        .await;

    // The matrix: kinds down (a kind held by several tables is as good as its worst), paths
    // across.
    let mut rows: Vec<(&str, Vec<Verdict>)> = Vec::new();
    let mut notes = Vec::new();
    for (ti, t) in tables.iter().enumerate() {
        for k in &t.kinds {
            let verdicts: Vec<Verdict> = (0..paths.len())
                .map(|p| match &results[&(p, ti)] {
                    Err(v) => v.clone(),
                    Ok((attrs, _)) => {
                        let all: Vec<String> = attrs.keys().cloned().collect();
                        let names = if k.attrs.is_empty() { &all } else { &k.attrs };
                        std::iter::once(&ROWS.to_string())
                            .chain(names)
                            .find_map(|a| match attrs.get(a) {
                                Some(Err(e)) => Some(Verdict::Wrong(format!("{}: {e}", t.name))),
                                _ => None,
                            })
                            .unwrap_or(Verdict::Exact)
                    }
                })
                .collect();
            match rows.iter_mut().find(|(label, _)| *label == k.label) {
                Some((_, have)) => {
                    for (h, v) in have.iter_mut().zip(verdicts) {
                        let rank = |v: &Verdict| match v {
                            Verdict::Exact => 0,
                            Verdict::Refused(_) => 1,
                            Verdict::Wrong(_) => 2,
                        };
                        if rank(&v) > rank(h) {
                            *h = v;
                        }
                    }
                }
                None => rows.push((k.label, verdicts)),
            }
        }
        for (p, path) in paths.iter().enumerate() {
            if let Ok((_, texts)) = &results[&(p, ti)]
                && !texts.is_empty()
            {
                notes.push(format!(
                    "- {} · {}: numbers kept, texts rewritten: {}",
                    path.label,
                    t.name,
                    texts.join("; ")
                ));
            }
        }
    }
    println!(
        "dynalite stores these numbers in another form (the same number): {rewrites:?}\n{}",
        notes.join("\n")
    );
    println!(
        "filled and read the sources in {filled:?}, ran every path in {:?}",
        started.elapsed() - filled
    );
    let labels: Vec<&str> = paths.iter().map(|p| p.label).collect();
    hold_matrix(
        "dynamodb-matrix",
        "attribute kind",
        &labels,
        &rows,
        only.is_some(),
    );
}
