//! The CQL sections of a job file (`type: cassandra` or `type: scylla`), in ScyllaDB
//! Migrator's keys, and their checks.

use secrecy::SecretString as Secret;
use serde::Deserialize;

use crate::jobfile::{JobConfigError, section};

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
    /// drover: `allowSystemKeyspace`, read a system keyspace (`system.local`, ...). Off by
    /// default: copying a node's own tables elsewhere is almost always a mistake.
    pub allow_system_keyspace: bool,
    /// drover: how rows are read: CQL pages (the default), or the SSTables of a snapshot
    /// fetched from the drover beside each source node (`bulkRead: snapshot`).
    pub bulk_read: BulkRead,
    /// drover, with `bulkRead: snapshot`: the drover (`host:port`) beside each source node,
    /// by the node's address as the cluster reports it. A node not listed is reached at its
    /// own address and `bulkSidecarPort`.
    pub bulk_sidecars: std::collections::BTreeMap<String, String>,
    /// drover, with `bulkRead: snapshot`: the port of the drover beside each source node not
    /// in `bulkSidecars`. Default 9043.
    pub bulk_sidecar_port: u16,
    /// drover, with `bulkRead: snapshot`: how many replicas of each token range are read and
    /// merged (`bulkReadConsistency`).
    pub bulk_read_consistency: BulkReadConsistency,
}

/// How a CQL source is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkRead {
    /// CQL pages through a replica of each range.
    #[default]
    Cql,
    /// A snapshot's SSTables, fetched from the drover beside each node and merged.
    Snapshot,
}

/// How many replicas of each token range a snapshot read merges, as a CQL read at that level
/// would consult.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum BulkReadConsistency {
    /// One replica of each range, one that no node holds hints for (checked when the read
    /// is planned); a range whose replicas all may lack writes is read from all of them.
    #[default]
    One,
    /// A majority of each range's replicas, merged: every write acknowledged at `QUORUM`.
    Quorum,
    /// Every replica of each range, merged; every replica's node must be up.
    All,
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
    /// drover: how rows reach the target: CQL writes (the default), or SSTables uploaded to
    /// and imported by the drover beside each replica (`bulkWrite: sstable`).
    pub bulk_write: BulkWrite,
    /// drover, with `bulkWrite: sstable`: the drover (`host:port`) beside each target node,
    /// by the node's address as the cluster reports it. A node not listed is reached at its
    /// own address and `bulkSidecarPort`.
    pub bulk_sidecars: std::collections::BTreeMap<String, String>,
    /// drover, with `bulkWrite: sstable`: the port of the drover beside each target node not
    /// in `bulkSidecars`. Default 9043.
    pub bulk_sidecar_port: u16,
    /// drover, with `bulkWrite: sstable`: import without the node's extended verify (every
    /// row read back), keeping its other checks (checksums, index, tokens); Cassandra
    /// Analytics' `SKIP_EXTENDED_VERIFY`. Default false.
    pub bulk_skip_extended_verify: bool,
}

/// How a CQL target is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkWrite {
    /// CQL writes through the coordinator.
    #[default]
    Cql,
    /// SSTables, uploaded to and imported by the drover beside each replica.
    Sstable,
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

/// The most token-range units a table is split into: the plan holds one entry per unit, and a
/// million is far finer than any cluster needs.
pub const MAX_SPLIT_COUNT: u64 = 1_000_000;
/// The most rows asked for per page; each page is held in memory while written.
pub const MAX_FETCH_SIZE: u64 = 100_000;
/// The most units read at once.
pub const MAX_CONCURRENCY: u64 = 1024;
/// The most writes in flight at once.
pub const MAX_IN_FLIGHT: u64 = 100_000;
/// The most connections per node.
pub const MAX_CONNECTIONS: u64 = 64;
/// The most rows written per second (`target.rowsPerSecond`).
pub const MAX_ROWS_PER_SECOND: u64 = 10_000_000;
/// The most bytes written per second (`target.bytesPerSecond`): the rate limiter counts in
/// 32-bit cells, and 4 GiB/s is more than one job can write anyway.
pub const MAX_BYTES_PER_SECOND: u64 = u32::MAX as u64;

/// Whether `keyspace`, as written in a job file, names a system keyspace. Case is compared
/// after CQL's own resolution and then once more without it: `"System"` is not Cassandra's
/// `system`, but nothing good comes from copying into a keyspace named like it either.
pub fn is_system_keyspace(keyspace: &str) -> bool {
    let name = super::schema::resolve_name(keyspace).to_ascii_lowercase();
    crate::cassandra::SYSTEM_KEYSPACES.contains(&name.as_str())
}

/// `cloud.secureBundlePath` (a DataStax Astra secure connect bundle) is refused by name: the
/// bundle's cluster is reached through Astra's SNI proxy, which the CQL driver drover uses
/// cannot connect through.
fn refuse_cloud(text: &str, side: &str, value: &yaml_serde::Value) -> Result<(), JobConfigError> {
    match value.get("cloud") {
        None | Some(yaml_serde::Value::Null) => Ok(()),
        Some(_) => Err(JobConfigError::at(
            text,
            &format!("{side}.cloud"),
            "Astra secure connect bundles (cloud.secureBundlePath) are not supported by this version of drover: \
             the driver it uses cannot connect through Astra's SNI proxy. Give host, port, sslOptions and \
             credentials of nodes drover can reach instead",
        )),
    }
}

/// Checks `bulkSidecars` and `bulkSidecarPort` of a side.
fn check_sidecars(
    text: &str,
    side: &str,
    sidecars: &std::collections::BTreeMap<String, String>,
    port: u16,
) -> Result<(), JobConfigError> {
    if port == 0 {
        return Err(JobConfigError::at(
            text,
            &format!("{side}.bulkSidecarPort"),
            "must be a port between 1 and 65535",
        ));
    }
    for (node, sidecar) in sidecars {
        if sidecar
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(JobConfigError::at(
                text,
                &format!("{side}.bulkSidecars"),
                format!(
                    "{}: {:?} is not host:port of a drover",
                    crate::answer::cap(node),
                    crate::answer::cap(sidecar)
                ),
            ));
        }
    }
    Ok(())
}

impl CqlSource {
    /// Reads and checks a `source` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        refuse_cloud(text, "source", &value)?;
        let s: RawCqlSource = section(text, "source", value)?;
        let source = CqlSource {
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
            allow_system_keyspace: s.allow_system_keyspace,
            bulk_read: s.bulk_read,
            bulk_sidecars: s.bulk_sidecars,
            bulk_sidecar_port: s.bulk_sidecar_port,
            bulk_read_consistency: s.bulk_read_consistency.unwrap_or_default(),
        };
        source.endpoint.validate(text, "source")?;
        if source.bulk_read != BulkRead::Snapshot && s.bulk_read_consistency.is_some() {
            return Err(JobConfigError::at(
                text,
                "source.bulkReadConsistency",
                "applies to a snapshot read only (bulkRead: snapshot); a CQL read's replicas are chosen by consistencyLevel",
            ));
        }
        check_sidecars(
            text,
            "source",
            &source.bulk_sidecars,
            source.bulk_sidecar_port,
        )?;
        if source.bulk_read == BulkRead::Snapshot && source.where_clause.is_some() {
            return Err(JobConfigError::at(
                text,
                "source.where",
                "a condition cannot be applied to SSTables read from a snapshot (bulkRead: snapshot); read with CQL (remove bulkRead) to filter",
            ));
        }
        if !source.allow_system_keyspace && is_system_keyspace(&source.endpoint.keyspace) {
            return Err(JobConfigError::at(
                text,
                "source.keyspace",
                format!(
                    "{} is a system keyspace (a node's own state); reading it needs source.allowSystemKeyspace: true",
                    crate::answer::cap(&source.endpoint.keyspace)
                ),
            ));
        }
        let as_u64 = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        JobConfigError::check_range(
            text,
            "source.splitCount",
            source.split_count.map(as_u64),
            1,
            MAX_SPLIT_COUNT,
        )?;
        JobConfigError::check_range(
            text,
            "source.fetchSize",
            Some(as_u64(source.fetch_size)),
            1,
            MAX_FETCH_SIZE,
        )?;
        JobConfigError::check_range(
            text,
            "source.maxConcurrentUnits",
            source.max_concurrent_units.map(as_u64),
            1,
            MAX_CONCURRENCY,
        )?;
        Ok(source)
    }
}

impl CqlTarget {
    /// Reads and checks a `target` section.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        refuse_cloud(text, "target", &value)?;
        let t: RawCqlTarget = section(text, "target", value)?;
        let target = CqlTarget {
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
            rows_per_second: t.rows_per_second.and_then(|r| u32::try_from(r).ok()),
            bytes_per_second: t.bytes_per_second,
            bulk_write: t.bulk_write,
            bulk_sidecars: t.bulk_sidecars,
            bulk_sidecar_port: t.bulk_sidecar_port,
            bulk_skip_extended_verify: t.bulk_skip_extended_verify,
        };
        target.endpoint.validate(text, "target")?;
        check_sidecars(
            text,
            "target",
            &target.bulk_sidecars,
            target.bulk_sidecar_port,
        )?;
        if is_system_keyspace(&target.endpoint.keyspace) {
            return Err(JobConfigError::at(
                text,
                "target.keyspace",
                format!(
                    "{} is a system keyspace (a node's own state): drover never writes to one",
                    crate::answer::cap(&target.endpoint.keyspace)
                ),
            ));
        }
        JobConfigError::check_range(
            text,
            "target.maxInFlight",
            Some(u64::try_from(target.max_in_flight).unwrap_or(u64::MAX)),
            1,
            MAX_IN_FLIGHT,
        )?;
        // Unset means no limit, so 0 is refused rather than read as "none".
        JobConfigError::check_range(
            text,
            "target.rowsPerSecond",
            t.rows_per_second,
            1,
            MAX_ROWS_PER_SECOND,
        )?;
        JobConfigError::check_range(
            text,
            "target.bytesPerSecond",
            target.bytes_per_second,
            1,
            MAX_BYTES_PER_SECOND,
        )?;
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
        Ok(target)
    }
}

impl CqlEndpoint {
    fn validate(&self, text: &str, side: &str) -> Result<(), JobConfigError> {
        let e = self;
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
        JobConfigError::check_range(
            text,
            &format!("{side}.connections"),
            e.connections.map(|c| u64::try_from(c).unwrap_or(u64::MAX)),
            1,
            MAX_CONNECTIONS,
        )?;
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
        Ok(())
    }
}

// ---- raw shapes, as written in the file ----

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
    #[serde(default)]
    allow_system_keyspace: bool,
    #[serde(default)]
    bulk_read: BulkRead,
    #[serde(default)]
    bulk_sidecars: std::collections::BTreeMap<String, String>,
    #[serde(default = "default_sidecar_port")]
    bulk_sidecar_port: u16,
    #[serde(default)]
    bulk_read_consistency: Option<BulkReadConsistency>,
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
    // Read wider than stored, so that any integer is refused with the key's range.
    #[serde(default)]
    rows_per_second: Option<u64>,
    #[serde(default)]
    bytes_per_second: Option<u64>,
    #[serde(default)]
    bulk_write: BulkWrite,
    #[serde(default)]
    bulk_sidecars: std::collections::BTreeMap<String, String>,
    #[serde(default = "default_sidecar_port")]
    bulk_sidecar_port: u16,
    #[serde(default)]
    bulk_skip_extended_verify: bool,
}

fn default_sidecar_port() -> u16 {
    9043
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

impl CqlEndpoint {
    /// The table in words for job names and lists (`ks.table`): no host, no credentials.
    pub fn describe(&self) -> String {
        format!("{}.{}", self.keyspace, self.table)
    }
}

#[cfg(test)]
mod tests {
    use super::{CqlSource, CqlTarget};
    use crate::connectors::{SourceConfig, TargetConfig};

    /// A ScyllaDB Migrator job's CQL sections mean what Migrator reads in them.
    #[test]
    fn a_migrator_job_files_cql_sides_parse_to_their_keys() {
        let text = "\
source:
  type: cassandra
  host: 127.0.0.1
  port: 9042
  localDC: datacenter1
  keyspace: ks
  table: t
  preserveTimestamps: true
  splitCount: 256
  fetchSize: 1000
target:
  type: scylla
  host: 127.0.0.2
  port: 9042
  keyspace: ks
  table: t
  consistencyLevel: LOCAL_QUORUM
";
        let doc: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
        let source = SourceConfig::parse(text, doc["source"].clone()).unwrap();
        let target = TargetConfig::parse(text, doc["target"].clone()).unwrap();
        let s = source.get::<CqlSource>().expect("a CQL source");
        let t = target.get::<CqlTarget>().expect("a CQL target");
        assert_eq!(s.endpoint.host, "127.0.0.1");
        assert_eq!(s.endpoint.local_dc.as_deref(), Some("datacenter1"));
        assert!(s.preserve_timestamps);
        assert_eq!(s.split_count, Some(256));
        assert_eq!(s.fetch_size, 1000);
        assert_eq!(t.endpoint.port, 9042);
        assert_eq!(t.max_in_flight, 256);
        assert_eq!(source.describe(), "ks.t");
    }
}
