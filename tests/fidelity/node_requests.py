#!/usr/bin/env python3
"""What each node of a cluster did for one table, from the node's own metrics: how many range
scans, single-partition reads and writes it coordinated, and how many it executed locally as a
replica. Read through the DataStax Python driver from Cassandra's node-local virtual tables
(`system_views.coordinator_scan_latency`, `local_scan_latency`, and the `read` and `write`
pairs), one connection per node, so that no request of drover's own code is involved.

    node_requests.py KEYSPACE TABLE HOST:PORT...

Output: {"HOST:PORT": {"coordinator_scan": n, "local_scan": n, "coordinator_read": n,
"local_read": n, "coordinator_write": n, "local_write": n}} — counts since the table was made
(or the node started).

At replication factor 1 the two counts of a kind are equal on every node exactly when every
request went to the replica of its range: a request sent to another node is counted as
coordinated there and executed on the replica.
"""

import json
import sys

from cassandra.cluster import Cluster
from cassandra.policies import WhiteListRoundRobinPolicy

KINDS = ["scan", "read", "write"]


def counts(addr, keyspace, table):
    host, port = addr.rsplit(":", 1)
    # The node itself answers: its virtual tables hold its own metrics only.
    cluster = Cluster(
        [host],
        port=int(port),
        load_balancing_policy=WhiteListRoundRobinPolicy([host]),
        connect_timeout=20,
        control_connection_timeout=20,
    )
    try:
        session = cluster.connect()
        out = {}
        for kind in KINDS:
            for side in ("coordinator", "local"):
                row = session.execute(
                    f"SELECT count FROM system_views.{side}_{kind}_latency "
                    "WHERE keyspace_name = %s AND table_name = %s",
                    (keyspace, table),
                ).one()
                out[f"{side}_{kind}"] = row.count if row else 0
        return out
    finally:
        cluster.shutdown()


def main():
    keyspace, table, addrs = sys.argv[1], sys.argv[2], sys.argv[3:]
    print(json.dumps({a: counts(a, keyspace, table) for a in addrs}))


if __name__ == "__main__":
    main()
