//! One run of the local node's `nodetool`, through its JMX: what the snapshot routes and the
//! `nodetool` importer share.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// How a nodetool run went wrong.
#[derive(Debug)]
pub enum Failure {
    /// It did not end within its time.
    TimedOut,
    /// It could not be started.
    NotRun(std::io::Error),
    /// It ended with a failure: its exit status, and what it said (standard error, then
    /// output), capped.
    Failed(std::process::ExitStatus, String),
}

/// Runs `nodetool [-h host -p port] args...` against `jmx` (`host:port`; nodetool's default
/// when `None`), for at most `timeout`.
pub async fn run<I, S>(
    nodetool: &Path,
    jmx: Option<&str>,
    args: I,
    timeout: Duration,
) -> Result<(), Failure>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = tokio::process::Command::new(nodetool);
    if let Some(jmx) = jmx {
        let (host, port) = jmx.rsplit_once(':').unwrap_or((jmx, "7199"));
        cmd.arg("-h")
            .arg(host.trim_start_matches('[').trim_end_matches(']'))
            .arg("-p")
            .arg(port);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => return Err(Failure::TimedOut),
        Ok(Err(e)) => return Err(Failure::NotRun(e)),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(());
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    let said = [text(&output.stderr), text(&output.stdout)]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    Err(Failure::Failed(
        output.status,
        crate::answer::cap(&said).into_owned(),
    ))
}
