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
    /// Local files to delete (gone at the source, or different).
    pub delete: Vec<PathBuf>,
    /// Directories to create.
    pub mkdirs: Vec<PathBuf>,
    /// Source files to download, largest first.
    pub download: Vec<(RemoteFile, PathBuf)>,
    /// Source files already here with the same size and modification time.
    pub present: Vec<(RemoteFile, PathBuf)>,
    /// Bytes of the source's files.
    pub total_size: u64,
    /// The source's files.
    pub total_files: u64,
}

impl Plan {
    /// Puts the largest downloads first (ties by URL): the long ones start early, so the
    /// iteration does not end waiting on one big file. Call after adding downloads.
    pub fn order_downloads(&mut self) {
        self.download.sort_by(|a, b| {
            b.0.size
                .cmp(&a.0.size)
                .then_with(|| a.0.file_url.cmp(&b.0.file_url))
        });
    }

    /// Bytes to download. Cannot wrap: the downloads are some of the listed files, whose
    /// sum [`plan`] has checked.
    pub fn bytes_to_download(&self) -> u64 {
        self.download
            .iter()
            .fold(0u64, |sum, (f, _)| sum.saturating_add(f.size))
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
        }
    }
}

/// Compares the source's listing with the local files. Refused, before anything is deleted,
/// when the listed sizes overflow or when the plan would delete more of the local files than
/// `limits` allows. Returns the plan and the task's deletions with it. Blocking.
pub fn plan(
    local: &LocalFiles,
    remote: &[RemoteFile],
    limits: PlanLimits,
) -> Result<(Plan, Deletions), LiveMigrationError> {
    let mine = local.list()?;
    let mut theirs = HashMap::new();
    let mut plan = Plan::default();
    for f in remote {
        let path = local.path_of(&f.file_url)?;
        if f.is_dir() {
            plan.mkdirs.push(path.clone());
        } else {
            // A wrapped total would make every later size check meaningless.
            plan.total_size = plan.total_size.checked_add(f.size).ok_or_else(|| {
                LiveMigrationError::Invalid(
                    "the sizes the source lists add up to more than 2^64 bytes: the listing is refused"
                        .into(),
                )
            })?;
            plan.total_files += 1;
        }
        theirs.insert(path, f);
    }
    let mut present = HashSet::new();
    for e in &mine {
        if e.is_dir {
            continue;
        }
        let path = local
            .roots
            .get(e.dir_type, e.dir_index)
            .expect("listed from the roots")
            .join(&e.path);
        match theirs.get(&path) {
            Some(f) if f.is_file() && f.size == e.size && f.last_modified_time == e.modified_ms => {
                present.insert(path);
            }
            _ => plan.delete.push(path),
        }
    }
    let deletions = check_deletions(&mine, plan.delete.len(), limits)?;
    for f in remote {
        if !f.is_file() {
            continue;
        }
        let path = local.path_of(&f.file_url)?;
        if present.contains(&path) {
            plan.present.push((f.clone(), path));
        } else {
            plan.download.push((f.clone(), path));
        }
    }
    plan.order_downloads();
    Ok((plan, deletions))
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

/// Carries out the local part of a plan: deletes what differs and creates the node's own
/// directories, then the source's. Blocking.
pub fn clean(local: &LocalFiles, plan: &Plan) -> Result<(), LiveMigrationError> {
    for path in &plan.delete {
        remove_if_present(path)?;
    }
    // The node's own directories first: Cassandra expects them, even empty.
    let roots: Vec<PathBuf> = local
        .roots
        .iter()
        .map(|(_, _, d)| d.to_path_buf())
        .collect();
    for dir in roots.iter().chain(&plan.mkdirs) {
        std::fs::create_dir_all(dir).map_err(LiveMigrationError::local(dir))?;
    }
    Ok(())
}

/// Removes a file; one already gone is fine. Blocking.
pub fn remove_if_present(path: &std::path::Path) -> Result<(), LiveMigrationError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(LiveMigrationError::local(path)(e))
        }
        _ => Ok(()),
    }
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
                peer.digest(&file.file_url, algorithm),
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
}
