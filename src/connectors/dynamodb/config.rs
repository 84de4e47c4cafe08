//! The DynamoDB sections of a job file (`type: dynamodb`, `dynamo` or `alternator`), in
//! ScyllaDB Migrator's keys, and their checks.
//!
//! Every key ScyllaDB Migrator accepts in these sections is accepted here, and what it refuses
//! is refused (with the key and its line): an operator's job file means the same in both.
//! Keys drover reads but does not act on (Alternator's client tuning, a target's
//! `maxMapTasks`) are said so in their doc and in a warning when a job sets them.
//! `config/job-dynamodb.yaml` shows every key.

use serde::Deserialize;

use crate::jobfile::{JobConfigError, section};

pub use crate::aws::{AssumeRole, AwsCredentials, Endpoint};

/// ScyllaDB Migrator's Alternator client settings (`type: alternator` only), written at the top
/// level of the section. drover accepts and checks them so that Migrator's job files run
/// unchanged, but does not act on them: it talks to the one `endpoint` with the AWS SDK's
/// client (no rack- or datacenter-aware routing, no request compression, its own connection
/// pool), and writes 25 items per `BatchWriteItem`. A job that sets one is told so in a warning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlternatorSettings {
    /// `datacenter`: the datacenter whose nodes Migrator's load balancer prefers. Not acted on.
    pub datacenter: Option<String>,
    /// `rack`: the rack preferred within `datacenter` (requires it). Not acted on.
    pub rack: Option<String>,
    /// `activeRefreshIntervalMs`: how often Migrator refreshes the node list while busy (> 0).
    /// Not acted on.
    pub active_refresh_interval_ms: Option<i64>,
    /// `idleRefreshIntervalMs`: how often Migrator refreshes the node list while idle (> 0).
    /// Not acted on.
    pub idle_refresh_interval_ms: Option<i64>,
    /// `compression`: compress request bodies. Not acted on.
    pub compression: Option<bool>,
    /// `optimizeHeaders`: send only the headers Alternator needs. Not acted on.
    pub optimize_headers: Option<bool>,
    /// `maxConnections`: connections of Migrator's HTTP client (> 0). Not acted on.
    pub max_connections: Option<i64>,
    /// `connectionMaxIdleTimeMs` (>= 0). Not acted on.
    pub connection_max_idle_time_ms: Option<i64>,
    /// `connectionTimeToLiveMs` (>= 0). Not acted on.
    pub connection_time_to_live_ms: Option<i64>,
    /// `connectionAcquisitionTimeoutMs` (>= 0). Not acted on.
    pub connection_acquisition_timeout_ms: Option<i64>,
    /// `connectionTimeoutMs` (>= 0). Not acted on: drover's connect timeout is 5 s.
    pub connection_timeout_ms: Option<i64>,
    /// `maxItemsPerBatch`: items per `BatchWriteItem` (> 0). Not acted on: drover writes 25,
    /// DynamoDB's limit.
    pub max_items_per_batch: Option<i64>,
}

impl AlternatorSettings {
    /// The keys set, by their job-file names.
    pub fn keys_set(&self) -> Vec<&'static str> {
        let set = [
            ("datacenter", self.datacenter.is_some()),
            ("rack", self.rack.is_some()),
            (
                "activeRefreshIntervalMs",
                self.active_refresh_interval_ms.is_some(),
            ),
            (
                "idleRefreshIntervalMs",
                self.idle_refresh_interval_ms.is_some(),
            ),
            ("compression", self.compression.is_some()),
            ("optimizeHeaders", self.optimize_headers.is_some()),
            ("maxConnections", self.max_connections.is_some()),
            (
                "connectionMaxIdleTimeMs",
                self.connection_max_idle_time_ms.is_some(),
            ),
            (
                "connectionTimeToLiveMs",
                self.connection_time_to_live_ms.is_some(),
            ),
            (
                "connectionAcquisitionTimeoutMs",
                self.connection_acquisition_timeout_ms.is_some(),
            ),
            ("connectionTimeoutMs", self.connection_timeout_ms.is_some()),
            ("maxItemsPerBatch", self.max_items_per_batch.is_some()),
        ];
        set.into_iter()
            .filter(|(_, s)| *s)
            .map(|(k, _)| k)
            .collect()
    }

    fn validate(&self, text: &str, side: &str) -> Result<(), JobConfigError> {
        let key = |k: &str| format!("{side}.{k}");
        if self.rack.is_some() && self.datacenter.is_none() {
            return Err(JobConfigError::at(
                text,
                &key("rack"),
                "is set without datacenter; set datacenter too",
            ));
        }
        let positive = [
            ("activeRefreshIntervalMs", self.active_refresh_interval_ms),
            ("idleRefreshIntervalMs", self.idle_refresh_interval_ms),
            ("maxConnections", self.max_connections),
            ("maxItemsPerBatch", self.max_items_per_batch),
        ];
        for (k, v) in positive {
            if v.is_some_and(|v| v <= 0) {
                return Err(JobConfigError::at(text, &key(k), "must be positive"));
            }
        }
        let not_negative = [
            ("connectionMaxIdleTimeMs", self.connection_max_idle_time_ms),
            ("connectionTimeToLiveMs", self.connection_time_to_live_ms),
            (
                "connectionAcquisitionTimeoutMs",
                self.connection_acquisition_timeout_ms,
            ),
            ("connectionTimeoutMs", self.connection_timeout_ms),
        ];
        for (k, v) in not_negative {
            if v.is_some_and(|v| v < 0) {
                return Err(JobConfigError::at(text, &key(k), "must not be negative"));
            }
        }
        Ok(())
    }
}

/// Where a DynamoDB-API table is and how to reach it: the part shared by sources and targets.
#[derive(Debug, Clone)]
pub struct Connection {
    /// `endpoint`: the server; unset: AWS DynamoDB of `region`. Required with `type: alternator`.
    pub endpoint: Option<Endpoint>,
    /// `region`: AWS region (default `us-east-1`; any name for Alternator and test servers).
    pub region: Option<String>,
    /// `credentials`: authentication; unset: the AWS default chain.
    pub credentials: Option<AwsCredentials>,
    /// `table`: table name.
    pub table: String,
    /// `removeConsumedCapacity` (`type: alternator` only, default true there, false otherwise):
    /// do not ask the server for consumed capacity (Alternator does not report it).
    pub remove_consumed_capacity: bool,
    /// Written as `type: alternator`.
    pub alternator: bool,
    /// Alternator's client settings (`type: alternator` only; not acted on).
    pub alternator_settings: AlternatorSettings,
}

/// `billingMode` of a created target table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BillingMode {
    /// Capacity units provisioned (the source's, or 25/25 when it has none).
    Provisioned,
    /// On demand.
    PayPerRequest,
}

/// A DynamoDB source.
#[derive(Debug, Clone)]
pub struct DynamoSource {
    /// Where and what.
    pub connection: Connection,
    /// `scanSegments`: parallel scan segments (`TotalSegments`); each is a unit of progress
    /// (`skipSegments`). Default 16.
    pub scan_segments: Option<u32>,
    /// `readThroughput`: read capacity units per second to plan reads for (default: the
    /// table's provisioned reads; none for an on-demand table).
    pub read_throughput: Option<u32>,
    /// `throughputReadPercent`: share of `readThroughput` to use (0.1 to 1.5, default 1.0).
    pub throughput_read_percent: Option<f32>,
    /// `maxMapTasks`: segments read at once (default 16, at most `scanSegments`).
    pub max_map_tasks: Option<u32>,
}

/// A DynamoDB or Alternator target.
#[derive(Debug, Clone)]
pub struct DynamoTarget {
    /// Where and what.
    pub connection: Connection,
    /// `writeThroughput`: write capacity units per second to plan writes for (default: the
    /// table's provisioned writes; none for an on-demand table).
    pub write_throughput: Option<u32>,
    /// `throughputWritePercent`: share of `writeThroughput` to use (0.1 to 1.5, default 1.0).
    pub throughput_write_percent: Option<f32>,
    /// `streamChanges`: after the snapshot, apply the source's stream until the job is
    /// stopped. Default false (ScyllaDB Migrator requires the key; drover does not).
    pub stream_changes: bool,
    /// `skipInitialSnapshotTransfer`: with `streamChanges`, replicate changes only. Ignored
    /// (with a warning) without `streamChanges`, as ScyllaDB Migrator ignores it; then false.
    pub skip_initial_snapshot_transfer: bool,
    /// `billingMode`: billing mode of a created table (default: the source's).
    pub billing_mode: Option<BillingMode>,
}

// Unknown keys are refused by `strict` before (serde cannot with `flatten`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSource {
    #[serde(rename = "type")]
    kind: String,
    endpoint: Option<Endpoint>,
    region: Option<String>,
    credentials: Option<AwsCredentials>,
    table: String,
    // Read wider than they are stored, so that any integer is refused with its key's range.
    scan_segments: Option<u64>,
    read_throughput: Option<u64>,
    throughput_read_percent: Option<f32>,
    max_map_tasks: Option<u64>,
    remove_consumed_capacity: Option<bool>,
    #[serde(flatten)]
    alternator: RawAlternator,
}

// Unknown keys are refused by `strict` before (serde cannot with `flatten`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTarget {
    #[serde(rename = "type")]
    kind: String,
    endpoint: Option<Endpoint>,
    region: Option<String>,
    credentials: Option<AwsCredentials>,
    table: String,
    write_throughput: Option<u64>,
    throughput_write_percent: Option<f32>,
    #[serde(default)]
    stream_changes: bool,
    skip_initial_snapshot_transfer: Option<bool>,
    billing_mode: Option<BillingMode>,
    remove_consumed_capacity: Option<bool>,
    /// Not a target key of ScyllaDB Migrator, which ignores it; its own test files set it.
    max_map_tasks: Option<i64>,
    #[serde(flatten)]
    alternator: RawAlternator,
}

/// Alternator's settings as written. `flatten` and `deny_unknown_fields` do not combine in
/// serde, so the outer structs are read without `flatten` first (see [`strict`]).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawAlternator {
    datacenter: Option<String>,
    rack: Option<String>,
    active_refresh_interval_ms: Option<i64>,
    idle_refresh_interval_ms: Option<i64>,
    compression: Option<bool>,
    optimize_headers: Option<bool>,
    max_connections: Option<i64>,
    connection_max_idle_time_ms: Option<i64>,
    connection_time_to_live_ms: Option<i64>,
    connection_acquisition_timeout_ms: Option<i64>,
    connection_timeout_ms: Option<i64>,
    max_items_per_batch: Option<i64>,
}

impl From<RawAlternator> for AlternatorSettings {
    fn from(r: RawAlternator) -> Self {
        Self {
            datacenter: r.datacenter,
            rack: r.rack,
            active_refresh_interval_ms: r.active_refresh_interval_ms,
            idle_refresh_interval_ms: r.idle_refresh_interval_ms,
            compression: r.compression,
            optimize_headers: r.optimize_headers,
            max_connections: r.max_connections,
            connection_max_idle_time_ms: r.connection_max_idle_time_ms,
            connection_time_to_live_ms: r.connection_time_to_live_ms,
            connection_acquisition_timeout_ms: r.connection_acquisition_timeout_ms,
            connection_timeout_ms: r.connection_timeout_ms,
            max_items_per_batch: r.max_items_per_batch,
        }
    }
}

/// Job-file names of Alternator's settings.
const ALTERNATOR_KEYS: &[&str] = &[
    "datacenter",
    "rack",
    "activeRefreshIntervalMs",
    "idleRefreshIntervalMs",
    "compression",
    "optimizeHeaders",
    "maxConnections",
    "connectionMaxIdleTimeMs",
    "connectionTimeToLiveMs",
    "connectionAcquisitionTimeoutMs",
    "connectionTimeoutMs",
    "maxItemsPerBatch",
];

const SOURCE_KEYS: &[&str] = &[
    "type",
    "endpoint",
    "region",
    "credentials",
    "table",
    "scanSegments",
    "readThroughput",
    "throughputReadPercent",
    "maxMapTasks",
    "removeConsumedCapacity",
];

const TARGET_KEYS: &[&str] = &[
    "type",
    "endpoint",
    "region",
    "credentials",
    "table",
    "writeThroughput",
    "throughputWritePercent",
    "streamChanges",
    "skipInitialSnapshotTransfer",
    "billingMode",
    "removeConsumedCapacity",
    "maxMapTasks",
];

/// Refuses keys of the section that neither `known` nor Alternator's settings name (what
/// `deny_unknown_fields` would do, which `flatten` prevents), and, for `type: dynamodb`,
/// Alternator's own keys, as ScyllaDB Migrator does.
fn strict(
    text: &str,
    side: &str,
    value: &yaml_serde::Value,
    known: &[&str],
    alternator: bool,
) -> Result<(), JobConfigError> {
    let Some(map) = value.as_mapping() else {
        return Ok(());
    };
    for k in map.keys() {
        let Some(k) = k.as_str() else { continue };
        if k == "alternator" {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.alternator"),
                "a nested alternator block is not used: write type: alternator and its settings at the top level of the section",
            ));
        }
        let alternator_key = ALTERNATOR_KEYS.contains(&k) || k == "removeConsumedCapacity";
        if alternator_key && !alternator {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.{k}"),
                "is a setting of type alternator only; change the type to alternator to use it",
            ));
        }
        if !alternator_key && !known.contains(&k) {
            let mut expected: Vec<&str> = known.to_vec();
            if alternator {
                expected.extend(ALTERNATOR_KEYS);
            }
            return Err(JobConfigError::at(
                text,
                &format!("{side}.{k}"),
                format!(
                    "unknown key {k:?}, expected one of {}",
                    expected
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(())
}

impl DynamoSource {
    /// Refuses `skipSegments` that are not segments of this source: numbers only mean
    /// something for the number of segments they were made with.
    pub fn check_progress(
        &self,
        text: &str,
        done: &crate::savepoints::Progress,
    ) -> Result<(), JobConfigError> {
        let segments = done.numbers(&super::SEGMENTS);
        if segments.is_empty() {
            return Ok(());
        }
        let Some(total) = self.scan_segments else {
            return Err(JobConfigError::at(
                text,
                "skipSegments",
                "needs source.scanSegments: segment numbers only mean something for the number of segments they were made with",
            ));
        };
        match segments.iter().find(|&&i| i >= total) {
            Some(bad) => Err(JobConfigError::at(
                text,
                "skipSegments",
                format!(
                    "segment {bad} does not exist: source.scanSegments is {total} (segments 0 to {})",
                    total - 1
                ),
            )),
            None => Ok(()),
        }
    }

    /// Reads and checks a `source` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let alternator = value.get("type").and_then(|t| t.as_str()) == Some("alternator");
        strict(text, "source", &value, SOURCE_KEYS, alternator)?;
        let s: RawSource = section(text, "source", value)?;
        let alternator = s.kind == "alternator";
        let scan_segments = bounded(
            text,
            "source.scanSegments",
            s.scan_segments,
            MAX_SCAN_SEGMENTS,
        )?;
        let read_throughput = bounded(
            text,
            "source.readThroughput",
            s.read_throughput,
            MAX_THROUGHPUT,
        )?;
        let max_map_tasks = bounded(text, "source.maxMapTasks", s.max_map_tasks, MAX_MAP_TASKS)?;
        let source = DynamoSource {
            connection: Connection {
                endpoint: s.endpoint,
                region: s.region,
                credentials: s.credentials,
                table: s.table,
                remove_consumed_capacity: s.remove_consumed_capacity.unwrap_or(alternator),
                alternator,
                alternator_settings: s.alternator.into(),
            },
            scan_segments,
            read_throughput,
            throughput_read_percent: s.throughput_read_percent,
            max_map_tasks,
        };
        source.connection.validate(text, "source")?;
        percent(
            text,
            "source.throughputReadPercent",
            source.throughput_read_percent,
        )?;
        source.connection.warn_unused("source", &[]);
        Ok(source)
    }
}

impl DynamoTarget {
    /// Reads and checks a `target` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let alternator = value.get("type").and_then(|t| t.as_str()) == Some("alternator");
        strict(text, "target", &value, TARGET_KEYS, alternator)?;
        let t: RawTarget = section(text, "target", value)?;
        let alternator = t.kind == "alternator";
        let write_throughput = bounded(
            text,
            "target.writeThroughput",
            t.write_throughput,
            MAX_THROUGHPUT,
        )?;
        let skip_snapshot = t.skip_initial_snapshot_transfer.unwrap_or(false);
        let target = DynamoTarget {
            connection: Connection {
                endpoint: t.endpoint,
                region: t.region,
                credentials: t.credentials,
                table: t.table,
                remove_consumed_capacity: t.remove_consumed_capacity.unwrap_or(alternator),
                alternator,
                alternator_settings: t.alternator.into(),
            },
            write_throughput,
            throughput_write_percent: t.throughput_write_percent,
            stream_changes: t.stream_changes,
            skip_initial_snapshot_transfer: skip_snapshot && t.stream_changes,
            billing_mode: t.billing_mode,
        };
        target.connection.validate(text, "target")?;
        percent(
            text,
            "target.throughputWritePercent",
            target.throughput_write_percent,
        )?;
        if t.max_map_tasks.is_some_and(|m| m <= 0) {
            return Err(JobConfigError::at(
                text,
                "target.maxMapTasks",
                "must be a positive integer",
            ));
        }
        JobConfigError::check_range(
            text,
            "target.maxMapTasks",
            t.max_map_tasks.and_then(|m| u64::try_from(m).ok()),
            1,
            u64::from(MAX_MAP_TASKS),
        )?;
        let mut unused = Vec::new();
        if t.max_map_tasks.is_some() {
            unused.push((
                "maxMapTasks",
                "a target has no map tasks (ScyllaDB Migrator ignores it too); source.maxMapTasks sets how many segments are copied at once",
            ));
        }
        if skip_snapshot && !t.stream_changes {
            unused.push((
                "skipInitialSnapshotTransfer",
                "it only applies with streamChanges: true; the snapshot is copied",
            ));
        }
        target.connection.warn_unused("target", &unused);
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
            if let Some(problem) = e.host_problem() {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.endpoint.host"),
                    problem,
                ));
            }
            if e.port == 0 {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.endpoint.port"),
                    "must be between 1 and 65535",
                ));
            }
            if self.alternator && !e.has_scheme() {
                return Err(JobConfigError::at(
                    text,
                    &format!("{side}.endpoint.host"),
                    format!(
                        "{:?} needs its protocol with type alternator: http://{} or https://{}",
                        e.host, e.host, e.host
                    ),
                ));
            }
        } else if self.alternator {
            return Err(JobConfigError::at(
                text,
                side,
                "endpoint is required with type alternator (the address of a ScyllaDB node, e.g. host: http://10.0.0.1, port: 8000)",
            ));
        }
        if self.alternator
            && self
                .credentials
                .as_ref()
                .is_some_and(|c| c.assume_role.is_some())
        {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.credentials.assumeRole"),
                "is not supported with type alternator (Alternator has no AWS roles)",
            ));
        }
        if let Some(role) = self
            .credentials
            .as_ref()
            .and_then(|c| c.assume_role.as_ref())
            && role.arn.trim().is_empty()
        {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.credentials.assumeRole.arn"),
                "must not be empty",
            ));
        }
        self.alternator_settings.validate(text, side)
    }

    /// Warns of the keys set that drover does not act on: Alternator's client settings and
    /// `extra` (key, why).
    fn warn_unused(&self, side: &str, extra: &[(&str, &str)]) {
        for key in self.alternator_settings.keys_set() {
            tracing::warn!(
                key = %format!("{side}.{key}"),
                "accepted for compatibility with ScyllaDB Migrator but not acted on: drover talks to the endpoint with the AWS SDK's own client"
            );
        }
        for (key, why) in extra {
            tracing::warn!(
                key = %format!("{side}.{key}"),
                "accepted for compatibility with ScyllaDB Migrator but not acted on: {why}"
            );
        }
    }
}

/// The most scan segments (`scanSegments`): DynamoDB's own limit of `TotalSegments`. The
/// plan holds one entry per segment.
pub const MAX_SCAN_SEGMENTS: u32 = 1_000_000;
/// The most segments read at once (`maxMapTasks`).
pub const MAX_MAP_TASKS: u32 = 1024;
/// The most capacity units per second a job plans for (`readThroughput`, `writeThroughput`):
/// a hundred times DynamoDB's default table quota, far above what one job can use.
pub const MAX_THROUGHPUT: u32 = 4_000_000;

/// `value` if it is in `1..=max`; otherwise an error naming the key and the range.
fn bounded(
    text: &str,
    key: &str,
    value: Option<u64>,
    max: u32,
) -> Result<Option<u32>, JobConfigError> {
    JobConfigError::check_range(text, key, value, 1, u64::from(max))?;
    Ok(value.and_then(|v| u32::try_from(v).ok()))
}

fn percent(text: &str, key: &str, value: Option<f32>) -> Result<(), JobConfigError> {
    if value.is_some_and(|v| !(0.1..=1.5).contains(&v)) {
        return Err(JobConfigError::at(text, key, "must be between 0.1 and 1.5"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

impl Connection {
    /// The table in words for job names and lists (`dynamodb:Orders`, `alternator:Orders`):
    /// no endpoint, no credentials.
    pub fn describe(&self) -> String {
        let system = if self.alternator {
            "alternator"
        } else {
            "dynamodb"
        };
        format!("{system}:{}", self.table)
    }
}
