//! `server`: the HTTP listener.

use std::net::SocketAddr;
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Deserializer};

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
    /// Time allowed to produce a response's headers; streamed bodies are not cut by it.
    /// Slower requests get 408. Default `60s`.
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
    /// Host names a request's `Host` may carry, besides those always accepted: `localhost`,
    /// any IP address, the host of `server.listen` and of `live_migration.advertise`, and the
    /// hosts of `live_migration.migration_map`. Matched without the port, case-insensitively;
    /// `"*"` accepts any. Another `Host` gets 421: a web page that an attacker's DNS name
    /// points at the daemon (DNS rebinding) sends its own name. Default: none.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`, as browsers send them) whose requests are served. A
    /// request carrying any other `Origin` gets 403: drover serves no web pages, so a request
    /// with an `Origin` is a page of another site calling it from a browser. `"*"` accepts
    /// any. Default: none.
    pub allowed_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9043)),
            request_body_limit: ByteSize::mib(16),
            request_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            diagnostics: false,
            header_read_timeout: Duration::from_secs(10),
            max_connections: std::num::NonZeroUsize::new(1024).expect("1024 is not zero"),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
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
