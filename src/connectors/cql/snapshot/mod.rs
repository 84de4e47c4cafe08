//! `source.bulkRead: snapshot`: a CQL table read from its SSTables instead of CQL pages. The
//! drover beside each source node takes a snapshot of the table (Cassandra Sidecar's snapshot
//! routes); this run downloads its SSTables, clears the snapshot, and reads them merged with
//! `cqlite-core`'s k-way merger (the node's own reconciliation: the newest cell wins, deletions
//! and expired TTLs hide what they cover), in token order. The rows it hands the engine are
//! those a CQL scan of the same table would have returned (every column, and the writetimes
//! and TTLs of each cell, element by element for collections), so every target path (CQL
//! writes, `bulkWrite: sstable`) takes them unchanged, and the source node serves no pages.
//!
//! The merged read runs once, in token order, on one thread: it feeds each unit (a token range
//! of the plan, recorded in the savepoints as the CQL scan records them) through a queue of
//! pages; the pages queued for all units together are bounded, so the read runs ahead of the
//! unit the engine is writing into the next ones and their writes overlap. Units are planned in
//! token order so that the units the read is filling are always among those the engine runs.
//! A unit whose pages were handed out cannot be read again in the same run: a unit that fails
//! fails the run, and the next run (a resume) takes a new snapshot and reads the units not yet
//! complete.

mod convert;
mod fetch;
mod replicas;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cqlite_core::storage::write_engine::KWayMerger;
use cqlite_core::storage::write_engine::merge::MergeStep;
use scylla::client::session::Session;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::rows::RawRow;
use super::schema::TableSchema;
use super::units::{self, TokenUnit};
use super::{CqlError, CqlSource};
use crate::connectors::seam::{Page, Plan, RequestError, Retry, Scan};
use crate::savepoints;

pub use convert::Layout;

/// Pages held ahead of the engine per unit reading at once: the merged read waits when all
/// units together hold this many times `maxConcurrentUnits` pages.
const PAGES_AHEAD_PER_UNIT: usize = 2;

/// A page of a unit as queued: when its first row was read (seconds since the epoch), its
/// rows and its place in the read-ahead (given back when the engine takes the page); or why
/// the read failed.
type Queued = Result<(i64, Vec<RawRow>, OwnedSemaphorePermit), String>;

/// Why reading the snapshot failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("source (bulkRead: snapshot): {0}")]
pub struct SnapshotReadError(pub String);

impl RequestError for SnapshotReadError {
    fn retry(&self) -> Retry {
        // The merged read goes forward only: what it handed out is not read again.
        Retry::Never
    }
}

/// A table read from its SSTables, merged.
pub struct SnapshotScan {
    tokens: Vec<i64>,
    split_count: usize,
    page_rows: usize,
    /// Pages the merged read may hold ahead of the engine, all units together.
    pages_ahead: usize,
    layout: Arc<Layout>,
    merge_schema: cqlite_core::schema::TableSchema,
    data_files: Vec<PathBuf>,
    /// The downloaded SSTables; removed with the scan.
    spool: PathBuf,
    /// Units as last planned, in token order.
    planned: Mutex<Vec<TokenUnit>>,
    feeds: OnceLock<Feeds>,
}

/// The queues of the planned units, by unit key, and the read that fills them.
struct Feeds {
    by_key: HashMap<String, tokio::sync::Mutex<Feed>>,
}

struct Feed {
    rx: mpsc::UnboundedReceiver<Queued>,
    /// Pages handed out.
    served: u64,
    /// The last page handed out, for the engine's retry of the same cursor.
    last: Option<Vec<RawRow>>,
}

impl SnapshotScan {
    /// Takes a snapshot of `table` on every node of `session`'s cluster through the drover
    /// beside it, downloads its SSTables and clears it: the scan reads them.
    pub async fn open(
        session: &Session,
        src: &CqlSource,
        table: TableSchema,
        preserve: bool,
        split_count: usize,
    ) -> Result<Self, CqlError> {
        let refuse = |message: String| CqlError::Invalid {
            key: "source.bulkRead".into(),
            message: format!("snapshot: {message}"),
        };
        let descending = clustering_order(session, &table).await?;
        let layout = Layout::new(table, descending, preserve).map_err(refuse)?;
        let merge_schema =
            cqlite_core::schema::parse_cql_schema(&layout.merge_create()).map_err(|e| {
                refuse(format!(
                    "the SSTable reader cannot take the table's schema: {e}"
                ))
            })?;
        let nodes = read_nodes(session, src, &layout.table).await?;
        let spool = std::env::temp_dir().join(format!(
            "drover-bulk-read-{}",
            uuid::Uuid::now_v7().simple()
        ));
        let fetched = fetch::fetch_all(src, &layout.table, &nodes, &spool).await;
        let data_files = match fetched {
            Ok(files) => files,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&spool);
                return Err(CqlError::Request {
                    side: "source".into(),
                    message: format!("bulkRead: snapshot: {e}"),
                });
            }
        };
        tracing::info!(
            nodes = nodes.len(),
            sstables = data_files.len(),
            spool = %spool.display(),
            "bulk read: the snapshot's SSTables are here; reading them merged"
        );
        Ok(Self {
            tokens: units::ring_tokens(session),
            split_count,
            page_rows: src.fetch_size.max(1),
            pages_ahead: PAGES_AHEAD_PER_UNIT
                * src
                    .max_concurrent_units
                    .unwrap_or(super::transfer::DEFAULT_UNITS_AT_ONCE)
                    .max(1),
            layout: Arc::new(layout),
            merge_schema,
            data_files,
            spool,
            planned: Mutex::new(Vec::new()),
            feeds: OnceLock::new(),
        })
    }

    /// Starts the merged read that fills the queues of the planned units.
    fn start_feeds(&self) -> Feeds {
        let planned = self.planned.lock().expect("not poisoned").clone();
        let mut by_key = HashMap::new();
        let mut senders = Vec::new();
        for unit in &planned {
            // Unbounded: the read-ahead's permits bound what all the queues hold.
            let (tx, rx) = mpsc::unbounded_channel();
            by_key.insert(
                unit.key(),
                tokio::sync::Mutex::new(Feed {
                    rx,
                    served: 0,
                    last: None,
                }),
            );
            senders.push(Some(tx));
        }
        let read = MergedRead {
            units: planned,
            senders,
            ahead: Arc::new(Semaphore::new(self.pages_ahead)),
            layout: self.layout.clone(),
            page_rows: self.page_rows,
        };
        let paths = self.data_files.clone();
        let schema = self.merge_schema.clone();
        tokio::task::spawn_blocking(move || read.run(paths, &schema));
        Feeds { by_key }
    }
}

/// The nodes whose snapshots are read (`bulkReadConsistency`), said in the log with what the
/// check of the cluster found.
async fn read_nodes(
    session: &Session,
    src: &CqlSource,
    table: &(String, String),
) -> Result<Vec<String>, CqlError> {
    let survey = replicas::survey(
        session,
        &table.0,
        &table.1,
        src.endpoint.local_dc.as_deref(),
    )
    .await;
    let choice =
        replicas::choose(&survey, src.bulk_read_consistency).map_err(|e| CqlError::Request {
            side: "source".into(),
            message: format!("bulkRead: snapshot: {e}"),
        })?;
    let nodes: Vec<String> = choice
        .read
        .iter()
        .map(|&i| survey.nodes[i].address.clone())
        .collect();
    let suspects: Vec<String> = survey
        .nodes
        .iter()
        .filter_map(|n| {
            n.suspect
                .as_ref()
                .map(|why| format!("{} ({why})", n.address))
        })
        .collect();
    tracing::info!(
        consistency = ?src.bulk_read_consistency,
        read = %nodes.join(", "),
        of = survey.nodes.len(),
        ranges = choice.ranges,
        "bulk read: the snapshots of these nodes are read"
    );
    if choice.fallback_ranges > 0 {
        tracing::warn!(
            ranges = choice.fallback_ranges,
            may_lack_writes = %suspects.join("; "),
            hints_unseen = survey.hints_unseen.as_deref().unwrap_or(""),
            "bulk read: ranges whose replicas may each lack writes are read from every replica that answers, merged"
        );
    } else if !suspects.is_empty() {
        tracing::info!(passed_over = %suspects.join("; "), "bulk read: replicas that may lack writes are not read alone");
    }
    Ok(nodes)
}

/// Whether each clustering column of `table` is in descending order.
async fn clustering_order(session: &Session, table: &TableSchema) -> Result<Vec<bool>, CqlError> {
    let failed = |e: String| CqlError::Metadata {
        side: "source".into(),
        message: format!("the clustering order of {}: {e}", table.qualified()),
    };
    let rows = session
        .query_unpaged(
            "SELECT column_name, clustering_order, kind FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (&table.keyspace, &table.table),
        )
        .await
        .map_err(|e| failed(e.to_string()))?
        .into_rows_result()
        .map_err(|e| failed(e.to_string()))?;
    let columns: HashMap<String, String> = rows
        .rows::<(String, String, String)>()
        .map_err(|e| failed(e.to_string()))?
        .filter_map(Result::ok)
        .filter(|(_, _, kind)| kind == "clustering")
        .map(|(name, order, _)| (name, order))
        .collect();
    Ok(table
        .clustering_key
        .iter()
        .map(|c| {
            columns
                .get(&c.name)
                .is_some_and(|o| o.eq_ignore_ascii_case("desc"))
        })
        .collect())
}

impl Drop for SnapshotScan {
    fn drop(&mut self) {
        // The merged read may still hold files open: unlinked files stay readable until then.
        if let Err(e) = std::fs::remove_dir_all(&self.spool)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(spool = %self.spool.display(), error = %e, "bulk read: the downloaded snapshot could not be removed");
        }
    }
}

use crate::connectors::seam::Unit as _;

impl Scan for SnapshotScan {
    type Unit = TokenUnit;
    type Row = RawRow;
    type Cursor = u64;
    type Error = SnapshotReadError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<TokenUnit> {
        let mut plan = units::plan(
            &self.tokens,
            self.split_count,
            done.ranges(&crate::savepoints::TOKEN_RANGES),
        );
        // In the order the merged read reaches them.
        plan.work
            .sort_by_key(|u| u.pieces.iter().map(|p| p.start).min().unwrap_or(i64::MIN));
        *self.planned.lock().expect("not poisoned") = plan.work.clone();
        plan
    }

    fn start(&self, _unit: &TokenUnit) -> u64 {
        0
    }

    async fn page(
        &self,
        unit: &TokenUnit,
        cursor: &u64,
    ) -> Result<Page<RawRow, u64>, SnapshotReadError> {
        let feeds = self.feeds.get_or_init(|| self.start_feeds());
        let Some(feed) = feeds.by_key.get(&unit.key()) else {
            return Err(SnapshotReadError(format!(
                "unit {unit} was not planned by this run"
            )));
        };
        let mut feed = feed.lock().await;
        let n = *cursor;
        if n + 1 == feed.served
            && let Some(rows) = &feed.last
        {
            return Ok(Page {
                rows: rows.clone(),
                next: Some(n + 1),
                measured: None,
            });
        }
        if n != feed.served {
            return Err(SnapshotReadError(format!(
                "unit {unit}: page {n} asked after page {} was handed out; the merged read of the snapshot goes forward only (resume the job to read the unit again)",
                feed.served
            )));
        }
        match feed.rx.recv().await {
            Some(Ok((read_at, mut rows, ahead))) => {
                drop(ahead);
                self.layout
                    .age(&mut rows, chrono::Utc::now().timestamp() - read_at);
                feed.served += 1;
                feed.last = Some(rows.clone());
                Ok(Page {
                    rows,
                    next: Some(n + 1),
                    measured: None,
                })
            }
            Some(Err(e)) => Err(SnapshotReadError(e)),
            None => {
                feed.served += 1;
                feed.last = None;
                Ok(Page {
                    rows: Vec::new(),
                    next: None,
                    measured: None,
                })
            }
        }
    }

    fn row_size(row: &RawRow) -> usize {
        row.size()
    }
}

/// The merged read: partitions in token order, each turned into rows and queued for its
/// unit; a unit's queue is closed once the read is past its last token.
struct MergedRead {
    units: Vec<TokenUnit>,
    senders: Vec<Option<mpsc::UnboundedSender<Queued>>>,
    /// The read-ahead: a permit per page queued and not yet taken by the engine.
    ahead: Arc<Semaphore>,
    layout: Arc<Layout>,
    page_rows: usize,
}

impl MergedRead {
    fn run(mut self, paths: Vec<PathBuf>, schema: &cqlite_core::schema::TableSchema) {
        if let Err(e) = self.read(paths, schema) {
            tracing::warn!(error = %e, "bulk read: reading the snapshot failed");
            for tx in self.senders.iter().flatten() {
                let _ = tx.send(Err(e.clone()));
            }
        }
    }

    fn read(
        &mut self,
        paths: Vec<PathBuf>,
        schema: &cqlite_core::schema::TableSchema,
    ) -> Result<(), String> {
        // Each piece of every planned unit, by start; and the order units end in.
        let mut pieces: Vec<(i64, i64, usize)> = self
            .units
            .iter()
            .enumerate()
            .flat_map(|(i, u)| u.pieces.iter().map(move |p| (p.start, p.end, i)))
            .collect();
        pieces.sort_unstable();
        let mut ends: Vec<(i64, usize)> = self
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| (u.pieces.iter().map(|p| p.end).max().unwrap_or(i64::MIN), i))
            .collect();
        ends.sort_unstable();
        let mut next_end = 0;
        let mut pending: Vec<(i64, Vec<RawRow>)> = vec![(0, Vec::new()); self.units.len()];
        let mut merger = if paths.is_empty() {
            None
        } else {
            Some(
                KWayMerger::new(paths, schema)
                    .map_err(|e| format!("opening the snapshot's SSTables: {e}"))?,
            )
        };
        while let Some(m) = merger.as_mut() {
            let MergeStep::Partition { key, rows } = m
                .step()
                .map_err(|e| format!("reading the snapshot's SSTables: {e}"))?
            else {
                break;
            };
            let token = key.token;
            // Units wholly before this partition are complete.
            while next_end < ends.len() && ends[next_end].0 < token {
                let unit = ends[next_end].1;
                if !self.flush(unit, &mut pending, true) {
                    return Ok(());
                }
                next_end += 1;
            }
            // The piece holding the token: pieces are `(start, end]` and disjoint.
            let at = pieces.partition_point(|p| p.0 < token);
            let Some(&(_, end, unit)) = at.checked_sub(1).map(|i| &pieces[i]) else {
                continue;
            };
            if token > end {
                // In a range complete before this run.
                continue;
            }
            let now_s = chrono::Utc::now().timestamp();
            let page = &mut pending[unit];
            if page.1.is_empty() {
                // A page's TTLs are counted from when its first row was read.
                page.0 = now_s;
            }
            self.layout
                .partition_rows(&key, rows, page.0, &mut page.1)
                .map_err(|e| format!("partition of token {token}: {e}"))?;
            if page.1.len() >= self.page_rows && !self.flush(unit, &mut pending, false) {
                return Ok(());
            }
        }
        for unit in 0..self.units.len() {
            if !self.flush(unit, &mut pending, true) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sends the rows waiting for `unit`, and closes its queue when `last`; false when the
    /// scan is gone (the run ended).
    fn flush(&mut self, unit: usize, pending: &mut [(i64, Vec<RawRow>)], last: bool) -> bool {
        let Some(tx) = &self.senders[unit] else {
            return true;
        };
        if !pending[unit].1.is_empty() {
            let rows = std::mem::take(&mut pending[unit].1);
            // The semaphore is never closed. When the scan is gone, its dropped queues give
            // their permits back, so this wait ends and the send below fails.
            let Ok(permit) = futures::executor::block_on(self.ahead.clone().acquire_owned()) else {
                return false;
            };
            if tx.send(Ok((pending[unit].0, rows, permit))).is_err() {
                return false;
            }
        }
        if last {
            self.senders[unit] = None;
        }
        true
    }
}
