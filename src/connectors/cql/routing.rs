//! Where a token-range read is sent. A range select binds no partition key, so the driver
//! cannot compute a token and its token-aware policy would pick any node as coordinator, which
//! then reads from the replicas on the scan's behalf. [`RangeReplicas`] sends each request to a
//! replica of the range in the local data center instead, skipping replicas the driver has no
//! connection to, so that a node going down in the middle of a unit sends the next page (or
//! the driver's own retry) to another replica rather than to the node that is gone.

use scylla::cluster::{ClusterState, NodeRef};
use scylla::policies::load_balancing::{FallbackPlan, LoadBalancingPolicy, RoutingInfo};
use scylla::routing::{Shard, Token};

/// A load-balancing plan for the reads of one token range: its replicas in `local_dc` (every
/// data center when none is set) that are connected, then those that are not, then the other
/// nodes of `local_dc` as mere coordinators. Never a node of another data center when
/// `local_dc` is set: a `LOCAL_*` consistency is counted in the coordinator's data center.
#[derive(Debug)]
pub struct RangeReplicas {
    keyspace: String,
    table: String,
    token: Token,
    local_dc: Option<String>,
}

impl RangeReplicas {
    /// The plan for a range whose replicas are those of `token` (its end).
    pub fn new(keyspace: &str, table: &str, token: i64, local_dc: Option<&str>) -> Self {
        Self {
            keyspace: keyspace.to_string(),
            table: table.to_string(),
            token: Token::new(token),
            local_dc: local_dc.map(str::to_string),
        }
    }

    fn local(&self, node: NodeRef<'_>) -> bool {
        self.local_dc
            .as_deref()
            .is_none_or(|dc| node.datacenter.as_deref() == Some(dc))
    }

    /// Every node the plan may use, best first.
    fn plan<'a>(&self, cluster: &'a ClusterState) -> Vec<NodeRef<'a>> {
        let nodes = cluster.get_nodes_info();
        // The replicas as the cluster's nodes (references into `cluster`, as the plan needs).
        let replicas: Vec<NodeRef<'a>> = cluster
            .get_token_endpoints(&self.keyspace, &self.table, self.token)
            .into_iter()
            .filter_map(|(replica, _)| nodes.iter().find(|n| n.host_id == replica.host_id))
            .filter(|n| self.local(n))
            .collect();
        let mut plan: Vec<NodeRef<'a>> = replicas
            .iter()
            .copied()
            .filter(|n| n.is_connected())
            .collect();
        plan.extend(replicas.iter().copied().filter(|n| !n.is_connected()));
        plan.extend(
            nodes
                .iter()
                .filter(|n| self.local(n) && !replicas.iter().any(|r| r.host_id == n.host_id)),
        );
        plan
    }
}

impl LoadBalancingPolicy for RangeReplicas {
    fn pick<'a>(
        &'a self,
        _request: &'a RoutingInfo<'_>,
        cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)> {
        self.plan(cluster).first().map(|n| (*n, None))
    }

    fn fallback<'a>(
        &'a self,
        _request: &'a RoutingInfo<'_>,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a> {
        Box::new(self.plan(cluster).into_iter().map(|n| (n, None)))
    }

    fn name(&self) -> String {
        "drover::RangeReplicas".into()
    }
}
