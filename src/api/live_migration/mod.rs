//! `/api/v1/live-migration`: Cassandra Sidecar's live instance migration routes (same paths,
//! JSON field names and states), behind a filter that hides them unless live migration is
//! enabled and this node has the role a route needs.
//!
//! The handlers only translate: the engine (`crate::livemigration`) decides, and its one
//! error type becomes a status here.

pub mod files;
mod filter;
pub mod status;
pub mod tasks;

pub use filter::filter;

use axum::http::StatusCode;

use super::error::ApiError;
use crate::livemigration::LiveMigrationError;
use crate::livemigration::files::PathError;

impl From<LiveMigrationError> for ApiError {
    fn from(e: LiveMigrationError) -> Self {
        use LiveMigrationError as E;
        let status = match e {
            E::Jobs(jobs) => return jobs.into(),
            E::InvalidRequest(_) | E::AlreadyCompleted | E::NodeRunning { .. } => {
                StatusCode::BAD_REQUEST
            }
            E::Path(PathError::Invalid(_)) => StatusCode::BAD_REQUEST,
            E::Path(PathError::Outside(_)) => StatusCode::FORBIDDEN,
            E::Path(PathError::NotFound(_))
            | E::FileVanished
            | E::NotDestination
            | E::NoSuchTask { .. } => StatusCode::NOT_FOUND,
            E::NoMoreFiles | E::CopyTaskActive { .. } => StatusCode::CONFLICT,
            E::TooManyFileRequests { .. } => StatusCode::SERVICE_UNAVAILABLE,
            E::Config(_)
            | E::Pattern(_)
            | E::State { .. }
            | E::Listing(_)
            | E::ReadFile(_)
            | E::Peer(_)
            | E::Local { .. }
            | E::Gone(_)
            | E::Digest(_)
            | E::Cancelled
            | E::Invalid(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}
