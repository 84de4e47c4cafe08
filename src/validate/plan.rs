//! Planning a validation: the connectors of the job prepare both scans and the comparator,
//! and the source's ring is cut into the units the run compares.

use super::run::Validation;
use crate::connectors::cql;
use crate::migrate::EngineError;
use crate::migrate::config::{JobConfig, SourceConfig, TargetConfig};
use crate::migrate::limits::Limits;
use crate::savepoints::ranges::plan_units;

impl Validation {
    /// Connects to both sides, checks the schemas as a migration would, and plans units.
    /// Nothing is written.
    pub async fn prepare(config: &JobConfig) -> Result<Self, EngineError> {
        let SourceConfig::Cql(src) = &config.source;
        let TargetConfig::Cql(dst) = &config.target;
        let v = &config.validation;
        let prepared = cql::compare::prepare(src, dst, &config.renames, v).await?;
        let units = plan_units(&prepared.ring, src.split_count.unwrap_or(256).max(1));
        Ok(Self::new(
            prepared.sides,
            units,
            src.max_concurrent_units.unwrap_or(16),
            Limits::new(dst.rows_per_second, dst.bytes_per_second),
            v.failures_to_fetch,
        ))
    }
}
