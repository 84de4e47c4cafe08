//! Refuses the requests a web page in a browser can make to a daemon it should not reach: a
//! `Host` that is not one of the daemon's names (DNS rebinding: an attacker's name resolving
//! to 127.0.0.1) and an `Origin` of another site (a cross-site request).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
use crate::config::DaemonConfig;

/// The longest `Host` or `Origin` quoted in a refusal.
const MAX_ECHO: usize = 100;

/// Which `Host` and `Origin` values are served.
#[derive(Debug)]
pub struct HostPolicy {
    any_host: bool,
    hosts: HashSet<String>,
    any_origin: bool,
    origins: HashSet<String>,
}

/// The host of `host[:port]` or `[v6]:port`, lowercase, without a trailing dot.
fn host_part(authority: &str) -> String {
    let authority = authority.trim();
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else if authority.matches(':').count() > 1 {
        // A bare IPv6 address, as `server.listen`'s IP prints.
        authority
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn echo(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut out: String = text.chars().take(MAX_ECHO).collect();
    if text.chars().count() > MAX_ECHO {
        out.push('…');
    }
    out
}

impl HostPolicy {
    /// The policy of `config`'s `server.allowed_hosts` and `server.allowed_origins`.
    pub fn new(config: &DaemonConfig) -> Self {
        let server = &config.server;
        let mut hosts: HashSet<String> =
            server.allowed_hosts.iter().map(|h| host_part(h)).collect();
        hosts.insert("localhost".into());
        hosts.insert(host_part(&server.listen.ip().to_string()));
        let live = &config.live_migration;
        for name in live
            .migration_map
            .iter()
            .flat_map(|(source, destination)| [source, destination])
            .chain(live.advertise.as_ref())
        {
            hosts.insert(host_part(name));
        }
        let origin = |o: &String| o.trim_end_matches('/').to_ascii_lowercase();
        Self {
            any_host: server.allowed_hosts.iter().any(|h| h == "*"),
            hosts,
            any_origin: server.allowed_origins.iter().any(|o| o == "*"),
            origins: server.allowed_origins.iter().map(origin).collect(),
        }
    }

    /// Whether a request whose `Host` (or HTTP/2 authority) is `host` is served.
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = host_part(host);
        // An address cannot be rebound: a page that reached the daemon by its address has the
        // daemon itself as origin.
        self.any_host || self.hosts.contains(&name) || name.parse::<IpAddr>().is_ok()
    }

    /// Whether a request carrying `Origin: origin` is served.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        self.any_origin
            || self
                .origins
                .contains(&origin.trim_end_matches('/').to_ascii_lowercase())
    }
}

/// The middleware. A request without `Host` is served: browsers always send one, so its
/// absence is not the shape of the requests this stops.
pub async fn check(
    State(policy): State<Arc<HostPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    // Two Host headers (RFC 9112 §3.2: answered 400) let a proxy check one name and this
    // daemon serve another.
    if request
        .headers()
        .get_all(header::HOST)
        .iter()
        .nth(1)
        .is_some()
    {
        return ApiError::bad_request("a request carries one Host header, this one has several")
            .into_response();
    }
    let host = request
        .headers()
        .get(header::HOST)
        .map(|v| v.as_bytes().to_vec())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|a| a.as_str().as_bytes().to_vec())
        });
    if let Some(host) = &host {
        let fine = std::str::from_utf8(host).is_ok_and(|h| policy.host_allowed(h));
        if !fine {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host {:?} is not a name of this daemon (server.allowed_hosts)",
                    echo(host)
                ),
            )
            .into_response();
        }
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        // The daemon's own origin is its console posting a form: the Host was checked above.
        let own = |o: &str| {
            let Some(host) = host.as_deref().and_then(|h| std::str::from_utf8(h).ok()) else {
                return false;
            };
            o.split_once("://").is_some_and(|(scheme, rest)| {
                matches!(scheme, "http" | "https") && rest.eq_ignore_ascii_case(host)
            })
        };
        let fine = origin
            .to_str()
            .is_ok_and(|o| own(o) || policy.origin_allowed(o));
        if !fine {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "requests from Origin {:?} are refused (server.allowed_origins)",
                    echo(origin.as_bytes())
                ),
            )
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(extra: &str) -> HostPolicy {
        let config = DaemonConfig::parse(
            "t",
            &format!("server:\n  listen: 10.1.2.3:9043\n  insecure: true\n{extra}"),
            std::path::Path::new("."),
            |_| None,
            &[],
        )
        .unwrap();
        HostPolicy::new(&config)
    }

    #[test]
    fn default_hosts_are_the_daemons_own_names_and_addresses() {
        let p = policy("live_migration:\n  migration_map:\n    Src.Example:9043: dst.example\n");
        for ok in [
            "localhost",
            "localhost:9043",
            "LOCALHOST.",
            "127.0.0.1:9043",
            "[::1]:9043",
            "10.1.2.3",
            "192.0.2.7:80",
            "src.example:9043",
            "dst.example",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "localhost.evil.example:9043",
            "",
            "dst.example.evil",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
        assert!(!p.origin_allowed("http://localhost:9043"));
    }

    #[test]
    fn configured_hosts_and_origins_are_added() {
        let p = policy(
            "  allowed_hosts: [drover.internal]\n  allowed_origins: ['https://ops.example/']\n",
        );
        assert!(p.host_allowed("drover.internal:443"));
        assert!(!p.host_allowed("other.internal"));
        assert!(p.origin_allowed("https://ops.example"));
        assert!(!p.origin_allowed("https://ops.example.evil"));
        let p = policy("  allowed_hosts: ['*']\n  allowed_origins: ['*']\n");
        assert!(p.host_allowed("anything.example"));
        assert!(p.origin_allowed("null"));
    }
}
