//! Opening a file below a directory so that the open itself is the containment check: no
//! symbolic link is followed at any component and nothing outside the directory can be
//! reached. A check on the path followed by a separate open can be raced (a directory swapped
//! for a link in between); an open relative to the directory's handle cannot.
//!
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` does it in one call; on kernels
//! without it (before 5.6, or a seccomp filter that answers `ENOSYS`) each component is
//! opened from the previous one's handle with `O_NOFOLLOW`.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Why a file below a directory was not opened.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// A component is a symbolic link, `.`, `..` or empty: the path could lead elsewhere.
    #[error("the path leads through a symbolic link or outside its directory")]
    Outside,
    /// Nothing there, a component is not a directory, or the file is neither a regular file
    /// nor a directory.
    #[error("no such file")]
    NotFound,
    /// The path names a directory (reached through no link).
    #[error("a directory")]
    Directory,
    /// Anything else (permissions, I/O).
    #[error(transparent)]
    Io(std::io::Error),
}

/// How components are resolved; both refuse the same paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// One `openat2` call (falls back to [`Method::Walk`] when the kernel lacks it).
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component.
    Walk,
}

/// Set once `openat2` answered `ENOSYS`: no need to ask again.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens the regular file `rel` (`/`-separated, every component a plain name) below the
/// directory `root` for reading. `root` itself may be reached through links (it is the
/// operator's configuration); nothing below it is. Blocking.
pub fn open_file(root: &Path, rel: &str) -> Result<File, BeneathError> {
    open_file_with(root, rel, Method::Openat2)
}

/// [`open_file`] with a chosen method (tests exercise both).
pub fn open_file_with(root: &Path, rel: &str, method: Method) -> Result<File, BeneathError> {
    if !plain(rel) {
        return Err(BeneathError::Outside);
    }
    let dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(not_found_or_io)?;
    // O_NONBLOCK: opening a FIFO planted in the tree must not hang the request; it is then
    // refused as not a regular file.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = match method {
        Method::Openat2 if !NO_OPENAT2.load(Ordering::Relaxed) => {
            match openat2(&dir, rel, flags | OFlags::NONBLOCK) {
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    walk(&dir, rel, flags | OFlags::NONBLOCK)
                }
                // Some container runtimes' filters refuse unknown calls with EPERM.
                Err(Errno::PERM) => walk(&dir, rel, flags | OFlags::NONBLOCK),
                other => other.map_err(|e| classify(&dir, rel, e)),
            }
        }
        _ => walk(&dir, rel, flags | OFlags::NONBLOCK),
    }?;
    let stat = rustix::fs::fstat(&fd).map_err(io)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(BeneathError::Directory),
        _ => return Err(BeneathError::NotFound),
    }
    Ok(File::from(fd))
}

/// Opens the directory `rel` below `root` (`""`: the root itself), each component from the
/// previous one's handle with `O_NOFOLLOW`, so no symbolic link below the root is followed;
/// with `create`, missing components are made with mode 0755 less the umask (what Cassandra
/// makes). What a destination writes, renames or deletes goes through such a handle: a link
/// planted in its data directory cannot send the source's files elsewhere. Blocking.
pub fn open_dir(root: &Path, rel: &str, create: bool) -> Result<OwnedFd, BeneathError> {
    if !rel.is_empty() && !plain(rel) {
        return Err(BeneathError::Outside);
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if create {
        std::fs::create_dir_all(root).map_err(BeneathError::Io)?;
    }
    let mut current = rustix::fs::open(root, flags, Mode::empty()).map_err(not_found_or_io)?;
    for name in rel.split('/').filter(|c| !c.is_empty()) {
        if create {
            match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(not_found_or_io(e)),
            }
        }
        let next = rustix::fs::openat(&current, name, flags | OFlags::NOFOLLOW, Mode::empty())
            .map_err(|e| classify(&current, name, e))?;
        current = next;
    }
    Ok(current)
}

/// Removes the entry `name` of the directory `dir`: a file or a link is unlinked (a link is
/// never followed), a directory goes with everything below it, each level opened from its
/// parent's handle without following links. One already gone is fine. Blocking.
pub fn remove_at(dir: &impl AsFd, name: &str) -> std::io::Result<()> {
    let name = std::ffi::CString::new(name)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in a name"))?;
    remove_entry(dir.as_fd(), &name)
}

fn remove_entry(dir: std::os::fd::BorrowedFd<'_>, name: &std::ffi::CStr) -> std::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        };
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let sub = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(sub) => sub,
        Err(Errno::NOENT) => return Ok(()),
        // Swapped for a link or a file since it was looked at: that is unlinked, not followed.
        Err(Errno::LOOP | Errno::NOTDIR) => {
            return match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                Err(e) => Err(e.into()),
            };
        }
        Err(e) => return Err(e.into()),
    };
    // The names first: entries removed while a directory is read may make it skip others.
    let mut names = Vec::new();
    let mut entries = rustix::fs::Dir::read_from(&sub)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let child = entry.file_name();
        if child.to_bytes() != b"." && child.to_bytes() != b".." {
            names.push(child.to_owned());
        }
    }
    for child in names {
        remove_entry(sub.as_fd(), &child)?;
    }
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Every component a plain name: no `..`, `.`, empty one or NUL.
fn plain(rel: &str) -> bool {
    !rel.contains('\0')
        && !rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
}

fn openat2(dir: &OwnedFd, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    // EAGAIN: a concurrent rename somewhere made the kernel unsure; asking again settles it.
    let mut last = Errno::AGAIN;
    for _ in 0..8 {
        match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) => continue,
            Err(e) => {
                last = e;
                break;
            }
            Ok(fd) => return Ok(fd),
        }
    }
    Err(last)
}

fn walk(dir: &OwnedFd, rel: &str, flags: OFlags) -> Result<OwnedFd, BeneathError> {
    let mut components = rel.split('/').peekable();
    let mut current: Option<OwnedFd> = None;
    while let Some(name) = components.next() {
        let at = current.as_ref().unwrap_or(dir);
        let last = components.peek().is_none();
        let component_flags = if last {
            flags
        } else {
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        };
        let fd = rustix::fs::openat(at, name, component_flags, Mode::empty())
            .map_err(|e| classify(at, name, e))?;
        current = Some(fd);
    }
    current.ok_or(BeneathError::Outside)
}

/// What a failed open means. `ELOOP` (a link under `O_NOFOLLOW` or `RESOLVE_NO_SYMLINKS`)
/// and `EXDEV` (an escape under `RESOLVE_BENEATH`) are refusals; `ENOTDIR` may be a link
/// met where a directory was expected, which the message should call a link. The `statat`
/// here only names the error: the open has already refused.
fn classify(at: &impl AsFd, rel: &str, e: Errno) -> BeneathError {
    match e {
        Errno::LOOP | Errno::XDEV => BeneathError::Outside,
        Errno::NOTDIR => {
            let mut prefix = String::new();
            for name in rel.split('/') {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(name);
                match rustix::fs::statat(at, prefix.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                        return BeneathError::Outside;
                    }
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
                    _ => break,
                }
            }
            BeneathError::NotFound
        }
        other => not_found_or_io(other),
    }
}

fn not_found_or_io(e: Errno) -> BeneathError {
    if e == Errno::NOENT || e == Errno::NOTDIR {
        BeneathError::NotFound
    } else {
        io(e)
    }
}

fn io(e: Errno) -> BeneathError {
    BeneathError::Io(std::io::Error::from(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    const METHODS: [Method; 2] = [Method::Openat2, Method::Walk];

    fn read(f: File) -> String {
        let mut s = String::new();
        { f }.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn files_below_the_root_open_and_links_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("ks/t")).unwrap();
        std::fs::write(root.join("ks/t/a"), "inside").unwrap();
        std::fs::write(tmp.path().join("secret"), "outside").unwrap();
        std::fs::create_dir(tmp.path().join("elsewhere")).unwrap();
        std::fs::write(tmp.path().join("elsewhere/a"), "outside").unwrap();
        symlink(tmp.path().join("secret"), root.join("ks/t/link")).unwrap();
        symlink("a", root.join("ks/t/relative")).unwrap();
        symlink(tmp.path().join("elsewhere"), root.join("ks/dirlink")).unwrap();
        symlink("t", root.join("ks/inner")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, root.join("ks/fifo"), Mode::RUSR).unwrap();
        // A root reached through a link is the operator's choice and is followed.
        symlink(&root, tmp.path().join("root-link")).unwrap();
        for method in METHODS {
            let open = |rel: &str| open_file_with(&root, rel, method);
            assert_eq!(read(open("ks/t/a").unwrap()), "inside", "{method:?}");
            assert_eq!(
                read(open_file_with(&tmp.path().join("root-link"), "ks/t/a", method).unwrap()),
                "inside"
            );
            for rel in [
                "ks/t/link",
                "ks/t/relative",
                "ks/dirlink/a",
                "ks/inner/a",
                "../secret",
                "ks/../../secret",
                "./ks/t/a",
                "ks//t/a",
                "/ks/t/a",
                "",
            ] {
                assert!(
                    matches!(open(rel), Err(BeneathError::Outside)),
                    "{method:?} {rel}: {:?}",
                    open(rel)
                );
            }
            assert!(
                matches!(open("ks/t"), Err(BeneathError::Directory)),
                "{method:?}: {:?}",
                open("ks/t")
            );
            for rel in ["ks/t/missing", "ks/t/a/b", "ks/fifo", "nope/a"] {
                assert!(
                    matches!(open(rel), Err(BeneathError::NotFound)),
                    "{method:?} {rel}: {:?}",
                    open(rel)
                );
            }
        }
    }
}
