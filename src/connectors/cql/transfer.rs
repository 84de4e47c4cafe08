//! The CQL halves of a copy behind the connector seam: a token-range scan of the source
//! ([`CopyScan`]) and a writer that turns each row into the target writes that keep its
//! cells, writetimes and TTLs ([`CopySink`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use scylla::client::session::Session;
use scylla::errors::ExecutionError;

use super::copy::{CopyPlan, RowStats, Write, execute_batch};
use super::rows::RawRow;
use super::scan::RangeScan;
use super::{CqlError, CqlSource, CqlTarget};
use crate::connectors::seam::{Pacing, Pushed, Refused, Request, Sink};

/// Most statements in one batch, and about the most bytes (a row may take it over). Cassandra
/// logs a warning for every batch above `batch_size_warn_threshold` (5 KiB by default), even a
/// single-partition one: staying under it keeps the target's log readable.
const MAX_BATCH_STATEMENTS: usize = 32;
const MAX_BATCH_BYTES: usize = 4 * 1024;

/// Units the ring is split into when the job does not say (`source.splitCount`).
pub(crate) const DEFAULT_SPLIT_COUNT: usize = 256;
/// Units copied at once when the job does not say (`source.maxConcurrentUnits`).
pub(crate) const DEFAULT_UNITS_AT_ONCE: usize = 16;

/// Connects to both clusters, checks both tables and prepares every statement of a CQL → CQL
/// copy. Nothing is written.
pub async fn open_copy(
    src: &CqlSource,
    dst: &CqlTarget,
    renames: &[crate::jobfile::Rename],
) -> Result<(CopyScan, CopySink, Pacing), CqlError> {
    let super::Pair {
        source,
        target,
        source_schema,
        target_schema,
        mapping,
    } = super::open_pair(src, dst, renames).await?;
    if source_schema.is_counter_table() && src.preserve_timestamps {
        tracing::info!(
            "preserveTimestamps does not apply to counter tables (counters have no writable writetime)"
        );
    }
    let plan = Arc::new(
        CopyPlan::prepare(
            &source,
            &target,
            src,
            dst,
            source_schema,
            target_schema,
            &mapping,
        )
        .await?,
    );
    let preserve = src.preserve_timestamps && !plan.source.is_counter_table();
    let scan = CopyScan::open(
        Arc::new(source),
        src,
        plan.source.clone(),
        plan.select().clone(),
        preserve,
    )
    .await?;
    let sink = CopySink::new(Arc::new(target), plan);
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once: src.max_concurrent_units.unwrap_or(DEFAULT_UNITS_AT_ONCE),
        requests_in_flight: dst.max_in_flight,
        rows_per_second: dst.rows_per_second,
        bytes_per_second: dst.bytes_per_second,
    };
    Ok((scan, sink, pacing))
}

/// The source side of a copy: every column of each row, with writetimes and TTLs when the
/// job keeps them, token range by token range: CQL pages, or a snapshot's SSTables
/// (`source.bulkRead: snapshot`).
pub enum CopyScan {
    /// CQL pages from a replica of each range.
    Pages(RangeScan),
    /// The SSTables of a snapshot, merged.
    Snapshot(super::snapshot::SnapshotScan),
}

/// Where a page of a [`CopyScan`] starts.
#[derive(Clone)]
pub enum CopyCursor {
    /// In CQL pages.
    Pages(super::scan::RangeCursor),
    /// The page's number in the unit's queue.
    Snapshot(u64),
}

/// Why a page of a [`CopyScan`] could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A CQL request.
    #[error(transparent)]
    Cql(Box<ExecutionError>),
    /// The snapshot's read.
    #[error(transparent)]
    Snapshot(#[from] super::snapshot::SnapshotReadError),
}

impl From<ExecutionError> for ReadError {
    fn from(e: ExecutionError) -> Self {
        Self::Cql(Box::new(e))
    }
}

impl crate::connectors::seam::RequestError for ReadError {
    fn retry(&self) -> crate::connectors::seam::Retry {
        match self {
            Self::Cql(e) => e.retry(),
            Self::Snapshot(e) => e.retry(),
        }
    }
}

impl CopyScan {
    /// Reads `src` as the job says: CQL pages through `select` on `session`, or a snapshot's
    /// SSTables.
    pub async fn open(
        session: Arc<Session>,
        src: &CqlSource,
        table: super::schema::TableSchema,
        select: scylla::statement::prepared::PreparedStatement,
        preserve: bool,
    ) -> Result<Self, CqlError> {
        let split_count = src.split_count.unwrap_or(DEFAULT_SPLIT_COUNT);
        Ok(match src.bulk_read {
            super::config::BulkRead::Cql => Self::Pages(RangeScan::new(
                session,
                table,
                select,
                split_count,
                src.endpoint.local_dc.clone(),
            )),
            super::config::BulkRead::Snapshot => Self::Snapshot(
                super::snapshot::SnapshotScan::open(&session, src, table, preserve, split_count)
                    .await?,
            ),
        })
    }
}

impl crate::connectors::seam::Scan for CopyScan {
    type Unit = super::units::TokenUnit;
    type Row = RawRow;
    type Cursor = CopyCursor;
    type Error = ReadError;

    fn plan(
        &self,
        done: &crate::savepoints::Progress,
    ) -> crate::connectors::seam::Plan<Self::Unit> {
        match self {
            Self::Pages(s) => s.plan(done),
            Self::Snapshot(s) => s.plan(done),
        }
    }

    fn start(&self, unit: &Self::Unit) -> CopyCursor {
        match self {
            Self::Pages(s) => CopyCursor::Pages(s.start(unit)),
            Self::Snapshot(s) => CopyCursor::Snapshot(s.start(unit)),
        }
    }

    async fn page(
        &self,
        unit: &Self::Unit,
        cursor: &CopyCursor,
    ) -> Result<crate::connectors::seam::Page<RawRow, CopyCursor>, ReadError> {
        use crate::connectors::seam::Page;
        Ok(match (self, cursor) {
            (Self::Pages(s), CopyCursor::Pages(c)) => {
                let p = s.page(unit, c).await?;
                Page {
                    rows: p.rows,
                    next: p.next.map(CopyCursor::Pages),
                    measured: p.measured,
                }
            }
            (Self::Snapshot(s), CopyCursor::Snapshot(c)) => {
                let p = s.page(unit, c).await?;
                Page {
                    rows: p.rows,
                    next: p.next.map(CopyCursor::Snapshot),
                    measured: p.measured,
                }
            }
            _ => unreachable!("a cursor is made by the scan it is given back to"),
        })
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }

    /// `system.size_estimates` for CQL pages; a snapshot's read has no session to ask, so its
    /// total is learnt from the units it finishes.
    async fn expect(&self, work: &[Self::Unit]) -> Vec<Option<crate::connectors::seam::Expected>> {
        match self {
            Self::Pages(s) => s.expected(work).await,
            Self::Snapshot(_) => vec![None; work.len()],
        }
    }

    /// Partitions, which `system.size_estimates` counts.
    fn measure(&self, rows: &[RawRow]) -> u64 {
        match self {
            Self::Pages(s) => super::estimates::partitions_begun(rows, s.partition_key_len()),
            Self::Snapshot(_) => rows.len() as u64,
        }
    }
}

/// The target side of a copy.
pub struct CopySink {
    session: Arc<Session>,
    plan: Arc<CopyPlan>,
}

impl CopySink {
    /// Writes rows to `session` as `plan` says.
    pub fn new(session: Arc<Session>, plan: Arc<CopyPlan>) -> Self {
        Self { session, plan }
    }
}

/// Writes of consecutive rows of one partition, sent as one unlogged batch: a single-partition
/// batch is applied as one mutation, far cheaper for the target than one request per row.
#[derive(Default)]
pub struct PartitionBatcher {
    last_partition: Option<Vec<Option<Bytes>>>,
    batch: Vec<Write>,
    /// Rows whose writes are all in `batch`.
    rows: u64,
    /// When the source row of each write of `batch` was read: a partition's rows can come
    /// from pages read many seconds apart (a rate limit, a node stopped between them).
    read_at: Vec<Instant>,
    scratch: Vec<Write>,
}

impl PartitionBatcher {
    fn take(&mut self, out: &mut Vec<WriteRequest>) {
        if self.batch.is_empty() {
            return;
        }
        out.push(WriteRequest::new(
            std::mem::take(&mut self.batch),
            std::mem::take(&mut self.rows),
            std::mem::take(&mut self.read_at),
        ));
    }
}

/// One request to the target: a single statement, or one partition's batch.
pub struct WriteRequest {
    writes: Vec<Write>,
    rows: u64,
    bytes: u64,
    /// When the source row of each write was read: TTLs read then are shortened by the time
    /// since, each by its own.
    read_at: Vec<Instant>,
}

impl WriteRequest {
    fn new(writes: Vec<Write>, rows: u64, read_at: Vec<Instant>) -> Self {
        debug_assert_eq!(writes.len(), read_at.len());
        let bytes = writes.iter().map(|w| w.values.size() as u64).sum();
        Self {
            writes,
            rows,
            bytes,
            read_at,
        }
    }
}

impl Request for WriteRequest {
    fn rows(&self) -> u64 {
        self.rows
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn statements(&self) -> u64 {
        self.writes.len() as u64
    }
    fn idempotent(&self) -> bool {
        self.writes.iter().all(|w| w.idempotent)
    }
}

impl Sink<RawRow> for CopySink {
    type Request = WriteRequest;
    type Error = ExecutionError;
    type Batcher = PartitionBatcher;

    fn push(
        &self,
        b: &mut PartitionBatcher,
        row: &RawRow,
        read_at: Instant,
        out: &mut Vec<WriteRequest>,
    ) -> Result<Pushed, Refused> {
        let np = self.plan.source.partition_key.len();
        let new_partition = b.last_partition.as_deref() != Some(&row.cells[..np]);
        if new_partition {
            b.last_partition = Some(row.cells[..np].to_vec());
        }
        let mut stats = RowStats::default();
        let mut writes = std::mem::take(&mut b.scratch);
        writes.clear();
        self.plan
            .writes(row, new_partition, &mut stats, &mut writes);
        if stats.dropped > 0 {
            b.scratch = writes;
            if !self.plan.drops_null_keys() {
                return Err(Refused(
                    "has a null primary key column; set target.dropNullPrimaryKeys: true to skip such rows"
                        .into(),
                ));
            }
            return Ok(Pushed::Dropped);
        }
        if new_partition {
            b.take(out);
        }
        let mut counted = false;
        for write in writes.drain(..) {
            if write.counters.is_some() {
                // A counter row reads before it writes: it travels alone.
                out.push(WriteRequest::new(vec![write], 1, vec![read_at]));
                counted = true;
            } else {
                b.batch.push(write);
                b.read_at.push(read_at);
            }
        }
        b.scratch = writes;
        if !counted {
            b.rows += 1;
        }
        let batch_bytes: usize = b.batch.iter().map(|w| w.values.size()).sum();
        if b.batch.len() >= MAX_BATCH_STATEMENTS || batch_bytes >= MAX_BATCH_BYTES {
            b.take(out);
        }
        Ok(Pushed::Written)
    }

    fn flush(&self, b: &mut PartitionBatcher, out: &mut Vec<WriteRequest>) {
        b.take(out);
    }

    async fn send(&self, request: &WriteRequest) -> Result<(), ExecutionError> {
        match request.writes.as_slice() {
            [one] => one.execute(&self.session, request.read_at[0]).await,
            many => {
                execute_batch(
                    many,
                    &self.session,
                    self.plan.target_consistency(),
                    &request.read_at,
                )
                .await
            }
        }
    }
}
