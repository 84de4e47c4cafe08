"""The data side of bench/dynamodb-copy/run: create, fill, count and drop DynamoDB tables.

Not a tool under test. Talks to one DynamoDB-compatible server (moto_server or dynalite) with
boto3 and dummy credentials:

    data.py wait   --endpoint URL [--timeout S]          until ListTables answers
    data.py create --endpoint URL --table T              hash key `id` (S), on-demand billing
    data.py drop   --endpoint URL --table T              delete if present, wait until gone
    data.py load   --endpoint URL --table T --items N    fill with items 0..N-1 (see item())
    data.py count  --endpoint URL --table T              parallel Select=COUNT scan
    data.py sample --endpoint URL --table T --items N    GetItem of a few items, compared with item()

`load` writes with raw JSON requests in 2 processes x 4 threads (see RawClient); the rest uses
boto3.

`load` prints `items=N bytes=B seconds=S` (B: the sum of the items' sizes by DynamoDB's rules),
`count` prints `count=N`, `sample` prints `sample=ok checked=K` or fails.
"""

import argparse
import base64
import decimal
import http.client
import json
import multiprocessing
import random
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

REGION = "us-east-1"
# Item sizes are spread over [SIZE_MIN, SIZE_MAX] bytes (mean ~1 KB), by DynamoDB's size rules.
SIZE_MIN, SIZE_MAX = 900, 1100


def client(endpoint: str, pool: int = 10):
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="dummy",
        aws_secret_access_key="dummy",
        config=Config(
            max_pool_connections=pool,
            retries={"max_attempts": 10, "mode": "standard"},
            connect_timeout=10,
            read_timeout=300,
        ),
    )


# ---- item sizes, as DynamoDB counts them (names + values; numbers ~ 1 byte per 2 digits + 1;
# maps and lists 3 bytes + 1 per element + their elements) -------------------------------------


def _num_size(text: str) -> int:
    digits = len(text.replace("-", "").replace(".", "").lstrip("0")) or 1
    return (digits + 1) // 2 + 1


def value_size(v: dict) -> int:
    (t, x), = v.items()
    if t == "S":
        return len(x.encode())
    if t == "N":
        return _num_size(x)
    if t == "B":
        return len(x)
    if t in ("BOOL", "NULL"):
        return 1
    if t == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in x.items())
    if t == "L":
        return 3 + sum(1 + value_size(e) for e in x)
    raise ValueError(f"no size rule for type {t}")


def item_size(item: dict) -> int:
    return sum(len(k.encode()) + value_size(v) for k, v in item.items())


def item(i: int) -> dict:
    """Item number i: a pure function of i, so any item can be regenerated and checked.

    Mixed types: S key and text, N (integer and decimal), B (random bytes), BOOL, a small map
    and a small list; a final S attribute `pad` brings the size to a value drawn from
    [SIZE_MIN, SIZE_MAX].
    """
    rnd = random.Random(i)
    text_len = rnd.randint(200, 300)
    it = {
        "id": {"S": f"item-{i:010d}"},
        "seq": {"N": str(i)},
        "price": {"N": f"{rnd.randint(0, 10**6)}.{rnd.randint(0, 9999):04d}"},
        "active": {"BOOL": bool(i & 1)},
        "name": {"S": base64.b64encode(rnd.randbytes(text_len * 3 // 4 + 1)).decode()[:text_len]},
        "blob": {"B": rnd.randbytes(rnd.randint(300, 400))},
        "attrs": {
            "M": {
                "color": {"S": ("red", "green", "blue", "white")[i % 4]},
                "weight": {"N": str(rnd.randint(1, 10**5))},
                "fragile": {"BOOL": i % 3 == 0},
            }
        },
        "tags": {"L": [{"S": f"t{i % 97}"}, {"N": str(i % 1000)}, {"BOOL": i % 5 == 0}]},
    }
    want = rnd.randint(SIZE_MIN, SIZE_MAX)
    # "pad" (3 bytes of name) + its value: at least 1 character.
    pad = max(1, want - item_size(it) - 3)
    it["pad"] = {"S": base64.b64encode(rnd.randbytes(pad)).decode()[:pad]}
    return it


# ---- commands --------------------------------------------------------------------------------


def cmd_wait(a) -> int:
    deadline = time.monotonic() + a.timeout
    c = client(a.endpoint)
    while True:
        try:
            c.list_tables(Limit=1)
            return 0
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            if time.monotonic() > deadline:
                print(f"data.py: {a.endpoint} does not answer after {a.timeout}s: {e}", file=sys.stderr)
                return 1
            time.sleep(0.2)


def wait_status(c, table: str, want: str | None, timeout: float = 120) -> None:
    """Waits until `table` is in status `want` (None: until it no longer exists)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = c.describe_table(TableName=table)["Table"]["TableStatus"]
        except c.exceptions.ResourceNotFoundException:
            status = None
        if status == want:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"data.py: table {table} is {status}, not {want}, after {timeout}s")
        time.sleep(0.05)


def cmd_create(a) -> int:
    c = client(a.endpoint)
    c.create_table(
        TableName=a.table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    wait_status(c, a.table, "ACTIVE")
    return 0


def cmd_drop(a) -> int:
    c = client(a.endpoint)
    try:
        c.delete_table(TableName=a.table)
    except c.exceptions.ResourceNotFoundException:
        return 0
    wait_status(c, a.table, None)
    return 0


# The loader sends BatchWriteItem requests as raw JSON over keep-alive HTTP connections instead
# of through boto3: botocore's serialiser costs ~300 us of CPU per 1 KB item, more than the
# servers spend storing it, and loading is not what is measured. moto and dynalite check that a
# request is signed, not the signature (scripts/testenv probes them the same way).
def wire(v):
    """An attribute value in DynamoDB's JSON form (B as base64)."""
    (t, x), = v.items()
    if t == "B":
        return {"B": base64.b64encode(x).decode()}
    if t == "M":
        return {"M": {k: wire(e) for k, e in x.items()}}
    if t == "L":
        return {"L": [wire(e) for e in x]}
    return v


class RawClient:
    def __init__(self, endpoint: str):
        u = urllib.parse.urlsplit(endpoint)
        self.host, self.port = u.hostname, u.port or 80
        self.conn = None

    def call(self, op: str, body: dict) -> dict:
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"DynamoDB_20120810.{op}",
            "X-Amz-Date": "20240101T000000Z",
            "Authorization": "AWS4-HMAC-SHA256 Credential=dummy/20240101/us-east-1/dynamodb/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=0",
        }
        for attempt in range(10):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
                self.conn.request("POST", "/", data, headers)
                resp = self.conn.getresponse()
                out = resp.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                time.sleep(0.1 * (attempt + 1))
                continue
            if resp.status == 200:
                return json.loads(out)
            if resp.status >= 500 or b"Throughput" in out or b"Throttling" in out:
                time.sleep(0.1 * (attempt + 1))
                continue
            raise SystemExit(f"data.py: {op} failed: HTTP {resp.status}: {out[:300]!r}")
        raise SystemExit(f"data.py: {op} still failing after 10 attempts")


def write_batch(c: RawClient, table: str, items: list) -> int:
    """BatchWriteItem of up to 25 items, re-sending UnprocessedItems with backoff. Returns the
    number of re-sends."""
    requests = [{"PutRequest": {"Item": {k: wire(v) for k, v in it.items()}}} for it in items]
    retries = 0
    while requests:
        out = c.call("BatchWriteItem", {"RequestItems": {table: requests}})
        requests = out.get("UnprocessedItems", {}).get(table, [])
        if requests:
            retries += 1
            time.sleep(min(1.0, 0.01 * 2 ** min(retries, 7)))
    return retries


def load_part(args: tuple) -> tuple:
    """One loader process: the blocks of 25 items numbered part, part + parts, ... written by
    `threads` threads. Returns (bytes, retries)."""
    endpoint, table, items, part, parts, threads = args
    blocks = iter(range(part * 25, items, parts * 25))
    lock = threading.Lock()
    totals = [0, 0, 0]  # bytes, retries, items
    t0 = time.monotonic()

    def worker() -> None:
        c = RawClient(endpoint)
        while True:
            with lock:
                start = next(blocks, None)
            if start is None:
                return
            batch = [item(i) for i in range(start, min(start + 25, items))]
            size = sum(item_size(it) for it in batch)
            r = write_batch(c, table, batch)
            with lock:
                totals[0] += size
                totals[1] += r
                totals[2] += len(batch)
                done = totals[2]
            if part == 0 and done % 50000 < 25:
                el = time.monotonic() - t0
                print(f"load: ~{done * parts}/{items} items, {done * parts / el:.0f} items/s", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(worker) for _ in range(threads)]:
            f.result()
    return totals[0], totals[1]


def cmd_load(a) -> int:
    t0 = time.monotonic()
    # Item generation and JSON are CPU work under the GIL: one process per core, each with
    # threads to keep several requests in flight.
    parts = [(a.endpoint, a.table, a.items, p, a.procs, a.threads) for p in range(a.procs)]
    with multiprocessing.Pool(a.procs) as pool:
        results = pool.map(load_part, parts)
    secs = time.monotonic() - t0
    size = sum(r[0] for r in results)
    retries = sum(r[1] for r in results)
    print(f"items={a.items} bytes={size} seconds={secs:.1f} retries={retries}")
    return 0


def cmd_count(a) -> int:
    c = client(a.endpoint, pool=a.segments)

    def count_segment(seg: int) -> int:
        n, kw = 0, {}
        while True:
            out = c.scan(TableName=a.table, Select="COUNT", Segment=seg, TotalSegments=a.segments, **kw)
            n += out["Count"]
            if "LastEvaluatedKey" not in out:
                return n
            kw = {"ExclusiveStartKey": out["LastEvaluatedKey"]}

    with ThreadPoolExecutor(a.segments) as pool:
        total = sum(pool.map(count_segment, range(a.segments)))
    print(f"count={total}")
    return 0


def canonical(v):
    if isinstance(v, dict):
        if set(v) == {"N"}:
            return {"N": decimal.Decimal(v["N"]).normalize()}
        return {k: canonical(e) for k, e in v.items()}
    if isinstance(v, list):
        return [canonical(e) for e in v]
    return v


def cmd_sample(a) -> int:
    """A few items of the target, read back and compared with what item() generates: the copy
    kept every attribute and type, not only the keys."""
    c = client(a.endpoint)
    picks = sorted({0, a.items - 1, a.items // 2, *random.Random(a.items).sample(range(a.items), min(a.items, 20))})
    for i in picks:
        got = c.get_item(TableName=a.table, Key={"id": {"S": f"item-{i:010d}"}}, ConsistentRead=True).get("Item")
        want = item(i)
        if got is None:
            print(f"data.py: {a.table}: item {i} is missing", file=sys.stderr)
            return 1
        # boto3 hands B values back as bytes, N as strings: the same shapes as item(). Numbers
        # are compared as numbers: a server may store 12.3400 as 12.34, as DynamoDB does.
        got, want = canonical(got), canonical(want)
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            print(f"data.py: {a.table}: item {i} differs in {diff}", file=sys.stderr)
            return 1
    print(f"sample=ok checked={len(picks)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("wait", "create", "drop", "load", "count", "sample"):
        p = sub.add_parser(name)
        p.add_argument("--endpoint", required=True)
        if name != "wait":
            p.add_argument("--table", required=True)
        if name == "wait":
            p.add_argument("--timeout", type=float, default=60)
        if name in ("load", "sample"):
            p.add_argument("--items", type=int, required=True)
        if name == "load":
            p.add_argument("--procs", type=int, default=2)
            p.add_argument("--threads", type=int, default=4)
        if name == "count":
            p.add_argument("--segments", type=int, default=16)
    a = ap.parse_args()
    return globals()[f"cmd_{a.cmd}"](a)


if __name__ == "__main__":
    sys.exit(main())
