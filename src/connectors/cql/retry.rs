//! Which failures of the scylla driver may go away by themselves.

use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

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
}
