"""Copy one MySQL/MariaDB table into a CQL table with Spark's JDBC source + the Spark Cassandra
Connector.

The engine of ScyllaDB Migrator's MySQL source, used here through the DataFrame API: read the
table with `spark.read.format("jdbc")`, split on a numeric column into numPartitions strides
between the bounds (Spark's own partitioning, which drover's `partitionColumn` copies), each
range streamed by MySQL Connector/J (`useCursorFetch=true` in the URL, `fetchsize` rows per
round trip), and append it to the CQL table. Connector settings other than the host stay at
their defaults.

Run by bench/mysql-copy/run through spark-submit (which sets master, memory, jars and JVM
options):

    spark-submit ... spark_jdbc_copy.py \
        --url 'jdbc:mysql://127.0.0.1:3306/drover_bench?useCursorFetch=true&sslMode=DISABLED' \
        --user drover --password drover --table rows \
        --partition-column id --num-partitions 16 --lower-bound 1 --upper-bound 5000001 \
        --fetch-size 1000 --dst 127.0.0.2 --keyspace bench_mysql --cql-table rows
"""

import argparse
import sys
import time

from pyspark.sql import SparkSession


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="JDBC URL, database included")
    ap.add_argument("--driver", default="com.mysql.cj.jdbc.Driver")
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--table", required=True, help="the MySQL table (quoted for SQL here)")
    ap.add_argument("--partition-column", required=True)
    ap.add_argument("--num-partitions", type=int, required=True)
    ap.add_argument("--lower-bound", type=int, required=True)
    ap.add_argument("--upper-bound", type=int, required=True)
    ap.add_argument("--fetch-size", type=int, default=1000)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", default="9042")
    ap.add_argument("--keyspace", required=True)
    ap.add_argument("--cql-table", required=True)
    args = ap.parse_args()

    t0 = time.monotonic()
    spark = SparkSession.builder.appName("drover-bench-spark-jdbc-copy").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    t1 = time.monotonic()

    source = (
        spark.read.format("jdbc")
        .option("url", args.url)
        .option("driver", args.driver)
        .option("user", args.user)
        .option("password", args.password)
        # Back-quoted: Spark pastes dbtable into its SELECT as is, and ROWS is a keyword.
        .option("dbtable", "`" + args.table.replace("`", "``") + "`")
        # Like ScyllaDB Migrator's MySQL source (and drover's): numPartitions strides of the
        # partition column between the bounds, the first and last open-ended.
        .option("partitionColumn", args.partition_column)
        .option("numPartitions", str(args.num_partitions))
        .option("lowerBound", str(args.lower_bound))
        .option("upperBound", str(args.upper_bound))
        .option("fetchsize", str(args.fetch_size))
        .load()
    )
    (
        source.write.format("org.apache.spark.sql.cassandra")
        .option("keyspace", args.keyspace)
        .option("table", args.cql_table)
        .option("spark.cassandra.connection.host", args.dst)
        .option("spark.cassandra.connection.port", args.port)
        .mode("append")
        .save()
    )
    t2 = time.monotonic()
    print(
        f"spark-jdbc-copy: session start {t1 - t0:.1f}s, copy {t2 - t1:.1f}s"
        f" ({source.rdd.getNumPartitions()} JDBC partitions)",
        file=sys.stderr,
        flush=True,
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
