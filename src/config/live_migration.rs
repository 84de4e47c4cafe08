//! `live_migration`: serving this node's files to a destination drover, or pulling them from a
//! source drover (Apache Cassandra Sidecar's live instance migration).

use std::collections::BTreeMap;
use std::time::Duration;

use bytesize::ByteSize;
use serde::Deserialize;

/// Live instance migration. Off unless `enabled` (or switched on at runtime through
/// `PUT /api/v1/admin/live-migration`, which is remembered in the state directory) and this
/// node appears in `migration_map`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiveMigrationConfig {
    /// Whether the live-migration routes answer at start. A runtime change through the admin
    /// route is kept in the state directory and wins over this value. Default false.
    pub enabled: bool,
    /// Source node → destination node, as `host` or `host:port` of their drover daemons (a
    /// missing port is this daemon's own port). A node is a source when it is a key, a
    /// destination when it is a value.
    pub migration_map: BTreeMap<String, String>,
    /// How this node is named in `migration_map`. Default: `server.listen`.
    pub advertise: Option<String>,
    /// Files never listed nor served: `glob:` or `regex:` patterns matched against absolute
    /// paths, with placeholders `${DATA_FILE_DIR}`, `${COMMITLOG_DIR}`, `${HINTS_DIR}`,
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
    /// (retried within its bounds) instead of holding the task. Default 30s.
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
            enabled: false,
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

impl LiveMigrationConfig {
    /// This node's role, `me` being its `host:port` (`advertise`, or the listen address).
    pub fn role(&self, me: &str) -> Role {
        let port = me.rsplit_once(':').map_or("", |(_, p)| p);
        let full = |entry: &str| {
            if entry
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            {
                entry.to_string()
            } else {
                format!("{entry}:{port}")
            }
        };
        for (source, destination) in &self.migration_map {
            if full(source) == me {
                return Role::Source {
                    destination: full(destination),
                };
            }
            if full(destination) == me {
                return Role::Destination {
                    source: full(source),
                };
            }
        }
        Role::None
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
        for (key, patterns) in [
            ("live_migration.files_to_exclude", &self.files_to_exclude),
            ("live_migration.dirs_to_exclude", &self.dirs_to_exclude),
        ] {
            for (i, p) in patterns.iter().enumerate() {
                crate::livemigration::exclusions::check_pattern(p)
                    .map_err(|e| (format!("{key}[{i}]"), e.to_string()))?;
            }
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_from_the_map() {
        let config = LiveMigrationConfig {
            migration_map: [("127.0.0.1".to_string(), "127.0.0.3:9100".to_string())]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        assert_eq!(
            config.role("127.0.0.1:9043"),
            Role::Source {
                destination: "127.0.0.3:9100".into()
            }
        );
        assert_eq!(
            config.role("127.0.0.3:9100"),
            Role::Destination {
                source: "127.0.0.1:9100".into()
            }
        );
        assert_eq!(config.role("127.0.0.2:9043"), Role::None);
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
