//! The local Cassandra node, as seen over CQL: is it answering, and what does it say of
//! itself, its ring and its schema ([`metadata`])?

pub mod metadata;
pub mod names;
pub mod nodetool;

use std::sync::Arc;
use std::time::Duration;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use secrecy::ExposeSecret;
use tokio::sync::Mutex;

use crate::config::CassandraConfig;

/// Keyspaces that hold a node's or a cluster's own state, in Apache Cassandra, ScyllaDB and
/// Amazon Keyspaces. Writing into one rewrites the node itself: a copy of `system.local` once
/// gave a target node the source's cluster name and host id, and the node would not restart.
pub const SYSTEM_KEYSPACES: &[&str] = &[
    "system",
    "system_schema",
    "system_auth",
    "system_distributed",
    "system_traces",
    "system_views",
    "system_virtual_schema",
    "system_cluster_metadata",
    "system_accord",
    "system_distributed_everywhere",
    "system_replicated_keys",
    "system_auth_v2",
    "system_schema_mcs",
    "system_multiregion_info",
];

/// Why the local node is not healthy.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// No session could be opened.
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// The native address.
        address: String,
        /// The driver's error.
        source: Box<scylla::errors::NewSessionError>,
    },
    /// The node did not answer the probe query.
    #[error("{address} did not answer the probe query: {source}")]
    Query {
        /// The native address.
        address: String,
        /// The driver's error.
        source: Box<scylla::errors::ExecutionError>,
    },
    /// Connecting and querying took longer than the health check timeout.
    #[error("{address} did not answer within {}", humantime::format_duration(*timeout))]
    Timeout {
        /// The native address.
        address: String,
        /// The configured timeout.
        timeout: Duration,
    },
}

/// The local node. Keeps one CQL session and reuses it between checks; a failed check drops
/// it so the next check reconnects (the node may have restarted elsewhere in the meantime).
///
/// The session connects to the local node only (a host filter): `system.local` and the
/// node's view of its peers must be the local node's, never another coordinator's; the
/// driver still learns the whole ring (every node's tokens, data center and rack) from it.
pub struct LocalNode {
    config: CassandraConfig,
    session: Mutex<Option<Arc<Session>>>,
}

impl LocalNode {
    /// A node reached with `config`; nothing is connected until the first check.
    pub fn new(config: CassandraConfig) -> Self {
        Self {
            config,
            session: Mutex::new(None),
        }
    }

    /// The node's native address.
    pub fn address(&self) -> &str {
        self.config.native_address()
    }

    /// Answers `Ok` when the node accepts a connection and answers a query on `system.local`,
    /// within the configured timeout.
    pub async fn check(&self) -> Result<(), NodeError> {
        let timeout = self.config.health_check_timeout();
        let result = tokio::time::timeout(timeout, self.probe()).await;
        let result = result.unwrap_or_else(|_| {
            Err(NodeError::Timeout {
                address: self.address().to_string(),
                timeout,
            })
        });
        if result.is_err() {
            self.forget().await;
        }
        result
    }

    /// Where the node answers, if it does: on its JMX port (`cassandra.jmx_address`, when set:
    /// a TCP connection accepted within the health check timeout), else on its native port
    /// ([`check`](Self::check)). The Sidecar's "JMX or native connectivity" check, JMX
    /// first as there.
    pub async fn running(&self) -> Option<String> {
        if let Some(jmx) = &self.config.jmx_address {
            let timeout = self.config.health_check_timeout();
            let connect = tokio::net::TcpStream::connect(jmx.as_str());
            if let Ok(Ok(_)) = tokio::time::timeout(timeout, connect).await {
                return Some(format!("{jmx} (JMX)"));
            }
        }
        match self.check().await {
            Ok(()) => Some(self.address().to_string()),
            Err(_) => None,
        }
    }

    /// The configuration the node was made with.
    pub fn config(&self) -> &CassandraConfig {
        &self.config
    }

    /// The session to the local node, connected when there is none (within the health check
    /// timeout).
    pub(crate) async fn session(&self) -> Result<Arc<Session>, NodeError> {
        let address = self.address().to_string();
        let timeout = self.config.health_check_timeout();
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(session.clone());
        }
        let mut builder = SessionBuilder::new()
            .known_node(&address)
            .connection_timeout(timeout)
            // Nothing here needs the driver's schema (metadata reads system_schema itself);
            // fetching it would make every reconnect slower.
            .fetch_schema_metadata(false)
            .fetch_full_schema_metadata(false);
        // Connections to the local node only: the contact point is always accepted, every
        // other node of the ring is known (its tokens, data center, rack) but never queried.
        if let Ok(filter) = scylla::policies::host_filter::AllowListHostFilter::new([&address]) {
            builder = builder.host_filter(Arc::new(filter));
        }
        if let (Some(user), Some(password)) = (&self.config.username, &self.config.password) {
            builder = builder.user(user, password.expose_secret());
        }
        let connect = tokio::time::timeout(timeout, builder.build());
        let session = match connect.await {
            Err(_) => {
                return Err(NodeError::Timeout { address, timeout });
            }
            Ok(built) => built.map_err(|e| NodeError::Connect {
                address: address.clone(),
                source: Box::new(e),
            })?,
        };
        let session = Arc::new(session);
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Drops the session after a failure, so the next request reconnects.
    pub(crate) async fn forget(&self) {
        *self.session.lock().await = None;
    }

    async fn probe(&self) -> Result<(), NodeError> {
        let address = self.address().to_string();
        let session = self.session().await?;
        session
            .query_unpaged("SELECT release_version FROM system.local", ())
            .await
            .map_err(|e| NodeError::Query {
                address,
                source: Box::new(e),
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_node_answering_on_jmx_only_is_running() {
        let jmx = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let jmx_address = jmx.local_addr().unwrap().to_string();
        let config = |jmx: Option<String>| CassandraConfig {
            // Nothing listens on port 1: the native check fails at once.
            native_address: Some("127.0.0.1:1".into()),
            jmx_address: jmx,
            health_check_timeout: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        let node = LocalNode::new(config(Some(jmx_address.clone())));
        assert_eq!(node.running().await, Some(format!("{jmx_address} (JMX)")));
        // Unset: only the native port counts.
        assert_eq!(LocalNode::new(config(None)).running().await, None);
        drop(jmx);
        assert_eq!(node.running().await, None);
    }
}
