//! `drover jobs`, `drover job`, `drover submit`, ...: a client of a running daemon's REST API,
//! in the habits of kubectl. Every command returns its exit code; an error is one line on
//! stderr, the API's own message when the daemon answered.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

// One table of exit codes for every command, client and foreground alike (`EXIT_CODES` is
// what `drover --help` prints): a script tells the same outcome by the same number whichever
// command reported it.

/// Exit code: done; a job followed to its end SUCCEEDED (a validation: no rows differ).
pub const EXIT_OK: u8 = 0;
/// Exit code: the job failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: the command could not be carried out (bad input, the daemon refused or could not
/// be reached).
pub const EXIT_ERROR: u8 = 2;
/// Exit code: the job was cancelled.
pub const EXIT_CANCELLED: u8 = 3;
/// Exit code: the job was interrupted (the daemon stopped; it can be resumed).
pub const EXIT_INTERRUPTED: u8 = 4;
/// Exit code: a validation ran to the end and found rows that differ (`DIFFERENCES_FOUND`).
pub const EXIT_DIFFERENCES: u8 = 5;
/// Exit code: a foreground command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells do).
pub const EXIT_STOPPED: u8 = 130;

/// The exit codes of every command, as `drover --help` shows them (and docs/console.md, "Exit
/// codes").
pub const EXIT_CODES: &str = "\
Exit codes (the same for every command):
  0    done; a job followed to its end SUCCEEDED (a validation: no rows differ)
  1    the job FAILED (migrate, validate: could not finish)
  2    not carried out: bad usage, an invalid config or job file, a job whose savepoint
       already covers everything (migrate, submit), the daemon refused the request or could
       not be reached
  3    the job followed was CANCELLED
  4    the job followed was INTERRUPTED (the daemon stopped; it can be resumed)
  5    a validation found rows that differ (DIFFERENCES_FOUND): validate, job --follow,
       submit --follow, validations report
  130  stopped by Ctrl-C or SIGTERM (migrate, validate)
  141  the reader of the output went away (drover jobs | head): any command that prints";

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon could not be reached, or the connection broke.
    #[error("{server}: {reason}")]
    Connect {
        /// The server URL.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The daemon answered with an error.
    #[error(
        "{method} {}: {code} {status}: {message}",
        crate::answer::shown_url(path)
    )]
    Api {
        /// Method.
        method: Method,
        /// Path asked.
        path: String,
        /// Status code.
        code: u16,
        /// Reason phrase.
        status: String,
        /// The API's message.
        message: String,
    },
    /// Bad input on this side: a file, an option, the credentials.
    #[error("{0}")]
    Input(String),
    /// The daemon answered something that is not the API's JSON.
    #[error("{path}: unexpected answer: {reason}")]
    Answer {
        /// Path asked.
        path: String,
        /// Why it cannot be read.
        reason: String,
    },
}

/// How to reach the daemon.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port` or `https://host:port`.
    pub server: String,
    /// A bearer token (`DROVER_TOKEN`).
    pub token: Option<SecretString>,
    /// A file holding the bearer token (`DROVER_TOKEN_FILE`).
    pub token_file: Option<PathBuf>,
    /// PEM CA certificates to trust for `https` (`DROVER_CA_CERT`); the system's otherwise.
    pub ca_cert: Option<PathBuf>,
}

/// A connection to one daemon.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<SecretString>,
}

fn rustls_roots(ca: Option<&Path>) -> Result<rustls::ClientConfig, ClientError> {
    let Some(path) = ca else {
        return Ok(crate::tls::public_roots_client_config());
    };
    let pem = std::fs::read(path)
        .map_err(|e| ClientError::Input(format!("--ca-cert {}: {e}", path.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        let cert: rustls::pki_types::CertificateDer<'static> = cert.map_err(|e| {
            ClientError::Input(format!("--ca-cert {}: not PEM: {e}", path.display()))
        })?;
        roots.add(cert).map_err(|e| {
            ClientError::Input(format!("--ca-cert {}: not a CA: {e}", path.display()))
        })?;
    }
    if roots.is_empty() {
        return Err(ClientError::Input(format!(
            "--ca-cert {}: holds no certificate",
            path.display()
        )));
    }
    Ok(
        rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .expect("the aws-lc provider supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

impl Client {
    /// A client of `target`.
    pub fn new(target: &Target) -> Result<Self, ClientError> {
        let base = target.server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Input(format!(
                "--server {base:?}: expected http://HOST:PORT or https://HOST:PORT"
            )));
        }
        let token = match (&target.token, &target.token_file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ClientError::Input(format!("token file {}: {e}", path.display()))
                })?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(ClientError::Input(format!(
                        "token file {}: is empty",
                        path.display()
                    )));
                }
                Some(SecretString::from(token.to_string()))
            }
            (None, None) => None,
        };
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(rustls_roots(target.ca_cert.as_deref())?)
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(crate::config::CLIENT_POOL_IDLE)
            .user_agent(concat!("drover-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Input(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self { http, base, token })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose_secret());
        }
        request
    }

    fn connect_error(&self, e: &reqwest::Error) -> ClientError {
        ClientError::Connect {
            server: crate::answer::shown_url(&self.base),
            reason: crate::answer::request_error_text(e),
        }
    }

    async fn api_error(method: Method, path: &str, response: reqwest::Response) -> ClientError {
        let status = response.status();
        // The daemon's own messages (a job file's every problem) may be long, so more of its
        // answer is read than of a peer's; still within a bound.
        let text = crate::answer::within(response, 1 << 20)
            .await
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| text.chars().take(300).collect());
        ClientError::Api {
            method,
            path: path.to_string(),
            code: status.as_u16(),
            status: status.canonical_reason().unwrap_or("").to_string(),
            message,
        }
    }

    /// Sends a request and reads its JSON answer (`Null` for 204).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<Value, ClientError> {
        let mut request = self.request(method.clone(), path);
        if let Some((content_type, bytes)) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(bytes);
        }
        let response = request.send().await.map_err(|e| self.connect_error(&e))?;
        if !response.status().is_success() {
            return Err(Self::api_error(method, path, response).await);
        }
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let bytes = response.bytes().await.map_err(|e| self.connect_error(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Answer {
            path: path.to_string(),
            reason: format!("not JSON: {e}"),
        })
    }

    /// GET `path` as JSON.
    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::GET, path, None).await
    }

    /// Follows job `id`'s progress stream, calling `each` with every event's name and data,
    /// until its `end` (returned) or `gone`. A broken stream is opened again (the daemon
    /// restarting, a proxy cutting it) for up to a minute. So is one that ends with the job
    /// `INTERRUPTED`: a daemon stopping gracefully interrupts its running jobs and resumes them
    /// when it starts again, so the job is followed on once it runs again; it is returned
    /// `INTERRUPTED` only when it has not run again within that minute.
    pub async fn follow(
        &self,
        id: &str,
        mut each: impl FnMut(&str, &Value),
    ) -> Result<Value, ClientError> {
        use backon::BackoffBuilder;
        let path = format!("/api/v1/jobs/{}/events?interval=500ms", segment(id));
        let backoff = || {
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(250))
                .with_max_delay(Duration::from_secs(5))
                .with_total_delay(Some(Duration::from_secs(60)))
                .without_max_times()
                .build()
        };
        let mut delays = backoff();
        // The job as its stream last ended it, INTERRUPTED, while it may yet resume.
        let mut interrupted: Option<Value> = None;
        loop {
            let broken = match self.request(Method::GET, &path).send().await {
                Ok(response) if response.status().is_success() => {
                    let mut events =
                        eventsource_stream::Eventsource::eventsource(response.bytes_stream());
                    let mut broken = ClientError::Connect {
                        server: self.base.clone(),
                        reason: "the progress stream ended before the job did".into(),
                    };
                    while let Some(event) = events.next().await {
                        let event = match event {
                            Ok(e) => e,
                            Err(e) => {
                                broken = ClientError::Connect {
                                    server: self.base.clone(),
                                    reason: format!("progress stream: {e}"),
                                };
                                break;
                            }
                        };
                        let data: Value =
                            serde_json::from_str(&event.data).map_err(|e| ClientError::Answer {
                                path: path.clone(),
                                reason: format!("event {}: not JSON: {e}", event.event),
                            })?;
                        each(&event.event, &data);
                        let state = data.get("state").and_then(Value::as_str).unwrap_or("");
                        match event.event.as_str() {
                            "end" if state == "INTERRUPTED" => {
                                interrupted = Some(data);
                                break;
                            }
                            "end" => return Ok(data),
                            "gone" => {
                                return Err(ClientError::Input(format!(
                                    "job {id} was deleted while followed"
                                )));
                            }
                            // The job runs (again): the minute starts over at the next break.
                            _ if matches!(state, "RUNNING" | "QUEUED") => {
                                interrupted = None;
                                delays = backoff();
                            }
                            _ => {}
                        }
                    }
                    broken
                }
                // A daemon that is up and refuses is not retried: its answer stands.
                Ok(response) if response.status() != StatusCode::SERVICE_UNAVAILABLE => {
                    return Err(Self::api_error(Method::GET, &path, response).await);
                }
                Ok(response) => Self::api_error(Method::GET, &path, response).await,
                Err(e) => self.connect_error(&e),
            };
            match delays.next() {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return interrupted.ok_or(broken),
            }
        }
    }
}

/// `s` as one path segment (or query value).
fn segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// How a listing or an object is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Columns for a terminal.
    Table,
    /// More columns.
    Wide,
    /// The API's JSON.
    Json,
    /// The API's JSON, as YAML.
    Yaml,
}

fn print_value(value: &Value, output: Output) {
    match output {
        Output::Yaml => crate::out!(
            "{}",
            yaml_serde::to_string(value).expect("JSON values serialize as YAML")
        ),
        _ => crate::outln!(
            "{}",
            serde_json::to_string_pretty(value).expect("JSON values serialize")
        ),
    }
}

fn fail(e: ClientError) -> u8 {
    crate::errln!("drover: {e}");
    EXIT_ERROR
}

fn counter(job: &Value, name: &str) -> Option<u64> {
    job.get("progress")
        .and_then(|p| p.get(name))
        .and_then(Value::as_u64)
}

fn text<'a>(job: &'a Value, name: &str) -> &'a str {
    job.get(name).and_then(Value::as_str).unwrap_or("")
}

/// The job's share done and what it is of, as every screen shows it.
fn shown(job: &Value) -> Option<crate::jobs::shown::Shown> {
    let progress: std::collections::BTreeMap<String, u64> = job
        .get("progress")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let state = text(job, "state")
        .parse()
        .unwrap_or(crate::jobs::JobState::Running);
    crate::kinds::shown(text(job, "kind"), state, &progress, job.get("result"))
}

fn progress_text(job: &Value) -> String {
    shown(job).map_or_else(|| "-".into(), |s| s.percent())
}

/// `12.8 % (12,800 of ~100,000 rows · units 5/66)`.
fn progress_long(job: &Value) -> String {
    match shown(job) {
        Some(s) if s.label.is_empty() => s.percent(),
        Some(s) => format!("{} ({})", s.percent(), s.label),
        None => "-".into(),
    }
}

/// Time left while the job runs.
fn eta(job: &Value) -> String {
    match (text(job, "state"), counter(job, "etaSeconds")) {
        ("RUNNING", Some(s)) => humantime::format_duration(Duration::from_secs(s)).to_string(),
        _ => "-".into(),
    }
}

fn age(job: &Value) -> String {
    let Some(created) = job
        .get("createdAt")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    else {
        return "-".into();
    };
    let secs = (chrono::Utc::now() - created.to_utc()).num_seconds().max(0) as u64;
    match secs {
        0..120 => format!("{secs}s"),
        120..7200 => format!("{}m", secs / 60),
        7200..172_800 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn rate(job: &Value) -> String {
    let rows = counter(job, "rowsPerSecond");
    let bytes = counter(job, "bytesPerSecond");
    let thousands = crate::jobs::shown::thousands;
    match (rows, bytes) {
        // An ended job's rates are its averages over the run.
        (Some(r), Some(b)) if !matches!(text(job, "state"), "RUNNING" | "QUEUED") => {
            format!("avg {} rows/s, {}/s", thousands(r), bytesize::ByteSize(b))
        }
        (Some(r), Some(b)) => format!("{} rows/s, {}/s", thousands(r), bytesize::ByteSize(b)),
        (Some(r), None) => format!("{r} rows/s"),
        (None, Some(b)) => format!("{}/s", bytesize::ByteSize(b)),
        _ => "-".into(),
    }
}

/// Prints rows as columns, each as wide as its widest cell.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(&cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        crate::outln!("{}", out.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

/// How long a name may be in `drover jobs`' table (`-o wide`, JSON and YAML show it whole).
const NAME_COLUMN: usize = 32;

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n - 1).collect();
        out.push('…');
        out
    }
}

/// The shortest start of each id, of at least 13 characters (a UUIDv7's creation
/// millisecond), that no other listed id starts with: what the CLI and the console accept.
fn short_ids(jobs: &[Value]) -> Vec<String> {
    let ids: Vec<&str> = jobs.iter().map(|j| text(j, "id")).collect();
    ids.iter()
        .map(|id| {
            let mut n = 13.min(id.len());
            while n < id.len()
                && ids
                    .iter()
                    .any(|other| other != id && other.starts_with(&id[..n]))
            {
                n += 1;
            }
            id[..n].to_string()
        })
        .collect()
}

/// `95s` as `1m35s`, `3725s` as `1h02m`: the two largest units.
fn short_duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let s = s.round() as u64;
    match s {
        0..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

fn duration_text(job: &Value) -> String {
    job.get("durationSeconds")
        .and_then(Value::as_f64)
        .map_or_else(|| "-".into(), short_duration)
}

fn rows_text(job: &Value) -> String {
    job.get("rows")
        .and_then(Value::as_u64)
        .map_or_else(|| "-".into(), crate::jobs::shown::thousands)
}

/// `source → target`, or `-` for jobs that name neither.
fn route(job: &Value) -> String {
    match (text(job, "source"), text(job, "target")) {
        ("", "") => "-".into(),
        (s, t) => format!("{s} → {t}"),
    }
}

/// The average rate over an ended job's run (the recent rate is 0 once it has ended).
fn average_rate(job: &Value) -> Option<String> {
    let rows = job.get("averageRowsPerSecond").and_then(Value::as_f64);
    let bytes = job.get("averageBytesPerSecond").and_then(Value::as_f64);
    let b = |b: f64| bytesize::ByteSize(b.round() as u64);
    match (rows, bytes) {
        (Some(r), Some(x)) => Some(format!("{r:.0} rows/s, {}/s average", b(x))),
        (Some(r), None) => Some(format!("{r:.0} rows/s average")),
        (None, Some(x)) => Some(format!("{}/s average", b(x))),
        (None, None) => None,
    }
}

fn job_rows(jobs: &[Value], wide: bool) -> Vec<Vec<String>> {
    let short = short_ids(jobs);
    jobs.iter()
        .zip(short)
        .map(|(j, short)| {
            let name = text(j, "name");
            let mut row = vec![
                if wide {
                    text(j, "id").to_string()
                } else {
                    short
                },
                if wide {
                    name.to_string()
                } else {
                    clip(name, NAME_COLUMN)
                },
            ];
            if wide {
                row.push(route(j));
            }
            row.extend([
                text(j, "kind").to_string(),
                text(j, "state").to_string(),
                progress_text(j),
                rows_text(j),
                duration_text(j),
                age(j),
            ]);
            if wide {
                row.push(text(j, "phase").to_string());
                row.push(
                    j.get("attempts")
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                        .to_string(),
                );
                row.push(counter(j, "retries").unwrap_or(0).to_string());
                row.push(average_rate(j).unwrap_or_else(|| rate(j)));
                let error = j
                    .get("error")
                    .and_then(Value::as_str)
                    .or_else(|| j.get("lastError").and_then(Value::as_str))
                    .unwrap_or("");
                row.push(error.chars().take(80).collect());
            }
            row
        })
        .collect()
}

fn print_jobs(jobs: &[Value], output: Output) {
    match output {
        Output::Json | Output::Yaml => {
            print_value(&serde_json::json!({ "jobs": jobs }), output);
        }
        Output::Table => print_table(
            &[
                "ID", "NAME", "KIND", "STATE", "PROGRESS", "ROWS", "DURATION", "AGE",
            ],
            &job_rows(jobs, false),
        ),
        Output::Wide => print_table(
            &[
                "ID",
                "NAME",
                "SOURCE → TARGET",
                "KIND",
                "STATE",
                "PROGRESS",
                "ROWS",
                "DURATION",
                "AGE",
                "PHASE",
                "ATTEMPTS",
                "RETRIES",
                "RATE",
                "ERROR",
            ],
            &job_rows(jobs, true),
        ),
    }
}

/// `drover jobs`: every job, optionally of one state or kind.
pub async fn jobs(target: &Target, state: Option<&str>, kind: Option<&str>, output: Output) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut query = Vec::new();
    if let Some(s) = state {
        query.push(format!("state={}", segment(s)));
    }
    if let Some(k) = kind {
        query.push(format!("kind={}", segment(k)));
    }
    // Page after page: the daemon answers at most 1,000 jobs at once.
    let mut jobs = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut query = query.clone();
        if let Some(after) = &after {
            query.push(format!("after={}", segment(after)));
        }
        let path = if query.is_empty() {
            "/api/v1/jobs".to_string()
        } else {
            format!("/api/v1/jobs?{}", query.join("&"))
        };
        match client.get(&path).await {
            Ok(list) => {
                if let Some(page) = list.get("jobs").and_then(Value::as_array) {
                    jobs.extend(page.iter().cloned());
                }
                match list.get("next").and_then(Value::as_str) {
                    // A cursor that does not move would loop for ever.
                    Some(next) if after.as_deref() != Some(next) => after = Some(next.to_string()),
                    _ => break,
                }
            }
            Err(e) => return fail(e),
        }
    }
    print_jobs(&jobs, output);
    EXIT_OK
}

fn print_job(job: &Value, output: Output) {
    match output {
        Output::Json | Output::Yaml => print_value(job, output),
        Output::Table | Output::Wide => {
            let field = |k: &str, v: String| crate::outln!("{k:<12} {v}");
            field("ID:", text(job, "id").into());
            field("Name:", text(job, "name").into());
            field("Kind:", text(job, "kind").into());
            if job.get("source").is_some() || job.get("target").is_some() {
                field("Source:", text(job, "source").into());
                field("Target:", text(job, "target").into());
            }
            field("State:", text(job, "state").into());
            field("Phase:", text(job, "phase").into());
            field("Progress:", progress_long(job));
            field("Rows:", rows_text(job));
            if let Some(bytes) = job.get("bytes").and_then(Value::as_u64) {
                field("Bytes:", bytesize::ByteSize(bytes).to_string());
            }
            field("Duration:", duration_text(job));
            field("Rate:", average_rate(job).unwrap_or_else(|| rate(job)));
            field("ETA:", eta(job));
            field(
                "Attempts:",
                job.get("attempts")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .to_string(),
            );
            field("Created:", text(job, "createdAt").into());
            field("Started:", text(job, "startedAt").into());
            field("Ended:", text(job, "endedAt").into());
            if let Some(e) = job.get("error").and_then(Value::as_str) {
                field("Error:", e.into());
            }
            if let Some(e) = job.get("lastError").and_then(Value::as_str) {
                field("Last error:", e.into());
            }
            if let Some(progress) = job.get("progress").and_then(Value::as_object) {
                crate::outln!("Counters:");
                for (k, v) in progress {
                    crate::outln!("  {k:<28} {v}");
                }
            }
        }
    }
}

/// The exit code of a job in its final state.
pub fn outcome(job: &Value) -> u8 {
    match text(job, "state") {
        "DIFFERENCES_FOUND" => EXIT_DIFFERENCES,
        "SUCCEEDED" => {
            // A daemon older than DIFFERENCES_FOUND ended such validations SUCCEEDED.
            let differ = job
                .get("result")
                .and_then(|r| r.get("rowsWithDifferences"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if text(job, "kind") == "validation" && differ > 0 {
                EXIT_DIFFERENCES
            } else {
                EXIT_OK
            }
        }
        "CANCELLED" => EXIT_CANCELLED,
        "INTERRUPTED" => EXIT_INTERRUPTED,
        _ => EXIT_FAILED,
    }
}

/// Follows job `id` to its end with a progress bar (a line per change when stderr is not a
/// terminal), and returns the exit code of its outcome.
async fn follow(client: &Client, id: &str, output: Output) -> u8 {
    let tty = std::io::stderr().is_terminal();
    let bar = indicatif::ProgressBar::with_draw_target(
        None,
        if tty {
            indicatif::ProgressDrawTarget::stderr()
        } else {
            indicatif::ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {percent:>3}% {msg}")
            .expect("the template is valid")
            .progress_chars("#>."),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let mut last_line = std::time::Instant::now() - Duration::from_secs(60);
    let mut last_state = String::new();
    let result = client
        .follow(id, |name, job| {
            let state = text(job, "state").to_string();
            let shown = shown(job);
            if let Some(s) = &shown {
                bar.set_length(1000);
                bar.set_position(s.permille);
            }
            let label = shown
                .map(|s| format!(" | {}", s.label))
                .filter(|l| l != " | ")
                .unwrap_or_default();
            let msg = format!(
                "{} {}{label} | {} | ETA {}",
                state,
                text(job, "phase"),
                rate(job),
                eta(job)
            );
            bar.set_message(msg.clone());
            // Without a terminal: state changes at once, progress every 10 s.
            if !tty
                && (state != last_state
                    || name == "end"
                    || last_line.elapsed() >= Duration::from_secs(10))
            {
                crate::errln!("drover: {id}: {} {msg}", progress_text(job));
                last_line = std::time::Instant::now();
            }
            last_state = state;
        })
        .await;
    bar.finish_and_clear();
    match result {
        Ok(last) => {
            // The final record, with its result and spec, as `drover job` prints it.
            let job = client
                .get(&format!("/api/v1/jobs/{}", segment(id)))
                .await
                .unwrap_or(last);
            if matches!(output, Output::Json | Output::Yaml) {
                print_value(&job, output);
            }
            let code = outcome(&job);
            let error = job
                .get("error")
                .and_then(Value::as_str)
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            crate::errln!(
                "drover: job {id} {}{error}",
                text(&job, "state").to_ascii_lowercase()
            );
            if code == EXIT_DIFFERENCES {
                let n = job
                    .get("result")
                    .and_then(|r| r.get("rowsWithDifferences"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                crate::errln!("drover: {n} rows differ (drover validations report {id})");
            }
            let _ = std::io::stdout().flush();
            code
        }
        Err(e) => fail(e),
    }
}

/// `drover job ID [--follow]`.
pub async fn job(target: &Target, id: &str, follow_it: bool, output: Output) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if follow_it {
        return follow(&client, id, output).await;
    }
    match client.get(&format!("/api/v1/jobs/{}", segment(id))).await {
        Ok(job) => {
            print_job(&job, output);
            EXIT_OK
        }
        Err(e) => fail(e),
    }
}

/// What a submitted file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SubmitKind {
    /// A migration (`POST /api/v1/migrations`).
    Migration,
    /// A validation of a migration's target (`POST /api/v1/validations`).
    Validation,
}

/// `drover submit FILE [--follow]`.
pub async fn submit(
    target: &Target,
    file: &Path,
    kind: SubmitKind,
    follow_it: bool,
    output: Output,
) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let body = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            return fail(ClientError::Input(format!(
                "{}: cannot read the job file: {e}",
                file.display()
            )));
        }
    };
    let path = match kind {
        SubmitKind::Migration => "/api/v1/migrations",
        SubmitKind::Validation => "/api/v1/validations",
    };
    let accepted = match client
        .call(Method::POST, path, Some(("application/yaml", body)))
        .await
    {
        Ok(a) => a,
        Err(e) => {
            crate::errln!("drover: {}: {e}", file.display());
            return EXIT_ERROR;
        }
    };
    let id = text(&accepted, "jobId").to_string();
    if follow_it {
        crate::errln!("drover: submitted job {id}");
        return follow(&client, &id, output).await;
    }
    match output {
        Output::Json | Output::Yaml => print_value(&accepted, output),
        _ => crate::outln!("{id}"),
    }
    EXIT_OK
}

/// What `drover cancel|resume|delete` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Ask a job to stop.
    Cancel,
    /// Resume an interrupted or cancelled migration.
    Resume,
    /// Forget an ended job.
    Delete,
}

/// `drover cancel|resume|delete ID`.
pub async fn act(target: &Target, id: &str, action: Action) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let job_path = format!("/api/v1/jobs/{}", segment(id));
    let result = match action {
        Action::Cancel => {
            client
                .call(Method::POST, &format!("{job_path}/cancel"), None)
                .await
        }
        Action::Delete => client.call(Method::DELETE, &job_path, None).await,
        Action::Resume => {
            let job = match client.get(&job_path).await {
                Ok(j) => j,
                Err(e) => return fail(e),
            };
            match text(&job, "kind") {
                "migration" => {
                    // The job's full id: `id` may be a prefix of it.
                    client
                        .call(
                            Method::POST,
                            &format!("/api/v1/migrations/{}/resume", segment(text(&job, "id"))),
                            None,
                        )
                        .await
                }
                other => Err(ClientError::Input(format!(
                    "job {id} is a {other}: only migrations are resumed through the API (validations and data-copy tasks resume when the daemon starts)"
                ))),
            }
        }
    };
    match result {
        Ok(_) => {
            let done = match action {
                Action::Cancel => "cancel requested",
                Action::Resume => "resumed",
                Action::Delete => "deleted",
            };
            crate::outln!("job {id} {done}");
            EXIT_OK
        }
        Err(e) => fail(e),
    }
}

/// `drover validations report ID`: the report as text (or JSON/YAML); exit 5 when rows differ.
pub async fn validation_report(target: &Target, id: &str, output: Output) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let report = match client
        .get(&format!("/api/v1/validations/{}/report", segment(id)))
        .await
    {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    match output {
        Output::Json | Output::Yaml => print_value(&report, output),
        _ => match serde_json::from_value::<crate::validate::report::Report>(report.clone()) {
            Ok(r) => crate::out!("{}", r.to_text()),
            Err(_) => print_value(&report, Output::Yaml),
        },
    }
    if report
        .get("rowsWithDifferences")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        > 0
    {
        EXIT_DIFFERENCES
    } else {
        EXIT_OK
    }
}

/// `drover live-migration copy`: starts a data-copy task on this (destination) daemon.
pub async fn live_copy(target: &Target, request: Value, follow_it: bool, output: Output) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let body = serde_json::to_vec(&request).expect("a request serializes");
    let accepted = match client
        .call(
            Method::POST,
            "/api/v1/live-migration/data-copy-tasks",
            Some(("application/json", body)),
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let id = text(&accepted, "taskId").to_string();
    if follow_it {
        crate::errln!("drover: data-copy task {id} started");
        return follow(&client, &id, output).await;
    }
    match output {
        Output::Json | Output::Yaml => print_value(&accepted, output),
        _ => crate::outln!("{id}"),
    }
    EXIT_OK
}

/// `drover live-migration verify`: starts a files-verification task.
pub async fn live_verify(target: &Target, request: Value, follow_it: bool, output: Output) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let body = serde_json::to_vec(&request).expect("a request serializes");
    let accepted = match client
        .call(
            Method::POST,
            "/api/v1/live-migration/files-verification-tasks",
            Some(("application/json", body)),
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let id = text(&accepted, "taskId").to_string();
    if follow_it {
        crate::errln!("drover: verification task {id} started");
        return follow(&client, &id, output).await;
    }
    match output {
        Output::Json | Output::Yaml => print_value(&accepted, output),
        _ => crate::outln!("{id}"),
    }
    EXIT_OK
}

/// `drover live-migration status`: this node's role, peer, routes switch and migration status,
/// and its tasks with their iterations — in words (the same as the console's page), or the
/// API's answers together with `-o json|yaml`.
pub async fn live_status(target: &Target, output: Output) -> u8 {
    let client = match Client::new(target) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let node = match client.get("/api/v1/admin/live-migration").await {
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    let role = text(&node, "role").to_string();
    // The live-migration routes answer only on a node with a role (404 otherwise), and the
    // tasks only on a destination.
    let status = if role == "none" {
        Value::Null
    } else {
        match client.get("/api/v1/live-migration/status").await {
            Ok(s) => s,
            Err(e) => return fail(e),
        }
    };
    let (mut copies, verifications) = if role == "destination" {
        let copies = client
            .get("/api/v1/live-migration/data-copy-tasks?all=true")
            .await;
        let verifications = client
            .get("/api/v1/live-migration/files-verification-tasks?all=true")
            .await;
        match (copies, verifications) {
            (Ok(c), Ok(v)) => (c, v),
            (Err(e), _) | (_, Err(e)) => return fail(e),
        }
    } else {
        (Value::Array(Vec::new()), Value::Array(Vec::new()))
    };
    // Rates and ETAs are the tasks' job counters.
    let jobs = match client.get("/api/v1/jobs?kind=data-copy-task").await {
        Ok(list) => list,
        Err(e) => return fail(e),
    };
    for task in copies.as_array_mut().into_iter().flatten() {
        let job = jobs
            .get("jobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|j| text(j, "id") == text(task, "taskId"));
        if let (Some(job), Some(fields)) = (job, task.as_object_mut()) {
            fields.insert(
                "progress".into(),
                job.get("progress").cloned().unwrap_or(Value::Null),
            );
        }
    }
    match output {
        Output::Json | Output::Yaml => print_value(
            &serde_json::json!({
                "node": node,
                "status": status,
                "dataCopyTasks": copies,
                "filesVerificationTasks": verifications,
            }),
            output,
        ),
        Output::Table | Output::Wide => {
            for line in live_status_text(&node, &status, &copies, &verifications) {
                crate::outln!("{line}");
            }
        }
    }
    EXIT_OK
}

/// `n` bytes in words, or `-` for a count not known yet (-1).
fn size_text(n: Option<i64>) -> String {
    match n {
        Some(n) if n >= 0 => bytesize::ByteSize(n as u64).to_string(),
        _ => "-".into(),
    }
}

/// The lines `drover live-migration status` prints.
fn live_status_text(
    node: &Value,
    status: &Value,
    copies: &Value,
    verifications: &Value,
) -> Vec<String> {
    let mut lines = Vec::new();
    let role = text(node, "role");
    let peer = text(node, "peer");
    lines.push(match role {
        "source" => "Role:    source (serves this node's files to its destination)".to_string(),
        "destination" => "Role:    destination (copies the files of its source here)".to_string(),
        _ => "Role:    none (this node is not in live_migration.migration_map)".to_string(),
    });
    if !peer.is_empty() {
        let side = if role == "destination" {
            "the source"
        } else {
            "the destination"
        };
        lines.push(format!("Peer:    {peer} ({side})"));
    }
    let until = match node.get("until").and_then(Value::as_str) {
        Some(until)
            if chrono::DateTime::parse_from_rfc3339(until)
                .is_ok_and(|t| t.to_utc() > chrono::Utc::now()) =>
        {
            format!("closing by themselves at {until}")
        }
        Some(until) => format!("closed by themselves at {until}"),
        None => "no expiry".into(),
    };
    let on = node.get("enabled").and_then(Value::as_bool) == Some(true);
    lines.push(format!(
        "Routes:  {} (set by {}), {until}",
        if on { "on" } else { "off" },
        text(node, "setBy")
    ));
    if role != "none" {
        let end = status
            .get("endTime")
            .and_then(Value::as_i64)
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| format!(" since {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
            .unwrap_or_default();
        lines.push(format!("Status:  {}{end}", text(status, "state")));
    }
    let copies = copies.as_array().map(Vec::as_slice).unwrap_or_default();
    let verifications = verifications
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    match role {
        "destination" if copies.is_empty() => lines.push("No data-copy task.".into()),
        "destination" => {}
        "source" => lines.push(format!(
            "Tasks run on the destination{}.",
            if peer.is_empty() {
                String::new()
            } else {
                format!(", {peer}")
            }
        )),
        _ => {}
    }
    for task in copies {
        lines.push(String::new());
        lines.extend(copy_task_text(task));
    }
    for task in verifications {
        lines.push(String::new());
        let differences: u64 = [
            "filesNotFoundAtSource",
            "filesNotFoundAtDestination",
            "metadataMismatches",
            "digestMismatches",
            "digestVerificationFailures",
        ]
        .iter()
        .filter_map(|k| task.get(*k).and_then(Value::as_u64))
        .sum();
        lines.push(format!(
            "Verification task {}: {} ({}), {} files matched, {differences} differences",
            text(task, "id"),
            text(task, "state"),
            text(task, "digestAlgorithm"),
            task.get("filesMatched")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        ));
        if let Some(e) = task.get("error").and_then(Value::as_str) {
            lines.push(format!("  error: {e}"));
        }
    }
    lines
}

/// A data-copy task, its figures and its iterations, in words.
fn copy_task_text(task: &Value) -> Vec<String> {
    let state = text(task, "state");
    let iterations = task
        .get("status")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut options = vec![format!(
        "threshold {:.1} % of the {}",
        task.get("successThreshold")
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
            * 100.0,
        match text(task, "thresholdBasis") {
            "files" => "files",
            _ => "bytes",
        }
    )];
    if let Some(d) = task.get("verifyDigest").and_then(Value::as_str) {
        options.push(format!("digest {d}"));
    }
    if let Some(b) = task.get("maxBytesPerSecond").and_then(Value::as_u64) {
        options.push(format!("at most {}/s", bytesize::ByteSize(b)));
    }
    let mut lines = vec![format!(
        "Data-copy task {}: {state}, {} iteration{} of at most {}, {}",
        text(task, "taskId"),
        iterations.len(),
        if iterations.len() == 1 { "" } else { "s" },
        task.get("maxIterations")
            .and_then(Value::as_u64)
            .map_or(0, |m| m + 1),
        options.join(", ")
    )];
    let progress = task.get("progress");
    let counter = |name: &str| progress.and_then(|p| p.get(name)).and_then(Value::as_u64);
    let share = crate::livemigration::tasks::shown::copy_fraction_of(
        state == "SUCCEEDED",
        Some(&serde_json::json!({ "status": iterations })),
    );
    let mut figures = vec![match share {
        // Its last pass found nothing it had to fetch.
        _ if state == "SUCCEEDED" => "100.0 % done".into(),
        Some((done, total)) if total > 0 => format!(
            "{:.1} % of this iteration's {}",
            (done as f64 * 100.0 / total as f64).min(100.0),
            bytesize::ByteSize(total)
        ),
        _ => "nothing to download known yet".into(),
    }];
    let running = state == "RUNNING";
    match counter("bytesPerSecond") {
        Some(b) if running => figures.push(format!("rate {}/s", bytesize::ByteSize(b))),
        Some(b) => figures.push(format!("average rate {}/s", bytesize::ByteSize(b))),
        None => {}
    }
    if running && let Some(eta) = counter("etaSeconds") {
        figures.push(format!(
            "ETA {}",
            humantime::format_duration(Duration::from_secs(eta))
        ));
    }
    lines.push(format!("  {}", figures.join(", ")));
    if let Some(e) = task.get("error").and_then(Value::as_str) {
        lines.push(format!("  error: {e}"));
    }
    for it in iterations {
        let n = |k: &str| it.get(k).and_then(Value::as_i64);
        let mut line = format!(
            "  iteration {}: {}, source {} in {} entries",
            n("iteration").unwrap_or(0),
            text(it, "state"),
            size_text(n("totalSize")),
            n("totalFiles")
                .filter(|f| *f >= 0)
                .map_or("-".into(), |f| f.to_string()),
        );
        match n("bytesToDownload") {
            Some(to) if to >= 0 => line.push_str(&format!(
                ", downloaded {} of {} (kept {}), {} of {} files, {} failures",
                size_text(n("bytesDownloaded")),
                size_text(Some(to)),
                size_text(n("bytesKept")),
                n("filesDownloaded").unwrap_or(0),
                n("filesToDownload").unwrap_or(0),
                n("downloadFailures").unwrap_or(0),
            )),
            _ if text(it, "state") == "SUCCESS" => {
                line.push_str(", nothing left that it had to download")
            }
            _ => {}
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_exit_codes() {
        let job = |state: &str, kind: &str, differ: u64| serde_json::json!({"state": state, "kind": kind, "result": {"rowsWithDifferences": differ}});
        assert_eq!(outcome(&job("SUCCEEDED", "migration", 0)), EXIT_OK);
        assert_eq!(outcome(&job("SUCCEEDED", "validation", 0)), EXIT_OK);
        assert_eq!(
            outcome(&job("DIFFERENCES_FOUND", "validation", 3)),
            EXIT_DIFFERENCES
        );
        // As a daemon older than DIFFERENCES_FOUND reports such a validation.
        assert_eq!(
            outcome(&job("SUCCEEDED", "validation", 3)),
            EXIT_DIFFERENCES
        );
        assert_eq!(outcome(&job("FAILED", "migration", 0)), EXIT_FAILED);
        assert_eq!(outcome(&job("CANCELLED", "migration", 0)), EXIT_CANCELLED);
        assert_eq!(
            outcome(&job("INTERRUPTED", "migration", 0)),
            EXIT_INTERRUPTED
        );
    }

    #[test]
    fn the_help_table_has_every_code() {
        let codes = [
            EXIT_OK,
            EXIT_FAILED,
            EXIT_ERROR,
            EXIT_CANCELLED,
            EXIT_INTERRUPTED,
            EXIT_DIFFERENCES,
            EXIT_STOPPED,
            crate::out::EXIT_PIPE_CLOSED as u8,
        ];
        let listed: Vec<u8> = EXIT_CODES
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(listed, codes);
        assert_eq!(crate::cli::EXIT_CONFIG, EXIT_ERROR);
        assert_eq!(crate::cli::EXIT_INTERRUPTED, EXIT_STOPPED);
    }

    #[test]
    fn progress_of_each_kind() {
        let m =
            serde_json::json!({"kind": "migration", "progress": {"unitsDone": 1, "unitsTotal": 4}});
        assert_eq!(progress_text(&m), "25.0 %");
        let it = |state: &str, total: i64, to: i64, got: i64| serde_json::json!({"iteration": 0, "state": state, "totalSize": total, "totalFiles": 3, "bytesToDownload": to, "filesToDownload": 3, "filesDownloaded": 0, "downloadFailures": 0, "bytesDownloaded": got});
        let c = serde_json::json!({"kind": "data-copy-task", "state": "RUNNING", "result": {"status": [it("DOWNLOADING", 20, 10, 5)]}});
        assert_eq!(progress_text(&c), "50.0 %");
        // Its last pass had nothing to download (-1, as the Sidecar leaves it): whole, not 0 %.
        let done = serde_json::json!({"kind": "data-copy-task", "state": "SUCCEEDED", "progress": {"bytesDownloaded": 0, "bytesToDownload": 10}, "result": {"status": [it("DOWNLOAD_COMPLETE", 20, 10, 10), it("SUCCESS", 20, -1, 0)]}});
        assert_eq!(progress_text(&done), "100.0 %");
        let rows = serde_json::json!({"kind": "migration", "state": "RUNNING", "progress": {
            "unitsDone": 5, "unitsTotal": 66, "rowsWritten": 12_800,
            "rowsTotalEstimate": 100_000, "progressPermille": 128, "etaSeconds": 218}});
        assert_eq!(
            progress_long(&rows),
            "12.8 % (12,800 of ~100,000 rows · units 5/66)"
        );
        assert_eq!(eta(&rows), "3m 38s");
        let none = serde_json::json!({"kind": "migration", "progress": {}});
        assert_eq!(progress_text(&none), "-");
    }
}
