//! Liveness of the daemon and of the local Cassandra node.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;

/// A health answer, in the shape Cassandra Sidecar uses.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthStatus {
    /// `OK` or `NOT_OK`.
    #[schema(example = "OK")]
    pub status: &'static str,
}

/// The daemon is up and serving.
#[utoipa::path(
    get,
    path = "/api/v1/__health",
    tag = "health",
    responses((status = 200, description = "The daemon is serving", body = HealthStatus))
)]
pub async fn daemon() -> Json<HealthStatus> {
    Json(HealthStatus { status: "OK" })
}

/// The local Cassandra node answers a CQL query.
#[utoipa::path(
    get,
    path = "/api/v1/cassandra/native/__health",
    tag = "health",
    responses(
        (status = 200, description = "The node answered a query on system.local", body = HealthStatus),
        (status = 503, description = "The node did not answer within cassandra.health_check_timeout", body = HealthStatus),
    )
)]
pub async fn cassandra_native(State(state): State<AppState>) -> (StatusCode, Json<HealthStatus>) {
    node_health(&state).await
}

/// The local Cassandra node answers a CQL query: the Sidecar's older route, which its clients
/// (Cassandra Analytics among them) still call first.
#[utoipa::path(
    get,
    path = "/api/v1/cassandra/__health",
    tag = "health",
    responses(
        (status = 200, description = "The node answered a query on system.local", body = HealthStatus),
        (status = 503, description = "The node did not answer within cassandra.health_check_timeout", body = HealthStatus),
    )
)]
pub async fn cassandra(State(state): State<AppState>) -> (StatusCode, Json<HealthStatus>) {
    node_health(&state).await
}

async fn node_health(state: &AppState) -> (StatusCode, Json<HealthStatus>) {
    match state.node.check().await {
        Ok(()) => (StatusCode::OK, Json(HealthStatus { status: "OK" })),
        Err(e) => {
            // Debug, not warn: dashboards poll this, and the 503 already tells them.
            tracing::debug!(error = %e, "local Cassandra node is not healthy");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(HealthStatus { status: "NOT_OK" }),
            )
        }
    }
}
