//! Data-copy tasks: a destination pulls the files of its source in iterations, rsync-like,
//! until the share of the source's bytes (or, with `thresholdBasis: files`, of its files)
//! already identical is above the success threshold, or nothing is left.
//!
//! Each iteration asks the source's status, lists its files, deletes local files that are
//! gone at the source or differ in size or modification time (and directories the source no
//! longer has), and, unless the threshold is met (or nothing is left), creates the missing
//! directories and empty files and downloads the rest, largest first.
//!
//! - [`request`]: what a task is asked and what it reports;
//! - [`plan`]: which files to delete, create and download;
//! - [`fetch`]: one download, resumable, checked, retried;
//! - [`place`]: where a file is written, renamed or deleted — through its directory's handle,
//!   opened without following links — and the permission bits it may get;
//! - [`striped`]: a large file from a drover source over several connections, keeping the
//!   blocks of a local version that match the source's;
//! - [`batched`]: many small files in one request, synced together;
//! - [`space`]: whether the downloads fit on the destination's disks;
//! - [`run`]: the iterations, one step per state.

pub mod batched;
pub mod fetch;
pub mod place;
pub mod plan;
pub mod request;
pub mod run;
pub mod space;
pub mod striped;

pub use fetch::staging_path;
pub use request::{
    CopyReport, CopyRequest, IterationState, IterationStatus, Shares, ThresholdBasis, threshold_met,
};
pub use run::{CopyOutcome, CopyTask, TaskLimits, run};

// A source file names its staging file, so it is at hand next to `staging_path`.
pub use crate::livemigration::peer::RemoteFile;
