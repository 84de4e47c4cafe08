//! The HTTP client a destination uses to talk to its source drover: the source's file list,
//! the digest of one of its files, and the bytes of one file from an offset on.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::LiveMigrationError;
use super::batch::{self, BlockDigests, Features};
use super::digest::Algorithm;

/// How much of a source's answer to a digest request is read: `{"digest": …}` of the longest
/// digest drover knows (SHA-256, 64 hex characters) takes a fraction of it.
pub const DIGEST_ANSWER_READ: u64 = 4096;

/// The slowest a source is expected to read a file for its digest, in bytes per second: a disk
/// shared by the node and by as many digests as the task runs at once (`maxConcurrency`).
pub const DIGEST_RATE_FLOOR: u64 = 4 << 20;

/// An error with its causes: reqwest's own message says only that a request failed, while
/// the reason (a refused connection, a certificate not valid for the source's name) is in
/// the chain below it.
fn causes(e: &reqwest::Error) -> String {
    crate::answer::request_error_text(e)
}

/// A file of the source as its listing shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "ListedFile")]
pub struct RemoteFile {
    /// Where to download it.
    pub file_url: String,
    /// Bytes (0 for a directory, which listings give as -1).
    pub size: u64,
    /// `FILE` or `DIRECTORY`.
    pub file_type: String,
    /// Milliseconds since the epoch.
    pub last_modified_time: u64,
    /// drover: the file's permission bits at the source (Sidecar's listing has none; a
    /// download without them gets 0644).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

/// A listing's entry as it comes: Sidecar (and drover) list a directory with `size` -1.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedFile {
    file_url: String,
    // Any JSON integer: a size past i64's range is read, and refused later as a whole.
    size: serde_json::Number,
    file_type: String,
    last_modified_time: u64,
    #[serde(default)]
    mode: Option<u32>,
}

impl TryFrom<ListedFile> for RemoteFile {
    type Error = String;

    fn try_from(f: ListedFile) -> Result<Self, String> {
        let size = match f.size.as_u64() {
            Some(size) => size,
            // A directory's size (-1 in listings) says nothing.
            None if f.file_type == "DIRECTORY" => 0,
            None => {
                return Err(format!(
                    "{}: size {} is not a number of bytes",
                    f.file_url, f.size
                ));
            }
        };
        Ok(Self {
            file_url: f.file_url,
            size,
            file_type: f.file_type,
            last_modified_time: f.last_modified_time,
            mode: f.mode,
        })
    }
}

impl RemoteFile {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type == "DIRECTORY"
    }

    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type == "FILE"
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RemoteList {
    files: Vec<RemoteFile>,
}

#[derive(Debug, Deserialize)]
struct RemoteDigest {
    digest: Option<String>,
}

/// The part of a source's `/status` a destination reads (its `endTime` has changed type
/// between versions, and is not needed).
#[derive(Debug, Deserialize)]
struct RemoteStatus {
    state: String,
}

/// The most of a source's `/status` answer that is read.
const STATUS_BODY_READ: u64 = 64 * 1024;

/// How far a destination trusts its source: timeouts and the bounds of a listing
/// (`live_migration.peer_*`, `max_listing_bytes`, `max_listed_files`).
#[derive(Debug, Clone)]
pub struct PeerLimits {
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of an answer.
    pub read_timeout: Duration,
    /// Largest listing body.
    pub max_listing_bytes: u64,
    /// Most entries of a listing.
    pub max_listed_files: usize,
}

impl Default for PeerLimits {
    fn default() -> Self {
        let config = crate::config::LiveMigrationConfig::default();
        Self::from(&config)
    }
}

impl From<&crate::config::LiveMigrationConfig> for PeerLimits {
    fn from(c: &crate::config::LiveMigrationConfig) -> Self {
        Self {
            connect_timeout: c.peer_connect_timeout,
            read_timeout: c.peer_read_timeout,
            max_listing_bytes: c.max_listing_bytes.as_u64(),
            max_listed_files: c.max_listed_files,
        }
    }
}

/// Why a source's listing body was refused: not a listing (its parser's words, clipped), or
/// more entries than `live_migration.max_listed_files`.
#[derive(Debug)]
pub enum ListingError {
    /// Not a file listing.
    Malformed(String),
    /// Too many entries (the message names the count, the bound and the setting).
    TooMany(String),
}

impl ListingError {
    /// The error of a task, `what` saying which request it answered.
    fn at(self, what: &str) -> LiveMigrationError {
        match self {
            Self::Malformed(why) => LiveMigrationError::Peer(format!("{what}: {why}")),
            Self::TooMany(why) => LiveMigrationError::Invalid(why),
        }
    }
}

impl std::fmt::Display for ListingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) | Self::TooMany(why) => f.write_str(why),
        }
    }
}

/// A source's listing body (already read within `max_listing_bytes`): its entries, at most
/// `max_files` of them. Nothing of the body is quoted beyond [`crate::answer::clip`]'s bound.
/// Each entry's `fileUrl` is checked where it is mapped to a local place
/// ([`super::local::local_key`]).
pub fn read_listing(body: &[u8], max_files: usize) -> Result<Vec<RemoteFile>, ListingError> {
    let list: RemoteList = serde_json::from_slice(body).map_err(|e| {
        ListingError::Malformed(format!(
            "not a file listing: {}",
            crate::answer::clip(&e.to_string())
        ))
    })?;
    if list.files.len() > max_files {
        return Err(ListingError::TooMany(format!(
            "the source lists {} files and directories, more than {max_files} (live_migration.max_listed_files)",
            list.files.len(),
        )));
    }
    Ok(list.files)
}

/// The digest a source's answer to `?digestAlgorithm=` gives (the body already read within
/// [`DIGEST_ANSWER_READ`]): one of the form `algorithm` writes ([`super::digest::well_formed`]),
/// so that what is compared, logged and kept in a task's report is a digest, never other text
/// of the source's choosing. The reason of a refusal never quotes the body.
pub fn read_digest(body: &[u8], algorithm: Algorithm) -> Result<String, String> {
    let digest = serde_json::from_slice::<RemoteDigest>(body)
        .ok()
        .and_then(|d| d.digest)
        .ok_or_else(|| format!("no digest in the answer ({} bytes)", body.len()))?;
    if !super::digest::well_formed(algorithm, &digest) {
        return Err(format!(
            "the answer's digest ({} characters) is not a {} digest",
            digest.chars().count(),
            algorithm.name()
        ));
    }
    Ok(digest)
}

/// The block digests of a source's answer to `?blockSize=` (the body already read within its
/// bound); the reason of a refusal is clipped.
pub fn read_block_digests(body: &[u8]) -> Result<BlockDigests, String> {
    serde_json::from_slice(body).map_err(|e| {
        format!(
            "not a block-digest answer: {}",
            crate::answer::clip(&e.to_string())
        )
    })
}

/// A client of the source daemon of a destination.
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    /// The same client without the per-read timeout: a source sends nothing while it reads a
    /// whole file for its digest, so a digest request gets an allowance by the file's size.
    digests: reqwest::Client,
    base: String,
    limits: Arc<PeerLimits>,
}

impl PeerClient {
    /// Where the source daemon is (`http://host:port`), for names and messages: no
    /// credentials are part of it (the token is a header).
    pub fn address(&self) -> &str {
        &self.base
    }

    /// The source daemon at `host:port`: over HTTPS when `tls` is given (the source's
    /// certificate must then chain to its roots and name `host`), else plain HTTP.
    pub fn new(
        address: &str,
        token: Option<secrecy::SecretString>,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
        limits: PeerLimits,
    ) -> Self {
        use secrecy::ExposeSecret;
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = token
            && let Ok(mut value) =
                reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
        {
            // Kept out of reqwest's and hyper's debug output.
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        // Always a config of ours, so that building the client never depends on a crypto
        // provider installed for the whole process.
        let tls = tls.map_or_else(crate::tls::plain_client_config, |c| (*c).clone());
        let builder = || {
            reqwest::Client::builder()
                .use_preconfigured_tls(tls.clone())
                .default_headers(headers.clone())
                .connect_timeout(limits.connect_timeout)
                .pool_idle_timeout(crate::config::CLIENT_POOL_IDLE)
                // A source answers from its own routes; a redirect could point the
                // destination's requests anywhere, so a 3xx is an error like any other.
                .redirect(reqwest::redirect::Policy::none())
        };
        Self {
            http: builder()
                // Per read, not per request: a large file may take hours, but a source that
                // stops sending (headers or body) must not hold a task, nor its job slot.
                .read_timeout(limits.read_timeout)
                .build()
                .expect("an HTTP client builds"),
            digests: builder().build().expect("an HTTP client builds"),
            base: format!("{scheme}://{address}"),
            limits: Arc::new(limits),
        }
    }

    /// What a failed request or body read means, naming the setting when it timed out.
    pub fn describe(&self, e: &reqwest::Error) -> String {
        if e.is_connect() && e.is_timeout() {
            format!(
                "no connection within {} (live_migration.peer_connect_timeout)",
                humantime::format_duration(self.limits.connect_timeout)
            )
        } else if e.is_timeout() {
            format!(
                "nothing received for {} (live_migration.peer_read_timeout)",
                humantime::format_duration(self.limits.read_timeout)
            )
        } else {
            causes(e)
        }
    }

    /// The error a non-success answer stands for: the message of drover's JSON error body,
    /// else the body as it is.
    /// Only the first [`crate::answer::ERROR_BODY_READ`] bytes of the body are read and the
    /// first [`crate::answer::ERROR_MESSAGE_CHARS`] characters kept: a hostile or broken source
    /// must not make the destination hold, or log, a body of any size.
    pub async fn error_of(response: reqwest::Response, what: &str) -> LiveMigrationError {
        let status = response.status();
        let message = crate::answer::error_message(response).await;
        LiveMigrationError::Peer(format!("{what}: {status}: {message}"))
    }

    /// The source's files. The body is read up to `max_listing_bytes` and may hold up to
    /// `max_listed_files` entries: past either, the listing is refused rather than held.
    pub async fn list(&self) -> Result<Vec<RemoteFile>, LiveMigrationError> {
        self.list_with_features().await.map(|(files, _)| files)
    }

    /// The source's files, and the drover extensions it announces with them (none for a
    /// Sidecar).
    pub async fn list_with_features(
        &self,
    ) -> Result<(Vec<RemoteFile>, Features), LiveMigrationError> {
        let url = format!("{}/api/v1/live-migration/files", self.base);
        let failed = |e: reqwest::Error| {
            LiveMigrationError::Peer(format!("listing files at {url}: {}", self.describe(&e)))
        };
        let response = self.http.get(&url).send().await.map_err(failed)?;
        if !response.status().is_success() {
            return Err(Self::error_of(response, "listing files").await);
        }
        let features = Features::parse(
            response
                .headers()
                .get(batch::FEATURES_HEADER)
                .and_then(|v| v.to_str().ok()),
        );
        let limit = self.limits.max_listing_bytes;
        let too_long = || {
            LiveMigrationError::Invalid(format!(
                "the source's file listing is longer than {} (live_migration.max_listing_bytes)",
                bytesize::ByteSize::b(limit)
            ))
        };
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_long());
        }
        let body = crate::answer::within(response, limit)
            .await
            .map_err(failed)?
            .ok_or_else(too_long)?;
        let files = read_listing(&body, self.limits.max_listed_files)
            .map_err(|e| e.at(&format!("listing files at {url}")))?;
        Ok((files, features))
    }

    /// The `state` of the source's live-migration status (`NOT_COMPLETED`, `COMPLETED`), as
    /// it answers it. The body is read up to 64 KiB.
    pub async fn status(&self) -> Result<String, LiveMigrationError> {
        let url = format!("{}/api/v1/live-migration/status", self.base);
        let failed = |e: reqwest::Error| {
            LiveMigrationError::Peer(format!(
                "live-migration status at {url}: {}",
                self.describe(&e)
            ))
        };
        let response = self.http.get(&url).send().await.map_err(failed)?;
        if !response.status().is_success() {
            return Err(Self::error_of(response, "live-migration status").await);
        }
        let body = crate::answer::within(response, STATUS_BODY_READ)
            .await
            .map_err(failed)?
            .ok_or_else(|| {
                LiveMigrationError::Peer(format!(
                    "live-migration status at {url}: an answer longer than {STATUS_BODY_READ} bytes"
                ))
            })?;
        serde_json::from_slice::<RemoteStatus>(&body)
            .map(|s| s.state)
            .map_err(|e| {
                LiveMigrationError::Peer(format!(
                    "live-migration status at {url}: not a status: {}",
                    crate::answer::clip(&e.to_string())
                ))
            })
    }

    /// How long a source may take to answer the digest of a file of `size` bytes: it reads the
    /// whole file before it sends anything, so `live_migration.peer_read_timeout` plus a second
    /// for every [`DIGEST_RATE_FLOOR`] bytes (a 1 GiB file: 256 s more; SSTables of hundreds of
    /// GiB are hashed for hours, which no fixed timeout would allow).
    pub fn digest_allowance(&self, size: u64) -> Duration {
        self.limits.read_timeout + Duration::from_secs(size / DIGEST_RATE_FLOOR)
    }

    /// The digest of one source file of `size` bytes (as listed); [`LiveMigrationError::Gone`]
    /// when the source no longer has it. The source has [`Self::digest_allowance`] to answer.
    pub async fn digest(
        &self,
        file_url: &str,
        algorithm: Algorithm,
        size: u64,
    ) -> Result<String, LiveMigrationError> {
        let allowance = self.digest_allowance(size);
        match tokio::time::timeout(allowance, self.digest_within(file_url, algorithm)).await {
            Ok(answer) => answer,
            Err(_) => Err(LiveMigrationError::Peer(format!(
                "digest of {file_url}: no answer within {} for a file of {size} bytes \
                 (live_migration.peer_read_timeout, plus a second per {} MiB of the file)",
                humantime::format_duration(allowance),
                DIGEST_RATE_FLOOR >> 20
            ))),
        }
    }

    async fn digest_within(
        &self,
        file_url: &str,
        algorithm: Algorithm,
    ) -> Result<String, LiveMigrationError> {
        let url = format!(
            "{}{file_url}?digestAlgorithm={}",
            self.base,
            algorithm.name()
        );
        let failed = |e: reqwest::Error| {
            LiveMigrationError::Peer(format!("digest of {file_url}: {}", self.describe(&e)))
        };
        let response = self.digests.get(&url).send().await.map_err(failed)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(LiveMigrationError::Gone(format!(
                "{file_url} is gone at the source"
            )));
        }
        if !response.status().is_success() {
            return Err(Self::error_of(response, &format!("digest of {file_url}")).await);
        }
        // The answer is read up to a bound and never echoed: a source decides its length.
        let body = crate::answer::within(response, DIGEST_ANSWER_READ)
            .await
            .map_err(failed)?
            .ok_or_else(|| {
                LiveMigrationError::Peer(format!(
                    "digest of {file_url}: an answer longer than {DIGEST_ANSWER_READ} bytes"
                ))
            })?;
        read_digest(&body, algorithm)
            .map_err(|why| LiveMigrationError::Peer(format!("digest of {file_url}: {why}")))
    }

    /// The block digests of one source file (a drover source's extension);
    /// [`LiveMigrationError::Gone`] when the source no longer has it. The answer is read up
    /// to what [`batch::MAX_BLOCKS`] digests take.
    pub async fn block_digests(
        &self,
        file_url: &str,
        block_size: u64,
    ) -> Result<BlockDigests, LiveMigrationError> {
        let url = format!(
            "{}{file_url}?digestAlgorithm=xxh3&blockSize={block_size}",
            self.base
        );
        let failed = |e: reqwest::Error| {
            LiveMigrationError::Peer(format!(
                "block digests of {file_url}: {}",
                self.describe(&e)
            ))
        };
        let response = self.http.get(&url).send().await.map_err(failed)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(LiveMigrationError::Gone(format!(
                "{file_url} is gone at the source"
            )));
        }
        if !response.status().is_success() {
            return Err(Self::error_of(response, &format!("block digests of {file_url}")).await);
        }
        let limit = batch::MAX_BLOCKS * 24 + 4096;
        let body = crate::answer::within(response, limit)
            .await
            .map_err(failed)?
            .ok_or_else(|| {
                LiveMigrationError::Peer(format!(
                    "block digests of {file_url}: an answer longer than {limit} bytes"
                ))
            })?;
        read_block_digests(&body)
            .map_err(|why| LiveMigrationError::Peer(format!("block digests of {file_url}: {why}")))
    }

    /// Asks for `files` in one batch (a drover source's extension); the caller reads the
    /// frames. A source without the route answers 404 (see [`Self::list_with_features`]).
    pub async fn batch(
        &self,
        files: Vec<String>,
    ) -> Result<
        batch::FrameReader<
            impl futures::Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Unpin + use<>,
        >,
        LiveMigrationError,
    > {
        let url = format!("{}/api/v1/live-migration/files-batch", self.base);
        let n = files.len();
        let request = batch::BatchRequest {
            files,
            digest_algorithm: Some("xxh3".into()),
        };
        let response = self
            .http
            .post(&url)
            .json(&request)
            .send()
            .await
            .map_err(|e| {
                LiveMigrationError::Peer(format!("a batch of {n} files: {}", self.describe(&e)))
            })?;
        if !response.status().is_success() {
            return Err(Self::error_of(response, &format!("a batch of {n} files")).await);
        }
        Ok(batch::FrameReader::new(response.bytes_stream()))
    }

    /// Asks for the bytes of `file_url` from byte `from` on (the whole file when 0), up to
    /// byte `to` included when given. The caller reads the status: 200, 206, or what went
    /// wrong.
    pub async fn fetch(
        &self,
        file_url: &str,
        from: u64,
        to: Option<u64>,
    ) -> Result<reqwest::Response, LiveMigrationError> {
        // A file's bytes as they are on disk: a range of a compressed answer would be a range
        // of other bytes, and its length not the file's.
        let mut request = self
            .http
            .get(format!("{}{file_url}", self.base))
            .header(reqwest::header::ACCEPT_ENCODING, "identity");
        match to {
            Some(to) => {
                request = request.header(reqwest::header::RANGE, format!("bytes={from}-{to}"));
            }
            None if from > 0 => {
                request = request.header(reqwest::header::RANGE, format!("bytes={from}-"));
            }
            None => {}
        }
        request.send().await.map_err(|e| {
            LiveMigrationError::Peer(format!("downloading {file_url}: {}", self.describe(&e)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::{ERROR_BODY_READ, ERROR_MESSAGE_CHARS};

    /// A digest waits for the read timeout, and a second more per 4 MiB of the file: at the
    /// bound, not before.
    #[test]
    fn a_digest_is_allowed_time_by_the_files_size() {
        let limits = PeerLimits {
            read_timeout: Duration::from_secs(30),
            ..PeerLimits::default()
        };
        let peer = PeerClient::new("127.0.0.1:1", None, None, limits);
        assert_eq!(peer.digest_allowance(0), Duration::from_secs(30));
        assert_eq!(
            peer.digest_allowance(DIGEST_RATE_FLOOR - 1),
            Duration::from_secs(30)
        );
        assert_eq!(
            peer.digest_allowance(DIGEST_RATE_FLOOR),
            Duration::from_secs(31)
        );
        assert_eq!(
            peer.digest_allowance(1 << 30),
            Duration::from_secs(30 + 256)
        );
    }

    /// Listings give directories `size` -1 (Sidecar's and drover's); a file with a negative
    /// size is refused.
    #[test]
    fn directories_listed_with_size_minus_one_are_read() {
        let list: RemoteList = serde_json::from_str(
            r#"{"totalSize": 3, "files": [
                {"fileUrl": "/api/v1/live-migration/files/data/0/ks", "size": -1, "fileType": "DIRECTORY", "lastModifiedTime": 5},
                {"fileUrl": "/api/v1/live-migration/files/data/0/ks/a", "size": 3, "fileType": "FILE", "lastModifiedTime": 6, "mode": 420}
            ]}"#,
        )
        .unwrap();
        assert_eq!((list.files[0].size, list.files[0].is_dir()), (0, true));
        assert_eq!((list.files[1].size, list.files[1].mode), (3, Some(420)));
        // What drover keeps of a listing (task records) reads back.
        let again: RemoteFile =
            serde_json::from_value(serde_json::to_value(&list.files[0]).unwrap()).unwrap();
        assert_eq!(again, list.files[0]);
        let e = serde_json::from_str::<RemoteList>(
            r#"{"files": [{"fileUrl": "/f", "size": -1, "fileType": "FILE", "lastModifiedTime": 1}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("size -1 is not a number of bytes"), "{e}");
        let huge: RemoteList = serde_json::from_str(
            r#"{"files": [{"fileUrl": "/f", "size": 18446744073709551615, "fileType": "FILE", "lastModifiedTime": 1}]}"#,
        )
        .unwrap();
        assert_eq!(huge.files[0].size, u64::MAX);
    }

    /// A source answering every request with `status` and `body`, sent with its length or,
    /// `chunked`, as a stream without one (so the bound is held while reading, not only
    /// against the announced length).
    async fn source_answering(status: u16, body: Vec<u8>, chunked: bool) -> String {
        let status = axum::http::StatusCode::from_u16(status).unwrap();
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            async move {
                let body = if chunked {
                    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = body
                        .chunks(1000)
                        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
                        .collect();
                    axum::body::Body::from_stream(futures::stream::iter(chunks))
                } else {
                    axum::body::Body::from(body)
                };
                (status, body)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    fn client(addr: &str, max_listing_bytes: u64, max_listed_files: usize) -> PeerClient {
        let limits = PeerLimits {
            max_listing_bytes,
            max_listed_files,
            ..PeerLimits::default()
        };
        PeerClient::new(addr, None, None, limits)
    }

    /// A listing of `files` files padded with JSON whitespace to exactly `len` bytes.
    fn listing(files: usize, len: usize) -> Vec<u8> {
        let entries: Vec<_> = (0..files)
            .map(|i| serde_json::json!({"fileUrl": format!("/api/v1/live-migration/files/data/0/ks/t/nb-{i}-big-Data.db"), "size": 1, "fileType": "FILE", "lastModifiedTime": 1}))
            .collect();
        let mut body = serde_json::to_vec(&serde_json::json!({ "files": entries })).unwrap();
        assert!(body.len() <= len, "{} bytes before padding", body.len());
        body.resize(len, b' ');
        body
    }

    /// `live_migration.max_listing_bytes` is held at the byte, with and without a
    /// Content-Length: a listing of exactly the bound is read, one byte more is refused naming
    /// the setting and the bound.
    #[tokio::test]
    async fn a_listing_of_max_listing_bytes_is_read_and_one_byte_more_refused() {
        const LIMIT: u64 = 4096;
        for chunked in [false, true] {
            let at = source_answering(200, listing(3, LIMIT as usize), chunked).await;
            let files = client(&at, LIMIT, 10).list().await.unwrap();
            assert_eq!(files.len(), 3, "chunked: {chunked}");

            let over = source_answering(200, listing(3, LIMIT as usize + 1), chunked).await;
            let e = client(&over, LIMIT, 10)
                .list()
                .await
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("longer than 4.0 KiB (live_migration.max_listing_bytes)"),
                "chunked: {chunked}: {e}"
            );
        }
    }

    /// `live_migration.max_listed_files` entries are taken; one more is refused, naming the
    /// count, the bound and the setting.
    #[tokio::test]
    async fn a_listing_of_max_listed_files_is_read_and_one_entry_more_refused() {
        let at = source_answering(200, listing(10, 4096), false).await;
        assert_eq!(client(&at, 1 << 20, 10).list().await.unwrap().len(), 10);
        let over = source_answering(200, listing(11, 4096), false).await;
        let e = client(&over, 1 << 20, 10)
            .list()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "lists 11 files and directories, more than 10 (live_migration.max_listed_files)"
            ),
            "{e}"
        );
    }

    /// A status answer of 64 KiB is read; one byte more is not.
    #[tokio::test]
    async fn a_status_answer_is_read_up_to_its_bound() {
        let status = |len: usize| {
            let mut body = br#"{"state": "NOT_COMPLETED", "endTime": null}"#.to_vec();
            body.resize(len, b' ');
            body
        };
        let at = source_answering(200, status(STATUS_BODY_READ as usize), true).await;
        assert_eq!(client(&at, 1, 1).status().await.unwrap(), "NOT_COMPLETED");
        let over = source_answering(200, status(STATUS_BODY_READ as usize + 1), true).await;
        let e = client(&over, 1, 1).status().await.unwrap_err().to_string();
        assert!(e.contains("an answer longer than 65536 bytes"), "{e}");
    }

    async fn error_from(body: Vec<u8>) -> String {
        let addr = source_answering(500, body, true).await;
        let response = client(&addr, 1, 1)
            .http
            .get(format!("http://{addr}/x"))
            .send()
            .await
            .unwrap();
        PeerClient::error_of(response, "listing files")
            .await
            .to_string()
    }

    /// What a destination keeps of a source's error: the first [`ERROR_BODY_READ`] bytes of
    /// the body are read (an error body of exactly that many is still drover's JSON, one byte
    /// more is cut and shown as text), and [`ERROR_MESSAGE_CHARS`] characters of the message
    /// kept (that many whole, one more cut with an ellipsis).
    #[tokio::test]
    async fn a_sources_error_is_read_and_kept_up_to_its_bounds() {
        // Padded inside the object, so that a body cut short is no longer JSON.
        let json_of = |message: &str, len: usize| {
            let mut body = serde_json::to_vec(&serde_json::json!({ "message": message })).unwrap();
            body.pop();
            body.resize(len - 1, b' ');
            body.push(b'}');
            body
        };
        // A message of exactly ERROR_MESSAGE_CHARS characters (several bytes each) is kept whole.
        let whole = "é".repeat(ERROR_MESSAGE_CHARS);
        let e = error_from(json_of(&whole, 2000)).await;
        assert!(
            e.ends_with(&format!("500 Internal Server Error: {whole}")),
            "{e}"
        );
        let longer = format!("{whole}x");
        let e = error_from(json_of(&longer, 2000)).await;
        assert!(e.ends_with(&format!(": {whole}…")), "{e}");

        // A JSON body of exactly ERROR_BODY_READ bytes is read whole, and its message taken.
        let e = error_from(json_of("the source's reason", ERROR_BODY_READ)).await;
        assert!(e.ends_with(": the source's reason"), "{e}");
        // One byte more: what was read is no longer a whole JSON body, and is kept as text.
        let e = error_from(json_of("the source's reason", ERROR_BODY_READ + 1)).await;
        assert!(
            e.contains(r#": {"message":"the source's reason"   "#) && e.ends_with('…'),
            "{e}"
        );
        // A body that is not text says how much of it was read: the bound, not the body.
        let e = error_from(vec![0xff; ERROR_BODY_READ + 1]).await;
        assert!(
            e.ends_with("a body that is not text (4096 bytes read)"),
            "{e}"
        );
        let e = error_from(vec![0xff; ERROR_BODY_READ - 1]).await;
        assert!(
            e.ends_with("a body that is not text (4095 bytes read)"),
            "{e}"
        );
    }
}
