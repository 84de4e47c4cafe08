//! S3 clients, built one way for every user (Parquet files, savepoints): the region, an
//! S3-compatible endpoint (path-style requests), keys or the AWS environment, and bounded
//! retries.

use std::time::Duration;

use object_store::RetryConfig;
use object_store::aws::{AmazonS3, AmazonS3Builder};

/// An access key pair, exposed only to be handed to the client.
pub struct Keys<'a> {
    /// Access key id.
    pub access_key: &'a str,
    /// Secret access key.
    pub secret_key: &'a str,
}

/// A client of `bucket`. `region` unset: `AWS_REGION`, else `us-east-1`; `credentials` unset:
/// the AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, …).
pub fn client(
    bucket: &str,
    region: Option<&str>,
    endpoint_url: Option<&str>,
    keys: Option<Keys<'_>>,
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
    if let Some(url) = endpoint_url {
        b = b
            .with_allow_http(url.starts_with("http://"))
            .with_endpoint(url)
            .with_virtual_hosted_style_request(false);
    }
    if let Some(k) = keys {
        b = b
            .with_access_key_id(k.access_key)
            .with_secret_access_key(k.secret_key);
    }
    b.build()
}
