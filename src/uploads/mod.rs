//! SSTable uploads and imports into the local node: Cassandra Sidecar's bulk-load routes
//! without HTTP. A writer puts each component of its SSTables under an upload id
//! (`<staging>/<uploadId>/<keyspace>/<table>/<component>`, written to a temporary name, its
//! digest checked while it streams, renamed when complete), then asks for the import, which
//! the node runs with its checks on (asked through JMX by a helper JVM kept running, or by
//! `nodetool import`). An imported upload id is remembered (in
//! a log beside the staging directories), so a writer that asks again after a crash learns it
//! was imported instead of importing it twice.

mod import;
mod jmx;
mod space;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::Digest as _;
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;

use crate::cassandra::names::{self, NameError};
use crate::config::SstableUploadsConfig;
pub use import::{ImportOptions, ImportStatus};

/// Why an upload, an import or a cleanup was refused or failed. Each message is a complete
/// sentence for the caller; the API maps variants to statuses.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The routes are off (`sstable_uploads.enabled`).
    #[error("SSTable uploads are not enabled on this node (sstable_uploads.enabled)")]
    Disabled,
    /// A name or a header is malformed.
    #[error("{0}")]
    Invalid(String),
    /// A keyspace uploads may not touch.
    #[error("{0}")]
    Forbidden(String),
    /// No such upload (or upload directory for that table).
    #[error("{0}")]
    NotFound(String),
    /// The upload id was imported already: nothing more may be added to it.
    #[error(
        "upload {upload_id} was imported already; a new upload needs a new id (its import answers 200)"
    )]
    AlreadyImported {
        /// The id.
        upload_id: String,
    },
    /// Too much at once.
    #[error("{0}")]
    TooMany(String),
    /// The staging file system is too full: the upload would take it below
    /// `min_free_space_percent`.
    #[error(
        "Insufficient space available for upload: {component} needs {} more, {} ({:.1} %) of {} are free in {}, {} of it reserved by uploads in progress, and sstable_uploads.min_free_space_percent keeps {min} % ({}) free",
        bytesize::ByteSize::b(*needed),
        bytesize::ByteSize::b(*available),
        *available as f64 * 100.0 / (*total).max(1) as f64,
        bytesize::ByteSize::b(*total),
        dir.display(),
        bytesize::ByteSize::b(*reserved),
        bytesize::ByteSize::b(*floor)
    )]
    NoSpace {
        /// The staging directory.
        dir: PathBuf,
        /// The component.
        component: String,
        /// Bytes it has yet to write (its declared length less what is written; a chunk's
        /// length for an upload of unknown length).
        needed: u64,
        /// Bytes free on the staging file system now.
        available: u64,
        /// Bytes of that reserved by the other uploads in flight.
        reserved: u64,
        /// The file system's size.
        total: u64,
        /// The configured floor, percent.
        min: f64,
        /// The floor in bytes.
        floor: u64,
    },
    /// No byte of the body arrived for `idle_timeout`.
    #[error(
        "no byte of {component} arrived for {} (sstable_uploads.idle_timeout) after {received} bytes; the upload was abandoned",
        humantime::format_duration(*idle)
    )]
    Idle {
        /// The component.
        component: String,
        /// The configured idle timeout.
        idle: Duration,
        /// Bytes received before the body stalled.
        received: u64,
    },
    /// The body is longer than `max_component_size`.
    #[error(
        "component {component} is longer than sstable_uploads.max_component_size ({limit} bytes)"
    )]
    TooLarge {
        /// The component.
        component: String,
        /// The limit.
        limit: u64,
    },
    /// The body does not have the digest its header announced.
    #[error("Digest mismatch. expected_digest={expected}, algorithm={algorithm}")]
    DigestMismatch {
        /// The digest announced.
        expected: String,
        /// `XXHash32` or `MD5`.
        algorithm: &'static str,
    },
    /// The body stopped before its end.
    #[error("the body of {component} could not be read: {message}")]
    Body {
        /// The component.
        component: String,
        /// Why.
        message: String,
    },
    /// The node refused the import, or nodetool could not run.
    #[error("{0}")]
    ImportFailed(String),
    /// A file of the staging directory could not be written or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl From<NameError> for UploadError {
    fn from(e: NameError) -> Self {
        match e {
            NameError::Invalid(m) => Self::Invalid(m),
            NameError::Forbidden(m) => Self::Forbidden(m),
        }
    }
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> UploadError + '_ {
    move |source| UploadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The digest a component's upload announces (headers `cassandra-content-xxhash32` with
/// `cassandra-content-xxhash32-seed`, or `content-md5`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// xxHash32 as lowercase hex without leading zeros, with its seed.
    XxHash32 {
        /// The digest as sent.
        hex: String,
        /// The seed (0 when not sent).
        seed: u32,
    },
    /// MD5, base64.
    Md5(String),
    /// Nothing announced: nothing checked (as Sidecar).
    None,
}

impl Expected {
    /// Reads the announced digest from header values, as Sidecar does: xxHash32 first.
    pub fn from_headers(
        xxhash32: Option<&str>,
        seed: Option<&str>,
        md5: Option<&str>,
    ) -> Result<Self, UploadError> {
        if let Some(hex) = xxhash32 {
            let seed = match seed {
                None => 0,
                Some(s) => i64::from_str_radix(s.trim(), 16)
                    .ok()
                    .and_then(|v| u32::try_from(v & 0xffff_ffff).ok())
                    .ok_or_else(|| {
                        UploadError::Invalid(format!(
                            "cassandra-content-xxhash32-seed: {:?} is not a hexadecimal number",
                            crate::answer::cap(s)
                        ))
                    })?,
            };
            return Ok(Self::XxHash32 {
                hex: hex.trim().to_string(),
                seed,
            });
        }
        Ok(md5.map_or(Self::None, |m| Self::Md5(m.trim().to_string())))
    }
}

/// A digest computed while the bytes stream to disk.
enum Hasher {
    XxHash32(xxhash_rust::xxh32::Xxh32),
    Md5(Box<md5::Md5>),
    None,
}

impl Hasher {
    fn new(expected: &Expected) -> Self {
        match expected {
            Expected::XxHash32 { seed, .. } => {
                Self::XxHash32(xxhash_rust::xxh32::Xxh32::new(*seed))
            }
            Expected::Md5(_) => Self::Md5(Box::default()),
            Expected::None => Self::None,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::XxHash32(h) => h.update(bytes),
            Self::Md5(h) => h.update(bytes),
            Self::None => {}
        }
    }

    /// Checks the digest against what was announced. An xxHash32 is compared as a number,
    /// so the zero-padded hex of `xxh32sum` matches as well as the Sidecar's unpadded text.
    fn check(self, expected: &Expected) -> Result<(), UploadError> {
        use base64::Engine as _;
        let (matches, announced, algorithm) = match (self, expected) {
            (Self::XxHash32(h), Expected::XxHash32 { hex, .. }) => (
                u32::from_str_radix(hex, 16).is_ok_and(|v| v == h.digest()),
                hex,
                "XXHash32",
            ),
            (Self::Md5(h), Expected::Md5(b64)) => (
                base64::engine::general_purpose::STANDARD.encode(h.finalize()) == *b64,
                b64,
                "MD5",
            ),
            _ => return Ok(()),
        };
        if matches {
            Ok(())
        } else {
            Err(UploadError::DigestMismatch {
                expected: crate::answer::cap(announced).into_owned(),
                algorithm,
            })
        }
    }
}

/// A component's temporary file while it is received: removed when dropped unless kept, so
/// that no way out of an upload (an error, a timeout, the client gone and the request's future
/// dropped mid-body) leaves it behind. A 15 MB component cut off at 12 MB left its `.tmp` in
/// staging.
struct Partial {
    path: PathBuf,
    file: Option<tokio::fs::File>,
}

impl Partial {
    /// Creates the file. The `open` is not handed to a thread: a dropped future must not leave
    /// an `open` to run after the drop has removed the file, creating it again.
    fn create(path: PathBuf) -> Result<Self, UploadError> {
        let file = std::fs::File::create(&path).map_err(io_at(&path))?;
        Ok(Self {
            path,
            file: Some(tokio::fs::File::from_std(file)),
        })
    }

    /// Keeps the file (renamed into place by now).
    fn kept(&mut self) {
        self.file = None;
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            // One unlink, done here rather than on a thread: the drop may be the last thing
            // that runs of the upload.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What a successful upload answers (Sidecar's `SSTableUploadResponse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// The upload id.
    pub upload_id: String,
    /// Bytes written.
    pub size: u64,
    /// Time spent receiving it.
    pub elapsed: Duration,
}

/// The local node's upload and import service.
pub struct Uploads {
    config: SstableUploadsConfig,
    staging: PathBuf,
    slots: Arc<Semaphore>,
    imports: import::Imports,
    /// Free space reserved by the uploads in flight.
    space: space::Space,
    last_sweep: Mutex<Option<Instant>>,
    /// Held from counting the staged uploads to creating a new one's directory: new uploads
    /// arriving together must not each find room for one more (16 at once staged 8 of a
    /// `max_staged_uploads` of 2).
    admitting: tokio::sync::Mutex<()>,
}

/// How often staged uploads are looked at for expiry.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

impl Uploads {
    /// The service for `config`, staging under `state_dir` unless configured elsewhere. Reads
    /// the log of imported ids; creates nothing while the routes are off.
    pub fn new(
        config: &SstableUploadsConfig,
        state_dir: &Path,
        jmx: Option<String>,
    ) -> Result<Self, UploadError> {
        let staging = config.staging_dir(state_dir);
        let importer = match config.importer {
            crate::config::ImporterKind::Nodetool => import::Importer::Nodetool {
                nodetool: config.nodetool.clone(),
                jmx,
            },
            crate::config::ImporterKind::Jmx => import::Importer::Jmx(jmx::JmxImporter::new(
                config.java.clone(),
                jmx.as_deref(),
                &state_dir.join("jmx-importer"),
            )),
        };
        let imports = if config.enabled {
            std::fs::create_dir_all(&staging).map_err(io_at(&staging))?;
            import::Imports::open(&staging, config.imported_expiry, importer)?
        } else {
            import::Imports::empty(&staging, importer)
        };
        Ok(Self {
            config: config.clone(),
            staging: staging.clone(),
            slots: Arc::new(Semaphore::new(config.concurrent_upload_limit)),
            imports,
            space: space::Space::new(staging.clone(), config.min_free_space_percent),
            last_sweep: Mutex::new(None),
            admitting: tokio::sync::Mutex::new(()),
        })
    }

    /// Whether the routes answer.
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    fn check_enabled(&self) -> Result<(), UploadError> {
        if self.config.enabled {
            Ok(())
        } else {
            Err(UploadError::Disabled)
        }
    }

    /// The directory of one table of one upload.
    fn table_dir(&self, upload_id: &str, keyspace: &str, table: &str) -> PathBuf {
        self.staging.join(upload_id).join(keyspace).join(table)
    }

    /// Receives one component of `declared` bytes (its `Content-Length`, when sent). Names
    /// are checked first; then the bounds (uploads at once, staged uploads, length, free
    /// space: the declared length is reserved before a byte is read); then the body streams
    /// to a temporary file with its digest computed on the way, and is renamed into place only
    /// when complete and matching. The temporary file is removed however the upload ends short
    /// of that, this future being dropped (its client gone) included.
    pub async fn upload<S, E>(
        &self,
        (upload_id, keyspace, table, component): (&str, &str, &str, &str),
        expected: Expected,
        declared: Option<u64>,
        body: S,
    ) -> Result<Uploaded, UploadError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        self.check_enabled()?;
        let started = Instant::now();
        let keyspace = names::keyspace(keyspace)?;
        let table = names::table(table)?;
        let upload_id = names::upload_id(upload_id)?;
        let component = names::component(component)?;
        let limit = self.config.max_component_size.as_u64();
        if declared.is_some_and(|len| len > limit) {
            return Err(UploadError::TooLarge {
                component: component.to_string(),
                limit,
            });
        }
        if self.imports.was_imported((upload_id, keyspace, table)) {
            return Err(UploadError::AlreadyImported {
                upload_id: upload_id.to_string(),
            });
        }
        let _slot = self.slots.clone().try_acquire_owned().map_err(|_| {
            UploadError::TooMany(format!(
                "Concurrent upload limit ({}) exceeded (sstable_uploads.concurrent_upload_limit)",
                self.config.concurrent_upload_limit
            ))
        })?;
        self.maybe_sweep().await;
        let upload_dir = self.staging.join(upload_id);
        let dir = self.table_dir(upload_id, keyspace, table);
        let reservation = {
            let _admitting = self.admitting.lock().await;
            if !tokio::fs::try_exists(&upload_dir).await.unwrap_or(false) {
                let staged = self.staged_count().await?;
                if staged >= self.config.max_staged_uploads {
                    return Err(UploadError::TooMany(format!(
                        "{staged} uploads are staged already (sstable_uploads.max_staged_uploads); import or delete some first"
                    )));
                }
            }
            let reservation = self.space.reserve(component, declared)?;
            tokio::fs::create_dir_all(&dir).await.map_err(io_at(&dir))?;
            reservation
        };
        let mut partial = Partial::create(dir.join(format!(
            ".{component}.{}{}",
            uuid::Uuid::now_v7(),
            crate::fsutil::TMP_SUFFIX
        )))?;
        let size = self
            .receive(&mut partial, component, &expected, reservation, body)
            .await?;
        let to = dir.join(component);
        std::fs::rename(&partial.path, &to).map_err(io_at(&to))?;
        partial.kept();
        crate::fsutil::sync_dir(&dir).map_err(io_at(&dir))?;
        Ok(Uploaded {
            upload_id: upload_id.to_string(),
            size,
            elapsed: started.elapsed(),
        })
    }

    /// Streams `body` into `partial`, each chunk reserved (or its reservation checked again)
    /// before it is written; a body silent for `idle_timeout` is given up.
    async fn receive<S, E>(
        &self,
        partial: &mut Partial,
        component: &str,
        expected: &Expected,
        mut reservation: space::Reservation,
        mut body: S,
    ) -> Result<u64, UploadError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let limit = self.config.max_component_size.as_u64();
        let idle = self.config.idle_timeout;
        let temp = partial.path.clone();
        let file = partial.file.as_mut().expect("the file is open until kept");
        let mut hasher = Hasher::new(expected);
        let mut size = 0u64;
        // Bytes known to be on disk: tokio's `File` hands a write to a thread and returns, and
        // finishes it before it takes the next, so once a chunk is taken every one before it
        // is written (and shows in the file system's free space).
        let mut on_disk = 0u64;
        loop {
            let next =
                tokio::time::timeout(idle, body.next())
                    .await
                    .map_err(|_| UploadError::Idle {
                        component: component.to_string(),
                        idle,
                        received: size,
                    })?;
            let Some(chunk) = next else { break };
            let chunk = chunk.map_err(|e| UploadError::Body {
                component: component.to_string(),
                message: e.to_string(),
            })?;
            let end = size + chunk.len() as u64;
            if end > limit {
                return Err(UploadError::TooLarge {
                    component: component.to_string(),
                    limit,
                });
            }
            reservation.before_write(end, on_disk)?;
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(io_at(&temp))?;
            on_disk = size;
            size = end;
        }
        file.sync_all().await.map_err(io_at(&temp))?;
        hasher.check(expected)?;
        Ok(size)
    }

    /// Upload directories staged now.
    async fn staged_count(&self) -> Result<usize, UploadError> {
        let staging = self.staging.clone();
        tokio::task::spawn_blocking(move || {
            let mut n = 0;
            for entry in std::fs::read_dir(&staging).map_err(io_at(&staging))? {
                let entry = entry.map_err(io_at(&staging))?;
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    n += 1;
                }
            }
            Ok(n)
        })
        .await
        .expect("counting directories does not panic")
    }

    /// Deletes staged uploads untouched for `staged_upload_expiry`, at most once a minute.
    async fn maybe_sweep(&self) {
        {
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let staging = self.staging.clone();
        let expiry = self.config.staged_upload_expiry;
        let busy = self.imports.running_ids();
        let swept = tokio::task::spawn_blocking(move || sweep(&staging, expiry, &busy))
            .await
            .unwrap_or(0);
        if swept > 0 {
            tracing::info!(
                swept,
                "deleted staged SSTable uploads older than sstable_uploads.staged_upload_expiry"
            );
        }
    }

    /// Starts (or reports on) the import of one table of an upload: `Pending` while it runs,
    /// then its outcome, remembered.
    pub fn import(
        &self,
        (upload_id, keyspace, table): (&str, &str, &str),
        options: ImportOptions,
    ) -> Result<ImportStatus, UploadError> {
        self.check_enabled()?;
        let keyspace = names::keyspace(keyspace)?;
        let table = names::table(table)?;
        let upload_id = names::upload_id(upload_id)?;
        let dir = self.table_dir(upload_id, keyspace, table);
        let command = import::Command {
            keyspace: keyspace.to_string(),
            table: table.to_string(),
            dir,
            upload_dir: self.staging.join(upload_id),
            options: ImportOptions {
                copy_data: options.copy_data || self.config.copy_data,
                ..options
            },
            timeout: self.config.import_timeout,
        };
        self.imports.start(upload_id, command)
    }

    /// Deletes an upload with everything staged under it.
    pub async fn delete(&self, upload_id: &str) -> Result<(), UploadError> {
        self.check_enabled()?;
        let upload_id = names::upload_id(upload_id)?;
        if self.imports.running_ids().iter().any(|id| id == upload_id) {
            return Err(UploadError::TooMany(format!(
                "upload {upload_id} is being imported; delete it once its import has ended"
            )));
        }
        let dir = self.staging.join(upload_id);
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(UploadError::NotFound(
                format!("no upload {upload_id} is staged on this node"),
            )),
            Err(e) => Err(io_at(&dir)(e)),
        }
    }
}

/// Deletes the upload directories of `staging` not modified for `expiry`, except `busy`
/// ones (being imported). Returns how many went.
fn sweep(staging: &Path, expiry: Duration, busy: &[String]) -> usize {
    let Ok(entries) = std::fs::read_dir(staging) else {
        return 0;
    };
    let mut swept = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || busy.contains(&name) {
            continue;
        }
        let newest = newest_mtime(&entry.path());
        let old = newest
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > expiry);
        if old && std::fs::remove_dir_all(entry.path()).is_ok() {
            swept += 1;
        }
    }
    swept
}

/// The newest modification time in a directory tree (three levels: upload, keyspace, table).
fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if let Ok(m) = e.metadata() {
                if let Ok(t) = m.modified() {
                    newest = newest.max(Some(t));
                }
                if m.is_dir() && depth < 3 {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
    newest
}

#[cfg(test)]
mod tests;
