//! The request filter of the live-migration routes.

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::livemigration::serve::Need;

const PREFIX: &str = "/api/v1/live-migration";

/// What a live-migration request needs from this node; `None` for other paths. As Sidecar:
/// a file (or its digest) only on a source, the file list and `/status` on either side,
/// `DELETE /status` once the node has left the map.
fn need_of(method: &Method, path: &str) -> Option<Need> {
    let rest = path.strip_prefix(PREFIX)?;
    // `/files-digest` answers on both sides: a destination compares its own with its source's.
    Some(if rest.starts_with("/files/") || rest == "/files-batch" {
        Need::Source
    } else if rest.starts_with("/data-copy-tasks") || rest.starts_with("/files-verification-tasks")
    {
        Need::Destination
    } else if rest == "/status" && method == Method::DELETE {
        Need::Cleanup
    } else {
        Need::Either
    })
}

/// The request filter: every live-migration route answers 404 unless live migration is
/// enabled and this node is in `migration_map` with the route's role (see [`need_of`]), or
/// when the request's `Host` names another node of the map (Sidecar, which finds its
/// instance by that header, would not serve it; the role itself always comes from this
/// daemon's own names, never from a request). It runs before
/// authentication, so a disabled route answers 404 whatever the credentials; with `auth`
/// configured that 404 is the one an unknown path gets, so callers cannot tell whether live
/// migration is configured here. Without `auth` every caller may do everything, and the 404
/// says why, for the operator.
pub async fn filter(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let Some(need) = need_of(request.method(), path) else {
        return next.run(request).await;
    };
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let elsewhere = host.is_some_and(|h| state.live.names_another_node(h));
    if elsewhere && !state.config.auth.is_enabled() {
        return ApiError::not_found(format!(
            "{path}: the Host {:?} names another node of live_migration.migration_map than this one ({})",
            host.unwrap_or_default(),
            state.live.name()
        ))
        .into_response();
    }
    if !elsewhere && state.live.allows(need) {
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
        let get = |path| need_of(&Method::GET, path);
        // Sidecar lists files on a destination too; a file only on a source.
        assert_eq!(get("/api/v1/live-migration/files"), Some(Need::Either));
        assert_eq!(
            need_of(&Method::POST, "/api/v1/live-migration/files-batch"),
            Some(Need::Source)
        );
        assert_eq!(
            get("/api/v1/live-migration/files/data/0/x"),
            Some(Need::Source)
        );
        assert_eq!(
            get("/api/v1/live-migration/files-digest"),
            Some(Need::Either)
        );
        assert_eq!(get("/api/v1/live-migration/status"), Some(Need::Either));
        assert_eq!(
            need_of(&Method::POST, "/api/v1/live-migration/status"),
            Some(Need::Either)
        );
        assert_eq!(
            need_of(&Method::DELETE, "/api/v1/live-migration/status"),
            Some(Need::Cleanup)
        );
        assert_eq!(
            get("/api/v1/live-migration/data-copy-tasks/1"),
            Some(Need::Destination)
        );
        assert_eq!(
            get("/api/v1/live-migration/files-verification-tasks"),
            Some(Need::Destination)
        );
        assert_eq!(get("/api/v1/admin/live-migration"), None);
    }
}
