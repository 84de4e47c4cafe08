//! What a job is called and what it moves, so that an operator can tell jobs apart in a list:
//! a name (given in the job file, or derived from its source and target), the source and the
//! target in words, and — once it has run — rows, bytes, duration and average rates.
//!
//! Names and descriptions are made of names only (keyspaces, tables, paths, buckets): never of
//! hosts, credentials or query strings, since job files carry secrets in URLs too.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{JobRecord, JobState};

/// The longest name kept, in characters: longer ones are cut (derived) or refused (given).
pub const MAX_NAME: usize = 200;

/// What a job is called and what it moves, fixed when it is submitted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The name an operator gave, or one derived from what the job moves.
    pub name: Option<String>,
    /// Where the job reads, in words (`ks.table`, `dynamodb:Orders`, ...).
    pub source: Option<String>,
    /// Where the job writes, in words.
    pub target: Option<String>,
}

impl Identity {
    /// A job that moves `source` to `target`, called `given` or else `source → target`.
    pub fn moving(given: Option<&str>, source: &str, target: &str) -> Self {
        let source = bounded(source);
        let target = bounded(target);
        let name = match given {
            Some(name) => bounded(name),
            None => bounded(&format!("{source} → {target}")),
        };
        Self {
            name: Some(name),
            source: Some(source),
            target: Some(target),
        }
    }

    /// A job called `name` that moves nothing that can be named.
    pub fn named(name: &str) -> Self {
        Self {
            name: Some(bounded(name)),
            source: None,
            target: None,
        }
    }
}

/// `text` fit for a name: control characters (line breaks, escapes) become spaces, and at most
/// [`MAX_NAME`] characters are kept (the last one `…` when cut).
pub fn bounded(text: &str) -> String {
    let clean: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.chars().count() <= MAX_NAME {
        return clean;
    }
    let mut cut: String = clean.chars().take(MAX_NAME - 1).collect();
    cut.push('…');
    cut
}

/// What lists and pages show of a job beside its state and progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The job's name; a job recorded without one (before names existed, or of a kind that
    /// names none) is called by its kind and the start of its id.
    pub name: String,
    /// Where it reads, in words.
    pub source: Option<String>,
    /// Where it writes, in words.
    pub target: Option<String>,
    /// Rows moved (written by a migration, read from the source by a validation) in the last
    /// run.
    pub rows: Option<u64>,
    /// Bytes moved in the last run.
    pub bytes: Option<u64>,
    /// How long the last run took (so far, while it runs).
    pub duration: Option<Duration>,
    /// Rows per second over the whole last run, once it has ended.
    pub average_rows_per_second: Option<f64>,
    /// Bytes per second over the whole last run, once it has ended.
    pub average_bytes_per_second: Option<f64>,
}

impl Summary {
    /// The summary of `record`, whose kind counts `moved` = (rows, bytes), at `now`.
    pub fn of(record: &JobRecord, moved: (Option<u64>, Option<u64>), now: DateTime<Utc>) -> Self {
        let duration = match (record.state, record.started_at, record.ended_at) {
            (JobState::Queued, ..) | (_, None, _) => None,
            (JobState::Running, Some(start), _) => (now - start).to_std().ok(),
            (_, Some(start), Some(end)) => (end - start).to_std().ok(),
            (_, Some(_), None) => None,
        };
        let ended = !record.state.is_active() && record.ended_at.is_some();
        let seconds = duration
            .filter(|_| ended)
            .map(|d| d.as_secs_f64())
            .filter(|s| *s > 0.0);
        let average = |n: Option<u64>| Some(n? as f64 / seconds?);
        let (rows, bytes) = moved;
        Self {
            name: name_of(record),
            source: record.source.clone(),
            target: record.target.clone(),
            rows,
            bytes,
            duration,
            average_rows_per_second: average(rows),
            average_bytes_per_second: average(bytes),
        }
    }
}

/// A job's name as every screen shows it: a job recorded without one (before names existed, or
/// of a kind that names none) is called by its kind and the start of its id.
pub fn name_of(record: &JobRecord) -> String {
    record
        .name
        .clone()
        .unwrap_or_else(|| format!("{} {}", record.kind, short_id(&record.id)))
}

/// The start of a job id that lists show: a UUIDv7's first 13 characters are its creation
/// millisecond, and any unique prefix names the job in the API, the CLI and the console.
pub fn short_id(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobfile::location_without_secrets;

    #[test]
    fn names_are_bounded_and_single_line() {
        assert_eq!(bounded("  a\nb\tc "), "a b c");
        let long = "x".repeat(500);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), MAX_NAME);
        assert!(cut.ends_with('…'));
        let id = Identity::moving(None, "ks.t", "ks2.t");
        assert_eq!(id.name.as_deref(), Some("ks.t → ks2.t"));
        let id = Identity::moving(Some("nightly"), "ks.t", "ks2.t");
        assert_eq!(id.name.as_deref(), Some("nightly"));
    }

    #[test]
    fn locations_lose_their_secrets() {
        assert_eq!(
            location_without_secrets("s3a://AKIA:s3cr3t@bucket/pre/fix?X-Amz-Signature=abc"),
            "s3a://bucket/pre/fix"
        );
        assert_eq!(location_without_secrets("s3://bucket#frag"), "s3://bucket");
        assert_eq!(
            location_without_secrets("/data/export/p.parquet"),
            "/data/export/p.parquet"
        );
    }
}
