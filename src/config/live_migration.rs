//! `live_migration`: serving this node's files to a destination drover, or pulling them from a
//! source drover (Apache Cassandra Sidecar's live instance migration).

use std::collections::BTreeMap;

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
    /// `Retry-After`. Default 20.
    pub max_concurrent_file_requests: usize,
    /// On a destination: a file holding the bearer token it sends with every request to its
    /// source (whose `auth` must give that token the `peer` role). Read once at start; the
    /// token is never logged. A relative path is taken from the working directory. Default:
    /// no token.
    pub peer_token_file: Option<std::path::PathBuf>,
    /// Most file listings (`GET /api/v1/live-migration/files` and `/files-digest`) built at
    /// once: each walks every directory and holds one entry per file, so a burst of them
    /// must not take the daemon's memory. Default 4, at most 256.
    pub max_concurrent_listings: usize,
    /// How long a listing beyond `max_concurrent_listings` waits for a turn before it is
    /// answered 503 with `Retry-After`. Default `10s`, at most `5m`.
    #[serde(with = "humantime_serde")]
    pub listing_wait: std::time::Duration,
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
