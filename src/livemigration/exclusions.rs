//! What live migration leaves out: `files_to_exclude` and `dirs_to_exclude` patterns
//! (`glob:` or `regex:`, with placeholders for the node's directories, Sidecar's names), plus
//! the snapshots and backups every node has.

use std::path::Path;
use std::sync::LazyLock;

use super::LiveMigrationError;
use super::roots::{DirType, Roots};

/// `${DATA_FILE_DIR_<i>}`: data directory `i` (from 0), Sidecar's placeholder of one data
/// directory.
static DATA_DIR_N: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\$\{DATA_FILE_DIR_([0-9]+)\}").expect("a valid regex"));

/// The daemon config's check of the exclusion patterns of its `live_migration` section
/// ([`crate::config::SectionCheck`]): each names its key and index.
pub fn check_config(config: &crate::config::DaemonConfig) -> Result<(), (String, String)> {
    let section = &config.live_migration;
    for (key, patterns) in [
        ("live_migration.files_to_exclude", &section.files_to_exclude),
        ("live_migration.dirs_to_exclude", &section.dirs_to_exclude),
    ] {
        for (i, p) in patterns.iter().enumerate() {
            check_pattern(p).map_err(|e| (format!("{key}[{i}]"), e.to_string()))?;
        }
    }
    Ok(())
}

/// Checks the syntax of an exclusion pattern (`glob:...` or `regex:...`).
pub fn check_pattern(pattern: &str) -> Result<(), LiveMigrationError> {
    // Placeholders are checked with a stand-in directory.
    let mut text = DATA_DIR_N.replace_all(pattern, "/d").into_owned();
    for t in DirType::ALL {
        text = text.replace(t.placeholder(), "/d");
    }
    if text.contains("${") {
        return Err(LiveMigrationError::Pattern(format!(
            "{pattern:?}: unknown placeholder; known: ${{DATA_FILE_DIR}}, ${{DATA_FILE_DIR_<i>}}, ${{COMMITLOG_DIR}}, ${{HINTS_DIR}}, ${{SAVED_CACHES_DIR}}, ${{CDC_RAW_DIR}}, ${{LOCAL_SYSTEM_DATA_FILE_DIR}}"
        )));
    }
    Matcher::new(&text)
        .map(|_| ())
        .map_err(LiveMigrationError::Pattern)
}

#[derive(Debug, Clone)]
enum Matcher {
    Glob(globset::GlobMatcher),
    Regex(regex::Regex),
}

impl Matcher {
    fn new(pattern: &str) -> Result<Self, String> {
        if let Some(g) = pattern.strip_prefix("glob:") {
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map(|g| Self::Glob(g.compile_matcher()))
                .map_err(|e| format!("{pattern:?}: invalid glob: {e}"))
        } else if let Some(r) = pattern.strip_prefix("regex:") {
            regex::Regex::new(&format!("^(?:{r})$"))
                .map(Self::Regex)
                .map_err(|e| format!("{pattern:?}: invalid regex: {e}"))
        } else {
            Err(format!(
                "{pattern:?}: expected glob:<pattern> or regex:<pattern>"
            ))
        }
    }

    fn matches(&self, path: &Path) -> bool {
        match self {
            Self::Glob(g) => g.is_match(path),
            Self::Regex(r) => r.is_match(&path.to_string_lossy()),
        }
    }
}

/// Which files and directories are left out of a migration.
#[derive(Debug, Clone, Default)]
pub struct Exclusions {
    files: Vec<Matcher>,
    dirs: Vec<Matcher>,
}

/// Directories of a table that a node never needs: snapshots and incremental backups (hard
/// links to the table's own files).
const ALWAYS_EXCLUDED_DIRS: &[&str] = &[
    "glob:${DATA_FILE_DIR}/*/*/snapshots",
    "glob:${DATA_FILE_DIR}/*/*/backups",
    "glob:${LOCAL_SYSTEM_DATA_FILE_DIR}/*/*/snapshots",
    "glob:${LOCAL_SYSTEM_DATA_FILE_DIR}/*/*/backups",
];

impl Exclusions {
    /// Compiles the patterns, each placeholder replaced by every directory of its type, and
    /// `${DATA_FILE_DIR_<i>}` by data directory `i` (one beyond this node's data directories
    /// is an error naming the key and the index).
    pub fn new(
        files: &[String],
        dirs: &[String],
        roots: &Roots,
    ) -> Result<Self, LiveMigrationError> {
        let always: Vec<String> = ALWAYS_EXCLUDED_DIRS.iter().map(|p| p.to_string()).collect();
        let files = expand("files_to_exclude", files, roots)?;
        let mut dir_matchers = expand("dirs_to_exclude", &always, roots)?;
        dir_matchers.extend(expand("dirs_to_exclude", dirs, roots)?);
        Ok(Self {
            files,
            dirs: dir_matchers,
        })
    }

    /// Whether a file pattern matches `path` (directories above it are not looked at).
    pub fn matches_file_pattern(&self, path: &Path) -> bool {
        self.files.iter().any(|m| m.matches(path))
    }

    /// Whether the file `path` is excluded (by a file pattern, or below an excluded directory).
    pub fn excludes_file(&self, path: &Path, root: &Path) -> bool {
        self.matches_file_pattern(path)
            || path
                .ancestors()
                .skip(1)
                .take_while(|a| a.starts_with(root) && *a != root)
                .any(|a| self.excludes_dir(a))
    }

    /// Whether the directory `path` is excluded.
    pub fn excludes_dir(&self, path: &Path) -> bool {
        self.dirs.iter().any(|m| m.matches(path))
    }
}

/// The matchers of the patterns of `key`.
fn expand(
    key: &str,
    patterns: &[String],
    roots: &Roots,
) -> Result<Vec<Matcher>, LiveMigrationError> {
    let data_dirs: Vec<String> = roots
        .iter()
        .filter(|(t, _, _)| *t == DirType::Data)
        .map(|(_, _, d)| d.to_string_lossy().trim_end_matches('/').to_string())
        .collect();
    let mut out = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        let mut beyond = None;
        let one = DATA_DIR_N.replace_all(p, |c: &regex::Captures<'_>| {
            match c[1].parse::<usize>().ok().and_then(|n| data_dirs.get(n)) {
                Some(d) => escape(p, d),
                None => {
                    beyond.get_or_insert_with(|| c[0].to_string());
                    String::new()
                }
            }
        });
        if let Some(placeholder) = beyond {
            return Err(LiveMigrationError::Pattern(format!(
                "{key}[{i}]: {placeholder} is beyond this node's {} data directories (data_file_directories, numbered from 0)",
                data_dirs.len()
            )));
        }
        let mut texts = vec![one.into_owned()];
        for t in DirType::ALL {
            if !p.contains(t.placeholder()) {
                continue;
            }
            let dirs: Vec<String> = roots
                .iter()
                .filter(|(dt, _, _)| *dt == t)
                .map(|(_, _, d)| d.to_string_lossy().trim_end_matches('/').to_string())
                .collect();
            texts = texts
                .iter()
                .flat_map(|text| {
                    dirs.iter()
                        .map(move |d| text.replace(t.placeholder(), &escape(p, d)))
                })
                .collect();
        }
        for text in texts {
            out.push(
                Matcher::new(&text)
                    .map_err(|e| LiveMigrationError::Pattern(format!("{key}[{i}]: {e}")))?,
            );
        }
    }
    Ok(out)
}

/// A directory put into a pattern: its glob or regex special characters escaped.
fn escape(pattern: &str, dir: &str) -> String {
    if pattern.starts_with("regex:") {
        regex::escape(dir)
    } else {
        globset::escape(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CassandraConfig;

    fn roots() -> Roots {
        Roots::from_config(&CassandraConfig {
            data_file_directories: vec!["/d0".into(), "/d1".into()],
            commitlog_directory: Some("/cl".into()),
            ..Default::default()
        })
    }

    /// Sidecar's `${DATA_FILE_DIR_<i>}` names one data directory; one beyond the node's is a
    /// config error naming the key and the index.
    #[test]
    fn numbered_data_directories() {
        assert!(check_pattern("glob:${DATA_FILE_DIR_1}/ks/**").is_ok());
        assert!(check_pattern("regex:${DATA_FILE_DIR_0}/tmp.*").is_ok());
        assert!(check_pattern("glob:${DATA_FILE_DIR_x}/ks").is_err());
        let x = Exclusions::new(
            &["glob:${DATA_FILE_DIR_1}/ks/*/*.tmp".to_string()],
            &["regex:${DATA_FILE_DIR_0}/junk".to_string()],
            &roots(),
        )
        .unwrap();
        assert!(x.matches_file_pattern(Path::new("/d1/ks/t/a.tmp")));
        assert!(!x.matches_file_pattern(Path::new("/d0/ks/t/a.tmp")));
        assert!(x.excludes_dir(Path::new("/d0/junk")));
        assert!(!x.excludes_dir(Path::new("/d1/junk")));
        let e = Exclusions::new(
            &[],
            &[
                "glob:/x".to_string(),
                "glob:${DATA_FILE_DIR_2}/ks".to_string(),
            ],
            &roots(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("dirs_to_exclude[1]: ${DATA_FILE_DIR_2}"),
            "{e}"
        );
        let e = Exclusions::new(&["glob:${DATA_FILE_DIR_7}".to_string()], &[], &roots())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("files_to_exclude[0]: ${DATA_FILE_DIR_7}"),
            "{e}"
        );
    }
}
