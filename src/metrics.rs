//! Prometheus metrics of the daemon. Subsystems record into [`Metrics`]; the API renders it,
//! in OpenMetrics for a scraper that asks for it and in Prometheus' text format otherwise
//! (what `curl` and `promtool check metrics` read). Every metric is listed in
//! `docs/metrics.md`.
//!
//! Series with a job id are bounded by the job records kept (`jobs.keep_finished`):
//! `drover_job_info` has one per record, `drover_job_progress` one per counter of a queued or
//! running job. Everything else is labelled by kind, state, route or status only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::jobs::{JobRegistry, JobState};

/// Content type of the OpenMetrics rendering.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the Prometheus text rendering (exposition format 0.0.4).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How `/metrics` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0, what Prometheus asks for first.
    OpenMetrics,
    /// Prometheus' text format 0.0.4, for every other client.
    Text,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names it, else text.
    pub fn from_accept(accept: Option<&str>) -> Self {
        if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    /// The response's content type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::Text => TEXT_CONTENT_TYPE,
        }
    }
}

/// Job progress counters summed into each per-kind `_total` counter, by the names jobs give
/// them. Rates (`rowsPerSecond`), estimates (`etaSeconds`) and sizes (`unitsTotal`) are not
/// counters and are in none.
const TOTALS: [(&str, &str, &[&str]); 6] = [
    (
        "drover_job_rows_read",
        "Rows (items, records) jobs read from sources, by job kind",
        &["rowsRead", "sourceRows", "targetRows"],
    ),
    (
        "drover_job_rows_written",
        "Rows (items) jobs wrote to targets, by job kind",
        &["rowsWritten", "rowsCopied"],
    ),
    (
        "drover_job_bytes_read",
        "Bytes jobs read from sources (downloads of data-copy tasks included), by job kind",
        &["bytesRead", "bytesDownloaded"],
    ),
    (
        "drover_job_bytes_written",
        "Bytes jobs wrote to targets, by job kind",
        &["bytesWritten"],
    ),
    (
        "drover_job_retries",
        "Requests jobs retried after a transient error, by job kind",
        &["retries"],
    ),
    (
        "drover_job_errors",
        "Errors jobs met: transient errors reported (each new lastError), failed downloads, and jobs that failed, by job kind",
        &["downloadFailures"],
    ),
];

/// Progress counters that are rates or estimates: derived from counters, so left to
/// Prometheus' `rate()` rather than exported as gauges beside them.
const DERIVED: [&str; 3] = ["rowsPerSecond", "bytesPerSecond", "etaSeconds"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    /// The route template (`/api/v1/jobs/{id}`), never the raw path, so that ids do not
    /// create a time series each.
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobProgressLabels {
    /// Not `job`: Prometheus gives that label to the scrape job, and would rename ours.
    job_id: String,
    kind: String,
    counter: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobInfoLabels {
    job_id: String,
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuditLabels {
    /// Method and route template of a mutating call.
    action: String,
    /// Its status code.
    outcome: u16,
}

type HistogramFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// Every metric the daemon exports.
pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily,
    jobs: Family<JobLabels, Gauge>,
    job_progress: Family<JobProgressLabels, Gauge>,
    job_info: Arc<JobInfo>,
    totals: Vec<(&'static [&'static str], Family<KindLabels, Counter>)>,
    ended: Family<JobLabels, Counter>,
    audit: Family<AuditLabels, Counter>,
    event_streams: Gauge,
    console_sessions: Gauge,
    state_dir_free: Gauge,
    state_dir_size: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        registry.register(
            "drover_build",
            "The daemon's version (the value is always 1)",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            }),
        );
        #[cfg(target_os = "linux")]
        registry.register_collector(Box::new(Process::new()));
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "drover_http_requests",
            "HTTP requests answered, by method, route template and status code",
            requests.clone(),
        );
        // 1 ms to ~33 s: health checks take microseconds, file streams take minutes; both ends
        // fall into the first and last bucket rather than distorting the middle.
        let latency: HistogramFamily =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 16)));
        registry.register(
            "drover_http_request_duration_seconds",
            "Time to produce HTTP response headers, by method and route template",
            latency.clone(),
        );
        let jobs = Family::<JobLabels, Gauge>::default();
        registry.register(
            "drover_jobs",
            "Jobs known to the daemon, by kind and state",
            jobs.clone(),
        );
        let job_progress = Family::<JobProgressLabels, Gauge>::default();
        registry.register(
            "drover_job_progress",
            "Progress counters of queued and running jobs as the job reports them (rowsWritten, unitsDone, unitsTotal, streamLagSeconds...), by job id, kind and counter name; gone when the job ends (drover_job_info and the _total counters stay)",
            job_progress.clone(),
        );
        let job_info = Arc::new(JobInfo::default());
        registry.register_collector(Box::new(job_info.clone()));
        let totals = TOTALS
            .iter()
            .map(|(name, help, counters)| {
                let family = Family::<KindLabels, Counter>::default();
                registry.register(*name, *help, family.clone());
                (*counters, family)
            })
            .collect();
        let ended = Family::<JobLabels, Counter>::default();
        registry.register(
            "drover_jobs_ended",
            "Jobs that reached a state that is not active (SUCCEEDED, FAILED, CANCELLED...) since the daemon started, by kind and state",
            ended.clone(),
        );
        let audit = Family::<AuditLabels, Counter>::default();
        registry.register(
            "drover_audit_events",
            "Mutating API calls (served or refused), by action (method and route template) and outcome (status code)",
            audit.clone(),
        );
        let event_streams = Gauge::default();
        registry.register(
            "drover_event_streams",
            "Progress streams (Server-Sent Events of jobs) open now",
            event_streams.clone(),
        );
        let console_sessions = Gauge::default();
        registry.register(
            "drover_console_sessions",
            "Web console sessions signed in and not expired",
            console_sessions.clone(),
        );
        let state_dir_free = Gauge::default();
        registry.register(
            "drover_state_dir_free_bytes",
            "Bytes free for the daemon on the file system of its state directory",
            state_dir_free.clone(),
        );
        let state_dir_size = Gauge::default();
        registry.register(
            "drover_state_dir_size_bytes",
            "Size in bytes of the file system of the daemon's state directory",
            state_dir_size.clone(),
        );
        Self {
            state_dir_free,
            state_dir_size,
            event_streams,
            console_sessions,
            registry: Mutex::new(registry),
            audit,
            requests,
            latency,
            jobs,
            job_progress,
            job_info,
            totals,
            ended,
        }
    }

    /// The gauge of open progress streams.
    pub fn event_streams(&self) -> Gauge {
        self.event_streams.clone()
    }

    /// The gauge of console sessions.
    pub fn console_sessions(&self) -> Gauge {
        self.console_sessions.clone()
    }

    /// Records one answered HTTP request.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                route: route.to_string(),
                status,
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                route: route.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one audited call. `action` is a method and route template, `outcome` a status
    /// code: both come from bounded sets, never from the client's text.
    pub fn audit(&self, action: &str, outcome: u16) {
        self.audit
            .get_or_create(&AuditLabels {
                action: action.to_string(),
                outcome,
            })
            .inc();
    }

    /// Reads the free and whole space of the file system holding `state_dir` into its gauges
    /// (left as they were when it cannot be read).
    pub fn observe_state_dir(&self, state_dir: &std::path::Path) {
        match rustix::fs::statvfs(state_dir) {
            Ok(st) => {
                let size = st.f_frsize.saturating_mul(st.f_blocks);
                let free = st.f_frsize.saturating_mul(st.f_bavail);
                self.state_dir_size
                    .set(i64::try_from(size).unwrap_or(i64::MAX));
                self.state_dir_free
                    .set(i64::try_from(free).unwrap_or(i64::MAX));
            }
            Err(e) => tracing::debug!(error = %e, "cannot read the state directory's file system"),
        }
    }

    /// Renders every metric, with the job metrics read from `jobs`.
    pub fn render(&self, jobs: &JobRegistry, format: Format) -> String {
        self.observe_jobs(jobs);
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        drop(registry);
        match format {
            Format::OpenMetrics => out,
            Format::Text => to_text_format(&out),
        }
    }

    fn observe_jobs(&self, jobs: &JobRegistry) {
        let records = jobs.list(None);
        let kinds: Vec<String> = crate::kinds::names().map(str::to_string).collect();
        let mut counts = std::collections::BTreeMap::new();
        for r in &records {
            *counts.entry((r.kind.clone(), r.state)).or_insert(0u64) += 1;
        }
        let totals = jobs.totals();
        // Every state of every kind is written, zeros included: a state a job just left drops
        // to 0 instead of keeping its last value, and a daemon that never ran a job still
        // exports the family (dashboards pick their instances from it).
        for kind in &kinds {
            for state in JobState::ALL {
                let labels = JobLabels {
                    kind: kind.clone(),
                    state: state.as_str().to_string(),
                };
                let n = counts.get(&(kind.clone(), state)).copied().unwrap_or(0);
                self.jobs.get_or_create(&labels).set(n as i64);
                if !state.is_active() {
                    let ended = totals.ended.get(&(kind.clone(), state)).copied();
                    raise(&self.ended.get_or_create(&labels), ended.unwrap_or(0));
                }
            }
            let key = KindLabels { kind: kind.clone() };
            for (i, (counters, family)) in self.totals.iter().enumerate() {
                let mut sum: u64 = counters
                    .iter()
                    .filter_map(|c| totals.rises.get(&(kind.clone(), (*c).to_string())))
                    .sum();
                if i == TOTALS.len() - 1 {
                    sum += totals.errors.get(kind).copied().unwrap_or(0);
                }
                raise(&family.get_or_create(&key), sum);
            }
        }
        *self
            .job_info
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = records
            .iter()
            .map(|r| JobInfoLabels {
                job_id: r.id.clone(),
                kind: r.kind.clone(),
                state: r.state.as_str().to_string(),
            })
            .collect();
        // Only active jobs: finished ones keep their counters in their record, and dropping them
        // here keeps the number of series bounded however many jobs were ever run.
        self.job_progress.clear();
        for record in records.iter().filter(|r| r.state.is_active()) {
            for (counter, value) in &record.progress {
                if DERIVED.contains(&counter.as_str()) {
                    continue;
                }
                self.job_progress
                    .get_or_create(&JobProgressLabels {
                        job_id: record.id.clone(),
                        kind: record.kind.clone(),
                        counter: counter.clone(),
                    })
                    .set(i64::try_from(*value).unwrap_or(i64::MAX));
            }
        }
    }
}

/// Brings a counter up to `total` (counters only go up: the tally they copy only grows).
fn raise(counter: &Counter, total: u64) {
    let now = counter.get();
    if total > now {
        counter.inc_by(total - now);
    }
}

/// `drover_job_info`: one series per job record the daemon keeps, whatever its state, so that
/// an ended job stays visible (with its final state) for as long as `jobs.keep_finished` keeps
/// it.
#[derive(Debug, Default)]
struct JobInfo {
    records: Mutex<Vec<JobInfoLabels>>,
}

impl Collector for JobInfo {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let mut metric = encoder.encode_descriptor(
            "drover_job",
            "Every job record the daemon keeps (queued, running, and ended ones until jobs.keep_finished drops them), by job id, kind and state (the value is always 1)",
            None,
            MetricType::Info,
        )?;
        for labels in records.iter() {
            metric.encode_info(labels)?;
        }
        Ok(())
    }
}

/// The `process_*` metrics of the Prometheus client libraries, read from `/proc/self` at each
/// scrape.
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Process {
    /// Seconds since the epoch at which the process started, read once.
    start_time: Option<f64>,
}

#[cfg(target_os = "linux")]
impl Process {
    fn new() -> Self {
        let start_time = (|| {
            let ticks = stat_fields()?.get(19)?.parse::<f64>().ok()?;
            let stat = std::fs::read_to_string("/proc/stat").ok()?;
            let boot = stat
                .lines()
                .find_map(|l| l.strip_prefix("btime "))?
                .trim()
                .parse::<f64>()
                .ok()?;
            Some(boot + ticks / rustix::param::clock_ticks_per_second() as f64)
        })();
        Self { start_time }
    }
}

/// The fields of `/proc/self/stat` after the command name (the first is the state, field 3 of
/// proc(5)).
#[cfg(target_os = "linux")]
fn stat_fields() -> Option<Vec<String>> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name is in parentheses and may hold spaces and parentheses itself.
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

#[cfg(target_os = "linux")]
impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        fn counter(
            encoder: &mut DescriptorEncoder<'_>,
            name: &str,
            help: &str,
            v: f64,
        ) -> Result<(), std::fmt::Error> {
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(v).encode(metric)
        }
        fn gauge(
            encoder: &mut DescriptorEncoder<'_>,
            name: &str,
            help: &str,
            v: f64,
        ) -> Result<(), std::fmt::Error> {
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(v).encode(metric)
        }
        let e = &mut encoder;
        let field = |fields: &[String], i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        if let Some(fields) = stat_fields() {
            // proc(5): utime and stime are fields 14 and 15, num_threads 20, vsize 23, rss 24
            // (in pages); `fields` starts at field 3.
            let ticks = rustix::param::clock_ticks_per_second() as f64;
            let cpu = (field(&fields, 11) + field(&fields, 12)) / ticks;
            counter(
                e,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                cpu,
            )?;
            gauge(
                e,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                field(&fields, 20),
            )?;
            let page = rustix::param::page_size() as f64;
            gauge(
                e,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                field(&fields, 21) * page,
            )?;
            gauge(
                e,
                "process_threads",
                "Number of OS threads in the process",
                field(&fields, 17),
            )?;
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            // The directory handle read here is one of the descriptors counted.
            let open = dir.count().saturating_sub(1);
            gauge(
                e,
                "process_open_fds",
                "Number of open file descriptors",
                open as f64,
            )?;
        }
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        if let Some(max) = limit.current {
            gauge(
                e,
                "process_max_fds",
                "Maximum number of open file descriptors",
                max as f64,
            )?;
        }
        if let Some(start) = self.start_time {
            gauge(
                e,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                start,
            )?;
        }
        Ok(())
    }
}

/// Rewrites prometheus-client's OpenMetrics output in Prometheus' text format 0.0.4: a
/// counter's HELP and TYPE name its sample (`x_total`), an info is a gauge named `x_info`,
/// `unknown` is `untyped`, and there is no `# UNIT` or `# EOF`. drover writes no exemplars
/// and no `_created` samples, so the samples themselves read the same in both formats.
pub fn to_text_format(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_names_counters_and_infos_by_their_samples() {
        let om = "# HELP a_requests Requests.\n# TYPE a_requests counter\na_requests_total{x=\"1\"} 2\n# HELP b Build.\n# TYPE b info\nb_info{version=\"1\"} 1\n# HELP c_seconds C.\n# TYPE c_seconds gauge\n# UNIT c_seconds seconds\nc_seconds 3\n# EOF\n";
        assert_eq!(
            to_text_format(om),
            "# HELP a_requests_total Requests.\n# TYPE a_requests_total counter\na_requests_total{x=\"1\"} 2\n# HELP b_info Build.\n# TYPE b_info gauge\nb_info{version=\"1\"} 1\n# HELP c_seconds C.\n# TYPE c_seconds gauge\nc_seconds 3\n"
        );
    }

    #[test]
    fn openmetrics_is_served_only_to_who_asks_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("*/*")), Format::Text);
        assert_eq!(Format::from_accept(None), Format::Text);
    }
}
