//! The one error type of live migration: the configuration and the state file, what a request
//! is refused for, and why a data-copy or verification task (or one download) failed.
//!
//! Display texts are what operators see in a task's `error` and in error responses, so each
//! variant carries a complete sentence; the API maps variants to statuses.

use std::path::PathBuf;

use super::files::PathError;
use crate::jobs::{JobError, JobState};

/// Errors of live migration.
#[derive(Debug, thiserror::Error)]
pub enum LiveMigrationError {
    /// The configuration cannot be used.
    #[error("live_migration: {0}")]
    Config(String),
    /// An exclusion pattern is malformed.
    #[error("{0}")]
    Pattern(String),
    /// The state file could not be read or written.
    #[error("live migration state {}: {source}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A request's values are wrong; the message names the field.
    #[error("{0}")]
    InvalidRequest(String),
    /// The status is COMPLETED already, and was declared complete once more (Sidecar's
    /// message).
    #[error("Live migration marked as COMPLETED earlier.")]
    AlreadyCompleted,
    /// The status was to be cleared while this node is still in `migration_map` (Sidecar
    /// clears it only once the node has left the map).
    #[error(
        "{name} is still in live_migration.migration_map: remove it from the map (and restart) before clearing its live migration status"
    )]
    StillInMap {
        /// How this node is named.
        name: String,
    },
    /// The status was to be cleared while it is not COMPLETED.
    #[error("Live Migration status is not set as completed for instance {name}")]
    NotCompleted {
        /// How this node is named.
        name: String,
    },
    /// The status is COMPLETED: a source serves no more files.
    #[error("the live migration of this node is COMPLETED: no more files are served")]
    NoMoreFiles,
    /// As many file requests as `max_concurrent_file_requests` are being served.
    #[error(
        "more than {limit} file requests at once (live_migration.max_concurrent_file_requests); retry later"
    )]
    TooManyFileRequests {
        /// The configured limit.
        limit: usize,
    },
    /// As many listings as `max_concurrent_listings` were being built for all of
    /// `listing_wait`.
    #[error(
        "more than {limit} file listings at once (live_migration.max_concurrent_listings); retry later"
    )]
    TooManyListings {
        /// The configured limit.
        limit: usize,
    },
    /// A task needs a destination, and this node is not one.
    #[error("this node is not a live-migration destination")]
    NotDestination,
    /// Files would be copied under a node that is running (the Sidecar's message, then where
    /// it answers).
    #[error(
        "Cannot start data copy: Cassandra is currently running on this instance (JMX or native connectivity established). Data copy cannot proceed while Cassandra is active. (The local Cassandra node answers on {address}: stop it before files are copied into its directories.)"
    )]
    NodeRunning {
        /// Where the node answers.
        address: String,
    },
    /// A data-copy task was asked for while a task of either kind has not ended: one task runs
    /// at a time on a node (Sidecar's message first).
    #[error(
        "Another task is already under progress. Cannot accept new task. ({noun} {id} is {state}; one data-copy or verification task runs at a time)"
    )]
    CopyTaskActive {
        /// What the task that has not ended is (`data-copy task`, `verification task`).
        noun: &'static str,
        /// The task that has not ended.
        id: String,
        /// Its state.
        state: JobState,
    },
    /// A verification task was asked for while a task of either kind has not ended (Sidecar's
    /// message first, whichever kind runs).
    #[error(
        "Another files digest verification is in progress ({noun} {id} is {state}; one data-copy or verification task runs at a time)"
    )]
    VerificationTaskActive {
        /// What the task that has not ended is (`data-copy task`, `verification task`).
        noun: &'static str,
        /// The task that has not ended.
        id: String,
        /// Its state.
        state: JobState,
    },
    /// A task was asked for on a node whose migration is COMPLETED (Sidecar's
    /// `allowIfMigrationNotComplete`).
    #[error(
        "live migration is COMPLETED on this node: no new task is accepted (remove this node from migration_map, then DELETE /api/v1/live-migration/status, to migrate it again)"
    )]
    MigrationCompleted,
    /// A verification found that the two sides do not list the same files, or list them with
    /// another size, type or modification time (Sidecar's message); no digest was computed.
    #[error("Files list did not match between source and destination")]
    FilesListMismatch,
    /// A verification found files whose digests differ, or could not be computed (Sidecar's
    /// message).
    #[error("File digests did not match between source and destination")]
    DigestMismatch,
    /// No task of this kind has the id.
    #[error("no {noun} with id {id:?}")]
    NoSuchTask {
        /// The kind of task, as messages name it.
        noun: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A requested file path cannot be served.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The node's files could not be listed.
    #[error("cannot list the node's files: {0}")]
    Listing(std::io::Error),
    /// A served file disappeared between its resolution and its reading (compaction).
    #[error("the file vanished (compacted away?)")]
    FileVanished,
    /// A served file could not be read.
    #[error("cannot read the file: {0}")]
    ReadFile(std::io::Error),
    /// The source daemon could not be reached or answered an error.
    #[error("source {0}")]
    Peer(String),
    /// A local file could not be written.
    #[error("{}: {source}", path.display())]
    Local {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The source no longer has the file (compacted away): the next iteration sorts it out.
    #[error("{0}")]
    Gone(String),
    /// The downloaded bytes do not have the source's digest.
    #[error("{0}")]
    Digest(String),
    /// The source's live-migration status is not `NOT_COMPLETED` (the Sidecar's message): it
    /// serves no more files.
    #[error("Live migration has completed at source.")]
    SourceCompleted,
    /// The task was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The task cannot run on this node, or cannot finish.
    #[error("{0}")]
    Invalid(String),
    /// The job registry refused a task.
    #[error(transparent)]
    Jobs(#[from] JobError),
}

impl LiveMigrationError {
    /// A failure to read a file being served: a missing file vanished meanwhile.
    pub fn reading(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            Self::FileVanished
        } else {
            Self::ReadFile(e)
        }
    }

    /// A failure to write `path` here.
    pub(crate) fn local(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + use<> {
        let path = path.to_path_buf();
        move |source| Self::Local { path, source }
    }
}
