//! The client side of Cassandra Sidecar's snapshot routes: a snapshot of the table taken on
//! each node by the drover beside it, its SSTables downloaded here, the snapshot cleared.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::{StreamExt, TryStreamExt};
use regex::Regex;
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::super::CqlSource;

/// How long Cassandra keeps a snapshot this run did not clear (it died meanwhile).
const SNAPSHOT_TTL: &str = "1d";
/// Components downloaded at once from one node.
const DOWNLOADS_AT_ONCE: usize = 4;

/// The most of a snapshot listing that is read (as `live_migration.max_listing_bytes`'s
/// default): a node's snapshot of one table lists a few hundred bytes per SSTable component.
const SNAPSHOT_LISTING_READ: u64 = 256 << 20;

/// The SSTable components the reader uses (of the BIG and BTI formats); a snapshot's
/// `manifest.json` and `schema.cql` are not downloaded.
static COMPONENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z]{2}-[0-9a-z_]+-(big|bti)-(Data|Statistics|CompressionInfo|Index|Summary|Filter|Partitions|Rows|TOC|Digest)\.(db|txt|crc32)$")
        .expect("a valid pattern")
});

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    snapshot_files_info: Vec<FileInfo>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileInfo {
    size: u64,
    data_dir_index: usize,
    file_name: String,
}

/// The drovers beside the source's nodes.
struct Sidecars {
    client: reqwest::Client,
    by_node: std::collections::BTreeMap<String, String>,
    port: u16,
    token: Option<secrecy::SecretString>,
}

impl Sidecars {
    fn base(&self, node: &str) -> String {
        match self.by_node.get(node) {
            Some(sidecar) => format!("http://{sidecar}"),
            None if node.contains(':') => format!("http://[{node}]:{}", self.port),
            None => format!("http://{node}:{}", self.port),
        }
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let request = self.client.request(method, url);
        match &self.token {
            Some(token) => request.bearer_auth(token.expose_secret()),
            None => request,
        }
    }

    /// Sends one request, retried while the drover is unreachable or busy; its answer when
    /// it is a success.
    async fn send(
        &self,
        node: &str,
        method: reqwest::Method,
        url: &str,
    ) -> Result<reqwest::Response, String> {
        let once = || async {
            let r = self
                .request(method.clone(), url)
                .send()
                .await
                .map_err(|e| {
                    (
                        true,
                        format!("the drover beside node {node} is unreachable: {e}"),
                    )
                })?;
            let status = r.status();
            if status.is_success() {
                return Ok(r);
            }
            let busy = status == reqwest::StatusCode::TOO_MANY_REQUESTS
                || status == reqwest::StatusCode::SERVICE_UNAVAILABLE;
            let said = crate::answer::error_message(r).await;
            Err((
                busy,
                format!(
                    "the drover beside node {node} answered {method} {url} with {status}: {said}"
                ),
            ))
        };
        once.retry(ExponentialBuilder::default().with_max_times(5))
            .when(|(transient, _)| *transient)
            .await
            .map_err(|(_, e)| e)
    }
}

/// Snapshots `keyspace.table` on every node, downloads its SSTables into `spool`
/// (`n<node>/d<dataDirIndex>/<file>`) and clears the snapshots: the `Data.db` files.
pub async fn fetch_all(
    src: &CqlSource,
    table: &(String, String),
    nodes: &[String],
    spool: &Path,
) -> Result<Vec<PathBuf>, String> {
    let sidecars = Sidecars {
        client: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(crate::config::CLIENT_POOL_IDLE)
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?,
        by_node: src.bulk_sidecars.clone(),
        port: src.bulk_sidecar_port,
        token: crate::auth::peer::from_env()?,
    };
    let name = format!("drover-{}", uuid::Uuid::now_v7().simple());
    let mut data = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let base = format!(
            "{}/api/v1/keyspaces/{}/tables/{}/snapshots/{name}",
            sidecars.base(node),
            table.0,
            table.1
        );
        sidecars
            .send(
                node,
                reqwest::Method::PUT,
                &format!("{base}?ttl={SNAPSHOT_TTL}"),
            )
            .await?;
        let fetched = fetch_node(&sidecars, node, &base, &spool.join(format!("n{i}"))).await;
        // Cleared whatever became of the download: the copy here is what is read.
        if let Err(e) = sidecars.send(node, reqwest::Method::DELETE, &base).await {
            tracing::warn!(node, snapshot = %name, error = %e, "bulk read: the snapshot could not be cleared (Cassandra removes it after its ttl, 1d)");
        }
        data.extend(fetched?);
    }
    Ok(data)
}

/// Downloads the SSTable components of one node's snapshot at `base` into `dir`.
async fn fetch_node(
    sidecars: &Sidecars,
    node: &str,
    base: &str,
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    let listing: Listing = crate::answer::json_within(
        sidecars.send(node, reqwest::Method::GET, base).await?,
        SNAPSHOT_LISTING_READ,
    )
    .await
    .map_err(|e| format!("the snapshot listing of node {node}: {e}"))?;
    let files: Vec<FileInfo> = listing
        .snapshot_files_info
        .into_iter()
        .filter(|f| COMPONENT.is_match(&f.file_name))
        .collect();
    let total: u64 = files.iter().map(|f| f.size).sum();
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let free = fs2_free(dir);
    if let Some(free) = free
        && free < total
    {
        return Err(format!(
            "the snapshot of node {node} is {total} bytes, and {} has {free} bytes free",
            dir.display()
        ));
    }
    let paths: Vec<PathBuf> = futures::stream::iter(files)
        .map(|f| async move {
            let sub = dir.join(format!("d{}", f.data_dir_index));
            let path = sub.join(&f.file_name);
            let url = format!(
                "{base}/components/{}?dataDirectoryIndex={}",
                f.file_name, f.data_dir_index
            );
            download(sidecars, node, &url, &path, f.size).await?;
            Ok::<_, String>(path)
        })
        .buffer_unordered(DOWNLOADS_AT_ONCE)
        .try_collect()
        .await?;
    Ok(paths
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with("-Data.db"))
        .collect())
}

/// Free bytes of the file system of `dir`, when known.
fn fs2_free(dir: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Downloads one component to a temporary name, checks its size, and renames it.
async fn download(
    sidecars: &Sidecars,
    node: &str,
    url: &str,
    path: &Path,
    size: u64,
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let parent = path.parent().expect("a file in a directory");
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    let part = path.with_extension("part");
    let io = |e: std::io::Error| format!("{}: {e}", part.display());
    let r = sidecars.send(node, reqwest::Method::GET, url).await?;
    let mut file = tokio::fs::File::create(&part).await.map_err(io)?;
    let mut body = r.bytes_stream();
    let mut got = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("downloading {url} from node {node}: {e}"))?;
        got += chunk.len() as u64;
        file.write_all(&chunk).await.map_err(io)?;
    }
    file.flush().await.map_err(io)?;
    if got != size {
        return Err(format!(
            "{url} from node {node}: {got} bytes received, the listing said {size}"
        ));
    }
    tokio::fs::rename(&part, path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sstable_components_are_downloaded() {
        for yes in [
            "nb-1-big-Data.db",
            "oa-3gfx_0abc_12345-big-Statistics.db",
            "nb-12-big-TOC.txt",
            "nb-12-big-Digest.crc32",
            "da-1-bti-Partitions.db",
        ] {
            assert!(COMPONENT.is_match(yes), "{yes}");
        }
        for no in [
            "manifest.json",
            "schema.cql",
            "../nb-1-big-Data.db",
            "nb-1-big-Data.db.part",
        ] {
            assert!(!COMPONENT.is_match(no), "{no}");
        }
    }
}
