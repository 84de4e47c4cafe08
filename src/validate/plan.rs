//! Planning a validation: the connectors of the job open both tables and the comparator of
//! their rows (CQL: merged scans) or their lookups (DynamoDB); the scans plan the units when
//! the validation runs.

use super::run::Validation;
use crate::connectors::{cql, dynamodb, mysql};
use crate::engine::EngineError;
use crate::engine::config::{JobConfig, SourceConfig, TargetConfig};

impl Validation {
    /// Connects to both sides, checks the schemas as a migration would, and prepares both
    /// scans. Nothing is written.
    pub async fn prepare(config: &JobConfig) -> Result<Self, EngineError> {
        let v = &config.validation;
        // Each source/target pair a connector can compare: one arm per pair.
        let validation = match (&config.source, &config.target) {
            (SourceConfig::Cql(src), TargetConfig::Cql(dst)) => {
                let sides = cql::compare::prepare(src, dst, &config.renames, v).await?;
                Self::new(sides, v.failures_to_fetch)
            }
            (SourceConfig::Dynamo(src), TargetConfig::Dynamo(dst)) => {
                let sides = dynamodb::compare::prepare(src, dst, &config.renames, v).await?;
                Self::lookup(sides, v.failures_to_fetch)
            }
            (SourceConfig::Mysql(src), TargetConfig::Cql(dst)) => {
                let sides = mysql::compare::prepare(src, dst, &config.renames, v).await?;
                Self::lookup(sides, v.failures_to_fetch)
            }
            (source, target) => {
                return Err(EngineError::Config(crate::jobfile::JobConfigError {
                    message: format!(
                        "validating a copy from a {} source to a {} target is not supported yet",
                        source.kind(),
                        target.kind()
                    ),
                    line: None,
                }));
            }
        };
        Ok(validation)
    }
}
