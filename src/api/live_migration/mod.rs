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
            E::InvalidRequest(_)
            | E::AlreadyCompleted
            | E::MigrationCompleted
            | E::NotCompleted { .. }
            | E::NoMoreFiles
            | E::NodeRunning { .. } => StatusCode::BAD_REQUEST,
            E::StillInMap { .. } => StatusCode::FORBIDDEN,
            E::Path(PathError::Invalid(_)) => StatusCode::BAD_REQUEST,
            E::Path(PathError::Outside(_)) => StatusCode::FORBIDDEN,
            E::Path(PathError::NotFound(_))
            | E::FileVanished
            | E::NotDestination
            | E::NoSuchTask { .. } => StatusCode::NOT_FOUND,
            E::CopyTaskActive { .. } | E::VerificationTaskActive { .. } => StatusCode::CONFLICT,
            E::TooManyFileRequests { .. } | E::TooManyListings { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
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
            | E::SourceCompleted
            | E::FilesListMismatch
            | E::DigestMismatch
            | E::Invalid(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{JobError, JobState};

    #[test]
    fn engine_errors_get_their_status() {
        let status = |e: LiveMigrationError| ApiError::from(e).status.as_u16();
        assert_eq!(status(LiveMigrationError::InvalidRequest("x".into())), 400);
        assert_eq!(status(LiveMigrationError::AlreadyCompleted), 400);
        let running = LiveMigrationError::NodeRunning {
            address: "127.0.0.1:9042".into(),
        };
        assert_eq!(status(running), 400);
        assert_eq!(status(PathError::Outside("x".into()).into()), 403);
        assert_eq!(status(LiveMigrationError::FileVanished), 404);
        // Sidecar: a file request to a COMPLETED source is a bad request.
        assert_eq!(status(LiveMigrationError::NoMoreFiles), 400);
        let name = || "10.0.0.1".to_string();
        assert_eq!(status(LiveMigrationError::StillInMap { name: name() }), 403);
        assert_eq!(
            status(LiveMigrationError::NotCompleted { name: name() }),
            400
        );
        let active = LiveMigrationError::CopyTaskActive {
            noun: "verification task",
            id: "t".into(),
            state: JobState::Running,
        };
        assert_eq!(status(active), 409);
        let active = LiveMigrationError::VerificationTaskActive {
            noun: "data-copy task",
            id: "t".into(),
            state: JobState::Running,
        };
        assert_eq!(status(active), 409);
        assert_eq!(status(LiveMigrationError::MigrationCompleted), 400);
        assert_eq!(
            status(LiveMigrationError::TooManyFileRequests { limit: 4 }),
            503
        );
        assert_eq!(status(JobError::ShuttingDown.into()), 503);
        assert_eq!(status(LiveMigrationError::Pattern("x".into())), 500);
    }
}
