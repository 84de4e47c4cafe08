//! `drover serve`: wires the subsystems together, serves the API and shuts down cleanly.

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{self, AppState};
use crate::cassandra::LocalNode;
use crate::config::DaemonConfig;
use crate::fsutil;
use crate::jobs::{JobError, JobRegistry, RegistryOptions};
use crate::metrics::Metrics;

/// Name of the file, in the state dir, holding the address the API listens on.
pub const LISTEN_ADDR_FILE: &str = "listen-addr";

/// Why the daemon could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The state directory cannot be created or written.
    #[error("state_dir {}: {source}", path.display())]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Another daemon uses the same state directory.
    #[error("state_dir {} is in use by another drover process (lock file {})", dir.display(), lock.display())]
    StateDirLocked {
        /// The directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The listen address cannot be bound.
    #[error("server.listen: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The job registry cannot be opened.
    #[error(transparent)]
    Jobs(#[from] JobError),
    /// The server failed while running.
    #[error("server error: {0}")]
    Serve(std::io::Error),
    /// Live migration cannot start (its state file is unreadable).
    #[error(transparent)]
    LiveMigration(#[from] crate::livemigration::LiveMigrationError),
}

/// Holds the state directory's lock for as long as the daemon runs; the OS releases it when the
/// process dies, even by `kill -9`, so a crash never leaves a stale lock behind.
struct StateDirLock {
    _file: File,
}

fn lock_state_dir(dir: &std::path::Path) -> Result<StateDirLock, DaemonError> {
    let io = |source| DaemonError::StateDir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let lock = dir.join("drover.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(StateDirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(DaemonError::StateDirLocked {
            dir: dir.to_path_buf(),
            lock,
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

/// Runs the daemon until SIGTERM or SIGINT. On the first signal it stops accepting requests,
/// tells running jobs to checkpoint and stop, and exits once they have or after
/// `server.shutdown_timeout`; a second signal exits at once.
pub async fn serve(config: DaemonConfig) -> Result<(), DaemonError> {
    let stop = CancellationToken::new();
    let signals = stop.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received: shutting down (send it again to exit at once)");
        signals.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal: exiting now");
        std::process::exit(130);
    });
    serve_until(config, stop).await
}

/// The job registry of `config`'s state directory, with its settings.
pub async fn open_jobs(config: &DaemonConfig) -> Result<JobRegistry, DaemonError> {
    Ok(JobRegistry::open(
        &config.state_dir.join("jobs"),
        RegistryOptions {
            max_running: config.jobs.max_running.get(),
            flush_interval: config.jobs.progress_flush_interval,
            keep_finished: config.jobs.keep_finished.retention(),
        },
    )
    .await?)
}

/// What every request handler shares, wired as `drover serve` wires it.
pub fn app_state(
    config: Arc<DaemonConfig>,
    jobs: JobRegistry,
    live: crate::livemigration::LiveMigration,
) -> AppState {
    AppState {
        node: Arc::new(LocalNode::new(config.cassandra.clone())),
        config,
        jobs,
        metrics: Arc::new(Metrics::new()),
        live: Arc::new(live),
    }
}

/// Runs the daemon until `stop` fires (the signal handling of [`serve`] aside).
pub async fn serve_until(config: DaemonConfig, stop: CancellationToken) -> Result<(), DaemonError> {
    let state_dir = config.state_dir.clone();
    let _lock = lock_state_dir(&state_dir)?;
    let addr_file = state_dir.join(LISTEN_ADDR_FILE);
    // A file left by a crashed process would point clients at a dead port.
    let _ = std::fs::remove_file(&addr_file);

    let jobs = open_jobs(&config).await?;
    crate::kinds::sweep_kept_files(&jobs, &state_dir);
    let config = Arc::new(config);
    let listen = config.server.listen;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| DaemonError::Bind {
            addr: listen,
            source,
        })?;
    let bound = listener.local_addr().map_err(DaemonError::Serve)?;
    // Bound first: this node's place in live_migration.migration_map is its real address.
    let live = crate::livemigration::LiveMigration::open(&config, &bound.to_string())?;
    if live.enabled() && live.role != crate::config::Role::None {
        tracing::info!(role = ?live.role, "live migration enabled");
    }
    crate::livemigration::tasks::sweep_staging(&jobs, &live).await;
    let state = app_state(config.clone(), jobs.clone(), live);
    if config.jobs.resume_interrupted {
        crate::kinds::resume_interrupted(&state.services());
    }
    fsutil::write_atomic(&addr_file, bound.to_string().as_bytes()).map_err(|source| {
        DaemonError::StateDir {
            path: state_dir.clone(),
            source,
        }
    })?;
    tracing::info!(addr = %bound, state_dir = %state_dir.display(), version = env!("CARGO_PKG_VERSION"), "drover listening on http://{bound}");

    let server = tokio::spawn(accept_loop(
        listener,
        api::router(state),
        Limits {
            header_read_timeout: config.server.header_read_timeout,
            max_connections: config.server.max_connections.get(),
        },
        stop.clone(),
    ));
    stop.cancelled().await;

    let timeout = config.server.shutdown_timeout;
    let (left, server_result) = tokio::join!(
        jobs.shutdown(timeout),
        tokio::time::timeout(timeout, server)
    );
    if left > 0 {
        tracing::warn!(
            jobs = left,
            "jobs still running at the shutdown timeout were recorded INTERRUPTED"
        );
    }
    if server_result.is_err() {
        tracing::warn!("open requests did not finish within the shutdown timeout");
    }
    let _ = std::fs::remove_file(&addr_file);
    tracing::info!("drover stopped");
    Ok(())
}

/// What a connection may cost the daemon.
struct Limits {
    header_read_timeout: std::time::Duration,
    max_connections: usize,
}

/// Serves connections until `stop` fires, then asks each open connection to finish its request
/// and close; returns once all are closed. Its own loop rather than `axum::serve`, which cannot
/// set a header read timeout nor cap connections.
async fn accept_loop(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    stop: CancellationToken,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        // Taking the slot before accepting leaves connections beyond the cap in the kernel's
        // backlog instead of holding them here.
        let slot = tokio::select! {
            _ = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let tcp = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Without TCP_NODELAY, a small response's last segment waits for the client's delayed
        // ACK (milliseconds per request): file serving slowed to ~100 small files a second.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let stop = stop.clone();
        let header_read_timeout = limits.header_read_timeout;
        connections.spawn(async move {
            let _slot = slot;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = stop.cancelled() => {}
            }
            // Stopping: the request in flight finishes, no new one is read.
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler cannot fail on Unix");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
