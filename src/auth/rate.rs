//! `auth.rate_limit`: a token bucket per identity, with a bounded number of buckets.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::config::RateLimitConfig;

/// Most buckets kept in each of the two maps (identified callers, addresses). Identities are
/// few, but callers without credentials are counted by address, and addresses are as many as
/// a client can spoof; beyond this the idle buckets are dropped, and if that is not enough
/// the newcomers of that map share one bucket, so memory stays bounded whoever calls. A
/// caller that already has a bucket keeps it: a flood of new addresses cannot move a known
/// caller into the shared bucket.
pub const MAX_KEYS: usize = 10_000;

/// Whose bucket a request is taken from.
#[derive(Debug, Clone, Copy)]
pub enum Caller<'a> {
    /// A caller whose credentials proved this (qualified) identity.
    Identified(&'a str),
    /// A caller without proven credentials, counted by its address.
    Anonymous(&'a str),
}

/// The buckets by key, with when each was last used, and when idle ones were last swept.
#[derive(Default)]
struct Map {
    buckets: HashMap<String, (DefaultDirectRateLimiter, Instant)>,
    swept: Option<Instant>,
}

/// One map of buckets. governor's keyed limiter cannot say whether a key has a bucket, which
/// is what keeping known callers out of the overflow bucket needs, so the map is ours and
/// each bucket is one of governor's direct limiters.
struct Buckets {
    quota: Quota,
    /// A bucket untouched this long is full again, so dropping it loses nothing.
    refill: Duration,
    map: Mutex<Map>,
    /// Shared by the newcomers that found the map full of buckets in use.
    overflow: DefaultDirectRateLimiter,
}

impl Buckets {
    fn new(quota: Quota, refill: Duration) -> Self {
        Self {
            quota,
            refill,
            map: Mutex::new(Map::default()),
            overflow: RateLimiter::direct(quota),
        }
    }

    fn check(&self, key: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let outcome = {
            let mut guard = self.map.lock().expect("rate-limit map lock");
            let Map { buckets, swept } = &mut *guard;
            // A sweep walks every bucket: at most one a second, so that a flood of newcomers
            // past the bound costs one walk a second, not one a request.
            if !buckets.contains_key(key)
                && buckets.len() >= MAX_KEYS
                && swept.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1))
            {
                buckets.retain(|_, (_, used)| now.duration_since(*used) < self.refill);
                *swept = Some(now);
            }
            let room = buckets.len() < MAX_KEYS;
            match buckets.get_mut(key) {
                Some((bucket, used)) => {
                    *used = now;
                    bucket.check()
                }
                None if room => {
                    let bucket = RateLimiter::direct(self.quota);
                    let outcome = bucket.check();
                    buckets.insert(key.to_string(), (bucket, now));
                    outcome
                }
                None => self.overflow.check(),
            }
        };
        outcome.map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    fn len(&self) -> usize {
        self.map.lock().expect("rate-limit map lock").buckets.len()
    }
}

/// The limiter of the daemon. Identified callers and addresses are kept apart, so a flood of
/// spoofed addresses cannot push a proven caller into the shared overflow bucket.
pub struct Limiter {
    identified: Buckets,
    anonymous: Buckets,
}

impl Limiter {
    /// A limiter of `config`.
    pub fn new(config: &RateLimitConfig) -> Self {
        let burst = config.burst.unwrap_or(config.per_second);
        let quota = Quota::per_second(config.per_second).allow_burst(burst);
        // The time an empty bucket takes to fill, rounded up to whole seconds.
        let refill = Duration::from_secs(u64::from(burst.get().div_ceil(config.per_second.get())));
        Self {
            identified: Buckets::new(quota, refill),
            anonymous: Buckets::new(quota, refill),
        }
    }

    /// Takes one request from the caller's bucket; when it is empty, how long until it holds
    /// one.
    pub fn check(&self, caller: Caller<'_>) -> Result<(), Duration> {
        match caller {
            Caller::Identified(name) => self.identified.check(name),
            Caller::Anonymous(address) => self.anonymous.check(address),
        }
    }

    /// How many buckets are kept (the two overflow buckets not counted).
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
        assert!(l.len() <= MAX_KEYS, "{}", l.len());
    }

    /// Addresses beyond the bound share one bucket; an identified caller is not among them.
    /// (A burst of 100 at 1/s: no bucket is full again, so none is dropped, however slowly
    /// the flood runs on a loaded machine.)
    #[test]
    fn a_flood_of_addresses_does_not_push_identified_callers_into_the_shared_bucket() {
        let l = limiter(1, 100);
        for i in 0..MAX_KEYS {
            let _ = l.check(Caller::Anonymous(&format!("10.1.{}.{}", i / 256, i % 256)));
        }
        // Newcomer addresses share the overflow bucket: 100 pass, the next is refused ...
        for i in 0..100 {
            assert!(l.check(Caller::Anonymous(&format!("192.0.2.{i}"))).is_ok());
        }
        assert!(l.check(Caller::Anonymous("192.0.2.200")).is_err());
        // ... but a proven caller has its own bucket.
        assert!(l.check(Caller::Identified("token:ci")).is_ok());
    }

    /// The bound and one past it: the last address that fits gets its own bucket, the next
    /// one the shared overflow bucket; an address seen before the map filled keeps its own
    /// bucket however many newcomers drained the overflow after it (before, past the bound
    /// every address, known or not, was sent to the overflow bucket).
    #[test]
    fn past_the_bound_only_newcomers_share_a_bucket() {
        let l = limiter(1, 100);
        for i in 0..MAX_KEYS - 1 {
            let _ = l.check(Caller::Anonymous(&format!("10.2.{}.{}", i / 256, i % 256)));
        }
        assert!(l.check(Caller::Anonymous("198.51.100.1")).is_ok());
        assert_eq!(l.len(), MAX_KEYS, "the last bucket that fits");
        for _ in 0..100 {
            assert!(l.check(Caller::Anonymous("198.51.100.2")).is_ok());
        }
        assert!(
            l.check(Caller::Anonymous("198.51.100.3")).is_err(),
            "overflow is shared"
        );
        assert_eq!(l.len(), MAX_KEYS, "no bucket for a newcomer past the bound");
        assert!(
            l.check(Caller::Anonymous("198.51.100.1")).is_ok(),
            "its own bucket"
        );
    }

    /// Buckets idle long enough to be full again are dropped to make room for newcomers.
    #[test]
    fn idle_buckets_make_room() {
        let l = limiter(1000, 1);
        for i in 0..MAX_KEYS {
            let _ = l.check(Caller::Anonymous(&format!("10.3.{}.{}", i / 256, i % 256)));
        }
        // Full again after 1 ms; the sweep drops buckets untouched for the 1 s rounding.
        std::thread::sleep(Duration::from_millis(1100));
        assert!(l.check(Caller::Anonymous("203.0.113.1")).is_ok());
        assert!(
            l.check(Caller::Anonymous("203.0.113.2")).is_ok(),
            "its own bucket, not the overflow's"
        );
        assert_eq!(l.len(), 2);
    }
}
