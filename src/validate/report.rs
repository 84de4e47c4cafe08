//! What a validation found: counts of every kind of difference, and examples an operator can
//! look up (each key is a CQL condition to paste after `WHERE`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::connectors::seam::compare::{ColumnDifference, ColumnDifferenceKind};

/// The result of a validation (so far, while it runs; a resumed validation continues the
/// counts of the run it resumes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Rows read from the source (after its `where` filter).
    pub source_rows: u64,
    /// Rows read from the target (after the same filter, renamed).
    pub target_rows: u64,
    /// Distinct primary keys seen on either side.
    pub rows_compared: u64,
    /// Rows present on both sides with every compared cell equal.
    pub rows_matched: u64,
    /// Rows missing, extra or different.
    pub rows_with_differences: u64,
    /// Rows per kind of difference (a row different in several ways counts in each).
    pub differences: Differences,
    /// Rows written again from the source (`copyMissingRows`).
    pub rows_copied: u64,
    /// Rows left out of the comparison because a migration leaves them out too: CQL source
    /// rows with a null primary key column (from a `where` on a view, say), which
    /// `dropNullPrimaryKeys` skips; DynamoDB items whose TTL has passed (the copy does not copy
    /// them, the server deletes them).
    pub rows_skipped: u64,
    /// Up to `failuresToFetch` differences, in the order they were found.
    pub examples: Vec<Example>,
}

/// Counts of rows per kind of difference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Differences {
    /// In the source, not in the target.
    pub missing_rows: u64,
    /// In the target, not in the source.
    pub extra_rows: u64,
    /// A cell set on both sides with different values.
    pub different_values: u64,
    /// A cell set in the source and null in the target.
    pub missing_values: u64,
    /// A cell null in the source and set in the target.
    pub extra_values: u64,
    /// A cell whose writetime differs by more than `writetimeToleranceMillis`.
    pub different_writetimes: u64,
    /// A cell whose TTL differs by more than `ttlToleranceMillis` (or that expires on one
    /// side only).
    pub different_ttls: u64,
}

impl Differences {
    /// Adds `other`.
    pub fn add(&mut self, other: &Differences) {
        self.missing_rows += other.missing_rows;
        self.extra_rows += other.extra_rows;
        self.different_values += other.different_values;
        self.missing_values += other.missing_values;
        self.extra_values += other.extra_values;
        self.different_writetimes += other.different_writetimes;
        self.different_ttls += other.different_ttls;
    }

    /// Counts each kind present in one row's column differences.
    pub fn count_row(&mut self, columns: &[ColumnDifference]) {
        let has = |k: ColumnDifferenceKind| columns.iter().any(|c| c.difference == k);
        self.different_values += u64::from(has(ColumnDifferenceKind::Value));
        self.missing_values += u64::from(has(ColumnDifferenceKind::MissingOnTarget));
        self.extra_values += u64::from(has(ColumnDifferenceKind::ExtraOnTarget));
        self.different_writetimes += u64::from(has(ColumnDifferenceKind::Writetime));
        self.different_ttls += u64::from(has(ColumnDifferenceKind::Ttl));
    }
}

/// One row that differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Example {
    /// `missingRow`, `extraRow` or `differentRow`.
    pub kind: ExampleKind,
    /// The primary key as a condition on the source table: CQL (`id = 5 AND ck = 'a'`), or
    /// PartiQL for DynamoDB (`"id" = 'abc' AND "sort" = 5`).
    pub key: String,
    /// The partition's token (CQL tables only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<i64>,
    /// The cells that differ (for `differentRow`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnDifference>,
}

/// Kinds of row differences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ExampleKind {
    /// In the source, not in the target.
    MissingRow,
    /// In the target, not in the source.
    ExtraRow,
    /// On both sides, with different cells.
    DifferentRow,
}

impl Report {
    /// Counts a row found different, keeping the example `make` builds while the unit holds
    /// fewer than `max_examples` (examples beyond the whole job's limit are cut when units are
    /// merged; a unit never needs more than the limit).
    pub fn differing(&mut self, max_examples: usize, make: impl FnOnce() -> Example) {
        self.rows_compared += 1;
        self.rows_with_differences += 1;
        if self.examples.len() < max_examples {
            self.examples.push(make());
        }
    }

    /// True when the target holds exactly the source's rows.
    pub fn is_clean(&self) -> bool {
        self.rows_with_differences == 0
    }

    /// Adds the counts and examples of `other` (a unit's findings, or a resumed run's),
    /// keeping at most `max_examples` examples.
    pub fn merge(&mut self, other: &Report, max_examples: usize) {
        self.source_rows += other.source_rows;
        self.target_rows += other.target_rows;
        self.rows_compared += other.rows_compared;
        self.rows_matched += other.rows_matched;
        self.rows_with_differences += other.rows_with_differences;
        self.differences.add(&other.differences);
        self.rows_copied += other.rows_copied;
        self.rows_skipped += other.rows_skipped;
        let room = max_examples.saturating_sub(self.examples.len());
        self.examples
            .extend(other.examples.iter().take(room).cloned());
    }

    /// The report as text for a terminal.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let d = &self.differences;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} rows compared ({} source, {} target), {} matched, {} with differences",
            if self.is_clean() {
                "no differences"
            } else {
                "DIFFERENCES FOUND"
            },
            self.rows_compared,
            self.source_rows,
            self.target_rows,
            self.rows_matched,
            self.rows_with_differences
        );
        for (name, n) in [
            ("missing rows (not in the target)", d.missing_rows),
            ("extra rows (not in the source)", d.extra_rows),
            ("rows with different values", d.different_values),
            ("rows with values missing in the target", d.missing_values),
            ("rows with values only in the target", d.extra_values),
            ("rows with different writetimes", d.different_writetimes),
            ("rows with different TTLs", d.different_ttls),
        ] {
            if n > 0 {
                let _ = writeln!(s, "  {name}: {n}");
            }
        }
        if self.rows_copied > 0 {
            let _ = writeln!(
                s,
                "  rows copied again (copyMissingRows): {}",
                self.rows_copied
            );
        }
        if self.rows_skipped > 0 {
            let _ = writeln!(
                s,
                "  rows not compared, as a migration skips them (null primary key column, TTL passed): {}",
                self.rows_skipped
            );
        }
        for e in &self.examples {
            let kind = match e.kind {
                ExampleKind::MissingRow => "missing row",
                ExampleKind::ExtraRow => "extra row",
                ExampleKind::DifferentRow => "different row",
            };
            let _ = writeln!(s, "- {kind}: {}", e.key);
            for c in &e.columns {
                let name = match &c.target_column {
                    Some(t) => format!("{} (target {t})", c.column),
                    None => c.column.clone(),
                };
                let what = match c.difference {
                    ColumnDifferenceKind::Value => "value",
                    ColumnDifferenceKind::MissingOnTarget => "missing in the target",
                    ColumnDifferenceKind::ExtraOnTarget => "only in the target",
                    ColumnDifferenceKind::Writetime => "writetime (µs)",
                    ColumnDifferenceKind::Ttl => "TTL (s)",
                };
                let _ = writeln!(
                    s,
                    "    {name}: {what}: source {} | target {}",
                    c.source, c.target
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_every_count_and_caps_examples() {
        let example = |key: &str| Example {
            kind: ExampleKind::MissingRow,
            key: key.into(),
            token: Some(0),
            columns: vec![],
        };
        // Every count differs from every other, so a count added to the wrong field shows.
        let mut a = Report {
            source_rows: 1,
            target_rows: 2,
            rows_compared: 3,
            rows_matched: 4,
            rows_with_differences: 5,
            differences: Differences {
                missing_rows: 6,
                extra_rows: 7,
                different_values: 8,
                missing_values: 9,
                extra_values: 10,
                different_writetimes: 11,
                different_ttls: 12,
            },
            rows_copied: 13,
            rows_skipped: 14,
            examples: vec![example("id = 1")],
        };
        let b = Report {
            source_rows: 100,
            target_rows: 200,
            rows_compared: 300,
            rows_matched: 400,
            rows_with_differences: 500,
            differences: Differences {
                missing_rows: 600,
                extra_rows: 700,
                different_values: 800,
                missing_values: 900,
                extra_values: 1000,
                different_writetimes: 1100,
                different_ttls: 1200,
            },
            rows_copied: 1300,
            rows_skipped: 1400,
            examples: vec![example("id = 2"), example("id = 3")],
        };
        a.merge(&b, 2);
        assert_eq!(
            a,
            Report {
                source_rows: 101,
                target_rows: 202,
                rows_compared: 303,
                rows_matched: 404,
                rows_with_differences: 505,
                differences: Differences {
                    missing_rows: 606,
                    extra_rows: 707,
                    different_values: 808,
                    missing_values: 909,
                    extra_values: 1010,
                    different_writetimes: 1111,
                    different_ttls: 1212,
                },
                rows_copied: 1313,
                rows_skipped: 1414,
                // The first examples found are kept.
                examples: vec![example("id = 1"), example("id = 2")],
            }
        );
        assert!(!a.is_clean());
        let text = a.to_text();
        for line in [
            "DIFFERENCES FOUND: 303 rows compared (101 source, 202 target), 404 matched, 505 with differences",
            "missing rows (not in the target): 606",
            "extra rows (not in the source): 707",
            "rows with different values: 808",
            "rows with values missing in the target: 909",
            "rows with values only in the target: 1010",
            "rows with different writetimes: 1111",
            "rows with different TTLs: 1212",
            "rows copied again (copyMissingRows): 1313",
            "rows not compared, as a migration skips them (null primary key column, TTL passed): 1414",
            "- missing row: id = 2",
        ] {
            assert!(text.contains(line), "{line:?} not in\n{text}");
        }
        // A full report takes no more examples.
        a.merge(&b, 2);
        assert_eq!(a.examples.len(), 2);
        assert_eq!(a.source_rows, 201);
    }
}
