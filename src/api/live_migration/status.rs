//! The migration status of this node, and the runtime switch of the routes.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::body::Payload;
use crate::api::error::{ApiError, ErrorBody};
use crate::livemigration::Status;

/// The migration status of this node: `NOT_COMPLETED`, or `COMPLETED` with its `endTime`
/// (milliseconds since the epoch). On a source or a destination; 404 once the node has left
/// `migration_map` (as Sidecar's code answers).
#[utoipa::path(
    get,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 404, body = ErrorBody))
)]
pub async fn status(State(state): State<AppState>) -> Json<Status> {
    Json(state.live.status())
}

/// Declares the migration complete (on a source: no more files are served, 400). A second
/// POST is refused with 400 "Live migration marked as COMPLETED earlier.".
#[utoipa::path(
    post,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses((status = 200, body = Status), (status = 400, description = "Already COMPLETED", body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn complete(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    Ok(Json(state.live.complete()?))
}

/// Sidecar's `{"status": "OK"}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OkBody {
    /// `OK`.
    pub status: String,
}

/// Clears the status (back to `NOT_COMPLETED`), Sidecar's last step of a migration: only on
/// a node that is no longer in `live_migration.migration_map` (403 otherwise, checked
/// first; the node's routes need not be on), and only when the status is `COMPLETED` (400
/// otherwise).
#[utoipa::path(
    delete,
    path = "/api/v1/live-migration/status",
    tag = "live-migration",
    responses(
        (status = 200, body = OkBody),
        (status = 400, description = "The status is not COMPLETED", body = ErrorBody),
        (status = 403, description = "This node is still in live_migration.migration_map; or the caller does not hold the operation's role, or the request carries an `Origin` not in `server.allowed_origins`", body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn reset(State(state): State<AppState>) -> Result<Json<OkBody>, ApiError> {
    state.live.clear()?;
    Ok(Json(OkBody {
        status: "OK".into(),
    }))
}

/// Live migration on this node, as the admin route shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminView {
    /// Whether the live-migration routes answer (for a node with a role).
    pub enabled: bool,
    /// Where `enabled` comes from: `admin` (this route was used; it wins), `config`
    /// (`live_migration.enabled`) or `default` (neither: on, as Sidecar is for a node in
    /// its map).
    pub set_by: String,
    /// `source`, `destination` or `none` (from `live_migration.migration_map`).
    pub role: String,
    /// The peer daemon (`host:port`), for a source or a destination.
    pub peer: Option<String>,
    /// When the routes close by themselves (set by a switch with `until` or `for`); in the
    /// past once they have closed; null when the switch has no expiry.
    pub until: Option<DateTime<Utc>>,
}

/// A switch of the live-migration routes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminChange {
    /// On or off.
    pub enabled: bool,
    /// With `enabled: true`: close the routes by themselves at this time (RFC 3339, in the
    /// future, at most 7 days ahead).
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// With `enabled: true`: close the routes by themselves after this long (`30m`, `2h`,
    /// `1day`; at most 7 days). Not together with `until`.
    #[serde(default, rename = "for", with = "humantime_serde")]
    #[schema(value_type = Option<String>, example = "30m")]
    pub for_: Option<std::time::Duration>,
}

impl AdminChange {
    /// The expiry the change asks for.
    fn expiry(&self) -> Result<Option<DateTime<Utc>>, ApiError> {
        match (self.until, self.for_) {
            (Some(_), Some(_)) => Err(ApiError::bad_request(
                "body: give either until or for, not both",
            )),
            (until, None) => Ok(until),
            (None, Some(d)) => {
                // Beyond the bound anyway; kept from overflowing chrono.
                let d = d.min(crate::livemigration::MAX_SWITCH_EXPIRY * 2);
                let d = chrono::Duration::from_std(d).expect("two weeks fit");
                Ok(Some(Utc::now() + d))
            }
        }
    }
}

fn admin_view(state: &AppState) -> AdminView {
    let (role, peer) = state.live.role_and_peer();
    AdminView {
        enabled: state.live.enabled(),
        set_by: state.live.switch_origin().into(),
        role: role.into(),
        peer: peer.map(str::to_string),
        until: state.live.enabled_until(),
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
/// kept in the state directory and wins over `live_migration.enabled`. Switched on with
/// `until` (RFC 3339) or `for` (a duration such as `30m`), the routes close by themselves at
/// that time, also across restarts; at most 7 days ahead. (An admin call: the security
/// layer guards it.)
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
    let until = change.expiry()?;
    state.live.switch(change.enabled, until)?;
    tracing::info!(
        enabled = change.enabled,
        until = until.map(|u| u.to_rfc3339()),
        "live migration switched"
    );
    Ok(Json(admin_view(&state)))
}
