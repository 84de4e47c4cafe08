//! Kept job files: a resumable job's config, with its secrets, next to its record, so that an
//! interrupted job can be launched again after a restart.

/// Why an interrupted job could not be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The registry refused (unknown job, not INTERRUPTED, shutting down).
    #[error(transparent)]
    Jobs(#[from] crate::jobs::JobError),
    /// The job's config was not kept.
    #[error("{0}")]
    NoJobFile(String),
    /// The job could not be launched again.
    #[error("{message}")]
    Launch {
        /// Why.
        message: String,
        /// The job file or the schemas are at fault (not an unreachable database).
        config_problem: bool,
    },
}

fn job_file(state_dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    state_dir.join("jobs").join(format!("{id}.job.yaml"))
}

/// Keeps a job's config (with its secrets: a resume needs the credentials) next to its record,
/// readable by the daemon's user only. Savepoints, logs and the API only ever see the redacted
/// form.
pub fn keep_job_file(state_dir: &std::path::Path, id: &str, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = job_file(state_dir, id);
    // A name remove_stale_temp_files recognises, should the daemon die mid-write.
    let tmp = path.with_file_name(format!(
        ".{id}.job.yaml.{}{}",
        std::process::id(),
        crate::fsutil::TMP_SUFFIX
    ));
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    crate::fsutil::sync_dir(path.parent().expect("in the jobs dir"))
}

/// Reads the kept config of job `id`.
pub fn read_job_file(state_dir: &std::path::Path, id: &str) -> Result<String, ResumeError> {
    let path = job_file(state_dir, id);
    std::fs::read_to_string(&path).map_err(|e| {
        ResumeError::NoJobFile(format!(
            "the config of job {id} was not kept ({}: {e}); submit it again",
            path.display()
        ))
    })
}

/// Deletes the kept config of a job that will not be resumed.
pub fn forget_job_file(state_dir: &std::path::Path, id: &str) {
    match std::fs::remove_file(job_file(state_dir, id)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(job = id, error = %e, "cannot delete the kept job config"),
    }
}

/// Deletes the kept configs of migrations and validations that ended and can no longer be resumed (a crash
/// can leave some behind), so credentials do not stay on disk longer than needed.
pub fn sweep_job_files(jobs: &super::JobRegistry, state_dir: &std::path::Path, kinds: &[&str]) {
    for record in kinds.iter().flat_map(|k| jobs.list(Some(k))) {
        if !record.state.is_active() && record.state != crate::jobs::JobState::Interrupted {
            forget_job_file(state_dir, &record.id);
        }
    }
}
