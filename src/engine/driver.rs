//! The migration engine: runs the units a source plans, each read page by page and written
//! through the target's requests, with bounded concurrency and memory, rate limits, retries
//! by each error's own classification, counters, and the record of completed units.
//!
//! A unit is recorded complete only after every write of every row in it was acknowledged, so
//! the record can be trusted by savepoints and resumes. It knows no data system: it drives the
//! traits of [`crate::connectors::seam`], and `Migration::prepare` has the connectors' registry
//! (`connectors::open_copy`: the connector whose pair the job's two sides are) open both sides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::EngineError;
use super::config::JobConfig;
use super::estimate::Estimator;
use crate::connectors::seam::limits::Limits;
use crate::connectors::seam::retry::{Retries, read_page, retry};
use crate::connectors::seam::{
    Changes, Claim, Coordinator, CopyMaker, FollowContext, Pacing, Page, Pushed, Request, Scan,
    Sink, Unit,
};
use crate::jobs::running::Sample;
use crate::savepoints;

/// Live counters of a running migration.
#[derive(Debug, Default)]
pub struct Counters {
    /// Units in the plan.
    pub units_total: AtomicU64,
    /// Units complete (including skipped ones).
    pub units_done: AtomicU64,
    /// Units skipped because the job or a savepoint had them complete.
    pub units_skipped: AtomicU64,
    /// Rows read from the source.
    pub rows_read: AtomicU64,
    /// Rows whose every write was acknowledged.
    pub rows_written: AtomicU64,
    /// Rows left out on purpose (`dropNullPrimaryKeys`).
    pub rows_dropped: AtomicU64,
    /// Bytes read.
    pub bytes_read: AtomicU64,
    /// Bytes written.
    pub bytes_written: AtomicU64,
    /// Write statements (or items) acknowledged.
    pub statements: AtomicU64,
    /// Requests retried, and why the job waits while one is (shared with a change stream).
    pub retries: Arc<Retries>,
    /// The connectors' own counters, read when sampled.
    pub connector: ConnectorCounters,
    /// The rows and bytes the copy will have handled, estimated once it is planned.
    pub estimate: OnceLock<Estimator>,
    /// What the migration is doing: `copying`, then `streaming` for a replication.
    phase: Mutex<&'static str>,
}

/// Reads the counters a source and a target keep themselves, and what they wait for.
#[derive(Default)]
pub struct ConnectorCounters(Mutex<Vec<ReadCounters>>, Mutex<Vec<ReadWaiting>>);

type ReadCounters = Box<dyn Fn() -> Vec<(&'static str, u64)> + Send + Sync>;
type ReadWaiting = Box<dyn Fn() -> Option<String> + Send + Sync>;

impl std::fmt::Debug for ConnectorCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.read()).finish()
    }
}

impl ConnectorCounters {
    fn add(&self, read: ReadCounters) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(read);
    }

    fn add_waiting(&self, read: ReadWaiting) {
        self.1.lock().unwrap_or_else(|p| p.into_inner()).push(read);
    }

    /// What a connector waits for now, outside the engine's retries (a sink waiting for a
    /// peer inside a request of its own).
    pub fn waiting(&self) -> Option<String> {
        self.1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find_map(|read| read())
    }

    /// The counters now (none before the copy starts).
    pub fn read(&self) -> Vec<(&'static str, u64)> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .flat_map(|read| read())
            .collect()
    }
}

/// The counters of a migration at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopySnapshot {
    /// Units in the plan.
    pub units_total: u64,
    /// Units complete (including skipped ones).
    pub units_done: u64,
    /// Units skipped because the job or a savepoint had them complete.
    pub units_skipped: u64,
    /// Rows read from the source.
    pub rows_read: u64,
    /// Rows whose every write was acknowledged.
    pub rows_written: u64,
    /// Rows left out on purpose.
    pub rows_dropped: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Write statements acknowledged.
    pub statements_written: u64,
    /// Requests retried.
    pub retries: u64,
}

impl CopySnapshot {
    /// Counter name and value pairs, as shown in job status.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("unitsTotal", self.units_total),
            ("unitsDone", self.units_done),
            ("unitsSkipped", self.units_skipped),
            ("rowsRead", self.rows_read),
            ("rowsWritten", self.rows_written),
            ("rowsDropped", self.rows_dropped),
            ("bytesRead", self.bytes_read),
            ("bytesWritten", self.bytes_written),
            ("statementsWritten", self.statements_written),
            ("retries", self.retries),
        ]
    }
}

impl Counters {
    /// The counters now.
    pub fn snapshot(&self) -> CopySnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CopySnapshot {
            units_total: g(&self.units_total),
            units_done: g(&self.units_done),
            units_skipped: g(&self.units_skipped),
            rows_read: g(&self.rows_read),
            rows_written: g(&self.rows_written),
            rows_dropped: g(&self.rows_dropped),
            bytes_read: g(&self.bytes_read),
            bytes_written: g(&self.bytes_written),
            statements_written: g(&self.statements),
            retries: self.retries.count(),
        }
    }

    /// Why the job is waiting, while a request is being retried (by the engine, or by a
    /// connector inside a request of its own).
    pub fn waiting(&self) -> Option<String> {
        self.retries.waiting().or_else(|| self.connector.waiting())
    }

    /// What the migration is doing now.
    pub fn phase(&self) -> &'static str {
        let phase = *self.phase.lock().unwrap_or_else(|p| p.into_inner());
        if phase.is_empty() { "copying" } else { phase }
    }

    fn set_phase(&self, phase: &'static str) {
        *self.phase.lock().unwrap_or_else(|p| p.into_inner()) = phase;
    }

    /// The counters now, as job status and progress lines show them.
    pub fn sample(&self) -> Sample {
        let s = self.snapshot();
        let mut counters = s.pairs();
        counters.extend(self.connector.read());
        let done = s.rows_written + s.rows_dropped;
        Sample {
            counters,
            rows: s.rows_written,
            bytes: s.bytes_written,
            done,
            estimate: self
                .estimate
                .get()
                .and_then(|e| e.estimate(done, (s.rows_written, s.bytes_written))),
            units: (s.units_total, s.units_done, s.units_skipped),
            differences: None,
            waiting: self.waiting(),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// A checked, connected, planned migration, ready to run: a copy of the table (unless a
/// replication skips the snapshot), then the source's changes when it has a [`Changes`].
pub struct Migration {
    copy: Option<Box<dyn RunCopy>>,
    changes: Option<Arc<dyn Changes>>,
    skip: savepoints::Progress,
    coordinator: Option<Arc<dyn Coordinator>>,
}

impl Migration {
    /// What the run starts from: the work already complete, and what preparing it decided
    /// that a resume must know (a bulk load's id).
    pub fn complete(&self) -> &savepoints::Progress {
        &self.skip
    }

    /// True when the work already complete (the savepoint resumed from, the skip lists) covers
    /// every unit of the copy and no change stream follows it: a run would copy nothing.
    pub fn nothing_left(&self) -> bool {
        self.changes.is_none() && self.copy.as_ref().is_some_and(|c| c.remaining() == 0)
    }

    /// Shares the job's units with the other runs `coordinator` knows (`coordination`).
    pub fn coordinate(&mut self, coordinator: Arc<dyn Coordinator>) {
        self.coordinator = Some(coordinator);
    }

    /// Connects to both sides, checks the schemas and prepares statements; the work in
    /// `complete` (the job's skip lists and the savepoint it resumes from) is not done again.
    /// Nothing is written to the target's rows.
    pub async fn prepare(
        config: &JobConfig,
        complete: savepoints::Progress,
    ) -> Result<Self, EngineError> {
        let mut skip = complete;
        let opened = crate::connectors::open_copy(
            &config.source,
            &config.target,
            crate::connectors::CopyRequest {
                renames: &config.renames,
                savepoints: config.savepoints.as_ref(),
                retry_for: config.retry_for,
                done: &mut skip,
            },
            &Erase,
        )
        .await?;
        Ok(Self {
            copy: opened.copy,
            changes: opened.changes,
            skip,
            coordinator: None,
        })
    }

    /// Copies every unit not already complete, then applies the source's changes until
    /// stopped. The completed work (what was complete at the start included, and the
    /// stream's positions) is kept in `done` whether the run succeeds, fails or is stopped.
    pub async fn run(
        self,
        counters: Arc<Counters>,
        done: Arc<Mutex<savepoints::Progress>>,
        cancel: CancellationToken,
    ) -> Result<(), EngineError> {
        done.lock()
            .unwrap_or_else(|p| p.into_inner())
            .merge(&self.skip);
        if let Some(changes) = &self.changes {
            let changes = changes.clone();
            counters.connector.add(Box::new(move || changes.counters()));
        }
        if let Some(copy) = self.copy {
            if let Some(c) = &self.coordinator {
                let c = c.clone();
                counters.connector.add(Box::new(move || c.counters()));
            }
            copy.run(
                counters.clone(),
                done.clone(),
                cancel.clone(),
                self.coordinator,
            )
            .await?;
        }
        let Some(changes) = self.changes else {
            return Ok(());
        };
        tracing::info!(
            "snapshot complete: applying the source's changes since the replication began, until the job is stopped"
        );
        counters.set_phase("streaming");
        changes
            .follow(FollowContext {
                retries: counters.retries.clone(),
                done,
                cancel: cancel.child_token(),
            })
            .await
            .map_err(EngineError::from)
    }
}

/// Erases the types of the scan and sink a connector pair opened into a [`RunCopy`].
struct Erase;

impl CopyMaker for Erase {
    type Copy = Box<dyn RunCopy>;

    fn make<S: Scan, T: Sink<S::Row>>(
        &self,
        scan: S,
        sink: T,
        pacing: Pacing,
        done: &savepoints::Progress,
    ) -> Box<dyn RunCopy> {
        Box::new(Copy::new(scan, sink, pacing, done.clone()))
    }
}

/// A copy with its connector types erased, so that jobs need not name them.
trait RunCopy: Send {
    fn run(
        self: Box<Self>,
        counters: Arc<Counters>,
        done: Arc<Mutex<savepoints::Progress>>,
        cancel: CancellationToken,
        coordinator: Option<Arc<dyn Coordinator>>,
    ) -> futures::future::BoxFuture<'static, Result<(), EngineError>>;
    /// Units left to copy once the work already complete is skipped.
    fn remaining(&self) -> usize;
}

/// A copy from a source `S` to a target `T`.
struct Copy<S: Scan, T: Sink<S::Row>> {
    scan: Arc<S>,
    sink: Arc<T>,
    pacing: Pacing,
    skip: savepoints::Progress,
}

impl<S: Scan, T: Sink<S::Row>> Copy<S, T> {
    fn new(scan: S, sink: T, pacing: Pacing, skip: savepoints::Progress) -> Self {
        Self {
            scan: Arc::new(scan),
            sink: Arc::new(sink),
            pacing,
            skip,
        }
    }
}

impl<S: Scan, T: Sink<S::Row>> RunCopy for Copy<S, T> {
    fn remaining(&self) -> usize {
        self.scan.plan(&self.skip).work.len()
    }

    fn run(
        self: Box<Self>,
        counters: Arc<Counters>,
        done: Arc<Mutex<savepoints::Progress>>,
        cancel: CancellationToken,
        coordinator: Option<Arc<dyn Coordinator>>,
    ) -> futures::future::BoxFuture<'static, Result<(), EngineError>> {
        Box::pin(async move {
            done.lock()
                .unwrap_or_else(|p| p.into_inner())
                .merge(&self.skip);
            let (scan, sink) = (self.scan.clone(), self.sink.clone());
            let waits = sink.clone();
            counters.connector.add(Box::new(move || {
                let mut c = scan.counters();
                c.extend(sink.counters());
                c
            }));
            counters
                .connector
                .add_waiting(Box::new(move || waits.waiting()));
            if let Err(e) = self.sink.start().await {
                return Err(EngineError::Failed(format!("target: {e}")));
            }
            let plan = self.scan.plan(&self.skip);
            counters.units_total.store(plan.total, Ordering::Relaxed);
            Counters::add(&counters.units_skipped, plan.skipped);
            Counters::add(&counters.units_done, plan.skipped);
            tracing::info!(
                "{} units, {} of them skipped as done (the job's skip lists and the savepoint \
                 resumed from), {} to copy",
                plan.total,
                plan.skipped,
                plan.work.len()
            );
            // Before any unit runs: the statistics describe the table as it is now.
            let expected = self.scan.expect(&plan.work).await;
            let _ = counters.estimate.set(Estimator::new(expected));
            let work: Vec<(usize, S::Unit)> = plan.work.into_iter().enumerate().collect();
            let failed = cancel.child_token();
            let worker = Arc::new(Worker {
                scan: self.scan,
                sink: self.sink,
                counters,
                done,
                requests: Arc::new(Semaphore::new(self.pacing.requests_in_flight.max(1))),
                reading: Arc::new(Semaphore::new(self.pacing.units_at_once.max(1))),
                limits: Arc::new(Limits::new(
                    self.pacing.rows_per_second,
                    self.pacing.bytes_per_second,
                )),
                // A failure of one unit stops the others; a stop request reaches them through it.
                cancel: failed.clone(),
            });
            let copied = if let Some(coordinator) = coordinator {
                drive_shared(
                    work,
                    plan.skipped,
                    self.pacing.units_at_once + self.pacing.units_finishing,
                    (&cancel, &failed),
                    worker.clone(),
                    coordinator,
                )
                .await
            } else {
                drive_units(
                    work,
                    self.pacing.units_at_once + self.pacing.units_finishing,
                    (&cancel, &failed),
                    (
                        |e: &EngineError| matches!(e, EngineError::Stopped),
                        || EngineError::Stopped,
                    ),
                    |(index, unit)| {
                        let w = worker.clone();
                        async move { w.copy_unit(index, unit).await }
                    },
                )
                .await
            };
            copied?;
            // Every unit is complete: what describes the whole output (an export's
            // manifests) can be written now, and only now.
            worker
                .sink
                .complete()
                .await
                .map_err(|e| EngineError::Failed(format!("target: {e}")))
        })
    }
}

/// Runs `unit` on each piece of `work`, `max` at once. The first error that is not a stop
/// (`is_stop`) cancels `failed`, which the units watch, so one unit failing for good stops the
/// others; it is returned, else `stopped()` when `cancel` fired, else `Ok`.
pub async fn drive_units<U, E, F, Fut>(
    work: Vec<U>,
    max: usize,
    (cancel, failed): (&CancellationToken, &CancellationToken),
    (is_stop, stopped): (impl Fn(&E) -> bool, fn() -> E),
    unit: F,
) -> Result<(), E>
where
    F: FnMut(U) -> Fut,
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

/// [`drive_units`] for units shared with other runs: each unit is claimed first, run only if
/// this run got it, and recorded complete with the coordinator. Units other runs hold are
/// tried again until they are done (or their runs die and their leases lapse), so every run
/// ends when the whole job is done. The job's counters show every run's units.
async fn drive_shared<S: Scan, T: Sink<S::Row>>(
    work: Vec<(usize, S::Unit)>,
    skipped: u64,
    max: usize,
    (cancel, failed): (&CancellationToken, &CancellationToken),
    worker: Arc<Worker<S, T>>,
    coordinator: Arc<dyn Coordinator>,
) -> Result<(), EngineError> {
    let coordination = |e: String| EngineError::Failed(format!("coordination: {e}"));
    let counters = worker.counters.clone();
    let poll = {
        let (coordinator, counters) = (coordinator.clone(), counters.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                tick.tick().await;
                if let Ok(shared) = coordinator.shared().await {
                    counters
                        .units_done
                        .store(skipped + shared.done, Ordering::Relaxed);
                }
            }
        })
    };
    let lease = coordinator.lease();
    let mut pending = work;
    let result = loop {
        let held = Arc::new(Mutex::new(Vec::new()));
        let round = drive_units(
            pending,
            max,
            (cancel, failed),
            (
                |e: &EngineError| matches!(e, EngineError::Stopped),
                || EngineError::Stopped,
            ),
            |(index, unit)| {
                let (w, c, held) = (worker.clone(), coordinator.clone(), held.clone());
                async move {
                    let key = unit.key();
                    match c.claim(&key).await.map_err(coordination)? {
                        Claim::Done => {
                            unit.record(&mut w.done.lock().unwrap_or_else(|p| p.into_inner()));
                            if let Some(e) = w.counters.estimate.get() {
                                e.skipped(index);
                            }
                            Ok(())
                        }
                        Claim::Held => {
                            held.lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push((index, unit));
                            Ok(())
                        }
                        Claim::Mine => {
                            // Set when the lease is lost: another run may hold the unit by
                            // then, so this one stops copying it and leaves it to that run.
                            let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
                            let renewal = {
                                let (c, key) = (c.clone(), key.clone());
                                tokio::spawn(async move {
                                    let every = lease / 3;
                                    let mut tick = tokio::time::interval_at(
                                        tokio::time::Instant::now() + every,
                                        every,
                                    );
                                    loop {
                                        tick.tick().await;
                                        match c.renew(&key).await {
                                            Ok(true) => {}
                                            Ok(false) => {
                                                tracing::warn!(
                                                    "coordination: the lease of {key} was lost (not renewed within its {} s); this run stops copying it",
                                                    lease.as_secs()
                                                );
                                                let _ = lost_tx.send(());
                                                return;
                                            }
                                            Err(e) => tracing::warn!(
                                                "coordination: renewing the lease of {key}: {e}"
                                            ),
                                        }
                                    }
                                })
                            };
                            let copied = tokio::select! {
                                copied = w.copy_unit(index, unit.clone()) => Some(copied),
                                Ok(()) = lost_rx => None,
                            };
                            renewal.abort();
                            match copied {
                                // Whoever holds it now completes it, or it lapses again.
                                None => {
                                    if let Some(e) = w.counters.estimate.get() {
                                        e.restarted(index);
                                    }
                                    held.lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .push((index, unit));
                                    Ok(())
                                }
                                Some(Ok(())) => c.complete(&key).await.map_err(coordination),
                                Some(Err(e)) => {
                                    if let Err(r) = c.release(&key).await {
                                        tracing::warn!(
                                            "coordination: releasing {key} (it lapses by itself): {r}"
                                        );
                                    }
                                    Err(e)
                                }
                            }
                        }
                    }
                }
            },
        )
        .await;
        if let Err(e) = round {
            break Err(e);
        }
        pending = std::mem::take(&mut *held.lock().unwrap_or_else(|p| p.into_inner()));
        if pending.is_empty() {
            break Ok(());
        }
        tracing::debug!(
            "coordination: {} units held by other runs; trying them again",
            pending.len()
        );
        // A held unit is done by its run, or free once that run's lease lapses.
        tokio::select! {
            _ = tokio::time::sleep((lease / 4).clamp(Duration::from_millis(500), Duration::from_secs(5))) => {}
            _ = cancel.cancelled() => break Err(EngineError::Stopped),
        }
    };
    poll.abort();
    if result.is_ok()
        && let Ok(shared) = coordinator.shared().await
    {
        counters
            .units_done
            .store(skipped + shared.done, Ordering::Relaxed);
    }
    result
}

struct Worker<S: Scan, T: Sink<S::Row>> {
    scan: Arc<S>,
    sink: Arc<T>,
    counters: Arc<Counters>,
    done: Arc<Mutex<savepoints::Progress>>,
    requests: Arc<Semaphore>,
    /// Units reading at once ([`Pacing::units_at_once`]); a unit gives its slot back once its
    /// writes are acknowledged, before the sink finishes it.
    reading: Arc<Semaphore>,
    limits: Arc<Limits>,
    cancel: CancellationToken,
}

type InFlight = JoinSet<Result<(), EngineError>>;

impl<S: Scan, T: Sink<S::Row>> Worker<S, T> {
    /// Copies one unit; records it complete once every write is acknowledged.
    async fn copy_unit(&self, index: usize, unit: S::Unit) -> Result<(), EngineError> {
        let reading = tokio::select! {
            permit = self.reading.clone().acquire_owned() => permit.expect("never closed"),
            _ = self.cancel.cancelled() => return Err(EngineError::Stopped),
        };
        let mut in_flight = InFlight::new();
        let mut batcher = self.sink.begin(&unit.key());
        let result = self
            .scan_unit(index, &unit, &mut batcher, &mut in_flight)
            .await;
        // Whatever happened, let the writes already sent finish: their rows are then either
        // written or reported, never half-tracked.
        let mut write_error = None;
        while let Some(joined) = in_flight.join_next().await {
            if let Err(e) = flatten(joined) {
                write_error = write_error.or(Some(e));
            }
        }
        drop(reading);
        result?;
        if let Some(e) = write_error {
            return Err(e);
        }
        if let Err(e) = self.sink.finish(batcher).await {
            return Err(EngineError::Failed(format!(
                "target: completing {unit}: {e}"
            )));
        }
        unit.record(&mut self.done.lock().unwrap_or_else(|p| p.into_inner()));
        Counters::add(&self.counters.units_done, 1);
        if let Some(e) = self.counters.estimate.get() {
            e.finished(index);
        }
        // At debug: a CQL job has hundreds of units. The next savepoint's line (info) lists
        // what finished since the one before.
        tracing::debug!("{unit}: every write acknowledged, marked as done");
        Ok(())
    }

    async fn scan_unit(
        &self,
        index: usize,
        unit: &S::Unit,
        batcher: &mut T::Batcher,
        in_flight: &mut InFlight,
    ) -> Result<(), EngineError> {
        let mut cursor = Some(self.scan.start(unit));
        let mut requests = Vec::new();
        while let Some(at) = cursor.take() {
            if self.cancel.is_cancelled() {
                return Err(EngineError::Stopped);
            }
            let (page, read_at) = read_page(
                &*self.scan,
                unit,
                &at,
                &self.counters.retries,
                &self.cancel,
                "reading from the source",
            )
            .await;
            let Page {
                rows,
                next,
                measured,
            } = match page {
                Ok(p) => p,
                Err(_) if self.cancel.is_cancelled() => return Err(EngineError::Stopped),
                Err(e) => {
                    return Err(EngineError::Failed(format!("source: reading {unit}: {e}")));
                }
            };
            Counters::add(&self.counters.rows_read, rows.len() as u64);
            if let Some(e) = self.counters.estimate.get() {
                let measured = measured.unwrap_or_else(|| self.scan.measure(&rows));
                e.read(index, rows.len() as u64, measured);
            }
            for row in &rows {
                Counters::add(&self.counters.bytes_read, S::row_size(row) as u64);
                match self.sink.push(batcher, row, read_at, &mut requests) {
                    Ok(Pushed::Written) => {}
                    Ok(Pushed::Dropped) => Counters::add(&self.counters.rows_dropped, 1),
                    Err(refused) => {
                        return Err(EngineError::Failed(format!(
                            "source: a row of {unit} {refused}"
                        )));
                    }
                }
                for request in requests.drain(..) {
                    self.send(in_flight, request).await?;
                }
            }
            self.sink.flush(batcher, &mut requests);
            for request in requests.drain(..) {
                self.send(in_flight, request).await?;
            }
            cursor = next;
        }
        Ok(())
    }

    /// Sends one request in the background, retried as a whole; its rows are complete once it
    /// is acknowledged. Waits for the rate limits and for room among the requests in flight.
    async fn send(&self, in_flight: &mut InFlight, request: T::Request) -> Result<(), EngineError> {
        // Waiting for the rate limits must not delay a stop.
        if !self
            .limits
            .wait(request.rows(), request.bytes(), &self.cancel)
            .await
        {
            return Err(EngineError::Stopped);
        }
        let permit = tokio::select! {
            permit = self.requests.clone().acquire_owned() => permit.expect("never closed"),
            _ = self.cancel.cancelled() => return Err(EngineError::Stopped),
        };
        let sink = self.sink.clone();
        let counters = self.counters.clone();
        let cancel = self.cancel.clone();
        in_flight.spawn(async move {
            let result = retry(
                &counters.retries,
                &cancel,
                "writing to the target",
                request.idempotent(),
                || sink.send(&request),
            )
            .await;
            drop(permit);
            match result {
                Ok(()) => {
                    Counters::add(&counters.statements, request.statements());
                    Counters::add(&counters.bytes_written, request.bytes());
                    Counters::add(&counters.rows_written, request.rows());
                    Ok(())
                }
                Err(_) if cancel.is_cancelled() => Err(EngineError::Stopped),
                Err(e) => Err(EngineError::Failed(format!("target: {e}"))),
            }
        });
        // Surface write failures early instead of scanning on.
        while let Some(joined) = in_flight.try_join_next() {
            flatten(joined)?;
        }
        Ok(())
    }
}

fn flatten(
    joined: Result<Result<(), EngineError>, tokio::task::JoinError>,
) -> Result<(), EngineError> {
    joined.unwrap_or_else(|e| Err(EngineError::Failed(format!("write task failed: {e}"))))
}
