//! Authentication and authorization of every request: who is calling (a bearer token or a
//! verified client certificate) and whether the route's role is among theirs.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::auth::{ClientCertNames, Identity, Role, identify_certificate, identify_token};

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health: nothing when `auth.health_open`, else `reader`.
    Health,
    /// A caller holding this role.
    Role(Role),
}

/// The one table of what each route (method and axum route template) needs. A route missing
/// here needs `admin` (deny by default), and a test fails until it is added.
pub fn required(method: &Method, route: &str) -> Option<Access> {
    use Role::*;
    const LM: &str = "/api/v1/live-migration";
    let role = match (method.as_str(), route) {
        ("GET", "/api/v1/__health" | "/api/v1/cassandra/native/__health") => {
            return Some(Access::Health);
        }
        (
            "GET",
            "/metrics"
            | "/api/v1/jobs"
            | "/api/v1/jobs/{id}"
            | "/api/v1/migrations"
            | "/api/v1/migrations/{id}"
            | "/api/v1/migrations/{id}/savepoints"
            | "/api/v1/validations"
            | "/api/v1/validations/{id}"
            | "/api/v1/validations/{id}/report",
        ) => Reader,
        (
            "POST",
            "/api/v1/jobs/{id}/cancel"
            | "/api/v1/migrations"
            | "/api/v1/migrations/{id}/cancel"
            | "/api/v1/migrations/{id}/resume"
            | "/api/v1/validations"
            | "/api/v1/validations/{id}/cancel"
            | "/api/v1/diagnostics/jobs",
        ) => Operator,
        ("DELETE", "/api/v1/jobs/{id}") => Operator,
        ("GET", r) if r.starts_with(LM) => match &r[LM.len()..] {
            "/files" | "/files/{dirType}/{dirIndex}/{*path}" | "/files-digest" => Peer,
            "/status"
            | "/data-copy-tasks"
            | "/data-copy-tasks/{taskId}"
            | "/files-verification-tasks"
            | "/files-verification-tasks/{taskId}" => Reader,
            _ => return None,
        },
        ("POST" | "PATCH", r) if r.starts_with(LM) => match &r[LM.len()..] {
            "/data-copy-tasks"
            | "/data-copy-tasks/{taskId}"
            | "/files-verification-tasks"
            | "/files-verification-tasks/{taskId}" => Operator,
            "/status" if method == Method::POST => Admin,
            _ => return None,
        },
        ("DELETE", "/api/v1/live-migration/status") => Admin,
        ("GET", "/api/v1/admin/live-migration") => Reader,
        ("PUT", "/api/v1/admin/live-migration") => Admin,
        _ => return None,
    };
    Some(Access::Role(role))
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"drover\""),
    );
    response
}

/// The middleware. It sits behind the live-migration filter, so a disabled live-migration
/// route answers 404 to anyone, and never tells an unauthenticated caller that it exists.
pub async fn authorize(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let auth = &state.config.auth;
    if !auth.is_enabled() {
        return next.run(request).await;
    }
    // No matched route: the fallback answers 404 and reveals nothing.
    let Some(route) = request.extensions().get::<MatchedPath>().cloned() else {
        return next.run(request).await;
    };
    let access = required(request.method(), route.as_str()).unwrap_or(Access::Role(Role::Admin));
    let role = match access {
        Access::Health if auth.health_open => return next.run(request).await,
        Access::Health => Role::Reader,
        Access::Role(role) => role,
    };

    let identity = match request.headers().get(header::AUTHORIZATION) {
        Some(value) => {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match token.and_then(|t| identify_token(auth, t)) {
                Some(identity) => identity,
                None => return unauthorized("the bearer token is not valid"),
            }
        }
        None => match request
            .extensions()
            .get::<ClientCertNames>()
            .and_then(|names| identify_certificate(auth, names))
        {
            Some(identity) => identity,
            None => {
                return unauthorized(
                    "credentials required: Authorization: Bearer <token> or a known client certificate",
                );
            }
        },
    };
    if !identity.has(role) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} {}: {} does not hold the {} role",
                request.method(),
                route.as_str(),
                identity.name,
                role.name()
            ),
        )
        .into_response();
    }
    request.extensions_mut().insert::<Identity>(identity);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route served has its own entry in the table: a new route fails here until its
    /// role is chosen.
    #[test]
    fn every_route_has_a_role() {
        let doc = crate::api::routes().split_for_parts().1;
        let mut count = 0;
        for (path, item) in &doc.paths.paths {
            for (method, op) in [
                (Method::GET, &item.get),
                (Method::POST, &item.post),
                (Method::PUT, &item.put),
                (Method::PATCH, &item.patch),
                (Method::DELETE, &item.delete),
            ] {
                if op.is_some() {
                    count += 1;
                    assert!(
                        required(&method, path).is_some(),
                        "{method} {path} has no role in api::auth::required"
                    );
                }
            }
        }
        assert!(count >= 35, "{count} operations");
    }

    #[test]
    fn roles_of_some_routes() {
        let r = |m: Method, p: &str| required(&m, p);
        assert_eq!(
            r(
                Method::GET,
                "/api/v1/live-migration/files/{dirType}/{dirIndex}/{*path}"
            ),
            Some(Access::Role(Role::Peer))
        );
        assert_eq!(
            r(Method::PUT, "/api/v1/admin/live-migration"),
            Some(Access::Role(Role::Admin))
        );
        assert_eq!(
            r(Method::DELETE, "/api/v1/live-migration/status"),
            Some(Access::Role(Role::Admin))
        );
        assert_eq!(r(Method::PATCH, "/api/v1/live-migration/status"), None);
        assert_eq!(r(Method::GET, "/metrics"), Some(Access::Role(Role::Reader)));
    }
}
