//! Who is calling: identities from bearer tokens, JWTs and client certificates, the roles they
//! hold, and the check each route makes. Only the HTTP edge (`api`) asks these questions; the
//! engines below it never see a caller.

/// The names a verified client certificate carries, in the order they are tried as the
/// caller's identity: URI SANs (SPIFFE ids), then DNS SANs, then the subject's CN.
///
/// The TLS listener inserts it into each request's extensions for connections whose client
/// presented a certificate that chains to `server.tls.client_ca`; a request without it came
/// over plain TCP or without a client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertNames(pub Vec<String>);

pub mod jwt;
pub mod peer;
pub mod rate;
mod watched;

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{AuthConfig, TokenConfig};
use watched::Watched;

pub use crate::config::auth::Role;

/// An authenticated caller, attached to the request's extensions for handlers and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The caller's name qualified by how it was proven — `token:<id>`, `jwt:<issuer>#<name>`
    /// or `cert:<name>` — as logs, the audit trail and `auth.admin_identities` write it, so
    /// one name proven two ways is two callers. Never a secret.
    pub name: String,
    /// Its roles.
    pub roles: Vec<Role>,
    /// Whether it is in `auth.admin_identities` and so holds every role.
    pub all_roles: bool,
}

impl Identity {
    /// Whether it may act as `role`.
    pub fn has(&self, role: Role) -> bool {
        self.all_roles || self.roles.contains(&role)
    }

    /// The caller `name` (already qualified, see [`Identity::name`]) holding `roles`.
    pub(crate) fn new(config: &AuthConfig, name: String, roles: Vec<Role>) -> Self {
        Self {
            all_roles: is_admin(config, &name),
            name,
            roles,
        }
    }
}

/// Whether the qualified `name` is one of `auth.admin_identities`.
fn is_admin(config: &AuthConfig, name: &str) -> bool {
    config.admin_identities.iter().any(|a| a.as_str() == name)
}

/// The qualified name of the caller holding token `id`.
pub fn token_identity(id: &str) -> String {
    format!("token:{id}")
}

/// The qualified name of the caller whose JWT of `issuer` names it `name`.
pub fn jwt_identity(issuer: &str, name: &str) -> String {
    format!("jwt:{issuer}#{name}")
}

/// The qualified name of the caller whose verified certificate carries `name`.
pub fn cert_identity(name: &str) -> String {
    format!("cert:{name}")
}

/// The identity a bearer token proves, if it is one of `auth.tokens`.
pub fn identify_token(config: &AuthConfig, token: &str) -> Option<Identity> {
    identify_token_among(config, &[&config.tokens], token)
}

/// The identity a bearer token proves, if it is one of the token lists `lists`.
fn identify_token_among(
    config: &AuthConfig,
    lists: &[&[TokenConfig]],
    token: &str,
) -> Option<Identity> {
    let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    // Every entry is compared, in constant time, so the answer's timing does not tell how
    // much of a guess was right or which entry it was close to.
    let mut found = None;
    for entry in lists.iter().flat_map(|list| list.iter()) {
        if bool::from(entry.sha256.0.ct_eq(&digest)) {
            found = Some(entry);
        }
    }
    found.map(|entry| Identity::new(config, token_identity(&entry.id), entry.roles.clone()))
}

/// The daemon config's check of its `auth` section ([`crate::config::SectionCheck`]): the
/// tokens file and the JWT keys are read once, so that a missing key or an unreadable file
/// stops the daemon at start rather than refusing every caller later.
pub fn check_config(config: &crate::config::DaemonConfig) -> Result<(), (String, String)> {
    if let Some(path) = &config.auth.tokens_file {
        read_tokens_file(path).map_err(|e| ("auth.tokens_file".into(), e))?;
    }
    if let Some(jwt) = &config.auth.jwt {
        jwt::KeySet::load(jwt).map_err(|e| {
            let which = if jwt.jwks_file.is_some() {
                "jwks_file"
            } else {
                "public_key_file"
            };
            (format!("auth.jwt.{which}"), e)
        })?;
    }
    Ok(())
}

/// Reads an `auth.tokens_file`: a YAML list of entries shaped as `auth.tokens` ones (an empty
/// file holds none).
pub fn read_tokens_file(path: &Path) -> Result<Vec<TokenConfig>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    crate::config::yaml::from_str(&text).map_err(|e| {
        let (message, line) = crate::config::yaml::describe_error(&e);
        let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
        format!("{}: {message}{at}", path.display())
    })
}

/// Identifies callers with what the config and its files say, as they are now: the token
/// lists, the tokens file (re-read when it changes) and the JWT keys.
pub struct Authenticator {
    config: AuthConfig,
    tokens_file: Option<Watched<Vec<TokenConfig>>>,
    jwt: Option<jwt::Verifier>,
}

impl Authenticator {
    /// The authenticator of `config`, whose file paths were resolved when it was loaded.
    pub fn new(config: &AuthConfig) -> Self {
        Self {
            config: config.clone(),
            tokens_file: config
                .tokens_file
                .as_deref()
                .map(|path| Watched::new(path, "auth.tokens_file", read_tokens_file)),
            jwt: config.jwt.as_ref().map(jwt::Verifier::new),
        }
    }

    /// The config it identifies callers by.
    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The identity a bearer token proves, or why it proves none (a message for the caller
    /// that never repeats the token). A JWT-shaped token is checked as a JWT when `auth.jwt`
    /// is set, and never looked up among the hashes then.
    pub fn identify_bearer(&self, token: &str) -> Result<Identity, String> {
        if let Some(verifier) = &self.jwt
            && jwt::looks_like_jwt(token)
        {
            return verifier.verify(&self.config, token);
        }
        let file = self.tokens_file.as_ref().map(|w| w.get());
        let file: &[TokenConfig] = file.as_deref().map_or(&[], |v| v.as_slice());
        identify_token_among(&self.config, &[&self.config.tokens, file], token)
            .ok_or_else(|| "the bearer token is not valid".to_string())
    }

    /// The identity of a verified client certificate, as [`identify_certificate`].
    pub fn identify_certificate(&self, names: &ClientCertNames) -> Option<Identity> {
        identify_certificate(&self.config, names)
    }
}

/// The identity of a verified client certificate: its first name that some
/// `auth.certificates` entry (or a `cert:` entry of `auth.admin_identities`) names, with the roles of every entry
/// that matches that name.
pub fn identify_certificate(config: &AuthConfig, names: &ClientCertNames) -> Option<Identity> {
    names.0.iter().find_map(|name| {
        let mut roles: Vec<Role> = Vec::new();
        let qualified = cert_identity(name);
        let mut known = is_admin(config, &qualified);
        for entry in &config.certificates {
            if entry.identity.matches(name) {
                known = true;
                for role in &entry.roles {
                    if !roles.contains(role) {
                        roles.push(*role);
                    }
                }
            }
        }
        known.then(|| Identity::new(config, qualified, roles))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> AuthConfig {
        yaml_serde::from_str(yaml).expect("auth config")
    }

    fn sha(token: &str) -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_token_is_known_by_its_hash_only() {
        let auth = config(&format!(
            "tokens:\n  - {{id: ci, sha256: {}, roles: [reader, operator]}}\n  - {{id: boss, sha256: {}}}\nadmin_identities: ['token:boss']\n",
            sha("s3cret"),
            sha("b0ss")
        ));
        assert!(auth.is_enabled());
        let ci = identify_token(&auth, "s3cret").expect("ci");
        assert_eq!(ci.name, "token:ci");
        assert!(ci.has(Role::Reader) && ci.has(Role::Operator) && !ci.has(Role::Admin));
        let boss = identify_token(&auth, "b0ss").expect("boss");
        assert!(boss.has(Role::Admin) && boss.has(Role::Peer));
        assert_eq!(identify_token(&auth, "s3cre"), None);
        assert_eq!(identify_token(&auth, &sha("s3cret")), None);
    }

    #[test]
    fn a_bad_hash_is_refused_when_the_config_is_read() {
        let err = yaml_serde::from_str::<AuthConfig>("tokens: [{id: x, sha256: abc}]")
            .expect_err("short hash");
        assert!(err.to_string().contains("64 hex digits"), "{err}");
    }

    #[test]
    fn certificate_names_map_to_roles_by_exact_name_or_glob() {
        let auth = config(
            "certificates:\n  - {identity: 'spiffe://example.org/ns/prod/*', roles: [reader]}\n  - {identity: 'spiffe://example.org/ns/prod/dst', roles: [peer]}\n  - {identity: 'ops.example.org', roles: [operator]}\nadmin_identities: ['cert:root.example.org']\n",
        );
        assert!(auth.is_enabled());
        let names = |n: &[&str]| ClientCertNames(n.iter().map(|s| s.to_string()).collect());

        // URI SANs come first; a name no entry matches is skipped for the next one.
        let dst = identify_certificate(
            &auth,
            &names(&[
                "spiffe://other/x",
                "spiffe://example.org/ns/prod/dst",
                "ops.example.org",
            ]),
        )
        .expect("dst");
        assert_eq!(dst.name, "cert:spiffe://example.org/ns/prod/dst");
        assert_eq!(dst.roles, vec![Role::Reader, Role::Peer]);

        // `*` stays within one segment.
        assert_eq!(
            identify_certificate(&auth, &names(&["spiffe://example.org/ns/prod/a/b"])),
            None
        );
        let ops = identify_certificate(&auth, &names(&["ops.example.org"])).expect("ops");
        assert_eq!(ops.roles, vec![Role::Operator]);
        let root = identify_certificate(&auth, &names(&["root.example.org"])).expect("root");
        assert!(root.has(Role::Admin));
        assert_eq!(identify_certificate(&auth, &names(&[])), None);
    }

    #[test]
    fn without_tokens_or_certificates_auth_is_off() {
        assert!(!AuthConfig::default().is_enabled());
        assert!(AuthConfig::default().health_open);
        assert!(!config("admin_identities: ['token:x']\nhealth_open: false\n").is_enabled());
    }

    /// One name proven three ways is three callers: only the way `admin_identities` names
    /// holds every role (issue 42, finding 3: a JWT `sub: boss` and a certificate `CN=boss`
    /// both passed as the token `boss`).
    #[test]
    fn an_admin_identity_holds_every_role_only_when_proven_the_way_it_names() {
        let auth = config(&format!(
            "tokens:\n  - {{id: boss, sha256: {}}}\n  - {{id: cert:boss, sha256: {}}}\ncertificates:\n  - {{identity: boss, roles: [reader]}}\nadmin_identities: ['token:boss']\n",
            sha("b0ss"),
            sha("tricky")
        ));
        assert!(identify_token(&auth, "b0ss").unwrap().has(Role::Admin));
        let cert = identify_certificate(&auth, &ClientCertNames(vec!["boss".into()])).unwrap();
        assert_eq!(cert.name, "cert:boss");
        assert!(!cert.has(Role::Admin) && cert.has(Role::Reader));
        // A token whose id looks qualified is still a token.
        let tricky = identify_token(&auth, "tricky").unwrap();
        assert_eq!(tricky.name, "token:cert:boss");
        assert!(!tricky.has(Role::Admin));

        let auth = config("admin_identities: ['cert:boss']\n");
        let cert = identify_certificate(&auth, &ClientCertNames(vec!["boss".into()])).unwrap();
        assert!(
            cert.has(Role::Admin),
            "a cert: admin needs no certificates entry"
        );
    }

    #[test]
    fn an_unqualified_or_malformed_admin_identity_is_refused_naming_the_fix() {
        for (entry, expected) in [
            ("boss", "write token:boss"),
            (
                "spiffe://example.org/admin",
                "does not say how it is proven",
            ),
            ("token:", "names nobody"),
            ("cert:", "names nobody"),
            ("jwt:boss", "jwt:<issuer>#<name>"),
            ("jwt:#boss", "jwt:<issuer>#<name>"),
            ("jwt:https://idp#", "jwt:<issuer>#<name>"),
        ] {
            let err = yaml_serde::from_str::<AuthConfig>(&format!("admin_identities: ['{entry}']"))
                .expect_err(entry)
                .to_string();
            assert!(err.contains(expected), "{entry}: {err}");
        }
        for entry in [
            "token:boss",
            "cert:spiffe://example.org/admin",
            "jwt:https://idp.example#a#b",
        ] {
            config(&format!("admin_identities: ['{entry}']"));
        }
    }
}
