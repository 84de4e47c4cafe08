//! A table read by parallel scan: segment `i` of `TotalSegments` is one unit of work, recorded
//! complete as `skipSegments: [i]`, read page by page from its `LastEvaluatedKey`.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::item::{Item, item_size};
use super::retry::DynamoError;
use crate::connectors::seam::{Page, Plan, Scan, Unit};
use crate::savepoints;

/// Scan segment `index` of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `Segment`.
    pub index: u32,
    /// `TotalSegments`.
    pub total: u32,
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "segment {} of {}", self.index, self.total)
    }
}

impl Unit for Segment {
    fn record(&self, done: &mut savepoints::Progress) {
        done.segments.insert(self.index);
    }
}

/// The read capacity the reads of one table may consume, and what they consumed. Cloned, it
/// is shared: the validator's lookups of a table draw on the budget of that table's scan.
#[derive(Clone, Default)]
pub struct ReadBudget {
    /// Read capacity units consumed, as the server reports them (×10, to count halves).
    consumed_tenths: Arc<AtomicU64>,
    /// Read capacity units per second, at most, and that rate.
    limiter: Option<(Arc<DefaultDirectRateLimiter>, NonZeroU32)>,
}

impl ReadBudget {
    /// A budget of `units_per_second` read capacity units (unset: no bound).
    pub fn new(units_per_second: Option<u32>) -> Self {
        Self {
            consumed_tenths: Arc::default(),
            limiter: units_per_second
                .and_then(NonZeroU32::new)
                .map(|r| (Arc::new(RateLimiter::direct(Quota::per_second(r))), r)),
        }
    }

    /// Charges a read that returned `bytes` of items: `reported` units when the server
    /// reports them, else an estimate (a unit is 4 KB read strongly consistent, half of that
    /// eventually consistent). The next read waits until the rate allows it, so the rate holds
    /// over time, measured by what was read.
    pub async fn charge(&self, reported: Option<f64>, bytes: usize, consistent: bool) {
        let units = reported.unwrap_or_else(|| {
            let units = (bytes as f64 / 4096.0).ceil();
            if consistent { units } else { units / 2.0 }
        });
        self.consumed_tenths
            .fetch_add((units * 10.0).round() as u64, Ordering::Relaxed);
        if let Some((limiter, rate)) = &self.limiter {
            let n = NonZeroU32::new(units.ceil().max(1.0) as u32).expect("at least 1");
            // `until_n_ready` refuses more than a second's budget; a bigger read takes it all.
            let _ = limiter.until_n_ready(n.min(*rate)).await;
        }
    }

    /// Read capacity units consumed so far.
    pub fn consumed(&self) -> u64 {
        self.consumed_tenths.load(Ordering::Relaxed) / 10
    }
}

/// The parallel scan of one table.
pub struct SegmentScan {
    client: aws_sdk_dynamodb::Client,
    table: String,
    segments: u32,
    /// Items per page (`Limit`); DynamoDB also ends a page at 1 MB.
    page_items: i32,
    consistent: bool,
    report_capacity: bool,
    budget: ReadBudget,
}

impl SegmentScan {
    /// A scan of `table` in `segments` segments; `read_units_per_second` bounds the read
    /// capacity it consumes (unset: no bound).
    pub fn new(
        client: aws_sdk_dynamodb::Client,
        table: &str,
        segments: u32,
        read_units_per_second: Option<u32>,
        report_capacity: bool,
    ) -> Self {
        Self {
            client,
            table: table.to_string(),
            segments: segments.max(1),
            page_items: 1000,
            consistent: false,
            report_capacity,
            budget: ReadBudget::new(read_units_per_second),
        }
    }

    /// Reads strongly consistent pages (the validator's choice: it must see every write).
    pub fn consistent(mut self) -> Self {
        self.consistent = true;
        self
    }

    /// Number of segments.
    pub fn segments(&self) -> u32 {
        self.segments
    }

    /// The read budget of the table, to share with other reads of it.
    pub fn budget(&self) -> &ReadBudget {
        &self.budget
    }
}

impl Scan for SegmentScan {
    type Unit = Segment;
    type Row = Item;
    type Cursor = Option<Item>;
    type Error = DynamoError;

    fn plan(&self, done: &savepoints::Progress) -> Plan<Segment> {
        let total = self.segments;
        let work: Vec<Segment> = (0..total)
            .filter(|i| !done.segments.contains(i))
            .map(|index| Segment { index, total })
            .collect();
        Plan {
            total: u64::from(total),
            skipped: u64::from(total) - work.len() as u64,
            work,
        }
    }

    fn start(&self, _unit: &Segment) -> Option<Item> {
        None
    }

    async fn page(
        &self,
        unit: &Segment,
        cursor: &Option<Item>,
    ) -> Result<Page<Item, Option<Item>>, DynamoError> {
        let mut req = self
            .client
            .scan()
            .table_name(&self.table)
            .segment(unit.index as i32)
            .total_segments(unit.total as i32)
            .limit(self.page_items)
            .consistent_read(self.consistent)
            .set_exclusive_start_key(cursor.clone());
        if self.report_capacity {
            req = req.return_consumed_capacity(ReturnConsumedCapacity::Total);
        }
        let out = req
            .send()
            .await
            .map_err(|e| DynamoError::from_sdk(&format!("scan of {unit}"), e))?;
        let next = out.last_evaluated_key().map(|k| Some(k.clone()));
        let reported = out.consumed_capacity().and_then(|c| c.capacity_units());
        let rows = out.items.unwrap_or_default();
        // Not reported (Alternator, `removeConsumedCapacity`): estimated from the items' size.
        let bytes: usize = rows.iter().map(item_size).sum();
        self.budget.charge(reported, bytes, self.consistent).await;
        Ok(Page { rows, next })
    }

    fn row_size(row: &Item) -> usize {
        item_size(row)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("readCapacityUnits", self.budget.consumed())]
    }
}
