//! What every kind of job does while it runs: counters copied into the job record with rates,
//! the share done and an ETA, periodic work (savepoints), and the final phase.
//!
//! Rates are taken over a moving window ([`WINDOW`]), not since the start: a job that slowed
//! down (a throttled target, a node down) shows it within the window, and its ETA with it. The
//! share done is rows against the job's estimated total when the job has one ([`Estimate`]),
//! else units; the server computes it once (`progressPermille`) and every screen shows that.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{JobFailure, JobHandle, JobResult};

/// How far back rates look: long enough to smooth over pages and batches arriving in bursts,
/// short enough that a change of pace shows within half a minute.
pub const WINDOW: Duration = Duration::from_secs(30);

/// What a run is expected to handle in all, refined while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Rows the run will have handled (written, or left out on purpose) when it ends; never
    /// fewer than it has handled already.
    pub rows: u64,
    /// Bytes the run will have written when it ends.
    pub bytes: u64,
}

/// Status derived from counters: rates over the window, share done and time left.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Rows per second over the window (over the whole run once it ended).
    pub rows_per_second: u64,
    /// Bytes per second over the window (over the whole run once it ended).
    pub bytes_per_second: u64,
    /// Seconds left: rows left of the estimate at the window's row rate (none once every row
    /// is handled, or while no row moves); without an estimate, units left at the average unit
    /// rate, once a unit is done.
    pub eta_seconds: Option<u64>,
    /// Thousandths done: rows handled of the estimate, else units complete of the plan.
    pub permille: Option<u64>,
}

/// Recent samples of a job's (rows, bytes), for rates over [`WINDOW`].
#[derive(Debug, Clone)]
pub struct Window {
    span: Duration,
    started: Instant,
    points: VecDeque<(Instant, u64, u64)>,
}

impl Default for Window {
    fn default() -> Self {
        Self::new(WINDOW)
    }
}

impl Window {
    /// A window of `span`, the run starting now.
    pub fn new(span: Duration) -> Self {
        Self::starting(span, Instant::now())
    }

    fn starting(span: Duration, started: Instant) -> Self {
        Self {
            span,
            started,
            points: VecDeque::new(),
        }
    }

    /// Adds `sample` taken now and returns the status it gives.
    pub fn status(&mut self, sample: &Sample) -> Rates {
        self.status_at(Instant::now(), sample)
    }

    fn status_at(&mut self, now: Instant, sample: &Sample) -> Rates {
        self.points.push_back((now, sample.rows, sample.bytes));
        // Keep one point at or before the window's start, so the rate spans the whole window.
        while self.points.len() > 2 && now.duration_since(self.points[1].0) >= self.span {
            self.points.pop_front();
        }
        let (t0, r0, b0) = self.points[0];
        let secs = now.duration_since(t0).as_secs_f64();
        let per_second = |a: u64, b: u64| {
            if secs < 1e-3 {
                0
            } else {
                (b.saturating_sub(a) as f64 / secs).round() as u64
            }
        };
        let rows_per_second = per_second(r0, sample.rows);
        let bytes_per_second = per_second(b0, sample.bytes);
        let eta_seconds = match sample.estimate {
            Some(e) => {
                let left = e.rows.saturating_sub(sample.done);
                if left == 0 {
                    // Every row handled: what is left (a sink completing, a change stream
                    // that runs until stopped) has no rows to time.
                    None
                } else {
                    // The exact rate, not the rounded one: a slow job's ETA is not off by half.
                    let rate = sample.rows.saturating_sub(r0) as f64 / secs.max(1e-3);
                    (rate > 0.0).then(|| (left as f64 / rate).ceil() as u64)
                }
            }
            None => unit_eta(sample.units, now.duration_since(self.started)),
        };
        Rates {
            rows_per_second,
            bytes_per_second,
            eta_seconds,
            permille: permille(sample),
        }
    }

    /// The status of a run that ended after `run` (its recorded `startedAt` to `endedAt`):
    /// its average rates over that time, no ETA. The same division as the job summary's
    /// `averageRowsPerSecond` (rows over the recorded duration), so the two agree; without a
    /// recorded duration, the window's own clock.
    pub fn ended(&self, sample: &Sample, run: Option<Duration>) -> Rates {
        ended_after(
            run.unwrap_or_else(|| self.started.elapsed()).as_secs_f64(),
            sample,
        )
    }
}

fn ended_after(secs: f64, sample: &Sample) -> Rates {
    let per_second = |n: u64| {
        if secs > 0.0 {
            (n as f64 / secs).round() as u64
        } else {
            0
        }
    };
    Rates {
        rows_per_second: per_second(sample.rows),
        bytes_per_second: per_second(sample.bytes),
        eta_seconds: None,
        permille: permille(sample),
    }
}

/// Seconds left at the run's average unit rate (jobs without an estimate).
fn unit_eta((total, done, skipped): (u64, u64, u64), elapsed: Duration) -> Option<u64> {
    let copied = done.saturating_sub(skipped);
    let left = total.saturating_sub(done);
    (copied > 0).then(|| (elapsed.as_secs_f64() * left as f64 / copied as f64).round() as u64)
}

/// Thousandths done, rounded down (never 100 % before the last row), at most 1000.
fn permille(sample: &Sample) -> Option<u64> {
    let share = |done: u64, total: u64| ((done as u128 * 1000 / total as u128) as u64).min(1000);
    let (total, done, _) = sample.units;
    match sample.estimate {
        Some(e) if e.rows > 0 => Some(share(sample.done, e.rows)),
        // An empty table: the plan's units are all there is to go through.
        _ if total > 0 => Some(share(done, total)),
        _ => None,
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
    /// Rows handled, measured against the estimate (a copy's rows written and left out).
    pub done: u64,
    /// What the run will have handled in all, when the job can tell.
    pub estimate: Option<Estimate>,
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

/// Copies a job's counters into its record with their status from `window` (rates, share
/// done, ETA, the estimate), and a phase: `waiting: <why>` while a request is retried, else
/// `phase`.
pub fn publish(handle: &JobHandle, sample: Sample, window: &mut Window, phase: &str) {
    let status = window.status(&sample);
    set_status(handle, &sample, status);
    match sample.waiting {
        Some(reason) => {
            handle.set_last_error(&reason);
            handle.set_phase(&format!("waiting: {reason}"));
        }
        None => handle.set_phase(phase),
    }
}

/// Copies the counters of a run that ended into its record: the rates become the run's
/// averages (an ended job shows how fast it went, not 0 rows/s), and the ETA goes. The run's
/// end is fixed now, and recorded as its `endedAt`: its rates are over the very duration
/// the job's summary divides by.
pub fn publish_end(handle: &JobHandle, sample: Sample, window: &Window) {
    let status = window.ended(&sample, handle.end_run());
    set_status(handle, &sample, status);
}

fn set_status(handle: &JobHandle, sample: &Sample, status: Rates) {
    for (k, v) in &sample.counters {
        handle.set(k, *v);
    }
    handle.set("rowsPerSecond", status.rows_per_second);
    handle.set("bytesPerSecond", status.bytes_per_second);
    match status.eta_seconds {
        Some(eta) => handle.set("etaSeconds", eta),
        None => handle.unset("etaSeconds"),
    }
    if let Some(p) = status.permille {
        handle.set("progressPermille", p);
    }
    if let Some(e) = sample.estimate {
        handle.set("rowsTotalEstimate", e.rows);
        handle.set("bytesTotalEstimate", e.bytes);
    }
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

    fn sample(rows: u64, estimate: Option<u64>, units: (u64, u64, u64)) -> Sample {
        Sample {
            rows,
            bytes: rows * 10,
            done: rows,
            estimate: estimate.map(|e| Estimate {
                rows: e,
                bytes: e * 10,
            }),
            units,
            ..Sample::default()
        }
    }

    #[test]
    fn rates_over_the_window_not_since_the_start() {
        let t0 = Instant::now();
        let mut w = Window::starting(Duration::from_secs(30), t0);
        let at = |s| t0 + Duration::from_secs(s);
        w.status_at(at(0), &sample(0, Some(10_000), (4, 0, 0)));
        // 100 rows/s for 60 s, then 10 rows/s: 30 s later the window sees only the slow pace.
        w.status_at(at(60), &sample(6_000, Some(10_000), (4, 2, 0)));
        for s in 61..=90 {
            w.status_at(
                at(s),
                &sample(6_000 + (s - 60) * 10, Some(10_000), (4, 2, 0)),
            );
        }
        let r = w.status_at(at(91), &sample(6_310, Some(10_000), (4, 2, 0)));
        assert_eq!(r.rows_per_second, 10);
        assert_eq!(r.bytes_per_second, 100);
        // 3,690 rows left at 10 rows/s.
        assert_eq!(r.eta_seconds, Some(369));
        assert_eq!(r.permille, Some(631));
        // Once ended: the average over the whole run, as recorded.
        let end = w.ended(
            &sample(10_000, Some(10_000), (4, 4, 0)),
            Some(Duration::from_secs(100)),
        );
        assert_eq!((end.rows_per_second, end.eta_seconds), (100, None));
        assert_eq!(end.bytes_per_second, 1_000);
        assert_eq!(end.permille, Some(1000));
        // A run that ended within its first clock tick moved nothing measurable.
        let instant = w.ended(&sample(5, None, (1, 1, 0)), Some(Duration::ZERO));
        assert_eq!(instant.rows_per_second, 0);
    }

    #[test]
    fn share_done_is_bounded_and_rounds_down() {
        let t0 = Instant::now();
        let mut w = Window::starting(Duration::from_secs(30), t0);
        // One row short of the estimate is not 100 %.
        let r = w.status_at(t0, &sample(9_999, Some(10_000), (4, 3, 0)));
        assert_eq!(r.permille, Some(999));
        // More rows than an estimate said (the estimator never lets this happen; the bound
        // holds anyway).
        let r = w.status_at(t0, &sample(12_000, Some(10_000), (4, 3, 0)));
        assert_eq!((r.permille, r.eta_seconds), (Some(1000), None));
        // No estimate: units; an empty plan: nothing to show.
        assert_eq!(
            w.status_at(t0, &sample(5, None, (66, 5, 0))).permille,
            Some(75)
        );
        assert_eq!(w.status_at(t0, &sample(5, None, (0, 0, 0))).permille, None);
        // An estimate of nothing (an empty table): units.
        assert_eq!(
            w.status_at(t0, &sample(0, Some(0), (4, 4, 0))).permille,
            Some(1000)
        );
    }

    #[test]
    fn without_an_estimate_the_eta_follows_units() {
        let t0 = Instant::now();
        let mut w = Window::starting(Duration::from_secs(30), t0);
        // 4 units copied in 10 s, 5 left: 12.5 s.
        let r = w.status_at(t0 + Duration::from_secs(10), &sample(300, None, (10, 5, 1)));
        assert_eq!(r.eta_seconds, Some(13));
        let r = w.status_at(t0 + Duration::from_secs(11), &sample(300, None, (10, 3, 3)));
        assert_eq!(r.eta_seconds, None);
        // A stalled job with an estimate has no ETA rather than an infinite one.
        let mut w = Window::starting(Duration::from_secs(30), t0);
        w.status_at(t0, &sample(300, Some(1000), (10, 3, 0)));
        let r = w.status_at(
            t0 + Duration::from_secs(5),
            &sample(300, Some(1000), (10, 3, 0)),
        );
        assert_eq!((r.rows_per_second, r.eta_seconds), (0, None));
    }
}
