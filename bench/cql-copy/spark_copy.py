"""Copy one Cassandra table to another cluster with Spark + the Spark Cassandra Connector.

The engine under ScyllaDB Migrator, used here through the DataFrame API: read the whole table
from the source cluster, append it to the same table in the target cluster. Connector settings
other than the hosts and the split count stay at their defaults.

Run by bench/cql-copy/run through spark-submit (which sets master, memory, jars and JVM
options):

    spark-submit ... spark_copy.py --src 127.0.0.1 --dst 127.0.0.2 \
        --keyspace bench --table rows --split-count 256
"""

import argparse
import sys
import time

from pyspark.sql import SparkSession


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", default="9042")
    ap.add_argument("--keyspace", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--split-count", type=int, default=256)
    args = ap.parse_args()

    t0 = time.monotonic()
    spark = SparkSession.builder.appName("drover-bench-spark-copy").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    t1 = time.monotonic()

    source = (
        spark.read.format("org.apache.spark.sql.cassandra")
        .option("keyspace", args.keyspace)
        .option("table", args.table)
        .option("spark.cassandra.connection.host", args.src)
        .option("spark.cassandra.connection.port", args.port)
        # Like ScyllaDB Migrator's source.splitCount (and drover's): Spark partitions to read.
        .option("splitCount", str(args.split_count))
        .load()
    )
    (
        source.write.format("org.apache.spark.sql.cassandra")
        .option("keyspace", args.keyspace)
        .option("table", args.table)
        .option("spark.cassandra.connection.host", args.dst)
        .option("spark.cassandra.connection.port", args.port)
        .mode("append")
        .save()
    )
    t2 = time.monotonic()
    print(
        f"spark-copy: session start {t1 - t0:.1f}s, copy {t2 - t1:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
