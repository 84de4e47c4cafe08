//! The DynamoDB connector's side of validation: items keyed by their key attributes, fetched
//! by key with `BatchGetItem`, compared attribute by attribute (`value`), and the missing ones
//! written with the copy's `BatchWriteItem` writer (`copyMissingRows`).
//!
//! The validator's lookup mode (`validate::lookup`) drives it: the source's scan segments are
//! read page by page and each page's keys fetched from the target, then the target's segments
//! are read and their keys fetched from the source. Both scans use the job's `scanSegments`
//! and `maxMapTasks`, as the copy does.
//!
//! Of the `validation` keys, `failuresToFetch`, `floatingPointTolerance` (applied to numbers,
//! as ScyllaDB Migrator applies it) and `copyMissingRows` apply. `compareTimestamps`,
//! `ttlToleranceMillis`, `writetimeToleranceMillis` and `timestampMsTolerance` are about CQL
//! cells (writetimes, TTLs and the `timestamp` type, none of which DynamoDB items have):
//! ScyllaDB Migrator ignores them for DynamoDB and its own DynamoDB job files set them, so
//! they are accepted and ignored, with a warning naming each one set.

pub mod value;

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnConsumedCapacity};

use super::config::{DynamoSource, DynamoTarget};
use super::item::{Item, expired, item_size};
use super::retry::DynamoError;
use super::scan::{ReadBudget, SegmentScan};
use super::table;
use super::transfer::{
    BatchSink, DEFAULT_PARALLEL_SEGMENTS, DEFAULT_SEGMENTS, key_not_renamed, rate,
};
use crate::connectors::seam::SeamError;
use crate::connectors::seam::compare::{ColumnDifference, ColumnDifferenceKind};
use crate::connectors::seam::compare::{Lookup, LookupSides, Side};
use crate::connectors::seam::compare::{Repair, SinkRepair};
use crate::connectors::seam::{Pacing, Retry};
use crate::jobfile::{Rename, ValidationConfig};
use value::{Number, Tolerance};

/// Keys per `BatchGetItem`, DynamoDB's limit.
pub const BATCH_KEYS: usize = 100;
/// Tries of the keys a `BatchGetItem` left unprocessed (throttled, or beyond its 16 MB) before
/// the request fails and the validator retries it whole, as for the copy's writes.
const UNPROCESSED_TRIES: u32 = 8;
/// What an attribute absent from one side is shown as in a report.
const ABSENT: &str = "(absent)";

/// Both tables of a DynamoDB validation.
pub(crate) type DynamoSides = LookupSides<DynamoLookup, SegmentScan>;

/// The key of an item: its key attributes' values, hash key first. Equal for two spellings of
/// a number key (`1.0` and `1`), which name one item.
#[derive(Debug, Clone)]
pub struct ItemKey {
    /// The values as read, sent as they are in lookups.
    values: Vec<AttributeValue>,
    /// The values compared.
    canonical: Vec<KeyPart>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyPart {
    S(String),
    N(Number),
    B(Vec<u8>),
    /// Not a valid key value (a number that does not parse, a missing attribute): compared as
    /// written.
    Other(String),
}

impl ItemKey {
    fn of(item: &Item, names: &[String]) -> Self {
        let values: Vec<AttributeValue> = names
            .iter()
            .map(|n| item.get(n).cloned().unwrap_or(AttributeValue::Null(true)))
            .collect();
        let canonical = values
            .iter()
            .map(|v| match v {
                AttributeValue::S(s) => KeyPart::S(s.clone()),
                AttributeValue::N(n) => {
                    Number::parse(n).map_or_else(|| KeyPart::Other(n.clone()), KeyPart::N)
                }
                AttributeValue::B(b) => KeyPart::B(b.as_ref().to_vec()),
                other => KeyPart::Other(format!("{other:?}")),
            })
            .collect();
        Self { values, canonical }
    }
}

impl PartialEq for ItemKey {
    fn eq(&self, other: &Self) -> bool {
        self.canonical == other.canonical
    }
}

impl Eq for ItemKey {}

impl Hash for ItemKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical.hash(state);
    }
}

/// One table of a validation.
struct Table {
    client: Client,
    name: String,
    /// Its TTL attribute, when TTL is enabled: items whose TTL passed are not compared.
    ttl_attribute: Option<String>,
    /// Shared with the table's scan.
    budget: ReadBudget,
    report_capacity: bool,
}

/// Keys, fetches and compares the items of a DynamoDB validation.
pub struct DynamoLookup {
    source: Table,
    target: Table,
    /// Key attribute names, hash key first (never renamed).
    key_names: Vec<String>,
    /// Source attribute name to target attribute name.
    renames: HashMap<String, String>,
    tolerance: Tolerance,
}

impl DynamoLookup {
    fn table(&self, side: Side) -> &Table {
        match side {
            Side::Source => &self.source,
            Side::Target => &self.target,
        }
    }

    /// `BatchGetItem` of `keys` (at most [`BATCH_KEYS`]), strongly consistent, the keys the
    /// server leaves unprocessed asked again with backoff.
    async fn batch_get(
        &self,
        side: Side,
        keys: &[ItemKey],
        whole: bool,
    ) -> Result<Vec<Item>, DynamoError> {
        let table = self.table(side);
        let mut pending: Vec<Item> = keys
            .iter()
            .map(|k| {
                self.key_names
                    .iter()
                    .cloned()
                    .zip(k.values.iter().cloned())
                    .collect()
            })
            .collect();
        let mut found = Vec::with_capacity(keys.len());
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=UNPROCESSED_TRIES {
            let mut wanted = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true);
            if !whole {
                // Only whether the item exists: its key (the capacity consumed is the same).
                let projection: Vec<String> = (0..self.key_names.len())
                    .map(|i| format!("#k{i}"))
                    .collect();
                wanted = wanted.projection_expression(projection.join(", "));
                for (i, n) in self.key_names.iter().enumerate() {
                    wanted = wanted.expression_attribute_names(format!("#k{i}"), n);
                }
            }
            let wanted = wanted
                .build()
                .map_err(|e| DynamoError::fatal(format!("BatchGetItem request: {e}")))?;
            let mut req = table
                .client
                .batch_get_item()
                .request_items(&table.name, wanted);
            if table.report_capacity {
                req = req.return_consumed_capacity(ReturnConsumedCapacity::Total);
            }
            let out = req.send().await.map_err(|e| {
                DynamoError::from_sdk(&format!("BatchGetItem from {:?}", table.name), e)
            })?;
            let reported: Option<f64> = out
                .consumed_capacity()
                .iter()
                .filter_map(|c| c.capacity_units())
                .reduce(|a, b| a + b);
            let items = out
                .responses
                .and_then(|mut r| r.remove(&table.name))
                .unwrap_or_default();
            let bytes = items.iter().map(item_size).sum();
            table.budget.charge(reported, bytes, true).await;
            found.extend(items);
            pending = out
                .unprocessed_keys
                .and_then(|mut m| m.remove(&table.name))
                .map(|k| k.keys)
                .unwrap_or_default();
            if pending.is_empty() {
                return Ok(found);
            }
            if attempt < UNPROCESSED_TRIES {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
        Err(DynamoError {
            message: format!(
                "BatchGetItem from {:?}: {} keys still unprocessed (throttled) after {UNPROCESSED_TRIES} tries",
                table.name,
                pending.len()
            ),
            retry: Retry::Safe,
            code: Some("UnprocessedKeys".into()),
            invalid: false,
            timed_out: false,
        })
    }
}

impl Lookup for DynamoLookup {
    type Row = Item;
    type Key = ItemKey;
    type Error = DynamoError;

    fn key(&self, _side: Side, row: &Item) -> ItemKey {
        // Key attributes cannot be renamed: the same names on both sides.
        ItemKey::of(row, &self.key_names)
    }

    fn batch(&self) -> usize {
        BATCH_KEYS
    }

    async fn fetch(
        &self,
        side: Side,
        keys: &[ItemKey],
        whole: bool,
    ) -> Result<Vec<Item>, DynamoError> {
        self.batch_get(side, keys, whole).await
    }

    fn left_out(&self, side: Side, row: &Item) -> bool {
        let now = chrono::Utc::now().timestamp();
        expired(row, self.table(side).ttl_attribute.as_deref(), now)
    }

    fn differences(&self, source: &Item, target: &Item) -> Vec<ColumnDifference> {
        differences(source, target, &self.renames, &self.tolerance)
    }

    fn render_key(&self, key: &ItemKey) -> String {
        render_key(&self.key_names, key)
    }

    fn size(&self, row: &Item) -> usize {
        item_size(row)
    }
}

/// The attributes of a source item and of the target item with its key that differ, in
/// name order: each source attribute against its target name (`renames`), then the target's
/// attributes the source does not have.
fn differences(
    source: &Item,
    target: &Item,
    renames: &HashMap<String, String>,
    tolerance: &Tolerance,
) -> Vec<ColumnDifference> {
    let mut names: Vec<&String> = source.keys().collect();
    names.sort();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for name in names {
        let to = renames.get(name).unwrap_or(name);
        seen.insert(to.as_str());
        let sv = &source[name];
        let diff = |kind, target: String| ColumnDifference {
            column: name.clone(),
            target_column: (to != name).then(|| to.clone()),
            difference: kind,
            source: value::render(sv),
            target,
        };
        match target.get(to) {
            None => out.push(diff(ColumnDifferenceKind::MissingOnTarget, ABSENT.into())),
            Some(tv) if !value::equal(sv, tv, tolerance) => {
                out.push(diff(ColumnDifferenceKind::Value, value::render(tv)));
            }
            Some(_) => {}
        }
    }
    let mut extra: Vec<(&String, &AttributeValue)> = target
        .iter()
        .filter(|(n, _)| !seen.contains(n.as_str()))
        .collect();
    extra.sort_by_key(|(n, _)| *n);
    out.extend(extra.into_iter().map(|(n, tv)| ColumnDifference {
        column: n.clone(),
        target_column: None,
        difference: ColumnDifferenceKind::ExtraOnTarget,
        source: ABSENT.into(),
        target: value::render(tv),
    }));
    out
}

/// A key as a PartiQL condition: `"id" = 'abc' AND "sort" = 5`.
fn render_key(names: &[String], key: &ItemKey) -> String {
    names
        .iter()
        .zip(&key.values)
        .map(|(n, v)| format!("{} = {}", value::name(n), value::render(v)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Warns of the `validation` keys set that do not apply to DynamoDB (see the module's doc).
fn warn_ignored(v: &ValidationConfig) {
    let default = ValidationConfig::default();
    let set = [
        ("compareTimestamps", v.compare_timestamps.is_some()),
        (
            "ttlToleranceMillis",
            v.ttl_tolerance_millis != default.ttl_tolerance_millis,
        ),
        (
            "writetimeToleranceMillis",
            v.writetime_tolerance_millis != default.writetime_tolerance_millis,
        ),
        (
            "timestampMsTolerance",
            v.timestamp_ms_tolerance != default.timestamp_ms_tolerance,
        ),
    ];
    for (key, _) in set.into_iter().filter(|(_, set)| *set) {
        tracing::warn!(
            key = %format!("validation.{key}"),
            "ignored for a DynamoDB validation: DynamoDB items have no writetimes, per-attribute TTLs or timestamp type (ScyllaDB Migrator ignores it too)"
        );
    }
    if v.copy_differing_rows {
        tracing::warn!(
            key = "validation.copyDifferingRows",
            "ignored for a DynamoDB validation: a differing item may have been changed in the target on purpose, and a put would replace it whole; only missing items are written (copyMissingRows)"
        );
    }
    if v.repair_writetime_strategy != crate::jobfile::RepairWritetimeStrategy::Source {
        tracing::warn!(
            key = "validation.repairWritetimeStrategy",
            "ignored for a DynamoDB validation: DynamoDB items have no writetimes (ScyllaDB Migrator ignores it too)"
        );
    }
}

/// Connects to both tables (the target must exist with the source's key: nothing is created),
/// and prepares both scans, the lookups and, with `copyMissingRows`, the writer of missing
/// items. Nothing is written.
pub(crate) async fn prepare(
    src: &DynamoSource,
    dst: &DynamoTarget,
    renames: &[Rename],
    v: &ValidationConfig,
) -> Result<DynamoSides, SeamError> {
    warn_ignored(v);
    let source_client = super::client(&src.connection).await;
    let target_client = super::client(&dst.connection).await;
    let source = table::source(&source_client, &src.connection)
        .await
        .map_err(|e| e.on("source"))?;
    key_not_renamed(&source, renames)?;
    let target = table::existing_target(&target_client, &dst.connection, &source)
        .await
        .map_err(|e| e.on("target"))?;
    let segments = src.scan_segments.unwrap_or(DEFAULT_SEGMENTS);
    // Both tables are read within the source's read settings, as ScyllaDB Migrator's
    // validator reads them; by default each within its own provisioned reads.
    let reads = |described: &table::Described| {
        rate(
            src.read_throughput
                .map(i64::from)
                .or(described.provisioned().map(|(r, _)| r)),
            src.throughput_read_percent,
        )
    };
    let (source_reads, target_reads) = (reads(&source), reads(&target));
    let source_scan = SegmentScan::new(
        source_client.clone(),
        &src.connection.table,
        segments,
        source_reads,
        !src.connection.remove_consumed_capacity,
    )
    .consistent();
    let target_scan = SegmentScan::new(
        target_client.clone(),
        &dst.connection.table,
        segments,
        target_reads,
        !dst.connection.remove_consumed_capacity,
    )
    .consistent();
    let parallel = src
        .max_map_tasks
        .unwrap_or(DEFAULT_PARALLEL_SEGMENTS)
        .min(segments);
    tracing::info!(
        source = %super::describe(&src.connection),
        target = %super::describe(&dst.connection),
        segments,
        parallel,
        source_read_units_per_second = ?source_reads,
        target_read_units_per_second = ?target_reads,
        source_ttl_attribute = ?source.ttl_attribute,
        target_ttl_attribute = ?target.ttl_attribute,
        "DynamoDB validation planned"
    );
    let lookup = DynamoLookup {
        source: Table {
            client: source_client,
            name: src.connection.table.clone(),
            ttl_attribute: source.ttl_attribute.clone(),
            budget: source_scan.budget().clone(),
            report_capacity: !src.connection.remove_consumed_capacity,
        },
        target: Table {
            client: target_client.clone(),
            name: dst.connection.table.clone(),
            ttl_attribute: target.ttl_attribute.clone(),
            budget: target_scan.budget().clone(),
            report_capacity: !dst.connection.remove_consumed_capacity,
        },
        key_names: source.key_names(),
        renames: renames
            .iter()
            .map(|r| (r.from.clone(), r.to.clone()))
            .collect(),
        tolerance: Tolerance::new(v.floating_point_tolerance),
    };
    // Missing items only, as ScyllaDB Migrator repairs DynamoDB tables: an item that differs
    // may have been changed in the target on purpose, and a put would replace it whole.
    let repair = v.copy_missing_rows.then(|| {
        Box::new(SinkRepair(BatchSink::new(
            target_client,
            dst,
            renames,
            source.ttl_attribute.clone(),
        ))) as Box<dyn Repair<Item>>
    });
    Ok(LookupSides {
        source: source_scan,
        target: target_scan,
        lookup,
        repair,
        pacing: Pacing {
            units_finishing: 0,
            units_at_once: parallel as usize,
            requests_in_flight: (parallel as usize * 2).max(4),
            // Reads are bounded by the read capacity above.
            rows_per_second: None,
            bytes_per_second: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn keys_match_whatever_the_spelling_of_a_number() {
        let names = vec!["id".to_string(), "sk".to_string()];
        let a = ItemKey::of(
            &item(&[
                ("id", AttributeValue::S("a".into())),
                ("sk", AttributeValue::N("1.50".into())),
                ("x", AttributeValue::N("1".into())),
            ]),
            &names,
        );
        let b = ItemKey::of(
            &item(&[
                ("id", AttributeValue::S("a".into())),
                ("sk", AttributeValue::N("15E-1".into())),
            ]),
            &names,
        );
        let c = ItemKey::of(
            &item(&[
                ("id", AttributeValue::S("a".into())),
                ("sk", AttributeValue::N("1.6".into())),
            ]),
            &names,
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        let names2 = names.clone();
        assert_eq!(render_key(&names2, &b), "\"id\" = 'a' AND \"sk\" = 15E-1");
        let set: HashSet<ItemKey> = [a, b, c].into_iter().collect();
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn differences_name_each_attribute_after_renames() {
        let renames: HashMap<String, String> = [("foo".to_string(), "quux".to_string())].into();
        let source = item(&[
            ("id", AttributeValue::S("k".into())),
            ("foo", AttributeValue::S("bar".into())),
            ("n", AttributeValue::N("1.0".into())),
            ("gone", AttributeValue::Bool(true)),
            ("ss", AttributeValue::Ss(vec!["a".into(), "b".into()])),
        ]);
        let same = item(&[
            ("id", AttributeValue::S("k".into())),
            ("quux", AttributeValue::S("bar".into())),
            ("n", AttributeValue::N("1".into())),
            ("gone", AttributeValue::Bool(true)),
            ("ss", AttributeValue::Ss(vec!["b".into(), "a".into()])),
        ]);
        let exact = Tolerance::default();
        assert_eq!(differences(&source, &same, &renames, &exact), vec![]);
        let mut changed = same.clone();
        changed.insert("quux".into(), AttributeValue::S("baz".into()));
        changed.remove("gone");
        changed.insert("new".into(), AttributeValue::N("7".into()));
        let found = differences(&source, &changed, &renames, &exact);
        let shown: Vec<(&str, Option<&str>, ColumnDifferenceKind, &str, &str)> = found
            .iter()
            .map(|c| {
                (
                    c.column.as_str(),
                    c.target_column.as_deref(),
                    c.difference,
                    c.source.as_str(),
                    c.target.as_str(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    "foo",
                    Some("quux"),
                    ColumnDifferenceKind::Value,
                    "'bar'",
                    "'baz'"
                ),
                (
                    "gone",
                    None,
                    ColumnDifferenceKind::MissingOnTarget,
                    "true",
                    ABSENT
                ),
                (
                    "new",
                    None,
                    ColumnDifferenceKind::ExtraOnTarget,
                    ABSENT,
                    "7"
                ),
            ]
        );
        // An attribute left under its source name is not the renamed one.
        let mut unrenamed = same.clone();
        unrenamed.remove("quux");
        unrenamed.insert("foo".into(), AttributeValue::S("bar".into()));
        let found = differences(&source, &unrenamed, &renames, &exact);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].difference, ColumnDifferenceKind::MissingOnTarget);
        assert_eq!(found[1].difference, ColumnDifferenceKind::ExtraOnTarget);
    }
}
