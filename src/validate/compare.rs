//! What the validator asks of a connector to compare its rows: their order, which cells
//! differ, and how to name a row in a report. The merge (`merge.rs`) is written against these
//! traits only, so a connector that can scan gets validation by implementing [`Comparator`].

use std::cmp::Ordering;
use std::time::Instant;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::report::ColumnDifference;
use crate::connectors::seam::retry::{Retries, retry};
use crate::connectors::seam::{Pushed, Request, Sink};
use crate::migrate::EngineError;

/// Which cells of two rows with the same key are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cells {
    /// Only the cells of the partition (static cells), for a row that holds nothing else.
    Partition,
    /// Only the row's own cells (the partition's were compared with an earlier row).
    Row,
    /// Both: the first row of a partition.
    All,
}

/// Orders and compares the rows of one validation (source rows and target rows, which the
/// connector lays out alike). Both scans must return rows in the order of [`Self::order`].
pub trait Comparator: Send + Sync + 'static {
    /// A row of either side.
    type Row: Clone + Send + Sync + 'static;

    /// The order in which both scans return rows: `Less` when `a` comes first.
    fn order(&self, a: &Self::Row, b: &Self::Row) -> Ordering;

    /// Whether two rows belong to the same partition.
    fn same_partition(&self, a: &Self::Row, b: &Self::Row) -> bool;

    /// Whether a row holds only its partition's cells (a partition without rows).
    fn partition_only(&self, row: &Self::Row) -> bool;

    /// Whether a source row lacks part of its partition key, so that it cannot exist in the
    /// target: it is skipped, not compared.
    fn incomplete_key(&self, row: &Self::Row) -> bool;

    /// The differing cells of a source row and the target row with the same key.
    fn differences(
        &self,
        source: &Self::Row,
        target: &Self::Row,
        cells: Cells,
    ) -> Vec<ColumnDifference>;

    /// The row's key as a condition an operator can paste into a query.
    fn key(&self, row: &Self::Row) -> String;

    /// The token of the row's partition.
    fn token(&self, row: &Self::Row) -> i64;

    /// Bytes the row holds, for progress and rate limits.
    fn size(&self, row: &Self::Row) -> usize;
}

/// `copyMissingRows`: writes a source row to the target again.
pub trait Repair<Row>: Send + Sync {
    /// Whether rows the target lacks are written (`copyMissingRows`).
    fn repairs_missing(&self) -> bool {
        true
    }

    /// Whether rows that differ are written again (`copyDifferingRows`).
    fn repairs_differing(&self) -> bool {
        false
    }

    /// Writes `row`, which the target lacks, as [`copy`](Self::copy) does unless the repair
    /// writes missing rows differently (`repairWritetimeStrategy`).
    fn copy_missing<'a>(
        &'a self,
        row: &'a Row,
        read_at: Instant,
        retries: &'a Retries,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), EngineError>> {
        self.copy(row, read_at, retries, cancel)
    }

    /// Writes `row`, read at `read_at`, to the target; retries are counted in `retries` and
    /// end when `cancel` fires.
    fn copy<'a>(
        &'a self,
        row: &'a Row,
        read_at: Instant,
        retries: &'a Retries,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), EngineError>>;

    /// Writes `rows`, read at `read_at`, to the target; returns how many were written (the
    /// target's writer may leave some out on purpose, as a copy would). One by one unless the
    /// repair batches them.
    fn copy_all<'a>(
        &'a self,
        rows: &'a [Row],
        read_at: Instant,
        retries: &'a Retries,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<u64, EngineError>>
    where
        Row: Sync,
    {
        Box::pin(async move {
            for row in rows {
                self.copy(row, read_at, retries, cancel).await?;
            }
            Ok(rows.len() as u64)
        })
    }
}

/// The repair through the target's [`Sink`]: the writes a copy would make of the row, sent at
/// once, each retried as a copy's would be.
pub struct SinkRepair<T>(pub T);

impl<R: Sync, T: Sink<R>> Repair<R> for SinkRepair<T> {
    fn copy<'a>(
        &'a self,
        row: &'a R,
        read_at: Instant,
        retries: &'a Retries,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            self.write(std::slice::from_ref(row), read_at, retries, cancel)
                .await
                .map(|_| ())
        })
    }

    fn copy_all<'a>(
        &'a self,
        rows: &'a [R],
        read_at: Instant,
        retries: &'a Retries,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<u64, EngineError>>
    where
        R: Sync,
    {
        Box::pin(self.write(rows, read_at, retries, cancel))
    }
}

impl<T> SinkRepair<T> {
    /// The requests a copy would make of `rows` (batched as a copy batches them), sent one
    /// after the other, each retried as a copy's would be; returns the rows written.
    async fn write<R>(
        &self,
        rows: &[R],
        read_at: Instant,
        retries: &Retries,
        cancel: &CancellationToken,
    ) -> Result<u64, EngineError>
    where
        T: Sink<R>,
    {
        let failed = |e: &dyn std::fmt::Display| {
            if cancel.is_cancelled() {
                EngineError::Stopped
            } else {
                EngineError::Failed(format!("target: copying a row: {e}"))
            }
        };
        let sink = &self.0;
        let mut batcher = T::Batcher::default();
        let mut requests = Vec::new();
        let mut written = 0;
        for row in rows {
            if sink
                .push(&mut batcher, row, read_at, &mut requests)
                .map_err(|e| failed(&e))?
                == Pushed::Written
            {
                written += 1;
            }
        }
        sink.flush(&mut batcher, &mut requests);
        for request in &requests {
            retry(
                retries,
                cancel,
                "copying a row to the target",
                request.idempotent(),
                || sink.send(request),
            )
            .await
            .map_err(|e| failed(&e))?;
        }
        Ok(written)
    }
}
