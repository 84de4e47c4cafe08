"""Copy one DynamoDB table into another with boto3: the reference copier of
bench/dynamodb-copy/run.

What a careful script would do, with the same parallelism as drover's job file: a parallel scan
of the source in SEGMENTS segments (`scanSegments`), run by CONCURRENCY threads (`maxMapTasks`)
that each take the next segment not yet scanned; every page read is written to the target with
`batch_write_item` in batches of 25 items, and the UnprocessedItems of a batch are sent again
(exponential backoff, capped at 1 s) until none is left. Like drover, it creates the target
table from the source's description (key schema, attribute definitions, billing mode) when it is
missing, and waits for it to be ACTIVE.

    boto3_copy.py --src-endpoint URL --src-table T --dst-endpoint URL --dst-table T \
        [--segments 16] [--concurrency 8]

Prints `items=N seconds=S retries=R` on stdout at the end.
"""

import argparse
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def client(endpoint: str, region: str, pool: int):
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="dummy",
        aws_secret_access_key="dummy",
        config=Config(
            max_pool_connections=pool,
            retries={"max_attempts": 10, "mode": "standard"},
            read_timeout=300,
        ),
    )


def ensure_target(src, dst, src_table: str, dst_table: str) -> None:
    try:
        dst.describe_table(TableName=dst_table)
        return
    except dst.exceptions.ResourceNotFoundException:
        pass
    desc = src.describe_table(TableName=src_table)["Table"]
    mode = desc.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
    kw = {
        "TableName": dst_table,
        "KeySchema": desc["KeySchema"],
        "AttributeDefinitions": desc["AttributeDefinitions"],
        "BillingMode": mode,
    }
    if mode == "PROVISIONED":
        pt = desc["ProvisionedThroughput"]
        kw["ProvisionedThroughput"] = {
            "ReadCapacityUnits": max(1, pt["ReadCapacityUnits"]),
            "WriteCapacityUnits": max(1, pt["WriteCapacityUnits"]),
        }
    dst.create_table(**kw)
    while dst.describe_table(TableName=dst_table)["Table"]["TableStatus"] != "ACTIVE":
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description="parallel scan + batch_write_item copy")
    ap.add_argument("--src-endpoint", required=True)
    ap.add_argument("--src-table", required=True)
    ap.add_argument("--dst-endpoint", required=True)
    ap.add_argument("--dst-table", required=True)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8)
    a = ap.parse_args()

    t0 = time.monotonic()
    # botocore clients are thread-safe; one per side, a connection per thread.
    src = client(a.src_endpoint, a.region, a.concurrency)
    dst = client(a.dst_endpoint, a.region, a.concurrency)
    ensure_target(src, dst, a.src_table, a.dst_table)

    segments: queue.SimpleQueue = queue.SimpleQueue()
    for s in range(a.segments):
        segments.put(s)
    lock = threading.Lock()
    totals = {"items": 0, "retries": 0}
    stop = threading.Event()

    def write(items: list) -> int:
        retries = 0
        for i in range(0, len(items), 25):
            requests = [{"PutRequest": {"Item": it}} for it in items[i : i + 25]]
            attempt = 0
            while requests:
                out = dst.batch_write_item(RequestItems={a.dst_table: requests})
                requests = out.get("UnprocessedItems", {}).get(a.dst_table, [])
                if requests:
                    attempt += 1
                    retries += 1
                    time.sleep(min(1.0, 0.01 * 2 ** min(attempt, 7)))
        return retries

    def worker() -> None:
        while not stop.is_set():
            try:
                seg = segments.get_nowait()
            except queue.Empty:
                return
            kw = {}
            while True:
                page = src.scan(TableName=a.src_table, Segment=seg, TotalSegments=a.segments, **kw)
                r = write(page["Items"])
                with lock:
                    totals["items"] += len(page["Items"])
                    totals["retries"] += r
                if "LastEvaluatedKey" not in page:
                    break
                kw = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    def progress() -> None:
        while not stop.wait(10):
            el = time.monotonic() - t0
            print(f"boto3-copy: {totals['items']} items, {totals['items'] / el:.0f} items/s", file=sys.stderr, flush=True)

    threading.Thread(target=progress, daemon=True).start()
    try:
        with ThreadPoolExecutor(a.concurrency) as pool:
            for f in [pool.submit(worker) for _ in range(a.concurrency)]:
                f.result()
    finally:
        stop.set()
    secs = time.monotonic() - t0
    print(f"items={totals['items']} seconds={secs:.1f} retries={totals['retries']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
