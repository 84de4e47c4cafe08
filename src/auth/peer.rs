//! The bearer token one drover sends to another (a destination to its source in live
//! migration, a bulk job to the drover beside each node): from a file the config names, or
//! from `DROVER_PEER_TOKEN` for deployments that hand secrets over in the environment (systemd
//! credentials, Kubernetes secrets). The token itself is never in a message.

use secrecy::SecretString;

/// The variable the token is taken from when no file is configured.
pub const PEER_TOKEN_ENV: &str = "DROVER_PEER_TOKEN";

/// The token in file `path` (named by config key `key`), trimmed.
pub fn read_file(path: &std::path::Path, key: &str) -> Result<SecretString, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{key}: cannot read {}: {e}", path.display()))?;
    checked(&text, &format!("{key}: {}", path.display()))
}

/// The token of [`PEER_TOKEN_ENV`], if it is set.
pub fn from_env() -> Result<Option<SecretString>, String> {
    match std::env::var(PEER_TOKEN_ENV) {
        Ok(text) => checked(&text, PEER_TOKEN_ENV).map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "{PEER_TOKEN_ENV} holds characters a bearer token cannot have (expected visible ASCII)"
        )),
    }
}

/// A token as given, trimmed; an empty one is refused, since it would send no credentials
/// while the operator believes it does.
fn checked(text: &str, origin: &str) -> Result<SecretString, String> {
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{origin} is empty, expected a token"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{origin} holds characters a bearer token cannot have \
             (expected visible ASCII, no spaces)"
        ));
    }
    Ok(SecretString::from(token.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn a_token_is_trimmed_and_an_empty_or_spaced_one_refused_without_quoting_it() {
        assert_eq!(checked(" abc\n", "x").unwrap().expose_secret(), "abc");
        assert_eq!(
            checked(" \n", "x").unwrap_err(),
            "x is empty, expected a token"
        );
        let e = checked("se cret", "x").unwrap_err();
        assert!(e.contains("visible ASCII") && !e.contains("se cret"), "{e}");
    }
}
