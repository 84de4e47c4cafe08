//! How many rows (and bytes) a copy will have handled when it ends, estimated from the
//! source's statistics and refined by what the copy reads.
//!
//! Each unit of the run starts with what the statistics say it holds ([`Expected`], in the
//! source's own measure: rows, or partitions for CQL). As the copy reads, two ratios are
//! learnt and applied to what is left:
//!
//! - rows per measure (`k`): rows read / measure read, over every page read so far, so a CQL
//!   table's clustering rows per partition are known from the first page;
//! - actual / expected measure (`c`), over the units finished, shrunk towards 1 while few are
//!   (a prior worth 2 % of the table), so stale statistics (DynamoDB's are up to 6 hours old)
//!   are corrected as the copy goes.
//!
//! total ≈ rows read + Σ over units not finished of max(expected × c − measure read, 0) × k.
//!
//! It is never below the rows read (so the share done never passes 100 %), and when the last
//! unit finishes it is exactly the rows handled (written or left out). A unit without statistics counts as the mean of
//! the finished units (no estimate at all until one finishes, when no unit has statistics).
//! Units skipped because a savepoint or another run has them complete are not in the
//! estimate: it counts the rows this run copies, the rows its `rowsWritten` counts.

use std::sync::Mutex;

use crate::connectors::seam::Expected;
use crate::jobs::running::Estimate;

/// The weight of the statistics against the finished units, as a share of the table: until
/// 2 % of the table is finished, the statistics count for more than what was seen.
const PRIOR: f64 = 0.02;

/// Where one unit of the run stands.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct UnitState {
    expected: Option<Expected>,
    stage: Stage,
    rows: u64,
    measured: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Stage {
    #[default]
    Waiting,
    Reading,
    Finished,
    /// Complete through another run: not this run's work.
    Skipped,
}

/// The estimate of one run, updated by the units as they read.
#[derive(Debug, Default)]
pub struct Estimator {
    units: Mutex<Vec<UnitState>>,
}

impl Estimator {
    /// The run's units (its work, in plan order) with what the statistics say of each.
    pub fn new(expected: Vec<Option<Expected>>) -> Self {
        Self {
            units: Mutex::new(
                expected
                    .into_iter()
                    .map(|expected| UnitState {
                        expected,
                        ..UnitState::default()
                    })
                    .collect(),
            ),
        }
    }

    fn with(&self, unit: usize, f: impl FnOnce(&mut UnitState)) {
        if let Some(u) = self
            .units
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(unit)
        {
            f(u);
        }
    }

    /// Unit number `unit` read a page of `rows` rows, `measured` in the statistics' measure.
    pub fn read(&self, unit: usize, rows: u64, measured: u64) {
        self.with(unit, |u| {
            u.stage = Stage::Reading;
            u.rows += rows;
            u.measured += measured;
        });
    }

    /// Unit number `unit` is complete: everything it holds was read.
    pub fn finished(&self, unit: usize) {
        self.with(unit, |u| u.stage = Stage::Finished);
    }

    /// Unit number `unit` was completed by another run: not this run's work any more.
    pub fn skipped(&self, unit: usize) {
        self.with(unit, |u| u.stage = Stage::Skipped);
    }

    /// Unit number `unit` was given up (a lost lease): what it read is read again by
    /// whichever run copies it.
    pub fn restarted(&self, unit: usize) {
        self.with(unit, |u| {
            u.stage = Stage::Waiting;
            u.rows = 0;
            u.measured = 0;
        });
    }

    /// The estimate now, given the rows handled (written or left out) and the rows and bytes
    /// written; `None` while nothing can be said.
    pub fn estimate(&self, done: u64, written: (u64, u64)) -> Option<Estimate> {
        let units = self.units.lock().unwrap_or_else(|p| p.into_inner());
        let (rows, stats_bytes) = total(&units)?;
        // Every unit complete: the rows handled are all there is (a row read that no write
        // and no drop accounts for is not waited for).
        let complete = units
            .iter()
            .all(|u| matches!(u.stage, Stage::Finished | Stage::Skipped));
        let read: u64 = units
            .iter()
            .filter(|u| u.stage != Stage::Skipped)
            .map(|u| u.rows)
            .sum();
        let rows = if complete {
            done
        } else {
            (rows.round() as u64).max(read).max(done)
        };
        let bytes = if written.0 > 0 {
            // The mean size of the rows written so far, for every row.
            (rows as f64 * written.1 as f64 / written.0 as f64).round() as u64
        } else {
            stats_bytes.round() as u64
        };
        Some(Estimate {
            rows,
            bytes: bytes.max(written.1),
        })
    }
}

/// Rows the units will have read in all, and the bytes their statistics say they hold.
fn total(units: &[UnitState]) -> Option<(f64, f64)> {
    let active = || units.iter().filter(|u| u.stage != Stage::Skipped);
    let read: f64 = active().map(|u| u.rows as f64).sum();
    let measured: f64 = active().map(|u| u.measured as f64).sum();
    // Rows per measure read; 1 until something is read (the statistics count rows, or
    // there is nothing better).
    let k = if measured > 0.0 { read / measured } else { 1.0 };
    // Actual against expected measure, over the finished units whose statistics may be off.
    let inexact = || active().filter(|u| u.expected.is_some_and(|e| !e.exact));
    let expected_all: f64 = inexact().map(|u| u.expected.map_or(0.0, |e| e.count)).sum();
    let (seen, said) =
        inexact()
            .filter(|u| u.stage == Stage::Finished)
            .fold((0.0, 0.0), |(m, e), u| {
                (
                    m + u.measured as f64,
                    e + u.expected.map_or(0.0, |x| x.count),
                )
            });
    let prior = PRIOR * expected_all;
    let c = if said + prior > 0.0 {
        (seen + prior) / (said + prior)
    } else {
        1.0
    };
    // A unit without statistics is taken to hold what the finished units held on average.
    let finished: Vec<&UnitState> = active().filter(|u| u.stage == Stage::Finished).collect();
    let mean = (!finished.is_empty())
        .then(|| finished.iter().map(|u| u.measured as f64).sum::<f64>() / finished.len() as f64);
    let mut left = 0.0;
    let mut bytes = 0.0;
    for u in active() {
        bytes += u.expected.map_or(0.0, |e| e.bytes);
        if u.stage == Stage::Finished {
            continue;
        }
        let expected = match u.expected {
            Some(e) if e.exact => e.count,
            Some(e) => e.count * c,
            None => mean?,
        };
        left += (expected - u.measured as f64).max(0.0);
    }
    Some((read + left * k, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(count: f64) -> Option<Expected> {
        Some(Expected {
            count,
            bytes: count * 100.0,
            exact: false,
        })
    }

    #[test]
    fn statistics_alone_before_anything_is_read() {
        let e = Estimator::new(vec![stats(1000.0), stats(3000.0)]);
        assert_eq!(
            e.estimate(0, (0, 0)),
            Some(Estimate {
                rows: 4000,
                bytes: 400_000
            })
        );
        // Nothing at all to go on: no estimate rather than a made-up one.
        assert_eq!(Estimator::new(vec![None, None]).estimate(0, (0, 0)), None);
        // An empty plan: nothing to copy.
        assert_eq!(
            Estimator::new(vec![]).estimate(0, (0, 0)),
            Some(Estimate { rows: 0, bytes: 0 })
        );
    }

    #[test]
    fn rows_per_partition_learnt_from_the_first_page() {
        // Statistics count 1,000 partitions a unit; each holds 10 rows.
        let e = Estimator::new(vec![stats(1000.0); 4]);
        e.read(0, 500, 50);
        let got = e.estimate(200, (200, 20_000)).unwrap();
        assert_eq!(got.rows, 40_000);
        // The bytes follow the rows written: 100 bytes a row.
        assert_eq!(got.bytes, 4_000_000);
    }

    #[test]
    fn stale_statistics_are_corrected_as_units_finish() {
        // The statistics say 1,000 rows a unit; there are 2,000.
        let e = Estimator::new(vec![stats(1000.0); 100]);
        for unit in 0..50 {
            e.read(unit, 2000, 2000);
            e.finished(unit);
        }
        let rows = e.estimate(100_000, (100_000, 0)).unwrap().rows;
        // The prior (2 % of 100,000) pulls the ratio a little towards 1: 100,000 finished of
        // 50,000 said, ratio (100,000 + 2,000) / (50,000 + 2,000) ≈ 1.96.
        let want = 100_000.0 + 50_000.0 * (102_000.0 / 52_000.0);
        assert!((rows as f64 - want).abs() < 1.0, "{rows} vs {want}");
        for unit in 50..100 {
            e.read(unit, 2000, 2000);
            e.finished(unit);
        }
        // Every unit finished: exactly the rows handled.
        assert_eq!(e.estimate(200_000, (200_000, 0)).unwrap().rows, 200_000);
        assert_eq!(e.estimate(199_990, (199_990, 0)).unwrap().rows, 199_990);
    }

    #[test]
    fn never_below_the_rows_read_or_handled() {
        // The statistics say 10 rows; the unit being read has 500 already.
        let e = Estimator::new(vec![stats(10.0), stats(10.0)]);
        e.read(0, 500, 500);
        let rows = e.estimate(400, (400, 0)).unwrap().rows;
        // 500 read, and the other unit's 10 (its ratio not yet learnt from a finished unit).
        assert_eq!(rows, 510);
        // The bound at the bound: everything read is handled.
        assert_eq!(e.estimate(600, (600, 0)).unwrap().rows, 600);
    }

    #[test]
    fn units_without_statistics_count_as_the_finished_ones_did() {
        let e = Estimator::new(vec![None; 4]);
        e.read(0, 300, 300);
        assert_eq!(e.estimate(300, (300, 0)), None);
        e.finished(0);
        e.read(1, 100, 100);
        // 300 finished + 100 read + (300 − 100) + 300 + 300.
        assert_eq!(e.estimate(400, (400, 0)).unwrap().rows, 1200);
    }

    #[test]
    fn exact_counts_are_not_rescaled_and_skipped_units_leave_the_estimate() {
        let exact = |count| {
            Some(Expected {
                count,
                bytes: 0.0,
                exact: true,
            })
        };
        let e = Estimator::new(vec![exact(100.0), exact(200.0), exact(300.0)]);
        e.read(0, 100, 100);
        e.finished(0);
        assert_eq!(e.estimate(100, (100, 0)).unwrap().rows, 600);
        e.skipped(2);
        assert_eq!(e.estimate(100, (100, 0)).unwrap().rows, 300);
        // A unit given up is read again from its start.
        e.read(1, 50, 50);
        e.restarted(1);
        assert_eq!(e.estimate(100, (100, 0)).unwrap().rows, 300);
    }
}
