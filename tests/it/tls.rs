//! TLS and mTLS on the real daemon, with certificates made by the test (rcgen): HTTPS,
//! client certificates and the identities they carry, reloading changed files without
//! dropping a download, a destination pulling from a TLS source, and the refusal of an
//! unprotected non-loopback listener.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use serde_json::{Value, json};

use test_support::{Daemon, Home, drover_bin, poll};

use crate::live_migration::{
    content, copy_to_end, fill_source, free_port, node_dirs, same_tree, url_of, write,
};

const WAIT: Duration = Duration::from_secs(60);

/// A certificate authority of the test.
pub(crate) struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM.
pub(crate) struct Leaf {
    cert: String,
    key: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Self {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `cn` with `names` as SANs: `scheme://…` a URI, an IP address, or a
    /// DNS name. Usable by a server and a client.
    pub(crate) fn issue(&self, cn: &str, names: &[&str]) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = names
            .iter()
            .map(|n| {
                if n.contains("://") {
                    SanType::URI((*n).try_into().unwrap())
                } else if let Ok(ip) = n.parse() {
                    SanType::IpAddress(ip)
                } else {
                    SanType::DnsName((*n).try_into().unwrap())
                }
            })
            .collect();
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// Writes `leaf` as `<name>.crt` and `<name>.key` in `dir`.
pub(crate) fn write_leaf(dir: &Path, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert, &leaf.cert).unwrap();
    std::fs::write(&key, &leaf.key).unwrap();
    (cert, key)
}

pub(crate) fn write_ca(dir: &Path, name: &str, ca: &Ca) -> PathBuf {
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, ca.pem()).unwrap();
    path
}

/// An HTTPS client trusting only `roots`, presenting `identity` when asked. Each call is a new
/// client, so a request through it opens a new connection.
fn client(roots: &[&Ca], identity: Option<&Leaf>) -> reqwest::Client {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut store = rustls::RootCertStore::empty();
    for ca in roots {
        store.add(ca.issuer.der().clone()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store);
    let config = match identity {
        Some(leaf) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(leaf.cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .build()
        .unwrap()
}

/// The test config of `home` with `server_keys` added to its `server` section and `extra`
/// appended.
fn config_with_server(home: &Home, server_keys: &str, extra: &str) -> PathBuf {
    home.write_config_edited(
        extra,
        &[(
            "  diagnostics: true\n",
            &format!("  diagnostics: true\n{server_keys}"),
        )],
    )
}

fn tls_keys(cert: &Path, key: &Path, more: &str) -> String {
    format!(
        "  tls:\n    cert: {}\n    key: {}\n    reload_interval: 200ms\n{more}",
        cert.display(),
        key.display()
    )
}

async fn get(client: &reqwest::Client, url: &str) -> Result<(u16, Value), reqwest::Error> {
    let response = client.get(url).send().await?;
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    Ok((status, body))
}

/// The whole chain of causes of an error, which reqwest's `Display` leaves out.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn the_api_is_served_over_https_with_the_configured_certificate() {
    let home = Home::new();
    let ca = Ca::new("drover test CA");
    let (cert, key) = write_leaf(home.path(), "server", &ca.issue("drover", &["127.0.0.1"]));
    let config = config_with_server(&home, &tls_keys(&cert, &key, ""), "");
    let daemon = Daemon::start_with(&home, &config).await;
    let https = format!("https://{}/api/v1/__health", daemon.addr);

    let (status, body) = get(&client(&[&ca], None), &https).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(daemon.logs().contains(&format!("https://{}", daemon.addr)));

    // A client that trusts another CA does not get through, nor does plain HTTP.
    let err = get(&client(&[&Ca::new("other")], None), &https)
        .await
        .unwrap_err();
    assert!(
        causes(&err).to_lowercase().contains("certificate"),
        "{}",
        causes(&err)
    );
    assert!(
        daemon
            .client()
            .get(daemon.url("/api/v1/__health"))
            .send()
            .await
            .is_err(),
        "plain HTTP answered on a TLS listener"
    );
    // The listener is still fine after those failed handshakes.
    let (status, _) = get(&client(&[&ca], None), &https).await.unwrap();
    assert_eq!(status, 200);
}

/// With `client_ca` and `client_auth: required`, a client needs a certificate of that CA; the
/// certificate's first URI SAN (a SPIFFE id) is the identity that `auth.certificates` maps to
/// roles.
#[tokio::test]
async fn mtls_refuses_unknown_clients_and_a_uri_san_is_the_identity() {
    let home = Home::new();
    let ca = Ca::new("drover test CA");
    let (cert, key) = write_leaf(home.path(), "server", &ca.issue("drover", &["127.0.0.1"]));
    let client_ca = write_ca(home.path(), "clients", &ca);
    let config = config_with_server(
        &home,
        &tls_keys(
            &cert,
            &key,
            &format!("    client_ca: {}\n", client_ca.display()),
        ),
        "auth:\n  certificates:\n    - identity: spiffe://drover.test/ns/ops/sa/reader\n      roles: [reader]\n    - identity: ops.drover.test\n      roles: [operator]\n",
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let url = |path: &str| format!("https://{}{path}", daemon.addr);

    // No certificate, or one from another CA: the handshake fails.
    for (what, identity) in [
        ("no certificate", None),
        (
            "another CA's certificate",
            Some(Ca::new("other").issue("x", &["spiffe://drover.test/ns/ops/sa/reader"])),
        ),
    ] {
        let result = get(&client(&[&ca], identity.as_ref()), &url("/api/v1/__health")).await;
        assert!(result.is_err(), "{what}: {result:?}");
    }

    // The URI SAN comes before the DNS SAN and the CN: this caller is a reader, not the
    // operator its DNS name would make it.
    let reader = ca.issue(
        "ops.drover.test",
        &["ops.drover.test", "spiffe://drover.test/ns/ops/sa/reader"],
    );
    let reader = client(&[&ca], Some(&reader));
    let (status, body) = get(&reader, &url("/api/v1/jobs")).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let response = reader
        .post(url("/api/v1/diagnostics/jobs"))
        .json(&json!({"steps": 1}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("spiffe://drover.test/ns/ops/sa/reader does not hold the operator role"),
        "{body}"
    );

    // Without a URI SAN, the DNS SAN is the identity.
    let operator = client(&[&ca], Some(&ca.issue("someone", &["ops.drover.test"])));
    let (status, body) = get(&operator, &url("/api/v1/jobs")).await.unwrap();
    assert_eq!(status, 403, "{body}");

    // A verified certificate that no entry names identifies nobody.
    let stranger = client(
        &[&ca],
        Some(&ca.issue("stranger", &["spiffe://drover.test/x"])),
    );
    let (status, body) = get(&stranger, &url("/api/v1/jobs")).await.unwrap();
    assert_eq!(status, 401, "{body}");
}

/// With `client_auth: optional`, a client without a certificate gets in and may use a bearer
/// token; one with a certificate of another CA is still refused.
#[tokio::test]
async fn optional_client_certificates_leave_room_for_tokens() {
    use sha2::Digest;
    let home = Home::new();
    let ca = Ca::new("drover test CA");
    let (cert, key) = write_leaf(home.path(), "server", &ca.issue("drover", &["127.0.0.1"]));
    let client_ca = write_ca(home.path(), "clients", &ca);
    let token = "tls-test-token-8d1e";
    let hash: String = sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let config = config_with_server(
        &home,
        &tls_keys(
            &cert,
            &key,
            &format!(
                "    client_ca: {}\n    client_auth: optional\n",
                client_ca.display()
            ),
        ),
        &format!(
            "auth:\n  tokens:\n    - {{id: ci, sha256: {hash}, roles: [reader]}}\n  certificates:\n    - {{identity: spiffe://drover.test/reader, roles: [reader]}}\n"
        ),
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let jobs = format!("https://{}/api/v1/jobs", daemon.addr);

    let anonymous = client(&[&ca], None);
    let (status, body) = get(&anonymous, &jobs).await.unwrap();
    assert_eq!(status, 401, "{body}");
    let response = anonymous
        .get(&jobs)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let reader = client(
        &[&ca],
        Some(&ca.issue("r", &["spiffe://drover.test/reader"])),
    );
    let (status, body) = get(&reader, &jobs).await.unwrap();
    assert_eq!(status, 200, "{body}");

    let foreign = Ca::new("other").issue("r", &["spiffe://drover.test/reader"]);
    assert!(get(&client(&[&ca], Some(&foreign)), &jobs).await.is_err());
}

/// Replacing the certificate files takes effect for new connections without a restart, while
/// a download that started before goes on to its last byte; a broken replacement is refused
/// and the working certificate stays.
#[tokio::test]
async fn changed_certificate_files_are_reloaded_without_dropping_a_download() {
    let home = Home::new();
    let old_ca = Ca::new("old CA");
    let new_ca = Ca::new("new CA");
    let (cert, key) = write_leaf(
        home.path(),
        "server",
        &old_ca.issue("drover", &["127.0.0.1"]),
    );
    // Larger than what the socket buffers on both sides hold, so the download is still in
    // flight while the test waits for the reload.
    let big = content(7, 24 << 20);
    write(&home.path().join("data0/ks/t-1/nb-1-big-Data.db"), &big);
    let config = config_with_server(
        &home,
        &tls_keys(&cert, &key, ""),
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"source:1\"\n  migration_map:\n    \"source:1\": \"destination:1\"\n",
            node_dirs(home.path())
        ),
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let url = |path: &str| format!("https://{}{path}", daemon.addr);
    let health = url("/api/v1/__health");

    let mut download = client(&[&old_ca, &new_ca], None)
        .get(url(&url_of("data0/ks/t-1/nb-1-big-Data.db")))
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    let mut received = download.chunk().await.unwrap().unwrap().to_vec();

    // A half-written replacement (a key that is not one) is refused; the old files stay.
    std::fs::write(&key, "not a key").unwrap();
    test_support::wait_until("the failed reload to be logged", WAIT, || {
        daemon
            .logs()
            .contains("cannot reload the certificate files")
    })
    .await;
    let (status, _) = get(&client(&[&old_ca], None), &health).await.unwrap();
    assert_eq!(status, 200);

    write_leaf(
        home.path(),
        "server",
        &new_ca.issue("drover", &["127.0.0.1"]),
    );
    poll(WAIT, async || {
        get(&client(&[&new_ca], None), &health)
            .await
            .map_err(|e| causes(&e))
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the new certificate was never served: {e}\n{}",
            daemon.logs()
        )
    });
    assert!(
        get(&client(&[&old_ca], None), &health).await.is_err(),
        "a new connection still got the old certificate"
    );

    while let Some(chunk) = download.chunk().await.unwrap() {
        received.extend_from_slice(&chunk);
    }
    assert_eq!(received.len(), big.len());
    assert!(received == big, "the download's bytes differ");
}

/// A source with TLS and required client certificates; the destination verifies it against
/// its CA and the source's name in `migration_map`, and presents its own certificate.
struct TlsSource {
    home: Home,
    /// `localhost:<port>`, the name the destination knows it by.
    name: String,
    config: PathBuf,
}

impl TlsSource {
    fn new(ca: &Ca, server_names: &[&str]) -> Self {
        let home = Home::new();
        let port = free_port();
        let name = format!("localhost:{port}");
        let (cert, key) = write_leaf(home.path(), "server", &ca.issue("source", server_names));
        let client_ca = write_ca(home.path(), "clients", ca);
        let config = home.write_config_at(
            &format!("127.0.0.1:{port}"),
            &format!(
                "{}live_migration:\n  enabled: true\n  advertise: \"{name}\"\n  migration_map:\n    \"{name}\": \"destination:1\"\nauth:\n  certificates:\n    - {{identity: spiffe://drover.test/destination, roles: [peer]}}\n",
                node_dirs(home.path())
            ),
        );
        let mut text = std::fs::read_to_string(&config).unwrap();
        text = text.replace(
            "  diagnostics: true\n",
            &format!(
                "  diagnostics: true\n{}",
                tls_keys(
                    &cert,
                    &key,
                    &format!("    client_ca: {}\n", client_ca.display())
                )
            ),
        );
        std::fs::write(&config, text).unwrap();
        Self { home, name, config }
    }

    async fn start(&self) -> Daemon {
        Daemon::start_with(&self.home, &self.config).await
    }
}

/// A destination of `source` with `peer_tls` trusting `ca` and presenting `identity`.
async fn tls_destination(home: &Home, source: &str, ca: &Ca, identity: Option<&Leaf>) -> Daemon {
    let ca_file = write_ca(home.path(), "peer-ca", ca);
    let mut peer_tls = format!("  peer_tls:\n    ca: {}\n", ca_file.display());
    if let Some(leaf) = identity {
        let (cert, key) = write_leaf(home.path(), "peer", leaf);
        peer_tls.push_str(&format!(
            "    cert: {}\n    key: {}\n",
            cert.display(),
            key.display()
        ));
    }
    Daemon::start(
        home,
        &format!(
            "{}live_migration:\n  enabled: true\n  advertise: \"destination:1\"\n  migration_map:\n    \"{source}\": \"destination:1\"\n{peer_tls}",
            node_dirs(home.path())
        ),
    )
    .await
}

/// A data-copy task's body.
fn copy() -> Value {
    json!({"maxIterations": 2, "successThreshold": 1.0, "maxConcurrency": 2})
}

#[tokio::test]
async fn a_destination_pulls_from_a_source_with_tls_and_client_certificates() {
    let ca = Ca::new("drover test CA");
    let src = TlsSource::new(&ca, &["localhost"]);
    let files = fill_source(src.home.path());
    let source = src.start().await;
    let identity = ca.issue("dst", &["spiffe://drover.test/destination"]);

    let home = Home::new();
    let dst = tls_destination(&home, &src.name, &ca, Some(&identity)).await;
    let task = copy_to_end(&dst, copy()).await;
    assert_eq!(
        task["state"],
        "SUCCEEDED",
        "{task:#}\n{}\n{}",
        dst.logs(),
        source.logs()
    );
    same_tree(src.home.path(), home.path(), &files);

    // Without a client certificate the source's handshake refuses the destination, and the
    // task says it could not reach it rather than hanging.
    let home = Home::new();
    let dst = tls_destination(&home, &src.name, &ca, None).await;
    let task = copy_to_end(&dst, copy()).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert!(!home.path().join(&files[0].0).exists());
}

#[tokio::test]
async fn a_destination_refuses_a_source_whose_certificate_is_not_for_its_name() {
    let ca = Ca::new("drover test CA");
    // Signed by the CA the destination trusts, but for another host.
    let src = TlsSource::new(&ca, &["elsewhere.drover.test"]);
    let files = fill_source(src.home.path());
    let _source = src.start().await;
    let identity = ca.issue("dst", &["spiffe://drover.test/destination"]);

    let home = Home::new();
    let dst = tls_destination(&home, &src.name, &ca, Some(&identity)).await;
    let task = copy_to_end(&dst, copy()).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("certificate"), "{task:#}");
    assert!(!home.path().join(&files[0].0).exists());

    // And one signed by a CA it does not trust, even with the right name.
    let other = Ca::new("other CA");
    let src = TlsSource::new(&other, &["localhost"]);
    fill_source(src.home.path());
    let _source = src.start().await;
    let home = Home::new();
    let dst = tls_destination(&home, &src.name, &ca, Some(&identity)).await;
    let task = copy_to_end(&dst, copy()).await;
    assert_eq!(task["state"], "FAILED", "{task:#}");
    assert!(
        task["error"].as_str().unwrap().contains("certificate"),
        "{task:#}"
    );
}

/// Runs `drover serve` with `config` and returns its exit code and what it printed, for a
/// daemon that must not start.
fn serve_refused(config: &Path) -> (Option<i32>, String) {
    run_with_config("serve", config)
}

fn run_with_config(command: &str, config: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(drover_bin())
        .args([command, "--config"])
        .arg(config)
        .env_remove("DROVER_LISTEN")
        .env_remove("DROVER_STATE_DIR")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A non-loopback listener without TLS and authentication is refused before anything is
/// bound (the test only ever asks for `0.0.0.0:0`; the refusal comes first); with
/// `server.insecure` the daemon starts and warns.
#[tokio::test]
async fn an_unprotected_listener_off_loopback_is_refused() {
    let home = Home::new();
    let config = home.write_config_at("0.0.0.0:0", "");
    let (code, stderr) = serve_refused(&config);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("server.listen: 0.0.0.0:0 is not a loopback address")
            && stderr.contains("server.insecure"),
        "{stderr}"
    );
    assert!(
        !home.state_dir().join("listen-addr").exists(),
        "it listened"
    );

    // Authentication alone is not enough: TLS is missing.
    let config = home.write_config_at(
        "0.0.0.0:0",
        "auth:\n  tokens:\n    - {id: a, sha256: 0000000000000000000000000000000000000000000000000000000000000000, roles: [reader]}\n",
    );
    let (code, stderr) = serve_refused(&config);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("without server.tls anyone"), "{stderr}");

    // insecure: on loopback here, so that the test binds nothing else; it warns at each start.
    let config = config_with_server(&home, "  insecure: true\n", "");
    let daemon = Daemon::start_with(&home, &config).await;
    let (status, _) = daemon.get("/api/v1/__health").await;
    assert_eq!(status, 200);
    assert!(
        daemon.logs().contains("server.insecure is on"),
        "{}",
        daemon.logs()
    );
}

/// Bad TLS files stop the start with a message naming the key and the file.
#[tokio::test]
async fn unusable_tls_files_are_named_at_start() {
    let home = Home::new();
    let ca = Ca::new("drover test CA");
    let (cert, key) = write_leaf(home.path(), "server", &ca.issue("drover", &["127.0.0.1"]));
    let missing = home.path().join("missing.key");
    let config = config_with_server(&home, &tls_keys(&cert, &missing, ""), "");
    let (code, stderr) = refused_twice(&config);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "server.tls.key: cannot read {}",
            missing.display()
        )),
        "{stderr}"
    );

    // A key that is not the certificate's.
    let (_, other_key) = write_leaf(home.path(), "other", &ca.issue("x", &["127.0.0.1"]));
    let config = config_with_server(&home, &tls_keys(&cert, &other_key, ""), "");
    let (code, stderr) = refused_twice(&config);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("server.tls.key: {}", other_key.display())),
        "{stderr}"
    );

    std::fs::write(&key, "").unwrap();
    let config = config_with_server(&home, &tls_keys(&key, &cert, ""), "");
    let (code, stderr) = refused_twice(&config);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "server.tls.cert: {}: holds no CERTIFICATE block",
            key.display()
        )),
        "{stderr}"
    );
}

/// `serve` and `check-config` refuse a config whose TLS files cannot be used the same way:
/// exit 2, as for any invalid config (check-config said `config OK` and serve exited 1), with
/// the same message.
fn refused_twice(config: &Path) -> (Option<i32>, String) {
    let (code, stderr) = serve_refused(config);
    let (checked, said) = run_with_config("check-config", config);
    assert_eq!(checked, code, "check-config: {said}\nserve: {stderr}");
    let line = |s: &str| {
        s.lines().find(|l| l.starts_with("drover: ")).map(|l| {
            l.trim_start_matches("drover: ")
                .trim_start_matches("invalid configuration: ")
                .to_string()
        })
    };
    assert_eq!(
        line(&said),
        line(&stderr),
        "check-config: {said}\nserve: {stderr}"
    );
    (code, stderr)
}

/// A connection on which nothing moves for `server.idle_timeout` is closed, even mid-request
/// (here a body that never comes), long before `request_timeout` would answer it.
#[tokio::test]
async fn a_connection_that_goes_quiet_is_closed_after_the_idle_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let home = Home::new();
    let config = config_with_server(
        &home,
        "  idle_timeout: 1s\n  request_timeout: 10m\n  header_read_timeout: 10m\n",
        "",
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let mut tcp = tokio::net::TcpStream::connect(daemon.addr).await.unwrap();
    tcp.write_all(
        b"POST /api/v1/diagnostics/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(120), tcp.read(&mut buf))
        .await
        .expect("the quiet connection was not closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

/// A client that opens a connection to the TLS listener and never says hello is dropped after
/// `server.tls.handshake_timeout`; the listener goes on serving.
#[tokio::test]
async fn a_silent_client_is_dropped_at_the_handshake_timeout() {
    use tokio::io::AsyncReadExt;
    let home = Home::new();
    let ca = Ca::new("drover test CA");
    let (cert, key) = write_leaf(home.path(), "server", &ca.issue("drover", &["127.0.0.1"]));
    let config = config_with_server(
        &home,
        &format!(
            "  idle_timeout: 10m\n  header_read_timeout: 10m\n{}",
            tls_keys(&cert, &key, "    handshake_timeout: 1s\n")
        ),
        "",
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let mut silent = tokio::net::TcpStream::connect(daemon.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(120), silent.read(&mut buf))
        .await
        .expect("the silent connection was not closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let health = format!("https://{}/api/v1/__health", daemon.addr);
    let (status, _) = get(&client(&[&ca], None), &health).await.unwrap();
    assert_eq!(status, 200);
}

/// Issue 42, finding 3: `admin_identities: [boss]` named a token id, yet a JWT with `sub:
/// boss` and no roles and a CA-signed certificate with `CN=boss` both passed the admin check.
/// Now one name proven three ways is three callers: for each way `admin_identities` may name
/// `boss`, exactly the caller proven that way holds every role, the others hold only their own
/// (none here), and the 403 and the audit trail name each by its qualified identity. A name
/// alone stops the start, saying how to write it.
#[tokio::test]
async fn an_admin_identity_is_admin_only_when_proven_the_way_it_is_named() {
    use crate::security::{AUDIENCE, ISSUER, Signer, audit_lines, claims, sha};

    let home = Home::new();
    let ca = Ca::new("drover test CA");
    let (cert, key) = write_leaf(home.path(), "server", &ca.issue("drover", &["127.0.0.1"]));
    let client_ca = write_ca(home.path(), "clients", &ca);
    let idp = Signer::new(None);
    let idp_key = home.path().join("idp.pem");
    std::fs::write(&idp_key, &idp.public_pem).unwrap();
    let server = tls_keys(
        &cert,
        &key,
        &format!(
            "    client_ca: {}\n    client_auth: optional\n",
            client_ca.display()
        ),
    );
    let auth = |admin: &str| {
        format!(
            "logging:\n  format: json\nauth:\n  tokens:\n    - {{id: boss, sha256: {}, roles: []}}\n  certificates:\n    - {{identity: boss, roles: []}}\n  jwt:\n    public_key_file: {}\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n  admin_identities: ['{admin}']\n",
            sha("boss-token"),
            idp_key.display()
        )
    };
    // The certificate carries `boss` as its CN only (no SAN), as in the probe.
    let boss_cert = ca.issue("boss", &[]);
    let jwt = idp.sign(&claims("boss", &[]));
    let callers: [(String, &str); 3] = [
        ("token:boss".into(), "token"),
        (format!("jwt:{ISSUER}#boss"), "jwt"),
        ("cert:boss".into(), "cert"),
    ];

    for (admin, _) in &callers {
        let config = config_with_server(&home, &server, &auth(admin));
        let daemon = Daemon::start_with(&home, &config).await;
        let url = format!("https://{}/api/v1/admin/live-migration", daemon.addr);
        for (name, how) in &callers {
            let request = match *how {
                "token" => client(&[&ca], None).put(&url).bearer_auth("boss-token"),
                "jwt" => client(&[&ca], None).put(&url).bearer_auth(&jwt),
                _ => client(&[&ca], Some(&boss_cert)).put(&url),
            };
            let response = request
                .json(&json!({"enabled": false}))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if name == admin {
                assert_eq!(status, 200, "{admin} is admin, asked as {name}: {body}");
            } else {
                assert_eq!(status, 403, "{admin} is admin, asked as {name}: {body}");
                let message = body["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains(&format!("{name} does not hold the admin role")),
                    "{body}"
                );
            }
        }
        let audited: Vec<(String, u64)> = poll(Duration::from_secs(10), async || {
            let lines: Vec<(String, u64)> = audit_lines(&daemon.logs())
                .iter()
                .map(|l| {
                    (
                        l["identity"].as_str().unwrap_or_default().to_string(),
                        l["outcome"].as_u64().unwrap_or_default(),
                    )
                })
                .collect();
            if lines.len() >= callers.len() {
                Ok(lines)
            } else {
                Err(lines)
            }
        })
        .await
        .unwrap_or_else(|lines| panic!("audit lines: {lines:?}\n{}", daemon.logs()));
        let expected: Vec<(String, u64)> = callers
            .iter()
            .map(|(name, _)| (name.to_string(), if name == admin { 200 } else { 403 }))
            .collect();
        assert_eq!(audited, expected, "{admin}");
    }

    // The legacy entry: refused at start, naming the key and the three ways to write it.
    let config = config_with_server(&home, &server, &auth("boss"));
    let out = std::process::Command::new(drover_bin())
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for part in [
        "auth.admin_identities",
        "write token:boss",
        "jwt:<issuer>#boss",
        "cert:boss",
    ] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
    // A JWT identity of an issuer whose tokens are not accepted could never match.
    let config = config_with_server(&home, &server, &auth("jwt:https://other.example#boss"));
    let out = std::process::Command::new(drover_bin())
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("auth.admin_identities[0]") && stderr.contains("auth.jwt.issuer"),
        "{stderr}"
    );
}
