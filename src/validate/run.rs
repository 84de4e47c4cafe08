//! Running a planned validation: the engine's unit driver compares units concurrently; each
//! unit's ranges are scanned on both sides at once and merged, and the unit's findings are
//! recorded with its ranges.

use std::future::Future;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::compare::{Comparator, Repair};
use super::merge::{Cursor, Merge, Page};
use super::progress::{Progress, State};
use super::report::Report;
use crate::migrate::EngineError;
use crate::migrate::engine::{self, Progress as ScanProgress};
use crate::migrate::limits::Limits;
use crate::savepoints::ranges::TokenRange;

/// A page of a scan: its rows, and the next page's cursor (`None` after the last page).
pub type ScanPage<R, C> = (Vec<R>, Option<C>);

/// One side of a validation, read range by range, a page at a time.
pub trait SideScan: Send + Sync + 'static {
    /// The rows it returns.
    type Row: Send + 'static;
    /// Where the next page starts.
    type Cursor: Send + 'static;

    /// Reads the page of `range` at `cursor` (`None`: the first), retrying what may be
    /// retried; returns its rows and the next page's cursor, `None` after the last page.
    fn page(
        &self,
        range: TokenRange,
        cursor: Option<Self::Cursor>,
        progress: &ScanProgress,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<ScanPage<Self::Row, Self::Cursor>, EngineError>> + Send;
}

/// Both sides of a validation with what compares their rows.
pub(crate) struct Sides<C: Comparator, S> {
    /// The source's scan.
    pub source: Arc<S>,
    /// The target's scan.
    pub target: Arc<S>,
    /// Orders and compares rows.
    pub comparator: C,
    /// `copyMissingRows`, when set.
    pub repair: Option<Box<dyn Repair<C::Row>>>,
}

/// What every unit of one run shares.
struct Context {
    progress: Arc<Progress>,
    limits: Arc<Limits>,
    /// A stop request, or another unit's failure.
    cancel: CancellationToken,
    max_examples: usize,
}

/// Compares one range of both sides; the row type of the connector stays behind it.
trait CompareRange: Send + Sync {
    fn compare<'a>(
        &'a self,
        range: TokenRange,
        cx: &'a Context,
        report: &'a mut Report,
    ) -> BoxFuture<'a, Result<(), EngineError>>;
}

impl<C, S> CompareRange for Sides<C, S>
where
    C: Comparator,
    S: SideScan<Row = C::Row>,
{
    fn compare<'a>(
        &'a self,
        range: TokenRange,
        cx: &'a Context,
        report: &'a mut Report,
    ) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            let src = scan("source", self.source.clone(), range, cx);
            let dst = scan("target", self.target.clone(), range, cx);
            Merge {
                comparator: &self.comparator,
                repair: self.repair.as_deref(),
                progress: &cx.progress,
                limits: &cx.limits,
                cancel: &cx.cancel,
                max_examples: cx.max_examples,
            }
            .run(src, dst, report)
            .await
        })
    }
}

/// Reads `range` of one side in a task of its own. One page waits while one is merged: reads
/// overlap the comparison, memory stays at two pages per side and range.
fn scan<S: SideScan>(
    side: &'static str,
    scan: Arc<S>,
    range: TokenRange,
    cx: &Context,
) -> Cursor<S::Row>
where
    S::Row: Clone,
{
    let (tx, rx) = mpsc::channel(1);
    let (progress, cancel) = (cx.progress.clone(), cx.cancel.clone());
    tokio::spawn(async move {
        let mut cursor = None;
        loop {
            let (rows, next) = match scan.page(range, cursor, &progress.scan, &cancel).await {
                Ok(page) => page,
                Err(e) => {
                    let _ = tx.send(Page::Failed(e)).await;
                    return;
                }
            };
            if tx.send(Page::Rows(rows)).await.is_err() {
                return;
            }
            match next {
                Some(next) => cursor = Some(next),
                None => {
                    let _ = tx.send(Page::End).await;
                    return;
                }
            }
        }
    });
    Cursor::new(side, rx)
}

/// A checked, connected, planned validation, ready to run.
pub struct Validation {
    sides: Arc<dyn CompareRange>,
    units: Vec<TokenRange>,
    max_units: usize,
    limits: Arc<Limits>,
    max_examples: usize,
}

impl Validation {
    /// A validation of `units` between `sides`, `max_units` at once.
    pub(crate) fn new<C, S>(
        sides: Sides<C, S>,
        units: Vec<TokenRange>,
        max_units: usize,
        limits: Limits,
        max_examples: usize,
    ) -> Self
    where
        C: Comparator,
        S: SideScan<Row = C::Row>,
    {
        Self {
            sides: Arc::new(sides),
            units,
            max_units,
            limits: Arc::new(limits),
            max_examples,
        }
    }

    /// Units in the plan.
    pub fn units(&self) -> &[TokenRange] {
        &self.units
    }

    /// Compares every unit not already in `state.done`; findings and completed ranges are
    /// added to `state` unit by unit, whether the run succeeds, fails or is stopped.
    pub async fn run(
        self,
        progress: Arc<Progress>,
        state: Arc<Mutex<State>>,
        cancel: CancellationToken,
    ) -> Result<(), EngineError> {
        let skip = {
            let state = state.lock().unwrap_or_else(|p| p.into_inner());
            progress.count_from(&state.report);
            state.done.clone()
        };
        let work = progress.scan.plan(&self.units, &skip);
        let failed = cancel.child_token();
        let cx = Arc::new(Context {
            progress,
            limits: self.limits,
            cancel: failed.clone(),
            max_examples: self.max_examples,
        });
        let sides = self.sides;
        engine::drive_units(
            work,
            self.max_units,
            (&cancel, &failed),
            (
                |e: &EngineError| matches!(e, EngineError::Stopped),
                || EngineError::Stopped,
            ),
            |pieces| {
                let (sides, cx, state) = (sides.clone(), cx.clone(), state.clone());
                async move { unit(&*sides, &cx, &state, pieces).await }
            },
        )
        .await
    }
}

/// Compares the missing pieces of one unit, then records them and their findings.
async fn unit(
    sides: &dyn CompareRange,
    cx: &Context,
    state: &Mutex<State>,
    pieces: Vec<TokenRange>,
) -> Result<(), EngineError> {
    let mut report = Report::default();
    for piece in &pieces {
        sides.compare(*piece, cx, &mut report).await?;
    }
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    for p in &pieces {
        state.done.insert(*p);
    }
    state.report.merge(&report, cx.max_examples);
    cx.progress
        .scan
        .units_done
        .fetch_add(1, AtomicOrdering::Relaxed);
    Ok(())
}
