//! The savepoints of one migration as an operator reads them: which files, and how much of the
//! work each records as done.

use serde::Serialize;
use utoipa::ToSchema;

use crate::engine::config::JobConfig;
use crate::engine::place::Place;
use crate::savepoints::ranges::TokenRange;
use crate::savepoints::{Done, Progress, SavepointError, Shape, TOKEN_RANGES, identity};

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
    /// Completed numbered units recorded in it (DynamoDB scan segments).
    pub segments: usize,
    /// Completed files recorded in it whose names the log lists (Parquet files).
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
    // A directory needs nothing of the job but its path (the job file may be gone, and the
    // redacted document does not parse: its secrets are missing).
    let dir = spec
        .pointer("/savepoints/path")
        .or_else(|| {
            spec.pointer("/savepoints/target")
                .filter(|t| matches!(t["type"].as_str(), Some("filesystem" | "path")))
                .and_then(|t| t.get("path"))
        })
        .and_then(|p| p.as_str())
        .filter(|p| !p.contains("://"));
    let (place, wanted) = match (dir, job_file) {
        (Some(dir), _) => (
            Place::directory(crate::engine::config::local_path(dir)),
            identity(spec),
        ),
        (None, Some(text)) => {
            let config =
                JobConfig::parse(&text).map_err(|e| SavepointError::Config(e.to_string()))?;
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
            (place, identity(&base))
        }
        (None, None) => {
            // The job ended and its kept job file went with its credentials: a bucket or
            // table is not reached without them (the environment's would be tried, slowly).
            return Ok(SavepointList {
                path: spec
                    .pointer("/savepoints/path")
                    .and_then(|p| p.as_str())
                    .map(str::to_string),
                savepoints: vec![],
                note: Some(
                    "the job has ended, and the credentials its savepoints are read with went with its kept job file; the savepoints are still where the job's savepoints section says".into(),
                ),
            });
        }
    };
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
            let Ok(p) = Progress::from_document(&sp.document, crate::connectors::progress_keys())
            else {
                continue;
            };
            let ranges = p.ranges(&TOKEN_RANGES);
            let (mut segments, mut parquet_files) = (0, 0);
            for (key, done) in p.entries() {
                match done {
                    Done::Numbers(n) => segments += n.len(),
                    Done::Names(n) if key.shape == (Shape::Names { listed: true }) => {
                        parquet_files += n.len();
                    }
                    _ => {}
                }
            }
            out.push(SavepointView {
                name: info.name,
                epoch_millis: info.epoch_millis,
                token_ranges: ranges.ranges().len(),
                ring_fraction: ranges.width() as f64 / TokenRange::FULL.width() as f64,
                segments,
                parquet_files,
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
