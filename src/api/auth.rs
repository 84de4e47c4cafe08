//! Authentication and authorization of every request: who is calling (a bearer token, a JWT
//! or a verified client certificate), whether they are within their rate, and whether the
//! route's role is among theirs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::api::audit;
use crate::api::error::ApiError;
use crate::auth::rate::{Caller, Limiter};
use crate::auth::{Authenticator, ClientCertNames, Identity, Role};
use crate::metrics::Metrics;

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health: nothing when `auth.health_open`, else `reader`.
    Health,
    /// A caller holding this role.
    Role(Role),
    /// A caller holding either role.
    Either(Role, Role),
    /// Anyone: the console's sign-in page and its style sheet and script.
    Open,
}

/// The one table of what each route (method and axum route template) needs. A route missing
/// here needs `admin` (deny by default), and a test fails until it is added.
pub fn required(method: &Method, route: &str) -> Option<Access> {
    use Role::*;
    const LM: &str = "/api/v1/live-migration";
    // axum answers HEAD on every GET route: it needs what the GET needs.
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    let role = match (method.as_str(), route) {
        (
            "GET",
            "/api/v1/__health" | "/api/v1/cassandra/native/__health" | "/api/v1/cassandra/__health",
        ) => {
            return Some(Access::Health);
        }
        // A Sidecar client's first questions (Cassandra Analytics' writer and reader): the
        // same callers as the bulk routes they lead to.
        (
            "GET",
            "/api/v1/cassandra/settings"
            | "/api/v1/cassandra/ring"
            | "/api/v1/cassandra/ring/keyspaces/{keyspace}"
            | "/api/v1/keyspaces/{keyspace}/schema"
            | "/api/v1/keyspaces/{keyspace}/token-range-replicas"
            | "/api/v1/time-skew",
        ) => {
            return Some(Access::Either(Operator, Peer));
        }
        (
            "GET",
            "/metrics"
            | "/api/v1/jobs"
            | "/api/v1/jobs/{id}"
            | "/api/v1/jobs/{id}/events"
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
        // A bulk writer: an operator's client, or another drover with its peer credentials.
        (
            "PUT",
            "/api/v1/uploads/{uploadId}/keyspaces/{keyspace}/tables/{table}/components/{component}"
            | "/api/v1/uploads/{uploadId}/keyspaces/{keyspace}/tables/{table}/import",
        )
        | ("DELETE", "/api/v1/uploads/{uploadId}") => {
            return Some(Access::Either(Operator, Peer));
        }
        // A bulk reader: an operator's client, or another drover with its peer credentials.
        (
            "PUT" | "GET" | "DELETE",
            "/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots/{snapshot}",
        )
        | (
            "GET",
            "/api/v1/keyspaces/{keyspace}/tables/{table}/snapshots/{snapshot}/components/{component}",
        ) => {
            return Some(Access::Either(Operator, Peer));
        }
        // A destination asks its source's status before every iteration, with its peer
        // credentials.
        ("GET", "/api/v1/live-migration/status") => return Some(Access::Either(Reader, Peer)),
        ("GET", r) if r.starts_with(LM) => match &r[LM.len()..] {
            "/files" | "/files/{dirType}/{dirIndex}/{*path}" | "/files-digest" => Peer,
            "/data-copy-tasks"
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
            // A destination's batch transfer, with its peer credentials.
            "/files-batch" if method == Method::POST => Peer,
            _ => return None,
        },
        ("DELETE", "/api/v1/live-migration/status") => Admin,
        // `/` only redirects to the console, which asks for a session itself.
        ("GET", "/" | "/ui/login" | "/ui/assets/{file}") | ("POST", "/ui/login" | "/ui/logout") => {
            return Some(Access::Open);
        }
        (
            "GET",
            "/ui" | "/ui/jobs" | "/ui/jobs/{id}" | "/ui/jobs/{id}/events" | "/ui/live-migration",
        ) => Reader,
        ("POST", "/ui/jobs/{id}/cancel" | "/ui/jobs/{id}/resume" | "/ui/jobs/{id}/delete") => {
            Operator
        }
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

fn too_many_requests(wait: Duration) -> Response {
    // Whole seconds, rounded up: `Retry-After: 0` would invite an immediate retry.
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many requests: over auth.rate_limit, retry in {seconds}s"),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// What the authorization middleware keeps across requests: the authenticator (whose token
/// file and keys follow their files), the rate limiter, and the metrics the audit counts into.
#[derive(Clone)]
pub struct Guard {
    auth: Arc<Authenticator>,
    sessions: Arc<crate::api::console::Sessions>,
    limiter: Option<Arc<Limiter>>,
    metrics: Arc<Metrics>,
}

impl Guard {
    /// The guard of `state`'s config.
    pub fn new(state: &AppState) -> Self {
        let auth = &state.config.auth;
        Self {
            auth: state.auth.clone(),
            sessions: state.sessions.clone(),
            limiter: auth.rate_limit.as_ref().map(|l| Arc::new(Limiter::new(l))),
            metrics: state.metrics.clone(),
        }
    }
}

/// Who the request's credentials say is calling: `Ok(None)` when it brings none, `Err` with
/// the reason when they prove nobody. A console page is also identified by its session
/// cookie, whose token is checked again on every request (a revoked token ends its sessions);
/// the API never reads the cookie, so no other site's page can make a browser call it.
fn identify(guard: &Guard, request: &Request, route: &str) -> Result<Option<Identity>, String> {
    if route.starts_with("/ui")
        && !request.headers().contains_key(header::AUTHORIZATION)
        && let Some(session) = guard.sessions.of_request(request.headers())
    {
        return guard
            .auth
            .identify_bearer(session.token())
            .map(Some)
            .map_err(|e| format!("the console session's token is no longer accepted: {e}"));
    }
    match request.headers().get(header::AUTHORIZATION) {
        Some(value) => {
            let token = value
                .to_str()
                .ok()
                .and_then(bearer_token)
                .ok_or_else(|| "the bearer token is not valid".to_string())?;
            guard.auth.identify_bearer(token).map(Some)
        }
        None => Ok(request
            .extensions()
            .get::<ClientCertNames>()
            .and_then(|names| guard.auth.identify_certificate(names))),
    }
}

/// The token of an `Authorization` value of the Bearer scheme, whose name is matched without
/// regard to case (RFC 9110 §11.1: `bearer x` is as valid as `Bearer x`).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The address a caller without proven credentials is counted by (one shared bucket when the
/// listener does not say the address).
fn address(request: &Request) -> String {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "anonymous".to_string(), |c| c.0.ip().to_string())
}

/// What becomes of a request.
enum Decision {
    /// Served, with its caller's identity (none when auth is off or the route is open).
    Serve(Option<Identity>),
    /// Refused with this response; the identity when one was proven.
    Refuse(Option<Identity>, Response),
}

/// Decides a request.
fn check(guard: &Guard, request: &Request, route: &str) -> Decision {
    let auth = guard.auth.config();
    let access = required(request.method(), route).unwrap_or(Access::Role(Role::Admin));
    // Probes poll health; they are neither limited nor, when open, asked for credentials.
    let role = match access {
        Access::Health if auth.health_open || !auth.is_enabled() => return Decision::Serve(None),
        Access::Open => None,
        Access::Health => Some((Role::Reader, Role::Reader)),
        Access::Role(role) => auth.is_enabled().then_some((role, role)),
        Access::Either(a, b) => auth.is_enabled().then_some((a, b)),
    };
    let identified = if auth.is_enabled() {
        identify(guard, request, route)
    } else {
        Ok(None)
    };
    let identity = identified.as_ref().ok().and_then(Option::as_ref);
    // Counted before a bad credential is refused, so guessing tokens is limited too.
    // Health that needs credentials is limited like any route, or it would be a free oracle
    // for guessing tokens.
    let anonymous;
    let caller = match identity {
        Some(identity) => Caller::Identified(&identity.name),
        None => {
            anonymous = address(request);
            Caller::Anonymous(&anonymous)
        }
    };
    if let Some(limiter) = &guard.limiter
        && let Err(wait) = limiter.check(caller)
    {
        return Decision::Refuse(identity.cloned(), too_many_requests(wait));
    }
    let Some(role) = role else {
        return Decision::Serve(None);
    };
    let identity = match identified {
        Ok(Some(identity)) => identity,
        Ok(None) => {
            return Decision::Refuse(
                None,
                unauthorized(
                    "credentials required: Authorization: Bearer <token> or a known client certificate",
                ),
            );
        }
        Err(reason) => return Decision::Refuse(None, unauthorized(&reason)),
    };
    if !identity.has(role.0) && !identity.has(role.1) {
        let roles = if role.0 == role.1 {
            role.0.name().to_string()
        } else {
            format!("{} or {}", role.0.name(), role.1.name())
        };
        let response = ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} {route}: {} does not hold the {roles} role",
                request.method(),
                identity.name,
            ),
        )
        .into_response();
        return Decision::Refuse(Some(identity), response);
    }
    Decision::Serve(Some(identity))
}

/// The middleware. It sits behind the live-migration filter, so a disabled live-migration
/// route answers 404 to anyone, and never tells an unauthenticated caller that it exists.
/// Every mutating call it sees, served or refused, leaves one audit record.
pub async fn authorize(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    // No matched route: the fallback answers 404 and reveals nothing.
    let Some(route) = request.extensions().get::<MatchedPath>().cloned() else {
        return next.run(request).await;
    };
    let method = request.method().clone();
    let audited = audit::is_mutating(&method);
    let object = if audited {
        audit::object_of(&mut request).await
    } else {
        String::new()
    };
    let (identity, response) = match check(&guard, &request, route.as_str()) {
        Decision::Serve(identity) => {
            if let Some(identity) = &identity {
                request
                    .extensions_mut()
                    .insert::<Identity>(identity.clone());
            }
            (identity, next.run(request).await)
        }
        Decision::Refuse(identity, response) if route.as_str().starts_with("/ui") => {
            let get = request.method() == Method::GET;
            let path = request
                .uri()
                .path_and_query()
                .map_or_else(|| "/ui/jobs".to_string(), |p| p.as_str().to_string());
            (
                identity,
                crate::api::console::refused(get, path, response).await,
            )
        }
        Decision::Refuse(identity, response) => (identity, response),
    };
    if !audited {
        return response;
    }
    audit::record(
        &guard.metrics,
        identity.as_ref(),
        &method,
        route.as_str(),
        object,
        response,
    )
    .await
}

/// Declares in the OpenAPI document how callers authenticate (a bearer token — opaque or a
/// JWT — or a client certificate; the empty requirement stands for a daemon without an `auth`
/// section) and the refusals every operation can answer, which no handler's own description
/// lists: 401, 403, 421, 429, and 415 where a body is read.
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{
        HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
    };
    use utoipa::openapi::{
        ContentBuilder, HeaderBuilder, Ref, ResponseBuilder, Type, schema::ObjectBuilder,
    };

    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("opaque token or JWT")
                .description(Some(
                    "`Authorization: Bearer <token>`: a token whose SHA-256 is in `auth.tokens` or `auth.tokens_file`, or a JWT checked against `auth.jwt`",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        "mutualTLS",
        SecurityScheme::MutualTls {
            description: Some(
                "A client certificate that chains to `server.tls.client_ca`, its names mapped to roles by `auth.certificates`".into(),
            ),
            extensions: None,
        },
    );
    let error = |description: &str| {
        ResponseBuilder::new().description(description).content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
    };
    let seconds = || {
        HeaderBuilder::new()
            .schema(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1)),
            )
            .description(Some("Seconds to wait before trying again"))
            .build()
    };
    let security = vec![
        SecurityRequirement::default(),
        SecurityRequirement::new("bearer", Vec::<String>::new()),
        SecurityRequirement::new("mutualTLS", Vec::<String>::new()),
    ];
    for (path, item) in doc.paths.paths.iter_mut() {
        let health = path.ends_with("__health");
        for op in crate::api::operations_mut(item) {
            let mut add = |code: &str, response: utoipa::openapi::Response| {
                op.responses
                    .responses
                    .entry(code.to_string())
                    .or_insert(response.into());
            };
            add(
                "401",
                error("Credentials are missing or not valid (when `auth` is configured; health only when `auth.health_open` is false)")
                    .header("WWW-Authenticate", HeaderBuilder::new().schema(ObjectBuilder::new().schema_type(Type::String)).build())
                    .build(),
            );
            add(
                "403",
                error("The caller does not hold the operation's role, or the request carries an `Origin` not in `server.allowed_origins`").build(),
            );
            add(
                "421",
                error("The `Host` is not a name of this daemon (`server.allowed_hosts`)").build(),
            );
            if !health {
                add(
                    "429",
                    error("Over the caller's `auth.rate_limit`")
                        .header("Retry-After", seconds())
                        .build(),
                );
            }
            if op.request_body.is_some() {
                add(
                    "415",
                    error("The body has no `Content-Type`, or one that is neither JSON nor YAML")
                        .build(),
                );
            }
            if !health {
                op.security = Some(security.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_matched_without_regard_to_case() {
        for value in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR  t0k "] {
            assert_eq!(bearer_token(value), Some("t0k"), "{value}");
        }
        for value in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "Token t0k"] {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }

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
        // A destination's peer token reads its source's status.
        assert_eq!(
            r(Method::GET, "/api/v1/live-migration/status"),
            Some(Access::Either(Role::Reader, Role::Peer))
        );
        assert_eq!(r(Method::GET, "/metrics"), Some(Access::Role(Role::Reader)));
        assert_eq!(
            r(Method::HEAD, "/metrics"),
            Some(Access::Role(Role::Reader))
        );
        assert_eq!(r(Method::HEAD, "/api/v1/__health"), Some(Access::Health));
    }
}
