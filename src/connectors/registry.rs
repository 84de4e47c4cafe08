//! What a connector declares to be registered: the `type` names it reads and writes with the
//! parser of each, the savepoint keys it records its work under, the source/target pairs it
//! copies and compares, and what each of its two sides answers about itself ([`Source`],
//! [`Target`]). The engine sees a job's sides only through these traits; nothing here or
//! above names a connector.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::seam;
use crate::jobfile::JobConfigError;
use crate::savepoints::{Key, Progress};

/// The source side of a job, parsed by its connector.
pub trait Source: Any + std::fmt::Debug + Send + Sync {
    /// The connector's name, for messages (`cassandra/scylla`, `csv` ...).
    fn kind(&self) -> &'static str;

    /// Where the job reads, in words for job names and lists: keyspace and table, table,
    /// database and table, or path — never a host, a credential or a query string.
    fn describe(&self) -> String;

    /// The progress keys a job file may give for this source: the work it says is complete.
    fn progress_keys(&self) -> &'static [&'static Key];

    /// Refuses work a job file says is complete that this source cannot have done.
    fn check_progress(&self, _text: &str, _done: &Progress) -> Result<(), JobConfigError> {
        Ok(())
    }

    /// Why this source cannot be read by several daemons sharing the job (`coordination`),
    /// when it cannot.
    fn unshareable(&self) -> Option<&'static str> {
        None
    }
}

/// The target side of a job, parsed by its connector.
pub trait Target: Any + std::fmt::Debug + Send + Sync {
    /// The connector's name, for messages.
    fn kind(&self) -> &'static str;

    /// Where the job writes, in words for job names and lists (see [`Source::describe`]).
    fn describe(&self) -> String;

    /// Refuses, with the settings this target was given, a source whatever the pair (a CQL
    /// target that writes SSTables takes only a CQL source).
    fn check_source(&self, _text: &str, _source: &dyn Source) -> Result<(), JobConfigError> {
        Ok(())
    }

    /// The keyspace a target keeps drover's own tables in by default (target-table
    /// savepoints, coordination): `None` for a target that keeps no tables of drover's.
    fn own_tables_keyspace(&self) -> Option<String> {
        None
    }

    /// The target's table of savepoints `table` for `job_id`, through a session of its own;
    /// `Ok(None)` for a target that keeps no savepoints (refused by the job's parser).
    fn savepoint_table<'a>(
        &'a self,
        _table: &'a crate::savepoints::location::TableTarget,
        _job_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Box<dyn seam::SavepointTable>>, String>> {
        Box::pin(async { Ok(None) })
    }

    /// The coordinator of a job shared by several daemons, on table `keyspace.table` of the
    /// target, for `job_id`, with leases of `lease`. A table that cannot serve is a
    /// [`SeamError::Config`](seam::SeamError::Config) naming its `coordination.` key, or
    /// [`SeamError::Failed`](seam::SeamError::Failed).
    fn coordinator<'a>(
        &'a self,
        _keyspace: &'a str,
        _table: &'a str,
        _job_id: &'a str,
        _lease: Duration,
    ) -> BoxFuture<'a, Result<Arc<dyn seam::Coordinator>, seam::SeamError>> {
        let message = format!(
            "coordination: a {} target cannot share a job between daemons",
            self.kind()
        );
        Box::pin(async move {
            Err(seam::SeamError::Config(JobConfigError {
                message,
                line: None,
            }))
        })
    }
}

/// The source of a job: whichever connector's its `type` names.
#[derive(Debug, Clone)]
pub struct SourceConfig(Arc<dyn Source>);

/// The target of a job: whichever connector's its `type` names.
#[derive(Debug, Clone)]
pub struct TargetConfig(Arc<dyn Target>);

impl SourceConfig {
    /// A source parsed by its connector.
    pub fn new(source: impl Source) -> Self {
        Self(Arc::new(source))
    }

    /// The source as its connector's type `S`, when it is one.
    pub fn get<S: Source>(&self) -> Option<&S> {
        source_as(&*self.0)
    }
}

impl TargetConfig {
    /// A target parsed by its connector.
    pub fn new(target: impl Target) -> Self {
        Self(Arc::new(target))
    }

    /// The target as its connector's type `T`, when it is one.
    pub fn get<T: Target>(&self) -> Option<&T> {
        target_as(&*self.0)
    }
}

impl std::ops::Deref for SourceConfig {
    type Target = dyn Source;
    fn deref(&self) -> &dyn Source {
        &*self.0
    }
}

impl std::ops::Deref for TargetConfig {
    type Target = dyn Target;
    fn deref(&self) -> &dyn Target {
        &*self.0
    }
}

/// Reads a `source` section of one `type`.
pub type ParseSource = fn(&str, yaml_serde::Value) -> Result<SourceConfig, JobConfigError>;
/// Reads a `target` section of one `type`.
pub type ParseTarget = fn(&str, yaml_serde::Value) -> Result<TargetConfig, JobConfigError>;

/// A source/target pair a connector copies between.
pub struct Pair {
    /// The pair in the operator's words, for the message that lists the supported pairs.
    pub words: &'static str,
    /// Whether a job's two sides are this pair.
    pub accepts: fn(&dyn Source, &dyn Target) -> bool,
    /// Refuses settings of the two sides that do not go together.
    pub check: fn(&str, &dyn Source, &dyn Target) -> Result<(), JobConfigError>,
}

impl Pair {
    /// The pair of a source of type `S` and a target of type `T`.
    pub const fn of<S: Source, T: Target>(words: &'static str) -> Self {
        Self {
            words,
            accepts: accepts::<S, T>,
            check: |_, _, _| Ok(()),
        }
    }

    /// The pair, with settings of its two sides checked by `check`.
    pub const fn checked(
        self,
        check: fn(&str, &dyn Source, &dyn Target) -> Result<(), JobConfigError>,
    ) -> Self {
        Self { check, ..self }
    }
}

fn accepts<S: Source, T: Target>(source: &dyn Source, target: &dyn Target) -> bool {
    source_as::<S>(source).is_some() && target_as::<T>(target).is_some()
}

/// A source as its connector's type `S`, when it is one.
pub fn source_as<S: Source>(source: &dyn Source) -> Option<&S> {
    (source as &dyn Any).downcast_ref()
}

/// A target as its connector's type `T`, when it is one.
pub fn target_as<T: Target>(target: &dyn Target) -> Option<&T> {
    (target as &dyn Any).downcast_ref()
}

/// What a migration asks of the registry besides its two sides.
pub struct CopyRequest<'a> {
    /// Column renames, source name to target name.
    pub renames: &'a [crate::jobfile::Rename],
    /// The job's savepoints, when it has them.
    pub savepoints: Option<&'a crate::jobfile::SavepointsConfig>,
    /// How long one request is retried (`retryForSeconds`).
    pub retry_for: Duration,
    /// The work already complete (the job's skip lists and the savepoint resumed from); a
    /// connector may record in it what a resume must know (a bulk load's id, stream
    /// positions).
    pub done: &'a mut Progress,
}

/// What a validation asks of the registry besides its two sides.
pub struct CompareRequest<'a> {
    /// Column renames, source name to target name.
    pub renames: &'a [crate::jobfile::Rename],
    /// The job's `validation` section.
    pub validation: &'a crate::jobfile::ValidationConfig,
}

/// The result of a connector asked to open a pair: `None` when the pair is not its own.
pub type Opened<T> = Option<Result<T, seam::SeamError>>;

/// A data system drover reads or writes. Everything is declared with a default of nothing, so
/// a connector states only what it has; registering it is one line in `connectors/mod.rs`.
pub trait Connector {
    /// The `source.type` names it reads, each with its parser (ScyllaDB Migrator's names
    /// first).
    const SOURCES: &'static [(&'static str, ParseSource)] = &[];
    /// The `target.type` names it writes, each with its parser.
    const TARGETS: &'static [(&'static str, ParseTarget)] = &[];
    /// The keys it records completed work under in job files and savepoints.
    const KEYS: &'static [&'static Key] = &[];
    /// The source/target pairs it copies between (each pair declared by one connector).
    const PAIRS: &'static [Pair] = &[];

    /// Opens both sides of a migration of one of its [`PAIRS`](Self::PAIRS), checks their
    /// schemas, prepares its writes and hands the scan and the sink to `maker`. Nothing is
    /// written to the target's rows.
    fn open_copy<M: seam::CopyMaker + Sync>(
        _source: &SourceConfig,
        _target: &TargetConfig,
        _request: &mut CopyRequest<'_>,
        _maker: &M,
    ) -> impl Future<Output = Opened<seam::OpenedCopy<M::Copy>>> + Send {
        async { None }
    }

    /// Opens both tables of a validation of a copy between one of its pairs, checks their
    /// schemas as a migration would, and hands the comparison of their rows to `maker`.
    /// Nothing is written.
    fn open_comparison<M: seam::compare::ComparisonMaker + Sync>(
        _source: &SourceConfig,
        _target: &TargetConfig,
        _request: &CompareRequest<'_>,
        _maker: &M,
    ) -> impl Future<Output = Opened<M::Comparison>> + Send {
        async { None }
    }
}

/// One copy of the pair's parts, for a connector's [`Connector::open_copy`].
pub fn made<M: seam::CopyMaker, S: seam::Scan, T: seam::Sink<S::Row>>(
    maker: &M,
    (scan, sink, pacing): (S, T, seam::Pacing),
    done: &Progress,
) -> seam::OpenedCopy<M::Copy> {
    seam::OpenedCopy {
        copy: Some(maker.make(scan, sink, pacing, done)),
        changes: None,
    }
}

/// Nothing to copy (an export whose savepoint says it is written, a target in `ignore` mode
/// that holds files already).
pub fn nothing<C>() -> seam::OpenedCopy<C> {
    seam::OpenedCopy {
        copy: None,
        changes: None,
    }
}
