//! Savepoints in a table of the target database (`savepoints.target.type: target-table`), as
//! ScyllaDB Migrator's documentation describes the backend, with a fenced single writer.
//!
//! One partition per job id; one row per savepoint version, newest first, holding the redacted
//! job document as YAML. Metadata reads and writes are `LOCAL_QUORUM` (lightweight
//! transactions `LOCAL_SERIAL`), never downgraded: a run that cannot reach a local majority of
//! the table's replicas does not start.
//!
//! The lease lives in the partition's static columns: `lease_owner` (TTL'd, renewed while the
//! run lasts) and `current_epoch`, raised by one at each take-over. A run takes the lease with
//! a conditional batch (`IF lease_owner = null AND current_epoch = <read>`), and every
//! savepoint row it writes is conditional on `current_epoch` still being its own. So a run
//! that lost its lease (paused longer than the lease, say) cannot write a savepoint after the
//! next run took over: its write is refused and the run fails instead. Each row also records
//! the epoch it was written under.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use scylla::client::session::Session;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::CqlValue;

use super::schema::quote;
use crate::savepoints::location::{Lease, Releasable, TableTarget, Writer};
use crate::savepoints::{Savepoint, SavepointError, SavepointInfo, SavepointStore};

/// How long a lease lasts without renewal.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often a held lease is renewed.
const RENEW: Duration = Duration::from_secs(15);
/// Rows read per page when looking for a savepoint to resume from: small, so an unusable
/// newest row costs little and older rows are still reached.
const PAGE: i32 = 10;
/// Pages read at most by one lookup or listing (a bound on the work of a lookup; retention
/// keeps far fewer rows).
const MAX_PAGES: usize = 1000;

/// The savepoints of one job in a target table.
pub struct TableSavepoints {
    session: Arc<Session>,
    describe: String,
    job_id: String,
    keep: usize,
    select_page: PreparedStatement,
    select_one: PreparedStatement,
    write: Option<PreparedStatement>,
    prune: Option<PreparedStatement>,
    /// The writer's epoch; the lease it holds sets it.
    epoch: i64,
    lost: Arc<AtomicBool>,
    last: Mutex<(i64, i64)>,
    writer: String,
    runtime: tokio::runtime::Handle,
}

fn remote(location: &str, message: impl std::fmt::Display) -> SavepointError {
    SavepointError::Remote {
        location: location.to_string(),
        message: explain(&message.to_string()),
    }
}

/// The driver's message, with what an operator should know about an unavailable majority.
fn explain(message: &str) -> String {
    if message.contains("Unavailable") || message.contains("Cannot achieve consistency") {
        format!(
            "{message} (savepoint metadata is always read and written at LOCAL_QUORUM, and LOCAL_SERIAL for the lease: a majority of the table's replicas in the local data center must be up; check the keyspace's replication factor)"
        )
    } else {
        message.to_string()
    }
}

fn statement_error(location: &str, e: impl std::fmt::Display) -> SavepointError {
    remote(location, e)
}

/// Opens a target table for a job's savepoints.
pub struct TableOpener {
    session: Arc<Session>,
    target: TableTarget,
    job_id: String,
    describe: String,
}

impl TableOpener {
    /// The savepoints of `job_id` (already suffixed) in `target`, through `session`.
    pub fn new(session: Arc<Session>, target: &TableTarget, job_id: &str) -> Self {
        let job_id = format!("{job_id}{}", target.suffix);
        Self {
            describe: format!("table {}.{} (job {job_id})", target.keyspace, target.table),
            session,
            target: target.clone(),
            job_id,
        }
    }

    fn name(&self) -> String {
        format!(
            "{}.{}",
            quote(&self.target.keyspace),
            quote(&self.target.table)
        )
    }

    async fn prepare(
        &self,
        cql: &str,
        consistency: Consistency,
    ) -> Result<PreparedStatement, SavepointError> {
        let mut p = self
            .session
            .prepare(cql)
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        p.set_consistency(consistency);
        p.set_serial_consistency(Some(SerialConsistency::LocalSerial));
        Ok(p)
    }

    /// Creates the table if needed (the keyspace must exist).
    async fn create(&self) -> Result<(), SavepointError> {
        self.session
            .refresh_metadata()
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        if self
            .session
            .get_cluster_state()
            .get_keyspace(&self.target.keyspace)
            .is_none()
        {
            return Err(SavepointError::Config(format!(
                "savepoints.target.keyspace: keyspace {:?} does not exist on the target cluster; create it (drover creates only the savepoints table, not keyspaces, whose replication is yours to choose)",
                self.target.keyspace
            )));
        }
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {} (\
             job_id text, created_at bigint, counter bigint, \
             config_yaml text, lease_epoch bigint, writer text, \
             lease_owner text static, lease_holder text static, current_epoch bigint static, \
             PRIMARY KEY ((job_id), created_at, counter)) \
             WITH CLUSTERING ORDER BY (created_at DESC, counter DESC) \
             AND comment = 'savepoints of drover and ScyllaDB Migrator jobs'",
            self.name()
        );
        self.session
            .query_unpaged(create, ())
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        Ok(())
    }

    async fn store(&self, keep: usize) -> Result<TableSavepoints, SavepointError> {
        let name = self.name();
        let mut select_page = self
            .prepare(
                &format!(
                    "SELECT created_at, counter, config_yaml, lease_epoch FROM {name} WHERE job_id = ?"
                ),
                Consistency::LocalQuorum,
            )
            .await?;
        select_page.set_page_size(PAGE);
        let select_one = self
            .prepare(
                &format!(
                    "SELECT created_at, counter, config_yaml, lease_epoch FROM {name} WHERE job_id = ? AND created_at = ? AND counter = ?"
                ),
                Consistency::LocalQuorum,
            )
            .await?;
        Ok(TableSavepoints {
            session: self.session.clone(),
            describe: self.describe.clone(),
            job_id: self.job_id.clone(),
            keep: keep.max(1),
            select_page,
            select_one,
            write: None,
            prune: None,
            epoch: 0,
            lost: Arc::new(AtomicBool::new(false)),
            last: Mutex::new((0, 0)),
            writer: String::new(),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// The job's savepoints for reading; `None` when the table does not exist yet.
    pub async fn reader(&self) -> Result<Option<TableSavepoints>, SavepointError> {
        self.session
            .refresh_metadata()
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        let exists = self
            .session
            .get_cluster_state()
            .get_keyspace(&self.target.keyspace)
            .is_some_and(|k| k.tables.contains_key(&self.target.table));
        if !exists {
            return Ok(None);
        }
        Ok(Some(self.store(usize::MAX).await?))
    }

    /// Creates the table if needed, takes the job's lease and seeds the savepoint names
    /// (all at LOCAL_QUORUM: a failure here stops the run from starting).
    pub async fn writer(&self, keep: usize) -> Result<Writer, SavepointError> {
        self.create().await?;
        let mut store = self.store(keep).await?;
        let name = self.name();
        let owner = uuid::Uuid::new_v4().to_string();
        let holder = serde_json::json!({
            "host": crate::savepoints::lock::host_name(),
            "pid": std::process::id(),
            "since": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        })
        .to_string();
        let read_lease = self
            .prepare(
                &format!(
                    "SELECT lease_owner, lease_holder, current_epoch FROM {name} WHERE job_id = ? LIMIT 1"
                ),
                Consistency::LocalSerial,
            )
            .await?;
        let (current_owner, current_holder, epoch) =
            read_lease_row(&self.session, &read_lease, &self.job_id, &self.describe).await?;
        if current_owner.is_some() && !holder_gone(current_holder.as_deref()) {
            return Err(SavepointError::InUse {
                location: self.describe.clone(),
                holder: describe_holder(current_holder.as_deref()),
            });
        }
        // Taken over from a process gone from this host (`kill -9`) without waiting for the
        // TTL: conditional on that lease being the one read. The same statement renews the
        // lease (the run's own owner and epoch as the condition).
        let take_owner = self
            .prepare(
                &format!(
                    "UPDATE {name} USING TTL {} SET lease_owner = ?, lease_holder = ? WHERE job_id = ? IF lease_owner = ? AND current_epoch = ?",
                    LEASE.as_secs()
                ),
                Consistency::LocalQuorum,
            )
            .await?;
        let take_epoch = self
            .prepare(
                &format!("UPDATE {name} SET current_epoch = ? WHERE job_id = ?"),
                Consistency::LocalQuorum,
            )
            .await?;
        let mut batch = Batch::new(BatchType::Logged);
        batch.append_statement(take_owner.clone());
        batch.append_statement(take_epoch);
        batch.set_consistency(Consistency::LocalQuorum);
        batch.set_serial_consistency(Some(SerialConsistency::LocalSerial));
        let next_epoch = epoch.unwrap_or(0) + 1;
        let result = self
            .session
            .batch(
                &batch,
                (
                    (
                        owner.as_str(),
                        holder.as_str(),
                        self.job_id.as_str(),
                        current_owner.as_deref(),
                        epoch,
                    ),
                    (next_epoch, self.job_id.as_str()),
                ),
            )
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        if !applied(result)? {
            let (_, current_holder, _) =
                read_lease_row(&self.session, &read_lease, &self.job_id, &self.describe).await?;
            return Err(SavepointError::InUse {
                location: self.describe.clone(),
                holder: current_holder.map_or_else(
                    || "another run taking it at the same moment".into(),
                    |h| describe_holder(Some(&h)),
                ),
            });
        }
        store.epoch = next_epoch;
        store.writer = holder.clone();
        store.write = Some(
            self.prepare(
                &format!(
                    "UPDATE {name} SET config_yaml = ?, lease_epoch = ?, writer = ? WHERE job_id = ? AND created_at = ? AND counter = ? IF current_epoch = ?"
                ),
                Consistency::LocalQuorum,
            )
            .await?,
        );
        store.prune = Some(
            self.prepare(
                &format!("DELETE FROM {name} WHERE job_id = ? AND created_at < ?"),
                Consistency::LocalQuorum,
            )
            .await?,
        );
        // Seeding must succeed: names continue after the newest row.
        if let Some(newest) = store.first_page().await?.into_iter().next() {
            *store.last.lock().unwrap_or_else(|p| p.into_inner()) = (newest.0, newest.1);
        }
        let release = self
            .prepare(
                &format!(
                    "UPDATE {name} SET lease_owner = null, lease_holder = null WHERE job_id = ? IF lease_owner = ?"
                ),
                Consistency::LocalQuorum,
            )
            .await?;
        let lease = TableLease {
            session: self.session.clone(),
            job_id: self.job_id.clone(),
            owner: owner.clone(),
            release,
            renewal: Some(renew_lease(
                self.session.clone(),
                take_owner,
                self.job_id.clone(),
                owner,
                holder,
                next_epoch,
                store.lost.clone(),
                self.describe.clone(),
            )),
        };
        Ok(Writer::new(Arc::new(store), Lease::Other(Box::new(lease))))
    }
}

#[derive(serde::Deserialize)]
struct HolderInfo {
    host: String,
    pid: u32,
    since: u64,
}

fn holder_gone(holder: Option<&str>) -> bool {
    holder
        .and_then(|h| serde_json::from_str::<HolderInfo>(h).ok())
        .is_some_and(|h| crate::savepoints::lock::process_gone(&h.host, h.pid))
}

fn describe_holder(holder: Option<&str>) -> String {
    match holder.map(|h| (h, serde_json::from_str::<HolderInfo>(h))) {
        Some((_, Ok(h))) => format!(
            "process {} on host {}, since {} (epoch seconds)",
            h.pid, h.host, h.since
        ),
        Some((text, Err(_))) => crate::answer::cap(text).into_owned(),
        None => "another run".into(),
    }
}

type LeaseRow = (Option<String>, Option<String>, Option<i64>);

async fn read_lease_row(
    session: &Session,
    statement: &PreparedStatement,
    job_id: &str,
    describe: &str,
) -> Result<LeaseRow, SavepointError> {
    let result = session
        .execute_unpaged(statement, (job_id,))
        .await
        .map_err(|e| statement_error(describe, e))?;
    let rows = result.into_rows_result().map_err(|e| remote(describe, e))?;
    Ok(rows
        .maybe_first_row::<LeaseRow>()
        .map_err(|e| remote(describe, e))?
        .unwrap_or((None, None, None)))
}

/// Whether a conditional statement was applied (its first column, `[applied]`).
fn applied(result: scylla::response::query_result::QueryResult) -> Result<bool, SavepointError> {
    let rows = result
        .into_rows_result()
        .map_err(|e| remote("lightweight transaction", e))?;
    let row = rows
        .maybe_first_row::<scylla::value::Row>()
        .map_err(|e| remote("lightweight transaction", e))?;
    Ok(matches!(
        row.and_then(|r| r.columns.into_iter().next()).flatten(),
        Some(CqlValue::Boolean(true))
    ))
}

#[allow(clippy::too_many_arguments)]
fn renew_lease(
    session: Arc<Session>,
    renew: PreparedStatement,
    job_id: String,
    owner: String,
    holder: String,
    epoch: i64,
    lost: Arc<AtomicBool>,
    describe: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + RENEW, RENEW);
        loop {
            tick.tick().await;
            let result = session
                .execute_unpaged(
                    &renew,
                    (
                        owner.as_str(),
                        holder.as_str(),
                        job_id.as_str(),
                        owner.as_str(),
                        epoch,
                    ),
                )
                .await;
            match result
                .map_err(|e| statement_error(&describe, e))
                .and_then(applied)
            {
                Ok(true) => {}
                Ok(false) => {
                    lost.store(true, Ordering::SeqCst);
                    tracing::error!(
                        "{describe}: this run's lease was taken over by another run (not renewed for {} s); its savepoints are refused from now on",
                        LEASE.as_secs()
                    );
                    return;
                }
                // Retried at the next tick; the lease lasts four of them.
                Err(e) => tracing::warn!("renewing the savepoints lease: {e}"),
            }
        }
    })
}

/// A run's lease on a job's savepoints.
struct TableLease {
    session: Arc<Session>,
    job_id: String,
    owner: String,
    release: PreparedStatement,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

impl Releasable for TableLease {
    fn release(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
        Box::pin(async move {
            // Only our own: a lease taken over stays with its new holder.
            if let Err(e) = self
                .session
                .execute_unpaged(&self.release, (self.job_id.as_str(), self.owner.as_str()))
                .await
            {
                tracing::warn!(
                    "releasing the savepoints lease (it expires by itself within {} s): {e}",
                    LEASE.as_secs()
                );
            }
        })
    }
}

impl Drop for TableLease {
    fn drop(&mut self) {
        if let Some(task) = self.renewal.take() {
            task.abort();
        }
    }
}

type SavepointRow = (Option<i64>, Option<i64>, Option<String>, Option<i64>);

fn info_of(created_at: i64, counter: i64) -> SavepointInfo {
    let (millis, counter) = (created_at.max(0) as u64, counter.max(0) as u64);
    SavepointInfo {
        name: format!("savepoint_{millis:013}_{counter:010}.yaml"),
        epoch_millis: millis,
        counter,
    }
}

impl TableSavepoints {
    async fn page(
        &self,
        paging: PagingState,
    ) -> Result<
        (
            Vec<(i64, i64, Option<String>, Option<i64>)>,
            PagingStateResponse,
        ),
        SavepointError,
    > {
        let (result, next) = self
            .session
            .execute_single_page(&self.select_page, (self.job_id.as_str(),), paging)
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| remote(&self.describe, e))?
            .rows::<SavepointRow>()
            .map_err(|e| remote(&self.describe, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| remote(&self.describe, e))?;
        // A partition holding only the lease reads as one row without clustering values.
        let rows = rows
            .into_iter()
            .filter_map(|(c, n, yaml, epoch)| Some((c?, n?, yaml, epoch)))
            .collect();
        Ok((rows, next))
    }

    async fn first_page(
        &self,
    ) -> Result<Vec<(i64, i64, Option<String>, Option<i64>)>, SavepointError> {
        Ok(self.page(PagingState::start()).await?.0)
    }

    /// Every row, newest first, in pages; `visit` returns `true` to stop.
    async fn scan(
        &self,
        visit: &mut dyn FnMut(i64, i64, Option<String>, Option<i64>) -> bool,
    ) -> Result<(), SavepointError> {
        let mut paging = PagingState::start();
        for _ in 0..MAX_PAGES {
            let (rows, next) = self.page(paging).await?;
            for (c, n, yaml, epoch) in rows {
                if visit(c, n, yaml, epoch) {
                    return Ok(());
                }
            }
            match next {
                PagingStateResponse::HasMorePages { state } => paging = state,
                PagingStateResponse::NoMorePages => return Ok(()),
            }
        }
        Ok(())
    }

    async fn write_async(
        &self,
        document: &serde_json::Value,
    ) -> Result<SavepointInfo, SavepointError> {
        let (Some(write), Some(prune)) = (&self.write, &self.prune) else {
            return Err(SavepointError::Config(format!(
                "{}: opened for reading only",
                self.describe
            )));
        };
        if self.lost.load(Ordering::SeqCst) {
            return Err(remote(
                &self.describe,
                "this run's lease was taken over by another run; its savepoints are refused",
            ));
        }
        let (created_at, counter) = {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            *last = (now.max(last.0), last.1 + 1);
            *last
        };
        let yaml = crate::savepoints::render_document(document);
        let result = self
            .session
            .execute_unpaged(
                write,
                (
                    yaml.as_str(),
                    self.epoch,
                    self.writer.as_str(),
                    self.job_id.as_str(),
                    created_at,
                    counter,
                    self.epoch,
                ),
            )
            .await
            .map_err(|e| statement_error(&self.describe, e))?;
        if !applied(result)? {
            self.lost.store(true, Ordering::SeqCst);
            return Err(remote(
                &self.describe,
                format!(
                    "savepoint refused: the job's lease passed to another run (epoch {} is no longer current)",
                    self.epoch
                ),
            ));
        }
        // Retention: the newest `keep` versions (and any written in the same millisecond as
        // the oldest kept) stay.
        let mut kept = 0usize;
        let mut cut = None;
        self.scan(&mut |c, _, _, _| {
            kept += 1;
            if kept == self.keep {
                cut = Some(c);
                return true;
            }
            false
        })
        .await?;
        if let Some(cut) = cut {
            self.session
                .execute_unpaged(prune, (self.job_id.as_str(), cut))
                .await
                .map_err(|e| statement_error(&self.describe, e))?;
        }
        Ok(info_of(created_at, counter))
    }

    fn parse_row(
        &self,
        info: &SavepointInfo,
        yaml: Option<String>,
    ) -> Result<Savepoint, SavepointError> {
        let text = yaml.ok_or_else(|| SavepointError::Corrupt {
            name: info.name.clone(),
            message: "no config_yaml".into(),
        })?;
        Ok(Savepoint {
            info: info.clone(),
            document: crate::savepoints::parse_document(&info.name, &text)?,
        })
    }
}

impl SavepointStore for TableSavepoints {
    fn write(&self, document: &serde_json::Value) -> Result<SavepointInfo, SavepointError> {
        self.runtime.block_on(self.write_async(document))
    }

    fn list(&self) -> Result<Vec<SavepointInfo>, SavepointError> {
        self.runtime.block_on(async {
            let mut out = Vec::new();
            self.scan(&mut |c, n, _, _| {
                out.push(info_of(c, n));
                false
            })
            .await?;
            Ok(out)
        })
    }

    fn read(&self, info: &SavepointInfo) -> Result<Savepoint, SavepointError> {
        self.runtime.block_on(async {
            let result = self
                .session
                .execute_unpaged(
                    &self.select_one,
                    (
                        self.job_id.as_str(),
                        info.epoch_millis as i64,
                        info.counter as i64,
                    ),
                )
                .await
                .map_err(|e| statement_error(&self.describe, e))?;
            let row = result
                .into_rows_result()
                .map_err(|e| remote(&self.describe, e))?
                .maybe_first_row::<SavepointRow>()
                .map_err(|e| remote(&self.describe, e))?;
            let Some((_, _, yaml, _)) = row else {
                return Err(SavepointError::Corrupt {
                    name: info.name.clone(),
                    message: "deleted since it was listed".into(),
                });
            };
            self.parse_row(info, yaml)
        })
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    /// Newest to oldest in small pages, each row read once, until a usable one.
    fn newest_matching(
        &self,
        keys: &[&'static crate::savepoints::Key],
        accept: &dyn Fn(&serde_json::Value) -> Result<(), String>,
    ) -> Result<crate::savepoints::Lookup, SavepointError> {
        self.runtime.block_on(async {
            let mut warnings = Vec::new();
            let mut found = None;
            self.scan(&mut |c, n, yaml, _| {
                let info = info_of(c, n);
                let savepoint = match self.parse_row(&info, yaml) {
                    Ok(s) => s,
                    Err(e) => {
                        warnings.push(format!("{e}; trying an older savepoint"));
                        return false;
                    }
                };
                if let Err(why) = accept(&savepoint.document) {
                    warnings.push(format!("savepoint {}: {why}; ignored", info.name));
                    return false;
                }
                match crate::savepoints::Progress::from_document(&savepoint.document, keys) {
                    Ok(progress) => {
                        found = Some((savepoint, progress));
                        true
                    }
                    Err(e) => {
                        warnings.push(format!(
                            "savepoint {}: {e}; trying an older savepoint",
                            info.name
                        ));
                        false
                    }
                }
            })
            .await?;
            Ok(crate::savepoints::Lookup { found, warnings })
        })
    }
}

impl crate::connectors::seam::SavepointTable for TableOpener {
    fn reader(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<Option<Arc<dyn crate::savepoints::SavepointStore>>, SavepointError>,
    > {
        Box::pin(async move { Ok(TableOpener::reader(self).await?.map(|s| Arc::new(s) as _)) })
    }

    fn writer(
        &self,
        keep: usize,
    ) -> futures::future::BoxFuture<'_, Result<Writer, SavepointError>> {
        Box::pin(TableOpener::writer(self, keep))
    }
}
