//! The target ring, watched around each unit's imports. A unit's SSTables are built for the
//! replicas of the ring as it is, and imported on them; a node that joins, leaves or moves
//! takes its new ranges by streaming them from the replicas at one moment, so what is imported
//! on the old replicas after that moment never reaches it, and is not read once it owns the
//! range: a silent gap. CQL writes have no such gap (coordinators also write to a range's
//! pending replicas), SSTable imports do.
//!
//! So the load refuses to start while the ring changes, and each unit reads the ring's state
//! (`system_views.gossip_info`, one query) before its imports and after them: a unit is
//! recorded done only if the ring was the planned one on both sides of its imports. Otherwise
//! the unit fails, which stops the job at once, naming the node and what it does; the next run
//! of the same job, once the ring is stable, builds its SSTables for the new ring and goes on
//! from the savepoint. A node streams, when it joins, what was imported before, so the units
//! recorded done are whole on the new ring too.

use std::collections::BTreeMap;
use std::time::Duration;

use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

/// What the ring's gossip says of a node, reduced to what a load cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Member {
    /// It owns its tokens (NORMAL), also while it is down (`shutdown`): a node that stopped
    /// is not a topology change, and the load waits for its drover.
    Owns,
    /// It left the ring or was removed, or has no status yet (gossip knows of a node that
    /// contacted it before it announces anything, also one that then fails to start).
    Gone,
    /// Its ownership is changing: the gossip status word (BOOT, LEAVING, MOVING…).
    Changing(String),
}

impl Member {
    fn of(status: &str) -> Self {
        let word = status.split(',').next().unwrap_or("").trim();
        match word {
            "NORMAL" | "shutdown" => Self::Owns,
            "LEFT" | "removed" | "" => Self::Gone,
            other => Self::Changing(other.to_string()),
        }
    }
}

/// A digest of the token ring the driver places partitions by (each token and its node's
/// address). It is part of the upload ids: a load resumed on a changed ring uploads its units
/// anew, instead of being told by a node that it imported a unit already — an import made for
/// the old ring, which lacks the partitions the node gained since (a node that left hands its
/// ranges to the others). On the same ring the ids stay the same, so nothing is imported twice.
pub(super) fn digest(session: &Session) -> String {
    let state = session.get_cluster_state();
    let mut text = String::new();
    for (token, node) in state.replica_locator().ring().iter() {
        text.push_str(&format!("{} {}\n", token.value(), node.address.ip()));
    }
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

/// What a gossip status word means, in the operator's words.
fn doing(word: &str) -> String {
    match word {
        "BOOT" => "is joining the ring (BOOT)".into(),
        "BOOT_REPLACE" | "hibernate" => format!("is replacing another node ({word})"),
        "LEAVING" => "is leaving the ring (LEAVING)".into(),
        "MOVING" => "is moving its token (MOVING)".into(),
        "removing" => "is being removed from the ring (removing)".into(),
        other => format!("is in gossip state {other}"),
    }
}

/// The ring as the load was planned on.
pub(super) struct Ring {
    planned: BTreeMap<String, Member>,
}

/// Gossip's view of every node: address → what it does. `None` where the cluster has no
/// `system_views.gossip_info` (before Cassandra 4.1, ScyllaDB).
async fn read(session: &Session) -> Result<Option<BTreeMap<String, Member>>, String> {
    let rows = match session
        .query_unpaged(
            "SELECT address, status, status_with_port FROM system_views.gossip_info",
            (),
        )
        .await
    {
        Ok(r) => r,
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let rows = rows.into_rows_result().map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for row in rows
        .rows::<(std::net::IpAddr, Option<String>, Option<String>)>()
        .map_err(|e| e.to_string())?
    {
        let (address, status, with_port) = row.map_err(|e| e.to_string())?;
        let status = with_port.or(status).unwrap_or_default();
        out.insert(address.to_string(), Member::of(&status));
    }
    Ok(Some(out))
}

/// Whether the node refused the query as invalid: the query is, on every cluster that has the
/// table, so the table is not there (the driver's error kind, not its words, which differ
/// between servers and versions).
fn absent(e: &ExecutionError) -> bool {
    matches!(
        e,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::Invalid, _))
    )
}

/// What changed between the planned ring and `now`, one phrase per node; empty when nothing
/// that moves a token range did.
fn changes(planned: &BTreeMap<String, Member>, now: &BTreeMap<String, Member>) -> Vec<String> {
    let mut out = Vec::new();
    for (address, member) in now {
        match (planned.get(address), member) {
            (_, Member::Changing(word)) => out.push(format!("{address} {}", doing(word))),
            (Some(Member::Owns), Member::Owns) => {}
            (_, Member::Owns) => out.push(format!("{address} joined the ring")),
            (Some(Member::Owns), Member::Gone) => out.push(format!("{address} left the ring")),
            (_, Member::Gone) => {}
        }
    }
    for (address, member) in planned {
        if *member == Member::Owns && !now.contains_key(address) {
            out.push(format!("{address} left the ring"));
        }
    }
    out
}

impl Ring {
    /// The target ring now; refused while a node joins, leaves or moves.
    pub(super) async fn plan(session: &Session) -> Result<Self, String> {
        let planned = match read(session).await {
            Ok(Some(ring)) => ring,
            Ok(None) => {
                tracing::warn!(
                    "bulk write: the target has no system_views.gossip_info (Cassandra 4.1 or \
                     later has it), so a node joining, leaving or moving during the load cannot \
                     be seen: do not change the target ring's topology until the load ends"
                );
                return Ok(Self {
                    planned: BTreeMap::new(),
                });
            }
            Err(e) => return Err(format!("reading the target ring's state: {e}")),
        };
        let changing: Vec<String> = planned
            .iter()
            .filter_map(|(address, member)| match member {
                Member::Changing(word) => Some(format!("{address} {}", doing(word))),
                _ => None,
            })
            .collect();
        if !changing.is_empty() {
            return Err(format!(
                "the target ring is changing: {}. An SSTable load cannot follow a topology \
                 change; start it once every node is up and normal (nodetool status: UN)",
                changing.join("; ")
            ));
        }
        Ok(Self { planned })
    }

    /// Whether the ring is still the planned one: the phrases of what changed, as an error.
    pub(super) async fn check(&self, session: &Session) -> Result<(), String> {
        if self.planned.is_empty() {
            return Ok(());
        }
        // The state is read from any node; a request that fails is tried again a few times
        // (a node of the target may be down) before the unit fails for want of it.
        let mut tries = 0;
        let now = loop {
            match read(session).await {
                Ok(Some(now)) => break now,
                Ok(None) => return Ok(()),
                Err(e) if tries >= 4 => {
                    return Err(format!(
                        "cannot tell whether the target ring changed during the imports: {e}"
                    ));
                }
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        let changed = changes(&self.planned, &now);
        if changed.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the target ring changed during the load: {}. SSTables imported while a node joins, \
             leaves or moves can miss the node that takes their ranges, so this unit is not \
             recorded done. Submit the job again once every node is up and normal: it goes on \
             from its savepoint with SSTables built for the new ring (and a drover in \
             target.bulkSidecars beside each new node)",
            changed.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(members: &[(&str, &str)]) -> BTreeMap<String, Member> {
        members
            .iter()
            .map(|(a, s)| (a.to_string(), Member::of(s)))
            .collect()
    }

    #[test]
    fn only_a_query_refused_as_invalid_means_the_cluster_has_no_gossip_table() {
        let db = |e: DbError| {
            ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, "text".into()))
        };
        assert!(absent(&db(DbError::Invalid)));
        // A node too busy to answer, or a user the read is not allowed to, is no answer: the
        // load must not go on blind because of them.
        assert!(!absent(&db(DbError::Unauthorized)));
        assert!(!absent(&db(DbError::ServerError)));
        assert!(!absent(&ExecutionError::EmptyPlan));
    }

    #[test]
    fn a_stopped_node_is_no_change_but_a_joining_leaving_or_moving_one_is() {
        let planned = ring(&[("10.0.0.1", "NORMAL,-1"), ("10.0.0.2", "NORMAL,5")]);
        let stopped = ring(&[("10.0.0.1", "NORMAL,-1"), ("10.0.0.2", "shutdown,true")]);
        assert!(changes(&planned, &stopped).is_empty());
        let joining = ring(&[
            ("10.0.0.1", "NORMAL,-1"),
            ("10.0.0.2", "NORMAL,5"),
            ("10.0.0.3", "BOOT,9"),
        ]);
        assert_eq!(
            changes(&planned, &joining),
            ["10.0.0.3 is joining the ring (BOOT)"]
        );
        let leaving = ring(&[("10.0.0.1", "LEAVING,-1"), ("10.0.0.2", "NORMAL,5")]);
        assert_eq!(
            changes(&planned, &leaving),
            ["10.0.0.1 is leaving the ring (LEAVING)"]
        );
        let moving = ring(&[("10.0.0.1", "NORMAL,-1"), ("10.0.0.2", "MOVING,7")]);
        assert_eq!(
            changes(&planned, &moving),
            ["10.0.0.2 is moving its token (MOVING)"]
        );
    }

    #[test]
    fn a_change_that_ended_between_two_checks_is_seen_too() {
        let planned = ring(&[("10.0.0.1", "NORMAL,-1"), ("10.0.0.2", "NORMAL,5")]);
        let joined = ring(&[
            ("10.0.0.1", "NORMAL,-1"),
            ("10.0.0.2", "NORMAL,5"),
            ("10.0.0.3", "NORMAL,9"),
        ]);
        assert_eq!(changes(&planned, &joined), ["10.0.0.3 joined the ring"]);
        let left = ring(&[("10.0.0.1", "NORMAL,-1"), ("10.0.0.2", "LEFT,5,1700000000")]);
        assert_eq!(changes(&planned, &left), ["10.0.0.2 left the ring"]);
        let gone = ring(&[("10.0.0.1", "NORMAL,-1")]);
        assert_eq!(changes(&planned, &gone), ["10.0.0.2 left the ring"]);
        // A node that had left before the plan stays out of it.
        let old = ring(&[("10.0.0.1", "NORMAL,-1"), ("10.0.0.9", "LEFT,3,1")]);
        assert!(changes(&old, &ring(&[("10.0.0.1", "NORMAL,-1")])).is_empty());
        // A node gossip heard of that announced nothing yet (one that failed to start after
        // its first contact) is not a member.
        let heard = ring(&[
            ("10.0.0.1", "NORMAL,-1"),
            ("10.0.0.2", "NORMAL,5"),
            ("10.0.0.3", ""),
        ]);
        assert!(changes(&planned, &heard).is_empty());
    }
}
