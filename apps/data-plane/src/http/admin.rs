//! `GET/PUT /v1/admin/settings`: run-time settings, admins only. A change is
//! stored in PostgreSQL and every replica reads it on its next request.

use axum::extract::State;
use data_plane_registry::Settings;
use data_plane_store::Scope;
use data_plane_store::identity::Permission;
use serde_json::{Map, Value};

use super::ApiError;
use super::extract::Json;
use crate::auth::Caller;
use crate::state::AppState;

fn require_admin(caller: &Caller) -> Result<(), ApiError> {
    if caller.permission < Permission::Admin {
        return Err(ApiError::forbidden(
            "settings can be read and changed by admins only",
        ));
    }
    Ok(())
}

/// `GET /v1/admin/settings`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Settings>, ApiError> {
    require_admin(&caller)?;
    Ok(Json(state.settings().await?))
}

/// `PUT /v1/admin/settings`: any subset of the settings; the rest keep
/// their values. Unknown keys and wrong types are refused, naming them.
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Json(changes): Json<Map<String, Value>>,
) -> Result<Json<Settings>, ApiError> {
    require_admin(&caller)?;
    let updated = state
        .settings()
        .await?
        .apply(&changes)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    if let Some(Value::Object(tools)) = changes.get("tool_rate_limits") {
        for name in tools.keys() {
            if state.registry.get(name).is_none_or(|t| t.name != *name) {
                return Err(ApiError::bad_request(format!(
                    "tool_rate_limits names {name:?}, which is not a tool's name"
                )));
            }
        }
    }
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    data_plane_store::settings::store(
        &mut tx,
        &changes.into_iter().collect(),
        Some(caller.user_id),
    )
    .await?;
    tx.commit()
        .await
        .map_err(data_plane_store::StoreError::from)?;
    tracing::info!(user = %caller.user_id, settings = ?updated, "settings changed");
    Ok(Json(updated))
}
