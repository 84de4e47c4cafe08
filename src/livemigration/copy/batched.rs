//! Small files from a drover source, many to a request (see [`crate::livemigration::batch`]):
//! each file is written to its staging file as its frame arrives and checked against the
//! digest the source sent with it; then one `syncfs` makes the whole batch durable, and only
//! then are the files renamed into place. So, as with one download at a time, no final path
//! ever holds a partial file, and every renamed file is on disk — for one sync per batch
//! instead of one per file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::fetch::{Downloader, staging_name, staging_path};
use super::place::{self, Place};
use crate::livemigration::LiveMigrationError;
use crate::livemigration::batch::{Frame, SkipReason};
use crate::livemigration::digest::Algorithm;
use crate::livemigration::peer::RemoteFile;

/// Largest file sent in a batch by a destination (larger ones are fetched alone, several at
/// once, where a request's cost is small beside the bytes).
pub const BATCH_FILE_MAX: u64 = 1 << 20;
/// Most files in one batch.
pub const BATCH_FILES: usize = 256;
/// Most bytes in one batch: several batches are in flight at once, each waiting for one sync.
pub const BATCH_BYTES: u64 = 8 << 20;

/// One download or one batch: what the downloads of an iteration are made of.
pub enum Work {
    /// A file fetched alone.
    One(RemoteFile, PathBuf),
    /// Small files fetched together.
    Batch(Vec<(RemoteFile, PathBuf)>),
}

/// Groups `files` (largest first) into work: with batches, the small files go together, up to
/// [`BATCH_FILES`] files and [`BATCH_BYTES`] bytes a batch.
pub fn group(files: Vec<(RemoteFile, PathBuf)>, batches: bool) -> Vec<Work> {
    let mut work = Vec::new();
    let mut batch: Vec<(RemoteFile, PathBuf)> = Vec::new();
    let mut bytes = 0u64;
    for (file, path) in files {
        if !batches || file.size > BATCH_FILE_MAX {
            work.push(Work::One(file, path));
            continue;
        }
        if batch.len() == BATCH_FILES || bytes + file.size > BATCH_BYTES {
            work.push(Work::Batch(std::mem::take(&mut batch)));
            bytes = 0;
        }
        bytes += file.size;
        batch.push((file, path));
    }
    if !batch.is_empty() {
        work.push(Work::Batch(batch));
    }
    work
}

/// A file of a batch written to its staging file, not yet synced nor renamed.
struct Staged {
    file: RemoteFile,
    /// The staging file's path, for messages.
    staging: PathBuf,
    /// Its name in its directory.
    staging_name: String,
    final_path: PathBuf,
    bytes: u64,
}

impl Downloader<'_> {
    /// Fetches a batch of small files, retried with backoff (a broken connection, a source
    /// restarting) up to 5 times for the files not received yet. Returns each file's
    /// outcome: the bytes received, or why not.
    pub async fn download_batch(
        &self,
        files: Vec<(RemoteFile, PathBuf)>,
    ) -> Vec<(RemoteFile, Result<u64, LiveMigrationError>)> {
        let mut delays = super::fetch::retry_delays();
        let mut outcomes = Vec::with_capacity(files.len());
        let mut left = files;
        loop {
            let attempt = tokio::select! {
                r = self.attempt(&left, &mut outcomes) => r,
                _ = self.cancel.cancelled() => Err(LiveMigrationError::Cancelled),
            };
            // What has an outcome is done; the rest is tried again.
            let done: std::collections::HashSet<&str> =
                outcomes.iter().map(|(f, _)| f.file_url.as_str()).collect();
            let rest: Vec<_> = left
                .iter()
                .filter(|(f, _)| !done.contains(f.file_url.as_str()))
                .cloned()
                .collect();
            drop(done);
            left = rest;
            let e = match attempt {
                Ok(()) if left.is_empty() => return outcomes,
                Ok(()) => {
                    LiveMigrationError::Peer("a batch ended without some of its files".into())
                }
                Err(e) => e,
            };
            let delay = match e {
                LiveMigrationError::Cancelled | LiveMigrationError::Local { .. } => None,
                _ => delays.next(),
            };
            match delay {
                Some(delay) if !left.is_empty() => {
                    tracing::warn!(files = left.len(), error = %e, "batch failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.cancel.cancelled() => {}
                    }
                    if self.cancel.is_cancelled() {
                        let cancelled = left
                            .into_iter()
                            .map(|(f, _)| (f, Err(LiveMigrationError::Cancelled)));
                        outcomes.extend(cancelled);
                        return outcomes;
                    }
                }
                _ => {
                    let message = e.to_string();
                    let failed = left.into_iter().map(|(f, _)| {
                        let e = match &e {
                            LiveMigrationError::Cancelled => LiveMigrationError::Cancelled,
                            LiveMigrationError::Local { path, source } => {
                                LiveMigrationError::Local {
                                    path: path.clone(),
                                    source: std::io::Error::new(source.kind(), source.to_string()),
                                }
                            }
                            _ => LiveMigrationError::Peer(message.clone()),
                        };
                        (f, Err(e))
                    });
                    outcomes.extend(failed);
                    return outcomes;
                }
            }
        }
    }

    /// One request for `files`: each outcome known (a file placed, or refused for itself) is
    /// pushed to `outcomes`; an error is what stopped the whole request.
    async fn attempt(
        &self,
        files: &[(RemoteFile, PathBuf)],
        outcomes: &mut Vec<(RemoteFile, Result<u64, LiveMigrationError>)>,
    ) -> Result<(), LiveMigrationError> {
        let wanted: HashMap<&str, &(RemoteFile, PathBuf)> =
            files.iter().map(|f| (f.0.file_url.as_str(), f)).collect();
        let mut staged = Vec::new();
        let result = match self.connection().await {
            Ok(_connection) => {
                let began = std::time::Instant::now();
                let r = self.receive(files, &wanted, &mut staged, outcomes).await;
                tracing::debug!(
                    files = staged.len(),
                    ms = began.elapsed().as_millis() as u64,
                    "batch received"
                );
                r
            }
            Err(e) => Err(e),
        };
        // Whatever arrived whole is kept, even when the request broke off later.
        let began = std::time::Instant::now();
        let placed = self.place(staged).await;
        tracing::debug!(ms = began.elapsed().as_millis() as u64, "batch placed");
        match placed {
            Ok(placed) => outcomes.extend(placed.into_iter().map(|(f, n)| (f, Ok(n)))),
            Err(e) => return Err(e),
        }
        result
    }

    /// Reads the frames of one batch request, writing each file to its staging file.
    async fn receive(
        &self,
        files: &[(RemoteFile, PathBuf)],
        wanted: &HashMap<&str, &(RemoteFile, PathBuf)>,
        staged: &mut Vec<Staged>,
        outcomes: &mut Vec<(RemoteFile, Result<u64, LiveMigrationError>)>,
    ) -> Result<(), LiveMigrationError> {
        let urls = files.iter().map(|(f, _)| f.file_url.clone()).collect();
        let mut frames = self.peer.batch(urls).await?;
        // One frame per file asked for, at most: a source repeating frames must not make
        // this side hold more and more outcomes.
        let mut seen = std::collections::HashSet::with_capacity(files.len());
        while let Some((frame, content)) = frames.next().await? {
            let url = match &frame {
                Frame::End { .. } => return Ok(()),
                Frame::File { file_url, .. } | Frame::Skipped { file_url, .. } => file_url.clone(),
            };
            let Some(&(file, final_path)) = wanted.get(url.as_str()) else {
                return Err(LiveMigrationError::Peer(format!(
                    "batch: the source sent {url}, which was not asked for"
                )));
            };
            if !seen.insert(url.clone()) {
                return Err(LiveMigrationError::Peer(format!(
                    "batch: the source sent {url} twice"
                )));
            }
            match frame {
                Frame::File { size, digest, .. } => {
                    if size != file.size {
                        // Changed since it was listed: the next listing has the new version.
                        outcomes.push((
                            file.clone(),
                            Err(LiveMigrationError::Peer(format!(
                                "{url}: {size} bytes now, {} when listed",
                                file.size
                            ))),
                        ));
                        continue;
                    }
                    let mut h = Algorithm::Xxh3.hasher();
                    h.update(&content);
                    let mine = h.finish();
                    if mine != digest {
                        return Err(LiveMigrationError::Digest(format!(
                            "{url}: xxh3 digest {mine} of the bytes received differs from the source's {digest}"
                        )));
                    }
                    self.pace(content.len()).await;
                    let staging = staging_path(final_path, file);
                    let (local, to, listed) =
                        (self.local.clone(), final_path.clone(), file.clone());
                    let written = tokio::task::spawn_blocking(move || {
                        write_staging(&local.roots, &to, &listed, &content)
                    })
                    .await
                    .expect("writing does not panic");
                    let staging_name = match written {
                        Ok(name) => name,
                        // A link on the way is this file's failure, not the batch's.
                        Err(e @ LiveMigrationError::Invalid(_)) => {
                            outcomes.push((file.clone(), Err(e)));
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    self.counters
                        .bytes_downloaded
                        .fetch_add(size, Ordering::Relaxed);
                    staged.push(Staged {
                        file: file.clone(),
                        staging,
                        staging_name,
                        final_path: final_path.clone(),
                        bytes: size,
                    });
                }
                Frame::Skipped {
                    reason, message, ..
                } => {
                    let outcome = match reason {
                        SkipReason::NotFound => Err(LiveMigrationError::Gone(format!(
                            "{url} is gone at the source"
                        ))),
                        // Grown past what a batch carries since it was listed.
                        SkipReason::TooLarge => self.download_with_retries(file, final_path).await,
                        SkipReason::Refused | SkipReason::Unreadable => {
                            Err(LiveMigrationError::Peer(format!(
                                "{url}: {}",
                                crate::answer::clip(&message)
                            )))
                        }
                    };
                    outcomes.push((file.clone(), outcome));
                }
                Frame::End { .. } => unreachable!("matched above"),
            }
        }
        Ok(())
    }

    /// Makes the staged files durable with one sync of each file system they are on, then
    /// renames each into place (their directories are synced at the end of the iteration, as
    /// for single downloads: a rename lost in a crash leaves a complete staging file, fetched
    /// again).
    async fn place(
        &self,
        staged: Vec<Staged>,
    ) -> Result<Vec<(RemoteFile, u64)>, LiveMigrationError> {
        if staged.is_empty() {
            return Ok(Vec::new());
        }
        let local = self.local.clone();
        tokio::task::spawn_blocking(move || {
            // Once per file system: the node's data directories may be on several disks.
            let mut synced = std::collections::HashSet::new();
            for s in &staged {
                let dir = s.staging.parent().unwrap_or(Path::new("."));
                let handle = place::open_directory(&local.roots, dir)?;
                let on = |e: rustix::io::Errno| LiveMigrationError::local(dir)(e.into());
                let device = rustix::fs::fstat(&handle).map_err(on)?.st_dev;
                if synced.insert(device) {
                    rustix::fs::syncfs(&handle).map_err(on)?;
                }
            }
            let mut placed = Vec::with_capacity(staged.len());
            for s in staged {
                // The directory is opened again, through no link: one swapped in since the
                // file was written is refused, not renamed through.
                Place::open(&local.roots, &s.final_path, false)?
                    .rename_into_place(&s.staging_name)
                    .map_err(LiveMigrationError::local(&s.final_path))?;
                placed.push((s.file, s.bytes));
            }
            Ok(placed)
        })
        .await
        .expect("placing does not panic")
    }
}

/// Writes the staging file of `final_path` whole (no sync: [`Downloader::place`] syncs the
/// batch with one `syncfs`), with the source's mode and modification time, its directories
/// made and the file opened without following links (see [`Place`]). Returns its name.
fn write_staging(
    roots: &crate::livemigration::files::Roots,
    final_path: &Path,
    file: &RemoteFile,
    content: &[u8],
) -> Result<String, LiveMigrationError> {
    use std::io::Write;
    let place = Place::open(roots, final_path, true)?;
    let name = staging_name(&place, file, "");
    place
        .create(&name, true)
        .and_then(|mut out| {
            out.write_all(content)?;
            super::fetch::set_mode_and_mtime_of(&out, file)
        })
        .map_err(LiveMigrationError::local(&place.sibling(&name)))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: usize, size: u64) -> (RemoteFile, PathBuf) {
        (
            RemoteFile {
                file_url: format!("/api/v1/live-migration/files/data/0/f{n}"),
                size,
                file_type: "FILE".into(),
                last_modified_time: 0,
                mode: None,
            },
            PathBuf::from(format!("/x/f{n}")),
        )
    }

    #[test]
    fn small_files_are_grouped_and_large_ones_go_alone() {
        let mut files = vec![file(0, 5 << 20), file(1, BATCH_FILE_MAX + 1)];
        files.extend((2..600).map(|n| file(n, 1000)));
        files.extend((600..620).map(|n| file(n, BATCH_FILE_MAX)));
        let work = group(files.clone(), true);
        let ones = work.iter().filter(|w| matches!(w, Work::One(..))).count();
        assert_eq!(ones, 2);
        let batches: Vec<&Vec<_>> = work
            .iter()
            .filter_map(|w| match w {
                Work::Batch(b) => Some(b),
                Work::One(..) => None,
            })
            .collect();
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 618);
        for b in &batches {
            assert!(b.len() <= BATCH_FILES);
            assert!(b.iter().map(|(f, _)| f.size).sum::<u64>() <= BATCH_BYTES);
        }
        // Without the source's batches, every file goes alone.
        assert!(
            group(files, false)
                .iter()
                .all(|w| matches!(w, Work::One(..)))
        );
    }
}
