//! The names a request puts in a path (an upload's, a snapshot's), checked as Cassandra
//! Sidecar checks them: only these ever become parts of a path on disk, so none can climb out
//! of the directory it is meant for.

use std::sync::LazyLock;

use regex::Regex;

/// A name a path may not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Malformed (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// A keyspace no upload or snapshot may touch (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
}

static UPLOAD_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9a-fA-F:-]{36,110}$").expect("a valid pattern"));
static UNQUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$").expect("a valid pattern"));
static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z_0-9]{1,48}$").expect("a valid pattern"));
// Sidecar's pattern leaves its dots unescaped; here they are dots, so a component is one
// plain file name (never `..`, never a separator).
static COMPONENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9_-]+(\.db|\.cql|\.json|\.crc32|TOC\.txt)$").expect("a valid pattern")
});

/// Keyspaces no upload may touch besides the system keyspaces a job may not write to either
/// ([`super::SYSTEM_KEYSPACES`]): the Sidecar's own.
const FORBIDDEN_KEYSPACES: &[&str] = &["sidecar_internal"];

/// An upload id: 36 to 110 hex digits, dashes and colons (a UUID, or a bulk writer's longer
/// composite id).
pub fn upload_id(id: &str) -> Result<&str, NameError> {
    if UPLOAD_ID.is_match(id) {
        Ok(id)
    } else {
        Err(NameError::Invalid(format!(
            "Invalid upload id is supplied, uploadId={}: expected 36 to 110 characters of hex digits, '-' and ':'",
            crate::answer::cap(id)
        )))
    }
}

/// A keyspace or table name, without the double quotes a client may put around it.
fn name<'a>(what: &str, raw: &'a str) -> Result<&'a str, NameError> {
    let quoted = raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"');
    let ok = if quoted {
        QUOTED.is_match(&raw[1..raw.len() - 1])
    } else {
        UNQUOTED.is_match(raw)
    };
    if !ok {
        return Err(NameError::Invalid(format!(
            "Invalid characters in {what}: {}",
            crate::answer::cap(raw)
        )));
    }
    Ok(if quoted { &raw[1..raw.len() - 1] } else { raw })
}

/// A keyspace name that uploads may write to: not a system keyspace, decided as for a job's
/// target (a list of its own let `system_cluster_metadata` through), in any case.
pub fn keyspace(raw: &str) -> Result<&str, NameError> {
    let ks = name("keyspace", raw)?;
    let lower = ks.to_ascii_lowercase();
    if crate::cassandra::SYSTEM_KEYSPACES.contains(&lower.as_str())
        || FORBIDDEN_KEYSPACES.contains(&lower.as_str())
    {
        return Err(NameError::Forbidden(format!(
            "Forbidden keyspace: {ks} (a system keyspace: uploads may not write to it)"
        )));
    }
    Ok(ks)
}

/// A table name.
pub fn table(raw: &str) -> Result<&str, NameError> {
    name("table name", raw)
}

/// A component's file name (`nb-1-big-Data.db`, `nb-1-big-TOC.txt`, ...).
pub fn component(raw: &str) -> Result<&str, NameError> {
    if COMPONENT.is_match(raw) {
        Ok(raw)
    } else {
        Err(NameError::Invalid(format!(
            "Invalid component name: {}",
            crate::answer::cap(raw)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_sidecar_checks_them() {
        assert!(upload_id("0190c0de-7d3e-7cbe-8a7c-0123456789ab").is_ok());
        assert!(upload_id("1-0-0190c0de-7d3e-7cbe-8a7c-0123456789ab-0190c0de-7d3e-7cbe").is_ok());
        assert!(upload_id("short").is_err());
        assert!(upload_id("../../../../../../../../../../../../etc/passwd").is_err());
        assert_eq!(keyspace("ks_1").unwrap(), "ks_1");
        assert_eq!(keyspace("\"Ks\"").unwrap(), "Ks");
        assert!(matches!(keyspace("system"), Err(NameError::Forbidden(_))));
        assert!(matches!(
            keyspace("System_Schema"),
            Err(NameError::Forbidden(_))
        ));
        for ks in [
            "system_cluster_metadata",
            "\"System_Auth\"",
            "sidecar_internal",
        ] {
            assert!(matches!(keyspace(ks), Err(NameError::Forbidden(_))), "{ks}");
        }
        assert!(keyspace("1ks").is_err());
        assert!(table("t/..").is_err());
        assert!(table("\"\"").is_err());
        assert!(component("nb-1-big-Data.db").is_ok());
        assert!(component("nb-1-big-TOC.txt").is_ok());
        assert!(component("nb-1-big-Digest.crc32").is_ok());
        for bad in [
            "../nb-1-big-Data.db",
            "..",
            "ks$t-nb-1-big-Data.db",
            "nb-1-big-Dataxdb",
            "a/b-Data.db",
            "",
        ] {
            assert!(component(bad).is_err(), "{bad}");
        }
    }
}
