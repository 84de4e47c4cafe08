//! `target.bulkWrite: sstable`: a CQL → CQL copy that hands the target's replicas SSTables
//! instead of CQL writes. Each unit (a token range of the source, read in token order) is
//! written as one SSTable per replica of its rows, uploaded to the drover beside that replica
//! (Cassandra Sidecar's upload routes), imported there (through the node's JMX), and only then
//! recorded complete. Upload ids are derived from the load (kept in the savepoints) and the
//! unit, so a unit imported by a run that died before recording it is found imported by the
//! next (the target drover remembers it), never imported twice.

mod ring;
mod rows;
mod upload;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cqlite_core::storage::sstable::writer::{SSTableFormat, SSTableInfo, SSTableWriter};
use cqlite_core::storage::write_engine::mutation::{DecoratedKey, Mutation};
use scylla::client::session::Session;
use tokio::sync::watch;

use super::rows::RawRow;
use super::{CqlError, CqlSource, CqlTarget};
use crate::connectors::seam::{Pacing, Pushed, Refused, Request, RequestError, Retry, Sink};
use rows::{Converted, RowPlan};

/// Why a unit could not be bulk-loaded.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    /// A row cannot be written as an SSTable row.
    #[error("{0}")]
    Row(String),
    /// The local SSTable could not be written.
    #[error("writing an SSTable: {0}")]
    Write(String),
    /// The drover beside a replica could not be reached, or answered that it is busy.
    #[error("the drover beside node {node} is unreachable or busy: {message}")]
    Unreachable {
        /// The node.
        node: String,
        /// Why.
        message: String,
    },
    /// The drover beside a replica refused an upload.
    #[error("uploading to the drover beside node {node}: {message}")]
    Upload {
        /// The node.
        node: String,
        /// Its answer.
        message: String,
    },
    /// The replica refused the import: its own message.
    #[error("node {node} refused the import: {message}")]
    Import {
        /// The node.
        node: String,
        /// Its answer.
        message: String,
    },
    /// A node of the target joined, left or moved around a unit's imports (see `ring`).
    #[error("{0}")]
    Topology(String),
}

impl BulkError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }
}

impl RequestError for BulkError {
    fn retry(&self) -> Retry {
        // A unit's SSTables are written in order: a write cannot be repeated alone. A failed
        // unit is copied again whole by the next run.
        Retry::Never
    }
}

/// Rows of a page sent to the unit's writers at once.
const ROWS_PER_REQUEST: usize = 1000;

/// The most rows, and bytes of values, of one partition held before they are written: the
/// writer takes a partition whole, so a larger one is written in pieces, each ending its
/// SSTable (one partition in several SSTables is what the node merges on every read anyway).
/// This bounds a unit's memory by the partition, not by the widest partition of the table.
const PARTITION_PIECE_ROWS: usize = 25_000;
const PARTITION_PIECE_BYTES: usize = 16 << 20;

/// Connects, checks that the table can take this path, and prepares a bulk copy.
pub async fn open_bulk_copy(
    src: &CqlSource,
    dst: &CqlTarget,
    renames: &[crate::jobfile::Rename],
    run: &str,
    wait: std::time::Duration,
) -> Result<(super::transfer::CopyScan, BulkSink, Pacing), CqlError> {
    let super::Pair {
        source,
        target,
        source_schema,
        target_schema,
        mapping,
    } = super::open_pair(src, dst, renames).await?;
    let refuse = |message: String| CqlError::Invalid {
        key: "target.bulkWrite".into(),
        message: format!("sstable: {message}"),
    };
    let create = create_table(&target, &target_schema.keyspace, &target_schema.table).await?;
    let ring = ring::Ring::plan(&target)
        .await
        .map_err(|message| CqlError::Request {
            side: "target".into(),
            message,
        })?;
    if !dst.bulk_skip_extended_verify
        && let Some(rate) = compaction_throughput(&target).await
    {
        tracing::info!(
            compaction_throughput = %rate,
            "bulk write: each import reads every row back (the node's extended verify) at the \
             target node's compaction throughput; on a large load that sets the pace \
             (raise it for the load, or see target.bulkSkipExtendedVerify)"
        );
    }
    let preserve = src.preserve_timestamps;
    let plan = RowPlan::new(
        source_schema.clone(),
        &target_schema,
        &create,
        mapping,
        preserve,
        if preserve {
            (None, None)
        } else {
            (dst.write_ttl_in_s, dst.write_writetimestamp_in_us)
        },
        dst.strip_trailing_zeros_for_decimals,
        dst.drop_null_primary_keys,
    )
    .map_err(refuse)?;
    let select = super::copy::prepare_select(&source, src, &source_schema, preserve).await?;
    let scan = super::transfer::CopyScan::open(
        Arc::new(source),
        src,
        source_schema.clone(),
        select,
        preserve,
    )
    .await?;
    let sidecars = upload::Sidecars::new(
        dst.bulk_sidecars.clone(),
        dst.bulk_sidecar_port,
        !dst.bulk_skip_extended_verify,
        wait,
    )
    .map_err(|e| refuse(e.to_string()))?;
    let spool = std::env::temp_dir().join(format!("drover-bulk-{}", uuid::Uuid::now_v7()));
    let job = format!(
        "{run}\n{}.{}>{}.{}\n{}",
        source_schema.keyspace,
        source_schema.table,
        target_schema.keyspace,
        target_schema.table,
        ring::digest(&target)
    );
    let sink = BulkSink {
        shared: Arc::new(Shared {
            plan,
            target: Arc::new(target),
            ring,
            sidecars,
            spool,
            job,
        }),
    };
    // A unit reads, then waits for its uploads and imports without its reading slot: the
    // next units read meanwhile, so reading and importing overlap instead of taking turns.
    let units_at_once = src
        .max_concurrent_units
        .unwrap_or(super::transfer::DEFAULT_UNITS_AT_ONCE);
    let pacing = Pacing {
        units_at_once,
        // As many more waiting for their imports: the spool holds as many units as when each
        // kept its slot (2 × 16 by default), and reading no longer stops while they import.
        units_finishing: units_at_once,
        // A unit's pages are written one after the other: more than two of them in flight
        // only hold rows in memory (up to a page each) while they wait for their turn.
        requests_in_flight: dst.max_in_flight.min(2 * units_at_once),
        rows_per_second: dst.rows_per_second,
        bytes_per_second: dst.bytes_per_second,
    };
    Ok((scan, sink, pacing))
}

/// The compaction throughput of the target node answering (`64MiB/s`), which paces the
/// extended verify of imports; `None` where the node has no `system_views.settings` (before
/// Cassandra 4.0, ScyllaDB) or does not say.
async fn compaction_throughput(session: &Session) -> Option<String> {
    let rows = session
        .query_unpaged(
            "SELECT value FROM system_views.settings WHERE name = 'compaction_throughput'",
            (),
        )
        .await
        .ok()?
        .into_rows_result()
        .ok()?;
    let (value,) = rows.maybe_first_row::<(Option<String>,)>().ok()??;
    value
}

/// The target table's `CREATE TABLE`, from its schema tables (the types as Cassandra spells
/// them, and the clustering order).
async fn create_table(session: &Session, keyspace: &str, table: &str) -> Result<String, CqlError> {
    let rows = session
        .query_unpaged(
            "SELECT column_name, clustering_order, kind, position, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (keyspace, table),
        )
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.into_rows_result().map_err(|e| e.to_string()))
        .map_err(|e| CqlError::Request {
            side: "target".into(),
            message: format!("reading the schema of {keyspace}.{table}: {e}"),
        })?;
    let mut columns: Vec<(String, String, String, i32, String)> = rows
        .rows::<(String, String, String, i32, String)>()
        .map_err(|e| CqlError::Request {
            side: "target".into(),
            message: e.to_string(),
        })?
        .collect::<Result<_, _>>()
        .map_err(|e| CqlError::Request {
            side: "target".into(),
            message: e.to_string(),
        })?;
    columns.sort_by_key(|c| (c.2.clone(), c.3));
    let q = super::schema::quote;
    let of = |kind: &str| -> Vec<&(String, String, String, i32, String)> {
        let mut v: Vec<_> = columns.iter().filter(|c| c.2 == kind).collect();
        v.sort_by_key(|c| c.3);
        v
    };
    let defs = columns
        .iter()
        .map(|c| {
            let stat = if c.2 == "static" { " static" } else { "" };
            format!("{} {}{stat}", q(&c.0), c.4)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let pk = of("partition_key")
        .iter()
        .map(|c| q(&c.0))
        .collect::<Vec<_>>()
        .join(", ");
    let ck = of("clustering");
    let key = if ck.is_empty() {
        format!("(({pk}))")
    } else {
        format!(
            "(({pk}), {})",
            ck.iter().map(|c| q(&c.0)).collect::<Vec<_>>().join(", ")
        )
    };
    let order = if ck.iter().any(|c| c.1 == "desc") {
        format!(
            " WITH CLUSTERING ORDER BY ({})",
            ck.iter()
                .map(|c| format!("{} {}", q(&c.0), c.1.to_uppercase()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    Ok(format!(
        "CREATE TABLE {}.{} ({defs}, PRIMARY KEY {key}){order}",
        q(keyspace),
        q(table)
    ))
}

struct Shared {
    plan: RowPlan,
    target: Arc<Session>,
    /// The target ring the load was planned on, checked around each unit's imports.
    ring: ring::Ring,
    sidecars: upload::Sidecars,
    spool: PathBuf,
    job: String,
}

/// The target side of a bulk copy.
pub struct BulkSink {
    shared: Arc<Shared>,
}

/// One unit's SSTables being written: a writer per replica, and the partition being
/// gathered (its rows may span pages).
struct UnitWriter {
    dir: PathBuf,
    writers: HashMap<String, SSTableWriter>,
    /// Replicas whose SSTables a partition written in pieces ended: the generation of their
    /// next SSTable, and the directory of those ended (uploaded with the unit's last ones,
    /// even if no row comes after the piece).
    ended: HashMap<String, (u64, PathBuf)>,
    open: Option<OpenPartition>,
    failed: Option<String>,
}

/// The partition being gathered: its key, its rows so far (the piece not yet written), their
/// bytes of values, and its replicas.
struct OpenPartition {
    key: DecoratedKey,
    rows: Vec<Mutation>,
    bytes: usize,
    replicas: Vec<String>,
}

struct UnitState {
    key: String,
    /// The sequence number of the next request to apply: requests run concurrently, rows
    /// must reach the writers in the order they were read.
    turn: watch::Sender<u64>,
    writer: Mutex<UnitWriter>,
    /// When the unit started, for cells written without their source's writetime.
    micros: i64,
}

/// Per-unit state of the engine's batcher.
#[derive(Default)]
pub struct BulkBatcher {
    unit: Option<Arc<UnitState>>,
    rows: Vec<RawRow>,
    /// When each row was read (seconds since the epoch): its TTLs count from then.
    read_at_s: Vec<i64>,
    bytes: u64,
    next: u64,
}

impl BulkBatcher {
    fn take(&mut self, out: &mut Vec<BulkRequest>) {
        if self.rows.is_empty() {
            return;
        }
        out.push(BulkRequest {
            unit: self.unit.clone().expect("begun"),
            seq: self.next,
            rows: std::mem::take(&mut self.rows),
            bytes: std::mem::take(&mut self.bytes),
            read_at_s: std::mem::take(&mut self.read_at_s),
        });
        self.next += 1;
    }
}

/// Rows of one unit, in the order read.
pub struct BulkRequest {
    unit: Arc<UnitState>,
    seq: u64,
    rows: Vec<RawRow>,
    bytes: u64,
    /// When each row was read (seconds since the epoch). A request gathers rows over many
    /// pages, and under load over many seconds: a TTL counted from when the request was cut
    /// would outlive the source's cell by that long.
    read_at_s: Vec<i64>,
}

impl Request for BulkRequest {
    fn rows(&self) -> u64 {
        self.rows.len() as u64
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn statements(&self) -> u64 {
        0
    }
    fn idempotent(&self) -> bool {
        false
    }
}

impl Shared {
    /// The replicas of a token, by address.
    fn replicas(&self, token: i64) -> Vec<String> {
        let t = &self.plan.table;
        let state = self.target.get_cluster_state();
        let mut nodes: Vec<String> = state
            .get_token_endpoints(&t.keyspace, &t.table, scylla::routing::Token::new(token))
            .into_iter()
            .map(|(node, _)| node.address.ip().to_string())
            .collect();
        nodes.dedup();
        nodes
    }

    /// Applies one request's rows to the unit's writers.
    fn apply(&self, unit: &UnitState, rows: &[RawRow], read_at_s: &[i64]) -> Result<(), BulkError> {
        let mut w = unit.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = &w.failed {
            return Err(BulkError::Write(e.clone()));
        }
        let result = (|| -> Result<(), BulkError> {
            for (row, &now_s) in rows.iter().zip(read_at_s) {
                // Statics ride on every row of a partition; they are written once, with its
                // first row.
                let Converted::Row {
                    key,
                    statics,
                    row: m,
                } = self
                    .plan
                    .convert(
                        &row.cells,
                        now_s,
                        unit.micros,
                        w.open.as_ref().map(|o| &o.key),
                    )
                    .map_err(BulkError::Row)?
                else {
                    continue;
                };
                if let Some(open) = w.open.as_mut()
                    && open.key == key
                {
                    open.rows.extend(m);
                    open.bytes += row.size();
                    if open.rows.len() >= PARTITION_PIECE_ROWS
                        || open.bytes >= PARTITION_PIECE_BYTES
                    {
                        self.write_piece(&mut w)?;
                    }
                    continue;
                }
                self.close_partition(&mut w)?;
                let replicas = self.replicas(key.token);
                w.open = Some(OpenPartition {
                    key,
                    rows: statics.into_iter().chain(m).collect(),
                    bytes: row.size(),
                    replicas,
                });
            }
            Ok(())
        })();
        if let Err(e) = &result {
            w.failed = Some(e.to_string());
        }
        result
    }

    /// Writes the partition gathered so far to the SSTable of each of its replicas.
    fn close_partition(&self, w: &mut UnitWriter) -> Result<(), BulkError> {
        let Some(open) = w.open.take() else {
            return Ok(());
        };
        self.write_rows(w, &open.key, open.rows, &open.replicas)
    }

    /// Writes the rows gathered so far of a partition too large to hold, and ends its
    /// replicas' SSTables: the rest of the partition starts the next ones (an SSTable holds
    /// each partition once). The partition stays open, so its statics are not written again.
    fn write_piece(&self, w: &mut UnitWriter) -> Result<(), BulkError> {
        let Some(open) = w.open.as_mut() else {
            return Ok(());
        };
        let rows = std::mem::take(&mut open.rows);
        open.bytes = 0;
        let (key, replicas) = (open.key.clone(), open.replicas.clone());
        self.write_rows(w, &key, rows, &replicas)?;
        for node in replicas {
            let Some(writer) = w.writers.remove(&node) else {
                continue;
            };
            // The writer only finishes asynchronously; this runs on a blocking thread of the
            // runtime, where waiting for it is allowed.
            let info = tokio::runtime::Handle::current()
                .block_on(writer.finish())
                .map_err(|e| BulkError::Write(e.to_string()))?;
            w.ended
                .entry(node)
                .and_modify(|(generation, _)| *generation += 1)
                .or_insert((2, sstable_dir(&info)));
        }
        Ok(())
    }

    /// Writes one partition's rows to the SSTable of each replica.
    fn write_rows(
        &self,
        w: &mut UnitWriter,
        key: &DecoratedKey,
        rows: Vec<Mutation>,
        replicas: &[String],
    ) -> Result<(), BulkError> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut rows = Some(rows);
        let last = replicas.len().saturating_sub(1);
        for (i, node) in replicas.iter().enumerate() {
            // Each replica's writer takes its own copy; the last takes the partition itself.
            let rows = if i == last {
                rows.take().unwrap_or_default()
            } else {
                rows.clone().unwrap_or_default()
            };
            let writer = match w.writers.entry(node.clone()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let generation = w.ended.get(node).map_or(1, |(g, _)| *g);
                    let mut writer = SSTableWriter::with_format(
                        w.dir.join(node),
                        generation,
                        &self.plan.schema,
                        1024,
                        SSTableFormat::Big,
                    )
                    .map_err(|e| BulkError::Write(e.to_string()))?;
                    // The writer takes these as the bases its values are written from: they
                    // must not exceed any value to come (cqlite-core 0.18 otherwise shifts
                    // earlier partitions' writetimes). Writetimes before 1970 are refused.
                    writer.pre_seed_encoding_baselines(0, 0, 0);
                    e.insert(writer)
                }
            };
            writer
                .write_partition(key.clone(), rows)
                .map_err(|e| BulkError::Write(e.to_string()))?;
        }
        Ok(())
    }

    /// The upload id of a unit's SSTables on one node: the same in every run of the same load
    /// (the runs resuming it from its savepoints) on the same target ring, so a unit imported
    /// by a run that died before recording it is found imported; another in a new load of the
    /// same tables, or on a ring that changed since (see `ring::digest`).
    fn upload_id(&self, unit: &str, node: &str) -> String {
        let h = xxhash_rust::xxh3::xxh3_128(format!("{}\n{unit}\n{node}", self.job).as_bytes());
        uuid::Uuid::from_u128(h).hyphenated().to_string()
    }
}

impl Sink<RawRow> for BulkSink {
    type Request = BulkRequest;
    type Error = BulkError;
    type Batcher = BulkBatcher;

    fn waiting(&self) -> Option<String> {
        self.shared.sidecars.waiting()
    }

    fn begin(&self, unit: &str) -> BulkBatcher {
        let dir = self.shared.spool.join(format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(unit.as_bytes())
        ));
        BulkBatcher {
            unit: Some(Arc::new(UnitState {
                key: unit.to_string(),
                turn: watch::Sender::new(0),
                writer: Mutex::new(UnitWriter {
                    dir,
                    writers: HashMap::new(),
                    ended: HashMap::new(),
                    open: None,
                    failed: None,
                }),
                micros: chrono::Utc::now().timestamp_micros(),
            })),
            ..Default::default()
        }
    }

    fn push(
        &self,
        b: &mut BulkBatcher,
        row: &RawRow,
        read_at: Instant,
        out: &mut Vec<BulkRequest>,
    ) -> Result<Pushed, Refused> {
        if self.shared.plan.drops(&row.cells) {
            return Ok(Pushed::Dropped);
        }
        b.bytes += row.size() as u64;
        b.rows.push(row.clone());
        // The second the row's TTL was counted from (see `Scan::TTLS_COUNTED_AT_REQUEST`),
        // rounded up: the copy expires neither before the source's cell (unless a coordinator
        // sat on the request for a second) nor after it by the time an answer took to come
        // back.
        let ago = i64::try_from(read_at.elapsed().as_millis()).unwrap_or(0);
        let read_ms = chrono::Utc::now().timestamp_millis() - ago;
        b.read_at_s
            .push(read_ms.div_euclid(1000) + i64::from(read_ms.rem_euclid(1000) > 0));
        if b.rows.len() >= ROWS_PER_REQUEST {
            b.take(out);
        }
        Ok(Pushed::Written)
    }

    fn flush(&self, b: &mut BulkBatcher, out: &mut Vec<BulkRequest>) {
        b.take(out);
    }

    async fn send(&self, request: &BulkRequest) -> Result<(), BulkError> {
        let unit = request.unit.clone();
        let mut turn = unit.turn.subscribe();
        // Rows reach the writers in the order read; a failed request still passes the turn
        // (its unit is failed, the later ones see it).
        let _ = turn.wait_for(|next| *next == request.seq).await;
        let shared = self.shared.clone();
        let rows = request.rows.clone();
        let read_at_s = request.read_at_s.clone();
        let applied = {
            let unit = unit.clone();
            tokio::task::spawn_blocking(move || shared.apply(&unit, &rows, &read_at_s))
                .await
                .unwrap_or_else(|e| Err(BulkError::Write(format!("a writer task failed: {e}"))))
        };
        unit.turn.send_modify(|next| *next += 1);
        applied
    }

    async fn finish(&self, batcher: BulkBatcher) -> Result<(), BulkError> {
        let Some(unit) = batcher.unit else {
            return Ok(());
        };
        let shared = self.shared.clone();
        let state = unit.clone();
        // Close the last partition and the writers.
        let writers = tokio::task::spawn_blocking(move || {
            let mut w = state.writer.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = &w.failed {
                return Err(BulkError::Write(e.clone()));
            }
            shared.close_partition(&mut w)?;
            Ok((
                std::mem::take(&mut w.writers),
                std::mem::take(&mut w.ended),
                w.dir.clone(),
            ))
        })
        .await
        .unwrap_or_else(|e| Err(BulkError::Write(format!("a writer task failed: {e}"))))?;
        let (writers, ended, dir) = writers;
        let result = async {
            let t = &self.shared.plan.table;
            // Each replica's SSTables: those its open writer ends now, and those a partition
            // written in pieces ended before (a replica may have only those).
            let mut dirs: std::collections::BTreeMap<String, PathBuf> = ended
                .into_iter()
                .map(|(node, (_, dir))| (node, dir))
                .collect();
            for (node, writer) in writers {
                let info = writer
                    .finish()
                    .await
                    .map_err(|e| BulkError::Write(e.to_string()))?;
                dirs.insert(node, sstable_dir(&info));
            }
            // The unit counts only if the ring was the planned one on both sides of its
            // imports (a node that joined meanwhile may lack them).
            let ring = || async {
                self.shared
                    .ring
                    .check(&self.shared.target)
                    .await
                    .map_err(BulkError::Topology)
            };
            ring().await?;
            for (node, files) in dirs {
                let id = self.shared.upload_id(&unit.key, &node);
                self.shared
                    .sidecars
                    .load(&node, &id, (&t.keyspace, &t.table), &files)
                    .await?;
            }
            ring().await
        }
        .await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        result
    }
}

/// The directory holding a finished SSTable's components.
fn sstable_dir(info: &SSTableInfo) -> PathBuf {
    info.data_path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}

impl Drop for BulkSink {
    fn drop(&mut self) {
        // Units that failed or were stopped leave their SSTables here.
        let _ = std::fs::remove_dir_all(&self.shared.spool);
    }
}
