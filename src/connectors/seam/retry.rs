//! Retries of one request, decided by the error's own classification ([`Retry`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use tokio_util::sync::CancellationToken;

use super::{Page, RequestError, Retry, Scan};

/// How long a request is retried before the job gives up on it, unless the job says
/// otherwise (`retryForSeconds`).
pub(crate) const RETRY_FOR: Duration = Duration::from_secs(600);

/// Retries of a job: how many, and why it is waiting while one is pending.
#[derive(Debug, Default)]
pub struct Retries {
    /// Requests retried.
    pub count: AtomicU64,
    waiting: Mutex<Option<String>>,
    /// How long one request is retried; `RETRY_FOR` unless set.
    limit: std::sync::OnceLock<Duration>,
}

impl Retries {
    /// Why the job is waiting, while a request is being retried.
    pub fn waiting(&self) -> Option<String> {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Retries one request for at most `limit` (the job's `retryForSeconds`); only the first
    /// call counts.
    pub fn limit(&self, limit: Duration) {
        let _ = self.limit.set(limit);
    }

    fn retry_for(&self) -> Duration {
        self.limit.get().copied().unwrap_or(RETRY_FOR)
    }

    /// Requests retried so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn set_waiting(&self, reason: Option<String>) {
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }
}

/// Runs `f` until it succeeds, its error says retrying cannot help (for a request that is
/// `idempotent` or not), the retries' limit (`RETRY_FOR` by default) has passed, or the job is
/// cancelled. Every retry is
/// counted and the reason shown as the job's waiting state.
pub async fn retry<T, E, F, Fut>(
    retries: &Retries,
    cancel: &CancellationToken,
    what: &str,
    idempotent: bool,
    mut f: F,
) -> Result<T, E>
where
    E: RequestError,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut delays = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(10))
        .with_jitter()
        .without_max_times()
        .build();
    let started = Instant::now();
    loop {
        match f().await {
            Ok(v) => {
                if retries.waiting().is_some() {
                    retries.set_waiting(None);
                }
                return Ok(v);
            }
            Err(e) if worth_retrying(&e, idempotent) && started.elapsed() < retries.retry_for() => {
                retries.count.fetch_add(1, Ordering::Relaxed);
                let why = e.waiting_for().unwrap_or_else(|| e.to_string());
                retries.set_waiting(Some(format!(
                    "{what}: {why} (retried for at most {}s, retryForSeconds)",
                    retries.retry_for().as_secs()
                )));
                tracing::debug!(error = %e, "{what}: retrying");
                let delay = delays.next().unwrap_or(Duration::from_secs(10));
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = cancel.cancelled() => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

fn worth_retrying(e: &impl RequestError, idempotent: bool) -> bool {
    match e.retry() {
        Retry::Safe => true,
        Retry::IfIdempotent => idempotent,
        Retry::Never => false,
    }
}

/// Reads the page of `unit` at `cursor`, retried as [`retry`] does, with the moment its
/// rows' TTLs count from: when the answering request was sent for a source that counts them
/// at the request ([`Scan::TTLS_COUNTED_AT_REQUEST`], CQL, whose coordinator fixes the moment
/// when it begins the read), else when the page arrived (a reader that counts them itself
/// does so when it hands the page over). The answer can come many seconds after the request
/// (a replica that stopped makes the coordinator wait for another): TTLs aged from its
/// arrival would let a copy outlive its source by that wait (6-16 s seen with a node stopped).
pub async fn read_page<S: Scan>(
    scan: &S,
    unit: &S::Unit,
    cursor: &S::Cursor,
    retries: &Retries,
    cancel: &CancellationToken,
    what: &str,
) -> (Result<Page<S::Row, S::Cursor>, S::Error>, Instant) {
    let mut sent = Instant::now();
    let page = retry(retries, cancel, what, true, || {
        sent = Instant::now();
        scan.page(unit, cursor)
    })
    .await;
    let read_at = if S::TTLS_COUNTED_AT_REQUEST {
        sent
    } else {
        Instant::now()
    };
    (page, read_at)
}
