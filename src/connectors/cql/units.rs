//! Units of a CQL table: token ranges of the ring, planned so that one replica set serves a
//! whole unit, recorded complete as `skipTokenRanges`.

use crate::connectors::seam::{Plan, Unit};
use crate::savepoints::{self, ranges::RangeSet, ranges::TokenRange, ranges::plan_units};

/// What is left of one planned token range: the pieces not yet complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUnit {
    /// Disjoint pieces, in ring order.
    pub pieces: Vec<TokenRange>,
}

impl std::fmt::Display for TokenUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.pieces.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl Unit for TokenUnit {
    fn record(&self, done: &mut savepoints::Progress) {
        for p in &self.pieces {
            done.ranges_mut(&savepoints::TOKEN_RANGES).insert(*p);
        }
    }

    /// `start:end` of each piece, joined by `,` (see [`parse_key`]).
    fn key(&self) -> String {
        self.pieces
            .iter()
            .map(|p| format!("{}:{}", p.start, p.end))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The pieces of a [`TokenUnit`]'s key.
pub fn parse_key(key: &str) -> Option<Vec<TokenRange>> {
    key.split(',')
        .map(|p| {
            let (a, b) = p.split_once(':')?;
            TokenRange::new(a.parse().ok()?, b.parse().ok()?)
        })
        .collect()
}

/// Splits the ring of `node_tokens` into `split_count` units (at least one per node range)
/// and leaves out what `done` covers: units entirely done are counted skipped.
pub fn plan(node_tokens: &[i64], split_count: usize, done: &RangeSet) -> Plan<TokenUnit> {
    let units = plan_units(node_tokens, split_count.max(1));
    let mut plan = Plan {
        total: units.len() as u64,
        skipped: 0,
        work: Vec::new(),
    };
    for unit in units {
        let pieces: Vec<TokenRange> = unit.into_iter().flat_map(|r| done.missing(r)).collect();
        if pieces.is_empty() {
            plan.skipped += 1;
        } else {
            plan.work.push(TokenUnit { pieces });
        }
    }
    plan
}

/// The node tokens of the ring `session` sees.
pub fn ring_tokens(session: &scylla::client::session::Session) -> Vec<i64> {
    session
        .get_cluster_state()
        .replica_locator()
        .ring()
        .iter()
        .map(|(t, _)| t.value())
        .collect()
}
