//! What live migration leaves out: `files_to_exclude` and `dirs_to_exclude` patterns
//! (`glob:` or `regex:`, with placeholders for the node's directories), plus the snapshots and
//! backups every node has.

use std::path::Path;

use super::LiveMigrationError;
use super::roots::{DirType, Roots};

/// Checks the syntax of an exclusion pattern (`glob:...` or `regex:...`).
pub fn check_pattern(pattern: &str) -> Result<(), LiveMigrationError> {
    // Placeholders are checked with a stand-in directory.
    let mut text = pattern.to_string();
    for t in DirType::ALL {
        text = text.replace(t.placeholder(), "/d");
    }
    if text.contains("${") {
        return Err(LiveMigrationError::Pattern(format!(
            "{pattern:?}: unknown placeholder; known: ${{DATA_FILE_DIR}}, ${{COMMITLOG_DIR}}, ${{HINTS_DIR}}, ${{SAVED_CACHES_DIR}}, ${{CDC_RAW_DIR}}, ${{LOCAL_SYSTEM_DATA_FILE_DIR}}"
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
    /// Compiles the patterns, each placeholder replaced by every directory of its type.
    pub fn new(
        files: &[String],
        dirs: &[String],
        roots: &Roots,
    ) -> Result<Self, LiveMigrationError> {
        let expand = |patterns: &mut dyn Iterator<Item = &str>| -> Result<Vec<Matcher>, String> {
            let mut out = Vec::new();
            for p in patterns {
                let mut texts = vec![p.to_string()];
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
                    out.push(Matcher::new(&text)?);
                }
            }
            Ok(out)
        };
        let dir_patterns: Vec<&str> = ALWAYS_EXCLUDED_DIRS
            .iter()
            .copied()
            .chain(dirs.iter().map(String::as_str))
            .collect();
        Ok(Self {
            files: expand(&mut files.iter().map(String::as_str))
                .map_err(LiveMigrationError::Pattern)?,
            dirs: expand(&mut dir_patterns.into_iter()).map_err(LiveMigrationError::Pattern)?,
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

/// A directory put into a pattern: its glob or regex special characters escaped.
fn escape(pattern: &str, dir: &str) -> String {
    if pattern.starts_with("regex:") {
        regex::escape(dir)
    } else {
        globset::escape(dir)
    }
}
