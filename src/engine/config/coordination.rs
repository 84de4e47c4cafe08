//! `coordination`: one job shared by several daemons, its units leased through a table of
//! the target database (drover's key; ScyllaDB Migrator runs one Spark job per migration).

use serde::Deserialize;

use super::savepoints::table_name;
use crate::connectors::TargetConfig;
use crate::jobfile::{self, JobConfigError};

/// The default lease of a unit, in seconds.
pub const DEFAULT_LEASE_SECONDS: u64 = 30;

/// Where a shared job's units are leased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinationConfig {
    /// Keyspace of the unit table (resolved; default: `target.keyspace`).
    pub keyspace: String,
    /// The unit table (default `drover_units`; its lease record is `<table>_leases`).
    pub table: String,
    /// The job's partition: every daemon given the same job must use the same id (derived
    /// from the job's identity when not given, like target-table savepoints).
    pub job_id: Option<String>,
    /// How long a unit stays leased to a daemon that stopped renewing it (a dead one).
    pub lease_seconds: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Raw {
    #[serde(rename = "type")]
    kind: String,
    keyspace: Option<String>,
    table: Option<String>,
    job_id: Option<String>,
    lease_seconds: Option<u64>,
}

/// Reads `coordination`.
pub(super) fn parse(
    text: &str,
    value: yaml_serde::Value,
    target: &TargetConfig,
    has_savepoints: bool,
) -> Result<CoordinationConfig, JobConfigError> {
    let raw: Raw = jobfile::section(text, "coordination", value)?;
    if raw.kind != "target-table" {
        return Err(JobConfigError::at(
            text,
            "coordination.type",
            format!(
                "unknown type {:?}, expected target-table (units leased through a table of the target database)",
                jobfile::cap(&raw.kind)
            ),
        ));
    }
    let Some(own_keyspace) = target.own_tables_keyspace() else {
        return Err(JobConfigError::at(
            text,
            "coordination",
            "type target-table needs a Cassandra or ScyllaDB target (target.type cassandra or scylla)",
        ));
    };
    if has_savepoints {
        return Err(JobConfigError::at(
            text,
            "coordination",
            "a shared job keeps its progress per unit in the coordination table, which every daemon reads; leave savepoints out (resubmitting the job continues from that table)",
        ));
    }
    let keyspace = match raw.keyspace.filter(|k| !k.trim().is_empty()) {
        Some(k) => table_name(text, "coordination.keyspace", &k)?,
        None => own_keyspace,
    };
    let table = match raw.table.filter(|k| !k.trim().is_empty()) {
        Some(k) => table_name(text, "coordination.table", &k)?,
        None => crate::connectors::COORDINATION_TABLE.into(),
    };
    if table.len() > 41 {
        return Err(JobConfigError::at(
            text,
            "coordination.table",
            "must be at most 41 characters (its lease record is <table>_leases, and CQL names end at 48)",
        ));
    }
    if raw
        .job_id
        .as_deref()
        .is_some_and(|j| j.trim().is_empty() || j.len() > 200)
    {
        return Err(JobConfigError::at(
            text,
            "coordination.jobId",
            "must be 1 to 200 characters (leave it out to derive one from the job)",
        ));
    }
    let lease_seconds = raw.lease_seconds.unwrap_or(DEFAULT_LEASE_SECONDS);
    JobConfigError::check_range(
        text,
        "coordination.leaseSeconds",
        Some(lease_seconds),
        5,
        3600,
    )?;
    Ok(CoordinationConfig {
        keyspace,
        table,
        job_id: raw.job_id.map(|j| j.trim().to_string()),
        lease_seconds,
    })
}
