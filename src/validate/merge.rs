//! The merge of one range's two scans: both sides return their rows in the comparator's order,
//! so walking them side by side finds rows missing from the target, rows only the target has
//! and rows that differ, holding each row only while it is compared, whatever the size of the
//! table or of a partition.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::report::{ColumnDifference, ExampleKind, Report};
use crate::connectors::seam::compare::{Cells, Comparator, Repair};
use crate::connectors::seam::limits::Limits;
use crate::engine::EngineError;

/// What a scan task sends: pages of rows, then the end, or why it stopped.
pub(crate) enum Feed<R> {
    /// The next rows, in order, and the moment their TTLs count from (see
    /// [`read_page`](crate::connectors::seam::retry::read_page)): a repair ages them from it.
    Rows(Vec<R>, Instant),
    /// The range is complete.
    End,
    /// The scan failed for good.
    Failed(EngineError),
}

/// One side's rows of a range, page by page, with the order checked as they come.
pub(crate) struct Cursor<R> {
    pages: mpsc::Receiver<Feed<R>>,
    rows: VecDeque<R>,
    finished: bool,
    last: Option<R>,
    side: &'static str,
    /// When the page being merged was received: a row copied again has its TTL shortened by
    /// the time since, as a migration does.
    read_at: Instant,
}

impl<R: Clone> Cursor<R> {
    /// The rows `side` (`source` or `target`) sends through `pages`.
    pub(crate) fn new(side: &'static str, pages: mpsc::Receiver<Feed<R>>) -> Self {
        Self {
            pages,
            rows: VecDeque::new(),
            finished: false,
            last: None,
            side,
            read_at: Instant::now(),
        }
    }

    async fn peek(&mut self) -> Result<Option<&R>, EngineError> {
        while self.rows.is_empty() && !self.finished {
            match self.pages.recv().await {
                Some(Feed::Rows(rows, read_at)) => {
                    // Not when the page is taken: it waited in the channel while the one
                    // before was merged (and repaired, seconds when target nodes fail).
                    self.read_at = read_at;
                    self.rows.extend(rows);
                }
                Some(Feed::End) => self.finished = true,
                Some(Feed::Failed(e)) => return Err(e),
                // A scan that stops without saying so must not pass for the end of the range.
                None => {
                    return Err(EngineError::Failed(format!(
                        "the {} scan stopped before the end of its range",
                        self.side
                    )));
                }
            }
        }
        Ok(self.rows.front())
    }

    fn pop<C: Comparator<Row = R>>(&mut self, comparator: &C) -> Result<R, EngineError> {
        let row = self.rows.pop_front().expect("peeked");
        if let Some(last) = &self.last
            && comparator.order(last, &row) != Ordering::Less
        {
            // Merging relies on drover ordering rows exactly as the database does; if it does
            // not, stop rather than report rows that are not different.
            return Err(EngineError::Failed(format!(
                "{} rows arrived out of the order drover expects ({} then {}); the validator cannot compare this table's clustering types, please report it",
                self.side,
                comparator.key(last),
                comparator.key(&row)
            )));
        }
        self.last = Some(row.clone());
        Ok(row)
    }
}

/// Merges the two scans of a range: it needs no connection but the repair's, so tests feed it
/// streams of their own.
pub(crate) struct Merge<'a, C: Comparator> {
    /// Orders and compares rows.
    pub comparator: &'a C,
    /// `copyMissingRows`, when set.
    pub repair: Option<&'a dyn Repair<C::Row>>,
    /// Counters of the whole validation.
    pub progress: &'a Progress,
    /// The target's rate limits (reads count against them).
    pub limits: &'a Limits,
    /// Stops the merge (a stop request, or another unit's failure).
    pub cancel: &'a CancellationToken,
    /// Examples kept in a report.
    pub max_examples: usize,
}

impl<C: Comparator> Merge<'_, C> {
    /// Merges two scans of one range, adding what they hold to `report`.
    pub(crate) async fn run(
        &self,
        mut src: Cursor<C::Row>,
        mut dst: Cursor<C::Row>,
        report: &mut Report,
    ) -> Result<(), EngineError> {
        let c = self.comparator;
        // The first row of the partition being merged: its cells are compared once.
        let mut partition: Option<C::Row> = None;
        let scan = &self.progress.scan;
        loop {
            if self.cancel.is_cancelled() {
                return Err(EngineError::Stopped);
            }
            let (order, lone_partition) = match (src.peek().await?, dst.peek().await?) {
                (None, None) => break,
                (Some(_), None) => (Ordering::Less, false),
                (None, Some(_)) => (Ordering::Greater, false),
                (Some(a), Some(b)) => (
                    c.order(a, b),
                    c.partition_only(a) != c.partition_only(b) && c.same_partition(a, b),
                ),
            };
            let mut bytes = 0;
            if lone_partition {
                // One side has only the cells of a partition, the other has rows too: the
                // partition's cells are compared, the rows are missing or extra.
                let source_lone = order == Ordering::Less;
                let (lone, cursor) = if source_lone {
                    (src.pop(c)?, &mut dst)
                } else {
                    (dst.pop(c)?, &mut src)
                };
                let other = cursor.peek().await?.expect("peeked").clone();
                let (s, d) = if source_lone {
                    (&lone, &other)
                } else {
                    (&other, &lone)
                };
                bytes += c.size(&lone);
                if source_lone {
                    report.source_rows += 1;
                    scan.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
                } else {
                    report.target_rows += 1;
                    self.progress
                        .target_rows
                        .fetch_add(1, AtomicOrdering::Relaxed);
                }
                let columns = c.differences(s, d, Cells::Partition);
                if columns.is_empty() {
                    report.rows_compared += 1;
                    report.rows_matched += 1;
                } else {
                    report.differences.count_row(&columns);
                    self.found(report, ExampleKind::DifferentRow, &lone, columns);
                }
                partition = Some(lone);
            } else {
                match order {
                    Ordering::Less => {
                        let row = src.pop(c)?;
                        bytes += c.size(&row);
                        if c.incomplete_key(&row) {
                            report.rows_skipped += 1;
                            continue;
                        }
                        report.source_rows += 1;
                        scan.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
                        self.found(report, ExampleKind::MissingRow, &row, vec![]);
                        report.differences.missing_rows += 1;
                        self.repair(&row, true, src.read_at, report).await?;
                    }
                    Ordering::Greater => {
                        let row = dst.pop(c)?;
                        bytes += c.size(&row);
                        report.target_rows += 1;
                        self.progress
                            .target_rows
                            .fetch_add(1, AtomicOrdering::Relaxed);
                        report.differences.extra_rows += 1;
                        self.found(report, ExampleKind::ExtraRow, &row, vec![]);
                    }
                    Ordering::Equal => {
                        let s = src.pop(c)?;
                        let d = dst.pop(c)?;
                        bytes += c.size(&s) + c.size(&d);
                        report.source_rows += 1;
                        report.target_rows += 1;
                        scan.rows_read.fetch_add(1, AtomicOrdering::Relaxed);
                        self.progress
                            .target_rows
                            .fetch_add(1, AtomicOrdering::Relaxed);
                        let new_partition =
                            partition.as_ref().is_none_or(|p| !c.same_partition(p, &s));
                        let cells = if new_partition {
                            partition = Some(s.clone());
                            Cells::All
                        } else {
                            Cells::Row
                        };
                        let columns = c.differences(&s, &d, cells);
                        if columns.is_empty() {
                            report.rows_compared += 1;
                            report.rows_matched += 1;
                        } else {
                            report.differences.count_row(&columns);
                            self.found(report, ExampleKind::DifferentRow, &s, columns);
                            self.repair(&s, false, src.read_at, report).await?;
                        }
                    }
                }
            }
            scan.bytes_read
                .fetch_add(bytes as u64, AtomicOrdering::Relaxed);
            if !self.limits.wait(1, bytes as u64, self.cancel).await {
                return Err(EngineError::Stopped);
            }
        }
        Ok(())
    }

    /// Counts a differing row and keeps it as an example while there is room.
    fn found(
        &self,
        report: &mut Report,
        kind: ExampleKind,
        row: &C::Row,
        columns: Vec<ColumnDifference>,
    ) {
        self.progress
            .rows_with_differences
            .fetch_add(1, AtomicOrdering::Relaxed);
        report.differing(self.max_examples, || super::report::Example {
            kind,
            key: self.comparator.key(row),
            token: Some(self.comparator.token(row)),
            columns,
        });
    }

    /// With `copyMissingRows`, writes a source row (`missing` from the target, or differing)
    /// to the target again.
    async fn repair(
        &self,
        row: &C::Row,
        missing: bool,
        read_at: Instant,
        report: &mut Report,
    ) -> Result<(), EngineError> {
        let Some(repair) = self.repair.filter(|r| {
            if missing {
                r.repairs_missing()
            } else {
                r.repairs_differing()
            }
        }) else {
            return Ok(());
        };
        let retries = &self.progress.scan.retries;
        if missing {
            repair
                .copy_missing(row, read_at, retries, self.cancel)
                .await?;
        } else {
            repair.copy(row, read_at, retries, self.cancel).await?;
        }
        report.rows_copied += 1;
        self.progress
            .rows_copied
            .fetch_add(1, AtomicOrdering::Relaxed);
        Ok(())
    }
}
