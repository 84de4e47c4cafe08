//! What drover's integration-test binaries (`tests/it`, `tests/faults`) share: the real
//! `drover` binary started as a daemon, the real test clusters, the daemon's router in this
//! process, and the one way to wait for something.

pub mod app;
pub mod cql;
mod daemon;
pub mod dynamodb;
mod poll;
pub mod rings;

pub use app::App;
pub use daemon::{
    Daemon, Home, cassandra_src, drover_bin, ended, error_message, http_client, json_of,
    listener_pid, ran_to_the_end,
};
pub use poll::{poll, wait_until};

/// A memory figure of process `pid` in KiB, from `/proc/<pid>/status`: `VmRSS` (resident now)
/// or `VmHWM` (the most it has been resident).
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("/proc/<pid>/status")
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} of {pid}"))
}

/// The resident memory of process `pid` now, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// The most resident memory process `pid` has had, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
}

/// The temporary files (`*.tmp`) below `dir`, at any depth, links not followed.
pub fn temporary_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            } else if e.file_name().to_string_lossy().ends_with(".tmp") {
                found.push(e.path());
            }
        }
    }
    found
}
