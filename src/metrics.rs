//! Prometheus metrics of the daemon. Subsystems record into [`Metrics`]; the API renders it.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::jobs::{JobRegistry, JobState};

/// Content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
            "Progress counters of queued and running jobs (rows, bytes, units, retries...), by job id and counter name",
            job_progress.clone(),
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

    /// Renders every metric in the OpenMetrics text format, with job gauges read from `jobs`.
    pub fn render(&self, jobs: &JobRegistry) -> String {
        let counts = jobs.counts();
        let kinds: std::collections::BTreeSet<_> = counts.keys().map(|(k, _)| k.clone()).collect();
        // Every state of every kind is written, zeros included, so a state a job just left
        // drops to 0 instead of keeping its last value.
        for kind in kinds {
            for state in JobState::ALL {
                let n = counts.get(&(kind.clone(), state)).copied().unwrap_or(0);
                self.jobs
                    .get_or_create(&JobLabels {
                        kind: kind.clone(),
                        state: state.as_str().to_string(),
                    })
                    .set(n as i64);
            }
        }
        // Only active jobs: finished ones keep their counters in their record, and dropping them
        // here keeps the number of series bounded however many jobs were ever run.
        self.job_progress.clear();
        for record in jobs.list(None).into_iter().filter(|r| r.state.is_active()) {
            for (counter, value) in &record.progress {
                self.job_progress
                    .get_or_create(&JobProgressLabels {
                        job_id: record.id.clone(),
                        kind: record.kind.clone(),
                        counter: counter.clone(),
                    })
                    .set(i64::try_from(*value).unwrap_or(i64::MAX));
            }
        }
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        out
    }
}
