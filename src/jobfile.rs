//! The job file in ScyllaDB Migrator's format: what every job shares (`renames`,
//! `skipTokenRanges`, `savepoints`, `validation`), the errors that name a key and a line, and
//! redaction. Each connector parses its own `source`/`target` section with [`section`].

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::config::yaml;

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
    /// Refuses `value` of `key` outside `min..=max`, naming the key and the allowed range. The
    /// bounds are generous for any real job but keep a typo (or an attack) from sizing an
    /// allocation: `splitCount: 1000000000000` once made the unit plan abort the whole daemon.
    pub(crate) fn check_range(
        text: &str,
        key: &str,
        value: Option<u64>,
        min: u64,
        max: u64,
    ) -> Result<(), Self> {
        match value {
            Some(v) if v < min || v > max => Err(Self::at(
                text,
                key,
                format!("must be {min} to {max}, not {v}"),
            )),
            _ => Ok(()),
        }
    }

    pub(crate) fn at(text: &str, key: &str, message: impl std::fmt::Display) -> Self {
        Self {
            message: format!("{key}: {message}"),
            line: yaml::line_of(text, key),
        }
    }
}

/// The most differing rows reported with their values (`validation.failuresToFetch`): each is
/// held in memory and repeated in every savepoint of the validation.
pub const MAX_FAILURES_TO_FETCH: u64 = 100_000;
/// The largest tolerance in milliseconds (`validation.*ToleranceMillis`,
/// `timestampMsTolerance`): a hundred years, wider than any TTL or clock skew.
pub const MAX_TOLERANCE_MILLIS: u64 = 100 * 365 * 24 * 3600 * 1000;
/// The longest time between savepoints (`savepoints.intervalSeconds`): a week.
pub const MAX_INTERVAL_SECONDS: u64 = 7 * 24 * 3600;
/// The most savepoint files kept (`savepoints.keep`).
pub const MAX_KEEP: u64 = 10_000;

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
    /// Write the rows the target lacks, from the source, with their writetimes and TTLs when
    /// `source.preserveTimestamps` is set. Rows that differ are only reported (as in ScyllaDB
    /// Migrator). Default false.
    #[serde(default)]
    pub copy_missing_rows: bool,
    /// drover: write the rows that differ from the source again too, with the source's
    /// writetimes when they are preserved (a target change newer than the source's stays).
    /// Default false.
    #[serde(default)]
    pub copy_differing_rows: bool,
    /// The writetime of the rows `copyMissingRows` writes back to a CQL target when
    /// `source.preserveTimestamps` is set. Default `source`.
    #[serde(default)]
    pub repair_writetime_strategy: RepairWritetimeStrategy,
    /// ScyllaDB Migrator's MySQL validation: columns compared through one content hash. No
    /// source drover validates today reads MySQL, so it is accepted and ignored with a warning,
    /// as ScyllaDB Migrator ignores it for other sources.
    #[serde(default)]
    pub hash_columns: Option<Vec<String>>,
    /// How numbers of different types compare (`Lenient`, `DetectWiden`, `StrictType`). drover
    /// copies only between columns whose types hold the same bytes (an `int` into an `int`),
    /// so every policy gives the same answer; the key is accepted for ScyllaDB Migrator's job
    /// files.
    #[serde(default)]
    pub numeric_type_policy: NumericTypePolicy,
}

/// `validation.repairWritetimeStrategy`: the writetime of a row that `copyMissingRows` writes
/// back because the target lacks it (ScyllaDB Migrator's values, in any case).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RepairWritetimeStrategy {
    /// The source's writetimes: exact, but a row deleted on the target after the copy stays
    /// deleted (the target's tombstone is newer).
    #[default]
    Source,
    /// One time taken when the validation starts, for every missing row: newer than the
    /// deletions made before, so such rows come back.
    Coordinator,
    /// `target.writeWritetimestampInuS`.
    Config,
}

impl<'de> Deserialize<'de> for RepairWritetimeStrategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_of(
            d,
            "repairWritetimeStrategy",
            &[
                ("source", Self::Source),
                ("coordinator", Self::Coordinator),
                ("config", Self::Config),
            ],
            "source, coordinator or config",
        )
    }
}

/// One of `choices`, named in any case (ScyllaDB Migrator compares them without case).
fn one_of<'de, D: serde::Deserializer<'de>, T: Copy>(
    d: D,
    key: &str,
    choices: &[(&str, T)],
    expected: &str,
) -> Result<T, D::Error> {
    let s = String::deserialize(d)?;
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(&s))
        .map(|(_, value)| *value)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("invalid {key} {:?}, expected {expected}", cap(&s)))
        })
}

/// `validation.numericTypePolicy` (ScyllaDB Migrator's values, in any case).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NumericTypePolicy {
    /// Numbers compare by value whatever their types.
    #[default]
    Lenient,
    /// A value that lost precision in a wider or narrower type differs.
    DetectWiden,
    /// Numbers of different types differ.
    StrictType,
}

impl<'de> Deserialize<'de> for NumericTypePolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_of(
            d,
            "numericTypePolicy",
            &[
                ("Lenient", Self::Lenient),
                ("DetectWiden", Self::DetectWiden),
                ("StrictType", Self::StrictType),
            ],
            "Lenient, DetectWiden or StrictType",
        )
    }
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
            copy_differing_rows: false,
            repair_writetime_strategy: RepairWritetimeStrategy::Source,
            hash_columns: None,
            numeric_type_policy: NumericTypePolicy::Lenient,
        }
    }
}

fn default_ttl_tolerance() -> u64 {
    60_000
}
fn default_failures_to_fetch() -> usize {
    100
}

/// `savepoints`: where and how often progress is saved, and whether a start resumes from it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SavepointsConfig {
    /// Directory of savepoint files (created if missing; relative to the working directory of
    /// the process that runs the job), or an `s3a://`/`gs://` bucket folder. After parsing:
    /// the directory, when savepoints are kept in one.
    pub path: Option<std::path::PathBuf>,
    /// Seconds between savepoints. Required, except for `target-table` (default 300).
    pub interval_seconds: Option<u64>,
    /// On start, continue from the newest savepoint of the same migration. Default true.
    #[serde(default = "yes")]
    pub auto_resume: bool,
    /// drover: savepoints kept (the newest, on every backend); older ones are deleted. Default 10.
    #[serde(default = "default_keep")]
    pub keep: usize,
    /// ScyllaDB Migrator's typed destination: `type` filesystem, s3, gcs or target-table
    /// (read into `location` by the job's parser).
    pub target: Option<yaml_serde::Value>,
    /// Parquet sources: record each finished file in `skipParquetFiles` so a re-run skips it
    /// (default true). false is ScyllaDB Migrator's legacy mode: no file is recorded, a re-run
    /// reads every file again.
    pub enable_parquet_file_tracking: Option<bool>,
    /// Where savepoints are kept, resolved from `path` or `target` when the job is parsed.
    #[serde(skip)]
    pub location: Option<crate::savepoints::Location>,
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

fn yes() -> bool {
    true
}
fn default_keep() -> usize {
    10
}

/// Removes every `key: null` of the mappings in `value`, at any depth: ScyllaDB Migrator reads
/// null as absent for each optional key (its settings are `Option`s), and so does drover.
pub fn without_nulls(mut value: yaml_serde::Value) -> yaml_serde::Value {
    fn strip(value: &mut yaml_serde::Value) {
        match value {
            yaml_serde::Value::Mapping(map) => {
                map.retain(|_, v| !v.is_null());
                for (_, v) in map.iter_mut() {
                    strip(v);
                }
            }
            yaml_serde::Value::Sequence(items) => items.iter_mut().for_each(strip),
            yaml_serde::Value::Tagged(tagged) => strip(&mut tagged.value),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// Deserializes the section `side` of a job file as `T`; errors name the key path and line.
pub fn section<T: DeserializeOwned>(
    text: &str,
    side: &str,
    value: yaml_serde::Value,
) -> Result<T, JobConfigError> {
    serde_path_to_error::deserialize(without_nulls(value)).map_err(|e| {
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
        // serde quotes the value it refused (`invalid type: integer `12345``): for a secret
        // key that would echo a password, so only what was expected is said. Anything in or
        // under a `credentials` object too: `credentials: "user:password"` is a secret
        // written in the wrong shape.
        let secret = path
            .split('.')
            .any(|key| is_secret_key(key) || key.to_ascii_lowercase().contains("credential"));
        let inner = if secret {
            let expected = inner
                .find(", expected")
                .map_or("", |i| &inner[i..])
                .to_string();
            format!("invalid value (not shown: it is a secret){expected}")
        } else {
            inner
        };
        JobConfigError {
            message: format!("{shown}: {inner}"),
            line: yaml::line_of(text, &line_key).or_else(|| yaml::line_of(text, &shown)),
        }
    })
}

pub use crate::answer::{MAX_ECHO, cap};

/// Marker written in place of every secret in stored configs (savepoints, job records).
pub const REDACTED: &str = "<redacted>";

/// A location (`s3a://bucket/prefix`, a path) as it may be shown: without credentials
/// (`user:secret@`), query string (pre-signed URLs carry signatures there) or fragment.
pub fn location_without_secrets(location: &str) -> String {
    let location = location.split(['?', '#']).next().unwrap_or_default();
    match location.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            if path.is_empty() {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}/{path}")
            }
        }
        None => location.to_string(),
    }
}

/// The job file as JSON with every secret replaced by [`REDACTED`]: what job records, logs and
/// savepoints may hold. Keys are judged by name, so secrets in keys drover does not know yet
/// (a new connector's `secretKey`, say) are caught too.
pub fn redacted_json(text: &str) -> serde_json::Value {
    let value: serde_json::Value =
        crate::config::yaml::from_str(text).unwrap_or(serde_json::Value::Null);
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
mod echo_tests {
    use super::*;

    /// Text of exactly [`MAX_ECHO`] bytes is echoed whole; one byte more is cut to the
    /// bound, with the full size said.
    #[test]
    fn text_of_max_echo_bytes_is_kept_and_one_byte_more_cut() {
        let at = "k".repeat(MAX_ECHO);
        assert_eq!(cap(&at), at.as_str());
        let over = "k".repeat(MAX_ECHO + 1);
        assert_eq!(cap(&over), format!("{at}… (1001 bytes)"));
    }

    /// Every bounded job key goes through `check_range`: both bounds are allowed, one past
    /// either is refused naming the key, the range and the value, at the key's line.
    #[test]
    fn ranges_take_their_bounds_and_refuse_one_past() {
        let text = "source:\n  splitCount: 5\n";
        let check = |v| JobConfigError::check_range(text, "source.splitCount", Some(v), 1, 100);
        assert!(check(1).is_ok());
        assert!(check(100).is_ok());
        assert!(JobConfigError::check_range(text, "source.splitCount", None, 1, 100).is_ok());
        for (v, shown) in [(0, "0"), (101, "101")] {
            let e = check(v).unwrap_err();
            assert_eq!(
                e.message,
                format!("source.splitCount: must be 1 to 100, not {shown}")
            );
            assert_eq!(e.line, Some(2));
        }
    }

    #[test]
    fn long_text_is_capped_and_short_text_kept() {
        assert_eq!(cap("short"), "short");
        let long = "é".repeat(3_000_000);
        let capped = cap(&long);
        assert!(capped.len() < MAX_ECHO + 40, "{}", capped.len());
        assert!(capped.ends_with("… (6000000 bytes)"), "{capped}");
    }

    #[test]
    fn a_secret_value_is_not_quoted_in_a_type_error() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Creds {
            username: String,
            password: String,
        }
        let value: yaml_serde::Value =
            yaml_serde::from_str("username: u\npassword: 987654321\n").unwrap();
        let e = section::<Creds>("source:\n  password: 987654321\n", "source", value)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("987654321"), "{e}");
        assert!(
            e.starts_with("source.password: invalid value (not shown"),
            "{e}"
        );
    }

    /// Issue 42, finding 11: `credentials: "user:password"` and a string where
    /// `credentials.assumeRole` expects an object were quoted back in the 400.
    #[test]
    fn a_value_under_credentials_is_not_quoted_in_a_type_error() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Role {
            arn: String,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Creds {
            username: Option<String>,
            #[serde(rename = "assumeRole")]
            assume_role: Option<Role>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Source {
            credentials: Creds,
            port: Option<u16>,
        }
        for (text, key) in [
            ("credentials: 'migrator:S3cretPw'\n", "source.credentials: "),
            (
                "credentials: {assumeRole: 'S3cretPw'}\n",
                "source.credentials.assumeRole: ",
            ),
        ] {
            let value: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
            let e = section::<Source>(text, "source", value)
                .unwrap_err()
                .to_string();
            assert!(!e.contains("S3cretPw"), "{e}");
            assert!(
                e.starts_with(&format!("{key}invalid value (not shown")),
                "{e}"
            );
        }
        // Elsewhere the refused value is still quoted, as it helps.
        let value: yaml_serde::Value =
            yaml_serde::from_str("credentials: {}\nport: abc\n").unwrap();
        let e = section::<Source>("port: abc\n", "source", value)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"abc\""), "{e}");
    }
}
