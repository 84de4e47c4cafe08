//! The MySQL part of the fidelity matrix (docs/fidelity.md): hostile MariaDB tables of every
//! type docs/mysql.md maps (and of those it does not), copied to CQL by every MySQL path, and
//! compared through readers that share no code with drover's.
//!
//! A table per column kind: the kind's columns beside an integer `id`, their extremes, NULLs,
//! empty values and the values the mapping has no CQL form for, and a target table on the
//! CQL side of the types docs/mysql.md names. Each path copies every table into a fresh
//! target table. Then `tests/fidelity/mysql_reader.py` (the `mariadb` command-line client)
//! renders the source as the CQL cells the documented mapping makes of it, and
//! `tests/fidelity/cql_reader.py` (the DataStax Python driver) dumps the target; the two
//! must agree value for value, row for row, and every cell must bear the copy's writetime and
//! no TTL (MySQL has neither). A kind drover cannot take must be refused with nothing written
//! and the column named; a refusal is a verdict, not a gap. The matrix (kind × path → exact /
//! refused / WRONG) is printed, must equal docs/fidelity.md's MySQL block (`DROVER_BLESS=1`
//! rewrites it), and the test fails on any WRONG.

use std::collections::HashMap;

use futures::StreamExt;
use mysql_async::prelude::Queryable;
use serde_json::{Value, json};
use test_support::Daemon;
use test_support::cql::{Fixture, dst_addr, exec};

use crate::fidelity::{Verdict, by_key, dump, hold_matrix, micros_now, num, read_with, run, short};
use crate::mysql::{fresh_db, mariadb, source, target, user};

/// One column kind, a row of the matrix: a MySQL table and the CQL table it is copied to.
struct Kind {
    label: &'static str,
    table: &'static str,
    /// After `id`: name, MySQL type, CQL type.
    columns: &'static [(&'static str, &'static str, &'static str)],
    /// `id`'s MySQL and CQL types.
    id: (&'static str, &'static str),
    /// The MySQL table's primary key (empty: it has none) and the CQL table's.
    mysql_key: &'static str,
    cql_key: &'static str,
    /// Rows, as SQL value lists in column order (`id` first).
    rows: &'static [&'static str],
    /// Statements run after the rows (`$t` is the table).
    fill: &'static [&'static str],
    /// More of the job's source section.
    source: &'static str,
}

const INT_ID: (&str, &str) = ("INT", "int");

/// A kind with an `INT` `id` as its primary key on both sides.
const fn kind(
    label: &'static str,
    table: &'static str,
    columns: &'static [(&'static str, &'static str, &'static str)],
    rows: &'static [&'static str],
) -> Kind {
    Kind {
        label,
        table,
        columns,
        id: INT_ID,
        mysql_key: "id",
        cql_key: "id",
        rows,
        fill: &[],
        source: "",
    }
}

/// The same, with more of the job's source section.
const fn with_source(k: Kind, source: &'static str) -> Kind {
    Kind { source, ..k }
}

const ZERO_DATES: &[(&str, &str, &str)] = &[
    ("d", "DATE", "date"),
    ("dt", "DATETIME(3)", "timestamp"),
    ("ts", "TIMESTAMP(3) NULL", "timestamp"),
];
const ZERO_DATE_ROWS: &[&str] = &[
    "(1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')",
    "(2, '2024-00-15', '2024-02-00 12:00:00.500', NULL)",
    "(3, '2024-02-29', '2024-02-29 23:59:59.999', '2024-02-29 23:59:59.999')",
    "(4, NULL, NULL, NULL)",
];

const KINDS: &[Kind] = &[
    kind(
        "TINYINT … BIGINT at their extremes → tinyint, smallint, int, bigint",
        "signed_ints",
        &[
            ("ti", "TINYINT", "tinyint"),
            ("si", "SMALLINT", "smallint"),
            ("mi", "MEDIUMINT", "int"),
            ("i", "INT", "int"),
            ("bi", "BIGINT", "bigint"),
        ],
        &[
            "(1, -128, -32768, -8388608, -2147483648, -9223372036854775808)",
            "(2, 127, 32767, 8388607, 2147483647, 9223372036854775807)",
            "(3, 0, 0, 0, 0, 0)",
            "(4, NULL, NULL, NULL, NULL, NULL)",
        ],
    ),
    Kind {
        id: ("BIGINT UNSIGNED", "varint"),
        ..kind(
            "unsigned TINYINT … BIGINT at their extremes → the next wider type, varint",
            "unsigned_ints",
            &[
                ("uti", "TINYINT UNSIGNED", "smallint"),
                ("usi", "SMALLINT UNSIGNED", "int"),
                ("umi", "MEDIUMINT UNSIGNED", "int"),
                ("ui", "INT UNSIGNED", "bigint"),
                ("ubi", "BIGINT UNSIGNED", "varint"),
            ],
            &[
                "(0, 0, 0, 0, 0, 0)",
                "(18446744073709551615, 255, 65535, 16777215, 4294967295, 18446744073709551615)",
                "(9223372036854775808, 1, 1, 1, 1, 9223372036854775808)",
                "(4, NULL, NULL, NULL, NULL, NULL)",
            ],
        )
    },
    kind(
        "integers → decimal, varint",
        "int_decimal",
        &[
            ("i", "INT", "decimal"),
            ("bi", "BIGINT", "varint"),
            ("ubi", "BIGINT UNSIGNED", "decimal"),
        ],
        &[
            "(1, -2147483648, -9223372036854775808, 18446744073709551615)",
            "(2, 0, 9223372036854775807, 0)",
            "(3, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "BIGINT UNSIGNED above 2⁶³−1 → bigint",
        "unsigned_big",
        &[("ubi", "BIGINT UNSIGNED", "bigint")],
        &["(1, 9223372036854775807)", "(2, 9223372036854775808)"],
    ),
    kind(
        "TINYINT(1), BIT(1) → boolean",
        "flags",
        &[
            ("flag", "TINYINT(1)", "boolean"),
            ("b1", "BIT(1)", "boolean"),
        ],
        &["(1, 0, b'0')", "(2, 1, b'1')", "(3, NULL, NULL)"],
    ),
    kind(
        "TINYINT(1) holding 2 → boolean",
        "flag_two",
        &[("flag", "TINYINT(1)", "boolean")],
        &["(1, 1)", "(2, 2)"],
    ),
    kind(
        "BIT(64), BIT(5) → varint, tinyint, blob",
        "bits",
        &[
            ("b64", "BIT(64)", "varint"),
            ("b64b", "BIT(64)", "blob"),
            ("b5", "BIT(5)", "tinyint"),
            ("b5b", "BIT(5)", "blob"),
        ],
        &[
            "(1, b'1111111111111111111111111111111111111111111111111111111111111111', \
             b'1111111111111111111111111111111111111111111111111111111111111111', b'11111', b'11111')",
            "(2, 0, 0, 0, 0)",
            "(3, 9223372036854775808, 9223372036854775808, 1, 1)",
            "(4, NULL, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "YEAR → smallint",
        "years",
        &[("y", "YEAR", "smallint")],
        &["(1, 1901)", "(2, 2155)", "(3, 0)", "(4, NULL)"],
    ),
    kind(
        "DECIMAL(65,30) extremes → decimal (scale kept); DECIMAL(65,0) → varint",
        "decimals",
        &[
            ("d", "DECIMAL(65,30)", "decimal"),
            ("dz", "DECIMAL(65,0)", "varint"),
            ("d2", "DECIMAL(5,2)", "decimal"),
        ],
        &[
            "(1, 99999999999999999999999999999999999.999999999999999999999999999999, \
             99999999999999999999999999999999999999999999999999999999999999999, 999.99)",
            "(2, -99999999999999999999999999999999999.999999999999999999999999999999, \
             -99999999999999999999999999999999999999999999999999999999999999999, -999.99)",
            "(3, 0.000000000000000000000000000001, 0, 0)",
            "(4, -0.5, -1, 1.5)",
            "(5, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "FLOAT → float, double; DOUBLE → double: extremes, subnormals, -0",
        "floats",
        &[
            ("f", "FLOAT", "float"),
            ("fd", "FLOAT", "double"),
            ("d", "DOUBLE", "double"),
        ],
        &[
            "(1, 3.4028235e38, 3.4028235e38, 1.7976931348623157e308)",
            "(2, -3.4028235e38, -3.4028235e38, -1.7976931348623157e308)",
            "(3, 1.17549435e-38, 1.17549435e-38, 2.2250738585072014e-308)",
            "(4, 1.4e-45, 1.4e-45, 4.9e-324)",
            "(5, -0e0, -0e0, -0e0)",
            "(6, 0.1, 0.1, 0.1)",
            "(7, 16777217, 16777217, 9007199254740993)",
            "(8, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "DOUBLE → float (lossy)",
        "lossy_double",
        &[("d", "DOUBLE", "float")],
        &["(1, 0.1)"],
    ),
    kind(
        "DECIMAL → double (lossy)",
        "lossy_decimal",
        &[("d", "DECIMAL(10,2)", "double")],
        &["(1, 0.10)"],
    ),
    kind(
        "CHAR, VARCHAR, TEXT, LONGTEXT (utf8mb4), VARCHAR (latin1) → text: U+10FFFF, emoji, NUL, '' vs NULL",
        "texts",
        &[
            ("c", "CHAR(10)", "text"),
            ("vc", "VARCHAR(100)", "text"),
            ("tx", "TEXT", "text"),
            ("lt", "LONGTEXT", "text"),
            ("l1", "VARCHAR(20) CHARACTER SET latin1", "text"),
        ],
        &[
            "(1, '😀', CONCAT('\u{10FFFF}', '😀', 'é'), '𝄞 clef', REPEAT('ü😀', 5000), 'café')",
            "(2, '', '', '', '', '')",
            "(3, 'trail  ', 'trail  ', ' lead', CONCAT('a', CHAR(0 USING utf8mb4), 'b'), _latin1 x'80A0FF')",
            "(4, NULL, NULL, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "VARCHAR → ascii; TEXT → blob (UTF-8 bytes)",
        "text_other",
        &[("a", "VARCHAR(20)", "ascii"), ("tb", "TEXT", "blob")],
        &[
            "(1, '~ !', '😀')",
            "(2, '', '')",
            "(3, CONCAT('a', CHAR(127)), CONCAT('a', CHAR(0 USING utf8mb4)))",
            "(4, NULL, NULL)",
        ],
    ),
    kind(
        "VARCHAR holding non-ASCII → ascii",
        "ascii_bad",
        &[("a", "VARCHAR(20)", "ascii")],
        &["(1, 'a')", "(2, 'é')"],
    ),
    kind(
        "ENUM → text; SET → set<text>, text; JSON → text",
        "enums",
        &[
            ("e", "ENUM('', 'a', 'ü', '😀')", "text"),
            ("s", "SET('a', 'b', 'ü', '😀')", "set<text>"),
            ("st", "SET('a', 'b', 'ü', '😀')", "text"),
            ("j", "JSON", "text"),
        ],
        &[
            "(1, '😀', 'ü,a,😀', 'ü,a,😀', '{\"k\": [1, 2.5e0, null], \"u\": \"\\\\u00fc😀\"}')",
            "(2, '', '', '', '[]')",
            "(3, 'not a member', 'a', 'b,a', '\"\"')",
            "(4, NULL, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "BINARY, VARBINARY, BLOB, LONGBLOB → blob: 0x00, non-UTF-8 bytes, empty",
        "binaries",
        &[
            ("bn", "BINARY(4)", "blob"),
            ("vb", "VARBINARY(10)", "blob"),
            ("bl", "BLOB", "blob"),
            ("lb", "LONGBLOB", "blob"),
        ],
        &[
            "(1, x'00', x'00', x'00', x'00')",
            "(2, x'FF00FEC3', x'C328FF', x'80', REPEAT(x'00FF', 70000))",
            "(3, '', '', '', '')",
            "(4, NULL, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "CHAR(36), BINARY(16) → uuid; CHAR(36) → timeuuid",
        "uuids",
        &[
            ("cu", "CHAR(36)", "uuid"),
            ("bu", "BINARY(16)", "uuid"),
            ("ct", "CHAR(36)", "timeuuid"),
        ],
        &[
            "(1, 'F47AC10B-58CC-4372-A567-0E02B2C3D479', x'00000000000000000000000000000000', \
             '50554d6e-29bb-11e5-b345-feff819cdc9f')",
            "(2, 'ffffffff-ffff-ffff-ffff-ffffffffffff', x'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF', \
             '00000000-0000-1000-8000-000000000000')",
            "(3, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "CHAR(36) holding a version 4 UUID → timeuuid",
        "timeuuid_bad",
        &[("ct", "CHAR(36)", "timeuuid")],
        &[
            "(1, '50554d6e-29bb-11e5-b345-feff819cdc9f')",
            "(2, 'f47ac10b-58cc-4372-a567-0e02b2c3d479')",
        ],
    ),
    kind(
        "VARCHAR → inet: IPv4, IPv6, IPv4-mapped IPv6",
        "inets",
        &[("a", "VARCHAR(64)", "inet")],
        &[
            "(1, '0.0.0.0')",
            "(2, '255.255.255.255')",
            "(3, '2001:DB8:0:0:0:0:0:1')",
            "(4, '::ffff:1.2.3.4')",
            "(5, '::')",
            "(6, NULL)",
        ],
    ),
    kind(
        "DATE → date, timestamp: 0001-01-01 … 9999-12-31",
        "dates",
        &[("d", "DATE", "date"), ("dts", "DATE", "timestamp")],
        &[
            "(1, '0001-01-01', '0001-01-01')",
            "(2, '1000-01-01', '1000-01-01')",
            "(3, '1969-12-31', '1969-12-31')",
            "(4, '9999-12-31', '9999-12-31')",
            "(5, NULL, NULL)",
        ],
    ),
    kind(
        "DATETIME(3), TIMESTAMP(3), DATETIME(6) without microseconds → timestamp; TIMESTAMPs written at +09:00",
        "datetimes",
        &[
            ("dt", "DATETIME(3)", "timestamp"),
            ("ts", "TIMESTAMP(3) NULL", "timestamp"),
            ("dt6", "DATETIME(6)", "timestamp"),
        ],
        &[
            "(1, '1000-01-01 00:00:00', '1970-01-01 09:00:01', '0001-01-01 00:00:00.001000')",
            "(2, '9999-12-31 23:59:59.999', '2038-01-19 12:14:07.999', '9999-12-31 23:59:59.999000')",
            "(3, '1969-12-31 23:59:59.999', '2024-03-31 02:30:00', '1969-12-31 23:59:59.999000')",
            "(4, NULL, NULL, NULL)",
        ],
    ),
    kind(
        "DATETIME(6) with microseconds → timestamp",
        "micros",
        &[("dt", "DATETIME(6)", "timestamp")],
        &[
            "(1, '2024-01-02 03:04:05.123000')",
            "(2, '2024-01-02 03:04:05.123456')",
        ],
    ),
    with_source(
        kind(
            "DATETIME(6), TIMESTAMP(6) with microseconds → timestamp, truncateTimestamps",
            "micros_cut",
            &[
                ("dt", "DATETIME(6)", "timestamp"),
                ("ts", "TIMESTAMP(6) NULL", "timestamp"),
            ],
            &[
                "(1, '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.999999')",
                "(2, '1969-12-31 23:59:59.999999', '2038-01-19 12:14:07.999999')",
                "(3, '1000-01-01 00:00:00.000001', '1970-01-01 09:00:01.000001')",
                "(4, NULL, NULL)",
            ],
        ),
        "  truncateTimestamps: true\n",
    ),
    kind(
        "zero dates (0000-00-00, a zero month or day), zeroDateTimeBehavior EXCEPTION",
        "zero_dates",
        ZERO_DATES,
        ZERO_DATE_ROWS,
    ),
    with_source(
        kind(
            "zero dates, zeroDateTimeBehavior CONVERT_TO_NULL",
            "zero_null",
            ZERO_DATES,
            ZERO_DATE_ROWS,
        ),
        "  zeroDateTimeBehavior: CONVERT_TO_NULL\n",
    ),
    with_source(
        kind(
            "zero dates, zeroDateTimeBehavior ROUND",
            "zero_round",
            ZERO_DATES,
            ZERO_DATE_ROWS,
        ),
        "  zeroDateTimeBehavior: ROUND\n",
    ),
    kind(
        "TIME(6) within a day → time",
        "times",
        &[("t", "TIME(6)", "time")],
        &[
            "(1, '00:00:00')",
            "(2, '23:59:59.999999')",
            "(3, '12:34:56.5')",
            "(4, NULL)",
        ],
    ),
    kind(
        "TIME of 24 hours and more → time",
        "time_long",
        &[("t", "TIME(6)", "time")],
        &["(1, '01:00:00')", "(2, '838:59:59.999999')"],
    ),
    kind(
        "negative TIME → time",
        "time_negative",
        &[("t", "TIME(6)", "time")],
        &["(1, '01:00:00')", "(2, '-00:00:00.000001')"],
    ),
    kind(
        "UUID (MariaDB 10.7) → uuid",
        "mariadb_uuid",
        &[("u", "UUID", "uuid")],
        &["(1, 'f47ac10b-58cc-4372-a567-0e02b2c3d479')"],
    ),
    kind(
        "INET4 (MariaDB 10.10) → inet",
        "mariadb_inet4",
        &[("a", "INET4", "inet")],
        &["(1, '1.2.3.4')"],
    ),
    kind(
        "INET6 (MariaDB 10.5) → inet",
        "mariadb_inet6",
        &[("a", "INET6", "inet")],
        &["(1, '2001:db8::1')"],
    ),
    kind(
        "POINT (spatial) → blob",
        "spatial",
        &[("p", "POINT", "blob")],
        &["(1, POINT(1, 2))"],
    ),
    Kind {
        mysql_key: "tenant, id",
        cql_key: "(tenant), id",
        fill: &[
            "INSERT INTO $t SELECT seq, ELT(1 + seq % 4, ' ', 'a', '😀', 'A'), CONCAT('v', seq) FROM seq_1_to_200",
        ],
        ..kind(
            "composite primary key (VARCHAR, INT) → partition key, clustering key",
            "composite",
            &[("tenant", "VARCHAR(20)", "text"), ("v", "TEXT", "text")],
            &[],
        )
    },
    Kind {
        cql_key: "k",
        ..kind(
            "'' in a column that becomes the CQL partition key",
            "empty_key",
            &[("k", "VARCHAR(10)", "text")],
            &["(1, 'x')", "(2, '')", "(3, 'y')"],
        )
    },
    Kind {
        cql_key: "id, k",
        ..kind(
            "NULL in a column that becomes a CQL key column",
            "null_key",
            &[("k", "INT", "int")],
            &["(1, 5)", "(2, NULL)", "(3, 6)"],
        )
    },
    Kind {
        mysql_key: "",
        ..kind(
            "table without a primary key → a CQL key of its columns",
            "no_key",
            &[("v", "VARCHAR(20)", "text")],
            &["(-5, 'a')", "(0, NULL)", "(7, '')", "(2000000000, 'z')"],
        )
    },
    kind(
        "generated columns (VIRTUAL, STORED) → their values",
        "generated",
        &[
            ("i", "INT", "int"),
            ("gv", "INT AS (i * 2) VIRTUAL", "int"),
            ("gs", "VARCHAR(20) AS (CONCAT('g', i)) STORED", "text"),
        ],
        &["(1, 21, DEFAULT, DEFAULT)", "(2, NULL, DEFAULT, DEFAULT)"],
    ),
    Kind {
        id: ("BIGINT", "bigint"),
        fill: &[
            "INSERT INTO $t SELECT s - 6001, s * 7919 % 100003 - 50000, CONCAT('row ', s, ' ✓'), s / 8, \
             TIMESTAMPADD(MICROSECOND, s * 1001000, '1969-12-31 23:00:00') \
             FROM (SELECT CAST(seq AS SIGNED) AS s FROM seq_1_to_12000) q",
            "ANALYZE TABLE $t",
        ],
        ..kind(
            "12,002 rows, BIGINT key from −2⁶³ to 2⁶³−1 (read in several ranges)",
            "many",
            &[
                ("n", "INT", "int"),
                ("s", "VARCHAR(40)", "text"),
                ("d", "DECIMAL(12,3)", "decimal"),
                ("at", "DATETIME(3)", "timestamp"),
            ],
            &[
                "(-9223372036854775808, 1, 'min', 0.001, '1000-01-01 00:00:00')",
                "(9223372036854775807, 2, 'max', -0.001, '9999-12-31 23:59:59.999')",
            ],
        )
    },
];

/// A path of the MySQL matrix: a job's source keys, and the filter its rows meet.
struct PathSpec {
    label: &'static str,
    tag: &'static str,
    source: &'static str,
    filter: Option<&'static str>,
}

const PATHS: &[PathSpec] = &[
    PathSpec {
        label: "MySQL → CQL",
        tag: "plain",
        source: "",
        filter: None,
    },
    PathSpec {
        label: "partitionColumn, 5 ranges",
        tag: "part",
        source: "  partitionColumn: id\n  lowerBound: -3000\n  upperBound: 3000\n  numPartitions: 5\n",
        filter: None,
    },
    PathSpec {
        label: "consistentSnapshot",
        tag: "snap",
        source: "  consistentSnapshot: true\n",
        filter: None,
    },
    PathSpec {
        label: "where filter",
        tag: "where",
        source: "  where: \"id % 3 <> 1\"\n",
        filter: Some("id % 3 <> 1"),
    },
];

/// The CQL type of each of a kind's columns, `id` included.
fn cql_types(k: &Kind) -> Vec<(&'static str, &'static str)> {
    std::iter::once(("id", k.id.1))
        .chain(k.columns.iter().map(|(n, _, c)| (*n, *c)))
        .collect()
}

/// The CQL key's columns in order.
fn cql_key(k: &Kind) -> Vec<&'static str> {
    k.cql_key
        .split([',', '(', ')'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// Dumps the kind's MySQL table through `mysql_reader.py`, as the CQL cells it must become.
async fn dump_mysql(db: &str, k: &Kind, filter: Option<&str>) -> Value {
    let (host, port) = mariadb();
    let (u, password) = user();
    let spec = json!({
        "columns": cql_types(k).into_iter().collect::<HashMap<_, _>>(),
        "key": cql_key(k),
        "where": filter,
        "zeroDateTimeBehavior": if k.source.contains("CONVERT_TO_NULL") {
            "CONVERT_TO_NULL"
        } else if k.source.contains("ROUND") {
            "ROUND"
        } else {
            "EXCEPTION"
        },
        "truncateTimestamps": k.source.contains("truncateTimestamps: true"),
        "password": password,
    });
    read_with(
        "mysql_reader.py",
        &[&host, &port.to_string(), &u, db, k.table, &spec.to_string()],
    )
    .await
}

/// What differs between the source, rendered as CQL cells, and the target: the rows (by
/// key), each cell's value, and the writetime (the copy's clock, from `started`) and TTL
/// (none) of each cell of the target.
fn compare(src: &Value, dst: &Value, started: i64) -> Result<(), String> {
    let rows = |d: &Value| d["rows"].as_array().cloned().unwrap_or_default();
    let (srows, drows) = (rows(src), rows(dst));
    let skeys: Vec<&Value> = srows.iter().map(|r| &r["key"]).collect();
    let dkeys: Vec<&Value> = drows.iter().map(|r| &r["key"]).collect();
    if skeys != dkeys {
        let missing: Vec<_> = skeys
            .iter()
            .filter(|k| !dkeys.contains(k))
            .take(3)
            .collect();
        let extra: Vec<_> = dkeys
            .iter()
            .filter(|k| !skeys.contains(k))
            .take(3)
            .collect();
        return Err(format!(
            "rows: {} in the source, {} in the target; missing {}, extra {}",
            skeys.len(),
            dkeys.len(),
            short(&json!(missing)),
            short(&json!(extra)),
        ));
    }
    for (s, d) in srows.iter().zip(&drows) {
        let key = short(&s["key"]);
        for (col, cell) in s["cells"].as_object().into_iter().flatten() {
            let target = &d["cells"][col];
            if cell["v"] != target["v"] {
                return Err(format!(
                    "row {key}, {col}: source {} | target {}",
                    short(&cell["v"]),
                    short(&target["v"])
                ));
            }
            // One writetime and TTL, or one per element of a set.
            let each = |v: &Value| match v {
                Value::Array(a) => a.iter().map(num).collect(),
                v => vec![num(v)],
            };
            let wts: Vec<Option<i64>> = each(&target["wt"]);
            if !target["v"].is_null() && wts.iter().any(|w| w.is_none_or(|w| w < started)) {
                return Err(format!(
                    "row {key}, {col}: writetime {} (the copy's clock expected)",
                    target["wt"]
                ));
            }
            if each(&target["ttl"]).iter().any(Option::is_some) {
                return Err(format!(
                    "row {key}, {col}: TTL {} (none expected)",
                    target["ttl"]
                ));
            }
        }
    }
    Ok(())
}

/// Runs `path` for kind `k`: its verdict.
async fn one(
    path: &PathSpec,
    k: &Kind,
    db: &str,
    ks: &str,
    daemon: &Daemon,
    dst: &scylla::client::session::Session,
) -> Verdict {
    let table = format!("{}_{}", k.table, path.tag);
    let yaml = format!(
        "{}{}",
        source(db, k.table, &format!("{}{}", k.source, path.source)),
        target(ks, &table, "")
    );
    let started = micros_now();
    if let Err(e) = run(daemon, "/api/v1/migrations", &yaml).await {
        let e = e.replace(db, "<db>").replace(ks, "<ks>");
        let written = test_support::cql::raw_rows(dst, &format!("{ks}.{table}"), "*")
            .await
            .len();
        let named = k
            .columns
            .iter()
            .any(|(c, _, _)| e.contains(&format!("\"{c}\"")));
        return if written > 0 {
            Verdict::Wrong(format!("failed after writing {written} rows: {e}"))
        } else if !named {
            Verdict::Wrong(format!("refused without naming the column: {e}"))
        } else {
            Verdict::Refused(e)
        };
    }
    let at = dst_addr();
    let (s, d) = tokio::join!(dump_mysql(db, k, path.filter), dump(&at, ks, &table));
    match compare(&by_key(s), &by_key(d), started) {
        Ok(()) => Verdict::Exact,
        Err(e) => Verdict::Wrong(e),
    }
}

#[tokio::test]
async fn every_mysql_path_copies_the_hostile_tables_exactly_or_refuses_them() {
    let set_up = std::time::Instant::now();
    let (mut my, db) = fresh_db("fidelity_mysql").await;
    let Fixture {
        dst, ks, daemon, ..
    } = Fixture::new("fidelity_mysql", "").await;
    // Values the strict mode refuses (zero dates, an ENUM's error value) are what some
    // tables hold; TIMESTAMPs are written in a zone of their own, so that only their
    // instants can agree.
    for set in [
        "SET NAMES utf8mb4",
        "SET SESSION sql_mode = '', time_zone = '+09:00'",
    ] {
        my.query_drop(set).await.unwrap();
    }
    // DROVER_FIDELITY_PATHS=plain,where runs only those paths (by tag), and leaves the page alone.
    let only: Option<Vec<String>> = std::env::var("DROVER_FIDELITY_PATHS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let paths: Vec<&PathSpec> = PATHS
        .iter()
        .filter(|p| only.as_ref().is_none_or(|o| o.iter().any(|t| t == p.tag)))
        .collect();
    for k in KINDS {
        // Quoted: some tables are named by reserved words (`spatial`), as drover must expect.
        let t = format!("`{}`", k.table);
        let mut columns = vec![format!("id {} NOT NULL", k.id.0)];
        columns.extend(k.columns.iter().map(|(n, t, _)| format!("{n} {t}")));
        if !k.mysql_key.is_empty() {
            columns.push(format!("PRIMARY KEY ({})", k.mysql_key));
        }
        let mut statements = vec![format!(
            "CREATE TABLE {t} ({}) CHARACTER SET utf8mb4",
            columns.join(", ")
        )];
        if !k.rows.is_empty() {
            statements.push(format!("INSERT INTO {t} VALUES {}", k.rows.join(", ")));
        }
        statements.extend(k.fill.iter().map(|s| s.replace("$t", &t)));
        for stmt in statements {
            my.query_drop(&stmt)
                .await
                .unwrap_or_else(|e| panic!("{stmt}: {e}"));
        }
    }
    // The targets, a few at once: a schema change takes the single node a while.
    let targets: Vec<String> = KINDS
        .iter()
        .flat_map(|k| {
            let columns: Vec<String> = cql_types(k)
                .iter()
                .map(|(n, t)| format!("{n} {t}"))
                .collect();
            paths.iter().map(move |p| {
                format!(
                    "CREATE TABLE {ks}.{}_{} ({}, PRIMARY KEY ({}))",
                    k.table,
                    p.tag,
                    columns.join(", "),
                    k.cql_key
                )
            })
        })
        .collect();
    futures::stream::iter(&targets)
        .for_each_concurrent(4, |ddl| exec(&dst, ddl))
        .await;
    println!("tables made in {:?}", set_up.elapsed());

    let work: Vec<(usize, usize)> = (0..paths.len())
        .flat_map(|p| (0..KINDS.len()).map(move |k| (p, k)))
        .collect();
    let (db, dst, daemon, paths_ref) = (db.as_str(), &dst, &daemon, &paths);
    let results: HashMap<(usize, usize), Verdict> = futures::stream::iter(work)
        .map(|(p, k)| async move {
            (
                (p, k),
                one(paths_ref[p], &KINDS[k], db, ks, daemon, dst).await,
            )
        })
        .buffer_unordered(3)
        .collect()
        .await;

    let rows: Vec<(&str, Vec<Verdict>)> = KINDS
        .iter()
        .enumerate()
        .map(|(k, kind)| {
            (
                kind.label,
                (0..paths.len()).map(|p| results[&(p, k)].clone()).collect(),
            )
        })
        .collect();
    let labels: Vec<&str> = paths.iter().map(|p| p.label).collect();
    hold_matrix(
        "mysql-matrix",
        "MySQL column kind",
        &labels,
        &rows,
        only.is_some(),
    );
    // Kept when the test fails, to look into.
    my.query_drop(format!("DROP DATABASE {db}")).await.unwrap();
}
