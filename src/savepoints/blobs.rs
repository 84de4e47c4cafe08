//! Object stores as the savepoint store sees them: a flat folder of named objects that can be
//! listed, read, written whole and deleted, with a conditional write for the writer's lease.
//!
//! S3 goes through `object_store`. GCS is spoken to through its JSON API directly: the XML API
//! that `object_store` lists with is not served by the GCS emulators of PyPI, and the JSON API
//! is the one Google documents first.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::future::BoxFuture;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion};
use secrecy::{ExposeSecret, SecretString};

/// The largest savepoint object read: a savepoint is a job file with progress lists, kept
/// small by merged ranges; anything bigger is not one of ours.
pub const MAX_OBJECT_BYTES: u64 = 64 << 20;

/// One object of the folder.
#[derive(Debug, Clone)]
pub struct Blob {
    /// Name inside the folder.
    pub name: String,
    /// When it was last written (by the store's clock).
    pub modified: SystemTime,
}

/// How a write is conditioned.
#[derive(Debug, Clone)]
pub enum Condition {
    /// Unconditionally.
    None,
    /// Only if no object has that name.
    Absent,
    /// Only if the object is still the version given.
    Version(String),
}

/// The result of a conditioned write.
#[derive(Debug)]
pub enum Written {
    /// Written; the new version.
    Done(String),
    /// The condition did not hold.
    Refused,
    /// The store cannot honour conditions.
    Unsupported,
}

/// A folder of objects.
pub trait Blobs: Send + Sync {
    /// `s3://bucket/prefix` or `gs://bucket/prefix`.
    fn describe(&self) -> String;
    /// The objects directly in the folder (not in sub-folders).
    fn list(&self) -> BoxFuture<'_, Result<Vec<Blob>, String>>;
    /// An object's bytes and version; `None` if absent.
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, String)>, String>>;
    /// Writes an object whole: readers see the old object or the new one, never a part.
    fn put<'a>(
        &'a self,
        name: &'a str,
        body: Bytes,
        condition: Condition,
    ) -> BoxFuture<'a, Result<Written, String>>;
    /// Deletes an object (absent is fine).
    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>>;
    /// The same store, one folder down.
    fn child(&self, folder: &str) -> Arc<dyn Blobs>;
}

fn clean_prefix(prefix: &str) -> String {
    prefix.trim_matches('/').to_string()
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

/// A folder of an S3 bucket.
pub struct S3Blobs {
    store: Arc<dyn ObjectStore>,
    bucket: String,
    prefix: String,
}

impl S3Blobs {
    /// A folder of `bucket` (built by the caller with its credentials, region and endpoint).
    pub fn new(store: Arc<dyn ObjectStore>, bucket: &str, prefix: &str) -> Self {
        Self {
            store,
            bucket: bucket.to_string(),
            prefix: clean_prefix(prefix),
        }
    }

    fn path(&self, name: &str) -> ObjPath {
        ObjPath::from(join(&self.prefix, name))
    }
}

fn version_of(e_tag: Option<String>, version: Option<String>) -> String {
    e_tag.or(version).unwrap_or_default()
}

impl Blobs for S3Blobs {
    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Blob>, String>> {
        Box::pin(async move {
            let prefix = (!self.prefix.is_empty()).then(|| ObjPath::from(self.prefix.as_str()));
            let listing = self
                .store
                .list_with_delimiter(prefix.as_ref())
                .await
                .map_err(|e| e.to_string())?;
            Ok(listing
                .objects
                .into_iter()
                .filter_map(|o| {
                    Some(Blob {
                        name: o.location.filename()?.to_string(),
                        modified: o.last_modified.into(),
                    })
                })
                .collect())
        })
    }

    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, String)>, String>> {
        Box::pin(async move {
            let got = match self.store.get(&self.path(name)).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            };
            if got.meta.size > MAX_OBJECT_BYTES {
                return Err(format!(
                    "{name}: {} bytes, more than a savepoint can be ({MAX_OBJECT_BYTES})",
                    got.meta.size
                ));
            }
            let version = version_of(got.meta.e_tag.clone(), got.meta.version.clone());
            let body = got.bytes().await.map_err(|e| e.to_string())?;
            Ok(Some((body, version)))
        })
    }

    fn put<'a>(
        &'a self,
        name: &'a str,
        body: Bytes,
        condition: Condition,
    ) -> BoxFuture<'a, Result<Written, String>> {
        Box::pin(async move {
            let mode = match condition {
                Condition::None => PutMode::Overwrite,
                Condition::Absent => PutMode::Create,
                Condition::Version(v) => PutMode::Update(UpdateVersion {
                    e_tag: Some(v),
                    version: None,
                }),
            };
            let options = PutOptions {
                mode,
                ..Default::default()
            };
            match self
                .store
                .put_opts(&self.path(name), body.into(), options)
                .await
            {
                Ok(r) => Ok(Written::Done(version_of(r.e_tag, r.version))),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(Written::Refused),
                Err(object_store::Error::NotImplemented { .. }) => Ok(Written::Unsupported),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            match self.store.delete(&self.path(name)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn child(&self, folder: &str) -> Arc<dyn Blobs> {
        Arc::new(Self {
            store: self.store.clone(),
            bucket: self.bucket.clone(),
            prefix: join(&self.prefix, folder),
        })
    }
}

/// How requests to GCS are authorized.
pub enum GcsAuth {
    /// No token: an emulator (an `endpoint` without credentials, or a key file with
    /// `disable_oauth: true`).
    Anonymous,
    /// A service account's key: OAuth tokens from its own signed assertion.
    ServiceAccount {
        /// `client_email`.
        email: String,
        /// `private_key` (PEM).
        key: SecretString,
        /// `token_uri`.
        token_uri: String,
    },
    /// The metadata server of the VM or pod the daemon runs on.
    Metadata,
}

/// What a GCS service account key file holds (the fields drover reads).
#[derive(serde::Deserialize)]
struct KeyFile {
    client_email: Option<String>,
    private_key: Option<SecretString>,
    token_uri: Option<String>,
    #[serde(default)]
    disable_oauth: bool,
    gcs_base_url: Option<String>,
}

impl GcsAuth {
    /// Reads a service account key file; a `gcs_base_url` in it (emulators' convention) is
    /// returned as the endpoint.
    pub fn from_key_file(path: &std::path::Path) -> Result<(Self, Option<String>), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let key: KeyFile = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a service account key file (JSON): {e}",
                path.display()
            )
        })?;
        if key.disable_oauth {
            return Ok((Self::Anonymous, key.gcs_base_url));
        }
        let (Some(email), Some(private_key)) = (key.client_email, key.private_key) else {
            return Err(format!(
                "{}: a service account key needs client_email and private_key",
                path.display()
            ));
        };
        Ok((
            Self::ServiceAccount {
                email,
                key: private_key,
                token_uri: key
                    .token_uri
                    .unwrap_or_else(|| "https://oauth2.googleapis.com/token".into()),
            },
            key.gcs_base_url,
        ))
    }
}

const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
const METADATA_TOKEN: &str =
    "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token";
/// Every request to GCS or its token services ends within this.
const GCS_TIMEOUT: Duration = Duration::from_secs(30);

/// A folder of a GCS bucket, through the JSON API.
pub struct GcsBlobs {
    http: reqwest::Client,
    base: String,
    bucket: String,
    prefix: String,
    auth: Arc<GcsAuth>,
    token: Arc<Mutex<Option<(String, SystemTime)>>>,
}

#[derive(serde::Deserialize)]
struct GcsObject {
    name: String,
    updated: Option<String>,
    generation: Option<serde_json::Value>,
    size: Option<serde_json::Value>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GcsList {
    #[serde(default)]
    items: Vec<GcsObject>,
    next_page_token: Option<String>,
}

#[derive(serde::Deserialize)]
struct Token {
    access_token: String,
    expires_in: Option<u64>,
}

/// A number GCS sends as a string (`"generation": "1712…"`) or a number.
fn number_text(v: &Option<serde_json::Value>) -> Option<String> {
    match v.as_ref()? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl GcsBlobs {
    /// A folder of `bucket`; `base` is the API's address (`https://storage.googleapis.com`
    /// or an emulator's).
    pub fn new(base: &str, bucket: &str, prefix: &str, auth: GcsAuth) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(crate::tls::public_roots_client_config())
            .timeout(GCS_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            bucket: bucket.to_string(),
            prefix: clean_prefix(prefix),
            auth: Arc::new(auth),
            token: Arc::new(Mutex::new(None)),
        })
    }

    async fn bearer(&self) -> Result<Option<String>, String> {
        if matches!(*self.auth, GcsAuth::Anonymous) {
            return Ok(None);
        }
        if let Some((token, expiry)) = self.token.lock().unwrap_or_else(|p| p.into_inner()).clone()
            && expiry > SystemTime::now() + Duration::from_secs(60)
        {
            return Ok(Some(token));
        }
        let response = match &*self.auth {
            GcsAuth::Anonymous => unreachable!("returned above"),
            GcsAuth::ServiceAccount {
                email,
                key,
                token_uri,
            } => {
                let now = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let claims = serde_json::json!({
                    "iss": email, "scope": SCOPE, "aud": token_uri,
                    "iat": now, "exp": now + 3600,
                });
                let signer =
                    jsonwebtoken::EncodingKey::from_rsa_pem(key.expose_secret().as_bytes())
                        .map_err(|e| format!("the service account's private_key: {e}"))?;
                let assertion = jsonwebtoken::encode(
                    &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
                    &claims,
                    &signer,
                )
                .map_err(|e| format!("signing the token request: {e}"))?;
                self.http
                    .post(token_uri)
                    .form(&[
                        ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                        ("assertion", assertion.as_str()),
                    ])
                    .send()
                    .await
            }
            GcsAuth::Metadata => {
                self.http
                    .get(METADATA_TOKEN)
                    .header("Metadata-Flavor", "Google")
                    .send()
                    .await
            }
        }
        .map_err(|e| format!("getting a GCS access token: {e}"))?;
        if !response.status().is_success() {
            return Err(format!(
                "getting a GCS access token: HTTP {}",
                response.status()
            ));
        }
        let token: Token = crate::answer::json_within(response, GCS_ANSWER_READ)
            .await
            .map_err(|e| format!("getting a GCS access token: {e}"))?;
        let expiry = SystemTime::now() + Duration::from_secs(token.expires_in.unwrap_or(300));
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((token.access_token.clone(), expiry));
        Ok(Some(token.access_token))
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, String> {
        let request = match self.bearer().await? {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        request.send().await.map_err(|e| e.to_string())
    }

    fn object_url(&self, name: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.base,
            encode(&self.bucket),
            encode(&join(&self.prefix, name))
        )
    }
}

async fn failure(what: &str, response: reqwest::Response) -> String {
    let status = response.status();
    let said = crate::answer::error_message(response).await;
    format!("{what}: HTTP {status}: {said}")
}

/// The most of a GCS answer about objects (a token, a page of a listing, an object's
/// metadata) that is read: a page of a savepoint folder is a few kilobytes.
const GCS_ANSWER_READ: u64 = 16 << 20;

impl Blobs for GcsBlobs {
    fn describe(&self) -> String {
        format!("gs://{}/{}", self.bucket, self.prefix)
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Blob>, String>> {
        Box::pin(async move {
            let folder = if self.prefix.is_empty() {
                String::new()
            } else {
                format!("{}/", self.prefix)
            };
            let url = format!("{}/storage/v1/b/{}/o", self.base, encode(&self.bucket));
            let mut out = Vec::new();
            let mut page: Option<String> = None;
            // Bounded: a folder of savepoints holds `keep` of them and a lease object.
            for _ in 0..1000 {
                let mut query = vec![("prefix", folder.clone()), ("delimiter", "/".into())];
                if let Some(p) = &page {
                    query.push(("pageToken", p.clone()));
                }
                let response = self.send(self.http.get(&url).query(&query)).await?;
                if !response.status().is_success() {
                    return Err(failure("listing", response).await);
                }
                let list: GcsList = crate::answer::json_within(response, GCS_ANSWER_READ)
                    .await
                    .map_err(|e| format!("listing: {e}"))?;
                for o in list.items {
                    let Some(name) = o.name.strip_prefix(&folder) else {
                        continue;
                    };
                    if name.is_empty() || name.contains('/') {
                        continue;
                    }
                    let modified = o
                        .updated
                        .as_deref()
                        .and_then(|u| chrono::DateTime::parse_from_rfc3339(u).ok())
                        .map_or(SystemTime::UNIX_EPOCH, SystemTime::from);
                    out.push(Blob {
                        name: name.to_string(),
                        modified,
                    });
                }
                match list.next_page_token {
                    Some(p) if !p.is_empty() => page = Some(p),
                    _ => return Ok(out),
                }
            }
            Err("listing: more than 1000 pages".into())
        })
    }

    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, String)>, String>> {
        Box::pin(async move {
            let response = self.send(self.http.get(self.object_url(name))).await?;
            if response.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !response.status().is_success() {
                return Err(failure(name, response).await);
            }
            let meta: GcsObject = crate::answer::json_within(response, GCS_ANSWER_READ)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            let size: u64 = number_text(&meta.size)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if size > MAX_OBJECT_BYTES {
                return Err(format!(
                    "{name}: {size} bytes, more than a savepoint can be ({MAX_OBJECT_BYTES})"
                ));
            }
            let generation = number_text(&meta.generation).unwrap_or_default();
            let mut request = self
                .http
                .get(self.object_url(name))
                .query(&[("alt", "media")]);
            if !generation.is_empty() {
                request = request.query(&[("generation", generation.as_str())]);
            }
            let response = self.send(request).await?;
            if response.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !response.status().is_success() {
                return Err(failure(name, response).await);
            }
            // The metadata said how long it is; the body is held to the same bound whatever
            // it turns out to be.
            let body = crate::answer::within(response, MAX_OBJECT_BYTES)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{name}: more than {MAX_OBJECT_BYTES} bytes"))?;
            let body = Bytes::from(body);
            Ok(Some((body, generation)))
        })
    }

    fn put<'a>(
        &'a self,
        name: &'a str,
        body: Bytes,
        condition: Condition,
    ) -> BoxFuture<'a, Result<Written, String>> {
        Box::pin(async move {
            let url = format!(
                "{}/upload/storage/v1/b/{}/o",
                self.base,
                encode(&self.bucket)
            );
            let object = join(&self.prefix, name);
            let mut query = vec![("uploadType", "media".to_string()), ("name", object)];
            match condition {
                Condition::None => {}
                Condition::Absent => query.push(("ifGenerationMatch", "0".into())),
                Condition::Version(v) => query.push(("ifGenerationMatch", v)),
            }
            let response = self
                .send(
                    self.http
                        .post(url)
                        .query(&query)
                        .header("content-type", "application/yaml")
                        .body(body),
                )
                .await?;
            if response.status() == reqwest::StatusCode::PRECONDITION_FAILED {
                return Ok(Written::Refused);
            }
            if !response.status().is_success() {
                return Err(failure(name, response).await);
            }
            let meta: GcsObject = crate::answer::json_within(response, GCS_ANSWER_READ)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            Ok(Written::Done(
                number_text(&meta.generation).unwrap_or_default(),
            ))
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let response = self.send(self.http.delete(self.object_url(name))).await?;
            if response.status().is_success() || response.status() == reqwest::StatusCode::NOT_FOUND
            {
                Ok(())
            } else {
                Err(failure(name, response).await)
            }
        })
    }

    fn child(&self, folder: &str) -> Arc<dyn Blobs> {
        Arc::new(Self {
            http: self.http.clone(),
            base: self.base.clone(),
            bucket: self.bucket.clone(),
            prefix: join(&self.prefix, folder),
            auth: self.auth.clone(),
            token: self.token.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = MAX_OBJECT_BYTES as usize;

    /// An S3 savepoint of exactly [`MAX_OBJECT_BYTES`] is read; one byte more is refused
    /// naming its size and the bound.
    #[tokio::test]
    async fn an_s3_object_of_max_object_bytes_is_read_and_one_byte_more_refused() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let blobs = S3Blobs::new(store.clone(), "b", "p");
        for (name, len) in [("at", MAX), ("over", MAX + 1)] {
            store
                .put(&ObjPath::from(format!("p/{name}")), vec![b's'; len].into())
                .await
                .unwrap();
        }
        let (body, _) = blobs.get("at").await.unwrap().unwrap();
        assert_eq!(body.len(), MAX);
        let e = blobs.get("over").await.unwrap_err();
        assert_eq!(
            e,
            "over: 67108865 bytes, more than a savepoint can be (67108864)"
        );
    }

    /// A GCS server that gives each object `meta_size` in its metadata and serves
    /// `media_size` bytes; counts the media requests.
    async fn gcs_serving(
        meta_size: usize,
        media_size: usize,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let media = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = media.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let counted = counted.clone();
            async move {
                if uri.query().is_some_and(|q| q.contains("alt=media")) {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    // Streamed, without a length: the bound is held while reading.
                    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..media_size)
                        .step_by(1 << 20)
                        .map(|start| Ok(Bytes::from(vec![b'g'; (media_size - start).min(1 << 20)])))
                        .collect();
                    axum::body::Body::from_stream(futures::stream::iter(chunks))
                } else {
                    axum::body::Body::from(
                        serde_json::json!({"name": "o", "size": meta_size.to_string(), "generation": "7"})
                            .to_string(),
                    )
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), media)
    }

    /// GCS: an object of exactly [`MAX_OBJECT_BYTES`] is read; one whose metadata says one
    /// byte more is refused without its bytes being asked for, and one whose bytes run one
    /// past the bound (whatever its metadata said) is refused at that byte.
    #[tokio::test]
    async fn a_gcs_object_of_max_object_bytes_is_read_and_one_byte_more_refused() {
        let (base, _) = gcs_serving(MAX, MAX).await;
        let blobs = GcsBlobs::new(&base, "b", "", GcsAuth::Anonymous).unwrap();
        let (body, generation) = blobs.get("o").await.unwrap().unwrap();
        assert_eq!((body.len(), generation.as_str()), (MAX, "7"));

        let (base, media) = gcs_serving(MAX + 1, MAX + 1).await;
        let blobs = GcsBlobs::new(&base, "b", "", GcsAuth::Anonymous).unwrap();
        let e = blobs.get("o").await.unwrap_err();
        assert_eq!(
            e,
            "o: 67108865 bytes, more than a savepoint can be (67108864)"
        );
        assert_eq!(media.load(std::sync::atomic::Ordering::SeqCst), 0);

        let (base, _) = gcs_serving(10, MAX + 1).await;
        let blobs = GcsBlobs::new(&base, "b", "", GcsAuth::Anonymous).unwrap();
        let e = blobs.get("o").await.unwrap_err();
        assert_eq!(e, "o: more than 67108864 bytes");
    }
}
