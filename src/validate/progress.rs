//! What a running validation has done: live counters, and the ranges compared with their
//! findings.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use super::report::Report;
use crate::migrate::engine::Progress as ScanProgress;
use crate::savepoints::ranges::RangeSet;

/// Live counters of a running validation.
#[derive(Debug, Default)]
pub struct Progress {
    /// Units, source rows (`rowsRead`), bytes, retries and the waiting reason.
    pub scan: ScanProgress,
    /// Rows read from the target.
    pub target_rows: AtomicU64,
    /// Rows found different so far.
    pub rows_with_differences: AtomicU64,
    /// Rows copied again so far.
    pub rows_copied: AtomicU64,
}

impl Progress {
    /// Sets the row counters to a report's: a resumed run counts on from the rows its savepoint
    /// covers, and a finished one shows exactly its report's figures.
    pub fn count_from(&self, report: &Report) {
        let set = |a: &AtomicU64, v: u64| a.store(v, AtomicOrdering::Relaxed);
        set(&self.scan.rows_read, report.source_rows);
        set(&self.target_rows, report.target_rows);
        set(&self.rows_with_differences, report.rows_with_differences);
        set(&self.rows_copied, report.rows_copied);
    }

    /// Counter name and value pairs, as shown in job status.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let g = |a: &AtomicU64| a.load(AtomicOrdering::Relaxed);
        let s = &self.scan;
        vec![
            ("unitsTotal", g(&s.units_total)),
            ("unitsDone", g(&s.units_done)),
            ("unitsSkipped", g(&s.units_skipped)),
            ("sourceRows", g(&s.rows_read)),
            ("targetRows", g(&self.target_rows)),
            ("bytesRead", g(&s.bytes_read)),
            ("rowsWithDifferences", g(&self.rows_with_differences)),
            ("rowsCopied", g(&self.rows_copied)),
            ("retries", g(&s.retries)),
        ]
    }
}

/// What is complete: ranges validated and what they held. Changed under one lock so a
/// savepoint never records a range without its findings.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// Token ranges compared completely.
    pub done: RangeSet,
    /// Findings of those ranges.
    pub report: Report,
}
