//! `GET /metrics` and the middleware that counts requests.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::metrics::Format;

/// Prometheus metrics.
///
/// OpenMetrics when the `Accept` header names `application/openmetrics-text` (as Prometheus'
/// scrapes do), else Prometheus' text format 0.0.4 (`curl`, `promtool check metrics`).
/// docs/metrics.md lists every metric with its type and labels.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "metrics",
    responses((status = 200, description = "The metrics, in OpenMetrics or Prometheus' text format as the Accept header asks", content(
        (String = "application/openmetrics-text"),
        (String = "text/plain"),
    )))
)]
pub async fn render(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    state.metrics.observe_state_dir(&state.config.state_dir);
    let format = Format::from_accept(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    (
        [(header::CONTENT_TYPE, format.content_type())],
        state.metrics.render(&state.jobs, format),
    )
}

/// Records the count and latency of every request by route template.
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    state.metrics.observe_request(
        method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The method as a metrics or log label: one of the standard methods, else `other`. A client
/// can send any token as a method, and each became a label (6 MB of requests made `/metrics`
/// 127 MB).
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    const KNOWN: [(Method, &str); 9] = [
        (Method::GET, "GET"),
        (Method::HEAD, "HEAD"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::PATCH, "PATCH"),
        (Method::OPTIONS, "OPTIONS"),
        (Method::CONNECT, "CONNECT"),
        (Method::TRACE, "TRACE"),
    ];
    KNOWN
        .iter()
        .find(|(m, _)| m == method)
        .map_or("other", |(_, label)| label)
}
