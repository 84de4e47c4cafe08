//! The source's side: which routes a node answers, its file list and the digest of that list,
//! and admission of file requests (not once the migration is COMPLETED, not beyond
//! `max_concurrent_file_requests` at once).

use tokio::sync::OwnedSemaphorePermit;

use super::digest::{self, Algorithm};
use super::files::{self, Entry};
use super::range::{self, RangeRequest, Validator};
use super::{LiveMigration, LiveMigrationError, MigrationState};
use crate::config::Role;

/// The role a live-migration operation needs from this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Serving files: a source.
    Source,
    /// Running tasks: a destination.
    Destination,
    /// Status, file list and file-list digest: either.
    Either,
    /// Clearing the status (`DELETE /status`): a node that has left `migration_map`.
    Cleanup,
}

impl Need {
    /// How error messages name the role.
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Destination => "destination",
            Self::Either => "source or destination",
            // Refused only to a node in the map whose routes are off.
            Self::Cleanup => "source or destination",
        }
    }
}

impl LiveMigration {
    /// Whether an operation that needs `need` may run: live migration is enabled and this
    /// node is in `migration_map` with that role. Clearing the status is the step after a
    /// node has left the map, so a node with no role may always ask for it (whatever the
    /// switch says); a node still in the map reaches [`LiveMigration::clear`] only with the
    /// routes on, and is refused there (403).
    pub fn allows(&self, need: Need) -> bool {
        if need == Need::Cleanup && self.role == Role::None {
            return true;
        }
        self.enabled()
            && match (&self.role, need) {
                (Role::None, _) => false,
                (_, Need::Either | Need::Cleanup) => true,
                (Role::Source { .. }, need) => need == Need::Source,
                (Role::Destination { .. }, need) => need == Need::Destination,
            }
    }

    /// Every file and directory of the node's configured directories, minus exclusions, once
    /// a listing slot is free (waiting at most `listing_wait`). The slot comes with the
    /// entries: whoever sends them keeps it until the last is sent, so that at most
    /// `max_concurrent_listings` lists are in memory at once.
    pub async fn list_files(&self) -> Result<Listing, LiveMigrationError> {
        let busy = || LiveMigrationError::TooManyListings {
            limit: self.config.max_concurrent_listings,
        };
        let permit = tokio::time::timeout(
            self.config.listing_wait,
            self.listings.clone().acquire_owned(),
        )
        .await
        .map_err(|_| busy())?
        .map_err(|_| busy())?;
        let roots = self.roots.clone();
        let exclusions = self.exclusions.clone();
        let entries = tokio::task::spawn_blocking(move || files::list(&roots, &exclusions))
            .await
            .expect("listing does not panic")
            .map_err(LiveMigrationError::Listing)?;
        Ok(Listing { entries, permit })
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
        let file = tokio::task::spawn_blocking(move || {
            files::resolve(&roots, &exclusions, &dir_type, &dir_index, &path)
        })
        .await
        .expect("resolving does not panic")?;
        Ok(ServedFile { file, permit })
    }
}

/// The node's files, with the listing slot they hold.
pub struct Listing {
    /// Sorted by type, index and path.
    pub entries: Vec<Entry>,
    /// The slot; to be kept until the entries are sent.
    pub permit: OwnedSemaphorePermit,
}

/// A file admitted for serving, already open (it is never opened again by name, so what was
/// checked is what is sent); it holds a file-request slot until dropped.
pub struct ServedFile {
    /// The open file.
    pub file: std::fs::File,
    /// The slot; kept while the bytes are being sent.
    pub permit: OwnedSemaphorePermit,
}

impl ServedFile {
    /// The file's digest; the slot is given back once it is computed.
    pub async fn digest(self, algorithm: Algorithm) -> Result<String, LiveMigrationError> {
        tokio::task::spawn_blocking(move || {
            let d = digest::of_reader(&self.file, algorithm);
            drop(self.permit);
            d
        })
        .await
        .expect("hashing does not panic")
        .map_err(LiveMigrationError::reading)
    }
}

impl ServedFile {
    /// The digests of the file's blocks of `block_size` bytes and of the whole file, in one
    /// read (see [`super::batch`]); the slot is given back once they are computed.
    pub async fn block_digests(
        self,
        algorithm: Algorithm,
        block_size: u64,
    ) -> Result<super::batch::BlockDigests, LiveMigrationError> {
        let len = self
            .file
            .metadata()
            .map_err(LiveMigrationError::reading)?
            .len();
        super::batch::check_block_size(block_size, len)?;
        tokio::task::spawn_blocking(move || {
            let d = super::batch::block_digests(&self.file, algorithm, block_size);
            drop(self.permit);
            d
        })
        .await
        .expect("hashing does not panic")
        .map_err(LiveMigrationError::reading)
    }

    /// Prepares the bytes a `Range` header asks for (one range: `bytes=a-b`, `bytes=a-`,
    /// `bytes=-n`; none means the whole file, anything else is refused; a range that is the
    /// whole file is sent as the whole file, as Sidecar does). With `If-Range`, the range
    /// is served only if the validator matches the file as it is now; otherwise the whole
    /// file is (RFC 9110 §13.1.5), so a client resuming a download of a file that changed
    /// meanwhile does not glue two versions together.
    pub async fn read(
        self,
        range: Option<&str>,
        if_range: Option<&str>,
    ) -> Result<ServedBytes, LiveMigrationError> {
        use tokio::io::AsyncSeekExt;
        let io = LiveMigrationError::reading;
        let mut file = tokio::fs::File::from_std(self.file);
        let meta = file.metadata().await.map_err(io)?;
        let len = meta.len();
        let validator = Validator::of(&meta);
        let range = match if_range {
            Some(v) if !validator.matches(v, std::time::SystemTime::now()) => None,
            _ => range,
        };
        let (start, count) = match range::parse(range, len) {
            RangeRequest::Whole => (0, len),
            RangeRequest::Part { start, end } => (start, end - start + 1),
            RangeRequest::Unsatisfiable => {
                return Ok(ServedBytes::Unsatisfiable {
                    len,
                    validator,
                    message: format!("the range lies outside the file ({len} bytes)"),
                });
            }
            RangeRequest::Invalid => {
                return Ok(ServedBytes::Unsatisfiable {
                    len,
                    validator,
                    message: range::invalid_message(range.unwrap_or_default()),
                });
            }
        };
        let whole = start == 0 && count == len;
        if start > 0 {
            file.seek(std::io::SeekFrom::Start(start))
                .await
                .map_err(io)?;
        }
        Ok(ServedBytes::Bytes(FileBytes {
            reader: file.into_std().await,
            start,
            count,
            len,
            whole,
            validator,
            permit: self.permit,
        }))
    }
}

/// Bytes of a file read at once by [`stream_file`]: large, so that each chunk costs one read,
/// one wake-up and one write to the socket.
const FILE_CHUNK: usize = 1 << 20;

/// The next `count` bytes of `file`, as a stream of chunks of up to [`FILE_CHUNK`] bytes read
/// by one blocking thread, at most one chunk ahead of the network. Each chunk is read
/// straight into the buffer the socket is written from (tokio's file reads go through a
/// buffer of their own, and one hop to the blocking pool per read): no copy between the two,
/// and one hop per file. A file shorter than `count`
/// ends the stream with an error, so the answer is cut short, never padded. The thread stops
/// when the client goes away.
pub fn stream_file(
    file: std::fs::File,
    count: u64,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    // One chunk waits while the next is read: 2 MiB per request at most, within
    // `max_concurrent_file_requests` requests.
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(1);
    tokio::task::spawn_blocking(move || {
        let mut left = count;
        while left > 0 {
            let want = left.min(FILE_CHUNK as u64) as usize;
            // Zeroed first (safe code cannot read into uninitialised memory): a memset of
            // 1 MiB is a few hundredths of what sending it costs.
            let mut chunk = vec![0u8; want];
            let read = std::io::Read::read_exact(&mut &file, &mut chunk).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    std::io::Error::new(e.kind(), "the file is shorter than when it was opened")
                } else {
                    e
                }
            });
            let failed = read.is_err();
            let item = read.map(|()| bytes::Bytes::from(chunk));
            left -= want as u64;
            if tx.blocking_send(item).is_err() || failed {
                return;
            }
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

/// What a request for a file's bytes gets.
pub enum ServedBytes {
    /// The bytes asked for.
    Bytes(FileBytes),
    /// The range lies outside the file, or is not one range of a served form (416).
    Unsatisfiable {
        /// The file's size.
        len: u64,
        /// The file's validators.
        validator: Validator,
        /// Why.
        message: String,
    },
}

/// Bytes of a served file, ready to be streamed.
pub struct FileBytes {
    /// The file, positioned at `start`; [`stream_file`] sends `count` bytes of it.
    pub reader: std::fs::File,
    /// First byte.
    pub start: u64,
    /// Bytes to send.
    pub count: u64,
    /// The file's size.
    pub len: u64,
    /// The whole file (no range asked, one covering the whole file, or an `If-Range` that
    /// did not match).
    pub whole: bool,
    /// The file's validators, sent as `ETag` and `Last-Modified`.
    pub validator: Validator,
    /// The file-request slot; to be kept until the last byte is sent.
    pub permit: OwnedSemaphorePermit,
}

/// The `?digestAlgorithm=` of a request, checked, with Sidecar's messages: names are
/// case-insensitive, an empty one and an unknown one are refused.
pub fn digest_algorithm(name: Option<&str>) -> Result<Option<Algorithm>, LiveMigrationError> {
    let Some(name) = name else {
        return Ok(None);
    };
    if name.trim().is_empty() {
        return Err(LiveMigrationError::InvalidRequest(
            "Digest algorithm name cannot be null or empty".into(),
        ));
    }
    name.parse::<Algorithm>()
        .map(Some)
        .map_err(|_| LiveMigrationError::InvalidRequest(digest::unsupported(name)))
}

/// One digest over a node's file list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListDigest {
    /// The digest (as [`super::digest::Hasher::finish`] writes it) of the sorted
    /// `fileUrl size` lines of every file.
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
        total_size: entries.iter().filter(|e| !e.is_dir).map(|e| e.size).sum(),
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
            entry("ks", 4096, true),
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

#[cfg(test)]
mod algorithm_tests {
    use super::*;

    /// Sidecar's names (case-insensitive) and messages.
    #[test]
    fn digest_algorithms_are_named_as_sidecar_names_them() {
        for name in ["MD5", "md5", "Md5"] {
            assert_eq!(digest_algorithm(Some(name)).unwrap(), Some(Algorithm::Md5));
        }
        for name in ["XXHash32", "xxhash32", "XXHASH32"] {
            assert_eq!(
                digest_algorithm(Some(name)).unwrap(),
                Some(Algorithm::Xxhash32)
            );
        }
        assert_eq!(digest_algorithm(None).unwrap(), None);
        let message = |name| digest_algorithm(Some(name)).unwrap_err().to_string();
        assert_eq!(message(""), "Digest algorithm name cannot be null or empty");
        assert_eq!(
            message(" "),
            "Digest algorithm name cannot be null or empty"
        );
        assert_eq!(
            message("CRC32"),
            "Unsupported digest algorithm CRC32; accepted (any case): MD5, XXHash32, sha256, xxh3"
        );
        // Every name the refusal offers is taken.
        for name in digest::ACCEPTED {
            assert!(digest_algorithm(Some(name)).unwrap().is_some(), "{name}");
        }
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;
    use futures::StreamExt;

    /// The bytes asked for, from where the file stands, in chunks of at most 1 MiB; a file
    /// shorter than asked ends the stream with an error after what it has.
    #[tokio::test]
    async fn a_file_streams_from_its_position_and_a_short_one_ends_in_an_error() {
        use std::io::{Seek, Write};
        let content: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&content).unwrap();
        f.seek(std::io::SeekFrom::Start(1000)).unwrap();
        let chunks: Vec<_> = stream_file(f.try_clone().unwrap(), 2_500_000)
            .collect()
            .await;
        assert_eq!(chunks.len(), 3);
        let got: Vec<u8> = chunks
            .into_iter()
            .flat_map(|c| c.unwrap().to_vec())
            .collect();
        assert_eq!(got, content[1000..2_501_000]);

        // 2.5 MB left, 3 MB asked: two whole chunks, then the error.
        f.seek(std::io::SeekFrom::Start(500_000)).unwrap();
        let chunks: Vec<_> = stream_file(f, 3_000_000).collect().await;
        assert_eq!(chunks.len(), 3);
        assert!(
            chunks[..2]
                .iter()
                .all(|c| c.as_ref().unwrap().len() == 1 << 20)
        );
        let last = chunks[2].as_ref().unwrap_err();
        assert_eq!(last.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
