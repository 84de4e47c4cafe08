//! Migrations as a kind of job: a job file, kept for resumes, whose savepoints say where a
//! resumed run picks up.

use std::path::PathBuf;

use super::job::{self, Launch};
use crate::engine::EngineError;
use crate::engine::Start;
use crate::engine::job_file::{FileJobKind, relaunch_from_job_file};
use crate::jobs::kind::{JobKind, Services};
use crate::jobs::{JobError, JobHandle, JobRecord, JobResult};

/// The migration kind.
pub struct MigrationJob;

impl JobKind for MigrationJob {
    const NAME: &'static str = "migration";
    const NOUN: &'static str = "migration";
    const KEEPS_JOB_FILE: bool = true;
    const RESUMES_AT_START: bool = true;
    /// The job file, redacted.
    type Spec = serde_json::Value;
    /// A migration's outcome is its counters and savepoints; it has no result of its own.
    type Output = ();
    type Launch = Launch;

    fn status_url(id: &str) -> String {
        format!("/api/v1/migrations/{id}")
    }

    /// Rows and bytes written by the last run.
    fn moved(record: &JobRecord) -> (Option<u64>, Option<u64>) {
        let counter = |name: &str| record.progress.get(name).copied();
        (counter("rowsWritten"), counter("bytesWritten"))
    }

    fn run(handle: JobHandle, launch: Launch) -> impl Future<Output = JobResult> + Send + 'static {
        job::run(handle, launch)
    }

    async fn relaunch(services: &Services, record: &JobRecord) -> Result<Launch, JobError> {
        relaunch_from_job_file::<Self>(services, record).await
    }
}

impl FileJobKind for MigrationJob {
    async fn launch(
        text: &str,
        state_dir: Option<PathBuf>,
        start: Start,
    ) -> Result<Launch, EngineError> {
        let mut launch = job::launch(text, start).await?;
        launch.state_dir = state_dir;
        Ok(launch)
    }
}
