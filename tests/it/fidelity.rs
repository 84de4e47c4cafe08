//! The fidelity matrix (docs/fidelity.md): one generator of hostile tables, every CQL path
//! that claims to take them, and a second reader that shares no code with drover's.
//!
//! The generator writes tables of every CQL type in every position it may take (partition
//! key, clustering ASC and DESC, static, regular, inside frozen and non-frozen collections,
//! tuples, UDTs, vectors), with nulls, empty and extreme values, a writetime and a TTL of its
//! own for each cell, collection element and UDT field (cells without a TTL beside cells with
//! one), row, range, partition, cell and element tombstones, key-only rows, static-only
//! partitions, a wide partition and counters; each table is written in two flushes so that
//! later writes and deletions sit in SSTables of their own.
//!
//! Each path copies every table into a fresh target table. Then `tests/fidelity/cql_reader.py`
//! (the DataStax Python driver) dumps the source and the result: each cell's value, and the
//! writetime and TTL of each cell, of each collection element and of each UDT field; a
//! Parquet export is also read by `tests/fidelity/parquet_reader.py` (pyarrow). A path
//! that cannot take a table must refuse it before it writes anything; a refusal is a verdict
//! of the matrix, not a gap. The matrix (column kind × path → exact / refused / WRONG) is
//! printed, must equal the one in docs/fidelity.md (`DROVER_BLESS=1` rewrites it there), and
//! the test fails on any WRONG.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::Value;
use test_support::Daemon;
use test_support::cql::{Fixture, dst_addr, exec, job_to, src_addr};
use test_support::ended;

use crate::bulk_write::{bulk, sidecar_config};

const WAIT: Duration = Duration::from_secs(600);

/// Types the tables use, on both clusters.
const TYPES: &str = "CREATE TYPE $ks.pt (a int, b text);
    CREATE TYPE $ks.addr (street text, num int, zip text, tags frozen<set<text>>, inner frozen<pt>)";

/// Every native type but counter, with a typical literal.
const NATIVE: &[(&str, &str)] = &[
    ("ascii", "'hello'"),
    ("bigint", "1234567890123"),
    ("blob", "0xcafebabe"),
    ("boolean", "true"),
    ("date", "'2024-02-29'"),
    ("decimal", "123.4500"),
    ("double", "3.141592653589793"),
    ("duration", "1mo2d3h4m5s6ms7us8ns"),
    ("float", "1.5"),
    ("inet", "'192.168.0.1'"),
    ("int", "42"),
    ("smallint", "-7"),
    ("text", "'ünïcödé ✓'"),
    ("time", "'08:12:54.123456789'"),
    ("timestamp", "'2024-01-02 03:04:05.678+0000'"),
    ("timeuuid", "50554d6e-29bb-11e5-b345-feff819cdc9f"),
    ("tinyint", "5"),
    ("uuid", "f47ac10b-58cc-4372-a567-0e02b2c3d479"),
    ("varchar", "'vc'"),
    ("varint", "123456789012345678901234567890"),
];

/// Extreme values of each native type.
const EXTREME: &[(&str, &str)] = &[
    ("ascii", "'~'"),
    ("bigint", "-9223372036854775808"),
    ("blob", "0x00ff"),
    ("boolean", "false"),
    ("date", "'4294967295'"),
    ("decimal", "-1.000E-300"),
    ("double", "-0.0"),
    ("duration", "-1y2mo3d"),
    ("float", "NaN"),
    ("inet", "'2001:db8::1'"),
    ("int", "-2147483648"),
    ("smallint", "32767"),
    ("text", "'\u{10FFFF}'"),
    ("time", "'23:59:59.999999999'"),
    ("timestamp", "253402300800000"),
    ("timeuuid", "minTimeuuid('1970-01-01 00:00:00+0000')"),
    ("tinyint", "-128"),
    ("uuid", "00000000-0000-0000-0000-000000000000"),
    ("varchar", "''"),
    ("varint", "-123456789012345678901234567890123456789"),
];

/// Other extremes, for a second row.
const EXTREME2: &[(&str, &str)] = &[
    ("bigint", "9223372036854775807"),
    ("date", "'0'"),
    ("decimal", "1.000E+300"),
    ("double", "-Infinity"),
    ("float", "Infinity"),
    ("int", "2147483647"),
    ("smallint", "-32768"),
    ("time", "'00:00:00'"),
    ("timestamp", "-62135596800001"),
    ("tinyint", "127"),
    ("varint", "0"),
];

/// Types whose empty value (zero bytes, not null) Cassandra takes.
const EMPTY_OK: &[&str] = &[
    "bigint",
    "boolean",
    "decimal",
    "double",
    "float",
    "inet",
    "int",
    "timestamp",
    "timeuuid",
    "uuid",
    "varint",
];

/// Types a key may have, and three values of each in ascending order.
const KEYABLE: &[(&str, [&str; 3])] = &[
    ("ascii", ["''", "'a'", "'b'"]),
    (
        "bigint",
        ["-9223372036854775808", "0", "9223372036854775807"],
    ),
    ("blob", ["0x", "0x00", "0xff"]),
    ("boolean", ["false", "true", "true"]),
    ("date", ["'0'", "'2024-02-29'", "'4294967295'"]),
    ("decimal", ["-1.5", "1.50", "1.0E+10"]),
    ("double", ["-Infinity", "-0.0", "1.5"]),
    ("float", ["-1.5", "0.0", "Infinity"]),
    ("inet", ["'1.2.3.4'", "'10.0.0.1'", "'2001:db8::1'"]),
    ("int", ["-2147483648", "0", "2147483647"]),
    ("smallint", ["-32768", "1", "32767"]),
    ("text", ["''", "'a'", "'ü'"]),
    ("time", ["'00:00:00'", "'12:00:00'", "'23:59:59.999999999'"]),
    ("timestamp", ["-62135596800001", "0", "253402300800000"]),
    (
        "timeuuid",
        [
            "minTimeuuid('1970-01-01 00:00:00+0000')",
            "50554d6e-29bb-11e5-b345-feff819cdc9f",
            "maxTimeuuid('2100-01-01 00:00:00+0000')",
        ],
    ),
    ("tinyint", ["-128", "0", "127"]),
    (
        "uuid",
        [
            "00000000-0000-0000-0000-000000000000",
            "7f000000-0000-4000-8000-000000000000",
            "ffffffff-ffff-4fff-bfff-ffffffffffff",
        ],
    ),
    (
        "varint",
        ["-99999999999999999999", "0", "99999999999999999999"],
    ),
    (
        "frozen<tuple<int, text>>",
        ["(1, 'a')", "(1, 'b')", "(2, '')"],
    ),
    ("frozen<pt>", ["{a: 1, b: 'a'}", "{a: 1, b: 'b'}", "{a: 2}"]),
    ("frozen<list<int>>", ["[]", "[1, 2]", "[2]"]),
];

/// A column kind (a row of the matrix) and where a table holds it: its columns, or `ROWS`
/// for the set and order of the table's rows (keys, key-only rows, partitions).
struct Kind {
    label: &'static str,
    columns: Vec<String>,
}

const ROWS: &str = "*rows";

/// One generated table: its columns, the kinds it holds, and how it is filled.
struct Table {
    name: &'static str,
    /// `CREATE TABLE $ks.<name> (<columns>) <options>`, less the name.
    columns: String,
    options: String,
    kinds: Vec<Kind>,
    /// Statements of the first flush and of the second.
    first: Vec<String>,
    second: Vec<String>,
    /// Rows of the wide partition (written by prepared batches, not statements).
    wide: usize,
}

fn kind(label: &'static str, columns: &[&str]) -> Kind {
    Kind {
        label,
        columns: columns.iter().map(|c| (*c).to_string()).collect(),
    }
}

/// A column per type, named `<prefix>_<type>`: the names, and the definitions.
fn key_columns(prefix: &str, types: &[(&str, [&str; 3])]) -> (Vec<String>, Vec<String>) {
    types
        .iter()
        .map(|(t, _)| {
            let name = format!("{prefix}_{}", col_name(t));
            (name.clone(), format!("{name} {t}"))
        })
        .unzip()
}

fn col_name(t: &str) -> String {
    t.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>()
        .replace("__", "_")
        .trim_matches('_')
        .to_string()
}

/// The writetime of the n-th write of the generator (microseconds, all in 2020).
fn ts(n: usize) -> i64 {
    1_600_000_000_000_000 + n as i64 * 1_000
}

/// A TTL or none: cells with and without one side by side.
fn ttl(n: usize) -> String {
    match n % 3 {
        0 => format!(" AND TTL {}", 86_400 + n),
        1 => String::new(),
        _ => format!(" AND TTL {}", 200_000 + 7 * n),
    }
}

fn tables() -> Vec<Table> {
    let mut out = Vec::new();

    // Every native type as a regular column, each cell at its own writetime and TTL.
    let mut first = Vec::new();
    let mut second = Vec::new();
    for c in 0..3 {
        for (i, (t, v)) in NATIVE.iter().enumerate() {
            let n = c * 100 + i;
            let stmt = format!(
                "UPDATE $t USING TIMESTAMP {}{} SET t_{t} = {v} WHERE p = 0 AND c = {c}",
                ts(n),
                ttl(n)
            );
            if i % 2 == 0 { &mut first } else { &mut second }.push(stmt);
        }
    }
    // A whole row in one write, then one cell overwritten later.
    first.push(format!(
        "INSERT INTO $t (p, c, {}) VALUES (1, 0, {}) USING TIMESTAMP {} AND TTL 90000",
        NATIVE
            .iter()
            .map(|(t, _)| format!("t_{t}"))
            .collect::<Vec<_>>()
            .join(", "),
        NATIVE
            .iter()
            .map(|(_, v)| *v)
            .collect::<Vec<_>>()
            .join(", "),
        ts(500)
    ));
    second.push(format!(
        "UPDATE $t USING TIMESTAMP {} SET t_text = 'later' WHERE p = 1 AND c = 0",
        ts(501)
    ));
    out.push(native_table(
        "scalars",
        "every native type, regular column, own writetime and TTL per cell",
        first,
        second,
    ));

    // Nulls and extremes.
    let mut first = Vec::new();
    let all_cols = NATIVE
        .iter()
        .map(|(t, _)| format!("t_{t}"))
        .collect::<Vec<_>>();
    for (row, set) in [(0, EXTREME), (1, EXTREME2)] {
        first.push(format!(
            "INSERT INTO $t (p, c, {}) VALUES (0, {row}, {}) USING TIMESTAMP {}",
            set.iter()
                .map(|(t, _)| format!("t_{t}"))
                .collect::<Vec<_>>()
                .join(", "),
            set.iter().map(|(_, v)| *v).collect::<Vec<_>>().join(", "),
            ts(600 + row)
        ));
    }
    // Nulls: a row with one cell, and a row with ten of its cells deleted (cell tombstones).
    first.push(format!(
        "INSERT INTO $t (p, c, t_int) VALUES (0, 3, 1) USING TIMESTAMP {}",
        ts(620)
    ));
    first.push(format!(
        "INSERT INTO $t (p, c, {}) VALUES (0, 4, {}) USING TIMESTAMP {}",
        all_cols.join(", "),
        NATIVE
            .iter()
            .map(|(_, v)| *v)
            .collect::<Vec<_>>()
            .join(", "),
        ts(621)
    ));
    let second = vec![format!(
        "DELETE {} FROM $t USING TIMESTAMP {} WHERE p = 0 AND c = 4",
        all_cols[..10].join(", "),
        ts(622)
    )];
    out.push(native_table(
        "extremes",
        "nulls and extreme values",
        first,
        second,
    ));

    // Empty values: zero bytes, which is not null.
    let first = vec![format!(
        "INSERT INTO $t (p, c, t_ascii, t_text, t_varchar, t_blob, {}) VALUES (0, 2, '', '', '', 0x, {}) USING TIMESTAMP {} AND TTL 100000",
        EMPTY_OK
            .iter()
            .map(|t| format!("t_{t}"))
            .collect::<Vec<_>>()
            .join(", "),
        EMPTY_OK
            .iter()
            .map(|t| format!("blobAs{}(0x)", capitalised(t)))
            .collect::<Vec<_>>()
            .join(", "),
        ts(610)
    )];
    out.push(native_table(
        "empties",
        "empty values (zero bytes, not null)",
        first,
        Vec::new(),
    ));

    // Every key type in a composite partition key.
    let (pk, pk_cols) = key_columns("k", KEYABLE);
    let mut first = Vec::new();
    for row in 0..3 {
        first.push(format!(
            "INSERT INTO $t ({}, c, v) VALUES ({}, {row}, 'v{row}') USING TIMESTAMP {}{}",
            pk.join(", "),
            KEYABLE
                .iter()
                .map(|(_, v)| v[row])
                .collect::<Vec<_>>()
                .join(", "),
            ts(700 + row),
            ttl(row)
        ));
    }
    out.push(Table {
        name: "pkeys",
        columns: format!(
            "{}, c int, v text, PRIMARY KEY (({}), c)",
            pk_cols.join(", "),
            pk.join(", ")
        ),
        options: String::new(),
        kinds: vec![kind(
            "partition key: every key type, composite",
            &[ROWS, "v"],
        )],
        first,
        second: Vec::new(),
        wide: 0,
    });

    // Every key type as a clustering column, ascending, then descending; and the types the
    // SSTable paths order, ASC and DESC mixed, so that a refusal of the others hides nothing.
    let orderable: Vec<(&str, [&str; 3])> = KEYABLE
        .iter()
        .filter(|(t, _)| {
            [
                "int",
                "bigint",
                "text",
                "ascii",
                "blob",
                "timestamp",
                "boolean",
                "double",
                "float",
            ]
            .contains(t)
        })
        .copied()
        .collect();
    for (name, types, order, label) in [
        (
            "ckeys_asc",
            KEYABLE.to_vec(),
            "ASC",
            "clustering ASC: every key type; key-only rows",
        ),
        (
            "ckeys_desc",
            KEYABLE.to_vec(),
            "DESC",
            "clustering DESC: every key type; key-only rows",
        ),
        (
            "ckeys_mixed",
            orderable,
            "",
            "clustering ASC and DESC mixed: the types the SSTable paths order",
        ),
    ] {
        out.push(clustering_table(name, &types, order, label));
    }

    // Collections, frozen and not, element by element.
    let k = |p: i64, c: i32| format!("WHERE p = {p} AND c = {c}");
    let mut first = vec![
        format!(
            "INSERT INTO $t (p, c, l, s, m, ml, mt, sb, fl, fs, fm) VALUES (1, 0, [1, 2, 2], {{'a', 'b'}}, {{1: 'x', 2: ''}}, {{'k': [1, 2]}}, {{'2024-01-01 00:00:00+0000': 1.50}}, {{0x, 0x00}}, [3, 1], {{'z'}}, {{1: {{2, 3}}, 4: {{}}}}) USING TIMESTAMP {}",
            ts(900)
        ),
        // Element by element, at other writetimes, with and without TTLs.
        format!(
            "UPDATE $t USING TIMESTAMP {} SET l = [1, 2] {}",
            ts(901),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 86400 SET l = l + [3] {}",
            ts(902),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET l = [0] + l {}",
            ts(903),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET s = s + {{'a'}} {}",
            ts(904),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 90000 SET s = s + {{'b', 'c'}} {}",
            ts(905),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 50000 SET m[1] = 'x' {}",
            ts(906),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET m[2] = 'y' {}",
            ts(907),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 70000 SET ml['a'] = [1] {}",
            ts(908),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET ml['b'] = [] {}",
            ts(909),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 60000 SET fl = [9, 9] {}",
            ts(910),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET sb = sb + {{0x01}} {}",
            ts(911),
            k(2, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 80000 SET sb = sb + {{0x02}} {}",
            ts(912),
            k(2, 0)
        ),
        // Elements removed, the whole collection replaced.
        format!(
            "UPDATE $t USING TIMESTAMP {} SET s = {{'a', 'b', 'c'}}, m = {{1: 'a', 2: 'b'}}, l = [5, 6, 7] {}",
            ts(913),
            k(3, 0)
        ),
        // Frozen and empty: an empty frozen collection is a value.
        format!(
            "INSERT INTO $t (p, c, fl, fs, fm) VALUES (4, 0, [], {{}}, {{}}) USING TIMESTAMP {}",
            ts(914)
        ),
    ];
    let second = vec![
        format!(
            "UPDATE $t USING TIMESTAMP {} SET s = s - {{'b'}}, l = l - [6] {}",
            ts(920),
            k(3, 0)
        ),
        format!(
            "DELETE m[1] FROM $t USING TIMESTAMP {} {}",
            ts(921),
            k(3, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET s = {{'new'}} {}",
            ts(922),
            k(1, 0)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 40000 SET l = l + [4] {}",
            ts(923),
            k(1, 0)
        ),
    ];
    first.push(format!(
        "UPDATE $t USING TIMESTAMP {} SET mt = mt + {{'1970-01-01 00:00:00+0000': 0.0}} {}",
        ts(915),
        k(2, 0)
    ));
    out.push(Table {
        name: "colls",
        columns: "p bigint, c int, l list<int>, s set<text>, m map<int, text>, \
                  ml map<text, frozen<list<int>>>, mt map<timestamp, decimal>, sb set<blob>, \
                  fl frozen<list<int>>, fs frozen<set<text>>, fm frozen<map<int, frozen<set<int>>>>, \
                  PRIMARY KEY (p, c)"
            .into(),
        options: String::new(),
        kinds: vec![
            kind("non-frozen list: element writetimes/TTLs, prepends, removals", &["l"]),
            kind("non-frozen set: element writetimes/TTLs, removals", &["s", "sb"]),
            kind("non-frozen map: entry writetimes/TTLs, deletions", &["m", "ml", "mt"]),
            kind("frozen collections, nested, empty", &["fl", "fs", "fm"]),
        ],
        first,
        second,
        wide: 0,
    });

    // Non-frozen UDTs, field by field.
    let u = |n: i32| format!("WHERE p = 00000000-0000-0000-0000-00000000000{n} AND c = 0");
    let first = vec![
        // The whole value at one writetime and TTL.
        format!(
            "INSERT INTO $t (p, c, u) VALUES (00000000-0000-0000-0000-000000000001, 0, {{street: 'a', num: 1, zip: 'z', tags: {{'t'}}, inner: {{a: 1, b: 'b'}}}}) USING TIMESTAMP {} AND TTL 86400",
            ts(1000)
        ),
        // Fields at one writetime, some with a TTL, the others null (issue 41's case).
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 2592000 SET u.street = 's', u.num = 3 {}",
            ts(1001),
            u(2)
        ),
        // Fields at their own writetimes and TTLs.
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 86400 SET u.street = 'x' {}",
            ts(1002),
            u(3)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET u.zip = 'zz' {}",
            ts(1003),
            u(3)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 5000 SET u.tags = {{'a', 'b'}} {}",
            ts(1004),
            u(3)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} SET u.inner = {{a: 7}} {}",
            ts(1005),
            u(3)
        ),
    ];
    let second = vec![
        format!(
            "UPDATE $t USING TIMESTAMP {} SET u.num = null {}",
            ts(1010),
            u(1)
        ),
        format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 3000 SET u.num = 9 {}",
            ts(1011),
            u(3)
        ),
    ];
    out.push(Table {
        name: "udts",
        columns: "p uuid, c int, u addr, PRIMARY KEY (p, c)".into(),
        options: String::new(),
        kinds: vec![kind(
            "non-frozen UDT: field writetimes/TTLs, null fields",
            &["u"],
        )],
        first,
        second,
        wide: 0,
    });

    // Frozen UDTs, tuples, and both inside collections.
    out.push(Table {
        name: "frozen_udts",
        columns: "p uuid, c int, fu frozen<addr>, tup tuple<int, text, frozen<list<int>>>, \
                  lu list<frozen<pt>>, st set<frozen<tuple<int, text>>>, mu map<text, frozen<addr>>, \
                  PRIMARY KEY (p, c)"
            .into(),
        options: String::new(),
        kinds: vec![
            kind("frozen UDT", &["fu"]),
            kind("tuple", &["tup"]),
            kind("UDTs and tuples inside collections", &["lu", "st", "mu"]),
        ],
        first: vec![
            format!(
                "INSERT INTO $t (p, c, fu, tup) VALUES (00000000-0000-0000-0000-000000000001, 0, {{street: 'f', num: 2}}, (1, 'x', [1, 2])) USING TIMESTAMP {} AND TTL 86400",
                ts(1020)
            ),
            format!(
                "INSERT INTO $t (p, c, fu, tup) VALUES (00000000-0000-0000-0000-000000000002, 0, {{street: null}}, (null, '', [])) USING TIMESTAMP {}",
                ts(1021)
            ),
            format!(
                "INSERT INTO $t (p, c, lu, st, mu) VALUES (00000000-0000-0000-0000-000000000004, 0, [{{a: 1, b: 'x'}}, {{a: 2}}], {{(1, 'a'), (2, '')}}, {{'k': {{street: 'm'}}}}) USING TIMESTAMP {}",
                ts(1022)
            ),
        ],
        second: vec![format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 77777 SET lu = lu + [{{a: 3, b: 'y'}}], st = st + {{(3, 'c')}}, mu['j'] = {{num: 1}} {}",
            ts(1023),
            u(4)
        )],
        wide: 0,
    });

    // Vectors.
    out.push(Table {
        name: "vectors",
        columns: "p blob, c int, vf vector<float, 3>, vd vector<double, 2>, vt vector<text, 2>, \
                  vb vector<bigint, 2>, vdt vector<date, 2>, vtm vector<time, 1>, vsi vector<smallint, 2>, vu vector<uuid, 1>, vbo vector<boolean, 2>, PRIMARY KEY (p, c)"
            .into(),
        options: String::new(),
        kinds: vec![kind(
            "vector: fixed- and variable-size elements",
            &["vf", "vd", "vt", "vb", "vdt", "vtm", "vsi", "vu", "vbo"],
        )],
        first: vec![
            format!("INSERT INTO $t (p, c, vf, vd, vt, vb, vdt, vtm, vsi, vu, vbo) VALUES (0x01, 0, [1.5, -0.0, 3.4028235E38], [1.0, -2.5], ['a', ''], [1, -9223372036854775808], ['2024-02-29', '0'], ['23:59:59.999999999'], [-32768, 7], [f47ac10b-58cc-4372-a567-0e02b2c3d479], [true, false]) USING TIMESTAMP {} AND TTL 86400", ts(1100)),
            format!("INSERT INTO $t (p, c, vf) VALUES (0x02, 0, [0.0, 0.0, 0.0]) USING TIMESTAMP {}", ts(1101)),
        ],
        second: vec![format!(
            "UPDATE $t USING TIMESTAMP {} SET vt = ['later', 'x'] WHERE p = 0x01 AND c = 0",
            ts(1102)
        )],
        wide: 0,
    });

    // Statics: scalar ones, partitions that hold nothing else.
    out.push(Table {
        name: "statics",
        columns: "p int, c int, s text static, v text, PRIMARY KEY (p, c)".into(),
        options: String::new(),
        kinds: vec![
            kind("static columns (scalar)", &["s"]),
            kind("static-only partitions", &[ROWS]),
        ],
        first: vec![
            format!(
                "INSERT INTO $t (p, s) VALUES (1, 'only static') USING TIMESTAMP {} AND TTL 86400",
                ts(1200)
            ),
            format!(
                "INSERT INTO $t (p, s) VALUES (2, 'static') USING TIMESTAMP {}",
                ts(1201)
            ),
            format!(
                "INSERT INTO $t (p, c, v) VALUES (2, 0, 'row') USING TIMESTAMP {}",
                ts(1202)
            ),
            format!(
                "INSERT INTO $t (p, c, v) VALUES (3, 0, 'no static') USING TIMESTAMP {}",
                ts(1204)
            ),
        ],
        second: vec![
            format!(
                "UPDATE $t USING TIMESTAMP {} AND TTL 5000 SET s = 'later' WHERE p = 2",
                ts(1210)
            ),
            format!(
                "INSERT INTO $t (p, s) VALUES (4, 'static later') USING TIMESTAMP {}",
                ts(1211)
            ),
        ],
        wide: 0,
    });

    // A static non-frozen collection, element by element.
    out.push(Table {
        name: "static_sets",
        columns: "p int, c int, ss set<int> static, v text, PRIMARY KEY (p, c)".into(),
        options: String::new(),
        kinds: vec![kind("static non-frozen collection", &["ss"])],
        first: vec![
            format!(
                "INSERT INTO $t (p, ss) VALUES (1, {{1, 2}}) USING TIMESTAMP {} AND TTL 86400",
                ts(1220)
            ),
            format!(
                "INSERT INTO $t (p, c, v) VALUES (2, 0, 'row') USING TIMESTAMP {}",
                ts(1221)
            ),
            format!(
                "UPDATE $t USING TIMESTAMP {} AND TTL 7000 SET ss = ss + {{5}} WHERE p = 2",
                ts(1222)
            ),
        ],
        second: vec![format!(
            "UPDATE $t USING TIMESTAMP {} SET ss = ss + {{3}} WHERE p = 1",
            ts(1223)
        )],
        wide: 0,
    });

    // Tombstones within gc_grace: the data they cover must not come back.
    let mut first = Vec::new();
    for p in 0..5 {
        first.push(format!(
            "INSERT INTO $t (p, s) VALUES ({p}, 'static {p}') USING TIMESTAMP {}",
            ts(1300)
        ));
        for c in 0..8 {
            first.push(format!(
                "INSERT INTO $t (p, c, v, n, l) VALUES ({p}, {c}, 'v{c}', {c}, [{c}, {c}]) USING TIMESTAMP {}",
                ts(1301 + c)
            ));
        }
    }
    let at = ts(1400);
    let second = vec![
        format!("DELETE FROM $t USING TIMESTAMP {at} WHERE p = 0 AND c = 1"),
        format!("DELETE FROM $t USING TIMESTAMP {at} WHERE p = 0 AND c >= 3 AND c <= 5"),
        format!(
            "INSERT INTO $t (p, c, v) VALUES (0, 4, 'after the range') USING TIMESTAMP {}",
            ts(1401)
        ),
        format!("DELETE FROM $t USING TIMESTAMP {at} WHERE p = 1"),
        format!(
            "INSERT INTO $t (p, c, v) VALUES (1, 2, 'after the partition') USING TIMESTAMP {}",
            ts(1401)
        ),
        format!("DELETE v, n FROM $t USING TIMESTAMP {at} WHERE p = 2 AND c = 0"),
        format!("DELETE l[0] FROM $t WHERE p = 2 AND c = 1"),
        format!("UPDATE $t USING TIMESTAMP {at} SET l = l - [3] WHERE p = 2 AND c = 3"),
        format!("DELETE s FROM $t USING TIMESTAMP {at} WHERE p = 3"),
        // Older than what it meets: hides nothing.
        format!("DELETE FROM $t USING TIMESTAMP {} WHERE p = 4", ts(1)),
        format!("DELETE FROM $t USING TIMESTAMP {at} WHERE p = 3 AND c > 5"),
    ];
    out.push(Table {
        name: "tombstones",
        columns: "p int, c int, s text static, v text, n int, l list<int>, PRIMARY KEY (p, c)"
            .into(),
        options: String::new(),
        kinds: vec![kind(
            "row, range, partition, cell and element tombstones within gc_grace",
            &[ROWS, "s", "v", "n", "l"],
        )],
        first,
        second,
        wide: 0,
    });

    // A wide partition.
    out.push(Table {
        name: "wide",
        columns: "p text, c int, v text, n bigint, PRIMARY KEY (p, c)".into(),
        options: String::new(),
        kinds: vec![kind("wide partition (20,000 rows)", &[ROWS, "v", "n"])],
        first: vec![format!(
            "INSERT INTO $t (p, c, v) VALUES ('narrow', 0, 'n') USING TIMESTAMP {}",
            ts(1500)
        )],
        second: vec![format!(
            "UPDATE $t USING TIMESTAMP {} AND TTL 9000 SET v = 'later' WHERE p = 'wide' AND c = 19999",
            ts(30_000)
        )],
        wide: 20_000,
    });

    // Counters.
    out.push(Table {
        name: "counters",
        columns: "p timeuuid, c int, n1 counter, n2 counter, PRIMARY KEY (p, c)".into(),
        options: String::new(),
        kinds: vec![kind("counters", &[ROWS, "n1", "n2"])],
        first: vec![
            "UPDATE $t SET n1 = n1 + 5, n2 = n2 - 3 WHERE p = 50554d6e-29bb-11e5-b345-feff819cdc9f AND c = 0".into(),
            "UPDATE $t SET n1 = n1 + 9223372036854775807 WHERE p = 50554d6e-29bb-11e5-b345-feff819cdc9f AND c = 1".into(),
        ],
        second: vec![
            "UPDATE $t SET n1 = n1 + 2 WHERE p = 50554d6e-29bb-11e5-b345-feff819cdc9f AND c = 0".into(),
            "UPDATE $t SET n2 = n2 + 0 WHERE p = 60554d6e-29bb-11e5-b345-feff819cdc9f AND c = 0".into(),
        ],
        wide: 0,
    });
    out
}

/// A table of `types` as clustering columns (`order` for all, or ASC and DESC in turn when
/// empty). For each column, three rows that differ in it alone (the columns before it at
/// their first value): every type's order matters once. Every other row has no regular cell
/// (a key-only row).
fn clustering_table(
    name: &'static str,
    types: &[(&str, [&str; 3])],
    order: &str,
    label: &'static str,
) -> Table {
    let (ck, ck_cols) = key_columns("c", types);
    let mut first = Vec::new();
    let mut n = 0;
    for j in 0..types.len() {
        for which in 0..3 {
            let values: Vec<&str> = types
                .iter()
                .enumerate()
                .map(|(i, (_, v))| if i == j { v[which] } else { v[0] })
                .collect();
            n += 1;
            let (cols, vals) = if n % 2 == 0 {
                (String::new(), String::new())
            } else {
                (", v".to_string(), format!(", {n}"))
            };
            first.push(format!(
                "INSERT INTO $t (p, {}{cols}) VALUES (0, {}{vals}) USING TIMESTAMP {}",
                ck.join(", "),
                values.join(", "),
                ts(800 + n)
            ));
        }
    }
    Table {
        name,
        columns: format!(
            "p int, {}, v int, PRIMARY KEY (p, {})",
            ck_cols.join(", "),
            ck.join(", ")
        ),
        options: format!(
            "WITH CLUSTERING ORDER BY ({})",
            ck.iter()
                .enumerate()
                .map(|(i, c)| {
                    let o = match order {
                        "" if i % 2 == 0 => "DESC",
                        "" => "ASC",
                        o => o,
                    };
                    format!("{c} {o}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        kinds: vec![kind(label, &[ROWS, "v"])],
        first,
        second: Vec::new(),
        wide: 0,
    }
}

/// A table of a column per native type (`t_<type>`), holding one kind.
fn native_table(
    name: &'static str,
    label: &'static str,
    first: Vec<String>,
    second: Vec<String>,
) -> Table {
    let names: Vec<String> = NATIVE.iter().map(|(t, _)| format!("t_{t}")).collect();
    let defs: Vec<String> = NATIVE.iter().map(|(t, _)| format!("t_{t} {t}")).collect();
    Table {
        name,
        columns: format!("p int, c int, {}, PRIMARY KEY (p, c)", defs.join(", ")),
        options: String::new(),
        kinds: vec![kind(
            label,
            &names.iter().map(String::as_str).collect::<Vec<_>>(),
        )],
        first,
        second,
        wide: 0,
    }
}

fn capitalised(t: &str) -> String {
    let mut c = t.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// What a path promises about writetimes and TTLs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect {
    /// The source's, cell by cell, element by element, field by field.
    Preserve,
    /// No `preserveTimestamps`: the target's clock, no TTL.
    Fresh,
    /// `writeWritetimestampInuS` and `writeTTLInS`: these, everywhere.
    Fixed { wt: i64, ttl: i64 },
    /// [`Preserve`](Self::Preserve), except that a TTL may end up to `late` seconds after the
    /// source's: a write of unknown outcome (its coordinator stopped mid-request) that the
    /// cluster applied late counts its TTL from then (tests/it/rings.rs).
    PreserveTtlLate { late: i64 },
}

const FIXED_WT: i64 = 1_700_000_000_000_000;
const FIXED_TTL: i64 = 500_000;

/// A path of the matrix.
#[derive(Clone, Copy)]
struct PathSpec {
    label: &'static str,
    tag: &'static str,
    expect: Expect,
}

const PATHS: &[PathSpec] = &[
    PathSpec {
        label: "CQL",
        tag: "cql",
        expect: Expect::Fresh,
    },
    PathSpec {
        label: "CQL, preserveTimestamps",
        tag: "cqlpt",
        expect: Expect::Preserve,
    },
    PathSpec {
        label: "CQL, writeTTLInS + writeWritetimestampInuS",
        tag: "cqlfix",
        expect: Expect::Fixed {
            wt: FIXED_WT,
            ttl: FIXED_TTL,
        },
    },
    PathSpec {
        label: "CQL read, SSTable write",
        tag: "sst",
        expect: Expect::Preserve,
    },
    PathSpec {
        label: "snapshot read, CQL write",
        tag: "snapcql",
        expect: Expect::Preserve,
    },
    PathSpec {
        label: "snapshot read, SSTable write",
        tag: "snapsst",
        expect: Expect::Preserve,
    },
    PathSpec {
        label: "CQL → Parquet → CQL",
        tag: "pq",
        expect: Expect::Preserve,
    },
    PathSpec {
        label: "CQL → Parquet, read by pyarrow",
        tag: "pqread",
        expect: Expect::Preserve,
    },
];

/// A path's verdict on one kind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    Exact,
    Refused(String),
    Wrong(String),
}

impl Verdict {
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Verdict::Exact => "exact",
            Verdict::Refused(_) => "refused",
            Verdict::Wrong(_) => "**WRONG**",
        }
    }
}

fn nodetool() -> String {
    std::env::var("DROVER_TEST_NODETOOL").expect("DROVER_TEST_NODETOOL (scripts/testenv env)")
}

/// `nodetool flush` of `ks` on the node whose JMX port is `jmx` (7199: the source cluster's).
fn flush(ks: &str, jmx: u16) {
    let out = std::process::Command::new(nodetool())
        .args(["-h", "127.0.0.1", "-p", &jmx.to_string(), "flush", "--", ks])
        .output()
        .expect("run nodetool");
    assert!(out.status.success(), "nodetool flush: {out:?}");
}

fn src_data_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(
        std::env::var("DROVER_TEST_CASSANDRA_SRC_DIR").expect("scripts/testenv env"),
    )
    .join("data")
}

/// `host:port` as its two parts.
pub(crate) fn host_port(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':').expect("host:port")
}

/// Dumps `ks.table` at `addr` through the second reader.
pub(crate) async fn dump(addr: &str, ks: &str, table: &str) -> Value {
    let (host, port) = host_port(addr);
    read_with("cql_reader.py", &[host, port, ks, table]).await
}

/// What one of `tests/fidelity/`'s readers writes, run with `args`.
pub(crate) async fn read_with(script: &str, args: &[&str]) -> Value {
    let python = std::env::var("DROVER_TEST_READER_PYTHON")
        .expect("DROVER_TEST_READER_PYTHON (source target/testenv/env after scripts/testenv up)");
    let path = format!("{}/tests/fidelity/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::process::Command::new(python)
        .arg(&path)
        .args(args)
        .output()
        .await
        .expect("run a reader");
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

/// The rows of a dump in the order of their keys (a Parquet export's files hold them in no
/// order of the table's).
pub(crate) fn by_key(mut dump: Value) -> Value {
    if let Some(rows) = dump["rows"].as_array_mut() {
        rows.sort_by_cached_key(|r| r["key"].to_string());
    }
    dump
}

pub(crate) fn micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

pub(crate) fn num(v: &Value) -> Option<i64> {
    v.as_str().and_then(|s| s.parse().ok())
}

/// Writetimes or TTLs of a cell as a list (one entry, or one per element or field).
fn entries(v: Option<&Value>) -> Vec<Option<i64>> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(num).collect(),
        Some(x) => vec![num(x)],
    }
}

pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!("{}…", &s[..s.floor_char_boundary(200)])
    } else {
        s
    }
}

/// Compares one cell of the source and the result; `aged` is how many seconds later the
/// target's row was read than the source's (their TTLs counted down that much more), as the
/// window the readers' clocks allow (the least and the most), `started` when the copy began
/// (µs).
fn compare_cell(
    src: &Value,
    dst: &Value,
    expect: Expect,
    aged: (i64, i64),
    started: i64,
) -> Result<(), String> {
    if src.get("v") != dst.get("v") {
        return Err(format!(
            "value: source {} | target {}",
            short(&src["v"]),
            short(&dst["v"])
        ));
    }
    let mut pairs = vec![(
        src.get("wt"),
        dst.get("wt"),
        src.get("ttl"),
        dst.get("ttl"),
        String::new(),
    )];
    if let Some(Value::Object(fields)) = src.get("fields") {
        for (f, s) in fields {
            let d = &dst["fields"][f];
            pairs.push((
                s.get("wt"),
                d.get("wt"),
                s.get("ttl"),
                d.get("ttl"),
                format!(" of field {f}"),
            ));
        }
    }
    for (swt, dwt, sttl, dttl, what) in pairs {
        let (swt, dwt, sttl, dttl) = (entries(swt), entries(dwt), entries(sttl), entries(dttl));
        let bad = |which: &str, s: &Vec<Option<i64>>, d: &Vec<Option<i64>>| {
            Err(format!("{which}{what}: source {s:?} | target {d:?}"))
        };
        match expect {
            Expect::Preserve | Expect::PreserveTtlLate { .. } => {
                let late = match expect {
                    Expect::PreserveTtlLate { late } => late,
                    _ => 0,
                };
                if swt != dwt {
                    return bad("writetime", &swt, &dwt);
                }
                // Within 5 s of the source's TTL aged by some moment of the window: the
                // target's TTL is `s - aged` for an `aged` in (least - 5, most + 5).
                let (least, most) = aged;
                let close = sttl.len() == dttl.len()
                    && sttl.iter().zip(&dttl).all(|(s, d)| match (s, d) {
                        (None, None) => true,
                        (Some(s), Some(d)) => (least - 5 - late..=most + 5).contains(&(s - d)),
                        _ => false,
                    });
                if !close {
                    let which = if least == most {
                        "TTL (s)".to_string()
                    } else {
                        format!("TTL (s, the target read {least} to {most} s after the source)")
                    };
                    return bad(&which, &sttl, &dttl);
                }
            }
            Expect::Fresh => {
                if swt.len() != dwt.len() || dwt.iter().flatten().any(|wt| *wt < started) {
                    return bad("writetime (the copy's clock expected)", &swt, &dwt);
                }
                if dttl.iter().any(Option::is_some) {
                    return bad("TTL (none expected)", &sttl, &dttl);
                }
            }
            Expect::Fixed { wt, ttl } => {
                let elapsed = (micros_now() - started) / 1_000_000 + 5;
                if swt.len() != dwt.len() || dwt.iter().flatten().any(|w| *w != wt) {
                    return bad("writetime (writeWritetimestampInuS expected)", &swt, &dwt);
                }
                if dttl
                    .iter()
                    .flatten()
                    .any(|t| !(ttl - elapsed..=ttl).contains(t))
                    || dttl.iter().filter(|t| t.is_some()).count()
                        != dwt.iter().filter(|t| t.is_some()).count()
                {
                    return bad("TTL (writeTTLInS expected)", &sttl, &dttl);
                }
            }
        }
    }
    Ok(())
}

/// Each column's verdict (and `ROWS`'s): `Err` says what differs.
pub(crate) type Columns = HashMap<String, Result<(), String>>;

/// A path's outcome on one table: its columns' verdicts, or why it took none.
type Outcome = Result<Columns, Verdict>;

/// The verdict of each column of a table (and of `ROWS`, its rows' set and order).
pub(crate) fn compare(src: &Value, dst: &Value, expect: Expect, started: i64) -> Columns {
    let mut out = HashMap::new();
    let rows = |d: &Value| d["rows"].as_array().cloned().unwrap_or_default();
    let (srows, drows) = (rows(src), rows(dst));
    let skeys: Vec<&Value> = srows.iter().map(|r| &r["key"]).collect();
    let dkeys: Vec<&Value> = drows.iter().map(|r| &r["key"]).collect();
    let by_key: HashMap<String, &Value> = drows.iter().map(|r| (r["key"].to_string(), r)).collect();
    let rows_verdict = if skeys == dkeys {
        Ok(())
    } else {
        let missing: Vec<_> = skeys
            .iter()
            .filter(|k| !dkeys.contains(k))
            .take(3)
            .map(|k| short(k))
            .collect();
        let extra: Vec<_> = dkeys
            .iter()
            .filter(|k| !skeys.contains(k))
            .take(3)
            .map(|k| short(k))
            .collect();
        Err(format!(
            "rows: {} in the source, {} in the target; missing {missing:?}, extra {extra:?}{}",
            skeys.len(),
            dkeys.len(),
            if missing.is_empty() && extra.is_empty() {
                " (another order)"
            } else {
                ""
            }
        ))
    };
    out.insert(ROWS.to_string(), rows_verdict);
    // Rows past the first that differ in a column: one row is a write, every row of a page
    // a reader's clock.
    let mut more: HashMap<String, usize> = HashMap::new();
    for row in &srows {
        let Some(target) = by_key.get(&row["key"].to_string()) else {
            continue;
        };
        // When each row was asked for and answered (a reader that gives one moment: both).
        let at = |r: &Value| r["at"].as_f64().unwrap_or_default();
        let answered = |r: &Value| r["answered"].as_f64().unwrap_or_else(|| at(r));
        let aged = (
            (at(target) - answered(row)).floor() as i64,
            (answered(target) - at(row)).ceil() as i64,
        );
        for (col, cell) in row["cells"].as_object().into_iter().flatten() {
            let entry = out.entry(col.clone()).or_insert(Ok(()));
            if let Err(e) = compare_cell(cell, &target["cells"][col], expect, aged, started) {
                if entry.is_err() {
                    *more.entry(col.clone()).or_default() += 1;
                } else {
                    *entry = Err(format!("row {}: {e}", short(&row["key"])));
                }
            }
        }
    }
    for (col, n) in more {
        if let Some(Err(e)) = out.get_mut(&col) {
            e.push_str(&format!(" (and {n} more rows)"));
        }
    }
    out
}

/// Runs one job on `d` to its end: `Ok` when it succeeded, `Err(message)` when it was
/// refused at submission or failed.
pub(crate) async fn run(d: &Daemon, resource: &str, yaml: &str) -> Result<(), String> {
    let (status, body) = d
        .post_raw(resource, "application/yaml", yaml.to_string())
        .await;
    if status != 202 {
        return Err(format!(
            "refused with {status}: {}",
            body["message"].as_str().unwrap_or_default()
        ));
    }
    let url = body["statusUrl"].as_str().unwrap().to_string();
    let job = d.wait_for(&url, WAIT, ended).await;
    if job["state"] == "SUCCEEDED" {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            job["state"],
            job["error"].as_str().unwrap_or_default()
        ))
    }
}

/// A job exporting `ks.table` of the source, with its writetimes and TTLs, to Parquet files in
/// `dir`.
fn export(ks: &str, table: &str, dir: &std::path::Path) -> String {
    let src = src_addr();
    let (h, p) = host_port(&src);
    std::fs::create_dir_all(dir).unwrap();
    format!(
        "source:\n  type: cassandra\n  host: {h}\n  port: {p}\n  keyspace: {ks}\n  table: {table}\n  splitCount: 8\n  preserveTimestamps: true\ntarget:\n  type: parquet\n  path: {}\n",
        dir.display()
    )
}

/// Rows in a table of the target.
async fn target_rows(dst: &scylla::client::session::Session, table: &str) -> usize {
    test_support::cql::raw_rows(dst, table, "*").await.len()
}

/// Runs `path` for `table`: the verdict of each of its columns, or why it was refused.
#[allow(clippy::too_many_arguments)]
async fn one(
    path: PathSpec,
    table: &Table,
    ks: &str,
    reader: &Daemon,
    writer: &Daemon,
    dst: &scylla::client::session::Session,
    spool: &std::path::Path,
) -> Outcome {
    let target = format!("{}_{}", table.name, path.tag);
    let (src_at, dst_at) = (src_addr(), dst_addr());
    let sidecars = format!("  bulkSidecars:\n    127.0.0.1: {}\n", reader.addr);
    let snapshot = format!("  preserveTimestamps: true\n  bulkRead: snapshot\n{sidecars}");
    let started = micros_now();
    // The paths that copy CQL to CQL differ only in their source and target sections.
    let fixed = format!("  writeTTLInS: {FIXED_TTL}\n  writeWritetimestampInuS: {FIXED_WT}\n");
    let preserve = "  preserveTimestamps: true\n".to_string();
    let cql_sections = match path.tag {
        "cql" => Some((String::new(), String::new())),
        "cqlpt" => Some((preserve.clone(), String::new())),
        "cqlfix" => Some((String::new(), fixed)),
        "sst" => Some((preserve.clone(), bulk(writer))),
        "snapcql" => Some((snapshot.clone(), String::new())),
        "snapsst" => Some((snapshot.clone(), bulk(writer))),
        _ => None,
    };
    let result = match (cql_sections, path.tag) {
        (Some((source, target_section)), _) => {
            let yaml = job_to(ks, table.name, &target, &source, &target_section, "");
            run(reader, "/api/v1/migrations", &yaml).await
        }
        (None, "pq") => {
            let dir = spool.join(&target);
            let (dh, dp) = host_port(&dst_at);
            let load = format!(
                "source:\n  type: parquet\n  path: {}\ntarget:\n  type: scylla\n  host: {dh}\n  port: {dp}\n  keyspace: {ks}\n  table: {target}\n",
                dir.display()
            );
            match run(reader, "/api/v1/migrations", &export(ks, table.name, &dir)).await {
                Ok(()) => run(reader, "/api/v1/migrations", &load)
                    .await
                    .map_err(|e| format!("the load: {e}")),
                Err(e) => Err(format!("the export: {e}")),
            }
        }
        (None, "pqread") => {
            let dir = spool.join(&target);
            match run(reader, "/api/v1/migrations", &export(ks, table.name, &dir)).await {
                Ok(()) => {
                    let source = dump(&src_at, ks, table.name).await;
                    let file = spool.join(format!("{target}.json"));
                    std::fs::write(&file, source.to_string()).unwrap();
                    let read = read_with(
                        "parquet_reader.py",
                        &[&dir.to_string_lossy(), &file.to_string_lossy()],
                    )
                    .await;
                    return Ok(compare(
                        &by_key(source),
                        &by_key(read),
                        path.expect,
                        started,
                    ));
                }
                // Files of units exported before the failure stay (whole), for a resume; the
                // table itself was not taken.
                Err(e) => return Err(Verdict::Refused(e.replace(ks, "<ks>"))),
            }
        }
        (None, other) => unreachable!("path {other}"),
    };
    let qualified = format!("{ks}.{target}");
    if let Err(e) = result {
        let e = e.replace(ks, "<ks>");
        let written = target_rows(dst, &qualified).await;
        return Err(if written == 0 {
            Verdict::Refused(e)
        } else {
            Verdict::Wrong(format!("failed after writing {written} rows: {e}"))
        });
    }
    let (s, d) = tokio::join!(dump(&src_at, ks, table.name), dump(&dst_at, ks, &target));
    Ok(compare(&s, &d, path.expect, started))
}

/// Fills one table on the source: its first statements, a flush, the rest.
async fn fill_first(src: &scylla::client::session::Session, ks: &str, table: &Table) {
    let t = format!("{ks}.{}", table.name);
    for stmt in &table.first {
        exec(src, &stmt.replace("$t", &t)).await;
    }
    if table.wide > 0 {
        let insert = src
            .prepare(format!(
                "INSERT INTO {t} (p, c, v, n) VALUES ('wide', ?, ?, ?) USING TIMESTAMP ? AND TTL ?"
            ))
            .await
            .unwrap();
        let rows: Vec<i32> = (0..table.wide as i32).collect();
        futures::stream::iter(rows.chunks(250))
            .for_each_concurrent(4, |chunk| {
                let insert = insert.clone();
                async move {
                    let mut batch = scylla::statement::batch::Batch::new(
                        scylla::statement::batch::BatchType::Unlogged,
                    );
                    let mut values = Vec::new();
                    for c in chunk {
                        batch.append_statement(insert.clone());
                        values.push((
                            *c,
                            format!("wide row {c}"),
                            i64::from(*c) * 7,
                            ts(2_000 + *c as usize),
                            if c % 7 == 0 { 86_400 + *c } else { 0 },
                        ));
                    }
                    src.batch(&batch, values).await.unwrap();
                }
            })
            .await;
    }
}

/// Makes and fills every table of `tables` in `ks` of the node behind `src`: their first
/// statements, a flush (through the node's JMX port `jmx`), the rest, a flush.
async fn fill(src: &scylla::client::session::Session, ks: &str, tables: &[Table], jmx: u16) {
    for t in tables {
        let ddl = format!("CREATE TABLE {ks}.{} ({}) {}", t.name, t.columns, t.options);
        exec(src, &ddl).await;
        fill_first(src, ks, t).await;
    }
    flush(ks, jmx);
    for t in tables {
        let name = format!("{ks}.{}", t.name);
        for stmt in &t.second {
            exec(src, &stmt.replace("$t", &name)).await;
        }
    }
    flush(ks, jmx);
}

#[tokio::test]
async fn every_path_copies_the_hostile_tables_exactly_or_refuses_them() {
    let Fixture { src, dst, ks, .. } = Fixture::new("fidelity", TYPES).await;
    let tables = tables();
    for t in &tables {
        // Every path but the one that reads the export alone writes a table of its own.
        for p in PATHS.iter().filter(|p| p.tag != "pqread") {
            exec(
                &dst,
                &format!(
                    "CREATE TABLE {ks}.{}_{} ({}) {}",
                    t.name, p.tag, t.columns, t.options
                ),
            )
            .await;
        }
    }
    fill(&src, ks, &tables, 7199).await;

    let reader = Daemon::fresh(&format!(
        "cassandra:\n  jmx_address: 127.0.0.1:7199\n  data_file_directories: [{}]\nsstable_snapshots:\n  enabled: true\n  nodetool: {}\n",
        src_data_dir().display(),
        nodetool()
    ))
    .await;
    let writer = Daemon::fresh(&sidecar_config()).await;
    let spool = tempfile::tempdir().unwrap();

    // (path, table) → verdicts; a few at a time (the machine has two cores).
    // DROVER_FIDELITY_PATHS=cqlpt,pq runs only those paths (by tag), and leaves the page alone.
    let only: Option<Vec<String>> = std::env::var("DROVER_FIDELITY_PATHS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let paths: Vec<PathSpec> = PATHS
        .iter()
        .filter(|p| only.as_ref().is_none_or(|o| o.iter().any(|t| t == p.tag)))
        .copied()
        .collect();
    let work: Vec<(usize, usize)> = (0..paths.len())
        .flat_map(|p| (0..tables.len()).map(move |t| (p, t)))
        .collect();
    let results: Vec<((usize, usize), Outcome)> = futures::stream::iter(work)
        .map(|(p, t)| {
            let (tables, reader, writer, dst, spool) =
                (&tables, &reader, &writer, &dst, spool.path());
            let paths = &paths;
            async move {
                (
                    (p, t),
                    one(paths[p], &tables[t], ks, reader, writer, dst, spool).await,
                )
            }
        })
        .buffer_unordered(3)
        .collect()
        .await;
    let results: HashMap<(usize, usize), _> = results.into_iter().collect();

    let labels: Vec<&str> = paths.iter().map(|p| p.label).collect();
    let rows = verdicts(&tables, labels.len(), &results);
    hold_matrix("matrix", "column kind", &labels, &rows, only.is_some());
}

/// Kinds down, paths across: each kind's verdict on each path, from the outcome of its table
/// (`results` by path and table index).
fn verdicts(
    tables: &[Table],
    paths: usize,
    results: &HashMap<(usize, usize), Outcome>,
) -> Vec<(&'static str, Vec<Verdict>)> {
    let mut rows = Vec::new();
    for (ti, t) in tables.iter().enumerate() {
        for k in &t.kinds {
            let verdicts = (0..paths)
                .map(|p| match &results[&(p, ti)] {
                    Err(v) => v.clone(),
                    Ok(cols) => {
                        let mut v = Verdict::Exact;
                        // A row missing or extra is wrong for every kind of the table.
                        for c in std::iter::once(ROWS).chain(k.columns.iter().map(String::as_str)) {
                            if let Some(Err(e)) = cols.get(c) {
                                v = Verdict::Wrong(format!("{}.{c}: {e}", t.name));
                                break;
                            }
                        }
                        v
                    }
                })
                .collect();
            rows.push((k.label, verdicts));
        }
    }
    rows
}

/// Prints the matrix of `rows` (kinds down under the heading `first`, paths `labels` across)
/// with the reason for every refusal,
/// holds it against the block of docs/fidelity.md between `<!-- {marker}:begin -->` and
/// `<!-- {marker}:end -->` (or writes it there, with `DROVER_BLESS`; neither when `partial`),
/// and fails on any WRONG.
pub(crate) fn hold_matrix(
    marker: &str,
    first: &str,
    labels: &[&str],
    rows: &[(&str, Vec<Verdict>)],
    partial: bool,
) {
    let mut table = String::new();
    table.push_str(&format!("| {first} |"));
    for l in labels {
        table.push_str(&format!(" {l} |"));
    }
    table.push_str("\n|---|");
    for _ in labels {
        table.push_str("---|");
    }
    table.push('\n');
    for (label, verdicts) in rows {
        table.push_str(&format!("| {label} |"));
        for v in verdicts {
            table.push_str(&format!(" {} |", v.word()));
        }
        table.push('\n');
    }
    let mut details = String::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut wrong = Vec::new();
    for (label, verdicts) in rows {
        for (l, v) in labels.iter().zip(verdicts) {
            match v {
                Verdict::Exact => {}
                Verdict::Refused(why) | Verdict::Wrong(why) => {
                    if seen.insert((l, why.clone())) {
                        details.push_str(&format!("- {l} · {} · {label}: {why}\n", v.word()));
                    }
                    if matches!(v, Verdict::Wrong(_)) {
                        wrong.push(format!("{l} · {label}: {v:?}"));
                    }
                }
            }
        }
    }
    println!("fidelity {marker}:\n{table}\n{details}");

    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fidelity.md");
    let doc = std::fs::read_to_string(doc_path).unwrap_or_default();
    let (begin, end) = (
        format!("<!-- {marker}:begin -->\n"),
        format!("<!-- {marker}:end -->"),
    );
    let block = doc.split_once(begin.as_str()).and_then(|(head, rest)| {
        rest.split_once(end.as_str())
            .map(|(m, tail)| (head, m, tail))
    });
    if partial {
        // Part of the matrix: nothing to hold the page against.
    } else if std::env::var_os("DROVER_BLESS").is_some() {
        let (head, _, tail) = block.unwrap_or_else(|| panic!("docs/fidelity.md has no {begin}"));
        std::fs::write(doc_path, format!("{head}{begin}{table}{end}{tail}")).unwrap();
    } else {
        let shown = block.map(|(_, m, _)| m).unwrap_or_default();
        assert_eq!(
            shown, table,
            "docs/fidelity.md does not show this {marker}: run this test with DROVER_BLESS=1 and commit the page"
        );
    }
    assert!(
        wrong.is_empty(),
        "paths that copy wrongly:\n{}",
        wrong.join("\n")
    );
}

/// The hostile tables on a node that live migration moves (`sidecar_procedure`): written on
/// the source node and read there by the second reader before the move; read again on the
/// node started on the copied files, and held as one more column of docs/fidelity.md
/// (`live-matrix`). The node's files travel whole, so the promise is the source's every
/// writetime and TTL, and every tombstone still in force.
pub(crate) struct NodeTables {
    ks: &'static str,
    tables: Vec<Table>,
    before: Vec<Value>,
}

impl NodeTables {
    /// Writes the tables into a keyspace `ks` of their own (made here, RF 1) on the node behind
    /// `session` (CQL at `addr`, JMX port `jmx`), and dumps them.
    pub(crate) async fn write(
        session: &scylla::client::session::Session,
        addr: &str,
        jmx: u16,
        ks: &'static str,
    ) -> Self {
        exec(
            session,
            &format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        )
        .await;
        for stmt in TYPES.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            exec(session, &stmt.replace("$ks", ks)).await;
        }
        let tables = tables();
        fill(session, ks, &tables, jmx).await;
        let mut before = Vec::new();
        for t in &tables {
            before.push(dump(addr, ks, t.name).await);
        }
        Self { ks, tables, before }
    }

    /// Reads the tables on the moved node at `addr` and holds each kind's verdict against the
    /// page; fails on any difference.
    pub(crate) async fn hold_moved(&self, addr: &str) {
        let mut results = HashMap::new();
        for (ti, (t, before)) in self.tables.iter().zip(&self.before).enumerate() {
            let after = dump(addr, self.ks, t.name).await;
            results.insert((0, ti), Ok(compare(before, &after, Expect::Preserve, 0)));
        }
        let rows = verdicts(&self.tables, 1, &results);
        hold_matrix(
            "live-matrix",
            "column kind",
            &["live migration (node files)"],
            &rows,
            false,
        );
    }
}
