//! Savepoints as objects of an S3 or GCS folder, under the same names as files on disk.
//!
//! An object store has no rename, but it never shows a part of an object: each savepoint is
//! written whole in one request, so a reader finds the old list of savepoints or the new one.
//! Listings may lag behind writes on some S3-compatible stores; names still increase (the
//! writer remembers the last one it used), a savepoint deleted between a listing and its read
//! is skipped like any unreadable one, and retention only ever deletes what a listing showed.
//!
//! One writer at a time: a lease object (`.drover-writer.lock`) is created only if absent and
//! renewed only if unchanged since our last write (S3 `If-None-Match`/`If-Match`, GCS
//! `ifGenerationMatch`). A lease not renewed for a minute, or whose process is gone from this
//! host, is taken over. A store that cannot honour those conditions is used without a lease,
//! with a warning.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::blobs::{Blobs, Condition, Written};
use super::file::{Namer, beyond_retention, newest_first, parse_document, render_document};
use super::lock::{LEASE, LOCK_NAME, RENEW};
use super::{Savepoint, SavepointError, SavepointInfo, SavepointStore};

/// Savepoints in a folder of an object store.
pub struct ObjectStoreSavepoints {
    blobs: Arc<dyn Blobs>,
    keep: usize,
    names: Namer,
    /// Store calls are async; the trait is called from blocking threads.
    runtime: tokio::runtime::Handle,
}

fn remote(blobs: &dyn Blobs, message: String) -> SavepointError {
    SavepointError::Remote {
        location: blobs.describe(),
        // An object store names the URL it asked, escaped (`prefix=sp%2F`).
        message: crate::answer::shown_urls_in(&message),
    }
}

impl ObjectStoreSavepoints {
    /// The savepoints of `blobs`, keeping the newest `keep` (must be called in a runtime).
    pub async fn open(blobs: Arc<dyn Blobs>, keep: usize) -> Result<Self, SavepointError> {
        let store = Self {
            blobs,
            keep: keep.max(1),
            names: Namer::default(),
            runtime: tokio::runtime::Handle::current(),
        };
        let existing = store.list_async().await?;
        store.names.seed(&existing);
        Ok(store)
    }

    /// The savepoints of `blobs` for reading only: nothing is listed until asked.
    pub fn reader(blobs: Arc<dyn Blobs>) -> Self {
        Self {
            blobs,
            keep: usize::MAX,
            names: Namer::default(),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    async fn list_async(&self) -> Result<Vec<SavepointInfo>, SavepointError> {
        let blobs = self
            .blobs
            .list()
            .await
            .map_err(|m| remote(&*self.blobs, format!("listing: {m}")))?;
        Ok(newest_first(blobs.into_iter().map(|b| b.name)))
    }

    async fn write_async(
        &self,
        document: &serde_json::Value,
    ) -> Result<SavepointInfo, SavepointError> {
        let info = self.names.next();
        let body = Bytes::from(render_document(document));
        match self
            .blobs
            .put(&info.name, body, Condition::None)
            .await
            .map_err(|m| remote(&*self.blobs, format!("writing {}: {m}", info.name)))?
        {
            Written::Done(_) => {}
            other => {
                return Err(remote(
                    &*self.blobs,
                    format!("writing {}: {other:?}", info.name),
                ));
            }
        }
        let listed = self.list_async().await?;
        for old in beyond_retention(&listed, self.keep) {
            self.blobs
                .delete(&old.name)
                .await
                .map_err(|m| remote(&*self.blobs, format!("deleting {}: {m}", old.name)))?;
        }
        Ok(info)
    }
}

impl SavepointStore for ObjectStoreSavepoints {
    fn write(&self, document: &serde_json::Value) -> Result<SavepointInfo, SavepointError> {
        self.runtime.block_on(self.write_async(document))
    }

    fn list(&self) -> Result<Vec<SavepointInfo>, SavepointError> {
        self.runtime.block_on(self.list_async())
    }

    fn read(&self, info: &SavepointInfo) -> Result<Savepoint, SavepointError> {
        let got = self
            .runtime
            .block_on(self.blobs.get(&info.name))
            .map_err(|m| remote(&*self.blobs, format!("reading {}: {m}", info.name)))?;
        let Some((body, _)) = got else {
            return Err(SavepointError::Corrupt {
                name: info.name.clone(),
                message: "deleted since it was listed".into(),
            });
        };
        let text = String::from_utf8(body.to_vec()).map_err(|_| SavepointError::Corrupt {
            name: info.name.clone(),
            message: "not UTF-8 text".into(),
        })?;
        Ok(Savepoint {
            info: info.clone(),
            document: parse_document(&info.name, &text)?,
        })
    }

    fn describe(&self) -> String {
        self.blobs.describe()
    }
}

/// Who holds an object lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holder {
    host: String,
    pid: u32,
    token: String,
    /// Seconds since the epoch: when the run took the lease, and when it last renewed it.
    since: u64,
    renewed: u64,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A run's lease on a folder; released (deleted if still ours) when dropped.
pub struct ObjectLease {
    renewal: Option<tokio::task::JoinHandle<()>>,
    release: Option<(Arc<dyn Blobs>, Holder)>,
}

impl ObjectLease {
    /// Takes the folder's lease, or says who holds it. A lease not renewed for [`LEASE`]
    /// (by the time written in it) is taken over.
    pub async fn acquire(blobs: Arc<dyn Blobs>) -> Result<Self, SavepointError> {
        let holder = Holder {
            host: super::lock::host_name(),
            pid: std::process::id(),
            token: uuid::Uuid::new_v4().to_string(),
            since: now(),
            renewed: now(),
        };
        let body = |h: &Holder| Bytes::from(serde_json::to_vec(h).expect("a holder serializes"));
        let err = |m: String| remote(&*blobs, format!("{LOCK_NAME}: {m}"));
        let mut condition = Condition::Absent;
        // Twice at most: once, and once more over a stale lease.
        for _ in 0..2 {
            match blobs
                .put(LOCK_NAME, body(&holder), condition.clone())
                .await
                .map_err(err)?
            {
                Written::Done(version) => {
                    let renewal = Self::renew(blobs.clone(), holder.clone(), version);
                    return Ok(Self {
                        renewal: Some(renewal),
                        release: Some((blobs, holder)),
                    });
                }
                Written::Unsupported => {
                    tracing::warn!(
                        "{}: the store cannot write objects conditionally, so a second run of this job would not be refused; make sure only one runs",
                        blobs.describe()
                    );
                    return Ok(Self {
                        renewal: None,
                        release: None,
                    });
                }
                Written::Refused => {
                    let Some((current, version)) = blobs.get(LOCK_NAME).await.map_err(err)? else {
                        condition = Condition::Absent;
                        continue;
                    };
                    let current: Option<Holder> = serde_json::from_slice(&current).ok();
                    if let Some(h) = &current
                        && now().saturating_sub(h.renewed) <= LEASE.as_secs()
                        && !super::lock::process_gone(&h.host, h.pid)
                    {
                        return Err(SavepointError::InUse {
                            location: blobs.describe(),
                            holder: format!(
                                "process {} on host {}, since {} (epoch seconds)",
                                h.pid, h.host, h.since
                            ),
                        });
                    }
                    condition = Condition::Version(version);
                }
            }
        }
        Err(SavepointError::InUse {
            location: blobs.describe(),
            holder: "another run taking it at the same moment".into(),
        })
    }

    fn renew(
        blobs: Arc<dyn Blobs>,
        mut holder: Holder,
        mut version: String,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + RENEW, RENEW);
            loop {
                tick.tick().await;
                holder.renewed = now();
                let body = Bytes::from(serde_json::to_vec(&holder).expect("a holder serializes"));
                match blobs
                    .put(LOCK_NAME, body, Condition::Version(version.clone()))
                    .await
                {
                    Ok(Written::Done(v)) => version = v,
                    Ok(Written::Refused) => {
                        tracing::error!(
                            "{}: this run's lease was taken over by another run (it was not renewed for {} s); stop one of them",
                            blobs.describe(),
                            LEASE.as_secs()
                        );
                        return;
                    }
                    Ok(Written::Unsupported) => return,
                    // Retried at the next tick; the lease lasts four of them.
                    Err(e) => tracing::warn!("{}: renewing the lease: {e}", blobs.describe()),
                }
            }
        })
    }
}

impl ObjectLease {
    /// Gives the lease up now (deleting it if still ours), so that the next run need not
    /// wait for it to expire even if this process exits at once.
    pub async fn release(mut self) {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
        if let Some((blobs, holder)) = self.release.take() {
            Self::delete_if_ours(blobs, holder).await;
        }
    }

    async fn delete_if_ours(blobs: Arc<dyn Blobs>, holder: Holder) {
        let ours = matches!(
            blobs.get(LOCK_NAME).await,
            Ok(Some((body, _))) if serde_json::from_slice::<Holder>(&body)
                .is_ok_and(|h| h.token == holder.token)
        );
        if ours {
            let _ = tokio::time::timeout(Duration::from_secs(10), blobs.delete(LOCK_NAME)).await;
        }
    }
}

impl Drop for ObjectLease {
    fn drop(&mut self) {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
        let Some((blobs, holder)) = self.release.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Only our own lease: a run whose lease was taken over leaves the new holder's alone.
        // (Between the read and the delete another run could take a lease that was ours; it
        // then finds none at its next renewal and stops writing savepoints with an error.)
        runtime.spawn(Self::delete_if_ours(blobs, holder));
    }
}
