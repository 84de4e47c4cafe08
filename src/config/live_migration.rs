//! `live_migration`: serving this node's files to a destination drover, or pulling them from a
//! source drover (Apache Cassandra Sidecar's live instance migration).

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use bytesize::ByteSize;
use serde::Deserialize;

/// Live instance migration. On when this node appears in `migration_map` (as in Cassandra
/// Sidecar), unless `enabled: false` or the runtime switch (`PUT /api/v1/admin/live-migration`,
/// remembered in the state directory) says otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiveMigrationConfig {
    /// Whether the live-migration routes answer: unset (the default), they do when this node
    /// is in `migration_map` (Cassandra Sidecar has no such key); `false` switches them off,
    /// `true` on (the node still needs a role in the map). A runtime change through the admin
    /// route is kept in the state directory and wins over this value.
    pub enabled: Option<bool>,
    /// Source node → destination node, as `host` or `host:port` of their drover daemons (a
    /// missing port is this daemon's own port). A node is a source when it is a key, a
    /// destination when it is a value. Without `advertise`, this node is the entry whose host
    /// is the host of `server.listen` or resolves (once, at start) to its address — to an
    /// address of this machine when `listen` is `0.0.0.0` or `::` — and whose port, if it has
    /// one, is this daemon's; more than one such entry is a config error.
    pub migration_map: BTreeMap<String, String>,
    /// How this node is named in `migration_map` (`host` or `host:port`; a missing port is
    /// this daemon's). Default: found from `server.listen` (see `migration_map`).
    pub advertise: Option<String>,
    /// Files never listed nor served: `glob:` or `regex:` patterns matched against absolute
    /// paths, with placeholders `${DATA_FILE_DIR}` (every data directory),
    /// `${DATA_FILE_DIR_<i>}` (data directory `i`, from 0), `${COMMITLOG_DIR}`, `${HINTS_DIR}`,
    /// `${SAVED_CACHES_DIR}`, `${CDC_RAW_DIR}` and `${LOCAL_SYSTEM_DATA_FILE_DIR}`.
    pub files_to_exclude: Vec<String>,
    /// Directories never listed nor served, with everything below them (same patterns).
    /// Snapshot and backup directories of tables are always excluded.
    pub dirs_to_exclude: Vec<String>,
    /// Most file requests (downloads and digests) served at once; more get 503 with
    /// `Retry-After`. On a destination, also the highest `maxConcurrency` a data-copy or
    /// verification task may ask for (more is 400), as in the Sidecar: configure the same value
    /// on both sides. Default 20.
    pub max_concurrent_file_requests: usize,
    /// On a destination: a file holding the bearer token it sends with every request to its
    /// source (whose `auth` must give that token the `peer` role). Read once at start; the
    /// token is never logged. A relative path is taken from the working directory. When it is
    /// not set, the token of the environment variable `DROVER_PEER_TOKEN` is sent, if set.
    /// Default: no token.
    pub peer_token_file: Option<std::path::PathBuf>,
    /// On a destination: how long connecting to the source may take before the attempt
    /// fails. Default 10s.
    #[serde(with = "humantime_serde")]
    pub peer_connect_timeout: Duration,
    /// On a destination: the longest wait for the next bytes from the source (answer
    /// headers, a listing, a file's body). A source that stops sending fails the download
    /// (retried within its bounds) instead of holding the task. A file's digest, which the
    /// source sends only once it has read the whole file, is given this plus a second per
    /// 4 MiB of the file. Default 30s.
    #[serde(with = "humantime_serde")]
    pub peer_read_timeout: Duration,
    /// On a destination: the largest file listing read from the source; a longer one fails
    /// the task. Default 256 MiB.
    pub max_listing_bytes: ByteSize,
    /// On a destination: the most entries (files and directories) a source's listing may
    /// hold; more fail the task. Default 1000000.
    pub max_listed_files: usize,
    /// On a destination: free space each file system must keep after an iteration's
    /// downloads; a plan that would leave less is refused before anything is downloaded.
    /// Default 1 GiB.
    pub min_free_disk: ByteSize,
    /// On a destination: the largest share (0 to 1) of its existing files one iteration may
    /// delete because the source no longer lists them, or lists them otherwise; a plan that
    /// deletes more — or every file — fails unless the task's request says
    /// `allowMassDeletion: true`. It guards against an empty or truncated listing wiping the
    /// node. Default 0.5.
    pub max_delete_share: f64,
    /// Most file listings (`GET /api/v1/live-migration/files` and `/files-digest`) built at
    /// once: each walks every directory and holds one entry per file, so a burst of them
    /// must not take the daemon's memory. Default 4, at most 256.
    pub max_concurrent_listings: usize,
    /// How long a listing beyond `max_concurrent_listings` waits for a turn before it is
    /// answered 503 with `Retry-After`. Default `10s`, at most `5m`.
    #[serde(with = "humantime_serde")]
    pub listing_wait: std::time::Duration,
    /// On a destination: talk HTTPS to the source, verifying its certificate against `ca` and
    /// the source's name in `migration_map` (a host name or IP address the certificate must
    /// carry), and present `cert` when the source asks for a client certificate. Default:
    /// plain HTTP.
    pub peer_tls: Option<PeerTlsConfig>,
}

/// `live_migration.peer_tls`: how a destination reaches its source over TLS. The files are
/// read again when they change, for the next connection.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerTlsConfig {
    /// PEM file with the CA certificates the source's certificate must chain to (the
    /// system's roots are not used). A relative path is taken from the working directory.
    pub ca: std::path::PathBuf,
    /// PEM file with this destination's client certificate and its intermediates, for a
    /// source with `server.tls.client_ca`. Needs `key`. Default: none.
    #[serde(default)]
    pub cert: Option<std::path::PathBuf>,
    /// PEM file with the private key of `cert`. Default: none.
    #[serde(default)]
    pub key: Option<std::path::PathBuf>,
}

impl Default for LiveMigrationConfig {
    fn default() -> Self {
        Self {
            enabled: None,
            migration_map: BTreeMap::new(),
            advertise: None,
            files_to_exclude: Vec::new(),
            dirs_to_exclude: Vec::new(),
            max_concurrent_file_requests: 20,
            peer_token_file: None,
            peer_tls: None,
            peer_connect_timeout: Duration::from_secs(10),
            peer_read_timeout: Duration::from_secs(30),
            max_listing_bytes: ByteSize::mib(256),
            max_listed_files: 1_000_000,
            min_free_disk: ByteSize::gib(1),
            max_delete_share: 0.5,
            max_concurrent_listings: 4,
            listing_wait: std::time::Duration::from_secs(10),
        }
    }
}

/// What this node is in a live migration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// It serves its files to `destination`.
    Source {
        /// The destination daemon, `host:port`.
        destination: String,
    },
    /// It pulls the files of `source`.
    Destination {
        /// The source daemon, `host:port`.
        source: String,
    },
    /// It is not in the map.
    None,
}

/// A `migration_map` entry (or `advertise`, or a `Host` header) split into its host and
/// port: `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address (no port). The host
/// loses its brackets, as Sidecar strips them from a `Host` header.
pub fn split_host_port(entry: &str) -> (&str, Option<u16>) {
    let entry = entry.trim();
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    if entry.matches(':').count() > 1 {
        return (entry, None);
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

/// `entry` as `host:port`, a missing port being `port`.
fn with_port(entry: &str, port: u16) -> String {
    match split_host_port(entry) {
        (_, Some(_)) => entry.trim().to_string(),
        (host, None) if host.contains(':') => format!("[{host}]:{port}"),
        (host, None) => format!("{host}:{port}"),
    }
}

/// Whether the map entry `entry` names the daemon listening on `listen`: its port, if it has
/// one, is the daemon's, and its host is the listen host, or resolves to the listen address
/// (to an address of this machine when the daemon listens on every address). Resolving is
/// blocking: done once, at start.
fn names_daemon(entry: &str, listen: SocketAddr) -> bool {
    let (host, port) = split_host_port(entry);
    if port.is_some_and(|p| p != listen.port()) {
        return false;
    }
    let ip = listen.ip();
    if host.eq_ignore_ascii_case(&ip.to_string()) {
        return true;
    }
    let Ok(addrs) = (host, 0u16).to_socket_addrs() else {
        return false;
    };
    let mut addrs = addrs;
    addrs.any(|a| {
        if ip.is_unspecified() {
            // Only an address of this machine can be bound.
            std::net::UdpSocket::bind((a.ip(), 0)).is_ok()
        } else {
            a.ip() == ip
        }
    })
}

impl LiveMigrationConfig {
    /// Every host named in `migration_map`, keys and values.
    pub fn entries(&self) -> impl Iterator<Item = &String> {
        self.migration_map.iter().flat_map(|(s, d)| [s, d])
    }

    /// The `migration_map` entry that names the daemon listening on `listen`: the one equal
    /// to `advertise` when it is set (ports compared, a missing one being the daemon's);
    /// otherwise the one whose host is, or resolves to, the listen address (see
    /// [`LiveMigrationConfig::migration_map`]). More than one is an error: the daemon cannot
    /// tell which node it is. The role is never taken from a request.
    pub fn own_entry(&self, listen: SocketAddr) -> Result<Option<String>, String> {
        let port = listen.port();
        if let Some(advertise) = &self.advertise {
            let me = with_port(advertise, port);
            return Ok(self.entries().find(|e| with_port(e, port) == me).cloned());
        }
        let mut found: Vec<&String> = self.entries().filter(|e| names_daemon(e, listen)).collect();
        found.sort();
        found.dedup();
        match found.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some((*one).clone())),
            many => Err(format!(
                "migration_map: {} all name this daemon (listening on {listen}); set live_migration.advertise to the one it is",
                many.iter()
                    .map(|e| format!("{e:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The role of the node named `entry` in `migration_map` (none without one), peers
    /// given as `host:port`, a missing port being `port` (this daemon's own, as Sidecar
    /// reaches its peers on its own port).
    pub fn role_of(&self, entry: Option<&str>, port: u16) -> Role {
        let Some(entry) = entry else {
            return Role::None;
        };
        if let Some(destination) = self.migration_map.get(entry) {
            return Role::Source {
                destination: with_port(destination, port),
            };
        }
        self.migration_map
            .iter()
            .find(|(_, d)| *d == entry)
            .map_or(Role::None, |(source, _)| Role::Destination {
                source: with_port(source, port),
            })
    }

    /// Checks values that serde cannot check alone.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        if self.max_concurrent_file_requests == 0 {
            return Err((
                "live_migration.max_concurrent_file_requests".into(),
                "must be at least 1".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.max_delete_share) {
            return Err((
                "live_migration.max_delete_share".into(),
                format!("must be between 0 and 1, not {}", self.max_delete_share),
            ));
        }
        for (key, value) in [
            (
                "live_migration.peer_connect_timeout",
                self.peer_connect_timeout,
            ),
            ("live_migration.peer_read_timeout", self.peer_read_timeout),
        ] {
            if value.is_zero() {
                return Err((key.into(), "must be more than 0".into()));
            }
        }
        if self.max_listed_files == 0 {
            return Err((
                "live_migration.max_listed_files".into(),
                "must be at least 1".into(),
            ));
        }
        if self.max_listing_bytes.as_u64() == 0 {
            return Err((
                "live_migration.max_listing_bytes".into(),
                "must be at least 1 byte".into(),
            ));
        }
        if !(1..=256).contains(&self.max_concurrent_listings) {
            return Err((
                "live_migration.max_concurrent_listings".into(),
                format!(
                    "must be between 1 and 256, not {}",
                    self.max_concurrent_listings
                ),
            ));
        }
        if self.listing_wait > std::time::Duration::from_secs(300) {
            return Err((
                "live_migration.listing_wait".into(),
                "must be at most 5m".into(),
            ));
        }
        if let Some(tls) = &self.peer_tls
            && tls.cert.is_some() != tls.key.is_some()
        {
            return Err((
                "live_migration.peer_tls".into(),
                "cert and key go together: set both or neither".into(),
            ));
        }
        for (source, destination) in &self.migration_map {
            if source.trim().is_empty() || destination.trim().is_empty() {
                return Err((
                    "live_migration.migration_map".into(),
                    "hosts must not be empty".into(),
                ));
            }
            if source == destination {
                return Err((
                    "live_migration.migration_map".into(),
                    format!("{source} is mapped to itself"),
                ));
            }
        }
        // The Sidecar's rules: a node has at most one role, so a host is a source or a
        // destination, never both, and a destination has one source.
        let mut destinations = std::collections::BTreeMap::new();
        for (source, destination) in &self.migration_map {
            if let Some(first) = destinations.insert(destination, source) {
                return Err((
                    "live_migration.migration_map".into(),
                    format!(
                        "a node cannot be the destination of multiple sources: {destination} is the destination of {first} and of {source}"
                    ),
                ));
            }
        }
        if let Some(both) = self
            .migration_map
            .keys()
            .find(|k| destinations.contains_key(k))
        {
            return Err((
                "live_migration.migration_map".into(),
                format!("a node cannot be both source and destination: {both}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> LiveMigrationConfig {
        LiveMigrationConfig {
            migration_map: pairs
                .iter()
                .map(|(s, d)| (s.to_string(), d.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn role(config: &LiveMigrationConfig, listen: &str) -> Result<Role, String> {
        let listen: SocketAddr = listen.parse().unwrap();
        let entry = config.own_entry(listen)?;
        Ok(config.role_of(entry.as_deref(), listen.port()))
    }

    #[test]
    fn roles_from_the_map() {
        let mut config = map(&[("127.0.0.1", "127.0.0.3:9100")]);
        assert_eq!(
            role(&config, "127.0.0.1:9043"),
            Ok(Role::Source {
                destination: "127.0.0.3:9100".into()
            })
        );
        assert_eq!(
            role(&config, "127.0.0.3:9100"),
            Ok(Role::Destination {
                source: "127.0.0.1:9100".into()
            })
        );
        assert_eq!(role(&config, "127.0.0.2:9043"), Ok(Role::None));
        // A port in the entry must be the daemon's.
        assert_eq!(role(&config, "127.0.0.3:9101"), Ok(Role::None));
        // advertise names the entry, whatever the listen address.
        config.advertise = Some("127.0.0.3:9100".into());
        assert!(matches!(
            role(&config, "127.0.0.1:9043"),
            Ok(Role::Destination { .. })
        ));
        config.advertise = Some("127.0.0.1".into());
        assert!(matches!(
            role(&config, "0.0.0.0:9043"),
            Ok(Role::Source { .. })
        ));
    }

    /// Sidecar finds its instance by host name: a name that resolves to this daemon's
    /// address (or, listening everywhere, to an address of this machine) is this node, with
    /// no `advertise`; two entries naming it are refused.
    #[test]
    fn names_that_resolve_here_are_this_node() {
        let config = map(&[("localhost", "dest-host.invalid")]);
        assert_eq!(
            role(&config, "127.0.0.1:9043"),
            Ok(Role::Source {
                destination: "dest-host.invalid:9043".into()
            })
        );
        assert_eq!(
            role(&config, "0.0.0.0:9043"),
            Ok(Role::Source {
                destination: "dest-host.invalid:9043".into()
            })
        );
        assert_eq!(role(&config, "127.0.0.2:9043"), Ok(Role::None));
        // Both loopback addresses are this machine's: listening everywhere, the daemon
        // cannot tell which it is.
        let both = map(&[("127.0.0.3", "127.0.0.4")]);
        let e = role(&both, "0.0.0.0:9043").unwrap_err();
        assert!(e.contains("set live_migration.advertise"), "{e}");
        assert!(
            e.contains("\"127.0.0.3\"") && e.contains("\"127.0.0.4\""),
            "{e}"
        );
        assert!(matches!(
            role(&both, "127.0.0.4:9043"),
            Ok(Role::Destination { .. })
        ));
    }

    #[test]
    fn hosts_and_ports_split_as_sidecar_strips_them() {
        assert_eq!(split_host_port("h:9043"), ("h", Some(9043)));
        assert_eq!(split_host_port("h"), ("h", None));
        assert_eq!(split_host_port("[::1]:9043"), ("::1", Some(9043)));
        assert_eq!(split_host_port("[::1]"), ("::1", None));
        assert_eq!(split_host_port("fe80::1"), ("fe80::1", None));
        assert_eq!(split_host_port("h:x"), ("h:x", None));
        assert_eq!(with_port("::1", 7), "[::1]:7");
        assert_eq!(with_port("h", 7), "h:7");
        assert_eq!(with_port("h:8", 7), "h:8");
    }

    #[test]
    fn a_node_has_one_role_in_the_map() {
        let map = |pairs: &[(&str, &str)]| LiveMigrationConfig {
            migration_map: pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..Default::default()
        };
        assert!(map(&[("a", "b"), ("c", "d")]).validate().is_ok());
        let (_, why) = map(&[("a", "b"), ("c", "b")]).validate().unwrap_err();
        assert!(why.contains("destination of multiple sources"), "{why}");
        let (_, why) = map(&[("a", "b"), ("b", "c")]).validate().unwrap_err();
        assert!(why.contains("both source and destination: b"), "{why}");
    }

    #[test]
    fn destination_bounds_are_checked() {
        assert!(LiveMigrationConfig::default().validate().is_ok());
        let key = |f: &dyn Fn(&mut LiveMigrationConfig)| {
            let mut c = LiveMigrationConfig::default();
            f(&mut c);
            c.validate().unwrap_err().0
        };
        assert_eq!(
            key(&|c| c.max_delete_share = 1.5),
            "live_migration.max_delete_share"
        );
        assert_eq!(
            key(&|c| c.peer_read_timeout = Duration::ZERO),
            "live_migration.peer_read_timeout"
        );
        assert_eq!(
            key(&|c| c.max_listed_files = 0),
            "live_migration.max_listed_files"
        );
        assert_eq!(
            key(&|c| c.max_listing_bytes = ByteSize::b(0)),
            "live_migration.max_listing_bytes"
        );
    }

    #[test]
    fn listing_bounds_are_checked() {
        let key = |c: LiveMigrationConfig| c.validate().err().map(|(k, _)| k);
        assert_eq!(key(LiveMigrationConfig::default()), None);
        for n in [0, 257] {
            let c = LiveMigrationConfig {
                max_concurrent_listings: n,
                ..Default::default()
            };
            assert_eq!(
                key(c).as_deref(),
                Some("live_migration.max_concurrent_listings")
            );
        }
        let c = LiveMigrationConfig {
            listing_wait: std::time::Duration::from_secs(301),
            ..Default::default()
        };
        assert_eq!(key(c).as_deref(), Some("live_migration.listing_wait"));
    }
}
