//! Who may call the API: bearer tokens (kept as SHA-256 hashes), client-certificate names,
//! and the identities that hold every role.

use std::fmt;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

/// Authentication and authorization of the HTTP API. Off (every caller may do everything, as
/// before this section existed) unless tokens, a tokens file, JWTs or certificate mappings are
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
    /// Identities that hold every role, whatever their own entry says, each named with how it
    /// is proven: `token:<id>` (an `auth.tokens` or `tokens_file` entry), `jwt:<issuer>#<name>`
    /// (a JWT of `auth.jwt.issuer` whose identity claim is `<name>`) or `cert:<name>` (a
    /// verified client certificate carrying that name, exact). A name alone is refused: the
    /// same name proven another way must not become an administrator. Default: none.
    #[serde(default)]
    pub admin_identities: Vec<AdminIdentity>,
    /// Whether the health routes (`/api/v1/__health`, `/api/v1/cassandra/native/__health`)
    /// answer without credentials, for load balancers and probes. When false they need the
    /// `reader` role. Default true.
    #[serde(default = "default_health_open")]
    pub health_open: bool,
    /// A YAML file holding more bearer-token entries, a list in the shape of `tokens`. It is
    /// read again whenever it changes (size, mtime or inode), so token hashes can be added,
    /// rotated and revoked without a restart; an edit that does not parse is refused with a
    /// warning and the previous entries stay in force. A relative path is taken from the
    /// config file's directory. Default: none.
    #[serde(default)]
    pub tokens_file: Option<PathBuf>,
    /// JSON Web Tokens accepted as bearer tokens, signed by an identity provider. Default:
    /// none.
    #[serde(default)]
    pub jwt: Option<JwtConfig>,
    /// Most requests one identity may make, answered 429 with `Retry-After` beyond it.
    /// Callers without credentials are counted by their address. Health routes are not
    /// counted. Default: no limit.
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
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
            tokens_file: None,
            jwt: None,
            rate_limit: None,
        }
    }
}

impl AuthConfig {
    /// Whether requests must be authenticated: some method of identifying a caller is
    /// configured. Without one the API is open, as it was before this section existed.
    pub fn is_enabled(&self) -> bool {
        !self.tokens.is_empty()
            || !self.certificates.is_empty()
            || self.tokens_file.is_some()
            || self.jwt.is_some()
    }

    /// Checks what a field alone cannot: a `jwt:` admin identity names the issuer JWTs are
    /// accepted from, or it could never match.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (i, admin) in self.admin_identities.iter().enumerate() {
            let Some(issuer) = admin.jwt_issuer() else {
                continue;
            };
            let key = format!("auth.admin_identities[{i}]");
            match &self.jwt {
                None => {
                    return Err((
                        key,
                        format!(
                            "{:?} is a JWT identity but auth.jwt is not set",
                            admin.as_str()
                        ),
                    ));
                }
                Some(jwt) if jwt.issuer != issuer => {
                    return Err((
                        key,
                        format!(
                            "{:?} names the issuer {issuer:?}, but JWTs are accepted only from auth.jwt.issuer {:?}",
                            admin.as_str(),
                            jwt.issuer
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Makes the section's file paths absolute from `base` (the config file's directory).
    /// The files themselves are read by `auth::check_config` when the daemon's config is
    /// loaded, so a missing key or an unreadable tokens file stops the daemon at start rather
    /// than refusing every caller later. Errors name the key.
    pub fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        if let Some(path) = &mut self.tokens_file {
            *path = base.join(&*path);
        }
        if let Some(jwt) = &mut self.jwt {
            jwt.resolve(base)?;
        }
        Ok(())
    }
}

/// `auth.jwt`: bearer tokens that are JWTs (RFC 7519), checked against the identity
/// provider's public keys. A bearer token shaped like a JWT (three base64url parts, the first
/// starting `eyJ`) is checked only as one; any other token is looked up among the hashes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// A JWKS file (`{"keys": [...]}`, as an identity provider publishes it) holding the
    /// signing keys; a token's `kid` picks its key. Read again when it changes, so keys can be
    /// rotated without a restart. One of `jwks_file` and `public_key_file` is required.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// A PEM public key file (`-----BEGIN PUBLIC KEY-----` for EC and Ed25519,
    /// `BEGIN PUBLIC KEY` or `BEGIN RSA PUBLIC KEY` for RSA), read again when it changes.
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
    /// The `iss` a token must carry, exactly. Required.
    pub issuer: String,
    /// An `aud` a token must carry (one of its audiences, when it has several). Required.
    pub audience: String,
    /// The signature algorithms accepted. Only public-key algorithms: `RS256`, `RS384`,
    /// `RS512`, `PS256`, `PS384`, `PS512`, `ES256`, `ES384`, `EdDSA`. Default
    /// `[RS256, ES256, EdDSA]`.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    /// Clock skew allowed when checking `exp` and `nbf`. Default `30s`.
    #[serde(default = "default_leeway", with = "humantime_serde")]
    pub leeway: Duration,
    /// The claim holding the caller's roles: a list of role names (or one string of names
    /// separated by spaces); a dotted path reaches into objects, e.g. `realm_access.roles`.
    /// Names that are not drover roles are ignored. Default `roles`.
    #[serde(default = "default_roles_claim")]
    pub roles_claim: String,
    /// The claim naming the caller, as logged and matched by `admin_identities`. Default
    /// `sub`.
    #[serde(default = "default_identity_claim")]
    pub identity_claim: String,
}

fn default_algorithms() -> Vec<jsonwebtoken::Algorithm> {
    use jsonwebtoken::Algorithm::*;
    vec![RS256, ES256, EdDSA]
}

fn default_leeway() -> Duration {
    Duration::from_secs(30)
}

fn default_roles_claim() -> String {
    "roles".into()
}

fn default_identity_claim() -> String {
    "sub".into()
}

impl JwtConfig {
    fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        use jsonwebtoken::Algorithm::*;
        let key = |k: &str| format!("auth.jwt.{k}");
        match (&mut self.jwks_file, &mut self.public_key_file) {
            (Some(_), Some(_)) | (None, None) => {
                return Err((
                    key("jwks_file"),
                    "exactly one of jwks_file and public_key_file is required".into(),
                ));
            }
            (Some(path), None) | (None, Some(path)) => *path = base.join(&*path),
        }
        if self.algorithms.is_empty() {
            return Err((key("algorithms"), "must name at least one algorithm".into()));
        }
        // A shared secret would have to sit in the config, and a public JWKS holding an
        // `oct` key would let anyone who reads it sign tokens.
        if let Some(alg) = self
            .algorithms
            .iter()
            .find(|a| matches!(a, HS256 | HS384 | HS512))
        {
            return Err((
                key("algorithms"),
                format!(
                    "{alg:?} is a shared-secret algorithm; only public-key algorithms are accepted"
                ),
            ));
        }
        for (name, claim) in [
            ("roles_claim", &self.roles_claim),
            ("identity_claim", &self.identity_claim),
        ] {
            if claim.is_empty() {
                return Err((key(name), "must not be empty".into()));
            }
        }
        Ok(())
    }
}

/// `auth.rate_limit`: a token bucket per identity.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Requests per second one identity may make in the long run, at least 1. Required.
    pub per_second: NonZeroU32,
    /// Requests one identity may make at once after a quiet time, above the long-run rate.
    /// Default: `per_second`.
    #[serde(default)]
    pub burst: Option<NonZeroU32>,
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

/// An entry of `auth.admin_identities`: a caller's name qualified by how it is proven, as
/// [`crate::auth::Identity::name`] writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminIdentity(String);

impl AdminIdentity {
    /// The entry as written (`token:boss`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The issuer of a `jwt:` entry.
    pub fn jwt_issuer(&self) -> Option<&str> {
        let rest = self.0.strip_prefix("jwt:")?;
        rest.split_once('#').map(|(issuer, _)| issuer)
    }
}

impl TryFrom<String> for AdminIdentity {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let qualified = |name: &str| {
            format!(
                "write token:{name} (a token id), jwt:<issuer>#{name} (a JWT subject) or cert:{name} (a certificate name)"
            )
        };
        let Some((scheme, name)) = text.split_once(':') else {
            return Err(format!(
                "admin identity {text:?} does not say how it is proven: {}",
                qualified(&text)
            ));
        };
        match scheme {
            "token" | "cert" if !name.is_empty() => Ok(Self(text)),
            "jwt" => match name.split_once('#') {
                Some((issuer, subject)) if !issuer.is_empty() && !subject.is_empty() => {
                    Ok(Self(text))
                }
                _ => Err(format!(
                    "admin identity {text:?}: a JWT identity is jwt:<issuer>#<name>, the issuer as auth.jwt.issuer writes it"
                )),
            },
            "token" | "cert" => Err(format!(
                "admin identity {text:?} names nobody after {scheme}:"
            )),
            // A SPIFFE id or a URL is a certificate name written without its `cert:`.
            _ => Err(format!(
                "admin identity {text:?} does not say how it is proven: {}",
                qualified(&text)
            )),
        }
    }
}

impl<'de> Deserialize<'de> for AdminIdentity {
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
/// What a caller may do. Roles do not imply one another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads status, lists, reports, savepoints and metrics.
    Reader,
    /// Starts, cancels, resumes and deletes work: migrations, validations, jobs, diagnostics,
    /// live-migration data copies and file verifications.
    Operator,
    /// A destination drover reading its source's files, lists and digests.
    Peer,
    /// Switches live migration and changes its status.
    Admin,
}

impl Role {
    /// The name used in the config and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Operator => "operator",
            Role::Peer => "peer",
            Role::Admin => "admin",
        }
    }

    /// The role of a name as the config writes it.
    pub fn from_name(name: &str) -> Option<Self> {
        [Role::Reader, Role::Operator, Role::Peer, Role::Admin]
            .into_iter()
            .find(|r| r.name() == name)
    }
}
