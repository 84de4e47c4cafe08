//! Murmur3 token ranges: splitting the ring into units, and sets of ranges as merged intervals.
//!
//! A range is `(start, end]`, as in `token(pk) > start AND token(pk) <= end`. The whole ring is
//! `(i64::MIN, i64::MAX]`: Murmur3 never gives a key the token `i64::MIN`.

use serde::{Deserialize, Serialize};

/// A token range `(start, end]`, never empty (`start < end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TokenRange {
    /// Exclusive lower bound.
    pub start: i64,
    /// Inclusive upper bound.
    pub end: i64,
}

impl TokenRange {
    /// The whole ring.
    pub const FULL: TokenRange = TokenRange {
        start: i64::MIN,
        end: i64::MAX,
    };

    /// `(start, end]`, or `None` when empty.
    pub fn new(start: i64, end: i64) -> Option<Self> {
        (start < end).then_some(Self { start, end })
    }

    /// Number of tokens in the range.
    pub fn width(&self) -> u128 {
        (i128::from(self.end) - i128::from(self.start)) as u128
    }

    /// Splits into `parts` ranges of (nearly) equal width, in order. Fewer parts are returned
    /// when the range has fewer tokens than `parts`.
    pub fn split(&self, parts: usize) -> Vec<TokenRange> {
        let parts = (parts.max(1) as u128).min(self.width());
        let width = self.width();
        let mut out = Vec::with_capacity(parts as usize);
        let mut start = self.start;
        for i in 1..=parts {
            let end = if i == parts {
                self.end
            } else {
                (i128::from(self.start) + (width * i / parts) as i128) as i64
            };
            out.push(TokenRange { start, end });
            start = end;
        }
        out
    }
}

/// `skipTokenRanges` as written by either tool: ScyllaDB Migrator's typed tokens
/// (`[[{type: long, value: a}, {type: long, value: b}], …]`, its token encoder) or plain pairs
/// (`[[a, b], …]`, drover before it wrote Migrator's form). A value may be a number or a
/// numeric string. A pair that ends at the minimum token runs to the end of the ring, and
/// `(MIN, MIN)` is the whole ring, as in the connector's queries (`token > a`, `token >= MIN`);
/// `(MAX, MIN)` holds no token and is left out. Errors name the entry.
pub fn parse_skip_ranges(value: &serde_json::Value) -> Result<Vec<TokenRange>, String> {
    let Some(items) = value.as_array() else {
        return Err(format!(
            "expected a list of [start, end] token pairs, not {}",
            kind(value)
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, pair) in items.iter().enumerate() {
        let at = |m: String| format!("skipTokenRanges[{i}]: {m}");
        let ends = pair
            .as_array()
            .filter(|p| p.len() == 2)
            .ok_or_else(|| at("expected a pair [start, end]".into()))?;
        let start = token(&ends[0]).map_err(|m| at(format!("start: {m}")))?;
        let end = token(&ends[1]).map_err(|m| at(format!("end: {m}")))?;
        if (start, end) == (i64::MAX, i64::MIN) {
            continue;
        }
        let end = if end == i64::MIN { i64::MAX } else { end };
        out.push(TokenRange::new(start, end).ok_or_else(|| {
            at(format!(
                "({start}, {end}] is empty; ranges are (start, end] with start < end"
            ))
        })?);
    }
    Ok(out)
}

fn token(v: &serde_json::Value) -> Result<i64, String> {
    let (typ, value) = match v {
        serde_json::Value::Object(map) => (
            map.get("type").and_then(|t| t.as_str()).unwrap_or(""),
            map.get("value").unwrap_or(&serde_json::Value::Null),
        ),
        plain => ("long", plain),
    };
    match typ {
        "long" => {}
        "bigint" => {
            return Err(
                "a RandomPartitioner token (type bigint): drover copies tables of \
                 Murmur3Partitioner clusters only"
                    .into(),
            );
        }
        other => return Err(format!("unknown token type {other:?}, expected long")),
    }
    match value {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("expected a 64-bit token, not {}", kind(value)))
}

fn kind(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(b) => format!("{b}"),
        serde_json::Value::Number(n) => format!("{n}"),
        serde_json::Value::String(s) => format!("{:?}", crate::answer::cap(s)),
        serde_json::Value::Array(_) => "a list".into(),
        serde_json::Value::Object(_) => "a mapping".into(),
    }
}

/// `ranges` in ScyllaDB Migrator's encoding of `skipTokenRanges`, which both tools read, with
/// the end of the ring written as the connector writes it: `(a, MAX]` as `(a, MIN)`, the whole
/// ring as `(MIN, MIN)`.
pub fn encode_skip_ranges<'a>(
    ranges: impl IntoIterator<Item = &'a TokenRange>,
) -> serde_json::Value {
    let typed = |t: i64| serde_json::json!({"type": "long", "value": t});
    serde_json::Value::Array(
        ranges
            .into_iter()
            .map(|r| {
                let end = if r.end == i64::MAX { i64::MIN } else { r.end };
                serde_json::json!([typed(r.start), typed(end)])
            })
            .collect(),
    )
}

impl std::fmt::Display for TokenRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {}]", self.start, self.end)
    }
}

/// Splits the ring into units the way the Spark Cassandra Connector (ScyllaDB Migrator's
/// reader) splits it for `splitCount`, so that the ranges both tools record in
/// `skipTokenRanges` are the same pairs and each resumes from the other's savepoints.
///
/// Each ring range (between consecutive node tokens; the whole ring for one token or one
/// split) is cut into `max(1, rint(share of the ring × split_count))` pieces at
/// `start + floor(width × i / pieces)`. The piece that crosses the end of the ring is one unit
/// of two ranges, `(MIN, b]` and `(a, MAX]`. Every unit lies inside one ring range, so one
/// replica set serves it.
pub fn plan_units(node_tokens: &[i64], split_count: usize) -> Vec<Vec<TokenRange>> {
    // Distances are taken over a ring of 2^64 - 1 tokens, as the connector's token factory
    // does; (MIN, MIN) is the whole ring.
    const TOTAL: i128 = u64::MAX as i128;
    let distance = |a: i64, b: i64| {
        let d = i128::from(b) - i128::from(a);
        if b > a { d } else { d + TOTAL }
    };
    let mut tokens = node_tokens.to_vec();
    tokens.sort_unstable();
    tokens.dedup();
    let split_count = split_count.max(1);
    let ring: Vec<(i64, i64)> = if tokens.len() <= 1 || split_count == 1 {
        vec![(i64::MIN, i64::MIN)]
    } else {
        (0..tokens.len())
            .map(|i| (tokens[i], tokens[(i + 1) % tokens.len()]))
            .collect()
    };
    let per_split = 1.0 / split_count as f64;
    let mut units = Vec::new();
    for (start, end) in ring {
        let width = distance(start, end);
        let share = width as f64 / 18_446_744_073_709_551_616.0;
        // Java's Math.rint: halves go to the even neighbour.
        let pieces = ((share / per_split).round_ties_even() as i64).max(1) as i128;
        let pieces = pieces.min(width);
        let mut points: Vec<i64> = (0..pieces)
            .map(|i| start.wrapping_add((width * i / pieces) as u64 as i64))
            .collect();
        points.push(end);
        for w in points.windows(2) {
            let (a, b) = (w[0], w[1]);
            let unit: Vec<TokenRange> = if b == i64::MIN {
                // To the end of the ring; (MIN, MIN) is all of it.
                TokenRange::new(a, i64::MAX).into_iter().collect()
            } else if a >= b {
                // In token order: a unit's rows are read (and compared) in that order.
                TokenRange::new(i64::MIN, b)
                    .into_iter()
                    .chain(TokenRange::new(a, i64::MAX))
                    .collect()
            } else {
                vec![TokenRange { start: a, end: b }]
            };
            if !unit.is_empty() {
                units.push(unit);
            }
        }
    }
    units.sort();
    units
}

/// A set of tokens held as sorted, disjoint, non-adjacent ranges. This is how completed work
/// is recorded: merged intervals answer "is this done?" whatever the unit boundaries of the
/// run that asks. The ranges as inserted are kept beside them, because ScyllaDB Migrator
/// skips a range on resume only when its exact `(start, end)` pair is listed: a savepoint
/// written with the pairs keeps every range Migrator (or drover) recorded resumable by both.
/// Past [`MAX_PAIRS`] pairs only the merged ranges are kept, so that a job of very many units
/// keeps small savepoints and bounded memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSet {
    ranges: Vec<TokenRange>,
    #[serde(skip)]
    exact: std::collections::BTreeSet<TokenRange>,
    /// More than [`MAX_PAIRS`] ranges were inserted: `exact` was given up.
    #[serde(skip)]
    merged_only: bool,
}

/// The most ranges kept as inserted. ScyllaDB Migrator runs with a few hundred to a few
/// thousand ranges (`splitCount`); a savepoint of this many pairs is about 1.5 MB.
pub const MAX_PAIRS: usize = 16_384;

impl RangeSet {
    /// The empty set.
    pub const fn new() -> Self {
        Self {
            ranges: Vec::new(),
            exact: std::collections::BTreeSet::new(),
            merged_only: false,
        }
    }

    /// A set of the given ranges.
    pub fn from_ranges(ranges: impl IntoIterator<Item = TokenRange>) -> Self {
        let mut set = Self::new();
        for r in ranges {
            set.insert(r);
        }
        set
    }

    /// The merged ranges, in order.
    pub fn ranges(&self) -> &[TokenRange] {
        &self.ranges
    }

    /// The ranges to record: as inserted (each once, in order), or merged past [`MAX_PAIRS`].
    pub fn recorded(&self) -> Box<dyn Iterator<Item = &TokenRange> + '_> {
        if self.merged_only {
            Box::new(self.ranges.iter())
        } else {
            Box::new(self.exact.iter())
        }
    }

    /// Adds a range, merging it with every range it overlaps or touches.
    pub fn insert(&mut self, r: TokenRange) {
        if !self.merged_only {
            self.exact.insert(r);
            if self.exact.len() > MAX_PAIRS {
                self.merged_only = true;
                self.exact = Default::default();
            }
        }
        // First range that ends at or after r.start (touching counts: (a,b] + (b,c] = (a,c]).
        let lo = self.ranges.partition_point(|x| x.end < r.start);
        // First range that starts after r.end.
        let hi = self.ranges.partition_point(|x| x.start <= r.end);
        let mut merged = r;
        if lo < hi {
            merged.start = merged.start.min(self.ranges[lo].start);
            merged.end = merged.end.max(self.ranges[hi - 1].end);
        }
        self.ranges.splice(lo..hi, [merged]);
    }

    /// The parts of `r` not in the set, in order.
    pub fn missing(&self, r: TokenRange) -> Vec<TokenRange> {
        let mut out = Vec::new();
        let mut cursor = r.start;
        let first = self.ranges.partition_point(|x| x.end <= r.start);
        for x in &self.ranges[first..] {
            if x.start >= r.end {
                break;
            }
            out.extend(TokenRange::new(cursor, x.start.min(r.end)));
            cursor = cursor.max(x.end);
            if cursor >= r.end {
                break;
            }
        }
        out.extend(TokenRange::new(cursor, r.end));
        out
    }

    /// Whether every token of `r` is in the set.
    pub fn covers(&self, r: TokenRange) -> bool {
        self.missing(r).is_empty()
    }

    /// Number of tokens in the set.
    pub fn width(&self) -> u128 {
        self.ranges.iter().map(TokenRange::width).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tr(a: i64, b: i64) -> TokenRange {
        TokenRange::new(a, b).unwrap()
    }

    /// Pairs as the connector gives them: `(a, MIN)` for the end of the ring.
    fn pairs(units: &[Vec<TokenRange>]) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = units
            .iter()
            .flatten()
            .map(|r| (r.start, if r.end == i64::MAX { i64::MIN } else { r.end }))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn one_token_splits_the_whole_ring_as_the_connector_does() {
        // Worked out from the Spark Cassandra Connector's splitter: the driver gives (MIN, MIN)
        // for a ring of one token, cut at MIN + floor((2^64 - 1) * i / 8).
        let want = vec![
            (i64::MIN, -6917529027641081857),
            (-6917529027641081857, -4611686018427387905),
            (-4611686018427387905, -2305843009213693953),
            (-2305843009213693953, -1),
            (-1, 2305843009213693951),
            (2305843009213693951, 4611686018427387903),
            (4611686018427387903, 6917529027641081855),
            (6917529027641081855, i64::MIN),
        ];
        assert_eq!(pairs(&plan_units(&[42], 8)), want);
        assert_eq!(pairs(&plan_units(&[], 8)), want);
        assert_eq!(plan_units(&[5, 9], 1), vec![vec![TokenRange::FULL]]);
        assert_eq!(tr(0, 2).split(10), vec![tr(0, 1), tr(1, 2)]);
    }

    #[test]
    fn vnodes_split_in_proportion_and_the_wrapping_piece_is_one_unit_of_two_ranges() {
        // 16 evenly spaced tokens: each range is 1/16 of the ring. splitCount 8 gives 0.5
        // pieces per range, which Java's rint rounds to 0 (then 1); 32 gives 2.
        let tokens: Vec<i64> = (0..16)
            .map(|i: i128| (i128::from(i64::MIN) + (1 << 59) + i * (1 << 60)) as i64)
            .collect();
        let units = plan_units(&tokens, 8);
        assert_eq!(units.len(), 16);
        let p = pairs(&units);
        assert_eq!(p.len(), 17);
        assert!(p.contains(&(8646911284551352320, i64::MIN)), "{p:?}");
        assert!(p.contains(&(i64::MIN, -8646911284551352320)), "{p:?}");
        let wrap = units.iter().find(|u| u.len() == 2).unwrap();
        assert_eq!(
            wrap,
            &vec![
                tr(i64::MIN, -8646911284551352320),
                tr(8646911284551352320, i64::MAX)
            ]
        );
        let units = plan_units(&tokens, 32);
        assert_eq!(units.len(), 32);
        let p = pairs(&units);
        // The wrapping range's midpoint is MAX itself: (t15, MAX] is a unit, (MAX, t0] the
        // next one, whose part above MAX holds no token.
        assert!(p.contains(&(8646911284551352320, i64::MIN)), "{p:?}");
        assert!(p.contains(&(i64::MIN, -8646911284551352320)), "{p:?}");
    }

    #[test]
    fn pairs_are_kept_up_to_a_bound_then_only_merged_ranges() {
        let mut set = RangeSet::new();
        set.insert(tr(0, 10));
        set.insert(tr(10, 20));
        assert_eq!(set.recorded().count(), 2);
        for i in 0..MAX_PAIRS as i64 {
            set.insert(tr(100 + 2 * i, 101 + 2 * i));
        }
        // Past the bound: merged ranges only, still every token.
        assert_eq!(set.recorded().count(), set.ranges().len());
        assert!(set.recorded().count() <= MAX_PAIRS + 1);
        assert!(set.covers(tr(0, 20)));
    }

    /// Exactly [`MAX_PAIRS`] ranges are recorded as inserted (each pair Migrator may look
    /// for); the next one gives the pairs up for the merged ranges, which still cover every
    /// token recorded.
    #[test]
    fn max_pairs_are_recorded_as_inserted_and_one_more_merged() {
        let mut set = RangeSet::new();
        // Touching ranges: merged they are one, so the two records differ.
        for i in 0..MAX_PAIRS as i64 {
            set.insert(tr(10 * i, 10 * i + 10));
        }
        assert_eq!(set.recorded().count(), MAX_PAIRS);
        assert_eq!(set.recorded().next(), Some(&tr(0, 10)));
        assert_eq!(set.ranges().len(), 1);
        // The same pair again is no new pair.
        set.insert(tr(0, 10));
        assert_eq!(set.recorded().count(), MAX_PAIRS);

        let end = 10 * MAX_PAIRS as i64;
        set.insert(tr(end, end + 10));
        assert_eq!(set.recorded().collect::<Vec<_>>(), [&tr(0, end + 10)]);
        assert!(set.covers(tr(0, end + 10)));
    }

    #[test]
    fn skip_ranges_read_both_encodings_and_are_written_in_migrators() {
        let typed = serde_json::json!([
            [{"type": "long", "value": -9223372036854775808i64}, {"type": "long", "value": -4611686018427387904i64}],
            [{"type": "long", "value": "7"}, {"type": "long", "value": -9223372036854775808i64}],
            [{"type": "long", "value": 9223372036854775807i64}, {"type": "long", "value": -9223372036854775808i64}],
            [-5, 3]
        ]);
        let got = parse_skip_ranges(&typed).unwrap();
        assert_eq!(
            got,
            vec![
                tr(i64::MIN, -4611686018427387904),
                tr(7, i64::MAX),
                tr(-5, 3)
            ]
        );
        assert_eq!(
            encode_skip_ranges(&got),
            serde_json::json!([
                [{"type": "long", "value": i64::MIN}, {"type": "long", "value": -4611686018427387904i64}],
                [{"type": "long", "value": 7}, {"type": "long", "value": i64::MIN}],
                [{"type": "long", "value": -5}, {"type": "long", "value": 3}]
            ])
        );
        let full = serde_json::json!([[{"type": "long", "value": i64::MIN}, {"type": "long", "value": i64::MIN}]]);
        assert_eq!(parse_skip_ranges(&full).unwrap(), vec![TokenRange::FULL]);
        assert_eq!(encode_skip_ranges(&[TokenRange::FULL]), full);
        for (bad, says) in [
            (
                serde_json::json!([[{"type": "bigint", "value": 1}, 2]]),
                "skipTokenRanges[0]: start: a RandomPartitioner token",
            ),
            (
                serde_json::json!([[1, {"type": "long"}]]),
                "skipTokenRanges[0]: end: expected a 64-bit token, not null",
            ),
            (
                serde_json::json!([[1, 2], [3]]),
                "skipTokenRanges[1]: expected a pair",
            ),
            (
                serde_json::json!([[5, 5]]),
                "skipTokenRanges[0]: (5, 5] is empty",
            ),
            (
                serde_json::json!({"a": 1}),
                "expected a list of [start, end] token pairs, not a mapping",
            ),
        ] {
            let e = parse_skip_ranges(&bad).unwrap_err();
            assert!(e.starts_with(says), "{e}");
        }
    }

    #[test]
    fn set_merges_and_subtracts() {
        let mut s = RangeSet::new();
        s.insert(tr(0, 10));
        s.insert(tr(20, 30));
        s.insert(tr(10, 15));
        assert_eq!(s.ranges(), &[tr(0, 15), tr(20, 30)]);
        assert_eq!(
            s.missing(tr(-5, 40)),
            vec![tr(-5, 0), tr(15, 20), tr(30, 40)]
        );
        assert!(s.covers(tr(2, 12)));
        s.insert(tr(-100, 100));
        assert_eq!(s.ranges(), &[tr(-100, 100)]);
    }

    /// Any range, with the narrow ones and those touching the ends of the ring drawn often:
    /// uniform `i64` pairs almost never produce them.
    fn any_range() -> impl Strategy<Value = TokenRange> {
        let edge = prop_oneof![
            Just(i64::MIN),
            Just(i64::MIN + 1),
            Just(-1i64),
            Just(0i64),
            Just(i64::MAX - 1),
            Just(i64::MAX),
            any::<i64>(),
        ];
        prop_oneof![
            (any::<i64>(), any::<i64>())
                .prop_filter_map("empty", |(a, b)| TokenRange::new(a.min(b), a.max(b))),
            (edge.clone(), 1i64..300)
                .prop_filter_map("empty", |(a, w)| TokenRange::new(a, a.saturating_add(w))),
            (edge, 1i64..300)
                .prop_filter_map("empty", |(b, w)| TokenRange::new(b.saturating_sub(w), b)),
            Just(TokenRange::FULL),
        ]
    }

    /// Node tokens: random, clustered (adjacent tokens give ranges of width 1) and at the ends.
    fn node_tokens() -> impl Strategy<Value = Vec<i64>> {
        prop::collection::vec(
            prop_oneof![
                any::<i64>(),
                -5i64..5,
                Just(i64::MIN),
                Just(i64::MIN + 1),
                Just(i64::MAX),
                Just(i64::MAX - 1),
            ],
            0..16,
        )
    }

    fn small_range() -> impl Strategy<Value = TokenRange> {
        (-50i64..50, 1i64..20).prop_map(|(a, w)| tr(a, a + w))
    }

    proptest! {
        #[test]
        fn splitting_partitions_the_range(r in any_range(), parts in 1usize..200) {
            let pieces = r.split(parts);
            // Exactly `parts` pieces unless the range has fewer tokens than that.
            let expected = (parts as u128).min(r.width()) as usize;
            prop_assert_eq!(pieces.len(), expected);
            prop_assert_eq!(pieces[0].start, r.start);
            prop_assert_eq!(pieces.last().unwrap().end, r.end);
            for w in pieces.windows(2) {
                prop_assert_eq!(w[0].end, w[1].start);
            }
            // Nearly equal: every piece is floor or ceil of width / pieces, never empty.
            let floor = r.width() / expected as u128;
            for p in &pieces {
                prop_assert!(p.start < p.end, "empty piece {}", p);
                prop_assert!(p.width() == floor || p.width() == floor + 1,
                    "piece {} of width {} in {} split {} ways", p, p.width(), r, expected);
            }
        }

        #[test]
        fn set_is_the_union_of_inserted_ranges(inserted in prop::collection::vec(small_range(), 0..20), probe in -80i64..80) {
            let set = RangeSet::from_ranges(inserted.iter().copied());
            let in_any = inserted.iter().any(|r| r.start < probe && probe <= r.end);
            let in_set = set.ranges().iter().any(|r| r.start < probe && probe <= r.end);
            prop_assert_eq!(in_any, in_set);
            // Stored ranges are sorted, disjoint and not touching.
            for w in set.ranges().windows(2) {
                prop_assert!(w[0].end < w[1].start);
            }
        }

        #[test]
        fn missing_is_the_complement_within_the_range(inserted in prop::collection::vec(small_range(), 0..20), r in small_range()) {
            let set = RangeSet::from_ranges(inserted.iter().copied());
            let missing = set.missing(r);
            for t in (r.start + 1)..=r.end {
                let in_set = set.ranges().iter().any(|x| x.start < t && t <= x.end);
                let in_missing = missing.iter().any(|x| x.start < t && t <= x.end);
                prop_assert!(in_set != in_missing, "token {} in set {} in missing {}", t, in_set, in_missing);
            }
            let mut done = set.clone();
            for m in &missing { done.insert(*m); }
            prop_assert!(done.covers(r));
        }

        #[test]
        fn units_cover_the_ring_whatever_the_split(tokens in node_tokens(), split in 1usize..100) {
            let units = plan_units(&tokens, split);
            let mut sorted: Vec<TokenRange> = units.iter().flatten().copied().collect();
            sorted.sort();
            // Disjoint, in order, and together the whole ring.
            prop_assert_eq!(sorted[0].start, i64::MIN);
            prop_assert_eq!(sorted.last().unwrap().end, i64::MAX);
            for w in sorted.windows(2) { prop_assert_eq!(w[0].end, w[1].start); }
            // No unit crosses a node token: one replica set serves each.
            let mut ring: Vec<i64> = tokens.clone();
            ring.sort_unstable();
            ring.dedup();
            if ring.len() > 1 && split > 1 {
                for u in &units {
                    for r in u {
                        prop_assert!(!ring.iter().any(|&t| r.start < t && t < r.end), "{} crosses a node token", r);
                    }
                }
            }
        }
    }
}
