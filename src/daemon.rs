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

/// The subsystems' checks of their own config sections, run when the daemon's config is
/// loaded ([`crate::config::SectionCheck`]).
pub const SECTION_CHECKS: &[crate::config::SectionCheck] = &[
    crate::auth::check_config,
    crate::livemigration::exclusions::check_config,
];

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
    /// The SSTable upload staging directory cannot be used.
    #[error("sstable_uploads: {0}")]
    Uploads(#[from] crate::uploads::UploadError),
    /// The server failed while running.
    #[error("server error: {0}")]
    Serve(std::io::Error),
    /// The TLS material of `server.tls` cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Live migration cannot start (its state file is unreadable).
    #[error(transparent)]
    LiveMigration(#[from] crate::livemigration::LiveMigrationError),
}

impl DaemonError {
    /// The process's exit code: 2 when the config names files that cannot be used, as for a
    /// config that does not parse, so that a supervisor does not restart into the same
    /// refusal (deploy/drover.service); 1 for what may pass by itself (a port still held, a
    /// state directory still locked by a process that is exiting).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Tls(_) => 2,
            _ => 1,
        }
    }
}

/// Reads the TLS files the config names (`server.tls`, `live_migration.peer_tls`) the way
/// `serve` does before it listens: what `check-config` checks beyond the file itself.
pub fn check_tls_files(config: &DaemonConfig) -> Result<(), crate::tls::TlsError> {
    if let Some(tls) = &config.server.tls {
        crate::tls::ServerTls::load(tls)?;
    }
    if let Some(peer) = &config.live_migration.peer_tls {
        crate::tls::PeerTls::load(peer)?;
    }
    Ok(())
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
            keep_finished: crate::jobs::Retention::from(&config.jobs.keep_finished),
        },
    )
    .await?)
}

/// What every request handler shares, wired as `drover serve` wires it.
pub fn app_state(
    config: Arc<DaemonConfig>,
    jobs: JobRegistry,
    live: crate::livemigration::LiveMigration,
) -> Result<AppState, DaemonError> {
    let metrics = Arc::new(Metrics::new());
    let uploads = crate::uploads::Uploads::new(
        &config.sstable_uploads,
        &config.state_dir,
        config.cassandra.jmx_address.clone(),
    )?;
    let snapshots = crate::snapshots::Snapshots::new(
        &config.sstable_snapshots,
        config.cassandra.jmx_address.clone(),
        config.cassandra.data_file_directories.clone(),
    );
    Ok(AppState {
        uploads: Arc::new(uploads),
        snapshots: Arc::new(snapshots),
        node: Arc::new(LocalNode::new(config.cassandra.clone())),
        events: Arc::new(crate::api::events::EventStreams::new(
            config.server.max_event_streams.get(),
            config.server.max_event_streams_per_caller.get(),
            metrics.event_streams(),
        )),
        sessions: Arc::new(crate::api::console::Sessions::new(
            &config.server.console,
            metrics.console_sessions(),
        )),
        auth: Arc::new(crate::auth::Authenticator::new(&config.auth)),
        config,
        jobs,
        metrics,
        live: Arc::new(live),
    })
}

/// Runs the daemon until `stop` fires (the signal handling of [`serve`] aside).
pub async fn serve_until(config: DaemonConfig, stop: CancellationToken) -> Result<(), DaemonError> {
    let state_dir = config.state_dir.clone();
    let _lock = lock_state_dir(&state_dir)?;
    let addr_file = state_dir.join(LISTEN_ADDR_FILE);
    // A file left by a crashed process would point clients at a dead port.
    let _ = std::fs::remove_file(&addr_file);

    if let Some(path) = &config.jobs.savepoint_filter_key_file {
        // Checked when the config was read; a file gone since fails the jobs that need it.
        match crate::config::read_filter_key(path) {
            Ok(key) => crate::savepoints::sealed::set_filter_key(key),
            Err(e) => tracing::error!("jobs.savepoint_filter_key_file: {e}"),
        }
    }
    let jobs = open_jobs(&config).await?;
    crate::kinds::sweep_kept_files(&jobs, &state_dir);
    let config = Arc::new(config);
    if config.server.insecure {
        tracing::warn!(
            listen = %config.server.listen,
            tls = config.server.tls.is_some(),
            auth = config.auth.is_enabled(),
            "server.insecure is on: the API may be served off loopback without TLS or authentication"
        );
    }
    // Read before binding: a bad file is a config error, and nothing listens meanwhile.
    let tls = config
        .server
        .tls
        .as_ref()
        .map(crate::tls::ServerTls::load)
        .transpose()?
        .map(Arc::new);
    let listen = config.server.listen;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| DaemonError::Bind {
            addr: listen,
            source,
        })?;
    let bound = listener.local_addr().map_err(DaemonError::Serve)?;
    // Bound first: this node's place in live_migration.migration_map is its real address.
    let live = crate::livemigration::LiveMigration::open(&config, bound)?;
    if live.enabled() && live.role != crate::config::Role::None {
        tracing::info!(role = ?live.role, "live migration enabled");
    }
    crate::livemigration::tasks::sweep_staging(&jobs, &live).await;
    let state = app_state(config.clone(), jobs.clone(), live)?;
    if config.jobs.resume_interrupted {
        crate::kinds::resume_interrupted(&state.services());
    }
    fsutil::write_atomic(&addr_file, bound.to_string().as_bytes()).map_err(|source| {
        DaemonError::StateDir {
            path: state_dir.clone(),
            source,
        }
    })?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(addr = %bound, state_dir = %state_dir.display(), version = env!("CARGO_PKG_VERSION"), "drover listening on {scheme}://{bound}");
    if let Some(tls) = &tls {
        tokio::spawn(tls.clone().watch(stop.clone()));
    }

    let server = tokio::spawn(accept_loop(
        listener,
        api::router(state),
        Limits {
            header_read_timeout: config.server.header_read_timeout,
            max_connections: config.server.max_connections.get(),
            idle_timeout: config.server.idle_timeout,
        },
        tls,
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
#[derive(Clone, Copy)]
struct Limits {
    header_read_timeout: std::time::Duration,
    max_connections: usize,
    idle_timeout: std::time::Duration,
}

/// Serves connections until `stop` fires, then asks each open connection to finish its request
/// and close; returns once all are closed. Its own loop rather than `axum::serve`, which cannot
/// set a header read timeout nor cap connections, nor serve TLS.
async fn accept_loop(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    tls: Option<Arc<crate::tls::ServerTls>>,
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
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
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
        let router = router.clone();
        let stop = stop.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            let _slot = slot;
            let Some(tls) = tls else {
                return serve_connection(tcp, peer, router, None, limits, stop).await;
            };
            // Taken now, so that a reload during the handshake cannot mix old and new.
            let acceptor = tls.acceptor();
            let handshake = tokio::time::timeout(tls.handshake_timeout(), acceptor.accept(tcp));
            let stream = tokio::select! {
                _ = stop.cancelled() => return,
                done = handshake => match done {
                    Ok(Ok(stream)) => stream,
                    // A client without a valid certificate, or not speaking TLS: nothing to
                    // answer, and at debug level so that scanners cannot fill the log.
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
            };
            // rustls only lets a handshake through with a certificate that chains to
            // client_ca, so the names are those of a verified certificate.
            let names = tls
                .verifies_clients()
                .then(|| stream.get_ref().1.peer_certificates())
                .flatten()
                .and_then(|chain| chain.first())
                .map(|leaf| crate::tls::client_cert_names(leaf));
            serve_connection(stream, peer, router, names, limits, stop).await
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// Serves HTTP/1.1 on one connection until the client closes it, it stays idle beyond
/// `limits.idle_timeout`, or `stop` fires (then the request in flight finishes first).
async fn serve_connection<I>(
    io: I,
    peer: std::net::SocketAddr,
    router: axum::Router,
    names: Option<crate::auth::ClientCertNames>,
    limits: Limits,
    stop: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tower::ServiceExt;
    let activity = Activity::new();
    let io = ActivityIo {
        inner: io,
        activity: activity.clone(),
    };
    let service = router.map_request(move |mut request: axum::http::Request<_>| {
        if let Some(names) = &names {
            request.extensions_mut().insert(names.clone());
        }
        // The rate limit counts callers without credentials by their address.
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        request
    });
    let service = hyper_util::service::TowerToHyperService::new(service);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    loop {
        let idle = activity.idle_for();
        if idle >= limits.idle_timeout {
            tracing::debug!(idle = ?idle, "closing a connection on which nothing moved");
            return;
        }
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(limits.idle_timeout - idle) => {}
        }
    }
    // Stopping: the request in flight finishes, no new one is read.
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// When bytes last moved on a connection, in milliseconds since it opened.
#[derive(Clone)]
struct Activity {
    opened: std::time::Instant,
    last: Arc<std::sync::atomic::AtomicU64>,
}

impl Activity {
    fn new() -> Self {
        Self {
            opened: std::time::Instant::now(),
            last: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    fn idle_for(&self) -> std::time::Duration {
        let last =
            std::time::Duration::from_millis(self.last.load(std::sync::atomic::Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }
}

/// A connection's stream that notes in [`Activity`] when bytes move.
struct ActivityIo<I> {
    inner: I,
    activity: Activity,
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for ActivityIo<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for ActivityIo<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler cannot fail on Unix");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon's config load runs each subsystem's check of its section, and the error
    /// names the key, the file and the line, as the config's own checks do.
    #[test]
    fn the_daemons_config_load_checks_auth_and_live_migration_sections() {
        let dir = tempfile::tempdir().unwrap();
        let parse = |text: &str| {
            DaemonConfig::parse("drover.yaml", text, dir.path(), |_| None, SECTION_CHECKS)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let e =
            parse("server:\n  insecure: true\nauth:\n  tokens_file: missing.yaml\n").unwrap_err();
        assert!(
            e.starts_with("drover.yaml: auth.tokens_file: cannot read ") && e.ends_with("(line 4)"),
            "{e}"
        );
        let e =
            parse("live_migration:\n  files_to_exclude:\n    - glob:*.tmp\n    - glob:[unclosed\n")
                .unwrap_err();
        assert!(
            e.starts_with("drover.yaml: live_migration.files_to_exclude[1]: ")
                && e.contains("invalid glob"),
            "{e}"
        );
        // The same files without the checks: the sections alone are well formed.
        assert!(
            DaemonConfig::parse(
                "drover.yaml",
                "live_migration:\n  files_to_exclude:\n    - glob:[unclosed\n",
                dir.path(),
                |_| None,
                &[],
            )
            .is_ok()
        );
        parse("live_migration:\n  files_to_exclude:\n    - glob:*.tmp\n").unwrap();
    }
}
