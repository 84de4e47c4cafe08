#!/usr/bin/env python3
"""The MySQL part of the fidelity matrix's second reader: dumps a MariaDB/MySQL table through
the `mariadb` command-line client, which shares no code with drover's reader (mysql_async),
as the CQL cells docs/mysql.md says it becomes, in the canonical JSON of cql_reader.py.

    mysql_reader.py HOST PORT USER DATABASE TABLE SPEC

SPEC is JSON: {"columns": {name: CQL type}, "key": [the target's key columns, in order],
"where": a filter or null, "zeroDateTimeBehavior": "EXCEPTION" | "CONVERT_TO_NULL" | "ROUND",
"truncateTimestamps": bool, "password": the user's}. Every value is read as text
the server renders exactly (hex of the bytes or of the utf8mb4 characters; a FLOAT widened to
DOUBLE, which the server prints in the fewest digits that read back to it; dates and times in
UTC), then converted here by the table of docs/mysql.md into the value cql_reader.py would
give for the CQL cell it must become. A value that has no exact form in its CQL type (an
unsigned BIGINT beyond `bigint`, a TIME past 24 hours, microseconds in a `timestamp`, a zero
date under EXCEPTION) reads {"unmappable": why}: drover must refuse it, never write it.

Output: {"columns": [{"name", "type"}], "rows": [{"key": [...], "cells": {name: {"v": ...}}}]},
rows ordered by their key's JSON (MySQL's order is not the target's).
"""

import datetime
import ipaddress
import json
import os
import socket
import struct
import subprocess
import sys
import uuid

INTEGERS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
TEXTS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
BINARIES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
DATES = {"date", "datetime", "timestamp"}
CQL_INTEGERS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
EPOCH = datetime.date(1970, 1, 1)


class Unmappable(Exception):
    pass


def quote(name):
    return "`" + name.replace("`", "``") + "`"


def run_sql(args, sql):
    """Rows of `sql` as lists of bytes or None, through the mariadb client in batch mode."""
    host, port, user, password, database = args
    done = subprocess.run(
        ["mariadb", "--no-defaults", "--protocol=TCP", "-h", host, "-P", port, "-u", user,
         "--batch", "--raw", "--skip-column-names", "--default-character-set=utf8mb4",
         database, "-e", sql],
        capture_output=True, env=dict(os.environ, MYSQL_PWD=password),
    )
    if done.returncode:
        sys.exit(f"mariadb: {done.stderr.decode(errors='replace')}\n{sql}")
    out = done.stdout
    rows = []
    for line in out.split(b"\n"):
        if not line:
            continue
        # Every value is selected as hex, so no tab or line break can be inside one.
        rows.append([None if f == b"NULL" else bytes.fromhex(f.decode()) for f in line.split(b"\t")])
    return rows


def expression(col, data_type):
    """A SELECT expression rendering `col` exactly, as hex of its text or bytes."""
    c = quote(col)
    if data_type in INTEGERS or data_type in {"year", "decimal", "numeric"}:
        return f"HEX(CAST({c} AS CHAR))"
    if data_type == "bit":
        return f"HEX(CAST({c} + 0 AS CHAR))"
    if data_type in {"float", "double", "real"}:
        # FLOAT prints in six digits; widened to DOUBLE it prints exactly. A -0 prints as 0:
        # its sign is asked apart.
        return f"HEX(IF({c} = 0 AND ATAN2({c}, -1) < 0, '-0', CAST(CAST({c} AS DOUBLE) AS CHAR)))"
    if data_type in TEXTS:
        return f"HEX(CONVERT({c} USING utf8mb4))"
    if data_type in BINARIES:
        return f"HEX({c})"
    return f"HEX(CAST({c} AS CHAR))"


def integer(mysql, raw):
    if mysql["data_type"] == "bit":
        return int(raw)
    if mysql["data_type"] in INTEGERS or mysql["data_type"] == "year":
        return int(raw)
    raise Unmappable(f"{mysql['column_type']} is not a whole number")


def decimal_parts(text):
    """(unscaled, scale) of a DECIMAL's text: the scale is its digits after the point."""
    whole, _, frac = text.partition(".")
    return int(whole + frac), len(frac)


def canon_decimal(unscaled, scale):
    # cql_reader.py's form of the Decimal the driver builds from (unscaled, scale).
    return {"decimal": f"{'-' if unscaled < 0 else ''}{abs(unscaled)}e{-scale}"}


def float32(x):
    return struct.unpack(">f", struct.pack(">f", x))[0]


def canon_float(x):
    return "NaN" if x != x else repr(x)


def date_time(text, options):
    """A DATE, DATETIME or TIMESTAMP text as (date, microseconds of the day), or None."""
    day, _, clock = text.partition(" ")
    y, mo, d = (int(p) for p in day.split("-"))
    if y == 0 or mo == 0 or d == 0:
        behavior = options.get("zeroDateTimeBehavior", "EXCEPTION")
        if behavior == "CONVERT_TO_NULL":
            return None
        if behavior == "ROUND":
            return datetime.date(1, 1, 1), 0
        raise Unmappable(f"the zero date {day}")
    micros = 0
    if clock:
        hms, _, frac = clock.partition(".")
        h, mi, s = (int(p) for p in hms.split(":"))
        micros = ((h * 60 + mi) * 60 + s) * 1_000_000 + int((frac + "000000")[:6])
    return datetime.date(y, mo, d), micros


def convert(mysql, cql, raw, options):
    """The canonical value of the CQL cell a MySQL value (its rendered bytes) becomes."""
    if raw is None:
        return None
    dt = mysql["data_type"]
    if dt in TEXTS or dt in BINARIES:
        data = raw
    else:
        data = raw.decode()
    if cql in CQL_INTEGERS or cql == "varint":
        if dt in {"decimal", "numeric"} and cql == "varint":
            unscaled, scale = decimal_parts(data)
            if scale:
                raise Unmappable("a DECIMAL with a scale into a varint")
            return str(unscaled)
        n = integer(mysql, data)
        bits = CQL_INTEGERS.get(cql)
        if bits and not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
            raise Unmappable(f"{n} does not fit a CQL {cql}")
        return str(n)
    if cql == "decimal":
        if dt in {"decimal", "numeric"}:
            return canon_decimal(*decimal_parts(data))
        return canon_decimal(integer(mysql, data), 0)
    if cql == "boolean":
        n = integer(mysql, data)
        if n not in (0, 1):
            raise Unmappable(f"{n} is not 0 or 1")
        return n == 1
    if cql in {"float", "double"}:
        if dt not in {"float", "double", "real"} or (cql == "float" and dt != "float"):
            raise Unmappable(f"{dt} into {cql}")
        x = float(data)
        return canon_float(float32(x) if cql == "float" else x)
    if cql in {"text", "ascii"} and dt in TEXTS:
        s = data.decode("utf-8")
        if cql == "ascii" and not s.isascii():
            raise Unmappable("not ASCII")
        return s
    if cql == "blob":
        if dt in TEXTS or dt in BINARIES:
            return {"hex": data.hex()}
        if dt == "bit":
            # BIT(n) travels as its value in ceil(n / 8) big-endian bytes.
            width = int(mysql["column_type"][4:-1])
            return {"hex": int(data).to_bytes((width + 7) // 8, "big").hex()}
        raise Unmappable(f"{dt} into blob")
    if cql in {"timestamp", "date"} and dt in DATES:
        if cql == "date" and dt != "date":
            raise Unmappable(f"{dt} into date")
        parts = date_time(data, options)
        if parts is None:
            return None
        day, micros = parts
        days = (day - EPOCH).days
        if cql == "date":
            return {"date": str(days)}
        if micros % 1000 and not options.get("truncateTimestamps"):
            raise Unmappable(f"{data} has microseconds")
        return {"ts": str(days * 86_400_000 + micros // 1000)}
    if cql == "time" and dt == "time":
        negative = data.startswith("-")
        hms, _, frac = data.lstrip("-").partition(".")
        h, mi, s = (int(p) for p in hms.split(":"))
        nanos = (((h * 60 + mi) * 60 + s) * 1_000_000 + int((frac + "000000")[:6])) * 1000
        if (negative and nanos) or h >= 24:
            raise Unmappable(f"the TIME {data} is outside a day")
        return {"time": str(nanos)}
    if cql in {"uuid", "timeuuid"} and (dt in {"char", "varchar"} or mysql["column_type"] == "binary(16)"):
        if dt == "binary":
            u = uuid.UUID(bytes=bytes(data))
        else:
            try:
                u = uuid.UUID(data.decode("utf-8").strip())
            except ValueError as e:
                raise Unmappable(f"not a UUID: {e}")
        # The version nibble as it is, whatever the variant bits say.
        if cql == "timeuuid" and u.bytes[6] >> 4 != 1:
            raise Unmappable(f"{u} is not a version 1 UUID")
        return str(u)
    if cql == "inet" and dt in {"char", "varchar"}:
        try:
            a = ipaddress.ip_address(data.decode("utf-8").strip())
        except ValueError as e:
            raise Unmappable(str(e))
        family = socket.AF_INET if a.version == 4 else socket.AF_INET6
        return socket.inet_ntop(family, a.packed)
    if cql == "set<text>" and dt == "set":
        s = data.decode("utf-8")
        if not s:
            # CQL has no empty collection: the empty SET is null (docs/mysql.md).
            return None
        return {"set": sorted(s.split(","), key=lambda m: m.encode())}
    raise Unmappable(f"docs/mysql.md maps no {mysql['column_type']} into a CQL {cql}")


def main():
    host, port, user, database, table, spec = sys.argv[1:7]
    spec = json.loads(spec)
    args = (host, port, user, spec["password"], database)
    described = {
        r[0].decode(): {"data_type": r[1].decode(), "column_type": r[2].decode()}
        for r in run_sql(
            args,
            "SELECT HEX(COLUMN_NAME), HEX(LOWER(DATA_TYPE)), HEX(LOWER(COLUMN_TYPE)) "
            "FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION",
        )
    }
    if not described:
        sys.exit(f"no table {database}.{table}")
    names = list(described)
    select = ", ".join(expression(n, described[n]["data_type"]) for n in names)
    where = f" WHERE ({spec['where']})" if spec.get("where") else ""
    # TIMESTAMP values rendered in UTC, the instants they are.
    sql = f"SET time_zone = '+00:00'; SELECT {select} FROM {quote(table)}{where}"
    columns = {n.lower(): t for n, t in spec["columns"].items()}
    key = [k.lower() for k in spec["key"]]
    rows = []
    for raw in run_sql(args, sql):
        values = {}
        for name, v in zip(names, raw):
            try:
                values[name.lower()] = convert(described[name], columns[name.lower()], v, spec)
            except Unmappable as e:
                values[name.lower()] = {"unmappable": str(e)}
        rows.append(
            {
                "key": [values[k] for k in key],
                "cells": {n: {"v": v} for n, v in values.items() if n not in key},
            }
        )
    rows.sort(key=lambda r: json.dumps(r["key"], sort_keys=True))
    json.dump(
        {"columns": [{"name": n, "type": t} for n, t in columns.items()], "rows": rows},
        sys.stdout,
        sort_keys=True,
    )


if __name__ == "__main__":
    main()
