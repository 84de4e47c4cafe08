//! `savepoints.path` and `savepoints.target`: where a job keeps its savepoints, read with
//! ScyllaDB Migrator's keys (`filesystem`, `s3`, `gcs`, and the `target-table` backend of its
//! documentation), plus drover's `endpoint` for S3-compatible servers and GCS emulators.

use std::sync::Arc;

use serde::Deserialize;

use crate::aws::{AwsCredentials, Endpoint};
use crate::connectors::TargetConfig;
use crate::jobfile::{self, JobConfigError};
use crate::savepoints::Location;
use crate::savepoints::blobs::{GcsAuth, GcsBlobs, S3Blobs};
use crate::savepoints::location::TableTarget;

/// The default table of `target-table` savepoints (ScyllaDB Migrator's name).
pub const DEFAULT_TABLE: &str = "scylla_migrator_savepoints";

/// The default `intervalSeconds` of `target-table` savepoints.
pub const TABLE_INTERVAL_SECONDS: u64 = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct S3Target {
    #[serde(rename = "type")]
    _type: String,
    bucket: String,
    prefix: Option<String>,
    region: Option<String>,
    credentials: Option<AwsCredentials>,
    /// drover: an S3-compatible server (path-style requests).
    endpoint: Option<Endpoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GcsCredentials {
    service_account_json_keyfile: Option<String>,
    keyfile: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GcsTarget {
    #[serde(rename = "type")]
    _type: String,
    bucket: String,
    prefix: Option<String>,
    /// Accepted for ScyllaDB Migrator's files; objects are addressed by bucket alone.
    #[serde(rename = "projectId")]
    _project_id: Option<String>,
    credentials: Option<GcsCredentials>,
    /// drover: a GCS emulator (or private endpoint).
    endpoint: Option<Endpoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TableTargetKeys {
    #[serde(rename = "type")]
    _type: String,
    keyspace: Option<String>,
    table: Option<String>,
    job_id: Option<String>,
}

const KEY: &str = "savepoints.target";

/// The location of `savepoints.target` (ScyllaDB Migrator's typed savepoint destination).
pub(super) fn target(
    text: &str,
    has_path: bool,
    value: &yaml_serde::Value,
    target: &TargetConfig,
) -> Result<Location, JobConfigError> {
    if has_path {
        return Err(JobConfigError::at(
            text,
            KEY,
            "give savepoints.path or savepoints.target, not both",
        ));
    }
    let kind = match value.get("type") {
        Some(yaml_serde::Value::String(t)) => t.as_str(),
        _ => {
            return Err(JobConfigError::at(
                text,
                KEY,
                "must be a mapping with a type: filesystem, s3, gcs or target-table",
            ));
        }
    };
    match kind {
        "filesystem" | "path" => {
            let path = value.get("path").and_then(|p| p.as_str()).unwrap_or("");
            if path.trim().is_empty() {
                return Err(JobConfigError::at(
                    text,
                    KEY,
                    "type filesystem needs a path (the directory of savepoint files)",
                ));
            }
            if let Some((scheme, _)) = path.split_once(':')
                && scheme != "file"
                && path[scheme.len()..].starts_with(":/")
            {
                return Err(JobConfigError::at(
                    text,
                    KEY,
                    format!(
                        "type filesystem takes a local directory, not {scheme}:// (as in ScyllaDB Migrator); use type s3 or gcs"
                    ),
                ));
            }
            uri(text, path)
        }
        "s3" | "aws-s3" | "aws-bucket" => {
            let keys: S3Target = jobfile::section(text, KEY, value.clone())?;
            s3(text, keys)
        }
        "gcs" | "gcp" | "google-cloud-storage" | "google-gcs" => {
            let keys: GcsTarget = jobfile::section(text, KEY, value.clone())?;
            gcs(text, keys)
        }
        "target-table" | "target-database" => {
            let keys: TableTargetKeys = jobfile::section(text, KEY, value.clone())?;
            table(text, keys, target)
        }
        "hadoop" => Err(JobConfigError::at(
            text,
            KEY,
            "type hadoop is not a savepoints target (ScyllaDB Migrator refuses it too); use savepoints.path with a local directory, or type s3 or gcs",
        )),
        other => Err(JobConfigError::at(
            text,
            KEY,
            format!(
                "unknown type {:?}, expected filesystem, s3, gcs or target-table",
                jobfile::cap(other)
            ),
        )),
    }
}

fn non_empty(text: &str, key: &str, value: &str) -> Result<(), JobConfigError> {
    if value.trim().is_empty() {
        return Err(JobConfigError::at(text, key, "must not be empty"));
    }
    Ok(())
}

fn s3(text: &str, keys: S3Target) -> Result<Location, JobConfigError> {
    non_empty(text, "savepoints.target.bucket", &keys.bucket)?;
    let bucket = keys.bucket.trim();
    if let Some(e) = &keys.endpoint {
        endpoint(text, e)?;
    }
    if keys
        .credentials
        .as_ref()
        .is_some_and(|c| c.assume_role.is_some())
    {
        return Err(JobConfigError::at(
            text,
            "savepoints.target.credentials.assumeRole",
            "assuming a role for savepoints in S3 is not supported by this version of drover yet; give the role's keys, or use the AWS environment",
        ));
    }
    let store = crate::s3::client(
        bucket,
        keys.region.as_deref(),
        keys.endpoint.as_ref().map(|e| e.url()).as_deref(),
        keys.credentials.as_ref().map(|c| c.keys()),
    )
    .map_err(|e| JobConfigError::at(text, KEY, format!("cannot use S3 bucket {bucket:?}: {e}")))?;
    Ok(Location::Objects(Arc::new(S3Blobs::new(
        Arc::new(store),
        bucket,
        keys.prefix.as_deref().unwrap_or(""),
    ))))
}

fn endpoint(text: &str, e: &Endpoint) -> Result<(), JobConfigError> {
    if e.port == 0 {
        return Err(JobConfigError::at(
            text,
            "savepoints.target.endpoint.port",
            "must be 1 to 65535",
        ));
    }
    non_empty(text, "savepoints.target.endpoint.host", &e.host)
}

const GCS_API: &str = "https://storage.googleapis.com";

fn gcs(text: &str, keys: GcsTarget) -> Result<Location, JobConfigError> {
    non_empty(text, "savepoints.target.bucket", &keys.bucket)?;
    let keyfile = keys
        .credentials
        .map(|c| c.service_account_json_keyfile.or(c.keyfile));
    let (auth, file_base) = match keyfile {
        Some(None) => {
            return Err(JobConfigError::at(
                text,
                "savepoints.target.credentials",
                "needs serviceAccountJsonKeyfile (the path of a service account's JSON key)",
            ));
        }
        Some(Some(path)) => {
            non_empty(
                text,
                "savepoints.target.credentials.serviceAccountJsonKeyfile",
                &path,
            )?;
            GcsAuth::from_key_file(std::path::Path::new(path.trim())).map_err(|m| {
                JobConfigError::at(
                    text,
                    "savepoints.target.credentials.serviceAccountJsonKeyfile",
                    m,
                )
            })?
        }
        // An emulator takes no token; otherwise Google's own conventions.
        None if keys.endpoint.is_some() => (GcsAuth::Anonymous, None),
        None => default_gcs_auth(text)?,
    };
    if let Some(e) = &keys.endpoint {
        endpoint(text, e)?;
    }
    let base = keys
        .endpoint
        .map(|e| e.url())
        .or(file_base)
        .unwrap_or_else(|| GCS_API.into());
    let blobs = GcsBlobs::new(
        &base,
        keys.bucket.trim(),
        keys.prefix.as_deref().unwrap_or(""),
        auth,
    )
    .map_err(|m| JobConfigError::at(text, KEY, m))?;
    Ok(Location::Objects(Arc::new(blobs)))
}

/// `GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server of the machine.
fn default_gcs_auth(text: &str) -> Result<(GcsAuth, Option<String>), JobConfigError> {
    if let Some(emulator) = std::env::var("STORAGE_EMULATOR_HOST")
        .ok()
        .filter(|h| !h.is_empty())
    {
        let base = if emulator.contains("://") {
            emulator
        } else {
            format!("http://{emulator}")
        };
        return Ok((GcsAuth::Anonymous, Some(base)));
    }
    match std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS") {
        Some(path) if !path.is_empty() => GcsAuth::from_key_file(std::path::Path::new(&path))
            .map_err(|m| {
                JobConfigError::at(text, KEY, format!("GOOGLE_APPLICATION_CREDENTIALS: {m}"))
            }),
        _ => Ok((GcsAuth::Metadata, None)),
    }
}

/// A keyspace or table name of `target-table` savepoints, resolved as CQL does. Only ASCII
/// letters, digits and underscores are allowed, quoted or not (the seed's rule: these names
/// are spliced into statements drover creates tables with).
pub fn table_name(text: &str, key: &str, value: &str) -> Result<String, JobConfigError> {
    let trimmed = value.trim();
    let (inner, quoted) = match trimmed.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => (inner, true),
        None => (trimmed, false),
    };
    if inner.is_empty() || inner.len() > 48 {
        return Err(JobConfigError::at(
            text,
            key,
            "must be 1 to 48 characters (CQL's limit)",
        ));
    }
    if !inner
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(JobConfigError::at(
            text,
            key,
            format!(
                "{:?}: only ASCII letters, digits and underscores are allowed (even quoted)",
                jobfile::cap(value)
            ),
        ));
    }
    Ok(if quoted {
        inner.to_string()
    } else {
        inner.to_ascii_lowercase()
    })
}

fn table(
    text: &str,
    keys: TableTargetKeys,
    target: &TargetConfig,
) -> Result<Location, JobConfigError> {
    let Some(own_keyspace) = target.own_tables_keyspace() else {
        return Err(JobConfigError::at(
            text,
            KEY,
            "type target-table keeps savepoints in the target database, which must then be Cassandra or ScyllaDB (target.type cassandra or scylla)",
        ));
    };
    let keyspace = match keys.keyspace.filter(|k| !k.trim().is_empty()) {
        Some(k) => table_name(text, "savepoints.target.keyspace", &k)?,
        // The exact case of target.keyspace: the name as the target's statements resolve it.
        None => own_keyspace,
    };
    let table = match keys.table.filter(|k| !k.trim().is_empty()) {
        Some(k) => table_name(text, "savepoints.target.table", &k)?,
        None => DEFAULT_TABLE.into(),
    };
    let job_id = match keys.job_id {
        Some(id) if id.trim().is_empty() => {
            return Err(JobConfigError::at(
                text,
                "savepoints.target.jobId",
                "must not be empty (leave it out to derive one from the job)",
            ));
        }
        Some(id) if id.len() > 200 => {
            return Err(JobConfigError::at(
                text,
                "savepoints.target.jobId",
                "must be at most 200 characters",
            ));
        }
        other => other.map(|s| s.trim().to_string()),
    };
    Ok(Location::Table(TableTarget {
        keyspace,
        table,
        job_id,
        suffix: String::new(),
    }))
}

/// `savepoints.path`: a local directory, or (as in ScyllaDB Migrator) an `s3a://` or `gs://`
/// URI, reached with the credentials of the environment (`AWS_*`, `AWS_ENDPOINT_URL`;
/// `GOOGLE_APPLICATION_CREDENTIALS`, `STORAGE_EMULATOR_HOST`).
pub(super) fn uri(text: &str, path: &str) -> Result<Location, JobConfigError> {
    let Some((scheme, rest)) = path.split_once("://").filter(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    }) else {
        return Ok(Location::Dir(local_path(path)));
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    match scheme.to_ascii_lowercase().as_str() {
        "file" => Ok(Location::Dir(local_path(path))),
        "s3" | "s3a" | "s3n" => s3(
            text,
            S3Target {
                _type: "s3".into(),
                bucket: bucket.into(),
                prefix: Some(prefix.into()),
                region: None,
                credentials: None,
                endpoint: None,
            },
        )
        .map_err(|e| JobConfigError::at(text, "savepoints.path", e.to_string())),
        "gs" => gcs(
            text,
            GcsTarget {
                _type: "gcs".into(),
                bucket: bucket.into(),
                prefix: Some(prefix.into()),
                _project_id: None,
                credentials: None,
                endpoint: None,
            },
        )
        .map_err(|e| JobConfigError::at(text, "savepoints.path", e.to_string())),
        _ => Err(JobConfigError::at(
            text,
            "savepoints.path",
            format!(
                "savepoints in a Hadoop file system ({scheme}://…) are not supported; use a local directory, s3a:// or gs://"
            ),
        )),
    }
}

/// A savepoint directory as written in a job file: `file:/x` and `file:///x` are `/x`.
pub(crate) fn local_path(path: &str) -> std::path::PathBuf {
    match path.strip_prefix("file:") {
        Some(rest) => format!("/{}", rest.trim_start_matches('/')).into(),
        None => path.into(),
    }
}
