//! The CQL connector's registration: `type: cassandra` and `type: scylla` on both sides, the
//! CQL → CQL copy (CQL writes or SSTables) and its comparison.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::config::{BulkRead, BulkWrite};
use super::{CqlSource, CqlTarget};
use crate::connectors::registry::{
    self, CompareRequest, Connector, CopyRequest, Opened, Pair, Source, Target,
};
use crate::connectors::seam::{self, SeamError};
use crate::connectors::{SourceConfig, TargetConfig};
use crate::jobfile::JobConfigError;
use crate::savepoints::{Key, TOKEN_RANGES};

/// The CQL connector (Cassandra, ScyllaDB).
pub struct Cql;

impl Connector for Cql {
    const SOURCES: &'static [(&'static str, registry::ParseSource)] = &[
        ("cassandra", parse_source),
        ("scylla", parse_source),
    ];
    const TARGETS: &'static [(&'static str, registry::ParseTarget)] = &[
        ("cassandra", parse_target),
        ("scylla", parse_target),
    ];
    const KEYS: &'static [&'static Key] = &[&super::BULK_RUN];
    const PAIRS: &'static [Pair] = &[Pair::of::<CqlSource, CqlTarget>(
        "cassandra/scylla to cassandra/scylla",
    )];

    async fn open_copy<M: seam::CopyMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &mut CopyRequest<'_>,
        maker: &M,
    ) -> Opened<seam::OpenedCopy<M::Copy>> {
        let (src, dst) = (source.get::<CqlSource>()?, target.get::<CqlTarget>()?);
        Some(open(src, dst, request, maker).await)
    }

    async fn open_comparison<M: seam::compare::ComparisonMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &CompareRequest<'_>,
        maker: &M,
    ) -> Opened<M::Comparison> {
        let (src, dst) = (source.get::<CqlSource>()?, target.get::<CqlTarget>()?);
        Some(
            super::compare::prepare(src, dst, request.renames, request.validation)
                .await
                .map(|sides| maker.merged(sides))
                .map_err(SeamError::from),
        )
    }
}

async fn open<M: seam::CopyMaker>(
    src: &CqlSource,
    dst: &CqlTarget,
    request: &mut CopyRequest<'_>,
    maker: &M,
) -> Result<seam::OpenedCopy<M::Copy>, SeamError> {
    if dst.bulk_write == BulkWrite::Sstable {
        // The load this run belongs to: the resumed savepoint's, else a new one, recorded
        // from the first savepoint on.
        let run = request
            .done
            .id_or_insert_with(&super::BULK_RUN, || uuid::Uuid::now_v7().to_string());
        let parts = super::bulk::open_bulk_copy(src, dst, request.renames, &run, request.retry_for)
            .await?;
        return Ok(registry::made(maker, parts, request.done));
    }
    let parts = super::transfer::open_copy(src, dst, request.renames).await?;
    Ok(registry::made(maker, parts, request.done))
}

fn parse_source(text: &str, value: yaml_serde::Value) -> Result<SourceConfig, JobConfigError> {
    CqlSource::parse(text, value).map(SourceConfig::new)
}

fn parse_target(text: &str, value: yaml_serde::Value) -> Result<TargetConfig, JobConfigError> {
    CqlTarget::parse(text, value).map(TargetConfig::new)
}

impl Source for CqlSource {
    fn kind(&self) -> &'static str {
        "cassandra/scylla"
    }

    fn describe(&self) -> String {
        self.endpoint.describe()
    }

    fn progress_keys(&self) -> &'static [&'static Key] {
        {
            static KEYS: &[&Key] = &[&TOKEN_RANGES];
            KEYS
        }
    }

    fn unshareable(&self) -> Option<&'static str> {
        (self.bulk_read == BulkRead::Snapshot).then_some(
            "cannot share a job read from a snapshot (source.bulkRead: snapshot) between daemons: each would read the whole snapshot; run it in one daemon, or read with CQL",
        )
    }
}

impl Target for CqlTarget {
    fn kind(&self) -> &'static str {
        "cassandra/scylla"
    }

    fn describe(&self) -> String {
        self.endpoint.describe()
    }

    fn check_source(&self, text: &str, source: &dyn Source) -> Result<(), JobConfigError> {
        if self.bulk_write == BulkWrite::Sstable && registry::source_as::<CqlSource>(source).is_none() {
            return Err(JobConfigError::at(
                text,
                "target.bulkWrite",
                format!(
                    "sstable needs a cassandra/scylla source (it writes a token range's rows as they are read, in token order); a {} source loads with CQL writes",
                    source.kind()
                ),
            ));
        }
        Ok(())
    }

    fn own_tables_keyspace(&self) -> Option<String> {
        Some(super::schema::resolve_name(&self.endpoint.keyspace))
    }

    fn savepoint_table<'a>(
        &'a self,
        table: &'a crate::savepoints::location::TableTarget,
        job_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Box<dyn seam::SavepointTable>>, String>> {
        Box::pin(async move {
            let session = super::connect("target", &self.endpoint)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Some(Box::new(super::savepoints::TableOpener::new(
                Arc::new(session),
                table,
                job_id,
            )) as Box<dyn seam::SavepointTable>))
        })
    }

    fn coordinator<'a>(
        &'a self,
        keyspace: &'a str,
        table: &'a str,
        job_id: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Arc<dyn seam::Coordinator>, SeamError>> {
        Box::pin(async move {
            let session = super::connect("target", &self.endpoint).await?;
            let opened = super::coordination::TableCoordinator::open(
                Arc::new(session),
                keyspace,
                table,
                job_id,
                lease,
            )
            .await;
            match opened {
                Ok(c) => Ok(Arc::new(c) as Arc<dyn seam::Coordinator>),
                Err(message) if message.starts_with("coordination.") => {
                    Err(SeamError::Config(JobConfigError {
                        message,
                        line: None,
                    }))
                }
                Err(message) => Err(SeamError::Failed(message)),
            }
        })
    }
}
