//! The savepoints of one migration as an operator reads them: which files, and how much of the
//! work each records as done.

use serde::Serialize;
use utoipa::ToSchema;

use crate::savepoints::ranges::TokenRange;
use crate::savepoints::{FileStore, Progress, SavepointError, SavepointStore, identity};

/// A savepoint of a migration, with a summary of its progress.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavepointView {
    /// File name (`savepoint_<epochMillis>_<counter>.yaml`).
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
    /// Directory of the savepoint files.
    pub path: Option<String>,
    /// Newest first; only those of this migration (same source, target and renames).
    pub savepoints: Vec<SavepointView>,
}

/// The savepoints of the migration whose (redacted) job document is `spec`: those in its
/// `savepoints.path` that belong to the same migration. Unreadable savepoints are left out.
pub async fn list(spec: &serde_json::Value) -> Result<SavepointList, SavepointError> {
    // `savepoints.path`, or the path of `savepoints.target` of type filesystem (the job was
    // accepted, so it is one of the two).
    let Some(path) = spec
        .pointer("/savepoints/path")
        .or_else(|| spec.pointer("/savepoints/target/path"))
        .and_then(|p| p.as_str())
        .map(super::config::local_path)
    else {
        return Ok(SavepointList {
            path: None,
            savepoints: vec![],
        });
    };
    let wanted = identity(spec);
    let dir = path.clone();
    let views = tokio::task::spawn_blocking(move || -> Result<_, SavepointError> {
        if !dir.is_dir() {
            return Ok(vec![]);
        }
        let store = FileStore::reader(&dir);
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
        path: Some(path.display().to_string()),
        savepoints: views,
    })
}
