//! The key a source `where` filter is sealed with before a savepoint document is stored where
//! others can read it (a table of the target database), and the job id derived from a sealed
//! document. A process-wide key: the daemon sets it from `jobs.savepoint_filter_key_file` at
//! start, `drover migrate` from `DROVER_SAVEPOINT_FILTER_KEY_FILE`.

use hmac::Mac;
use sha2::Digest;

use super::SavepointError;

/// The prefix of a filter stored as its keyed digest.
pub const SEALED_PREFIX: &str = "hmac-sha256:";

static FILTER_KEY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

/// Sets the key that a source `where` filter is sealed with in target-table savepoints
/// (daemon config `jobs.savepoint_filter_key_file`). Once per process.
pub fn set_filter_key(key: Vec<u8>) {
    let _ = FILTER_KEY.set(key);
}

/// Replaces `source.where` of a redacted job document by its HMAC-SHA256 under the daemon's
/// key: ScyllaDB Migrator's documentation stores an unsalted SHA-256 there, which anyone who
/// can read the table can confirm guesses against. Without a key, a job with a filter is
/// refused rather than storing the filter or a guessable digest.
pub fn seal_filter(document: &mut serde_json::Value) -> Result<(), SavepointError> {
    let Some(filter) = document
        .pointer_mut("/source/where")
        .filter(|w| w.is_string())
    else {
        return Ok(());
    };
    let Some(key) = FILTER_KEY.get() else {
        return Err(SavepointError::Config(
            "source.where: savepoints in the target database store a filter as a keyed digest, and the daemon has no key: set jobs.savepoint_filter_key_file in the daemon config (or DROVER_SAVEPOINT_FILTER_KEY_FILE for drover migrate)".into(),
        ));
    };
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(filter.as_str().unwrap_or_default().as_bytes());
    let digest = mac.finalize().into_bytes();
    *filter = serde_json::Value::String(format!("{SEALED_PREFIX}{}", hex(&digest)));
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The job id of a migration without an explicit `jobId`: stable for the same source, target
/// and renames (the identity of its redacted, sealed document), whatever else changes.
pub fn derived_job_id(sealed_document: &serde_json::Value) -> String {
    let identity = super::identity(sealed_document);
    let digest = sha2::Sha256::digest(identity.to_string().as_bytes());
    format!("job-{}", &hex(&digest)[..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(extra: &str) -> serde_json::Value {
        crate::jobfile::redacted_json(&format!(
            "source:\n  type: cassandra\n  host: h\n  port: 9042\n  keyspace: ks\n  table: t\n  where: \"v = 'x'\"\ntarget:\n  type: scylla\n  host: d\n  port: 9042\n  keyspace: ks\n  table: t\n{extra}"
        ))
    }

    #[test]
    fn the_job_id_follows_the_identity_and_the_filter_is_sealed_with_the_key() {
        set_filter_key(b"0123456789abcdef".to_vec());
        let sealed = |extra: &str| {
            let mut d = doc(extra);
            seal_filter(&mut d).unwrap();
            d
        };
        let plain = sealed("");
        let filter = plain["source"]["where"].as_str().unwrap();
        assert!(
            filter.starts_with(SEALED_PREFIX) && !filter.contains("v = "),
            "{filter}"
        );
        // Not a plain SHA-256 of the filter: a reader of the table cannot confirm guesses.
        let unsalted = hex(&sha2::Sha256::digest(b"v = 'x'"));
        assert!(!filter.contains(&unsalted));
        let id = derived_job_id(&plain);
        assert!(id.starts_with("job-") && id.len() == 36, "{id}");
        // Progress, savepoint and validation settings and tuning keys do not change it.
        for extra in [
            "skipTokenRanges: [[1, 2]]\nsavepoints:\n  path: /x\n  intervalSeconds: 5\n",
            "validation:\n  failuresToFetch: 3\n",
        ] {
            assert_eq!(derived_job_id(&sealed(extra)), id, "{extra}");
        }
        let renamed = sealed("renames:\n  - from: a\n    to: b\n");
        assert_ne!(derived_job_id(&renamed), id);
    }
}
