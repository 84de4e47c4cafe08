//! The Parquet sections of a job file (`type: parquet`), in ScyllaDB Migrator's keys: a source
//! reads `path` (a file, a directory, or an `s3a://`/`s3://` prefix) with optional S3
//! `credentials`, `region` and `endpoint`; a target writes to `path` with a `compression` and
//! a `mode`. drover's own additions are said so in their docs; `config/job-parquet.yaml` and
//! `config/job-export-parquet.yaml` show every key.

use serde::Deserialize;

use crate::aws::{AwsCredentials, Endpoint};
use crate::jobfile::{JobConfigError, section};

/// Rows per page read from a Parquet file when the job does not say (`source.batchSize`).
pub const DEFAULT_BATCH_SIZE: usize = 1024;
/// The largest `source.batchSize`: a page is held in memory whole, once per file read at once.
pub const MAX_BATCH_SIZE: u64 = 100_000;
/// Files read at once when the job does not say (`source.maxConcurrentFiles`).
pub const DEFAULT_FILES_AT_ONCE: usize = 4;
/// The most files read at once.
pub const MAX_FILES_AT_ONCE: u64 = 256;

/// Where Parquet files are: a local file or directory, or an S3 bucket and key prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A file or directory on the local disk (as written: relative paths are the daemon's).
    Local(std::path::PathBuf),
    /// An S3 (or S3-compatible) bucket and key prefix.
    S3 {
        /// `s3a`, `s3` or `s3n`, kept so that recorded file names read as the operator wrote them.
        scheme: String,
        /// Bucket name.
        bucket: String,
        /// Key, or key prefix, without a leading `/`.
        prefix: String,
    },
}

impl Location {
    /// Reads a `path` value: `s3a://bucket/prefix`, `s3://…`, `s3n://…`, `file:/path`,
    /// `file:///path` or a plain path. Google Cloud Storage (`gs://`) is refused by name.
    pub fn parse(path: &str) -> Result<Self, String> {
        let p = path.trim();
        if p.is_empty() {
            return Err("must not be empty".into());
        }
        if let Some((scheme, rest)) = p.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            match scheme.as_str() {
                "s3" | "s3a" | "s3n" => {
                    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                    if bucket.is_empty() {
                        return Err(format!(
                            "{p:?} names no bucket (expected {scheme}://bucket/prefix)"
                        ));
                    }
                    return Ok(Self::S3 {
                        scheme,
                        bucket: bucket.to_string(),
                        prefix: prefix.trim_matches('/').to_string(),
                    });
                }
                "gs" => {
                    return Err(format!(
                        "{p:?} is in Google Cloud Storage (GCS), which drover does not read or write Parquet files in yet; use a local path or S3"
                    ));
                }
                "file" => {
                    return Ok(Self::Local(
                        format!("/{}", rest.trim_start_matches('/')).into(),
                    ));
                }
                other => {
                    return Err(format!(
                        "{p:?}: unknown scheme {other:?}, expected a local path, file:, s3a:// or s3://"
                    ));
                }
            }
        }
        if let Some(rest) = p.strip_prefix("file:") {
            return Ok(Self::Local(
                format!("/{}", rest.trim_start_matches('/')).into(),
            ));
        }
        Ok(Self::Local(p.into()))
    }

    /// Whether the files are in S3.
    pub fn is_s3(&self) -> bool {
        matches!(self, Self::S3 { .. })
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(p) => write!(f, "{}", p.display()),
            Self::S3 {
                scheme,
                bucket,
                prefix,
            } => write!(f, "{scheme}://{bucket}/{prefix}"),
        }
    }
}

/// How to reach S3 (both sides share these keys; drover's target accepts them too).
#[derive(Debug, Clone, Default)]
pub struct S3Access {
    /// `credentials`: keys (and a role to assume); unset: the AWS environment
    /// (`AWS_ACCESS_KEY_ID`, …).
    pub credentials: Option<AwsCredentials>,
    /// `region`; unset: `AWS_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// `endpoint`: an S3-compatible server (path-style requests); unset: AWS S3.
    pub endpoint: Option<Endpoint>,
}

/// A `source` of `type: parquet`.
#[derive(Debug, Clone)]
pub struct ParquetSource {
    /// `path`: what to read.
    pub location: Location,
    /// S3 access, for an S3 `path`.
    pub s3: S3Access,
    /// drover: rows per page (memory per file read at once). Default 1024.
    pub batch_size: usize,
    /// drover: files read at once. Default 4.
    pub max_concurrent_files: usize,
    /// drover: write timestamps with sub-millisecond digits (micro- and nanosecond Parquet
    /// timestamps) truncated to CQL's milliseconds. Default false: such a value fails the job,
    /// naming the file, row group and column, instead of being changed silently.
    pub truncate_timestamps: bool,
}

/// Parquet compression codecs drover writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// No compression (`none` or `uncompressed`).
    None,
    /// Snappy (the default).
    Snappy,
    /// Gzip.
    Gzip,
    /// LZ4 (raw).
    Lz4,
    /// Zstandard.
    Zstd,
}

/// What a target does when `path` already holds files (Spark's save modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Refuse the job (the default).
    Error,
    /// Delete what is there first.
    Overwrite,
    /// Add files beside what is there.
    Append,
    /// Write nothing, and succeed.
    Ignore,
}

impl Mode {
    /// Reads `target.mode` (any case, trimmed; `errorifexists` is Spark's name of `error`) of
    /// a target of `format`'s files.
    pub fn parse(text: &str, mode: Option<&str>, format: &str) -> Result<Self, JobConfigError> {
        match mode.map(|m| m.trim().to_ascii_lowercase()).as_deref() {
            None | Some("error" | "errorifexists") => Ok(Mode::Error),
            Some("overwrite") => Ok(Mode::Overwrite),
            Some("append") => Ok(Mode::Append),
            Some("ignore") => Ok(Mode::Ignore),
            Some(other) => Err(JobConfigError::at(
                text,
                "target.mode",
                format!(
                    "invalid {format} write mode {:?}; valid values: append, error, ignore, overwrite",
                    crate::answer::cap(other)
                ),
            )),
        }
    }
}

/// A `target` of `type: parquet`.
#[derive(Debug, Clone)]
pub struct ParquetTarget {
    /// `path`: the directory (or S3 prefix) files are written to.
    pub location: Location,
    /// `compression`.
    pub compression: Compression,
    /// `mode`.
    pub mode: Mode,
    /// drover: S3 access for an S3 `path` (ScyllaDB Migrator takes these from Hadoop's
    /// configuration instead).
    pub s3: S3Access,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSource {
    #[serde(rename = "type")]
    _type: String,
    path: String,
    #[serde(default)]
    credentials: Option<AwsCredentials>,
    #[serde(default)]
    endpoint: Option<Endpoint>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    batch_size: Option<u64>,
    #[serde(default)]
    max_concurrent_files: Option<u64>,
    #[serde(default)]
    truncate_timestamps: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTarget {
    #[serde(rename = "type")]
    _type: String,
    path: String,
    #[serde(default)]
    compression: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    credentials: Option<AwsCredentials>,
    #[serde(default)]
    endpoint: Option<Endpoint>,
    #[serde(default)]
    region: Option<String>,
}

/// A keyword as ScyllaDB Migrator compares it: trimmed, any case.
fn lowered(value: &Option<String>) -> Option<String> {
    value.as_deref().map(|v| v.trim().to_ascii_lowercase())
}

fn location(text: &str, key: &str, path: &str) -> Result<Location, JobConfigError> {
    Location::parse(path).map_err(|e| JobConfigError::at(text, key, e))
}

pub(crate) fn access(
    text: &str,
    side: &str,
    location: &Location,
    s3: S3Access,
) -> Result<S3Access, JobConfigError> {
    if let Some(e) = &s3.endpoint {
        if e.port == 0 {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.endpoint.port"),
                "must be 1 to 65535",
            ));
        }
        if e.host.trim().is_empty() {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.endpoint.host"),
                "must not be empty",
            ));
        }
    }
    if !location.is_s3() && (s3.credentials.is_some() || s3.endpoint.is_some()) {
        tracing::warn!(
            "{side}.credentials and {side}.endpoint apply to S3 paths only; {side}.path is local, so they are not used"
        );
    }
    if s3
        .credentials
        .as_ref()
        .is_some_and(|c| c.assume_role.is_some())
    {
        return Err(JobConfigError::at(
            text,
            &format!("{side}.credentials.assumeRole"),
            "assuming a role for Parquet files in S3 is not supported by this version of drover yet; give the role's keys, or use the AWS environment",
        ));
    }
    Ok(s3)
}

impl ParquetSource {
    /// Reads and checks a `source` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let s: RawSource = section(text, "source", value)?;
        let location = location(text, "source.path", &s.path)?;
        JobConfigError::check_range(text, "source.batchSize", s.batch_size, 1, MAX_BATCH_SIZE)?;
        JobConfigError::check_range(
            text,
            "source.maxConcurrentFiles",
            s.max_concurrent_files,
            1,
            MAX_FILES_AT_ONCE,
        )?;
        let s3 = access(
            text,
            "source",
            &location,
            S3Access {
                credentials: s.credentials,
                region: s.region,
                endpoint: s.endpoint,
            },
        )?;
        Ok(Self {
            location,
            s3,
            batch_size: s.batch_size.map_or(DEFAULT_BATCH_SIZE, |b| b as usize),
            max_concurrent_files: s
                .max_concurrent_files
                .map_or(DEFAULT_FILES_AT_ONCE, |b| b as usize),
            truncate_timestamps: s.truncate_timestamps,
        })
    }
}

impl ParquetTarget {
    /// Reads and checks a `target` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let t: RawTarget = section(text, "target", value)?;
        let location = location(text, "target.path", &t.path)?;
        let compression = match lowered(&t.compression).as_deref() {
            None | Some("snappy") => Compression::Snappy,
            Some("none" | "uncompressed") => Compression::None,
            Some("gzip") => Compression::Gzip,
            Some("lz4") => Compression::Lz4,
            Some("zstd") => Compression::Zstd,
            Some(c @ ("lzo" | "brotli")) => {
                return Err(JobConfigError::at(
                    text,
                    "target.compression",
                    format!(
                        "{c:?} is valid for ScyllaDB Migrator but not written by this version of drover; use snappy, zstd, gzip, lz4 or none"
                    ),
                ));
            }
            Some(other) => {
                return Err(JobConfigError::at(
                    text,
                    "target.compression",
                    format!(
                        "invalid Parquet compression codec {other:?}; valid values: gzip, lz4, none, snappy, uncompressed, zstd"
                    ),
                ));
            }
        };
        let mode = Mode::parse(text, t.mode.as_deref(), "Parquet")?;
        let s3 = access(
            text,
            "target",
            &location,
            S3Access {
                credentials: t.credentials,
                region: t.region,
                endpoint: t.endpoint,
            },
        )?;
        Ok(Self {
            location,
            compression,
            mode,
            s3,
        })
    }
}

impl Location {
    /// The files in words for job names and lists (`parquet:s3a://bucket/prefix`), without
    /// credentials or query string.
    pub fn describe(&self, system: &str) -> String {
        format!(
            "{system}:{}",
            crate::jobfile::location_without_secrets(&self.to_string())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_read_as_spark_names_them() {
        assert_eq!(
            Location::parse("s3a://b/some/prefix/").unwrap(),
            Location::S3 {
                scheme: "s3a".into(),
                bucket: "b".into(),
                prefix: "some/prefix".into()
            }
        );
        assert_eq!(
            Location::parse("file:///app/x").unwrap(),
            Location::Local("/app/x".into())
        );
        assert_eq!(
            Location::parse("file:/app/x").unwrap(),
            Location::Local("/app/x".into())
        );
        assert_eq!(
            Location::parse("data/x").unwrap(),
            Location::Local("data/x".into())
        );
        assert!(Location::parse("gs://b/p").unwrap_err().contains("GCS"));
        assert!(Location::parse("s3a:///p").is_err());
        assert!(Location::parse("hdfs://n/p").unwrap_err().contains("hdfs"));
    }
}
