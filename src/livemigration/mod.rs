//! Live instance migration (Apache Cassandra Sidecar's procedure): a source drover lists and
//! serves its node's files; a destination drover pulls them in repeated passes while the
//! source node runs, then a final exact pass once it is stopped.
//!
//! Nothing here knows HTTP: the API maps these types to routes.
//!
//! - this file: the node's live-migration settings, runtime switch and status;
//! - [`serve`]: the source's side (file list, file requests), with [`files`],
//!   [`exclusions`], [`range`] and [`digest`];
//! - [`peer`]: the destination's client of its source; [`local`]: where files land here;
//! - [`copy`] and [`verify`]: what data-copy and verification tasks do;
//! - [`tasks`]: those tasks as jobs — admission, records, resume after a restart;
//! - [`error`]: the one error type.

pub mod batch;
pub mod copy;
pub mod digest;
pub mod error;
pub mod exclusions;
pub mod files;
pub mod kinds;
pub mod local;
pub mod peer;
pub mod range;
pub mod roots;
pub mod serve;
pub mod tasks;
pub mod verify;

pub use error::LiveMigrationError;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::live_migration::split_host_port;
use crate::config::{DaemonConfig, LiveMigrationConfig, Role};
use exclusions::Exclusions;
use files::Roots;
use peer::PeerClient;

/// Whether the migration of this node is over (Sidecar's `/live-migration/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MigrationState {
    /// Files may still be copied.
    NotCompleted,
    /// The operator declared the migration complete: the source serves no more files.
    Completed,
}

/// The migration status of this node, as Sidecar answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `NOT_COMPLETED` or `COMPLETED`.
    pub state: MigrationState,
    /// When it was declared complete, in milliseconds since the epoch; null until then.
    /// (Read back from the state file also as the RFC 3339 text older drovers wrote.)
    #[serde(default, deserialize_with = "end_time_ms")]
    pub end_time: Option<i64>,
}

/// An `endTime`: milliseconds since the epoch, or the RFC 3339 text of a state file written
/// by a drover before it answered as Sidecar does (a daemon upgraded mid-migration).
fn end_time_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum EndTime {
        Ms(i64),
        Text(String),
    }
    match Option::<EndTime>::deserialize(d)? {
        None => Ok(None),
        Some(EndTime::Ms(ms)) => Ok(Some(ms)),
        Some(EndTime::Text(t)) => DateTime::parse_from_rfc3339(&t)
            .map(|t| Some(t.timestamp_millis()))
            .map_err(|e| serde::de::Error::custom(format!("endTime {t:?}: {e}"))),
    }
}

/// What is kept in `<state_dir>/live-migration.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Persisted {
    /// The runtime switch, when it was ever used (it then wins over the config).
    enabled: Option<bool>,
    /// When a switch on closes by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled_until: Option<DateTime<Utc>>,
    /// The status.
    status: Option<Status>,
}

/// Live migration on this node: its role, directories, switch and status.
pub struct LiveMigration {
    /// The `live_migration` section.
    pub config: LiveMigrationConfig,
    /// What this node is.
    pub role: Role,
    /// How messages name this node: its `migration_map` entry, else its listen address.
    name: String,
    /// The hosts (lower case) and ports of the `migration_map` entries that are not this
    /// node: a request whose `Host` names one of them was meant for another daemon.
    others: Vec<(String, Option<u16>)>,
    /// The node's directories.
    pub roots: Roots,
    /// What is never listed nor served.
    pub exclusions: Exclusions,
    /// File requests served at once.
    pub file_requests: Arc<tokio::sync::Semaphore>,
    /// Listings built at once.
    pub listings: Arc<tokio::sync::Semaphore>,
    /// The bearer token this destination sends to its source (`peer_token_file`).
    peer_token: Option<secrecy::SecretString>,
    /// How this destination reaches its source over TLS (`peer_tls`).
    peer_tls: Option<crate::tls::PeerTls>,
    /// Held while a task of either kind is checked for admission and submitted (or resumed):
    /// one data-copy or verification task runs at a time.
    task_admission: tokio::sync::Mutex<()>,
    enabled: AtomicBool,
    /// `enabled_until` in milliseconds since the epoch (`i64::MAX`: no expiry), read on
    /// every request without a lock.
    enabled_until_ms: AtomicI64,
    persisted: Mutex<Persisted>,
    state_file: PathBuf,
}

impl LiveMigration {
    /// Reads the persisted switch and status, and finds this node in `migration_map`;
    /// `listen` is the address this daemon is bound to.
    pub fn open(config: &DaemonConfig, listen: SocketAddr) -> Result<Self, LiveMigrationError> {
        let lm = config.live_migration.clone();
        let own_entry = lm.own_entry(listen).map_err(LiveMigrationError::Config)?;
        let role = lm.role_of(own_entry.as_deref(), listen.port());
        let others = lm
            .entries()
            .filter(|e| Some(*e) != own_entry.as_ref())
            .map(|e| {
                let (host, port) = split_host_port(e);
                (normal_host(host), port)
            })
            .collect();
        let name = own_entry.clone().unwrap_or_else(|| listen.to_string());
        let roots = Roots::from_config(&config.cassandra);
        let exclusions = Exclusions::new(&lm.files_to_exclude, &lm.dirs_to_exclude, &roots)
            .map_err(|e| LiveMigrationError::Config(e.to_string()))?;
        let state_file = config.state_dir.join("live-migration.json");
        let persisted: Persisted = match std::fs::read(&state_file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| LiveMigrationError::State {
                path: state_file.clone(),
                source: std::io::Error::other(e),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Persisted::default(),
            Err(source) => {
                return Err(LiveMigrationError::State {
                    path: state_file,
                    source,
                });
            }
        };
        let peer_token = match &lm.peer_token_file {
            Some(path) => Some(
                crate::auth::peer::read_file(path, "live_migration.peer_token_file")
                    .map_err(LiveMigrationError::Config)?,
            ),
            None => crate::auth::peer::from_env().map_err(LiveMigrationError::Config)?,
        };
        let peer_tls = lm
            .peer_tls
            .as_ref()
            .map(crate::tls::PeerTls::load)
            .transpose()
            .map_err(|e| LiveMigrationError::Config(e.to_string()))?;
        Ok(Self {
            peer_token,
            peer_tls,
            role,
            name,
            others,
            roots,
            exclusions,
            file_requests: Arc::new(tokio::sync::Semaphore::new(lm.max_concurrent_file_requests)),
            listings: Arc::new(tokio::sync::Semaphore::new(lm.max_concurrent_listings)),
            task_admission: tokio::sync::Mutex::new(()),
            // Unset everywhere: on, as Sidecar is for a node in its map.
            enabled: AtomicBool::new(persisted.enabled.or(lm.enabled).unwrap_or(true)),
            enabled_until_ms: AtomicI64::new(until_ms(persisted.enabled_until)),
            persisted: Mutex::new(persisted),
            state_file,
            config: lm,
        })
    }

    /// Whether a request's `Host` (`host[:port]`) names another daemon of `migration_map`
    /// than this node (its host is the host of an entry that is not this node's, and its
    /// port that entry's port if it has one): Sidecar would find no instance for it. Any
    /// other `Host` (an IP, `localhost`, a load balancer's name) is this node's. No DNS.
    pub fn names_another_node(&self, host: &str) -> bool {
        let (host, port) = split_host_port(host);
        let host = normal_host(host);
        self.others
            .iter()
            .any(|(h, p)| *h == host && (p.is_none() || *p == port))
    }

    /// How messages name this node.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the switch's value comes from: `admin` (the runtime switch was used), `config`
    /// (`live_migration.enabled`) or `default` (neither: on for a node in the map).
    pub fn switch_origin(&self) -> &'static str {
        if self.lock().enabled.is_some() {
            "admin"
        } else if self.config.enabled.is_some() {
            "config"
        } else {
            "default"
        }
    }

    /// A client of this destination's source daemon; `None` on a node that is no
    /// destination.
    pub fn peer(&self) -> Option<PeerClient> {
        match &self.role {
            Role::Destination { source } => Some(PeerClient::new(
                source,
                self.peer_token.clone(),
                self.peer_tls
                    .as_ref()
                    .map(crate::tls::PeerTls::client_config),
                peer::PeerLimits::from(&self.config),
            )),
            _ => None,
        }
    }

    /// Whether the routes answer: switched on, and the switch has not expired.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
            && Utc::now().timestamp_millis() < self.enabled_until_ms.load(Ordering::Relaxed)
    }

    /// When the routes close by themselves, if the switch that opened them said so (past
    /// once they have closed).
    pub fn enabled_until(&self) -> Option<DateTime<Utc>> {
        self.lock().enabled_until
    }

    /// Switches the routes on or off, without expiry, and remembers it across restarts.
    pub fn set_enabled(&self, on: bool) -> Result<(), LiveMigrationError> {
        self.switch(on, None)
    }

    /// Switches the routes on or off, and remembers it across restarts; switched on with
    /// `until`, they close by themselves then (checked on every request, so no timer is
    /// needed and a restart does not reopen them). `until` must lie in the future, at most
    /// [`MAX_SWITCH_EXPIRY`] ahead: an operator opening a node for a migration should not
    /// leave it open for months by a typo.
    pub fn switch(&self, on: bool, until: Option<DateTime<Utc>>) -> Result<(), LiveMigrationError> {
        if let Some(until) = until {
            if !on {
                return Err(LiveMigrationError::InvalidRequest(
                    "until/for: an expiry only goes with \"enabled\": true".into(),
                ));
            }
            let now = Utc::now();
            if until <= now {
                return Err(LiveMigrationError::InvalidRequest(format!(
                    "until/for: {} is not in the future",
                    until.to_rfc3339()
                )));
            }
            let max = chrono::Duration::from_std(MAX_SWITCH_EXPIRY).expect("a week fits");
            if until > now + max {
                return Err(LiveMigrationError::InvalidRequest(format!(
                    "until/for: {} is more than {} ahead; switch again later to extend",
                    until.to_rfc3339(),
                    humantime::format_duration(MAX_SWITCH_EXPIRY)
                )));
            }
        }
        self.update(|p| {
            p.enabled = Some(on);
            p.enabled_until = until;
        })?;
        // The expiry first: a switch on must never be seen without its expiry.
        self.enabled_until_ms
            .store(until_ms(until), Ordering::Relaxed);
        self.enabled.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// The migration status.
    pub fn status(&self) -> Status {
        self.lock().status.clone().unwrap_or(Status {
            state: MigrationState::NotCompleted,
            end_time: None,
        })
    }

    /// Declares the migration complete; refused when it already is.
    pub fn complete(&self) -> Result<Status, LiveMigrationError> {
        if self.status().state == MigrationState::Completed {
            return Err(LiveMigrationError::AlreadyCompleted);
        }
        let status = Status {
            state: MigrationState::Completed,
            end_time: Some(Utc::now().timestamp_millis()),
        };
        self.update(|p| p.status = Some(status.clone()))?;
        Ok(status)
    }

    /// This node's role as the admin view names it (`source`, `destination`, `none`), and
    /// its peer daemon.
    pub fn role_and_peer(&self) -> (&'static str, Option<&str>) {
        match &self.role {
            Role::Source { destination } => ("source", Some(destination)),
            Role::Destination { source } => ("destination", Some(source)),
            Role::None => ("none", None),
        }
    }

    /// Clears the status (back to `NOT_COMPLETED`), Sidecar's last step: only once this node
    /// has left `migration_map` (checked first), and only when the status is `COMPLETED`.
    pub fn clear(&self) -> Result<(), LiveMigrationError> {
        if self.role != Role::None {
            return Err(LiveMigrationError::StillInMap {
                name: self.name.clone(),
            });
        }
        if self.status().state != MigrationState::Completed {
            return Err(LiveMigrationError::NotCompleted {
                name: self.name.clone(),
            });
        }
        self.update(|p| p.status = None)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Persisted> {
        self.persisted.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut Persisted)) -> Result<(), LiveMigrationError> {
        let mut p = self.lock();
        let mut next = p.clone();
        f(&mut next);
        let bytes = serde_json::to_vec_pretty(&next).expect("state serializes");
        crate::fsutil::write_atomic(&self.state_file, &bytes).map_err(|source| {
            LiveMigrationError::State {
                path: self.state_file.clone(),
                source,
            }
        })?;
        *p = next;
        Ok(())
    }
}

/// Logs, once per request, the fields of a task request that drover does not know and
/// ignores (as the Sidecar ignores them): how many, and the first few names, quoted. A body
/// of many odd names makes one bounded line, and a name cannot break the log's lines.
pub fn log_ignored_fields<'a>(route: &str, names: impl Iterator<Item = &'a str>) {
    const SHOWN: usize = 5;
    let mut count = 0usize;
    let mut shown = Vec::new();
    for name in names {
        count += 1;
        if shown.len() < SHOWN {
            shown.push(format!("{:?}", name.chars().take(64).collect::<String>()));
        }
    }
    if count > 0 {
        tracing::warn!(
            route,
            count,
            fields = %shown.join(", "),
            "unknown request fields ignored"
        );
    }
}

/// The longest a runtime switch on may last (`until` or `for`).
pub const MAX_SWITCH_EXPIRY: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A host as compared with a `Host` header: lower case, no trailing dot.
fn normal_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn until_ms(until: Option<DateTime<Utc>>) -> i64 {
    until.map_or(i64::MAX, |u| u.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `endTime` is epoch milliseconds (Sidecar's `Long`), and a state file written with the
    /// RFC 3339 text of older drovers still reads, as the same instant.
    #[test]
    fn end_times_are_milliseconds_and_old_state_files_read() {
        let status = Status {
            state: MigrationState::Completed,
            end_time: Some(1_716_480_000_123),
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({"state": "COMPLETED", "endTime": 1_716_480_000_123i64})
        );
        let old: Persisted = serde_json::from_str(
            r#"{"enabled": true, "status": {"state": "COMPLETED", "endTime": "2024-05-23T16:00:00.123Z"}}"#,
        )
        .unwrap();
        assert_eq!(old.status, Some(status));
        let open = Status {
            state: MigrationState::NotCompleted,
            end_time: None,
        };
        assert_eq!(
            serde_json::to_value(&open).unwrap(),
            serde_json::json!({"state": "NOT_COMPLETED", "endTime": null})
        );
        let none: Status = serde_json::from_str(r#"{"state": "NOT_COMPLETED"}"#).unwrap();
        assert_eq!(none, open);
        assert!(
            serde_json::from_str::<Status>(r#"{"state": "COMPLETED", "endTime": "soon"}"#).is_err()
        );
    }
}
