//! What a job is, as stored on disk and shown to operators.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a job is in its life.
///
/// `QUEUED -> RUNNING -> SUCCEEDED | DIFFERENCES_FOUND | FAILED | CANCELLED`; a job that was
/// queued or running when the daemon stopped (shutdown, crash, `kill -9`) is `INTERRUPTED`, and
/// resuming it makes it `QUEUED` again — unless an operator had cancelled it: then it is
/// `CANCELLED`.
///
/// `DIFFERENCES_FOUND` is a validation that ran to the end and found rows that differ: its own
/// state, not `SUCCEEDED`, so that lists, the console and `drover_jobs{state=...}` (and an alert
/// on it) tell it apart from a clean one. Records written before it existed still read: a
/// state is only ever added, never renamed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    /// Accepted, waiting for a free slot (`jobs.max_running`).
    Queued,
    /// Working.
    Running,
    /// Finished all its work (a validation: and found no differences).
    Succeeded,
    /// A validation that ran to the end and found rows missing, extra or different in the
    /// target; `result` is its report.
    DifferencesFound,
    /// Stopped by an error; `error` says which.
    Failed,
    /// Stopped by an operator.
    Cancelled,
    /// Stopped by the daemon going away; can be resumed.
    Interrupted,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::DifferencesFound,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Interrupted,
    ];

    /// Queued or running: something in this process owns the job.
    pub fn is_active(self) -> bool {
        matches!(self, JobState::Queued | JobState::Running)
    }

    /// Interrupted or cancelled: stopped before the end, and may go on from its savepoints
    /// (for the kinds that keep their job file; the others resume only `INTERRUPTED`).
    pub fn is_resumable(self) -> bool {
        matches!(self, JobState::Interrupted | JobState::Cancelled)
    }

    /// The name used in the API, metrics and files.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "QUEUED",
            JobState::Running => "RUNNING",
            JobState::Succeeded => "SUCCEEDED",
            JobState::DifferencesFound => "DIFFERENCES_FOUND",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Interrupted => "INTERRUPTED",
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for JobState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "unknown job state {s:?}, expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A job as persisted in `<state_dir>/jobs/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRecord {
    /// Unique id; UUIDv7, so ids sort by creation time.
    pub id: String,
    /// What kind of work this is (`migration`, `validation`, ...).
    pub kind: String,
    /// What the job is called: the `name` of its job file, or one derived from what it moves
    /// (`ks.table → ks2.table`). Absent in records written before jobs had names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where the job reads, in words without secrets (`ks.table`, `dynamodb:Orders`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Where the job writes, in words without secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Lifecycle state.
    pub state: JobState,
    /// What the job is doing now, in the job's own words (`planning`, `copying`, ...).
    pub phase: Option<String>,
    /// When the job was submitted.
    pub created_at: DateTime<Utc>,
    /// When the job last started running.
    pub started_at: Option<DateTime<Utc>>,
    /// When the job reached SUCCEEDED, DIFFERENCES_FOUND, FAILED, CANCELLED or INTERRUPTED.
    pub ended_at: Option<DateTime<Utc>>,
    /// Last change to this record.
    pub updated_at: DateTime<Utc>,
    /// How many times the job has been started (resumes count).
    pub attempts: u32,
    /// Progress counters, named by the job (`rowsRead`, `unitsDone`, ...), with the share done
    /// every screen shows (`progressPermille`, thousandths) and, for migrations, the
    /// estimated totals (`rowsTotalEstimate`, `bytesTotalEstimate`).
    pub progress: BTreeMap<String, u64>,
    /// Why the job failed, or what went wrong while stopping it.
    pub error: Option<String>,
    /// The most recent transient error the job recovered from (or is retrying), kept after
    /// recovery so an operator can see what slowed the job down.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The job's parameters as submitted, with secrets already redacted by the submitter; what
    /// a resume rebuilds the job from.
    pub spec: serde_json::Value,
    /// What the job found or produced (a validation's report), kept with the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// An operator asked the job to stop. Kept on disk so that a cancel is not lost when the
    /// process ends before the job has stopped: such a job is `CANCELLED` at the next start,
    /// not `INTERRUPTED` (and resumed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
}
