//! One writer per savepoint directory: a run of a job holds a lease file there while it runs,
//! so that a second run of the same job (in this daemon, another daemon or `drover migrate`)
//! is refused instead of writing savepoints over the first one's.
//!
//! The lease is a file created with `O_EXCL` and renewed while the run lasts. A lease that was
//! not renewed for [`LEASE`], or whose process is gone from this host, is stale and taken over
//! (a run killed with `kill -9` leaves one). On a shared file system this relies on `O_EXCL`
//! and modification times being honest, which NFS v3 and older do not guarantee.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::SavepointError;

/// How long a lease lasts without renewal.
pub const LEASE: Duration = Duration::from_secs(60);

/// How often a held lease is renewed.
pub(super) const RENEW: Duration = Duration::from_secs(15);

/// The lease file's name in a savepoint directory.
pub const LOCK_NAME: &str = ".drover-writer.lock";

/// Who holds a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holder {
    host: String,
    pid: u32,
    /// Distinguishes two runs of one process.
    token: String,
    /// Seconds since the epoch when the run took the lease.
    since: u64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} on host {}, since {} (epoch seconds)",
            self.pid, self.host, self.since
        )
    }
}

/// A held lease; released when dropped.
#[derive(Debug)]
pub struct WriterLock {
    path: PathBuf,
    holder: Holder,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Whether process `pid` of this host runs (a zombie, killed but not yet reaped, does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Whether the process of a lease is known to be gone: it ran on this host and runs no more
/// (a run killed with `kill -9`, whose lease would otherwise block the next run until it
/// expires).
pub fn process_gone(host: &str, pid: u32) -> bool {
    host == host_name() && !alive(pid)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl WriterLock {
    /// Takes the lease of `dir` (which must exist), or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, SavepointError> {
        let path = dir.join(LOCK_NAME);
        let holder = Holder {
            host: host_name(),
            pid: std::process::id(),
            token: uuid::Uuid::new_v4().to_string(),
            since: now(),
        };
        let io = |source| SavepointError::Io {
            path: path.clone(),
            source,
        };
        // Twice at most: once, and once more after removing a stale lease.
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    use std::io::Write;
                    let body = serde_json::to_vec(&holder).expect("a holder serializes");
                    file.write_all(&body).map_err(io)?;
                    file.sync_all().map_err(io)?;
                    return Ok(Self {
                        path,
                        holder,
                        renewal: None,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if let Some(current) = Self::live_holder(&path) {
                        return Err(SavepointError::InUse {
                            location: dir.display().to_string(),
                            holder: current.to_string(),
                        });
                    }
                    // Stale: another taker may remove it at the same moment; create_new
                    // above lets only one of them have it.
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io(e)),
                    }
                }
                Err(e) => return Err(io(e)),
            }
        }
        Err(SavepointError::InUse {
            location: dir.display().to_string(),
            holder: "another run taking it at the same moment".into(),
        })
    }

    /// The holder of the lease at `path` while it is live; `None` when stale or unreadable.
    fn live_holder(path: &Path) -> Option<Holder> {
        let meta = std::fs::metadata(path).ok()?;
        let age = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .unwrap_or_default();
        if age > LEASE {
            return None;
        }
        let holder: Holder = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        let gone = process_gone(&holder.host, holder.pid);
        (!gone).then_some(holder)
    }

    /// Renews the lease every few seconds until it is dropped (needs a Tokio runtime).
    pub fn keep_alive(mut self) -> Self {
        let path = self.path.clone();
        self.renewal = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(RENEW);
            loop {
                tick.tick().await;
                let path = path.clone();
                // Touching the file is the renewal; a failure leaves the lease to expire,
                // which only matters if the run outlives it.
                let _ = tokio::task::spawn_blocking(move || {
                    std::fs::File::options()
                        .append(true)
                        .open(&path)
                        .and_then(|f| f.set_modified(SystemTime::now()))
                })
                .await;
            }
        }));
        self
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
        // Only our own lease: a run whose lease expired and was taken over leaves the new
        // holder's alone.
        let ours = std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Holder>(&b).ok())
            .is_some_and(|h| h == self.holder);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = WriterLock::acquire(dir.path()).unwrap();
        let e = WriterLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(e.contains("in use by another run"), "{e}");
        assert!(
            e.contains(&format!("process {}", std::process::id())),
            "{e}"
        );
        drop(first);
        let again = WriterLock::acquire(dir.path()).unwrap();
        drop(again);
        assert!(!dir.path().join(LOCK_NAME).exists());
    }

    #[test]
    fn a_lease_of_a_dead_process_or_not_renewed_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_NAME);
        let dead = Holder {
            host: host_name(),
            pid: u32::MAX - 7,
            token: "t".into(),
            since: 1,
        };
        std::fs::write(&path, serde_json::to_vec(&dead).unwrap()).unwrap();
        drop(WriterLock::acquire(dir.path()).unwrap());

        let elsewhere = Holder {
            host: "another-host".into(),
            ..dead
        };
        std::fs::write(&path, serde_json::to_vec(&elsewhere).unwrap()).unwrap();
        assert!(WriterLock::acquire(dir.path()).is_err(), "live elsewhere");
        let old = SystemTime::now() - LEASE - Duration::from_secs(5);
        std::fs::File::options()
            .append(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        drop(WriterLock::acquire(dir.path()).unwrap());
    }
}
