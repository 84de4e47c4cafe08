//! Which migration a savepoint belongs to.

use serde_json::Value;

/// Keys of `source`/`target` that tune how a job runs, not what it copies: a resume may change
/// them (a different `splitCount` still skips every finished token range). Credentials and TLS
/// settings are not part of the identity either.
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
    "scanSegments",
    "readThroughput",
    "throughputReadPercent",
    "maxMapTasks",
];

/// The identity of a migration: its `source`, `target` and `renames`, without tuning keys and
/// secrets. Two documents describe the same migration when their identities are equal.
pub fn identity(doc: &Value) -> Value {
    let side = |key: &str| {
        let mut v = doc.get(key).cloned().unwrap_or(Value::Null);
        if let Some(map) = v.as_object_mut() {
            map.retain(|k, _| !TUNING.contains(&k.as_str()));
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
