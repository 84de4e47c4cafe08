//! Small filesystem helpers shared by every subsystem that persists state.

pub mod beneath;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Suffix of in-progress files; a crash can leave these behind, never a half-written final file.
pub const TMP_SUFFIX: &str = ".tmp";

/// Writes `bytes` to `path` so that a reader (or a process restarted after `kill -9` or a power
/// loss) sees either the old content or the new one, never a mix: write a sibling temporary file,
/// fsync it, rename it over the target, then fsync the directory so the rename itself is durable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_as(path, bytes, None)
}

/// [`write_atomic`] for a file that only the daemon's user may read (mode 0600): savepoints,
/// which hold key and row values (a validation's differing rows, a `where` clause's bounds).
/// The mode is the temporary file's from its creation on, so the content is never readable
/// by others, not even for a moment; a file of another mode at `path` is replaced.
pub fn write_atomic_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_as(path, bytes, Some(0o600))
}

fn write_atomic_as(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    // The pid keeps two processes that share a directory by mistake from clobbering each
    // other's temporary file; the state dir lock normally prevents that anyway.
    let tmp = dir.join(format!(
        ".{}.{}{}",
        name.to_string_lossy(),
        std::process::id(),
        TMP_SUFFIX
    ));
    let result = (|| {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let mut file = options.open(&tmp)?;
        if let Some(mode) = mode {
            // A temporary file left by a crash keeps its own mode through `open`, and a
            // umask can only take bits away: set it before any byte is written.
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes directory entry changes (creates, renames, deletes) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Removes temporary files left in `dir` by a process that died mid-write.
pub fn remove_stale_temp_files(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.ends_with(TMP_SUFFIX) {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    }

    #[test]
    fn a_private_write_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("savepoint.yaml");
        fs::write(&path, b"old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic_private(&path, b"rows").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        assert_eq!(fs::read(&path).unwrap(), b"rows");
    }

    #[test]
    fn stale_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".job.json.123.tmp"), b"half").unwrap();
        fs::write(dir.path().join("job.json"), b"whole").unwrap();
        assert_eq!(remove_stale_temp_files(dir.path()).unwrap(), 1);
        assert!(dir.path().join("job.json").exists());
    }
}
