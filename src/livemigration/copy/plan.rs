//! Planning an iteration: which local files to delete (gone at the source, or different),
//! which directories to create, which source files to download, and — with a digest — which
//! files that look the same are not.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::livemigration::LiveMigrationError;
use crate::livemigration::digest::{self, Algorithm};
use crate::livemigration::local::LocalFiles;
use crate::livemigration::peer::{PeerClient, RemoteFile};

/// What to do with the local files in one iteration.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Local files and directories to delete (gone at the source, or different); a directory
    /// goes with everything in it, and what is below it is not listed again.
    pub delete: Vec<PathBuf>,
    /// The files those deletions remove, those inside deleted directories included.
    pub deleted_files: usize,
    /// Source entries to fetch or create: files, largest first, then empty files and
    /// directories (created without a request).
    pub download: Vec<(RemoteFile, PathBuf)>,
    /// Source files already here with the same size and modification time.
    pub present: Vec<(RemoteFile, PathBuf)>,
    /// Bytes of the source's files.
    pub total_size: u64,
    /// The source's regular files.
    pub total_files: u64,
    /// Entries of the source's listing: files, directories, and anything else it lists.
    pub listed: u64,
}

impl Plan {
    /// Puts the largest downloads first (ties by URL): the long ones start early, so the
    /// iteration does not end waiting on one big file. Directories come last. Call after
    /// adding downloads.
    pub fn order_downloads(&mut self) {
        self.download.sort_by(|a, b| {
            (b.0.is_file(), b.0.size)
                .cmp(&(a.0.is_file(), a.0.size))
                .then_with(|| a.0.file_url.cmp(&b.0.file_url))
        });
    }

    /// Bytes to download. Cannot wrap: the downloads are some of the listed files, whose
    /// sum [`plan`] has checked.
    pub fn bytes_to_download(&self) -> u64 {
        self.download
            .iter()
            .filter(|(f, _)| f.is_file())
            .fold(0u64, |sum, (f, _)| sum.saturating_add(f.size))
    }

    /// What the source lists and what of it is still to fetch, for the threshold.
    pub fn shares(&self) -> super::request::Shares {
        super::request::Shares {
            total_bytes: self.total_size,
            total_files: self.total_files,
            missing_bytes: self.bytes_to_download(),
            missing_files: self.download.iter().filter(|(f, _)| f.is_file()).count() as u64,
        }
    }
}

/// What a plan may do to the destination's files.
#[derive(Debug, Clone, Copy)]
pub struct PlanLimits {
    /// The largest share of the existing files one plan may delete
    /// (`live_migration.max_delete_share`).
    pub max_delete_share: f64,
    /// The request's `allowMassDeletion`: no share is enforced.
    pub allow_mass_deletion: bool,
    /// What earlier plans of the same task deleted.
    pub before: Deletions,
    /// A local file of at least [`super::fetch::DELTA_MIN`] bytes that differs from the
    /// source's (of at least as many) is kept as the base of a delta download, which replaces
    /// it by a rename, instead of being deleted first (a drover source's block digests).
    pub keep_bases: bool,
}

/// The deletions of a task's plans so far, for the mass-deletion guard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deletions {
    /// Files deleted by the task's plans.
    pub deleted: usize,
    /// The most files the destination held at the start of one of them: the share is of
    /// this, so that deleting half of what is left, plan after plan, still counts as a whole.
    pub most_held: usize,
}

impl Default for PlanLimits {
    fn default() -> Self {
        Self {
            max_delete_share: crate::config::LiveMigrationConfig::default().max_delete_share,
            allow_mass_deletion: false,
            before: Deletions::default(),
            keep_bases: false,
        }
    }
}

/// Compares the source's listing with the local files. Refused, before anything is deleted,
/// when the listed sizes overflow or when the plan would delete more of the local files than
/// `limits` allows. Returns the plan and the task's deletions with it. Blocking.
///
/// A local file goes when the source does not list it as a file of the same size and
/// modification time; a local directory goes, with what it holds, when the source lists
/// neither it (as a directory) nor anything below it. A directory is never deleted for its
/// time, nor one that is or holds one of the node's own directories.
pub fn plan(
    local: &LocalFiles,
    remote: &[RemoteFile],
    limits: PlanLimits,
) -> Result<(Plan, Deletions), LiveMigrationError> {
    let mine = local.list()?;
    // What this node never holds is not copied: a source that lists it (a Sidecar lists
    // snapshots unless told not to, another drover may exclude less) would otherwise have it
    // fetched again by every pass, and a final sync could never end.
    let mut left_out = 0usize;
    let mut kept = Vec::with_capacity(remote.len());
    for f in remote {
        if local.excludes(&local.path_of(&f.file_url)?, f.is_dir()) {
            left_out += 1;
        } else {
            kept.push(f);
        }
    }
    if left_out > 0 {
        tracing::warn!(
            entries = left_out,
            "the source lists files this node excludes; they are not copied"
        );
    }
    let remote = kept;
    let mut theirs = HashMap::new();
    // Directories the listing keeps: those it lists, and those holding what it lists.
    let mut kept_dirs: HashSet<PathBuf> = HashSet::new();
    let mut plan = Plan::default();
    for &f in &remote {
        let path = local.path_of(&f.file_url)?;
        plan.listed += 1;
        if f.is_dir() {
            kept_dirs.insert(path.clone());
        } else if f.is_file() {
            // A wrapped total would make every later size check meaningless.
            plan.total_size = plan.total_size.checked_add(f.size).ok_or_else(|| {
                LiveMigrationError::Invalid(
                    "the sizes the source lists add up to more than 2^64 bytes: the listing is refused"
                        .into(),
                )
            })?;
            plan.total_files += 1;
        }
        for above in path.ancestors().skip(1) {
            if !kept_dirs.insert(above.to_path_buf()) {
                break;
            }
        }
        theirs.insert(path, f);
    }
    let roots: Vec<&std::path::Path> = local.roots.iter().map(|(_, _, d)| d).collect();
    let mut present = HashSet::new();
    let mut dirs_here = HashSet::new();
    let mut deleted_dirs: HashSet<PathBuf> = HashSet::new();
    for e in &mine {
        let path = local
            .roots
            .get(e.dir_type, e.dir_index)
            .expect("listed from the roots")
            .join(&e.path);
        // Below a directory that goes already: it goes with it.
        if path.ancestors().skip(1).any(|a| deleted_dirs.contains(a)) {
            continue;
        }
        if e.is_dir {
            if kept_dirs.contains(&path) || roots.iter().any(|r| r.starts_with(&path)) {
                dirs_here.insert(path);
                continue;
            }
            plan.deleted_files = plan.deleted_files.saturating_add(files_below(&path));
            deleted_dirs.insert(path.clone());
            plan.delete.push(path);
            continue;
        }
        match theirs.get(&path) {
            Some(f) if f.is_file() && f.size == e.size && f.last_modified_time == e.modified_ms => {
                present.insert(path);
            }
            // Downloaded (it is not `present`), from the blocks it shares with the source's.
            Some(f)
                if limits.keep_bases
                    && f.is_file()
                    && f.size >= super::fetch::DELTA_MIN
                    && e.size >= super::fetch::DELTA_MIN => {}
            _ => {
                plan.deleted_files += 1;
                plan.delete.push(path);
            }
        }
    }
    let deletions = check_deletions(&mine, plan.deleted_files, limits)?;
    for &f in &remote {
        let path = local.path_of(&f.file_url)?;
        if f.is_dir() {
            if !dirs_here.contains(&path) {
                plan.download.push((f.clone(), path));
            }
        } else if f.is_file() {
            if present.contains(&path) {
                plan.present.push((f.clone(), path));
            } else {
                plan.download.push((f.clone(), path));
            }
        }
    }
    plan.order_downloads();
    Ok((plan, deletions))
}

/// The files (anything but a directory) below `dir`, symbolic links not followed: what a
/// recursive delete of it removes. Blocking.
fn files_below(dir: &std::path::Path) -> usize {
    let mut count = 0usize;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                _ => count = count.saturating_add(1),
            }
        }
    }
    count
}

/// Refuses to delete more than `limits` allows of the `mine` files, counting what the task's
/// earlier plans deleted: an empty or truncated listing, from a broken or hostile source, must
/// not wipe the destination's node, at once or over several iterations. Returns the task's
/// deletions once this plan's are made.
fn check_deletions(
    mine: &[crate::livemigration::files::Entry],
    deleting: usize,
    limits: PlanLimits,
) -> Result<Deletions, LiveMigrationError> {
    let existing = mine.iter().filter(|e| !e.is_dir).count();
    let after = Deletions {
        deleted: limits.before.deleted.saturating_add(deleting),
        most_held: limits.before.most_held.max(existing),
    };
    if deleting == 0 || limits.allow_mass_deletion {
        return Ok(after);
    }
    let share = after.deleted as f64 / after.most_held.max(1) as f64;
    if deleting >= existing || share > limits.max_delete_share {
        return Err(LiveMigrationError::Invalid(format!(
            "the source's listing would delete {deleting} of the {existing} files here ({} of \
             {} in this task), more than live_migration.max_delete_share ({}) allows; nothing \
             was deleted. If the source really has lost those files, start a task with \
             \"allowMassDeletion\": true",
            after.deleted, after.most_held, limits.max_delete_share
        )));
    }
    Ok(after)
}

/// Carries out the local part of a plan: deletes what differs (directories with what they
/// hold) and creates the node's own directories (Cassandra expects them, even empty); the
/// source's directories are created with the downloads. Each deletion goes through its
/// directory's handle, opened without following links (see [`super::place`]). Blocking.
pub fn clean(local: &LocalFiles, plan: &Plan) -> Result<(), LiveMigrationError> {
    for path in &plan.delete {
        remove_if_present(local, path)?;
    }
    for (_, _, dir) in local.roots.iter() {
        std::fs::create_dir_all(dir).map_err(LiveMigrationError::local(dir))?;
    }
    Ok(())
}

/// Removes a file, or a directory with everything in it (links in it are removed, not
/// followed), reached through no link below its root; one already gone is fine. Blocking.
pub fn remove_if_present(
    local: &LocalFiles,
    path: &std::path::Path,
) -> Result<(), LiveMigrationError> {
    let place = match super::place::Place::open(&local.roots, path, false) {
        Ok(place) => place,
        Err(LiveMigrationError::Local { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    place
        .remove_entry()
        .map_err(LiveMigrationError::local(path))
}

/// The files of `present` whose content here differs from the source's.
pub async fn differing(
    peer: &PeerClient,
    present: &[(RemoteFile, PathBuf)],
    algorithm: Algorithm,
    concurrency: usize,
    cancel: &CancellationToken,
) -> Result<Vec<(RemoteFile, PathBuf)>, LiveMigrationError> {
    let mut checks = futures::stream::iter(present.iter().cloned())
        .map(|(file, path)| async move {
            let here = path.clone();
            let (theirs, mine) = tokio::join!(
                peer.digest(&file.file_url, algorithm, file.size),
                tokio::task::spawn_blocking(move || digest::of_file(&here, algorithm))
            );
            (file, path, theirs, mine.expect("hashing does not panic"))
        })
        .buffer_unordered(concurrency.max(1));
    let mut stale = Vec::new();
    while let Some(checked) = tokio::select! {
        c = checks.next() => c,
        _ = cancel.cancelled() => return Err(LiveMigrationError::Cancelled),
    } {
        match checked {
            (_, _, Err(LiveMigrationError::Gone(_)), _) => {}
            (_, _, Err(e), _) => return Err(e),
            (file, path, Ok(theirs), Ok(mine)) => {
                if theirs != mine {
                    tracing::info!(file = %file.file_url, "same size and time, other content: fetched again");
                    stale.push((file, path));
                }
            }
            // Vanished here meanwhile: it is downloaded like any missing file.
            (file, path, Ok(_), Err(_)) => stale.push((file, path)),
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::livemigration::files::{DirType, Entry};

    fn files(n: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| Entry {
                dir_type: DirType::Data,
                dir_index: 0,
                path: format!("ks/t-1/nb-{i}-big-Data.db"),
                size: 1,
                is_dir: false,
                modified_ms: 0,
                mode: 0o644,
            })
            .collect()
    }

    #[test]
    fn mass_deletions_need_the_flag() {
        let limits = PlanLimits::default();
        let allowed = PlanLimits {
            allow_mass_deletion: true,
            ..limits
        };
        // Half of ten is allowed; more is not, nor every file, however few.
        assert!(check_deletions(&files(10), 5, limits).is_ok());
        assert!(check_deletions(&files(10), 6, limits).is_err());
        assert!(check_deletions(&files(1), 1, limits).is_err());
        assert!(check_deletions(&files(1), 1, allowed).is_ok());
        assert!(check_deletions(&files(0), 0, limits).is_ok());
        let strict = PlanLimits {
            max_delete_share: 0.0,
            ..limits
        };
        assert!(check_deletions(&files(100), 1, strict).is_err());

        // Half of what is left, plan after plan, is counted as a whole: 5 of 10, then 2 of 5.
        let first = check_deletions(&files(10), 5, limits).expect("half");
        assert_eq!(
            first,
            Deletions {
                deleted: 5,
                most_held: 10
            }
        );
        let second = PlanLimits {
            before: first,
            ..limits
        };
        assert!(check_deletions(&files(5), 2, second).is_err());
        assert!(check_deletions(&files(5), 0, second).is_ok());
    }

    /// A node with one data directory and a commit log below `root`.
    fn node(root: &std::path::Path) -> LocalFiles {
        let config = crate::config::CassandraConfig {
            data_file_directories: vec![root.join("data0")],
            commitlog_directory: Some(root.join("commitlog")),
            ..Default::default()
        };
        let roots = crate::livemigration::files::Roots::from_config(&config);
        let exclusions =
            crate::livemigration::exclusions::Exclusions::new(&[], &[], &roots).unwrap();
        LocalFiles { roots, exclusions }
    }

    fn listed(url: &str, size: u64, dir: bool, mtime: u64) -> RemoteFile {
        RemoteFile {
            file_url: format!("/api/v1/live-migration/files/{url}"),
            size,
            file_type: if dir { "DIRECTORY" } else { "FILE" }.into(),
            last_modified_time: mtime,
            mode: None,
        }
    }

    /// A source that lists what this node excludes (a Sidecar source lists snapshots unless
    /// told not to): not fetched, so a final sync can end.
    #[test]
    fn what_this_node_excludes_is_not_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let local = node(dir.path());
        std::fs::create_dir_all(dir.path().join("data0")).unwrap();
        let remote = [
            listed("data/0/ks", 0, true, 1),
            listed("data/0/ks/t-1", 0, true, 1),
            listed("data/0/ks/t-1/nb-1-big-Data.db", 3, false, 1),
            listed("data/0/ks/t-1/snapshots", 0, true, 1),
            listed("data/0/ks/t-1/snapshots/s1", 0, true, 1),
            listed("data/0/ks/t-1/snapshots/s1/nb-1-big-Data.db", 3, false, 1),
            listed("data/0/ks/t-1/backups/nb-1-big-Data.db", 3, false, 1),
        ];
        let (plan, _) = plan(&local, &remote, PlanLimits::default()).unwrap();
        let fetched: Vec<&str> = plan
            .download
            .iter()
            .map(|(f, _)| f.file_url.as_str())
            .collect();
        assert_eq!(fetched.len(), 3, "{fetched:?}");
        assert!(
            fetched
                .iter()
                .all(|u| !u.contains("snapshots") && !u.contains("backups")),
            "{fetched:?}"
        );
    }

    fn put(path: &std::path::Path, bytes: &[u8], mtime_ms: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(mtime_ms);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn directories_the_source_does_not_list_go_with_their_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let local = node(root);
        let data = root.join("data0");
        // Kept: listed itself, or holding a listed file.
        put(&data.join("ks/t-1/nb-1-big-Data.db"), b"abc", 1000);
        std::fs::create_dir_all(data.join("ks/t-empty")).unwrap();
        // Gone: a dropped table with two files, and an excluded-looking dump inside it.
        put(&data.join("ks/t-gone/nb-1-big-Data.db"), b"x", 1000);
        put(&data.join("ks/t-gone/sub/nb-2-big-Data.db"), b"y", 1000);
        std::fs::create_dir_all(data.join("ks/t-gone/sub/deeper")).unwrap();
        // Many more files, so that the guard allows the deletion.
        for i in 0..10 {
            put(&data.join(format!("ks/t-1/f{i}")), b"z", 1000);
        }
        let mut remote = vec![
            listed("data/0/ks/t-1/nb-1-big-Data.db", 3, false, 1000),
            listed("data/0/ks/t-empty", 0, true, 5),
            listed("data/0/ks/t-new", 0, true, 5),
            listed("data/0/ks/t-1/empty.db", 0, false, 7000),
        ];
        for i in 0..10 {
            remote.push(listed(&format!("data/0/ks/t-1/f{i}"), 1, false, 1000));
        }
        let (p, deletions) = plan(&local, &remote, PlanLimits::default()).unwrap();
        // One delete for the directory, counted by the files it holds; the ancestors of the
        // listed file (ks, t-1) and the node's own directories stay.
        assert_eq!(p.delete, vec![data.join("ks/t-gone")]);
        assert_eq!(p.deleted_files, 2);
        assert_eq!(deletions.deleted, 2);
        let fetched: Vec<&str> = p
            .download
            .iter()
            .map(|(f, _)| f.file_url.as_str())
            .collect();
        assert_eq!(
            fetched,
            [
                "/api/v1/live-migration/files/data/0/ks/t-1/empty.db",
                "/api/v1/live-migration/files/data/0/ks/t-new",
            ]
        );
        assert_eq!(p.listed, 14);
        assert_eq!(p.total_files, 12);
        assert_eq!(p.total_size, 13);
        assert_eq!(p.bytes_to_download(), 0);
        clean(&local, &p).unwrap();
        assert!(!data.join("ks/t-gone").exists());
        assert!(data.join("ks/t-empty").is_dir());
        assert!(root.join("commitlog").is_dir());

        // A listing that names none of a directory's files cannot bypass the guard by the
        // directory: its 10 files count.
        let alone = vec![listed("data/0/ks/t-empty", 0, true, 5)];
        let err = plan(&local, &alone, PlanLimits::default()).unwrap_err();
        assert!(
            err.to_string().contains("would delete 11 of the 11 files"),
            "{err}"
        );
        assert!(data.join("ks/t-1/f0").exists());
    }

    #[test]
    fn directories_are_not_deleted_for_their_time_and_roots_never() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let local = node(root);
        let data = root.join("data0");
        put(&data.join("ks/t-1/a"), b"a", 1000);
        put(&data.join("ks/t-1/b"), b"b", 1000);
        let remote = vec![
            listed("data/0/ks", 0, true, 1),
            listed("data/0/ks/t-1", 0, true, 2),
            listed("data/0/ks/t-1/a", 1, false, 1000),
            listed("data/0/ks/t-1/b", 1, false, 1000),
        ];
        let (p, _) = plan(&local, &remote, PlanLimits::default()).unwrap();
        assert!(p.delete.is_empty(), "{:?}", p.delete);
        assert!(p.download.is_empty(), "{:?}", p.download);

        // A root nested in another (here the commit log inside the data directory) is never
        // deleted, though the source does not list it.
        let config = crate::config::CassandraConfig {
            data_file_directories: vec![data.clone()],
            commitlog_directory: Some(data.join("commitlog")),
            ..Default::default()
        };
        let roots = crate::livemigration::files::Roots::from_config(&config);
        let exclusions =
            crate::livemigration::exclusions::Exclusions::new(&[], &[], &roots).unwrap();
        let nested = LocalFiles { roots, exclusions };
        put(&data.join("commitlog/CommitLog-7-1.log"), b"log", 1000);
        let (p, _) = plan(
            &nested,
            &remote,
            PlanLimits {
                allow_mass_deletion: true,
                ..PlanLimits::default()
            },
        )
        .unwrap();
        assert!(p.delete.contains(&data.join("commitlog/CommitLog-7-1.log")));
        assert!(
            !p.delete.contains(&data.join("commitlog")),
            "{:?}",
            p.delete
        );
    }
}
