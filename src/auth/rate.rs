//! `auth.rate_limit`: a token bucket per identity, with a bounded number of buckets.

use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::RateLimitConfig;

/// Most buckets kept in each of the two maps (identified callers, addresses). Identities are
/// few, but callers without credentials are counted by address, and addresses are as many as
/// a client can spoof; beyond this the idle buckets are dropped, and if that is not enough
/// the newcomers of that map share one bucket, so memory stays bounded whoever calls.
pub const MAX_KEYS: usize = 10_000;

/// The key shared by callers counted after [`MAX_KEYS`] buckets exist.
const OVERFLOW: &str = "<overflow>";

/// Whose bucket a request is taken from.
#[derive(Debug, Clone, Copy)]
pub enum Caller<'a> {
    /// A caller whose credentials proved this (qualified) identity.
    Identified(&'a str),
    /// A caller without proven credentials, counted by its address.
    Anonymous(&'a str),
}

/// The limiter of the daemon. Identified callers and addresses are kept apart, so a flood of
/// spoofed addresses cannot push a proven caller into the shared overflow bucket.
pub struct Limiter {
    identified: DefaultKeyedRateLimiter<String>,
    anonymous: DefaultKeyedRateLimiter<String>,
}

impl Limiter {
    /// A limiter of `config`.
    pub fn new(config: &RateLimitConfig) -> Self {
        let quota = Quota::per_second(config.per_second)
            .allow_burst(config.burst.unwrap_or(config.per_second));
        Self {
            identified: RateLimiter::keyed(quota),
            anonymous: RateLimiter::keyed(quota),
        }
    }

    /// Takes one request from the caller's bucket; when it is empty, how long until it holds
    /// one.
    pub fn check(&self, caller: Caller<'_>) -> Result<(), Duration> {
        let (buckets, key) = match caller {
            Caller::Identified(name) => (&self.identified, name),
            Caller::Anonymous(address) => (&self.anonymous, address),
        };
        let mut key = key.to_string();
        if buckets.len() >= MAX_KEYS {
            buckets.retain_recent();
            if buckets.len() >= MAX_KEYS {
                key = OVERFLOW.to_string();
            }
        }
        buckets
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// How many buckets are kept.
    pub fn len(&self) -> usize {
        self.identified.len() + self.anonymous.len()
    }

    /// Whether no bucket is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        let a = Caller::Identified("token:a");
        assert!(l.check(a).is_ok());
        assert!(l.check(a).is_ok());
        let wait = l.check(a).expect_err("a's bucket is empty");
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(l.check(Caller::Identified("token:b")).is_ok());
        // The same text as an address is another caller.
        assert!(l.check(Caller::Anonymous("token:a")).is_ok());
    }

    #[test]
    fn the_number_of_buckets_is_bounded() {
        let l = limiter(1, 1);
        for i in 0..MAX_KEYS + 50 {
            let _ = l.check(Caller::Anonymous(&format!("10.0.{}.{}", i / 256, i % 256)));
        }
        assert!(l.len() <= MAX_KEYS + 1, "{}", l.len());
    }

    /// Addresses beyond the bound share one bucket; an identified caller is not among them.
    #[test]
    fn a_flood_of_addresses_does_not_push_identified_callers_into_the_shared_bucket() {
        let l = limiter(1, 1);
        for i in 0..MAX_KEYS + 10 {
            let _ = l.check(Caller::Anonymous(&format!("10.1.{}.{}", i / 256, i % 256)));
        }
        // The overflow bucket is empty now: a newcomer address is refused ...
        assert!(l.check(Caller::Anonymous("192.0.2.1")).is_err());
        // ... but a proven caller has its own bucket.
        assert!(l.check(Caller::Identified("token:ci")).is_ok());
    }
}
