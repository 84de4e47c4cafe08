#!/usr/bin/env python3
"""The fidelity matrix's second reader: dumps a CQL table through the DataStax Python driver
(cassandra-driver), which shares no code with drover's reader, as one JSON document.

    cql_reader.py HOST PORT KEYSPACE TABLE [CONSISTENCY]

CONSISTENCY (a level's name, e.g. ALL) is the read's; default the driver's, LOCAL_ONE. A
multi-node cluster is read at ALL so that a replica missing a write cannot hide it.

For every row (keyed by its primary key), every static and regular column gives its value and,
where the server can say, the writetime and TTL of each cell: one per simple column, one per
element of a non-frozen collection (Cassandra 5.0 answers WRITETIME/TTL of a multi-cell column
with a list), and one per field of a non-frozen UDT (`WRITETIME(c.f)`, `TTL(c.f)`). Counters have
neither. Values are canonical JSON: blobs in hex, decimals and varints as strings, floats by
`repr` (so -0.0, NaN and infinities survive), timestamps as milliseconds, empty values of types
where they are not the empty string as {"empty": true}, sets and maps in the server's order.

Output: {"types": {udt: [[field, type]]}, "columns": [{"name", "kind", "type"}], "rows": [{"key": [...], "cells": {...}, "at"}]},
rows in the order the server returns them (token, then clustering order); `at` is when the row
was asked for (seconds since the epoch) and `answered` when its page came back: the server
counted its TTLs at a moment between the two, so that TTLs, which count down, can be compared
as the moments they end.
"""

import json
import math
import sys
import time
import uuid
from decimal import Decimal

import cassandra.cqltypes as cqltypes
from cassandra import ConsistencyLevel, ReadFailure, ReadTimeout, Unavailable
from cassandra.cluster import NoHostAvailable, OperationTimedOut
from cassandra.cluster import Cluster
from cassandra.policies import FallthroughRetryPolicy
from cassandra.protocol import _ProtocolHandler
from cassandra.query import SimpleStatement
from cassandra.util import Date, Duration, OrderedMapSerializedKey, SortedSet, Time

# Empty values (zero bytes) of an int, a uuid, ... are values, not nulls: ask the driver to
# hand them back as EMPTY instead of folding them into None.
for _cls in vars(cqltypes).values():
    if isinstance(_cls, type) and issubclass(_cls, cqltypes._CassandraType):
        if not getattr(_cls, "empty_binary_ok", False):
            _cls.support_empty_values = True


def _timestamp_ms(byts, protocol_version=None):
    # Milliseconds as they are: a datetime cannot hold every timestamp Cassandra can.
    return ("ts", int.from_bytes(byts, "big", signed=True))


cqltypes.DateType.deserialize = staticmethod(_timestamp_ms)
cqltypes.TimestampType.deserialize = staticmethod(_timestamp_ms)


def canon(v):
    """A JSON value that two equal CQL values, and only they, share."""
    if v is None:
        return None
    if v is cqltypes.EMPTY:
        return {"empty": True}
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        # Beyond 2^53 a JSON reader may round: integers travel as strings.
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return repr(v)
    if isinstance(v, Decimal):
        # The scale is part of the value: 1.0 and 1.00 are different decimals.
        sign, digits, exp = v.as_tuple()
        return {"decimal": f"{'-' if sign else ''}{''.join(map(str, digits))}e{exp}"}
    if isinstance(v, (bytes, bytearray)):
        return {"hex": bytes(v).hex()}
    if isinstance(v, str):
        return v
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "ts":
        return {"ts": str(v[1])}
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, Date):
        return {"date": str(v.days_from_epoch)}
    if isinstance(v, Time):
        return {"time": str(v.nanosecond_time)}
    if isinstance(v, Duration):
        return {"duration": [v.months, v.days, v.nanoseconds]}
    if isinstance(v, OrderedMapSerializedKey):
        # Its entries as read: looking a key up would serialize it again, which the
        # milliseconds above are not made for.
        return {"map": [[canon(k), canon(x)] for k, x in v._items]}
    if isinstance(v, dict):
        return {"map": [[canon(k), canon(x)] for k, x in v.items()]}
    if isinstance(v, (SortedSet, set, frozenset)):
        return {"set": [canon(x) for x in v]}
    if hasattr(v, "_fields"):
        # A UDT: a named tuple of its fields.
        return {"udt": {f: canon(getattr(v, f)) for f in v._fields}}
    if isinstance(v, tuple):
        return {"tuple": [canon(x) for x in v]}
    if isinstance(v, list):
        return [canon(x) for x in v]
    # inet and anything else the driver hands back as a plain object.
    return {"other": str(v)}


def udt_fields(session, keyspace, typ):
    """Field names of a non-frozen UDT column's type, or None."""
    if typ.startswith("frozen<") or "<" in typ:
        return None
    row = session.execute(
        "SELECT field_names FROM system_schema.types WHERE keyspace_name = %s AND type_name = %s",
        (keyspace, typ),
    ).one()
    return list(row.field_names) if row else None


def quote(name):
    return '"' + name.replace('"', '""') + '"'


def read_rows(session, statement, keys, reads):
    rows = []
    paging_state = None
    while True:
        # Each row's moment is when its page was asked for: the server counts the TTLs it
        # returns from the start of the read, and a page of a read at ALL can come back many
        # seconds later (a node that just restarted), which, taken as the moment, would show
        # that side's TTLs as seconds too long.
        asked = time.time()
        result = session.execute(statement, paging_state=paging_state)
        # The server's moment lies between the two: a page of a node that just restarted can
        # wait seconds in its queue before the read begins (8 s seen), so both are given and
        # the comparison allows for the whole window.
        answered = time.time()
        for row in result.current_rows:
            row = list(row)
            key = [canon(v) for v in row[: len(keys)]]
            out = {}
            for (name, what, field), v in zip(reads, row[len(keys):]):
                cell = out.setdefault(name, {})
                if field is None:
                    cell[what] = canon(v)
                else:
                    cell.setdefault("fields", {}).setdefault(field, {})[what] = canon(v)
            rows.append({"key": key, "cells": out, "at": asked, "answered": answered})
        paging_state = result.paging_state
        if not paging_state:
            return rows


def main():
    host, port, keyspace, table = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    consistency = ConsistencyLevel.name_to_value[sys.argv[5]] if len(sys.argv) > 5 else None
    cluster = Cluster([host], port=port, connect_timeout=20, control_connection_timeout=20)
    session = cluster.connect()
    # The pure-Python protocol handler: the patched deserializers above are the ones used,
    # and a null element of a list (TTL(c) of a collection) is read, not refused.
    session.client_protocol_handler = _ProtocolHandler
    session.default_timeout = 120
    cols = list(
        session.execute(
            "SELECT column_name, kind, position, type, clustering_order FROM system_schema.columns "
            "WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
    )
    if not cols:
        sys.exit(f"no table {keyspace}.{table}")
    order = {"partition_key": 0, "clustering": 1, "static": 2, "regular": 3}
    cols.sort(key=lambda c: (order[c.kind], c.position, c.column_name))
    keys = [c for c in cols if c.kind in ("partition_key", "clustering")]
    cells = [c for c in cols if c.kind in ("static", "regular")]
    select = [quote(c.column_name) for c in keys]
    reads = []  # (column, what, field) per selected expression after the keys
    for c in cells:
        name = quote(c.column_name)
        select.append(name)
        reads.append((c.column_name, "v", None))
        if c.type.startswith("counter"):
            continue
        select += [f"WRITETIME({name})", f"TTL({name})"]
        reads += [(c.column_name, "wt", None), (c.column_name, "ttl", None)]
        for f in udt_fields(session, keyspace, c.type) or []:
            select += [f"WRITETIME({name}.{quote(f)})", f"TTL({name}.{quote(f)})"]
            reads += [(c.column_name, "wt", f), (c.column_name, "ttl", f)]
    statement = SimpleStatement(
        f"SELECT {', '.join(select)} FROM {quote(keyspace)}.{quote(table)}",
        fetch_size=2000,
        consistency_level=consistency,
        # No retry inside the driver: a page it asked for again (after a range read's 10 s
        # timeout) would count its TTLs from then, not from `asked`, and that side's TTLs
        # would look that much short. A failed page fails the read; it is read again whole.
        retry_policy=FallthroughRetryPolicy(),
    )
    # A read at ALL right after a node restarted can time out on the server while that node
    # catches up (hints, compaction, a loaded machine): read again until it answers, within a
    # generous deadline, rather than fail on the node's first slow minute.
    deadline = time.time() + 600
    while True:
        try:
            rows = read_rows(session, statement, keys, reads)
            break
        except (ReadTimeout, ReadFailure, Unavailable, OperationTimedOut, NoHostAvailable) as e:
            if time.time() > deadline:
                raise
            print(f"cql_reader: {e}; reading again", file=sys.stderr)
            time.sleep(2)
    types = {
        t.type_name: [[f, ft] for f, ft in zip(t.field_names, t.field_types)]
        for t in session.execute(
            "SELECT type_name, field_names, field_types FROM system_schema.types "
            "WHERE keyspace_name = %s",
            (keyspace,),
        )
    }
    json.dump(
        {
            "types": types,
            "columns": [
                {"name": c.column_name, "kind": c.kind, "type": c.type} for c in cols
            ],
            "rows": rows,
        },
        sys.stdout,
        sort_keys=True,
    )
    cluster.shutdown()


if __name__ == "__main__":
    main()
