//! Kept job files: a resumable job's config, with its secrets, next to its record, so that an
//! interrupted job can be launched again after a restart.

use std::path::{Path, PathBuf};

use super::JobError;

/// The file name of job `id`'s kept config, in the directory of job records.
pub(crate) fn file_name(id: &str) -> String {
    format!("{id}.job.yaml")
}

fn job_file(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("jobs").join(file_name(id))
}

/// Keeps a job's config (with its secrets: a resume needs the credentials) next to its record,
/// readable by the daemon's user only. Savepoints, logs and the API only ever see the redacted
/// form.
pub fn keep_job_file(state_dir: &Path, id: &str, text: &str) -> std::io::Result<()> {
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
pub fn read_job_file(state_dir: &Path, id: &str) -> Result<String, JobError> {
    let path = job_file(state_dir, id);
    std::fs::read_to_string(&path).map_err(|source| JobError::NoJobFile {
        id: id.to_string(),
        path,
        source,
    })
}

/// Deletes the kept config of a job that will not be resumed.
pub fn forget_job_file(state_dir: &Path, id: &str) {
    match std::fs::remove_file(job_file(state_dir, id)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(job = id, error = %e, "cannot delete the kept job config"),
    }
}
