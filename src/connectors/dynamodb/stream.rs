//! Stream replication (`streamChanges: true`): the source's DynamoDB stream is enabled before
//! the snapshot is read, and after the snapshot every change since is applied to the target
//! in order, until the job is stopped.
//!
//! - INSERT and MODIFY put the record's new image (renamed as the copy renames), REMOVE
//!   deletes the key. An image whose TTL has passed deletes the key instead of resurrecting
//!   an item the source is about to delete.
//! - A shard is read from its start (`TRIM_HORIZON`), or after the last record a savepoint
//!   recorded as applied (`AFTER_SEQUENCE_NUMBER`). A page of records is applied whole before
//!   its position is recorded, so a restart replays at most the page in flight, and applying
//!   a page again leaves the target as it was (each key ends at its last image in the page).
//! - Per key, order holds: the records of a key are in order within a shard, a page is
//!   applied before the next one is read, and a child shard (the key space of a closed
//!   shard, continued) is read only once its parent is finished.
//! - Changes that can no longer be read are reported as a gap and fail the job: the stream
//!   was replaced since the savepoint, a shard with a recorded position left the stream, a
//!   record position was trimmed, or the replication starts more than the stream's retention
//!   after it began covering the table while an unread parent shard is gone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, PutRequest, StreamSpecification, StreamViewType, TableStatus,
    WriteRequest,
};
use aws_sdk_dynamodbstreams::types::{
    AttributeValue as StreamValue, OperationType, Record, Shard, ShardIteratorType,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::task::JoinSet;

use super::config::Connection;
use super::item::{Item, expired, item_size, rename};
use super::retry::DynamoError;
use super::table::Described;
use super::transfer::{BATCH_ITEMS, write_batch};
use crate::connectors::seam::Changes;
use crate::connectors::seam::FollowContext;
use crate::connectors::seam::SeamError;
use crate::connectors::seam::limits::Limits;
use crate::connectors::seam::retry::retry;
use crate::savepoints::StreamPositions;

/// How long DynamoDB keeps stream records.
const RETENTION: Duration = Duration::from_secs(24 * 3600);
/// How long a newly enabled stream may take to become usable.
const ENABLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Records per `GetRecords` (DynamoDB's maximum).
const RECORDS_PER_PAGE: i32 = 1000;
/// Pause after an empty page of an open shard. DynamoDB allows 5 reads per second per
/// shard; new records are typically visible within a second of their write.
const POLL: Duration = Duration::from_secs(1);
/// How often the stream's shards are listed again, to find new (child) shards.
const RELIST: Duration = Duration::from_secs(10);
/// Shards read at once.
const MAX_SHARDS_AT_ONCE: usize = 64;
/// `BatchWriteItem`s of one page in flight at once.
const BATCHES_AT_ONCE: usize = 8;

/// Makes sure the source table has a stream whose records carry new images, enabling one
/// (`NEW_IMAGE`) when it has none, and returns the stream's ARN.
pub async fn enable(
    client: &aws_sdk_dynamodb::Client,
    c: &Connection,
    described: &Described,
) -> Result<String, DynamoError> {
    let spec = described.table.stream_specification();
    if spec.is_some_and(|s| s.stream_enabled()) {
        let view = spec.and_then(|s| s.stream_view_type());
        if !matches!(
            view,
            Some(StreamViewType::NewImage | StreamViewType::NewAndOldImages)
        ) {
            return Err(DynamoError::fatal(format!(
                "target.streamChanges: the stream of source {} has view type {}; replication needs \
                 the new image of each change (NEW_IMAGE or NEW_AND_OLD_IMAGES): change the \
                 stream's view type, or disable the stream so that drover enables one",
                super::describe(c),
                view.map_or("none", |v| v.as_str())
            )));
        }
        if let Some(arn) = described.table.latest_stream_arn() {
            tracing::info!(table = %c.table, stream = arn, "the source's stream is already enabled; replication will follow it");
            return Ok(arn.to_string());
        }
    }
    client
        .update_table()
        .table_name(&c.table)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewImage)
                .build()
                .expect("stream_enabled set"),
        )
        .send()
        .await
        .map_err(|e| {
            DynamoError::from_sdk(
                &format!("enabling the stream of source {}", super::describe(c)),
                e,
            )
        })?;
    let started = Instant::now();
    loop {
        let out = client
            .describe_table()
            .table_name(&c.table)
            .send()
            .await
            .map_err(|e| DynamoError::from_sdk("describing the source", e))?;
        if let Some(table) = &out.table
            && let (Some(arn), Some(TableStatus::Active)) =
                (table.latest_stream_arn(), table.table_status())
        {
            tracing::info!(table = %c.table, stream = arn, view = "NEW_IMAGE", "enabled the source's stream before the snapshot");
            return Ok(arn.to_string());
        }
        if started.elapsed() > ENABLE_TIMEOUT {
            return Err(DynamoError::fatal(format!(
                "the stream of source {} was not active {} s after it was enabled",
                super::describe(c),
                ENABLE_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The positions a replication of `stream` continues from: those of the savepoint it resumes
/// (which must be of the same stream: another one means the changes between the two were
/// never recorded), else a new start, now.
pub fn positions(
    stream: &str,
    saved: Option<&StreamPositions>,
) -> Result<StreamPositions, DynamoError> {
    match saved {
        Some(p) if p.stream == stream => Ok(p.clone()),
        Some(p) => Err(DynamoError::fatal(format!(
            "gap in the stream replication: the savepoint follows stream {} but the source's \
             stream is now {stream} (the stream was disabled and enabled again); the changes in \
             between are lost. Start the migration again without the savepoints (a new \
             savepoints.path, or autoResume: false) to copy a new snapshot",
            p.stream
        ))),
        None => Ok(StreamPositions::start(
            stream,
            chrono::Utc::now().timestamp_millis().max(0) as u64,
        )),
    }
}

/// Applies the source's stream to the target table.
pub struct Replication {
    streams: aws_sdk_dynamodbstreams::Client,
    target: aws_sdk_dynamodb::Client,
    stream: String,
    table: String,
    key_names: Vec<String>,
    renames: Vec<(String, String)>,
    ttl_attribute: Option<String>,
    report_capacity: bool,
    /// The target's write capacity share, shared by every shard.
    limits: Limits,
    counters: StreamCounters,
}

/// What the replication has done, for job status and metrics.
#[derive(Debug, Default)]
struct StreamCounters {
    records: AtomicU64,
    puts: AtomicU64,
    deletes: AtomicU64,
    finished: AtomicU64,
    active: AtomicU64,
    consumed_tenths: AtomicU64,
    /// Age of the last applied record (ms) by shard; 0 for a shard read to its present end.
    lag_ms: Mutex<BTreeMap<String, u64>>,
}

/// How a replication is set up.
pub struct ReplicationSetup {
    /// The stream to follow.
    pub stream: String,
    /// The target table.
    pub table: String,
    /// The source table's key attributes.
    pub key_names: Vec<String>,
    /// Attribute renames, source name to target name.
    pub renames: Vec<(String, String)>,
    /// The source's TTL attribute.
    pub ttl_attribute: Option<String>,
    /// Ask the target for the capacity it consumed.
    pub report_capacity: bool,
    /// Write capacity units per second, at most (the copy's bound).
    pub write_units: Option<u32>,
}

impl Replication {
    /// A replication of `setup.stream` read with `streams` into `target`.
    pub fn new(
        streams: aws_sdk_dynamodbstreams::Client,
        target: aws_sdk_dynamodb::Client,
        setup: ReplicationSetup,
    ) -> Self {
        Self {
            streams,
            target,
            stream: setup.stream,
            table: setup.table,
            key_names: setup.key_names,
            renames: setup.renames,
            ttl_attribute: setup.ttl_attribute,
            report_capacity: setup.report_capacity,
            // A write unit is one item of up to 1 KB, as for the copy.
            limits: Limits::new(
                setup.write_units,
                setup.write_units.map(|w| u64::from(w) * 1024),
            ),
            counters: StreamCounters::default(),
        }
    }

    fn gap(&self, why: String) -> SeamError {
        gap(&self.stream, why)
    }

    /// Every shard of the stream (`DescribeStream` pages through them).
    async fn shards(&self) -> Result<Vec<Shard>, DynamoError> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .streams
                .describe_stream()
                .stream_arn(&self.stream)
                .set_exclusive_start_shard_id(start.clone())
                .send()
                .await
                .map_err(|e| DynamoError::from_sdk("DescribeStream of the source's stream", e))?;
            let Some(d) = out.stream_description else {
                break;
            };
            shards.extend(d.shards.unwrap_or_default());
            match d.last_evaluated_shard_id {
                Some(next) if Some(&next) != start.as_ref() => start = Some(next),
                _ => break,
            }
        }
        Ok(shards)
    }

    async fn iterator(&self, shard: &str, after: Option<&str>) -> Result<String, DynamoError> {
        let req = self
            .streams
            .get_shard_iterator()
            .stream_arn(&self.stream)
            .shard_id(shard);
        let req = match after {
            Some(seq) => req
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(seq),
            None => req.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let out = req
            .send()
            .await
            .map_err(|e| DynamoError::from_sdk(&format!("GetShardIterator of shard {shard}"), e))?;
        out.shard_iterator.ok_or_else(|| {
            DynamoError::fatal(format!("GetShardIterator of shard {shard}: no iterator"))
        })
    }

    /// Follows one shard from `after` (or its start) until it is closed and read to its end
    /// (`Ok`), the job is stopped, or it fails.
    async fn follow_shard(
        &self,
        shard: &str,
        mut after: Option<String>,
        ctx: &FollowContext,
    ) -> Result<(), SeamError> {
        let retries = &ctx.retries;
        let what = format!("reading shard {shard} of the source's stream");
        let mut iterator = Some(
            retry(retries, &ctx.cancel, &what, true, || {
                self.iterator(shard, after.as_deref())
            })
            .await
            .map_err(|e| self.read_error(ctx, shard, e))?,
        );
        while let Some(it) = iterator.take() {
            if ctx.cancel.is_cancelled() {
                return Err(SeamError::Stopped);
            }
            let page = retry(retries, &ctx.cancel, &what, true, || async {
                self.streams
                    .get_records()
                    .shard_iterator(&it)
                    .limit(RECORDS_PER_PAGE)
                    .send()
                    .await
                    .map_err(|e| DynamoError::from_sdk(&format!("GetRecords of shard {shard}"), e))
            })
            .await;
            let page = match page {
                Ok(p) => p,
                Err(e) if e.code.as_deref() == Some("ExpiredIteratorException") => {
                    // Iterators live 15 minutes; take a new one where this one stood.
                    iterator = Some(
                        retry(retries, &ctx.cancel, &what, true, || {
                            self.iterator(shard, after.as_deref())
                        })
                        .await
                        .map_err(|e| self.read_error(ctx, shard, e))?,
                    );
                    continue;
                }
                Err(e) => return Err(self.read_error(ctx, shard, e)),
            };
            let records = page.records.unwrap_or_default();
            if let Some(last) = records.last() {
                self.apply(&records, ctx).await?;
                let seq = last
                    .dynamodb
                    .as_ref()
                    .and_then(|d| d.sequence_number.clone())
                    .ok_or_else(|| {
                        SeamError::Failed(format!(
                            "a record of shard {shard} has no sequence number"
                        ))
                    })?;
                update_positions(ctx, |p| p.applied(shard, &seq));
                let age = last
                    .dynamodb
                    .as_ref()
                    .and_then(|d| d.approximate_creation_date_time)
                    .map_or(0, |t| {
                        (chrono::Utc::now().timestamp_millis() - t.to_millis().unwrap_or(0)).max(0)
                            as u64
                    });
                self.set_lag(shard, age);
                after = Some(seq);
            } else {
                self.set_lag(shard, 0);
            }
            iterator = page.next_shard_iterator;
            if iterator.is_some() && records.is_empty() {
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = ctx.cancel.cancelled() => return Err(SeamError::Stopped),
                }
            }
        }
        // No next iterator: the shard is closed and every record of it was applied.
        self.counters
            .lag_ms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(shard);
        Ok(())
    }

    fn read_error(&self, ctx: &FollowContext, shard: &str, e: DynamoError) -> SeamError {
        if ctx.cancel.is_cancelled() {
            return SeamError::Stopped;
        }
        if e.code.as_deref() == Some("TrimmedDataAccessException") {
            return self.gap(format!(
                "the records of shard {shard} after the last applied one were trimmed (older \
                 than the stream's 24 h retention) before they could be applied"
            ));
        }
        SeamError::Failed(format!("source: {e}"))
    }

    fn set_lag(&self, shard: &str, ms: u64) {
        self.counters
            .lag_ms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(shard.to_string(), ms);
    }

    /// Applies one page of records: each key ends at its last record of the page.
    async fn apply(&self, records: &[Record], ctx: &FollowContext) -> Result<(), SeamError> {
        let now = chrono::Utc::now().timestamp();
        let mut last: HashMap<String, WriteRequest> = HashMap::new();
        let (mut puts, mut deletes) = (0u64, 0u64);
        for record in records {
            let Some(change) = &record.dynamodb else {
                continue;
            };
            let keys = convert_item(change.keys.as_ref().unwrap_or(&HashMap::new()), record)?;
            let id = self.key_id(&keys);
            let image = match record.event_name {
                Some(OperationType::Remove) => None,
                _ => match &change.new_image {
                    Some(image) => {
                        let item = convert_item(image, record)?;
                        (!expired(&item, self.ttl_attribute.as_deref(), now)).then_some(item)
                    }
                    None => {
                        return Err(SeamError::Failed(format!(
                            "a {} record of the source's stream has no new image (the stream's \
                             view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES)",
                            record.event_name.as_ref().map_or("change", |e| e.as_str())
                        )));
                    }
                },
            };
            let request = match image {
                Some(mut item) => {
                    rename(&mut item, &self.renames);
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(item))
                                .build()
                                .expect("item set"),
                        )
                        .build()
                }
                None => WriteRequest::builder()
                    .delete_request(
                        DeleteRequest::builder()
                            .set_key(Some(keys))
                            .build()
                            .expect("key set"),
                    )
                    .build(),
            };
            last.insert(id, request);
        }
        let requests: Vec<WriteRequest> = last.into_values().collect();
        for r in &requests {
            if r.put_request.is_some() {
                puts += 1;
            } else {
                deletes += 1;
            }
        }
        // The chunks hold the final states of distinct keys: they may go in any order, at
        // once, and sending one again is harmless.
        let chunks: Vec<Vec<WriteRequest>> =
            requests.chunks(BATCH_ITEMS).map(<[_]>::to_vec).collect();
        let sent = futures::stream::iter(chunks)
            .map(|chunk: Vec<WriteRequest>| async move {
                let bytes: u64 = chunk
                    .iter()
                    .filter_map(|r| r.put_request.as_ref())
                    .map(|p| item_size(&p.item) as u64)
                    .sum();
                if !self
                    .limits
                    .wait(chunk.len() as u64, bytes, &ctx.cancel)
                    .await
                {
                    return Err(SeamError::Stopped);
                }
                let units = retry(
                    &ctx.retries,
                    &ctx.cancel,
                    "applying the stream to the target",
                    true,
                    || {
                        write_batch(
                            &self.target,
                            &self.table,
                            chunk.clone(),
                            self.report_capacity,
                        )
                    },
                )
                .await
                .map_err(|e| {
                    if ctx.cancel.is_cancelled() {
                        SeamError::Stopped
                    } else {
                        SeamError::Failed(format!("target: {e}"))
                    }
                })?;
                self.counters
                    .consumed_tenths
                    .fetch_add((units * 10.0).round() as u64, Ordering::Relaxed);
                Ok(())
            })
            .buffer_unordered(BATCHES_AT_ONCE)
            .collect::<Vec<Result<(), SeamError>>>()
            .await;
        // Every chunk ended (none left half-sent behind an error) before the page counts.
        sent.into_iter().collect::<Result<(), SeamError>>()?;
        self.counters
            .records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        self.counters.puts.fetch_add(puts, Ordering::Relaxed);
        self.counters.deletes.fetch_add(deletes, Ordering::Relaxed);
        Ok(())
    }

    /// The key of an item as one string, to find a page's records of the same key.
    fn key_id(&self, keys: &Item) -> String {
        self.key_names
            .iter()
            .map(|k| format!("{:?}", keys.get(k)))
            .collect::<Vec<_>>()
            .join("\u{0}")
    }

    /// Follows every shard until the job is stopped or a shard fails.
    async fn run(self: Arc<Self>, ctx: FollowContext) -> Result<(), SeamError> {
        let mut running: JoinSet<(String, Result<(), SeamError>)> = JoinSet::new();
        let mut active: HashSet<String> = HashSet::new();
        let result = loop {
            if ctx.cancel.is_cancelled() {
                break Err(SeamError::Stopped);
            }
            let shards = match retry(
                &ctx.retries,
                &ctx.cancel,
                "listing the shards of the source's stream",
                true,
                || self.shards(),
            )
            .await
            {
                Ok(s) => s,
                Err(_) if ctx.cancel.is_cancelled() => break Err(SeamError::Stopped),
                Err(e) => break Err(SeamError::Failed(format!("source: {e}"))),
            };
            let positions = ctx
                .done
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .stream(&super::STREAM)
                .cloned()
                .expect("positions set when the migration was prepared");
            let now_ms = chrono::Utc::now().timestamp_millis();
            match startable(&self.stream, &shards, &positions, &active, now_ms) {
                Ok(ready) => {
                    for (shard, after) in ready {
                        if running.len() >= MAX_SHARDS_AT_ONCE {
                            break;
                        }
                        active.insert(shard.clone());
                        let me = self.clone();
                        let ctx = ctx.clone();
                        running.spawn(async move {
                            let r = me.follow_shard(&shard, after, &ctx).await;
                            (shard, r)
                        });
                    }
                }
                Err(gap) => break Err(gap),
            }
            self.counters
                .active
                .store(active.len() as u64, Ordering::Relaxed);
            let relist = tokio::time::sleep(RELIST);
            tokio::pin!(relist);
            let ended = tokio::select! {
                Some(joined) = running.join_next() => Some(joined),
                _ = &mut relist => None,
                _ = ctx.cancel.cancelled() => None,
            };
            if let Some(joined) = ended {
                let (shard, r) = joined
                    .map_err(|e| SeamError::Failed(format!("a stream shard task failed: {e}")))?;
                active.remove(&shard);
                match r {
                    Ok(()) => {
                        update_positions(&ctx, |p| p.finished(&shard));
                        self.counters.finished.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(shard = %shard, "stream shard closed and applied to its end");
                    }
                    Err(e) => break Err(e),
                }
            }
        };
        // Stop the other shards after their page in flight, so positions stay exact.
        ctx.cancel.cancel();
        while let Some(joined) = running.join_next().await {
            if let Ok((shard, Ok(()))) = joined {
                update_positions(&ctx, |p| p.finished(&shard));
            }
        }
        self.counters.active.store(0, Ordering::Relaxed);
        result
    }
}

/// The shards that can be read now, with the position to read each after: those not
/// finished nor being read, whose parent is finished (or gone before the replication
/// began covering the table). Fails on a gap.
fn startable(
    stream: &str,
    shards: &[Shard],
    positions: &StreamPositions,
    active: &HashSet<String>,
    now_ms: i64,
) -> Result<Vec<(String, Option<String>)>, SeamError> {
    let listed: HashSet<&str> = shards.iter().filter_map(|s| s.shard_id()).collect();
    if let Some((shard, seq)) = positions
        .shards
        .iter()
        .find(|(s, _)| !listed.contains(s.as_str()))
    {
        return Err(gap(
            stream,
            format!(
                "shard {shard}, applied up to record {seq}, is no longer in the stream (its \
             records outlived the 24 h retention)"
            ),
        ));
    }
    let since_ms = i64::try_from(positions.since).unwrap_or(i64::MAX);
    let covering_for = Duration::from_millis((now_ms - since_ms).max(0) as u64);
    let mut ready = Vec::new();
    for s in shards {
        let Some(id) = s.shard_id() else { continue };
        if positions.finished_shards.contains(id) || active.contains(id) {
            continue;
        }
        match s.parent_shard_id() {
            Some(parent) if positions.finished_shards.contains(parent) => {}
            Some(parent) if listed.contains(parent) => continue,
            Some(parent) if covering_for > RETENTION && !positions.shards.contains_key(id) => {
                return Err(gap(
                    stream,
                    format!(
                        "shard {id} continues shard {parent}, which was never read and is no \
                     longer in the stream, and the replication began covering the table \
                     {} h ago, more than the 24 h retention",
                        covering_for.as_secs() / 3600
                    ),
                ));
            }
            _ => {}
        }
        ready.push((id.to_string(), positions.shards.get(id).cloned()));
    }
    Ok(ready)
}

/// Moves the stream positions of the run's completed work.
fn update_positions(ctx: &FollowContext, update: impl FnOnce(&mut StreamPositions)) {
    if let Some(p) = ctx
        .done
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .stream_mut(&super::STREAM)
    {
        update(p);
    }
}

/// A gap: changes of the source that can no longer be applied.
fn gap(stream: &str, why: String) -> SeamError {
    SeamError::Failed(format!(
        "gap in the stream replication of {stream}: {why}; changes of the source may be missing \
         from the target. Copy a new snapshot (start the migration again with new \
         savepoints) to be sure of the target"
    ))
}

impl Changes for Replication {
    fn follow(self: Arc<Self>, ctx: FollowContext) -> BoxFuture<'static, Result<(), SeamError>> {
        Box::pin(self.run(ctx))
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let lag = c
            .lag_ms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .copied()
            .max()
            .unwrap_or(0);
        vec![
            ("streamRecordsRead", g(&c.records)),
            ("streamItemsPut", g(&c.puts)),
            ("streamItemsDeleted", g(&c.deletes)),
            ("streamShardsActive", g(&c.active)),
            ("streamShardsFinished", g(&c.finished)),
            ("streamLagSeconds", lag / 1000),
            ("streamWriteCapacityUnits", g(&c.consumed_tenths) / 10),
        ]
    }
}

/// A value of a stream record as the DynamoDB client takes it (the two SDKs have a type
/// each; the wire form is the same, numbers stay strings). `None` for a type newer than this
/// build, which cannot be copied exactly.
pub fn convert(v: &StreamValue) -> Option<AttributeValue> {
    Some(match v {
        StreamValue::S(s) => AttributeValue::S(s.clone()),
        StreamValue::N(n) => AttributeValue::N(n.clone()),
        StreamValue::B(b) => AttributeValue::B(b.clone()),
        StreamValue::Bool(b) => AttributeValue::Bool(*b),
        StreamValue::Null(n) => AttributeValue::Null(*n),
        StreamValue::Ss(s) => AttributeValue::Ss(s.clone()),
        StreamValue::Ns(n) => AttributeValue::Ns(n.clone()),
        StreamValue::Bs(b) => AttributeValue::Bs(b.clone()),
        StreamValue::L(l) => AttributeValue::L(l.iter().map(convert).collect::<Option<_>>()?),
        StreamValue::M(m) => AttributeValue::M(
            m.iter()
                .map(|(k, v)| Some((k.clone(), convert(v)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// The attributes of a record's keys or image, converted.
fn convert_item(map: &HashMap<String, StreamValue>, record: &Record) -> Result<Item, SeamError> {
    map.iter()
        .map(|(k, v)| {
            convert(v).map(|v| (k.clone(), v)).ok_or_else(|| {
                SeamError::Failed(format!(
                    "stream record {}: attribute {k:?} has a type this version of drover does                      not know; it cannot be copied exactly",
                    record.event_id.as_deref().unwrap_or("?")
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> Shard {
        Shard::builder()
            .shard_id(id)
            .set_parent_shard_id(parent.map(str::to_string))
            .build()
    }

    const HOUR_MS: i64 = 3_600_000;

    fn ready(
        shards: &[Shard],
        p: &StreamPositions,
        active: &[&str],
        now_ms: i64,
    ) -> Result<Vec<(String, Option<String>)>, String> {
        let active = active.iter().map(|s| s.to_string()).collect();
        startable("arn:s", shards, p, &active, now_ms).map_err(|e| e.to_string())
    }

    #[test]
    fn children_wait_for_their_parent_and_positions_are_kept() {
        // a is closed with children b and c; d is a new root.
        let shards = [
            shard("a", None),
            shard("b", Some("a")),
            shard("c", Some("a")),
            shard("d", None),
        ];
        let mut p = StreamPositions::start("arn:s", 0);
        p.applied("a", "10");
        let r = ready(&shards, &p, &[], HOUR_MS).unwrap();
        assert_eq!(r, vec![("a".into(), Some("10".into())), ("d".into(), None)]);
        // While a is being read nothing new starts but d.
        assert_eq!(
            ready(&shards, &p, &["a"], HOUR_MS).unwrap(),
            vec![("d".into(), None)]
        );
        p.finished("a");
        let r = ready(&shards, &p, &["d"], HOUR_MS).unwrap();
        assert_eq!(r, vec![("b".into(), None), ("c".into(), None)]);
    }

    #[test]
    fn lost_records_are_a_gap() {
        // A shard with a recorded position that left the stream.
        let mut p = StreamPositions::start("arn:s", 0);
        p.applied("gone", "5");
        let e = ready(&[shard("x", None)], &p, &[], HOUR_MS).unwrap_err();
        assert!(e.contains("gap") && e.contains("gone"), "{e}");

        // A child of a shard never read and trimmed: harmless within the retention (its
        // records predate the replication), a gap after it.
        let p = StreamPositions::start("arn:s", 0);
        let orphan = [shard("child", Some("trimmed"))];
        assert_eq!(
            ready(&orphan, &p, &[], 2 * HOUR_MS).unwrap(),
            vec![("child".into(), None)]
        );
        let e = ready(&orphan, &p, &[], 25 * HOUR_MS).unwrap_err();
        assert!(e.contains("gap") && e.contains("trimmed"), "{e}");
    }

    #[test]
    fn a_savepoint_of_another_stream_is_a_gap() {
        let saved = StreamPositions::start("arn:old", 1);
        let e = positions("arn:new", Some(&saved)).unwrap_err();
        assert!(
            e.message.contains("gap") && e.message.contains("arn:old"),
            "{e}"
        );
        assert_eq!(positions("arn:old", Some(&saved)).unwrap(), saved);
        assert_eq!(positions("arn:new", None).unwrap().stream, "arn:new");
    }

    #[test]
    fn stream_values_convert_exactly() {
        use aws_sdk_dynamodb::primitives::Blob;
        let v = StreamValue::M(HashMap::from([
            (
                "n".to_string(),
                StreamValue::N("-1.2345678901234567890123456789012345678E-120".into()),
            ),
            (
                "l".to_string(),
                StreamValue::L(vec![
                    StreamValue::Bs(vec![Blob::new(vec![0u8, 255])]),
                    StreamValue::Null(true),
                    StreamValue::Ss(vec!["".into(), "é".into()]),
                ]),
            ),
        ]));
        let AttributeValue::M(m) = convert(&v).unwrap() else {
            panic!("a map")
        };
        assert_eq!(
            m["n"],
            AttributeValue::N("-1.2345678901234567890123456789012345678E-120".into())
        );
        assert_eq!(
            m["l"],
            AttributeValue::L(vec![
                AttributeValue::Bs(vec![Blob::new(vec![0u8, 255])]),
                AttributeValue::Null(true),
                AttributeValue::Ss(vec!["".into(), "é".into()]),
            ])
        );
    }
}
