//! Who may call the API: bearer tokens (kept as SHA-256 hashes), client-certificate names,
//! and the identities that hold every role.

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

use crate::auth::Role;

/// Authentication and authorization of the HTTP API. Off (every caller may do everything, as
/// before this section existed) unless at least one token or certificate mapping is
/// configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Bearer tokens accepted in `Authorization: Bearer <token>`. Only the SHA-256 of each
    /// token is kept, so a leaked config does not leak the tokens; make one with
    /// `printf %s "$TOKEN" | sha256sum`. Default: none.
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// Roles of callers identified by a verified client certificate (see
    /// `server.tls.client_ca`). The first certificate name (URI SANs, then DNS SANs, then the
    /// CN) that some entry matches is the caller's identity; it holds the roles of every entry
    /// that matches it. Default: none.
    #[serde(default)]
    pub certificates: Vec<CertificateConfig>,
    /// Identities (token ids or certificate names, exact) that hold every role, whatever
    /// their own entry says. Default: none.
    #[serde(default)]
    pub admin_identities: Vec<String>,
    /// Whether the health routes (`/api/v1/__health`, `/api/v1/cassandra/native/__health`)
    /// answer without credentials, for load balancers and probes. When false they need the
    /// `reader` role. Default true.
    #[serde(default = "default_health_open")]
    pub health_open: bool,
}

fn default_health_open() -> bool {
    true
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            certificates: Vec::new(),
            admin_identities: Vec::new(),
            health_open: default_health_open(),
        }
    }
}

impl AuthConfig {
    /// Whether requests must be authenticated: some method of identifying a caller is
    /// configured. Without one the API is open, as it was before this section existed.
    pub fn is_enabled(&self) -> bool {
        !self.tokens.is_empty() || !self.certificates.is_empty()
    }
}

/// One bearer token.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The caller's identity when it presents this token, as written in the logs and matched
    /// by `admin_identities`. Never the token itself.
    pub id: String,
    /// The SHA-256 of the token, 64 hex digits.
    pub sha256: TokenHash,
    /// The roles the token holds: `reader`, `operator`, `peer`, `admin`. Roles do not imply
    /// one another: an operator that also reads lists `[reader, operator]`.
    #[serde(default)]
    pub roles: Vec<Role>,
}

/// The SHA-256 digest of a token, written as 64 hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenHash(pub [u8; 32]);

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A hash is not a secret, but it has no use in a debug dump either.
        f.write_str("TokenHash(..)")
    }
}

impl TryFrom<String> for TokenHash {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let bad = || {
            format!(
                "sha256: expected 64 hex digits (the SHA-256 of the token), got {} characters",
                text.len()
            )
        };
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(bad());
        }
        let mut digest = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hex = std::str::from_utf8(pair).map_err(|_| bad())?;
            digest[i] = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
        }
        Ok(Self(digest))
    }
}

impl<'de> Deserialize<'de> for TokenHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Roles of the callers whose certificate carries a name matching `identity`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// A certificate name, exact or a glob: `*` matches within one `/`-separated segment,
    /// `**` across segments, e.g. `spiffe://example.org/ns/prod/sa/*`.
    pub identity: IdentityPattern,
    /// The roles it holds (see `tokens[].roles`).
    #[serde(default)]
    pub roles: Vec<Role>,
}

/// A certificate-name pattern, compiled when the config is read.
#[derive(Debug, Clone)]
pub struct IdentityPattern {
    text: String,
    matcher: GlobMatcher,
}

impl IdentityPattern {
    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl TryFrom<String> for IdentityPattern {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let glob = GlobBuilder::new(&text)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("identity: {e}"))?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            text,
        })
    }
}

impl<'de> Deserialize<'de> for IdentityPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
