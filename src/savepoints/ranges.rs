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

impl std::fmt::Display for TokenRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {}]", self.start, self.end)
    }
}

/// Ranges of a ring given its sorted node tokens: `(t[i-1], t[i]]`, with the wrapping range
/// `(t[last], t[0]]` cut at the ends of the ring. With no tokens, the full ring.
pub fn ring_ranges(tokens: &[i64]) -> Vec<TokenRange> {
    let mut tokens = tokens.to_vec();
    tokens.sort_unstable();
    tokens.dedup();
    let Some((&first, &last)) = tokens.first().zip(tokens.last()) else {
        return vec![TokenRange::FULL];
    };
    let mut out = Vec::with_capacity(tokens.len() + 1);
    out.extend(TokenRange::new(i64::MIN, first));
    for pair in tokens.windows(2) {
        out.extend(TokenRange::new(pair[0], pair[1]));
    }
    out.extend(TokenRange::new(last, i64::MAX));
    out
}

/// Splits the ring into at least `split_count` units, each inside one node range (so one
/// replica set serves a whole unit).
pub fn plan_units(node_tokens: &[i64], split_count: usize) -> Vec<TokenRange> {
    let ranges = ring_ranges(node_tokens);
    let per_range = split_count.div_ceil(ranges.len()).max(1);
    ranges.iter().flat_map(|r| r.split(per_range)).collect()
}

/// A set of tokens held as sorted, disjoint, non-adjacent ranges. This is how completed work
/// is recorded: merged intervals stay small, and a resume with different unit boundaries still
/// skips everything done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSet {
    ranges: Vec<TokenRange>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
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

    /// Adds a range, merging it with every range it overlaps or touches.
    pub fn insert(&mut self, r: TokenRange) {
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

    #[test]
    fn ring_ranges_cover_the_ring_once() {
        let r = ring_ranges(&[10, -5, 10, 100]);
        assert_eq!(
            r,
            vec![tr(i64::MIN, -5), tr(-5, 10), tr(10, 100), tr(100, i64::MAX)]
        );
        assert_eq!(ring_ranges(&[]), vec![TokenRange::FULL]);
        assert_eq!(ring_ranges(&[i64::MIN]), vec![TokenRange::FULL]);
    }

    #[test]
    fn units_stay_inside_node_ranges() {
        let units = plan_units(&[0], 5);
        assert_eq!(units.len(), 6);
        assert!(units.iter().all(|u| u.end <= 0 || u.start >= 0));
        assert_eq!(plan_units(&[], 1), vec![TokenRange::FULL]);
        assert_eq!(tr(0, 2).split(10), vec![tr(0, 1), tr(1, 2)]);
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
            let ring = ring_ranges(&tokens);
            // Each node range is cut into the same number of pieces, as many as its tokens allow.
            let per_range = split.div_ceil(ring.len()) as u128;
            let expected: u128 = ring.iter().map(|r| per_range.min(r.width())).sum();
            prop_assert_eq!(units.len() as u128, expected);
            if ring.iter().all(|r| r.width() >= per_range) {
                prop_assert!(units.len() >= split, "{} units for splitCount {}", units.len(), split);
            }
            prop_assert_eq!(units[0].start, i64::MIN);
            prop_assert_eq!(units.last().unwrap().end, i64::MAX);
            for w in units.windows(2) { prop_assert_eq!(w[0].end, w[1].start); }
            // No unit crosses a node token: one replica set serves each.
            for u in &units {
                prop_assert!(ring.iter().any(|r| r.start <= u.start && u.end <= r.end), "{} crosses a node range", u);
            }
            let set = RangeSet::from_ranges(units);
            prop_assert!(set.covers(TokenRange::FULL));
        }
    }
}
