//! The CSV/JSON connector's registration: `type: csv` and `type: json` on both sides, CQL →
//! files (unload) and files → CQL (load).

use super::{CsvSource, CsvTarget, Format};
use crate::connectors::cql::{CqlSource, CqlTarget};
use crate::connectors::registry::{self, Connector, CopyRequest, Opened, Pair, Source, Target};
use crate::connectors::seam;
use crate::connectors::{SourceConfig, TargetConfig};
use crate::savepoints::{Key, TOKEN_RANGES};

/// The connector of CSV and JSON files in DSBulk's formats.
pub struct Csv;

impl Connector for Csv {
    const SOURCES: &'static [(&'static str, registry::ParseSource)] = &[
        ("csv", |text, value| {
            CsvSource::parse(text, value, Format::Csv).map(SourceConfig::new)
        }),
        ("json", |text, value| {
            CsvSource::parse(text, value, Format::Json).map(SourceConfig::new)
        }),
    ];
    const TARGETS: &'static [(&'static str, registry::ParseTarget)] = &[
        ("csv", |text, value| {
            CsvTarget::parse(text, value, Format::Csv).map(TargetConfig::new)
        }),
        ("json", |text, value| {
            CsvTarget::parse(text, value, Format::Json).map(TargetConfig::new)
        }),
    ];
    const KEYS: &'static [&'static Key] = &[
        &super::FILES,
        &super::VERSIONS,
        &super::JSON_FILES,
        &super::JSON_VERSIONS,
    ];
    const PAIRS: &'static [Pair] = &[
        Pair::of::<CqlSource, CsvTarget>("cassandra/scylla to csv or json"),
        Pair::of::<CsvSource, CqlTarget>("csv or json to cassandra/scylla"),
    ];

    async fn open_copy<M: seam::CopyMaker + Sync>(
        source: &SourceConfig,
        target: &TargetConfig,
        request: &mut CopyRequest<'_>,
        maker: &M,
    ) -> Opened<seam::OpenedCopy<M::Copy>> {
        if let (Some(src), Some(dst)) = (source.get::<CsvSource>(), target.get::<CqlTarget>()) {
            let opened = super::load::open_load(src, dst, request.renames).await;
            return Some(opened.map(|parts| registry::made(maker, parts, request.done)));
        }
        let (src, dst) = (source.get::<CqlSource>()?, target.get::<CsvTarget>()?);
        let opened = super::unload::open_unload(src, dst, request.renames, request.done).await;
        Some(opened.map(|opened| match opened {
            super::unload::Opened::Copy(parts) => registry::made(maker, *parts, request.done),
            super::unload::Opened::Ignore => registry::nothing(),
        }))
    }
}

impl Source for CsvSource {
    fn kind(&self) -> &'static str {
        self.format.name()
    }

    fn describe(&self) -> String {
        self.location.describe(self.format.name())
    }

    fn progress_keys(&self) -> &'static [&'static Key] {
        match self.format {
            Format::Csv => {
                static KEYS: &[&Key] = &[&TOKEN_RANGES, &super::FILES];
                KEYS
            }
            Format::Json => {
                static KEYS: &[&Key] = &[&TOKEN_RANGES, &super::JSON_FILES];
                KEYS
            }
        }
    }
}

impl Target for CsvTarget {
    fn kind(&self) -> &'static str {
        self.format.name()
    }

    fn describe(&self) -> String {
        self.location.describe(self.format.name())
    }
}
