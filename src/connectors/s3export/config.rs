//! The job-file sections of DynamoDB S3 exports, with ScyllaDB Migrator's keys: a source
//! (`bucket`, `manifestKey`, `tableDescription`, `endpoint`, `region`, `credentials`,
//! `usePathStyleAccess`) and a target (`path`), plus drover's `filesAtOnce` and, for a target
//! in S3, `endpoint`, `region` and `credentials`.

use serde::Deserialize;

use crate::aws::{AwsCredentials, Endpoint};
use crate::connectors::parquet::config::{Location, S3Access};
use crate::jobfile::{JobConfigError, section};

/// Data files read at once when the job does not say.
pub const DEFAULT_FILES_AT_ONCE: u64 = 4;
/// The most data files read at once: each holds a download and a decompressor.
pub const MAX_FILES_AT_ONCE: u64 = 64;
/// The most key attributes a table has (a hash key and a range key).
const MAX_KEY_ATTRIBUTES: usize = 2;

/// `type` of a key attribute (`S`, `N` or `B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum AttributeType {
    /// String.
    S,
    /// Number.
    N,
    /// Binary.
    B,
}

/// `type` of a key schema element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KeyType {
    /// The partition key.
    Hash,
    /// The sort key.
    Range,
}

/// `tableDescription.attributeDefinitions[]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributeDefinition {
    /// Attribute name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: AttributeType,
}

/// `tableDescription.keySchema[]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySchema {
    /// Attribute name.
    pub name: String,
    /// `HASH` or `RANGE`.
    #[serde(rename = "type")]
    pub kind: KeyType,
}

/// `tableDescription.provisionedThroughput`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Provisioned {
    /// Read capacity units.
    pub read_capacity_units: i64,
    /// Write capacity units.
    pub write_capacity_units: i64,
}

/// `tableDescription`: the exported table's key and billing, which an export does not record
/// but a created target table needs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TableDescription {
    /// Types of the key attributes.
    pub attribute_definitions: Vec<AttributeDefinition>,
    /// The key.
    pub key_schema: Vec<KeySchema>,
    /// `PROVISIONED` or `PAY_PER_REQUEST` (default).
    #[serde(default)]
    pub billing_mode: Option<crate::connectors::dynamodb::config::BillingMode>,
    /// Capacity of a provisioned table.
    #[serde(default)]
    pub provisioned_throughput: Option<Provisioned>,
}

/// A `source` of `type: dynamodb-s3-export`.
#[derive(Debug, Clone)]
pub struct ExportSource {
    /// `bucket`.
    pub bucket: String,
    /// `manifestKey`: the key of the export's `manifest-summary.json`.
    pub manifest_key: String,
    /// `tableDescription`.
    pub table: TableDescription,
    /// `endpoint`, `region`, `credentials`.
    pub s3: S3Access,
    /// `usePathStyleAccess`: accepted; drover always uses path-style requests with an
    /// `endpoint`, and AWS's virtual-hosted style without one.
    pub path_style: Option<bool>,
    /// drover: `filesAtOnce`, data files read at once (default 4).
    pub files_at_once: usize,
}

/// A `target` of `type: dynamodb-s3-export`.
#[derive(Debug, Clone)]
pub struct ExportTarget {
    /// `path`: a local directory or `s3://bucket/prefix` (`s3a://` too).
    pub location: Location,
    /// drover: `endpoint`, `region`, `credentials` of an S3 `path`.
    pub s3: S3Access,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSource {
    #[serde(rename = "type")]
    _type: String,
    bucket: String,
    manifest_key: String,
    table_description: TableDescription,
    #[serde(default)]
    endpoint: Option<Endpoint>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    credentials: Option<AwsCredentials>,
    #[serde(default)]
    use_path_style_access: Option<bool>,
    #[serde(default)]
    files_at_once: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTarget {
    #[serde(rename = "type")]
    _type: String,
    path: String,
    #[serde(default)]
    endpoint: Option<Endpoint>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    credentials: Option<AwsCredentials>,
}

impl ExportSource {
    /// Reads and checks a `source` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let s: RawSource = section(text, "source", value)?;
        for (key, v) in [
            ("source.bucket", &s.bucket),
            ("source.manifestKey", &s.manifest_key),
        ] {
            if v.trim().is_empty() {
                return Err(JobConfigError::at(text, key, "must not be empty"));
            }
        }
        if s.manifest_key.ends_with('/') {
            return Err(JobConfigError::at(
                text,
                "source.manifestKey",
                format!(
                    "{:?} is a folder; name the export's manifest-summary.json",
                    s.manifest_key
                ),
            ));
        }
        check_table(text, &s.table_description)?;
        JobConfigError::check_range(
            text,
            "source.filesAtOnce",
            s.files_at_once,
            1,
            MAX_FILES_AT_ONCE,
        )?;
        let location = Location::S3 {
            scheme: "s3".into(),
            bucket: s.bucket.trim().to_string(),
            prefix: String::new(),
        };
        let s3 = crate::connectors::parquet::config::access(
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
            bucket: s.bucket.trim().to_string(),
            manifest_key: s.manifest_key.trim().trim_start_matches('/').to_string(),
            table: s.table_description,
            s3,
            path_style: s.use_path_style_access,
            files_at_once: s.files_at_once.unwrap_or(DEFAULT_FILES_AT_ONCE) as usize,
        })
    }
}

fn check_table(text: &str, t: &TableDescription) -> Result<(), JobConfigError> {
    let key = "source.tableDescription.keySchema";
    let hashes = t
        .key_schema
        .iter()
        .filter(|k| k.kind == KeyType::Hash)
        .count();
    if hashes != 1 || t.key_schema.len() > MAX_KEY_ATTRIBUTES {
        return Err(JobConfigError::at(
            text,
            key,
            "expected one HASH key and at most one RANGE key",
        ));
    }
    for k in &t.key_schema {
        if !t.attribute_definitions.iter().any(|a| a.name == k.name) {
            return Err(JobConfigError::at(
                text,
                "source.tableDescription.attributeDefinitions",
                format!(
                    "the key attribute {:?} has no definition (name and type)",
                    k.name
                ),
            ));
        }
    }
    let provisioned =
        t.billing_mode == Some(crate::connectors::dynamodb::config::BillingMode::Provisioned);
    match (&t.provisioned_throughput, provisioned) {
        (None, true) => Err(JobConfigError::at(
            text,
            "source.tableDescription.provisionedThroughput",
            "is required with billingMode: PROVISIONED",
        )),
        (Some(p), _) if p.read_capacity_units <= 0 || p.write_capacity_units <= 0 => {
            Err(JobConfigError::at(
                text,
                "source.tableDescription.provisionedThroughput",
                "capacity units must be positive",
            ))
        }
        _ => Ok(()),
    }
}

impl ExportTarget {
    /// Reads and checks a `target` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let t: RawTarget = section(text, "target", value)?;
        let location =
            Location::parse(&t.path).map_err(|e| JobConfigError::at(text, "target.path", e))?;
        let s3 = crate::connectors::parquet::config::access(
            text,
            "target",
            &location,
            S3Access {
                credentials: t.credentials,
                region: t.region,
                endpoint: t.endpoint,
            },
        )?;
        Ok(Self { location, s3 })
    }
}

impl ExportSource {
    /// The export in words for job names and lists (`s3-export:s3://bucket/AWSDynamoDB/…`,
    /// the manifest's folder): no endpoint, no credentials.
    pub fn describe(&self) -> String {
        let key = self
            .manifest_key
            .strip_suffix("manifest-summary.json")
            .unwrap_or(&self.manifest_key)
            .trim_end_matches('/');
        format!("s3-export:s3://{}/{key}", self.bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::{ExportSource, ExportTarget};
    use crate::engine::config::JobConfig;

    #[test]
    fn the_example_job_files_show_every_key() {
        let load = include_str!("../../../config/job-s3export-load.yaml");
        let job = JobConfig::parse(load).unwrap();
        let Some(s) = job.source.get::<ExportSource>() else {
            panic!("not an export source")
        };
        assert_eq!(s.table.key_schema.len(), 2);
        assert_eq!(s.files_at_once, 4);
        for key in [
            "bucket:",
            "manifestKey:",
            "tableDescription:",
            "attributeDefinitions:",
            "keySchema:",
            "billingMode:",
            "provisionedThroughput:",
            "readCapacityUnits:",
            "writeCapacityUnits:",
            "endpoint:",
            "region:",
            "credentials:",
            "usePathStyleAccess:",
            "filesAtOnce:",
        ] {
            assert!(load.contains(key), "{key}");
        }
        let write = include_str!("../../../config/job-s3export-write.yaml");
        let job = JobConfig::parse(write).unwrap();
        assert!(job.target.get::<ExportTarget>().is_some());
        for key in ["path:", "endpoint:", "region:", "credentials:"] {
            assert!(write.contains(key), "{key}");
        }
    }

    #[test]
    fn bad_sources_are_refused_naming_the_key() {
        let load = include_str!("../../../config/job-s3export-load.yaml");
        let refused = |from: &str, to: &str| {
            assert!(load.contains(from), "{from}");
            JobConfig::parse(&load.replace(from, to))
                .unwrap_err()
                .message
        };
        let e = refused("        type: HASH\n", "        type: RANGE\n");
        assert!(
            e.starts_with("source.tableDescription.keySchema: expected one HASH"),
            "{e}"
        );
        let e = refused("      - name: at\n        type: N\n", "");
        assert!(e.contains("\"at\" has no definition"), "{e}");
        let e = refused("  filesAtOnce: 4", "  filesAtOnce: 0");
        assert!(e.starts_with("source.filesAtOnce: must be 1 to 64"), "{e}");
        let e = refused(
            "manifestKey: my-path/AWSDynamoDB/01234567890123-1234abcd/manifest-summary.json",
            "manifestKey: my-path/",
        );
        assert!(e.contains("is a folder"), "{e}");
        let e = refused(
            "    provisionedThroughput:            # required with PROVISIONED\n      readCapacityUnits: 25\n      writeCapacityUnits: 25\n",
            "",
        );
        assert!(e.contains("required with billingMode: PROVISIONED"), "{e}");
        let e = refused("        type: S\n", "        type: BOOL\n");
        assert!(e.contains("source"), "{e}");
        let e = refused("  streamChanges: false", "  streamChanges: true");
        assert!(e.starts_with("target.streamChanges: "), "{e}");
        let e = refused("  bucket: my-dynamodb-exports", "  bucket: ''");
        assert!(e.starts_with("source.bucket: must not be empty"), "{e}");
    }
}
