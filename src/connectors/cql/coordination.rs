//! Many daemons, one job (`coordination: {type: target-table}`): the job's units are leased
//! through lightweight transactions on a table of the target database, the way Cassandra
//! Reaper coordinates its instances, with no consensus of drover's own.
//!
//! One partition per job; one row per unit that a run ever took. A run takes a unit with
//! `UPDATE … USING TTL <lease> SET owner = me IF owner = null AND done = null`, renews it with
//! `… IF owner = me` while it copies, and records it with `SET done = true … IF owner = me`.
//! A run that dies stops renewing: its leases lapse and the other runs take its units. The
//! lease cells carry a TTL, so a lapsed lease needs no cleaning; `done` has none.
//!
//! Every take, renewal and end of a lease is also appended to `<table>_leases`, a record an
//! operator (and the tests) can read to see who held which unit when: `taken_at` is when the
//! taker learnt it had the unit (no earlier than the take), `renewed_at` when the lease was
//! last written (no later than the write), so a lease lapsed no sooner than `renewed_at`
//! (in whole seconds) plus the lease, and the next `taken_at` of the unit is after that.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use scylla::client::session::Session;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::CqlValue;

use super::schema::quote;
use crate::connectors::seam::{Claim, Coordinator, Shared};

/// Attempts after the first of a coordination statement that timed out.
const RETRIES: usize = 6;

/// A job's units in a table of the target database.
pub struct TableCoordinator {
    session: Arc<Session>,
    job_id: String,
    owner: String,
    holder: String,
    lease: Duration,
    claim: PreparedStatement,
    renew: PreparedStatement,
    complete: PreparedStatement,
    complete_lost: PreparedStatement,
    release: PreparedStatement,
    units: PreparedStatement,
    record_take: PreparedStatement,
    record_renewal: PreparedStatement,
    record_end: PreparedStatement,
    /// When this run took each unit it holds (the key of its lease record).
    taken: std::sync::Mutex<HashMap<String, i64>>,
    requests: AtomicU64,
    lwt: AtomicU64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The `[applied]` flag of a conditional statement, and the current values it returned.
fn outcome(
    result: scylla::response::query_result::QueryResult,
) -> Result<(bool, HashMap<String, CqlValue>), String> {
    let rows = result.into_rows_result().map_err(|e| e.to_string())?;
    let names: Vec<String> = rows
        .column_specs()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let Some(row) = rows
        .maybe_first_row::<scylla::value::Row>()
        .map_err(|e| e.to_string())?
    else {
        return Err("a conditional statement returned no row".into());
    };
    let mut values = HashMap::new();
    let mut applied = false;
    for (name, value) in names.into_iter().zip(row.columns) {
        if name == "[applied]" {
            applied = matches!(value, Some(CqlValue::Boolean(true)));
        } else if let Some(v) = value {
            values.insert(name, v);
        }
    }
    Ok((applied, values))
}

impl TableCoordinator {
    /// Creates the tables if needed (the keyspace must exist) and prepares the statements,
    /// all at LOCAL_QUORUM (LOCAL_SERIAL for the leases).
    pub async fn open(
        session: Arc<Session>,
        keyspace: &str,
        table: &str,
        job_id: &str,
        lease: Duration,
    ) -> Result<Self, String> {
        session
            .refresh_metadata()
            .await
            .map_err(|e| e.to_string())?;
        if session.get_cluster_state().get_keyspace(keyspace).is_none() {
            return Err(format!(
                "coordination.keyspace: keyspace {keyspace:?} does not exist on the target cluster; create it (drover creates only its tables)"
            ));
        }
        let name = format!("{}.{}", quote(keyspace), quote(table));
        let leases = format!("{}.{}", quote(keyspace), quote(&format!("{table}_leases")));
        for ddl in [
            format!(
                "CREATE TABLE IF NOT EXISTS {name} (job_id text, unit text, owner text, holder text, done boolean, done_by text, PRIMARY KEY ((job_id), unit)) WITH comment = 'units of drover jobs shared by several daemons'"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {leases} (job_id text, unit text, taken_at bigint, owner text, holder text, renewed_at bigint, ended_at bigint, ended text, PRIMARY KEY ((job_id), unit, taken_at, owner)) WITH comment = 'who held which unit of drover jobs, and when'"
            ),
        ] {
            session
                .query_unpaged(ddl, ())
                .await
                .map_err(|e| e.to_string())?;
        }
        let prepare = |cql: String| {
            let session = session.clone();
            async move {
                let mut p = session.prepare(cql).await.map_err(|e| e.to_string())?;
                p.set_consistency(Consistency::LocalQuorum);
                p.set_serial_consistency(Some(SerialConsistency::LocalSerial));
                Ok::<_, String>(p)
            }
        };
        let ttl = lease.as_secs().max(1);
        let mut units = prepare(format!(
            "SELECT unit, owner, done FROM {name} WHERE job_id = ?"
        ))
        .await?;
        units.set_page_size(1000);
        let holder = serde_json::json!({
            "host": crate::savepoints::lock::host_name(),
            "pid": std::process::id(),
        })
        .to_string();
        Ok(Self {
            claim: prepare(format!(
                "UPDATE {name} USING TTL {ttl} SET owner = ?, holder = ? WHERE job_id = ? AND unit = ? IF owner = null AND done = null"
            ))
            .await?,
            renew: prepare(format!(
                "UPDATE {name} USING TTL {ttl} SET owner = ?, holder = ? WHERE job_id = ? AND unit = ? IF owner = ?"
            ))
            .await?,
            complete: prepare(format!(
                "UPDATE {name} SET done = true, done_by = ?, owner = null, holder = null WHERE job_id = ? AND unit = ? IF owner = ?"
            ))
            .await?,
            complete_lost: prepare(format!(
                "UPDATE {name} SET done = true, done_by = ? WHERE job_id = ? AND unit = ? IF done = null"
            ))
            .await?,
            release: prepare(format!(
                "UPDATE {name} SET owner = null, holder = null WHERE job_id = ? AND unit = ? IF owner = ?"
            ))
            .await?,
            units,
            record_take: prepare(format!(
                "INSERT INTO {leases} (job_id, unit, taken_at, owner, holder, renewed_at) VALUES (?, ?, ?, ?, ?, ?)"
            ))
            .await?,
            record_renewal: prepare(format!(
                "UPDATE {leases} SET renewed_at = ? WHERE job_id = ? AND unit = ? AND taken_at = ? AND owner = ?"
            ))
            .await?,
            record_end: prepare(format!(
                "UPDATE {leases} SET ended_at = ?, ended = ? WHERE job_id = ? AND unit = ? AND taken_at = ? AND owner = ?"
            ))
            .await?,
            session,
            job_id: job_id.to_string(),
            owner: uuid::Uuid::new_v4().to_string(),
            holder,
            lease,
            taken: std::sync::Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            lwt: AtomicU64::new(0),
        })
    }

    /// Runs a statement, again after a timeout or an unavailable replica (a contended
    /// lightweight transaction times out under load): each statement here is safe to repeat,
    /// since a repeat finds the state the first attempt left (see `claim` and `complete`).
    async fn execute(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
        conditional: bool,
    ) -> Result<scylla::response::query_result::QueryResult, String> {
        use backon::BackoffBuilder;
        let mut delays = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(5))
            .with_max_times(RETRIES)
            .with_jitter()
            .build();
        loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
            if conditional {
                self.lwt.fetch_add(1, Ordering::Relaxed);
            }
            match self.session.execute_unpaged(statement, &values).await {
                Ok(result) => return Ok(result),
                Err(e) => {
                    let message = e.to_string();
                    let transient = ["timed out", "Timeout", "Unavailable", "Not enough nodes"]
                        .iter()
                        .any(|t| message.contains(t));
                    match delays.next() {
                        Some(delay) if transient => {
                            tracing::debug!("coordination: {message}; trying again in {delay:?}");
                            tokio::time::sleep(delay).await;
                        }
                        _ => return Err(message),
                    }
                }
            }
        }
    }

    async fn record_ended(&self, key: &str, how: &str) {
        let Some(taken_at) = self
            .taken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key)
        else {
            return;
        };
        let values = (
            now_ms(),
            how,
            self.job_id.as_str(),
            key,
            taken_at,
            self.owner.as_str(),
        );
        if let Err(e) = self.execute(&self.record_end, values, false).await {
            tracing::warn!("coordination: recording the end of the lease of {key}: {e}");
        }
    }
}

impl Coordinator for TableCoordinator {
    fn claim(&self, key: &str) -> BoxFuture<'_, Result<Claim, String>> {
        let key = key.to_string();
        Box::pin(async move {
            // No later than the lease's write time: the lease lapses no sooner than its
            // TTL after this (in whole seconds, as the database counts TTLs).
            let sent = now_ms();
            let result = self
                .execute(
                    &self.claim,
                    (
                        self.owner.as_str(),
                        self.holder.as_str(),
                        self.job_id.as_str(),
                        key.as_str(),
                    ),
                    true,
                )
                .await?;
            let (applied, current) = outcome(result)?;
            // An attempt that timed out may have been applied: the repeat then finds our own
            // lease.
            let ours = matches!(current.get("owner"), Some(CqlValue::Text(o)) if *o == self.owner);
            if !applied && !ours {
                return Ok(
                    if matches!(current.get("done"), Some(CqlValue::Boolean(true))) {
                        Claim::Done
                    } else {
                        Claim::Held
                    },
                );
            }
            let taken_at = now_ms();
            self.taken
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key.clone(), taken_at);
            let values = (
                self.job_id.as_str(),
                key.as_str(),
                taken_at,
                self.owner.as_str(),
                self.holder.as_str(),
                sent,
            );
            if let Err(e) = self.execute(&self.record_take, values, false).await {
                tracing::warn!("coordination: recording the lease of {key}: {e}");
            }
            Ok(Claim::Mine)
        })
    }

    fn renew(&self, key: &str) -> BoxFuture<'_, Result<bool, String>> {
        let key = key.to_string();
        Box::pin(async move {
            let sent = now_ms();
            let result = self
                .execute(
                    &self.renew,
                    (
                        self.owner.as_str(),
                        self.holder.as_str(),
                        self.job_id.as_str(),
                        key.as_str(),
                        self.owner.as_str(),
                    ),
                    true,
                )
                .await?;
            let (applied, _) = outcome(result)?;
            let taken_at = self
                .taken
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .copied();
            if applied && let Some(taken_at) = taken_at {
                let values = (
                    sent,
                    self.job_id.as_str(),
                    key.as_str(),
                    taken_at,
                    self.owner.as_str(),
                );
                if let Err(e) = self.execute(&self.record_renewal, values, false).await {
                    tracing::warn!("coordination: recording the renewal of {key}: {e}");
                }
            }
            Ok(applied)
        })
    }

    fn complete(&self, key: &str) -> BoxFuture<'_, Result<(), String>> {
        let key = key.to_string();
        Box::pin(async move {
            let result = self
                .execute(
                    &self.complete,
                    (
                        self.holder.as_str(),
                        self.job_id.as_str(),
                        key.as_str(),
                        self.owner.as_str(),
                    ),
                    true,
                )
                .await?;
            let (applied, current) = outcome(result)?;
            // A repeat of an attempt that was applied finds the unit done.
            let repeated = matches!(current.get("done"), Some(CqlValue::Boolean(true)));
            if !applied && !repeated {
                // Copied whole, every write acknowledged, but the lease lapsed meanwhile (a
                // pause longer than the lease): the unit is complete all the same; another
                // run that took it copies it again, idempotently.
                tracing::warn!(
                    "coordination: the lease of {key} lapsed while it was copied; recorded complete anyway"
                );
                let values = (self.holder.as_str(), self.job_id.as_str(), key.as_str());
                self.execute(&self.complete_lost, values, true).await?;
            }
            self.record_ended(
                &key,
                if applied || repeated {
                    "done"
                } else {
                    "lapsed"
                },
            )
            .await;
            Ok(())
        })
    }

    fn release(&self, key: &str) -> BoxFuture<'_, Result<(), String>> {
        let key = key.to_string();
        Box::pin(async move {
            let values = (self.job_id.as_str(), key.as_str(), self.owner.as_str());
            self.execute(&self.release, values, true).await?;
            self.record_ended(&key, "released").await;
            Ok(())
        })
    }

    fn shared(&self) -> BoxFuture<'_, Result<Shared, String>> {
        Box::pin(async move {
            let mut shared = Shared::default();
            let mut paging = PagingState::start();
            // Bounded: a job has at most a few hundred thousand units, 1000 a page.
            for _ in 0..10_000 {
                self.requests.fetch_add(1, Ordering::Relaxed);
                let (result, next) = self
                    .session
                    .execute_single_page(&self.units, (self.job_id.as_str(),), paging)
                    .await
                    .map_err(|e| e.to_string())?;
                let rows = result.into_rows_result().map_err(|e| e.to_string())?;
                for row in rows
                    .rows::<(String, Option<String>, Option<bool>)>()
                    .map_err(|e| e.to_string())?
                {
                    let (_, owner, done) = row.map_err(|e| e.to_string())?;
                    if done == Some(true) {
                        shared.done += 1;
                    } else if owner.is_some() {
                        shared.held += 1;
                    }
                }
                match next {
                    PagingStateResponse::HasMorePages { state } => paging = state,
                    PagingStateResponse::NoMorePages => break,
                }
            }
            Ok(shared)
        })
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            (
                "coordinationRequests",
                self.requests.load(Ordering::Relaxed),
            ),
            ("coordinationLwtRequests", self.lwt.load(Ordering::Relaxed)),
        ]
    }
}
