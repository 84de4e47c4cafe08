//! The HTTP edge: one route table, error translation, middleware. Everything below `api`
//! knows nothing about HTTP.

mod audit;
mod auth;
pub mod body;
mod cassandra;
pub mod console;
mod diagnostics;
pub mod error;
pub mod events;
mod health;
mod hosts;
pub mod jobs;
pub mod live_migration;
mod metrics;
mod migrations;
pub mod snapshots;
pub mod uploads;
mod validations;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Request, Response, StatusCode};
use tower::ServiceBuilder;
use tower_http::compression::predicate::{Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::Span;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::cassandra::LocalNode;
use crate::config::DaemonConfig;
use crate::jobs::JobRegistry;
use crate::metrics::Metrics;

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The daemon's configuration.
    pub config: Arc<DaemonConfig>,
    /// Every job.
    pub jobs: JobRegistry,
    /// The local Cassandra node.
    pub node: Arc<LocalNode>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Live instance migration.
    pub live: Arc<crate::livemigration::LiveMigration>,
    /// Open progress streams.
    pub events: Arc<events::EventStreams>,
    /// Signed-in console sessions.
    pub sessions: Arc<console::Sessions>,
    /// Who callers are: bearer tokens, JWTs, client certificates.
    pub auth: Arc<crate::auth::Authenticator>,
    /// SSTable uploads and imports into the local node.
    pub uploads: Arc<crate::uploads::Uploads>,
    /// Snapshots of the local node's tables, for a bulk reader.
    pub snapshots: Arc<crate::snapshots::Snapshots>,
}

impl AppState {
    /// What job kinds need to resume jobs.
    pub fn services(&self) -> crate::jobs::kind::Services {
        let mut lent = http::Extensions::new();
        lent.insert(self.live.clone());
        crate::jobs::kind::Services {
            jobs: self.jobs.clone(),
            state_dir: self.config.state_dir.clone(),
            node: self.node.clone(),
            lent,
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "drover",
        description = "Moves data for Cassandra/ScyllaDB and DynamoDB operators: resumable migration jobs and live instance migration. Every error response is `{\"status\", \"code\", \"message\"}`.",
        license(name = "Apache-2.0")
    ),
    tags(
        (name = "health", description = "Liveness of the daemon and of the local node"),
        (name = "cassandra", description = "Cassandra Sidecar's cluster-metadata routes: the local node's settings, ring, token-range replicas and schema, and the time (what a Sidecar client such as Cassandra Analytics asks before it uses the bulk routes)"),
        (name = "jobs", description = "Long-running work of every kind"),
        (name = "migrations", description = "Table copies in ScyllaDB Migrator's job format"),
        (name = "validations", description = "Proof that a migration's target holds exactly its source's rows"),
        (name = "live-migration", description = "Cassandra Sidecar's live instance migration: a destination pulls a node's files from its source"),
        (name = "snapshots", description = "Cassandra Sidecar's snapshot routes: snapshots of the local node's tables and their SSTables (a bulk reader's source side)"),
        (name = "uploads", description = "Cassandra Sidecar's SSTable uploads and imports into the local node (a bulk writer's target side)"),
        (name = "diagnostics", description = "Checks of a deployment that touch no data"),
        (name = "metrics", description = "Prometheus metrics"),
    ),
    components(schemas(error::ErrorBody, crate::livemigration::batch::BlockDigests, events::JobEvent, events::JobEventMessage))
)]
struct ApiDoc;

/// The route table. Each entry carries its OpenAPI description, so the document cannot drift
/// from the routes that are served.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::daemon))
        .routes(routes!(health::cassandra_native))
        .routes(routes!(health::cassandra))
        .routes(routes!(cassandra::settings))
        .routes(routes!(cassandra::schema))
        .routes(routes!(cassandra::token_range_replicas))
        .routes(routes!(cassandra::ring))
        .routes(routes!(cassandra::ring_keyspace))
        .routes(routes!(cassandra::time_skew))
        .routes(routes!(jobs::list))
        .routes(routes!(jobs::get, jobs::delete))
        .routes(routes!(jobs::cancel))
        .routes(routes!(events::events))
        .routes(routes!(migrations::submit, migrations::list))
        .routes(routes!(migrations::get))
        .routes(routes!(migrations::cancel))
        .routes(routes!(migrations::savepoints))
        .routes(routes!(migrations::resume))
        .routes(routes!(validations::submit, validations::list))
        .routes(routes!(validations::get))
        .routes(routes!(validations::report))
        .routes(routes!(validations::cancel))
        .routes(routes!(live_migration::files::list))
        .routes(routes!(live_migration::files::file))
        .routes(routes!(live_migration::files::files_digest))
        .routes(routes!(live_migration::files::files_batch))
        .routes(routes!(
            live_migration::status::status,
            live_migration::status::complete,
            live_migration::status::reset
        ))
        .routes(routes!(
            live_migration::status::admin,
            live_migration::status::admin_set
        ))
        .routes(routes!(
            live_migration::tasks::start_copy,
            live_migration::tasks::list_copies
        ))
        .routes(routes!(
            live_migration::tasks::get_copy,
            live_migration::tasks::cancel_copy
        ))
        .routes(routes!(
            live_migration::tasks::start_verify,
            live_migration::tasks::list_verifies
        ))
        .routes(routes!(
            live_migration::tasks::get_verify,
            live_migration::tasks::cancel_verify
        ))
        .routes(routes!(uploads::upload))
        .routes(routes!(uploads::import))
        .routes(routes!(uploads::delete))
        .routes(routes!(
            snapshots::create,
            snapshots::list,
            snapshots::clear
        ))
        .routes(routes!(snapshots::component))
        .routes(routes!(diagnostics::submit))
        .routes(routes!(metrics::render))
}

/// The OpenAPI document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = routes().split_for_parts().1;
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    // axum's catch-all `{*path}` is an ordinary `{path}` parameter in OpenAPI.
    doc.paths.paths = std::mem::take(&mut doc.paths.paths)
        .into_iter()
        .map(|(path, item)| (path.replace("{*", "{"), item))
        .collect();
    auth::document(&mut doc);
    // utoipa names an operation after its handler, and several modules have a `list` or a
    // `get`; OpenAPI requires operation ids to be unique (client generators key on them), so
    // each is qualified by its tag, the resource the handler belongs to.
    for item in doc.paths.paths.values_mut() {
        for op in operations_mut(item) {
            if let (Some(id), Some(tag)) =
                (&op.operation_id, op.tags.as_ref().and_then(|t| t.first()))
            {
                op.operation_id = Some(format!("{}_{id}", tag.replace('-', "_")));
            }
        }
    }
    doc
}

/// The operations of one path of the document, to amend them alike.
pub(crate) fn operations_mut(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
    ]
    .into_iter()
    .flatten()
}

/// The OpenAPI document as committed in `openapi/drover.yaml`.
pub fn openapi_yaml() -> String {
    let header = "# Generated by `drover openapi` from the route table; do not edit by hand.\n";
    let body = yaml_serde::to_string(&openapi()).expect("the OpenAPI document serializes");
    format!("{header}{body}")
}

/// The longest client-chosen `x-request-id` kept; it is logged with every line of the request.
const MAX_REQUEST_ID: usize = 128;

/// Removes a client's `x-request-id` that is too long or not visible ASCII, so the id layer
/// generates one instead: a client must not choose what fills the log (a 300 KB id was logged
/// whole on every line).
async fn drop_unfit_request_id(mut req: Request<axum::body::Body>) -> Request<axum::body::Body> {
    let fit = |v: &axum::http::HeaderValue| {
        let b = v.as_bytes();
        !b.is_empty() && b.len() <= MAX_REQUEST_ID && b.iter().all(|c| c.is_ascii_graphic())
    };
    if req.headers().get("x-request-id").is_some_and(|v| !fit(v)) {
        req.headers_mut().remove("x-request-id");
    }
    req
}

/// Whether an answer is JSON (the only answers compressed).
fn json_only(
    _: StatusCode,
    _: axum::http::Version,
    headers: &axum::http::HeaderMap,
    _: &axum::http::Extensions,
) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"))
}

/// `server.request_timeout`: a request whose answer is not ready in time gets 408. Not an
/// SSTable component's upload, whose body may take longer however fast the daemon is (a
/// 15 MB component at 200 KB/s could never succeed): `sstable_uploads.idle_timeout` bounds
/// the time between its bytes instead.
async fn request_timeout(
    axum::extract::State(limit): axum::extract::State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if uploads::is_component_upload(&request) {
        return next.run(request).await;
    }
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => StatusCode::REQUEST_TIMEOUT.into_response(),
    }
}

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    let config = state.config.server.clone();
    let (routes, _) = routes().split_for_parts();
    let body_limit = usize::try_from(config.request_body_limit.as_u64()).unwrap_or(usize::MAX);
    let middleware = ServiceBuilder::new()
        .layer(axum::middleware::map_request(drop_unfit_request_id))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request<_>| {
                    let id = req
                        .headers()
                        .get("x-request-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    tracing::info_span!("request", method = metrics::method_label(req.method()), path = %req.uri().path(), request_id = %id)
                })
                .on_request(())
                .on_response(|res: &Response<_>, latency: Duration, _: &Span| {
                    tracing::info!(status = res.status().as_u16(), latency_ms = latency.as_secs_f64() * 1e3, "access");
                }),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        // JSON answers (listings above all: a node's listing is hundreds of bytes per file,
        // and crosses a distant link in a few round trips less when compressed) are gzipped
        // for clients that ask; file bytes never are (SSTables are compressed already, and a
        // `Range` means bytes of the file).
        .layer(
            CompressionLayer::new()
                .gzip(true)
                .quality(CompressionLevel::Fastest)
                .compress_when(SizeAbove::new(1024).and(json_only)),
        )
        .layer(axum::middleware::map_response(error::json_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(hosts::HostPolicy::new(&state.config)),
            hosts::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            live_migration::filter,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            uploads::filter,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            snapshots::filter,
        ))
        .layer(axum::middleware::from_fn_with_state(
            auth::Guard::new(&state),
            auth::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            body::BodyBudget::new(config.request_body_budget.as_u64(), body_limit as u64),
            body::budget,
        ))
        .layer(axum::middleware::from_fn(body::require_media_type))
        .layer(axum::middleware::from_fn_with_state(
            config.request_timeout,
            request_timeout,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::Extension(body::BodyLimit(body_limit)));
    let routes = if state.config.server.console.enabled {
        routes.merge(console::routes())
    } else {
        routes
    };
    routes
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .with_state(state)
        .layer(middleware)
}
