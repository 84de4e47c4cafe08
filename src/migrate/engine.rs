//! The migration engine: plans the units of a job, copies them concurrently with bounded
//! memory, retries what can safely be retried, and records which token ranges are complete.
//!
//! A unit is recorded complete only after every write of every row in it was acknowledged, so
//! the set of completed ranges can be trusted by savepoints and resumes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use futures::StreamExt;
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::response::{PagingState, PagingStateResponse};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::EngineError;
use super::config::{JobConfig, SourceConfig, TargetConfig};
use super::limits::Limits;
use crate::connectors::cql;
use crate::connectors::cql::copy::{CopyPlan, RowStats, Write, execute_batch};
use crate::savepoints::ranges::{RangeSet, TokenRange, plan_units};

/// Most statements in one batch, and about the most bytes (a row may take it over). Cassandra
/// logs a warning for every batch above `batch_size_warn_threshold` (5 KiB by default), even a
/// single-partition one: staying under it keeps the target's log readable.
const MAX_BATCH_STATEMENTS: usize = 32;
const MAX_BATCH_BYTES: usize = 4 * 1024;

/// How long a request is retried before the job gives up on it.
pub(crate) const RETRY_FOR: Duration = Duration::from_secs(600);

/// Live counters of a running migration.
#[derive(Debug, Default)]
pub struct Progress {
    /// Units in the plan.
    pub units_total: AtomicU64,
    /// Units complete (including skipped ones).
    pub units_done: AtomicU64,
    /// Units skipped because `skipTokenRanges` covered them.
    pub units_skipped: AtomicU64,
    /// Rows read from the source.
    pub rows_read: AtomicU64,
    /// Rows whose every write was acknowledged.
    pub rows_written: AtomicU64,
    /// Rows skipped for a null primary key column (`dropNullPrimaryKeys`).
    pub rows_dropped: AtomicU64,
    /// Cell bytes read.
    pub bytes_read: AtomicU64,
    /// Cell bytes written.
    pub bytes_written: AtomicU64,
    /// Write statements acknowledged.
    pub statements: AtomicU64,
    /// Requests retried.
    pub retries: AtomicU64,
    /// Why the job is waiting, while a request is being retried.
    pub waiting: Mutex<Option<String>>,
}

impl Progress {
    /// Counter name and value pairs, as shown in job status.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("unitsTotal", g(&self.units_total)),
            ("unitsDone", g(&self.units_done)),
            ("unitsSkipped", g(&self.units_skipped)),
            ("rowsRead", g(&self.rows_read)),
            ("rowsWritten", g(&self.rows_written)),
            ("rowsDropped", g(&self.rows_dropped)),
            ("bytesRead", g(&self.bytes_read)),
            ("bytesWritten", g(&self.bytes_written)),
            ("statementsWritten", g(&self.statements)),
            ("retries", g(&self.retries)),
        ]
    }

    /// The current waiting reason.
    pub fn waiting(&self) -> Option<String> {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The pieces of each unit left to do once `skip` is done; units entirely in `skip` are
    /// counted done (and skipped) right away.
    pub fn plan(&self, units: &[TokenRange], skip: &RangeSet) -> Vec<Vec<TokenRange>> {
        self.units_total
            .store(units.len() as u64, Ordering::Relaxed);
        let mut work = Vec::new();
        for unit in units {
            let missing = skip.missing(*unit);
            if missing.is_empty() {
                self.units_skipped.fetch_add(1, Ordering::Relaxed);
                self.units_done.fetch_add(1, Ordering::Relaxed);
            } else {
                work.push(missing);
            }
        }
        work
    }

    fn set_waiting(&self, reason: Option<String>) {
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }
}

/// A checked, connected, planned migration, ready to run.
pub struct Migration {
    source: Arc<Session>,
    target: Arc<Session>,
    plan: Arc<CopyPlan>,
    units: Vec<TokenRange>,
    skip: RangeSet,
    max_units: usize,
    max_in_flight: usize,
    rows_per_second: Option<u32>,
    bytes_per_second: Option<u64>,
    local_dc: Option<String>,
}

impl Migration {
    /// Connects to both sides, checks the schemas, prepares statements and plans units.
    /// Nothing is written.
    pub async fn prepare(config: &JobConfig) -> Result<Self, EngineError> {
        let SourceConfig::Cql(src) = &config.source;
        let TargetConfig::Cql(dst) = &config.target;
        let cql::Pair {
            source,
            target,
            source_schema,
            target_schema,
            mapping,
        } = cql::open_pair(src, dst, &config.renames).await?;
        if source_schema.is_counter_table() && src.preserve_timestamps {
            tracing::info!(
                "preserveTimestamps does not apply to counter tables (counters have no writable writetime)"
            );
        }
        let plan = CopyPlan::prepare(
            &source,
            &target,
            src,
            dst,
            source_schema,
            target_schema,
            &mapping,
        )
        .await?;

        let tokens: Vec<i64> = source
            .get_cluster_state()
            .replica_locator()
            .ring()
            .iter()
            .map(|(t, _)| t.value())
            .collect();
        let split = src.split_count.unwrap_or(256).max(1);
        let units = plan_units(&tokens, split);
        let skip = RangeSet::from_ranges(
            config
                .skip_token_ranges
                .iter()
                .filter_map(|(a, b)| TokenRange::new(*a, *b)),
        );
        Ok(Self {
            source: Arc::new(source),
            target: Arc::new(target),
            plan: Arc::new(plan),
            units,
            skip,
            max_units: src.max_concurrent_units.unwrap_or(16),
            max_in_flight: dst.max_in_flight,
            rows_per_second: dst.rows_per_second,
            bytes_per_second: dst.bytes_per_second,
            local_dc: src.endpoint.local_dc.clone(),
        })
    }

    /// Units in the plan.
    pub fn units(&self) -> &[TokenRange] {
        &self.units
    }

    /// Copies every unit not covered by `skipTokenRanges`. Returns the ranges known complete
    /// (those skipped included) whether the run succeeds, fails or is stopped, through `done`.
    pub async fn run(
        self,
        progress: Arc<Progress>,
        done: Arc<Mutex<RangeSet>>,
        cancel: CancellationToken,
    ) -> Result<(), EngineError> {
        {
            let mut d = done.lock().unwrap_or_else(|p| p.into_inner());
            for r in self.skip.ranges() {
                d.insert(*r);
            }
        }
        let work = progress.plan(&self.units, &self.skip);
        let failed = cancel.child_token();
        let shared = Arc::new(Shared {
            source: self.source.clone(),
            target: self.target.clone(),
            plan: self.plan.clone(),
            progress: progress.clone(),
            done: done.clone(),
            writes: Arc::new(Semaphore::new(self.max_in_flight)),
            limits: Arc::new(Limits::new(self.rows_per_second, self.bytes_per_second)),
            local_dc: self.local_dc.clone(),
            // A failure of one unit stops the others; a stop request reaches them through it.
            cancel: failed.clone(),
        });
        drive_units(
            work,
            self.max_units,
            (&cancel, &failed),
            (
                |e: &EngineError| matches!(e, EngineError::Stopped),
                || EngineError::Stopped,
            ),
            |pieces| {
                let s = shared.clone();
                async move { s.copy_unit(pieces).await }
            },
        )
        .await
    }
}

/// Runs `unit` on each piece of `work`, `max` at once. The first error that is not a stop
/// (`is_stop`) cancels `failed`, which the units watch, so one unit failing for good stops the
/// others; it is returned, else `stopped()` when `cancel` fired, else `Ok`.
pub(crate) async fn drive_units<E, F, Fut>(
    work: Vec<Vec<TokenRange>>,
    max: usize,
    (cancel, failed): (&CancellationToken, &CancellationToken),
    (is_stop, stopped): (impl Fn(&E) -> bool, fn() -> E),
    unit: F,
) -> Result<(), E>
where
    F: FnMut(Vec<TokenRange>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let mut results = futures::stream::iter(work)
        .map(unit)
        .buffer_unordered(max.max(1));
    let mut first_error = None;
    while let Some(result) = results.next().await {
        if let Err(e) = result
            && first_error.is_none()
        {
            if !is_stop(&e) {
                failed.cancel();
            }
            first_error = Some(e);
        }
    }
    match first_error {
        None if cancel.is_cancelled() => Err(stopped()),
        None => Ok(()),
        Some(e) => Err(e),
    }
}

#[derive(Clone)]
struct Shared {
    source: Arc<Session>,
    target: Arc<Session>,
    plan: Arc<CopyPlan>,
    progress: Arc<Progress>,
    done: Arc<Mutex<RangeSet>>,
    writes: Arc<Semaphore>,
    limits: Arc<Limits>,
    local_dc: Option<String>,
    cancel: CancellationToken,
}

impl Shared {
    /// Copies the missing pieces of one unit; records them complete once every write is
    /// acknowledged.
    async fn copy_unit(&self, pieces: Vec<TokenRange>) -> Result<(), EngineError> {
        let mut in_flight: JoinSet<Result<(), EngineError>> = JoinSet::new();
        let result = self.scan_unit(&pieces, &mut in_flight).await;
        // Whatever happened, let the writes already sent finish: their rows are then either
        // written or reported, never half-tracked.
        let mut write_error = None;
        while let Some(joined) = in_flight.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => write_error = write_error.or(Some(e)),
                Err(e) => {
                    write_error =
                        write_error.or(Some(EngineError::Failed(format!("write task failed: {e}"))))
                }
            }
        }
        result?;
        if let Some(e) = write_error {
            return Err(e);
        }
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        for p in &pieces {
            done.insert(*p);
        }
        self.progress.units_done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn scan_unit(
        &self,
        pieces: &[TokenRange],
        in_flight: &mut JoinSet<Result<(), EngineError>>,
    ) -> Result<(), EngineError> {
        let plan = &self.plan;
        let mut writes = Vec::new();
        for piece in pieces {
            let mut statement = plan.select().clone();
            // Send the scan to a replica of the range; a retry may go elsewhere.
            if let Some(node) = cql::replica_for(
                &self.source,
                &self.plan.source,
                piece.end,
                self.local_dc.as_deref(),
            ) {
                statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                    NodeIdentifier::Node(node),
                    None,
                )));
            }
            let mut paging = PagingState::start();
            let mut last_partition: Option<Vec<Option<bytes::Bytes>>> = None;
            // Writes of consecutive rows of one partition, sent as one unlogged batch: a
            // single-partition batch is applied as one mutation, far cheaper for the target
            // than one request per row.
            let mut batch: Vec<Write> = Vec::new();
            let mut batch_rows = 0u64;
            loop {
                if self.cancel.is_cancelled() {
                    return Err(EngineError::Stopped);
                }
                let page = retry(
                    &self.progress,
                    &self.cancel,
                    "reading from the source",
                    true,
                    || {
                        plan.read_page(
                            &self.source,
                            &statement,
                            piece.start,
                            piece.end,
                            paging.clone(),
                        )
                    },
                )
                .await;
                let read_at = Instant::now();
                let (rows, next) = match page {
                    Ok(p) => p,
                    Err(_) if self.cancel.is_cancelled() => return Err(EngineError::Stopped),
                    Err(e) => {
                        return Err(EngineError::Failed(format!("source: reading {piece}: {e}")));
                    }
                };
                self.progress
                    .rows_read
                    .fetch_add(rows.len() as u64, Ordering::Relaxed);
                let np = plan.source.partition_key.len();
                for row in &rows {
                    self.progress
                        .bytes_read
                        .fetch_add(row.size() as u64, Ordering::Relaxed);
                    let new_partition = last_partition.as_deref() != Some(&row.cells[..np]);
                    if new_partition {
                        last_partition = Some(row.cells[..np].to_vec());
                    }
                    let mut stats = RowStats::default();
                    writes.clear();
                    plan.writes(row, new_partition, &mut stats, &mut writes);
                    if stats.dropped > 0 {
                        if !plan.drops_null_keys() {
                            return Err(EngineError::Failed(format!(
                                "source: a row of {piece} has a null primary key column; set target.dropNullPrimaryKeys: true to skip such rows"
                            )));
                        }
                        self.progress
                            .rows_dropped
                            .fetch_add(stats.dropped, Ordering::Relaxed);
                        continue;
                    }
                    // Waiting for the rate limits must not delay a stop.
                    let row_bytes: usize = writes.iter().map(|w| w.values.size()).sum();
                    if !self.limits.wait(row_bytes, &self.cancel).await {
                        return Err(EngineError::Stopped);
                    }
                    if new_partition && !batch.is_empty() {
                        self.send(
                            in_flight,
                            std::mem::take(&mut batch),
                            std::mem::take(&mut batch_rows),
                            read_at,
                        )
                        .await?;
                    }
                    let mut counted = false;
                    for write in writes.drain(..) {
                        if write.counters.is_some() {
                            // A counter row reads before it writes: it travels alone.
                            self.send(in_flight, vec![write], 1, read_at).await?;
                            counted = true;
                        } else {
                            batch.push(write);
                        }
                    }
                    if !counted {
                        batch_rows += 1;
                    }
                    let batch_bytes: usize = batch.iter().map(|w| w.values.size()).sum();
                    if batch.len() >= MAX_BATCH_STATEMENTS || batch_bytes >= MAX_BATCH_BYTES {
                        self.send(
                            in_flight,
                            std::mem::take(&mut batch),
                            std::mem::take(&mut batch_rows),
                            read_at,
                        )
                        .await?;
                    }
                    // Surface write failures early instead of scanning on.
                    while let Some(joined) = in_flight.try_join_next() {
                        match joined {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => return Err(e),
                            Err(e) => {
                                return Err(EngineError::Failed(format!("write task failed: {e}")));
                            }
                        }
                    }
                }
                if !batch.is_empty() {
                    self.send(
                        in_flight,
                        std::mem::take(&mut batch),
                        std::mem::take(&mut batch_rows),
                        read_at,
                    )
                    .await?;
                }
                match next {
                    PagingStateResponse::HasMorePages { state } => paging = state,
                    PagingStateResponse::NoMorePages => break,
                }
            }
        }
        Ok(())
    }

    /// Sends `writes` (one statement, or one partition's batch) as one request, retried as a
    /// whole; `rows` rows are complete once it is acknowledged.
    async fn send(
        &self,
        in_flight: &mut JoinSet<Result<(), EngineError>>,
        writes: Vec<Write>,
        rows: u64,
        read_at: Instant,
    ) -> Result<(), EngineError> {
        let permit = tokio::select! {
            permit = self.writes.clone().acquire_owned() => permit.expect("never closed"),
            _ = self.cancel.cancelled() => return Err(EngineError::Stopped),
        };
        let target = self.target.clone();
        let progress = self.progress.clone();
        let cancel = self.cancel.clone();
        let consistency = self.plan.target_consistency();
        in_flight.spawn(async move {
            let size: u64 = writes.iter().map(|w| w.values.size() as u64).sum();
            let idempotent = writes.iter().all(|w| w.idempotent);
            let result = retry(
                &progress,
                &cancel,
                "writing to the target",
                idempotent,
                || async {
                    match writes.as_slice() {
                        [one] => one.execute(&target, read_at.elapsed()).await,
                        many => execute_batch(many, &target, consistency, read_at.elapsed()).await,
                    }
                },
            )
            .await;
            drop(permit);
            match result {
                Ok(()) => {
                    progress
                        .statements
                        .fetch_add(writes.len() as u64, Ordering::Relaxed);
                    progress.bytes_written.fetch_add(size, Ordering::Relaxed);
                    progress.rows_written.fetch_add(rows, Ordering::Relaxed);
                    Ok(())
                }
                Err(_) if cancel.is_cancelled() => Err(EngineError::Stopped),
                Err(e) => Err(EngineError::Failed(format!("target: {e}"))),
            }
        });
        // Surface write failures early instead of scanning on.
        while let Some(joined) = in_flight.try_join_next() {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(EngineError::Failed(format!("write task failed: {e}"))),
            }
        }
        Ok(())
    }
}

/// Runs `f` until it succeeds, the error is not worth retrying, `RETRY_FOR` has passed, or the
/// job is cancelled. Every retry is counted and the reason shown as the job's waiting state.
pub(crate) async fn retry<T, F, Fut>(
    progress: &Progress,
    cancel: &CancellationToken,
    what: &str,
    idempotent: bool,
    mut f: F,
) -> Result<T, ExecutionError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ExecutionError>>,
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
                if progress.waiting().is_some() {
                    progress.set_waiting(None);
                }
                return Ok(v);
            }
            Err(e) if retryable(&e, idempotent) && started.elapsed() < RETRY_FOR => {
                progress.retries.fetch_add(1, Ordering::Relaxed);
                progress.set_waiting(Some(format!("{what}: {e}")));
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

/// Whether an error may go away by itself. Writes that are not idempotent (counter updates)
/// are retried only when the error proves they were not applied.
fn retryable(e: &ExecutionError, idempotent: bool) -> bool {
    match e {
        ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => true,
        ExecutionError::RequestTimeout(_) => idempotent,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => match db {
            DbError::Unavailable { .. }
            | DbError::Overloaded
            | DbError::IsBootstrapping
            | DbError::RateLimitReached { .. } => true,
            // A replica failing a read is most often a node too busy to answer (the reason is
            // "UNKNOWN"); a read changes nothing, so it is tried again like a timeout.
            DbError::ReadTimeout { .. }
            | DbError::ReadFailure { .. }
            | DbError::WriteTimeout { .. }
            | DbError::ServerError
            | DbError::TruncateError => idempotent,
            _ => false,
        },
        ExecutionError::LastAttemptError(
            RequestAttemptError::BrokenConnectionError(_)
            | RequestAttemptError::UnableToAllocStreamId,
        ) => idempotent,
        _ => false,
    }
}
