//! The DynamoDB-API test servers (moto and dynalite): clients, tables of a test's own, items
//! written fast, whole tables read back, and job files between them.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, PutRequest,
    ScalarAttributeType, WriteRequest,
};

/// One item.
pub type Item = HashMap<String, AttributeValue>;

/// A DynamoDB-API test server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// moto's server: Streams and TTL.
    Moto,
    /// dynalite: stricter request validation.
    Dynalite,
}

impl Server {
    /// Both servers, for tests that run on each.
    pub const ALL: [Server; 2] = [Server::Moto, Server::Dynalite];

    /// Its URL, from the test environment (`DROVER_TEST_MOTO`, `DROVER_TEST_DYNALITE`).
    pub fn url(self) -> String {
        let var = match self {
            Server::Moto => "DROVER_TEST_MOTO",
            Server::Dynalite => "DROVER_TEST_DYNALITE",
        };
        std::env::var(var).unwrap_or_else(|_| {
            panic!("{var} (source target/testenv/env after scripts/testenv up)")
        })
    }

    /// `host` and `port` of a job file's `endpoint`.
    pub fn endpoint(self) -> (String, u16) {
        let url = self.url();
        let (host, port) = url.rsplit_once(':').expect("URL with a port");
        (host.to_string(), port.parse().expect("port"))
    }

    /// A client of it.
    pub fn client(self) -> Client {
        client(&self.url())
    }

    /// Its name, for table names and messages.
    pub fn name(self) -> &'static str {
        match self {
            Server::Moto => "moto",
            Server::Dynalite => "dynalite",
        }
    }
}

/// A client of the DynamoDB API at `url`, with the dummy credentials the servers accept.
pub fn client(url: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(Credentials::new("dummy", "dummy", None, None, "tests"))
        .build();
    Client::from_conf(config)
}

/// A table name of this test process's own: `base` and the process id, since other checkouts'
/// runs share the servers.
pub fn table_name(base: &str) -> String {
    format!("{base}_p{}", std::process::id())
}

/// Drops `table` if it exists.
pub async fn drop_table(c: &Client, table: &str) {
    let _ = c.delete_table().table_name(table).send().await;
}

/// Creates `table` fresh (dropped first) with a string hash key `id` and, when `range` is set,
/// a number range key of that name; on-demand billing.
pub async fn fresh_table(c: &Client, table: &str, range: Option<&str>) {
    drop_table(c, table).await;
    let mut req = c
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("id", KeyType::Hash))
        .attribute_definitions(attr("id", ScalarAttributeType::S));
    if let Some(r) = range {
        req = req
            .key_schema(key(r, KeyType::Range))
            .attribute_definitions(attr(r, ScalarAttributeType::N));
    }
    req.send().await.expect("create table");
    wait_active(c, table).await;
}

/// A key schema element.
pub fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .unwrap()
}

/// An attribute definition.
pub fn attr(name: &str, kind: ScalarAttributeType) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(kind)
        .build()
        .unwrap()
}

/// Waits until `table` is `ACTIVE`.
pub async fn wait_active(c: &Client, table: &str) {
    crate::poll(std::time::Duration::from_secs(60), async || {
        let status = c
            .describe_table()
            .table_name(table)
            .send()
            .await
            .ok()
            .and_then(|d| d.table)
            .and_then(|t| t.table_status);
        match status {
            Some(aws_sdk_dynamodb::types::TableStatus::Active) => Ok(()),
            other => Err(other),
        }
    })
    .await
    .unwrap_or_else(|last| panic!("table {table} not ACTIVE in 60 s (last status {last:?})"));
}

/// Writes `items` with `BatchWriteItem`, 25 at a time, 8 requests at once, retrying what the
/// server leaves unprocessed.
pub async fn put_all(c: &Client, table: &str, items: Vec<Item>) {
    use futures::StreamExt;
    let batches: Vec<Vec<Item>> = items.chunks(25).map(<[Item]>::to_vec).collect();
    futures::stream::iter(batches)
        .for_each_concurrent(8, |batch| async move {
            let mut pending: Vec<WriteRequest> = batch
                .into_iter()
                .map(|item| {
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                        .build()
                })
                .collect();
            while !pending.is_empty() {
                let out = c
                    .batch_write_item()
                    .request_items(table, pending)
                    .send()
                    .await
                    .expect("batch write");
                pending = out
                    .unprocessed_items
                    .and_then(|mut m| m.remove(table))
                    .unwrap_or_default();
            }
        })
        .await;
}

/// Every item of `table`, by its `id` (and range key, when it has one) rendered as a string.
pub async fn scan_all(c: &Client, table: &str) -> HashMap<String, Item> {
    let mut out = HashMap::new();
    let mut start = None;
    loop {
        let page = c
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in page.items.unwrap_or_default() {
            out.insert(key_of(&item), item);
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return out;
        }
    }
}

/// Items in `table` (a counting scan).
pub async fn count(c: &Client, table: &str) -> usize {
    let mut n = 0;
    let mut start = None;
    loop {
        let page = c
            .scan()
            .table_name(table)
            .select(aws_sdk_dynamodb::types::Select::Count)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("count scan");
        n += page.count as usize;
        start = page.last_evaluated_key;
        if start.is_none() {
            return n;
        }
    }
}

fn key_of(item: &Item) -> String {
    let mut k = match item.get("id") {
        Some(AttributeValue::S(s)) => s.clone(),
        other => format!("{other:?}"),
    };
    for (name, v) in item {
        if name != "id"
            && let AttributeValue::N(n) = v
            && name == "sk"
        {
            k.push('/');
            k.push_str(n);
        }
    }
    k
}

/// A job file copying `src_table` on `src` to `dst_table` on `dst`, with `extra_source` and
/// `extra_target` lines in those sections (two-space indented) and `extra` top-level keys.
pub fn job(
    (src, src_table): (Server, &str),
    (dst, dst_table): (Server, &str),
    extra_source: &str,
    extra_target: &str,
    extra: &str,
) -> String {
    let (sh, sp) = src.endpoint();
    let (dh, dp) = dst.endpoint();
    format!(
        "source:\n  type: dynamodb\n  table: {src_table}\n  region: us-east-1\n  endpoint:\n    host: {sh}\n    port: {sp}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n{extra_source}target:\n  type: dynamodb\n  table: {dst_table}\n  region: us-east-1\n  endpoint:\n    host: {dh}\n    port: {dp}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n  streamChanges: false\n{extra_target}{extra}"
    )
}
