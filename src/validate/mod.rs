//! The validator: proves a copy complete by comparing the target table with the source, row
//! by row and cell by cell, both ways (rows missing from the target and rows only the target
//! has), and says exactly which rows differ.
//!
//! It takes the migration's job file; its `validation` section tunes the comparison. The
//! validator knows no database: a connector scans both tables and compares their rows through
//! the traits of [`compare`] and [`run::SideScan`]; the validator plans units, drives them and
//! merges the two scans of each.

pub mod compare;
pub mod job;
pub(crate) mod merge;
mod plan;
pub mod progress;
pub mod report;
pub mod run;

pub use progress::{Progress, State};
pub use run::Validation;
