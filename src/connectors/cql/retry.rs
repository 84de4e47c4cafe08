//! Which failures of the scylla driver may go away by themselves.

use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::policies::retry::{
    DefaultRetryPolicy, RequestInfo, RetryDecision, RetryPolicy, RetrySession,
};

use crate::connectors::seam::{RequestError, Retry};

impl RequestError for ExecutionError {
    /// Writes that are not idempotent (counter updates) are retried only when the error
    /// proves they were not applied.
    fn retry(&self) -> Retry {
        match self {
            ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => Retry::Safe,
            ExecutionError::RequestTimeout(_) => Retry::IfIdempotent,
            ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => match db {
                DbError::Unavailable { .. }
                | DbError::Overloaded
                | DbError::IsBootstrapping
                | DbError::RateLimitReached { .. } => Retry::Safe,
                // A replica failing a read is most often a node too busy to answer (the reason
                // is "UNKNOWN"); a read changes nothing, so it is tried again like a timeout.
                DbError::ReadTimeout { .. }
                | DbError::ReadFailure { .. }
                | DbError::WriteTimeout { .. }
                | DbError::ServerError
                | DbError::TruncateError => Retry::IfIdempotent,
                _ => Retry::Never,
            },
            ExecutionError::LastAttemptError(
                RequestAttemptError::BrokenConnectionError(_)
                | RequestAttemptError::UnableToAllocStreamId,
            ) => Retry::IfIdempotent,
            _ => Retry::Never,
        }
    }

    /// Too few replicas up: the nodes that are down must come back (or the consistency level
    /// be lowered) for the request to pass.
    fn waiting_for(&self) -> Option<String> {
        match self {
            ExecutionError::LastAttemptError(RequestAttemptError::DbError(
                DbError::Unavailable {
                    consistency,
                    required,
                    alive,
                },
                _,
            )) => Some(format!(
                "not enough replicas up for {} ({required} needed, {alive} up): waiting for nodes to come back",
                level_name(*consistency)
            )),
            _ => None,
        }
    }
}

/// The driver's default retries, except that a request refused as unavailable is not sent on
/// to the next node of its plan. With replicas down, the next nodes of a plan are those down
/// ones (the driver tries them last): the request would end on their broken connections
/// ("no connections in the pool") instead of the coordinator's answer, too few replicas up,
/// which drover's own retries report in the job's phase ([`RequestError::waiting_for`]) and
/// retry with backoff.
#[derive(Debug)]
pub struct ReportUnavailable;

impl RetryPolicy for ReportUnavailable {
    fn new_session(&self) -> Box<dyn RetrySession> {
        Box::new(ReportUnavailableSession(DefaultRetryPolicy.new_session()))
    }
}

struct ReportUnavailableSession(Box<dyn RetrySession>);

impl RetrySession for ReportUnavailableSession {
    fn decide_should_retry(&mut self, request_info: RequestInfo<'_>) -> RetryDecision {
        match request_info.error {
            RequestAttemptError::DbError(DbError::Unavailable { .. }, _) => {
                RetryDecision::DontRetry
            }
            _ => self.0.decide_should_retry(request_info),
        }
    }

    fn reset(&mut self) {
        self.0.reset();
    }
}

/// A consistency level as job files and Cassandra name it (`LOCAL_QUORUM`), not as the driver
/// prints it (`LocalQuorum`).
fn level_name(c: scylla::statement::Consistency) -> String {
    let mut out = String::new();
    for (i, ch) in format!("{c:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

/// The retry policy of requests whose answer depends on when they were sent: none in the
/// driver, so that every attempt is one drover sent and timed itself.
///
/// A TTL is relative to a moment. A write's TTL counts from when a replica applies it, and
/// drover shortens a source TTL by the time since the row was read each time it sends the
/// write ([`Write::values_now`](super::copy::Write::values_now)); the driver's own retry would
/// resend the same TTL later (after a node stopped mid-request, seconds later), and the copy
/// would outlive its source by that much. A scan's TTLs count from when its coordinator began
/// the read, and drover takes that as when it sent the request; a retry inside the driver
/// (a read timeout, 10 s for a range, then the next replica) would be counted from later, and
/// the copy would expire that much early. drover's retries send both again, timed anew.
pub(crate) fn no_driver_retry() -> std::sync::Arc<dyn RetryPolicy> {
    std::sync::Arc::new(scylla::policies::retry::FallthroughRetryPolicy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_few_replicas_say_what_the_job_waits_for() {
        let e = ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Unavailable {
                consistency: scylla::statement::Consistency::LocalQuorum,
                required: 2,
                alive: 1,
            },
            "Cannot achieve consistency level LOCAL_QUORUM".into(),
        ));
        assert_eq!(e.retry(), Retry::Safe);
        assert_eq!(
            e.waiting_for().as_deref(),
            Some(
                "not enough replicas up for LOCAL_QUORUM (2 needed, 1 up): waiting for nodes to come back"
            )
        );
    }
}
