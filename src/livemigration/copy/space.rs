//! Whether an iteration's downloads fit: the bytes still to fetch, per file system, against
//! its free space less a margin. A source can list any size; the destination checks before
//! it writes, so a lie fails the task instead of filling the node's disks.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::livemigration::LiveMigrationError;
use crate::livemigration::local::{LocalFiles, local_key};
use crate::livemigration::peer::RemoteFile;

use super::fetch::staging_path;

/// Refuses `download` when, on any file system, the bytes still to fetch plus `margin` exceed
/// the space available to this process. Staging files of earlier attempts count as fetched:
/// they are continued, not started over. Blocking.
pub fn check(
    local: &LocalFiles,
    download: &[(RemoteFile, PathBuf)],
    margin: u64,
) -> Result<(), LiveMigrationError> {
    // Bytes per root directory first: the roots are few, the files may be millions.
    let mut per_root: BTreeMap<PathBuf, u64> = BTreeMap::new();
    for (file, path) in download {
        let (t, i, _) = local_key(&file.file_url)?;
        let Some(root) = local.roots.get(t, i) else {
            continue;
        };
        // A link at the staging name is not bytes had: it is refused, not continued.
        let have = std::fs::symlink_metadata(staging_path(path, file))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .unwrap_or(0);
        let need = per_root.entry(root.to_path_buf()).or_default();
        *need = need.saturating_add(file.size.saturating_sub(have));
    }
    // Then per file system: two roots on one disk share its free space.
    let mut per_device: BTreeMap<u64, (PathBuf, u64, u64)> = BTreeMap::new();
    for (root, need) in per_root {
        let (device, available) = free_space(&root)?;
        let entry = per_device
            .entry(device)
            .or_insert_with(|| (root.clone(), 0, available));
        entry.1 = entry.1.saturating_add(need);
    }
    for (root, need, available) in per_device.into_values() {
        if need.saturating_add(margin) > available {
            return Err(LiveMigrationError::Invalid(format!(
                "the downloads need {} on the file system of {}, which has {} available, and \
                 live_migration.min_free_disk keeps {} free: nothing was downloaded",
                bytesize::ByteSize::b(need),
                root.display(),
                bytesize::ByteSize::b(available),
                bytesize::ByteSize::b(margin)
            )));
        }
    }
    Ok(())
}

/// The device of `dir` and the bytes an unprivileged writer may still use on it.
fn free_space(dir: &Path) -> Result<(u64, u64), LiveMigrationError> {
    let local = LiveMigrationError::local(dir);
    let device = std::fs::metadata(dir).map_err(local)?.dev();
    let stat = rustix::fs::statvfs(dir)
        .map_err(|e| LiveMigrationError::local(dir)(std::io::Error::from(e)))?;
    Ok((device, stat.f_bavail.saturating_mul(stat.f_frsize)))
}
