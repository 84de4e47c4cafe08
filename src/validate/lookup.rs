//! The validator's second mode, for tables whose scans are not in key order: each page of one
//! table's scan is looked up by key in the other table.
//!
//! A DynamoDB parallel scan returns a segment's items in the server's hash order, and which
//! items a segment holds differs from one server to another (DynamoDB, Alternator, the test
//! servers), so two scans cannot be merged as CQL scans are (`merge.rs`). Instead the source's
//! units are read page by page and each page's keys fetched from the target (rows missing from
//! the target, rows that differ), then the target's units are read and their keys fetched from
//! the source (rows only the target has). Only a page and its lookups are held per unit in
//! flight, whatever the size of the table: nothing is collected across pages.
//!
//! Both passes are units of the same run, recorded as they complete (the source's in
//! [`State::done`], the target's in [`State::reverse`]), so an interrupted validation resumes
//! from its savepoint in either pass. The connector says how to key, fetch and compare rows
//! ([`Lookup`]); this file knows no database.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::progress::{Progress, State};
use super::report::{ColumnDifference, Example, ExampleKind, Report};
use super::run::RunValidation;
use crate::connectors::seam::compare::{Lookup, LookupSides, Repair, Side};
use crate::connectors::seam::limits::Limits;
use crate::connectors::seam::retry::retry;
use crate::connectors::seam::{Page, Scan, Unit};
use crate::engine::EngineError;
use crate::engine::driver::drive_units;

/// Lookups of one page sent at once: a page of 1 000 rows is 10 requests of 100 keys, so a
/// few at a time overlap their round trips without holding more than the page.
const LOOKUPS_AT_ONCE: usize = 4;

/// Rows of one page looked up together, with their keys.
type Chunk<L> = (Vec<<L as Lookup>::Key>, Vec<<L as Lookup>::Row>);

/// A unit of one of the two passes.
#[derive(Debug, Clone)]
enum Pass<U> {
    /// A unit of the source, looked up in the target.
    Source(U),
    /// A unit of the target, looked up in the source.
    Target(U),
}

impl<U: fmt::Display> fmt::Display for Pass<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pass::Source(u) => write!(f, "source {u}"),
            Pass::Target(u) => write!(f, "target {u}"),
        }
    }
}

/// What every unit of one run shares.
struct Context<L: Lookup, S: Scan<Row = L::Row>> {
    source: S,
    target: S,
    lookup: L,
    repair: Option<Box<dyn Repair<L::Row>>>,
    progress: Arc<Progress>,
    limits: Limits,
    /// A stop request, or another unit's failure.
    cancel: CancellationToken,
    max_examples: usize,
}

impl<L, S> RunValidation for (LookupSides<L, S>, usize)
where
    L: Lookup,
    S: Scan<Row = L::Row>,
{
    fn run(
        self: Box<Self>,
        progress: Arc<Progress>,
        state: Arc<Mutex<State>>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), EngineError>> {
        let (sides, max_examples) = *self;
        Box::pin(async move {
            let (done, reverse) = {
                let state = state.lock().unwrap_or_else(|p| p.into_inner());
                progress.count_from(&state.report);
                (state.done.clone(), state.reverse.clone())
            };
            let first = sides.source.plan(&done);
            let second = sides.target.plan(&reverse);
            let (total, skipped) = (first.total + second.total, first.skipped + second.skipped);
            let scan = &progress.scan;
            scan.units_total.store(total, AtomicOrdering::Relaxed);
            scan.units_skipped
                .fetch_add(skipped, AtomicOrdering::Relaxed);
            scan.units_done.fetch_add(skipped, AtomicOrdering::Relaxed);
            tracing::info!(
                "{total} units: {} of the source, looked up in the target ({} skipped as compared: {done}), then {} of the target, looked up in the source ({} skipped as compared: {reverse})",
                first.total,
                first.skipped,
                second.total,
                second.skipped,
            );
            // The target's units may start while the last of the source's run: rows the first
            // pass copies (`copyMissingRows`) exist in the source, so neither order finds them
            // extra.
            let work: Vec<Pass<S::Unit>> = first
                .work
                .into_iter()
                .map(Pass::Source)
                .chain(second.work.into_iter().map(Pass::Target))
                .collect();
            let failed = cancel.child_token();
            let cx = Arc::new(Context {
                source: sides.source,
                target: sides.target,
                lookup: sides.lookup,
                repair: sides.repair,
                progress,
                limits: Limits::new(sides.pacing.rows_per_second, sides.pacing.bytes_per_second),
                cancel: failed.clone(),
                max_examples,
            });
            drive_units(
                work,
                sides.pacing.units_at_once,
                (&cancel, &failed),
                (
                    |e: &EngineError| matches!(e, EngineError::Stopped),
                    || EngineError::Stopped,
                ),
                |unit| {
                    let (cx, state) = (cx.clone(), state.clone());
                    async move { cx.unit(&state, unit).await }
                },
            )
            .await
        })
    }
}

impl<L, S> Context<L, S>
where
    L: Lookup,
    S: Scan<Row = L::Row>,
{
    /// Compares one unit of either pass, then records it and its findings.
    async fn unit(&self, state: &Mutex<State>, pass: Pass<S::Unit>) -> Result<(), EngineError> {
        let (side, unit, scan) = match &pass {
            Pass::Source(u) => (Side::Source, u, &self.source),
            Pass::Target(u) => (Side::Target, u, &self.target),
        };
        let mut report = Report::default();
        let mut page = Some(self.read(side, scan, unit, scan.start(unit)).await?);
        // The next page is read while this one is looked up.
        while let Some(Page { rows, next, .. }) = page.take() {
            if self.cancel.is_cancelled() {
                return Err(EngineError::Stopped);
            }
            let read_next = async {
                match next {
                    Some(cursor) => self.read(side, scan, unit, cursor).await.map(Some),
                    None => Ok(None),
                }
            };
            let (next_page, ()) =
                tokio::try_join!(read_next, self.page(side, &pass, rows, &mut report))?;
            page = next_page;
        }
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        match &pass {
            Pass::Source(u) => u.record(&mut state.done),
            Pass::Target(u) => u.record(&mut state.reverse),
        }
        state.report.merge(&report, self.max_examples);
        self.progress
            .scan
            .units_done
            .fetch_add(1, AtomicOrdering::Relaxed);
        tracing::debug!("{pass}: compared");
        Ok(())
    }

    /// Reads one page of `unit` of `side`, retried as a migration's reads are.
    async fn read(
        &self,
        side: Side,
        scan: &S,
        unit: &S::Unit,
        cursor: S::Cursor,
    ) -> Result<Page<L::Row, S::Cursor>, EngineError> {
        let what = match side {
            Side::Source => "reading from the source",
            Side::Target => "reading from the target",
        };
        retry(
            &self.progress.scan.retries,
            &self.cancel,
            what,
            true,
            || scan.page(unit, &cursor),
        )
        .await
        .map_err(|e| self.failed(side, &format!("reading {unit}"), &e))
    }

    /// Looks up the rows of one page of `side` in the other table and adds what it finds to
    /// `report`: in the first pass, rows missing from the target and rows that differ (missing
    /// ones copied with `copyMissingRows`); in the second, rows missing from the source.
    async fn page(
        &self,
        side: Side,
        pass: &Pass<S::Unit>,
        rows: Vec<L::Row>,
        report: &mut Report,
    ) -> Result<(), EngineError> {
        let lookup = &self.lookup;
        let (other, progress) = (side.other(), &self.progress);
        let read = rows.len() as u64;
        let mut bytes: usize = rows.iter().map(|r| lookup.size(r)).sum();
        let (kept, left_out): (Vec<L::Row>, Vec<L::Row>) =
            rows.into_iter().partition(|r| !lookup.left_out(side, r));
        report.rows_skipped += left_out.len() as u64;
        let kept_count = kept.len() as u64;
        match side {
            Side::Source => {
                report.source_rows += kept_count;
                progress
                    .scan
                    .rows_read
                    .fetch_add(kept_count, AtomicOrdering::Relaxed);
            }
            Side::Target => {
                report.target_rows += kept_count;
                progress
                    .target_rows
                    .fetch_add(kept_count, AtomicOrdering::Relaxed);
            }
        }
        let mut chunks: Vec<Chunk<L>> = Vec::new();
        let mut rows = kept.into_iter().peekable();
        while rows.peek().is_some() {
            let chunk: Vec<L::Row> = rows.by_ref().take(lookup.batch().max(1)).collect();
            let keys = chunk.iter().map(|r| lookup.key(side, r)).collect();
            chunks.push((keys, chunk));
        }
        let what = match other {
            Side::Source => "looking up rows in the source",
            Side::Target => "looking up rows in the target",
        };
        // Only the first pass compares rows: the second needs to know they exist.
        let whole = side == Side::Source;
        let mut fetched = futures::stream::iter(chunks)
            .map(|(keys, chunk)| async move {
                let found = retry(&progress.scan.retries, &self.cancel, what, true, || {
                    lookup.fetch(other, &keys, whole)
                })
                .await;
                (keys, chunk, found, Instant::now())
            })
            .buffer_unordered(LOOKUPS_AT_ONCE);
        while let Some((keys, chunk, found, read_at)) = fetched.next().await {
            let found = found
                .map_err(|e| self.failed(other, &format!("looking up the rows of {pass}"), &e))?;
            bytes += found.iter().map(|r| lookup.size(r)).sum::<usize>();
            let mut by_key: HashMap<L::Key, L::Row> = found
                .into_iter()
                .map(|r| (lookup.key(other, &r), r))
                .collect();
            let mut missing = Vec::new();
            for (key, row) in keys.into_iter().zip(chunk) {
                match (side, by_key.remove(&key)) {
                    (Side::Source, Some(target)) => {
                        let columns = lookup.differences(&row, &target);
                        if columns.is_empty() {
                            report.rows_compared += 1;
                            report.rows_matched += 1;
                        } else {
                            report.differences.count_row(&columns);
                            self.found(report, ExampleKind::DifferentRow, &key, columns);
                        }
                    }
                    (Side::Source, None) => {
                        report.differences.missing_rows += 1;
                        self.found(report, ExampleKind::MissingRow, &key, vec![]);
                        missing.push(row);
                    }
                    // Counted and compared by the first pass.
                    (Side::Target, Some(_)) => {}
                    (Side::Target, None) => {
                        report.differences.extra_rows += 1;
                        self.found(report, ExampleKind::ExtraRow, &key, vec![]);
                    }
                }
            }
            if let Some(repair) = &self.repair
                && !missing.is_empty()
            {
                let copied = repair
                    .copy_all(&missing, read_at, &progress.scan.retries, &self.cancel)
                    .await?;
                report.rows_copied += copied;
                progress
                    .rows_copied
                    .fetch_add(copied, AtomicOrdering::Relaxed);
            }
        }
        progress
            .scan
            .bytes_read
            .fetch_add(bytes as u64, AtomicOrdering::Relaxed);
        if !self.limits.wait(read, bytes as u64, &self.cancel).await {
            return Err(EngineError::Stopped);
        }
        Ok(())
    }

    /// Counts a differing row and keeps it as an example while there is room.
    fn found(
        &self,
        report: &mut Report,
        kind: ExampleKind,
        key: &L::Key,
        columns: Vec<ColumnDifference>,
    ) {
        self.progress
            .rows_with_differences
            .fetch_add(1, AtomicOrdering::Relaxed);
        report.differing(self.max_examples, || Example {
            kind,
            key: self.lookup.render_key(key),
            token: None,
            columns,
        });
    }

    /// A read of `side` that failed for good, or stopped.
    fn failed(&self, side: Side, what: &str, e: &dyn fmt::Display) -> EngineError {
        if self.cancel.is_cancelled() {
            EngineError::Stopped
        } else {
            EngineError::Failed(format!("{}: {what}: {e}", side.name()))
        }
    }
}
