//! The DynamoDB-API test servers (moto and dynalite): clients, tables of a test's own, items
//! written fast, whole tables read back, and job files between them.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
        split_url(&self.url())
    }

    /// A client of it.
    pub fn client(self) -> Client {
        client(&self.url())
    }

    /// A client of it in `region` (both servers keep each region's tables apart).
    pub fn client_in(self, region: &str) -> Client {
        client_in(&self.url(), region)
    }

    /// Its name, for table names and messages.
    pub fn name(self) -> &'static str {
        match self {
            Server::Moto => "moto",
            Server::Dynalite => "dynalite",
        }
    }
}

/// `host` (with its scheme) and `port` of a URL, as a job file's `endpoint` names them.
fn split_url(url: &str) -> (String, u16) {
    let (host, port) = url.rsplit_once(':').expect("URL with a port");
    (host.to_string(), port.parse().expect("port"))
}

/// A client of the DynamoDB API at `url`, with the dummy credentials the servers accept.
pub fn client(url: &str) -> Client {
    client_in(url, "us-east-1")
}

/// A client of the DynamoDB API at `url` in `region`.
pub fn client_in(url: &str, region: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
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

/// Drops `table` if it exists, and waits until it is gone: dynalite deletes tables in the
/// background (`DELETING`), and a table of the same name created or used meanwhile would be
/// the old one, about to vanish.
pub async fn drop_table(c: &Client, table: &str) {
    let _ = c.delete_table().table_name(table).send().await;
    crate::poll(std::time::Duration::from_secs(60), async || {
        match c.describe_table().table_name(table).send().await {
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(format!("{e:?}")),
            Ok(d) => {
                // A table still being created cannot be deleted yet: try again.
                let _ = c.delete_table().table_name(table).send().await;
                Err(format!("{:?}", d.table.and_then(|t| t.table_status)))
            }
        }
    })
    .await
    .unwrap_or_else(|last| panic!("table {table} not gone in 60 s: {last}"));
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

/// Every item of `table`, keyed by its key attributes (those of the table's key schema, hash
/// key first, each value rendered with `{:?}`): a parallel scan of `segments` segments with
/// consistent reads, for whole-table comparisons of tables of any key types and sizes.
pub async fn scan_by_key(c: &Client, table: &str, segments: i32) -> BTreeMap<String, Item> {
    let described = c
        .describe_table()
        .table_name(table)
        .send()
        .await
        .expect("describe table")
        .table
        .expect("a table description");
    let mut key: Vec<(String, KeyType)> = described
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name().to_string(), k.key_type().clone()))
        .collect();
    key.sort_by_key(|(_, kind)| *kind != KeyType::Hash);
    let key: Vec<String> = key.into_iter().map(|(name, _)| name).collect();
    let pages = futures::future::join_all((0..segments).map(|segment| async move {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = c
                .scan()
                .table_name(table)
                .segment(segment)
                .total_segments(segments)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            items.extend(page.items.unwrap_or_default());
            start = page.last_evaluated_key;
            if start.is_none() {
                return items;
            }
        }
    }))
    .await;
    let mut out = BTreeMap::new();
    for item in pages.into_iter().flatten() {
        let k = key
            .iter()
            .map(|name| format!("{:?}", item.get(name)))
            .collect::<Vec<_>>()
            .join(" / ");
        assert!(
            out.insert(k.clone(), item).is_none(),
            "{table}: the scan returned {k} twice"
        );
    }
    out
}

/// Asserts that two tables read by [`scan_by_key`] hold the same items, attribute by
/// attribute; on failure says how many items are missing, extra and different, and shows the
/// first ones (long values cut short).
pub fn assert_same_items(what: &str, src: &BTreeMap<String, Item>, dst: &BTreeMap<String, Item>) {
    let missing: Vec<&String> = src.keys().filter(|k| !dst.contains_key(*k)).collect();
    let extra: Vec<&String> = dst.keys().filter(|k| !src.contains_key(*k)).collect();
    let differing: Vec<&String> = src
        .iter()
        .filter(|(k, v)| dst.get(*k).is_some_and(|d| d != *v))
        .map(|(k, _)| k)
        .collect();
    if missing.is_empty() && extra.is_empty() && differing.is_empty() {
        return;
    }
    let cut = |v: Option<&AttributeValue>| {
        let text = format!("{v:?}");
        match text.char_indices().nth(300) {
            Some((at, _)) => format!("{}...", &text[..at]),
            None => text,
        }
    };
    let mut report = format!(
        "{what}: {} items in the source, {} in the target; {} missing, {} extra, {} different",
        src.len(),
        dst.len(),
        missing.len(),
        extra.len(),
        differing.len()
    );
    for k in missing.iter().take(3) {
        report.push_str(&format!("\n  missing: {}", cut_key(k)));
    }
    for k in extra.iter().take(3) {
        report.push_str(&format!("\n  extra: {}", cut_key(k)));
    }
    for k in differing.iter().take(3) {
        let (a, b) = (&src[*k], &dst[*k]);
        let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
        names.sort();
        names.dedup();
        report.push_str(&format!("\n  different: {}", cut_key(k)));
        for name in names.into_iter().filter(|n| a.get(*n) != b.get(*n)) {
            report.push_str(&format!(
                "\n    {name:?}: source {}, target {}",
                cut(a.get(name)),
                cut(b.get(name))
            ));
        }
    }
    panic!("{report}");
}

fn cut_key(k: &str) -> &str {
    match k.char_indices().nth(200) {
        Some((at, _)) => &k[..at],
        None => k,
    }
}

/// Where `scripts/testenv` installs dynalite: `$DROVER_TESTENV_CACHE` (default
/// `~/.cache/drover-testenv`), `dynalite/node_modules/dynalite/cli.js`.
pub fn dynalite_cli() -> PathBuf {
    let cache = std::env::var_os("DROVER_TESTENV_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/drover-testenv")
        });
    let cli = cache.join("dynalite/node_modules/dynalite/cli.js");
    assert!(
        cli.exists(),
        "{} is missing: scripts/testenv up installs dynalite",
        cli.display()
    );
    cli
}

/// A dynalite of one test's own, on a free loopback port, killed when dropped (also when the
/// test fails): a test can freeze it (SIGSTOP) without disturbing anyone else's tests.
pub struct OwnDynalite {
    child: Child,
    url: String,
}

impl OwnDynalite {
    /// Starts it and waits until it answers `ListTables`.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("node")
            .arg(dynalite_cli())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn node (dynalite)");
        let mut own = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let c = own.client();
        let answered = crate::poll(Duration::from_secs(30), async || {
            if let Some(status) = own.child.try_wait().expect("dynalite's status") {
                panic!("dynalite on port {port} exited with {status}");
            }
            c.list_tables().send().await.map(|_| ())
        })
        .await;
        if let Err(e) = answered {
            panic!("dynalite on port {port} does not answer: {e}");
        }
        own
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client of it.
    pub fn client(&self) -> Client {
        client(&self.url)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for OwnDynalite {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    job_between(
        (&src.url(), src_table),
        (&dst.url(), dst_table),
        extra_source,
        extra_target,
        extra,
    )
}

/// [`job`] between servers named by URL (`http://127.0.0.1:PORT`): a test's own server.
pub fn job_between(
    (src_url, src_table): (&str, &str),
    (dst_url, dst_table): (&str, &str),
    extra_source: &str,
    extra_target: &str,
    extra: &str,
) -> String {
    let (sh, sp) = split_url(src_url);
    let (dh, dp) = split_url(dst_url);
    format!(
        "source:\n  type: dynamodb\n  table: {src_table}\n  region: us-east-1\n  endpoint:\n    host: {sh}\n    port: {sp}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n{extra_source}target:\n  type: dynamodb\n  table: {dst_table}\n  region: us-east-1\n  endpoint:\n    host: {dh}\n    port: {dp}\n  credentials:\n    accessKey: dummy\n    secretKey: dummy\n  streamChanges: false\n{extra_target}{extra}"
    )
}
