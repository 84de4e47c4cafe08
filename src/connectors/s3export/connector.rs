//! The DynamoDB S3 export connector's registration: `type: dynamodb-s3-export` on both
//! sides, an export → DynamoDB (load) and DynamoDB → an export.

use super::{ExportSource, ExportTarget};
use crate::connectors::dynamodb::{DynamoSource, DynamoTarget};
use crate::connectors::registry::{self, Connector, CopyRequest, Opened, Pair, Source, Target};
use crate::connectors::seam;
use crate::connectors::{SourceConfig, TargetConfig};
use crate::jobfile::JobConfigError;
use crate::savepoints::{Key, TOKEN_RANGES};

/// The connector of DynamoDB's S3 exports (the `DYNAMODB_JSON` format).
pub struct S3Export;

impl Connector for S3Export {
    const SOURCES: &'static [(&'static str, registry::ParseSource)] =
        &[("dynamodb-s3-export", |text, value| {
            ExportSource::parse(text, value).map(SourceConfig::new)
        })];
    const TARGETS: &'static [(&'static str, registry::ParseTarget)] =
        &[("dynamodb-s3-export", |text, value| {
            ExportTarget::parse(text, value).map(TargetConfig::new)
        })];
    const KEYS: &'static [&'static Key] = &[&super::FILES];
    const PAIRS: &'static [Pair] = &[
        Pair::of::<ExportSource, DynamoTarget>("dynamodb-s3-export to dynamodb/alternator")
            .checked(check_streams),
        Pair::of::<DynamoSource, ExportTarget>("dynamodb/alternator to dynamodb-s3-export"),
    ];

    async fn open_copy<M: seam::CopyMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &mut CopyRequest<'_>,
        maker: &M,
    ) -> Opened<seam::OpenedCopy<M::Copy>> {
        if let (Some(src), Some(dst)) = (source.get::<ExportSource>(), target.get::<DynamoTarget>())
        {
            let opened = super::read::open_load(src, dst, request.renames).await;
            return Some(opened.map(|parts| registry::made(maker, parts, request.done)));
        }
        let (src, dst) = (source.get::<DynamoSource>()?, target.get::<ExportTarget>()?);
        let opened = super::write::open_export(src, dst, request.renames, request.done).await;
        Some(opened.map(|parts| registry::made(maker, parts, request.done)))
    }
}

/// An export has no change stream to replicate from.
fn check_streams(text: &str, _: &dyn Source, target: &dyn Target) -> Result<(), JobConfigError> {
    let streams = registry::target_as::<DynamoTarget>(target).is_some_and(|t| t.stream_changes);
    if streams {
        return Err(JobConfigError::at(
            text,
            "target.streamChanges",
            "true is not supported with a source of type dynamodb-s3-export: an export has no change stream",
        ));
    }
    Ok(())
}

impl Source for ExportSource {
    fn kind(&self) -> &'static str {
        "dynamodb-s3-export"
    }

    fn describe(&self) -> String {
        ExportSource::describe(self)
    }

    fn progress_keys(&self) -> &'static [&'static Key] {
        {
            static KEYS: &[&Key] = &[&TOKEN_RANGES, &super::FILES];
            KEYS
        }
    }
}

impl Target for ExportTarget {
    fn kind(&self) -> &'static str {
        "dynamodb-s3-export"
    }

    fn describe(&self) -> String {
        self.location.describe("s3-export")
    }
}
