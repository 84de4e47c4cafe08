#!/usr/bin/env python3
"""The second reader of a node's metadata: what the DataStax Python driver (cassandra-driver),
which shares no code with drover, says of a node, its ring and a keyspace, as one JSON document.

    node_reader.py HOST PORT KEYSPACE

Output: {"local": {...system.local...}, "ring": [{"token", "host_id", "address", "port", "dc",
"rack"}], "replicas": {token: [host_id, ...]}, "keyspace": {"replication", "tables", "types",
"indexes", "durable_writes"}}. `replicas` is the driver's own placement (its token map under
the keyspace's strategy) of the range that ends at each ring token.
"""

import json
import sys

from cassandra.cluster import Cluster
from cassandra.metadata import Murmur3Token
from cassandra.policies import WhiteListRoundRobinPolicy


def main():
    host, port, ks = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cluster = Cluster([host], port=port, load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    session = cluster.connect()
    row = session.execute(
        "SELECT host_id, tokens, partitioner, release_version, data_center, rack, rpc_address,"
        " rpc_port, broadcast_address, broadcast_port FROM system.local"
    ).one()
    local = {
        "host_id": str(row.host_id),
        "tokens": sorted(row.tokens, key=int),
        "partitioner": row.partitioner,
        "release_version": row.release_version,
        "dc": row.data_center,
        "rack": row.rack,
        "rpc_address": row.rpc_address,
        "rpc_port": row.rpc_port,
        "broadcast_address": row.broadcast_address,
        "broadcast_port": row.broadcast_port,
    }
    meta = cluster.metadata
    tmap = meta.token_map
    ring = []
    for token in tmap.ring:
        h = tmap.token_to_host_owner[token]
        ring.append({
            "token": str(token.value),
            "host_id": str(h.host_id),
            "address": h.broadcast_address,
            "port": h.broadcast_port,
            "dc": h.datacenter,
            "rack": h.rack,
        })
    replicas = {}
    keyspace = None
    if ks in meta.keyspaces:
        for token in tmap.ring:
            hosts = tmap.get_replicas(ks, Murmur3Token(token.value))
            replicas[str(token.value)] = [str(h.host_id) for h in hosts]
        k = meta.keyspaces[ks]
        strategy = k.replication_strategy
        keyspace = {
            "replication": strategy.export_for_schema() if strategy else None,
            "durable_writes": k.durable_writes,
            "tables": sorted(k.tables),
            "types": sorted(k.user_types),
            "indexes": sorted(k.indexes),
        }
    json.dump({"local": local, "ring": ring, "replicas": replicas, "keyspace": keyspace}, sys.stdout)
    cluster.shutdown()


if __name__ == "__main__":
    main()
