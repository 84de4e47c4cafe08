//! The node's files as live migration sees them: its directories by type and index, the
//! listing (minus [`Exclusions`]), and the resolution of a requested path that never leaves its
//! directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::exclusions::Exclusions;
pub use super::roots::{DirType, Roots};

/// Suffix of a download in progress on a destination (next to its final path, so the rename
/// stays on one file system). Never listed, never served.
pub const PART_SUFFIX: &str = ".drover-part";

/// One listed file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Directory type.
    pub dir_type: DirType,
    /// Index of the directory among those of its type.
    pub dir_index: usize,
    /// Path below the directory, `/`-separated.
    pub path: String,
    /// Bytes (0 for a directory).
    pub size: u64,
    /// A directory.
    pub is_dir: bool,
    /// Last modification, milliseconds since the epoch.
    pub modified_ms: u64,
    /// Permission bits (drover's listings carry them so a destination keeps them).
    pub mode: u32,
}

impl Entry {
    /// `FILE` or `DIRECTORY`, as listings name them.
    pub fn file_type(&self) -> &'static str {
        if self.is_dir { "DIRECTORY" } else { "FILE" }
    }

    /// The URL the file is served at.
    pub fn url(&self) -> String {
        format!(
            "/api/v1/live-migration/files/{}/{}/{}",
            self.dir_type.name(),
            self.dir_index,
            self.path
        )
    }
}

/// Milliseconds since the epoch of a file's modification time.
pub fn modified_ms(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every file and directory below the roots, minus exclusions, symbolic links and downloads in
/// progress, sorted by type, index and path. Files that vanish while listed (compaction) are
/// left out. Blocking.
pub fn list(roots: &Roots, exclusions: &Exclusions) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for (dir_type, dir_index, root) in roots.iter() {
        if !root.is_dir() {
            continue;
        }
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                let name = entry.file_name();
                if meta.file_type().is_symlink() || name.to_string_lossy().ends_with(PART_SUFFIX) {
                    continue;
                }
                let rel = relative(root, &path);
                if meta.is_dir() {
                    if exclusions.excludes_dir(&path) {
                        continue;
                    }
                    stack.push(path);
                    out.push(Entry {
                        dir_type,
                        dir_index,
                        path: rel,
                        size: 0,
                        is_dir: true,
                        modified_ms: modified_ms(&meta),
                        mode: meta.permissions().mode() & 0o777,
                    });
                } else if meta.is_file() && !exclusions.matches_file_pattern(&path) {
                    out.push(Entry {
                        dir_type,
                        dir_index,
                        path: rel,
                        size: meta.len(),
                        is_dir: false,
                        modified_ms: modified_ms(&meta),
                        mode: meta.permissions().mode() & 0o777,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| (a.dir_type, a.dir_index, &a.path).cmp(&(b.dir_type, b.dir_index, &b.path)));
    Ok(out)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Why a requested path cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Malformed: unknown type or index, `..`, absolute, empty (400).
    #[error("{0}")]
    Invalid(String),
    /// It leads outside its directory, through a symbolic link (403).
    #[error("{0}")]
    Outside(String),
    /// Missing or excluded (404).
    #[error("{0}")]
    NotFound(String),
}

/// The file a request names, checked: it exists, is a regular file inside its directory once
/// every link is resolved, and is not excluded. Blocking.
pub fn resolve(
    roots: &Roots,
    exclusions: &Exclusions,
    dir_type: &str,
    dir_index: &str,
    path: &str,
) -> Result<PathBuf, PathError> {
    let t = DirType::parse(dir_type).ok_or_else(|| {
        PathError::Invalid(format!(
            "unknown directory type {dir_type:?}; expected data, commitlog, hints, saved_caches, cdc_raw or local_system_data"
        ))
    })?;
    let index: usize = dir_index.parse().map_err(|_| {
        PathError::Invalid(format!("directory index {dir_index:?} is not a number"))
    })?;
    let root = roots.get(t, index).ok_or_else(|| {
        PathError::Invalid(format!(
            "this node has no {dir_type} directory number {index}"
        ))
    })?;
    check_relative(path)?;
    let full = root.join(path);
    let not_found = || PathError::NotFound(format!("no file {dir_type}/{index}/{path}"));
    let real = full.canonicalize().map_err(|_| not_found())?;
    let real_root = root.canonicalize().map_err(|_| not_found())?;
    if !real.starts_with(&real_root) {
        return Err(PathError::Outside(format!(
            "{dir_type}/{index}/{path} leads outside its directory"
        )));
    }
    if !real.is_file() || path.ends_with(PART_SUFFIX) || exclusions.excludes_file(&full, root) {
        return Err(not_found());
    }
    Ok(real)
}

/// Checks a path below a directory: relative, no `..`, no empty or `.` segments.
pub fn check_relative(path: &str) -> Result<(), PathError> {
    let p = Path::new(path);
    if path.is_empty() || path.contains('\0') {
        return Err(PathError::Invalid("empty file path".into()));
    }
    if p.is_absolute() || path.starts_with('/') {
        return Err(PathError::Invalid(format!("{path:?} is absolute")));
    }
    for c in p.components() {
        match c {
            Component::Normal(_) => {}
            Component::ParentDir => {
                return Err(PathError::Invalid(format!("{path:?} contains `..`")));
            }
            _ => {
                return Err(PathError::Invalid(format!(
                    "{path:?} is not a plain relative path"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CassandraConfig;
    use crate::livemigration::exclusions::check_pattern;

    fn roots(dir: &Path) -> Roots {
        Roots::from_config(&CassandraConfig {
            data_file_directories: vec![dir.join("data0"), dir.join("data1")],
            commitlog_directory: Some(dir.join("commitlog")),
            ..Default::default()
        })
    }

    fn touch(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn paths_stay_inside_their_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let x = Exclusions::new(&[], &[], &r).unwrap();
        touch(&tmp.path().join("data0/ks/t-1/nb-1-big-Data.db"), b"data");
        touch(&tmp.path().join("secret"), b"secret");
        std::fs::create_dir_all(tmp.path().join("data1")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), tmp.path().join("data0/link"))
            .unwrap();
        std::os::unix::fs::symlink(tmp.path().join("data0/ks"), tmp.path().join("data1/inner"))
            .unwrap();
        let ok = resolve(&r, &x, "data", "0", "ks/t-1/nb-1-big-Data.db").unwrap();
        assert!(ok.ends_with("nb-1-big-Data.db"));
        let err = |t: &str, i: &str, p: &str| resolve(&r, &x, t, i, p).unwrap_err();
        assert!(matches!(
            err("data", "0", "../secret"),
            PathError::Invalid(_)
        ));
        assert!(matches!(
            err("data", "0", "ks/../../secret"),
            PathError::Invalid(_)
        ));
        assert!(matches!(
            err("data", "0", "/etc/passwd"),
            PathError::Invalid(_)
        ));
        assert!(matches!(err("data", "0", ""), PathError::Invalid(_)));
        assert!(matches!(err("data", "x", "a"), PathError::Invalid(_)));
        assert!(matches!(err("data", "7", "a"), PathError::Invalid(_)));
        assert!(matches!(err("tmp", "0", "a"), PathError::Invalid(_)));
        // A link that leads out of the directory is refused; one that leads to another
        // directory of the node is refused too (it is not this directory's file).
        assert!(matches!(err("data", "0", "link"), PathError::Outside(_)));
        assert!(matches!(
            err("data", "1", "inner/t-1/nb-1-big-Data.db"),
            PathError::Outside(_)
        ));
        assert!(matches!(
            err("data", "0", "missing"),
            PathError::NotFound(_)
        ));
        assert!(matches!(err("data", "0", "ks"), PathError::NotFound(_)));
    }

    #[test]
    fn exclusions_with_placeholders_and_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        for f in [
            "data0/ks/t-1/nb-1-big-Data.db",
            "data0/ks/t-1/snapshots/s1/nb-1-big-Data.db",
            "data0/ks/t-1/backups/nb-1-big-Data.db",
            "data1/ks/t-2/nb-2-big-Data.db",
            "data1/ks/t-2/nb-2-big-Data.db.drover-part",
            "commitlog/CommitLog-7-1.log",
            "commitlog/heapdump.hprof",
            "data0/tmp/junk",
        ] {
            touch(&tmp.path().join(f), b"x");
        }
        let x = Exclusions::new(
            &["glob:${COMMITLOG_DIR}/*.hprof".to_string()],
            &["regex:${DATA_FILE_DIR}/tmp".to_string()],
            &r,
        )
        .unwrap();
        let files: Vec<String> = list(&r, &x)
            .unwrap()
            .into_iter()
            .filter(|e| !e.is_dir)
            .map(|e| format!("{}/{}/{}", e.dir_type.name(), e.dir_index, e.path))
            .collect();
        assert_eq!(
            files,
            vec![
                "data/0/ks/t-1/nb-1-big-Data.db",
                "data/1/ks/t-2/nb-2-big-Data.db",
                "commitlog/0/CommitLog-7-1.log",
            ]
        );
        assert!(matches!(
            resolve(&r, &x, "data", "0", "ks/t-1/snapshots/s1/nb-1-big-Data.db"),
            Err(PathError::NotFound(_))
        ));
        assert!(matches!(
            resolve(&r, &x, "commitlog", "0", "heapdump.hprof"),
            Err(PathError::NotFound(_))
        ));
        assert!(check_pattern("glob:${NOPE}/x").is_err());
        assert!(check_pattern("find:x").is_err());
        assert!(check_pattern("regex:(").is_err());
        assert!(check_pattern("glob:${DATA_FILE_DIR}/**/*.tmp").is_ok());
    }
}
