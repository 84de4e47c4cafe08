//! The one error type of the HTTP edge, and the guarantee that every error response — ours,
//! axum's, or a tower layer's — has the JSON shape `{"status", "code", "message"}`.

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::diagnostics::DiagnosticError;
use crate::jobs::JobError;
use crate::savepoints::SavepointError;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The HTTP reason phrase, e.g. `Bad Request`.
    #[schema(example = "Bad Request")]
    pub status: String,
    /// The HTTP status code.
    #[schema(example = 400)]
    pub code: u16,
    /// What went wrong, for a human.
    #[schema(example = "body: durationSeconds: invalid type: string \"x\", expected u64")]
    pub message: String,
}

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = match crate::answer::cap(&message) {
            std::borrow::Cow::Borrowed(_) => message,
            std::borrow::Cow::Owned(capped) => capped,
        };
        Self { status, message }
    }

    /// An error whose message may be up to `limit` bytes (cut there, on a character
    /// boundary): for messages the daemon composed from what it found rather than echoed.
    pub fn with_limit(status: StatusCode, message: String, limit: usize) -> Self {
        if message.len() <= limit {
            return Self { status, message };
        }
        let mut end = limit;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let message = format!("{}… ({} bytes)", &message[..end], message.len());
        Self { status, message }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

fn body(status: StatusCode, message: String) -> ErrorBody {
    ErrorBody {
        status: match status.as_u16() {
            super::uploads::CHECKSUM_MISMATCH => "Checksum Mismatch",
            _ => status.canonical_reason().unwrap_or("Unknown"),
        }
        .to_string(),
        code: status.as_u16(),
        message,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = self.status.as_u16(), message = %self.message, "request failed");
        }
        (self.status, Json(body(self.status, self.message))).into_response()
    }
}

impl From<JobError> for ApiError {
    fn from(err: JobError) -> Self {
        let status = match &err {
            JobError::NotFound { .. } => StatusCode::NOT_FOUND,
            JobError::Ambiguous { .. } => StatusCode::BAD_REQUEST,
            JobError::WrongState { .. }
            | JobError::NoJobFile { .. }
            | JobError::NotResumable { .. } => StatusCode::CONFLICT,
            JobError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            JobError::Launch(e) | JobError::Relaunch(e) if e.is_in_use() || e.is_already_done() => {
                StatusCode::CONFLICT
            }
            JobError::Storage { .. }
            | JobError::KeepJobFile(_)
            | JobError::UnreadableSpec { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            // The client must fix the job file or the schemas; otherwise a database could not
            // be reached.
            JobError::Launch(e) | JobError::Relaunch(e) if e.is_config_problem() => {
                StatusCode::BAD_REQUEST
            }
            JobError::Launch(_) | JobError::Relaunch(_) => StatusCode::BAD_GATEWAY,
        };
        match &err {
            // Every problem of a target table with the CQL that fixes it: built from both
            // schemas, not echoed from the request, and useless cut in the middle.
            JobError::Launch(e) | JobError::Relaunch(e) if e.is_schema_mismatch() => {
                ApiError::with_limit(status, err.to_string(), MAX_SCHEMA_REPORT)
            }
            _ => ApiError::new(status, err.to_string()),
        }
    }
}

/// The longest schema report told in an error message (a table of some hundred columns).
const MAX_SCHEMA_REPORT: usize = 64 * 1024;

impl From<SavepointError> for ApiError {
    fn from(err: SavepointError) -> Self {
        let status = match &err {
            SavepointError::Config(_) => StatusCode::BAD_REQUEST,
            SavepointError::InUse { .. } => StatusCode::CONFLICT,
            SavepointError::Remote { .. } => StatusCode::BAD_GATEWAY,
            SavepointError::Io { .. } | SavepointError::Corrupt { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        ApiError::new(status, err.to_string())
    }
}

impl From<DiagnosticError> for ApiError {
    fn from(err: DiagnosticError) -> Self {
        match err {
            DiagnosticError::Disabled => ApiError::not_found(err.to_string()),
            DiagnosticError::Duration(_) | DiagnosticError::FailWith(_) => {
                ApiError::bad_request(format!("body: {err}"))
            }
            DiagnosticError::Jobs(e) => e.into(),
        }
    }
}

/// Fallback for paths no route matches.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no route for {}",
        crate::answer::shown_url(uri.path())
    ))
}

/// Fallback for a known path asked with a method it does not have.
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{method} is not allowed on {}",
            crate::answer::shown_url(uri.path())
        ),
    )
}

/// The largest non-JSON error body turned into a message; longer ones are cut.
const MAX_PLAIN_ERROR: usize = 1024;

/// Rewrites error responses that are not JSON (produced by axum extractors or tower layers such
/// as the timeout) into the JSON error shape, keeping their text as the message.
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // The console's own error pages are for a browser, and already say what went wrong.
    let is_console_page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if !(status.is_client_error() || status.is_server_error()) || is_json || is_console_page {
        return response;
    }
    let (mut parts, original) = response.into_parts();
    let text = match axum::body::to_bytes(original, MAX_PLAIN_ERROR).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        default_message(status)
    } else {
        text
    };
    let json = serde_json::to_vec(&body(status, message)).expect("error bodies serialize");
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(json))
}

fn default_message(status: StatusCode) -> String {
    match status {
        StatusCode::REQUEST_TIMEOUT => "the request took longer than server.request_timeout".into(),
        StatusCode::PAYLOAD_TOO_LARGE => {
            "the request body is larger than server.request_body_limit".into()
        }
        other => other
            .canonical_reason()
            .unwrap_or("request failed")
            .to_string(),
    }
}
