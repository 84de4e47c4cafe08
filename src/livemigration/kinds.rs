//! Data-copy and verification tasks as kinds of job (see [`crate::jobs::kind`]).

use std::sync::Arc;

use super::copy::{CopyReport, CopyRequest, CopyTask};
use super::local::LocalFiles;
use super::peer::PeerClient;
use super::tasks;
use super::verify::{VerifyReport, VerifyRequest};
use crate::jobs::kind::{JobKind, Services, spec_of};
use crate::jobs::{Identity, JobError, JobHandle, JobRecord, JobResult};

/// The data-copy task kind.
pub struct DataCopyKind;

impl JobKind for DataCopyKind {
    const NAME: &'static str = "data-copy-task";
    const NOUN: &'static str = "data-copy task";
    const RESUMES_AT_START: bool = true;
    type Spec = CopyRequest;
    type Output = CopyReport;
    type Launch = CopyTask;

    fn status_url(id: &str) -> String {
        format!("/api/v1/live-migration/data-copy-tasks/{id}")
    }

    fn run(handle: JobHandle, task: CopyTask) -> impl Future<Output = JobResult> + Send + 'static {
        tasks::run_copy(handle, task)
    }

    /// `data copy from http://source:port`, the source node's files to this node's.
    fn identity(_request: &CopyRequest, task: &CopyTask) -> Identity {
        let source = task.peer.address();
        Identity {
            name: Some(crate::jobs::identity::bounded(&format!(
                "data copy from {source}"
            ))),
            source: Some(crate::jobs::identity::bounded(&format!(
                "files of the node at {source}"
            ))),
            target: Some("this node's data directories".into()),
        }
    }

    /// Bytes downloaded over every iteration.
    fn moved(record: &JobRecord) -> (Option<u64>, Option<u64>) {
        let bytes = record
            .result
            .as_ref()
            .and_then(|r| r.get("status"))
            .and_then(serde_json::Value::as_array)
            .map(|its| {
                its.iter()
                    .filter_map(|it| {
                        it.get("bytesDownloaded")
                            .and_then(serde_json::Value::as_u64)
                    })
                    .sum()
            });
        (None, bytes)
    }

    /// A new iteration starts; files already in place are kept and partial downloads continue.
    async fn relaunch(services: &Services, record: &JobRecord) -> Result<CopyTask, JobError> {
        let live = lent_live(services).ok_or(JobError::NotResumable { kind: Self::NAME })?;
        // Only a destination has a source to copy from.
        let peer = live
            .peer()
            .ok_or(JobError::NotResumable { kind: Self::NAME })?;
        let request = spec_of::<Self>(record).ok_or_else(|| JobError::UnreadableSpec {
            kind: Self::NAME,
            id: record.id.clone(),
        })?;
        Ok(CopyTask {
            request,
            peer,
            local: live.local_files(),
            limits: (&live.config).into(),
        })
    }

    /// Only on a destination whose local node is down, and under the admission lock of new
    /// tasks: at most one data-copy task runs.
    async fn resume_at_start(services: &Services, _interrupted: Vec<JobRecord>) {
        let Some(live) = lent_live(services) else {
            tracing::error!("data-copy tasks not resumed: the daemon lent no live migration");
            return;
        };
        tasks::resume_interrupted(services.jobs.clone(), live, services.node.clone()).await;
    }
}

/// The live migration the daemon lends the kinds.
fn lent_live(services: &Services) -> Option<Arc<super::LiveMigration>> {
    services.lent.get::<Arc<super::LiveMigration>>().cloned()
}

/// A verification ready to run.
pub struct Verification {
    /// The source daemon.
    pub peer: PeerClient,
    /// This node's directories.
    pub local: Arc<LocalFiles>,
    /// What to verify.
    pub request: VerifyRequest,
}

/// The files-verification task kind.
pub struct VerificationKind;

impl JobKind for VerificationKind {
    const NAME: &'static str = "files-verification-task";
    const NOUN: &'static str = "verification task";
    type Spec = VerifyRequest;
    type Output = VerifyReport;
    type Launch = Verification;

    fn status_url(id: &str) -> String {
        format!("/api/v1/live-migration/files-verification-tasks/{id}")
    }

    fn run(handle: JobHandle, v: Verification) -> impl Future<Output = JobResult> + Send + 'static {
        tasks::run_verify(handle, v.peer, v.local, v.request)
    }

    /// `files verification against http://source:port`.
    fn identity(_request: &VerifyRequest, v: &Verification) -> Identity {
        let source = v.peer.address();
        Identity {
            name: Some(crate::jobs::identity::bounded(&format!(
                "files verification against {source}"
            ))),
            source: Some(crate::jobs::identity::bounded(&format!(
                "files of the node at {source}"
            ))),
            target: Some("this node's data directories".into()),
        }
    }
}
