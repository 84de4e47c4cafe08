//! The node's files as live migration sees them: its directories by type and index, the
//! listing (minus [`Exclusions`]), and the resolution of a requested path that never leaves its
//! directory.

use std::os::fd::OwnedFd;
use std::path::{Component, Path};
use std::time::UNIX_EPOCH;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::LiveMigrationError;
use super::exclusions::Exclusions;
pub use super::roots::{DirType, Roots};
use crate::fsutil::beneath::{self, BeneathError};

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

/// What every file URL of a listing starts with.
pub const URL_PREFIX: &str = "/api/v1/live-migration/files/";

impl Entry {
    /// `FILE` or `DIRECTORY`, as listings name them.
    pub fn file_type(&self) -> &'static str {
        if self.is_dir { "DIRECTORY" } else { "FILE" }
    }

    /// The URL the file is served at.
    pub fn url(&self) -> String {
        format!(
            "{URL_PREFIX}{}/{}/{}",
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
/// left out. Each directory is opened from its parent's handle without following links, so a
/// directory swapped for a link while the walk runs is not walked into. Blocking.
pub fn list(roots: &Roots, exclusions: &Exclusions) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for (dir_type, dir_index, root) in roots.iter() {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(root, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut walk = Walk {
            root,
            dir_type,
            dir_index,
            exclusions,
            out: &mut out,
        };
        walk.visit(&fd, root)?;
    }
    out.sort_by(|a, b| (a.dir_type, a.dir_index, &a.path).cmp(&(b.dir_type, b.dir_index, &b.path)));
    Ok(out)
}

/// One root being listed. Directories are visited depth first, so only the handles of the
/// current path are open at once (not one per pending directory).
struct Walk<'a> {
    root: &'a Path,
    dir_type: DirType,
    dir_index: usize,
    exclusions: &'a Exclusions,
    out: &'a mut Vec<Entry>,
}

impl Walk<'_> {
    fn visit(&mut self, fd: &OwnedFd, dir: &Path) -> std::io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let mut entries = match rustix::fs::Dir::read_from(fd) {
            Ok(d) => d,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        while let Some(entry) = entries.read() {
            let entry = entry?;
            let name = entry.file_name();
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." || bytes.ends_with(PART_SUFFIX.as_bytes()) {
                continue;
            }
            let path = dir.join(std::ffi::OsStr::from_bytes(bytes));
            let Ok(st) = rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let (size, modified_ms) = size_and_mtime(&st);
            let entry = |is_dir: bool, size: u64| Entry {
                dir_type: self.dir_type,
                dir_index: self.dir_index,
                path: relative(self.root, &path),
                size,
                is_dir,
                modified_ms,
                mode: st.st_mode & 0o777,
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    if self.exclusions.excludes_dir(&path) {
                        continue;
                    }
                    let flags =
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let sub = match rustix::fs::openat(fd, name, flags, Mode::empty()) {
                        Ok(sub) => sub,
                        // Gone, or replaced by a link or a file since it was looked at.
                        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
                        Err(e) => return Err(e.into()),
                    };
                    let e = entry(true, 0);
                    self.out.push(e);
                    self.visit(&sub, &path)?;
                }
                FileType::RegularFile if !self.exclusions.matches_file_pattern(&path) => {
                    let e = entry(false, size);
                    self.out.push(e);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Size and modification time (milliseconds since the epoch) of a `stat`.
// The field types of `stat` differ between architectures: the casts are needed on some.
#[allow(clippy::unnecessary_cast)]
fn size_and_mtime(st: &rustix::fs::Stat) -> (u64, u64) {
    let secs = st.st_mtime as i64;
    let nanos = st.st_mtime_nsec as i64;
    let ms = secs.saturating_mul(1000).saturating_add(nanos / 1_000_000);
    (st.st_size as u64, u64::try_from(ms).unwrap_or(0))
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
    /// Malformed: unknown type or index, `..`, absolute, empty, a directory (400).
    #[error("{0}")]
    Invalid(String),
    /// It leads outside its directory, through a symbolic link (403).
    #[error("{0}")]
    Outside(String),
    /// Missing or excluded (404).
    #[error("{0}")]
    NotFound(String),
}

/// The file a request names, opened: a regular file inside its directory reached through no
/// symbolic link (see [`crate::fsutil::beneath`]: the open is the check, so swapping a directory
/// for a link meanwhile cannot redirect it), not excluded. Blocking.
pub fn resolve(
    roots: &Roots,
    exclusions: &Exclusions,
    dir_type: &str,
    dir_index: &str,
    path: &str,
) -> Result<std::fs::File, LiveMigrationError> {
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
    let not_found = || PathError::NotFound(format!("no file {dir_type}/{index}/{path}"));
    // With no link below the root, the lexical path is the real one: exclusions match it.
    let full = root.join(path);
    if path.ends_with(PART_SUFFIX) || exclusions.excludes_file(&full, root) {
        return Err(not_found().into());
    }
    match beneath::open_file(root, path) {
        Ok(file) => Ok(file),
        Err(BeneathError::NotFound) => Err(not_found().into()),
        // Sidecar's answer (400) and message.
        Err(BeneathError::Directory) => {
            Err(PathError::Invalid("Cannot transfer directory".into()).into())
        }
        Err(BeneathError::Outside) => Err(PathError::Outside(format!(
            "{dir_type}/{index}/{path} leads through a symbolic link or outside its directory"
        ))
        .into()),
        Err(BeneathError::Io(e)) => Err(LiveMigrationError::reading(e)),
    }
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
    // `Path::components` would quietly drop empty and `.` segments: look at the text.
    if path.split('/').any(|c| c.is_empty() || c == ".") {
        return Err(PathError::Invalid(format!(
            "{path:?} is not a plain relative path"
        )));
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
        let mut ok = resolve(&r, &x, "data", "0", "ks/t-1/nb-1-big-Data.db").unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut ok, &mut text).unwrap();
        assert_eq!(text, "data");
        let err = |t: &str, i: &str, p: &str| match resolve(&r, &x, t, i, p) {
            Err(LiveMigrationError::Path(e)) => e,
            other => panic!("{t}/{i}/{p}: {other:?}"),
        };
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
        assert_eq!(
            err("data", "0", "ks"),
            PathError::Invalid("Cannot transfer directory".into())
        );
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
            Err(LiveMigrationError::Path(PathError::NotFound(_)))
        ));
        assert!(matches!(
            resolve(&r, &x, "commitlog", "0", "heapdump.hprof"),
            Err(LiveMigrationError::Path(PathError::NotFound(_)))
        ));
        assert!(check_pattern("glob:${NOPE}/x").is_err());
        assert!(check_pattern("find:x").is_err());
        assert!(check_pattern("regex:(").is_err());
        assert!(check_pattern("glob:${DATA_FILE_DIR}/**/*.tmp").is_ok());
    }

    /// Requests for random paths made of plain names, `..`, `.`, empty segments and links
    /// (to a file outside, to a directory outside, to a sibling, to a parent) over a real
    /// tree: whatever resolves is one of the regular files below the root, never reached
    /// through a link. Both the `openat2` and the component walk are exercised.
    #[test]
    fn random_paths_never_leave_the_root() {
        use proptest::prelude::*;
        use std::os::unix::fs::{MetadataExt, symlink};
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("data0");
        touch(&root.join("ks/t/f"), b"in");
        touch(&root.join("ks/f"), b"in");
        touch(&tmp.path().join("out/f"), b"out");
        touch(&tmp.path().join("out/t/f"), b"out");
        symlink(tmp.path().join("out/f"), root.join("ks/t/link")).unwrap();
        symlink(tmp.path().join("out"), root.join("ks/dir")).unwrap();
        symlink("f", root.join("ks/sib")).unwrap();
        symlink("..", root.join("ks/t/up")).unwrap();
        symlink("../../..", root.join("ks/t/upup")).unwrap();
        let inside: std::collections::HashSet<(u64, u64)> =
            [root.join("ks/t/f"), root.join("ks/f")]
                .iter()
                .map(|p| {
                    let m = std::fs::symlink_metadata(p).unwrap();
                    (m.dev(), m.ino())
                })
                .collect();
        let r = roots(tmp.path());
        let x = Exclusions::new(&[], &[], &r).unwrap();
        let segment = prop_oneof![
            Just("ks"),
            Just("t"),
            Just("f"),
            Just(".."),
            Just("."),
            Just(""),
            Just("link"),
            Just("dir"),
            Just("sib"),
            Just("up"),
            Just("upup"),
            Just("out"),
        ];
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(2000));
        runner
            .run(&proptest::collection::vec(segment, 1..6), |segments| {
                let path = segments.join("/");
                if let Ok(file) = resolve(&r, &x, "data", "0", &path) {
                    let m = file.metadata().unwrap();
                    prop_assert!(inside.contains(&(m.dev(), m.ino())), "{path} left the root");
                    prop_assert!(
                        !segments
                            .iter()
                            .any(
                                |s| ["link", "dir", "sib", "up", "upup", "..", ".", ""].contains(s)
                            ),
                        "{path} resolved"
                    );
                }
                for method in [beneath::Method::Openat2, beneath::Method::Walk] {
                    if let Ok(file) = beneath::open_file_with(&root, &path, method) {
                        let m = file.metadata().unwrap();
                        prop_assert!(
                            inside.contains(&(m.dev(), m.ino())),
                            "{path} {method:?} left the root"
                        );
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}
