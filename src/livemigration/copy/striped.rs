//! Large files from a drover source, block by block, several connections at once.
//!
//! One TCP connection carries at most its window per round trip: over a distant link (50 ms,
//! a 4 MiB send buffer) that is about 40 MB/s, whatever the link's capacity, and a node's
//! largest files (commit-log segments, big SSTables) would each be left to one connection
//! at the end of a copy. So from a distant source (see [`DISTANT`]) a file of at least
//! [`DELTA_MIN`] is fetched in stripes of up to [`STRIPE`] bytes, each with its own `Range`
//! request, as many at once as the task's connections allow, written in place into a staging
//! file of the file's final size. From a near one, each run of missing blocks is one request.
//!
//! The same path keeps what is here already. When a staging file (an interrupted attempt) or
//! another version of the file (a segment that grew or changed in place) is at hand, the
//! source's block digests say which blocks it holds; only the others are fetched, and each
//! fetched block is checked against its digest. So an interrupted copy resumes wherever its
//! stripes had got to, and a segment changed in one place costs that block only.
//!
//! The staging file is named apart from the one-stream download's
//! (`.<name>.<size>-<mtime>.blocks.drover-part`): it has the final size from the start, with
//! holes, so its size says nothing about what arrived. It is synced, then renamed into place,
//! only when every stripe has arrived: no final path ever holds a partial file.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::fetch::{DELTA_MIN, Downloader};
use super::place::Place;
use crate::livemigration::LiveMigrationError;
use crate::livemigration::batch::{self, BlockDigests};
use crate::livemigration::digest::{Algorithm, Hasher};
use crate::livemigration::peer::RemoteFile;

/// Most bytes of one stripe (one `Range` request). Small enough that a 256 MiB segment is
/// spread over 16 requests and its last ones end together; large enough that a request's
/// round trip is small beside its bytes (16 MiB take 130 ms at 1 Gbit/s).
pub const STRIPE: u64 = 16 << 20;

/// Stripes of one file in flight at most; each also waits for one of the task's connections.
const STRIPES_AT_ONCE: usize = 16;

/// Smallest stripe cut near a task's end: 2 MiB take about 130 ms on one connection of eight
/// sharing 1 Gbit/s, beside a 50 ms round trip between two requests.
const STRIPE_MIN: u64 = 2 << 20;

/// The time of the source's status request from which a task fetches large files in stripes
/// (a round trip, or two on a new connection). Below it one connection carries more than a
/// disk writes (a 4 MiB window every 5 ms is 800 MB/s), and stripes only add requests and
/// writers to one file: on loopback they made the benchmark's first copy about 20 % slower.
pub const DISTANT: std::time::Duration = std::time::Duration::from_millis(5);

/// The most bytes of one stripe for a source whose status request took `round_trip`:
/// [`STRIPE`] for a distant source, else a whole run of missing blocks (one request for a
/// file fetched whole).
pub fn stripe_for(round_trip: std::time::Duration) -> u64 {
    if round_trip >= DISTANT {
        STRIPE
    } else {
        u64::MAX
    }
}

/// The length of the next stripe to cut, when `remaining` bytes of the task are still to come
/// over `connections`: at most `most`, and at most a quarter of each connection's share of
/// what remains (never below [`STRIPE_MIN`] nor one block), in whole blocks. Stripes cut at a fixed
/// size end one after another: over the 1 Gbit/s, 50 ms link the last 16 MiB stripes, each
/// on a connection whose window carries 1/8 of the link, finished over 0.7 s while the others
/// sat idle. Cut smaller as the task nears its end, the last ones end together. A near
/// source (`most` = `u64::MAX`) gets whole runs of missing blocks, as before.
pub fn next_stripe_len(remaining: u64, connections: usize, block: u64, most: u64) -> u64 {
    if most == u64::MAX {
        return u64::MAX;
    }
    let share = remaining / (4 * connections.max(1) as u64);
    let len = share.clamp(STRIPE_MIN.min(most), most);
    (len / block).max(1) * block
}

/// Cuts a stripe of at most `len` bytes off the first of `runs`; `None` when none is left.
fn cut(runs: &mut std::collections::VecDeque<Range<u64>>, len: u64) -> Option<Range<u64>> {
    let run = runs.front_mut()?;
    let end = run.start.saturating_add(len).min(run.end);
    let stripe = run.start..end;
    run.start = end;
    if run.is_empty() {
        runs.pop_front();
    }
    Some(stripe)
}

/// Whether `file` is fetched by stripes: from a drover source (block digests make a holed
/// staging file resumable), and large enough to be worth a block-digest round trip.
pub fn striped(file: &RemoteFile, block_digests: bool) -> bool {
    block_digests && file.size >= DELTA_MIN
}

/// The staging file of a striped download of `file`.
pub fn blocks_staging_path(final_path: &Path, file: &RemoteFile) -> PathBuf {
    super::fetch::staging_path_of_kind(final_path, file, ".blocks")
}

/// The byte ranges to fetch of a file of `size` bytes in blocks of `block`: the blocks not
/// `good`, consecutive ones joined, cut into stripes of at most `stripe` bytes (a multiple of
/// `block`, so every stripe starts and ends on a block boundary).
pub fn stripes(good: &[bool], block: u64, size: u64, stripe: u64) -> Vec<Range<u64>> {
    let per_stripe = (stripe / block).max(1);
    let blocks = size.div_ceil(block);
    let mut out = Vec::new();
    let mut i = 0u64;
    while i < blocks {
        if good.get(i as usize).copied().unwrap_or(false) {
            i += 1;
            continue;
        }
        let start = i;
        while i < blocks
            && i - start < per_stripe
            && !good.get(i as usize).copied().unwrap_or(false)
        {
            i += 1;
        }
        out.push(start * block..(i * block).min(size));
    }
    out
}

/// What a striped download starts from: the runs of blocks still to fetch, and the source's
/// block digests to check them against (none when nothing was here: the first copy of a file
/// is checked as a one-stream download is, by the task's `verify`).
struct Seed {
    missing: Vec<Range<u64>>,
    block: u64,
    digests: Option<BlockDigests>,
    /// The staging file, opened before any stripe is written: its syncs see every write.
    file: std::fs::File,
}

/// Checks fetched bytes block by block against the source's digests.
struct BlockCheck<'a> {
    digests: &'a BlockDigests,
    /// Index of the block being hashed.
    index: usize,
    in_block: u64,
    hasher: Hasher,
}

impl<'a> BlockCheck<'a> {
    fn new(digests: &'a BlockDigests, start: u64) -> Self {
        Self {
            digests,
            index: (start / digests.block_size) as usize,
            in_block: 0,
            hasher: Algorithm::Xxh3.hasher(),
        }
    }

    /// Feeds bytes; an error names the first block that is not the source's.
    fn update(&mut self, mut bytes: &[u8], file_url: &str) -> Result<(), LiveMigrationError> {
        let d = self.digests;
        while !bytes.is_empty() {
            let block_len = (d.size.saturating_sub(self.index as u64 * d.block_size))
                .min(d.block_size)
                .saturating_sub(self.in_block);
            let n = (block_len as usize).min(bytes.len());
            self.hasher.update(&bytes[..n]);
            self.in_block += n as u64;
            bytes = &bytes[n..];
            if n as u64 == block_len {
                let done = std::mem::replace(&mut self.hasher, Algorithm::Xxh3.hasher()).finish();
                if d.blocks.get(self.index) != Some(&done) {
                    return Err(LiveMigrationError::Peer(format!(
                        "{file_url}: block {} differs from the source's digest (the file changed \
                         while being copied)",
                        self.index
                    )));
                }
                self.index += 1;
                self.in_block = 0;
            }
        }
        Ok(())
    }
}

impl Downloader<'_> {
    /// Downloads one file by stripes (see the module's documentation) into its place, whose
    /// directory exists. Returns the bytes received.
    pub async fn download_striped(
        &self,
        file: &RemoteFile,
        place: &Place,
    ) -> Result<u64, LiveMigrationError> {
        let local = LiveMigrationError::local;
        let staging_name = super::fetch::staging_name(place, file, ".blocks");
        let staging = place.sibling(&staging_name);
        let seed = self.seed(file, place, &staging_name).await?;
        let digests = seed.digests.as_ref();
        let block = seed.block;
        let writeback = super::fetch::Writeback::new(seed.file);
        let runs = std::sync::Mutex::new(std::collections::VecDeque::from(seed.missing));
        // Each stripe is cut once a connection is free for it, sized by what the whole task
        // has left then (see [`next_stripe_len`]).
        let stripes = (0..STRIPES_AT_ONCE).map(|_| async {
            let mut got = 0u64;
            loop {
                let _connection = self.connection().await?;
                let len = next_stripe_len(
                    self.bytes_left(),
                    self.connections_total,
                    block,
                    self.stripe,
                );
                let next = cut(&mut runs.lock().unwrap_or_else(|p| p.into_inner()), len);
                let Some(range) = next else {
                    return Ok::<u64, LiveMigrationError>(got);
                };
                got += self
                    .fetch_stripe(file, &staging, range, digests, &writeback)
                    .await?;
            }
        });
        let got = futures::future::try_join_all(stripes)
            .await?
            .into_iter()
            .sum();
        writeback.finish().await.map_err(local(&staging))?;
        self.finish(file, place, &staging_name, None).await?;
        Ok(got)
    }

    /// Prepares the staging file, at the file's final size, and says what it lacks. What is
    /// here already, a staging file or else another version at the final path, is compared
    /// block by block with the source's block digests; the final path's version is moved to
    /// the staging name only when some of its blocks are kept (its matching blocks are never
    /// written again), else it stays in place until the new version replaces it.
    async fn seed(
        &self,
        file: &RemoteFile,
        place: &Place,
        staging_name: &str,
    ) -> Result<Seed, LiveMigrationError> {
        let local = LiveMigrationError::local;
        let staging = &place.sibling(staging_name);
        let final_path = place.path();
        let block = batch::block_size_for(file.size);
        // Links are neither files here nor followed (see [`Place`]).
        let here = if place.file_len(staging_name).is_some() {
            Some((staging.to_path_buf(), false))
        } else if place.entry_len().is_some_and(|len| len >= DELTA_MIN) {
            Some((final_path.to_path_buf(), true))
        } else {
            None
        };
        let (good, digests) = match &here {
            None => (Vec::new(), None),
            Some((path, _)) => {
                let theirs = {
                    let _connection = self.connection().await?;
                    self.peer.block_digests(&file.file_url, block).await?
                };
                if theirs.size != file.size {
                    return Err(LiveMigrationError::Gone(format!(
                        "{}: {} bytes at the source, {} when listed; the next iteration lists it again",
                        file.file_url, theirs.size, file.size
                    )));
                }
                let size = file.size;
                let name = if *path == *staging {
                    staging_name
                } else {
                    place.name()
                };
                let f = place.open_read(name).map_err(local(path))?;
                let mine = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
                    use std::io::Read;
                    batch::block_digests(f.take(size), Algorithm::Xxh3, block)
                })
                .await
                .expect("hashing does not panic")
                .map_err(local(&here.as_ref().expect("a local version").0))?;
                (batch::matching_blocks(&mine, &theirs), Some(theirs))
            }
        };
        let kept: u64 = good
            .iter()
            .enumerate()
            .filter(|(_, g)| **g)
            .map(|(i, _)| (file.size - i as u64 * block).min(block))
            .sum();
        let from_final = matches!(here, Some((_, true))) && kept > 0;
        let (at, to, size) = (
            place.try_clone().map_err(local(staging))?,
            staging_name.to_string(),
            file.size,
        );
        let opened = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            if from_final {
                // Renamed, not copied: no kept byte is written again. A crash from here on
                // leaves the staging file, which the next attempt compares again.
                at.rename_away(&to)?;
            }
            // A link planted at the staging name must not send the source's bytes wherever
            // it points: it is refused, not followed.
            let f = at.create(&to, false)?;
            f.set_len(size)?;
            Ok(f)
        })
        .await
        .expect("creating a staging file does not panic")
        .map_err(local(staging))?;
        if from_final {
            tracing::debug!(file = %file.file_url, kept, "fetching only the blocks that differ");
            self.counters.bytes_kept.fetch_add(kept, Ordering::Relaxed);
        }
        Ok(Seed {
            missing: stripes(&good, block, file.size, u64::MAX),
            block,
            digests,
            file: opened,
        })
    }

    /// Fetches one stripe into its place in the staging file, on a connection the caller
    /// holds. Returns the bytes received.
    async fn fetch_stripe(
        &self,
        file: &RemoteFile,
        staging: &Path,
        range: Range<u64>,
        digests: Option<&BlockDigests>,
        writeback: &super::fetch::Writeback,
    ) -> Result<u64, LiveMigrationError> {
        let local = LiveMigrationError::local;
        let began = std::time::Instant::now();
        // A drover source answers a range that is the whole file as the whole file (200).
        let whole = range.start == 0 && range.end == file.size;
        let response = self
            .peer
            .fetch(
                &file.file_url,
                range.start,
                (!whole).then_some(range.end - 1),
            )
            .await?;
        match response.status() {
            reqwest::StatusCode::PARTIAL_CONTENT if !whole => {}
            reqwest::StatusCode::OK if whole => {}
            reqwest::StatusCode::NOT_FOUND => {
                return Err(LiveMigrationError::Gone(format!(
                    "{} is gone at the source",
                    file.file_url
                )));
            }
            reqwest::StatusCode::RANGE_NOT_SATISFIABLE => {
                return Err(LiveMigrationError::Peer(format!(
                    "{} shrank at the source while being downloaded",
                    file.file_url
                )));
            }
            _ => {
                let what = format!("downloading {}", file.file_url);
                return Err(
                    crate::livemigration::peer::PeerClient::error_of(response, &what).await,
                );
            }
        }
        // The stripe must be the bytes asked for, of the file at the size listed: a file that
        // changed size since is another version, sorted out by the next iteration.
        let expected = format!("bytes {}-{}/{}", range.start, range.end - 1, file.size);
        let answered = if whole {
            response
                .content_length()
                .map(|n| format!("bytes 0-{}/{n}", n.saturating_sub(1)))
        } else {
            response
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        }
        .unwrap_or_default();
        if answered != expected {
            return Err(LiveMigrationError::Peer(format!(
                "{}: asked for {expected}, the source answered {answered:?}",
                file.file_url
            )));
        }
        // The staging file's descriptor, shared: not opened again by name for each stripe.
        let mut out = super::fetch::ChunkWriter::new(
            writeback.descriptor().map_err(local(staging))?,
            range.start,
        );
        let mut check = digests.map(|d| BlockCheck::new(d, range.start));
        let want = range.end - range.start;
        let mut got = 0u64;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = self.next_chunk(&mut stream, file).await? {
            // Never a byte past the stripe: it would land on the next stripe's bytes.
            if got + chunk.len() as u64 > want {
                return Err(LiveMigrationError::Peer(format!(
                    "{}: the source sent more than the {want} bytes of {expected}",
                    file.file_url
                )));
            }
            self.pace(chunk.len()).await;
            if let Some(c) = check.as_mut() {
                c.update(&chunk, &file.file_url)?;
            }
            let len = chunk.len() as u64;
            out.write(chunk).await.map_err(local(staging))?;
            writeback.wrote(len).map_err(local(staging))?;
            got += len;
            self.counters
                .bytes_downloaded
                .fetch_add(len, Ordering::Relaxed);
        }
        out.flush().await.map_err(local(staging))?;
        tracing::debug!(
            file = %file.file_url,
            start = range.start,
            bytes = got,
            ms = began.elapsed().as_millis() as u64,
            "stripe fetched"
        );
        if got != want {
            return Err(LiveMigrationError::Peer(format!(
                "{}: the source sent {got} of the {want} bytes of {expected}",
                file.file_url
            )));
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stripes_shrink_as_the_task_nears_its_end_and_cover_every_run() {
        let (mib, most) = (1u64 << 20, STRIPE);
        // Far from the end: the most a stripe holds.
        assert_eq!(next_stripe_len(1 << 30, 8, mib, most), most);
        // 128 MiB left over 8 connections: 16 MiB each, a quarter of it a stripe.
        assert_eq!(next_stripe_len(128 * mib, 8, mib, most), 4 * mib);
        // Near the end: never below STRIPE_MIN, always whole blocks.
        assert_eq!(next_stripe_len(mib, 8, mib, most), STRIPE_MIN);
        assert_eq!(next_stripe_len(0, 8, 4 * mib, most), 4 * mib);
        assert_eq!(next_stripe_len(5 * mib * 32, 8, 2 * mib, most), 4 * mib);
        // A near source: whole runs.
        assert_eq!(next_stripe_len(0, 8, mib, u64::MAX), u64::MAX);
        // Cut from the runs in order, on block boundaries, each byte once.
        let mut runs = std::collections::VecDeque::from(vec![0..10, 20..45]);
        let mut got = Vec::new();
        for len in [4, 40, 4, 4, 4] {
            got.extend(cut(&mut runs, len));
        }
        assert_eq!(got, vec![0..4, 4..10, 20..24, 24..28, 28..32]);
        assert_eq!(cut(&mut runs, u64::MAX), Some(32..45));
        assert_eq!(cut(&mut runs, 4), None);
    }

    #[test]
    fn stripes_cover_the_blocks_that_differ_and_stop_at_the_end() {
        let b = 10;
        assert_eq!(stripes(&[], b, 95, 40), vec![0..40, 40..80, 80..95]);
        assert_eq!(
            stripes(&[true, false, false, true, false], b, 45, 40),
            vec![10..30, 40..45]
        );
        assert_eq!(stripes(&[true; 3], b, 30, 40), Vec::<Range<u64>>::new());
        assert_eq!(stripes(&[], b, 0, 40), Vec::<Range<u64>>::new());
        // A stripe smaller than a block is one block.
        assert_eq!(stripes(&[], b, 25, 4), vec![0..10, 10..20, 20..25]);
        // Near: one request per run of missing blocks.
        let near = stripe_for(std::time::Duration::from_micros(300));
        assert_eq!(stripes(&[], b, 95, near), vec![0..95]);
        assert_eq!(
            stripes(&[false, true, false], b, 25, near),
            vec![0..10, 20..25]
        );
        assert_eq!(stripe_for(DISTANT), STRIPE);
    }

    /// Edits a file may see: appended bytes, bytes changed in place (anywhere), or cut.
    #[derive(Debug, Clone)]
    enum Edit {
        Append(Vec<u8>),
        Change { at: usize, bytes: Vec<u8> },
        Truncate(usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 1..300_000).prop_map(Edit::Append),
            (
                any::<usize>(),
                proptest::collection::vec(any::<u8>(), 1..5000)
            )
                .prop_map(|(at, bytes)| Edit::Change { at, bytes }),
            any::<usize>().prop_map(Edit::Truncate),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever was edited, the old file's matching blocks and the source's bytes in the
        /// stripes rebuild the new file byte for byte: a change anywhere (the start
        /// included) is caught by its block's digest, and its block fetched. Every fetched
        /// stripe passes the block check; a block of the old file put in a stripe's place
        /// fails it when it differs.
        #[test]
        fn kept_blocks_and_fetched_stripes_rebuild_the_source(
            base_len in 0usize..600_000,
            seed in any::<u64>(),
            edits in proptest::collection::vec(edit(), 1..4),
            block_pow in 16u32..19,
            stripe_blocks in 1u64..4,
        ) {
            let block = 1u64 << block_pow;
            let mut rng = seed;
            let old: Vec<u8> = (0..base_len).map(|_| { rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1); (rng >> 33) as u8 }).collect();
            let mut new = old.clone();
            for e in &edits {
                match e {
                    Edit::Append(b) => new.extend_from_slice(b),
                    Edit::Change { at, bytes } => {
                        if new.is_empty() { continue; }
                        let at = at % new.len();
                        let end = (at + bytes.len()).min(new.len());
                        new[at..end].copy_from_slice(&bytes[..end - at]);
                    }
                    Edit::Truncate(n) => {
                        let n = n % (new.len() + 1);
                        new.truncate(n);
                    }
                }
            }
            let mine = batch::block_digests(&old[..new.len().min(old.len())], Algorithm::Xxh3, block).unwrap();
            let theirs = batch::block_digests(&new[..], Algorithm::Xxh3, block).unwrap();
            let good = batch::matching_blocks(&mine, &theirs);
            prop_assert_eq!(good.len(), new.len().div_ceil(block as usize));
            let mut rebuilt = new.iter().map(|b| !b).collect::<Vec<u8>>();
            for (i, g) in good.iter().enumerate() {
                if *g {
                    let r = i * block as usize..((i + 1) * block as usize).min(new.len());
                    rebuilt[r.clone()].copy_from_slice(&old[r]);
                }
            }
            let missing = stripes(&good, block, new.len() as u64, stripe_blocks * block);
            for r in &missing {
                prop_assert!(r.end - r.start <= stripe_blocks * block);
                prop_assert!(r.start.is_multiple_of(block));
                let r = r.start as usize..r.end as usize;
                let mut check = BlockCheck::new(&theirs, r.start as u64);
                prop_assert!(check.update(&new[r.clone()], "f").is_ok());
                if old.len() >= r.end && old[r.clone()] != new[r.clone()] {
                    let mut check = BlockCheck::new(&theirs, r.start as u64);
                    prop_assert!(check.update(&old[r.clone()], "f").is_err());
                }
                rebuilt[r.clone()].copy_from_slice(&new[r]);
            }
            prop_assert_eq!(&rebuilt, &new);
        }
    }
}
