//! The place a job's savepoints are kept, opened for a run: a directory or bucket folder
//! directly, a table of the target database through a session of its own to the target.

use std::sync::Arc;

use crate::connectors::TargetConfig;
use crate::connectors::seam::{SavepointTable, SeamError};
use crate::jobfile::SavepointsConfig;
use crate::savepoints::location::TableTarget;
use crate::savepoints::sealed::{derived_job_id, seal_filter};
use crate::savepoints::{Location, Lookup, SavepointError, Writer};

use super::EngineError;

/// Where one run's savepoints are.
pub struct Place {
    location: Location,
    /// For a target table: the job id its rows are under, and the target that keeps it.
    table: Option<(TableTarget, String, TargetConfig)>,
}

impl Place {
    /// The place of `savepoints` (its `child` folder, if given). `base` is the redacted job
    /// document every savepoint repeats: for a target table its `where` filter is sealed
    /// first, and the job id derives from it.
    pub fn new(
        savepoints: &SavepointsConfig,
        target: &TargetConfig,
        base: &mut serde_json::Value,
        child: Option<&str>,
    ) -> Result<Self, EngineError> {
        let mut location = savepoints.location.clone().expect("resolved by the parser");
        if let Some(child) = child {
            location = location.child(child);
        }
        let table = match &location {
            Location::Table(_) if target.own_tables_keyspace().is_none() => {
                return Err(SavepointError::Config(
                    "savepoints.target: type target-table needs a Cassandra or ScyllaDB target"
                        .into(),
                )
                .into());
            }
            Location::Table(t) => {
                seal_filter(base)?;
                let job_id = t.job_id.clone().unwrap_or_else(|| derived_job_id(base));
                Some((t.clone(), job_id, target.clone()))
            }
            _ => None,
        };
        Ok(Self { location, table })
    }

    /// A local directory.
    pub fn directory(dir: std::path::PathBuf) -> Self {
        Self {
            location: Location::Dir(dir),
            table: None,
        }
    }

    /// The place, for messages.
    pub fn describe(&self) -> String {
        match &self.table {
            Some((t, job_id, _)) => format!(
                "table {}.{} (job {job_id}{})",
                t.keyspace, t.table, t.suffix
            ),
            None => self.location.describe(),
        }
    }

    async fn opener(&self) -> Result<Option<Box<dyn SavepointTable>>, SavepointError> {
        let Some((t, job_id, target)) = &self.table else {
            return Ok(None);
        };
        target
            .savepoint_table(t, job_id)
            .await
            .map_err(|message| SavepointError::Remote {
                location: self.describe(),
                message,
            })
    }

    /// The newest savepoint `accept` takes. A target table that cannot be read is warned
    /// about and treated as empty (ScyllaDB Migrator's documented behaviour: the run goes on
    /// from its launch config); a directory or bucket that cannot be read fails the run.
    pub async fn lookup(
        &self,
        accept: impl Fn(&serde_json::Value) -> Result<(), String> + Send + 'static,
    ) -> Result<Lookup, EngineError> {
        let store = match self.reader().await {
            Ok(store) => store,
            Err(e) if self.table.is_some() => {
                tracing::warn!("{e}; no savepoint looked up, the run starts from its config");
                return Ok(Lookup::default());
            }
            Err(e) => return Err(e.into()),
        };
        let Some(store) = store else {
            return Ok(Lookup::default());
        };
        let table = self.table.is_some();
        let result = tokio::task::spawn_blocking(move || {
            store.newest_matching(crate::connectors::progress_keys(), &accept)
        })
        .await
        .expect("reading savepoints does not panic");
        match result {
            Ok(found) => Ok(found),
            Err(e) if table => {
                tracing::warn!("{e}; no savepoint looked up, the run starts from its config");
                Ok(Lookup::default())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The store for reading; `None` when nothing was ever written there.
    pub async fn reader(
        &self,
    ) -> Result<Option<Arc<dyn crate::savepoints::SavepointStore>>, SavepointError> {
        match self.opener().await? {
            Some(opener) => opener.reader().await,
            None => self.location.reader().await,
        }
    }

    /// The place opened for this run's writes, with its lease.
    pub async fn writer(&self, keep: usize) -> Result<Writer, EngineError> {
        match self.opener().await? {
            Some(opener) => Ok(opener.writer(keep).await?),
            None => Ok(self.location.writer(keep).await?),
        }
    }
}

/// The coordinator of a job shared by several daemons (`coordination`), on its table of the
/// target database.
pub async fn coordinator(
    config: &super::config::JobConfig,
    coordination: &super::config::CoordinationConfig,
    text: &str,
) -> Result<Arc<dyn crate::connectors::seam::Coordinator>, EngineError> {
    let job_id = match &coordination.job_id {
        Some(id) => id.clone(),
        None => {
            let mut sealed = crate::jobfile::redacted_json(text);
            seal_filter(&mut sealed)?;
            derived_job_id(&sealed)
        }
    };
    let place = format!(
        "coordination table {}.{} (job {job_id})",
        coordination.keyspace, coordination.table
    );
    let opened = config
        .target
        .coordinator(
            &coordination.keyspace,
            &coordination.table,
            &job_id,
            std::time::Duration::from_secs(coordination.lease_seconds),
        )
        .await;
    match opened {
        Ok(c) => {
            tracing::info!(
                "units shared with the other daemons running this job, through the {place}"
            );
            Ok(c)
        }
        Err(SeamError::Failed(message)) => Err(EngineError::Failed(format!("{place}: {message}"))),
        Err(e) => Err(e.into()),
    }
}
