//! The seam between the engine and the connectors.
//!
//! A source is a table read in *units* (token ranges for CQL, scan segments for DynamoDB,
//! files or row groups for Parquet, key ranges for MySQL), each unit page by page. A target
//! turns rows into write *requests* (a CQL batch of one partition, a DynamoDB
//! `BatchWriteItem`, ...). The engine owns everything in between: which units to run, how
//! many at once, rate limits, how many requests in flight, retries, counters and the record of
//! completed units that savepoints store. A connector owns its formats and its protocol, and
//! says for each of its errors whether trying again can help ([`Retry`]).
//!
//! The validator uses the same [`Scan`] on both sides of a job, with the same unit driver.

pub mod compare;
mod error;
pub mod limits;
pub mod retry;

pub use error::{ConnectorError, SeamError};

use std::fmt::Display;
use std::future::Future;
use std::time::Instant;

use crate::savepoints;

/// What trying a failed request again can achieve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The failure may go away by itself (node down or overloaded, connection lost before
    /// sending): try again.
    Safe,
    /// The request may have been applied (a timeout): try again only if applying it twice
    /// does no harm.
    IfIdempotent,
    /// The failure will not go away (bad request, schema, permissions): give up.
    Never,
}

/// An error of one request of a connector.
pub trait RequestError: std::error::Error + Send + Sync + 'static {
    /// Whether and when the engine may send the request again.
    fn retry(&self) -> Retry;

    /// What the job waits for while the request is retried, in the operator's words, when
    /// the error's own text does not say it plainly.
    fn waiting_for(&self) -> Option<String> {
        None
    }
}

/// A unit of work: read whole, written whole, then recorded complete. Its completion is
/// recorded in the savepoint model ([`savepoints::Progress`]), in the job file's own terms.
pub trait Unit: Clone + Display + Send + Sync + 'static {
    /// Adds this unit to the completed work of a run.
    fn record(&self, done: &mut savepoints::Progress);
    /// A stable name of the unit's work, the same in every run that plans the same unit: a
    /// target that writes a file per unit names it by this, so a unit copied again replaces
    /// its file instead of adding a second one.
    fn key(&self) -> String {
        self.to_string()
    }
}

/// The units a run has to go through.
#[derive(Debug, Clone)]
pub struct Plan<U> {
    /// Units of the whole table.
    pub total: u64,
    /// Units already complete (in the job's or a savepoint's skip lists).
    pub skipped: u64,
    /// What is left, in the order it should be run.
    pub work: Vec<U>,
}

/// One page of a unit.
#[derive(Debug)]
pub struct Page<R, C> {
    /// Rows of the page, in the source's order.
    pub rows: Vec<R>,
    /// Where the next page starts; `None` at the end of the unit.
    pub next: Option<C>,
    /// How much of the unit's [`Scan::expect`] measure the page covers, for a source that
    /// counts it as it reads (the bytes of a file it parsed); `None`: [`Scan::measure`] of its
    /// rows.
    pub measured: Option<u64>,
}

/// A table that can be read unit by unit, page by page. Reading a page changes nothing, so
/// the engine may retry it from the same cursor.
pub trait Scan: Send + Sync + 'static {
    /// The unit of work.
    type Unit: Unit;
    /// A row as read.
    type Row: Send + Sync + 'static;
    /// Where a page starts.
    type Cursor: Clone + Send + Sync + 'static;
    /// Why a read failed.
    type Error: RequestError;

    /// Whether the TTLs of a page's rows are counted by the source from when it was asked for
    /// the page (a database answering a request, whose answer can come seconds later), rather
    /// than from when the page is handed over (a reader that counts them itself). The engine
    /// ages each row's TTL from that moment, so the copy expires with its source.
    const TTLS_COUNTED_AT_REQUEST: bool = false;

    /// The units of the table, less the work `done` covers.
    fn plan(&self, done: &savepoints::Progress) -> Plan<Self::Unit>;
    /// The cursor of a unit's first page.
    fn start(&self, unit: &Self::Unit) -> Self::Cursor;
    /// Reads the page at `cursor` of `unit`.
    fn page(
        &self,
        unit: &Self::Unit,
        cursor: &Self::Cursor,
    ) -> impl Future<Output = Result<Page<Self::Row, Self::Cursor>, Self::Error>> + Send;
    /// Bytes of a row, for counters and byte rate limits.
    fn row_size(row: &Self::Row) -> usize;
    /// What the source's statistics say each unit of `work` holds, in order, asked once when
    /// the copy starts; `None` for a unit they say nothing about. Counted in the measure of
    /// [`Scan::measure`]. The engine refines these with what it reads (see
    /// `engine::estimate`), so statistics that are stale or count something else than rows
    /// (partitions) still give a right total once a few units are read.
    fn expect(&self, work: &[Self::Unit]) -> impl Future<Output = Vec<Option<Expected>>> + Send {
        std::future::ready(vec![None; work.len()])
    }
    /// How much of [`Scan::expect`]'s measure a page's `rows` are: the rows themselves by
    /// default; the partitions they begin for a source whose statistics count partitions.
    fn measure(&self, rows: &[Self::Row]) -> u64 {
        rows.len() as u64
    }
    /// The connector's own counters (capacity consumed, ...), by their name in job status.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// What a source's statistics say one unit holds, before it is read ([`Scan::expect`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Expected {
    /// Rows, or what the statistics count instead of rows (see [`Scan::measure`]).
    pub count: f64,
    /// Bytes, as the statistics count them (on disk, in the source's format): used only until
    /// the first rows are read, then the bytes of the rows read give the size.
    pub bytes: f64,
    /// True when `count` is exact (file footers, an export's manifest): no refinement needed.
    pub exact: bool,
}

impl Expected {
    /// A whole table's estimated `count` and `bytes`, as `units` units that each hold an even
    /// share of `parts` (scan segments, key ranges): for sources whose statistics are only of
    /// the whole table.
    pub fn evenly(units: usize, count: f64, bytes: f64, parts: f64) -> Vec<Option<Expected>> {
        let share = Expected {
            count: count / parts,
            bytes: bytes / parts,
            exact: false,
        };
        vec![Some(share); units]
    }
}

/// What became of a row given to a [`Sink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Its writes are in requests (sent, or waiting in the batcher).
    Written,
    /// Left out on purpose (`dropNullPrimaryKeys` and the like): counted, not written.
    Dropped,
}

/// A row the target cannot take, with what the operator can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// One write request, as the engine accounts for it.
pub trait Request: Send + Sync + 'static {
    /// Rows complete once it is acknowledged.
    fn rows(&self) -> u64;
    /// Bytes of values it carries.
    fn bytes(&self) -> u64;
    /// Statements (or items) it holds.
    fn statements(&self) -> u64;
    /// Whether applying it twice leaves the same result (a retry after a timeout is safe).
    fn idempotent(&self) -> bool;
}

/// A table rows of type `R` can be written to.
pub trait Sink<R>: Send + Sync + 'static {
    /// A request ready to send.
    type Request: Request;
    /// Why a write failed.
    type Error: RequestError;
    /// Per-unit state: the request being filled.
    type Batcher: Default + Send;

    /// Prepares the target once, before any unit runs (what the job's checks decided must be
    /// removed first, for instance). Nothing is written before the job is accepted.
    fn start(&self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        std::future::ready(Ok(()))
    }
    /// The state of a unit about to be copied; `unit` is its [`Unit::key`].
    fn begin(&self, unit: &str) -> Self::Batcher {
        let _ = unit;
        Self::Batcher::default()
    }
    /// Ends a unit whose every request was acknowledged: what the batcher still holds is made
    /// durable (a file renamed into place). The unit is recorded complete only after this.
    /// A unit that failed or was stopped is dropped without it.
    fn finish(
        &self,
        batcher: Self::Batcher,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        drop(batcher);
        std::future::ready(Ok(()))
    }

    /// Ends a run in which every unit of the table is complete (none failed, none was
    /// stopped): what describes the whole output is written (an export's manifests). Not
    /// called when a run ends early; a resumed run that completes calls it again.
    fn complete(&self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        std::future::ready(Ok(()))
    }

    /// Turns one row, whose TTLs count from `read_at` (see [`Scan::TTLS_COUNTED_AT_REQUEST`]),
    /// into writes; requests that are complete are pushed to `out`, in the order they must be
    /// sent.
    fn push(
        &self,
        batcher: &mut Self::Batcher,
        row: &R,
        read_at: Instant,
        out: &mut Vec<Self::Request>,
    ) -> Result<Pushed, Refused>;
    /// Pushes to `out` what the batcher still holds (the end of a page).
    fn flush(&self, batcher: &mut Self::Batcher, out: &mut Vec<Self::Request>);
    /// Sends one request once; the engine retries by the error's [`Retry`].
    fn send(&self, request: &Self::Request)
    -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// The connector's own counters (rows left out and why, capacity consumed, ...), by their
    /// name in job status.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// What the sink is waiting for now inside a call of its own (a peer it retries in
    /// [`Sink::finish`]), shown as the job's phase `waiting: <why>` as the engine's own
    /// retries are.
    fn waiting(&self) -> Option<String> {
        None
    }
}

/// What a source's change stream needs from the engine while it is applied.
#[derive(Clone)]
pub struct FollowContext {
    /// The job's retries: counted, and shown as what the job waits for while one runs.
    pub retries: std::sync::Arc<retry::Retries>,
    /// The completed work, whose stream positions the replication moves forward.
    pub done: std::sync::Arc<std::sync::Mutex<crate::savepoints::Progress>>,
    /// Stops the replication (the job's stop, or the failure of one of its shards).
    pub cancel: tokio_util::sync::CancellationToken,
}

/// A source's change stream, applied to the target after the snapshot (DynamoDB's
/// `streamChanges`). It runs until the job is stopped, recording in the progress's stream
/// positions each change it applied, so that a savepoint lets a restart continue after it.
pub trait Changes: Send + Sync + 'static {
    /// Applies changes from the positions in `ctx.done` on; returns `Stopped` when stopped,
    /// or the error that ended it (a gap in the stream among them).
    fn follow(
        self: std::sync::Arc<Self>,
        ctx: FollowContext,
    ) -> futures::future::BoxFuture<'static, Result<(), SeamError>>;
    /// Counters (records applied, lag, ...), by their name in job status.
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// How hard a job may push: the engine's bounds, from the job file's connector sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Units read at once.
    pub units_at_once: usize,
    /// Units whose rows are all written that may still be completing ([`Sink::finish`]) on top
    /// of `units_at_once`, each without a reading slot: a sink whose finish waits on the target
    /// (an import) lets the next units read meanwhile. 0: a unit keeps its slot until it is
    /// complete.
    pub units_finishing: usize,
    /// Write requests in flight at once.
    pub requests_in_flight: usize,
    /// Rows written per second, at most (unset: no limit).
    pub rows_per_second: Option<u32>,
    /// Bytes written per second, at most (unset: no limit).
    pub bytes_per_second: Option<u64>,
}

/// What [`Coordinator::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This run holds the unit now (until it completes it, or its lease expires).
    Mine,
    /// Another run completed the unit.
    Done,
    /// Another run holds the unit.
    Held,
}

/// Where one job's units stand across every run sharing it (`coordination`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shared {
    /// Units recorded complete, by any run.
    pub done: u64,
    /// Units held by a run now.
    pub held: u64,
}

/// The table a shared job's units are kept in by default (`coordination.table`).
pub const COORDINATION_TABLE: &str = "drover_units";

/// Units shared by several runs of one job, in several daemons: each unit is run by one of
/// them at a time, under a lease that lapses when its run dies, and recorded complete once.
/// The engine asks before each unit and reports each unit it completes; the store of the
/// leases (a table of the target database, say) is the coordinator's.
pub trait Coordinator: Send + Sync + 'static {
    /// Tries to take the unit named `key` (a [`Unit::key`]).
    fn claim(&self, key: &str) -> futures::future::BoxFuture<'_, Result<Claim, String>>;
    /// Renews this run's lease on a unit it holds; `false` when the lease was lost.
    fn renew(&self, key: &str) -> futures::future::BoxFuture<'_, Result<bool, String>>;
    /// Records a unit this run copied as complete, giving up its lease.
    fn complete(&self, key: &str) -> futures::future::BoxFuture<'_, Result<(), String>>;
    /// Gives up a unit this run holds without completing it (the run failed or stops).
    fn release(&self, key: &str) -> futures::future::BoxFuture<'_, Result<(), String>>;
    /// The whole job's state, every run's units counted.
    fn shared(&self) -> futures::future::BoxFuture<'_, Result<Shared, String>>;
    /// How long a lease lasts without renewal.
    fn lease(&self) -> std::time::Duration;
    /// Counters (requests made for coordination), by their name in job status.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A target database that keeps a job's savepoints in a table of its own
/// (`savepoints.type: target-table`), opened for one job through a session of its own.
pub trait SavepointTable: Send + Sync {
    /// The store for reading; `None` when nothing was ever written there.
    fn reader(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<Option<std::sync::Arc<dyn savepoints::SavepointStore>>, savepoints::SavepointError>,
    >;

    /// The table opened for this run's writes (created when missing), with the run's lease;
    /// `keep` savepoints are kept.
    fn writer(
        &self,
        keep: usize,
    ) -> futures::future::BoxFuture<'_, Result<savepoints::Writer, savepoints::SavepointError>>;
}

/// Turns the scan and sink a connector pair opened into the engine's copy, whatever their
/// types: the connector that opens the pair (`registry::Connector::open_copy`) calls it, the
/// engine erases the types.
pub trait CopyMaker {
    /// The engine's copy.
    type Copy;
    /// The copy of `scan` into `sink` under `pacing`, the work in `done` not done again.
    fn make<S: Scan, T: Sink<S::Row>>(
        &self,
        scan: S,
        sink: T,
        pacing: Pacing,
        done: &savepoints::Progress,
    ) -> Self::Copy;
}

/// What a connector pair opened for a migration.
pub struct OpenedCopy<C> {
    /// The copy of the table; `None` when there is nothing to copy (a replication that skips
    /// the snapshot, an export whose savepoint says it is written).
    pub copy: Option<C>,
    /// The source's changes, applied after the copy.
    pub changes: Option<std::sync::Arc<dyn Changes>>,
}
