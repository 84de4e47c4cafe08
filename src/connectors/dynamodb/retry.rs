//! The SDK's errors, classified for the engine's retries.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::connectors::seam::{RequestError, Retry};

/// A failed DynamoDB request.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct DynamoError {
    /// What failed and why, with the server's error code.
    pub message: String,
    /// Whether trying again can help.
    pub retry: Retry,
    /// The server's error code (`ResourceNotFoundException`, ...), when it sent one.
    pub code: Option<String>,
    /// The job asks for something that cannot work (a missing table, a refused request, a
    /// key that differs): the operator must change the job, not wait for the server.
    pub invalid: bool,
    /// The server did not answer in time (it may be slow rather than down).
    pub timed_out: bool,
}

impl crate::connectors::seam::ConnectorError for DynamoError {
    fn is_config_problem(&self) -> bool {
        self.invalid
    }
}

impl RequestError for DynamoError {
    fn retry(&self) -> Retry {
        self.retry
    }
}

/// Error codes that go away by themselves: throttling and server trouble.
const TRANSIENT: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "InternalServerError",
    "InternalFailure",
    "ServiceUnavailable",
    "LimitExceededException",
    "TransactionInProgressException",
];

impl DynamoError {
    /// Classifies an SDK error of the operation `what` (`"scan of segment 3"`, ...).
    pub fn from_sdk<E>(what: &str, e: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let (retry, code, detail) = match &e {
            SdkError::ServiceError(s) => {
                let err = s.err();
                let code = err.code().map(str::to_string);
                let retry = match code.as_deref() {
                    Some(c) if TRANSIENT.contains(&c) => Retry::Safe,
                    _ => Retry::Never,
                };
                let detail = match (code.as_deref(), err.message()) {
                    (Some(code), message) => {
                        format!("{code}: {}", message.unwrap_or("no message"))
                    }
                    // Not a DynamoDB error document (a crashed server's or a proxy's HTML
                    // page): the HTTP status is all there is to tell.
                    (None, message) => format!(
                        "HTTP {} without an error code: {}",
                        s.raw().status().as_u16(),
                        message.unwrap_or("no message")
                    ),
                };
                (retry, code, detail)
            }
            // Not sent: the connection could not be made.
            SdkError::DispatchFailure(d) if d.is_io() || d.is_timeout() => (
                Retry::Safe,
                None,
                format!("cannot reach the server: {}", source_chain(&e)),
            ),
            SdkError::DispatchFailure(_) => (
                Retry::Safe,
                None,
                format!("request not sent: {}", source_chain(&e)),
            ),
            SdkError::TimeoutError(_) => {
                (Retry::IfIdempotent, None, "no answer in time".to_string())
            }
            SdkError::ResponseError(_) => (
                Retry::IfIdempotent,
                None,
                format!("unreadable answer: {}", source_chain(&e)),
            ),
            _ => (Retry::Never, None, source_chain(&e)),
        };
        let invalid = matches!(
            code.as_deref(),
            Some("ResourceNotFoundException" | "ValidationException")
        );
        Self {
            message: format!("{what}: {detail}"),
            retry,
            code,
            invalid,
            timed_out: matches!(e, SdkError::TimeoutError(_)),
        }
    }

    /// An error found by drover itself (a check, a limit), never retried.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry: Retry::Never,
            code: None,
            invalid: true,
            timed_out: false,
        }
    }

    /// The error as met on one side of a job (`"source"`, `"target"`).
    pub fn on(mut self, side: &str) -> Self {
        self.message = format!("{side}: {}", self.message);
        self
    }
}

/// The error and its causes on one line (the SDK's top-level messages say little).
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::error::{ConnectorError, SdkError};
    use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemError;

    use super::*;

    type WriteError = SdkError<BatchWriteItemError, HttpResponse>;

    #[test]
    fn an_answer_without_an_error_code_names_its_http_status() {
        // moto's answer when it crashes on a request: an HTML page, no DynamoDB error document.
        let page = "<!doctype html><title>500 Internal Server Error</title>";
        let raw = HttpResponse::new(500.try_into().unwrap(), page.into());
        let err =
            BatchWriteItemError::generic(aws_sdk_dynamodb::error::ErrorMetadata::builder().build());
        let e = DynamoError::from_sdk("scan of segment 2 of 8", SdkError::service_error(err, raw));
        assert_eq!(
            e.message,
            "scan of segment 2 of 8: HTTP 500 without an error code: no message"
        );
        assert_eq!((e.retry, e.code.as_deref()), (Retry::Never, None));
    }

    #[test]
    fn a_refused_connection_is_always_retried() {
        // A target that is down or restarting: nothing was sent.
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e: WriteError = SdkError::dispatch_failure(ConnectorError::io(Box::new(io)));
        let e = DynamoError::from_sdk("BatchWriteItem to \"t\"", e);
        assert_eq!(e.retry, Retry::Safe, "{e}");
        assert!(!e.invalid, "{e}");
        assert!(
            e.message.contains("cannot reach the server") && e.message.contains("refused"),
            "{e}"
        );
    }

    #[test]
    fn no_answer_in_time_is_retried_when_the_request_is_idempotent() {
        // A server that hangs (stopped, overloaded): the request may have been applied, which
        // a put of a whole item or a scan page does not mind.
        let e: WriteError = SdkError::timeout_error("operation attempt timeout");
        let e = DynamoError::from_sdk("BatchWriteItem to \"t\"", e);
        assert_eq!(e.retry, Retry::IfIdempotent, "{e}");
        assert!(!e.invalid);
        assert!(e.message.contains("no answer in time"), "{e}");
        assert!(e.timed_out);
        // A connection that cannot even be opened in time was never sent.
        let connect = ConnectorError::timeout("connect timeout".into());
        let e: WriteError = SdkError::dispatch_failure(connect);
        assert_eq!(
            DynamoError::from_sdk("scan of segment 1 of 10", e).retry,
            Retry::Safe
        );
    }
}
