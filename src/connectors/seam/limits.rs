//! Rows-per-second and bytes-per-second limits shared by every worker of a job.

use std::num::NonZeroU32;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio_util::sync::CancellationToken;

/// The rate limits of one job (`target.rowsPerSecond`, `target.bytesPerSecond`).
#[derive(Debug, Default)]
pub struct Limits {
    rows: Option<DefaultDirectRateLimiter>,
    bytes: Option<DefaultDirectRateLimiter>,
    /// A second's worth of bytes: larger requests are let through in steps of this size.
    burst: u32,
    /// A second's worth of rows.
    rows_burst: u32,
}

impl Limits {
    /// Limits of `rows_per_second` rows and `bytes_per_second` bytes (none when unset).
    pub fn new(rows_per_second: Option<u32>, bytes_per_second: Option<u64>) -> Self {
        let burst = bytes_per_second.map_or(u32::MAX, |b| u32::try_from(b).unwrap_or(u32::MAX));
        Self {
            rows: rows_per_second
                .and_then(NonZeroU32::new)
                .map(|n| RateLimiter::direct(Quota::per_second(n))),
            bytes: bytes_per_second
                .and_then(|_| NonZeroU32::new(burst))
                .map(|n| RateLimiter::direct(Quota::per_second(n))),
            burst,
            rows_burst: rows_per_second.unwrap_or(u32::MAX),
        }
    }

    /// Waits until `rows` rows of `bytes` bytes in all may go; false when `cancel` fires first
    /// (a limit must never delay a stop).
    pub async fn wait(&self, rows: u64, bytes: u64, cancel: &CancellationToken) -> bool {
        if self.rows.is_none() && self.bytes.is_none() {
            return !cancel.is_cancelled();
        }
        tokio::select! {
            _ = self.wait_quota(rows, bytes) => true,
            _ = cancel.cancelled() => false,
        }
    }

    async fn wait_quota(&self, rows: u64, bytes: u64) {
        if let Some(limit) = &self.rows {
            take(limit, rows, self.rows_burst).await;
        }
        if let Some(limit) = &self.bytes {
            take(limit, bytes, self.burst).await;
        }
    }
}

/// Takes `n` cells of `limit`, in steps of at most `burst` (a request larger than a second's
/// worth goes through in several waits).
async fn take(limit: &DefaultDirectRateLimiter, n: u64, burst: u32) {
    let burst = u64::from(burst.max(1));
    let mut left = n;
    while left > 0 {
        let step = left.min(burst);
        if let Some(step) = NonZeroU32::new(u32::try_from(step).unwrap_or(u32::MAX)) {
            let _ = limit.until_n_ready(step).await;
        }
        left -= step;
    }
}
