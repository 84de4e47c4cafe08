//! The kinds of job this daemon runs, in one list: the status URL of a job, resume at start
//! and the sweep of kept job files are loops over it. It sits above the engines that implement
//! the kinds so that the job framework (`jobs`) need not depend on them; `jobs/kind.rs` still
//! names the migration engine and live migration (issue 45; `tests/layers.rs` lists it).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use crate::jobs::JobState;
use crate::jobs::kept::forget_job_file;
use crate::jobs::kind::{JobKind, Services};
use crate::jobs::{JobError, JobRecord, JobRegistry, Summary};

/// A kind as the loops over [`KINDS`] see it.
trait AnyKind: Sync {
    fn name(&self) -> &'static str;
    fn status_url(&self, id: &str) -> String;
    fn keeps_job_file(&self) -> bool;
    fn moved(&self, record: &JobRecord) -> (Option<u64>, Option<u64>);
    fn resume_at_start<'a>(
        &'static self,
        services: &'a Services,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
    fn resume<'a>(
        &'static self,
        services: &'a Services,
        id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<JobRecord, JobError>> + Send + 'a>>;
}

struct Registered<K>(PhantomData<fn() -> K>);

impl<K: JobKind> AnyKind for Registered<K> {
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn status_url(&self, id: &str) -> String {
        K::status_url(id)
    }

    fn keeps_job_file(&self) -> bool {
        K::KEEPS_JOB_FILE
    }

    fn moved(&self, record: &JobRecord) -> (Option<u64>, Option<u64>) {
        K::moved(record)
    }

    fn resume_at_start<'a>(
        &'static self,
        services: &'a Services,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if !K::RESUMES_AT_START {
                return;
            }
            let interrupted: Vec<_> = services
                .jobs
                .list_kind::<K>()
                .into_iter()
                .filter(|r| r.state == JobState::Interrupted)
                .collect();
            if !interrupted.is_empty() {
                K::resume_at_start(services, interrupted).await;
            }
        })
    }

    fn resume<'a>(
        &'static self,
        services: &'a Services,
        id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<JobRecord, JobError>> + Send + 'a>> {
        Box::pin(crate::jobs::kind::resume::<K>(services, id))
    }
}

/// Every kind of job this daemon runs: adding a kind is one line here.
static KINDS: [&(dyn AnyKind + 'static); 5] = [
    &Registered::<crate::migrate::kind::MigrationJob>(PhantomData),
    &Registered::<crate::validate::kind::ValidationJob>(PhantomData),
    &Registered::<crate::livemigration::kinds::DataCopyKind>(PhantomData),
    &Registered::<crate::livemigration::kinds::VerificationKind>(PhantomData),
    &Registered::<crate::diagnostics::Diagnostic>(PhantomData),
];

/// The name of every kind, in [`KINDS`]' order: metrics show each one, zeros included, before
/// any job of it ran.
pub fn names() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.name())
}

/// Where the status of job `id` of kind `kind` is read: under its kind's own resource when it
/// has one.
pub fn status_url(kind: &str, id: &str) -> String {
    KINDS
        .iter()
        .find(|k| k.name() == kind)
        .map_or_else(|| format!("/api/v1/jobs/{id}"), |k| k.status_url(id))
}

/// What lists and pages show of `record` beside its state: name, source and target, the rows
/// and bytes its kind counts, duration and average rates.
pub fn summary(record: &JobRecord) -> Summary {
    let moved = KINDS
        .iter()
        .find(|k| k.name() == record.kind)
        .map_or((None, None), |k| k.moved(record));
    Summary::of(record, moved, chrono::Utc::now())
}

/// Resumes the `INTERRUPTED` job `id`, whatever its kind (the console's resume button).
pub async fn resume(services: &Services, id: &str) -> Result<JobRecord, JobError> {
    let record = services.jobs.get(id)?;
    match KINDS.iter().find(|k| k.name() == record.kind) {
        Some(kind) => kind.resume(services, id).await,
        None => Err(JobError::NotFound {
            noun: "job",
            id: id.to_string(),
        }),
    }
}

/// Resumes, kind by kind and concurrently, the `INTERRUPTED` jobs of the kinds that resume at
/// start.
pub fn resume_interrupted(services: &Services) {
    for kind in KINDS {
        let services = services.clone();
        tokio::spawn(async move { kind.resume_at_start(&services).await });
    }
}

/// Deletes the kept job files of jobs that ended and can no longer be resumed (a crash can
/// leave some behind), so credentials do not stay on disk longer than needed. Interrupted and
/// cancelled jobs keep theirs: both can be resumed until they are deleted.
pub fn sweep_kept_files(jobs: &JobRegistry, state_dir: &std::path::Path) {
    for kind in KINDS.iter().filter(|k| k.keeps_job_file()) {
        for record in jobs.list(Some(kind.name())) {
            if !record.state.is_active() && !record.state.is_resumable() {
                forget_job_file(state_dir, &record.id);
            }
        }
    }
}

/// A job's progress as every screen shows it (the console's pages, `drover jobs`, `drover
/// job`). A data-copy task's share is read from the iterations it recorded (`result`), since
/// its counters may be those of an iteration before the last; every other kind's from its
/// counters ([`crate::jobs::shown::shown`]).
pub fn shown(
    kind: &str,
    state: JobState,
    progress: &std::collections::BTreeMap<String, u64>,
    result: Option<&serde_json::Value>,
) -> Option<crate::jobs::shown::Shown> {
    if kind == crate::livemigration::kinds::DataCopyKind::NAME {
        return crate::livemigration::tasks::shown::copy_shown(
            state == JobState::Succeeded,
            result,
        );
    }
    crate::jobs::shown::shown(kind, progress)
}
