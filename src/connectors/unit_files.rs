//! Targets that write a file per unit (a Parquet export, a DynamoDB S3 export): what they
//! share, written once. A unit's file is created by the unit's first write under a temporary
//! name — beside its final name on a local disk, in a spool directory for an object store —,
//! appended to by every write of the unit under one lock (writes of a unit may be in flight
//! together), and made visible whole when the unit finishes: flushed to disk and renamed into
//! place (then its directory synced), or uploaded as one multipart upload. A unit that fails or
//! is stopped drops its file unseen.
//!
//! A target brings its [`FileFormat`] (how pieces are encoded into a file) and its own steps
//! around these (records, manifests, deletions on resume).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use object_store::ObjectStoreExt;
use object_store::path::Path as ObjPath;

use super::parquet::store::Store;
use super::seam::Request;

/// What the checks of an export to files decided (the parts it copies with are the
/// connector's: its scan, its sink, its pacing).
pub enum Opened<T> {
    /// Copy the table.
    Copy(Box<T>),
    /// `mode: ignore` and the target already holds files: nothing to do.
    Ignore,
}

/// Parts of an object store upload.
const PART_BYTES: usize = 16 * 1024 * 1024;

/// A file that could not be written, created, closed, renamed or uploaded.
#[derive(Debug, Clone)]
pub struct FileError {
    /// The file (a temporary path, a final path or an object's URL).
    pub file: String,
    /// What went wrong.
    pub message: String,
}

impl FileError {
    fn new(file: impl std::fmt::Display, message: impl std::fmt::Display) -> Self {
        Self {
            file: file.to_string(),
            message: message.to_string(),
        }
    }
}

/// How one target encodes a unit's file.
pub trait FileFormat: Send + Sync + 'static {
    /// What a write request carries (rows, encoded lines).
    type Piece: Clone + Send + Sync + 'static;
    /// Pieces encoded, ready to append (encoded before the unit's lock is taken, so that
    /// requests of one unit encode side by side).
    type Encoded: Send + 'static;
    /// An open file being encoded.
    type Writer: Send + 'static;
    /// What closing a file reports besides the file (a digest).
    type Closed: Send + 'static;

    /// Starts encoding the file of `unit` into `file` (just created).
    fn open(&self, file: std::fs::File, unit: &UnitInfo) -> Result<Self::Writer, String>;
    /// Encodes pieces.
    fn encode(&self, pieces: Vec<Self::Piece>) -> Result<Self::Encoded, String>;
    /// Appends encoded pieces.
    fn write(&self, writer: &mut Self::Writer, encoded: Self::Encoded) -> Result<(), String>;
    /// Ends the encoding, returning the file to flush to disk.
    fn close(&self, writer: Self::Writer) -> Result<(std::fs::File, Self::Closed), String>;
}

/// The unit a file is written for.
#[derive(Debug, Clone)]
pub struct UnitInfo {
    /// The unit's stable key (`Unit::key`).
    pub key: String,
    /// When the unit began, in milliseconds since the epoch.
    pub began_millis: i64,
}

/// The file of a unit being written.
struct UnitFile<W> {
    /// Taken when the file is closed.
    writer: Option<W>,
    temp: PathBuf,
    pieces: u64,
}

impl<W> Drop for UnitFile<W> {
    fn drop(&mut self) {
        // Only a unit that failed or was stopped drops its file: nothing of it may stay.
        if !self.temp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

type Shared<W> = Arc<Mutex<Option<UnitFile<W>>>>;

/// A unit's pieces waiting to be written, and its file.
pub struct UnitBatch<F: FileFormat> {
    unit: UnitInfo,
    pieces: Vec<F::Piece>,
    bytes: u64,
    file: Shared<F::Writer>,
}

impl<F: FileFormat> Default for UnitBatch<F> {
    /// A batch of no unit (the seam's batchers have a default; `begin` makes real ones).
    fn default() -> Self {
        Self {
            unit: UnitInfo {
                key: String::new(),
                began_millis: 0,
            },
            pieces: Vec::new(),
            bytes: 0,
            file: Arc::new(Mutex::new(None)),
        }
    }
}

impl<F: FileFormat> UnitBatch<F> {
    /// The unit.
    pub fn unit(&self) -> &UnitInfo {
        &self.unit
    }

    /// Adds a piece of `bytes` bytes; the pieces become a request once `per_request` wait.
    pub fn push(
        &mut self,
        piece: F::Piece,
        bytes: u64,
        per_request: usize,
        out: &mut Vec<UnitRequest<F>>,
    ) {
        self.pieces.push(piece);
        self.bytes += bytes;
        if self.pieces.len() >= per_request {
            self.take(out);
        }
    }

    /// The pieces waiting, as a request (none when none wait).
    pub fn take(&mut self, out: &mut Vec<UnitRequest<F>>) {
        if self.pieces.is_empty() {
            return;
        }
        out.push(UnitRequest {
            pieces: std::mem::take(&mut self.pieces),
            bytes: std::mem::take(&mut self.bytes),
            file: self.file.clone(),
            unit: self.unit.clone(),
        });
    }
}

/// Pieces appended to a unit's file.
pub struct UnitRequest<F: FileFormat> {
    pieces: Vec<F::Piece>,
    bytes: u64,
    file: Shared<F::Writer>,
    unit: UnitInfo,
}

impl<F: FileFormat> UnitRequest<F> {
    /// The unit.
    pub fn unit(&self) -> &UnitInfo {
        &self.unit
    }
}

impl<F: FileFormat> Request for UnitRequest<F> {
    fn rows(&self) -> u64 {
        self.pieces.len() as u64
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn statements(&self) -> u64 {
        1
    }
    fn idempotent(&self) -> bool {
        // Appending twice would write the pieces twice; a failed append fails the unit, whose
        // file is then dropped unseen.
        false
    }
}

/// A closed file in its place.
pub struct Placed<C> {
    /// Pieces written into it.
    pub pieces: u64,
    /// What the format reported.
    pub closed: C,
}

/// Where a target's files go, and how they are encoded.
pub struct UnitFiles<F: FileFormat> {
    /// The place.
    pub store: Store,
    /// Where files bound for an object store are written before their upload.
    spool: Option<PathBuf>,
    /// The encoding.
    pub format: F,
}

impl<F: FileFormat> UnitFiles<F> {
    /// The files of a target at `store`, encoded by `format`; for an object store, spooled in
    /// the temporary directory's `spool` (created here) before their upload.
    pub fn new(store: Store, spool: &str, format: F) -> Result<Self, FileError> {
        let spool = if store.local_root.is_some() {
            None
        } else {
            let dir = std::env::temp_dir().join(spool);
            std::fs::create_dir_all(&dir).map_err(|e| {
                FileError::new(
                    dir.display(),
                    format!("cannot create the spool directory: {e}"),
                )
            })?;
            Some(dir)
        };
        Ok(Self {
            store,
            spool,
            format,
        })
    }

    /// Deletes `paths` (what a resume or `mode: overwrite` decided must go); one already gone
    /// is fine. The error says which object could not be deleted.
    pub async fn delete_all(&self, paths: Vec<ObjPath>) -> Result<(), String> {
        for path in paths {
            match self.store.inner.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(format!("cannot delete {}: {e}", self.store.id_of(&path))),
            }
        }
        Ok(())
    }

    /// The object path of `rel` (relative to the target's root).
    pub fn path(&self, rel: &str) -> ObjPath {
        if self.store.root.as_ref().is_empty() {
            ObjPath::from(rel)
        } else {
            ObjPath::from(format!("{}/{rel}", self.store.root))
        }
    }

    /// The batch of a unit starting now.
    pub fn begin(&self, key: &str) -> UnitBatch<F> {
        UnitBatch {
            unit: UnitInfo {
                key: key.to_string(),
                // TTLs read from now on count from here: a later load shortens them by the
                // time since (a little early for rows read later in the unit, never late).
                began_millis: chrono::Utc::now().timestamp_millis(),
            },
            pieces: Vec::new(),
            bytes: 0,
            file: Arc::new(Mutex::new(None)),
        }
    }

    /// Appends a request's pieces to its unit's file `rel`, created by the unit's first
    /// write.
    pub async fn append(
        self: &Arc<Self>,
        rel: &str,
        request: &UnitRequest<F>,
    ) -> Result<(), FileError> {
        let files = self.clone();
        let file = request.file.clone();
        let pieces = request.pieces.clone();
        let unit = request.unit.clone();
        let rel = rel.to_string();
        tokio::task::spawn_blocking(move || {
            let count = pieces.len() as u64;
            let encoded = files
                .format
                .encode(pieces)
                .map_err(|m| FileError::new(files.store.id_of(&files.path(&rel)), m))?;
            // Requests of one unit may be in flight together: the first creates the file,
            // under the lock every append of the unit takes.
            let mut guard = file.lock().unwrap_or_else(|p| p.into_inner());
            if guard.is_none() {
                *guard = Some(files.create(&rel, &unit)?);
            }
            let open = guard.as_mut().expect("created above");
            let writer = open.writer.as_mut().expect("open until the unit finishes");
            files
                .format
                .write(writer, encoded)
                .map_err(|m| FileError::new(open.temp.display(), m))?;
            open.pieces += count;
            Ok(())
        })
        .await
        .expect("writing a file does not panic")
    }

    fn create(&self, rel: &str, unit: &UnitInfo) -> Result<UnitFile<F::Writer>, FileError> {
        let (dir, name) = match rel.rsplit_once('/') {
            Some((dir, name)) => (Some(dir), name),
            None => (None, rel),
        };
        let temp = match (&self.spool, &self.store.local_root) {
            // Not named after the file: a final name near the file system's limit of 255
            // bytes would not leave room for a suffix.
            (Some(spool), _) => spool.join(format!("{}.tmp", uuid::Uuid::now_v7())),
            (None, Some(root)) => {
                let dir = dir.map_or_else(|| root.clone(), |d| root.join(d));
                std::fs::create_dir_all(&dir).map_err(|e| {
                    FileError::new(dir.display(), format!("cannot create the directory: {e}"))
                })?;
                dir.join(format!(".{name}.{}.tmp", std::process::id()))
            }
            (None, None) => unreachable!("an object store target has a spool directory"),
        };
        let file = std::fs::File::create(&temp).map_err(|e| FileError::new(temp.display(), e))?;
        let mut open = UnitFile {
            writer: None,
            temp,
            pieces: 0,
        };
        open.writer = Some(
            self.format
                .open(file, unit)
                .map_err(|m| FileError::new(open.temp.display(), m))?,
        );
        Ok(open)
    }

    /// Closes the unit's file and puts it in its place `rel`: renamed after an fsync on a
    /// local disk, uploaded whole to an object store. `None` when the unit wrote nothing (no
    /// file).
    pub async fn place(
        self: &Arc<Self>,
        batch: UnitBatch<F>,
        rel: &str,
    ) -> Result<Option<Placed<F::Closed>>, FileError> {
        let Some(open) = batch.file.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(None);
        };
        let to = self.path(rel);
        let id = self.store.id_of(&to);
        let local = self.store.local_root.as_ref().map(|root| root.join(rel));
        let files = self.clone();
        let target = local.clone();
        // Closing encodes the file's last part (a Parquet footer, a gzip trailer) and flushes
        // it: CPU and disk work, off the async workers.
        let format_closed =
            tokio::task::spawn_blocking(move || -> Result<(PathBuf, u64, F::Closed), FileError> {
                let mut open = open;
                let writer = open.writer.take().expect("open until the unit finishes");
                let (file, closed) = files
                    .format
                    .close(writer)
                    .map_err(|m| FileError::new(open.temp.display(), m))?;
                file.sync_all()
                    .map_err(|e| FileError::new(open.temp.display(), e))?;
                drop(file);
                let temp = std::mem::take(&mut open.temp);
                if let Some(to) = &target {
                    if let Err(e) = std::fs::rename(&temp, to) {
                        let _ = std::fs::remove_file(&temp);
                        return Err(FileError::new(
                            to.display(),
                            format!("cannot rename {} into place: {e}", temp.display()),
                        ));
                    }
                    if let Some(dir) = to.parent() {
                        crate::fsutil::sync_dir(dir)
                            .map_err(|e| FileError::new(dir.display(), e))?;
                    }
                }
                Ok((temp, open.pieces, closed))
            })
            .await
            .expect("closing a file does not panic");
        let (spooled, pieces, closed) = format_closed?;
        if local.is_none() {
            let uploaded = self.store.upload(&spooled, &to, PART_BYTES).await;
            let _ = std::fs::remove_file(&spooled);
            uploaded.map_err(|m| FileError::new(&id, format!("upload: {m}")))?;
        }
        Ok(Some(Placed { pieces, closed }))
    }
}
