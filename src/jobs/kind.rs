//! Job kinds: what one kind of work is to the registry — its name, typed spec and result, how
//! it runs and resumes, where its status is read. The list of the kinds this daemon runs is
//! `crate::kinds`, above the engines that implement them.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Identity, JobError, JobHandle, JobRecord, JobRegistry, JobResult, JobState};

/// What the daemon lends a kind to resume its jobs.
#[derive(Clone)]
pub struct Services {
    /// Every job.
    pub jobs: JobRegistry,
    /// The daemon's state directory (kept job files).
    pub state_dir: PathBuf,
    /// The local Cassandra node.
    pub node: Arc<crate::cassandra::LocalNode>,
    /// A subsystem's own state a kind needs, by type (the live migration's, lent as an
    /// `Arc<LiveMigration>`): the job framework does not name the subsystems above it.
    pub lent: http::Extensions,
}

/// One kind of job. A kind is a type: the registry stores its spec and result as JSON, and
/// only the kind turns them back into its own types.
pub trait JobKind: Send + Sync + 'static {
    /// The kind's name in records, the API and metrics (`migration`, ...).
    const NAME: &'static str;
    /// What one job of the kind is called in messages (`migration`, `data-copy task`, ...).
    const NOUN: &'static str;
    /// Whether jobs keep their job file (with secrets) in the state directory for resumes.
    const KEEPS_JOB_FILE: bool = false;
    /// Whether `INTERRUPTED` jobs are resumed when the daemon starts (`jobs.resume_interrupted`).
    const RESUMES_AT_START: bool = false;
    /// The parameters of a job, as stored in its record (secrets redacted).
    type Spec: Serialize + DeserializeOwned + Send + 'static;
    /// What a job found or produced, as stored in its record.
    type Output: Serialize + DeserializeOwned + Send + 'static;
    /// A job ready to run: checked and planned.
    type Launch: Send + 'static;

    /// Where a job's status is read.
    fn status_url(id: &str) -> String {
        format!("/api/v1/jobs/{id}")
    }

    /// What a job of the kind is called and moves, fixed when it is submitted.
    fn identity(spec: &Self::Spec, launch: &Self::Launch) -> Identity {
        let _ = (spec, launch);
        Identity::named(Self::NOUN)
    }

    /// The rows and bytes the last run of a job moved, read from its record (`None` where the
    /// kind counts no such thing). Lists show them, and divide them by the run's duration
    /// for its average rate.
    fn moved(record: &JobRecord) -> (Option<u64>, Option<u64>) {
        let _ = record;
        (None, None)
    }

    /// Does the work of a launched job.
    fn run(
        handle: JobHandle,
        launch: Self::Launch,
    ) -> impl Future<Output = JobResult> + Send + 'static;

    /// Launches an interrupted job again from its record (and what the kind kept for it).
    fn relaunch(
        services: &Services,
        record: &JobRecord,
    ) -> impl Future<Output = Result<Self::Launch, JobError>> + Send {
        let _ = (services, record);
        async { Err(JobError::NotResumable { kind: Self::NAME }) }
    }

    /// Resumes the `INTERRUPTED` jobs of the kind when the daemon starts (only called with
    /// [`RESUMES_AT_START`](Self::RESUMES_AT_START)). A job that cannot be resumed is logged and
    /// stays `INTERRUPTED`.
    fn resume_at_start(
        services: &Services,
        interrupted: Vec<JobRecord>,
    ) -> impl Future<Output = ()> + Send {
        async move {
            for record in interrupted {
                match resume::<Self>(services, &record.id).await {
                    Ok(_) => tracing::info!(job = %record.id, "interrupted {} resumed", Self::NOUN),
                    Err(e) => {
                        tracing::warn!(job = %record.id, error = %e, "interrupted {} not resumed", Self::NOUN)
                    }
                }
            }
        }
    }
}

/// Resumes the `INTERRUPTED` or `CANCELLED` job `id` of kind `K`.
pub async fn resume<K: JobKind + ?Sized>(
    services: &Services,
    id: &str,
) -> Result<JobRecord, JobError> {
    let record = services.jobs.get_kind::<K>(id)?;
    // A cancelled job goes on from its savepoints only where its job file was kept for it.
    let resumable = record.state == JobState::Interrupted
        || (record.state == JobState::Cancelled && K::KEEPS_JOB_FILE);
    if !resumable {
        return Err(JobError::WrongState {
            noun: K::NOUN,
            id: id.to_string(),
            state: record.state,
            action: "resume",
            needs: if K::KEEPS_JOB_FILE {
                super::RESUMABLE
            } else {
                "INTERRUPTED"
            },
        });
    }
    let launch = K::relaunch(services, &record).await?;
    services.jobs.resume(id, move |h| K::run(h, launch)).await
}

impl JobRegistry {
    /// Records a new job of kind `K` (with `id` from [`new_id`](Self::new_id), or a fresh one)
    /// and starts it as soon as a slot is free.
    pub async fn submit_kind<K: JobKind>(
        &self,
        id: Option<String>,
        spec: &K::Spec,
        launch: K::Launch,
    ) -> Result<JobRecord, JobError> {
        let identity = K::identity(spec, &launch);
        self.submit_identified::<K>(id, identity, spec, launch)
            .await
    }

    /// [`submit_kind`](Self::submit_kind) of a job whose identity the caller worked out.
    pub async fn submit_identified<K: JobKind>(
        &self,
        id: Option<String>,
        identity: Identity,
        spec: &K::Spec,
        launch: K::Launch,
    ) -> Result<JobRecord, JobError> {
        let spec = serde_json::to_value(spec).expect("job specs serialize");
        let id = id.unwrap_or_else(Self::new_id);
        self.submit_with_id(id, K::NAME, identity, spec, move |h| K::run(h, launch))
            .await
    }

    /// Every job of kind `K`, oldest first.
    pub fn list_kind<K: JobKind + ?Sized>(&self) -> Vec<JobRecord> {
        self.list(Some(K::NAME))
    }

    /// The job `id` if it is of kind `K`.
    pub fn get_kind<K: JobKind + ?Sized>(&self, id: &str) -> Result<JobRecord, JobError> {
        let record = self.get(id)?;
        if record.kind != K::NAME {
            return Err(JobError::NotFound {
                noun: K::NOUN,
                id: id.to_string(),
            });
        }
        Ok(record)
    }
}

/// The spec of a job of kind `K`, if its record holds a readable one.
pub fn spec_of<K: JobKind>(record: &JobRecord) -> Option<K::Spec> {
    serde_json::from_value(record.spec.clone()).ok()
}

/// What a job of kind `K` found or produced, if its record holds it.
pub fn output_of<K: JobKind>(record: &JobRecord) -> Option<K::Output> {
    record
        .result
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
}

impl JobHandle {
    /// Sets what the job of kind `K` found or produced (replacing an earlier result).
    pub fn set_output<K: JobKind>(&self, output: &K::Output) {
        self.set_result(serde_json::to_value(output).expect("job results serialize"));
    }
}
