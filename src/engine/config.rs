//! Job files in ScyllaDB Migrator's format (`source`, `target`, `renames`, `skipTokenRanges`,
//! `savepoints`, `validation`, ...), so an operator's existing `config.yaml` runs unchanged.
//!
//! Every error names the key path and, when the file is YAML, its line. `source` and `target`
//! are chosen by their `type`, so they are parsed in two steps: the document first, then each
//! side as the struct of its type.

use serde::Deserialize;

use crate::config::yaml;
pub use crate::connectors::{SourceConfig, TargetConfig};
use crate::jobfile;
pub use crate::jobfile::{
    JobConfigError, REDACTED, Rename, SavepointsConfig, ValidationConfig, is_secret_key, redact,
    redacted_json,
};
use crate::savepoints::Location;

/// A whole migration job.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// drover: `name`, what lists and pages call the job (at most 200 characters); unset:
    /// `source → target` in words. ScyllaDB Migrator ignores the key (its config decoder
    /// skips keys it does not know), so a job file with a name still runs there.
    pub name: Option<String>,
    /// Where rows come from.
    pub source: SourceConfig,
    /// Where rows go.
    pub target: TargetConfig,
    /// Column renames, source name to target name.
    pub renames: Vec<Rename>,
    /// The work the job file says is complete, skipped by this run: its source's keys
    /// (`skipTokenRanges`, `skipSegments`, `skipParquetFiles`, ...; each connector declares
    /// its own). The keys of other sources are accepted and ignored, as ScyllaDB Migrator
    /// writes `skipSegments: []` into every savepoint.
    pub skip: crate::savepoints::Progress,
    /// Savepoint settings.
    pub savepoints: Option<SavepointsConfig>,
    /// Validator settings (`drover validate`, `/api/v1/validations`); migrations ignore them.
    pub validation: ValidationConfig,
    /// drover: the job's units shared by several daemons.
    pub coordination: Option<CoordinationConfig>,
    /// drover: `retryForSeconds`, how long one read or write is retried while its error may
    /// go away by itself (too few replicas up for the consistency level, timeouts, a node
    /// overloaded or unreachable) before the job fails; meanwhile the job's phase is
    /// `waiting: <why>`. 1 to 604800, default 600.
    pub retry_for: std::time::Duration,
}

// ---- raw shapes, as written in the file ----

/// The top-level keys of a job file, besides the connectors' progress keys.
// Unknown keys are refused by hand, after the progress keys are taken out: serde's
// `deny_unknown_fields` cannot know the connectors' keys.
const JOB_KEYS: &[&str] = &[
    "name",
    "source",
    "target",
    "renames",
    "savepoints",
    "validation",
    "coordination",
    "retryForSeconds",
];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawJob {
    #[serde(default)]
    name: Option<yaml_serde::Value>,
    source: yaml_serde::Value,
    target: yaml_serde::Value,
    // `renames: null` is no renames, as in ScyllaDB Migrator.
    #[serde(default)]
    renames: Option<Vec<Rename>>,
    #[serde(default)]
    savepoints: Option<yaml_serde::Value>,
    #[serde(default)]
    validation: Option<yaml_serde::Value>,
    #[serde(default)]
    coordination: Option<yaml_serde::Value>,
    #[serde(default)]
    retry_for_seconds: Option<u64>,
}

impl JobConfig {
    /// Parses a job file (YAML; JSON is YAML too).
    pub fn parse(text: &str) -> Result<Self, JobConfigError> {
        if text.contains(REDACTED) {
            return Err(JobConfigError {
                message: format!(
                    "this config contains {REDACTED} values: it is a savepoint, whose secrets were removed. \
                     Submit the original job config instead; with savepoints.autoResume (the default) the \
                     job resumes from the newest savepoint by itself"
                ),
                line: text
                    .lines()
                    .position(|l| l.contains(REDACTED))
                    .map(|i| i + 1),
            });
        }
        let top = top_keys(text)?;
        let raw: RawJob = yaml::from_str(text).map_err(|e| {
            let (message, line) = yaml::describe_error(&e);
            JobConfigError { message, line }
        })?;
        let source = SourceConfig::parse(text, raw.source)?;
        let target = TargetConfig::parse(text, raw.target)?;
        crate::connectors::check_pair(text, &source, &target)?;
        let skip = skip_progress(text, &top, &source)?;
        let name = match raw.name.filter(|v| !v.is_null()) {
            None => None,
            Some(yaml_serde::Value::String(name)) => Some(parse_name(text, &name)?),
            Some(_) => {
                return Err(JobConfigError::at(
                    text,
                    "name",
                    "must be a string: what lists call the job",
                ));
            }
        };
        let mut config = JobConfig {
            name,
            source,
            target,
            renames: raw.renames.unwrap_or_default(),
            skip,
            savepoints: raw
                .savepoints
                .filter(|v| !v.is_null())
                .map(|v| jobfile::section(text, "savepoints", v))
                .transpose()?,
            validation: raw
                .validation
                .filter(|v| !v.is_null())
                .map(|v| jobfile::section(text, "validation", v))
                .transpose()?
                .unwrap_or_default(),
            coordination: None,
            retry_for: match raw.retry_for_seconds {
                None => crate::connectors::seam::retry::RETRY_FOR,
                Some(s @ 1..=604_800) => std::time::Duration::from_secs(s),
                Some(s) => {
                    return Err(JobConfigError::at(
                        text,
                        "retryForSeconds",
                        format!("{s} is out of range: 1 to 604800 seconds (7 days)"),
                    ));
                }
            },
        };
        config.validate(text)?;
        if let Some(c) = raw.coordination.filter(|v| !v.is_null()) {
            if let Some(why) = config.source.unshareable() {
                return Err(JobConfigError::at(text, "coordination", why));
            }
            config.coordination = Some(coordination::parse(
                text,
                c,
                &config.target,
                config.savepoints.is_some(),
            )?);
        }
        if let Some(sp) = &mut config.savepoints {
            let location = if let Some(target) = sp.target.take() {
                savepoints::target(text, sp.path.is_some(), &target, &config.target)?
            } else {
                match sp.path.as_ref().and_then(|p| p.to_str()) {
                    Some(p) if !p.trim().is_empty() => savepoints::uri(text, p)?,
                    _ => {
                        return Err(JobConfigError::at(
                            text,
                            "savepoints",
                            "savepoints.path or savepoints.target is required (where savepoints are kept)",
                        ));
                    }
                }
            };
            if let Location::Dir(d) = &location {
                sp.path = Some(d.clone());
            }
            if matches!(location, Location::Table(_)) {
                sp.interval_seconds
                    .get_or_insert(savepoints::TABLE_INTERVAL_SECONDS);
            }
            sp.location = Some(location);
        }
        if let Some(sp) = &config.savepoints {
            if sp.interval_seconds.is_none() {
                return Err(JobConfigError::at(
                    text,
                    "savepoints",
                    "savepoints.intervalSeconds is required with savepoint files and buckets (seconds between savepoints; only target-table defaults it, to 300)",
                ));
            }
            // A timer of u64::MAX seconds overflows the clock it is added to.
            JobConfigError::check_range(
                text,
                "savepoints.intervalSeconds",
                sp.interval_seconds,
                1,
                jobfile::MAX_INTERVAL_SECONDS,
            )?;
            JobConfigError::check_range(
                text,
                "savepoints.keep",
                Some(as_u64(sp.keep)),
                1,
                jobfile::MAX_KEEP,
            )?;
        }
        Ok(config)
    }

    fn validate(&self, text: &str) -> Result<(), JobConfigError> {
        let v = &self.validation;
        // Examples are held in memory and in every savepoint; tolerances are scaled to
        // microseconds. Beyond these bounds a value is a typo, not a tolerance.
        JobConfigError::check_range(
            text,
            "validation.failuresToFetch",
            Some(as_u64(v.failures_to_fetch)),
            0,
            jobfile::MAX_FAILURES_TO_FETCH,
        )?;
        for (key, value) in [
            ("validation.ttlToleranceMillis", v.ttl_tolerance_millis),
            (
                "validation.writetimeToleranceMillis",
                v.writetime_tolerance_millis,
            ),
            ("validation.timestampMsTolerance", v.timestamp_ms_tolerance),
        ] {
            JobConfigError::check_range(text, key, Some(value), 0, jobfile::MAX_TOLERANCE_MILLIS)?;
        }
        if !v.floating_point_tolerance.is_finite() || v.floating_point_tolerance < 0.0 {
            return Err(JobConfigError::at(
                text,
                "validation.floatingPointTolerance",
                "must be a number of at least 0",
            ));
        }
        let mut hashed = std::collections::HashSet::new();
        for (i, c) in v.hash_columns.iter().flatten().enumerate() {
            if c.trim().is_empty() {
                return Err(JobConfigError::at(
                    text,
                    "validation.hashColumns",
                    format!("hashColumns[{i}] is blank; name a column"),
                ));
            }
            if !hashed.insert(c.to_lowercase()) {
                return Err(JobConfigError::at(
                    text,
                    "validation.hashColumns",
                    format!(
                        "hashColumns[{i}]: column {:?} is listed twice (names compare without case)",
                        jobfile::cap(c)
                    ),
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (i, r) in self.renames.iter().enumerate() {
            if !seen.insert(r.from.as_str()) {
                return Err(JobConfigError::at(
                    text,
                    "renames",
                    format!("renames[{i}]: column {:?} is renamed twice", r.from),
                ));
            }
        }
        Ok(())
    }

    /// What the job is called and moves: its `name`, or `source → target` in words.
    pub fn identity(&self) -> crate::jobs::Identity {
        crate::jobs::Identity::moving(
            self.name.as_deref(),
            &self.source.describe(),
            &self.target.describe(),
        )
    }

    /// The target column name of a source column.
    pub fn target_name<'a>(&'a self, source_column: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|r| r.from == source_column)
            .map_or(source_column, |r| r.to.as_str())
    }
}

/// The job file's top level, its keys checked first (as serde's `deny_unknown_fields` would,
/// which cannot know the connectors' keys): a key that is neither a job key nor a key of work
/// done is refused, naming it and its line; so is a run's own record (`bulkWriteRun`,
/// `streamPositions`, `parquetFileVersions`), which only a savepoint holds.
fn top_keys(text: &str) -> Result<yaml_serde::Mapping, JobConfigError> {
    let top: yaml_serde::Value = yaml::from_str(text).map_err(|e| {
        let (message, line) = yaml::describe_error(&e);
        JobConfigError { message, line }
    })?;
    let yaml_serde::Value::Mapping(top) = top else {
        // Not a mapping: the typed parse says what was expected.
        return Ok(yaml_serde::Mapping::new());
    };
    let work_keys = || {
        crate::connectors::progress_keys()
            .iter()
            .filter(|k| k.shape.is_work())
    };
    for key in top.keys() {
        let name = match key.as_str() {
            Some(name) => name.to_string(),
            None => yaml_serde::to_string(key)
                .unwrap_or_default()
                .trim()
                .to_string(),
        };
        if JOB_KEYS.contains(&name.as_str()) || work_keys().any(|k| k.name == name) {
            continue;
        }
        let message = if crate::connectors::progress_keys()
            .iter()
            .any(|k| k.name == name)
        {
            format!(
                "`{name}` is a run's own record, which only savepoints hold: submit the original job config (with savepoints.autoResume, the default, it resumes from the newest savepoint by itself)"
            )
        } else {
            let expected: Vec<String> = JOB_KEYS
                .iter()
                .copied()
                .chain(work_keys().map(|k| k.name))
                .map(|k| format!("`{k}`"))
                .collect();
            format!(
                "unknown field `{}`, expected one of {}",
                jobfile::cap(&name),
                expected.join(", ")
            )
        };
        return Err(JobConfigError {
            message,
            line: yaml::line_of(text, &name),
        });
    }
    Ok(top)
}

/// The work the job file says is complete: the keys of its source (`top` holds the others,
/// accepted and ignored), each checked (numbers are numbers, ranges are ranges), then checked
/// against the source's settings.
fn skip_progress(
    text: &str,
    top: &yaml_serde::Mapping,
    source: &SourceConfig,
) -> Result<crate::savepoints::Progress, JobConfigError> {
    let mut skip = crate::savepoints::Progress::default();
    for &key in source.progress_keys() {
        let Some(value) = top.get(key.name).filter(|v| !v.is_null()) else {
            continue;
        };
        let json = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        let done = crate::savepoints::Done::parse(key, &json)
            .map_err(|m| JobConfigError::at(text, key.name, m))?;
        skip.insert(key, done);
    }
    source.check_progress(text, &skip)?;
    Ok(skip)
}

/// A given `name`: not blank, at most [`MAX_NAME`](crate::jobs::identity::MAX_NAME)
/// characters, one line.
fn parse_name(text: &str, name: &str) -> Result<String, JobConfigError> {
    use crate::jobs::identity::MAX_NAME;
    let name = name.trim();
    if name.is_empty() {
        return Err(JobConfigError::at(
            text,
            "name",
            "is blank; give the job a name, or leave the key out for source → target",
        ));
    }
    let chars = name.chars().count();
    if chars > MAX_NAME {
        return Err(JobConfigError::at(
            text,
            "name",
            format!("is {chars} characters long; at most {MAX_NAME}"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(JobConfigError::at(
            text,
            "name",
            "must be one line, without control characters",
        ));
    }
    Ok(name.to_string())
}

fn as_u64(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

mod coordination;
mod savepoints;
pub use coordination::CoordinationConfig;
pub(crate) use savepoints::local_path;
pub use savepoints::table_name;

#[cfg(test)]
mod tests;

/// The job file `text` parsed, and as a redacted JSON document (what savepoints and records
/// keep). Parsing is CPU work on up to a request body's worth of text, so it runs off the async
/// workers: the daemon keeps answering meanwhile, and `server.request_timeout` can end the
/// request.
pub async fn parsed(
    text: &str,
) -> Result<(JobConfig, serde_json::Value), crate::engine::EngineError> {
    let owned = text.to_string();
    let (config, base) =
        tokio::task::spawn_blocking(move || (JobConfig::parse(&owned), redacted_json(&owned)))
            .await
            .map_err(|e| crate::engine::EngineError::Failed(format!("parsing the job: {e}")))?;
    Ok((config?, base))
}
