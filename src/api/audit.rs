//! The audit trail: one structured log line (target `audit`) and one counter increment for
//! every mutating call, served or refused — who, what, on which object, with what outcome.

use axum::RequestExt;
use axum::body::Body;
use axum::extract::{RawPathParams, Request};
use axum::http::Method;
use axum::response::Response;

use crate::auth::Identity;
use crate::metrics::Metrics;

/// The longest object id written; ids are UUIDs, so only a hostile path is longer.
const MAX_OBJECT: usize = 128;

/// The largest response body read for the id of what a call created.
const MAX_PEEK: u64 = 64 * 1024;

/// Whether `method` changes something, and so is audited.
pub fn is_mutating(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn capped(text: &str) -> String {
    let mut end = text.len().min(MAX_OBJECT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out: String = text[..end]
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if end < text.len() {
        out.push('…');
    }
    out
}

/// The object a request names: the values of its path parameters (`{id}`, `{taskId}`), or
/// empty when it names none (a submission, whose id is read from the response).
pub async fn object_of(request: &mut Request) -> String {
    match request.extract_parts::<RawPathParams>().await {
        Ok(params) => {
            let values: Vec<&str> = params.iter().map(|(_, v)| v).collect();
            capped(&values.join("/"))
        }
        Err(_) => String::new(),
    }
}

/// The id (`jobId`, `taskId` or `id`) of what a successful call without a path object created, read from its small
/// JSON body; the response is rebuilt unchanged.
async fn created_id(response: Response) -> (String, Response) {
    use axum::body::HttpBody as _;
    let small = response
        .body()
        .size_hint()
        .exact()
        .is_some_and(|n| n <= MAX_PEEK);
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(response.status().is_success() && small && json) {
        return (String::new(), response);
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_PEEK as usize).await else {
        return (String::new(), Response::from_parts(parts, Body::empty()));
    };
    let id = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| {
            ["jobId", "taskId", "id"]
                .iter()
                .find_map(|k| v.get(k).and_then(|id| id.as_str()).map(capped))
        })
        .unwrap_or_default();
    (id, Response::from_parts(parts, Body::from(bytes)))
}

/// Records one audited call and hands its response back.
pub async fn record(
    metrics: &Metrics,
    identity: Option<&Identity>,
    method: &Method,
    route: &str,
    object: String,
    response: Response,
) -> Response {
    let (object, response) = if object.is_empty() {
        created_id(response).await
    } else {
        (object, response)
    };
    let outcome = response.status().as_u16();
    // The route template, never the raw path: actions are as many as the routes.
    let action = format!("{method} {route}");
    let identity = identity.map_or("anonymous", |i| i.name.as_str());
    tracing::info!(target: "audit", identity, action = %action, object = %object, outcome, "audit");
    metrics.audit(&action, outcome);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_capped_and_printable() {
        assert_eq!(capped("abc"), "abc");
        assert_eq!(capped("a\nb"), "a?b");
        let long = "é".repeat(100);
        let c = capped(&long);
        assert!(c.len() <= MAX_OBJECT + '…'.len_utf8(), "{}", c.len());
        assert!(c.ends_with('…'));
    }
}
