//! Request bodies in JSON or YAML, chosen by `Content-Type`, with errors that name the field.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Bytes, HttpBody as _};
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;

use super::error::ApiError;
use crate::config::yaml;

/// A body accepted as `application/json` or as YAML
/// (`application/yaml`, `application/x-yaml`, `text/yaml`): operators post their job files as
/// they are.
pub struct Payload<T>(pub T);

/// `server.request_body_limit` in bytes, put in every request's extensions by the router, so
/// that a body refused for its length says which setting refused it and at what bound (axum's
/// own rejection says neither).
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// `server.request_body_budget`: the bytes of request bodies the daemon may hold at once,
/// summed over every request. Each body is buffered whole before it is parsed, so without it
/// 1,024 connections × `request_body_limit` could ask for 16 GiB.
#[derive(Clone)]
pub struct BodyBudget {
    /// One permit per KiB of the budget.
    kib: Arc<Semaphore>,
    budget: u64,
    limit: u64,
}

/// How long a request waits for room in the budget before it is answered 503.
const BUDGET_WAIT: Duration = Duration::from_secs(5);

impl BodyBudget {
    /// A budget of `budget` bytes for bodies of at most `limit` bytes each.
    pub fn new(budget: u64, limit: u64) -> Self {
        let permits = usize::try_from(budget.div_ceil(1024))
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            kib: Arc::new(Semaphore::new(permits)),
            budget,
            limit,
        }
    }

    /// The KiB a request's body is reserved: its declared length (at most the per-body
    /// limit, beyond which it is refused 413 anyway), or the whole limit when it does not
    /// declare one (chunked). Zero when it has no body.
    fn reserve_of(&self, request: &Request) -> u32 {
        let hint = request.body().size_hint();
        let bytes = match hint.exact() {
            Some(n) => n,
            None if hint.upper() == Some(0) => 0,
            None => self.limit,
        }
        .min(self.limit);
        u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
    }
}

/// The middleware holding the budget: a request's body bytes are reserved before its handler
/// reads them and released when its answer is made; a request that finds no room within
/// [`BUDGET_WAIT`] is answered 503 with `Retry-After`, and no byte of it is read.
pub async fn budget(State(budget): State<BodyBudget>, request: Request, next: Next) -> Response {
    // A component's bytes are streamed to disk as they arrive, never held whole; their bounds
    // are their own (`sstable_uploads`).
    let streamed = super::uploads::is_component_upload(&request);
    let kib = budget.reserve_of(&request);
    if streamed || kib == 0 {
        return next.run(request).await;
    }
    let permit =
        tokio::time::timeout(BUDGET_WAIT, budget.kib.clone().acquire_many_owned(kib)).await;
    let Ok(Ok(_permit)) = permit else {
        let mut response = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the daemon is holding as many request bodies as server.request_body_budget allows ({} bytes); retry later",
                budget.budget
            ),
        )
        .into_response();
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(BUDGET_WAIT.as_secs()),
        );
        return response;
    };
    next.run(request).await
}

/// How a body is written.
#[derive(Clone, Copy)]
pub(crate) enum Format {
    Json,
    Yaml,
}

/// The body format named by `Content-Type` (JSON when absent, which only an empty body may
/// be: see [`format_of_body`]); 415 for anything else.
pub(crate) fn format_of(headers: &axum::http::HeaderMap) -> Result<Format, ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(Format::Json);
    };
    let media = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "application/json" | "" => Ok(Format::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => Ok(Format::Yaml),
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "unsupported Content-Type {other:?}, expected application/json or application/yaml"
            ),
        )),
    }
}

fn no_media_type() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "a request body needs a Content-Type: application/json or application/yaml",
    )
}

/// The body format of a request with body `bytes`: as [`format_of`], but a body without
/// `Content-Type` is refused with 415 — the shape of a request a web page can send to another
/// site without the browser asking that site first.
pub(crate) fn format_of_body(
    headers: &axum::http::HeaderMap,
    bytes: &[u8],
) -> Result<Format, ApiError> {
    if !bytes.is_empty() && !headers.contains_key(header::CONTENT_TYPE) {
        return Err(no_media_type());
    }
    format_of(headers)
}

/// The middleware that refuses, before any handler, a POST, PUT or PATCH whose headers
/// announce a body but no `Content-Type` (handlers that read a body check it again).
pub async fn require_media_type(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::Method;
    use axum::response::IntoResponse;
    let headers = request.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    // An SSTable component's bytes need no media type: Sidecar's clients send none.
    let raw_bytes = request.uri().path().starts_with(super::uploads::PREFIX);
    if matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    ) && has_body
        && !raw_bytes
        && !headers.contains_key(header::CONTENT_TYPE)
    {
        return no_media_type().into_response();
    }
    next.run(request).await
}

/// Parses `bytes` as `T`; errors start with `body:` and name the field path and line.
pub fn parse<T: DeserializeOwned>(bytes: &[u8], yaml_body: bool) -> Result<T, ApiError> {
    if yaml_body {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| ApiError::bad_request(format!("body: not UTF-8: {e}")))?;
        // As for JSON below: only a mapping is a body (a sequence would fill a struct by order).
        if matches!(
            yaml::from_str::<yaml_serde::Value>(text),
            Ok(value) if !value.is_mapping()
        ) {
            return Err(ApiError::bad_request(
                "body: expected a YAML mapping".to_string(),
            ));
        }
        return yaml::from_str(text).map_err(|e| {
            let (message, line) = yaml::describe_error(&e);
            let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
            ApiError::bad_request(format!("body: {message}{at}"))
        });
    }
    // serde reads a struct from a sequence of its fields in order, so `[false]` would be taken
    // for `{"enabled": false}`: every body of this API is an object, and is refused otherwise.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad_request(
            "body: expected a JSON object".to_string(),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = e.into_inner();
        let text = inner.to_string();
        // For an unknown field the path ends with that field, which the message names already.
        if text.starts_with("unknown field") {
            path = path
                .rsplit_once('.')
                .map_or(".".to_string(), |(parent, _)| parent.to_string());
        }
        let field = if path == "." {
            String::new()
        } else {
            format!("{path}: ")
        };
        ApiError::bad_request(format!(
            "body: {field}{} (line {})",
            strip_position(&text),
            inner.line()
        ))
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("body: {e}")))?;
    Ok(value)
}

fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i])
}

impl<S, T> FromRequest<S> for Payload<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let headers = req.headers().clone();
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        let format = format_of_body(&headers, &bytes)?;
        parse(&bytes, matches!(format, Format::Yaml)).map(Payload)
    }
}

/// A body taken as bytes (a job file, parsed by its handler), refused for its length with the
/// setting and the bound named, as [`Payload`] does.
pub struct RawBody(pub Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req.extensions().get::<BodyLimit>().copied();
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            match (rejection.status(), limit) {
                (StatusCode::PAYLOAD_TOO_LARGE, Some(BodyLimit(limit))) => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request body is larger than server.request_body_limit ({limit} bytes)"
                    ),
                ),
                (status, _) => ApiError::new(status, rejection.body_text()),
            }
        })?;
        Ok(RawBody(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Req {
        duration_seconds: u64,
        inner: Option<Inner>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        size: u32,
    }

    fn message(r: Result<Req, ApiError>) -> String {
        r.unwrap_err().message
    }

    #[test]
    fn a_body_is_an_object_never_a_sequence_of_fields() {
        // serde would fill the struct in field order from these.
        assert_eq!(
            message(parse(b"[1]", false)),
            "body: expected a JSON object"
        );
        assert_eq!(
            message(parse(b"- 1\n", true)),
            "body: expected a YAML mapping"
        );
        assert!(parse::<Req>(b" {\"durationSeconds\": 1}", false).is_ok());
        assert!(parse::<Req>(b"durationSeconds: 1\n", true).is_ok());
    }

    #[test]
    fn json_errors_name_the_field() {
        let m = message(parse(
            br#"{"durationSeconds": 1, "inner": {"size": "big"}}"#,
            false,
        ));
        assert_eq!(
            m,
            "body: inner.size: invalid type: string \"big\", expected u32 (line 1)"
        );
        let m = message(parse(br#"{"durationSecs": 1}"#, false));
        assert!(m.starts_with("body: unknown field `durationSecs`"), "{m}");
        let m = message(parse(b"{\"durationSeconds\": ", false));
        assert!(
            m.starts_with("body: durationSeconds: EOF while parsing"),
            "{m}"
        );
        let m = message(parse(br#"{"durationSeconds": 1} trailing"#, false));
        assert!(m.contains("trailing characters"), "{m}");
    }

    #[test]
    fn yaml_errors_name_the_field_and_line() {
        let m = message(parse(b"durationSeconds: 1\ninner:\n  size: big\n", true));
        assert_eq!(
            m,
            "body: inner.size: invalid type: string \"big\", expected u32 (line 3)"
        );
        let ok: Req = parse(b"durationSeconds: 2\n", true).unwrap();
        assert_eq!(ok.duration_seconds, 2);
    }
}
