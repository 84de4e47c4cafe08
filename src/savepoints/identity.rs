//! Which migration a savepoint belongs to.

use serde_json::Value;

/// Keys of `source`/`target` that tune how a job runs, not what it copies: a resume may change
/// them (a different `splitCount` still skips every finished token range). Credentials and TLS
/// settings are not part of the identity either. DynamoDB's `scanSegments` is *not* tuning:
/// `skipSegments` numbers only mean something for the segment count they were made with, so a
/// savepoint of another count belongs to another migration.
const TUNING: &[&str] = &[
    "credentials",
    "sslOptions",
    "splitCount",
    "connections",
    "fetchSize",
    "consistencyLevel",
    "maxConcurrentUnits",
    "maxInFlight",
    "rowsPerSecond",
    "bytesPerSecond",
    "localDC",
    "readThroughput",
    "throughputReadPercent",
    "maxMapTasks",
    "writeThroughput",
    "throughputWritePercent",
    "removeConsumedCapacity",
    "billingMode",
    "allowSystemKeyspace",
    "batchSize",
    "maxConcurrentFiles",
    "compression",
    // How rows reach a CQL target, not which: a job may switch between CQL writes and
    // SSTables and resume.
    "bulkWrite",
    "bulkSidecars",
    "bulkSidecarPort",
    "bulkSkipExtendedVerify",
    // Which replicas a snapshot read takes, not which rows.
    "bulkReadConsistency",
];

/// Keys whose `false` is what leaving them out means. ScyllaDB Migrator's savepoints spell out
/// every setting of the job it read (`preserveTimestamps: false`), the job file need not.
const FALSE_BY_DEFAULT: &[&str] = &[
    "preserveTimestamps",
    "stripTrailingZerosForDecimals",
    "dropNullPrimaryKeys",
    "streamChanges",
    "skipInitialSnapshotTransfer",
    "truncateTimestamps",
];

/// The identity of a migration: its `source`, `target` and `renames`, without tuning keys and
/// secrets. Two documents describe the same migration when their identities are equal: a job
/// file and a savepoint ScyllaDB Migrator wrote for it too, though Migrator writes the type it
/// understood (`cassandra` for `scylla`), every default, and no null.
pub fn identity(doc: &Value) -> Value {
    let side = |key: &str| {
        let mut v = doc.get(key).cloned().unwrap_or(Value::Null);
        if let Some(map) = v.as_object_mut() {
            map.retain(|k, v| {
                let default = v.is_null()
                    || FALSE_BY_DEFAULT.contains(&k.as_str()) && *v == Value::Bool(false);
                !TUNING.contains(&k.as_str()) && !default
            });
            if let Some(Value::String(t)) = map.get_mut("type") {
                // One connector each, whatever the spelling.
                let canonical = match t.as_str() {
                    "scylla" => "cassandra",
                    "dynamo" => "dynamodb",
                    other => other,
                };
                *t = canonical.to_string();
            }
        }
        v
    };
    let renames = doc
        .get("renames")
        .cloned()
        .filter(|v| !v.is_null())
        .unwrap_or(Value::Array(vec![]));
    serde_json::json!({ "source": side("source"), "target": side("target"), "renames": renames })
}

#[cfg(test)]
mod tests {
    use super::identity;
    use serde_json::json;

    fn dynamo(segments: u32, read_throughput: u32) -> serde_json::Value {
        json!({
            "source": {"type": "dynamodb", "table": "t", "scanSegments": segments,
                       "readThroughput": read_throughput,
                       "credentials": {"accessKey": "a", "secretKey": "b"}},
            "target": {"type": "dynamodb", "table": "u", "streamChanges": false},
        })
    }

    #[test]
    fn tuning_keys_do_not_change_the_migration() {
        assert_eq!(identity(&dynamo(10, 100)), identity(&dynamo(10, 5)));
    }

    #[test]
    fn a_savepoint_written_by_scylla_migrator_is_of_the_job_it_read() {
        let job = json!({
            "source": {"type": "scylla", "host": "h", "port": 9042, "keyspace": "k", "table": "t",
                       "splitCount": 8},
            "target": {"type": "scylla", "host": "g", "port": 9042, "keyspace": "k", "table": "t"},
        });
        // As Migrator's encoder writes it back: its type names, defaults spelled out, no
        // nulls at all but `renames: null`.
        let savepoint = json!({
            "source": {"type": "cassandra", "host": "h", "port": 9042, "keyspace": "k", "table": "t",
                       "splitCount": 8, "fetchSize": 1000, "preserveTimestamps": false,
                       "consistencyLevel": "LOCAL_QUORUM"},
            "target": {"type": "scylla", "host": "g", "port": 9042, "keyspace": "k", "table": "t",
                       "stripTrailingZerosForDecimals": false, "consistencyLevel": "LOCAL_QUORUM",
                       "writeTTLInS": null},
            "renames": null,
        });
        assert_eq!(identity(&job), identity(&savepoint));
        let mut kept = savepoint.clone();
        kept["source"]["preserveTimestamps"] = json!(true);
        assert_ne!(
            identity(&job),
            identity(&kept),
            "timestamps kept is another copy"
        );
    }

    #[test]
    fn another_segment_count_is_another_migration() {
        // skipSegments [0, 1] of 10 segments are not segments 0 and 1 of 20.
        assert_ne!(identity(&dynamo(10, 100)), identity(&dynamo(20, 100)));
    }
}
