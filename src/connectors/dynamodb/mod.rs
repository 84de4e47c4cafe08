//! DynamoDB and ScyllaDB Alternator: a table read by parallel scan segments
//! (`Segment`/`TotalSegments`, each a unit of progress recorded as `skipSegments`) and written
//! with `BatchWriteItem`; the target table created from the source's description; the
//! source's stream applied after the snapshot; the validation of a copy by lookups of each
//! table's items in the other (`compare`).
//!
//! Items stay in the SDK's `AttributeValue` form from the scan to the write, so every type
//! (numbers of 38 digits, binary sets, deep nesting) round-trips without conversion.

mod connector;
pub mod compare;
pub mod config;
pub mod item;
pub mod retry;
pub mod scan;
pub mod stream;
pub mod table;
pub mod transfer;

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{Credentials, Region};
use secrecy::ExposeSecret;

pub use connector::Dynamo;
pub use config::{Connection, DynamoSource, DynamoTarget};
pub use retry::DynamoError;

/// The scan segments already copied (ScyllaDB Migrator's key).
pub static SEGMENTS: crate::savepoints::Key = crate::savepoints::Key {
    name: "skipSegments",
    shape: crate::savepoints::Shape::Numbers,
    label: "segments",
    always: true,
};

/// drover: where the replication of the source's stream stands (`streamChanges`;
/// [`StreamPositions`](crate::savepoints::StreamPositions)).
pub static STREAM: crate::savepoints::Key = crate::savepoints::Key {
    name: "streamPositions",
    shape: crate::savepoints::Shape::Stream,
    label: "stream",
    always: false,
};

/// Region used when a job names none (test servers and Alternator ignore it, the signature
/// needs one).
const DEFAULT_REGION: &str = "us-east-1";

/// Session name of an assumed role when the job names none (ScyllaDB Migrator's).
const DEFAULT_SESSION_NAME: &str = "scylla-migrator";

/// How long a connection may take to open. Refused connections fail at once; this bounds a
/// host that drops packets.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one request may wait for its answer. A page of a scan is at most 1 MB and a
/// `BatchWriteItem` at most 25 items, which a healthy server answers in milliseconds, under
/// load in a few seconds. A server that hangs (stopped, overloaded, partitioned) accepts the
/// connection and never answers: only this timeout ends the request, and until then the job
/// shows neither a retry nor `waiting`. At 10 s the operator sees `waiting: ...` soon after the
/// server stops answering, and a slow answer is rarely cut short; the request is then tried
/// again, which is harmless since scans and whole-item puts are idempotent.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The SDK configuration of a connection: endpoint, region, credentials, timeouts. The SDK's
/// own retries are off: the engine retries, and shows the job as waiting while it does.
pub async fn sdk_config(c: &Connection) -> aws_config::SdkConfig {
    let region = Region::new(
        c.region
            .clone()
            .unwrap_or_else(|| DEFAULT_REGION.to_string()),
    );
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(region.clone())
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build(),
        );
    if let Some(endpoint) = &c.endpoint {
        loader = loader.endpoint_url(endpoint.url());
    }
    if let Some(creds) = &c.credentials {
        let base = Credentials::new(
            creds.access_key.expose_secret().to_string(),
            creds.secret_key.expose_secret().to_string(),
            None,
            None,
            "drover-job-file",
        );
        match &creds.assume_role {
            None => loader = loader.credentials_provider(base),
            Some(role) => {
                let provider = aws_config::sts::AssumeRoleProvider::builder(role.arn.clone())
                    .session_name(
                        role.session_name
                            .clone()
                            .unwrap_or_else(|| DEFAULT_SESSION_NAME.to_string()),
                    )
                    .region(region)
                    .build_from_provider(base)
                    .await;
                loader = loader.credentials_provider(provider);
            }
        }
    }
    loader.load().await
}

/// A DynamoDB client for a connection.
pub async fn client(c: &Connection) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk_config(c).await)
}

/// A DynamoDB Streams client for a connection.
pub async fn streams_client(c: &Connection) -> aws_sdk_dynamodbstreams::Client {
    aws_sdk_dynamodbstreams::Client::new(&sdk_config(c).await)
}

/// Where a connection points, for messages (never with credentials).
pub fn describe(c: &Connection) -> String {
    match &c.endpoint {
        Some(e) => format!("table {:?} at {}", c.table, e.url()),
        None => format!(
            "table {:?} in AWS region {}",
            c.table,
            c.region.as_deref().unwrap_or(DEFAULT_REGION)
        ),
    }
}
