//! Connectors: one folder per data system, each holding everything that system needs (its
//! job-file sections, schema checks, scans, writers, value codec and error classification).
//! The engine (`migrate`) and the validator drive them through the traits of [`seam`].
//!
//! Registering a connector is one variant in [`SourceConfig`] and/or [`TargetConfig`] (with
//! its `type` names in their `parse`), one arm where the engine opens a pair, and its savepoint
//! keys in [`PROGRESS_KEYS`].

pub mod cql;
pub mod csv;
pub mod dynamodb;
pub mod mysql;
pub mod parquet;
pub mod s3export;
pub mod seam;
pub mod streamed;
pub mod unit_files;

use crate::config::yaml;
use crate::jobfile::JobConfigError;
use crate::savepoints::Key;

/// Every key under which a connector records completed work in job files and savepoints
/// (each declared in its connector's folder).
pub static PROGRESS_KEYS: &[&Key] = &[
    &crate::savepoints::TOKEN_RANGES,
    &cql::BULK_RUN,
    &dynamodb::SEGMENTS,
    &dynamodb::STREAM,
    &parquet::FILES,
    &parquet::VERSIONS,
    &mysql::RANGES,
    &s3export::FILES,
    &csv::FILES,
    &csv::VERSIONS,
    &csv::JSON_FILES,
    &csv::JSON_VERSIONS,
];

/// The source of a job.
// One per job: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum SourceConfig {
    /// A Cassandra or ScyllaDB table (`type: cassandra` or `type: scylla`).
    Cql(cql::CqlSource),
    /// A DynamoDB or Alternator table (`type: dynamodb`, `dynamo` or `alternator`).
    Dynamo(dynamodb::DynamoSource),
    /// Parquet files on disk or in S3 (`type: parquet`).
    Parquet(parquet::ParquetSource),
    /// A MySQL or MariaDB table (`type: mysql`).
    Mysql(mysql::MysqlSource),
    /// A DynamoDB S3 export (`type: dynamodb-s3-export`).
    S3Export(s3export::ExportSource),
    /// CSV or JSON files on disk or in S3 (`type: csv`, `type: json`; drover's own).
    Csv(csv::CsvSource),
}

/// The target of a job.
// One per job: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum TargetConfig {
    /// A Cassandra or ScyllaDB table (`type: cassandra` or `type: scylla`).
    Cql(cql::CqlTarget),
    /// A DynamoDB or Alternator table (`type: dynamodb`, `dynamo` or `alternator`).
    Dynamo(dynamodb::DynamoTarget),
    /// Parquet files on disk or in S3 (`type: parquet`).
    Parquet(parquet::ParquetTarget),
    /// A DynamoDB S3 export on disk or in S3 (`type: dynamodb-s3-export`).
    S3Export(s3export::ExportTarget),
    /// CSV or JSON files on disk or in S3 (`type: csv`, `type: json`; drover's own).
    Csv(csv::CsvTarget),
}

/// The `source.type` values drover reads (ScyllaDB Migrator's, then drover's own), for
/// messages.
const SOURCES: &[&str] = &[
    "cassandra",
    "scylla",
    "dynamodb",
    "dynamo",
    "alternator",
    "parquet",
    "mysql",
    "dynamodb-s3-export",
    "csv",
    "json",
];

/// The `target.type` values drover writes to (ScyllaDB Migrator's, then drover's own), for
/// messages.
const TARGETS: &[&str] = &[
    "cassandra",
    "scylla",
    "dynamodb",
    "dynamo",
    "alternator",
    "parquet",
    "dynamodb-s3-export",
    "csv",
    "json",
];

impl SourceConfig {
    /// Reads the `source` section with the connector its `type` names.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        match side_type(text, "source", &value)?.as_str() {
            "cassandra" | "scylla" => Ok(Self::Cql(cql::CqlSource::parse(text, value)?)),
            "dynamodb" | "dynamo" | "alternator" => {
                Ok(Self::Dynamo(dynamodb::DynamoSource::parse(text, value)?))
            }
            "parquet" => Ok(Self::Parquet(parquet::ParquetSource::parse(text, value)?)),
            "mysql" => Ok(Self::Mysql(mysql::MysqlSource::parse(text, value)?)),
            "dynamodb-s3-export" => Ok(Self::S3Export(s3export::ExportSource::parse(text, value)?)),
            "csv" => Ok(Self::Csv(csv::CsvSource::parse(
                text,
                value,
                csv::Format::Csv,
            )?)),
            "json" => Ok(Self::Csv(csv::CsvSource::parse(
                text,
                value,
                csv::Format::Json,
            )?)),
            other => Err(unsupported(text, "source.type", other, SOURCES)),
        }
    }
}

impl TargetConfig {
    /// Reads the `target` section with the connector its `type` names.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        match side_type(text, "target", &value)?.as_str() {
            "cassandra" | "scylla" => Ok(Self::Cql(cql::CqlTarget::parse(text, value)?)),
            "dynamodb" | "dynamo" | "alternator" => {
                Ok(Self::Dynamo(dynamodb::DynamoTarget::parse(text, value)?))
            }
            "parquet" => Ok(Self::Parquet(parquet::ParquetTarget::parse(text, value)?)),
            "dynamodb-s3-export" => Ok(Self::S3Export(s3export::ExportTarget::parse(text, value)?)),
            "csv" => Ok(Self::Csv(csv::CsvTarget::parse(
                text,
                value,
                csv::Format::Csv,
            )?)),
            "json" => Ok(Self::Csv(csv::CsvTarget::parse(
                text,
                value,
                csv::Format::Json,
            )?)),
            other => Err(unsupported(text, "target.type", other, TARGETS)),
        }
    }
}

impl SourceConfig {
    /// The connector's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cql(_) => "cassandra/scylla",
            Self::Dynamo(_) => "dynamodb",
            Self::Parquet(_) => "parquet",
            Self::Mysql(_) => "mysql",
            Self::S3Export(_) => "dynamodb-s3-export",
            Self::Csv(s) => s.format.name(),
        }
    }
}

impl TargetConfig {
    /// The connector's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cql(_) => "cassandra/scylla",
            Self::Dynamo(_) => "dynamodb",
            Self::Parquet(_) => "parquet",
            Self::S3Export(_) => "dynamodb-s3-export",
            Self::Csv(t) => t.format.name(),
        }
    }
}

impl SourceConfig {
    /// Where the job reads, in words for job names and lists: keyspace and table, table,
    /// database and table, or path — never a host, a credential or a query string.
    pub fn describe(&self) -> String {
        match self {
            Self::Cql(s) => s.endpoint.describe(),
            Self::Dynamo(s) => s.connection.describe(),
            Self::Parquet(s) => s.location.describe("parquet"),
            Self::Mysql(s) => s.describe(),
            Self::S3Export(s) => s.describe(),
            Self::Csv(s) => s.location.describe(s.format.name()),
        }
    }

    /// The progress keys a job file may give for this source: the work it says is complete.
    pub fn progress_keys(&self) -> &'static [&'static Key] {
        use crate::savepoints::TOKEN_RANGES;
        static CQL: &[&Key] = &[&TOKEN_RANGES];
        static DYNAMO: &[&Key] = &[&TOKEN_RANGES, &dynamodb::SEGMENTS];
        static PARQUET: &[&Key] = &[&TOKEN_RANGES, &parquet::FILES];
        static MYSQL: &[&Key] = &[&TOKEN_RANGES, &mysql::RANGES];
        static EXPORT: &[&Key] = &[&TOKEN_RANGES, &s3export::FILES];
        static CSV: &[&Key] = &[&TOKEN_RANGES, &csv::FILES];
        static JSON: &[&Key] = &[&TOKEN_RANGES, &csv::JSON_FILES];
        match self {
            Self::Cql(_) => CQL,
            Self::Dynamo(_) => DYNAMO,
            Self::Parquet(_) => PARQUET,
            Self::Mysql(_) => MYSQL,
            Self::S3Export(_) => EXPORT,
            Self::Csv(s) if s.format == csv::Format::Json => JSON,
            Self::Csv(_) => CSV,
        }
    }

    /// Refuses work a job file says is complete that this source cannot have done.
    pub fn check_progress(
        &self,
        text: &str,
        done: &crate::savepoints::Progress,
    ) -> Result<(), JobConfigError> {
        match self {
            Self::Dynamo(s) => s.check_progress(text, done),
            _ => Ok(()),
        }
    }

    /// Why this source cannot be read by several daemons sharing the job (`coordination`),
    /// when it cannot.
    pub fn unshareable(&self) -> Option<&'static str> {
        match self {
            Self::Cql(s) if s.bulk_read == cql::config::BulkRead::Snapshot => Some(
                "cannot share a job read from a snapshot (source.bulkRead: snapshot) between daemons: each would read the whole snapshot; run it in one daemon, or read with CQL",
            ),
            _ => None,
        }
    }
}

/// The table a shared job's units are kept in by default (`coordination.table`).
pub use cql::coordination::DEFAULT_TABLE as COORDINATION_TABLE;

impl TargetConfig {
    /// The keyspace a target keeps drover's own tables in by default (target-table
    /// savepoints, coordination): the job's keyspace, as the target's statements resolve its
    /// name. `None` for a target that keeps no tables of drover's.
    pub fn own_tables_keyspace(&self) -> Option<String> {
        match self {
            Self::Cql(t) => Some(cql::schema::resolve_name(&t.endpoint.keyspace)),
            _ => None,
        }
    }

    /// The target's table of savepoints `t` for `job_id`, through a session of its own;
    /// `Ok(None)` for a target that keeps no savepoints (refused by the job's parser).
    pub async fn savepoint_table(
        &self,
        t: &crate::savepoints::location::TableTarget,
        job_id: &str,
    ) -> Result<Option<Box<dyn seam::SavepointTable>>, String> {
        match self {
            Self::Cql(target) => {
                let session = cql::connect("target", &target.endpoint)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Some(Box::new(cql::savepoints::TableOpener::new(
                    std::sync::Arc::new(session),
                    t,
                    job_id,
                ))))
            }
            _ => Ok(None),
        }
    }

    /// The coordinator of a job shared by several daemons, on table `keyspace.table` of the
    /// target, for `job_id`, with leases of `lease`. A table that cannot serve is a
    /// [`SeamError::Config`](seam::SeamError::Config) naming its `coordination.` key, or
    /// [`SeamError::Failed`](seam::SeamError::Failed).
    pub async fn coordinator(
        &self,
        keyspace: &str,
        table: &str,
        job_id: &str,
        lease: std::time::Duration,
    ) -> Result<std::sync::Arc<dyn seam::Coordinator>, seam::SeamError> {
        let Self::Cql(target) = self else {
            return Err(seam::SeamError::Config(crate::jobfile::JobConfigError {
                message: format!(
                    "coordination: a {} target cannot share a job between daemons",
                    self.kind()
                ),
                line: None,
            }));
        };
        let session = cql::connect("target", &target.endpoint).await?;
        let opened = cql::coordination::TableCoordinator::open(
            std::sync::Arc::new(session),
            keyspace,
            table,
            job_id,
            lease,
        )
        .await;
        match opened {
            Ok(c) => Ok(std::sync::Arc::new(c)),
            Err(message) if message.starts_with("coordination.") => {
                Err(seam::SeamError::Config(crate::jobfile::JobConfigError {
                    message,
                    line: None,
                }))
            }
            Err(message) => Err(seam::SeamError::Failed(message)),
        }
    }

    /// Where the job writes, in words for job names and lists (see
    /// [`SourceConfig::describe`]).
    pub fn describe(&self) -> String {
        match self {
            Self::Cql(t) => t.endpoint.describe(),
            Self::Dynamo(t) => t.connection.describe(),
            Self::Parquet(t) => t.location.describe("parquet"),
            Self::S3Export(t) => t.location.describe("s3-export"),
            Self::Csv(t) => t.location.describe(t.format.name()),
        }
    }
}

/// Refuses a source and target no connector pair can copy between.
pub fn check_pair(
    text: &str,
    source: &SourceConfig,
    target: &TargetConfig,
) -> Result<(), JobConfigError> {
    match (source, target) {
        (SourceConfig::Dynamo(s), TargetConfig::Dynamo(t))
            if s.connection.alternator && t.stream_changes =>
        {
            Err(JobConfigError::at(
                text,
                "target.streamChanges",
                "true is not supported with a source of type alternator: Alternator tables have no DynamoDB Streams",
            ))
        }
        (source, TargetConfig::Cql(t))
            if t.bulk_write == cql::config::BulkWrite::Sstable
                && !matches!(source, SourceConfig::Cql(_)) =>
        {
            Err(JobConfigError::at(
                text,
                "target.bulkWrite",
                format!(
                    "sstable needs a cassandra/scylla source (it writes a token range's rows as they are read, in token order); a {} source loads with CQL writes",
                    source.kind()
                ),
            ))
        }
        (SourceConfig::S3Export(_), TargetConfig::Dynamo(t)) if t.stream_changes => {
            Err(JobConfigError::at(
                text,
                "target.streamChanges",
                "true is not supported with a source of type dynamodb-s3-export: an export has no change stream",
            ))
        }
        (SourceConfig::Cql(_), TargetConfig::Cql(_))
        | (SourceConfig::Dynamo(_), TargetConfig::Dynamo(_))
        | (SourceConfig::S3Export(_), TargetConfig::Dynamo(_))
        | (SourceConfig::Parquet(_), TargetConfig::Cql(_))
        | (SourceConfig::Mysql(_), TargetConfig::Cql(_))
        | (SourceConfig::Dynamo(_), TargetConfig::S3Export(_))
        | (SourceConfig::Cql(_), TargetConfig::Parquet(_))
        | (SourceConfig::Cql(_), TargetConfig::Csv(_))
        | (SourceConfig::Csv(_), TargetConfig::Cql(_)) => Ok(()),
        _ => Err(JobConfigError::at(
            text,
            "target.type",
            format!(
                "a {} target cannot take rows of a {} source; supported pairs: cassandra/scylla to cassandra/scylla, dynamodb/alternator to dynamodb/alternator, parquet to cassandra/scylla, cassandra/scylla to parquet, mysql to cassandra/scylla, dynamodb-s3-export to dynamodb/alternator, dynamodb/alternator to dynamodb-s3-export, cassandra/scylla to csv or json, csv or json to cassandra/scylla",
                target.kind(),
                source.kind()
            ),
        )),
    }
}

fn unsupported(text: &str, key: &str, value: &str, migrator: &[&str]) -> JobConfigError {
    let value = crate::answer::cap(value);
    let expected = migrator.join(", ");
    if key == "target.type" && SOURCES.contains(&value.as_ref()) {
        JobConfigError::at(
            text,
            key,
            format!("{value:?} is a source type only; expected {expected}"),
        )
    } else {
        JobConfigError::at(
            text,
            key,
            format!("unknown type {value:?}, expected {expected}"),
        )
    }
}

fn side_type(text: &str, side: &str, value: &yaml_serde::Value) -> Result<String, JobConfigError> {
    let key = format!("{side}.type");
    match value.get("type") {
        Some(yaml_serde::Value::String(t)) => Ok(t.clone()),
        Some(_) => Err(JobConfigError::at(
            text,
            &key,
            "must be a string such as cassandra or scylla",
        )),
        None if value.is_mapping() => Err(JobConfigError {
            message: format!("{key}: missing; expected cassandra, scylla, dynamodb or alternator"),
            line: yaml::line_of(text, side),
        }),
        None => Err(JobConfigError::at(
            text,
            side,
            "must be a mapping with a type",
        )),
    }
}

/// What a migration asks of the registry besides its two sides.
pub struct CopyRequest<'a> {
    /// Column renames, source name to target name.
    pub renames: &'a [crate::jobfile::Rename],
    /// The job's savepoints, when it has them.
    pub savepoints: Option<&'a crate::jobfile::SavepointsConfig>,
    /// How long one request is retried (`retryForSeconds`).
    pub retry_for: std::time::Duration,
    /// The work already complete (the job's skip lists and the savepoint resumed from); a
    /// connector may record in it what a resume must know (a bulk load's id, stream
    /// positions).
    pub done: &'a mut crate::savepoints::Progress,
}

/// Opens both sides of a migration from `source` to `target`, checks their schemas and
/// prepares its writes, and hands the scan and the sink to `maker`: each source/target pair a
/// connector supports is one arm here, the only place that knows which pairs exist. Nothing is
/// written to the target's rows.
pub async fn open_copy<M: seam::CopyMaker>(
    source: &SourceConfig,
    target: &TargetConfig,
    request: CopyRequest<'_>,
    maker: &M,
) -> Result<seam::OpenedCopy<M::Copy>, seam::SeamError> {
    let CopyRequest {
        renames,
        savepoints,
        retry_for,
        done,
    } = request;
    let copy = |copy| seam::OpenedCopy {
        copy: Some(copy),
        changes: None,
    };
    Ok(match (source, target) {
        (SourceConfig::Cql(src), TargetConfig::Cql(dst))
            if dst.bulk_write == cql::config::BulkWrite::Sstable =>
        {
            // The load this run belongs to: the resumed savepoint's, else a new one,
            // recorded from the first savepoint on.
            let run = done.id_or_insert_with(&cql::BULK_RUN, || uuid::Uuid::now_v7().to_string());
            let (scan, sink, pacing) =
                cql::bulk::open_bulk_copy(src, dst, renames, &run, retry_for).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::Cql(src), TargetConfig::Cql(dst)) => {
            let (scan, sink, pacing) = cql::transfer::open_copy(src, dst, renames).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::Dynamo(src), TargetConfig::Dynamo(dst)) => {
            let opened = dynamodb::transfer::open_copy(src, dst, renames, done).await?;
            let changes = opened
                .replication
                .map(|r| std::sync::Arc::new(r) as std::sync::Arc<dyn seam::Changes>);
            if dst.skip_initial_snapshot_transfer {
                tracing::info!(
                    "skipInitialSnapshotTransfer: the table is not copied, only its changes are applied"
                );
                return Ok(seam::OpenedCopy {
                    copy: None,
                    changes,
                });
            }
            seam::OpenedCopy {
                copy: Some(maker.make(opened.scan, opened.sink, opened.pacing, done)),
                changes,
            }
        }
        (SourceConfig::Parquet(src), TargetConfig::Cql(dst)) => {
            let (scan, sink, pacing) =
                parquet::load::open_load(src, dst, renames, savepoints).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::Mysql(src), TargetConfig::Cql(dst)) => {
            let (scan, sink, pacing) = mysql::scan::open_load(src, dst, renames).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::S3Export(src), TargetConfig::Dynamo(dst)) => {
            let (scan, sink, pacing) = s3export::read::open_load(src, dst, renames).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::Dynamo(src), TargetConfig::S3Export(dst)) => {
            let (scan, sink, pacing) =
                s3export::write::open_export(src, dst, renames, done).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::Cql(src), TargetConfig::Csv(dst)) => {
            match csv::unload::open_unload(src, dst, renames, done).await? {
                csv::unload::Opened::Copy(opened) => {
                    let (scan, sink, pacing) = *opened;
                    copy(maker.make(scan, sink, pacing, done))
                }
                csv::unload::Opened::Ignore => seam::OpenedCopy {
                    copy: None,
                    changes: None,
                },
            }
        }
        (SourceConfig::Csv(src), TargetConfig::Cql(dst)) => {
            let (scan, sink, pacing) = csv::load::open_load(src, dst, renames).await?;
            copy(maker.make(scan, sink, pacing, done))
        }
        (SourceConfig::Cql(src), TargetConfig::Parquet(dst)) => {
            match parquet::export::open_export(src, dst, renames, done).await? {
                parquet::export::Opened::Copy(opened) => {
                    let (scan, sink, pacing) = *opened;
                    copy(maker.make(scan, sink, pacing, done))
                }
                parquet::export::Opened::Ignore => seam::OpenedCopy {
                    copy: None,
                    changes: None,
                },
            }
        }
        (source, target) => {
            return Err(seam::SeamError::Config(JobConfigError {
                message: format!(
                    "copying from a {} source to a {} target is not supported",
                    source.kind(),
                    target.kind()
                ),
                line: None,
            }));
        }
    })
}

/// Opens both tables of a validation of a copy from `source` to `target`, checks their schemas
/// as a migration would, and hands the comparison of their rows to `maker`: one arm per pair a
/// connector can compare. Nothing is written.
pub async fn open_comparison<M: seam::compare::ComparisonMaker>(
    source: &SourceConfig,
    target: &TargetConfig,
    renames: &[crate::jobfile::Rename],
    validation: &crate::jobfile::ValidationConfig,
    maker: &M,
) -> Result<M::Comparison, seam::SeamError> {
    Ok(match (source, target) {
        (SourceConfig::Cql(src), TargetConfig::Cql(dst)) => {
            maker.merged(cql::compare::prepare(src, dst, renames, validation).await?)
        }
        (SourceConfig::Dynamo(src), TargetConfig::Dynamo(dst)) => {
            maker.looked_up(dynamodb::compare::prepare(src, dst, renames, validation).await?)
        }
        (SourceConfig::Mysql(src), TargetConfig::Cql(dst)) => {
            maker.looked_up(mysql::compare::prepare(src, dst, renames, validation).await?)
        }
        (source, target) => {
            return Err(seam::SeamError::Config(JobConfigError {
                message: format!(
                    "validating a copy from a {} source to a {} target is not supported yet",
                    source.kind(),
                    target.kind()
                ),
                line: None,
            }));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key once; ScyllaDB Migrator's three always written, drover's own only when they
    /// record something; a job file's keys for a source are keys savepoints read back.
    #[test]
    fn the_progress_keys_are_each_declared_once_and_migrators_are_always_written() {
        let mut names: Vec<&str> = PROGRESS_KEYS.iter().map(|k| k.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a key declared twice: {names:?}");
        let always: Vec<&str> = PROGRESS_KEYS
            .iter()
            .filter(|k| k.always)
            .map(|k| k.name)
            .collect();
        assert_eq!(
            always,
            ["skipTokenRanges", "skipSegments", "skipParquetFiles"],
            "Migrator's savepoints hold exactly these"
        );
        let sources = [
            "type: cassandra\nhost: h\nkeyspace: k\ntable: t\n",
            "type: dynamodb\ntable: t\nregion: us-east-1\n",
            "type: parquet\npath: /tmp/p\n",
            "type: mysql\nhost: h\ndatabase: d\ntable: t\ncredentials: {username: u, password: p}\n",
            "type: csv\npath: /tmp/c\n",
            "type: json\npath: /tmp/j\n",
            "type: dynamodb-s3-export\nbucket: b\nmanifestKey: m\ntableDescription: {attributeDefinitions: [{name: k, type: S}], keySchema: [{name: k, type: HASH}]}\n",
        ];
        for text in sources {
            let value: yaml_serde::Value = yaml_serde::from_str(text).unwrap();
            let source = SourceConfig::parse(text, value).unwrap_or_else(|e| panic!("{text}: {e}"));
            for key in source.progress_keys() {
                assert!(
                    PROGRESS_KEYS.iter().any(|k| std::ptr::eq(*k, *key)),
                    "{}: {} is not in PROGRESS_KEYS",
                    source.kind(),
                    key.name
                );
            }
        }
    }
}
