//! `cassandra`: the Cassandra node drover runs beside.

use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Deserializer};

/// Default native transport address of the local node.
pub const DEFAULT_NATIVE_ADDRESS: &str = "127.0.0.1:9042";

/// The local Cassandra node: how to reach it over CQL, and where its files live (live instance
/// migration serves and fills these directories).
///
/// Directories may be listed here, or read from the node's own `cassandra.yaml` through
/// `cassandra_yaml`; a directory written here wins over the one read from that file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CassandraConfig {
    /// `host:port` of the node's native (CQL) transport. Default: `rpc_address` and
    /// `native_transport_port` of `cassandra_yaml` when given, else `127.0.0.1:9042`.
    #[serde(deserialize_with = "host_port")]
    pub native_address: Option<String>,
    /// `host:port` of the node's JMX port. When set, a live-migration destination also
    /// refuses a data-copy task (and does not resume one) while something accepts a TCP
    /// connection there, as the Sidecar refuses while Cassandra answers on JMX or its native
    /// port. Cassandra's default is `127.0.0.1:7199`; set it to have the Sidecar's check.
    /// It is also where `sstable_uploads`' `nodetool import` connects (nodetool's own default,
    /// `127.0.0.1:7199`, when unset). Default: unset (only the native port is checked).
    #[serde(deserialize_with = "host_port")]
    pub jmx_address: Option<String>,
    /// User name for CQL authentication (PasswordAuthenticator). Unset: no authentication.
    pub username: Option<String>,
    /// Password for `username`. Never logged or returned by the API.
    pub password: Option<SecretString>,
    /// How long the native health check waits for the node to answer. Default `5s`.
    #[serde(with = "humantime_serde")]
    pub health_check_timeout: Option<Duration>,
    /// The clock skew a Sidecar client may have from this host: `allowableSkewInMinutes` of
    /// `GET /api/v1/time-skew` (whole minutes; Cassandra Analytics' bulk writer refuses to
    /// write when its clock is further off). Default `1h`, the Sidecar's default.
    #[serde(with = "humantime_serde")]
    pub allowable_time_skew: Option<Duration>,
    /// Path of the node's `cassandra.yaml`, to read its directories (and native address) from.
    pub cassandra_yaml: Option<PathBuf>,
    /// The node's `data_file_directories`, in the node's order (the index is part of file URLs).
    pub data_file_directories: Vec<PathBuf>,
    /// The node's `commitlog_directory`.
    pub commitlog_directory: Option<PathBuf>,
    /// The node's `hints_directory`.
    pub hints_directory: Option<PathBuf>,
    /// The node's `saved_caches_directory`.
    pub saved_caches_directory: Option<PathBuf>,
    /// The node's `cdc_raw_directory`.
    pub cdc_raw_directory: Option<PathBuf>,
    /// The node's `local_system_data_file_directory` (system keyspaces kept apart from data).
    pub local_system_data_file_directory: Option<PathBuf>,
}

impl CassandraConfig {
    /// The native transport address to connect to.
    pub fn native_address(&self) -> &str {
        self.native_address
            .as_deref()
            .unwrap_or(DEFAULT_NATIVE_ADDRESS)
    }

    /// Time the health check waits for an answer.
    pub fn health_check_timeout(&self) -> Duration {
        self.health_check_timeout.unwrap_or(Duration::from_secs(5))
    }

    /// The clock skew a Sidecar client may have (`allowable_time_skew`).
    pub fn allowable_time_skew(&self) -> Duration {
        self.allowable_time_skew
            .unwrap_or(Duration::from_secs(3600))
    }

    /// Fills unset directories (and the native address) from `cassandra_yaml`. Returns the key
    /// path and message of the first problem.
    pub(crate) fn resolve_from_cassandra_yaml(
        &mut self,
        base: &Path,
    ) -> Result<(), (String, String)> {
        let Some(path) = self.cassandra_yaml.clone() else {
            return Ok(());
        };
        let path = if path.is_relative() {
            base.join(path)
        } else {
            path
        };
        let key = "cassandra.cassandra_yaml".to_string();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| (key.clone(), format!("cannot read {}: {e}", path.display())))?;
        let node: NodeYaml = super::yaml::from_str(&text).map_err(|e| {
            let (message, line) = super::yaml::describe_error(&e);
            let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
            (key.clone(), format!("{}: {message}{at}", path.display()))
        })?;
        if self.data_file_directories.is_empty() {
            self.data_file_directories = node.data_file_directories.unwrap_or_default();
        }
        let fill = |slot: &mut Option<PathBuf>, value: Option<PathBuf>| {
            if slot.is_none() {
                *slot = value;
            }
        };
        fill(&mut self.commitlog_directory, node.commitlog_directory);
        fill(&mut self.hints_directory, node.hints_directory);
        fill(
            &mut self.saved_caches_directory,
            node.saved_caches_directory,
        );
        fill(&mut self.cdc_raw_directory, node.cdc_raw_directory);
        fill(
            &mut self.local_system_data_file_directory,
            node.local_system_data_file_directory,
        );
        if self.native_address.is_none() {
            let host = node
                .rpc_address
                .or(node.listen_address)
                .unwrap_or_else(|| "127.0.0.1".to_string());
            let port = node.native_transport_port.unwrap_or(9042);
            self.native_address = Some(format_host_port(&host, port));
        }
        Ok(())
    }

    /// Checks values that serde cannot check alone.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        if self.password.is_some() && self.username.is_none() {
            return Err((
                "cassandra.password".into(),
                "a password needs cassandra.username as well".into(),
            ));
        }
        for (i, dir) in self.data_file_directories.iter().enumerate() {
            if self.data_file_directories[..i].contains(dir) {
                return Err((
                    format!("cassandra.data_file_directories[{i}]"),
                    format!("{} is listed twice", dir.display()),
                ));
            }
        }
        Ok(())
    }
}

/// The keys drover reads from a node's `cassandra.yaml`; every other key there is ignored.
#[derive(Deserialize)]
struct NodeYaml {
    data_file_directories: Option<Vec<PathBuf>>,
    commitlog_directory: Option<PathBuf>,
    hints_directory: Option<PathBuf>,
    saved_caches_directory: Option<PathBuf>,
    cdc_raw_directory: Option<PathBuf>,
    local_system_data_file_directory: Option<PathBuf>,
    rpc_address: Option<String>,
    listen_address: Option<String>,
    native_transport_port: Option<u16>,
}

fn format_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Checks `host:port` (host may be a name, an IPv4 address or a bracketed IPv6 address).
pub(crate) fn check_host_port(value: &str) -> Result<(), String> {
    let bad = || format!("invalid address {value:?}, expected HOST:PORT such as 127.0.0.1:9042");
    let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(bad());
    }
    Ok(())
}

fn host_port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    super::yaml::parse_str(d, |v| check_host_port(v).map(|()| Some(v.to_string())))
}
