//! Progress in one line of the operator's log: what a savepoint adds to the previous one and
//! what it records in all. The line stays short however many units a job has (a CQL job has
//! hundreds of token ranges): lists are written as runs (`0-3, 7`) and cut after a few.

use std::fmt;

use super::Progress;
use super::ranges::TokenRange;

/// Runs (or file names) listed at most; the rest is counted.
const MAX_LISTED: usize = 12;

impl Progress {
    /// What `self` records that `earlier` does not: the work finished between two savepoints
    /// of a run (`self` the later).
    pub fn added_since(&self, earlier: &Progress) -> Progress {
        let mut added = Progress::default();
        for r in self.token_ranges.ranges() {
            for part in earlier.token_ranges.missing(*r) {
                added.token_ranges.insert(part);
            }
        }
        added.segments = self
            .segments
            .difference(&earlier.segments)
            .copied()
            .collect();
        added.parquet_files = self
            .parquet_files
            .difference(&earlier.parquet_files)
            .cloned()
            .collect();
        added.export_files = self
            .export_files
            .difference(&earlier.export_files)
            .cloned()
            .collect();
        added.mysql_ranges = self
            .mysql_ranges
            .difference(&earlier.mysql_ranges)
            .cloned()
            .collect();
        added.stream = match (&self.stream, &earlier.stream) {
            (Some(now), Some(then)) if now == then => None,
            (now, _) => now.clone(),
        };
        added
    }
}

/// `none`, or each kind of work recorded: `segments [0-1, 5] (3)`, `token ranges: 41.7% of
/// the ring in 3 intervals`, `Parquet files [a.parquet, b.parquet] (2)`, separated by `; `.
impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.segments.is_empty() {
            parts.push(format!(
                "segments [{}] ({})",
                runs(self.segments.iter().copied()),
                self.segments.len()
            ));
        }
        if !self.token_ranges.ranges().is_empty() {
            let share = self.token_ranges.width() as f64 / TokenRange::FULL.width() as f64 * 100.0;
            let n = self.token_ranges.ranges().len();
            parts.push(format!(
                "token ranges: {share:.1}% of the ring in {n} interval{}",
                if n == 1 { "" } else { "s" }
            ));
        }
        if !self.parquet_files.is_empty() {
            let mut names: Vec<&str> = self
                .parquet_files
                .iter()
                .take(MAX_LISTED)
                .map(String::as_str)
                .collect();
            let more = self.parquet_files.len().saturating_sub(MAX_LISTED);
            let listed_more = format!("{more} more");
            if more > 0 {
                names.push(&listed_more);
            }
            parts.push(format!(
                "Parquet files [{}] ({})",
                names.join(", "),
                self.parquet_files.len()
            ));
        }
        if !self.export_files.is_empty() {
            parts.push(format!("export data files ({})", self.export_files.len()));
        }
        if !self.mysql_ranges.is_empty() {
            parts.push(format!("MySQL ranges ({})", self.mysql_ranges.len()));
        }
        if let Some(s) = &self.stream {
            let mut at: Vec<String> = s
                .shards
                .iter()
                .take(MAX_LISTED)
                .map(|(shard, seq)| format!("{shard} after {seq}"))
                .collect();
            if s.shards.len() > MAX_LISTED {
                at.push(format!("{} more", s.shards.len() - MAX_LISTED));
            }
            parts.push(format!(
                "stream: {} shard{} applied to its end, positions [{}]",
                s.finished_shards.len(),
                if s.finished_shards.len() == 1 {
                    ""
                } else {
                    "s"
                },
                at.join(", ")
            ));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// Sorted numbers as runs: `0-3, 7, 9-10`, the first [`MAX_LISTED`] runs and a count of the
/// numbers left out.
fn runs(sorted: impl Iterator<Item = u32>) -> String {
    let mut spans: Vec<(u32, u32)> = Vec::new();
    for n in sorted {
        match spans.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(n) => *end = n,
            _ => spans.push((n, n)),
        }
    }
    let mut out: Vec<String> = spans
        .iter()
        .take(MAX_LISTED)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let left: u64 = spans
        .iter()
        .skip(MAX_LISTED)
        .map(|&(a, b)| u64::from(b - a) + 1)
        .sum();
    if left > 0 {
        out.push(format!("{left} more"));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::savepoints::ranges::RangeSet;

    fn segments(s: &[u32]) -> Progress {
        Progress {
            segments: s.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn segments_are_listed_as_runs_and_counted() {
        assert_eq!(segments(&[]).to_string(), "none");
        assert_eq!(segments(&[1]).to_string(), "segments [1] (1)");
        assert_eq!(
            segments(&[0, 1, 2, 3, 7, 9, 10]).to_string(),
            "segments [0-3, 7, 9-10] (7)"
        );
    }

    #[test]
    fn long_lists_stay_short() {
        // Every other segment of 1000: 500 runs of one.
        let many: Vec<u32> = (0..1000).step_by(2).collect();
        let line = segments(&many).to_string();
        assert!(line.ends_with(", 488 more] (500)"), "{line}");
        assert!(line.len() < 100, "{line}");
        let files = Progress {
            parquet_files: (0..40).map(|i| format!("part-{i:02}.parquet")).collect(),
            ..Default::default()
        };
        let line = files.to_string();
        assert!(line.ends_with("part-11.parquet, 28 more] (40)"), "{line}");
    }

    #[test]
    fn token_ranges_are_summed_up_not_listed() {
        // Hundreds of units of a CQL job, merged or not: one share of the ring.
        let full = TokenRange::FULL;
        let units = full.split(256);
        let done = Progress {
            token_ranges: RangeSet::from_ranges(units.iter().step_by(2).copied()),
            ..Default::default()
        };
        assert_eq!(
            done.to_string(),
            "token ranges: 50.0% of the ring in 128 intervals"
        );
        let whole = Progress {
            token_ranges: RangeSet::from_ranges([full]),
            ..Default::default()
        };
        assert_eq!(
            whole.to_string(),
            "token ranges: 100.0% of the ring in 1 interval"
        );
    }

    #[test]
    fn added_since_is_what_the_later_progress_adds() {
        let before = segments(&[0, 1]);
        let after = segments(&[0, 1, 4]);
        assert_eq!(after.added_since(&before), segments(&[4]));
        assert!(before.added_since(&before).is_empty());
        assert!(!after.added_since(&before).is_empty());
        assert!(!before.is_empty() && Progress::default().is_empty());
        let units = TokenRange::FULL.split(4);
        let earlier = Progress {
            token_ranges: RangeSet::from_ranges([units[0]]),
            ..Default::default()
        };
        let later = Progress {
            token_ranges: RangeSet::from_ranges([units[0], units[1], units[3]]),
            ..Default::default()
        };
        assert_eq!(
            later.added_since(&earlier).token_ranges,
            RangeSet::from_ranges([units[1], units[3]])
        );
        // A stream's positions are added when they moved, and only then.
        let at = |seq: &str| Progress {
            stream: Some(crate::savepoints::StreamPositions {
                stream: "arn:stream".into(),
                since: 1,
                shards: [("shard-1".to_string(), seq.to_string())].into(),
                finished_shards: Default::default(),
            }),
            ..Default::default()
        };
        assert_eq!(at("5").added_since(&at("5")).stream, None);
        assert_eq!(at("9").added_since(&at("5")).stream, at("9").stream);
    }
}
