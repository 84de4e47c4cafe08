//! Progress in one line of the operator's log: what a savepoint adds to the previous one and
//! what it records in all. The line stays short however many units a job has (a CQL job has
//! hundreds of token ranges): lists are written as runs (`0-3, 7`) and cut after a few.

use std::fmt;

use super::progress::{Done, Progress, Shape};
use super::ranges::TokenRange;

/// Runs (or file names) listed at most; the rest is counted.
const MAX_LISTED: usize = 12;

/// `none`, or each kind of work recorded: `segments [0-1, 5] (3)`, `token ranges: 41.7% of
/// the ring in 3 intervals`, `Parquet files [a.parquet, b.parquet] (2)`, separated by `; `.
impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (key, done) in self.entries() {
            let label = key.label;
            match done {
                Done::Numbers(n) if !n.is_empty() => {
                    parts.push(format!(
                        "{label} [{}] ({})",
                        runs(n.iter().copied()),
                        n.len()
                    ));
                }
                Done::Ranges(r) if !r.ranges().is_empty() => {
                    let share = r.width() as f64 / TokenRange::FULL.width() as f64 * 100.0;
                    let n = r.ranges().len();
                    parts.push(format!(
                        "{label}: {share:.1}% of the ring in {n} interval{}",
                        if n == 1 { "" } else { "s" }
                    ));
                }
                Done::Names(names) if !names.is_empty() => {
                    if key.shape == (Shape::Names { listed: true }) {
                        let mut listed: Vec<&str> =
                            names.iter().take(MAX_LISTED).map(String::as_str).collect();
                        let more = names.len().saturating_sub(MAX_LISTED);
                        let listed_more = format!("{more} more");
                        if more > 0 {
                            listed.push(&listed_more);
                        }
                        parts.push(format!("{label} [{}] ({})", listed.join(", "), names.len()));
                    } else {
                        parts.push(format!("{label} ({})", names.len()));
                    }
                }
                Done::Stream(s) => {
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
                        "{label}: {} shard{} applied to its end, positions [{}]",
                        s.finished_shards.len(),
                        if s.finished_shards.len() == 1 {
                            ""
                        } else {
                            "s"
                        },
                        at.join(", ")
                    ));
                }
                // Empty, or the detail of other work (versions, a run's id).
                _ => {}
            }
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
    use crate::savepoints::TOKEN_RANGES;
    use crate::savepoints::ranges::RangeSet;
    use crate::savepoints::tests::keys::{FILES, NUMBERS as SEGMENTS, STREAM};

    fn segments(s: &[u32]) -> Progress {
        let mut p = Progress::default();
        if !s.is_empty() {
            p.insert(&SEGMENTS, Done::Numbers(s.iter().copied().collect()));
        }
        p
    }

    fn ranges(r: impl IntoIterator<Item = TokenRange>) -> Progress {
        let mut p = Progress::default();
        p.insert(&TOKEN_RANGES, Done::Ranges(RangeSet::from_ranges(r)));
        p
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
        let mut files = Progress::default();
        files.insert(
            &FILES,
            Done::Names((0..40).map(|i| format!("part-{i:02}.parquet")).collect()),
        );
        let line = files.to_string();
        assert!(line.ends_with("part-11.parquet, 28 more] (40)"), "{line}");
    }

    #[test]
    fn token_ranges_are_summed_up_not_listed() {
        // Hundreds of units of a CQL job, merged or not: one share of the ring.
        let full = TokenRange::FULL;
        let units = full.split(256);
        let done = ranges(units.iter().step_by(2).copied());
        assert_eq!(
            done.to_string(),
            "token ranges: 50.0% of the ring in 128 intervals"
        );
        let whole = ranges([full]);
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
        let earlier = ranges([units[0]]);
        let later = ranges([units[0], units[1], units[3]]);
        assert_eq!(
            later.added_since(&earlier).ranges(&TOKEN_RANGES),
            &RangeSet::from_ranges([units[1], units[3]])
        );
        // A stream's positions are added when they moved, and only then.
        let at = |seq: &str| {
            let mut p = Progress::default();
            p.set_stream(
                &STREAM,
                crate::savepoints::StreamPositions {
                    stream: "arn:stream".into(),
                    since: 1,
                    shards: [("shard-1".to_string(), seq.to_string())].into(),
                    finished_shards: Default::default(),
                },
            );
            p
        };
        assert_eq!(at("5").added_since(&at("5")).stream(&STREAM), None);
        assert_eq!(
            at("9").added_since(&at("5")).stream(&STREAM),
            at("9").stream(&STREAM)
        );
    }
}
