//! What a running validation has done: live counters, and the ranges compared with their
//! findings.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use super::report::Report;
use crate::engine::driver::Counters as ScanProgress;
use crate::jobs::running::Sample;
use crate::savepoints;

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
    /// Source rows the savepoint resumed from had compared (the first [`Progress::count_from`]):
    /// not this run's, so not in its rates.
    resumed_rows: std::sync::OnceLock<u64>,
}

impl Progress {
    /// Sets the row counters to a report's: a resumed run counts on from the rows its savepoint
    /// covers, and a finished one shows exactly its report's figures.
    pub fn count_from(&self, report: &Report) {
        let _ = self.resumed_rows.set(report.source_rows);
        let set = |a: &AtomicU64, v: u64| a.store(v, AtomicOrdering::Relaxed);
        set(&self.scan.rows_read, report.source_rows);
        set(&self.target_rows, report.target_rows);
        set(&self.rows_with_differences, report.rows_with_differences);
        set(&self.rows_copied, report.rows_copied);
    }

    /// The counters now, as job status and progress lines show them.
    pub fn sample(&self) -> Sample {
        let g = |a: &AtomicU64| a.load(AtomicOrdering::Relaxed);
        let s = &self.scan;
        let (source_rows, bytes_read) = (g(&s.rows_read), g(&s.bytes_read));
        let (total, done, skipped) = (g(&s.units_total), g(&s.units_done), g(&s.units_skipped));
        let differences = g(&self.rows_with_differences);
        Sample {
            counters: vec![
                ("unitsTotal", total),
                ("unitsDone", done),
                ("unitsSkipped", skipped),
                ("sourceRows", source_rows),
                ("targetRows", g(&self.target_rows)),
                ("bytesRead", bytes_read),
                ("rowsWithDifferences", differences),
                ("rowsCopied", g(&self.rows_copied)),
                ("retries", s.retries.count()),
            ],
            rows: source_rows.saturating_sub(self.resumed_rows.get().copied().unwrap_or(0)),
            bytes: bytes_read,
            // Validations show their share done by units: their source rows carry on from a
            // resumed savepoint's, so an estimate of this run's rows would not match them.
            done: source_rows,
            estimate: None,
            units: (total, done, skipped),
            differences: Some(differences),
            waiting: s.waiting(),
        }
    }
}

/// What is complete: ranges validated and what they held. Changed under one lock so a
/// savepoint never records a range without its findings.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// Units of the source compared completely, in the job file's terms.
    pub done: savepoints::Progress,
    /// Units of the target looked up in the source completely, for validations that look rows
    /// up by key (`lookup`); empty for merged validations, whose units cover both tables.
    pub reverse: savepoints::Progress,
    /// Findings of those units.
    pub report: Report,
}
