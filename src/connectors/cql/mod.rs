//! The Cassandra/ScyllaDB connector: sessions, schemas, raw rows and their codec, token-range
//! scans, the copy of one unit, and the comparison of rows for the validator.

mod connector;
pub mod bulk;
pub mod codec;
pub mod compare;
pub mod config;
pub mod coordination;
pub mod copy;
pub mod estimates;
pub mod multicell;
mod retry;
pub mod routing;
pub mod rows;
pub mod savepoints;
pub mod scan;
pub mod schema;
pub mod snapshot;
pub mod transfer;
pub mod units;

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use secrecy::ExposeSecret;

pub use connector::Cql;
pub use config::{CqlEndpoint, CqlSource, CqlTarget};

/// drover: the load a `target.bulkWrite: sstable` copy belongs to. Its SSTable uploads are
/// named after it, so a resumed run finds the imports of the run it continues, and a new load
/// (no savepoint resumed) is never taken for an earlier one.
pub static BULK_RUN: crate::savepoints::Key = crate::savepoints::Key {
    name: "bulkWriteRun",
    shape: crate::savepoints::Shape::Id,
    label: "bulk load",
    always: false,
};

/// Errors of the CQL connector.
#[derive(Debug, thiserror::Error)]
pub enum CqlError {
    /// A config value does not fit the cluster (missing keyspace, incompatible schema...).
    #[error("{key}: {message}")]
    Invalid {
        /// The job config key concerned.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The target table cannot take the source's rows: every problem, each with the CQL that
    /// fixes it.
    #[error("target.table: {0}")]
    Mismatch(Box<schema::Mismatch>),
    /// No session could be opened.
    #[error("{side}: cannot connect to {address}: {message}")]
    Connect {
        /// `source` or `target`.
        side: String,
        /// host:port.
        address: String,
        /// The driver's error.
        message: String,
    },
    /// TLS files could not be read.
    #[error("{key}: {message}")]
    Tls {
        /// The config key of the file.
        key: String,
        /// What failed.
        message: String,
    },
    /// Schema metadata could not be read.
    #[error("{side}: cannot read schema metadata: {message}")]
    Metadata {
        /// `source` or `target`.
        side: String,
        /// The driver's error.
        message: String,
    },
    /// A request failed (after retries, where retrying is safe).
    #[error("{side}: {message}")]
    Request {
        /// `source` or `target`.
        side: String,
        /// What failed.
        message: String,
    },
}

impl crate::connectors::seam::ConnectorError for CqlError {
    fn is_config_problem(&self) -> bool {
        matches!(
            self,
            Self::Invalid { .. } | Self::Tls { .. } | Self::Mismatch(_)
        )
    }

    fn is_schema_mismatch(&self) -> bool {
        matches!(self, Self::Mismatch(_))
    }
}

/// Opens a session to one side of a job. `side` is `source` or `target`, for messages.
pub async fn connect(side: &str, e: &CqlEndpoint) -> Result<Session, CqlError> {
    let address = if e.host.contains(':') && !e.host.starts_with('[') {
        format!("[{}]:{}", e.host, e.port)
    } else {
        format!("{}:{}", e.host, e.port)
    };
    let mut policy = DefaultPolicy::builder().token_aware(true);
    if let Some(dc) = &e.local_dc {
        policy = policy
            .prefer_datacenter(dc.clone())
            .permit_dc_failover(false);
    }
    let profile = ExecutionProfile::builder()
        .load_balancing_policy(policy.build())
        .consistency(e.consistency_level.into())
        .retry_policy(Arc::new(retry::ReportUnavailable))
        // Short enough that an unresponsive node shows up as retries (and a waiting phase)
        // within seconds; long enough for a page of wide rows.
        .request_timeout(Some(Duration::from_secs(10)))
        .build();
    let mut builder = SessionBuilder::new()
        .known_node(&address)
        .default_execution_profile_handle(profile.into_handle())
        .connection_timeout(Duration::from_secs(10));
    if let Some(n) = e.connections {
        builder = builder.pool_size(scylla::client::PoolSize::PerHost(
            std::num::NonZeroUsize::new(n).expect("validated non-zero"),
        ));
    }
    if let Some(c) = &e.credentials {
        builder = builder.user(&c.username, c.password.expose_secret());
    }
    if let Some(ssl) = e.ssl_options.as_ref().filter(|s| s.enabled) {
        builder = builder.tls_context(Some(tls_config(side, ssl)?));
    }
    builder.build().await.map_err(|err| CqlError::Connect {
        side: side.to_string(),
        address,
        message: err.to_string(),
    })
}

/// Checks that `local_dc` names a data center of the cluster: a typo would otherwise leave the
/// driver with no node to send requests to.
pub fn check_local_dc(
    session: &Session,
    side: &str,
    local_dc: Option<&str>,
) -> Result<(), CqlError> {
    let Some(dc) = local_dc else { return Ok(()) };
    let state = session.get_cluster_state();
    let mut known: Vec<String> = state
        .get_nodes_info()
        .iter()
        .filter_map(|n| n.datacenter.clone())
        .collect();
    known.sort();
    known.dedup();
    if known.iter().any(|k| k == dc) {
        return Ok(());
    }
    Err(CqlError::Invalid {
        key: format!("{side}.localDC"),
        message: format!(
            "no node of the {side} cluster is in data center {dc:?} (known: {})",
            known.join(", ")
        ),
    })
}

fn tls_config(side: &str, ssl: &config::SslOptions) -> Result<Arc<rustls::ClientConfig>, CqlError> {
    let err = |key: &str, message: String| CqlError::Tls {
        key: format!("{side}.sslOptions.{key}"),
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    let (ca_key, ca) = match (&ssl.ca_cert_path, &ssl.trust_store_path) {
        (Some(p), _) => ("caCertPath", p),
        (None, Some(p)) => ("trustStorePath", p),
        (None, None) => {
            return Err(err(
                "caCertPath",
                "TLS is enabled but no CA bundle is given (caCertPath or trustStorePath, PEM)"
                    .into(),
            ));
        }
    };
    let certs = CertificateDer::pem_file_iter(ca)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| err(ca_key, format!("cannot read PEM certificates from {ca}: {e} (Java key stores are not supported; export the CA as PEM)")))?;
    if certs.is_empty() {
        return Err(err(ca_key, format!("{ca} holds no PEM certificate")));
    }
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| err(ca_key, format!("{ca}: {e}")))?;
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match (&ssl.cert_path, &ssl.key_path) {
        (Some(cert), Some(key)) if ssl.client_auth_enabled => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| err("certPath", format!("cannot read {cert}: {e}")))?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| err("keyPath", format!("cannot read {key}: {e}")))?;
            builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                err(
                    "certPath",
                    format!("{cert} and {key} do not form a usable key pair: {e}"),
                )
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Both tables of a job, connected and checked: the target can hold every source column after
/// `renames` (`mapping`: source column name to target column name).
pub struct Pair {
    /// Session to the source cluster.
    pub source: Session,
    /// Session to the target cluster.
    pub target: Session,
    /// The source table.
    pub source_schema: schema::TableSchema,
    /// The target table.
    pub target_schema: schema::TableSchema,
    /// Target column name of each source column.
    pub mapping: std::collections::HashMap<String, String>,
}

/// Connects to both clusters of a CQL → CQL job and checks both tables. Nothing is written.
pub async fn open_pair(
    src: &CqlSource,
    dst: &CqlTarget,
    renames: &[crate::jobfile::Rename],
) -> Result<Pair, CqlError> {
    let (source, target) = tokio::try_join!(
        connect("source", &src.endpoint),
        connect("target", &dst.endpoint)
    )?;
    check_local_dc(&source, "source", src.endpoint.local_dc.as_deref())?;
    check_local_dc(&target, "target", dst.endpoint.local_dc.as_deref())?;
    // One after the other, so that a job wrong on both sides is reported on its source first.
    let source_schema = schema::load(
        &source,
        "source",
        &src.endpoint.keyspace,
        &src.endpoint.table,
    )
    .await?;
    let target_schema = schema::load(
        &target,
        "target",
        &dst.endpoint.keyspace,
        &dst.endpoint.table,
    )
    .await?;
    let mapping = match schema::check_compatible(&source_schema, &target_schema, renames) {
        Err(CqlError::Mismatch(mut mismatch)) if mismatch.needs_recreate() => {
            // The statement to recreate the table keeps the source's clustering order, which
            // the driver's metadata does not hold.
            let descending = schema::clustering_order(&source, "source", &source_schema).await;
            mismatch.create = Some(schema::create_table(
                &target_schema.qualified(),
                &source_schema,
                renames,
                descending.as_deref().ok(),
            ));
            return Err(CqlError::Mismatch(mismatch));
        }
        other => other?,
    };
    Ok(Pair {
        source,
        target,
        source_schema,
        target_schema,
        mapping,
    })
}
