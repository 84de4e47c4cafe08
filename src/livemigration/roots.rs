//! The node's data directories as live migration names them: each directory type of a
//! Cassandra node, and the configured directories by type and index.

use std::path::{Path, PathBuf};

use crate::config::CassandraConfig;

/// The directory types of a Cassandra node, as named in file URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DirType {
    /// `data_file_directories` (one index each).
    Data,
    /// `commitlog_directory`.
    Commitlog,
    /// `hints_directory`.
    Hints,
    /// `saved_caches_directory`.
    SavedCaches,
    /// `cdc_raw_directory`.
    CdcRaw,
    /// `local_system_data_file_directory`.
    LocalSystemData,
}

impl DirType {
    /// Every type, in listing order.
    pub const ALL: [DirType; 6] = [
        Self::Data,
        Self::Commitlog,
        Self::Hints,
        Self::SavedCaches,
        Self::CdcRaw,
        Self::LocalSystemData,
    ];

    /// The name in URLs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Data => "data",
            Self::Commitlog => "commitlog",
            Self::Hints => "hints",
            Self::SavedCaches => "saved_caches",
            Self::CdcRaw => "cdc_raw",
            Self::LocalSystemData => "local_system_data",
        }
    }

    /// The placeholder of exclusion patterns.
    pub(crate) fn placeholder(self) -> &'static str {
        match self {
            Self::Data => "${DATA_FILE_DIR}",
            Self::Commitlog => "${COMMITLOG_DIR}",
            Self::Hints => "${HINTS_DIR}",
            Self::SavedCaches => "${SAVED_CACHES_DIR}",
            Self::CdcRaw => "${CDC_RAW_DIR}",
            Self::LocalSystemData => "${LOCAL_SYSTEM_DATA_FILE_DIR}",
        }
    }

    /// The type named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The configured directories of the node.
#[derive(Debug, Clone, Default)]
pub struct Roots {
    dirs: Vec<(DirType, usize, PathBuf)>,
}

impl Roots {
    /// The directories of the `cassandra` config section.
    pub fn from_config(c: &CassandraConfig) -> Self {
        let mut dirs: Vec<(DirType, usize, PathBuf)> = c
            .data_file_directories
            .iter()
            .enumerate()
            .map(|(i, d)| (DirType::Data, i, d.clone()))
            .collect();
        for (t, d) in [
            (DirType::Commitlog, &c.commitlog_directory),
            (DirType::Hints, &c.hints_directory),
            (DirType::SavedCaches, &c.saved_caches_directory),
            (DirType::CdcRaw, &c.cdc_raw_directory),
            (
                DirType::LocalSystemData,
                &c.local_system_data_file_directory,
            ),
        ] {
            if let Some(d) = d {
                dirs.push((t, 0, d.clone()));
            }
        }
        Self { dirs }
    }

    /// The directory of `dir_type` number `index`.
    pub fn get(&self, dir_type: DirType, index: usize) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|(t, i, _)| *t == dir_type && *i == index)
            .map(|(_, _, d)| d.as_path())
    }

    /// Every directory with its type and index.
    pub fn iter(&self) -> impl Iterator<Item = (DirType, usize, &Path)> {
        self.dirs.iter().map(|(t, i, d)| (*t, *i, d.as_path()))
    }
}
