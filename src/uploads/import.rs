//! Imports of staged uploads through `nodetool import`, one table at a time, and the log of
//! what was imported.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{UploadError, io_at};

/// Sidecar's import options (query parameters of the import route), each mapped to the
/// `nodetool import` flag that turns the node's default off (or `extendedVerify` and
/// `copyData` on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImportOptions {
    /// Reset the SSTables' level to 0 (default true; false: `--keep-level`).
    pub reset_level: bool,
    /// Clear their repaired state (default true; false: `--keep-repaired`).
    pub clear_repaired: bool,
    /// Verify them before importing (default true; false: `--no-verify`).
    pub verify_sstables: bool,
    /// Check that their tokens belong to this node (default true; false: `--no-tokens`).
    pub verify_tokens: bool,
    /// Invalidate the row cache of the imported keys (default true; false:
    /// `--no-invalidate-caches`).
    pub invalidate_caches: bool,
    /// Verify every partition and row, not only the checksums (default true:
    /// `--extended-verify`).
    pub extended_verify: bool,
    /// Copy instead of moving the files (default false: `--copy-data` when true).
    pub copy_data: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            reset_level: true,
            clear_repaired: true,
            verify_sstables: true,
            verify_tokens: true,
            invalidate_caches: true,
            extended_verify: true,
            copy_data: false,
        }
    }
}

impl ImportOptions {
    fn flags(&self) -> Vec<&'static str> {
        let mut flags = Vec::new();
        for (on, flag) in [
            (!self.reset_level, "--keep-level"),
            (!self.clear_repaired, "--keep-repaired"),
            (!self.verify_sstables, "--no-verify"),
            (!self.verify_tokens, "--no-tokens"),
            (!self.invalidate_caches, "--no-invalidate-caches"),
            (self.extended_verify, "--extended-verify"),
            (self.copy_data, "--copy-data"),
        ] {
            if on {
                flags.push(flag);
            }
        }
        flags
    }
}

/// Where an import stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportStatus {
    /// Running (or waiting for another import of the same table).
    Pending,
    /// Imported (now, or earlier: remembered for `imported_expiry`).
    Done,
    /// The node refused it, or nodetool failed; asking again tries again.
    Failed(String),
}

/// How the node is asked to import.
pub(super) enum Importer {
    /// One `nodetool import` per batch (a JVM start each).
    Nodetool {
        nodetool: PathBuf,
        /// `host:port` of the node's JMX.
        jmx: Option<String>,
    },
    /// One JVM kept running that calls the node's MBean.
    Jmx(super::jmx::JmxImporter),
}

/// One upload's import.
pub(super) struct Command {
    pub keyspace: String,
    pub table: String,
    /// The table's directory of the upload.
    pub dir: PathBuf,
    /// The upload's directory (removed once nothing is left in it).
    pub upload_dir: PathBuf,
    pub options: ImportOptions,
    pub timeout: Duration,
}

type Key = (String, String, String);

enum Outcome {
    Running,
    Failed(String),
}

#[derive(Default)]
struct State {
    /// Imported (upload id, keyspace, table), with when.
    imported: HashMap<Key, u64>,
    /// Imports running, or failed and not yet reported.
    outcomes: HashMap<Key, Outcome>,
    /// Imports waiting, per table, and whether a worker is importing that table: a table's
    /// imports run one `nodetool import` at a time, each taking every directory waiting then
    /// (a JVM start per upload would cost more than most imports).
    queues: HashMap<(String, String), Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<(Key, Command)>,
    working: bool,
}

/// Most directories one `nodetool import` takes.
const MAX_BATCH: usize = 64;

/// Most imports running or waiting at once; more are refused (each holds a task).
const MAX_OUTCOMES: usize = 10_000;
/// Imports remembered in memory before the expired ones are dropped.
const MAX_REMEMBERED: usize = 100_000;

/// The imports of this node.
pub(super) struct Imports {
    importer: Arc<Importer>,
    log: PathBuf,
    expiry: Duration,
    state: Arc<Mutex<State>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Imports {
    /// Nothing imported, nothing kept (the routes are off).
    pub fn empty(staging: &Path, importer: Importer) -> Self {
        Self {
            importer: Arc::new(importer),
            log: staging.join("imported.log"),
            expiry: Duration::ZERO,
            state: Arc::default(),
        }
    }

    /// Reads the log of imported uploads under `staging`, dropping entries older than
    /// `expiry` (and rewriting it without them).
    pub fn open(staging: &Path, expiry: Duration, importer: Importer) -> Result<Self, UploadError> {
        let log = staging.join("imported.log");
        let mut state = State::default();
        let text = match std::fs::read_to_string(&log) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io_at(&log)(e)),
        };
        let oldest = now_secs().saturating_sub(expiry.as_secs());
        let mut dropped = false;
        for line in text.lines() {
            let mut parts = line.split('\t');
            let (Some(at), Some(id), Some(ks), Some(table)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                dropped = true;
                continue;
            };
            match at.parse::<u64>() {
                Ok(at) if at >= oldest => {
                    state
                        .imported
                        .insert((id.to_string(), ks.to_string(), table.to_string()), at);
                }
                _ => dropped = true,
            }
        }
        if dropped {
            let kept: String = state
                .imported
                .iter()
                .map(|((id, ks, t), at)| format!("{at}\t{id}\t{ks}\t{t}\n"))
                .collect();
            crate::fsutil::write_atomic(&log, kept.as_bytes()).map_err(io_at(&log))?;
        }
        Ok(Self {
            importer: Arc::new(importer),
            log,
            expiry,
            state: Arc::new(Mutex::new(state)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this table of this upload was imported (within `imported_expiry`).
    pub fn was_imported(&self, key: (&str, &str, &str)) -> bool {
        let key = (key.0.to_string(), key.1.to_string(), key.2.to_string());
        let oldest = now_secs().saturating_sub(self.expiry.as_secs());
        self.lock()
            .imported
            .get(&key)
            .is_some_and(|at| *at >= oldest)
    }

    /// Upload ids with an import running.
    pub fn running_ids(&self) -> Vec<String> {
        self.lock()
            .outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Running))
            .map(|((id, _, _), _)| id.clone())
            .collect()
    }

    /// Starts the import of `command`'s directory, or reports the one started before.
    pub fn start(&self, upload_id: &str, command: Command) -> Result<ImportStatus, UploadError> {
        let key = (
            upload_id.to_string(),
            command.keyspace.clone(),
            command.table.clone(),
        );
        if self.was_imported((&key.0, &key.1, &key.2)) {
            return Ok(ImportStatus::Done);
        }
        let mut state = self.lock();
        match state.outcomes.remove(&key) {
            Some(Outcome::Running) => {
                state.outcomes.insert(key, Outcome::Running);
                return Ok(ImportStatus::Pending);
            }
            // Reported once; the next request tries again.
            Some(Outcome::Failed(message)) => return Ok(ImportStatus::Failed(message)),
            None => {}
        }
        if !command.dir.is_dir() {
            return Err(UploadError::NotFound(format!(
                "no upload {upload_id} of {}.{} is staged on this node",
                command.keyspace, command.table
            )));
        }
        // Imports older than `imported_expiry` are forgotten as the daemon runs, not only
        // when it starts (the log itself is rewritten without them at the next start).
        if state.imported.len() >= MAX_REMEMBERED {
            let oldest = now_secs().saturating_sub(self.expiry.as_secs());
            state.imported.retain(|_, at| *at >= oldest);
        }
        if state.outcomes.len() >= MAX_OUTCOMES {
            return Err(UploadError::TooMany(format!(
                "{MAX_OUTCOMES} imports are running or waiting already; retry later"
            )));
        }
        state.outcomes.insert(key.clone(), Outcome::Running);
        let table = (command.keyspace.clone(), command.table.clone());
        let queue = state.queues.entry(table.clone()).or_default();
        queue.waiting.push((key, command));
        if !queue.working {
            queue.working = true;
            let shared = self.state.clone();
            let log = self.log.clone();
            tokio::spawn(work(self.importer.clone(), shared, log, table));
        }
        Ok(ImportStatus::Pending)
    }
}

/// How long a batch waits for more imports of its table before nodetool starts: a bulk
/// writer's units tend to end together, and one more directory costs far less than one more
/// nodetool run.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// Imports a table's waiting uploads, a batch at a time, until none is left.
async fn work(
    importer: Arc<Importer>,
    shared: Arc<Mutex<State>>,
    log: PathBuf,
    table: (String, String),
) {
    loop {
        tokio::time::sleep(BATCH_WINDOW).await;
        let batch = {
            let mut state = shared.lock().unwrap_or_else(|p| p.into_inner());
            let queue = state
                .queues
                .get_mut(&table)
                .expect("a worker's queue stays");
            let Some(first) = queue.waiting.first().map(|(_, c)| c.options) else {
                queue.working = false;
                return;
            };
            // Only imports of the same options go together; copies cannot be told apart
            // afterwards (see below), so they go one at a time.
            let limit = if first.copy_data { 1 } else { MAX_BATCH };
            let mut batch = Vec::new();
            let mut i = 0;
            while i < queue.waiting.len() && batch.len() < limit {
                if queue.waiting[i].1.options == first {
                    batch.push(queue.waiting.remove(i));
                } else {
                    i += 1;
                }
            }
            batch
        };
        let commands: Vec<&Command> = batch.iter().map(|(_, c)| c).collect();
        let had: Vec<bool> = commands.iter().map(|c| holds_sstables(&c.dir)).collect();
        let outcome = match importer.as_ref() {
            Importer::Nodetool { nodetool, jmx } => run(nodetool, jmx.as_deref(), &commands).await,
            Importer::Jmx(jmx) => call(jmx, &commands).await,
        };
        for ((key, command), had) in batch.iter().zip(had) {
            // When nodetool reports a failure, the directories the node imported are those
            // it emptied: it moves the files of each directory it accepts.
            let imported = match &outcome {
                Ok(()) => true,
                Err(_) => had && !holds_sstables(&command.dir),
            };
            let result = if imported {
                record(&log, key).map(|()| {
                    // Only what the node left behind (nothing, unless it copied).
                    let _ = std::fs::remove_dir_all(&command.dir);
                    remove_empty_parents(&command.dir, &command.upload_dir);
                })
            } else {
                Err(outcome.as_ref().err().map_or_else(
                    || UploadError::ImportFailed("not imported".into()),
                    |e| UploadError::ImportFailed(e.to_string()),
                ))
            };
            let mut state = shared.lock().unwrap_or_else(|p| p.into_inner());
            match result {
                Ok(()) => {
                    tracing::info!(upload_id = %key.0, keyspace = %key.1, table = %key.2, extended_verify = command.options.extended_verify, "SSTables imported");
                    state.outcomes.remove(key);
                    state.imported.insert(key.clone(), now_secs());
                }
                Err(e) => {
                    tracing::warn!(upload_id = %key.0, keyspace = %key.1, table = %key.2, error = %e, "SSTable import failed");
                    state
                        .outcomes
                        .insert(key.clone(), Outcome::Failed(e.to_string()));
                }
            }
        }
    }
}

/// Whether a directory still holds an SSTable (a `Data.db`).
fn holds_sstables(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with("-Data.db"))
    })
}

/// Appends an import to the log, durably, before its directory goes.
fn record(log: &Path, (id, ks, table): &Key) -> Result<(), UploadError> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io_at(log))?;
    writeln!(file, "{}\t{id}\t{ks}\t{table}", now_secs()).map_err(io_at(log))?;
    file.sync_all().map_err(io_at(log))
}

/// Removes the keyspace and upload directories above `dir` once they are empty.
fn remove_empty_parents(dir: &Path, upload_dir: &Path) {
    let mut at = dir.parent();
    while let Some(d) = at {
        if !d.starts_with(upload_dir) || std::fs::remove_dir(d).is_err() {
            break;
        }
        at = d.parent();
    }
}

/// Imports the directories of `commands` (one table, one set of options) with one JMX call,
/// in the words nodetool would use.
async fn call(jmx: &super::jmx::JmxImporter, commands: &[&Command]) -> Result<(), UploadError> {
    let c = commands[0];
    let dirs: Vec<&Path> = commands.iter().map(|c| c.dir.as_path()).collect();
    let failed = |said: String| {
        UploadError::ImportFailed(format!(
            "Failed to import {}.{} (importNewSSTables through JMX at {}): {}",
            c.keyspace,
            c.table,
            jmx.address(),
            crate::answer::cap(&said)
        ))
    };
    match jmx
        .import((&c.keyspace, &c.table), &c.options, &dirs, c.timeout)
        .await
    {
        Ok(not_imported) if not_imported.is_empty() => Ok(()),
        Ok(not_imported) => Err(failed(format!(
            "the node failed to import {} of {} directories, its log says why: {}",
            not_imported.len(),
            dirs.len(),
            not_imported
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Err(said) => Err(failed(said)),
    }
}

/// Runs one `nodetool import` of the directories of `commands` (one table, one set of
/// options) and turns a refusal into the node's own words.
async fn run(nodetool: &Path, jmx: Option<&str>, commands: &[&Command]) -> Result<(), UploadError> {
    use crate::cassandra::nodetool::Failure;
    let c = commands[0];
    let mut args: Vec<std::ffi::OsString> = vec!["import".into()];
    args.extend(c.options.flags().into_iter().map(Into::into));
    args.extend([
        "--".into(),
        c.keyspace.clone().into(),
        c.table.clone().into(),
    ]);
    args.extend(commands.iter().map(|c| c.dir.clone().into_os_string()));
    let shown = format!("{} import", nodetool.display());
    crate::cassandra::nodetool::run(nodetool, jmx, args, c.timeout)
        .await
        .map_err(|f| {
            UploadError::ImportFailed(match f {
                Failure::TimedOut => format!(
                    "{shown} of {}.{} did not end within sstable_uploads.import_timeout ({})",
                    c.keyspace,
                    c.table,
                    humantime::format_duration(c.timeout)
                ),
                Failure::NotRun(e) => {
                    format!("{shown} could not be run (sstable_uploads.nodetool): {e}")
                }
                Failure::Failed(status, said) => format!(
                    "Failed to import {}.{} ({shown} ended with {status}): {said}",
                    c.keyspace, c.table
                ),
            })
        })
}
