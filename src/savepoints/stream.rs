//! Positions in a source's change stream (DynamoDB Streams), kept in savepoints so that a
//! restarted replication continues after the last change it applied: neither replaying the
//! stream from its start nor losing a change.
//!
//! A stream is a tree of shards: a shard is closed after a while and its key space continues
//! in its children. A shard is either *finished* (closed and every record of it applied) or
//! has the sequence number of its last applied record. Savepoints store it as
//!
//! ```yaml
//! streamPositions:
//!   stream: arn:aws:dynamodb:...:table/orders/stream/2026-12-01T10:00:00.000
//!   since: 1764583200000          # when the replication began covering changes (epoch ms)
//!   shards: {shardId-0001: "4000000000000000000123"}
//!   finishedShards: [shardId-0000]
//! ```
//!
//! (a drover key: ScyllaDB Migrator keeps its stream positions in a lease table of the
//! Kinesis client instead, and its resume ignores keys it does not know).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Where a replication stands in one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamPositions {
    /// The stream's identifier (a DynamoDB stream ARN).
    pub stream: String,
    /// When the replication began covering the table's changes (epoch milliseconds): changes
    /// from then on must reach the target. Set before the snapshot is read.
    pub since: u64,
    /// Last applied sequence number, by shard id, of shards not finished.
    #[serde(default)]
    pub shards: BTreeMap<String, String>,
    /// Shards closed and applied to their end.
    #[serde(default)]
    pub finished_shards: BTreeSet<String>,
}

impl StreamPositions {
    /// Positions at the start of a replication of `stream`: nothing applied yet.
    pub fn start(stream: impl Into<String>, since: u64) -> Self {
        Self {
            stream: stream.into(),
            since,
            ..Self::default()
        }
    }

    /// Records that the record `sequence` of `shard` (and all before it) is applied.
    pub fn applied(&mut self, shard: &str, sequence: &str) {
        if self.finished_shards.contains(shard) {
            return;
        }
        match self.shards.get_mut(shard) {
            Some(old) if compare_sequences(old, sequence) != Ordering::Less => {}
            Some(old) => *old = sequence.to_string(),
            None => {
                self.shards.insert(shard.to_string(), sequence.to_string());
            }
        }
    }

    /// Records that `shard` is closed and applied to its end.
    pub fn finished(&mut self, shard: &str) {
        self.shards.remove(shard);
        self.finished_shards.insert(shard.to_string());
    }

    /// Adds what `other` records. Positions of another stream replace these: the newer
    /// document (`other`) names the stream the replication follows.
    pub fn merge(&mut self, other: &StreamPositions) {
        if other.stream != self.stream {
            *self = other.clone();
            return;
        }
        self.since = self.since.min(other.since);
        for shard in &other.finished_shards {
            self.finished(shard);
        }
        for (shard, seq) in &other.shards {
            self.applied(shard, seq);
        }
    }
}

/// Orders two sequence numbers. They are decimal strings of up to 40 digits (beyond 128
/// bits for some), so they are compared by length, then digit by digit.
pub fn compare_sequences(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_compare_as_numbers_of_any_length() {
        assert_eq!(compare_sequences("9", "10"), Ordering::Less);
        assert_eq!(
            compare_sequences(
                "400000000000000000000000000000000000001",
                "399999999999999999999999999999999999999"
            ),
            Ordering::Greater
        );
        assert_eq!(compare_sequences("0012", "12"), Ordering::Equal);
    }

    #[test]
    fn positions_only_move_forward_and_finished_shards_stay_finished() {
        let mut p = StreamPositions::start("arn:s", 5);
        p.applied("a", "100");
        p.applied("a", "99");
        assert_eq!(p.shards["a"], "100");
        p.finished("a");
        p.applied("a", "200");
        assert!(p.shards.is_empty());
        assert!(p.finished_shards.contains("a"));

        let mut older = StreamPositions::start("arn:s", 3);
        older.applied("a", "50");
        older.applied("b", "7");
        older.merge(&p);
        assert_eq!(older.since, 3);
        assert_eq!(older.shards, BTreeMap::from([("b".into(), "7".into())]));
        assert!(older.finished_shards.contains("a"));

        // Another stream: the newer document's positions win whole.
        let other = StreamPositions::start("arn:t", 9);
        older.merge(&other);
        assert_eq!(older, other);
    }
}
