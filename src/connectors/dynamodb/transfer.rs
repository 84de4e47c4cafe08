//! A DynamoDB copy: the source's parallel scan, written with `BatchWriteItem` (25 items at
//! most per request) into a target table created from the source's description when missing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{PutRequest, ReturnConsumedCapacity, WriteRequest};

use super::config::{DynamoSource, DynamoTarget};
use super::item::{Item, expired, item_size, rename};
use super::retry::DynamoError;
use super::scan::SegmentScan;
use super::stream::{self, Replication, ReplicationSetup};
use super::table::{self, Described};
use crate::connectors::seam::SeamError;
use crate::connectors::seam::{Pacing, Pushed, Refused, Request, Retry, Sink};
use crate::jobfile::{JobConfigError, Rename};
use crate::savepoints;

/// Items per `BatchWriteItem`, DynamoDB's limit.
pub const BATCH_ITEMS: usize = 25;
/// Bytes per `BatchWriteItem`, DynamoDB's limit.
const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Segments when the job names no `scanSegments`. Fixed, not derived from the table's size:
/// `skipSegments` of a savepoint only mean something for the same number of segments.
pub const DEFAULT_SEGMENTS: u32 = 16;
/// Segments read at once when the job names no `maxMapTasks`.
pub const DEFAULT_PARALLEL_SEGMENTS: u32 = 16;
/// Tries of the items a batch left unprocessed (throttled) before the request fails and the
/// engine retries it whole.
const UNPROCESSED_TRIES: u32 = 8;

/// A DynamoDB copy, ready to run.
pub struct OpenedCopy {
    /// The source's parallel scan.
    pub scan: SegmentScan,
    /// The target's writer.
    pub sink: BatchSink,
    /// The job's bounds.
    pub pacing: Pacing,
    /// The replication of the source's stream after the snapshot (`streamChanges`).
    pub replication: Option<Replication>,
}

/// Connects to both tables, checks the source exists, creates or checks the target, enables
/// the source's stream for a replication (recording where it starts in `complete`), and
/// returns the scan, the writer, the job's bounds and the replication. Nothing is written to
/// the target's items.
pub async fn open_copy(
    src: &DynamoSource,
    dst: &DynamoTarget,
    renames: &[Rename],
    complete: &mut savepoints::Progress,
) -> Result<OpenedCopy, SeamError> {
    let (source, target) = open_tables(src, dst, renames).await?;
    let segments = src.scan_segments.unwrap_or(DEFAULT_SEGMENTS);
    let read_units = rate(
        src.read_throughput
            .map(i64::from)
            .or(source.described.provisioned().map(|(r, _)| r)),
        src.throughput_read_percent,
    );
    let write_units = rate(
        dst.write_throughput
            .map(i64::from)
            .or(target.described.provisioned().map(|(_, w)| w)),
        dst.throughput_write_percent,
    );
    let replication = if dst.stream_changes {
        // Before the snapshot: every change from now on is in the stream.
        let arn = stream::enable(&source.client, &src.connection, &source.described)
            .await
            .map_err(|e| e.on("source"))?;
        let positions = stream::positions(&arn, complete.stream(&super::STREAM))?;
        complete.set_stream(&super::STREAM, positions);
        Some(Replication::new(
            super::streams_client(&src.connection).await,
            target.client.clone(),
            ReplicationSetup {
                stream: arn,
                table: dst.connection.table.clone(),
                key_names: source.described.key_names(),
                renames: renames
                    .iter()
                    .map(|r| (r.from.clone(), r.to.clone()))
                    .collect(),
                ttl_attribute: source.described.ttl_attribute.clone(),
                report_capacity: !dst.connection.remove_consumed_capacity,
                write_units,
            },
        ))
    } else {
        None
    };
    let scan = SegmentScan::new(
        source.client,
        &src.connection.table,
        segments,
        read_units,
        !src.connection.remove_consumed_capacity,
    );
    let parallel = src
        .max_map_tasks
        .unwrap_or(DEFAULT_PARALLEL_SEGMENTS)
        .min(segments);
    let sink = BatchSink::new(
        target.client,
        dst,
        renames,
        source.described.ttl_attribute.clone(),
    );
    tracing::info!(
        source = %super::describe(&src.connection),
        target = %super::describe(&dst.connection),
        segments,
        parallel,
        read_units_per_second = ?read_units,
        write_units_per_second = ?write_units,
        ttl_attribute = ?source.described.ttl_attribute,
        "DynamoDB copy planned"
    );
    let pacing = Pacing {
        units_finishing: 0,
        units_at_once: parallel as usize,
        requests_in_flight: (parallel as usize * 2).max(4),
        // A write unit is one item of up to 1 KB: both bounds hold the unit rate.
        rows_per_second: write_units,
        bytes_per_second: write_units.map(|w| u64::from(w) * 1024),
    };
    Ok(OpenedCopy {
        scan,
        sink,
        pacing,
        replication,
    })
}

/// A connected table and its description.
pub struct Opened {
    /// Client of its server.
    pub client: Client,
    /// Its description.
    pub described: Described,
}

/// Connects to both sides: the source must exist; the target is created from it when missing
/// or refused when its key differs (renamed key attributes included).
pub async fn open_tables(
    src: &DynamoSource,
    dst: &DynamoTarget,
    renames: &[Rename],
) -> Result<(Opened, Opened), SeamError> {
    let source_client = super::client(&src.connection).await;
    let target_client = super::client(&dst.connection).await;
    let source = table::source(&source_client, &src.connection)
        .await
        .map_err(|e| e.on("source"))?;
    key_not_renamed(&source, renames)?;
    let target = table::ensure_target(&target_client, &dst.connection, &source, dst.billing_mode)
        .await
        .map_err(|e| e.on("target"))?;
    Ok((
        Opened {
            client: source_client,
            described: source,
        },
        Opened {
            client: target_client,
            described: target,
        },
    ))
}

/// Refuses `renames` of a key attribute of the source: items are matched by their key.
pub fn key_not_renamed(source: &Described, renames: &[Rename]) -> Result<(), SeamError> {
    let key = source.key_names();
    if let Some(r) = renames.iter().find(|r| key.contains(&r.from)) {
        return Err(SeamError::Config(JobConfigError {
            message: format!(
                "renames: {:?} is a key attribute of the source table; key attributes cannot be renamed",
                r.from
            ),
            line: None,
        }));
    }
    Ok(())
}

/// Capacity units per second from a throughput and the share of it to use.
pub fn rate(units: Option<i64>, percent: Option<f32>) -> Option<u32> {
    let units = units.filter(|&u| u > 0)? as f64 * f64::from(percent.unwrap_or(1.0));
    Some((units.round() as u32).max(1))
}

/// Writes items with `BatchWriteItem`.
pub struct BatchSink {
    client: Client,
    table: String,
    renames: Vec<(String, String)>,
    ttl_attribute: Option<String>,
    report_capacity: bool,
    /// Items not copied because their TTL had passed.
    pub expired: Arc<AtomicU64>,
    /// Write capacity units consumed, ×10.
    pub consumed_tenths: Arc<AtomicU64>,
}

/// Items waiting for their batch.
#[derive(Default)]
pub struct Batch {
    items: Vec<Item>,
    bytes: usize,
}

/// One `BatchWriteItem` of puts.
pub struct PutBatch {
    items: Vec<Item>,
    bytes: usize,
}

impl Request for PutBatch {
    fn rows(&self) -> u64 {
        self.items.len() as u64
    }
    fn bytes(&self) -> u64 {
        self.bytes as u64
    }
    fn statements(&self) -> u64 {
        self.items.len() as u64
    }
    fn idempotent(&self) -> bool {
        // Puts of whole items: applying one twice leaves the same item.
        true
    }
}

impl BatchSink {
    /// A writer to the table of `dst`, renaming attributes by `renames` and leaving out items
    /// whose `ttl_attribute` (the source's) has passed.
    pub fn new(
        client: Client,
        dst: &DynamoTarget,
        renames: &[Rename],
        ttl_attribute: Option<String>,
    ) -> Self {
        Self {
            client,
            table: dst.connection.table.clone(),
            renames: renames
                .iter()
                .map(|r| (r.from.clone(), r.to.clone()))
                .collect(),
            ttl_attribute,
            report_capacity: !dst.connection.remove_consumed_capacity,
            expired: Arc::default(),
            consumed_tenths: Arc::default(),
        }
    }

    fn take(batch: &mut Batch) -> PutBatch {
        PutBatch {
            items: std::mem::take(&mut batch.items),
            bytes: std::mem::take(&mut batch.bytes),
        }
    }
}

impl Sink<Item> for BatchSink {
    type Request = PutBatch;
    type Error = DynamoError;
    type Batcher = Batch;

    fn push(
        &self,
        batch: &mut Batch,
        row: &Item,
        _read_at: Instant,
        out: &mut Vec<PutBatch>,
    ) -> Result<Pushed, Refused> {
        let now = chrono::Utc::now().timestamp();
        if expired(row, self.ttl_attribute.as_deref(), now) {
            self.expired.fetch_add(1, Ordering::Relaxed);
            return Ok(Pushed::Dropped);
        }
        let mut item = row.clone();
        rename(&mut item, &self.renames);
        let size = item_size(&item);
        if batch.items.len() == BATCH_ITEMS || batch.bytes + size > BATCH_BYTES {
            out.push(Self::take(batch));
        }
        batch.bytes += size;
        batch.items.push(item);
        Ok(Pushed::Written)
    }

    fn flush(&self, batch: &mut Batch, out: &mut Vec<PutBatch>) {
        if !batch.items.is_empty() {
            out.push(Self::take(batch));
        }
    }

    async fn send(&self, request: &PutBatch) -> Result<(), DynamoError> {
        let puts: Vec<WriteRequest> = request
            .items
            .iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .expect("item set"),
                    )
                    .build()
            })
            .collect();
        let units = write_batch(&self.client, &self.table, puts, self.report_capacity).await?;
        self.consumed_tenths
            .fetch_add((units * 10.0).round() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("itemsExpired", self.expired.load(Ordering::Relaxed)),
            (
                "writeCapacityUnits",
                self.consumed_tenths.load(Ordering::Relaxed) / 10,
            ),
        ]
    }
}

/// Sends one `BatchWriteItem` of at most [`BATCH_ITEMS`] writes to `table`, sending the items
/// the server leaves unprocessed (throttling) again with backoff. Returns the write capacity
/// units the server reports consumed (0 when `report_capacity` is off or it reports none).
pub async fn write_batch(
    client: &Client,
    table: &str,
    mut pending: Vec<WriteRequest>,
    report_capacity: bool,
) -> Result<f64, DynamoError> {
    let mut consumed = 0.0;
    let mut delay = Duration::from_millis(50);
    for attempt in 1..=UNPROCESSED_TRIES {
        let mut req = client
            .batch_write_item()
            .set_request_items(Some(HashMap::from([(table.to_string(), pending)])));
        if report_capacity {
            req = req.return_consumed_capacity(ReturnConsumedCapacity::Total);
        }
        let out = req
            .send()
            .await
            .map_err(|e| DynamoError::from_sdk(&format!("BatchWriteItem to {table:?}"), e))?;
        consumed += out
            .consumed_capacity()
            .iter()
            .filter_map(|c| c.capacity_units())
            .sum::<f64>();
        pending = out
            .unprocessed_items
            .and_then(|mut m| m.remove(table))
            .unwrap_or_default();
        if pending.is_empty() {
            return Ok(consumed);
        }
        if attempt < UNPROCESSED_TRIES {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }
    Err(DynamoError {
        message: format!(
            "BatchWriteItem to {table:?}: {} items still unprocessed (throttled) after {UNPROCESSED_TRIES} tries",
            pending.len()
        ),
        retry: Retry::Safe,
        code: Some("UnprocessedItems".into()),
        invalid: false,
        timed_out: false,
    })
}
