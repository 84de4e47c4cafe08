//! Rows-per-second and bytes-per-second limits shared by every worker of a job.

use std::num::NonZeroU32;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio_util::sync::CancellationToken;

/// The rate limits of one job (`target.rowsPerSecond`, `target.bytesPerSecond`).
#[derive(Debug, Default)]
pub struct Limits {
    rows: Option<DefaultDirectRateLimiter>,
    bytes: Option<DefaultDirectRateLimiter>,
    /// A second's worth of bytes: larger rows are let through in steps of this size.
    burst: u32,
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
        }
    }

    /// Waits until one row of `bytes` may go; false when `cancel` fires first (a limit must
    /// never delay a stop).
    pub async fn wait(&self, bytes: usize, cancel: &CancellationToken) -> bool {
        if self.rows.is_none() && self.bytes.is_none() {
            return !cancel.is_cancelled();
        }
        tokio::select! {
            _ = self.wait_quota(bytes) => true,
            _ = cancel.cancelled() => false,
        }
    }

    async fn wait_quota(&self, bytes: usize) {
        if let Some(limit) = &self.rows {
            limit.until_ready().await;
        }
        if let Some(limit) = &self.bytes {
            let mut left = u32::try_from(bytes).unwrap_or(u32::MAX);
            let burst = self.burst.max(1);
            while left > 0 {
                let n = left.min(burst);
                if let Some(n) = NonZeroU32::new(n) {
                    let _ = limit.until_n_ready(n).await;
                }
                left -= n;
            }
        }
    }
}
