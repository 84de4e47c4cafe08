//! Foreground commands: the same engines as the daemon's jobs, driven from a terminal.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::migrate::engine::{MigrationError, Progress};
use crate::migrate::job::{counter, rates};

/// Exit code: the job file or schemas are invalid.
pub const EXIT_CONFIG: u8 = 2;
/// Exit code: stopped by a signal.
pub const EXIT_INTERRUPTED: u8 = 130;

/// `drover migrate --config FILE`: runs a migration in the foreground. A progress bar is drawn
/// on a terminal, a status line every 10 s otherwise (logs, CI). Returns the exit code.
pub async fn migrate(path: &Path) -> u8 {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("drover: {}: cannot read job config: {e}", path.display());
            return EXIT_CONFIG;
        }
    };
    let launch = match crate::migrate::job::launch(&text).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("drover: {}: {e}", path.display());
            return if e.is_config_problem() {
                EXIT_CONFIG
            } else {
                1
            };
        }
    };
    if let Some(name) = &launch.resumed_from {
        eprintln!("drover: resuming from savepoint {name}");
    }
    let cancel = CancellationToken::new();
    let signals = cancel.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail on Unix");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!(
            "\ndrover: stopping: writes in flight finish, then a savepoint is written (signal again to exit at once)"
        );
        signals.cancel();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    });
    let progress = Arc::new(Progress::default());
    let display = tokio::spawn(show_progress(progress.clone()));
    let started = Instant::now();
    let result = crate::migrate::job::execute(launch, progress.clone(), cancel).await;
    display.abort();
    let snapshot = progress.snapshot();
    let summary = format!(
        "{} rows ({}) written in {:.1}s, {} units ({} skipped), {} retries",
        counter(&snapshot, "rowsWritten"),
        bytesize::ByteSize(counter(&snapshot, "bytesWritten")),
        started.elapsed().as_secs_f64(),
        counter(&snapshot, "unitsDone"),
        counter(&snapshot, "unitsSkipped"),
        counter(&snapshot, "retries"),
    );
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    match result {
        Ok(()) => {
            eprintln!("drover: migration complete: {summary}");
            0
        }
        Err(MigrationError::Stopped) => {
            eprintln!("drover: migration stopped: {summary}");
            EXIT_INTERRUPTED
        }
        Err(e) => {
            eprintln!("drover: migration failed: {e} ({summary})");
            1
        }
    }
}

async fn show_progress(progress: Arc<Progress>) {
    let tty = std::io::stderr().is_terminal();
    let interval = if tty {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(10)
    };
    let started = Instant::now();
    let mut previous = (0, 0);
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let s = progress.snapshot();
        let current = (counter(&s, "rowsWritten"), counter(&s, "bytesWritten"));
        let (total, done) = (counter(&s, "unitsTotal"), counter(&s, "unitsDone"));
        let r = rates(
            previous,
            current,
            interval,
            started.elapsed(),
            (total, done, counter(&s, "unitsSkipped")),
        );
        previous = current;
        let pct = if total == 0 {
            0.0
        } else {
            done as f64 * 100.0 / total as f64
        };
        let eta = r.eta_seconds.map_or("?".to_string(), |e| {
            humantime::format_duration(Duration::from_secs(e)).to_string()
        });
        let waiting = progress
            .waiting()
            .map(|w| format!(" | waiting: {w}"))
            .unwrap_or_default();
        let line = format!(
            "{pct:5.1}% units {done}/{total} | rows {} | {} rows/s | {}/s | ETA {eta}{waiting}",
            current.0,
            r.rows_per_second,
            bytesize::ByteSize(r.bytes_per_second)
        );
        if tty {
            let width = 30;
            let filled = ((pct / 100.0) * width as f64) as usize;
            eprint!(
                "\r[{}{}] {line}\x1b[K",
                "#".repeat(filled),
                ".".repeat(width - filled.min(width))
            );
            let _ = std::io::stderr().flush();
        } else {
            eprintln!("drover: {line}");
        }
    }
}
