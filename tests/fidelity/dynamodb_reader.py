#!/usr/bin/env python3
"""The DynamoDB side of the fidelity matrix's second reader: dumps a DynamoDB table through
boto3, or reads an S3 export's files with nothing but the standard library (gzip, json,
base64, hashlib), as one canonical JSON document; and writes an export as AWS lays one out.
None of it shares code with drover.

    dynamodb_reader.py table ENDPOINT TABLE KEY[,KEY]
    dynamodb_reader.py export DIR KEY[,KEY]
    dynamodb_reader.py write-export ENDPOINT TABLE S3_ENDPOINT BUCKET PREFIX ITEMS_PER_FILE

`table` scans the table (consistent reads, every page); `export` reads the export under DIR
(manifest-summary.json, the manifest of data files it names, each gzipped data file) and checks
what the manifests say of the files: item counts and MD5 digests. KEY names the key attributes,
hash key first.

Output: {"items": [{"key": ..., "attrs": {name: value}, "numbers": {name: [text, ...]}}],
"problems": [...]}, items in the order of their keys, and for an export "files", its number of
data files. Values are canonical: a value of each
type, and only an equal one, gives the same JSON. Strings stay strings, binaries are hex, sets
are sorted (DynamoDB keeps no order in a set), maps have sorted keys. Numbers are compared as
DynamoDB compares them, as decimals: 1.500, 1.5 and 15E-1 are one number, and -0 is 0. The
text each number had is kept apart, under "numbers" (sorted, per top-level attribute), so that
the test can say where a server or a path rewrote a number without changing it.

`write-export` scans TABLE and writes its items to S3 as DynamoDB's export to S3 does
(`<PREFIX>/AWSDynamoDB/<id>/`: `_started`, data/*.json.gz of one {"Item": ...} per line in
DynamoDB JSON, manifest-files.json with item counts, MD5 digests and ETags, and
manifest-summary.json naming it by its full key); prints the summary's key. Its numbers are
spelled in turn as read, in scientific notation and with a trailing zero (see `respell`): the
same decimals, in forms the server never gives back.
"""

import base64
import gzip
import hashlib
import json
import os
import sys
import uuid
from decimal import Decimal


def number(text):
    """The canonical text of a DynamoDB number: its digits without leading or trailing zeros
    and the exponent of the last one, so that equal decimals, and only they, agree. Exact:
    no decimal context (which rounds to 28 digits) is involved."""
    d = Decimal(text)
    if not d.is_finite():
        raise ValueError(f"not a DynamoDB number: {text!r}")
    sign, digits, exp = d.as_tuple()
    digits = "".join(map(str, digits)).lstrip("0")
    if not digits:
        return "0"
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    return f"{'-' if sign else ''}{stripped}E{exp}"


def canon(v, texts):
    """The canonical JSON of one attribute value in DynamoDB JSON (the low-level client's
    shape, binaries as bytes); number texts are appended to `texts`."""
    if not isinstance(v, dict) or len(v) != 1:
        raise ValueError(f"not one typed value: {v!r}")
    (t, x), = v.items()
    if t == "S":
        return {"S": x}
    if t == "N":
        texts.append(x)
        return {"N": number(x)}
    if t == "B":
        return {"B": x.hex()}
    if t == "BOOL":
        return {"BOOL": bool(x)}
    if t == "NULL":
        return {"NULL": True}
    if t == "SS":
        return {"SS": sorted(x)}
    if t == "NS":
        texts.extend(x)
        return {"NS": sorted(number(n) for n in x)}
    if t == "BS":
        return {"BS": sorted(b.hex() for b in x)}
    if t == "L":
        return {"L": [canon(e, texts) for e in x]}
    if t == "M":
        return {"M": {k: canon(e, texts) for k, e in sorted(x.items())}}
    raise ValueError(f"unknown type {t!r}")


def dump(items, keys, problems):
    out = []
    seen = set()
    for item in items:
        attrs, numbers = {}, {}
        for name, v in item.items():
            texts = []
            attrs[name] = canon(v, texts)
            if texts:
                numbers[name] = sorted(texts)
        key = json.dumps([attrs.get(k) for k in keys], sort_keys=True, ensure_ascii=False)
        if key in seen:
            problems.append(f"the key {key} twice")
        seen.add(key)
        out.append({"key": key, "attrs": attrs, "numbers": numbers})
    out.sort(key=lambda i: i["key"])
    return {"items": out, "problems": problems}


def client(service, endpoint):
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="dummy",
        aws_secret_access_key="dummy",
        config=Config(
            retries={"max_attempts": 10, "mode": "standard"},
            s3={"addressing_style": "path"},
            read_timeout=300,
        ),
    )


def scan(endpoint, table):
    c = client("dynamodb", endpoint)
    args = {"TableName": table, "ConsistentRead": True}
    while True:
        page = c.scan(**args)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def typed_from_json(v):
    """A value of DynamoDB JSON as an export holds it (binaries in base64) in the client's
    shape (binaries as bytes)."""
    if not isinstance(v, dict) or len(v) != 1:
        raise ValueError(f"not one typed value: {v!r}")
    (t, x), = v.items()
    if t == "B":
        return {"B": base64.b64decode(x, validate=True)}
    if t == "BS":
        return {"BS": [base64.b64decode(b, validate=True) for b in x]}
    if t == "L":
        return {"L": [typed_from_json(e) for e in x]}
    if t == "M":
        return {"M": {k: typed_from_json(e) for k, e in x.items()}}
    if t in ("S", "N", "SS", "NS") or (t == "BOOL" and isinstance(x, bool)) or (t == "NULL" and x is True):
        return {t: x}
    raise ValueError(f"not a DynamoDB JSON value: {v!r}")


def read_export(root, problems):
    """The items of the export under `root`, checked against its manifests."""
    with open(os.path.join(root, "manifest-summary.json"), "rb") as f:
        summary = json.load(f)
    if summary.get("outputFormat") != "DYNAMODB_JSON":
        problems.append(f"outputFormat {summary.get('outputFormat')!r}")
    manifest_key = summary["manifestFilesS3Key"]
    with open(os.path.join(root, os.path.basename(manifest_key)), "rb") as f:
        manifest = [json.loads(line) for line in f.read().decode("utf-8").splitlines() if line.strip()]
    items = []
    for entry in manifest:
        key = entry["dataFileS3Key"]
        # Keys are full in AWS's exports and relative to the summary in Migrator's: the part
        # from `data/` on is where the file is below the export's root either way.
        rel = key[key.index("data/"):]
        with open(os.path.join(root, rel), "rb") as f:
            raw = f.read()
        digest = base64.b64encode(hashlib.md5(raw).digest()).decode()
        if entry.get("md5Checksum") != digest:
            problems.append(f"{rel}: md5Checksum {entry.get('md5Checksum')} but the file's is {digest}")
        lines = [l for l in gzip.decompress(raw).decode("utf-8").split("\n") if l.strip()]
        if entry.get("itemCount") != len(lines):
            problems.append(f"{rel}: itemCount {entry.get('itemCount')} but {len(lines)} lines")
        for n, line in enumerate(lines, 1):
            doc = json.loads(line)
            if set(doc) != {"Item"}:
                problems.append(f"{rel}, line {n}: not one {{\"Item\": ...}}")
                continue
            items.append({k: typed_from_json(v) for k, v in doc["Item"].items()})
    if summary.get("itemCount") != len(items):
        problems.append(f"manifest-summary.json: itemCount {summary.get('itemCount')} but {len(items)} items")
    return items, len(manifest)


def respell(text, k):
    """The number `text` in another spelling of the same decimal, the k-th of three: as it
    is, in scientific notation with a signed exponent, or with a trailing zero (a zero as -0
    or 0.0). The server gives numbers back in one form; an export written by another tool may
    hold any, and a loader has to take them all."""
    sign, digits, exp = Decimal(text).as_tuple()
    digits = "".join(map(str, digits)).lstrip("0")
    form = k % 3
    if not digits:
        return ["0", "-0", "0.0"][form]
    minus = "-" if sign else ""
    if form == 1:
        rest = digits.rstrip("0")[1:]
        return f"{minus}{digits[0]}{'.' + rest if rest else ''}E{exp + len(digits) - 1:+d}"
    if form == 2 and len(digits.rstrip("0")) < 38:
        return minus + format(Decimal(f"{digits}0E{exp - 1}"), "f")
    return text


class Spelling:
    """Hands out the next spelling of each number written."""

    def __init__(self):
        self.k = 0

    def __call__(self, text):
        self.k += 1
        return respell(text, self.k)


def to_json(v, spell):
    """A value in the client's shape as DynamoDB JSON, as an export holds it, its numbers
    spelled by `spell`."""
    (t, x), = v.items()
    if t == "N":
        return {"N": spell(x)}
    if t == "NS":
        return {"NS": [spell(n) for n in x]}
    if t == "B":
        return {"B": base64.b64encode(x).decode()}
    if t == "BS":
        return {"BS": [base64.b64encode(b).decode() for b in x]}
    if t == "L":
        return {"L": [to_json(e, spell) for e in x]}
    if t == "M":
        return {"M": {k: to_json(e, spell) for k, e in x.items()}}
    return {t: x}


def write_export(endpoint, table, s3_endpoint, bucket, prefix, per_file):
    s3 = client("s3", s3_endpoint)
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    export_id = f"01764000000000-{uuid.uuid4().hex[:8]}"
    root = f"{prefix}/AWSDynamoDB/{export_id}"
    s3.put_object(Bucket=bucket, Key=f"{root}/_started", Body=b"")
    items = list(scan(endpoint, table))
    spell = Spelling()
    manifest = []
    for start in range(0, max(len(items), 1), per_file):
        chunk = items[start:start + per_file]
        body = "".join(
            json.dumps({"Item": {k: to_json(v, spell) for k, v in item.items()}}, ensure_ascii=False) + "\n"
            for item in chunk
        ).encode("utf-8")
        data = gzip.compress(body)
        key = f"{root}/data/{uuid.uuid4().hex[:26]}.json.gz"
        etag = s3.put_object(Bucket=bucket, Key=key, Body=data)["ETag"].strip('"')
        manifest.append({
            "itemCount": len(chunk),
            "md5Checksum": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "etag": etag,
            "dataFileS3Key": key,
        })
    s3.put_object(
        Bucket=bucket,
        Key=f"{root}/manifest-files.json",
        Body="".join(json.dumps(m) + "\n" for m in manifest).encode(),
    )
    summary = {
        "version": "2020-06-30",
        "exportArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/export/{export_id}",
        "startTime": "2026-11-24T16:00:00.000Z",
        "endTime": "2026-11-24T16:05:00.000Z",
        "tableArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}",
        "tableId": str(uuid.uuid4()),
        "exportTime": "2026-11-24T16:00:00.000Z",
        "s3Bucket": bucket,
        "s3Prefix": prefix,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"{root}/manifest-files.json",
        "billedSizeBytes": sum(len(json.dumps(i)) for i in manifest),
        "itemCount": len(items),
        "outputFormat": "DYNAMODB_JSON",
        "exportType": "FULL_EXPORT",
    }
    s3.put_object(Bucket=bucket, Key=f"{root}/manifest-summary.json", Body=json.dumps(summary).encode())
    return f"{root}/manifest-summary.json"


def main(argv):
    cmd = argv[1]
    if cmd == "table":
        _, _, endpoint, table, keys = argv
        out = dump(scan(endpoint, table), keys.split(","), [])
    elif cmd == "export":
        _, _, root, keys = argv
        problems = []
        items, files = read_export(root, problems)
        out = dump(items, keys.split(","), problems)
        out["files"] = files
    elif cmd == "write-export":
        _, _, endpoint, table, s3_endpoint, bucket, prefix, per_file = argv
        out = {"manifestKey": write_export(endpoint, table, s3_endpoint, bucket, prefix, int(per_file))}
    else:
        raise SystemExit(__doc__)
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv)
