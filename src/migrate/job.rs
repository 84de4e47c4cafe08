//! Running a migration as a job of the registry: progress counters, rate, ETA and phase are
//! copied into the job record while the engine runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::engine::{Migration, MigrationError, Progress};
use super::ranges::RangeSet;
use crate::jobs::{JobFailure, JobHandle, JobResult};

/// Job kind of migrations in the registry.
pub const KIND: &str = "migration";

/// Status derived from counters: rate over the last report interval and time left.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Rows written per second, recently.
    pub rows_per_second: u64,
    /// Bytes written per second, recently.
    pub bytes_per_second: u64,
    /// Seconds left at the average unit rate, once a unit is done.
    pub eta_seconds: Option<u64>,
}

/// Computes rates from two snapshots of (rows written, bytes written) and the unit counts.
pub fn rates(
    previous: (u64, u64),
    current: (u64, u64),
    interval: Duration,
    elapsed: Duration,
    units: (u64, u64, u64),
) -> Rates {
    let secs = interval.as_secs_f64().max(1e-3);
    let (total, done, skipped) = units;
    let copied = done.saturating_sub(skipped);
    let left = total.saturating_sub(done);
    let eta_seconds =
        (copied > 0).then(|| (elapsed.as_secs_f64() * left as f64 / copied as f64).round() as u64);
    Rates {
        rows_per_second: ((current.0.saturating_sub(previous.0)) as f64 / secs).round() as u64,
        bytes_per_second: ((current.1.saturating_sub(previous.1)) as f64 / secs).round() as u64,
        eta_seconds,
    }
}

/// Reads one counter of a snapshot.
pub fn counter(snapshot: &[(&'static str, u64)], name: &str) -> u64 {
    snapshot
        .iter()
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| *v)
}

/// Runs a prepared migration as the job behind `handle`.
pub async fn run(handle: JobHandle, migration: Migration) -> JobResult {
    handle.set_phase("copying");
    let progress = Arc::new(Progress::default());
    let done = Arc::new(Mutex::new(RangeSet::new()));
    let reporter = {
        let handle = handle.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            let interval = Duration::from_secs(1);
            let started = Instant::now();
            let mut previous = (0, 0);
            let mut ticker = tokio::time::interval(interval);
            loop {
                ticker.tick().await;
                previous = report(&handle, &progress, previous, interval, started.elapsed());
            }
        })
    };
    let result = migration
        .run(progress.clone(), done, handle.cancelled().clone())
        .await;
    reporter.abort();
    report(
        &handle,
        &progress,
        (0, 0),
        Duration::from_secs(1),
        Duration::ZERO,
    );
    handle.set("rowsPerSecond", 0);
    match result {
        Ok(()) => {
            handle.set_phase("done");
            Ok(())
        }
        Err(MigrationError::Stopped) => {
            handle.set_phase("stopped");
            Err(JobFailure::Stopped)
        }
        Err(e) => {
            handle.set_phase("failed");
            Err(JobFailure::Error(e.to_string()))
        }
    }
}

fn report(
    handle: &JobHandle,
    progress: &Progress,
    previous: (u64, u64),
    interval: Duration,
    elapsed: Duration,
) -> (u64, u64) {
    let snapshot = progress.snapshot();
    for (k, v) in &snapshot {
        handle.set(k, *v);
    }
    let current = (
        counter(&snapshot, "rowsWritten"),
        counter(&snapshot, "bytesWritten"),
    );
    let units = (
        counter(&snapshot, "unitsTotal"),
        counter(&snapshot, "unitsDone"),
        counter(&snapshot, "unitsSkipped"),
    );
    let r = rates(previous, current, interval, elapsed, units);
    handle.set("rowsPerSecond", r.rows_per_second);
    handle.set("bytesPerSecond", r.bytes_per_second);
    if let Some(eta) = r.eta_seconds {
        handle.set("etaSeconds", eta);
    }
    match progress.waiting() {
        Some(reason) => {
            handle.set_last_error(&reason);
            handle.set_phase(&format!("waiting: {reason}"));
        }
        None => handle.set_phase("copying"),
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_eta() {
        let r = rates(
            (100, 1000),
            (300, 5000),
            Duration::from_secs(2),
            Duration::from_secs(10),
            (10, 5, 1),
        );
        assert_eq!(r.rows_per_second, 100);
        assert_eq!(r.bytes_per_second, 2000);
        // 4 units copied in 10 s, 5 left: 12.5 s.
        assert_eq!(r.eta_seconds, Some(13));
        assert_eq!(
            rates(
                (0, 0),
                (0, 0),
                Duration::from_secs(1),
                Duration::from_secs(1),
                (10, 3, 3)
            )
            .eta_seconds,
            None
        );
    }
}
