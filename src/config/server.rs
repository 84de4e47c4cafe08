//! `server`: the HTTP listener.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Deserializer};

/// `server.header_read_timeout`'s default: a kept-alive connection idle this long is closed.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long drover's own HTTP clients (the CLI, a destination's peer client, snapshot downloads,
/// SSTable uploads) keep an idle connection to a daemon for reuse: well under the default
/// `header_read_timeout`, after which the daemon closes it. A request sent on a connection the
/// daemon is closing at that moment fails (hyper's "incomplete message"), so the client lets
/// go of it first.
pub const CLIENT_POOL_IDLE: Duration = Duration::from_secs(4);

/// How the daemon serves its REST API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address and port to listen on. Port 0 picks a free port; the bound address is logged and
    /// written to `<state_dir>/listen-addr`. Default `127.0.0.1:9043`.
    #[serde(deserialize_with = "socket_addr")]
    pub listen: SocketAddr,
    /// Largest request body accepted (job files are small; this stops accidental uploads).
    /// Larger bodies get 413. Default `16 MiB`.
    pub request_body_limit: ByteSize,
    /// Most bytes of request bodies held at once, summed over all requests: a body is
    /// buffered whole before it is parsed, so this bounds the memory that concurrent bodies
    /// take (a body without a declared length counts as `request_body_limit`). A request that
    /// finds no room within 5 s gets 503 with `Retry-After`. Streamed SSTable uploads are not
    /// counted (`sstable_uploads` bounds them). At least `request_body_limit`. Default
    /// `64 MiB`.
    pub request_body_budget: ByteSize,
    /// Time allowed to produce a response's headers; streamed bodies are not cut by it.
    /// Slower requests get 408. SSTable component uploads are exempt: their body may take
    /// longer however fast the daemon is, and `sstable_uploads.idle_timeout` bounds the time
    /// between its bytes instead. Default `60s`.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// On SIGTERM/SIGINT, how long running jobs and open requests get to checkpoint and finish
    /// before the process exits anyway. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// Enables `POST /api/v1/diagnostics/jobs`, which runs a job that only waits: a way to check
    /// the job lifecycle (progress, cancel, shutdown, restart) of a deployment without touching
    /// data. Off by default.
    pub diagnostics: bool,
    /// Time a client gets to send a request's complete headers (the first request and each
    /// later one on a kept-alive connection); a connection that trickles them slower is closed,
    /// so slow clients cannot hold connections open for ever. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// Most connections served at once. Beyond it the daemon stops accepting: new connections
    /// wait in the kernel's listen backlog until one closes (nothing is refused, no memory is
    /// spent on them). Default `1024`.
    pub max_connections: std::num::NonZeroUsize,
    /// A connection on which no byte moves in either direction for this long is closed, even
    /// in the middle of a request: a client that stops reading a download or stops sending a
    /// body cannot hold its connection for ever. A kept-alive connection waiting for its next
    /// request is already closed after `header_read_timeout` (hyper starts that timer when it
    /// begins waiting for a request's headers, not at their first byte), so between requests
    /// the shorter of the two applies. Keep it above `request_timeout`, since a handler
    /// preparing its answer moves no bytes. Default `120s`.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Serve HTTPS (and optionally verify client certificates) instead of plain HTTP.
    /// Default: plain HTTP.
    pub tls: Option<TlsConfig>,
    /// Allows `listen` to be a non-loopback address without both `tls` and authentication
    /// (`auth.tokens` or `auth.certificates`): anyone who reaches the port could then read
    /// every file of the node and start migrations. A warning is logged at every start while
    /// it is on. Default false (such a config is refused).
    pub insecure: bool,
    /// Host names a request's `Host` may carry, besides those always accepted: `localhost`,
    /// any IP address, the host of `server.listen` and of `live_migration.advertise`, and the
    /// hosts of `live_migration.migration_map`. Matched without the port, case-insensitively;
    /// `"*"` accepts any. Another `Host` gets 421: a web page that an attacker's DNS name
    /// points at the daemon (DNS rebinding) sends its own name. Default: none.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`, as browsers send them) whose requests are served. A
    /// request carrying any other `Origin` gets 403: drover serves no web pages, so a request
    /// with an `Origin` is a page of another site calling it from a browser. `"*"` accepts
    /// any. Default: none. The daemon's own origin (the scheme and `Host` of the request) is
    /// always served: it is the web console posting its own forms.
    pub allowed_origins: Vec<String>,
    /// Most progress streams (`GET /api/v1/jobs/{id}/events`, the console's live pages) open at
    /// once; one more gets 503 until one closes. Each holds a connection and wakes once per
    /// interval. Default `64`.
    pub max_event_streams: std::num::NonZeroUsize,
    /// Most of those one caller may hold (a proven identity; callers without one are counted
    /// by address), so one client cannot take every stream: one more gets 503 naming this
    /// key. Default `16`.
    pub max_event_streams_per_caller: std::num::NonZeroUsize,
    /// The web console at `/ui`.
    pub console: ConsoleConfig,
}

/// `server.console`: the web console served at `/ui`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Serve the console. When off, `/ui` answers 404. Default true.
    pub enabled: bool,
    /// With `auth` configured, a browser signs in with a bearer token and gets a session
    /// cookie; the session ends this long after sign-in. Default `12h`.
    #[serde(with = "humantime_serde")]
    pub session_ttl: Duration,
    /// Most console sessions kept at once; signing in beyond it ends the oldest session.
    /// Default `1000`.
    pub max_sessions: std::num::NonZeroUsize,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            session_ttl: Duration::from_secs(12 * 3600),
            max_sessions: std::num::NonZeroUsize::new(1000).expect("1000 is not zero"),
        }
    }
}

/// `server.tls`: the certificate the daemon presents, and whom it asks for one.
///
/// The files are watched: when one changes (its modification time or size), all are read
/// again and new connections get the new material; connections already open keep theirs. A
/// reload that fails (a half-written file, a key that does not match) is logged and the old
/// material stays in use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file with the server certificate, then its intermediates. A relative path is taken
    /// from the working directory.
    pub cert: PathBuf,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM file with the CA certificates that client certificates must chain to. When set,
    /// clients are asked for a certificate, and a verified one identifies the caller through
    /// `auth.certificates`. Default: no client certificates.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: `required` refuses a TLS handshake without a valid client
    /// certificate; `optional` lets a client without one in (it can then authenticate with a
    /// bearer token), while a certificate that does not verify is still refused. Default
    /// `required`.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// Time a new connection gets to complete its TLS handshake. Default `10s`.
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// How often the files are checked for changes. Default `5s`.
    #[serde(default = "default_reload_interval", with = "humantime_serde")]
    pub reload_interval: Duration,
}

fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_reload_interval() -> Duration {
    Duration::from_secs(5)
}

/// Whether a client certificate is required (`server.tls.client_auth`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// A handshake without a valid client certificate fails.
    #[default]
    Required,
    /// A client may come without a certificate.
    Optional,
}

impl ServerConfig {
    /// Checks values that serde cannot check alone; `auth_enabled` tells whether callers must
    /// authenticate.
    pub(crate) fn validate(&self, auth_enabled: bool) -> Result<(), (String, String)> {
        if let Some(tls) = &self.tls {
            for (key, value) in [
                ("server.tls.handshake_timeout", tls.handshake_timeout),
                ("server.tls.reload_interval", tls.reload_interval),
            ] {
                if value.is_zero() {
                    return Err((key.into(), "must be more than 0s".into()));
                }
            }
            if tls.client_auth == ClientAuth::Optional && tls.client_ca.is_none() {
                return Err((
                    "server.tls.client_auth".into(),
                    "needs server.tls.client_ca, the CA client certificates are verified against"
                        .into(),
                ));
            }
        }
        if self.idle_timeout.is_zero() {
            return Err(("server.idle_timeout".into(), "must be more than 0s".into()));
        }
        if !self.listen.ip().is_loopback() && !self.insecure {
            let missing = match (self.tls.is_some(), auth_enabled) {
                (true, true) => None,
                (false, true) => Some("server.tls"),
                (true, false) => Some("authentication (auth.tokens or auth.certificates)"),
                (false, false) => {
                    Some("server.tls and authentication (auth.tokens or auth.certificates)")
                }
            };
            if let Some(missing) = missing {
                return Err((
                    "server.listen".into(),
                    format!(
                        "{} is not a loopback address, and without {missing} anyone who reaches \
                         it could read every file of this node and start migrations; configure \
                         them, listen on 127.0.0.1, or set server.insecure: true to accept the risk",
                        self.listen
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9043)),
            request_body_limit: ByteSize::mib(16),
            request_body_budget: ByteSize::mib(64),
            request_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            diagnostics: false,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: std::num::NonZeroUsize::new(1024).expect("1024 is not zero"),
            idle_timeout: Duration::from_secs(120),
            tls: None,
            insecure: false,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_event_streams: std::num::NonZeroUsize::new(64).expect("64 is not zero"),
            max_event_streams_per_caller: std::num::NonZeroUsize::new(16).expect("16 is not zero"),
            console: ConsoleConfig::default(),
        }
    }
}

/// Parses a socket address with a message that quotes the bad value (the default message of
/// `SocketAddr` does not).
pub(crate) fn parse_socket_addr(value: &str) -> Result<SocketAddr, String> {
    value.parse().map_err(|_| {
        format!("invalid socket address {value:?}, expected IP:PORT such as 127.0.0.1:9043")
    })
}

fn socket_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    super::yaml::parse_str(d, parse_socket_addr)
}
