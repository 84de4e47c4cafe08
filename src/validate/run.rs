//! Running a planned validation: the engine's unit driver compares the source's units
//! concurrently; each unit is read from both tables at once through the seam's [`Scan`] and
//! merged, and the unit's findings are recorded with it. Tables whose scans are not in key
//! order are compared by lookups instead (`lookup.rs`), behind the same [`Validation`].

use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::merge::{Cursor, Feed, Merge};
use super::progress::{Progress, State};
use super::report::Report;
use crate::connectors::seam::compare::{Comparator, Repair, Sides};
use crate::connectors::seam::compare::{Lookup, LookupSides};
use crate::connectors::seam::limits::Limits;
use crate::connectors::seam::retry::read_page;
use crate::connectors::seam::{Page, Scan, Unit};
use crate::engine::EngineError;
use crate::engine::driver::drive_units;

/// What every unit of one run shares.
struct Context<C: Comparator, S: Scan<Row = C::Row>> {
    source: Arc<S>,
    target: Arc<S>,
    comparator: C,
    repair: Option<Box<dyn Repair<C::Row>>>,
    progress: Arc<Progress>,
    limits: Limits,
    /// A stop request, or another unit's failure.
    cancel: CancellationToken,
    max_examples: usize,
}

/// A validation with its connector types erased, so that jobs need not name them.
pub(super) trait RunValidation: Send {
    fn run(
        self: Box<Self>,
        progress: Arc<Progress>,
        state: Arc<Mutex<State>>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), EngineError>>;
}

/// A checked, connected, planned validation, ready to run.
pub struct Validation {
    run: Box<dyn RunValidation>,
}

impl Validation {
    /// A validation of `sides`, keeping `max_examples` examples.
    pub(crate) fn new<C, S>(sides: Sides<C, S>, max_examples: usize) -> Self
    where
        C: Comparator,
        S: Scan<Row = C::Row>,
        S::Row: Clone,
    {
        Self {
            run: Box::new((sides, max_examples)),
        }
    }

    /// A validation of `sides` that looks rows up by key (`lookup.rs`), keeping
    /// `max_examples` examples.
    pub(crate) fn lookup<L, S>(sides: LookupSides<L, S>, max_examples: usize) -> Self
    where
        L: Lookup,
        S: Scan<Row = L::Row>,
    {
        Self {
            run: Box::new((sides, max_examples)),
        }
    }

    /// Compares every unit not already in `state.done`; findings and completed units are
    /// added to `state` unit by unit, whether the run succeeds, fails or is stopped.
    pub async fn run(
        self,
        progress: Arc<Progress>,
        state: Arc<Mutex<State>>,
        cancel: CancellationToken,
    ) -> Result<(), EngineError> {
        self.run.run(progress, state, cancel).await
    }
}

impl<C, S> RunValidation for (Sides<C, S>, usize)
where
    C: Comparator,
    S: Scan<Row = C::Row>,
{
    fn run(
        self: Box<Self>,
        progress: Arc<Progress>,
        state: Arc<Mutex<State>>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), EngineError>> {
        let (sides, max_examples) = *self;
        Box::pin(async move {
            let done = {
                let state = state.lock().unwrap_or_else(|p| p.into_inner());
                progress.count_from(&state.report);
                state.done.clone()
            };
            let plan = sides.source.plan(&done);
            let scan = &progress.scan;
            scan.units_total.store(plan.total, AtomicOrdering::Relaxed);
            scan.units_skipped
                .fetch_add(plan.skipped, AtomicOrdering::Relaxed);
            scan.units_done
                .fetch_add(plan.skipped, AtomicOrdering::Relaxed);
            let failed = cancel.child_token();
            let cx = Arc::new(Context {
                source: Arc::new(sides.source),
                target: Arc::new(sides.target),
                comparator: sides.comparator,
                repair: sides.repair,
                progress,
                limits: Limits::new(sides.pacing.rows_per_second, sides.pacing.bytes_per_second),
                cancel: failed.clone(),
                max_examples,
            });
            drive_units(
                plan.work,
                sides.pacing.units_at_once,
                (&cancel, &failed),
                (
                    |e: &EngineError| matches!(e, EngineError::Stopped),
                    || EngineError::Stopped,
                ),
                |unit| {
                    let (cx, state) = (cx.clone(), state.clone());
                    async move { compare_unit(&cx, &state, unit).await }
                },
            )
            .await
        })
    }
}

/// Compares one unit, then records it and its findings.
async fn compare_unit<C, S>(
    cx: &Context<C, S>,
    state: &Mutex<State>,
    unit: S::Unit,
) -> Result<(), EngineError>
where
    C: Comparator,
    S: Scan<Row = C::Row>,
{
    let mut report = Report::default();
    let src = scan("source", cx.source.clone(), unit.clone(), cx);
    let dst = scan("target", cx.target.clone(), unit.clone(), cx);
    Merge {
        comparator: &cx.comparator,
        repair: cx.repair.as_deref(),
        progress: &cx.progress,
        limits: &cx.limits,
        cancel: &cx.cancel,
        max_examples: cx.max_examples,
    }
    .run(src, dst, &mut report)
    .await?;
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    unit.record(&mut state.done);
    state.report.merge(&report, cx.max_examples);
    cx.progress
        .scan
        .units_done
        .fetch_add(1, AtomicOrdering::Relaxed);
    Ok(())
}

/// Reads `unit` of one side in a task of its own. One page waits while one is merged: reads
/// overlap the comparison, memory stays at two pages per side and unit.
fn scan<C, S>(side: &'static str, scan: Arc<S>, unit: S::Unit, cx: &Context<C, S>) -> Cursor<S::Row>
where
    C: Comparator,
    S: Scan<Row = C::Row>,
{
    let (tx, rx) = mpsc::channel(1);
    let (progress, cancel) = (cx.progress.clone(), cx.cancel.clone());
    tokio::spawn(async move {
        let what = if side == "source" {
            "reading from the source"
        } else {
            "reading from the target"
        };
        let mut at = Some(scan.start(&unit));
        while let Some(cursor) = at.take() {
            let (page, read_at) = read_page(
                &*scan,
                &unit,
                &cursor,
                &progress.scan.retries,
                &cancel,
                what,
            )
            .await;
            let Page { rows, next, .. } = match page {
                Ok(page) => page,
                Err(_) if cancel.is_cancelled() => {
                    let _ = tx.send(Feed::Failed(EngineError::Stopped)).await;
                    return;
                }
                Err(e) => {
                    let failed = EngineError::Failed(format!("{side}: reading {unit}: {e}"));
                    let _ = tx.send(Feed::Failed(failed)).await;
                    return;
                }
            };
            if tx.send(Feed::Rows(rows, read_at)).await.is_err() {
                return;
            }
            at = next;
        }
        let _ = tx.send(Feed::End).await;
    });
    Cursor::new(side, rx)
}
