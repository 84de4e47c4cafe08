//! S3 clients, built one way for every user (Parquet files, savepoints): the region, an
//! S3-compatible endpoint (path-style requests), keys or the AWS environment, and bounded
//! retries.

use std::time::Duration;

use object_store::RetryConfig;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use secrecy::ExposeSecret;

use crate::connectors::dynamodb::config::{AwsCredentials, Endpoint};

/// A client of `bucket`. `region` unset: `AWS_REGION`, else `us-east-1`; `credentials` unset:
/// the AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, …).
pub fn client(
    bucket: &str,
    region: Option<&str>,
    endpoint: Option<&Endpoint>,
    credentials: Option<&AwsCredentials>,
) -> Result<AmazonS3, object_store::Error> {
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        // Bounded: a wrong endpoint or bucket fails in seconds, not minutes.
        .with_retry(RetryConfig {
            max_retries: 4,
            retry_timeout: Duration::from_secs(60),
            ..Default::default()
        })
        .with_region(
            region
                .map(str::to_string)
                .or_else(|| std::env::var("AWS_REGION").ok())
                .unwrap_or_else(|| "us-east-1".into()),
        );
    if let Some(e) = endpoint {
        let url = e.url();
        b = b
            .with_allow_http(url.starts_with("http://"))
            .with_endpoint(url)
            .with_virtual_hosted_style_request(false);
    }
    if let Some(c) = credentials {
        b = b
            .with_access_key_id(c.access_key.expose_secret())
            .with_secret_access_key(c.secret_key.expose_secret());
    }
    b.build()
}
