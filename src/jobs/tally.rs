//! What jobs have done in this process, summed per kind: the source of the metrics' `_total`
//! counters. Job records hold per-job counters that are set (not only added to) and vanish
//! with the record; a tally only grows, so that a rate over it is right across job ends,
//! deletions and `jobs.keep_finished` pruning.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::JobState;

/// Sums kept by the job registry; read with [`Tally::snapshot`].
#[derive(Default)]
pub(super) struct Tally {
    inner: Mutex<Totals>,
}

/// What jobs of each kind have done since the daemon started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// By (kind, progress counter name): what the counter rose by, summed over every job of
    /// the kind. A counter set lower than before restarted its count (a data-copy task's next
    /// iteration): its new value is all new work, as Prometheus reads a counter reset.
    pub rises: BTreeMap<(String, String), u64>,
    /// By kind: transient errors jobs reported (each new `lastError`) and jobs that failed.
    pub errors: BTreeMap<String, u64>,
    /// By (kind, state): jobs that reached a state that is not active.
    pub ended: BTreeMap<(String, JobState), u64>,
}

impl Tally {
    fn with(&self, f: impl FnOnce(&mut Totals)) {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()));
    }

    pub(super) fn rise(&self, kind: &str, counter: &str, by: u64) {
        if by > 0 {
            self.with(|t| {
                *t.rises
                    .entry((kind.to_string(), counter.to_string()))
                    .or_insert(0) += by;
            });
        }
    }

    pub(super) fn error(&self, kind: &str) {
        self.with(|t| *t.errors.entry(kind.to_string()).or_insert(0) += 1);
    }

    pub(super) fn ended(&self, kind: &str, state: JobState) {
        self.with(|t| {
            *t.ended.entry((kind.to_string(), state)).or_insert(0) += 1;
            if state == JobState::Failed {
                *t.errors.entry(kind.to_string()).or_insert(0) += 1;
            }
        });
    }

    pub(super) fn snapshot(&self) -> Totals {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
