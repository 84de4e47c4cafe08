//! The `source` section of `type: mysql`, in ScyllaDB Migrator's keys (`host`, `port`,
//! `database`, `table`, `credentials`, `primaryKey`, `partitionColumn`, `numPartitions`,
//! `lowerBound`, `upperBound`, `fetchSize`, `where`, `zeroDateTimeBehavior`,
//! `connectionProperties`) with its checks, plus drover's `sslOptions` and
//! `consistentSnapshot`. `config/job-mysql.yaml` shows every key.

use std::collections::BTreeMap;

use secrecy::SecretString as Secret;
use serde::Deserialize;

use crate::connectors::cql::config::{Credentials, SslOptions};
use crate::jobfile::{JobConfigError, section};

/// Rows per page when the job does not say (ScyllaDB Migrator's default).
pub const DEFAULT_FETCH_SIZE: u64 = 1000;
/// The largest `fetchSize` (ScyllaDB Migrator's bound): a page is held in memory whole, a
/// few per range read at once.
pub const MAX_FETCH_SIZE: u64 = 100_000;
/// The most ranges one job reads.
pub const MAX_PARTITIONS: u64 = 100_000;
/// Ranges read at once when the job does not say.
pub const DEFAULT_RANGES_AT_ONCE: u64 = 4;

/// What a zero date (`0000-00-00`) becomes (`zeroDateTimeBehavior`, Connector/J's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroDates {
    /// Fail the job, naming the column and row (the default).
    Exception,
    /// Null.
    ConvertToNull,
    /// The first instant CQL can hold of the type: `0001-01-01 00:00:00`.
    Round,
}

/// A `lowerBound`/`upperBound`: an integer, a date or a timestamp literal, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound(pub String);

impl Bound {
    /// The integer it is, when it is one.
    pub fn integer(&self) -> Option<i64> {
        let t = self.0.trim();
        let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }

    /// Microseconds since 1970-01-01 00:00:00 of a `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` literal,
    /// and whether it had a time.
    pub fn instant(&self) -> Option<(i64, bool)> {
        let t = self.0.trim();
        if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
            return Some((
                d.and_time(chrono::NaiveTime::MIN)
                    .and_utc()
                    .timestamp_micros(),
                false,
            ));
        }
        for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
            if let Ok(d) = chrono::NaiveDateTime::parse_from_str(t, f) {
                return Some((d.and_utc().timestamp_micros(), true));
            }
        }
        None
    }
}

/// A range read: `partitionColumn` split into `numPartitions` strides between the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    /// The column, as written (plain or back-quoted).
    pub column: String,
    /// How many ranges.
    pub count: u64,
    /// Where the strides start.
    pub lower: Bound,
    /// Where they end (rows outside the bounds are read too, by the first and last range).
    pub upper: Bound,
}

/// A `source` of `type: mysql` (MySQL or MariaDB).
#[derive(Debug, Clone)]
pub struct MysqlSource {
    /// Server host name or address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// Database (schema) of the table.
    pub database: String,
    /// Table.
    pub table: String,
    /// User and password.
    pub credentials: Credentials,
    /// The columns that identify a row; unset: the table's primary key.
    pub primary_key: Option<Vec<String>>,
    /// Split the read by a column's values.
    pub partitioning: Option<Partitioning>,
    /// Rows per page.
    pub fetch_size: usize,
    /// A condition rows must meet (trusted SQL, checked against statements it must not hold).
    pub where_clause: Option<String>,
    /// What zero dates become.
    pub zero_dates: ZeroDates,
    /// Connector/J properties drover applies (`connectTimeout`, `socketTimeout`,
    /// `maxAllowedPacket`, `sslMode`, `useSSL`, `requireSSL`, `verifyServerCertificate`).
    pub connect_timeout_ms: u64,
    /// `socketTimeout`: how long one read or write on the connection may wait.
    pub socket_timeout_ms: u64,
    /// `maxAllowedPacket`: the largest row (packet) accepted.
    pub max_allowed_packet: u64,
    /// TLS to the server.
    pub tls: Tls,
    /// drover: read every range in one transaction (`START TRANSACTION WITH CONSISTENT
    /// SNAPSHOT`), one range at a time on one connection.
    pub consistent_snapshot: bool,
    /// drover: ranges read at once (not with `consistentSnapshot`).
    pub ranges_at_once: usize,
    /// drover: write DATETIME/TIMESTAMP values with microseconds cut to CQL's milliseconds.
    /// Default false: such a value fails the job, naming the column and row.
    pub truncate_timestamps: bool,
}

/// How the connection is secured.
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// Whether TLS is used at all.
    pub enabled: bool,
    /// Whether the server's certificate is checked (against `ca` or the public roots).
    pub verify: bool,
    /// Whether the certificate must name the host (`VERIFY_IDENTITY`).
    pub verify_identity: bool,
    /// PEM CA bundle.
    pub ca: Option<String>,
    /// PEM client certificate chain and key.
    pub client: Option<(String, String)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSource {
    #[serde(rename = "type")]
    _type: String,
    host: String,
    #[serde(default)]
    port: Option<u64>,
    database: String,
    table: String,
    credentials: Credentials,
    #[serde(default)]
    primary_key: Option<Vec<String>>,
    #[serde(default)]
    partition_column: Option<String>,
    #[serde(default)]
    num_partitions: Option<u64>,
    #[serde(default)]
    lower_bound: Option<yaml_serde::Value>,
    #[serde(default)]
    upper_bound: Option<yaml_serde::Value>,
    #[serde(default)]
    zero_date_time_behavior: Option<String>,
    #[serde(default)]
    fetch_size: Option<u64>,
    #[serde(default, rename = "where")]
    where_clause: Option<String>,
    #[serde(default)]
    connection_properties: Option<BTreeMap<String, yaml_serde::Value>>,
    #[serde(default)]
    ssl_options: Option<SslOptions>,
    #[serde(default)]
    consistent_snapshot: bool,
    #[serde(default)]
    ranges_at_once: Option<u64>,
    #[serde(default)]
    truncate_timestamps: bool,
}

/// Connector/J properties that would let the server read the client's files, run code or
/// otherwise widen what a connection can do (ScyllaDB Migrator blocks the same names).
const DANGEROUS: &[&str] = &[
    "allowloadlocalinfile",
    "allowurlinlocalinfile",
    "allowloadlocalinfileinpath",
    "autodeserialize",
    "allowpublickeyretrieval",
    "serverrsapublickeyfile",
    "queryinterceptors",
    "exceptioninterceptors",
    "connectionlifecycleinterceptors",
    "authenticationplugins",
    "propertiestransform",
    "socketfactory",
    "autogeneratetestcasescript",
    "statementinterceptors",
    "connectionpropertiesloadbalancer",
    "allowmultiqueries",
    "profilereventhandler",
    "clientinfoprovider",
    "logger",
    "sessionvariables",
];

/// Words a `where` filter must not hold: it is pasted into drover's SELECT, and these would
/// make it something else than a condition (ScyllaDB Migrator refuses the same words).
const FORBIDDEN_WORDS: &[&str] = &[
    "drop",
    "delete",
    "truncate",
    "alter",
    "create",
    "exec",
    "execute",
    "union",
    "into",
    "outfile",
    "dumpfile",
    "load_file",
    "benchmark",
    "sleep",
    "grant",
    "revoke",
    "update",
    "handler",
    "lock",
    "call",
];

fn scalar(v: &yaml_serde::Value) -> Option<String> {
    match v {
        yaml_serde::Value::String(s) => Some(s.clone()),
        yaml_serde::Value::Number(n) => Some(n.to_string()),
        yaml_serde::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Checks an identifier drover pastes into SQL: plain (`[A-Za-z_][A-Za-z0-9_$]*`) or
/// back-quoted with doubled back quotes inside.
pub fn check_identifier(name: &str) -> Result<(), String> {
    let plain = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    if plain(name) {
        return Ok(());
    }
    if let Some(inner) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`'))
        && !inner.is_empty()
        && !inner.replace("``", "").contains('`')
        && !inner.contains(['\n', '\r', '\0'])
    {
        return Ok(());
    }
    Err(format!(
        "{name:?} is not a column name drover can use: letters, digits, _ and $ starting with a letter or _, or a name in back quotes (`my column`, with `` for a back quote)"
    ))
}

/// The name an identifier stands for (back quotes removed).
pub fn unquote(name: &str) -> String {
    match name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) {
        Some(inner) => inner.replace("``", "`"),
        None => name.to_string(),
    }
}

/// A name in back quotes, for SQL.
pub fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Checks a `where` filter: not empty, no control characters, no comments, no statement
/// separators or words that would turn it into another statement (outside quoted text).
pub fn check_where(filter: &str) -> Result<(), String> {
    if filter.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if filter.chars().any(|c| c.is_control() && c != ' ') {
        return Err("must not hold control characters (line breaks, tabs, NUL)".into());
    }
    // Outside quotes only: a literal may hold any of these.
    let mut outside = String::with_capacity(filter.len());
    let mut quote: Option<char> = None;
    for c in filter.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                outside.push(' ');
            }
            Some(_) if c == '\\' => {
                return Err("must not hold backslash escapes (their meaning depends on the server's sql_mode)".into());
            }
            Some(_) => outside.push(' '),
            None if matches!(c, '\'' | '"' | '`') => {
                quote = Some(c);
                outside.push(' ');
            }
            None => outside.push(c),
        }
    }
    if quote.is_some() {
        return Err("has an unterminated quote".into());
    }
    for (what, why) in [
        (";", "a statement separator (;)"),
        ("/*", "a comment (/* */)"),
        ("--", "a comment (--)"),
        ("#", "a comment (#)"),
    ] {
        if outside.contains(what) {
            return Err(format!("must not hold {why}"));
        }
    }
    let lower = outside.to_ascii_lowercase();
    for word in lower.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if FORBIDDEN_WORDS.contains(&word) {
            return Err(format!(
                "must be a condition only; {word:?} is not allowed in it"
            ));
        }
    }
    Ok(())
}

fn bound(
    text: &str,
    key: &str,
    v: Option<yaml_serde::Value>,
) -> Result<Option<Bound>, JobConfigError> {
    match v {
        None | Some(yaml_serde::Value::Null) => Ok(None),
        Some(v) => match scalar(&v) {
            Some(s) if !s.trim().is_empty() => Ok(Some(Bound(s))),
            Some(_) => Err(JobConfigError::at(
                text,
                key,
                "must not be empty or blank when set",
            )),
            None => Err(JobConfigError::at(
                text,
                key,
                "expected an integer, a date (2024-01-01) or a timestamp (2024-01-01 00:00:00)",
            )),
        },
    }
}

impl MysqlSource {
    /// Reads and checks a `source` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let s: RawSource = section(text, "source", value)?;
        let at = |key: &str, message: String| JobConfigError::at(text, key, message);
        if s.host.trim().is_empty() || s.host.contains(['/', '?', '#', '@', ' ']) {
            return Err(at("source.host", "must be a host name or address".into()));
        }
        JobConfigError::check_range(text, "source.port", s.port, 1, 65535)?;
        for (key, name) in [("source.database", &s.database), ("source.table", &s.table)] {
            if name.is_empty() || name.len() > 64 || name.contains(['`', '\0', '/', '\\', '.']) {
                return Err(at(
                    key,
                    format!(
                        "{name:?} is not a MySQL name: 1 to 64 characters, without back quotes, dots, slashes or NUL"
                    ),
                ));
            }
        }
        JobConfigError::check_range(text, "source.fetchSize", s.fetch_size, 1, MAX_FETCH_SIZE)?;
        JobConfigError::check_range(
            text,
            "source.numPartitions",
            s.num_partitions,
            1,
            MAX_PARTITIONS,
        )?;
        JobConfigError::check_range(text, "source.rangesAtOnce", s.ranges_at_once, 1, 256)?;
        if let Some(pk) = &s.primary_key {
            if pk.is_empty() {
                return Err(at(
                    "source.primaryKey",
                    "must hold at least one column name when set".into(),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for c in pk {
                if c.trim().is_empty() {
                    return Err(at("source.primaryKey", "must not hold empty names".into()));
                }
                if !seen.insert(c.to_lowercase()) {
                    return Err(at("source.primaryKey", format!("names {c:?} twice")));
                }
            }
        }
        let lower = bound(text, "source.lowerBound", s.lower_bound)?;
        let upper = bound(text, "source.upperBound", s.upper_bound)?;
        let partitioning = match (s.partition_column, s.num_partitions) {
            (None, None) => {
                if lower.is_some() || upper.is_some() {
                    return Err(at(
                        "source.lowerBound",
                        "lowerBound and upperBound can only be set with partitionColumn and numPartitions".into(),
                    ));
                }
                None
            }
            (Some(_), None) => {
                return Err(at(
                    "source.partitionColumn",
                    "is set but numPartitions is missing; both must be set together".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(at(
                    "source.numPartitions",
                    "is set but partitionColumn is missing; both must be set together".into(),
                ));
            }
            (Some(column), Some(count)) => {
                check_identifier(&column).map_err(|m| at("source.partitionColumn", m))?;
                let (Some(lower), Some(upper)) = (lower, upper) else {
                    return Err(at(
                        "source.lowerBound",
                        "lowerBound and upperBound must both be set for a partitioned read".into(),
                    ));
                };
                let ordered = match (lower.integer(), upper.integer()) {
                    (Some(l), Some(u)) => Some(l < u),
                    (None, None) => match (lower.instant(), upper.instant()) {
                        (Some((l, _)), Some((u, _))) => Some(l < u),
                        _ => None,
                    },
                    _ => None,
                };
                match ordered {
                    Some(true) => {}
                    Some(false) => {
                        return Err(at(
                            "source.lowerBound",
                            format!(
                                "lowerBound ({}) must be less than upperBound ({})",
                                lower.0, upper.0
                            ),
                        ));
                    }
                    None => {
                        return Err(at(
                            "source.lowerBound",
                            format!(
                                "lowerBound ({}) and upperBound ({}) must both be integers, dates (2024-01-01) or timestamps (2024-01-01 00:00:00)",
                                lower.0, upper.0
                            ),
                        ));
                    }
                }
                Some(Partitioning {
                    column,
                    count,
                    lower,
                    upper,
                })
            }
        };
        if let Some(w) = &s.where_clause {
            check_where(w).map_err(|m| at("source.where", m))?;
        }
        let zero_dates = match s
            .zero_date_time_behavior
            .as_deref()
            .map(|z| z.trim().to_ascii_uppercase())
            .as_deref()
        {
            None | Some("EXCEPTION") => ZeroDates::Exception,
            Some("CONVERT_TO_NULL") => ZeroDates::ConvertToNull,
            Some("ROUND") => ZeroDates::Round,
            Some(_) => {
                return Err(at(
                    "source.zeroDateTimeBehavior",
                    format!(
                        "must be one of EXCEPTION, CONVERT_TO_NULL, ROUND, got {:?}",
                        crate::answer::cap(s.zero_date_time_behavior.as_deref().unwrap_or(""))
                    ),
                ));
            }
        };
        let mut connect_timeout_ms = 30_000;
        let mut socket_timeout_ms = 600_000;
        let mut max_allowed_packet = 256 * 1024 * 1024;
        let mut ssl_mode: Option<String> = None;
        for (key, value) in s.connection_properties.unwrap_or_default() {
            let path = format!("source.connectionProperties.{key}");
            let lower = key.to_lowercase();
            if DANGEROUS.contains(&lower.as_str()) {
                return Err(at(
                    &path,
                    "is refused: it would let the server reach the client's files or run code in the connection; drover never enables it".into(),
                ));
            }
            let Some(v) = scalar(&value) else {
                return Err(at(&path, "expected a string or number".into()));
            };
            let number = |max: u64| -> Result<u64, JobConfigError> {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or_else(|| {
                        at(
                            &path,
                            format!("expected a whole number from 0 to {max}, got {v:?}"),
                        )
                    })
            };
            match lower.as_str() {
                "connecttimeout" => connect_timeout_ms = number(i32::MAX as u64)?,
                "sockettimeout" => socket_timeout_ms = number(i32::MAX as u64)?,
                "maxallowedpacket" => {
                    max_allowed_packet = number(1 << 30)?;
                    if max_allowed_packet < 1024 {
                        return Err(at(&path, "must be at least 1024 bytes".into()));
                    }
                }
                "sslmode" => ssl_mode = Some(v.trim().to_ascii_uppercase()),
                "usessl" | "requiressl" if v.trim().eq_ignore_ascii_case("true") => {
                    ssl_mode.get_or_insert_with(|| "REQUIRED".into());
                }
                "usessl" | "requiressl" => {}
                "verifyservercertificate" if v.trim().eq_ignore_ascii_case("true") => {
                    ssl_mode = Some("VERIFY_CA".into());
                }
                "zerodatetimebehavior" => {
                    return Err(at(&path, "use source.zeroDateTimeBehavior instead".into()));
                }
                k if (k.contains("keystore") || k.contains("truststore"))
                    && !k.ends_with("password") =>
                {
                    return Err(at(
                        &path,
                        "Java key stores are not read: give PEM files in source.sslOptions (caCertPath, certPath, keyPath)".into(),
                    ));
                }
                _ => tracing::warn!("{path}: a Connector/J property drover does not use; ignored"),
            }
        }
        let tls = tls(text, ssl_mode, s.ssl_options)?;
        if s.consistent_snapshot && s.ranges_at_once.is_some_and(|n| n > 1) {
            return Err(at(
                "source.rangesAtOnce",
                "must be 1 (or unset) with consistentSnapshot: one transaction reads every range on one connection".into(),
            ));
        }
        Ok(Self {
            host: s.host,
            port: s.port.map_or(3306, |p| p as u16),
            database: s.database,
            table: s.table,
            credentials: s.credentials,
            primary_key: s.primary_key,
            partitioning,
            fetch_size: s.fetch_size.unwrap_or(DEFAULT_FETCH_SIZE) as usize,
            where_clause: s.where_clause,
            zero_dates,
            connect_timeout_ms,
            socket_timeout_ms,
            max_allowed_packet,
            tls,
            consistent_snapshot: s.consistent_snapshot,
            truncate_timestamps: s.truncate_timestamps,
            ranges_at_once: if s.consistent_snapshot {
                1
            } else {
                s.ranges_at_once.unwrap_or(DEFAULT_RANGES_AT_ONCE) as usize
            },
        })
    }

    /// The password.
    pub fn password(&self) -> &Secret {
        &self.credentials.password
    }
}

fn tls(text: &str, mode: Option<String>, ssl: Option<SslOptions>) -> Result<Tls, JobConfigError> {
    let key = "source.connectionProperties.sslMode";
    let ssl_enabled = ssl.as_ref().is_some_and(|s| s.enabled);
    let mut tls = match mode.as_deref() {
        None if ssl_enabled => Tls {
            enabled: true,
            verify: true,
            verify_identity: true,
            ..Tls::default()
        },
        None | Some("DISABLED") => Tls::default(),
        // drover never falls back to a plain connection: PREFERRED asks for TLS.
        Some("PREFERRED" | "REQUIRED") => Tls {
            enabled: true,
            ..Tls::default()
        },
        Some("VERIFY_CA") => Tls {
            enabled: true,
            verify: true,
            ..Tls::default()
        },
        Some("VERIFY_IDENTITY") => Tls {
            enabled: true,
            verify: true,
            verify_identity: true,
            ..Tls::default()
        },
        Some(other) => {
            return Err(JobConfigError::at(
                text,
                key,
                format!(
                    "must be DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY, got {:?}",
                    crate::answer::cap(other)
                ),
            ));
        }
    };
    if let Some(s) = ssl {
        if !tls.enabled && (s.ca_cert_path.is_some() || s.trust_store_path.is_some()) && !s.enabled
        {
            return Err(JobConfigError::at(
                text,
                "source.sslOptions.enabled",
                "must be true when sslOptions names certificates (or set connectionProperties.sslMode)",
            ));
        }
        tls.ca = s.ca_cert_path.or(s.trust_store_path);
        if s.client_auth_enabled || s.cert_path.is_some() {
            match (s.cert_path, s.key_path) {
                (Some(c), Some(k)) => tls.client = Some((c, k)),
                _ => {
                    return Err(JobConfigError::at(
                        text,
                        "source.sslOptions.certPath",
                        "a client certificate needs sslOptions.certPath and sslOptions.keyPath (PEM files)",
                    ));
                }
            }
        }
    }
    Ok(tls)
}

impl MysqlSource {
    /// The table in words for job names and lists (`mysql:db.table`): no host, no
    /// credentials.
    pub fn describe(&self) -> String {
        format!("mysql:{}.{}", self.database, self.table)
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::config::JobConfig;

    use super::*;

    #[test]
    fn the_example_parses_to_what_its_comments_say() {
        let job = JobConfig::parse(include_str!("../../../config/job-mysql.yaml")).unwrap();
        let Some(s) = job.source.get::<MysqlSource>() else {
            panic!("a MySQL source");
        };
        let p = s.partitioning.as_ref().unwrap();
        assert_eq!((p.column.as_str(), p.count), ("id", 16));
        assert_eq!(
            (p.lower.integer(), p.upper.integer()),
            (Some(0), Some(10_000_000))
        );
        assert_eq!(s.fetch_size, 1000);
        assert_eq!(s.connect_timeout_ms, 5000);
        assert_eq!(s.zero_dates, ZeroDates::Exception);
        assert!(s.tls.enabled && s.tls.verify && s.tls.verify_identity);
        assert_eq!(s.tls.ca.as_deref(), Some("/etc/drover/mysql-ca.pem"));
        assert_eq!(s.ranges_at_once, 4);
        assert_eq!(job.renames.len(), 1);
    }

    #[test]
    fn identifiers_and_filters() {
        assert!(check_identifier("created_at").is_ok());
        assert!(check_identifier("`my ``odd`` column`").is_ok());
        assert_eq!(unquote("`my ``odd`` column`"), "my `odd` column");
        assert_eq!(quote("a`b"), "`a``b`");
        for bad in ["1abc", "a b", "`a`b`", "``", "a;b"] {
            assert!(check_identifier(bad).is_err(), "{bad}");
        }
        assert!(check_where("name = 'o''brien' AND n > 3").is_ok());
        assert!(check_where("note = 'DROP TABLE; -- fine in quotes'").is_ok());
        for bad in [
            "a = 1; DROP TABLE t",
            "a = 1 /* x */",
            "a = 'x\\' OR 1=1",
            "SLEEP(5) = 0",
            "a = 'open",
        ] {
            assert!(check_where(bad).is_err(), "{bad}");
        }
    }
}
