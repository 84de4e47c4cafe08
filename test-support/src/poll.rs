//! Waiting for something to happen, for all the tests: the one polling loop.

use std::time::{Duration, Instant};

/// How often a condition is checked again.
const INTERVAL: Duration = Duration::from_millis(50);

/// Calls `check` until it returns `Ok`, at most for `timeout`, pausing between calls; returns
/// what the last call returned (the caller says what a timeout means, with what was seen last).
pub async fn poll<T, E>(
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = check().await;
        if last.is_ok() || Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// Waits until `ready` holds, or panics after `timeout` naming `what` was waited for.
pub async fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    poll(timeout, async || if ready() { Ok(()) } else { Err(()) })
        .await
        .unwrap_or_else(|()| panic!("timed out after {timeout:?} waiting for {what}"));
}
