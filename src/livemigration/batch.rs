//! drover-to-drover transfer of many small files in one response (`POST
//! /api/v1/live-migration/files-batch`), and the block digests of one file
//! (`?digestAlgorithm=xxh3&blockSize=N`) that let a destination fetch only what follows the
//! prefix it already holds. Neither is part of Cassandra Sidecar's API: a source that serves
//! them says so in the `X-Drover-Features` header of its listing, and a destination that does
//! not see it uses the Sidecar routes only.
//!
//! A batch response is a sequence of frames: a 4-byte big-endian length, a JSON [`Frame`]
//! header of that length, then, for a file, exactly `size` bytes of content. The last frame
//! is [`Frame::End`]: a response cut short is never mistaken for a complete one. Each file's
//! digest is computed by the source over the bytes it sends, so a destination checks what it
//! received without another request.

use std::io::Read;

use bytes::{Buf, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use super::digest::{Algorithm, Hasher};
use super::files::{self, PathError, URL_PREFIX};
use super::{LiveMigration, LiveMigrationError, MigrationState};

/// The header naming the drover extensions a source serves, sent with its listing.
pub const FEATURES_HEADER: &str = "x-drover-features";
/// Its value on this version.
pub const FEATURES: &str = "files-batch, block-digests";
/// Most files one batch request may name.
pub const MAX_BATCH_FILES: usize = 1024;
/// Largest file a batch carries; a larger one is answered [`Frame::Skipped`] and fetched
/// alone. It bounds what a source holds in memory for one frame.
pub const MAX_BATCH_FILE_BYTES: u64 = 4 << 20;
/// Longest frame header a destination reads.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Frames a source prepares ahead of the network, per batch.
const FRAMES_AHEAD: usize = 2;
/// Smallest block of a block-digest answer.
pub const MIN_BLOCK_SIZE: u64 = 64 * 1024;
/// Most blocks of one block-digest answer.
pub const MAX_BLOCKS: u64 = 65_536;

/// The drover extensions a source's listing announced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// `POST /files-batch`.
    pub batch: bool,
    /// `?blockSize=` on a file's digest.
    pub block_digests: bool,
}

impl Features {
    /// What a `X-Drover-Features` value announces (unknown names are ignored).
    pub fn parse(value: Option<&str>) -> Self {
        let mut f = Self::default();
        for name in value.unwrap_or_default().split(',').map(str::trim) {
            match name {
                "files-batch" => f.batch = true,
                "block-digests" => f.block_digests = true,
                _ => {}
            }
        }
        f
    }
}

/// A batch request: the files wanted, by the URLs of the listing.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BatchRequest {
    /// Up to 1024 `fileUrl`s of the listing.
    pub files: Vec<String>,
    /// The digest sent with each file (default `xxh3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest_algorithm: Option<String>,
}

/// Why a file of a batch was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SkipReason {
    /// Missing, excluded, or gone since it was listed.
    NotFound,
    /// Larger than a batch carries: fetch it alone.
    TooLarge,
    /// A malformed URL, a directory, or a path through a symbolic link.
    Refused,
    /// It could not be read.
    Unreadable,
}

/// One frame header of a batch response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "frame", rename_all = "camelCase")]
pub enum Frame {
    /// A file: `size` bytes of content follow.
    #[serde(rename_all = "camelCase")]
    File {
        /// As requested.
        file_url: String,
        /// Bytes that follow.
        size: u64,
        /// Its modification time when it was read, milliseconds since the epoch.
        last_modified_time: u64,
        /// Its permission bits.
        mode: u32,
        /// The digest of the bytes that follow.
        digest: String,
    },
    /// A file not sent.
    #[serde(rename_all = "camelCase")]
    Skipped {
        /// As requested.
        file_url: String,
        /// Why.
        reason: SkipReason,
        /// The source's words.
        message: String,
    },
    /// The last frame.
    End {
        /// File frames sent.
        files: usize,
    },
}

/// Appends a frame (header, then `content`) to `out`.
pub fn encode(frame: &Frame, content: &[u8], out: &mut Vec<u8>) {
    let header = serde_json::to_vec(frame).expect("a frame serializes");
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(content);
}

impl LiveMigration {
    /// Admits a batch request: the migration is not COMPLETED, the request names at most
    /// [`MAX_BATCH_FILES`] files, and a file-request slot is free (one for the whole batch).
    /// Returns the response body: frames read by a blocking task, [`FRAMES_AHEAD`] at most
    /// waiting for the network. The slot is given back when the last frame is sent or the
    /// client leaves.
    pub fn open_batch(
        &self,
        request: BatchRequest,
    ) -> Result<impl Stream<Item = Result<Bytes, std::io::Error>> + use<>, LiveMigrationError> {
        if self.status().state == MigrationState::Completed {
            return Err(LiveMigrationError::NoMoreFiles);
        }
        if request.files.len() > MAX_BATCH_FILES {
            return Err(LiveMigrationError::InvalidRequest(format!(
                "files: {} files named, at most {MAX_BATCH_FILES} per batch",
                request.files.len()
            )));
        }
        let algorithm = super::serve::digest_algorithm(request.digest_algorithm.as_deref())?
            .unwrap_or(Algorithm::Xxh3);
        let Ok(permit) = self.file_requests.clone().try_acquire_owned() else {
            return Err(LiveMigrationError::TooManyFileRequests {
                limit: self.config.max_concurrent_file_requests,
            });
        };
        let roots = self.roots.clone();
        let exclusions = self.exclusions.clone();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(FRAMES_AHEAD);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut sent = 0usize;
            for url in &request.files {
                let mut out = Vec::new();
                if read_one(&roots, &exclusions, url, algorithm, &mut out) {
                    sent += 1;
                }
                // The client left: stop reading.
                if tx.blocking_send(Ok(Bytes::from(out))).is_err() {
                    return;
                }
            }
            let mut out = Vec::new();
            encode(&Frame::End { files: sent }, &[], &mut out);
            let _ = tx.blocking_send(Ok(Bytes::from(out)));
        });
        Ok(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        }))
    }
}

/// Reads one requested file into a frame (`out`); whether it was sent. Blocking.
fn read_one(
    roots: &files::Roots,
    exclusions: &super::exclusions::Exclusions,
    url: &str,
    algorithm: Algorithm,
    out: &mut Vec<u8>,
) -> bool {
    let skipped = |reason, message: String, out: &mut Vec<u8>| {
        let frame = Frame::Skipped {
            file_url: url.to_string(),
            reason,
            message,
        };
        encode(&frame, &[], out);
        false
    };
    let Some(rest) = url.strip_prefix(URL_PREFIX) else {
        return skipped(
            SkipReason::Refused,
            format!("{url:?} is not a file URL"),
            out,
        );
    };
    let mut parts = rest.splitn(3, '/');
    let (t, i, p) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let file = match files::resolve(roots, exclusions, t, i, p) {
        Ok(f) => f,
        Err(LiveMigrationError::Path(PathError::NotFound(m))) => {
            return skipped(SkipReason::NotFound, m, out);
        }
        Err(LiveMigrationError::Path(e)) => {
            return skipped(SkipReason::Refused, e.to_string(), out);
        }
        Err(e) => return skipped(SkipReason::Unreadable, e.to_string(), out),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return skipped(SkipReason::Unreadable, e.to_string(), out),
    };
    if meta.len() > MAX_BATCH_FILE_BYTES {
        return skipped(
            SkipReason::TooLarge,
            format!(
                "{} bytes: larger than a batch carries ({MAX_BATCH_FILE_BYTES})",
                meta.len()
            ),
            out,
        );
    }
    let mut content = Vec::with_capacity(meta.len() as usize);
    // A file growing while it is read is sent as read, up to the batch's bound.
    if let Err(e) = (&file).take(MAX_BATCH_FILE_BYTES).read_to_end(&mut content) {
        return skipped(SkipReason::Unreadable, e.to_string(), out);
    }
    let mut hasher = algorithm.hasher();
    hasher.update(&content);
    use std::os::unix::fs::PermissionsExt;
    let frame = Frame::File {
        file_url: url.to_string(),
        size: content.len() as u64,
        last_modified_time: files::modified_ms(&meta),
        mode: meta.permissions().mode() & 0o777,
        digest: hasher.finish(),
    };
    out.reserve(content.len() + 256);
    encode(&frame, &content, out);
    true
}

/// Reads the frames of a batch response as they arrive.
pub struct FrameReader<S> {
    stream: S,
    buf: BytesMut,
    ended: bool,
}

impl<S, E> FrameReader<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    /// Frames of `stream`.
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            buf: BytesMut::new(),
            ended: false,
        }
    }

    /// The next frame and, for a file, its content; `None` after [`Frame::End`]. A body that
    /// ends before it, a header that is not a frame, or content longer than a batch carries
    /// is an error ([`LiveMigrationError::Peer`]).
    pub async fn next(&mut self) -> Result<Option<(Frame, Bytes)>, LiveMigrationError> {
        if self.ended {
            return Ok(None);
        }
        self.fill(4).await?;
        let len = u32::from_be_bytes(self.buf[..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_HEADER_BYTES {
            return Err(LiveMigrationError::Peer(format!(
                "batch: a frame header of {len} bytes (at most {MAX_HEADER_BYTES})"
            )));
        }
        self.fill(4 + len).await?;
        self.buf.advance(4);
        let header = self.buf.split_to(len);
        let frame: Frame = serde_json::from_slice(&header).map_err(|e| {
            // serde's message may quote the header (an unknown variant, a string): clipped.
            LiveMigrationError::Peer(format!(
                "batch: not a frame header: {}",
                crate::answer::clip(&e.to_string())
            ))
        })?;
        let size = match &frame {
            Frame::File { size, .. } => *size,
            Frame::End { .. } => {
                self.ended = true;
                0
            }
            Frame::Skipped { .. } => 0,
        };
        if size > MAX_BATCH_FILE_BYTES {
            return Err(LiveMigrationError::Peer(format!(
                "batch: a file of {size} bytes (at most {MAX_BATCH_FILE_BYTES})"
            )));
        }
        self.fill(size as usize).await?;
        let content = self.buf.split_to(size as usize).freeze();
        Ok(Some((frame, content)))
    }

    /// Reads until `n` bytes are buffered.
    async fn fill(&mut self, n: usize) -> Result<(), LiveMigrationError> {
        while self.buf.len() < n {
            match self.stream.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(LiveMigrationError::Peer(format!("batch: {e}"))),
                None => {
                    return Err(LiveMigrationError::Peer(
                        "batch: the answer ended before its last frame".into(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The digests of a file's consecutive blocks, and of the whole file, in one read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDigests {
    /// The whole file's digest.
    pub digest: String,
    /// The algorithm.
    pub digest_algorithm: String,
    /// Bytes per block (the last block may be shorter).
    pub block_size: u64,
    /// The file's size when it was read.
    pub size: u64,
    /// One digest per block, in order.
    pub blocks: Vec<String>,
}

/// Checks a requested block size against a file of `len` bytes.
pub fn check_block_size(block_size: u64, len: u64) -> Result<(), LiveMigrationError> {
    if block_size < MIN_BLOCK_SIZE {
        return Err(LiveMigrationError::InvalidRequest(format!(
            "blockSize {block_size}: at least {MIN_BLOCK_SIZE}"
        )));
    }
    if len.div_ceil(block_size) > MAX_BLOCKS {
        return Err(LiveMigrationError::InvalidRequest(format!(
            "blockSize {block_size}: the file ({len} bytes) would have more than {MAX_BLOCKS} blocks"
        )));
    }
    Ok(())
}

/// The block digests of everything `reader` gives. Blocking.
pub fn block_digests(
    mut reader: impl Read,
    algorithm: Algorithm,
    block_size: u64,
) -> std::io::Result<BlockDigests> {
    let mut whole = algorithm.hasher();
    let mut blocks = Vec::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; block_size.min(1 << 20) as usize];
    let mut block: Option<Hasher> = None;
    let mut in_block = 0u64;
    loop {
        let room = (block_size - in_block).min(buf.len() as u64) as usize;
        let n = reader.read(&mut buf[..room])?;
        if n == 0 {
            break;
        }
        whole.update(&buf[..n]);
        block
            .get_or_insert_with(|| algorithm.hasher())
            .update(&buf[..n]);
        in_block += n as u64;
        size += n as u64;
        if in_block == block_size {
            blocks.push(block.take().expect("a block").finish());
            in_block = 0;
        }
    }
    if let Some(b) = block {
        blocks.push(b.finish());
    }
    Ok(BlockDigests {
        digest: whole.finish(),
        digest_algorithm: algorithm.name().into(),
        block_size,
        size,
        blocks,
    })
}

/// Which of the source's blocks (`theirs`) a local file (whose block digests are `mine`,
/// with the same algorithm and block size) holds already, block by block: a block matches
/// when the local one has the same length and digest. Any block may match, not only the
/// first ones: a segment rewritten in one place keeps all its other blocks.
pub fn matching_blocks(mine: &BlockDigests, theirs: &BlockDigests) -> Vec<bool> {
    let comparable =
        mine.block_size == theirs.block_size && mine.digest_algorithm == theirs.digest_algorithm;
    let len = |d: &BlockDigests, i: usize| {
        d.size
            .saturating_sub(i as u64 * d.block_size)
            .min(d.block_size)
    };
    (0..theirs.blocks.len())
        .map(|i| {
            comparable
                && mine.blocks.get(i) == theirs.blocks.get(i)
                && len(mine, i) == len(theirs, i)
        })
        .collect()
}

/// The block size a destination asks for a file of `len` bytes: 1 MiB, or more for a file
/// that would have more than [`MAX_BLOCKS`] blocks.
pub fn block_size_for(len: u64) -> u64 {
    let mut b = 1u64 << 20;
    while len.div_ceil(b) > MAX_BLOCKS {
        b *= 2;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_across_any_chunking() {
        let mut body = Vec::new();
        let content = b"0123456789".repeat(100);
        let file = Frame::File {
            file_url: format!("{URL_PREFIX}data/0/ks/t/a"),
            size: content.len() as u64,
            last_modified_time: 7,
            mode: 0o644,
            digest: "d".into(),
        };
        let skipped = Frame::Skipped {
            file_url: format!("{URL_PREFIX}data/0/ks/t/b"),
            reason: SkipReason::NotFound,
            message: "gone".into(),
        };
        encode(&file, &content, &mut body);
        encode(&skipped, &[], &mut body);
        encode(&Frame::End { files: 1 }, &[], &mut body);
        for chunk in [1usize, 3, 7, 1000, body.len()] {
            let chunks: Vec<Result<Bytes, std::io::Error>> = body
                .chunks(chunk)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect();
            let mut r = FrameReader::new(futures::stream::iter(chunks));
            let got = futures::executor::block_on(async {
                let mut got = Vec::new();
                while let Some(f) = r.next().await.unwrap() {
                    got.push(f);
                }
                got
            });
            assert_eq!(got.len(), 3);
            assert_eq!(got[0], (file.clone(), Bytes::from(content.clone())));
            assert_eq!(got[1].0, skipped);
            assert_eq!(got[2].0, Frame::End { files: 1 });
        }
        // Cut anywhere before the end frame: an error, never a short success.
        let end_at = body.len() - 4 - serde_json::to_vec(&Frame::End { files: 1 }).unwrap().len();
        for cut in [0, 3, 10, 500, end_at] {
            let mut r = FrameReader::new(futures::stream::iter(vec![Ok::<_, std::io::Error>(
                Bytes::copy_from_slice(&body[..cut]),
            )]));
            let result = futures::executor::block_on(async {
                loop {
                    match r.next().await {
                        Ok(Some(_)) => continue,
                        other => return other,
                    }
                }
            });
            assert!(result.is_err(), "cut at {cut}: {result:?}");
        }
    }

    /// Every frame of `body` in one chunk, or the error that stopped the reading.
    fn frames_of(body: Vec<u8>) -> Result<Vec<(Frame, Bytes)>, LiveMigrationError> {
        let mut r = FrameReader::new(futures::stream::iter(vec![Ok::<_, std::io::Error>(
            Bytes::from(body),
        )]));
        futures::executor::block_on(async {
            let mut got = Vec::new();
            while let Some(f) = r.next().await? {
                got.push(f);
            }
            Ok(got)
        })
    }

    /// A destination reads a frame header of exactly [`MAX_HEADER_BYTES`] and a file of
    /// exactly [`MAX_BATCH_FILE_BYTES`]; one byte more of either is refused before it is read
    /// or held, naming the size and the bound.
    #[test]
    fn frames_at_the_bounds_are_read_and_one_byte_more_refused() {
        let skipped = |header_len: usize| {
            let frame = |message: String| Frame::Skipped {
                file_url: "u".into(),
                reason: SkipReason::NotFound,
                message,
            };
            let bare = serde_json::to_vec(&frame(String::new())).unwrap().len();
            let frame = frame("m".repeat(header_len - bare));
            assert_eq!(serde_json::to_vec(&frame).unwrap().len(), header_len);
            frame
        };
        let mut body = Vec::new();
        encode(&skipped(MAX_HEADER_BYTES), &[], &mut body);
        encode(&Frame::End { files: 0 }, &[], &mut body);
        let got = frames_of(body).unwrap();
        assert_eq!(got[0].0, skipped(MAX_HEADER_BYTES));

        let mut body = Vec::new();
        encode(&skipped(MAX_HEADER_BYTES + 1), &[], &mut body);
        encode(&Frame::End { files: 0 }, &[], &mut body);
        let e = frames_of(body).unwrap_err().to_string();
        assert!(
            e.contains("a frame header of 65537 bytes (at most 65536)"),
            "{e}"
        );

        let file = |size: u64| Frame::File {
            file_url: "u".into(),
            size,
            last_modified_time: 0,
            mode: 0o644,
            digest: "d".into(),
        };
        let content = vec![b'c'; MAX_BATCH_FILE_BYTES as usize];
        let mut body = Vec::new();
        encode(&file(MAX_BATCH_FILE_BYTES), &content, &mut body);
        encode(&Frame::End { files: 1 }, &[], &mut body);
        let got = frames_of(body).unwrap();
        assert_eq!(got[0].1.len() as u64, MAX_BATCH_FILE_BYTES);

        // Only the header is sent: the bound is checked before any content is waited for.
        let mut body = Vec::new();
        encode(&file(MAX_BATCH_FILE_BYTES + 1), &[], &mut body);
        let e = frames_of(body).unwrap_err().to_string();
        assert!(
            e.contains("a file of 4194305 bytes (at most 4194304)"),
            "{e}"
        );
    }

    #[test]
    fn features_are_read_from_the_header() {
        assert_eq!(
            Features::parse(Some(FEATURES)),
            Features {
                batch: true,
                block_digests: true
            }
        );
        assert_eq!(Features::parse(None), Features::default());
        assert_eq!(
            Features::parse(Some("other,files-batch")),
            Features {
                batch: true,
                block_digests: false
            }
        );
    }

    #[test]
    fn block_sizes_keep_the_block_count_bounded() {
        assert_eq!(block_size_for(0), 1 << 20);
        assert_eq!(block_size_for(32 << 20), 1 << 20);
        let huge = 1u64 << 40;
        let b = block_size_for(huge);
        assert!(huge.div_ceil(b) <= MAX_BLOCKS);
        assert!(check_block_size(b, huge).is_ok());
        assert!(check_block_size(1024, 10).is_err());
        assert!(check_block_size(MIN_BLOCK_SIZE, MIN_BLOCK_SIZE * (MAX_BLOCKS + 1)).is_err());
    }
}
