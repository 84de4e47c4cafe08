//! TLS for the API listener (`server.tls`) and for a destination's client of its source
//! (`live_migration.peer_tls`): certificates and keys read from PEM files, read again when the
//! files change, and the names a verified client certificate carries.
//!
//! Material is always built with the aws-lc provider named here, never the process default,
//! so that it does not depend on what else in the process installed one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use crate::auth::ClientCertNames;
use crate::config::{ClientAuth, PeerTlsConfig, TlsConfig};

/// Why TLS material cannot be used. Each names the config key and the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read.
    #[error("{key}: cannot read {}: {source}", path.display())]
    Read {
        /// The config key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds no usable certificate or key, or they do not fit together.
    #[error("{key}: {}: {message}", path.display())]
    Invalid {
        /// The config key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The one crypto provider of every TLS config built here.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.to_path_buf(),
        source,
    })
}

fn invalid(key: &'static str, path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::Invalid {
        key,
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Every certificate of a PEM file, in order; at least one.
fn read_certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(key, path, format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(key, path, "holds no CERTIFICATE block"));
    }
    Ok(certs)
}

fn read_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(key, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        invalid(
            key,
            path,
            format!("holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })
}

fn read_roots(key: &'static str, path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(key, path)? {
        roots
            .add(cert)
            .map_err(|e| invalid(key, path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// What tells that a file changed: replaced (inode), rewritten (size, modification time) or
/// gone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(u64, u64, SystemTime)>);

fn stamps(paths: &[&Path]) -> Vec<Stamp> {
    use std::os::unix::fs::MetadataExt;
    paths
        .iter()
        .map(|p| {
            Stamp(std::fs::metadata(p).ok().map(|m| {
                (
                    m.ino(),
                    m.len(),
                    m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                )
            }))
        })
        .collect()
}

/// The listener's TLS: the current material, swapped when the files change.
pub struct ServerTls {
    config: TlsConfig,
    current: RwLock<Arc<rustls::ServerConfig>>,
    seen: Mutex<Vec<Stamp>>,
}

impl ServerTls {
    /// Reads the files of `server.tls`; an error names the key and the file.
    pub fn load(config: &TlsConfig) -> Result<Self, TlsError> {
        let seen = stamps(&Self::paths(config));
        Ok(Self {
            current: RwLock::new(Arc::new(server_config(config)?)),
            config: config.clone(),
            seen: Mutex::new(seen),
        })
    }

    fn paths(config: &TlsConfig) -> Vec<&Path> {
        let mut paths = vec![config.cert.as_path(), config.key.as_path()];
        paths.extend(config.client_ca.as_deref());
        paths
    }

    /// The acceptor for a new connection, with the newest material.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        tokio_rustls::TlsAcceptor::from(current.clone())
    }

    /// Whether client certificates are verified (`client_ca` is set), so that a certificate a
    /// client presented may identify it.
    pub fn verifies_clients(&self) -> bool {
        self.config.client_ca.is_some()
    }

    /// The time a handshake may take.
    pub fn handshake_timeout(&self) -> std::time::Duration {
        self.config.handshake_timeout
    }

    /// Reads the files again if one changed since the last look. `Ok(true)` when new material
    /// is in use; on an error the old material stays, and the same files are not tried again
    /// until one changes once more (one error per change, not one per poll).
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = stamps(&Self::paths(&self.config));
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == now {
                return Ok(false);
            }
            *seen = now;
        }
        let fresh = server_config(&self.config)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
        Ok(true)
    }

    /// Polls the files every `reload_interval` until `stop` fires.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.config.reload_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let this = self.clone();
            // Reading and parsing files is blocking work.
            match tokio::task::spawn_blocking(move || this.reload_if_changed()).await {
                Ok(Ok(true)) => tracing::info!(
                    cert = %self.config.cert.display(),
                    "server.tls: certificate files changed; new connections use the new ones"
                ),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::error!(
                    error = %e,
                    "server.tls: cannot reload the certificate files; the previous ones stay in use"
                ),
                Err(e) => tracing::error!(error = %e, "server.tls: the reload task failed"),
            }
        }
    }
}

fn server_config(config: &TlsConfig) -> Result<rustls::ServerConfig, TlsError> {
    let certs = read_certs("server.tls.cert", &config.cert)?;
    let key = read_key("server.tls.key", &config.key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the aws-lc provider supports the default protocol versions");
    let builder = match &config.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let key = "server.tls.client_ca";
            let roots = read_roots(key, ca)?;
            let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.into(),
                provider(),
            );
            if config.client_auth == ClientAuth::Optional {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| invalid(key, ca, format!("cannot verify clients with it: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder.with_single_cert(certs, key).map_err(|e| {
        invalid(
            "server.tls.key",
            &config.key,
            format!(
                "cannot be used with the certificate of {}: {e}",
                config.cert.display()
            ),
        )
    })?;
    // The listener speaks HTTP/1.1 only.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(server)
}

/// A destination's TLS towards its source: the newest material, read again when a file
/// changed.
pub struct PeerTls {
    config: PeerTlsConfig,
    current: Mutex<(Vec<Stamp>, Arc<rustls::ClientConfig>)>,
}

impl PeerTls {
    /// Reads the files of `live_migration.peer_tls`.
    pub fn load(config: &PeerTlsConfig) -> Result<Self, TlsError> {
        let seen = stamps(&Self::paths(config));
        Ok(Self {
            current: Mutex::new((seen, Arc::new(client_config(config)?))),
            config: config.clone(),
        })
    }

    fn paths(config: &PeerTlsConfig) -> Vec<&Path> {
        let mut paths = vec![config.ca.as_path()];
        paths.extend(config.cert.as_deref());
        paths.extend(config.key.as_deref());
        paths
    }

    /// The client config for new connections: the files are read again when one changed; when
    /// that fails the error is logged and the previous material is kept.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let now = stamps(&Self::paths(&self.config));
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.0 != now {
            current.0 = now;
            match client_config(&self.config) {
                Ok(fresh) => {
                    tracing::info!(
                        "live_migration.peer_tls: files changed; new connections use them"
                    );
                    current.1 = Arc::new(fresh);
                }
                Err(e) => tracing::error!(
                    error = %e,
                    "live_migration.peer_tls: cannot reload; the previous files stay in use"
                ),
            }
        }
        current.1.clone()
    }
}

fn client_config(config: &PeerTlsConfig) -> Result<rustls::ClientConfig, TlsError> {
    let roots = read_roots("live_migration.peer_tls.ca", &config.ca)?;
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the aws-lc provider supports the default protocol versions")
        .with_root_certificates(roots);
    match (&config.cert, &config.key) {
        (Some(cert), Some(key_path)) => {
            let certs = read_certs("live_migration.peer_tls.cert", cert)?;
            let key = read_key("live_migration.peer_tls.key", key_path)?;
            builder.with_client_auth_cert(certs, key).map_err(|e| {
                invalid(
                    "live_migration.peer_tls.key",
                    key_path,
                    format!(
                        "cannot be used with the certificate of {}: {e}",
                        cert.display()
                    ),
                )
            })
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// A client config for a client that never does TLS, so that building it does not depend on
/// a process-wide default provider.
pub fn plain_client_config() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the aws-lc provider supports the default protocol versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// A client config trusting the system's certificate authorities (the platform store), for
/// public cloud services such as Google Cloud Storage. Certificates the store cannot parse are
/// skipped, as every TLS client does.
pub fn public_roots_client_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::debug!("system trust store: {e}");
    }
    let (_, skipped) = roots.add_parsable_certificates(found.certs);
    if skipped > 0 {
        tracing::debug!("system trust store: {skipped} certificates not usable");
    }
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the aws-lc provider supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The names of a client certificate (DER): URI SANs, then DNS SANs, then the subject's CNs.
/// A certificate that cannot be parsed has none (it then identifies nobody).
pub fn client_cert_names(der: &[u8]) -> ClientCertNames {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return ClientCertNames::default();
    };
    let mut uris = Vec::new();
    let mut dns = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::URI(uri) => uris.push(uri.to_string()),
                GeneralName::DNSName(name) => dns.push(name.to_string()),
                _ => {}
            }
        }
    }
    uris.extend(dns);
    uris.extend(
        cert.subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .map(str::to_string),
    );
    ClientCertNames(uris)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: Option<&str>, sans: Vec<rcgen::SanType>) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        // rcgen gives a certificate a CN of its own unless told otherwise.
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        params.subject_alt_names = sans;
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn names_come_uri_sans_first_then_dns_sans_then_the_cn() {
        use rcgen::SanType::{DnsName, IpAddress, URI};
        let der = cert(
            Some("node-1"),
            vec![
                DnsName("node-1.example.org".try_into().unwrap()),
                IpAddress("10.0.0.1".parse().unwrap()),
                URI("spiffe://example.org/ns/prod/sa/drover".try_into().unwrap()),
            ],
        );
        assert_eq!(
            client_cert_names(&der).0,
            [
                "spiffe://example.org/ns/prod/sa/drover",
                "node-1.example.org",
                "node-1"
            ]
        );
        assert_eq!(
            client_cert_names(&cert(Some("only-cn"), vec![])).0,
            ["only-cn"]
        );
        assert!(client_cert_names(&cert(None, vec![])).0.is_empty());
        assert!(client_cert_names(b"not a certificate").0.is_empty());
    }

    #[test]
    fn a_failed_reload_keeps_the_material_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let config = TlsConfig {
            cert: dir.path().join("c.pem"),
            key: dir.path().join("k.pem"),
            client_ca: None,
            client_auth: ClientAuth::Required,
            handshake_timeout: std::time::Duration::from_secs(1),
            reload_interval: std::time::Duration::from_secs(1),
        };
        std::fs::write(&config.cert, cert.pem()).unwrap();
        std::fs::write(&config.key, key.serialize_pem()).unwrap();
        let tls = ServerTls::load(&config).unwrap();
        let before = tls.current.read().unwrap().clone();
        assert!(!tls.reload_if_changed().unwrap(), "nothing changed");

        std::fs::write(&config.key, "garbage, and longer than before").unwrap();
        let err = tls.reload_if_changed().unwrap_err().to_string();
        assert!(err.starts_with("server.tls.key: "), "{err}");
        assert!(Arc::ptr_eq(&before, &tls.current.read().unwrap()));
        // One error per change: the same broken files are not tried again.
        assert!(!tls.reload_if_changed().unwrap());

        std::fs::write(&config.key, key.serialize_pem()).unwrap();
        assert!(tls.reload_if_changed().unwrap());
        assert!(!Arc::ptr_eq(&before, &tls.current.read().unwrap()));
    }
}
