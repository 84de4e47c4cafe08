//! Connectors: one folder per data system, each holding everything that system needs (its
//! job-file sections, schema checks, scans, writers, value codec, error classification and
//! the [`Connector`] declaration that registers it). The engine (`migrate`) and the validator
//! drive them through the traits of [`seam`] and [`registry`].
//!
//! Registering a connector is one line in the list below: its folder and the type that
//! declares it.

macro_rules! connectors {
    ($($folder:ident::$connector:ident),* $(,)?) => {
        $(pub mod $folder;)*

        /// Every connector's `source.type` names with their parsers, in registration order.
        fn source_types() -> impl Iterator<Item = &'static (&'static str, registry::ParseSource)> {
            [$(<$folder::$connector as Connector>::SOURCES),*].into_iter().flatten()
        }

        /// Every connector's `target.type` names with their parsers.
        fn target_types() -> impl Iterator<Item = &'static (&'static str, registry::ParseTarget)> {
            [$(<$folder::$connector as Connector>::TARGETS),*].into_iter().flatten()
        }

        /// Every connector's savepoint keys.
        fn connector_keys() -> impl Iterator<Item = &'static &'static Key> {
            [$(<$folder::$connector as Connector>::KEYS),*].into_iter().flatten()
        }

        /// Every pair some connector copies between.
        fn pairs() -> impl Iterator<Item = &'static registry::Pair> {
            [$(<$folder::$connector as Connector>::PAIRS),*].into_iter().flatten()
        }

        /// Opens both sides of a migration from `source` to `target` with the connector whose
        /// pair they are, checks their schemas and prepares its writes, and hands the scan and
        /// the sink to `maker`. Nothing is written to the target's rows.
        pub async fn open_copy<M: seam::CopyMaker + Sync>(
            source: &SourceConfig,
            target: &TargetConfig,
            mut request: CopyRequest<'_>,
            maker: &M,
        ) -> Result<seam::OpenedCopy<M::Copy>, seam::SeamError> {
            $(
                if let Some(opened) =
                    <$folder::$connector as Connector>::open_copy(source, target, &mut request, maker).await
                {
                    return opened;
                }
            )*
            Err(seam::SeamError::Config(JobConfigError {
                message: format!(
                    "copying from a {} source to a {} target is not supported",
                    source.kind(),
                    target.kind()
                ),
                line: None,
            }))
        }

        /// Opens both tables of a validation of a copy from `source` to `target` with the
        /// connector that compares them, checks their schemas as a migration would, and hands
        /// the comparison of their rows to `maker`. Nothing is written.
        pub async fn open_comparison<M: seam::compare::ComparisonMaker + Sync>(
            source: &SourceConfig,
            target: &TargetConfig,
            renames: &[crate::jobfile::Rename],
            validation: &crate::jobfile::ValidationConfig,
            maker: &M,
        ) -> Result<M::Comparison, seam::SeamError> {
            let request = registry::CompareRequest { renames, validation };
            $(
                if let Some(opened) =
                    <$folder::$connector as Connector>::open_comparison(source, target, &request, maker).await
                {
                    return opened;
                }
            )*
            Err(seam::SeamError::Config(JobConfigError {
                message: format!(
                    "validating a copy from a {} source to a {} target is not supported yet",
                    source.kind(),
                    target.kind()
                ),
                line: None,
            }))
        }
    };
}

// The registry: one line per connector, ScyllaDB Migrator's systems first (the order of the
// `type` names in messages).
connectors![
    cql::Cql,
    dynamodb::Dynamo,
    parquet::Parquet,
    mysql::Mysql,
    s3export::S3Export,
    csv::Csv,
];

pub mod registry;
pub mod seam;
pub mod streamed;
pub mod unit_files;

use std::sync::LazyLock;

use crate::config::yaml;
use crate::jobfile::JobConfigError;
use crate::savepoints::Key;
pub use registry::{Connector, CopyRequest, SourceConfig, TargetConfig};

/// Every key under which work is recorded complete in job files and savepoints: the token
/// ranges every source may record, then each connector's own.
pub fn progress_keys() -> &'static [&'static Key] {
    static KEYS: LazyLock<Vec<&'static Key>> = LazyLock::new(|| {
        std::iter::once(&crate::savepoints::TOKEN_RANGES)
            .chain(connector_keys().copied())
            .collect()
    });
    &KEYS
}

/// The `source.type` values drover reads (ScyllaDB Migrator's, then drover's own), for
/// messages.
fn source_names() -> Vec<&'static str> {
    source_types().map(|(name, _)| *name).collect()
}

/// The `target.type` values drover writes to, for messages.
fn target_names() -> Vec<&'static str> {
    target_types().map(|(name, _)| *name).collect()
}

impl SourceConfig {
    /// Reads the `source` section with the connector its `type` names.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let name = side_type(text, "source", &value)?;
        match source_types().find(|(n, _)| *n == name) {
            Some((_, parse)) => parse(text, value),
            None => Err(unsupported(text, "source.type", &name, &source_names())),
        }
    }
}

impl TargetConfig {
    /// Reads the `target` section with the connector its `type` names.
    pub fn parse(text: &str, value: yaml_serde::Value) -> Result<Self, JobConfigError> {
        let name = side_type(text, "target", &value)?;
        match target_types().find(|(n, _)| *n == name) {
            Some((_, parse)) => parse(text, value),
            None => Err(unsupported(text, "target.type", &name, &target_names())),
        }
    }
}

/// The table a shared job's units are kept in by default (`coordination.table`).
pub use seam::COORDINATION_TABLE;

/// Refuses a source and target no connector pair can copy between, or whose settings do not
/// go together.
pub fn check_pair(
    text: &str,
    source: &SourceConfig,
    target: &TargetConfig,
) -> Result<(), JobConfigError> {
    target.check_source(text, &**source)?;
    match pairs().find(|p| (p.accepts)(&**source, &**target)) {
        Some(pair) => (pair.check)(text, &**source, &**target),
        None => Err(JobConfigError::at(
            text,
            "target.type",
            format!(
                "a {} target cannot take rows of a {} source; supported pairs: {}",
                target.kind(),
                source.kind(),
                pairs().map(|p| p.words).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

fn unsupported(text: &str, key: &str, value: &str, names: &[&str]) -> JobConfigError {
    let value = crate::answer::cap(value);
    let expected = names.join(", ");
    if key == "target.type" && source_names().contains(&value.as_ref()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key once; ScyllaDB Migrator's three always written, drover's own only when they
    /// record something; a job file's keys for a source are keys savepoints read back.
    #[test]
    fn the_progress_keys_are_each_declared_once_and_migrators_are_always_written() {
        let mut names: Vec<&str> = progress_keys().iter().map(|k| k.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a key declared twice: {names:?}");
        let always: Vec<&str> = progress_keys()
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
                    progress_keys().iter().any(|k| std::ptr::eq(*k, *key)),
                    "{}: {} is not among the registered keys (progress_keys)",
                    source.kind(),
                    key.name
                );
            }
        }
    }

    fn sides(source: &str, target: &str) -> (String, SourceConfig, TargetConfig) {
        let text = format!("source:\n  {source}\ntarget:\n  {target}\n");
        let doc: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
        let s = SourceConfig::parse(&text, doc["source"].clone()).unwrap();
        let t = TargetConfig::parse(&text, doc["target"].clone()).unwrap();
        (text, s, t)
    }

    const CQL: &str = "{type: cassandra, host: h, keyspace: k, table: t}";
    const DYNAMO: &str = "{type: dynamodb, table: t, region: us-east-1}";

    /// Each `type` name is read by one connector per side, and the names are listed
    /// ScyllaDB Migrator's first.
    #[test]
    fn each_type_name_has_one_parser_per_side() {
        for names in [source_names(), target_names()] {
            let mut sorted = names.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                names.len(),
                "a name registered twice: {names:?}"
            );
            assert_eq!(names[..2], ["cassandra", "scylla"]);
        }
        assert!(!target_names().contains(&"mysql"));
    }

    /// Every declared pair is accepted, a pair nobody declares is refused naming both sides
    /// and listing every pair, and the checks of settings that do not go together fire.
    #[test]
    fn pairs_are_the_declared_ones_and_their_checks_fire() {
        let accepted = [
            (CQL, CQL),
            (DYNAMO, DYNAMO),
            ("{type: parquet, path: /p}", CQL),
            (CQL, "{type: parquet, path: /p}"),
            (CQL, "{type: json, path: /p}"),
            ("{type: csv, path: /p}", CQL),
            (DYNAMO, "{type: dynamodb-s3-export, path: /p}"),
        ];
        for (source, target) in accepted {
            let (text, s, t) = sides(source, target);
            check_pair(&text, &s, &t).unwrap_or_else(|e| panic!("{source} -> {target}: {e}"));
        }
        let (text, s, t) = sides("{type: csv, path: /p}", "{type: parquet, path: /q}");
        let e = check_pair(&text, &s, &t).unwrap_err().to_string();
        assert!(
            e.starts_with("target.type: a parquet target cannot take rows of a csv source; supported pairs: cassandra/scylla to cassandra/scylla, dynamodb/alternator to dynamodb/alternator, "),
            "{e}"
        );
        assert_eq!(e.matches(" to ").count(), pairs().count(), "{e}");
        let (text, s, t) = sides(
            "{type: csv, path: /p}",
            "{type: cassandra, host: h, keyspace: k, table: t, bulkWrite: sstable}",
        );
        let e = check_pair(&text, &s, &t).unwrap_err().to_string();
        assert!(
            e.starts_with("target.bulkWrite: sstable needs a cassandra/scylla source"),
            "{e}"
        );
        let (text, s, t) = sides(
            "{type: alternator, table: t, endpoint: {host: http://h, port: 8000}}",
            "{type: dynamodb, table: t, region: us-east-1, streamChanges: true}",
        );
        let e = check_pair(&text, &s, &t).unwrap_err().to_string();
        assert!(
            e.contains("Alternator tables have no DynamoDB Streams"),
            "{e}"
        );
    }
}
