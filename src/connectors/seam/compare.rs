//! What the validator asks of a connector to compare its rows: their order, which cells
//! differ, and how to name a row in a report. The validator's merge is written against these
//! traits only, so a connector that can scan gets validation by implementing [`Comparator`].

use std::cmp::Ordering;
use std::future::Future;
use std::hash::Hash;
use std::time::Instant;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::retry::{Retries, retry};
use super::{Pacing, Pushed, Request, RequestError, Scan, SeamError, Sink};

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
    ) -> BoxFuture<'a, Result<(), SeamError>> {
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
    ) -> BoxFuture<'a, Result<(), SeamError>>;

    /// Writes `rows`, read at `read_at`, to the target; returns how many were written (the
    /// target's writer may leave some out on purpose, as a copy would). One by one unless the
    /// repair batches them.
    fn copy_all<'a>(
        &'a self,
        rows: &'a [Row],
        read_at: Instant,
        retries: &'a Retries,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<u64, SeamError>>
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
    ) -> BoxFuture<'a, Result<(), SeamError>> {
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
    ) -> BoxFuture<'a, Result<u64, SeamError>>
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
    ) -> Result<u64, SeamError>
    where
        T: Sink<R>,
    {
        let failed = |e: &dyn std::fmt::Display| {
            if cancel.is_cancelled() {
                SeamError::Stopped
            } else {
                SeamError::Failed(format!("target: copying a row: {e}"))
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

/// One cell that differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDifference {
    /// Source column name.
    pub column: String,
    /// Target column name, when `renames` changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_column: Option<String>,
    /// What differs.
    pub difference: ColumnDifferenceKind,
    /// The source's value (a CQL literal; writetimes in microseconds, TTLs in seconds).
    pub source: String,
    /// The target's value.
    pub target: String,
}

/// What differs in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ColumnDifferenceKind {
    /// Both set, different values.
    Value,
    /// Set in the source, null in the target.
    MissingOnTarget,
    /// Null in the source, set in the target.
    ExtraOnTarget,
    /// Writetimes differ beyond the tolerance.
    Writetime,
    /// TTLs differ beyond the tolerance.
    Ttl,
}

/// Both tables of a validation, read alike, with what compares their rows.
pub struct Sides<C: Comparator, S: Scan<Row = C::Row>> {
    /// The source's scan; its plan gives the units.
    pub source: S,
    /// The target's scan, over the same units.
    pub target: S,
    /// Orders and compares rows.
    pub comparator: C,
    /// `copyMissingRows`, when set.
    pub repair: Option<Box<dyn Repair<C::Row>>>,
    /// Units at once and rate limits.
    pub pacing: Pacing,
}

/// One table of a validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The migration's source.
    Source,
    /// The migration's target.
    Target,
}

impl Side {
    /// The other table.
    pub fn other(self) -> Self {
        match self {
            Side::Source => Side::Target,
            Side::Target => Side::Source,
        }
    }

    /// `source` or `target`, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }
}

/// What the validator asks of a connector whose tables are compared by looking rows up by key.
pub trait Lookup: Send + Sync + 'static {
    /// A row of either table.
    type Row: Send + Sync + 'static;
    /// A row's key: equal for a source row and the target row it was copied to.
    type Key: Eq + Hash + Send + Sync + 'static;
    /// Why a lookup failed.
    type Error: RequestError;

    /// The key of a row read from `side`.
    fn key(&self, side: Side, row: &Self::Row) -> Self::Key;

    /// Keys one [`Self::fetch`] takes at most.
    fn batch(&self) -> usize;

    /// Reads the rows of `keys` from `side`: those that exist, in any order. With `whole`
    /// false, enough of each row to know it exists. Changes nothing, so it may be retried.
    fn fetch(
        &self,
        side: Side,
        keys: &[Self::Key],
        whole: bool,
    ) -> impl Future<Output = Result<Vec<Self::Row>, Self::Error>> + Send;

    /// Whether a row read from `side` is left out of the comparison, as a migration leaves it
    /// out (a DynamoDB item whose TTL has passed): neither compared nor missing nor extra.
    fn left_out(&self, side: Side, row: &Self::Row) -> bool;

    /// The differing attributes of a source row and the target row with its key.
    fn differences(&self, source: &Self::Row, target: &Self::Row) -> Vec<ColumnDifference>;

    /// The key as a condition an operator can paste into a query.
    fn render_key(&self, key: &Self::Key) -> String;

    /// Bytes the row holds, for progress and rate limits.
    fn size(&self, row: &Self::Row) -> usize;
}

/// Both tables of a lookup validation, with what keys and compares their rows.
pub struct LookupSides<L: Lookup, S: Scan<Row = L::Row>> {
    /// The source's scan: its units are the first pass.
    pub source: S,
    /// The target's scan: its units are the second pass.
    pub target: S,
    /// Keys, fetches and compares rows.
    pub lookup: L,
    /// `copyMissingRows`, when set: writes the rows missing from the target.
    pub repair: Option<Box<dyn Repair<L::Row>>>,
    /// Units at once and rate limits.
    pub pacing: Pacing,
}

/// Turns the two sides a connector opened for a validation into the validator's run, whatever
/// their types: the connector that opens the pair (`registry::Connector::open_comparison`)
/// calls it, the validator erases the types.
pub trait ComparisonMaker {
    /// The validator's run.
    type Comparison;
    /// Both sides scanned in key order and merged.
    fn merged<C, S>(&self, sides: Sides<C, S>) -> Self::Comparison
    where
        C: Comparator,
        S: Scan<Row = C::Row>,
        S::Row: Clone;
    /// Each side's pages looked up by key in the other.
    fn looked_up<L, S>(&self, sides: LookupSides<L, S>) -> Self::Comparison
    where
        L: Lookup,
        S: Scan<Row = L::Row>;
}
