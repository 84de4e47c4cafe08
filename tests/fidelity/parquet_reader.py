#!/usr/bin/env python3
"""The fidelity matrix's reader of drover's Parquet exports: pyarrow, which shares no code with
drover, reads every file of an export and writes the same JSON document `cql_reader.py` writes
for a table, so that the export can be held against the source table cell by cell.

    parquet_reader.py DIR SOURCE_DUMP

DIR holds the export's files; SOURCE_DUMP is `cql_reader.py`'s document of the source table,
for its columns' CQL types (and its UDTs'): a Parquet file says `list`, not whether it was a
CQL list, set or vector, and `string`, not whether it was a decimal. Values are put in the same
canonical form as `cql_reader.py` puts them, from the Arrow types docs/parquet.md gives each CQL
type. `__migrator_meta_<c>_writetime` and `_ttl` become the cell's writetime and TTL (and each
non-frozen UDT field's, from its entry of the list). Each row's `at` is the moment the export
read it (`drover.readAtMillis` of its file), since TTLs count from then.
"""

import glob
import json
import os
import sys
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

META = "__migrator_meta_"


def split_args(s):
    """`a, b<c, d>, e` into its top-level parts."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse(t):
    """A CQL type string as (name, [argument types]), frozen<> dropped."""
    t = t.strip()
    if "<" not in t:
        return (t, [])
    name, rest = t.split("<", 1)
    args = split_args(rest[:-1])
    if name == "frozen":
        return parse(args[0])
    return (name, args)


def ints_only(arrow_type):
    """The Arrow type with dates, times and timestamps as the integers they hold (a date in
    year 10000 has no Python form)."""
    t = arrow_type
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_time64(t) or pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, ints_only(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(pa.field(t.value_field.name, ints_only(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field(t.value_field.name, ints_only(t.value_type)), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(ints_only(t.key_type), ints_only(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, ints_only(f.type)) for f in t])
    return t


class Reader:
    def __init__(self, types):
        self.types = types

    def canon(self, v, t):
        """`v` (pyarrow's Python value, dates and times as integers) in cql_reader's form."""
        if v is None:
            return None
        name, args = parse(t)
        if name in ("ascii", "text", "varchar"):
            return v
        if name in ("bigint", "int", "smallint", "tinyint", "counter"):
            return str(v)
        if name == "varint":
            return str(int(v))
        if name == "decimal":
            sign, digits, exp = Decimal(v).as_tuple()
            return {"decimal": f"{'-' if sign else ''}{''.join(map(str, digits))}e{exp}"}
        if name in ("float", "double"):
            return "NaN" if v != v else repr(float(v))
        if name == "boolean":
            return v
        if name == "blob":
            return {"hex": bytes(v).hex()}
        if name in ("uuid", "timeuuid", "inet"):
            return str(v)
        if name == "date":
            return {"date": str(v)}
        if name == "time":
            return {"time": str(v)}
        if name == "timestamp":
            return {"ts": str(v)}
        if name == "duration":
            return {"duration": [v["months"], v["days"], v["nanoseconds"]]}
        if name in ("list", "vector"):
            return [self.canon(x, args[0]) for x in v]
        if name == "set":
            return {"set": [self.canon(x, args[0]) for x in v]}
        if name == "map":
            return {"map": [[self.canon(k, args[0]), self.canon(x, args[1])] for k, x in v]}
        if name == "tuple":
            return {"tuple": [self.canon(v[f"_{i + 1}"], a) for i, a in enumerate(args)]}
        if name in self.types:
            return {"udt": {f: self.canon(v.get(f), ft) for f, ft in self.types[name]}}
        raise SystemExit(f"no canonical form for the CQL type {t}")


def meta(v):
    if v is None:
        return None
    if isinstance(v, list):
        return [None if x is None else str(x) for x in v]
    return str(v)


def main():
    folder, source_dump = sys.argv[1], sys.argv[2]
    source = json.load(open(source_dump))
    reader = Reader(source["types"])
    cols = source["columns"]
    keys = [c for c in cols if c["kind"] in ("partition_key", "clustering")]
    cells = [c for c in cols if c["kind"] in ("static", "regular")]
    rows = []
    files = sorted(glob.glob(os.path.join(folder, "*.parquet")))
    if not files:
        sys.exit(f"no Parquet file in {folder}")
    for path in files:
        f = pq.ParquetFile(path)
        read_at = int((f.metadata.metadata or {}).get(b"drover.readAtMillis", b"0")) / 1000
        table = f.read()
        table = table.cast(pa.schema([pa.field(x.name, ints_only(x.type)) for x in table.schema]))
        names = set(table.column_names)
        for row in table.to_pylist():
            key = [reader.canon(row[c["name"]], c["type"]) for c in keys]
            out = {}
            for c in cells:
                name, typ = c["name"], c["type"]
                cell = {"v": reader.canon(row.get(name), typ)}
                wt_col, ttl_col = f"{META}{name}_writetime", f"{META}{name}_ttl"
                if wt_col in names:
                    cell["wt"] = meta(row[wt_col])
                    cell["ttl"] = meta(row[ttl_col])
                    udt = parse(typ)[0]
                    if not typ.startswith("frozen<") and udt in reader.types:
                        fields = {}
                        for i, (f_name, _) in enumerate(reader.types[udt]):
                            pick = lambda x: x[i] if isinstance(x, list) and i < len(x) else None
                            fields[f_name] = {"wt": pick(cell["wt"]), "ttl": pick(cell["ttl"])}
                        cell["fields"] = fields
                out[name] = cell
            rows.append({"key": key, "cells": out, "at": read_at})
    json.dump({"types": source["types"], "columns": cols, "rows": rows}, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
