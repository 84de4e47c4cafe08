//! Data-copy and verification tasks as kinds of job.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::copy::{CopyRequest, IterationStatus, Local, Source, Task};
use super::tasks;
use super::verify::{VerifyReport, VerifyRequest};
use crate::jobs::kind::{JobKind, Services, resume, spec_of};
use crate::jobs::{JobError, JobHandle, JobRecord, JobResult};

/// What a data-copy task records as its result: the status of each iteration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CopyStatus {
    /// One entry per iteration, oldest first.
    pub status: Vec<IterationStatus>,
}

/// The data-copy task kind.
pub struct DataCopyTask;

impl JobKind for DataCopyTask {
    const NAME: &'static str = "data-copy-task";
    const NOUN: &'static str = "data-copy task";
    const RESUMES_AT_START: bool = true;
    type Spec = CopyRequest;
    type Output = CopyStatus;
    type Launch = Task;

    fn status_url(id: &str) -> String {
        format!("/api/v1/live-migration/data-copy-tasks/{id}")
    }

    fn run(handle: JobHandle, task: Task) -> impl Future<Output = JobResult> + Send + 'static {
        tasks::run_copy(handle, task)
    }

    /// A new iteration starts; files already in place are kept and partial downloads continue.
    async fn relaunch(services: &Services, record: &JobRecord) -> Result<Task, JobError> {
        // Only a destination has a source to copy from.
        let source =
            tasks::source_of(&services.live).ok_or(JobError::NotResumable { kind: Self::NAME })?;
        let request = spec_of::<Self>(record).ok_or_else(|| JobError::UnreadableSpec {
            kind: Self::NAME,
            id: record.id.clone(),
        })?;
        Ok(Task {
            request,
            source,
            local: tasks::local(&services.live),
        })
    }

    /// Only on a destination, and not once the local node answers: its files are its own then.
    async fn resume_at_start(services: &Services, interrupted: Vec<JobRecord>) {
        if tasks::source_of(&services.live).is_none() {
            return;
        }
        let node_up = services.node.check().await.is_ok();
        for record in interrupted {
            if node_up {
                tracing::warn!(task = %record.id, "interrupted data-copy task not resumed: the local Cassandra node answers");
                continue;
            }
            match resume::<Self>(services, &record.id).await {
                Ok(_) => tracing::info!(task = %record.id, "interrupted data-copy task resumed"),
                Err(e) => {
                    tracing::warn!(task = %record.id, error = %e, "data-copy task not resumed")
                }
            }
        }
    }
}

/// A verification ready to run.
pub struct Verification {
    /// The source daemon.
    pub source: Source,
    /// This node's directories.
    pub local: Arc<Local>,
    /// What to verify.
    pub request: VerifyRequest,
}

/// The files-verification task kind.
pub struct VerificationTask;

impl JobKind for VerificationTask {
    const NAME: &'static str = "files-verification-task";
    const NOUN: &'static str = "verification task";
    type Spec = VerifyRequest;
    type Output = VerifyReport;
    type Launch = Verification;

    fn status_url(id: &str) -> String {
        format!("/api/v1/live-migration/files-verification-tasks/{id}")
    }

    fn run(handle: JobHandle, v: Verification) -> impl Future<Output = JobResult> + Send + 'static {
        tasks::run_verify(handle, v.source, v.local, v.request)
    }
}
