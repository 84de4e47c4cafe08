//! Connectors: one folder per data system, each holding everything that system needs (its
//! job-file sections, schema checks, scans, writers, value codec and error classification).
//! The engine (`migrate`) and the validator drive them through the traits of [`seam`].
//!
//! Registering a connector is one variant in [`SourceConfig`] and/or [`TargetConfig`] (with
//! its `type` names in their `parse`) and one arm where the engine opens a pair.

pub mod cql;
pub mod seam;

use crate::config::yaml;
use crate::jobfile::JobConfigError;

/// The source of a job.
#[derive(Debug, Clone)]
pub enum SourceConfig {
    /// A Cassandra or ScyllaDB table (`type: cassandra` or `type: scylla`).
    Cql(cql::CqlSource),
}

/// The target of a job.
#[derive(Debug, Clone)]
pub enum TargetConfig {
    /// A Cassandra or ScyllaDB table (`type: cassandra` or `type: scylla`).
    Cql(cql::CqlTarget),
}

/// The `type` values a job file may name, for messages.
const KNOWN_TYPES: &[&str] = &["cassandra", "scylla", "dynamodb", "dynamo", "parquet"];

impl SourceConfig {
    /// Reads the `source` section with the connector its `type` names.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        match side_type(text, "source", &value)?.as_str() {
            "cassandra" | "scylla" => Ok(Self::Cql(cql::CqlSource::parse(text, value)?)),
            other => Err(unsupported(text, "source.type", other)),
        }
    }
}

impl TargetConfig {
    /// Reads the `target` section with the connector its `type` names.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        match side_type(text, "target", &value)?.as_str() {
            "cassandra" | "scylla" => Ok(Self::Cql(cql::CqlTarget::parse(text, value)?)),
            other => Err(unsupported(text, "target.type", other)),
        }
    }
}

fn unsupported(text: &str, key: &str, value: &str) -> JobConfigError {
    if KNOWN_TYPES.contains(&value) {
        JobConfigError::at(
            text,
            key,
            format!(
                "{value:?} is not supported by this version of drover yet; supported: cassandra, scylla"
            ),
        )
    } else {
        JobConfigError::at(
            text,
            key,
            format!("unknown type {value:?}, expected cassandra or scylla"),
        )
    }
}

fn side_type(text: &str, side: &str, value: &yaml_serde::Value) -> Result<String, JobConfigError> {
    let key = format!("{side}.type");
    match value.get("type") {
        Some(yaml_serde::Value::String(t)) => Ok(t.clone()),
        Some(_) => Err(JobConfigError::at(
            text,
            &key,
            "must be a string such as cassandra or scylla",
        )),
        None if value.is_mapping() => Err(JobConfigError {
            message: format!("{key}: missing; expected cassandra or scylla"),
            line: yaml::line_of(text, side),
        }),
        None => Err(JobConfigError::at(
            text,
            side,
            "must be a mapping with a type",
        )),
    }
}
