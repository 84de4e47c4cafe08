//! The source's side: which routes a node answers, its file list and the digest of that list,
//! and admission of file requests (not once the migration is COMPLETED, not beyond
//! `max_concurrent_file_requests` at once).

use std::path::PathBuf;

use tokio::sync::OwnedSemaphorePermit;

use super::digest::{self, Algorithm};
use super::files::{self, Entry};
use super::range::{self, RangeRequest};
use super::{LiveMigration, LiveMigrationError, MigrationState};
use crate::config::Role;

/// The role a live-migration operation needs from this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Serving files: a source.
    Source,
    /// Running tasks: a destination.
    Destination,
    /// Status, switch and file-list digest: either.
    Either,
}

impl Need {
    /// How error messages name the role.
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Destination => "destination",
            Self::Either => "source or destination",
        }
    }
}

impl LiveMigration {
    /// Whether an operation that needs `need` may run: live migration is enabled and this
    /// node is in `migration_map` with that role.
    pub fn allows(&self, need: Need) -> bool {
        self.enabled()
            && match (&self.role, need) {
                (Role::None, _) => false,
                (_, Need::Either) => true,
                (Role::Source { .. }, need) => need == Need::Source,
                (Role::Destination { .. }, need) => need == Need::Destination,
            }
    }

    /// Every file and directory of the node's configured directories, minus exclusions.
    pub async fn list_files(&self) -> Result<Vec<Entry>, LiveMigrationError> {
        let roots = self.roots.clone();
        let exclusions = self.exclusions.clone();
        tokio::task::spawn_blocking(move || files::list(&roots, &exclusions))
            .await
            .expect("listing does not panic")
            .map_err(LiveMigrationError::Listing)
    }

    /// Admits a request for one file (`dirType`, `dirIndex`, path as the URL has them): the
    /// migration is not COMPLETED, a file-request slot is free, and the path names a file
    /// that may be served.
    pub async fn open_file(
        &self,
        dir_type: String,
        dir_index: String,
        path: String,
    ) -> Result<ServedFile, LiveMigrationError> {
        if self.status().state == MigrationState::Completed {
            return Err(LiveMigrationError::NoMoreFiles);
        }
        let Ok(permit) = self.file_requests.clone().try_acquire_owned() else {
            return Err(LiveMigrationError::TooManyFileRequests {
                limit: self.config.max_concurrent_file_requests,
            });
        };
        let roots = self.roots.clone();
        let exclusions = self.exclusions.clone();
        let path = tokio::task::spawn_blocking(move || {
            files::resolve(&roots, &exclusions, &dir_type, &dir_index, &path)
        })
        .await
        .expect("resolving does not panic")?;
        Ok(ServedFile { path, permit })
    }
}

/// A file admitted for serving; it holds a file-request slot until dropped.
pub struct ServedFile {
    /// The file, every link resolved.
    pub path: PathBuf,
    /// The slot; kept while the bytes are being sent.
    pub permit: OwnedSemaphorePermit,
}

impl ServedFile {
    /// The file's digest; the slot is given back once it is computed.
    pub async fn digest(self, algorithm: Algorithm) -> Result<String, LiveMigrationError> {
        tokio::task::spawn_blocking(move || {
            let d = digest::of_file(&self.path, algorithm);
            drop(self.permit);
            d
        })
        .await
        .expect("hashing does not panic")
        .map_err(LiveMigrationError::reading)
    }
}

impl ServedFile {
    /// Opens the file for the bytes a `Range` header asks for (one range: `bytes=a-b`,
    /// `bytes=a-`, `bytes=-n`; none or a malformed one means the whole file).
    pub async fn read(self, range: Option<&str>) -> Result<ServedBytes, LiveMigrationError> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let io = LiveMigrationError::reading;
        let mut file = tokio::fs::File::open(&self.path).await.map_err(io)?;
        let len = file.metadata().await.map_err(io)?.len();
        let (start, count, whole) = match range::parse(range, len) {
            RangeRequest::Whole => (0, len, true),
            RangeRequest::Part { start, end } => (start, end - start + 1, false),
            RangeRequest::Unsatisfiable => return Ok(ServedBytes::Unsatisfiable { len }),
        };
        if start > 0 {
            file.seek(std::io::SeekFrom::Start(start))
                .await
                .map_err(io)?;
        }
        Ok(ServedBytes::Bytes(FileBytes {
            reader: file.take(count),
            start,
            count,
            len,
            whole,
            permit: self.permit,
        }))
    }
}

/// What a request for a file's bytes gets.
pub enum ServedBytes {
    /// The bytes asked for.
    Bytes(FileBytes),
    /// The range lies outside the file.
    Unsatisfiable {
        /// The file's size.
        len: u64,
    },
}

/// Bytes of a served file, ready to be streamed.
pub struct FileBytes {
    /// Reads exactly `count` bytes from `start`.
    pub reader: tokio::io::Take<tokio::fs::File>,
    /// First byte.
    pub start: u64,
    /// Bytes to send.
    pub count: u64,
    /// The file's size.
    pub len: u64,
    /// The whole file (no range asked, or a malformed one).
    pub whole: bool,
    /// The file-request slot; to be kept until the last byte is sent.
    pub permit: OwnedSemaphorePermit,
}

/// The `?digestAlgorithm=` of a request, checked.
pub fn digest_algorithm(name: Option<&str>) -> Result<Option<Algorithm>, LiveMigrationError> {
    name.map(str::parse::<Algorithm>)
        .transpose()
        .map_err(|e| LiveMigrationError::InvalidRequest(format!("digestAlgorithm: {e}")))
}

/// One digest over a node's file list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListDigest {
    /// Lower-case hex digest of the sorted `fileUrl size` lines of every file.
    pub digest: String,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Files counted.
    pub files: usize,
    /// Sum of their sizes.
    pub total_size: u64,
}

/// The digest of the sorted (path, size) list of every file: two nodes compare their whole
/// file set in one request each. (Content is not read: verification tasks do that.)
pub fn list_digest(entries: &[Entry], algorithm: Algorithm) -> ListDigest {
    let mut hasher = algorithm.hasher();
    let mut lines: Vec<String> = entries
        .iter()
        .filter(|e| !e.is_dir)
        .map(|e| format!("{} {}\n", e.url(), e.size))
        .collect();
    lines.sort();
    for l in &lines {
        hasher.update(l.as_bytes());
    }
    ListDigest {
        digest: hasher.finish(),
        algorithm,
        files: lines.len(),
        total_size: entries.iter().map(|e| e.size).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::livemigration::files::DirType;

    fn entry(path: &str, size: u64, is_dir: bool) -> Entry {
        Entry {
            mode: 0o644,
            dir_type: DirType::Data,
            dir_index: 0,
            path: path.into(),
            size,
            is_dir,
            modified_ms: 0,
        }
    }

    #[test]
    fn list_digests_ignore_order_directories_and_times() {
        let a = [
            entry("ks/t/b", 2, false),
            entry("ks", 0, true),
            entry("ks/t/a", 1, false),
        ];
        let mut b = vec![entry("ks/t/a", 1, false), entry("ks/t/b", 2, false)];
        b[0].modified_ms = 7;
        let (da, db) = (
            list_digest(&a, Algorithm::Sha256),
            list_digest(&b, Algorithm::Sha256),
        );
        assert_eq!(da, db);
        assert_eq!((da.files, da.total_size), (2, 3));
        b[1].size = 3;
        assert_ne!(list_digest(&b, Algorithm::Sha256).digest, da.digest);
    }
}
