//! The validator: proves a copy complete by comparing the target table with the source, row
//! by row and cell by cell, both ways (rows missing from the target and rows only the target
//! has), and says exactly which rows differ.
//!
//! It takes the migration's job file; its `validation` section tunes the comparison.

pub mod engine;
pub mod job;
pub mod kind;
pub mod report;
pub mod value;
