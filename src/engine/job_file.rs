//! Jobs whose work is a job file (ScyllaDB Migrator's format): migrations and validations.
//! The file is checked and planned by the engine before the job is accepted, kept (with its
//! secrets) in the state directory for as long as the job can be resumed, and recorded in its
//! redacted form.

use std::future::Future;
use std::path::PathBuf;

use super::EngineError;
use super::Start;
use crate::jobs::kept::{forget_job_file, keep_job_file, read_job_file};
use crate::jobs::kind::{JobKind, Services};
use crate::jobs::{Identity, JobError, JobRecord, JobRegistry};

/// A kind whose jobs are a job file (ScyllaDB Migrator format). The file is kept, with its
/// secrets, for as long as the job can be resumed; the record holds its redacted form.
pub trait FileJobKind: JobKind<Spec = serde_json::Value> {
    /// Parses, checks and plans a job file. `state_dir` is where the daemon keeps job files
    /// (`None` in the foreground). `start` says whether it is a new submission or a resume.
    fn launch(
        text: &str,
        state_dir: Option<PathBuf>,
        start: Start,
    ) -> impl Future<Output = Result<Self::Launch, EngineError>> + Send;

    /// What a job file's job is called and moves: its `name`, or `source → target` in words
    /// (see [`JobConfig::identity`](super::config::JobConfig::identity)).
    fn identity_of(text: &str) -> Identity {
        super::config::JobConfig::parse(text)
            .map(|c| c.identity())
            .unwrap_or_else(|_| Identity::named(Self::NOUN))
    }
}

/// [`JobKind::relaunch`] of a [`FileJobKind`]: its job file, launched again.
pub async fn relaunch_from_job_file<K: FileJobKind>(
    services: &Services,
    record: &JobRecord,
) -> Result<K::Launch, JobError> {
    let text = read_job_file(&services.state_dir, &record.id)?;
    K::launch(&text, Some(services.state_dir.clone()), Start::Resume)
        .await
        .map_err(|e| JobError::Relaunch(Box::new(e)))
}

/// Submits a job file of kind `K`: checked completely first, kept (with its credentials) in the
/// state directory before the job starts, recorded in its redacted form.
pub async fn submit_job_file<K: FileJobKind>(
    jobs: &JobRegistry,
    state_dir: &std::path::Path,
    text: &str,
) -> Result<JobRecord, JobError> {
    let launch = K::launch(text, Some(state_dir.to_path_buf()), Start::New)
        .await
        .map_err(|e| JobError::Launch(Box::new(e)))?;
    let id = JobRegistry::new_id();
    // Kept before the job starts, so that it exists for as long as the job can be resumed.
    keep_job_file(state_dir, &id, text).map_err(JobError::KeepJobFile)?;
    let spec = super::config::redacted_json(text);
    // Parsed again, off the async workers as the launch parsed it (a request body's worth of
    // text is CPU work); names come from the typed config, not the redacted document.
    let owned = text.to_string();
    let identity = tokio::task::spawn_blocking(move || K::identity_of(&owned))
        .await
        .unwrap_or_else(|_| Identity::named(K::NOUN));
    let submitted = jobs
        .submit_identified::<K>(Some(id.clone()), identity, &spec, launch)
        .await;
    match submitted {
        Ok(record) => Ok(record),
        Err(e) => {
            forget_job_file(state_dir, &id);
            Err(e)
        }
    }
}
