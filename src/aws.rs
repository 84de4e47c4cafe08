//! The AWS settings job files share: the `endpoint` and `credentials` of a DynamoDB-API
//! server, of an S3-compatible store (Parquet files, DynamoDB exports) and of savepoints kept
//! in S3, in ScyllaDB Migrator's keys.

use secrecy::SecretString as Secret;
use serde::Deserialize;

/// `endpoint` of a DynamoDB-API server or an S3-compatible store.
///
/// `host` is a bare host name or address (`http://` is assumed, as ScyllaDB Migrator does) or
/// an `http://`/`https://` URL without path, query or user (`https://dynamodb.eu-west-1.amazonaws.com`);
/// `type: alternator` requires the scheme. The port is always `port`, never part of `host`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Host name, IPv4 or IPv6 address, optionally prefixed with `http://` or `https://`.
    pub host: String,
    /// TCP port (1 to 65535).
    pub port: u16,
}

impl Endpoint {
    /// The endpoint as a URL (`http://` added to a bare host, a bare IPv6 address bracketed).
    pub fn url(&self) -> String {
        let host = self.host.trim().trim_end_matches('/');
        let (scheme, authority) = split_scheme(host).unwrap_or(("http://", host));
        let authority = if authority.contains(':') && !authority.starts_with('[') {
            format!("[{authority}]")
        } else {
            authority.to_string()
        };
        format!("{scheme}{authority}:{}", self.port)
    }

    /// Whether `host` names its scheme (`http://` or `https://`).
    pub fn has_scheme(&self) -> bool {
        split_scheme(self.host.trim()).is_some()
    }

    /// What is wrong with `host`, if anything (ScyllaDB Migrator's rules: a host name or
    /// address, optionally with an http(s) scheme; no user, path, query, fragment or port).
    pub fn host_problem(&self) -> Option<String> {
        let host = self.host.trim();
        if host.is_empty() {
            return Some("must not be empty".into());
        }
        let (had_scheme, authority) = match split_scheme(host) {
            Some((_, rest)) => (true, rest.trim_end_matches('/')),
            None => (false, host.trim_end_matches('/')),
        };
        if authority.is_empty() || authority.contains(['/', '?', '#', '&', '@']) {
            return Some(format!(
                "{host:?} must be a bare host name or address, or an http(s) URL without user, path, query or fragment"
            ));
        }
        if let Some(inner) = authority
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
        {
            return (inner.parse::<std::net::Ipv6Addr>().is_err())
                .then(|| format!("{host:?} is not a valid IPv6 address"));
        }
        if authority.contains(':') {
            if !had_scheme && authority.parse::<std::net::Ipv6Addr>().is_ok() {
                return None;
            }
            return Some(format!(
                "{host:?} must not include a port: the port is endpoint.port"
            ));
        }
        let valid = authority
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
            && authority
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        (!valid).then(|| {
            format!(
                "{host:?} must be a host name, IPv4 or IPv6 address, optionally prefixed with http:// or https://"
            )
        })
    }
}

fn split_scheme(host: &str) -> Option<(&'static str, &str)> {
    let lower = host.to_ascii_lowercase();
    if lower.starts_with("http://") {
        Some(("http://", &host["http://".len()..]))
    } else if lower.starts_with("https://") {
        Some(("https://", &host["https://".len()..]))
    } else {
        None
    }
}

/// `credentials` of a DynamoDB-API server or an S3-compatible store. Without them, the usual AWS chain is used
/// (environment, profile, web identity, instance metadata).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsCredentials {
    /// Access key id. Not a secret by AWS's rules, but half of a credential pair and redacted
    /// everywhere like the other half (job records and savepoints already drop it): wrapped so
    /// that no debug print of a config shows it either.
    pub access_key: Secret,
    /// Secret access key; never logged, stored or returned.
    pub secret_key: Secret,
    /// A role to assume with these credentials (not with `type: alternator`).
    pub assume_role: Option<AssumeRole>,
}

impl AwsCredentials {
    /// The key pair, for an S3 client.
    pub fn keys(&self) -> crate::s3::Keys<'_> {
        crate::s3::Keys {
            access_key: secrecy::ExposeSecret::expose_secret(&self.access_key),
            secret_key: secrecy::ExposeSecret::expose_secret(&self.secret_key),
        }
    }
}

/// `credentials.assumeRole`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssumeRole {
    /// ARN of the role.
    pub arn: String,
    /// Session name (default `scylla-migrator`, as ScyllaDB Migrator names it).
    pub session_name: Option<String>,
}
