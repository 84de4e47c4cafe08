//! Where a destination writes: the directory of an entry, opened from its root one component
//! at a time without following links (see [`beneath::open_dir`]), and the entry's name in it.
//! Every file the copy creates, renames or deletes goes through such a handle, so a symbolic
//! link in the node's directories — planted before the task, or swapped in while it runs —
//! cannot make the destination write the source's bytes, or delete anything, outside them.
//! The roots themselves are the operator's configuration and may be reached through links.
//!
//! Permission bits are bounded here too: a file gets at most 0644 and a directory at most
//! 0755 of what the source lists (what Cassandra itself makes), so a source cannot make the
//! node's files writable by others, executable or set-user-id.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::fsutil::beneath::{self, BeneathError};
use crate::livemigration::LiveMigrationError;
use crate::livemigration::files::Roots;

/// The most a downloaded file's mode may be: read and write for the owner, read for the rest.
pub const FILE_MODE_MASK: u32 = 0o644;
/// The most a created directory's mode may be.
pub const DIR_MODE_MASK: u32 = 0o755;

/// An entry's directory, opened through no link, and its name there.
#[derive(Debug)]
pub struct Place {
    dir: OwnedFd,
    name: String,
    path: PathBuf,
}

impl Place {
    /// The place of `path`, an entry below one of `roots`: its directory is opened, and with
    /// `create` made first, without following any link below the root. A link on the way is
    /// refused with a message naming the path; nothing is written through it. Blocking.
    pub fn open(roots: &Roots, path: &Path, create: bool) -> Result<Self, LiveMigrationError> {
        let (root, rel) = split(roots, path)?;
        if rel.is_empty() {
            return Err(LiveMigrationError::Invalid(format!(
                "{} names no entry below a directory of the node",
                path.display()
            )));
        }
        let (dir_rel, name) = match rel.rsplit_once('/') {
            Some((d, n)) => (d, n),
            None => ("", rel.as_str()),
        };
        let dir = beneath::open_dir(root, dir_rel, create).map_err(|e| refusal(e, path, root))?;
        Ok(Self {
            dir,
            name: name.to_string(),
            path: path.to_path_buf(),
        })
    }

    /// Another handle of the same place (the directory's descriptor duplicated).
    pub fn try_clone(&self) -> std::io::Result<Self> {
        Ok(Self {
            dir: self.dir.try_clone()?,
            name: self.name.clone(),
            path: self.path.clone(),
        })
    }

    /// The entry's name in its directory.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The entry's whole path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of a sibling of the entry named `name`, for messages.
    pub fn sibling(&self, name: &str) -> PathBuf {
        self.path.with_file_name(name)
    }

    /// The entry's directory.
    pub fn dir(&self) -> &OwnedFd {
        &self.dir
    }

    /// Opens `name` of the directory for writing, made (mode 0600 until its own is set) when
    /// missing; a link at that name is refused, not followed. Blocking.
    pub fn create(&self, name: &str, truncate: bool) -> std::io::Result<File> {
        let mut flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if truncate {
            flags |= OFlags::TRUNC;
        }
        let fd = rustix::fs::openat(&self.dir, name, flags, Mode::from_raw_mode(0o600))?;
        Ok(File::from(fd))
    }

    /// Opens `name` of the directory for reading, a link refused. Blocking.
    pub fn open_read(&self, name: &str) -> std::io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
        Ok(File::from(rustix::fs::openat(
            &self.dir,
            name,
            flags,
            Mode::empty(),
        )?))
    }

    /// Whether `name` of the directory is a regular file (a link is not), and its length.
    pub fn file_len(&self, name: &str) -> Option<u64> {
        let st = rustix::fs::statat(&self.dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        (rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile)
            .then_some(st.st_size as u64)
    }

    /// Renames `from` of the directory to `to` of it (whatever is at `to`, a link included,
    /// is replaced, not followed). Blocking.
    pub fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        Ok(rustix::fs::renameat(&self.dir, from, &self.dir, to)?)
    }

    /// Renames `from` of the directory to the entry's name.
    pub fn rename_into_place(&self, from: &str) -> std::io::Result<()> {
        self.rename(from, &self.name)
    }

    /// Moves the entry to `to` of the directory.
    pub fn rename_away(&self, to: &str) -> std::io::Result<()> {
        self.rename(&self.name, to)
    }

    /// Whether the entry is a regular file, and its length.
    pub fn entry_len(&self) -> Option<u64> {
        self.file_len(&self.name)
    }

    /// Removes `name` of the directory, a directory with what it holds; gone is fine.
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        beneath::remove_at(&self.dir, name)
    }

    /// Removes the entry (see [`Place::remove`]).
    pub fn remove_entry(&self) -> std::io::Result<()> {
        self.remove(&self.name)
    }

    /// Opens the entry as a directory, made when missing, through no link. Blocking.
    pub fn make_dir(&self) -> Result<OwnedFd, LiveMigrationError> {
        match rustix::fs::mkdirat(&self.dir, self.name.as_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(LiveMigrationError::local(&self.path)(e.into())),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&self.dir, self.name.as_str(), flags, Mode::empty()).map_err(|e| match e
        {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
                LiveMigrationError::Invalid(format!(
                    "{} is a symbolic link or not a directory: nothing is written through it; \
                         remove it, then start the task again",
                    self.path.display()
                ))
            }
            other => LiveMigrationError::local(&self.path)(other.into()),
        })
    }
}

/// The directory `dir` (one of `roots`, or below one), opened through no link below its
/// root. Blocking.
pub fn open_directory(roots: &Roots, dir: &Path) -> Result<OwnedFd, LiveMigrationError> {
    let (root, rel) = split(roots, dir)?;
    beneath::open_dir(root, &rel, false).map_err(|e| refusal(e, dir, root))
}

/// What a failure to open the directory of `path` below `root` means.
fn refusal(e: BeneathError, path: &Path, root: &Path) -> LiveMigrationError {
    match e {
        BeneathError::Outside => link_refused(path, root),
        BeneathError::NotFound | BeneathError::Directory => LiveMigrationError::Local {
            path: path.to_path_buf(),
            source: std::io::ErrorKind::NotFound.into(),
        },
        BeneathError::Io(source) => LiveMigrationError::Local {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// The mode a file gets from the mode the source lists (0644 when it lists none).
pub fn file_mode(listed: Option<u32>) -> u32 {
    listed.map_or(FILE_MODE_MASK, |m| m & FILE_MODE_MASK)
}

/// The mode a directory the source lists gets (0755 when it lists none).
pub fn dir_mode(listed: Option<u32>) -> u32 {
    listed.map_or(DIR_MODE_MASK, |m| m & DIR_MODE_MASK)
}

/// The refusal of a path that leads through a link below its root.
fn link_refused(path: &Path, root: &Path) -> LiveMigrationError {
    LiveMigrationError::Invalid(format!(
        "{} leads through a symbolic link below {}: nothing is written or deleted through a \
         link in the node's directories; remove the link, then start the task again",
        path.display(),
        root.display()
    ))
}

/// The root `path` is below (the longest one: roots may be nested) and the rest of it,
/// `/`-separated (empty for the root itself).
fn split<'a>(roots: &'a Roots, path: &Path) -> Result<(&'a Path, String), LiveMigrationError> {
    let (root, rest) = roots
        .iter()
        .filter_map(|(_, _, r)| path.strip_prefix(r).ok().map(|rest| (r, rest)))
        .max_by_key(|(r, _)| r.as_os_str().len())
        .ok_or_else(|| {
            LiveMigrationError::Invalid(format!(
                "{} is not below one of the node's directories",
                path.display()
            ))
        })?;
    let rel = rest
        .to_str()
        .ok_or_else(|| LiveMigrationError::Invalid(format!("{} is not UTF-8", path.display())))?
        .to_string();
    Ok((root, rel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn roots(dir: &Path) -> Roots {
        Roots::from_config(&crate::config::CassandraConfig {
            data_file_directories: vec![dir.join("data0")],
            commitlog_directory: Some(dir.join("data0/commitlog")),
            ..Default::default()
        })
    }

    #[test]
    fn places_are_made_below_the_root_and_links_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let data = tmp.path().join("data0");
        let p = Place::open(&r, &data.join("ks/t-1/f"), true).unwrap();
        p.create("f.part", true).unwrap();
        p.rename_into_place("f.part").unwrap();
        assert!(data.join("ks/t-1/f").is_file());
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        symlink(tmp.path().join("outside"), data.join("ks/t-1/linked")).unwrap();
        for create in [true, false] {
            let e = Place::open(&r, &data.join("ks/t-1/linked/f"), create).unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        let linked = Place::open(&r, &data.join("ks/t-1/linked"), false).unwrap();
        assert!(linked.make_dir().is_err());
        // Removing the link removes the link, never what it points to.
        std::fs::write(tmp.path().join("outside/keep"), b"x").unwrap();
        linked.remove_entry().unwrap();
        assert!(tmp.path().join("outside/keep").exists());
        assert!(!data.join("ks/t-1/linked").exists());
        // A directory goes with what it holds; a link inside it is unlinked, not followed.
        std::fs::create_dir_all(data.join("ks/gone/sub")).unwrap();
        symlink(tmp.path().join("outside"), data.join("ks/gone/sub/l")).unwrap();
        Place::open(&r, &data.join("ks/gone"), false)
            .unwrap()
            .remove_entry()
            .unwrap();
        assert!(!data.join("ks/gone").exists());
        assert!(tmp.path().join("outside/keep").exists());
        // The nested root is the one a commit-log path is below.
        assert_eq!(
            split(&r, &data.join("commitlog/x")).unwrap().0,
            data.join("commitlog")
        );
    }

    #[test]
    fn modes_never_exceed_what_cassandra_makes() {
        assert_eq!(file_mode(Some(4095)), 0o644);
        assert_eq!(file_mode(Some(0o4755)), 0o644);
        assert_eq!(file_mode(Some(0o600)), 0o600);
        assert_eq!(file_mode(None), 0o644);
        assert_eq!(dir_mode(Some(4095)), 0o755);
        assert_eq!(dir_mode(Some(0o700)), 0o700);
        assert_eq!(dir_mode(None), 0o755);
    }
}
