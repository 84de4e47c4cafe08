//! Job files in ScyllaDB Migrator's format (`source`, `target`, `renames`, `skipTokenRanges`,
//! `savepoints`, `validation`, ...), so an operator's existing `config.yaml` runs unchanged.
//!
//! Every error names the key path and, when the file is YAML, its line. `source` and `target`
//! are chosen by their `type`, so they are parsed in two steps: the document first, then each
//! side as the struct of its type.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::config::yaml;
use secrecy::SecretString as Secret;

/// Why a job file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}{}", line.map(|l| format!(" (line {l})")).unwrap_or_default())]
pub struct JobConfigError {
    /// Key path and what was expected.
    pub message: String,
    /// Line of the key, when known.
    pub line: Option<usize>,
}

impl JobConfigError {
    pub(crate) fn at(text: &str, key: &str, message: impl std::fmt::Display) -> Self {
        Self {
            message: format!("{key}: {message}"),
            line: yaml::line_of(text, key),
        }
    }
}

/// A whole migration job.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Where rows come from.
    pub source: SourceConfig,
    /// Where rows go.
    pub target: TargetConfig,
    /// Column renames, source name to target name.
    pub renames: Vec<Rename>,
    /// Token ranges `(start, end]` already copied; skipped by this run.
    pub skip_token_ranges: Vec<(i64, i64)>,
    /// Savepoint settings.
    pub savepoints: Option<SavepointsConfig>,
    /// Validator settings (`drover validate`, `/api/v1/validations`); migrations ignore them.
    pub validation: ValidationConfig,
}

/// `validation`: how the validator compares the target with the source (ScyllaDB Migrator's
/// keys). Every key is optional; without the section the comparison is exact.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ValidationConfig {
    /// Compare each cell's writetime and TTL too. Default: `source.preserveTimestamps` (a
    /// copy that did not keep them cannot match them).
    #[serde(default)]
    pub compare_timestamps: Option<bool>,
    /// Largest TTL difference accepted, in milliseconds (CQL reads TTLs in seconds; both sides
    /// are read moments apart, so TTLs drift by the time between the reads). Default 60000.
    #[serde(default = "default_ttl_tolerance")]
    pub ttl_tolerance_millis: u64,
    /// Largest writetime difference accepted, in milliseconds (CQL reads writetimes in
    /// microseconds). Default 0: a copy that keeps writetimes keeps them exactly.
    #[serde(default)]
    pub writetime_tolerance_millis: u64,
    /// Differences reported with their key and values (all are counted). Default 100.
    #[serde(default = "default_failures_to_fetch")]
    pub failures_to_fetch: usize,
    /// Largest absolute difference between two `float` or `double` values. Default 0.
    #[serde(default)]
    pub floating_point_tolerance: f64,
    /// Largest difference between two `timestamp` values, in milliseconds. Default 0.
    #[serde(default)]
    pub timestamp_ms_tolerance: u64,
    /// Write missing and differing rows to the target again, from the source, with their
    /// writetimes and TTLs when `source.preserveTimestamps` is set. Default false.
    #[serde(default)]
    pub copy_missing_rows: bool,
}

impl Default for ValidationConfig {
    fn default() -> Self {
        Self {
            compare_timestamps: None,
            ttl_tolerance_millis: default_ttl_tolerance(),
            writetime_tolerance_millis: 0,
            failures_to_fetch: default_failures_to_fetch(),
            floating_point_tolerance: 0.0,
            timestamp_ms_tolerance: 0,
            copy_missing_rows: false,
        }
    }
}

fn default_ttl_tolerance() -> u64 {
    60_000
}
fn default_failures_to_fetch() -> usize {
    100
}

/// The source of a job.
#[derive(Debug, Clone)]
pub enum SourceConfig {
    /// A Cassandra or ScyllaDB table (`type: cassandra` or `type: scylla`).
    Cql(CqlSource),
}

/// The target of a job.
#[derive(Debug, Clone)]
pub enum TargetConfig {
    /// A Cassandra or ScyllaDB table (`type: cassandra` or `type: scylla`).
    Cql(CqlTarget),
}

/// `savepoints`: where and how often progress is saved, and whether a start resumes from it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SavepointsConfig {
    /// Directory of savepoint files (created if missing; relative to the working directory of
    /// the process that runs the job).
    pub path: Option<std::path::PathBuf>,
    /// Seconds between savepoints. Required for the file backend.
    pub interval_seconds: Option<u64>,
    /// On start, continue from the newest savepoint of the same migration. Default true.
    #[serde(default = "yes")]
    pub auto_resume: bool,
    /// drover: savepoint files kept (the newest); older ones are deleted. Default 10.
    #[serde(default = "default_keep")]
    pub keep: usize,
    /// Savepoints stored in the target database (ScyllaDB Migrator's `target-table` backend).
    pub target: Option<yaml_serde::Value>,
}

fn yes() -> bool {
    true
}
fn default_keep() -> usize {
    10
}

/// `renames` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    /// Column name in the source.
    pub from: String,
    /// Column name in the target.
    pub to: String,
}

/// `credentials` of a CQL endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password; never logged, stored or returned.
    pub password: Secret,
}

/// `sslOptions` of a CQL endpoint. ScyllaDB Migrator's Java key-store keys are accepted so old
/// files parse; drover reads PEM files: `trustStorePath` (or `caCertPath`) is the CA bundle that
/// signs the server certificate, `certPath` and `keyPath` a client certificate for mutual TLS.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SslOptions {
    /// Use TLS.
    pub enabled: bool,
    /// Present a client certificate (`certPath`/`keyPath`).
    pub client_auth_enabled: bool,
    /// PEM CA bundle; alias of `caCertPath` for Migrator files.
    pub trust_store_path: Option<String>,
    /// Accepted for compatibility; PEM files need no password.
    pub trust_store_password: Option<Secret>,
    /// Accepted for compatibility; must be `PEM` when set to anything else than JKS defaults.
    pub trust_store_type: Option<String>,
    /// Accepted for compatibility (Java key store of the client certificate).
    pub key_store_path: Option<String>,
    /// Accepted for compatibility.
    pub key_store_password: Option<Secret>,
    /// Accepted for compatibility.
    pub key_store_type: Option<String>,
    /// Accepted for compatibility (TLS versions are negotiated by rustls: 1.2 and 1.3).
    pub protocol: Option<String>,
    /// Accepted for compatibility (cipher suites are rustls' safe defaults).
    pub enabled_algorithms: Option<Vec<String>>,
    /// drover: PEM CA bundle.
    pub ca_cert_path: Option<String>,
    /// drover: PEM client certificate chain.
    pub cert_path: Option<String>,
    /// drover: PEM private key of `certPath`.
    pub key_path: Option<String>,
}

/// The connection part shared by CQL sources and targets.
#[derive(Debug, Clone)]
pub struct CqlEndpoint {
    /// Contact point host name or address.
    pub host: String,
    /// Native transport port.
    pub port: u16,
    /// Data center whose nodes are used; others are not contacted.
    pub local_dc: Option<String>,
    /// Authentication.
    pub credentials: Option<Credentials>,
    /// TLS.
    pub ssl_options: Option<SslOptions>,
    /// Keyspace (CQL rules: unquoted names are case-insensitive).
    pub keyspace: String,
    /// Table.
    pub table: String,
    /// Consistency level of every read or write.
    pub consistency_level: Consistency,
    /// Connections per node.
    pub connections: Option<usize>,
}

/// A CQL source.
#[derive(Debug, Clone)]
pub struct CqlSource {
    /// Where and what.
    pub endpoint: CqlEndpoint,
    /// Number of units the token ring is split into (at least one per vnode range).
    pub split_count: Option<usize>,
    /// Rows per page.
    pub fetch_size: usize,
    /// Keep each cell's writetime and TTL.
    pub preserve_timestamps: bool,
    /// A CQL condition added to every scan (`ALLOW FILTERING` is added).
    pub where_clause: Option<String>,
    /// drover: units scanned at once.
    pub max_concurrent_units: Option<usize>,
}

/// The longest TTL Cassandra accepts, in seconds (20 years).
pub const MAX_TTL_S: i32 = 630_720_000;

/// A CQL target.
#[derive(Debug, Clone)]
pub struct CqlTarget {
    /// Where and what.
    pub endpoint: CqlEndpoint,
    /// Rewrite `decimal` values without trailing zeros (`1.500` → `1.5`).
    pub strip_trailing_zeros_for_decimals: bool,
    /// TTL (seconds) for every written cell, instead of the source's.
    pub write_ttl_in_s: Option<i32>,
    /// Writetime (microseconds) for every written cell, instead of the source's.
    pub write_writetimestamp_in_us: Option<i64>,
    /// Skip rows whose primary key has a null (rows from a source `where` on a view, say)
    /// instead of failing.
    pub drop_null_primary_keys: bool,
    /// drover: most write requests in flight at once.
    pub max_in_flight: usize,
    /// drover: write at most this many rows per second (unset: no limit).
    pub rows_per_second: Option<u32>,
    /// drover: write at most this many bytes per second (unset: no limit).
    pub bytes_per_second: Option<u64>,
}

/// CQL consistency levels accepted in job files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum Consistency {
    Any,
    One,
    Two,
    Three,
    Quorum,
    All,
    LocalQuorum,
    EachQuorum,
    LocalOne,
}

impl From<Consistency> for scylla::statement::Consistency {
    fn from(c: Consistency) -> Self {
        use scylla::statement::Consistency as C;
        match c {
            Consistency::Any => C::Any,
            Consistency::One => C::One,
            Consistency::Two => C::Two,
            Consistency::Three => C::Three,
            Consistency::Quorum => C::Quorum,
            Consistency::All => C::All,
            Consistency::LocalQuorum => C::LocalQuorum,
            Consistency::EachQuorum => C::EachQuorum,
            Consistency::LocalOne => C::LocalOne,
        }
    }
}

// ---- raw shapes, as written in the file ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawJob {
    source: yaml_serde::Value,
    target: yaml_serde::Value,
    #[serde(default)]
    renames: Vec<Rename>,
    #[serde(default)]
    skip_token_ranges: Option<Vec<(i64, i64)>>,
    #[serde(default)]
    savepoints: Option<SavepointsConfig>,
    #[serde(default)]
    validation: Option<ValidationConfig>,
    #[serde(default)]
    skip_segments: Option<yaml_serde::Value>,
    #[serde(default)]
    skip_parquet_files: Option<yaml_serde::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCqlSource {
    #[serde(rename = "type")]
    _type: String,
    host: String,
    #[serde(default = "default_port")]
    port: u16,
    #[serde(default, rename = "localDC")]
    local_dc: Option<String>,
    #[serde(default)]
    credentials: Option<Credentials>,
    #[serde(default)]
    ssl_options: Option<SslOptions>,
    keyspace: String,
    table: String,
    #[serde(default = "default_consistency")]
    consistency_level: Consistency,
    #[serde(default)]
    split_count: Option<usize>,
    #[serde(default)]
    connections: Option<usize>,
    #[serde(default = "default_fetch_size")]
    fetch_size: usize,
    #[serde(default)]
    preserve_timestamps: bool,
    #[serde(default, rename = "where")]
    where_clause: Option<String>,
    #[serde(default)]
    max_concurrent_units: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCqlTarget {
    #[serde(rename = "type")]
    _type: String,
    host: String,
    #[serde(default = "default_port")]
    port: u16,
    #[serde(default, rename = "localDC")]
    local_dc: Option<String>,
    #[serde(default)]
    credentials: Option<Credentials>,
    #[serde(default)]
    ssl_options: Option<SslOptions>,
    keyspace: String,
    table: String,
    #[serde(default = "default_consistency")]
    consistency_level: Consistency,
    #[serde(default)]
    connections: Option<usize>,
    #[serde(default)]
    strip_trailing_zeros_for_decimals: bool,
    #[serde(default, rename = "writeTTLInS")]
    write_ttl_in_s: Option<i32>,
    #[serde(default, rename = "writeWritetimestampInuS")]
    write_writetimestamp_in_us: Option<i64>,
    #[serde(default)]
    drop_null_primary_keys: bool,
    #[serde(default = "default_max_in_flight")]
    max_in_flight: usize,
    #[serde(default)]
    rows_per_second: Option<u32>,
    #[serde(default)]
    bytes_per_second: Option<u64>,
}

fn default_port() -> u16 {
    9042
}
fn default_consistency() -> Consistency {
    Consistency::LocalQuorum
}
fn default_fetch_size() -> usize {
    1000
}
fn default_max_in_flight() -> usize {
    256
}

/// Marker written in place of every secret in stored configs (savepoints, job records).
pub const REDACTED: &str = "<redacted>";

impl JobConfig {
    /// Parses a job file (YAML; JSON is YAML too).
    pub fn parse(text: &str) -> Result<Self, JobConfigError> {
        if text.contains(REDACTED) {
            return Err(JobConfigError {
                message: format!(
                    "this config contains {REDACTED} values: it is a savepoint, whose secrets were removed. \
                     Submit the original job config instead; with savepoints.autoResume (the default) the \
                     job resumes from the newest savepoint by itself"
                ),
                line: text
                    .lines()
                    .position(|l| l.contains(REDACTED))
                    .map(|i| i + 1),
            });
        }
        let raw: RawJob = yaml_serde::from_str(text).map_err(|e| {
            let (message, line) = yaml::describe_error(&e);
            JobConfigError { message, line }
        })?;
        if raw.skip_segments.is_some() || raw.skip_parquet_files.is_some() {
            // Accepted for DynamoDB and Parquet sources; meaningless for a CQL source.
            tracing::debug!("skipSegments/skipParquetFiles ignored for a CQL source");
        }
        let source = match side_type(text, "source", &raw.source)?.as_str() {
            "cassandra" | "scylla" => {
                let s: RawCqlSource = side(text, "source", raw.source)?;
                SourceConfig::Cql(CqlSource {
                    endpoint: CqlEndpoint {
                        host: s.host,
                        port: s.port,
                        local_dc: s.local_dc,
                        credentials: s.credentials,
                        ssl_options: s.ssl_options,
                        keyspace: s.keyspace,
                        table: s.table,
                        consistency_level: s.consistency_level,
                        connections: s.connections,
                    },
                    split_count: s.split_count,
                    fetch_size: s.fetch_size,
                    preserve_timestamps: s.preserve_timestamps,
                    where_clause: s.where_clause.filter(|w| !w.trim().is_empty()),
                    max_concurrent_units: s.max_concurrent_units,
                })
            }
            other => return Err(unsupported(text, "source.type", other)),
        };
        let target = match side_type(text, "target", &raw.target)?.as_str() {
            "cassandra" | "scylla" => {
                let t: RawCqlTarget = side(text, "target", raw.target)?;
                TargetConfig::Cql(CqlTarget {
                    endpoint: CqlEndpoint {
                        host: t.host,
                        port: t.port,
                        local_dc: t.local_dc,
                        credentials: t.credentials,
                        ssl_options: t.ssl_options,
                        keyspace: t.keyspace,
                        table: t.table,
                        consistency_level: t.consistency_level,
                        connections: t.connections,
                    },
                    strip_trailing_zeros_for_decimals: t.strip_trailing_zeros_for_decimals,
                    write_ttl_in_s: t.write_ttl_in_s,
                    write_writetimestamp_in_us: t.write_writetimestamp_in_us,
                    drop_null_primary_keys: t.drop_null_primary_keys,
                    max_in_flight: t.max_in_flight,
                    rows_per_second: t.rows_per_second,
                    bytes_per_second: t.bytes_per_second,
                })
            }
            other => return Err(unsupported(text, "target.type", other)),
        };
        let config = JobConfig {
            source,
            target,
            renames: raw.renames,
            skip_token_ranges: raw.skip_token_ranges.unwrap_or_default(),
            savepoints: raw.savepoints,
            validation: raw.validation.unwrap_or_default(),
        };
        config.validate(text)?;
        if let Some(sp) = &config.savepoints {
            if sp.target.is_some() {
                return Err(JobConfigError::at(
                    text,
                    "savepoints.target",
                    "savepoints stored in the target database are not supported by this version of drover yet; use savepoints.path",
                ));
            }
            if sp.path.as_ref().is_none_or(|p| p.as_os_str().is_empty()) {
                return Err(JobConfigError::at(
                    text,
                    "savepoints",
                    "savepoints.path is required (the directory of savepoint files)",
                ));
            }
            match sp.interval_seconds {
                None => {
                    return Err(JobConfigError::at(
                        text,
                        "savepoints",
                        "savepoints.intervalSeconds is required with savepoint files (seconds between savepoints)",
                    ));
                }
                Some(0) => {
                    return Err(JobConfigError::at(
                        text,
                        "savepoints.intervalSeconds",
                        "must be at least 1",
                    ));
                }
                Some(_) => {}
            }
            if sp.keep == 0 {
                return Err(JobConfigError::at(
                    text,
                    "savepoints.keep",
                    "must be at least 1",
                ));
            }
        }
        Ok(config)
    }

    fn validate(&self, text: &str) -> Result<(), JobConfigError> {
        let SourceConfig::Cql(source) = &self.source;
        let TargetConfig::Cql(target) = &self.target;
        for (side, e) in [("source", &source.endpoint), ("target", &target.endpoint)] {
            if e.host.trim().is_empty() {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.host"),
                    "must not be empty",
                ));
            }
            if e.port == 0 {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.port"),
                    "must be 1 to 65535",
                ));
            }
            if e.connections == Some(0) {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.connections"),
                    "must be at least 1",
                ));
            }
            if let Some(ssl) = &e.ssl_options
                && ssl.client_auth_enabled
                && (ssl.cert_path.is_none() || ssl.key_path.is_none())
            {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.sslOptions.clientAuthEnabled"),
                    "needs sslOptions.certPath and sslOptions.keyPath (PEM files); Java key stores are not read",
                ));
            }
        }
        if source.split_count == Some(0) {
            return Err(JobConfigError::at(
                text,
                "source.splitCount",
                "must be at least 1",
            ));
        }
        if source.fetch_size == 0 {
            return Err(JobConfigError::at(
                text,
                "source.fetchSize",
                "must be at least 1",
            ));
        }
        if source.max_concurrent_units == Some(0) {
            return Err(JobConfigError::at(
                text,
                "source.maxConcurrentUnits",
                "must be at least 1",
            ));
        }
        if target.max_in_flight == 0 {
            return Err(JobConfigError::at(
                text,
                "target.maxInFlight",
                "must be at least 1",
            ));
        }
        if target.rows_per_second == Some(0) || target.bytes_per_second == Some(0) {
            return Err(JobConfigError::at(
                text,
                if target.rows_per_second == Some(0) {
                    "target.rowsPerSecond"
                } else {
                    "target.bytesPerSecond"
                },
                "must be at least 1 (leave it out for no limit)",
            ));
        }
        if target.write_ttl_in_s.is_some_and(|t| t < 0) {
            return Err(JobConfigError::at(
                text,
                "target.writeTTLInS",
                "must not be negative",
            ));
        }
        // Cassandra refuses every write with a longer TTL: the job could only fail.
        if target.write_ttl_in_s.is_some_and(|t| t > MAX_TTL_S) {
            return Err(JobConfigError::at(
                text,
                "target.writeTTLInS",
                format!(
                    "must be at most {MAX_TTL_S} (20 years, the longest TTL Cassandra accepts)"
                ),
            ));
        }
        let v = &self.validation;
        if !v.floating_point_tolerance.is_finite() || v.floating_point_tolerance < 0.0 {
            return Err(JobConfigError::at(
                text,
                "validation.floatingPointTolerance",
                "must be a number of at least 0",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, r) in self.renames.iter().enumerate() {
            if !seen.insert(r.from.as_str()) {
                return Err(JobConfigError::at(
                    text,
                    "renames",
                    format!("renames[{i}]: column {:?} is renamed twice", r.from),
                ));
            }
        }
        for (i, (start, end)) in self.skip_token_ranges.iter().enumerate() {
            if start >= end {
                return Err(JobConfigError::at(
                    text,
                    "skipTokenRanges",
                    format!(
                        "skipTokenRanges[{i}]: ({start}, {end}] is empty; ranges are (start, end] with start < end"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The target column name of a source column.
    pub fn target_name<'a>(&'a self, source_column: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|r| r.from == source_column)
            .map_or(source_column, |r| r.to.as_str())
    }
}

fn unsupported(text: &str, key: &str, value: &str) -> JobConfigError {
    let known = ["cassandra", "scylla", "dynamodb", "dynamo", "parquet"];
    if known.contains(&value) {
        JobConfigError::at(
            text,
            key,
            format!(
                "{value:?} is not supported by this version of drover yet; supported: cassandra, scylla"
            ),
        )
    } else {
        JobConfigError::at(
            text,
            key,
            format!("unknown type {value:?}, expected cassandra or scylla"),
        )
    }
}

fn side_type(text: &str, side: &str, value: &yaml_serde::Value) -> Result<String, JobConfigError> {
    let key = format!("{side}.type");
    match value.get("type") {
        Some(yaml_serde::Value::String(t)) => Ok(t.clone()),
        Some(_) => Err(JobConfigError::at(
            text,
            &key,
            "must be a string such as cassandra or scylla",
        )),
        None if value.is_mapping() => Err(JobConfigError {
            message: format!("{key}: missing; expected cassandra or scylla"),
            line: yaml::line_of(text, side),
        }),
        None => Err(JobConfigError::at(
            text,
            side,
            "must be a mapping with a type",
        )),
    }
}

fn side<T: DeserializeOwned>(
    text: &str,
    side: &str,
    value: yaml_serde::Value,
) -> Result<T, JobConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // For unknown fields the path ends at the unknown key, which the message names already;
        // the line is that key's.
        let line_key = if path == "." {
            side.to_string()
        } else {
            format!("{side}.{path}")
        };
        let shown = if inner.starts_with("unknown field") {
            line_key
                .rsplit_once('.')
                .map_or(side.to_string(), |(p, _)| p.to_string())
        } else {
            line_key.clone()
        };
        JobConfigError {
            message: format!("{shown}: {inner}"),
            line: yaml::line_of(text, &line_key).or_else(|| yaml::line_of(text, &shown)),
        }
    })
}

/// The job file as JSON with every secret replaced by [`REDACTED`]: what job records, logs and
/// savepoints may hold. Keys are judged by name, so secrets in keys drover does not know yet
/// (a new connector's `secretKey`, say) are caught too.
pub fn redacted_json(text: &str) -> serde_json::Value {
    let value: serde_json::Value = yaml_serde::from_str(text).unwrap_or(serde_json::Value::Null);
    redact(value)
}

/// Whether a key names a secret.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace(['_', '-'], "");
    k.contains("password")
        || k.contains("secret")
        || k.contains("token") && !k.contains("tokenrange")
        || k.contains("passphrase")
        || k == "accesskey"
        || k == "awsaccesskeyid"
        || k.ends_with("privatekey")
}

/// Replaces the values of secret keys, recursively.
pub fn redact(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    if is_secret_key(&k) && !v.is_null() {
                        (k, serde_json::Value::String(REDACTED.to_string()))
                    } else {
                        (k, redact(v))
                    }
                })
                .collect(),
        ),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(redact).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests;
