//! `auth.rate_limit`: a token bucket per identity, with a bounded number of buckets.

use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::RateLimitConfig;

/// Most buckets kept. Identities are few, but callers without credentials are counted by
/// address, and addresses are as many as a client can spoof; beyond this the idle buckets are
/// dropped, and if that is not enough the newcomers share one bucket, so memory stays bounded
/// whoever calls.
pub const MAX_KEYS: usize = 10_000;

/// The key shared by callers counted after [`MAX_KEYS`] buckets exist.
const OVERFLOW: &str = "<overflow>";

/// The limiter of the daemon.
pub struct Limiter {
    buckets: DefaultKeyedRateLimiter<String>,
}

impl Limiter {
    /// A limiter of `config`.
    pub fn new(config: &RateLimitConfig) -> Self {
        let quota = Quota::per_second(config.per_second)
            .allow_burst(config.burst.unwrap_or(config.per_second));
        Self {
            buckets: RateLimiter::keyed(quota),
        }
    }

    /// Takes one request from `key`'s bucket; when it is empty, how long until it holds one.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        let mut key = key.to_string();
        if self.buckets.len() >= MAX_KEYS {
            self.buckets.retain_recent();
            if self.buckets.len() >= MAX_KEYS {
                key = OVERFLOW.to_string();
            }
        }
        self.buckets
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// How many buckets are kept.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no bucket is kept.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn limiter(per_second: u32, burst: u32) -> Limiter {
        Limiter::new(&RateLimitConfig {
            per_second: NonZeroU32::new(per_second).unwrap(),
            burst: NonZeroU32::new(burst),
        })
    }

    #[test]
    fn each_identity_has_its_own_bucket() {
        let l = limiter(1, 2);
        assert!(l.check("a").is_ok());
        assert!(l.check("a").is_ok());
        let wait = l.check("a").expect_err("a's bucket is empty");
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(l.check("b").is_ok());
    }

    #[test]
    fn the_number_of_buckets_is_bounded() {
        let l = limiter(1, 1);
        for i in 0..MAX_KEYS + 50 {
            let _ = l.check(&format!("10.0.{}.{}", i / 256, i % 256));
        }
        assert!(l.len() <= MAX_KEYS + 1, "{}", l.len());
    }
}
