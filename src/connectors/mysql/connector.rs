//! The MySQL connector's registration: `type: mysql` as a source, MySQL → CQL and its
//! comparison.

use super::MysqlSource;
use crate::connectors::cql::CqlTarget;
use crate::connectors::registry::{
    self, CompareRequest, Connector, CopyRequest, Opened, Pair, Source,
};
use crate::connectors::seam;
use crate::connectors::{SourceConfig, TargetConfig};
use crate::savepoints::{Key, TOKEN_RANGES};

/// The MySQL connector (MySQL, MariaDB).
pub struct Mysql;

impl Connector for Mysql {
    const SOURCES: &'static [(&'static str, registry::ParseSource)] = &[("mysql", |text, value| {
        MysqlSource::parse(text, value).map(SourceConfig::new)
    })];
    const KEYS: &'static [&'static Key] = &[&super::RANGES];
    const PAIRS: &'static [Pair] = &[Pair::of::<MysqlSource, CqlTarget>(
        "mysql to cassandra/scylla",
    )];

    async fn open_copy<M: seam::CopyMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &mut CopyRequest<'_>,
        maker: &M,
    ) -> Opened<seam::OpenedCopy<M::Copy>> {
        let (src, dst) = (source.get::<MysqlSource>()?, target.get::<CqlTarget>()?);
        let opened = super::scan::open_load(src, dst, request.renames).await;
        Some(opened.map(|parts| registry::made(maker, parts, request.done)))
    }

    async fn open_comparison<M: seam::compare::ComparisonMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &CompareRequest<'_>,
        maker: &M,
    ) -> Opened<M::Comparison> {
        let (src, dst) = (source.get::<MysqlSource>()?, target.get::<CqlTarget>()?);
        Some(
            super::compare::prepare(src, dst, request.renames, request.validation)
                .await
                .map(|sides| maker.looked_up(sides)),
        )
    }
}

impl Source for MysqlSource {
    fn kind(&self) -> &'static str {
        "mysql"
    }

    fn describe(&self) -> String {
        MysqlSource::describe(self)
    }

    fn progress_keys(&self) -> &'static [&'static Key] {
        {
            static KEYS: &[&Key] = &[&TOKEN_RANGES, &super::RANGES];
            KEYS
        }
    }
}
