//! How far a data-copy task is, as the console and the CLI show it: the share of the current
//! iteration's bytes, whole once the task succeeded; and its download rate and ETA, from a
//! moving window of the counters the task publishes every second.
//!
//! The share is read from the iterations a task records, not from its progress counters:
//! those of an iteration that has nothing to download stay unknown (-1, as the Sidecar leaves
//! them), and counters kept from the iteration before would make a finished task 0 %.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::super::copy::{CopyReport, IterationState, IterationStatus};

/// Bytes done and bytes in all of a data-copy task whose iterations are `iterations`:
/// - a task that succeeded is whole: the source's bytes (`totalSize` of the last pass) of
///   the source's bytes, since its last pass found nothing it had to fetch;
/// - else the last iteration's bytes received or kept against its bytes to download, once
///   they are known (from `DOWNLOADING` on);
/// - `None` while they are not known (listing, planning) and for a source without bytes.
pub fn copy_fraction(succeeded: bool, iterations: &[IterationStatus]) -> Option<(u64, u64)> {
    let last = iterations.last()?;
    if succeeded || last.state == IterationState::Success {
        let total = u64::try_from(last.total_size).ok().filter(|t| *t > 0)?;
        return Some((total, total));
    }
    let total = u64::try_from(last.bytes_to_download).ok()?;
    let done = done_bytes(last).min(total);
    Some((done, total))
}

/// [`copy_fraction`] of a task's job result (`{"status": [...]}`), as records and the API
/// carry it.
pub fn copy_fraction_of(succeeded: bool, result: Option<&serde_json::Value>) -> Option<(u64, u64)> {
    let report: CopyReport = serde_json::from_value(result?.clone()).ok()?;
    copy_fraction(succeeded, &report.status)
}

/// [`copy_fraction_of`] as every screen shows a job's progress.
pub fn copy_shown(
    succeeded: bool,
    result: Option<&serde_json::Value>,
) -> Option<crate::jobs::shown::Shown> {
    let (done, total) = copy_fraction_of(succeeded, result)?;
    let permille = if total == 0 {
        0
    } else {
        ((done as u128 * 1000 / total as u128) as u64).min(1000)
    };
    Some(crate::jobs::shown::Shown {
        permille,
        label: format!(
            "{} of {}",
            bytesize::ByteSize(done),
            bytesize::ByteSize(total)
        ),
    })
}

/// Bytes of an iteration that are in place: received, or kept from the local version.
fn done_bytes(it: &IterationStatus) -> u64 {
    u64::try_from(it.bytes_downloaded.max(0)).unwrap_or(0)
        + u64::try_from(it.bytes_kept.max(0)).unwrap_or(0)
}

/// How long the rate looks back: long enough to smooth one slow file, short enough to follow
/// a change of the link within seconds.
const WINDOW: Duration = Duration::from_secs(10);

/// The download rate of a task, from the counters of its iterations as they are published.
#[derive(Debug, Default)]
pub struct Rate {
    /// (when, bytes received) of the current iteration within the window, oldest first.
    window: VecDeque<(Instant, u64)>,
    /// The iteration downloading: its number, when it began, when last seen, bytes received.
    current: Option<(u32, Instant, Instant, u64)>,
    /// Bytes received and time spent downloading in the iterations before it.
    earlier: (u64, Duration),
}

/// What [`Rate::sample`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Speed {
    /// Bytes received per second over the window.
    pub bytes_per_second: u64,
    /// Seconds until the iteration's downloads are done at that rate.
    pub eta_seconds: Option<u64>,
}

impl Rate {
    /// Takes the last iteration as published at `now`; its rate and ETA while it downloads,
    /// `None` otherwise.
    pub fn sample(&mut self, now: Instant, last: &IterationStatus) -> Option<Speed> {
        let received = u64::try_from(last.bytes_downloaded.max(0)).unwrap_or(0);
        let downloading = last.state == IterationState::Downloading;
        match &mut self.current {
            Some((i, _, seen, bytes)) if *i == last.iteration => {
                // Its end (`DOWNLOAD_COMPLETE`) still counts towards the average.
                if downloading || last.state == IterationState::DownloadComplete {
                    *seen = now;
                    *bytes = received;
                }
            }
            _ => {
                // Another iteration: the one before goes into the average.
                if let Some((_, began, seen, bytes)) = self.current.take() {
                    self.earlier.0 += bytes;
                    self.earlier.1 += seen.saturating_duration_since(began);
                }
                self.window.clear();
                if downloading {
                    self.current = Some((last.iteration, now, now, received));
                }
            }
        }
        if !downloading {
            return None;
        }
        self.window.push_back((now, received));
        // The oldest sample kept is the last one at least a window old.
        while self.window.len() > 2 && now.saturating_duration_since(self.window[1].0) >= WINDOW {
            self.window.pop_front();
        }
        let &(t0, b0) = self.window.front().expect("just pushed");
        let span = now.saturating_duration_since(t0).as_secs_f64();
        if span < 0.5 {
            return Some(Speed {
                bytes_per_second: 0,
                eta_seconds: None,
            });
        }
        let rate = received.saturating_sub(b0) as f64 / span;
        let left = u64::try_from(last.bytes_to_download.max(0))
            .unwrap_or(0)
            .saturating_sub(done_bytes(last));
        Some(Speed {
            bytes_per_second: rate as u64,
            eta_seconds: (rate >= 1.0).then(|| (left as f64 / rate).ceil() as u64),
        })
    }

    /// Bytes per second over the time the task spent downloading, every iteration together:
    /// what an ended task shows. `None` before half a second of downloads.
    pub fn average(&self) -> Option<u64> {
        let (mut bytes, mut time) = self.earlier;
        if let Some((_, began, seen, received)) = self.current {
            bytes += received;
            time += seen.saturating_duration_since(began);
        }
        (time >= Duration::from_millis(500)).then(|| (bytes as f64 / time.as_secs_f64()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::livemigration::copy::request::UNKNOWN;

    fn it(i: u32, state: IterationState, total: i64, to: i64, got: i64) -> IterationStatus {
        IterationStatus {
            state,
            total_size: total,
            bytes_to_download: to,
            bytes_downloaded: got,
            ..IterationStatus::starting(i)
        }
    }

    #[test]
    fn a_task_that_succeeded_is_whole_whatever_its_last_pass_counted() {
        // The last pass had nothing to download: its bytes to download stay unknown.
        let passes = [
            it(0, IterationState::DownloadComplete, 1000, 1000, 1000),
            it(1, IterationState::Success, 1000, UNKNOWN, 0),
        ];
        assert_eq!(copy_fraction(true, &passes), Some((1000, 1000)));
        // The iterations alone say so too (a record read while it ends).
        assert_eq!(copy_fraction(false, &passes), Some((1000, 1000)));
        // Downloading: received and kept bytes against the iteration's bytes to fetch.
        let mut running = it(0, IterationState::Downloading, 1000, 800, 300);
        running.bytes_kept = 100;
        assert_eq!(copy_fraction(false, &[running]), Some((400, 800)));
        // Listing: nothing known yet.
        assert_eq!(
            copy_fraction(
                false,
                &[it(2, IterationState::Starting, UNKNOWN, UNKNOWN, 0)]
            ),
            None
        );
        assert_eq!(copy_fraction(true, &[]), None);
        let result = serde_json::json!({"status": passes});
        assert_eq!(copy_fraction_of(true, Some(&result)), Some((1000, 1000)));
    }

    #[test]
    fn the_rate_follows_the_window_and_the_average_every_iteration() {
        let t = Instant::now();
        let mut rate = Rate::default();
        let at = |s: u64| t + Duration::from_secs(s);
        let dl = |got| it(0, IterationState::Downloading, 10_000, 10_000, got);
        assert_eq!(
            rate.sample(at(0), &dl(0)),
            Some(Speed {
                bytes_per_second: 0,
                eta_seconds: None
            })
        );
        assert_eq!(
            rate.sample(at(2), &dl(2000)),
            Some(Speed {
                bytes_per_second: 1000,
                eta_seconds: Some(8)
            })
        );
        // Past the window, the old samples no longer count: 4000 bytes in the last 10 s.
        for s in 3..=20 {
            rate.sample(at(s), &dl(2000 + (s as i64 - 2) * 100));
        }
        let speed = rate.sample(at(21), &dl(3900)).unwrap();
        assert_eq!(speed.bytes_per_second, 100, "{speed:?}");
        assert_eq!(speed.eta_seconds, Some(61));
        // Not downloading: no rate, no ETA.
        assert_eq!(
            rate.sample(
                at(22),
                &it(0, IterationState::DownloadComplete, 10_000, 10_000, 3900)
            ),
            None
        );
        assert_eq!(
            rate.sample(
                at(23),
                &it(1, IterationState::Starting, UNKNOWN, UNKNOWN, 0)
            ),
            None
        );
        // 3900 bytes over the 22 s of the first iteration.
        assert_eq!(rate.average(), Some(177));
    }
}
