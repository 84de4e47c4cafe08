//! Where a job keeps its savepoints (`savepoints.path` / `savepoints.target`), and opening
//! that place for a run: for reading (resume lookups, listings) or for writing (one run at a
//! time, holding the place's lease).

use std::path::PathBuf;
use std::sync::Arc;

use super::blobs::Blobs;
use super::lock::WriterLock;
use super::object::{ObjectLease, ObjectStoreSavepoints};
use super::{FileStore, SavepointError, SavepointStore};

/// A table of the target database holding savepoints (`savepoints.target.type:
/// target-table`). Opened by the CQL connector, which has the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTarget {
    /// Keyspace, resolved (exact case, unquoted).
    pub keyspace: String,
    /// Table, resolved.
    pub table: String,
    /// `jobId`: the rows' partition; derived from the job's identity when not given.
    pub job_id: Option<String>,
    /// Appended to the job id (`:validation` for the validator's savepoints).
    pub suffix: String,
}

/// Where savepoints are kept.
#[derive(Clone)]
pub enum Location {
    /// A local directory.
    Dir(PathBuf),
    /// A folder of an S3 or GCS bucket.
    Objects(Arc<dyn Blobs>),
    /// A table of the target database.
    Table(TableTarget),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PartialEq for Location {
    fn eq(&self, other: &Self) -> bool {
        self.describe() == other.describe()
    }
}

impl Location {
    /// The place, for messages and listings.
    pub fn describe(&self) -> String {
        match self {
            Self::Dir(d) => d.display().to_string(),
            Self::Objects(b) => b.describe(),
            Self::Table(t) => format!("table {}.{}", t.keyspace, t.table),
        }
    }

    /// A place of its own inside this one (the validator's savepoints: `validation`).
    pub fn child(&self, name: &str) -> Self {
        match self {
            Self::Dir(d) => Self::Dir(d.join(name)),
            Self::Objects(b) => Self::Objects(b.child(name)),
            Self::Table(t) => Self::Table(TableTarget {
                suffix: format!("{}:{name}", t.suffix),
                ..t.clone()
            }),
        }
    }

    /// The store for reading, if anything can be there (a directory not created yet holds
    /// nothing). Table locations are opened by their connector: `None` here.
    pub async fn reader(&self) -> Result<Option<Arc<dyn SavepointStore>>, SavepointError> {
        match self {
            Self::Dir(d) => {
                let d = d.clone();
                Ok(tokio::task::spawn_blocking(move || {
                    // Read only: the directory is created (and swept) once the job is accepted.
                    d.is_dir()
                        .then(|| Arc::new(FileStore::reader(&d)) as Arc<dyn SavepointStore>)
                })
                .await
                .expect("checking a directory does not panic"))
            }
            Self::Objects(b) => Ok(Some(Arc::new(ObjectStoreSavepoints::reader(b.clone())))),
            Self::Table(_) => Ok(None),
        }
    }

    /// The store for one run's writes, holding the place's lease (directory and object
    /// locations; table locations are opened by their connector).
    pub async fn writer(&self, keep: usize) -> Result<Writer, SavepointError> {
        match self {
            Self::Dir(d) => {
                let (store, lock) = FileStore::open_for_writing(d.clone(), keep).await?;
                Ok(Writer::new(Arc::new(store), Lease::File(lock)))
            }
            Self::Objects(b) => {
                let lease = ObjectLease::acquire(b.clone()).await?;
                let store = ObjectStoreSavepoints::open(b.clone(), keep).await?;
                Ok(Writer::new(Arc::new(store), Lease::Object(lease)))
            }
            Self::Table(t) => Err(SavepointError::Config(format!(
                "table {}.{} is opened through the target's connection",
                t.keyspace, t.table
            ))),
        }
    }
}

/// What keeps other runs out while this one writes.
pub enum Lease {
    /// A lease file in the directory.
    File(WriterLock),
    /// A lease object in the folder.
    Object(ObjectLease),
    /// A backend's own (the target table's lease row).
    Other(Box<dyn Releasable>),
}

/// A lease given up at the end of a run.
pub trait Releasable: Send + Sync {
    /// Gives the lease up.
    fn release(self: Box<Self>) -> futures::future::BoxFuture<'static, ()>;
}

/// A store opened for one run's writes, with that run's lease.
pub struct Writer {
    /// The store.
    pub store: Arc<dyn SavepointStore>,
    lease: Option<Lease>,
}

impl Writer {
    /// A store and the lease that makes this run its only writer.
    pub fn new(store: Arc<dyn SavepointStore>, lease: Lease) -> Self {
        Self {
            store,
            lease: Some(lease),
        }
    }

    /// Gives the lease up now, so that the next run need not wait for it to expire.
    pub async fn release(mut self) {
        match self.lease.take() {
            Some(Lease::File(lock)) => drop(lock),
            Some(Lease::Object(lease)) => lease.release().await,
            Some(Lease::Other(lease)) => lease.release().await,
            None => {}
        }
    }
}
