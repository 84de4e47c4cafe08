//! The parsers of untrusted input, as the fuzz targets drive them (`tests/fuzz/`,
//! `bench/fuzz/run`): each entry point runs what the daemon runs on a body it receives, and
//! returns what the daemon would keep or answer. Not an API: hidden from the docs, and only
//! the targets use it.

use crate::livemigration::batch::{BlockDigests, Frame, FrameReader};
use crate::livemigration::digest::Algorithm;
use crate::livemigration::files::DirType;
use crate::livemigration::peer::{self, RemoteFile};

/// A job body as `POST /api/v1/migrations` and `/validations` take it: redacted for the job's
/// record and parsed and checked ([`crate::engine::config::JobConfig::parse`]). Returns the
/// message a refusal answers, as the API shows it (`ApiError` caps it).
pub fn job_file(text: &str) -> Result<(), String> {
    // As `engine::config::parsed` does: both are paid for every body.
    let _record = crate::engine::config::redacted_json(text);
    crate::engine::config::JobConfig::parse(text)
        .map(drop)
        .map_err(|e| crate::api::error::ApiError::bad_request(e.to_string()).message)
}

/// The redacted form of a job body (what records and savepoints keep).
pub fn job_record(text: &str) -> serde_json::Value {
    crate::engine::config::redacted_json(text)
}

/// A source's listing body as a destination reads it: the entries, each with the local place
/// it maps to (what `plan` does with every entry), or the task's error message.
pub fn listing(
    body: &[u8],
    max_files: usize,
) -> Result<Vec<(RemoteFile, DirType, usize, String)>, String> {
    let files = peer::read_listing(body, max_files).map_err(|e| e.to_string())?;
    files
        .into_iter()
        .map(|f| {
            let (t, i, p) =
                crate::livemigration::local::local_key(&f.file_url).map_err(|e| e.to_string())?;
            Ok((f, t, i, p))
        })
        .collect()
}

/// A listing as a source writes it (`GET /api/v1/live-migration/files`) of `entries`.
pub fn write_listing(entries: &[crate::livemigration::files::Entry]) -> Vec<u8> {
    use crate::api::live_migration::files::{FileInfo, FileList, total_size};
    serde_json::to_vec(&FileList {
        total_size: total_size(entries),
        files: entries.iter().map(FileInfo::of).collect(),
    })
    .expect("a listing serializes")
}

/// A source's answer to `?digestAlgorithm=`, as a destination reads it.
pub fn digest_answer(body: &[u8], algorithm: Algorithm) -> Result<String, String> {
    peer::read_digest(body, algorithm)
}

/// A digest answer as a source writes it.
pub fn write_digest_answer(digest: &str, algorithm: Algorithm) -> Vec<u8> {
    serde_json::to_vec(&crate::api::live_migration::files::DigestResponse {
        digest: digest.to_string(),
        digest_algorithm: algorithm.name().to_string(),
    })
    .expect("a digest answer serializes")
}

/// A source's answer to `?blockSize=`, as a destination reads it, and which of its blocks a
/// local file of `mine` would keep.
pub fn block_digest_answer(body: &[u8], mine: &BlockDigests) -> Result<Vec<bool>, String> {
    let theirs = peer::read_block_digests(body)?;
    Ok(crate::livemigration::batch::matching_blocks(mine, &theirs))
}

/// The frames of a batch response (all of `body` in `chunk`-byte pieces), as a destination
/// reads them: each frame with its content's length, or the error that stopped the reading.
pub fn frames(body: &[u8], chunk: usize) -> Result<Vec<(Frame, usize)>, String> {
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = body
        .chunks(chunk.max(1))
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let mut reader = FrameReader::new(futures::stream::iter(chunks));
    futures::executor::block_on(async {
        let mut got = Vec::new();
        while let Some((frame, content)) = reader.next().await.map_err(|e| e.to_string())? {
            got.push((frame, content.len()));
        }
        Ok(got)
    })
}

/// What the API answers of an error `message` (capped at `jobfile::MAX_ECHO` bytes).
pub fn answered(message: String) -> String {
    crate::api::error::ApiError::bad_request(message).message
}
