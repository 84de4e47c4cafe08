//! `GET /api/v1/jobs/{id}/events`: a job's progress as Server-Sent Events, for the console's
//! live pages and `drover job --follow`.
//!
//! The stream reads the job's record once per interval and sends it when it changed: no task
//! is spawned per client, so a client that goes away takes nothing with it (the stream is
//! dropped with its connection, and its slot and gauge with it).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::{DateTime, Utc};
use futures::Stream;
use prometheus_client::metrics::gauge::Gauge;
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::jobs::JobId;
use crate::jobs::{JobRecord, JobRegistry, JobState};

/// The bound on open streams (`server.max_event_streams`), each caller's share of it
/// (`server.max_event_streams_per_caller`), and the gauge that counts them.
pub struct EventStreams {
    slots: Arc<Semaphore>,
    per_caller: usize,
    /// Open streams per caller; a caller leaves the map with its last stream, so it holds at
    /// most as many entries as streams are open.
    callers: Arc<Mutex<HashMap<String, usize>>>,
    open: Gauge,
}

/// Why no stream was opened.
enum Refused {
    /// Every slot is taken.
    Full,
    /// The caller holds its whole share.
    Share,
}

impl EventStreams {
    /// At most `max` streams open at once, `per_caller` of them by one caller, counted in
    /// `open`.
    pub fn new(max: usize, per_caller: usize, open: Gauge) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max)),
            per_caller,
            callers: Arc::default(),
            open,
        }
    }

    /// A slot for one more stream of `caller`, or why not.
    fn open(&self, caller: &str) -> Result<Opened, Refused> {
        let mut callers = self.callers.lock().unwrap_or_else(|p| p.into_inner());
        let held = callers.get(caller).copied().unwrap_or(0);
        if held >= self.per_caller {
            return Err(Refused::Share);
        }
        let permit = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Full)?;
        callers.insert(caller.to_string(), held + 1);
        self.open.inc();
        Ok(Opened {
            _permit: permit,
            caller: caller.to_string(),
            callers: self.callers.clone(),
            open: self.open.clone(),
        })
    }
}

/// One open stream: dropped with the stream, which frees its slot and its caller's share and
/// lowers the gauge.
struct Opened {
    _permit: OwnedSemaphorePermit,
    caller: String,
    callers: Arc<Mutex<HashMap<String, usize>>>,
    open: Gauge,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.open.dec();
        let mut callers = self.callers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = callers.get_mut(&self.caller) {
            *held -= 1;
            if *held == 0 {
                callers.remove(&self.caller);
            }
        }
    }
}

/// Who opens a stream, for its share: the proven identity, or the address of a caller
/// without one (every anonymous caller of one address is one caller).
pub fn caller_of(
    identity: Option<&crate::auth::Identity>,
    address: Option<&axum::extract::ConnectInfo<std::net::SocketAddr>>,
) -> String {
    match (identity, address) {
        (Some(identity), _) => identity.name.clone(),
        (None, Some(address)) => format!("address:{}", address.0.ip()),
        (None, None) => "anonymous".to_string(),
    }
}

/// One event of the stream: the job as it is now, without its job file (which does not change
/// while it runs; `GET /api/v1/jobs/{id}` has it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobEvent {
    /// Job id.
    pub id: String,
    /// Kind of work.
    pub kind: String,
    /// What the job is called, as in its status (`JobView.name`): a follower or a page
    /// opened on the stream alone can say which job it shows.
    #[schema(example = "shop.orders → shop2.orders")]
    pub name: String,
    /// Lifecycle state.
    #[schema(value_type = String, example = "RUNNING")]
    pub state: JobState,
    /// What the job is doing now.
    pub phase: Option<String>,
    /// Times started, resumes included.
    pub attempts: u32,
    /// Progress counters, as in the job's status.
    pub progress: std::collections::BTreeMap<String, u64>,
    /// Why it failed.
    pub error: Option<String>,
    /// The most recent transient error (retried).
    pub last_error: Option<String>,
    /// Last change of the record.
    pub updated_at: DateTime<Utc>,
    /// What the job found so far (a validation's report, a data-copy task's iterations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
}

impl From<JobRecord> for JobEvent {
    fn from(r: JobRecord) -> Self {
        Self {
            name: crate::jobs::identity::name_of(&r),
            id: r.id,
            kind: r.kind,
            state: r.state,
            phase: r.phase,
            attempts: r.attempts,
            progress: r.progress,
            error: r.error,
            last_error: r.last_error,
            updated_at: r.updated_at,
            result: r.result,
        }
    }
}

/// One message of the stream as the `text/event-stream` format carries it: its `event` name,
/// `id` and `data`, the data being a [`JobEvent`] in JSON (`{"id"}` for `gone`). Written by hand
/// because the document must describe the message, not only its data: clients (and schemathesis)
/// check each parsed message against it, and `contentSchema` ties the data to `JobEvent`.
pub struct JobEventMessage;

impl utoipa::PartialSchema for JobEventMessage {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::extensions::Extensions;
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};

        let message = |names: &[&str], data: serde_json::Value, what: &str| {
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .required("event")
                .required("data")
                .property(
                    "event",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(names.iter().copied())),
                )
                .property("id", ObjectBuilder::new().schema_type(Type::String))
                .property(
                    "data",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .description(Some(what))
                        .content_media_type("application/json")
                        .extensions(Some(Extensions::from_iter([("contentSchema", data)]))),
                )
        };
        let job = message(
            &["state", "progress", "end"],
            serde_json::json!({ "$ref": "#/components/schemas/JobEvent" }),
            "The job as it is now (a JobEvent)",
        );
        let gone = message(
            &["gone"],
            serde_json::json!({
                "type": "object",
                "required": ["id"],
                "properties": { "id": { "type": "string" } }
            }),
            "The id of the job, deleted while it was followed",
        );
        OneOfBuilder::new()
            .item(job)
            .item(gone)
            .description(Some(
                "One Server-Sent Events message: `state`, `progress` and `end` carry the job, `gone` its id",
            ))
            .into()
    }
}

impl ToSchema for JobEventMessage {}

/// Parameters of a stream.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// How often the job is looked at (`250ms`, `2s`, ...), between 100ms and 60s. Default `1s`.
    #[param(value_type = Option<String>, example = "1s")]
    pub interval: Option<String>,
}

const MIN_INTERVAL: Duration = Duration::from_millis(100);
const MAX_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// A comment this often keeps proxies and `server.idle_timeout` from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The interval asked for, checked.
pub fn interval_of(query: &EventsQuery) -> Result<Duration, ApiError> {
    let Some(text) = query.interval.as_deref() else {
        return Ok(DEFAULT_INTERVAL);
    };
    let interval = humantime::parse_duration(text).map_err(|e| {
        ApiError::bad_request(format!(
            "interval: {text:?} is not a duration such as 500ms or 2s: {e}"
        ))
    })?;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&interval) {
        return Err(ApiError::bad_request(format!(
            "interval: {text} is outside 100ms..60s"
        )));
    }
    Ok(interval)
}

/// Streams a job's progress as Server-Sent Events. The first event (`state`) is the job as it
/// is; then a `progress` event whenever its counters or phase change and a `state` event when
/// its state does; the last is `end`, with the job in its final state (or `gone` when it was
/// deleted), after which the server closes the stream. Every event's data is a [`JobEvent`]
/// (`gone`: `{"id"}`). A comment every 15 s keeps a quiet stream open.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{id}/events",
    tag = "jobs",
    params(("id" = String, Path, description = "Job id, or a prefix of exactly one job id"), EventsQuery),
    responses(
        (status = 200, description = "`text/event-stream`: events `state`, `progress`, then `end` (or `gone`); each `data` is a JobEvent", content_type = "text/event-stream", body = JobEventMessage),
        (status = 400, description = "A bad interval, or an id prefix that starts more than one job id", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 503, description = "`server.max_event_streams` streams are open already, or `server.max_event_streams_per_caller` of the caller's", body = ErrorBody),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    JobId(id): JobId,
    Query(query): Query<EventsQuery>,
    identity: Option<axum::Extension<crate::auth::Identity>>,
    address: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let interval = interval_of(&query)?;
    let caller = caller_of(identity.as_deref(), address.as_deref());
    stream(&state, &id, interval, &caller)
}

/// The stream of job `id` for `caller` (see [`caller_of`]), also behind the console's pages.
pub fn stream(
    state: &AppState,
    id: &str,
    interval: Duration,
    caller: &str,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    let first = state.jobs.get(id)?;
    let server = &state.config.server;
    let opened = state.events.open(caller).map_err(|refused| {
        let message = match refused {
            Refused::Full => format!(
                "{} progress streams are open already (server.max_event_streams); retry later",
                server.max_event_streams
            ),
            Refused::Share => format!(
                "{caller} holds {} progress streams already (server.max_event_streams_per_caller); close one or retry later",
                server.max_event_streams_per_caller
            ),
        };
        ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, message)
    })?;
    let follow = Follow {
        jobs: state.jobs.clone(),
        id: id.to_string(),
        last: None,
        first: Some(first),
        ended: false,
        ticker: None,
        interval,
        sent: 0,
        _opened: opened,
    };
    let events = futures::stream::unfold(follow, |mut f| async move {
        f.next().await.map(|event| (Ok(event), f))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// What a stream remembers between events.
struct Follow {
    jobs: JobRegistry,
    id: String,
    /// The last record sent.
    last: Option<JobRecord>,
    /// The record read when the stream was opened, sent first.
    first: Option<JobRecord>,
    ended: bool,
    ticker: Option<tokio::time::Interval>,
    interval: Duration,
    sent: u64,
    _opened: Opened,
}

impl Follow {
    async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        loop {
            let record = match self.first.take() {
                Some(record) => record,
                None => {
                    let interval = self.interval;
                    let ticker = self.ticker.get_or_insert_with(|| {
                        let mut t = tokio::time::interval_at(
                            tokio::time::Instant::now() + interval,
                            interval,
                        );
                        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        t
                    });
                    ticker.tick().await;
                    match self.jobs.get(&self.id) {
                        Ok(record) => record,
                        Err(_) => {
                            self.ended = true;
                            let data = serde_json::json!({ "id": self.id }).to_string();
                            return Some(self.event("gone", data));
                        }
                    }
                }
            };
            let name = match &self.last {
                _ if !record.state.is_active() => "end",
                Some(last) if last.state == record.state => {
                    if last.progress == record.progress
                        && last.phase == record.phase
                        && last.last_error == record.last_error
                        && last.result == record.result
                    {
                        continue;
                    }
                    "progress"
                }
                _ => "state",
            };
            self.ended = name == "end";
            self.last = Some(record.clone());
            let data =
                serde_json::to_string(&JobEvent::from(record)).expect("a job event serializes");
            return Some(self.event(name, data));
        }
    }

    fn event(&mut self, name: &str, data: String) -> Event {
        self.sent += 1;
        Event::default()
            .event(name)
            .id(self.sent.to_string())
            .data(data)
    }
}
