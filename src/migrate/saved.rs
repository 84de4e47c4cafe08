//! The savepoints of one migration as an operator reads them: which files, and how much of the
//! work each records as done.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::JobConfig;
use super::place::Place;
use crate::savepoints::ranges::TokenRange;
use crate::savepoints::{Progress, SavepointError, identity};

/// A savepoint of a migration, with a summary of its progress.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavepointView {
    /// Name (`savepoint_<epochMillis>_<counter>.yaml`; rows of a table are named alike).
    pub name: String,
    /// Creation time, milliseconds since the epoch.
    pub epoch_millis: u64,
    /// Completed token ranges (merged intervals) recorded in it.
    pub token_ranges: usize,
    /// Share of the token ring recorded complete, 0 to 1.
    pub ring_fraction: f64,
    /// Completed DynamoDB segments recorded in it.
    pub segments: usize,
    /// Completed Parquet files recorded in it.
    pub parquet_files: usize,
}

/// Savepoints of a migration.
#[derive(Debug, Serialize, ToSchema)]
pub struct SavepointList {
    /// Where the savepoints are: a directory, `s3://bucket/prefix`, `gs://bucket/prefix`, or
    /// `table keyspace.table (job id)`.
    pub path: Option<String>,
    /// Newest first; only those of this migration (same source, target and renames).
    pub savepoints: Vec<SavepointView>,
    /// Why the list is empty without reading the savepoints, when it is so: the job ended and
    /// the credentials of its bucket went with its kept job file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The savepoints of the migration whose (redacted) job document is `spec`: those of its
/// savepoint place that belong to the same migration. `job_file` is the job as submitted,
/// while the daemon keeps it (a bucket or table is reached with its credentials); without it
/// the redacted document is used, which reaches a directory, or a bucket through the
/// environment's credentials. Unreadable savepoints are left out.
pub async fn list(
    spec: &serde_json::Value,
    job_file: Option<String>,
) -> Result<SavepointList, SavepointError> {
    if spec.get("savepoints").is_none_or(|s| s.is_null()) {
        return Ok(SavepointList {
            path: None,
            savepoints: vec![],
            note: None,
        });
    }
    // The savepoints' own credentials were redacted and the job file is gone: reaching the
    // bucket without them would only try the environment's (the metadata service, slowly).
    let redacted = |v: &serde_json::Value| v.to_string().contains(crate::jobfile::REDACTED);
    let in_target = spec
        .pointer("/savepoints/target/type")
        .and_then(|t| t.as_str())
        .is_some_and(|t| t.starts_with("target-"));
    let credentials_gone = job_file.is_none()
        && (redacted(&spec["savepoints"]) || in_target && redacted(&spec["target"]));
    let text = job_file.unwrap_or_else(|| {
        // Secrets are redacted: parse without them (a redacted key is left out).
        let mut unredacted = spec.clone();
        strip_redacted(&mut unredacted);
        yaml_serde::to_string(&unredacted).unwrap_or_default()
    });
    let config = JobConfig::parse(&text).map_err(|e| SavepointError::Config(e.to_string()))?;
    let Some(sp) = &config.savepoints else {
        return Ok(SavepointList {
            path: None,
            savepoints: vec![],
            note: None,
        });
    };
    let mut base = crate::jobfile::redacted_json(&text);
    let place = Place::new(sp, &config.target, &mut base, None)
        .map_err(|e| SavepointError::Config(e.to_string()))?;
    let wanted = identity(&base);
    if credentials_gone {
        return Ok(SavepointList {
            path: Some(place.describe()),
            savepoints: vec![],
            note: Some(
                "the job has ended and its credentials for the savepoints were deleted with its kept job file; they are still where path says".into(),
            ),
        });
    }
    let Some(store) = place.reader().await? else {
        return Ok(SavepointList {
            path: Some(place.describe()),
            savepoints: vec![],
            note: None,
        });
    };
    let views = tokio::task::spawn_blocking(move || -> Result<_, SavepointError> {
        let mut out = Vec::new();
        for info in store.list()? {
            let Ok(sp) = store.read(&info) else { continue };
            if identity(&sp.document) != wanted {
                continue;
            }
            let Ok(p) = Progress::from_document(&sp.document) else {
                continue;
            };
            out.push(SavepointView {
                name: info.name,
                epoch_millis: info.epoch_millis,
                token_ranges: p.token_ranges.ranges().len(),
                ring_fraction: p.token_ranges.width() as f64 / TokenRange::FULL.width() as f64,
                segments: p.segments.len(),
                parquet_files: p.parquet_files.len(),
            });
        }
        Ok(out)
    })
    .await
    .expect("listing savepoints does not panic")?;
    Ok(SavepointList {
        path: Some(place.describe()),
        savepoints: views,
        note: None,
    })
}

/// Removes every key whose value is the redaction marker.
fn strip_redacted(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| v.as_str() != Some(crate::jobfile::REDACTED));
            map.values_mut().for_each(strip_redacted);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_redacted),
        _ => {}
    }
}
