//! What every kind of job does while it runs: counters copied into the job record with rates
//! and an ETA, periodic work (savepoints), and the final phase.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{JobFailure, JobHandle, JobResult};

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

/// A running job's counters at one moment, as its status and progress lines show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Every counter, by its name in the job's status.
    pub counters: Vec<(&'static str, u64)>,
    /// The rows the rate is computed from (written by a copy, compared by a validation).
    pub rows: u64,
    /// The bytes the byte rate is computed from.
    pub bytes: u64,
    /// Units: in the plan, complete (skipped ones included), skipped.
    pub units: (u64, u64, u64),
    /// Rows found different (validations).
    pub differences: Option<u64>,
    /// Why the job is waiting, while a request is retried.
    pub waiting: Option<String>,
}

/// A task that calls `tick` every `interval` (not at once) until stopped.
pub struct Periodic {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Periodic {
    /// Starts the ticks.
    pub fn start<F, Fut>(interval: Duration, mut tick: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.tick().await;
            loop {
                tokio::select! {
                    _ = stopped.cancelled() => return,
                    _ = ticker.tick() => tick().await,
                }
            }
        });
        Self { stop, task }
    }

    /// Stops the ticks, waiting for one in progress: a savepoint being written when the job
    /// ends must not land after the final one.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Copies a job's counters into its record, with the rates since `previous` (`timing` =
/// previous rows and bytes, interval, elapsed), the ETA, and a phase: `waiting: <why>` while a
/// request is retried, else `phase`. Returns the current rows and bytes.
pub fn publish(
    handle: &JobHandle,
    sample: Sample,
    (previous, interval, elapsed): ((u64, u64), Duration, Duration),
    phase: &str,
) -> (u64, u64) {
    for (k, v) in &sample.counters {
        handle.set(k, *v);
    }
    let current = (sample.rows, sample.bytes);
    let units = sample.units;
    let r = rates(previous, current, interval, elapsed, units);
    handle.set("rowsPerSecond", r.rows_per_second);
    handle.set("bytesPerSecond", r.bytes_per_second);
    if let Some(eta) = r.eta_seconds {
        handle.set("etaSeconds", eta);
    }
    match sample.waiting {
        Some(reason) => {
            handle.set_last_error(&reason);
            handle.set_phase(&format!("waiting: {reason}"));
        }
        None => handle.set_phase(phase),
    }
    current
}

/// How a job's run ended, for [`end`].
pub enum Ending {
    /// Ran to the end; the phase to show.
    Done(String),
    /// Ran to the end and found differences (a validation); the phase to show.
    Differences(String),
    /// Stopped by a cancel or a shutdown.
    Stopped,
    /// Failed, with the reason.
    Failed(String),
}

/// Sets the final phase of a job and its result for the registry.
pub fn end(handle: &JobHandle, ending: Ending) -> JobResult {
    match ending {
        Ending::Done(phase) => {
            handle.set_phase(&phase);
            Ok(())
        }
        Ending::Differences(phase) => {
            handle.set_phase(&phase);
            Err(JobFailure::Differences)
        }
        Ending::Stopped => {
            handle.set_phase("stopped");
            Err(JobFailure::Stopped)
        }
        Ending::Failed(e) => {
            handle.set_phase("failed");
            Err(JobFailure::Error(e))
        }
    }
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
