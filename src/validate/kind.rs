//! Validations as a kind of job: a job file, kept for resumes, whose result is the report.

use std::path::PathBuf;

use super::job::{self, Launch};
use super::report::Report;
use crate::engine::EngineError;
use crate::engine::Start;
use crate::engine::job_file::{FileJobKind, relaunch_from_job_file};
use crate::jobs::kind::{JobKind, Services};
use crate::jobs::{JobError, JobHandle, JobRecord, JobResult};

/// The validation kind.
pub struct ValidationJob;

impl JobKind for ValidationJob {
    const NAME: &'static str = "validation";
    const NOUN: &'static str = "validation";
    const KEEPS_JOB_FILE: bool = true;
    const RESUMES_AT_START: bool = true;
    /// The job file, redacted.
    type Spec = serde_json::Value;
    /// The findings (so far, while the validation runs).
    type Output = Report;
    type Launch = Launch;

    fn status_url(id: &str) -> String {
        format!("/api/v1/validations/{id}")
    }

    /// Rows and bytes read from the source: what a validation goes through.
    fn moved(record: &JobRecord) -> (Option<u64>, Option<u64>) {
        let counter = |name: &str| record.progress.get(name).copied();
        (counter("sourceRows"), counter("bytesRead"))
    }

    fn run(handle: JobHandle, launch: Launch) -> impl Future<Output = JobResult> + Send + 'static {
        job::run(handle, launch)
    }

    async fn relaunch(services: &Services, record: &JobRecord) -> Result<Launch, JobError> {
        relaunch_from_job_file::<Self>(services, record).await
    }
}

impl FileJobKind for ValidationJob {
    async fn launch(
        text: &str,
        state_dir: Option<PathBuf>,
        _start: Start,
    ) -> Result<Launch, EngineError> {
        let mut launch = job::launch(text).await?;
        launch.state_dir = state_dir;
        Ok(launch)
    }
}
