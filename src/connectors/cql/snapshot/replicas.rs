//! Which nodes' snapshots a snapshot read takes (`bulkReadConsistency`): the fewest nodes that
//! hold, for every token range, as many replicas as the consistency asks for. At `ONE` a range
//! is read from one replica that may be missing no write the cluster knows of: a node some
//! other node holds hints for is passed over, and a range whose replicas all are (or whose
//! hints cannot all be seen) is read from every replica that answers, merged.

use std::collections::{BTreeSet, HashMap};

use scylla::client::session::Session;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::unprepared::Statement;

use super::super::config::BulkReadConsistency;

/// A node of the source cluster as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its address (as the cluster reports it).
    pub address: String,
    /// Whether it is in the job's `localDC` (or no `localDC` was given).
    pub local: bool,
    /// Whether it answered the check (its hints and settings were read).
    pub answered: bool,
    /// Why its data may lack writes (hints held for it), when it may.
    pub suspect: Option<String>,
}

/// The nodes to read and what the plan had to fall back on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Indexes of the nodes whose snapshots are read, in the order of `nodes`.
    pub read: Vec<usize>,
    /// Ranges read from every replica that answered because none could be trusted alone
    /// (`ONE` only).
    pub fallback_ranges: usize,
    /// Ranges of the ring.
    pub ranges: usize,
}

/// What the check of the cluster found: its nodes, the replicas (indexes into `nodes`) of each
/// range of its ring, and, when the hints of some node could not be seen, why.
#[derive(Debug, Clone)]
pub struct Survey {
    pub nodes: Vec<Node>,
    pub ranges: Vec<Vec<usize>>,
    pub hints_unseen: Option<String>,
}

/// Chooses the nodes to read: every range gets the replicas `consistency` asks for among
/// them, and the set is grown greedily by the node that gives the most ranges still short
/// (a node of the local data center first, then the lowest index), so that at a replication
/// factor equal to the number of nodes `ONE` reads one node.
pub fn choose(survey: &Survey, consistency: BulkReadConsistency) -> Result<Choice, String> {
    let nodes = &survey.nodes;
    // Nothing to choose from must not read as nothing to read: the copy would be empty.
    if survey.ranges.is_empty() {
        return Err("the driver knows no token ring of the source: no node would be read".into());
    }
    // For each range: the nodes that may serve it and how many of them are needed.
    let mut wants: Vec<(Vec<usize>, usize)> = Vec::with_capacity(survey.ranges.len());
    let mut fallback_ranges = 0;
    for replicas in &survey.ranges {
        if replicas.is_empty() {
            return Err(
                "a token range has no replica in the keyspace's replication as the driver knows it"
                    .into(),
            );
        }
        let answering: Vec<usize> = replicas
            .iter()
            .copied()
            .filter(|&n| nodes[n].answered)
            .collect();
        let silent = || {
            replicas
                .iter()
                .filter(|&&n| !nodes[n].answered)
                .map(|&n| nodes[n].address.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if answering.is_empty() {
            return Err(format!(
                "no replica of a token range answers (replicas {}): it cannot be read",
                silent()
            ));
        }
        match consistency {
            BulkReadConsistency::All => {
                if answering.len() < replicas.len() {
                    return Err(format!(
                        "bulkReadConsistency ALL reads every replica, and {} does not answer; wait until it is up, or read at QUORUM or ONE",
                        silent()
                    ));
                }
                let n = answering.len();
                wants.push((answering, n));
            }
            BulkReadConsistency::Quorum => {
                let quorum = replicas.len() / 2 + 1;
                if answering.len() < quorum {
                    return Err(format!(
                        "bulkReadConsistency QUORUM needs {quorum} of the {} replicas of a token range, and {} do not answer",
                        replicas.len(),
                        silent()
                    ));
                }
                wants.push((answering, quorum));
            }
            BulkReadConsistency::One => {
                let clean: Vec<usize> = if survey.hints_unseen.is_some() {
                    Vec::new()
                } else {
                    answering
                        .iter()
                        .copied()
                        .filter(|&n| nodes[n].suspect.is_none())
                        .collect()
                };
                if clean.is_empty() {
                    fallback_ranges += 1;
                    let n = answering.len();
                    wants.push((answering, n));
                } else {
                    wants.push((clean, 1));
                }
            }
        }
    }
    let mut read = BTreeSet::new();
    loop {
        // How many ranges still short each node would serve.
        let mut gain: HashMap<usize, usize> = HashMap::new();
        for (candidates, need) in &wants {
            let have = candidates.iter().filter(|n| read.contains(*n)).count();
            if have < *need {
                for &n in candidates.iter().filter(|n| !read.contains(*n)) {
                    *gain.entry(n).or_default() += 1;
                }
            }
        }
        let Some((&best, _)) = gain
            .iter()
            .max_by_key(|&(&n, &g)| (nodes[n].local, g, std::cmp::Reverse(n)))
        else {
            break;
        };
        read.insert(best);
    }
    Ok(Choice {
        read: read.into_iter().collect(),
        fallback_ranges,
        ranges: survey.ranges.len(),
    })
}

/// A node started this recently (seconds) may lack writes that no node lists hints for yet: a
/// node lists its hints for another only from closed hint files, and it closes the one it
/// writes for a node that was down within about 10 s of seeing it up (`hints_flush_period`).
const JUST_STARTED_S: i64 = 30;

/// When each node last started (its gossip generation, seconds since the epoch), as the node
/// `statement` is sent to sees it; `None` when it cannot say.
async fn start_times(session: &Session, statement: Statement) -> Option<HashMap<uuid::Uuid, i64>> {
    let rows = session
        .query_unpaged(statement, ())
        .await
        .ok()?
        .into_rows_result()
        .ok()?;
    Some(
        rows.rows::<(Option<String>, Option<i32>)>()
            .ok()?
            .flatten()
            .filter_map(|(id, generation)| Some((id?.parse().ok()?, i64::from(generation?))))
            .collect(),
    )
}

/// Reads the cluster: its nodes, the replicas of each range of `keyspace.table`, from each
/// node the hints it holds for others (`system_views.pending_hints`) and whether it keeps
/// hints at all (`system_views.settings`), and when each node started
/// (`system_views.gossip_info`).
pub async fn survey(
    session: &Session,
    keyspace: &str,
    table: &str,
    local_dc: Option<&str>,
) -> Survey {
    let state = session.get_cluster_state();
    // In address order, so that the plan is the same whichever node the driver met first.
    let mut infos = state.get_nodes_info().to_vec();
    infos.sort_by_key(|n| n.address);
    let index: HashMap<uuid::Uuid, usize> = infos
        .iter()
        .enumerate()
        .map(|(i, n)| (n.host_id, i))
        .collect();
    let mut nodes: Vec<Node> = infos
        .iter()
        .map(|n| Node {
            address: n.address.ip().to_string(),
            local: local_dc.is_none_or(|dc| n.datacenter.as_deref() == Some(dc)),
            answered: false,
            suspect: None,
        })
        .collect();
    let mut hints_unseen = Vec::new();
    let mut no_hints_for_dc: Vec<String> = Vec::new();
    let mut started: Option<HashMap<uuid::Uuid, i64>> = None;
    for (i, info) in infos.iter().enumerate() {
        let asked = |cql: &str| {
            let mut statement = Statement::new(cql);
            statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
                NodeIdentifier::Node(info.clone()),
                None,
            )));
            statement
        };
        let hints = match session
            .query_unpaged(
                asked("SELECT host_id, files FROM system_views.pending_hints"),
                (),
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_rows_result().map_err(|e| e.to_string()))
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::info!(node = %nodes[i].address, error = %e, "bulk read: the node does not answer; its snapshot is not read");
                hints_unseen.push(format!("{} does not answer", nodes[i].address));
                continue;
            }
        };
        nodes[i].answered = true;
        if started.is_none() {
            started = start_times(
                session,
                asked("SELECT host_id, generation FROM system_views.gossip_info"),
            )
            .await;
        }
        if let Ok(rows) = hints.rows::<(uuid::Uuid, Option<i32>)>() {
            for (held_for, files) in rows.flatten() {
                if files.unwrap_or(0) == 0 {
                    continue;
                }
                if let Some(&n) = index.get(&held_for) {
                    let by = nodes[i].address.clone();
                    nodes[n]
                        .suspect
                        .get_or_insert_with(|| format!("{by} holds hints for it"));
                }
            }
        }
        let settings = session
            .query_unpaged(
                asked(
                    "SELECT name, value FROM system_views.settings WHERE name IN ('hinted_handoff_enabled', 'hinted_handoff_disabled_datacenters')",
                ),
                (),
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_rows_result().map_err(|e| e.to_string()));
        match settings {
            Ok(rows) => {
                for (name, value) in rows
                    .rows::<(String, Option<String>)>()
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let value = value.unwrap_or_default();
                    match name.as_str() {
                        "hinted_handoff_enabled" if value.trim() != "true" => {
                            hints_unseen.push(format!(
                                "{} keeps no hints (hinted_handoff_enabled: {value})",
                                nodes[i].address
                            ))
                        }
                        "hinted_handoff_disabled_datacenters" => no_hints_for_dc.extend(
                            value
                                .trim_matches(['[', ']'])
                                .split(',')
                                .map(|dc| dc.trim().to_string())
                                .filter(|dc| !dc.is_empty()),
                        ),
                        _ => {}
                    }
                }
            }
            Err(e) => hints_unseen.push(format!(
                "the hint settings of {} could not be read: {e}",
                nodes[i].address
            )),
        }
    }
    let now = chrono::Utc::now().timestamp();
    for (node, info) in nodes.iter_mut().zip(infos.iter()) {
        if let Some(up_for) = started
            .as_ref()
            .and_then(|s| s.get(&info.host_id))
            .map(|&at| now - at)
            && up_for < JUST_STARTED_S
        {
            node.suspect.get_or_insert_with(|| {
                format!("started {up_for} s ago: hints for it may not be listed yet")
            });
        }
        if let Some(dc) = &info.datacenter
            && no_hints_for_dc.contains(dc)
        {
            node.suspect
                .get_or_insert_with(|| format!("no hints are kept for data center {dc}"));
        }
    }
    let locator = state.replica_locator();
    let ranges = locator
        .ring()
        .iter()
        .map(|(token, _)| {
            let mut replicas: Vec<usize> = state
                .get_token_endpoints(keyspace, table, *token)
                .into_iter()
                .filter_map(|(node, _)| index.get(&node.host_id).copied())
                .collect();
            replicas.sort_unstable();
            replicas.dedup();
            replicas
        })
        .collect();
    Survey {
        nodes,
        ranges,
        hints_unseen: (!hints_unseen.is_empty()).then(|| hints_unseen.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<Node> {
        (0..n)
            .map(|i| Node {
                address: format!("10.0.0.{}", i + 1),
                local: true,
                answered: true,
                suspect: None,
            })
            .collect()
    }

    /// Three nodes at RF 3 (every range on every node) with `vnodes` ranges each.
    fn rf3_on_3(vnodes: usize) -> Survey {
        Survey {
            nodes: nodes(3),
            ranges: (0..3 * vnodes).map(|_| vec![0, 1, 2]).collect(),
            hints_unseen: None,
        }
    }

    /// Six nodes at RF 3: range `r` on nodes r, r+1, r+2 (mod 6), two rounds of the ring.
    fn rf3_on_6() -> Survey {
        Survey {
            nodes: nodes(6),
            ranges: (0..12)
                .map(|r| {
                    let mut v = vec![r % 6, (r + 1) % 6, (r + 2) % 6];
                    v.sort_unstable();
                    v
                })
                .collect(),
            hints_unseen: None,
        }
    }

    fn read(s: &Survey, c: BulkReadConsistency) -> Vec<usize> {
        choose(s, c).unwrap().read
    }

    #[test]
    fn one_reads_a_single_node_when_it_holds_every_range() {
        let s = rf3_on_3(16);
        assert_eq!(read(&s, BulkReadConsistency::One), vec![0]);
        assert_eq!(read(&s, BulkReadConsistency::Quorum), vec![0, 1]);
        assert_eq!(read(&s, BulkReadConsistency::All), vec![0, 1, 2]);
    }

    #[test]
    fn every_range_gets_its_count_of_replicas_among_the_nodes_read() {
        let s = rf3_on_6();
        for (c, need) in [
            (BulkReadConsistency::One, 1),
            (BulkReadConsistency::Quorum, 2),
            (BulkReadConsistency::All, 3),
        ] {
            let chosen = read(&s, c);
            for replicas in &s.ranges {
                let have = replicas.iter().filter(|n| chosen.contains(n)).count();
                assert!(have >= need, "{c:?}: {replicas:?} has {have} in {chosen:?}");
            }
        }
        // Two nodes three apart hold every range once.
        assert_eq!(read(&s, BulkReadConsistency::One).len(), 2);
        assert_eq!(read(&s, BulkReadConsistency::All).len(), 6);
    }

    #[test]
    fn one_passes_over_a_node_others_hold_hints_for() {
        let mut s = rf3_on_3(4);
        s.nodes[0].suspect = Some("10.0.0.3 holds hints for it".into());
        assert_eq!(read(&s, BulkReadConsistency::One), vec![1]);
        s.nodes[1].suspect = Some("10.0.0.3 holds hints for it".into());
        let c = choose(&s, BulkReadConsistency::One).unwrap();
        assert_eq!((c.read, c.fallback_ranges), (vec![2], 0));
        // Every replica may lack writes: each range is read from all of them, merged.
        s.nodes[2].suspect = Some("10.0.0.1 holds hints for it".into());
        let c = choose(&s, BulkReadConsistency::One).unwrap();
        assert_eq!(
            (c.read, c.fallback_ranges, c.ranges),
            (vec![0, 1, 2], 12, 12)
        );
    }

    #[test]
    fn hints_that_cannot_be_seen_make_one_merge_every_replica_that_answers() {
        let mut s = rf3_on_3(2);
        s.nodes[1].answered = false;
        s.hints_unseen = Some("10.0.0.2 does not answer".into());
        let c = choose(&s, BulkReadConsistency::One).unwrap();
        assert_eq!((c.read, c.fallback_ranges), (vec![0, 2], 6));
        assert_eq!(read(&s, BulkReadConsistency::Quorum), vec![0, 2]);
        let all = choose(&s, BulkReadConsistency::All).unwrap_err();
        assert!(all.contains("10.0.0.2") && all.contains("ALL"), "{all}");
        s.nodes[2].answered = false;
        let quorum = choose(&s, BulkReadConsistency::Quorum).unwrap_err();
        assert!(quorum.contains("needs 2 of the 3"), "{quorum}");
        assert_eq!(read(&s, BulkReadConsistency::One), vec![0]);
        s.nodes[0].answered = false;
        assert!(choose(&s, BulkReadConsistency::One).is_err());
    }

    #[test]
    fn a_ring_or_a_range_without_replicas_is_refused_not_read_as_empty() {
        let mut s = rf3_on_3(1);
        s.ranges[1].clear();
        let e = choose(&s, BulkReadConsistency::One).unwrap_err();
        assert!(e.contains("no replica"), "{e}");
        s.ranges.clear();
        let e = choose(&s, BulkReadConsistency::All).unwrap_err();
        assert!(e.contains("no token ring"), "{e}");
    }

    #[test]
    fn a_node_of_the_local_data_center_is_read_first() {
        let mut s = rf3_on_3(2);
        s.nodes[0].local = false;
        s.nodes[1].local = false;
        assert_eq!(read(&s, BulkReadConsistency::One), vec![2]);
    }
}
