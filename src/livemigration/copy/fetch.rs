//! Fetching one file from the source: into a staging file next to its final path
//! (`.<name>.<size>-<mtime>.drover-part`), continued with a `Range` request after an
//! interruption, checked against the source's digest when asked, given the source's
//! modification time and permission bits (at most 0644, see [`super::place`]), and renamed
//! into place only when complete — so no truncated file is ever left at a final path. Every
//! file is reached through its directory's handle, opened without following links. Failed
//! attempts are retried with backoff.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::livemigration::LiveMigrationError;
use crate::livemigration::batch::Features;
use crate::livemigration::digest::{self, Algorithm, Hasher};
use crate::livemigration::files::PART_SUFFIX;
use crate::livemigration::local::LocalFiles;
use crate::livemigration::peer::{PeerClient, RemoteFile};

use super::place::{self, Place};

/// The mode of a downloaded file whose source listed none (Sidecar's listings have none).
pub const DEFAULT_MODE: u32 = place::FILE_MODE_MASK;

/// Live counters of the downloads of one iteration, copied into its status (entries: files,
/// empty files and directories).
#[derive(Debug, Default)]
pub struct DownloadCounters {
    /// Entries downloaded or created.
    pub files_downloaded: AtomicU64,
    /// Bytes downloaded.
    pub bytes_downloaded: AtomicU64,
    /// Entries that could not be downloaded or created.
    pub download_failures: AtomicU64,
    /// Bytes not downloaded because the local copy already had them (delta).
    pub bytes_kept: AtomicU64,
}

/// A bandwidth limit shared by the downloads of a task.
pub type Limiter = governor::DefaultDirectRateLimiter;

/// The bandwidth limit of `max_bytes_per_second`, if any.
pub fn limiter(max_bytes_per_second: Option<u64>) -> Option<Limiter> {
    max_bytes_per_second.and_then(|b| {
        std::num::NonZeroU32::new(u32::try_from(b).unwrap_or(u32::MAX))
            .map(|n| governor::RateLimiter::direct(governor::Quota::per_second(n)))
    })
}

/// The staging file of a download of `file`: its name carries the source's size and mtime, so
/// a resumed download only continues bytes of the same version of the file.
pub fn staging_path(final_path: &Path, file: &RemoteFile) -> PathBuf {
    staging_path_of_kind(final_path, file, "")
}

/// A staging file's path: `.<name>.<size>-<mtime><kind>.drover-part`.
pub(super) fn staging_path_of_kind(final_path: &Path, file: &RemoteFile, kind: &str) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(
        ".{name}.{}-{}{kind}{PART_SUFFIX}",
        file.size, file.last_modified_time
    ))
}

/// The name of the staging file of `file` in its directory (see [`staging_path`]).
pub(super) fn staging_name(place: &Place, file: &RemoteFile, kind: &str) -> String {
    staging_path_of_kind(place.path(), file, kind)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the downloads of one iteration share.
pub struct Downloader<'a> {
    /// This node's directories: every file is placed below them through no link.
    pub local: std::sync::Arc<LocalFiles>,
    /// The source daemon.
    pub peer: &'a PeerClient,
    /// Digest checked on each download.
    pub verify: Option<Algorithm>,
    /// The task's bandwidth limit.
    pub limiter: Option<&'a Limiter>,
    /// The iteration's counters.
    pub counters: &'a DownloadCounters,
    /// Fires when the task is cancelled.
    pub cancel: &'a CancellationToken,
    /// The drover extensions the source announced.
    pub features: Features,
    /// The task's connections to the source: `maxConcurrency` permits.
    pub connections: &'a tokio::sync::Semaphore,
    /// The most bytes of one `Range` request of a striped download (see
    /// [`super::striped::stripe_for`]).
    pub stripe: u64,
    /// The permits of `connections` (the task's `maxConcurrency`).
    pub connections_total: usize,
    /// The bytes this iteration set out to download: with `counters`, what is left, which
    /// sizes the stripes near its end.
    pub bytes_to_download: u64,
}

/// The waits between the attempts of one download or one batch: 5 retries, from 200 ms to
/// 5 s, with jitter.
pub(super) fn retry_delays() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(5)
        .with_jitter()
        .build()
}

/// Smallest file fetched by stripes, keeping the blocks of a local version that match the
/// source's (see [`super::striped`]): below it, a block-digest round trip costs about what
/// fetching the file does.
pub const DELTA_MIN: u64 = 1 << 20;

impl Downloader<'_> {
    /// Downloads one file, retried with backoff (connection errors, a source restarting) up
    /// to 5 times; each retry continues the staging file. Returns the bytes received.
    pub async fn download_with_retries(
        &self,
        file: &RemoteFile,
        final_path: &Path,
    ) -> Result<u64, LiveMigrationError> {
        let cancel = self.cancel;
        let mut delays = retry_delays();
        loop {
            // The request and the digest asked at the end wait on the source too: a cancel
            // must not wait for a source that stopped answering.
            let attempt = tokio::select! {
                r = self.download(file, final_path) => r,
                _ = cancel.cancelled() => Err(LiveMigrationError::Cancelled),
            };
            match attempt {
                Ok(n) => return Ok(n),
                Err(LiveMigrationError::Cancelled) => return Err(LiveMigrationError::Cancelled),
                Err(e @ (LiveMigrationError::Invalid(_) | LiveMigrationError::Gone(_))) => {
                    return Err(e);
                }
                Err(e) => match delays.next() {
                    Some(delay) => {
                        tracing::warn!(file = %file.file_url, error = %e, "download failed; retrying");
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => {}
                            _ = cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
                        }
                    }
                    None => return Err(e),
                },
            }
        }
    }

    /// Downloads one file into place: by stripes from a drover source (see
    /// [`super::striped`]), else in one stream, resuming a staging file left by an
    /// interrupted attempt.
    pub async fn download(
        &self,
        file: &RemoteFile,
        final_path: &Path,
    ) -> Result<u64, LiveMigrationError> {
        let place = self.place_of(final_path, true).await?;
        if super::striped::striped(file, self.features.block_digests) {
            return self.download_striped(file, &place).await;
        }
        let staging = staging_name(&place, file, "");
        let _connection = self.connection().await?;
        self.fetch_into(file, &place, &staging).await
    }

    /// The place of `final_path` here (see [`Place::open`]), its directories made with
    /// `create`.
    pub(super) async fn place_of(
        &self,
        final_path: &Path,
        create: bool,
    ) -> Result<Place, LiveMigrationError> {
        let (local, path) = (self.local.clone(), final_path.to_path_buf());
        tokio::task::spawn_blocking(move || Place::open(&local.roots, &path, create))
            .await
            .expect("opening a directory does not panic")
    }

    /// The bytes of the iteration neither received nor kept yet (an estimate: a file that
    /// changed size since it was listed moves it).
    pub(super) fn bytes_left(&self) -> u64 {
        let c = self.counters;
        self.bytes_to_download
            .saturating_sub(c.bytes_downloaded.load(Ordering::Relaxed))
            .saturating_sub(c.bytes_kept.load(Ordering::Relaxed))
    }

    /// One of the task's connections to the source, waited for: each request for bytes
    /// holds one, so batches, whole files and stripes together keep within `maxConcurrency`.
    pub(super) async fn connection(
        &self,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, LiveMigrationError> {
        tokio::select! {
            p = self.connections.acquire() => p.map_err(|_| LiveMigrationError::Cancelled),
            _ = self.cancel.cancelled() => Err(LiveMigrationError::Cancelled),
        }
    }

    /// Fetches the rest of `file` into its staging file (from what it holds) and renames it
    /// into place. Returns the bytes received.
    async fn fetch_into(
        &self,
        file: &RemoteFile,
        place: &Place,
        staging_name: &str,
    ) -> Result<u64, LiveMigrationError> {
        let local = LiveMigrationError::local;
        let staging = place.sibling(staging_name);
        let mut have = match place.file_len(staging_name) {
            Some(len) if len <= file.size => len,
            _ => 0,
        };
        if have == file.size && have > 0 {
            // Complete already: a crash came between the last byte and the rename.
            return self
                .finish(file, place, staging_name, None)
                .await
                .map(|()| 0);
        }
        let response = self.peer.fetch(&file.file_url, have, None).await?;
        let status = response.status();
        if status == reqwest::StatusCode::OK {
            // The whole file after all.
            have = 0;
        } else if status == reqwest::StatusCode::RANGE_NOT_SATISFIABLE && have > 0 {
            // The source file shrank: this version is gone.
            let _ = place.remove(staging_name);
            return Err(LiveMigrationError::Peer(format!(
                "{} changed while being downloaded",
                file.file_url
            )));
        } else if status == reqwest::StatusCode::NOT_FOUND {
            let _ = place.remove(staging_name);
            return Err(LiveMigrationError::Gone(format!(
                "{} is gone at the source",
                file.file_url
            )));
        } else if status != reqwest::StatusCode::PARTIAL_CONTENT {
            let what = format!("downloading {}", file.file_url);
            return Err(PeerClient::error_of(response, &what).await);
        }
        // A link planted at the staging name must not send the source's bytes wherever it
        // points: it is refused, not followed.
        let (at, name) = (
            place.try_clone().map_err(local(&staging))?,
            staging_name.to_string(),
        );
        let opened = tokio::task::spawn_blocking(move || at.create(&name, have == 0))
            .await
            .expect("opening a file does not panic")
            .map_err(local(&staging))?;
        let mut out = ChunkWriter::new(opened, have);
        // The digest covers the whole file: the part already on disk is read again first.
        let mut hasher = match self.verify {
            Some(a) if have > 0 => Some(
                hash_prefix(
                    place.open_read(staging_name).map_err(local(&staging))?,
                    &staging,
                    a,
                )
                .await?,
            ),
            Some(a) => Some(a.hasher()),
            None => None,
        };
        let mut stream = response.bytes_stream();
        let mut got = 0u64;
        while let Some(chunk) = self.next_chunk(&mut stream, file).await? {
            // The listing is the contract: a source sending more than the listed size could
            // fill the destination's disk, so reading stops before a byte beyond it is kept.
            let total = have
                .checked_add(got)
                .and_then(|n| n.checked_add(chunk.len() as u64));
            if total.is_none_or(|n| n > file.size) {
                drop(out);
                let _ = place.remove(staging_name);
                return Err(LiveMigrationError::Invalid(format!(
                    "{}: the source sent more than the {} bytes it listed",
                    file.file_url, file.size
                )));
            }
            self.pace(chunk.len()).await;
            if let Some(h) = hasher.as_mut() {
                h.update(&chunk);
            }
            let len = chunk.len() as u64;
            out.write(chunk).await.map_err(local(&staging))?;
            got += len;
            self.counters
                .bytes_downloaded
                .fetch_add(len, Ordering::Relaxed);
        }
        out.sync().await.map_err(local(&staging))?;
        // A body that ends early (a source restarting, a file listed longer than it is) is
        // retried from where it stopped; it is never renamed into place short.
        if have + got != file.size {
            return Err(LiveMigrationError::Peer(format!(
                "{}: the source sent {} of the {} bytes it listed",
                file.file_url,
                have + got,
                file.size
            )));
        }
        self.finish(file, place, staging_name, hasher).await?;
        Ok(got)
    }

    /// The next chunk of a download's body, `None` at its end; a cancel ends the wait.
    pub(super) async fn next_chunk(
        &self,
        stream: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
        file: &RemoteFile,
    ) -> Result<Option<bytes::Bytes>, LiveMigrationError> {
        let next = tokio::select! {
            c = stream.next() => c,
            _ = self.cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
        };
        next.transpose().map_err(|e| {
            LiveMigrationError::Peer(format!(
                "downloading {}: {}",
                file.file_url,
                self.peer.describe(&e)
            ))
        })
    }

    /// Waits until the bandwidth limit lets `len` more bytes through.
    pub(super) async fn pace(&self, len: usize) {
        let Some(limiter) = self.limiter else {
            return;
        };
        // A chunk (up to 1 MiB gathered) may be more than a second's worth of a low limit,
        // more than the limiter holds at once: it goes through in pieces of what it holds.
        // (Waiting for one byte of it instead let such chunks through unpaced: 1.8 MB/s
        // under a 400 kB/s limit.)
        let mut left = u64::try_from(len).unwrap_or(u64::MAX).max(1);
        let mut most = u64::from(u32::MAX);
        while left > 0 {
            let take = left.min(most);
            let n = std::num::NonZeroU32::new(u32::try_from(take).unwrap_or(u32::MAX))
                .unwrap_or(std::num::NonZeroU32::MIN);
            match limiter.until_n_ready(n).await {
                Ok(()) => left -= take,
                Err(governor::InsufficientCapacity(holds)) => most = u64::from(holds.max(1)),
            }
        }
    }

    /// Checks a complete staging file against the source's digest (with `verify`; `hasher`
    /// holds the digest computed while streaming, else the file is read), gives it the
    /// source's modification time and renames it into place.
    pub(super) async fn finish(
        &self,
        file: &RemoteFile,
        place: &Place,
        staging_name: &str,
        hasher: Option<Hasher>,
    ) -> Result<(), LiveMigrationError> {
        let local = LiveMigrationError::local;
        let staging = &place.sibling(staging_name);
        if let Some(a) = self.verify {
            let mine = match hasher {
                Some(h) => h.finish(),
                None => {
                    let f = place.open_read(staging_name).map_err(local(staging))?;
                    tokio::task::spawn_blocking(move || digest::of_reader(f, a))
                        .await
                        .expect("hashing does not panic")
                        .map_err(local(staging))?
                }
            };
            let theirs = self.peer.digest(&file.file_url, a, file.size).await?;
            if mine != theirs {
                let _ = place.remove(staging_name);
                return Err(LiveMigrationError::Digest(format!(
                    "{}: {} digest {mine} differs from the source's {theirs}",
                    file.file_url,
                    a.name()
                )));
            }
        }
        let (at, name, listed) = (
            place.try_clone().map_err(local(staging))?,
            staging_name.to_string(),
            file.clone(),
        );
        tokio::task::spawn_blocking(move || {
            // Through a handle opened without following links: a link swapped in at the
            // staging name cannot have another file's mode or times changed.
            at.open_read(&name)
                .and_then(|f| set_mode_and_mtime_of(&f, &listed))
                .map_err(local(&at.sibling(&name)))?;
            // The directory is synced once per iteration for all its files (see `sync_dirs`):
            // a rename lost in a crash leaves a complete staging file, which the next pass
            // finishes.
            at.rename_into_place(&name).map_err(local(at.path()))
        })
        .await
        .expect("placing a file does not panic")
    }
}

/// Gives an open file the source's modification time and permission bits, at most 0644
/// ([`place::file_mode`]; 0644 when it listed none): a source cannot make a file here
/// writable by others, executable or set-user-id. Blocking.
pub(super) fn set_mode_and_mtime_of(
    handle: &std::fs::File,
    file: &RemoteFile,
) -> std::io::Result<()> {
    let mtime = filetime::FileTime::from_unix_time(
        (file.last_modified_time / 1000) as i64,
        ((file.last_modified_time % 1000) * 1_000_000) as u32,
    );
    let mode = place::file_mode(file.mode);
    handle.set_permissions(std::fs::Permissions::from_mode(mode))?;
    filetime::set_file_handle_times(handle, None, Some(mtime))
}

/// Bytes gathered before a [`ChunkWriter`] writes them.
const WRITE_BATCH: usize = 1 << 20;

/// Writes a download's bytes at their place in its file: the network's chunks (shared
/// `Bytes`) are gathered up to [`WRITE_BATCH`] bytes and written on the blocking pool with
/// positional writes. A `BufWriter` over a tokio file copied each byte twice in user space
/// (into its buffer, then into the tokio file's) before the kernel's copy; here the kernel's
/// is the only one, and the blocking pool is reached once per MiB.
pub(super) struct ChunkWriter {
    /// `None` only while a write is under way (a write dropped midway drops the file).
    file: Option<std::fs::File>,
    /// Where the next gathered byte goes.
    at: u64,
    pending: Vec<bytes::Bytes>,
    pending_len: usize,
}

impl ChunkWriter {
    /// Writes from byte `at` of `file` on.
    pub(super) fn new(file: std::fs::File, at: u64) -> Self {
        Self {
            file: Some(file),
            at,
            pending: Vec::new(),
            pending_len: 0,
        }
    }

    /// Takes the next bytes, written once enough are gathered.
    pub(super) async fn write(&mut self, chunk: bytes::Bytes) -> std::io::Result<()> {
        self.pending_len += chunk.len();
        self.pending.push(chunk);
        if self.pending_len >= WRITE_BATCH {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes what is gathered.
    pub(super) async fn flush(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        if self.pending.is_empty() {
            return Ok(());
        }
        let file = self.file.take().ok_or_else(|| {
            std::io::Error::other("a write was dropped midway; the file is closed")
        })?;
        let chunks = std::mem::take(&mut self.pending);
        let at = self.at;
        let (file, written) = tokio::task::spawn_blocking(move || {
            let mut at = at;
            let written = chunks.iter().try_for_each(|c| {
                file.write_all_at(c, at)?;
                at += c.len() as u64;
                Ok::<_, std::io::Error>(())
            });
            (file, written)
        })
        .await
        .expect("writing does not panic");
        self.file = Some(file);
        self.at += self.pending_len as u64;
        self.pending_len = 0;
        written
    }

    /// Writes what is gathered and makes the file durable.
    pub(super) async fn sync(mut self) -> std::io::Result<()> {
        self.flush().await?;
        let file = self.file.take().ok_or_else(|| {
            std::io::Error::other("a write was dropped midway; the file is closed")
        })?;
        tokio::task::spawn_blocking(move || file.sync_all())
            .await
            .expect("syncing does not panic")
    }
}

/// Bytes written to a large file between two early syncs of it (see [`Writeback`]).
const WRITEBACK_EVERY: u64 = 32 << 20;

/// Keeps a large download's data flowing to the disk while it arrives, instead of all at its
/// final sync. A destination with much memory holds a whole 1 GiB segment dirty until then
/// (writeback starts at 10 % of memory), and that sync, alone at the end, took about a second
/// on this machine; worse, each batch of small files synced meanwhile (`syncfs`) waited for
/// those pages too, and its connection stood idle. So every [`WRITEBACK_EVERY`] bytes a
/// `fdatasync` of the file is started on the blocking pool — at most one at a time, never
/// waited for by the writers — and its result is checked by the next one or by [`finish`].
/// All syncs go through the descriptor opened before the first byte was written, so a
/// writeback error anywhere in between is reported to it (Linux reports such an error to the
/// descriptors open when it happened).
///
/// [`finish`]: Writeback::finish
pub(super) struct Writeback {
    file: std::sync::Arc<std::fs::File>,
    state: std::sync::Mutex<WritebackState>,
}

#[derive(Default)]
struct WritebackState {
    /// Bytes written since the last sync was started.
    unsynced: u64,
    /// The sync under way.
    running: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// Syncs started, for tests.
    started: u32,
}

impl Writeback {
    /// Syncs `file`, opened before anything was written to it.
    pub(super) fn new(file: std::fs::File) -> Self {
        Self {
            file: std::sync::Arc::new(file),
            state: std::sync::Mutex::new(WritebackState::default()),
        }
    }

    /// Another descriptor of the file (a duplicate: it shares the file's state), to write
    /// with.
    pub(super) fn descriptor(&self) -> std::io::Result<std::fs::File> {
        self.file.try_clone()
    }

    /// Counts `len` more bytes written, and starts a sync when enough are and none runs.
    /// A finished sync's error is returned here.
    pub(super) fn wrote(&self, len: u64) -> std::io::Result<()> {
        use futures::FutureExt;
        let mut state = self.state.lock().expect("writeback state lock");
        state.unsynced += len;
        if let Some(running) = state.running.take() {
            if !running.is_finished() {
                state.running = Some(running);
                return Ok(());
            }
            running
                .now_or_never()
                .expect("a finished task is ready")
                .expect("syncing does not panic")?;
        }
        if state.unsynced >= WRITEBACK_EVERY {
            state.unsynced = 0;
            state.started += 1;
            let file = self.file.clone();
            state.running = Some(tokio::task::spawn_blocking(move || file.sync_data()));
        }
        Ok(())
    }

    /// Waits for the sync under way, then makes the file durable.
    pub(super) async fn finish(self) -> std::io::Result<()> {
        let running = self
            .state
            .lock()
            .expect("writeback state lock")
            .running
            .take();
        if let Some(running) = running {
            running.await.expect("syncing does not panic")?;
        }
        let file = self.file;
        tokio::task::spawn_blocking(move || file.sync_all())
            .await
            .expect("syncing does not panic")
    }

    #[cfg(test)]
    fn started(&self) -> u32 {
        self.state.lock().expect("writeback state lock").started
    }
}

/// Creates what the source lists and has no bytes to send: a directory (with the source's
/// mode, at most 0755), or an empty file (with the source's modification time and mode,
/// through a staging file renamed into place). No request is made: a Sidecar source answers
/// 416 to a request for an empty file. Nothing is made through a link (see [`Place`]).
/// Blocking.
pub fn create_without_request(
    local: &LocalFiles,
    file: &RemoteFile,
    final_path: &Path,
) -> Result<(), LiveMigrationError> {
    let on = LiveMigrationError::local;
    let place = Place::open(&local.roots, final_path, true)?;
    if file.is_dir() {
        let dir = place.make_dir()?;
        return rustix::fs::fchmod(
            &dir,
            rustix::fs::Mode::from_raw_mode(place::dir_mode(file.mode)),
        )
        .map_err(|e| on(final_path)(e.into()));
    }
    let staging = staging_name(&place, file, "");
    let staging_path = place.sibling(&staging);
    place
        .create(&staging, true)
        .and_then(|f| {
            f.sync_all()?;
            set_mode_and_mtime_of(&f, file)
        })
        .map_err(on(&staging_path))?;
    place.rename_into_place(&staging).map_err(on(final_path))
}

/// A hasher that has read the part of a download already in `partial`, the staging file
/// (`path`) opened.
async fn hash_prefix(
    partial: std::fs::File,
    path: &Path,
    algorithm: Algorithm,
) -> Result<Hasher, LiveMigrationError> {
    let mut h = algorithm.hasher();
    tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        use std::io::Read;
        let mut f = partial;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(h);
            }
            h.update(&buf[..n]);
        }
    })
    .await
    .expect("hashing does not panic")
    .map_err(LiveMigrationError::local(path))
}

/// Makes the renames of an iteration durable: each directory that received files is synced
/// once, instead of once per file (a directory sync commits the file system's journal), each
/// opened through no link. Blocking.
pub fn sync_dirs(
    local: &LocalFiles,
    paths: impl Iterator<Item = PathBuf>,
) -> Result<(), LiveMigrationError> {
    let dirs: std::collections::BTreeSet<PathBuf> = paths
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    for dir in dirs {
        // A directory that a failed download never made has nothing to sync.
        let handle = match place::open_directory(&local.roots, &dir) {
            Ok(handle) => handle,
            Err(LiveMigrationError::Local { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        rustix::fs::fsync(&handle).map_err(|e| LiveMigrationError::Local {
            path: dir,
            source: e.into(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[tokio::test]
    async fn a_large_file_is_synced_while_it_is_written_and_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let file = std::fs::File::create(&path).unwrap();
        let writeback = Writeback::new(file.try_clone().unwrap());
        let chunk = vec![7u8; 1 << 20];
        let mib = (3 * WRITEBACK_EVERY) >> 20;
        for i in 0..mib {
            file.write_all_at(&chunk, i << 20).unwrap();
            writeback.wrote(1 << 20).unwrap();
            assert_eq!(
                writeback.started() > 0,
                (i + 1) << 20 >= WRITEBACK_EVERY,
                "the first sync starts once {WRITEBACK_EVERY} bytes are written (MiB {i})"
            );
        }
        writeback.finish().await.unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), mib << 20);
    }
}
