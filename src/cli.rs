//! Foreground commands: the same engines as the daemon's jobs, driven from a terminal.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::engine::EngineError;
use crate::engine::driver::Counters;
use crate::jobs::running::{Sample, Window};

// The codes are the client's, one table for every command (`crate::client::EXIT_CODES`).
use crate::client::{EXIT_DIFFERENCES, EXIT_FAILED, EXIT_OK};

/// Exit code: the job file or schemas are invalid.
pub const EXIT_CONFIG: u8 = crate::client::EXIT_ERROR;
/// Exit code: stopped by a signal.
pub const EXIT_INTERRUPTED: u8 = crate::client::EXIT_STOPPED;

/// The filter key of target-table savepoints for a foreground run, from the environment
/// (`DROVER_SAVEPOINT_FILTER_KEY_FILE`; the daemon reads `jobs.savepoint_filter_key_file`).
fn load_filter_key() -> Result<(), String> {
    match std::env::var_os("DROVER_SAVEPOINT_FILTER_KEY_FILE") {
        Some(path) if !path.is_empty() => {
            let key = crate::config::read_filter_key(Path::new(&path))
                .map_err(|e| format!("DROVER_SAVEPOINT_FILTER_KEY_FILE: {e}"))?;
            crate::savepoints::sealed::set_filter_key(key);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `drover migrate --config FILE`: runs a migration in the foreground. A progress bar is drawn
/// on a terminal, a status line every 10 s otherwise (logs, CI). Returns the exit code.
pub async fn migrate(path: &Path) -> u8 {
    if let Err(e) = load_filter_key() {
        crate::errln!("drover: {e}");
        return EXIT_CONFIG;
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            crate::errln!("drover: {}: cannot read job config: {e}", path.display());
            return EXIT_CONFIG;
        }
    };
    // A new run, as a submission to the daemon is: a savepoint that already covers everything
    // is refused (exit 2, naming it) rather than run to a 0-row success.
    let launch = match crate::migrate::job::launch(&text, crate::engine::Start::New).await {
        Ok(l) => l,
        Err(e) => return refused_launch(path, &e),
    };
    if let Some(name) = &launch.resumed_from {
        crate::errln!("drover: resuming from savepoint {name}");
    }
    let cancel = stop_on_signals(
        "writes in flight finish, then a savepoint is written (signal again to exit at once)",
    );
    let progress = Arc::new(Counters::default());
    let display = tokio::spawn(show_progress(migration_line(progress.clone())));
    let started = Instant::now();
    let result = crate::migrate::job::execute(launch, progress.clone(), cancel).await;
    display.abort();
    let snapshot = progress.snapshot();
    let mut summary = format!(
        "{} rows read, {} rows ({}) written in {:.1}s, {} units ({} skipped), {} retries",
        snapshot.rows_read,
        snapshot.rows_written,
        bytesize::ByteSize(snapshot.bytes_written),
        started.elapsed().as_secs_f64(),
        snapshot.units_done,
        snapshot.units_skipped,
        snapshot.retries,
    );
    let connector = progress.connector.read();
    if let Some((_, records)) = connector.iter().find(|(k, _)| *k == "streamRecordsRead") {
        summary.push_str(&format!(", {records} stream records applied"));
    }
    let count = |name: &str| connector.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    if let (Some(all), Some(lwt)) = (
        count("coordinationRequests"),
        count("coordinationLwtRequests"),
    ) {
        summary.push_str(&format!(
            ", {all} coordination requests ({lwt} lightweight transactions)"
        ));
    }
    if std::io::stderr().is_terminal() {
        crate::errln!();
    }
    match result {
        Ok(()) => {
            crate::errln!("drover: migration complete: {summary}");
            EXIT_OK
        }
        Err(EngineError::Stopped) => {
            crate::errln!("drover: migration stopped: {summary}");
            EXIT_INTERRUPTED
        }
        Err(e) => {
            crate::errln!("drover: migration failed: {e} ({summary})");
            EXIT_FAILED
        }
    }
}

/// A token cancelled by the first SIGINT/SIGTERM (`what` says what happens then); the second
/// exits at once.
fn stop_on_signals(what: &'static str) -> CancellationToken {
    let cancel = CancellationToken::new();
    let signals = cancel.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail on Unix");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        crate::errln!("\ndrover: stopping: {what}");
        signals.cancel();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    });
    cancel
}

/// Counters of a running job as the progress display reads them, and what its rows are called.
type Sampler = Box<dyn Fn() -> Sample + Send>;

fn migration_line(progress: Arc<Counters>) -> (Sampler, &'static str) {
    (Box::new(move || progress.sample()), "rows")
}

fn validation_line(progress: Arc<crate::validate::Progress>) -> (Sampler, &'static str) {
    (Box::new(move || progress.sample()), "rows compared")
}

/// Draws a progress bar on a terminal, a status line every 10 s otherwise (logs, CI).
async fn show_progress((sample, noun): (Sampler, &'static str)) {
    let tty = std::io::stderr().is_terminal();
    let interval = if tty {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(10)
    };
    let mut window = Window::default();
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let s = sample();
        let r = window.status(&s);
        let (total, done, _) = s.units;
        let pct = r.permille.map_or(0.0, |p| p as f64 / 10.0);
        let eta = r.eta_seconds.map_or("?".to_string(), |e| {
            humantime::format_duration(Duration::from_secs(e)).to_string()
        });
        let waiting = s
            .waiting
            .map(|w| format!(" | waiting: {w}"))
            .unwrap_or_default();
        let differences = s
            .differences
            .map(|n| format!(" | {n} differ"))
            .unwrap_or_default();
        let of = s
            .estimate
            .map(|e| format!(" of ~{}", e.rows))
            .unwrap_or_default();
        let line = format!(
            "{pct:5.1}% | {noun} {}{of}{differences} | {} rows/s | {}/s | ETA {eta} | units {done}/{total}{waiting}",
            s.done,
            r.rows_per_second,
            bytesize::ByteSize(r.bytes_per_second)
        );
        if tty {
            let width = 30;
            let filled = ((pct / 100.0) * width as f64) as usize;
            crate::err!(
                "\r[{}{}] {line}\x1b[K",
                "#".repeat(filled),
                ".".repeat(width - filled.min(width))
            );
            let _ = std::io::stderr().flush();
        } else {
            crate::errln!("drover: {line}");
        }
    }
}

/// Says why a foreground job did not start, and its exit code: a bad job file or schema, or a
/// savepoint that already covers everything, is `EXIT_CONFIG`; a database that cannot be
/// reached is a failure, not a bad file.
fn refused_launch(path: &Path, e: &EngineError) -> u8 {
    crate::errln!("drover: {}: {e}", path.display());
    if e.is_config_problem() || e.is_already_done() {
        EXIT_CONFIG
    } else {
        EXIT_FAILED
    }
}

/// `drover validate --config FILE`: compares the target with the source in the foreground.
/// Progress goes to stderr, the report to stdout (text, or JSON with `json`). Returns the exit
/// code: 0 no differences, 5 differences, 1 the validation failed, 2 the job file or schemas
/// are invalid, 130 stopped (the table of `crate::client::EXIT_CODES`).
pub async fn validate(path: &Path, json: bool) -> u8 {
    if let Err(e) = load_filter_key() {
        crate::errln!("drover: {e}");
        return EXIT_CONFIG;
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            crate::errln!("drover: {}: cannot read job config: {e}", path.display());
            return EXIT_CONFIG;
        }
    };
    let launch = match crate::validate::job::launch(&text).await {
        Ok(l) => l,
        Err(e) => return refused_launch(path, &e),
    };
    if let Some(name) = &launch.resumed_from {
        crate::errln!("drover: resuming the validation from savepoint {name}");
    }
    let cancel = stop_on_signals(
        "reads in flight finish, then a savepoint is written (signal again to exit at once)",
    );
    let progress = Arc::new(crate::validate::Progress::default());
    let display = tokio::spawn(show_progress(validation_line(progress.clone())));
    let started = Instant::now();
    let state = Arc::new(std::sync::Mutex::new(Default::default()));
    let (report, result) =
        crate::validate::job::execute(launch, progress.clone(), cancel, state).await;
    display.abort();
    if std::io::stderr().is_terminal() {
        crate::errln!();
    }
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else {
        crate::out!("{}", report.to_text());
    }
    let took = format!("{:.1}s", started.elapsed().as_secs_f64());
    match result {
        Ok(()) if report.is_clean() => {
            crate::errln!("drover: validation complete in {took}: no differences");
            EXIT_OK
        }
        Ok(()) => {
            crate::errln!(
                "drover: validation complete in {took}: {} rows differ",
                report.rows_with_differences
            );
            EXIT_DIFFERENCES
        }
        Err(crate::engine::EngineError::Stopped) => {
            crate::errln!(
                "drover: validation stopped after {took} (the report covers what was compared)"
            );
            EXIT_INTERRUPTED
        }
        Err(e) => {
            crate::errln!("drover: validation failed after {took}: {e}");
            EXIT_FAILED
        }
    }
}

/// `drover auth hash-token`: the SHA-256 of a bearer token read from stdin, or of a new random
/// one with `generate`, and the `auth.tokens` entry that accepts it. The token is printed only
/// when generated (it is then shown this once); the config only ever holds the hash.
pub fn hash_token(generate: bool, id: &str, roles: &[String]) -> u8 {
    use sha2::{Digest, Sha256};
    for role in roles {
        if crate::auth::Role::from_name(role).is_none() {
            crate::errln!(
                "drover: unknown role {role:?}: expected reader, operator, peer or admin"
            );
            return EXIT_CONFIG;
        }
    }
    let token = if generate {
        let mut bytes = [0u8; 32];
        if let Err(e) = getrandom::fill(&mut bytes) {
            crate::errln!("drover: no randomness from the operating system: {e}");
            return 1;
        }
        hex(&bytes)
    } else {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            crate::errln!("drover: cannot read the token from stdin: {e}");
            return 1;
        }
        // `echo "$TOKEN" |` adds a newline that is not part of the token.
        let token = text.trim_end_matches(['\n', '\r']).to_string();
        if token.is_empty() {
            crate::errln!("drover: no token on stdin (or use --generate for a new one)");
            return EXIT_CONFIG;
        }
        if token.trim() != token {
            crate::errln!(
                "drover: the token starts or ends with white space, which Authorization headers lose"
            );
            return EXIT_CONFIG;
        }
        token
    };
    let sha = hex(&Sha256::digest(token.as_bytes()));
    if generate {
        crate::outln!("token: {token}");
    }
    crate::outln!("sha256: {sha}");
    // Quoted as JSON, which YAML reads as it is, so any id stays one scalar.
    let id = serde_json::to_string(id).expect("a string serializes");
    crate::outln!("# an entry of auth.tokens (or of auth.tokens_file):");
    crate::outln!(
        "- {{id: {id}, sha256: {sha}, roles: [{}]}}",
        roles.join(", ")
    );
    0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
