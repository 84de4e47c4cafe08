//! The DynamoDB sections of a job file (`type: dynamodb`, `dynamo` or `alternator`), in
//! ScyllaDB Migrator's keys, and their checks.

use secrecy::SecretString as Secret;
use serde::Deserialize;

use crate::jobfile::{JobConfigError, section};

/// `endpoint` of a DynamoDB-API server: `host` is a bare host name (`http://` is assumed, as
/// ScyllaDB Migrator does) or a URL with its scheme (`https://dynamodb.eu-west-1.amazonaws.com`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Host name, address or URL without the port.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Endpoint {
    /// The endpoint as a URL.
    pub fn url(&self) -> String {
        let host = self.host.trim_end_matches('/');
        if host.contains("://") {
            format!("{host}:{}", self.port)
        } else {
            format!("http://{host}:{}", self.port)
        }
    }
}

/// `credentials` of a DynamoDB-API server. Without them, the usual AWS chain is used
/// (environment, profile, web identity, instance metadata).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsCredentials {
    /// Access key id.
    pub access_key: String,
    /// Secret access key; never logged, stored or returned.
    pub secret_key: Secret,
    /// A role to assume with these credentials.
    pub assume_role: Option<AssumeRole>,
}

/// `credentials.assumeRole`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssumeRole {
    /// ARN of the role.
    pub arn: String,
    /// Session name (default `scylla-migrator`, as ScyllaDB Migrator names it).
    pub session_name: Option<String>,
}

/// Where a DynamoDB-API table is and how to reach it: the part shared by sources and targets.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Server; unset: AWS DynamoDB of `region`.
    pub endpoint: Option<Endpoint>,
    /// AWS region (any name for Alternator and test servers).
    pub region: Option<String>,
    /// Authentication.
    pub credentials: Option<AwsCredentials>,
    /// Table name.
    pub table: String,
    /// Do not ask the server for consumed capacity (Alternator does not report it).
    pub remove_consumed_capacity: bool,
    /// Written as `type: alternator`.
    pub alternator: bool,
}

/// `billingMode` of a created target table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BillingMode {
    /// Capacity units provisioned.
    Provisioned,
    /// On demand.
    PayPerRequest,
}

/// A DynamoDB source.
#[derive(Debug, Clone)]
pub struct DynamoSource {
    /// Where and what.
    pub connection: Connection,
    /// Parallel scan segments (`TotalSegments`); each is a unit of progress (`skipSegments`).
    pub scan_segments: Option<u32>,
    /// Read capacity units to plan reads for (default: the table's provisioned reads).
    pub read_throughput: Option<u32>,
    /// Share of `readThroughput` to use (0.1 to 1.5).
    pub throughput_read_percent: Option<f32>,
    /// Segments read at once.
    pub max_map_tasks: Option<u32>,
}

/// A DynamoDB or Alternator target.
#[derive(Debug, Clone)]
pub struct DynamoTarget {
    /// Where and what.
    pub connection: Connection,
    /// Write capacity units to plan writes for (default: the table's provisioned writes).
    pub write_throughput: Option<u32>,
    /// Share of `writeThroughput` to use (0.1 to 1.5).
    pub throughput_write_percent: Option<f32>,
    /// After the snapshot, apply the source's stream until the job is stopped.
    pub stream_changes: bool,
    /// With `streamChanges`, replicate changes only.
    pub skip_initial_snapshot_transfer: bool,
    /// Billing mode of a created table (default: the source's).
    pub billing_mode: Option<BillingMode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSource {
    #[serde(rename = "type")]
    _type: String,
    endpoint: Option<Endpoint>,
    region: Option<String>,
    credentials: Option<AwsCredentials>,
    table: String,
    scan_segments: Option<u32>,
    read_throughput: Option<u32>,
    throughput_read_percent: Option<f32>,
    max_map_tasks: Option<u32>,
    remove_consumed_capacity: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTarget {
    #[serde(rename = "type")]
    kind: String,
    endpoint: Option<Endpoint>,
    region: Option<String>,
    credentials: Option<AwsCredentials>,
    table: String,
    write_throughput: Option<u32>,
    throughput_write_percent: Option<f32>,
    #[serde(default)]
    stream_changes: bool,
    skip_initial_snapshot_transfer: Option<bool>,
    billing_mode: Option<BillingMode>,
    remove_consumed_capacity: Option<bool>,
}

impl DynamoSource {
    /// Reads and checks a `source` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let s: RawSource = section(text, "source", value)?;
        let alternator = s._type == "alternator";
        let source = DynamoSource {
            connection: Connection {
                endpoint: s.endpoint,
                region: s.region,
                credentials: s.credentials,
                table: s.table,
                remove_consumed_capacity: s.remove_consumed_capacity.unwrap_or(alternator),
                alternator,
            },
            scan_segments: s.scan_segments,
            read_throughput: s.read_throughput,
            throughput_read_percent: s.throughput_read_percent,
            max_map_tasks: s.max_map_tasks,
        };
        source.connection.validate(text, "source")?;
        positive(text, "source.scanSegments", source.scan_segments)?;
        positive(text, "source.readThroughput", source.read_throughput)?;
        positive(text, "source.maxMapTasks", source.max_map_tasks)?;
        percent(
            text,
            "source.throughputReadPercent",
            source.throughput_read_percent,
        )?;
        Ok(source)
    }
}

impl DynamoTarget {
    /// Reads and checks a `target` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let t: RawTarget = section(text, "target", value)?;
        let alternator = t.kind == "alternator";
        let target = DynamoTarget {
            connection: Connection {
                endpoint: t.endpoint,
                region: t.region,
                credentials: t.credentials,
                table: t.table,
                remove_consumed_capacity: t.remove_consumed_capacity.unwrap_or(alternator),
                alternator,
            },
            write_throughput: t.write_throughput,
            throughput_write_percent: t.throughput_write_percent,
            stream_changes: t.stream_changes,
            skip_initial_snapshot_transfer: t.skip_initial_snapshot_transfer.unwrap_or(false),
            billing_mode: t.billing_mode,
        };
        target.connection.validate(text, "target")?;
        positive(text, "target.writeThroughput", target.write_throughput)?;
        percent(
            text,
            "target.throughputWritePercent",
            target.throughput_write_percent,
        )?;
        if target.skip_initial_snapshot_transfer && !target.stream_changes {
            return Err(JobConfigError::at(
                text,
                "target.skipInitialSnapshotTransfer",
                "needs streamChanges: true (without the snapshot and the stream, nothing would be copied)",
            ));
        }
        Ok(target)
    }
}

impl Connection {
    fn validate(&self, text: &str, side: &str) -> Result<(), JobConfigError> {
        if self.table.trim().is_empty() {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.table"),
                "must not be empty",
            ));
        }
        if let Some(e) = &self.endpoint {
            if e.host.trim().is_empty() {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.endpoint.host"),
                    "must not be empty",
                ));
            }
            if e.port == 0 {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.endpoint.port"),
                    "must be between 1 and 65535",
                ));
            }
        } else if self.alternator {
            return Err(JobConfigError::at(
                text,
                side,
                "endpoint is required with type alternator (the address of a ScyllaDB node, e.g. host: http://10.0.0.1, port: 8000)",
            ));
        }
        Ok(())
    }
}

fn positive(text: &str, key: &str, value: Option<u32>) -> Result<(), JobConfigError> {
    if value == Some(0) {
        return Err(JobConfigError::at(text, key, "must be a positive integer"));
    }
    Ok(())
}

fn percent(text: &str, key: &str, value: Option<f32>) -> Result<(), JobConfigError> {
    if value.is_some_and(|v| !(0.1..=1.5).contains(&v)) {
        return Err(JobConfigError::at(text, key, "must be between 0.1 and 1.5"));
    }
    Ok(())
}
