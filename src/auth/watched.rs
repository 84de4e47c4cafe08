//! A small file read again whenever it changes: token lists and signing keys, so an operator
//! can rotate them by rewriting the file, without a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What tells one version of a file from the next without reading it. The inode is part of
/// it so that an atomic replace (write elsewhere, rename over) is seen even when the new file
/// has the old one's size and mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    Ok(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode: meta.ino(),
    })
}

struct Current<T> {
    stamp: Option<Stamp>,
    value: Arc<T>,
    /// The last failure warned about, so a broken file is reported once, not per request.
    last_error: Option<String>,
}

/// The parsed content of a file, kept current.
pub struct Watched<T> {
    path: PathBuf,
    what: &'static str,
    load: fn(&Path) -> Result<T, String>,
    current: Mutex<Current<T>>,
}

impl<T: Default> Watched<T> {
    /// Reads `path` now; `what` names it in warnings. A file that cannot be read or parsed
    /// starts as `T::default()` (nothing accepted) with a warning: the config check at start
    /// has already refused such a file, so this only happens when it broke since.
    pub fn new(path: &Path, what: &'static str, load: fn(&Path) -> Result<T, String>) -> Self {
        let watched = Self {
            path: path.to_path_buf(),
            what,
            load,
            current: Mutex::new(Current {
                stamp: None,
                value: Arc::new(T::default()),
                last_error: None,
            }),
        };
        watched.get();
        watched
    }

    /// The content as of now: the file is read again when its stamp changed. A version that
    /// does not parse is refused with a warning and the previous content stays in force, so a
    /// half-written edit never locks everyone out; a deleted file counts as empty, so deleting
    /// it revokes what it held.
    pub fn get(&self) -> Arc<T> {
        let now = stamp(&self.path);
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let now = match now {
            Ok(now) => now,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if current.stamp.is_some() {
                    tracing::warn!(path = %self.path.display(), "{} was removed: its entries no longer apply", self.what);
                    current.stamp = None;
                    current.value = Arc::new(T::default());
                }
                return current.value.clone();
            }
            Err(e) => {
                self.warn_once(&mut current, e.to_string());
                return current.value.clone();
            }
        };
        if current.stamp.as_ref() == Some(&now) {
            return current.value.clone();
        }
        match (self.load)(&self.path) {
            Ok(value) => {
                if current.stamp.is_some() {
                    tracing::info!(path = %self.path.display(), "{} changed and was read again", self.what);
                }
                current.stamp = Some(now);
                current.value = Arc::new(value);
                current.last_error = None;
            }
            // The stamp is not recorded: the next request tries again, and a writer that was
            // half-way through is picked up once it finishes.
            Err(e) => self.warn_once(&mut current, e),
        }
        current.value.clone()
    }

    fn warn_once(&self, current: &mut Current<T>, error: String) {
        if current.last_error.as_ref() != Some(&error) {
            tracing::warn!(path = %self.path.display(), error = %error, "{} cannot be read; its previous content stays in force", self.what);
            current.last_error = Some(error);
        }
    }
}
