//! The client side of Cassandra Sidecar's bulk-load routes: a unit's SSTables uploaded to the
//! drover beside a replica, component by component with their xxHash32, then imported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use super::BulkError;

/// How long one import may stay pending (202) before the unit fails.
const IMPORT_WAIT: Duration = Duration::from_secs(3600);
/// How often a pending import is asked about.
const IMPORT_POLL: Duration = Duration::from_millis(500);

/// The drovers beside the target's nodes.
#[derive(Clone)]
pub struct Sidecars {
    client: reqwest::Client,
    by_node: BTreeMap<String, String>,
    port: u16,
    /// The query of every import: empty (the Sidecar's defaults, extended verify on), or
    /// `?extendedVerify=false`.
    import_query: &'static str,
    /// The bearer token of `DROVER_PEER_TOKEN`, for drovers whose `auth` gives it the `peer`
    /// (or `operator`) role.
    token: Option<secrecy::SecretString>,
    /// How long a drover that is unreachable or busy is waited for (`retryForSeconds`).
    wait: Duration,
    /// The drovers being waited for now, by node: why.
    away: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

/// Whether an answer is worth waiting and asking again for (the drover restarting, behind a
/// proxy that cannot reach it, overloaded). Not a failed import (500) nor a full disk (507):
/// those fail the unit at once, with their message.
fn transient(status: reqwest::StatusCode) -> bool {
    use reqwest::StatusCode as S;
    matches!(
        status,
        S::BAD_GATEWAY | S::SERVICE_UNAVAILABLE | S::GATEWAY_TIMEOUT | S::TOO_MANY_REQUESTS
    )
}

async fn message_of(r: reqwest::Response) -> String {
    let status = r.status();
    format!("{status}: {}", crate::answer::error_message(r).await)
}

impl Sidecars {
    /// The drover of each node: `by_node[address]`, else the node's address and `port`; its
    /// imports with or without the node's extended verify; one that is unreachable or busy
    /// waited for up to `wait`.
    pub fn new(
        by_node: BTreeMap<String, String>,
        port: u16,
        extended_verify: bool,
        wait: Duration,
    ) -> Result<Self, BulkError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(crate::config::CLIENT_POOL_IDLE)
            .build()
            .map_err(|e| BulkError::Upload {
                node: String::new(),
                message: format!("cannot build an HTTP client: {e}"),
            })?;
        let token = crate::auth::peer::from_env().map_err(|message| BulkError::Upload {
            node: String::new(),
            message,
        })?;
        Ok(Self {
            client,
            by_node,
            port,
            import_query: if extended_verify {
                ""
            } else {
                "?extendedVerify=false"
            },
            token,
            wait,
            away: Default::default(),
        })
    }

    /// Why the load waits now, when it waits for a drover.
    pub fn waiting(&self) -> Option<String> {
        let away = self.away.lock().unwrap_or_else(|p| p.into_inner());
        let (node, why) = away.iter().next()?;
        // The nodes waited for are named (up to `NAMED`), the first with its reason, so an
        // operator looking for the node that went away finds it even when another is slow.
        const NAMED: usize = 8;
        let others: Vec<&str> = away
            .keys()
            .skip(1)
            .take(NAMED - 1)
            .map(String::as_str)
            .collect();
        let more = match away.len().saturating_sub(NAMED) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Some(match others.as_slice() {
            [] => format!("the drover beside node {node} is unreachable or busy: {why}"),
            _ => format!(
                "the drovers beside nodes {node}, {}{more} are unreachable or busy ({} waited for); {node}: {why}",
                others.join(", "),
                away.len()
            ),
        })
    }

    /// Records that the drover beside `node` answered, or was given up on.
    fn back(&self, node: &str) {
        self.away
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
    }

    /// `e`, saying how long the drover was waited for when it was.
    fn gave_up(&self, e: BulkError) -> BulkError {
        match e {
            BulkError::Unreachable { node, message } => BulkError::Unreachable {
                node,
                message: format!(
                    "{message} (waited for {}s, retryForSeconds)",
                    self.wait.as_secs()
                ),
            },
            other => other,
        }
    }

    /// Says that the drover beside `node` is being waited for, in the log and in the job's
    /// phase.
    fn waiting_for(&self, node: &str, e: &BulkError, after: Duration) {
        let why = match e {
            BulkError::Unreachable { message, .. } => message.clone(),
            other => other.to_string(),
        };
        self.away
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.to_string(), why);
        tracing::warn!(
            node,
            error = %e,
            "bulk write: waiting for the drover beside the node (asking again in {:.1}s; for at most {}s, retryForSeconds)",
            after.as_secs_f64(),
            self.wait.as_secs()
        );
    }

    /// A PUT with the token, if any.
    fn put(&self, url: &str) -> reqwest::RequestBuilder {
        use secrecy::ExposeSecret;
        let request = self.client.put(url);
        match &self.token {
            Some(token) => request.bearer_auth(token.expose_secret()),
            None => request,
        }
    }

    /// `http://host:port` of the drover beside `node`.
    pub fn base(&self, node: &str) -> String {
        match self.by_node.get(node) {
            Some(sidecar) => format!("http://{sidecar}"),
            None if node.contains(':') => format!("http://[{node}]:{}", self.port),
            None => format!("http://{node}:{}", self.port),
        }
    }

    /// Uploads the SSTable components in `dir` to `node` under `upload_id` (each `Data.db`
    /// last, as Sidecar clients do), then has it import them. An upload id the node imported
    /// already (a unit whose import outlived the run that made it) is only asked about.
    pub async fn load(
        &self,
        node: &str,
        upload_id: &str,
        (keyspace, table): (&str, &str),
        dir: &Path,
    ) -> Result<(), BulkError> {
        let base = self.base(node);
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .and_then(|rd| rd.map(|e| e.map(|e| e.path())).collect())
            .map_err(|e| BulkError::Write(format!("{}: {e}", dir.display())))?;
        files.sort_by_key(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            (name.ends_with("-Data.db"), name.into_owned())
        });
        let upload = |file: PathBuf| {
            let url = format!(
                "{base}/api/v1/uploads/{upload_id}/keyspaces/{keyspace}/tables/{table}/components/{}",
                file.file_name().unwrap_or_default().to_string_lossy()
            );
            async move { self.put_file(node, &url, &file).await }
        };
        for file in files {
            let retried = (|| upload(file.clone()))
                .retry(
                    ExponentialBuilder::default()
                        .with_max_delay(Duration::from_secs(10))
                        .without_max_times()
                        .with_total_delay(Some(self.wait)),
                )
                .when(BulkError::is_transient)
                .notify(|e, after| self.waiting_for(node, e, after))
                .await;
            self.back(node);
            match retried {
                Ok(true) => {}
                // Imported already: nothing to upload.
                Ok(false) => break,
                Err(e) => return Err(self.gave_up(e)),
            }
        }
        let imported = self
            .import(
                node,
                &format!(
                    "{base}/api/v1/uploads/{upload_id}/keyspaces/{keyspace}/tables/{table}/import{}",
                    self.import_query
                ),
            )
            .await;
        self.back(node);
        imported
    }

    /// PUTs one file with its xxHash32; `false` when the upload id was imported already.
    async fn put_file(&self, node: &str, url: &str, file: &Path) -> Result<bool, BulkError> {
        let err = |message: String| BulkError::Upload {
            node: node.to_string(),
            message,
        };
        let io = |e: std::io::Error| BulkError::Write(format!("{}: {e}", file.display()));
        // Read twice rather than held: once for the digest the header announces, once as the
        // body, so a component of any size takes one chunk of memory.
        let (digest, len) = {
            let path = file.to_path_buf();
            tokio::task::spawn_blocking(move || -> std::io::Result<(u32, u64)> {
                use std::io::Read;
                let mut f = std::fs::File::open(&path)?;
                let mut hasher = xxhash_rust::xxh32::Xxh32::new(0);
                let mut buf = vec![0u8; 1 << 20];
                let mut len = 0u64;
                loop {
                    let n = f.read(&mut buf)?;
                    if n == 0 {
                        return Ok((hasher.digest(), len));
                    }
                    hasher.update(&buf[..n]);
                    len += n as u64;
                }
            })
            .await
            .map_err(|e| BulkError::Write(e.to_string()))?
            .map_err(io)?
        };
        let body = tokio::fs::File::open(file).await.map_err(io)?;
        let r = self
            .put(url)
            .header("cassandra-content-xxhash32", format!("{digest:x}"))
            .header("cassandra-content-xxhash32-seed", "0")
            .header(reqwest::header::CONTENT_LENGTH, len)
            .body(reqwest::Body::wrap_stream(
                tokio_util::io::ReaderStream::with_capacity(body, 1 << 20),
            ))
            .send()
            .await
            .map_err(|e| BulkError::Unreachable {
                node: node.to_string(),
                message: crate::answer::request_error_text(&e),
            })?;
        match r.status() {
            s if s.is_success() => Ok(true),
            reqwest::StatusCode::CONFLICT => Ok(false),
            s if transient(s) => Err(BulkError::Unreachable {
                node: node.to_string(),
                message: message_of(r).await,
            }),
            _ => Err(err(message_of(r).await)),
        }
    }

    /// Starts the import and waits for its end; a drover unreachable or busy meanwhile is
    /// waited for up to `wait` at a time.
    async fn import(&self, node: &str, url: &str) -> Result<(), BulkError> {
        let started = std::time::Instant::now();
        // Since when the drover has not answered, and how many times in a row.
        let mut away: Option<(std::time::Instant, u32)> = None;
        loop {
            let failed = match self.put(url).send().await {
                Ok(r) if r.status() == reqwest::StatusCode::OK => return Ok(()),
                Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => None,
                Ok(r) if transient(r.status()) => Some(BulkError::Unreachable {
                    node: node.to_string(),
                    message: message_of(r).await,
                }),
                Ok(r) => {
                    return Err(BulkError::Import {
                        node: node.to_string(),
                        message: message_of(r).await,
                    });
                }
                Err(e) => Some(BulkError::Unreachable {
                    node: node.to_string(),
                    message: crate::answer::request_error_text(&e),
                }),
            };
            let mut pause = IMPORT_POLL;
            match failed {
                None => {
                    away = None;
                    self.back(node);
                }
                Some(e) => {
                    let (since, times) = away.get_or_insert((std::time::Instant::now(), 0));
                    *times += 1;
                    if since.elapsed() > self.wait {
                        return Err(self.gave_up(e));
                    }
                    pause = IMPORT_POLL * (*times).min(20);
                    self.waiting_for(node, &e, pause);
                }
            }
            if started.elapsed() > IMPORT_WAIT {
                return Err(BulkError::Import {
                    node: node.to_string(),
                    message: format!("still pending after {}s", IMPORT_WAIT.as_secs()),
                });
            }
            tokio::time::sleep(pause).await;
        }
    }
}
