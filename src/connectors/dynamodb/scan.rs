//! A table read by parallel scan: segment `i` of `TotalSegments` is one unit of work, recorded
//! complete as `skipSegments: [i]`, read page by page from its `LastEvaluatedKey`.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

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
        done.numbers_mut(&super::SEGMENTS).insert(self.index);
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

/// Items asked for per page when the server keeps up.
const PAGE_ITEMS: i32 = 1000;
/// The smallest page asked for after timeouts.
const MIN_PAGE_ITEMS: i32 = 10;

/// The parallel scan of one table.
pub struct SegmentScan {
    client: aws_sdk_dynamodb::Client,
    table: String,
    segments: u32,
    /// Items per page (`Limit`) asked for now, at most [`PAGE_ITEMS`]; DynamoDB also ends a
    /// page at 1 MB. Shared by the segments, since they load the same server.
    page_items: AtomicI32,
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
            page_items: AtomicI32::new(PAGE_ITEMS),
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

impl SegmentScan {
    /// A page went unanswered in time: a server that is slow rather than down (a small
    /// DynamoDB-compatible server under parallel scans) answers smaller pages in time, and
    /// asking for the same large page again would time out again, for ever.
    fn shrink_pages(&self) {
        let before = self
            .page_items
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some((n / 2).max(MIN_PAGE_ITEMS))
            })
            .unwrap_or(PAGE_ITEMS);
        if before > MIN_PAGE_ITEMS {
            tracing::warn!(
                table = %self.table,
                "a scan page of {before} items was not answered in time; asking for pages of {} items",
                (before / 2).max(MIN_PAGE_ITEMS)
            );
        }
    }

    /// A page was answered: grow the pages back towards [`PAGE_ITEMS`], slowly, so that a
    /// server at its limit is not pushed straight back past it.
    fn grow_pages(&self) {
        let _ = self
            .page_items
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < PAGE_ITEMS).then(|| (n + n / 16 + 1).min(PAGE_ITEMS))
            });
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
            .filter(|i| !done.numbers(&super::SEGMENTS).contains(i))
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
            .limit(self.page_items.load(Ordering::Relaxed))
            .consistent_read(self.consistent)
            .set_exclusive_start_key(cursor.clone());
        if self.report_capacity {
            req = req.return_consumed_capacity(ReturnConsumedCapacity::Total);
        }
        let out = match req.send().await {
            Ok(out) => out,
            Err(e) => {
                let e = DynamoError::from_sdk(&format!("scan of {unit}"), e);
                if e.timed_out {
                    self.shrink_pages();
                }
                return Err(e);
            }
        };
        self.grow_pages();
        let next = out.last_evaluated_key().map(|k| Some(k.clone()));
        let reported = out.consumed_capacity().and_then(|c| c.capacity_units());
        let rows = out.items.unwrap_or_default();
        // Not reported (Alternator, `removeConsumedCapacity`): estimated from the items' size.
        let bytes: usize = rows.iter().map(item_size).sum();
        self.budget.charge(reported, bytes, self.consistent).await;
        Ok(Page {
            rows,
            next,
            measured: None,
        })
    }

    fn row_size(row: &Item) -> usize {
        item_size(row)
    }

    /// `DescribeTable`'s item count and size, spread evenly over the segments (a parallel
    /// scan's segments split the table's hash space evenly). DynamoDB updates them about every
    /// six hours: the copy corrects them by the segments it finishes. A count of 0 says
    /// nothing (a table loaded since the last update), so it is no estimate.
    async fn expect(&self, work: &[Segment]) -> Vec<Option<crate::connectors::seam::Expected>> {
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await;
        let table = match described {
            Ok(out) => out.table,
            Err(e) => {
                tracing::info!(
                    table = %self.table,
                    "no item count ({}): the copy's total is learnt from its first segments",
                    DynamoError::from_sdk("describing the table", e)
                );
                None
            }
        };
        let Some((items, bytes)) = table
            .and_then(|t| Some((t.item_count?, t.table_size_bytes.unwrap_or(0))))
            .filter(|(items, _)| *items > 0)
        else {
            return vec![None; work.len()];
        };
        crate::connectors::seam::Expected::evenly(
            work.len(),
            items as f64,
            bytes.max(0) as f64,
            f64::from(self.segments),
        )
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("readCapacityUnits", self.budget.consumed())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan() -> SegmentScan {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .build();
        SegmentScan::new(
            aws_sdk_dynamodb::Client::from_conf(config),
            "t",
            4,
            None,
            false,
        )
    }

    #[test]
    fn pages_shrink_on_timeouts_and_grow_back_slowly() {
        let s = scan();
        let now = || s.page_items.load(Ordering::Relaxed);
        s.shrink_pages();
        assert_eq!(now(), 500);
        for _ in 0..20 {
            s.shrink_pages();
        }
        assert_eq!(now(), MIN_PAGE_ITEMS);
        s.grow_pages();
        assert_eq!(now(), MIN_PAGE_ITEMS + 1);
        // Back to full pages after a few dozen answered pages, never beyond.
        for _ in 0..200 {
            s.grow_pages();
        }
        assert_eq!(now(), PAGE_ITEMS);
    }
}
