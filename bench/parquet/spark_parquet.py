"""Export a Cassandra table to Parquet, or load Parquet files into a Cassandra table, with
Spark + the Spark Cassandra Connector (the engine under ScyllaDB Migrator, whose Parquet
reader and writer are Spark's `spark.read.parquet` / `df.write.parquet`).

Run by bench/parquet/run through spark-submit:

    spark-submit ... spark_parquet.py export --host 127.0.0.1 --keyspace bench --table rows \
        --path /tmp/x --split-count 256
    spark-submit ... spark_parquet.py load --host 127.0.0.2 --keyspace bench --table rows \
        --path /tmp/x
"""

import argparse
import sys
import time

from pyspark.sql import SparkSession


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("direction", choices=["export", "load"])
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", default="9042")
    ap.add_argument("--keyspace", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--split-count", type=int, default=256)
    args = ap.parse_args()

    t0 = time.monotonic()
    spark = SparkSession.builder.appName("drover-bench-spark-parquet").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    t1 = time.monotonic()
    cassandra = dict(
        keyspace=args.keyspace,
        table=args.table,
        **{
            "spark.cassandra.connection.host": args.host,
            "spark.cassandra.connection.port": args.port,
        },
    )
    if args.direction == "export":
        df = (
            spark.read.format("org.apache.spark.sql.cassandra")
            .options(**cassandra)
            .option("splitCount", str(args.split_count))
            .load()
        )
        df.write.mode("overwrite").option("compression", "snappy").parquet(args.path)
    else:
        df = spark.read.parquet(args.path)
        df.write.format("org.apache.spark.sql.cassandra").options(**cassandra).mode("append").save()
    t2 = time.monotonic()
    print(
        f"spark-parquet {args.direction}: session start {t1 - t0:.1f}s, work {t2 - t1:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
