//! Planning a validation: the connectors' registry opens both tables and the comparator of
//! their rows (CQL: merged scans) or their lookups (DynamoDB, MySQL); the scans plan the units
//! when the validation runs.

use super::run::Validation;
use crate::connectors::seam::Scan;
use crate::connectors::seam::compare::{Comparator, ComparisonMaker, Lookup, LookupSides, Sides};
use crate::engine::EngineError;
use crate::engine::config::JobConfig;

impl Validation {
    /// Connects to both sides, checks the schemas as a migration would, and prepares both
    /// scans. Nothing is written.
    pub async fn prepare(config: &JobConfig) -> Result<Self, EngineError> {
        let v = &config.validation;
        let maker = Erase {
            max_examples: v.failures_to_fetch,
        };
        Ok(crate::connectors::open_comparison(
            &config.source,
            &config.target,
            &config.renames,
            v,
            &maker,
        )
        .await?)
    }
}

/// Erases the types of the sides a connector opened into a [`Validation`].
struct Erase {
    /// `failuresToFetch`: the examples a report keeps.
    max_examples: usize,
}

impl ComparisonMaker for Erase {
    type Comparison = Validation;

    fn merged<C, S>(&self, sides: Sides<C, S>) -> Validation
    where
        C: Comparator,
        S: Scan<Row = C::Row>,
        S::Row: Clone,
    {
        Validation::new(sides, self.max_examples)
    }

    fn looked_up<L, S>(&self, sides: LookupSides<L, S>) -> Validation
    where
        L: Lookup,
        S: Scan<Row = L::Row>,
    {
        Validation::lookup(sides, self.max_examples)
    }
}
