//! The Parquet connector's registration: `type: parquet` on both sides, Parquet → CQL (load)
//! and CQL → Parquet (export).

use super::{ParquetSource, ParquetTarget};
use crate::connectors::cql::{CqlSource, CqlTarget};
use crate::connectors::registry::{self, Connector, CopyRequest, Opened, Pair, Source, Target};
use crate::connectors::seam;
use crate::connectors::{SourceConfig, TargetConfig};
use crate::savepoints::{Key, TOKEN_RANGES};

/// The Parquet connector (files on disk, S3 or GCS).
pub struct Parquet;

impl Connector for Parquet {
    const SOURCES: &'static [(&'static str, registry::ParseSource)] = &[("parquet", |text, value| {
        ParquetSource::parse(text, value).map(SourceConfig::new)
    })];
    const TARGETS: &'static [(&'static str, registry::ParseTarget)] = &[("parquet", |text, value| {
        ParquetTarget::parse(text, value).map(TargetConfig::new)
    })];
    const KEYS: &'static [&'static Key] = &[&super::FILES, &super::VERSIONS];
    const PAIRS: &'static [Pair] = &[
        Pair::of::<ParquetSource, CqlTarget>("parquet to cassandra/scylla"),
        Pair::of::<CqlSource, ParquetTarget>("cassandra/scylla to parquet"),
    ];

    async fn open_copy<M: seam::CopyMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &mut CopyRequest<'_>,
        maker: &M,
    ) -> Opened<seam::OpenedCopy<M::Copy>> {
        if let (Some(src), Some(dst)) = (source.get::<ParquetSource>(), target.get::<CqlTarget>()) {
            let opened = super::load::open_load(src, dst, request.renames, request.savepoints).await;
            return Some(opened.map(|parts| registry::made(maker, parts, request.done)));
        }
        let (src, dst) = (source.get::<CqlSource>()?, target.get::<ParquetTarget>()?);
        let opened = super::export::open_export(src, dst, request.renames, request.done).await;
        Some(opened.map(|opened| match opened {
            super::export::Opened::Copy(parts) => registry::made(maker, *parts, request.done),
            super::export::Opened::Ignore => registry::nothing(),
        }))
    }
}

impl Source for ParquetSource {
    fn kind(&self) -> &'static str {
        "parquet"
    }

    fn describe(&self) -> String {
        self.location.describe("parquet")
    }

    fn progress_keys(&self) -> &'static [&'static Key] {
        {
            static KEYS: &[&Key] = &[&TOKEN_RANGES, &super::FILES];
            KEYS
        }
    }
}

impl Target for ParquetTarget {
    fn kind(&self) -> &'static str {
        "parquet"
    }

    fn describe(&self) -> String {
        self.location.describe("parquet")
    }
}
