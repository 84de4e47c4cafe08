"""Copy one DynamoDB table into another with Spark + emr-dynamodb-hadoop, as ScyllaDB Migrator
does.

Migrator (Scala) reads the source with `sparkContext.hadoopRDD(jobConf, DynamoDBInputFormat,
Text, DynamoDBItemWritable)` and writes the pairs unchanged with `saveAsHadoopDataset(jobConf)`
and DynamoDBOutputFormat. This script makes the same two calls on the JVM through py4j
(JavaSparkContext.hadoopRDD, JavaPairRDD.saveAsHadoopDataset): the items never enter Python, so
what is timed is the connector and Spark, as under Migrator. The job configuration is the one
Migrator builds for a DynamoDB -> DynamoDB job: endpoint, region, credentials, scan segments,
max map tasks, YARN sizing off, and for an on-demand table the connector's default capacity
(40000 RCU/WCU) as the read and write throughput, at the connector's default percentage (0.5).
Like Migrator, it creates the target table from the source's description when it is missing
(here with boto3, in the driver).

Run by bench/dynamodb-copy/run through spark-submit (which sets master, memory, jars and JVM
options):

    spark-submit ... spark_copy.py --src-endpoint URL --src-table T \
        --dst-endpoint URL --dst-table T --segments 16 --max-map-tasks 8
"""

import argparse
import sys
import time

from pyspark.sql import SparkSession

import boto3_copy  # ensure_target and the client settings of the reference copier

# DynamoDBConstants.DEFAULT_CAPACITY_FOR_ON_DEMAND: what Migrator sets as the throughput of an
# on-demand table.
ON_DEMAND_CAPACITY = 40000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src-endpoint", required=True)
    ap.add_argument("--src-table", required=True)
    ap.add_argument("--dst-endpoint", required=True)
    ap.add_argument("--dst-table", required=True)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--max-map-tasks", type=int, default=8)
    args = ap.parse_args()

    t0 = time.monotonic()
    spark = SparkSession.builder.appName("drover-bench-dynamodb-copy").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    sc = spark.sparkContext
    jvm = sc._jvm
    t1 = time.monotonic()

    src = boto3_copy.client(args.src_endpoint, args.region, 2)
    dst = boto3_copy.client(args.dst_endpoint, args.region, 2)
    boto3_copy.ensure_target(src, dst, args.src_table, args.dst_table)

    def job_conf(endpoint: str):
        conf = jvm.org.apache.hadoop.mapred.JobConf(sc._jsc.hadoopConfiguration())
        conf.set("dynamodb.endpoint", endpoint)
        conf.set("dynamodb.region", args.region)
        conf.set("dynamodb.awsAccessKeyId", "dummy")
        conf.set("dynamodb.awsSecretAccessKey", "dummy")
        conf.set("dynamodb.scan.segments", str(args.segments))
        conf.set("dynamodb.max.map.tasks", str(args.max_map_tasks))
        # Migrator: the connector's default sizing asks YARN; off, to be cluster-agnostic.
        conf.set("dynamodb.yarn.enabled", "false")
        conf.set("mapred.input.format.class", "org.apache.hadoop.dynamodb.read.DynamoDBInputFormat")
        conf.set("mapred.output.format.class", "org.apache.hadoop.dynamodb.write.DynamoDBOutputFormat")
        return conf

    desc = src.describe_table(TableName=args.src_table)["Table"]
    read = job_conf(args.src_endpoint)
    read.set("dynamodb.input.tableName", args.src_table)
    read.set("dynamodb.item.count", str(desc.get("ItemCount", 0)))
    read.set("dynamodb.table.size-bytes", str(desc.get("TableSizeBytes", 0)))
    if desc.get("ItemCount"):
        read.set("dynamodb.item.average.size", str(desc["TableSizeBytes"] // desc["ItemCount"]))
    read.set("dynamodb.throughput.read", str(throughput(desc, "ReadCapacityUnits")))

    write = job_conf(args.dst_endpoint)
    write.set("dynamodb.output.tableName", args.dst_table)
    dst_desc = dst.describe_table(TableName=args.dst_table)["Table"]
    write.set("dynamodb.throughput.write", str(throughput(dst_desc, "WriteCapacityUnits")))

    # Classes of the --jars jars: loaded through Spark's class loader, not py4j's default.
    def cls(name: str):
        return jvm.org.apache.spark.util.Utils.classForName(name, True, False)

    rdd = sc._jsc.hadoopRDD(
        read,
        cls("org.apache.hadoop.dynamodb.read.DynamoDBInputFormat"),
        cls("org.apache.hadoop.io.Text"),
        cls("org.apache.hadoop.dynamodb.DynamoDBItemWritable"),
        sc.defaultMinPartitions,
    )
    partitions = rdd.getNumPartitions()
    rdd.saveAsHadoopDataset(write)
    t2 = time.monotonic()
    print(
        f"spark-copy: session start {t1 - t0:.1f}s, copy {t2 - t1:.1f}s, {partitions} Spark partitions"
        f" (input splits; {args.segments} scan segments)",
        file=sys.stderr,
        flush=True,
    )
    spark.stop()
    return 0


def throughput(desc: dict, unit: str) -> int:
    """Migrator's rule: the provisioned capacity, or the connector's on-demand default."""
    if desc.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED") == "PROVISIONED":
        return max(1, desc.get("ProvisionedThroughput", {}).get(unit, 0))
    return ON_DEMAND_CAPACITY


if __name__ == "__main__":
    sys.exit(main())
