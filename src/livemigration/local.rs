//! The destination's side of a copy: where a source file lands here, and what is here.

use std::path::PathBuf;

use super::LiveMigrationError;
use super::exclusions::Exclusions;
use super::files::{self, DirType, Entry, Roots};

/// This node's directories and what is never copied into them.
pub struct LocalFiles {
    /// The node's directories.
    pub roots: Roots,
    /// What is never copied.
    pub exclusions: Exclusions,
}

impl LocalFiles {
    /// The final path of a source file here.
    pub fn path_of(&self, url: &str) -> Result<PathBuf, LiveMigrationError> {
        let (t, i, p) = local_key(url)?;
        let root = self.roots.get(t, i).ok_or_else(|| {
            LiveMigrationError::Invalid(format!(
                "the source has a {} directory number {i} that this node does not have; configure it in the cassandra section",
                t.name()
            ))
        })?;
        Ok(root.join(p))
    }

    /// Whether this node leaves `path` (a source entry's place here) out of its own listing:
    /// excluded by a pattern, below an excluded directory (snapshots and backups always).
    pub fn excludes(&self, path: &std::path::Path, is_dir: bool) -> bool {
        let Some(root) = self
            .roots
            .iter()
            .map(|(_, _, d)| d)
            .filter(|d| path.starts_with(d))
            .max_by_key(|d| d.as_os_str().len())
        else {
            return false;
        };
        if is_dir {
            self.exclusions.excludes_dir(path)
                || path
                    .ancestors()
                    .skip(1)
                    .take_while(|a| a.starts_with(root) && *a != root)
                    .any(|a| self.exclusions.excludes_dir(a))
        } else {
            self.exclusions.excludes_file(path, root)
        }
    }

    /// Removes every staging file (`*.drover-part`) below the roots, symbolic links not
    /// followed; returns how many. Blocking.
    pub fn remove_staging(&self) -> usize {
        let mut removed = 0;
        for (_, _, root) in self.roots.iter() {
            let mut stack = vec![root.to_path_buf()];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let Ok(kind) = entry.file_type() else {
                        continue;
                    };
                    if kind.is_dir() {
                        stack.push(entry.path());
                    } else if kind.is_file()
                        && entry
                            .file_name()
                            .to_string_lossy()
                            .ends_with(files::PART_SUFFIX)
                    {
                        match std::fs::remove_file(entry.path()) {
                            Ok(()) => removed += 1,
                            Err(e) => {
                                tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove a staging file");
                            }
                        }
                    }
                }
            }
        }
        removed
    }

    /// The files and directories here, as a source would list them. Blocking.
    pub fn list(&self) -> Result<Vec<Entry>, LiveMigrationError> {
        files::list(&self.roots, &self.exclusions).map_err(|source| LiveMigrationError::Local {
            path: PathBuf::from("(listing)"),
            source,
        })
    }
}

/// The longest path below a directory a listing entry may name (Linux's `PATH_MAX`, which the
/// whole path must stay under).
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest name of one file or directory (Linux's `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// The local place of a source file: `(type, index, path)` from its URL.
/// An error is clipped ([`crate::answer::clip`]): a listing decides how long its URLs are, and
/// the error, which quotes the URL, is kept in the task's record and logged.
pub fn local_key(url: &str) -> Result<(DirType, usize, String), LiveMigrationError> {
    let bad = |what: String| LiveMigrationError::Peer(crate::answer::clip(&what));
    let rest = url
        .strip_prefix("/api/v1/live-migration/files/")
        .ok_or_else(|| bad(format!("unexpected file URL {url:?}")))?;
    let mut parts = rest.splitn(3, '/');
    let (t, i, p) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let t = DirType::parse(t).ok_or_else(|| bad(format!("unknown directory type in {url:?}")))?;
    // Written as drover and Sidecar write it: `+1` and `01` would be other URLs of the same
    // place, so that two entries of one listing could land on one file.
    let i: usize = i
        .parse()
        .ok()
        .filter(|n: &usize| n.to_string() == i)
        .ok_or_else(|| bad(format!("bad directory index in {url:?}")))?;
    files::check_relative(p).map_err(|e| bad(format!("{url:?}: {e}")))?;
    // Names no Linux file system holds: only a hostile listing has them, and every later error
    // about the file would quote them.
    if p.len() >= MAX_PATH_BYTES || p.split('/').any(|s| s.len() > MAX_NAME_BYTES) {
        return Err(bad(format!(
            "a path longer than {MAX_PATH_BYTES} bytes, or with a name longer than {MAX_NAME_BYTES}: {url:?}"
        )));
    }
    // Names of the destination's own staging files: such a file would be deleted at the end
    // of the task, or take another file's place while it downloads.
    if p.ends_with(files::PART_SUFFIX) {
        return Err(bad(format!(
            "{url:?} names a download in progress ({}), which no source lists",
            files::PART_SUFFIX
        )));
    }
    Ok((t, i, p.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_map_to_local_places() {
        assert_eq!(
            local_key("/api/v1/live-migration/files/data/1/ks/t-1/nb-1-big-Data.db").unwrap(),
            (DirType::Data, 1, "ks/t-1/nb-1-big-Data.db".to_string())
        );
        assert!(local_key("/api/v1/live-migration/files/data/0/../x").is_err());
        assert!(local_key("/api/v1/live-migration/files/tmp/0/x").is_err());
        assert!(local_key("/elsewhere/data/0/x").is_err());
    }
}
