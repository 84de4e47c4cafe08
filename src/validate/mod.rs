//! The validator: proves a copy complete by comparing the target table with the source, row
//! by row and cell by cell, both ways (rows missing from the target and rows only the target
//! has), and says exactly which rows differ.
//!
//! It takes the migration's job file; its `validation` section tunes the comparison. The
//! validator knows no database: a connector reads both tables through the seam's
//! [`Scan`](crate::connectors::seam::Scan) and orders and compares their rows through
//! [`Comparator`](crate::connectors::seam::compare::Comparator); the validator runs the source's units with the engine's unit
//! driver, merges the two scans of each (`merge`), and repairs through the target's
//! [`Sink`](crate::connectors::seam::Sink). A connector whose scans are not in key order
//! (DynamoDB) implements [`lookup::Lookup`] instead: each page of one table is looked up by key
//! in the other, the source's units first, then the target's (`lookup`).

pub mod job;
pub mod kind;
pub mod lookup;
pub(crate) mod merge;
mod plan;
pub mod progress;
pub mod report;
pub mod run;

pub use progress::{Progress, State};
pub use run::Validation;
