//! The DynamoDB connector's registration: `type: dynamodb`, `dynamo` and `alternator` on both
//! sides, the DynamoDB → DynamoDB copy with its change stream, and its comparison.

use super::{DynamoSource, DynamoTarget};
use crate::connectors::registry::{
    self, CompareRequest, Connector, CopyRequest, Opened, Pair, Source, Target,
};
use crate::connectors::seam::{self, SeamError};
use crate::connectors::{SourceConfig, TargetConfig};
use crate::jobfile::JobConfigError;
use crate::savepoints::{Key, Progress, TOKEN_RANGES};

/// The DynamoDB connector (DynamoDB, ScyllaDB Alternator).
pub struct Dynamo;

impl Connector for Dynamo {
    const SOURCES: &'static [(&'static str, registry::ParseSource)] = &[
        ("dynamodb", parse_source),
        ("dynamo", parse_source),
        ("alternator", parse_source),
    ];
    const TARGETS: &'static [(&'static str, registry::ParseTarget)] = &[
        ("dynamodb", parse_target),
        ("dynamo", parse_target),
        ("alternator", parse_target),
    ];
    const KEYS: &'static [&'static Key] = &[&super::SEGMENTS, &super::STREAM];
    const PAIRS: &'static [Pair] = &[Pair::of::<DynamoSource, DynamoTarget>(
        "dynamodb/alternator to dynamodb/alternator",
    )
    .checked(check_streams)];

    async fn open_copy<M: seam::CopyMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &mut CopyRequest<'_>,
        maker: &M,
    ) -> Opened<seam::OpenedCopy<M::Copy>> {
        let (src, dst) = (source.get::<DynamoSource>()?, target.get::<DynamoTarget>()?);
        Some(open(src, dst, request, maker).await)
    }

    async fn open_comparison<M: seam::compare::ComparisonMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &CompareRequest<'_>,
        maker: &M,
    ) -> Opened<M::Comparison> {
        let (src, dst) = (source.get::<DynamoSource>()?, target.get::<DynamoTarget>()?);
        Some(
            super::compare::prepare(src, dst, request.renames, request.validation)
                .await
                .map(|sides| maker.looked_up(sides)),
        )
    }
}

async fn open<M: seam::CopyMaker>(
    src: &DynamoSource,
    dst: &DynamoTarget,
    request: &mut CopyRequest<'_>,
    maker: &M,
) -> Result<seam::OpenedCopy<M::Copy>, SeamError> {
    let opened = super::transfer::open_copy(src, dst, request.renames, request.done).await?;
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
    let parts = (opened.scan, opened.sink, opened.pacing);
    Ok(seam::OpenedCopy {
        changes,
        ..registry::made(maker, parts, request.done)
    })
}

/// Alternator tables have no DynamoDB Streams to replicate from.
fn check_streams(text: &str, source: &dyn Source, target: &dyn Target) -> Result<(), JobConfigError> {
    let alternator =
        registry::source_as::<DynamoSource>(source).is_some_and(|s| s.connection.alternator);
    let streams = registry::target_as::<DynamoTarget>(target).is_some_and(|t| t.stream_changes);
    if alternator && streams {
        return Err(JobConfigError::at(
            text,
            "target.streamChanges",
            "true is not supported with a source of type alternator: Alternator tables have no DynamoDB Streams",
        ));
    }
    Ok(())
}

fn parse_source(text: &str, value: yaml_serde::Value) -> Result<SourceConfig, JobConfigError> {
    DynamoSource::parse(text, value).map(SourceConfig::new)
}

fn parse_target(text: &str, value: yaml_serde::Value) -> Result<TargetConfig, JobConfigError> {
    DynamoTarget::parse(text, value).map(TargetConfig::new)
}

impl Source for DynamoSource {
    fn kind(&self) -> &'static str {
        "dynamodb"
    }

    fn describe(&self) -> String {
        self.connection.describe()
    }

    fn progress_keys(&self) -> &'static [&'static Key] {
        {
            static KEYS: &[&Key] = &[&TOKEN_RANGES, &super::SEGMENTS];
            KEYS
        }
    }

    fn check_progress(&self, text: &str, done: &Progress) -> Result<(), JobConfigError> {
        DynamoSource::check_progress(self, text, done)
    }
}

impl Target for DynamoTarget {
    fn kind(&self) -> &'static str {
        "dynamodb"
    }

    fn describe(&self) -> String {
        self.connection.describe()
    }
}
