//! JSON Web Tokens as bearer tokens: the identity provider's public keys (a JWKS or one PEM
//! key, both re-read when their file changes), the checks of `iss`, `aud`, `exp` and `nbf`,
//! and the claims that name the caller and its roles.

use std::path::Path;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, PublicKeyUse};
use jsonwebtoken::{DecodingKey, Header, Validation};
use serde_json::Value;

use super::watched::Watched;
use super::{Identity, Role};
use crate::config::{AuthConfig, JwtConfig};

/// The longest identity taken from a claim; a longer one is refused rather than logged.
const MAX_IDENTITY: usize = 256;

/// Whether a bearer token has the shape of a JWS in compact form: three base64url parts, the
/// first a JSON object (so it starts `eyJ`, the encoding of `{"`). Only such tokens are
/// checked as JWTs; others are looked up among the token hashes.
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ")
        && token.split('.').count() == 3
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

struct Key {
    kid: Option<String>,
    /// The algorithm the key is for, when its JWK names one.
    alg: Option<String>,
    key: DecodingKey,
}

/// The keys a token may be signed with.
#[derive(Default)]
pub struct KeySet {
    keys: Vec<Key>,
}

impl KeySet {
    /// Reads the key file `config` names (the JWKS or the PEM key).
    pub fn load(config: &JwtConfig) -> Result<Self, String> {
        match (&config.jwks_file, &config.public_key_file) {
            (Some(path), _) => Self::read_jwks(path),
            (None, Some(path)) => Self::read_pem(path),
            (None, None) => Err("no key file".into()),
        }
    }

    fn read(path: &Path) -> Result<Vec<u8>, String> {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }

    fn read_jwks(path: &Path) -> Result<Self, String> {
        let set: JwkSet = serde_json::from_slice(&Self::read(path)?)
            .map_err(|e| format!("{}: not a JWKS: {e}", path.display()))?;
        let mut keys = Vec::new();
        for (i, jwk) in set.keys.iter().enumerate() {
            if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
                continue;
            }
            if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
                return Err(format!(
                    "{}: key {i} is a shared secret (kty oct); only public keys are accepted",
                    path.display()
                ));
            }
            let key = DecodingKey::from_jwk(jwk)
                .map_err(|e| format!("{}: key {i}: {e}", path.display()))?;
            keys.push(Key {
                kid: jwk.common.key_id.clone(),
                alg: jwk.common.key_algorithm.map(|a| format!("{a:?}")),
                key,
            });
        }
        if keys.is_empty() {
            return Err(format!("{}: holds no signing key", path.display()));
        }
        Ok(Self { keys })
    }

    fn read_pem(path: &Path) -> Result<Self, String> {
        let pem = Self::read(path)?;
        if String::from_utf8_lossy(&pem).contains("PRIVATE KEY") {
            return Err(format!(
                "{}: is a private key; give the public key",
                path.display()
            ));
        }
        let key = DecodingKey::from_rsa_pem(&pem)
            .or_else(|_| DecodingKey::from_ec_pem(&pem))
            .or_else(|_| DecodingKey::from_ed_pem(&pem))
            .map_err(|_| {
                format!(
                    "{}: not a PEM RSA, EC or Ed25519 public key",
                    path.display()
                )
            })?;
        Ok(Self {
            keys: vec![Key {
                kid: None,
                alg: None,
                key,
            }],
        })
    }

    /// The keys that may have signed a token with `header`: the one its `kid` names, and keys
    /// without a `kid` (a PEM key, a JWKS entry without one), which identity providers that
    /// always set a `kid` must still be able to use; without a `kid`, every key of the
    /// algorithm's family.
    fn candidates<'a>(&'a self, header: &'a Header) -> impl Iterator<Item = &'a DecodingKey> {
        let alg = format!("{:?}", header.alg);
        self.keys
            .iter()
            .filter(move |k| match &header.kid {
                Some(kid) => k.kid.as_deref().is_none_or(|own| own == kid),
                None => true,
            })
            .filter(move |k| k.key.family() == header.alg.family())
            .filter(move |k| k.alg.as_ref().is_none_or(|a| *a == alg))
            .map(|k| &k.key)
    }
}

/// Checks JWTs for `auth.jwt`.
pub struct Verifier {
    config: JwtConfig,
    validation: Validation,
    keys: Watched<KeySet>,
}

impl Verifier {
    /// A verifier of `config` (resolved: its key file path is absolute and was readable).
    pub fn new(config: &JwtConfig) -> Self {
        let mut validation = Validation::new(config.algorithms[0]);
        validation.algorithms = config.algorithms.clone();
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = config.leeway.as_secs();
        validation.validate_nbf = true;
        let path = config
            .jwks_file
            .as_ref()
            .or(config.public_key_file.as_ref())
            .expect("a resolved auth.jwt names a key file");
        let keys = if config.jwks_file.is_some() {
            Watched::new(path, "auth.jwt.jwks_file", KeySet::read_jwks)
        } else {
            Watched::new(path, "auth.jwt.public_key_file", KeySet::read_pem)
        };
        Self {
            config: config.clone(),
            validation,
            keys,
        }
    }

    /// The identity `token` proves, or why it proves none (said to the caller: it names the
    /// failed check, never the token).
    pub fn verify(&self, auth: &AuthConfig, token: &str) -> Result<Identity, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| describe(e.kind()))?;
        if !self.config.algorithms.contains(&header.alg) {
            return Err(describe(&ErrorKind::InvalidAlgorithm));
        }
        // jsonwebtoken refuses a validation listing algorithms of another family than the
        // key's, so each check lists only the token's own (already known to be accepted).
        let mut validation = self.validation.clone();
        validation.algorithms = vec![header.alg];
        let keys = self.keys.get();
        let mut error = ErrorKind::InvalidSignature;
        let mut claims = None;
        for key in keys.candidates(&header) {
            match jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, key, &validation) {
                Ok(data) => {
                    claims = Some(data.claims);
                    break;
                }
                // Another key may still verify it; any other failure is the token's own.
                Err(e) if *e.kind() == ErrorKind::InvalidSignature => {}
                Err(e) => {
                    error = e.into_kind();
                    break;
                }
            }
        }
        let claims = claims.ok_or_else(|| describe(&error))?;
        let name = match claim(&claims, &self.config.identity_claim) {
            Some(Value::String(name)) if !name.is_empty() && name.len() <= MAX_IDENTITY => name,
            _ => {
                return Err(format!(
                    "the JWT has no usable {:?} claim (a string of at most {MAX_IDENTITY} bytes) naming the caller",
                    self.config.identity_claim
                ));
            }
        };
        let roles = match claim(&claims, &self.config.roles_claim) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .filter_map(Role::from_name)
                .collect(),
            Some(Value::String(names)) => names
                .split_whitespace()
                .filter_map(Role::from_name)
                .collect(),
            _ => Vec::new(),
        };
        Ok(Identity::new(
            auth,
            super::jwt_identity(&self.config.issuer, name),
            roles,
        ))
    }
}

/// The claim at a dotted `path` (`realm_access.roles`).
fn claim<'a>(claims: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

fn describe(kind: &ErrorKind) -> String {
    let why = match kind {
        ErrorKind::ExpiredSignature => "it has expired".to_string(),
        ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_string(),
        ErrorKind::InvalidAudience => "its audience (aud) is not auth.jwt.audience".to_string(),
        ErrorKind::InvalidIssuer => "its issuer (iss) is not auth.jwt.issuer".to_string(),
        ErrorKind::InvalidSignature => "no configured key verifies its signature".to_string(),
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            "its algorithm is not one of auth.jwt.algorithms".to_string()
        }
        ErrorKind::MissingRequiredClaim(c) => format!("it has no {c:?} claim"),
        ErrorKind::InvalidClaimFormat(c) => format!("its {c:?} claim is malformed"),
        _ => "it is malformed".to_string(),
    };
    format!("the bearer token (a JWT) is not valid: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_jwt_shaped_tokens_are_taken_for_jwts() {
        assert!(looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("s3cret"));
        assert!(!looks_like_jwt("eyJ.a"));
        assert!(!looks_like_jwt("eyJa.b.c d"));
        assert!(!looks_like_jwt("abc.def.ghi"));
    }

    #[test]
    fn claims_are_found_by_dotted_path() {
        let claims: serde_json::Map<String, Value> =
            serde_json::from_str(r#"{"sub": "x", "realm_access": {"roles": ["reader"]}}"#).unwrap();
        assert_eq!(claim(&claims, "sub"), Some(&Value::from("x")));
        assert_eq!(
            claim(&claims, "realm_access.roles"),
            Some(&serde_json::json!(["reader"]))
        );
        assert_eq!(claim(&claims, "realm_access.nope"), None);
        assert_eq!(claim(&claims, "sub.deeper"), None);
    }
}
