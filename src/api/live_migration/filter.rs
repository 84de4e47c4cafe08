//! The request filter of the live-migration routes.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::livemigration::serve::Need;

const PREFIX: &str = "/api/v1/live-migration";

/// What a live-migration path needs from this node; `None` for other paths.
fn need_of(path: &str) -> Option<Need> {
    let rest = path.strip_prefix(PREFIX)?;
    // `/files-digest` answers on both sides: a destination compares its own with its source's.
    Some(if rest == "/files" || rest.starts_with("/files/") {
        Need::Source
    } else if rest.starts_with("/data-copy-tasks") || rest.starts_with("/files-verification-tasks")
    {
        Need::Destination
    } else {
        Need::Either
    })
}

/// The request filter: every live-migration route answers 404 unless live migration is
/// enabled and this node is in `migration_map` with the route's role. It runs before
/// authentication, so a disabled route answers 404 whatever the credentials; with `auth`
/// configured that 404 is the one an unknown path gets, so callers cannot tell whether live
/// migration is configured here. Without `auth` every caller may do everything, and the 404
/// says why, for the operator.
pub async fn filter(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let Some(need) = need_of(path) else {
        return next.run(request).await;
    };
    if state.live.allows(need) {
        next.run(request).await
    } else if state.config.auth.is_enabled() {
        super::super::error::not_found(request.uri().clone())
            .await
            .into_response()
    } else {
        ApiError::not_found(format!(
            "{path}: live migration is not enabled on this node, or this node is not a {} in live_migration.migration_map",
            need.name()
        ))
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_need_their_role() {
        assert_eq!(need_of("/api/v1/live-migration/files"), Some(Need::Source));
        assert_eq!(
            need_of("/api/v1/live-migration/files/data/0/x"),
            Some(Need::Source)
        );
        assert_eq!(
            need_of("/api/v1/live-migration/files-digest"),
            Some(Need::Either)
        );
        assert_eq!(need_of("/api/v1/live-migration/status"), Some(Need::Either));
        assert_eq!(
            need_of("/api/v1/live-migration/data-copy-tasks/1"),
            Some(Need::Destination)
        );
        assert_eq!(
            need_of("/api/v1/live-migration/files-verification-tasks"),
            Some(Need::Destination)
        );
        assert_eq!(need_of("/api/v1/admin/live-migration"), None);
    }
}
