//! The migration status of this node, and the runtime switch of the routes.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::body::Payload;
use crate::api::error::{ApiError, ErrorBody};
use crate::livemigration::Status;

/// The migration status of this node: `NOT_COMPLETED`, or `COMPLETED` with its `endTime`.
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 404, body = ErrorBody))
)]
pub async fn status(State(state): State<AppState>) -> Json<Status> {
    Json(state.live.status())
}

/// Declares the migration complete (on a source: no more files are served). A second POST is
/// refused with 400.
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 400, description = "Already COMPLETED", body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn complete(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    Ok(Json(state.live.complete()?))
}

/// Sets the status back to `NOT_COMPLETED`.
#[utoipa::path(
    delete,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 404, body = ErrorBody))
)]
pub async fn reset(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    Ok(Json(state.live.reset()?))
}

/// Live migration on this node, as the admin route shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminView {
    /// Whether the live-migration routes answer.
    pub enabled: bool,
    /// `source`, `destination` or `none` (from `live_migration.migration_map`).
    pub role: String,
    /// The peer daemon (`host:port`), for a source or a destination.
    pub peer: Option<String>,
}

/// A switch of the live-migration routes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminChange {
    /// On or off.
    pub enabled: bool,
}

fn admin_view(state: &AppState) -> AdminView {
    let (role, peer) = state.live.role_and_peer();
    AdminView {
        enabled: state.live.enabled(),
        role: role.into(),
        peer: peer.map(str::to_string),
    }
}

/// Whether live migration is on, and this node's role.
#[utoipa::path(
    get,
    path = "/api/v1/admin/live-migration",
    tag = "live-migration",
    responses((status = 200, body = AdminView))
)]
pub async fn admin(State(state): State<AppState>) -> Json<AdminView> {
    Json(admin_view(&state))
}

/// Switches the live-migration routes on or off at runtime, without a restart; the choice is
/// kept in the state directory and wins over `live_migration.enabled`. (An admin call: the
/// security layer guards it.)
#[utoipa::path(
    put,
    path = "/api/v1/admin/live-migration",
    tag = "live-migration",
    request_body = AdminChange,
    responses((status = 200, body = AdminView), (status = 400, body = ErrorBody))
)]
pub async fn admin_set(
    State(state): State<AppState>,
    Payload(change): Payload<AdminChange>,
) -> Result<Json<AdminView>, ApiError> {
    state.live.set_enabled(change.enabled)?;
    tracing::info!(enabled = change.enabled, "live migration switched");
    Ok(Json(admin_view(&state)))
}
